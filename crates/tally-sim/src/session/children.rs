//! `--trace-children=yes`: a program run with every process it starts
//! followed, one profile per process, as Valgrind's option does.
//!
//! Under qemu-user a guest `fork` forks QEMU, the plugin included. The
//! plugin marks the fork in the parent's stream (a fork record with a
//! token), and the child makes a stream, buffer file and free-slot pipe
//! of its own and hands them to tally over the control socket
//! ([`crate::trace::control`]) with the same token; its stream goes on
//! from the parent's state at the fork record. So tally clones the
//! parent's simulation there ([`Simulation::fork`]) and feeds the child's
//! stream to the clone: the child's profile holds what the parent ran
//! before the fork, as Valgrind's does. On `execve` the plugin runs QEMU
//! with itself on the new program instead, which announces itself with a
//! fresh stream; the old image's stream ends right after an execve record
//! and is dropped (Valgrind writes no profile for an image that exec'd).
//!
//! Each stream is fed in a thread of its own, with its own engine; the
//! session ends when every traced process has closed the control socket
//! and every stream has ended.

use super::*;
use crate::feed::Simulation;
use crate::trace::control::{self, Header};
use std::collections::HashMap;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::mpsc::{Sender, channel};

/// What a process's stream needs: the stream, the buffer file, the
/// free-slot pipe's writing end.
struct Source {
    stream: std::io::PipeReader,
    buffers: std::fs::File,
    free: std::io::PipeWriter,
}

/// What the threads tell the session.
enum Event {
    /// A process announced itself on the control socket.
    Hello(Header, Vec<u8>, Option<Source>),
    /// A stream reached a fork record: the child's starting state.
    Forked {
        parent: u32,
        token: u32,
        sim: Box<Simulation>,
        space: AddressSpace,
        cmd: String,
    },
    /// A stream ended.
    Done {
        pid: u32,
        cmd: String,
        result: Result<Finished, Error>,
    },
    /// Every traced process has closed the control socket.
    Closed,
}

/// A stream's end.
struct Finished {
    output: Output,
    space: AddressSpace,
    ending: Ending,
    /// The process exec'd another program: no profile.
    replaced: bool,
}

/// What a run of a program and its children produced: one run per
/// process (the program's first), and the execs not followed.
pub struct Family {
    /// One run per process, the first process's first.
    pub runs: Vec<Run>,
    /// Programs exec'd that could not be followed.
    pub unfollowed: Vec<String>,
}

