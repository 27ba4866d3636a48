//! Sampling profiles of unmodified programs through Linux's
//! `perf_event_open`, for `tally record`.
//!
//! A program is started held before `exec` ([`tally_process::Command::hold`]), one
//! event is opened on it for each online CPU (inherited by its threads and
//! children, enabled by its `exec`), and each event's ring buffer is read
//! directly while it runs: samples (instruction pointer, thread, time,
//! period and the frame-pointer call chain) and the `mmap`, `comm`, `fork`,
//! `exit` and lost-samples records that place them. Per-CPU buffers are
//! merged by time at the end and go through tally's one symbolisation path
//! ([`tally_formats::perf::samples`], which the perf.data reader uses too),
//! so the result is an ordinary profile of whole stacks that every writer
//! takes. With `-p` an existing process is attached to: each of its
//! threads on each CPU, its mappings read from `/proc`.
//!
//! [`record`] makes a [`Recording`]; [`write_gmon`] and [`write_dcpi`]
//! write its sample counts as gmon.out and as DCPI profiles;
//! [`record_system`] is `tally record --system`, DCPI's daemon mode.
#![deny(missing_docs)]

mod offcpu;
mod outputs;
mod records;
mod sys;
mod system;
mod unwind;

pub use outputs::{write_dcpi, write_gmon};
pub use records::{Record, Timed};
pub use system::{Epoch, SystemOptions, SystemRecording, record_system};
pub use unwind::UserStack;

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tally_formats::perf::preload::Preloader;
use tally_formats::perf::samples::SampledStacks;
use tally_model::{Positions, Profile};

/// What each sample holds: `PERF_SAMPLE_IP | TID | TIME | PERIOD |
/// CALLCHAIN` (the record parser relies on this order).
pub const SAMPLE_TYPE: u64 = 1 | 1 << 1 | 1 << 2 | 1 << 8 | 1 << 5;

/// [`SAMPLE_TYPE`] and `PERF_SAMPLE_REGS_USER | STACK_USER`, for DWARF
/// unwinding (the kernel's call chain then holds kernel frames only).
pub const DWARF_SAMPLE_TYPE: u64 = SAMPLE_TYPE | 1 << 12 | 1 << 13;

/// The user registers sampled for DWARF unwinding: x86_64's `bp`, `sp`
/// and `ip` (`PERF_REG_X86_BP`, `SP`, `IP`), all an unwinder needs.
pub const REGS_USER: u64 = 1 << 6 | 1 << 7 | 1 << 8;

/// How call stacks are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallGraph {
    /// The kernel walks the frame pointers: cheap, but code built without
    /// them (gcc -O2's default) loses callers.
    FramePointers,
    /// The kernel copies this many bytes of the user stack with the
    /// registers, and tally unwinds them with the images' DWARF call frame
    /// information: real stacks without frame pointers, at more cost.
    Dwarf(u32),
    /// Frame pointers when the main program's functions keep them, else
    /// DWARF with 16 KiB of stack.
    Auto,
}

/// The stack bytes copied per sample with [`CallGraph::Auto`]'s DWARF.
pub const DEFAULT_STACK_SIZE: u32 = 16 * 1024;

/// An event to sample on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Its name, as perf names it.
    pub name: &'static str,
    /// `PERF_TYPE_*`.
    pub kind: u32,
    /// The event within its type.
    pub config: u64,
    /// The unit of its period.
    pub unit: &'static str,
}

/// The events `-e` takes.
pub const EVENTS: [Event; 10] = [
    Event {
        name: "cpu-clock",
        kind: 1,
        config: 0,
        unit: "ns",
    },
    Event {
        name: "task-clock",
        kind: 1,
        config: 1,
        unit: "ns",
    },
    Event {
        name: "page-faults",
        kind: 1,
        config: 2,
        unit: "faults",
    },
    Event {
        name: "context-switches",
        kind: 1,
        config: 3,
        unit: "switches",
    },
    Event {
        name: "cycles",
        kind: 0,
        config: 0,
        unit: "cycles",
    },
    Event {
        name: "instructions",
        kind: 0,
        config: 1,
        unit: "instructions",
    },
    Event {
        name: "cache-references",
        kind: 0,
        config: 2,
        unit: "references",
    },
    Event {
        name: "cache-misses",
        kind: 0,
        config: 3,
        unit: "misses",
    },
    Event {
        name: "branches",
        kind: 0,
        config: 4,
        unit: "branches",
    },
    Event {
        name: "branch-misses",
        kind: 0,
        config: 5,
        unit: "misses",
    },
];

impl Event {
    /// The event named `name` (`branch-instructions` is `branches`).
    pub fn named(name: &str) -> Option<Event> {
        let name = if name == "branch-instructions" {
            "branches"
        } else {
            name
        };
        EVENTS.iter().copied().find(|e| e.name == name)
    }

    fn is_hardware(&self) -> bool {
        self.kind == 0
    }
}

/// How often to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rate {
    /// Samples per second (the kernel adapts the period; clock events
    /// turn it into a fixed period of `1e9 / HZ` ns).
    Frequency(u64),
    /// One sample every this many events.
    Period(u64),
}

/// The highest sampling rate the kernel allows
/// (`/proc/sys/kernel/perf_event_max_sample_rate`; `None` if unreadable).
/// A higher `-F` makes `perf_event_open` fail with EINVAL, so it is
/// refused before the program runs.
pub fn max_frequency() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What to record.
#[derive(Clone, Debug)]
pub enum Target {
    /// Start this program (found in `PATH` unless it has a slash) with its
    /// arguments (`args[0]` is its name).
    Command {
        /// The program.
        program: PathBuf,
        /// Its arguments, `args[0]` included.
        args: Vec<String>,
    },
    /// Attach to a running process.
    Pid {
        /// Its id.
        pid: i32,
        /// Stop after this long (else when it ends or on a signal).
        duration: Option<Duration>,
    },
}

