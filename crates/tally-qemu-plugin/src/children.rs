//! Following the processes the guest starts (`ctl=FD,children=on`, from
//! `tally sim --trace-children=yes`); the protocol is
//! `tally_sim::trace::control`.
//!
//! A guest `fork` forks QEMU with the plugin in it. Before the fork every
//! buffer is handed on and a fork record with a new token written, so the
//! parent's stream holds all that ran before it; in the child, a new
//! stream, a copy of the buffer file (the D1 hit counts so far included)
//! mapped where the old one was, and a new free-slot pipe replace the
//! parent's, and go to tally with the token. The child's records then go
//! on from the state both had at the fork.
//!
//! QEMU 7.2 performs a guest `execve` natively, without QEMU. So at an
//! `execve` of a program for the same machine (or a `#!` script whose
//! interpreter is one) the plugin writes an execve record and runs QEMU
//! itself on the new program, with the plugin and the control socket; that
//! plugin announces the new image with a stream of its own. If that cannot
//! be done the exec goes on natively and tally is told it was not
//! followed.

use crate::buffers::{self, SHM_BASE, SHM_FD, SHM_SIZE, SILENT};
use crate::filter::{FILTER, FILTER_MODE, FILTERING};
use std::ffi::{CString, c_void};
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU16, AtomicU32, AtomicU64, Ordering};
use tally_sim::trace::control::{self, Header};
use tally_sim::trace::{T_EXECVE, T_FORK, shared};

/// The control socket (-1: children are not followed).
pub(crate) static CTL_FD: AtomicI32 = AtomicI32::new(-1);
/// Forks so far in this process: the token of the last.
static TOKEN: AtomicU32 = AtomicU32::new(0);
/// The process that forks (read in the child).
static FORKING: AtomicU32 = AtomicU32::new(0);
/// Host address minus guest address (user mode: one offset for all),
/// known once a block has been translated.
pub(crate) static GUEST_BASE: AtomicU64 = AtomicU64::new(0);
pub(crate) static BASE_KNOWN: AtomicBool = AtomicBool::new(false);
/// The ELF machine of the guest, if exec'd programs can be followed (64-bit
/// guests); 0 otherwise.
pub(crate) static MACHINE: AtomicU16 = AtomicU16::new(0);
/// The plugin's arguments that a process it execs gets too (the D1
/// filter's, `mem=`).
pub(crate) static PASSED_ON: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The ELF machine of a 64-bit QEMU target that execs can be followed on.
pub(crate) fn machine_of(target: &[u8]) -> u16 {
    match target {
        b"x86_64" => 62,
        b"aarch64" => 183,
        b"riscv64" => 243,
        _ => 0,
    }
}

/// Whether children are followed.
pub(crate) fn following() -> bool {
    CTL_FD.load(Ordering::Relaxed) >= 0
}

/// Sends a message on the control socket with descriptors `fds`.
fn send(h: Header, payload: &[u8], fds: &[i32]) -> bool {
    let fd = CTL_FD.load(Ordering::Relaxed);
    if fd < 0 {
        return false;
    }
    let mut buf = h.encode().to_vec();
    buf.extend_from_slice(&payload[..payload.len().min(control::MAX_PAYLOAD)]);
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut cmsg = [0u64; 8];
    // SAFETY: a zeroed msghdr is valid; the buffers it points to live
    // across the call; the control data is laid out with the CMSG macros
    // inside `cmsg`, which has room for up to 8 descriptors.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        if !fds.is_empty() {
            let len = std::mem::size_of_val(fds) as u32;
            msg.msg_control = cmsg.as_mut_ptr().cast();
            msg.msg_controllen = libc::CMSG_SPACE(len) as usize;
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(len) as usize;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(c) as *mut i32, fds.len());
        }
        libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) == buf.len() as isize
    }
}

/// A pipe, both ends closed on exec.
fn pipe() -> std::io::Result<(File, File)> {
    let mut p = [0; 2];
    // SAFETY: pipe2 with a valid array of two descriptors.
    if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two new descriptors, owned by nothing else.
    Ok(unsafe { (File::from_raw_fd(p[0]), File::from_raw_fd(p[1])) })
}

/// A new, empty buffer file of `size` bytes.
fn memfd(size: u64) -> std::io::Result<File> {
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"tally-sim-buffers".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor, owned by nothing else.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size)?;
    Ok(f)
}

/// A pipe of free slots holding every slot of `slots` but `held`: its
/// reading end and writing end.
fn free_pipe(slots: u32, held: &[u32]) -> std::io::Result<(File, File)> {
    let (r, mut w) = pipe()?;
    for k in (0..slots).filter(|k| !held.contains(k)) {
        w.write_all(&k.to_le_bytes())?;
    }
    Ok((r, w))
}

