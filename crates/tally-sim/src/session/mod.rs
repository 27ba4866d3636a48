//! A simulation run from start to end, as `tally sim` does it: where the
//! instructions come from (a program run under QEMU, a saved trace, a
//! Lackey trace), the engine fed, and the address space the costs are
//! attributed through.
//!
//! A program runs in two processes: QEMU runs it with tally's plugin,
//! which records (and, with one machine, simulates D1, see
//! [`crate::filter`]); tally simulates while the program runs. The plugin
//! is GPL (QEMU's bindings) and tally is not linked with it: the stream
//! ([`crate::trace`]) is the interface. Declarations and mappings come
//! through a pipe; the bulk of the records through the slots of a buffer
//! file the two processes share ([`pool`]); both reach the engine through
//! the one feed loop ([`crate::feed`]). How QEMU and the plugin are found
//! and started is in [`launch`] (with tally-process's launcher, which also
//! passes signals on to the program); following the
//! processes a program starts, in [`children`].
//!
//! When the program dies of a signal QEMU skips the plugin's exit
//! callbacks; its last records are then still in the buffer file, which
//! is read when the pipe ends. The run is then incomplete
//! ([`Ending::Incomplete`]) and the program's status is returned for the
//! caller to pass on.
#![allow(unsafe_code)]

mod children;
mod lackey;
mod launch;
mod pool;

pub use children::{Family, native_children};
pub use lackey::lackey_trace;
pub use launch::{find_plugin, install_plugin, plugin_data_dir, plugin_places};

use crate::attrib::AddressSpace;
use crate::engine::{Engine, EngineOptions, Output};
use crate::feed::{self, Host, SlotProblem};
use crate::trace::TraceReader;
use crate::{Error, Hierarchy, HierarchyConfig};
use pool::Pool;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;

/// Where the profile of machine `name` (`None`: the main one) of process
/// `pid` goes, as Valgrind names it: `out_file` or `cachegrind.out.%p`
/// (`callgrind.out.%p` for Callgrind output), `%p` the process id, other
/// machines' with `.NAME` appended.
pub fn out_path(out_file: Option<&Path>, callgrind: bool, name: Option<&str>, pid: u32) -> PathBuf {
    let default = if callgrind {
        "callgrind.out.%p"
    } else {
        "cachegrind.out.%p"
    };
    let base = out_file
        .unwrap_or(Path::new(default))
        .to_string_lossy()
        .replace("%p", &pid.to_string());
    match name {
        None => PathBuf::from(base),
        Some(n) => PathBuf::from(format!("{base}.{n}")),
    }
}

/// Checks that a profile can be written at `path` (the directory exists
/// and a file can be created in it, which is what writing it takes: a
/// temporary file beside it, renamed), so that a run is not wasted on an
/// output that cannot be written. A `%p` in the directory part cannot be
/// checked before the program runs.
pub fn check_output(path: &Path) -> Result<(), Error> {
    let fail = |why: String| Error::OutFile {
        path: path.to_path_buf(),
        why,
    };
    if path
        .parent()
        .is_some_and(|d| d.to_string_lossy().contains("%p"))
    {
        return Ok(());
    }
    tally_formats::check_writable(path).map_err(|e| match e {
        tally_formats::Error::Unwritable { why, .. } => fail(why),
        other => fail(other.to_string()),
    })
}

/// What ended the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The program ran to its normal exit, or the trace to its end.
    Complete,
    /// The program did not finish (crash, signal); why. The costs cover
    /// the run up to there.
    Incomplete(String),
}

/// What a run produced.
pub struct Run {
    /// Costs by instruction and machine, and the call arcs.
    pub output: Output,
    /// The images the instructions are in, for attribution.
    pub space: AddressSpace,
    /// The command, as the profile names it.
    pub cmd: String,
    /// The process id the profile names.
    pub pid: u32,
    /// What ended the run.
    pub ending: Ending,
    /// The program's exit status, when tally ran it.
    pub status: Option<ExitStatus>,
    /// Processes the program started that were not followed.
    pub unfollowed: Unfollowed,
}

/// Processes a program started that tally did not follow: the plugin
/// notes each fork and execve of the guest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unfollowed {
    /// `fork`s (and `clone`s without a shared address space).
    pub forks: u64,
    /// `execve`s attempted.
    pub execs: u64,
}

/// Simulates a stream the plugin saved with `out=FILE`; `binary`, the
/// program, says the architecture (x86-64 without it) and names the
/// command.
pub fn trace_file(
    path: &Path,
    binary: Option<&Path>,
    machines: Vec<Hierarchy>,
    opts: EngineOptions,
) -> Result<Run, Error> {
    let f = std::fs::File::open(path).map_err(|source| Error::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let engine = Engine::new(machines, qemu_options(opts));
    // The stream does not say the architecture; the program does.
    let x86 = match binary {
        Some(b) => launch::emulator_for(b)?.1,
        None => true,
    };
    let mut space = AddressSpace::new();
    let (output, ending) = run_stream(f, path, engine, &mut space, x86, None)?;
    Ok(Run {
        output,
        space,
        cmd: binary.map_or(String::new(), |b| b.display().to_string()),
        pid: std::process::id(),
        ending,
        status: None,
        unfollowed: Unfollowed::default(),
    })
}

/// How to run a program under QEMU.
pub struct Native<'a> {
    /// The program and its arguments.
    pub command: &'a [String],
    /// The emulator (default: `qemu-<arch>` on PATH).
    pub qemu: Option<&'a Path>,
    /// The plugin (default: see [`find_plugin`]).
    pub plugin: Option<&'a Path>,
    /// Whether accesses are needed: without cache or branch simulation
    /// only executions count, and the plugin records none (its
    /// `mem=off`), which spares QEMU a callback per access.
    pub accesses: bool,
    /// The machine whose D1 the plugin simulates, if it does.
    pub d1: Option<&'a HierarchyConfig>,
    /// The plugin counts D1 hits in the buffer file rather than writing
    /// them (not with calls tracked, whose inclusive costs need them in
    /// order).
    pub count_hits: bool,
}

