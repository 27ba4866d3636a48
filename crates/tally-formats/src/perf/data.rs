//! `perf.data`, the file `perf record` writes, read with the
//! `linux-perf-data` crate and symbolised here as `perf report` does.
//!
//! Each sample has an instruction pointer and, with `perf record -g`, a
//! call chain (leaf first, with context markers saying whether the
//! following addresses are kernel or user ones). A user address is mapped
//! through the process's `mmap` records (copied on `fork`, dropped on
//! `exec`) to an object file and an offset in it, and from there to the
//! ELF address, the function (its symbol) and, where the object has DWARF,
//! the line ([`super::samples`], shared with `tally record`). Each event of
//! the file is a recorded event of the profile; a sample's cost is its
//! period, as `perf report` counts overhead. Samples with a time
//! (`perf record` takes them by default) make the profile's timeline, their
//! threads named by the `comm` records.
//!
//! Samples of `perf record --call-graph dwarf` carry the user registers and
//! a copy of the top of the user stack instead of the user call chain;
//! they are unwound with tally-symbols' unwinder (the one `tally record
//! --call-graph dwarf` uses) through the call frame information of the
//! object files the `mmap` records name, read from this machine, as
//! `perf report` reads them. An object file that cannot be read ends the
//! stacks that pass through it, as in `perf report`. The unwinder knows
//! x86-64's registers only: such samples of another architecture are
//! refused.

use super::preload::Preloader;
use super::samples::SampledStacks;
use crate::error::Error;
use linux_perf_data::linux_perf_event_reader::{
    CpuMode, EventRecord, RawEventRecord, RecordType, constants,
};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use std::cell::Cell;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;
use tally_model::{Positions, Profile};
use tally_symbols::unwind::{CONTEXT_USER, Unwinders, UserStack};

/// `PERF_REG_X86_BP`, `SP` and `IP`: the registers an unwinder starts from.
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;

/// The user registers and stack of a DWARF sample, if it has them.
fn user_stack(s: &linux_perf_data::linux_perf_event_reader::SampleRecord<'_>) -> Option<UserStack> {
    let regs = s.user_regs.as_ref()?;
    let (data, dyn_size) = s.user_stack.as_ref()?;
    let bytes = data.as_slice();
    let n = usize::try_from(*dyn_size).map_or(bytes.len(), |d| d.min(bytes.len()));
    Some(UserStack {
        bp: regs.get(REG_BP)?,
        sp: regs.get(REG_SP)?,
        ip: regs.get(REG_IP)?,
        bytes: bytes[..n].to_vec(),
    })
}

/// A cursor that tells how far the reader got, for the byte offset of an
/// error (the reader owns the cursor).
struct Tracked<'a> {
    inner: std::io::Cursor<&'a [u8]>,
    furthest: Rc<Cell<u64>>,
}

impl Read for Tracked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let pos = self.inner.position();
        if pos > self.furthest.get() {
            self.furthest.set(pos);
        }
        Ok(n)
    }
}

impl Seek for Tracked<'_> {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

/// Checks the fixed header before the parser sees it: the parser divides
/// by the attribute size and trusts the sections' bounds, so a zero size
/// or a section past the end must be refused here, with its offset.
fn check_header(bytes: &[u8]) -> Result<(), (String, u64)> {
    const LEN: usize = 104;
    if bytes.len() < LEN {
        return Err((
            format!(
                "the perf.data file is truncated ({} bytes; its header takes {LEN})",
                bytes.len()
            ),
            bytes.len() as u64,
        ));
    }
    let big = match &bytes[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Err(("not a perf.data file (no `PERFILE2` magic)".into(), 0)),
    };
    let word = |at: usize| {
        let b: [u8; 8] = bytes[at..at + 8].try_into().unwrap_or([0; 8]);
        if big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        }
    };
    if word(16) == 0 {
        return Err(("malformed perf.data: the attribute size is 0".into(), 16));
    }
    let total = bytes.len() as u64;
    for (at, what) in [(24, "attribute"), (40, "data"), (56, "event type")] {
        let end = word(at).checked_add(word(at + 8));
        if end.is_none_or(|e| e > total) {
            return Err((
                format!(
                    "the perf.data file is truncated ({total} bytes): its {what} section ends at {}",
                    end.map_or_else(|| "past 2^64".into(), |e| e.to_string())
                ),
                at as u64,
            ));
        }
    }
    Ok(())
}