/// How to record.
#[derive(Clone, Debug)]
pub struct Options {
    /// The event.
    pub event: Event,
    /// The rate.
    pub rate: Rate,
    /// Data pages of each CPU's ring buffer (a power of two; 0: 128
    /// with frame pointers, 1024 with DWARF, whose samples are larger).
    pub pages: usize,
    /// How call stacks are taken.
    pub call_graph: CallGraph,
    /// Sample the processes the program forks (and what they `exec`),
    /// not only its threads.
    pub follow_children: bool,
    /// Also record where threads block and for how long: a second event,
    /// `off-cpu` in ns (see the `offcpu` module).
    pub off_cpu: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            event: EVENTS[0],
            rate: Rate::Frequency(999),
            pages: 0,
            call_graph: CallGraph::Auto,
            follow_children: false,
            off_cpu: false,
        }
    }
}

/// Why recording failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The kernel refused the event.
    #[error(
        "perf_event_open refused {what}: {source} (kernel.perf_event_paranoid is {paranoid}; run as root, or lower it with `sysctl kernel.perf_event_paranoid=1`)"
    )]
    NotPermitted {
        /// What was being opened.
        what: String,
        /// The system error.
        source: std::io::Error,
        /// The paranoia level, or `unknown`.
        paranoid: String,
    },
    /// The kernel refused CPU-wide events (`--system`).
    #[error(
        "--system samples every process, and perf_event_open refused a CPU-wide event: {source} (kernel.perf_event_paranoid is {paranoid}; run as root or with CAP_PERFMON, or allow it with `sysctl kernel.perf_event_paranoid=0`)"
    )]
    SystemNotPermitted {
        /// The system error.
        source: std::io::Error,
        /// The paranoia level, or `unknown`.
        paranoid: String,
    },
    /// The kernel refused the context-switch event of `--off-cpu`, or
    /// kernel sampling, without which it samples nothing.
    #[error(
        "--off-cpu samples threads as the kernel switches them out, and perf_event_open refused {what} (kernel.perf_event_paranoid is {paranoid}; run as root or with CAP_PERFMON, or allow it with `sysctl kernel.perf_event_paranoid=1`)"
    )]
    OffCpuNotPermitted {
        /// What was refused.
        what: String,
        /// The paranoia level, or `unknown`.
        paranoid: String,
    },
    /// No such process.
    #[error("no process with id {0}")]
    NoSuchProcess(i32),
    /// The program could not be started.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The system error.
        source: std::io::Error,
    },
    /// Another system error.
    #[error("{what}: {source}")]
    System {
        /// What failed.
        what: String,
        /// The system error.
        source: std::io::Error,
    },
    /// The samples could not become a profile.
    #[error("{0}")]
    Profile(#[from] tally_formats::Error),
}

/// How the recording ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The program exited with this status.
    Exited(i32),
    /// A signal killed the program.
    Killed(i32),
    /// The attached process ended, or the duration passed.
    Detached,
}

/// A finished recording: its records, merged in time order, and facts.
#[derive(Debug)]
pub struct Recording {
    /// The records of every CPU, in time order.
    pub records: Vec<Timed>,
    /// The event sampled (after any fallback).
    pub event: Event,
    /// The rate.
    pub rate: Rate,
    /// Samples the kernel lost (full buffers).
    pub lost: u64,
    /// How it ended.
    pub ending: Ending,
    /// The signal tally received that cut the recording short, if any.
    pub interrupted: Option<i32>,
    /// Kernel frames were excluded (not permitted).
    pub user_only: bool,
    /// Things the user should know (a fallback, an exclusion).
    pub notes: Vec<String>,
    /// The command line (or `pid N`).
    pub cmd: String,
    /// The process recorded.
    pub pid: i32,
    /// How its stacks were taken (never [`CallGraph::Auto`]).
    pub call_graph: CallGraph,
    /// The main program's path, as the kernel names its mapping.
    pub program: Option<PathBuf>,
    /// When the recording started.
    pub started: std::time::SystemTime,
    /// The object files and kernel symbols read while it ran.
    pub symbols: tally_formats::perf::samples::Symbols,
    /// With `--off-cpu`: when the recording stopped (`CLOCK_MONOTONIC`,
    /// the records' clock then), the end of the time of a thread still
    /// off the CPU.
    pub off_cpu_until: Option<u64>,
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map_or_else(|_| "unknown".into(), |s| s.trim().to_string())
}

fn attr(options: &Options, event: Event, exclude_kernel: bool, command: bool) -> sys::Attr {
    use sys::flag::*;
    let mut flags = INHERIT | MMAP | MMAP2 | COMM | COMM_EXEC | TASK | SAMPLE_ID_ALL | EXCLUDE_HV;
    if command {
        flags |= DISABLED | ENABLE_ON_EXEC;
    }
    if exclude_kernel {
        flags |= EXCLUDE_KERNEL;
    }
    if !options.follow_children {
        flags |= INHERIT_THREAD;
    }
    let rate = match options.rate {
        Rate::Frequency(hz) => {
            flags |= FREQ;
            hz
        }
        Rate::Period(p) => p,
    };
    let mut a = sys::Attr {
        kind: event.kind,
        config: event.config,
        sample_period_or_freq: rate,
        sample_type: SAMPLE_TYPE,
        flags,
        wakeup: 64,
        ..Default::default()
    };
    if options.off_cpu {
        // One clock for both events, which the end of the recording is
        // read on too.
        a.flags |= USE_CLOCKID;
        a.clockid = libc::CLOCK_MONOTONIC;
    }
    if let CallGraph::Dwarf(size) = options.call_graph {
        a.sample_type = DWARF_SAMPLE_TYPE;
        a.flags |= EXCLUDE_CALLCHAIN_USER;
        a.sample_regs_user = REGS_USER;
        // The kernel wants a multiple of 8.
        a.sample_stack_user = size / 8 * 8;
        // Each sample is large: wake the reader before the buffer fills.
        a.wakeup = 8;
    }
    a
}