/// The guest is about to fork (`pthread_atfork`'s prepare handler).
pub(crate) extern "C" fn before_fork() {
    if !following() || SILENT.load(Ordering::Relaxed) {
        return;
    }
    if FILTER_MODE.load(Ordering::Relaxed) == FILTERING {
        // SAFETY: see `filter::filter`; QEMU has stopped the other vCPUs.
        if let Some(f) = unsafe { FILTER.load(Ordering::Relaxed).as_mut() } {
            f.boundary();
        }
    }
    let token = TOKEN.fetch_add(1, Ordering::Relaxed) + 1;
    // SAFETY: getpid has no preconditions.
    FORKING.store(unsafe { libc::getpid() } as u32, Ordering::Relaxed);
    let mut mark = [T_FORK, 0, 0, 0, 0];
    mark[1..].copy_from_slice(&token.to_le_bytes());
    buffers::flush_for_fork(&mark);
}

/// In a forked child: a stream, buffer file and free-slot pipe of its own,
/// handed to tally. `false` if that failed (the child then stops
/// recording).
pub(crate) fn in_child() -> bool {
    if !following() || SILENT.load(Ordering::Relaxed) {
        return false;
    }
    own_streams().is_ok()
}

fn own_streams() -> std::io::Result<()> {
    let (base, size) = (
        SHM_BASE.load(Ordering::Acquire),
        SHM_SIZE.load(Ordering::Acquire),
    );
    let old = SHM_FD.load(Ordering::Relaxed);
    if base == 0 || old < 0 {
        return Err(std::io::ErrorKind::Unsupported.into());
    }
    let file = memfd(size as u64)?;
    copy_data(old, base, size, &file)?;
    // SAFETY: mapping the copy where the parent's file was: every pointer
    // into it (buffers, hit counts) stays valid and now points into the
    // child's own file.
    let p = unsafe {
        libc::mmap(
            base as *mut c_void,
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the header's slot count, in the mapping.
    let slots = unsafe { std::ptr::read_unaligned((base + 8) as *const u32) };
    let (stream_r, stream_w) = pipe()?;
    // SAFETY: fcntl on a descriptor we own; only advisory.
    unsafe { libc::fcntl(stream_r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let (free_r, free_w) = free_pipe(slots, &buffers::held_slots())?;
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let h = Header {
        kind: control::FORK,
        pid,
        parent: FORKING.load(Ordering::Relaxed),
        token: TOKEN.load(Ordering::Relaxed),
    };
    if !send(
        h,
        &[],
        &[stream_r.as_raw_fd(), file.as_raw_fd(), free_w.as_raw_fd()],
    ) {
        return Err(std::io::ErrorKind::BrokenPipe.into());
    }
    drop((stream_r, free_w));
    let file = buffers::keep_out_of_the_guests_way(file)?;
    SHM_FD.store(file.into_raw_fd(), Ordering::Relaxed);
    // SAFETY: the parent's file, no longer used here.
    unsafe { libc::close(old) };
    TOKEN.store(0, Ordering::Relaxed);
    buffers::switch_streams(stream_w, free_r)
}

/// Copies the parts of the file `from` (mapped at `base`, `size` bytes)
/// that hold data into `to`: the file is sparse (the hit counts of ids
/// never used take no memory) and stays so.
fn copy_data(from: i32, base: usize, size: usize, to: &File) -> std::io::Result<()> {
    let mut at: i64 = 0;
    while (at as usize) < size {
        // SAFETY: lseek on a descriptor we own.
        let start = unsafe { libc::lseek(from, at, libc::SEEK_DATA) };
        if start < 0 {
            break;
        }
        // SAFETY: as above.
        let end = unsafe { libc::lseek(from, start, libc::SEEK_HOLE) };
        let end = if end < 0 {
            size as i64
        } else {
            end.min(size as i64)
        };
        // SAFETY: `start..end` lies in the mapping of `size` bytes at `base`.
        let bytes = unsafe {
            std::slice::from_raw_parts((base + start as usize) as *const u8, (end - start) as usize)
        };
        to.write_all_at(bytes, start as u64)?;
        at = end;
    }
    Ok(())
}

/// At install in a process whose plugin was started by an exec'ing one
/// (`ctl=` without an output): a stream, buffer file and free-slot pipe of
/// its own, handed to tally with the command; their descriptors (stream,
/// buffer file, free slots) for the plugin to use as tally's.
pub(crate) fn exec_streams(slots: u32) -> Result<(i32, i32, i32), String> {
    let e = |e: std::io::Error| e.to_string();
    let file = memfd(shared::size_with_hits(slots)).map_err(e)?;
    file.write_all_at(&shared::header(slots), 0).map_err(e)?;
    let (stream_r, stream_w) = pipe().map_err(e)?;
    // SAFETY: fcntl on a descriptor we own; only advisory.
    unsafe { libc::fcntl(stream_r.as_raw_fd(), libc::F_SETPIPE_SZ, 1 << 20) };
    let (free_r, free_w) = free_pipe(slots, &[]).map_err(e)?;
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let h = Header {
        kind: control::EXEC,
        pid,
        parent: 0,
        token: 0,
    };
    if !send(
        h,
        &command_line(),
        &[stream_r.as_raw_fd(), file.as_raw_fd(), free_w.as_raw_fd()],
    ) {
        return Err("cannot reach tally on the control socket".into());
    }
    Ok((
        stream_w.into_raw_fd(),
        file.into_raw_fd(),
        free_r.into_raw_fd(),
    ))
}

/// The guest's command line, from QEMU's (what follows the plugin's
/// argument), its words separated by NUL bytes.
fn command_line() -> Vec<u8> {
    let all = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let words: Vec<&[u8]> = all.split(|&b| b == 0).collect();
    let from = words
        .iter()
        .position(|w| *w == b"-plugin")
        .map_or(words.len(), |k| k + 2);
    words
        .get(from..)
        .unwrap_or_default()
        .iter()
        .filter(|w| !w.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(&0u8)
}

/// Reads guest memory at `addr` (through `/proc/self/mem`, so that a bad
/// pointer of the guest's is an error, not a crash).
fn read_guest(mem: &File, addr: u64, buf: &mut [u8]) -> bool {
    let host = addr.wrapping_add(GUEST_BASE.load(Ordering::Relaxed));
    mem.read_exact_at(buf, host).is_ok()
}

/// The NUL-terminated string at guest address `addr`.
fn guest_string(mem: &File, addr: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        // Byte by byte near a page's end: the next page may be unmapped.
        let at = addr + out.len() as u64;
        let room = (4096 - (at.wrapping_add(GUEST_BASE.load(Ordering::Relaxed)) & 4095)) as usize;
        let n = room.min(chunk.len());
        if !read_guest(mem, at, &mut chunk[..n]) {
            return None;
        }
        if let Some(z) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..z]);
            return Some(out);
        }
        out.extend_from_slice(&chunk[..n]);
        if out.len() > 1 << 20 {
            return None;
        }
    }
}

/// The NULL-terminated array of strings at guest address `addr`.
fn guest_strings(mem: &File, addr: u64) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    if addr == 0 {
        return Some(out);
    }
    loop {
        let mut p = [0u8; 8];
        if !read_guest(mem, addr + 8 * out.len() as u64, &mut p) {
            return None;
        }
        let p = u64::from_le_bytes(p);
        if p == 0 {
            return Some(out);
        }
        out.push(guest_string(mem, p)?);
        if out.len() > 1 << 16 {
            return None;
        }
    }
}