/// Feature bits whose sections the parser reads with counts it trusts:
/// `HEADER_CMDLINE` (a string list) and `HEADER_EVENT_DESC` (attributes,
/// names and ids).
const FEATURE_CMDLINE: usize = 11;
const FEATURE_EVENT_DESC: usize = 12;

/// Checks what the parser sizes allocations by before it sees it (a count
/// of 2^32 − 1 would be a vector of hundreds of gigabytes, an abort, not
/// an error): every feature section within the file, the command line's
/// and the event descriptions' counts and lengths within their section,
/// the event types' id sections within the file. Run after
/// [`check_header`].
fn check_sections(bytes: &[u8]) -> Result<(), (String, u64)> {
    let big = &bytes[..8] == b"2ELIFREP";
    let total = bytes.len() as u64;
    let int = |at: u64, n: usize| -> Option<u64> {
        let at = usize::try_from(at).ok()?;
        let b = bytes.get(at..at.checked_add(n)?)?;
        let mut v = 0u64;
        for i in 0..n {
            let byte = if big { b[i] } else { b[n - 1 - i] };
            v = (v << 8) | u64::from(byte);
        }
        Some(v)
    };
    let word = |at: u64| int(at, 8);
    let cut = |what: &str, at: u64| {
        (
            format!(
                "the perf.data file is truncated ({total} bytes): its {what} goes past its end"
            ),
            at.min(total),
        )
    };
    // The feature sections' table follows the data section.
    let table = word(40).unwrap_or(0).saturating_add(word(48).unwrap_or(0));
    let mut sections = Vec::new();
    let mut entry = table;
    for bit in 0..256 {
        let set = bytes[72 + bit / 8] & (1 << (bit % 8)) != 0;
        if !set {
            continue;
        }
        let (Some(off), Some(size)) = (word(entry), entry.checked_add(8).and_then(word)) else {
            return Err(cut("table of feature sections", entry));
        };
        if off.checked_add(size).is_none_or(|e| e > total) {
            return Err(cut(&format!("feature section {bit}"), entry));
        }
        sections.push((bit, off, size));
        entry += 16;
    }
    // A count can point far past the file: name the last byte then.
    let malformed = |what: String, at: u64| (format!("malformed perf.data: {what}"), at.min(total));
    for &(bit, off, size) in &sections {
        let end = off + size;
        // A u32 at `at` within the section, or the error.
        let u32_at = |at: u64, what: &str| -> Result<u64, (String, u64)> {
            if at + 4 > end {
                return Err(malformed(
                    format!("feature section {bit} ends inside its {what}"),
                    at,
                ));
            }
            int(at, 4).ok_or_else(|| cut(&format!("feature section {bit}"), at))
        };
        // Skips a length-prefixed string.
        let string = |at: u64| -> Result<u64, (String, u64)> {
            let len = u32_at(at, "string length")?;
            let next = at + 4 + len;
            if next > end {
                return Err(malformed(
                    format!(
                        "a string of feature section {bit} ({len} bytes) goes past the section"
                    ),
                    at,
                ));
            }
            Ok(next)
        };
        if bit == FEATURE_CMDLINE {
            let n = u32_at(off, "string count")?;
            let mut at = off + 4;
            for _ in 0..n {
                at = string(at)?;
            }
        } else if bit == FEATURE_EVENT_DESC {
            let n = u32_at(off, "event count")?;
            let attr_size = u32_at(off + 4, "attribute size")?;
            // `PERF_ATTR_SIZE_VER0`: no attribute is smaller.
            if attr_size < 64 {
                return Err(malformed(
                    format!("the event descriptions' attribute size is {attr_size} (at least 64)"),
                    off + 4,
                ));
            }
            let mut at = off + 8;
            for _ in 0..n {
                at += attr_size;
                let ids = u32_at(at, "id count")?;
                at = string(at + 4)?;
                at += 8 * ids;
                if at > end {
                    return Err(malformed(
                        format!("the event descriptions ({n}) go past their section"),
                        off,
                    ));
                }
            }
        }
    }
    // Old files: attributes in the event types section, each followed by
    // the section of its ids.
    let (attr_size, types, types_size) = (
        word(16).unwrap_or(1),
        word(56).unwrap_or(0),
        word(64).unwrap_or(0),
    );
    if types_size != 0 && !sections.iter().any(|s| s.0 == FEATURE_EVENT_DESC) {
        let step = attr_size.saturating_add(16);
        for i in 0..types_size / step {
            let at = types + i * step + attr_size;
            let (Some(o), Some(n)) = (word(at), word(at + 8)) else {
                return Err(cut("event type section", at));
            };
            if o.checked_add(n).is_none_or(|e| e > total) {
                return Err(cut("ids section of an event type", at));
            }
        }
    }
    Ok(())
}