/// The open events and their buffers.
struct Events {
    fds: Vec<OwnedFd>,
    rings: Vec<sys::Ring>,
    /// The context-switch event's buffers (`--off-cpu`).
    switch_rings: Vec<sys::Ring>,
}

/// Reads the ring buffers: records are parsed, and with DWARF unwinding
/// each read is put in time order (mappings on one CPU may place samples
/// on another) and its samples unwound, keeping only their call chains.
struct Reader {
    dwarf: bool,
    unwinders: unwind::Unwinders,
    bytes: Vec<u8>,
    batch: Vec<Timed>,
}

impl Reader {
    fn new(call_graph: CallGraph) -> Reader {
        Reader {
            dwarf: matches!(call_graph, CallGraph::Dwarf(_)),
            unwinders: unwind::Unwinders::default(),
            bytes: Vec::new(),
            batch: Vec::new(),
        }
    }

    fn drain(&mut self, events: &mut Events, out: &mut Vec<Timed>) {
        if !self.dwarf {
            for ring in &mut events.rings {
                self.bytes.clear();
                ring.drain(&mut self.bytes);
                records::parse(&self.bytes, out);
            }
            for ring in &mut events.switch_rings {
                self.bytes.clear();
                ring.drain(&mut self.bytes);
                records::parse_switches(&self.bytes, false, out);
            }
            return;
        }
        self.batch.clear();
        for ring in &mut events.rings {
            self.bytes.clear();
            ring.drain(&mut self.bytes);
            records::parse_with(&self.bytes, true, &mut self.batch);
        }
        for ring in &mut events.switch_rings {
            self.bytes.clear();
            ring.drain(&mut self.bytes);
            records::parse_switches(&self.bytes, true, &mut self.batch);
        }
        self.batch.sort_by_key(|t| t.time);
        let mut batch = std::mem::take(&mut self.batch);
        self.place(&mut batch);
        out.append(&mut batch);
        self.batch = batch;
    }

    /// Follows the mappings of `records` and unwinds their samples.
    fn place(&mut self, records: &mut [Timed]) {
        if !self.dwarf {
            return;
        }
        for t in records {
            match &mut t.record {
                Record::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    path,
                } => self.unwinders.mmap(*pid, *start, *len, *offset, path),
                Record::Fork { pid, ppid, .. } => self.unwinders.fork(*pid, *ppid),
                Record::Comm {
                    pid, exec: true, ..
                } => self.unwinders.exec(*pid),
                Record::Sample {
                    pid, chain, stack, ..
                }
                | Record::SwitchStack {
                    pid, chain, stack, ..
                } => {
                    if let Some(stack) = stack.take() {
                        // The kernel's part, then the unwound user part.
                        if let Some(user) = chain.iter().position(|&a| a == unwind::CONTEXT_USER) {
                            chain.truncate(user);
                        }
                        self.unwinders.unwind(*pid, &stack, chain);
                    }
                }
                _ => {}
            }
        }
    }
}

/// Opens the events on `tids` (each on every CPU), the first of each CPU
/// with a ring buffer and the others writing to it. Falls back to user
/// frames only, and from a hardware event to `cpu-clock`, noting why.
fn open(
    options: &Options,
    tids: &[i32],
    command: bool,
    notes: &mut Vec<String>,
) -> Result<(Events, Event, bool), RecordError> {
    let cpus = sys::online_cpus();
    let mut event = options.event;
    let mut exclude_kernel = false;
    loop {
        match open_with(options, event, exclude_kernel, tids, &cpus, command) {
            Ok(mut ev) => {
                if options.off_cpu {
                    offcpu::open(
                        options,
                        event,
                        exclude_kernel,
                        tids,
                        &cpus,
                        command,
                        &mut ev,
                    )?;
                }
                return Ok((ev, event, exclude_kernel));
            }
            Err(e) => {
                let code = e.raw_os_error();
                if !exclude_kernel && matches!(code, Some(libc::EACCES) | Some(libc::EPERM)) {
                    exclude_kernel = true;
                    notes.push("kernel frames are not permitted here: user frames only".into());
                    continue;
                }
                if event.is_hardware()
                    && matches!(
                        code,
                        Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV)
                    )
                {
                    notes.push(format!(
                        "the hardware event {} is not supported on this machine: sampling cpu-clock instead",
                        event.name
                    ));
                    event = EVENTS[0];
                    continue;
                }
                if code == Some(libc::ESRCH) {
                    return Err(RecordError::NoSuchProcess(
                        tids.first().copied().unwrap_or(-1),
                    ));
                }
                if matches!(code, Some(libc::EACCES) | Some(libc::EPERM)) {
                    return Err(RecordError::NotPermitted {
                        what: event.name.to_string(),
                        source: e,
                        paranoid: paranoid(),
                    });
                }
                return Err(RecordError::System {
                    what: format!("perf_event_open of {}", event.name),
                    source: e,
                });
            }
        }
    }
}

fn open_with(
    options: &Options,
    event: Event,
    exclude_kernel: bool,
    tids: &[i32],
    cpus: &[i32],
    command: bool,
) -> std::io::Result<Events> {
    let a = attr(options, event, exclude_kernel, command);
    let mut ev = Events {
        fds: Vec::new(),
        rings: Vec::new(),
        switch_rings: Vec::new(),
    };
    for &cpu in cpus {
        let mut first: Option<usize> = None;
        for &tid in tids {
            let fd = match sys::perf_event_open(&a, tid, cpu) {
                Ok(fd) => fd,
                // A thread that ended since it was listed.
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) && first.is_some() => continue,
                Err(e) => return Err(e),
            };
            match first {
                None => {
                    ev.rings.push(sys::Ring::map(&fd, options.pages)?);
                    first = Some(ev.fds.len());
                }
                Some(i) => sys::set_output(&fd, &ev.fds[i])?,
            }
            ev.fds.push(fd);
        }
    }
    Ok(ev)
}