/// Runs a program under QEMU with the plugin and follows every process it
/// forks or execs, each simulated as it runs.
pub fn native_children(
    n: &Native<'_>,
    machines: Vec<Hierarchy>,
    opts: EngineOptions,
) -> Result<Family, Error> {
    let name = n.command.first().map_or("", String::as_str);
    let prog = launch::which(name).ok_or_else(|| Error::NoProgram {
        program: name.to_string(),
    })?;
    let (emulator, x86) = launch::emulator_for(&prog)?;
    let qemu = match n.qemu {
        Some(q) => q.to_path_buf(),
        None => launch::which(emulator).ok_or(Error::NoEmulator { name: emulator })?,
    };
    let plugin = launch::find_plugin(n.plugin)?;
    let (reader, writer) = std::io::pipe().map_err(Error::Pipe)?;
    launch::widen_pipe(reader.as_raw_fd());
    let buffers = pool::shared_buffers().map_err(Error::Buffers)?;
    let (free_r, free_w) = pool::free_slots().map_err(Error::Pipe)?;
    let (notes_r, notes_w) = std::io::pipe().map_err(Error::Pipe)?;
    let (ctl, ctl_plugin) = control_socket().map_err(Error::Pipe)?;
    let mem = if n.accesses { "on" } else { "off" };
    let d1 = match n.d1 {
        Some(c) if n.accesses => format!(",{}", launch::plugin_d1_arg(c, n.count_hits)),
        _ => String::new(),
    };
    let mut child = launch::spawn(
        &qemu,
        &plugin,
        &format!(",mem={mem}{d1}"),
        &prog,
        n.command.get(1..).unwrap_or_default(),
        launch::Descriptors {
            stream: writer.as_raw_fd(),
            buffers: buffers.as_raw_fd(),
            free: free_r.as_raw_fd(),
            notes: notes_w.as_raw_fd(),
            ctl: Some(ctl_plugin.as_raw_fd()),
        },
    )?;
    drop((writer, free_r, notes_w, ctl_plugin));
    let top = child.id();
    let forwarding = tally_process::forward_to(top);
    let (tx, rx) = channel();
    let cmd = n.command.join(" ");
    let new_sim = || Simulation::new(Engine::new(machines.clone(), qemu_options(opts)), x86);
    let start = |pid: u32, cmd: String, src: Source, sim: Simulation, space: AddressSpace| {
        let tx = tx.clone();
        std::thread::spawn(move || follow(pid, cmd, src, sim, space, tx));
    };
    start(
        top,
        cmd,
        Source {
            stream: reader,
            buffers,
            free: free_w,
        },
        new_sim(),
        AddressSpace::new(),
    );
    {
        let tx = tx.clone();
        std::thread::spawn(move || listen(ctl, tx));
    }
    let mut running = 1usize;
    let mut open = true;
    // Forks seen from one side only, by (parent, token).
    let mut states: HashMap<(u32, u32), (Box<Simulation>, AddressSpace, String)> = HashMap::new();
    let mut sources: HashMap<(u32, u32), (u32, Source)> = HashMap::new();
    let mut done: Vec<(u32, String, Finished)> = Vec::new();
    let mut unfollowed = Vec::new();
    let mut failed = None;
    while running > 0 || open {
        let Ok(ev) = rx.recv() else { break };
        match ev {
            Event::Hello(h, payload, src) => match (h.kind, src) {
                (control::FORK, Some(src)) => {
                    forwarding.also(h.pid);
                    let key = (h.parent, h.token);
                    if let Some((sim, space, cmd)) = states.remove(&key) {
                        running += 1;
                        start(h.pid, cmd, src, *sim, space);
                    } else {
                        sources.insert(key, (h.pid, src));
                    }
                }
                (control::EXEC, Some(src)) => {
                    forwarding.also(h.pid);
                    let cmd = payload
                        .split(|&b| b == 0)
                        .map(String::from_utf8_lossy)
                        .collect::<Vec<_>>()
                        .join(" ");
                    running += 1;
                    start(h.pid, cmd, src, new_sim(), AddressSpace::new());
                }
                (control::UNFOLLOWED, _) => {
                    unfollowed.push(String::from_utf8_lossy(&payload).into_owned());
                }
                _ => {}
            },
            Event::Forked {
                parent,
                token,
                sim,
                space,
                cmd,
            } => {
                let key = (parent, token);
                if let Some((pid, src)) = sources.remove(&key) {
                    running += 1;
                    start(pid, cmd, src, *sim, space);
                } else {
                    states.insert(key, (sim, space, cmd));
                }
            }
            Event::Done { pid, cmd, result } => {
                running -= 1;
                // A child announced for a fork this stream never reached
                // is not followed (its stream closes: it stops recording).
                sources.retain(|&(parent, _), _| parent != pid);
                match result {
                    Ok(f) => {
                        if !f.replaced {
                            forwarding.forget(pid);
                            done.push((pid, cmd, f));
                        }
                    }
                    Err(e) => {
                        failed.get_or_insert(e);
                    }
                }
            }
            Event::Closed => open = false,
        }
    }
    drop(tx);
    let status = child.wait().map_err(Error::Wait)?;
    let received = forwarding.received();
    drop(forwarding);
    let notes = read_notes(notes_r);
    if let Some(e) = failed {
        return Err(e);
    }
    let by = match received {
        Some(r) => format!(" (tally received signal {r} and passed it on)"),
        None => String::new(),
    };
    // The first process's last image is the one whose status QEMU gave.
    let last_top = done.iter().rposition(|(pid, _, _)| *pid == top);
    let mut runs = Vec::new();
    for (k, (pid, cmd, f)) in done.into_iter().enumerate() {
        let mut ending = f.ending;
        let mut run_status = None;
        if Some(k) == last_top {
            run_status = Some(status);
            use std::os::unix::process::ExitStatusExt;
            if let Some(sig) = status.signal() {
                ending = Ending::Incomplete(format!("the program was killed by signal {sig}{by}"));
            }
        } else if let Ending::Incomplete(why) = &ending {
            ending = Ending::Incomplete(format!("{why}{by}"));
        }
        runs.push(Run {
            output: f.output,
            space: f.space,
            cmd,
            pid,
            ending,
            status: run_status,
            unfollowed: Unfollowed::default(),
        });
    }
    // The first process first, then the others by pid.
    runs.sort_by_key(|r| (r.pid != top, r.pid));
    if let Some(r) = runs.first_mut() {
        r.unfollowed = notes;
    }
    Ok(Family { runs, unfollowed })
}