/// The length of an MMAP2 record's build id when it is over the 20 bytes
/// the record has room for: the parser asserts on it (a panic), so it is
/// checked first.
fn oversized_build_id(record: &RawEventRecord<'_>) -> Option<u8> {
    if record.record_type != RecordType::MMAP2
        || record.misc & constants::PERF_RECORD_MISC_MMAP_BUILD_ID == 0
    {
        return None;
    }
    // pid, tid (4 bytes each), address, length, page offset (8 each).
    let n = *record.data.get(32..33)?.as_slice().first()?;
    (n > 20).then_some(n)
}

/// Reads a perf.data file held in `bytes`.
pub fn read(path: &Path, bytes: &[u8]) -> Result<Profile<u64>, Error> {
    let furthest = Rc::new(Cell::new(0u64));
    let total = bytes.len() as u64;
    let fail = |message: String, at: u64| Error::Binary {
        path: path.to_path_buf(),
        offset: at,
        message,
    };
    let broken = |e: linux_perf_data::Error, at: u64| {
        let cut = at >= total
            || matches!(&e, linux_perf_data::Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof);
        if cut {
            fail(
                format!(
                    "the perf.data file is truncated ({total} bytes; its data goes on past its end): {e}"
                ),
                at.min(total),
            )
        } else {
            fail(format!("malformed perf.data: {e}"), at)
        }
    };
    check_header(bytes)
        .and_then(|()| check_sections(bytes))
        .map_err(|(message, at)| fail(message, at))?;
    let reader = Tracked {
        inner: std::io::Cursor::new(bytes),
        furthest: furthest.clone(),
    };
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader).map_err(|e| broken(e, furthest.get()))?;

    let names: Vec<String> = perf_file
        .event_attributes()
        .iter()
        .enumerate()
        .map(|(i, a)| a.name().map_or_else(|| format!("event{i}"), str::to_string))
        .collect();
    let release = perf_file.os_release().ok().flatten().map(str::to_string);
    // Kernel frames are named only on the kernel the samples were taken
    // on, and only events that count in the kernel have them.
    let user_only = perf_file.event_attributes().iter().all(|a| {
        a.attr
            .flags
            .contains(linux_perf_data::linux_perf_event_reader::AttrFlags::EXCLUDE_KERNEL)
    });
    let mut preload = Preloader::start(release.clone().filter(|_| !user_only));
    let symbols = preload.symbols();
    let cmd = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|c| c.join(" ").into_bytes());
    let arch = perf_file.arch().ok().flatten().map(str::to_string);
    let mut applier = Applier {
        stacks: SampledStacks::with_symbols(
            Positions::INSTR_LINE,
            b"perf record",
            release.as_deref(),
            symbols,
        ),
        unwinders: Lazy::default(),
        chain: Vec::new(),
    };
    if let Some(cmd) = cmd {
        applier.stacks.set_cmd(cmd);
    }
    // Decoding and symbolising run on two cores: this thread decodes
    // records into batches, another symbolises them in order.
    let mut decode = |emit: &mut dyn FnMut(Batch) -> bool| -> Result<(), Error> {
        let mut batch = Batch::default();
        loop {
            let record = match record_iter.next_record(&mut perf_file) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(e) => return Err(broken(e, furthest.get())),
            };
            let PerfFileRecord::EventRecord { attr_index, record } = record else {
                continue;
            };
            if let Some(n) = oversized_build_id(&record) {
                return Err(fail(
                    format!("an MMAP2 record gives a build id of {n} bytes (at most 20)"),
                    furthest.get(),
                ));
            }
            let parsed = match record.parse() {
                Ok(p) => p,
                Err(e) => return Err(broken(e.into(), furthest.get())),
            };
            let mut mmap = |pid, start, len, offset, path: &[u8]| {
                preload.object(path);
                let path = batch.bytes(path);
                batch.events.push(Event::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    path,
                });
            };
            match parsed {
                EventRecord::Mmap(m) => mmap(
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    &m.path.as_slice(),
                ),
                EventRecord::Mmap2(m) => mmap(
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    &m.path.as_slice(),
                ),
                EventRecord::Fork(f) => batch.events.push(Event::Fork(f.pid, f.ppid)),
                EventRecord::Comm(c) => {
                    let name = batch.bytes(&c.name.as_slice());
                    batch.events.push(Event::Comm {
                        pid: c.pid,
                        tid: c.tid,
                        exec: c.is_execve,
                        name,
                    });
                }
                EventRecord::Sample(s) => {
                    let from = batch.chains.len();
                    match &s.callchain {
                        Some(c) if !c.is_empty() => {
                            for i in 0..c.len() {
                                batch.chains.extend(c.get(i));
                            }
                        }
                        _ => batch.chains.extend(s.ip),
                    }
                    let stack = user_stack(&s).map(Box::new);
                    if stack.is_some() && arch.as_deref().is_some_and(|a| a != "x86_64") {
                        return Err(fail(
                            format!(
                                "its samples carry user stacks to unwind (`perf record --call-graph dwarf`), and tally unwinds x86-64 stacks only, not {}",
                                arch.as_deref().unwrap_or_default()
                            ),
                            furthest.get(),
                        ));
                    }
                    let pid = s.pid.unwrap_or(-1);
                    batch.events.push(Event::Sample {
                        pid,
                        tid: s.tid.unwrap_or(pid),
                        time: s.timestamp,
                        kernel: matches!(s.cpu_mode, CpuMode::Kernel | CpuMode::GuestKernel),
                        chain: from..batch.chains.len(),
                        event: attr_index,
                        period: s.period.unwrap_or(1),
                        stack,
                        at: furthest.get(),
                    });
                }
                _ => {}
            }
            if batch.events.len() >= BATCH && !emit(std::mem::take(&mut batch)) {
                return Ok(());
            }
        }
        emit(batch);
        Ok(())
    };
    let applied = std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let applier = &mut applier;
        let worker = scope.spawn(move || {
            for batch in rx {
                applier.apply(&batch)?;
            }
            Ok(())
        });
        let decoded = decode(&mut |b| tx.send(b).is_ok());
        drop(tx);
        let applied = worker
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        decoded.map(|()| applied)
    });
    drop(preload);
    applied?.map_err(|(message, at)| fail(message, at))?;
    applier
        .stacks
        .finish(names)
        .map_err(|e| fail(e.to_string(), 0))
}