/// Whether `path` is an ELF program for the guest's machine that this
/// process may run.
fn is_ours(path: &[u8]) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = CString::new(path) else {
        return false;
    };
    // SAFETY: access(2) with a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
        return false;
    }
    let mut head = [0u8; 20];
    let Ok(f) = File::open(std::ffi::OsStr::from_bytes(path)) else {
        return false;
    };
    f.read_exact_at(&mut head, 0).is_ok()
        && &head[..4] == b"\x7fELF"
        && head[4] == 2
        && u16::from_le_bytes([head[18], head[19]]) == MACHINE.load(Ordering::Relaxed)
}

/// What to run under QEMU for an exec of `path` with `argv`: the program
/// and its arguments (a `#!` script's interpreter before the script), if
/// it is a program for the guest's machine.
fn what_to_run(path: &[u8], argv: &[Vec<u8>]) -> Option<(Vec<u8>, Vec<Vec<u8>>)> {
    use std::os::unix::ffi::OsStrExt;
    let rest = argv.get(1..).unwrap_or_default().to_vec();
    if is_ours(path) {
        return Some((path.to_vec(), rest));
    }
    let f = File::open(std::ffi::OsStr::from_bytes(path)).ok()?;
    let mut head = [0u8; 256];
    let n = f.read_at(&mut head, 0).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let line = line.trim_ascii();
    let (interp, arg) = match line.iter().position(|b| b.is_ascii_whitespace()) {
        Some(k) => (&line[..k], Some(line[k..].trim_ascii())),
        None => (line, None),
    };
    if !is_ours(interp) {
        return None;
    }
    let mut args = Vec::new();
    args.extend(arg.filter(|a| !a.is_empty()).map(<[u8]>::to_vec));
    args.push(path.to_vec());
    args.extend(rest);
    Some((interp.to_vec(), args))
}