/// Feeds one process's stream, from `sim` and `space`, to its end;
/// forks go to the session as they come.
fn follow(
    pid: u32,
    cmd: String,
    src: Source,
    mut sim: Simulation,
    mut space: AddressSpace,
    tx: Sender<Event>,
) {
    let name = PathBuf::from(format!("<qemu plugin, process {pid}>"));
    let err = |error| Error::Stream {
        name: name.clone(),
        error: Box::new(error),
    };
    let result = (|| {
        let mut pool = Pool::new(&src.buffers, src.free).map_err(Error::Map)?;
        let input = pool::WithTail::new(src.stream, &src.buffers);
        let mut r = TraceReader::new(input).map_err(err)?;
        let mut host = StreamHost {
            space: &mut space,
            pool: Some(&mut pool),
        };
        let fed = loop {
            match sim.feed_reader(&mut r, &mut host).map_err(err)? {
                feed::Ending::Forked { token } => {
                    let _ = tx.send(Event::Forked {
                        parent: pid,
                        token,
                        sim: Box::new(sim.fork()),
                        space: host.space.clone(),
                        cmd: cmd.clone(),
                    });
                }
                other => break other,
            }
        };
        let replaced = sim.replaced();
        let ending = match fed {
            feed::Ending::Complete | feed::Ending::Forked { .. } => Ending::Complete,
            feed::Ending::Stopped => {
                Ending::Incomplete("the trace ends before the program's exit".into())
            }
            feed::Ending::Cut { offset } => Ending::Incomplete(format!(
                "{}: the trace is cut off inside a record at byte {offset}",
                name.display()
            )),
        };
        let output = sim.finish(&host).map_err(err)?;
        Ok(Finished {
            output,
            space,
            ending,
            replaced,
        })
    })();
    let _ = tx.send(Event::Done { pid, cmd, result });
}

/// The control socket: tally's end and the plugin's (both closed on
/// exec; the plugin's is put in place for QEMU by [`launch::spawn`]).
fn control_socket() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair with a valid array of two descriptors.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two new descriptors, owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads the control socket until every traced process has closed it.
fn listen(ctl: OwnedFd, tx: Sender<Event>) {
    loop {
        match receive(&ctl) {
            Ok(Some((h, payload, fds))) => {
                let src = match <[OwnedFd; 3]>::try_from(fds) {
                    Ok([stream, buffers, free]) => Some(Source {
                        stream: std::io::PipeReader::from(stream),
                        buffers: std::fs::File::from(buffers),
                        free: std::io::PipeWriter::from(free),
                    }),
                    Err(_) => None,
                };
                if tx.send(Event::Hello(h, payload, src)).is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err(_) => break,
        }
    }
    let _ = tx.send(Event::Closed);
}

/// One message of the control socket: its header, payload and the
/// descriptors it carries; `Ok(None)` for a message too short to be one;
/// an error at the end.
#[allow(clippy::type_complexity)]
fn receive(ctl: &OwnedFd) -> std::io::Result<Option<(Header, Vec<u8>, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; control::HEADER + control::MAX_PAYLOAD];
    // Room for up to 8 descriptors.
    let mut cmsg = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: a zeroed msghdr is valid; the buffers it points to live
    // across the call, and the control data is read as the kernel wrote
    // it (CMSG macros over the buffer given).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cmsg.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&cmsg);
        let n = loop {
            let n = libc::recvmsg(ctl.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                break n as usize;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let mut fds = Vec::new();
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const i32;
                let len = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for k in 0..len / 4 {
                    fds.push(OwnedFd::from_raw_fd(data.add(k).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
        let Some(h) = Header::decode(&buf[..n]) else {
            return Ok(None);
        };
        buf.truncate(n);
        buf.drain(..control::HEADER);
        Ok(Some((h, buf, fds)))
    }
}