/// Records decoded per batch handed from the decoding thread to the
/// symbolising one.
const BATCH: usize = 4096;

/// Decoded records, in file order, with their variable-length parts.
#[derive(Default)]
struct Batch {
    events: Vec<Event>,
    /// The samples' call chains, one after the other.
    chains: Vec<u64>,
    /// Paths and names, one after the other.
    text: Vec<u8>,
}

impl Batch {
    fn bytes(&mut self, b: &[u8]) -> std::ops::Range<usize> {
        let from = self.text.len();
        self.text.extend_from_slice(b);
        from..self.text.len()
    }
}

/// A record that symbolising reads.
enum Event {
    Mmap {
        pid: i32,
        start: u64,
        len: u64,
        offset: u64,
        path: std::ops::Range<usize>,
    },
    Fork(i32, i32),
    Comm {
        pid: i32,
        tid: i32,
        exec: bool,
        name: std::ops::Range<usize>,
    },
    Sample {
        pid: i32,
        tid: i32,
        time: Option<u64>,
        kernel: bool,
        chain: std::ops::Range<usize>,
        event: usize,
        period: u64,
        stack: Option<Box<UserStack>>,
        /// How far the reader had got, for the offset of an error.
        at: u64,
    },
}

/// Symbolises decoded records into stacks.
struct Applier {
    stacks: SampledStacks,
    unwinders: Lazy,
    chain: Vec<u64>,
}