/// The guest calls `execve(path, argv, envp)` (guest addresses): if the
/// program can be followed, QEMU is run on it with the plugin in this
/// process (nothing returns); else tally is told, and QEMU runs the exec
/// natively.
pub(crate) fn on_execve(vcpu: u32, path: u64, argv: u64, envp: u64) {
    if !following() || SILENT.load(Ordering::Relaxed) {
        return;
    }
    let Ok(mem) = File::open("/proc/self/mem") else {
        return;
    };
    let Some(p) = guest_string(&mem, path) else {
        return;
    };
    match CString::new(p.clone()) {
        // SAFETY: access(2) with a valid C string.
        Ok(c) if unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0 => {}
        // The exec fails: QEMU returns its error to the guest.
        _ => return,
    }
    if !BASE_KNOWN.load(Ordering::Relaxed) || MACHINE.load(Ordering::Relaxed) == 0 {
        not_followed(&p);
        return;
    }
    let (Some(args), Some(env)) = (guest_strings(&mem, argv), guest_strings(&mem, envp)) else {
        return;
    };
    let Some((prog, rest)) = what_to_run(&p, &args) else {
        not_followed(&p);
        return;
    };
    let Some(run) = qemu_command(&prog, &p, args.first(), &rest) else {
        not_followed(&p);
        return;
    };
    let env: Vec<CString> = env
        .into_iter()
        .filter_map(|e| CString::new(e).ok())
        .collect();
    buffers::flush_one(vcpu, &[T_EXECVE]);
    let ctl = CTL_FD.load(Ordering::Relaxed);
    let argv: Vec<*const libc::c_char> = run
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    let envp: Vec<*const libc::c_char> = env
        .iter()
        .map(|a| a.as_ptr())
        .chain(std::iter::once(std::ptr::null()))
        .collect();
    // SAFETY: the control socket is ours and stays open across the exec
    // (the new plugin announces itself on it); the vectors are
    // NULL-terminated arrays of valid C strings that outlive the call.
    unsafe {
        libc::fcntl(ctl, libc::F_SETFD, 0);
        libc::execve(run[0].as_ptr(), argv.as_ptr(), envp.as_ptr());
        libc::fcntl(ctl, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    not_followed(&p);
}

/// Tells tally that the exec of `path` goes on without the plugin.
fn not_followed(path: &[u8]) {
    let h = Header {
        kind: control::UNFOLLOWED,
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        parent: 0,
        token: 0,
    };
    send(h, path, &[]);
}

/// QEMU's command line to run `prog rest` with the plugin, `argv0` as the
/// guest's `argv[0]` and `shown` as the program tally names.
fn qemu_command(
    prog: &[u8],
    shown: &[u8],
    argv0: Option<&Vec<u8>>,
    rest: &[Vec<u8>],
) -> Option<Vec<CString>> {
    use std::os::unix::ffi::OsStrExt;
    let qemu = std::fs::read_link("/proc/self/exe").ok()?;
    let plugin = plugin_path()?;
    let mut arg = plugin;
    for a in PASSED_ON.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        arg.push(b',');
        arg.extend_from_slice(a.as_bytes());
    }
    arg.extend_from_slice(
        format!(",ctl={},children=on", CTL_FD.load(Ordering::Relaxed)).as_bytes(),
    );
    let mut v = vec![qemu.as_os_str().as_bytes().to_vec()];
    if let Some(a0) = argv0 {
        v.push(b"-0".to_vec());
        v.push(if prog == shown {
            a0.clone()
        } else {
            prog.to_vec()
        });
    }
    v.push(b"-plugin".to_vec());
    v.push(arg);
    v.push(prog.to_vec());
    v.extend(rest.iter().cloned());
    v.into_iter().map(|a| CString::new(a).ok()).collect()
}

/// The plugin's own file, as the dynamic loader found it.
fn plugin_path() -> Option<Vec<u8>> {
    // SAFETY: dladdr with an address in this library and a zeroed
    // Dl_info; the name it gives is a valid C string while the library is
    // loaded.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let here = plugin_path as *const c_void;
        if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(info.dli_fname).to_bytes().to_vec())
    }
}

/// Takes the control socket tally handed over (`ctl=FD`).
pub(crate) fn take_control(fd: i32) -> std::io::Result<()> {
    // SAFETY: the caller handed this descriptor to the plugin.
    let f = buffers::keep_out_of_the_guests_way(unsafe { File::from_raw_fd(fd) })?;
    CTL_FD.store(OwnedFd::from(f).into_raw_fd(), Ordering::Relaxed);
    Ok(())
}