/// Finds `program` in `PATH` unless it names a path.
pub fn find_program(program: &Path) -> Option<PathBuf> {
    if program.components().count() > 1 || program.is_absolute() {
        return Some(program.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Records `target` as `options` say, until the program ends (or, for a
/// process attached to, until it ends, the duration passes or tally gets
/// SIGINT, SIGTERM or SIGHUP). Those signals, while a program runs, are
/// passed on to it (a terminal's Ctrl-C reaches it directly) and the
/// recording goes on until it ends; a second one kills it.
pub fn record(target: &Target, options: &Options) -> Result<Recording, RecordError> {
    let mut notes = Vec::new();
    let mut out: Vec<Timed> = Vec::new();
    let options = &resolve(target, options);
    let mut reader = Reader::new(options.call_graph);
    let started = std::time::SystemTime::now();
    let program = match target {
        Target::Command { program, .. } => find_program(program),
        Target::Pid { pid, .. } => std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
    }
    .and_then(|p| std::fs::canonicalize(p).ok());
    // Mappings already queued for the symbol reader.
    let mut queued = 0;
    let (mut events, event, user_only, ending, interrupted, cmd, pid, mut preload) = match target {
        Target::Command { program, args } => {
            let path = find_program(program).ok_or_else(|| RecordError::Spawn {
                program: program.display().to_string(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "not found in PATH"),
            })?;
            let mut command = tally_process::Command::new(&path);
            if let Some((name, rest)) = args.split_first() {
                command.arg0(name).args(rest);
            }
            // The program ends with tally, however tally ends (SIGKILL too).
            command.death_signal(libc::SIGKILL);
            let mut held = command.hold(true).spawn().map_err(|e| RecordError::Spawn {
                program: program.display().to_string(),
                source: e,
            })?;
            let held_pid = held.id() as i32;
            let opened = open(options, &[held_pid], true, &mut notes);
            let (mut events, event, user_only) = match opened {
                Ok(o) => o,
                Err(e) => {
                    held.abandon();
                    return Err(e);
                }
            };
            let mut preload = Preloader::start((!user_only).then(kernel_release).flatten());
            let forwarding = tally_process::forward_to(held.id());
            if let Err(e) = held.release() {
                return Err(RecordError::Spawn {
                    program: program.display().to_string(),
                    source: e,
                });
            }
            let exit = loop {
                sys::poll(&events.fds, 100);
                reader.drain(&mut events, &mut out);
                queue_objects(&mut preload, &out, &mut queued);
                match held.try_wait() {
                    Ok(Some(status)) => break tally_process::Exit::of(status),
                    Ok(None) => {}
                    Err(_) => break tally_process::Exit::Code(127),
                }
            };
            let interrupted = forwarding.received();
            drop(forwarding);
            let ending = match exit {
                tally_process::Exit::Code(c) => Ending::Exited(c),
                tally_process::Exit::Signal(s) => Ending::Killed(s),
            };
            (
                events,
                event,
                user_only,
                ending,
                interrupted,
                args.join(" "),
                held_pid,
                preload,
            )
        }
        Target::Pid { pid, duration } => {
            let pid = *pid;
            sys::alive(pid).map_err(|_| RecordError::NoSuchProcess(pid))?;
            let tids = threads(pid);
            if tids.is_empty() {
                return Err(RecordError::NoSuchProcess(pid));
            }
            synthesize(pid, &mut out);
            reader.place(&mut out);
            let (mut events, event, user_only) = open(options, &tids, false, &mut notes)?;
            let mut preload = Preloader::start((!user_only).then(kernel_release).flatten());
            // Signals stop the recording, not the process.
            let forwarding = tally_process::forward_to(0);
            let start = Instant::now();
            loop {
                sys::poll(&events.fds, 100);
                reader.drain(&mut events, &mut out);
                queue_objects(&mut preload, &out, &mut queued);
                if forwarding.received().is_some()
                    || duration.is_some_and(|d| start.elapsed() >= d)
                    || sys::alive(pid).is_err()
                {
                    break;
                }
            }
            for fd in &events.fds {
                let _ = sys::set_enabled(fd, false);
            }
            reader.drain(&mut events, &mut out);
            let interrupted = forwarding.received();
            drop(forwarding);
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| {
                    c.split(|&b| b == 0)
                        .filter(|a| !a.is_empty())
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_else(|_| format!("pid {pid}"));
            (
                events,
                event,
                user_only,
                Ending::Detached,
                interrupted,
                cmd,
                pid,
                preload,
            )
        }
    };
    reader.drain(&mut events, &mut out);
    drop(events);
    let off_cpu_until = options.off_cpu.then(sys::monotonic_ns);
    queue_objects(&mut preload, &out, &mut queued);
    let symbols = preload.symbols();
    drop(preload);
    // Stable: records of one CPU keep their order at equal times.
    out.sort_by_key(|t| t.time);
    let lost = out
        .iter()
        .map(|t| match t.record {
            Record::Lost(n) => n,
            _ => 0,
        })
        .sum();
    Ok(Recording {
        records: out,
        event,
        rate: options.rate,
        lost,
        ending,
        interrupted,
        user_only,
        notes,
        cmd,
        pid,
        call_graph: options.call_graph,
        program,
        started,
        symbols,
        off_cpu_until,
    })
}

/// The running kernel's release, for naming kernel frames.
fn kernel_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|r| r.trim().to_string())
}

/// Gives the symbol reader the object files of the mappings in
/// `out[*queued..]`.
fn queue_objects(preload: &mut Preloader, out: &[Timed], queued: &mut usize) {
    for t in out.get(*queued..).unwrap_or_default() {
        if let Record::Mmap { path, .. } = &t.record {
            preload.object(path);
        }
    }
    *queued = out.len();
}

/// `options` with [`CallGraph::Auto`] decided for the program `target`
/// runs, and the ring buffer's size.
fn resolve(target: &Target, options: &Options) -> Options {
    let mut options = options.clone();
    if options.call_graph == CallGraph::Auto {
        let program = match target {
            Target::Command { program, .. } => find_program(program),
            Target::Pid { pid, .. } => std::fs::read_link(format!("/proc/{pid}/exe")).ok(),
        };
        options.call_graph = match program {
            Some(p) if unwind::keeps_frame_pointers(&p) => CallGraph::FramePointers,
            _ => CallGraph::Dwarf(DEFAULT_STACK_SIZE),
        };
    }
    if options.pages == 0 {
        options.pages = match options.call_graph {
            CallGraph::Dwarf(_) => 1024,
            _ => 128,
        };
    }
    options
}

/// The thread ids of process `pid`.
fn threads(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

/// The mappings of a running process, from `/proc/PID/maps`, as `mmap`
/// records at time 0 (its executable ones: the others hold no code), and
/// its threads' names as `comm` records (the kernel sends one only when a
/// name changes).
fn synthesize(pid: i32, out: &mut Vec<Timed>) {
    for tid in threads(pid) {
        if let Ok(name) = std::fs::read(format!("/proc/{pid}/task/{tid}/comm")) {
            out.push(Timed {
                time: 0,
                record: Record::Comm {
                    pid,
                    tid,
                    name: name.trim_ascii_end().to_vec(),
                    exec: false,
                },
            });
        }
    }
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
        return;
    };
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        let path = w.nth(2).unwrap_or("");
        if !perms.contains('x') {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(a), Ok(b), Ok(offset)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            u64::from_str_radix(offset, 16),
        ) else {
            continue;
        };
        out.push(Timed {
            time: 0,
            record: Record::Mmap {
                pid,
                start: a,
                len: b.saturating_sub(a),
                offset,
                path: path.as_bytes().to_vec(),
            },
        });
    }
}

impl Recording {
    /// The number of samples.
    pub fn samples(&self) -> usize {
        self.records
            .iter()
            .filter(|t| matches!(t.record, Record::Sample { .. }))
            .count()
    }

    /// The distinct threads that were sampled.
    pub fn threads(&self) -> usize {
        let mut tids: Vec<i32> = self
            .records
            .iter()
            .filter_map(|t| match t.record {
                Record::Sample { tid, .. } => Some(tid),
                _ => None,
            })
            .collect();
        tids.sort_unstable();
        tids.dedup();
        tids.len()
    }

    /// Events per sample: the fixed period of a clock at a frequency, the
    /// mean period otherwise.
    pub fn period(&self) -> u64 {
        match self.rate {
            Rate::Period(p) => p,
            Rate::Frequency(hz) if self.event.kind == 1 && self.event.config <= 1 => {
                1_000_000_000 / hz.max(1)
            }
            Rate::Frequency(_) => {
                let (n, sum) = self
                    .records
                    .iter()
                    .fold((0u64, 0u64), |(n, s), t| match t.record {
                        Record::Sample { period, .. } => (n + 1, s.saturating_add(period)),
                        _ => (n, s),
                    });
                sum / n.max(1)
            }
        }
    }

    /// The sampling rate in samples per second, for a clock sampled at a
    /// frequency.
    pub fn clock_hz(&self) -> Option<u32> {
        match self.rate {
            Rate::Frequency(hz) if self.event.kind == 1 && self.event.config <= 1 => {
                u32::try_from(hz).ok()
            }
            Rate::Period(p) if self.event.kind == 1 && self.event.config <= 1 => {
                u32::try_from(1_000_000_000 / p.max(1)).ok()
            }
            _ => None,
        }
    }

    /// The rate in words: `999 Hz` or `every 100000 cycles`.
    pub fn rate_text(&self) -> String {
        match self.rate {
            Rate::Frequency(hz) if self.event.kind == 1 && self.event.config <= 1 => {
                format!("{hz} Hz (a period of {} ns)", 1_000_000_000 / hz.max(1))
            }
            Rate::Frequency(hz) => format!("{hz} Hz (periods adapted by the kernel)"),
            Rate::Period(p) => format!("every {p} {}", self.event.unit),
        }
    }

    /// The profile of whole stacks: one event, each sample costing its
    /// period, with `desc:` lines saying how it was sampled, what was lost
    /// and whether the recording is incomplete.
    pub fn profile(&self) -> Result<Profile<u64>, RecordError> {
        self.profile_of(false)
    }

    /// [`Recording::profile`] with each sample costing 1: sample counts,
    /// as gmon.out and DCPI files hold them.
    pub fn sample_counts(&self) -> Result<Profile<u64>, RecordError> {
        self.profile_of(true)
    }

    fn profile_of(&self, count: bool) -> Result<Profile<u64>, RecordError> {
        let release = kernel_release();
        let mut stacks = SampledStacks::with_symbols(
            Positions::INSTR_LINE,
            b"tally record",
            release.as_deref(),
            self.symbols.clone(),
        );
        stacks.set_cmd(self.cmd.clone().into_bytes());
        // Sample counts are of the on-CPU event only.
        let off_cpu = match self.off_cpu_until {
            Some(until) if !count => Some(offcpu::blocked(&self.records, until)),
            _ => None,
        };
        let (mut blocked, mut off_ns) = (0usize, 0u64);
        for (i, t) in self.records.iter().enumerate() {
            match &t.record {
                Record::SwitchStack {
                    pid,
                    tid,
                    chain,
                    kernel,
                    ..
                } => {
                    if let Some(&ns) = off_cpu.as_ref().and_then(|b| b.get(&i)) {
                        stacks.sample_at(*pid, *tid, t.time, *kernel, chain, 1, ns)?;
                        blocked += 1;
                        off_ns = off_ns.saturating_add(ns);
                    }
                }
                Record::Sample {
                    pid,
                    tid,
                    chain,
                    kernel,
                    period,
                    ..
                } => stacks.sample_at(
                    *pid,
                    *tid,
                    t.time,
                    *kernel,
                    chain,
                    0,
                    if count { 1 } else { *period },
                )?,
                Record::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    path,
                } => stacks.mmap(*pid, *start, *len, *offset, path),
                Record::Comm {
                    pid,
                    tid,
                    name,
                    exec,
                } => {
                    if *exec {
                        stacks.exec(*pid);
                    }
                    stacks.comm(*tid, name);
                }
                Record::Fork { pid, ppid, .. } => stacks.fork(*pid, *ppid),
                _ => {}
            }
        }
        let mut names = vec![self.event.name.to_string()];
        if off_cpu.is_some() {
            names.push(offcpu::EVENT.to_string());
        }
        let mut profile = stacks.finish(names)?;
        let part = &mut profile.parts[0];
        part.info.pid = u64::try_from(self.pid).ok();
        let desc = &mut part.info.desc;
        desc.push((
            b"Sampling".to_vec(),
            format!(
                " {} samples of {} at {}; each sample costs its period, in {}; stacks by {}{}",
                self.samples(),
                self.event.name,
                self.rate_text(),
                self.event.unit,
                match self.call_graph {
                    CallGraph::Dwarf(n) => format!("DWARF unwinding of {n} bytes of stack"),
                    _ => "frame pointers".to_string(),
                },
                if self.user_only {
                    "; user frames only"
                } else {
                    ""
                }
            )
            .into_bytes(),
        ));
        if off_cpu.is_some() {
            desc.push((
                b"Off-CPU".to_vec(),
                format!(
                    " {blocked} blocking switches, {off_ns} ns: each costs the time until its thread ran again, in ns, under the stack it blocked in; preemptions are not counted"
                )
                .into_bytes(),
            ));
        }
        desc.push((
            b"Lost samples".to_vec(),
            format!(" {}", self.lost).into_bytes(),
        ));
        desc.push((
            b"Threads sampled".to_vec(),
            format!(" {}", self.threads()).into_bytes(),
        ));
        if let Some(s) = self.interrupted {
            desc.push((
                b"Incomplete".to_vec(),
                format!(" stopped by {}", signal_name(s)).into_bytes(),
            ));
        }
        if let Ending::Killed(s) = self.ending {
            desc.push((
                b"Program".to_vec(),
                format!(" killed by {}", signal_name(s)).into_bytes(),
            ));
        }
        Ok(profile)
    }
}

/// A signal's name.
pub fn signal_name(s: i32) -> String {
    match s {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        4 => "SIGILL".into(),
        6 => "SIGABRT".into(),
        7 => "SIGBUS".into(),
        8 => "SIGFPE".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sys::flag;

    fn event(name: &str) -> Event {
        Event::named(name).expect(name)
    }

    fn options(rate: Rate, call_graph: CallGraph, follow_children: bool) -> Options {
        Options {
            event: EVENTS[0],
            rate,
            pages: 0,
            call_graph,
            follow_children,
            off_cpu: false,
        }
    }

    #[test]
    fn events_are_found_by_perfs_names() {
        for e in EVENTS {
            assert_eq!(Event::named(e.name), Some(e));
        }
        let b = event("branch-instructions");
        assert_eq!((b.name, b.kind, b.config), ("branches", 0, 4));
        assert_eq!(event("task-clock").config, 1);
        assert!(event("cycles").is_hardware());
        assert!(!event("cpu-clock").is_hardware());
        assert_eq!(Event::named("cpu_clock"), None);
        assert_eq!(Event::named(""), None);
    }

    #[test]
    fn a_command_is_sampled_from_its_exec_at_a_frequency() {
        let o = options(Rate::Frequency(999), CallGraph::FramePointers, false);
        let a = attr(&o, event("cycles"), false, true);
        assert_eq!((a.kind, a.config), (0, 0));
        assert_eq!(a.sample_period_or_freq, 999);
        assert_eq!(a.sample_type, SAMPLE_TYPE);
        for (bit, name) in [
            (flag::DISABLED, "DISABLED"),
            (flag::ENABLE_ON_EXEC, "ENABLE_ON_EXEC"),
            (flag::FREQ, "FREQ"),
            (flag::INHERIT, "INHERIT"),
            (flag::INHERIT_THREAD, "INHERIT_THREAD"),
            (flag::SAMPLE_ID_ALL, "SAMPLE_ID_ALL"),
            (flag::MMAP2, "MMAP2"),
        ] {
            assert_ne!(a.flags & bit, 0, "{name}");
        }
        assert_eq!(a.flags & flag::EXCLUDE_KERNEL, 0);
        assert_eq!(a.sample_stack_user, 0);
        assert_eq!(a.wakeup, 64);
    }

    #[test]
    fn an_attached_process_is_sampled_at_once_every_period() {
        let o = options(Rate::Period(250_000), CallGraph::FramePointers, true);
        let a = attr(&o, event("instructions"), true, false);
        assert_eq!((a.kind, a.config), (0, 1));
        assert_eq!(a.sample_period_or_freq, 250_000);
        assert_eq!(a.flags & (flag::DISABLED | flag::ENABLE_ON_EXEC), 0);
        assert_eq!(a.flags & flag::FREQ, 0);
        assert_ne!(a.flags & flag::EXCLUDE_KERNEL, 0);
        // Children followed: forked processes inherit the event too.
        assert_eq!(a.flags & flag::INHERIT_THREAD, 0);
        assert_ne!(a.flags & flag::INHERIT, 0);
    }

    #[test]
    fn dwarf_samples_copy_the_stack_in_whole_words() {
        let o = options(Rate::Frequency(99), CallGraph::Dwarf(1001), false);
        let a = attr(&o, EVENTS[0], false, true);
        assert_eq!(a.sample_type, DWARF_SAMPLE_TYPE);
        assert_eq!(a.sample_stack_user, 1000);
        assert_eq!(a.sample_regs_user, REGS_USER);
        assert_ne!(a.flags & flag::EXCLUDE_CALLCHAIN_USER, 0);
        assert_eq!(a.wakeup, 8);
    }

    #[test]
    fn resolve_sizes_the_buffers_for_the_stacks() {
        let target = Target::Command {
            program: PathBuf::from("/nonexistent/prog"),
            args: vec!["prog".into()],
        };
        let fp = options(Rate::Frequency(99), CallGraph::FramePointers, false);
        assert_eq!(resolve(&target, &fp).pages, 128);
        let dwarf = options(Rate::Frequency(99), CallGraph::Dwarf(4096), false);
        let r = resolve(&target, &dwarf);
        assert_eq!((r.pages, r.call_graph), (1024, CallGraph::Dwarf(4096)));
        let given = Options { pages: 16, ..fp };
        assert_eq!(resolve(&target, &given).pages, 16);
        // Auto, for a program that cannot be read: DWARF, the safe choice.
        let auto = options(Rate::Frequency(99), CallGraph::Auto, false);
        let r = resolve(&target, &auto);
        assert_eq!(r.call_graph, CallGraph::Dwarf(DEFAULT_STACK_SIZE));
        assert_eq!(r.pages, 1024);
    }

    #[test]
    fn programs_are_found_in_path_unless_they_name_a_path() {
        let sh = find_program(Path::new("sh")).expect("sh in PATH");
        assert!(sh.is_absolute() || sh.components().count() > 1, "{sh:?}");
        assert!(sh.is_file());
        assert_eq!(sh.file_name().unwrap(), "sh");
        assert_eq!(
            find_program(Path::new("./no/such")),
            Some(PathBuf::from("./no/such"))
        );
        assert_eq!(
            find_program(Path::new("/no/such")),
            Some(PathBuf::from("/no/such"))
        );
        assert_eq!(find_program(Path::new("tally-no-such-program-here")), None);
    }

    #[test]
    fn this_process_has_its_threads_and_executable_mappings() {
        let pid = std::process::id() as i32;
        assert!(threads(pid).contains(&pid));
        assert!(threads(-1).is_empty());
        let mut out = Vec::new();
        synthesize(pid, &mut out);
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let exe = exe.as_os_str().as_encoded_bytes();
        assert!(
            out.iter().any(|t| matches!(
                &t.record,
                Record::Mmap { pid: p, path, len, .. } if *p == pid && path == exe && *len > 0
            )),
            "the test program's code is mapped"
        );
        assert!(out.iter().all(|t| t.time == 0));
        let me = std::fs::read(format!("/proc/{pid}/comm")).unwrap();
        assert!(out.iter().any(|t| matches!(
            &t.record,
            Record::Comm { tid, name, .. } if *tid == pid && *name == me.trim_ascii_end()
        )));
    }

    #[test]
    fn samples_keep_their_time_and_named_thread() {
        let mut records = records();
        for (i, r) in records.iter_mut().enumerate() {
            r.time = 1000 - i as u64;
        }
        records.insert(
            1,
            Timed {
                time: 0,
                record: Record::Comm {
                    pid: 10,
                    tid: 10,
                    name: b"prog".to_vec(),
                    exec: true,
                },
            },
        );
        records.push(Timed {
            time: 5,
            record: Record::Comm {
                pid: 10,
                tid: 11,
                name: b"worker".to_vec(),
                exec: false,
            },
        });
        let p = recording(event("cpu-clock"), Rate::Frequency(1000), records)
            .profile()
            .unwrap();
        let t = p.stacks.as_ref().unwrap().timeline.as_ref().unwrap();
        assert_eq!(t.times, [997, 998, 999]);
        let names: Vec<&[u8]> = t
            .thread
            .iter()
            .map(|&i| &t.threads[i as usize].name[..])
            .collect();
        assert_eq!(names, [&b"worker"[..], b"worker", b"prog"]);
        assert_eq!(t.costs, [4_000, 5_000, 3_000]);
    }

    fn sample(pid: i32, tid: i32, chain: &[u64], period: u64) -> Timed {
        Timed {
            time: 0,
            record: Record::Sample {
                pid,
                tid,
                chain: chain.to_vec(),
                kernel: false,
                period,
                stack: None,
            },
        }
    }

    fn recording(event: Event, rate: Rate, records: Vec<Timed>) -> Recording {
        Recording {
            records,
            event,
            rate,
            lost: 0,
            ending: Ending::Exited(0),
            interrupted: None,
            user_only: false,
            notes: Vec::new(),
            cmd: "prog 1".into(),
            pid: 10,
            call_graph: CallGraph::FramePointers,
            program: Some(PathBuf::from("/nonexistent/prog")),
            started: std::time::UNIX_EPOCH,
            symbols: Default::default(),
            off_cpu_until: None,
        }
    }

    /// Samples of two threads of process 10 in `/nonexistent/prog`
    /// mapped at 0x400000: its file offsets stand for its addresses.
    fn records() -> Vec<Timed> {
        vec![
            Timed {
                time: 0,
                record: Record::Mmap {
                    pid: 10,
                    start: 0x40_0000,
                    len: 0x1_0000,
                    offset: 0,
                    path: b"/nonexistent/prog".to_vec(),
                },
            },
            sample(10, 10, &[0x40_0010, 0x40_0020], 3_000),
            sample(10, 11, &[0x40_0010, 0x40_0020], 5_000),
            sample(10, 11, &[0x40_0030], 4_000),
        ]
    }

    #[test]
    fn periods_and_rates_of_clocks_and_counters() {
        let clock = recording(event("cpu-clock"), Rate::Frequency(1000), records());
        assert_eq!(clock.period(), 1_000_000);
        assert_eq!(clock.clock_hz(), Some(1000));
        assert_eq!(clock.rate_text(), "1000 Hz (a period of 1000000 ns)");
        let fixed = recording(event("task-clock"), Rate::Period(250_000), records());
        assert_eq!(fixed.period(), 250_000);
        assert_eq!(fixed.clock_hz(), Some(4000));
        // A counter at a frequency: the mean of the kernel's periods.
        let cycles = recording(event("cycles"), Rate::Frequency(1000), records());
        assert_eq!(cycles.period(), 4_000);
        assert_eq!(cycles.clock_hz(), None);
        assert_eq!(
            cycles.rate_text(),
            "1000 Hz (periods adapted by the kernel)"
        );
        let every = recording(event("cache-misses"), Rate::Period(100), records());
        assert_eq!(every.rate_text(), "every 100 misses");
        assert_eq!(every.clock_hz(), None);
        // No samples: no division by zero.
        assert_eq!(
            recording(event("cycles"), Rate::Frequency(1), Vec::new()).period(),
            0
        );
    }

    #[test]
    fn samples_and_threads_are_counted() {
        let r = recording(EVENTS[0], Rate::Frequency(99), records());
        assert_eq!(r.samples(), 3);
        assert_eq!(r.threads(), 2);
        let empty = recording(EVENTS[0], Rate::Frequency(99), Vec::new());
        assert_eq!((empty.samples(), empty.threads()), (0, 0));
    }

    fn desc(p: &Profile<u64>, key: &str) -> Option<String> {
        p.parts[0]
            .info
            .desc
            .iter()
            .find(|(k, _)| k == key.as_bytes())
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    }

    #[test]
    fn the_profile_costs_periods_and_says_how_it_was_taken() {
        let mut r = recording(event("cpu-clock"), Rate::Frequency(1000), records());
        r.lost = 7;
        r.interrupted = Some(2);
        r.ending = Ending::Killed(11);
        let p = r.profile().unwrap();
        assert_eq!(p.events.recorded()[0].name, "cpu-clock");
        assert_eq!(p.totals(), Some(vec![12_000]));
        assert_eq!(p.parts[0].info.pid, Some(10));
        assert_eq!(desc(&p, "Lost samples").as_deref(), Some(" 7"));
        assert_eq!(desc(&p, "Threads sampled").as_deref(), Some(" 2"));
        assert_eq!(
            desc(&p, "Incomplete").as_deref(),
            Some(" stopped by SIGINT")
        );
        assert_eq!(desc(&p, "Program").as_deref(), Some(" killed by SIGSEGV"));
        let sampling = desc(&p, "Sampling").unwrap();
        assert!(
            sampling.starts_with(" 3 samples of cpu-clock at 1000 Hz"),
            "{sampling}"
        );
        assert!(sampling.ends_with("stacks by frame pointers"), "{sampling}");
        // Counted: each sample is 1.
        assert_eq!(r.sample_counts().unwrap().totals(), Some(vec![3]));
    }

    #[test]
    fn off_cpu_time_is_a_second_event_under_the_blocking_stack() {
        let mut records = records();
        let at = |time, record| Timed { time, record };
        let switch = |out| Record::Switch {
            pid: 10,
            tid: 11,
            out,
            preempt: false,
        };
        records.extend([
            at(
                10,
                Record::SwitchStack {
                    pid: 10,
                    tid: 11,
                    chain: vec![0x40_0040, 0x40_0020],
                    kernel: false,
                    stack: None,
                },
            ),
            at(11, switch(true)),
            at(7_011, switch(false)),
        ]);
        let mut r = recording(event("cpu-clock"), Rate::Frequency(1000), records);
        r.off_cpu_until = Some(10_000);
        let p = r.profile().unwrap();
        let names: Vec<&str> = p.events.recorded().iter().map(|e| &*e.name).collect();
        assert_eq!(names, ["cpu-clock", "off-cpu"]);
        assert_eq!(p.totals(), Some(vec![12_000, 7_000]));
        let off = desc(&p, "Off-CPU").unwrap();
        assert!(off.starts_with(" 1 blocking switches, 7000 ns"), "{off}");
        // Sample counts are of the on-CPU event alone.
        assert_eq!(r.sample_counts().unwrap().totals(), Some(vec![3]));
    }

    #[test]
    fn a_complete_profile_says_nothing_of_an_ending() {
        let mut r = recording(EVENTS[0], Rate::Frequency(99), records());
        r.user_only = true;
        r.call_graph = CallGraph::Dwarf(8192);
        let p = r.profile().unwrap();
        assert_eq!(desc(&p, "Incomplete"), None);
        assert_eq!(desc(&p, "Program"), None);
        let sampling = desc(&p, "Sampling").unwrap();
        assert!(
            sampling.ends_with("DWARF unwinding of 8192 bytes of stack; user frames only"),
            "{sampling}"
        );
    }

    #[test]
    fn signals_are_named() {
        assert_eq!(signal_name(2), "SIGINT");
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(13), "SIGPIPE");
        assert_eq!(signal_name(15), "SIGTERM");
        assert_eq!(signal_name(64), "signal 64");
    }
}
