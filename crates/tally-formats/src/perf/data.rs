//! `perf.data`, the file `perf record` writes, read with the
//! `linux-perf-data` crate and symbolised here as `perf report` does.
//!
//! Each sample has an instruction pointer and, with `perf record -g`, a
//! call chain (leaf first, with context markers saying whether the
//! following addresses are kernel or user ones). A user address is mapped
//! through the process's `mmap` records (copied on `fork`, dropped on
//! `exec`) to an object file and an offset in it, and from there to the
//! ELF address, the function (its symbol) and, where the object has DWARF,
//! the line. Kernel addresses are named from `/proc/kallsyms` when the file
//! was recorded on the running kernel and the addresses are readable
//! (`kptr_restrict`), with the object `[kernel.kallsyms]`. An address no
//! symbol covers is the function `[unknown]` of its object. Each event of
//! the file is a recorded event of the profile; a sample's cost is its
//! period, as `perf report` counts overhead.

use crate::error::Error;
use crate::stacked::StackProfile;
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord};
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;
use tally_model::{Events, FrameId, FunctionId, Positions, Profile};
use tally_symbols::ObjectFile;

/// Call-chain values at or above this are context markers, not addresses
/// (`PERF_CONTEXT_MAX` is -4095).
const CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PERF_CONTEXT_KERNEL`.
const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// The object kernel frames belong to, as perf names it.
const KERNEL: &[u8] = b"[kernel.kallsyms]";
/// The function of an address no symbol covers.
const UNKNOWN: &[u8] = b"[unknown]";

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

/// A mapping of a file into a process.
#[derive(Clone, Copy)]
struct Map {
    end: u64,
    offset: u64,
    object: usize,
}

/// The kernel's symbols, by address.
struct Kallsyms {
    starts: Vec<u64>,
    names: Vec<String>,
}

impl Kallsyms {
    /// `/proc/kallsyms`, if `release` is the running kernel's and the
    /// addresses are shown.
    fn load(release: Option<&str>) -> Option<Kallsyms> {
        let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        if release? != running.trim() {
            return None;
        }
        let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_ascii_whitespace();
                let addr = u64::from_str_radix(w.next()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                (addr != 0 && matches!(kind, "t" | "T" | "w" | "W"))
                    .then(|| (addr, name.to_string()))
            })
            .collect();
        if syms.is_empty() {
            return None;
        }
        syms.sort();
        let (starts, names) = syms.into_iter().unzip();
        Some(Kallsyms { starts, names })
    }

    fn name(&self, addr: u64) -> Option<&str> {
        let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
        Some(&self.names[i])
    }
}

/// Symbolises addresses into frames, with caches.
struct Symbolizer {
    /// Object paths, and the parsed files (`None`: cannot be read).
    objects: Vec<(Vec<u8>, Option<ObjectFile>)>,
    object_index: FxHashMap<Vec<u8>, usize>,
    /// Mappings of each process, by start address.
    maps: FxHashMap<i32, BTreeMap<u64, Map>>,
    kallsyms: Option<Kallsyms>,
    /// (object, ELF address, leaf) → frame.
    frames: FxHashMap<(usize, u64, bool), FrameId>,
    kernel_frames: FxHashMap<u64, FrameId>,
    /// (object, symbol start) → function.
    functions: FxHashMap<(usize, u64), FunctionId>,
}

impl Symbolizer {
    fn object(&mut self, path: &[u8]) -> usize {
        if let Some(&i) = self.object_index.get(path) {
            return i;
        }
        let file = std::str::from_utf8(path)
            .ok()
            .filter(|p| p.starts_with('/'))
            .and_then(|p| ObjectFile::open(Path::new(p)).ok());
        self.objects.push((path.to_vec(), file));
        self.object_index
            .insert(path.to_vec(), self.objects.len() - 1);
        self.objects.len() - 1
    }

    fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        let object = self.object(path);
        let end = start.saturating_add(len);
        let maps = self.maps.entry(pid).or_default();
        // A new mapping replaces whatever it overlaps.
        let overlapping: Vec<u64> = maps
            .range(..end)
            .filter(|(_, m)| m.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            maps.remove(&s);
        }
        maps.insert(
            start,
            Map {
                end,
                offset,
                object,
            },
        );
    }

    /// The frame of user address `addr` in process `pid`; `leaf` for the
    /// sampled instruction itself (a caller's address is a return address,
    /// whose line is looked up one byte back, on the call).
    fn user(&mut self, b: &mut StackProfile, pid: i32, addr: u64, leaf: bool) -> Option<FrameId> {
        let map = self
            .maps
            .get(&pid)
            .and_then(|m| m.range(..=addr).next_back())
            .filter(|(_, m)| addr < m.end)
            .map(|(&start, m)| (start, *m));
        let Some((start, map)) = map else {
            let f = b.function(UNKNOWN, b"", UNKNOWN)?;
            return Some(b.frame(f, 0, addr));
        };
        let file_offset = addr - start + map.offset;
        let object = map.object;
        let elf = match &self.objects[object].1 {
            Some(o) => o
                .code_ranges()
                .find(|&(s, e, off)| off <= file_offset && file_offset - off < e - s)
                .map(|(s, _, off)| file_offset - off + s),
            None => None,
        };
        let elf_addr = elf.unwrap_or(file_offset);
        if let Some(&f) = self.frames.get(&(object, elf_addr, leaf)) {
            return Some(f);
        }
        let path = self.objects[object].0.clone();
        let symbol = elf.and_then(|a| {
            let o = self.objects[object].1.as_ref()?;
            let s = o.symbol_at(a)?;
            Some((s.address, s.display_name().to_string()))
        });
        let (function, line) = match symbol {
            Some((sym_start, name)) => {
                let o = self.objects[object]
                    .1
                    .as_ref()
                    .expect("symbol from the file");
                let line = o
                    .source_line(if leaf {
                        elf_addr
                    } else {
                        elf_addr.saturating_sub(1)
                    })
                    .map_or(0, |(_, l)| l);
                let f = match self.functions.get(&(object, sym_start)) {
                    Some(&f) => f,
                    None => {
                        let file = o.source_line(sym_start).map(|(f, _)| f).unwrap_or_default();
                        let f = b.function(&path, file.as_bytes(), name.as_bytes())?;
                        self.functions.insert((object, sym_start), f);
                        f
                    }
                };
                (f, line)
            }
            None => (b.function(&path, b"", UNKNOWN)?, 0),
        };
        let frame = b.frame(function, line, elf_addr);
        self.frames.insert((object, elf_addr, leaf), frame);
        Some(frame)
    }

    fn kernel(&mut self, b: &mut StackProfile, addr: u64) -> Option<FrameId> {
        if let Some(&f) = self.kernel_frames.get(&addr) {
            return Some(f);
        }
        let name = self.kallsyms.as_ref().and_then(|k| k.name(addr));
        let f = b.function(KERNEL, b"", name.map_or(UNKNOWN, str::as_bytes))?;
        let frame = b.frame(f, 0, addr);
        self.kernel_frames.insert(addr, frame);
        Some(frame)
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
    let malformed = |what: String, at: u64| (format!("malformed perf.data: {what}"), at);
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

    let mut b = StackProfile::new(Positions::INSTR_LINE, b"perf record");
    if let Ok(Some(cmd)) = perf_file.cmdline() {
        b.set_cmd(cmd.join(" ").into_bytes());
    }
    let names: Vec<String> = perf_file
        .event_attributes()
        .iter()
        .enumerate()
        .map(|(i, a)| a.name().map_or_else(|| format!("event{i}"), str::to_string))
        .collect();
    let release = perf_file.os_release().ok().flatten().map(str::to_string);
    let mut sym = Symbolizer {
        objects: Vec::new(),
        object_index: FxHashMap::default(),
        maps: FxHashMap::default(),
        kallsyms: Kallsyms::load(release.as_deref()),
        frames: FxHashMap::default(),
        kernel_frames: FxHashMap::default(),
        functions: FxHashMap::default(),
    };
    let full = || fail("more names than tally can hold".into(), 0);
    let mut samples: Vec<(Vec<FrameId>, usize, u64)> = Vec::new();
    let mut leaf_first: Vec<FrameId> = Vec::new();
    loop {
        let record = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(broken(e, furthest.get())),
        };
        let PerfFileRecord::EventRecord { attr_index, record } = record else {
            continue;
        };
        let parsed = match record.parse() {
            Ok(p) => p,
            Err(e) => return Err(broken(e.into(), furthest.get())),
        };
        match parsed {
            EventRecord::Mmap(m) => {
                let p = m.path.as_slice();
                sym.mmap(m.pid, m.address, m.length, m.page_offset, &p);
            }
            EventRecord::Mmap2(m) => {
                let p = m.path.as_slice();
                sym.mmap(m.pid, m.address, m.length, m.page_offset, &p);
            }
            EventRecord::Fork(f) if f.pid != f.ppid => {
                if let Some(m) = sym.maps.get(&f.ppid).cloned() {
                    sym.maps.insert(f.pid, m);
                }
            }
            EventRecord::Comm(c) if c.is_execve => {
                sym.maps.remove(&c.pid);
            }
            EventRecord::Sample(s) => {
                let pid = s.pid.unwrap_or(-1);
                leaf_first.clear();
                let mut kernel = matches!(s.cpu_mode, CpuMode::Kernel | CpuMode::GuestKernel);
                let mut addrs: Vec<u64> = Vec::new();
                match &s.callchain {
                    Some(chain) if !chain.is_empty() => {
                        for i in 0..chain.len() {
                            addrs.extend(chain.get(i));
                        }
                    }
                    _ => addrs.extend(s.ip),
                }
                let mut first = true;
                for addr in addrs {
                    if addr >= CONTEXT_MAX {
                        kernel = addr == CONTEXT_KERNEL;
                        continue;
                    }
                    let frame = if kernel {
                        sym.kernel(&mut b, addr)
                    } else {
                        sym.user(&mut b, pid, addr, first)
                    }
                    .ok_or_else(full)?;
                    first = false;
                    leaf_first.push(frame);
                }
                if leaf_first.is_empty() {
                    continue;
                }
                let mut frames = leaf_first.clone();
                frames.reverse();
                samples.push((frames, attr_index, s.period.unwrap_or(1)));
            }
            _ => {}
        }
    }
    let n = names.len().max(1);
    // Events named twice (`-e cycles -e cycles`) are told apart by number.
    let mut unique: Vec<String> = Vec::with_capacity(n);
    for (i, name) in names.into_iter().enumerate() {
        let name = if unique.contains(&name) {
            format!("{name}#{i}")
        } else {
            name
        };
        unique.push(name);
    }
    let names = if unique.is_empty() {
        vec!["samples".to_string()]
    } else {
        unique
    };
    let events = Events::new(names).map_err(|e| fail(e.to_string(), 0))?;
    let mut costs = vec![0u64; n];
    for (frames, e, period) in &samples {
        costs.iter_mut().for_each(|c| *c = 0);
        costs[(*e).min(n - 1)] = *period;
        b.add(frames, &costs)
            .ok_or_else(|| fail("the periods sum to more than 64 bits hold".into(), 0))?;
    }
    b.finish(events)
        .ok_or_else(|| fail("the periods sum to more than 64 bits hold".into(), 0))
}