/// Runs a program under QEMU with the plugin and simulates it as it runs.
/// A program that does not exit normally gives an incomplete run, with
/// its status.
pub fn native(n: &Native<'_>, machines: Vec<Hierarchy>, opts: EngineOptions) -> Result<Run, Error> {
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
    // Every slot starts free; the plugin takes them from this pipe.
    let (free_r, free_w) = pool::free_slots().map_err(Error::Pipe)?;
    let mut pool = Pool::new(&buffers, free_w).map_err(Error::Map)?;
    let (notes_r, notes_w) = std::io::pipe().map_err(Error::Pipe)?;
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
            ctl: None,
        },
    )?;
    drop(writer);
    drop(free_r);
    drop(notes_w);
    let pid = child.id();
    let forwarding = tally_process::forward_to(pid);
    // When the pipe ends, QEMU is gone: what it had not written yet is in
    // the buffer file.
    let input = pool::WithTail::new(reader, &buffers);
    let engine = Engine::new(machines, qemu_options(opts));
    let mut space = AddressSpace::new();
    let result = run_stream(
        input,
        Path::new("<qemu plugin>"),
        engine,
        &mut space,
        x86,
        Some(&mut pool),
    );
    let status = child.wait().map_err(Error::Wait)?;
    // The program has ended: the profile is written under the caller's
    // handlers.
    let received = forwarding.received();
    drop(forwarding);
    let unfollowed = read_notes(notes_r);
    let (output, mut ending) = result?;
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let by = match received {
                Some(r) => format!(" (tally received signal {r} and passed it on)"),
                None => String::new(),
            };
            ending = Ending::Incomplete(format!("the program was killed by signal {sig}{by}"));
        } else if let Ending::Incomplete(_) = ending {
            ending = Ending::Incomplete(format!(
                "the program stopped with status {} before its normal exit",
                status.code().unwrap_or(-1)
            ));
        }
    }
    Ok(Run {
        output,
        space,
        cmd: n.command.join(" "),
        pid,
        ending,
        status: Some(status),
        unfollowed,
    })
}

/// What the plugin noted of forks and execs, read without waiting for
/// children that still hold the pipe.
fn read_notes(notes: std::io::PipeReader) -> Unfollowed {
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(notes.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    let mut u = Unfollowed::default();
    let mut buf = [0u8; 4096];
    let mut r = &notes;
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        for &b in &buf[..n] {
            match b {
                b'f' => u.forks += 1,
                b'e' => u.execs += 1,
                _ => {}
            }
        }
    }
    u
}

/// The engine options for QEMU's stream, whose pieces of one access must
/// be merged as VEX reports them.
fn qemu_options(opts: EngineOptions) -> EngineOptions {
    EngineOptions {
        merge_modify: true,
        ..opts
    }
}

/// Feeds a tally trace stream to the engine; errors name the stream
/// `name` and the byte. `x86`: decode branches as x86-64.
fn run_stream(
    input: impl Read,
    name: &Path,
    engine: Engine,
    space: &mut AddressSpace,
    x86: bool,
    pool: Option<&mut Pool>,
) -> Result<(Output, Ending), Error> {
    let err = |error| Error::Stream {
        name: name.to_path_buf(),
        error: Box::new(error),
    };
    let mut r = TraceReader::new(input).map_err(err)?;
    let mut host = StreamHost { space, pool };
    let mut sim = feed::Simulation::new(engine, x86);
    let mut fed = sim.feed_reader(&mut r, &mut host).map_err(err)?;
    // Forks are followed only by `children`.
    while let feed::Ending::Forked { .. } = fed {
        fed = sim.feed_reader(&mut r, &mut host).map_err(err)?;
    }
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
    Ok((output, ending))
}

/// The session's side of a stream: mappings into the address space,
/// slots from the plugin's buffer file.
struct StreamHost<'a> {
    space: &'a mut AddressSpace,
    pool: Option<&'a mut Pool>,
}

impl Host for StreamHost<'_> {
    fn map(&mut self, start: u64, end: u64, offset: u64, path: &[u8]) {
        self.space.add_mapping(start, end, offset, path);
    }

    fn slot(&self, slot: u32, len: u32) -> Result<&[u8], SlotProblem> {
        let pool = self.pool.as_deref().ok_or(SlotProblem::NoBufferFile)?;
        pool.records(slot, len).ok_or(SlotProblem::OutOfRange)
    }

    fn give_back(&mut self, slot: u32) {
        if let Some(p) = self.pool.as_deref_mut() {
            p.give_back(slot);
        }
    }

    fn hits(&self) -> &[u64] {
        self.pool.as_deref().map_or(&[], Pool::hits)
    }
}