impl Applier {
    /// Applies a batch; an error is its message and byte offset.
    fn apply(&mut self, batch: &Batch) -> Result<(), (String, u64)> {
        let Applier {
            stacks,
            unwinders,
            chain,
        } = self;
        for event in &batch.events {
            match event {
                Event::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    path,
                } => {
                    let p = &batch.text[path.clone()];
                    stacks.mmap(*pid, *start, *len, *offset, p);
                    unwinders.mmap(*pid, *start, *len, *offset, p);
                }
                Event::Fork(pid, ppid) => {
                    stacks.fork(*pid, *ppid);
                    unwinders.fork(*pid, *ppid);
                }
                Event::Comm {
                    pid,
                    tid,
                    exec,
                    name,
                } => {
                    if *exec {
                        stacks.exec(*pid);
                        unwinders.exec(*pid);
                    }
                    stacks.comm(*tid, &batch.text[name.clone()]);
                }
                Event::Sample {
                    pid,
                    tid,
                    time,
                    kernel,
                    chain: range,
                    event,
                    period,
                    stack,
                    at,
                } => {
                    let (pid, kernel) = (*pid, *kernel);
                    let mut addresses = &batch.chains[range.clone()];
                    if let Some(stack) = stack {
                        chain.clear();
                        chain.extend_from_slice(addresses);
                        let u = unwinders.get();
                        // The kernel's part, then the unwound user part.
                        if let Some(user) = chain.iter().position(|&a| a == CONTEXT_USER) {
                            chain.truncate(user);
                        } else if !kernel {
                            chain.clear();
                        }
                        u.unwind(pid, stack, chain);
                        addresses = chain;
                    }
                    match time {
                        Some(time) => {
                            stacks.sample_at(pid, *tid, *time, kernel, addresses, *event, *period)
                        }
                        None => stacks.sample(pid, kernel, addresses, *event, *period),
                    }
                    .map_err(|e| (e.to_string(), *at))?;
                }
            }
        }
        Ok(())
    }
}

/// The unwinders of the processes, made at the first sample with a user
/// stack from the mappings and forks seen so far: most perf.data files
/// have none, and reading the call frame information of every object they
/// map would be wasted.
#[derive(Default)]
struct Lazy {
    made: Option<Unwinders>,
    /// Until then: mappings (pid, start, length, offset, path) and forks
    /// (pid, parent), in order.
    changes: Vec<Change>,
}

enum Change {
    Mmap(i32, u64, u64, u64, Vec<u8>),
    Fork(i32, i32),
}

impl Lazy {
    fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        match &mut self.made {
            Some(u) => u.mmap(pid, start, len, offset, path),
            None => self
                .changes
                .push(Change::Mmap(pid, start, len, offset, path.to_vec())),
        }
    }

    fn fork(&mut self, pid: i32, ppid: i32) {
        match &mut self.made {
            Some(u) => u.fork(pid, ppid),
            None => self.changes.push(Change::Fork(pid, ppid)),
        }
    }

    fn exec(&mut self, pid: i32) {
        match &mut self.made {
            Some(u) => u.exec(pid),
            None => self.changes.retain(|c| match c {
                Change::Mmap(p, ..) | Change::Fork(p, _) => *p != pid,
            }),
        }
    }

    fn get(&mut self) -> &mut Unwinders {
        let changes = &mut self.changes;
        self.made.get_or_insert_with(|| {
            let mut u = Unwinders::default();
            for c in changes.drain(..) {
                match c {
                    Change::Mmap(pid, start, len, offset, path) => {
                        u.mmap(pid, start, len, offset, &path)
                    }
                    Change::Fork(pid, ppid) => u.fork(pid, ppid),
                }
            }
            u
        })
    }
}

/// perf.data, as a reader of the one shape
/// ([`crate::ReadProfile`]).
pub struct PerfData;

impl crate::shape::ReadProfile for PerfData {
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<tally_model::AnyProfile, Error> {
        crate::shape::unsigned(read(path, bytes))
    }
}
