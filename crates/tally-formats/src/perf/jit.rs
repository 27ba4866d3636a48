//! Names of code a JIT compiler wrote at run time, as the compiler tells
//! profilers: perf map files (`/tmp/perf-PID.map`, written by
//! `node --perf-basic-prof`, the JVM's `DumpPerfMapAtExit`, Python's
//! `-X perf`) and jitdump files (`jit-PID.dump`, which the JIT maps
//! executable so that the mapping, with its path, reaches the recording).
//!
//! A perf map is text, one function a line: `START SIZE NAME`, the start
//! and size in hexadecimal (perf reads them without `0x`; a prefix is
//! taken too), the name the rest of the line. A jitdump file is binary
//! (perf's `jitdump-specification.txt`): a header, then records of a type,
//! a size and a time; `JIT_CODE_LOAD` gives a function's address, size
//! and name, `JIT_CODE_MOVE` moves it by its code index, the other types
//! are skipped by their size.
//!
//! Both are read after the samples, so code compiled after a sample was
//! taken is still named. Where two functions overlap, the one written
//! later holds the overlap: a JIT reuses the memory of code it dropped,
//! and the newer code is the likelier to have been sampled. A bad line
//! or record is skipped with a warning naming the file and the line or
//! byte offset; the rest is still read.

use std::collections::BTreeMap;
use std::path::Path;

/// The most warnings kept per file; the rest are counted in one more.
const MAX_WARNINGS: usize = 10;

/// The jitdump magic number, `JiTD` written as a 32-bit word in the
/// writer's byte order.
const JITDUMP_MAGIC: u32 = 0x4A69_5444;
/// The size of the jitdump header fields this reader takes (magic,
/// version, total size, machine, padding, pid, time, flags).
const JITDUMP_HEADER: usize = 40;
/// The size of a record header: type, total size, time.
const RECORD_HEADER: usize = 16;
/// `JIT_CODE_LOAD`.
const CODE_LOAD: u32 = 0;
/// `JIT_CODE_MOVE`.
const CODE_MOVE: u32 = 1;
/// `JIT_CODE_CLOSE`: nothing follows that counts.
const CODE_CLOSE: u32 = 3;

/// A run of addresses held by one JIT function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    /// Past the last address of the run.
    end: u64,
    /// Where the function starts (a piece may be what a newer function
    /// left of an older one).
    start: u64,
    /// Its name, an index into [`JitSymbols::names`].
    name: u32,
}

/// The JIT functions of one process, by address.
#[derive(Clone, Debug, Default)]
pub struct JitSymbols {
    /// Disjoint runs by their first address.
    pieces: BTreeMap<u64, Piece>,
    names: Vec<String>,
}

impl JitSymbols {
    /// No function.
    pub fn new() -> Self {
        JitSymbols::default()
    }

    /// Whether no function is known.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    /// Function `name` at `start..start + size`; it takes the addresses
    /// of whatever it overlaps. An empty function names nothing.
    pub fn insert(&mut self, start: u64, size: u64, name: &str) {
        let end = start.saturating_add(size);
        if end <= start {
            return;
        }
        let index = self.names.len() as u32;
        self.names.push(name.to_string());
        // The older pieces the new one overlaps: cut down to what lies
        // outside it.
        let overlapped: Vec<(u64, Piece)> = self
            .pieces
            .range(..end)
            .rev()
            .take_while(|(_, p)| p.end > start)
            .map(|(&s, &p)| (s, p))
            .collect();
        for (s, p) in overlapped {
            self.pieces.remove(&s);
            if s < start {
                self.pieces.insert(s, Piece { end: start, ..p });
            }
            if p.end > end {
                self.pieces.insert(end, p);
            }
        }
        self.pieces.insert(
            start,
            Piece {
                end,
                start,
                name: index,
            },
        );
    }

    /// The function holding `addr`, as (its start, its name).
    pub fn lookup(&self, addr: u64) -> Option<(u64, &str)> {
        let (_, p) = self.pieces.range(..=addr).next_back()?;
        (addr < p.end).then(|| (p.start, self.names[p.name as usize].as_str()))
    }

    /// Reads perf map `text` (the file `path`), adding its functions;
    /// a bad line is skipped with a warning in `warnings`.
    pub fn read_perf_map(&mut self, path: &Path, text: &[u8], warnings: &mut Vec<String>) {
        let mut bad = Vec::new();
        for (i, line) in text.split(|&b| b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match perf_map_line(line) {
                Some((start, size, name)) => self.insert(start, size, &name),
                None => bad.push(format!(
                    "line {}: not `START SIZE NAME` (hexadecimal start and size): {}",
                    i + 1,
                    crate::error::excerpt(line)
                )),
            }
        }
        warn(path, bad, warnings);
    }

    /// Reads jitdump `bytes` (the file `path`), adding the functions it
    /// loads and moves; a damaged record stops the reading with a warning
    /// (what came before it stays), as does a file that is no jitdump.
    pub fn read_jitdump(&mut self, path: &Path, bytes: &[u8], warnings: &mut Vec<String>) {
        let mut bad = Vec::new();
        if let Err(e) = self.jitdump(bytes, &mut bad) {
            bad.push(e);
        }
        warn(path, bad, warnings);
    }

    fn jitdump(&mut self, bytes: &[u8], bad: &mut Vec<String>) -> Result<(), String> {
        let head = bytes.get(..JITDUMP_HEADER).ok_or_else(|| {
            format!(
                "byte 0: {} bytes, too short for a jitdump header ({JITDUMP_HEADER} bytes)",
                bytes.len()
            )
        })?;
        let little = match u32::from_le_bytes(head[..4].try_into().expect("4 bytes")) {
            JITDUMP_MAGIC => true,
            m if m.swap_bytes() == JITDUMP_MAGIC => false,
            m => return Err(format!("byte 0: not a jitdump file (magic {m:#010x})")),
        };
        let r = Reader { bytes, little };
        let header_size = r.u32(8).expect("in the header") as usize;
        if header_size < JITDUMP_HEADER || header_size > bytes.len() {
            return Err(format!(
                "byte 8: header size {header_size} outside {JITDUMP_HEADER}..={}",
                bytes.len()
            ));
        }
        // Function names by code index, for the records that move them.
        let mut by_index: BTreeMap<u64, String> = BTreeMap::new();
        let mut at = header_size;
        while at < bytes.len() {
            let (Some(id), Some(size)) = (r.u32(at), r.u32(at + 4)) else {
                return Err(format!("byte {at}: record header cut short"));
            };
            let size = size as usize;
            if size < RECORD_HEADER {
                return Err(format!(
                    "byte {at}: record of {size} bytes, shorter than its header"
                ));
            }
            let Some(end) = at.checked_add(size).filter(|&e| e <= bytes.len()) else {
                // A JIT still writing, or killed while it wrote.
                return Err(format!(
                    "byte {at}: record of {size} bytes runs past the end of the file ({} bytes)",
                    bytes.len()
                ));
            };
            let body = at + RECORD_HEADER;
            match id {
                CODE_LOAD => match r.code_load(body, end) {
                    Some((addr, code_size, index, name)) => {
                        self.insert(addr, code_size, &name);
                        by_index.insert(index, name);
                    }
                    None => bad.push(format!("byte {at}: JIT_CODE_LOAD record cut short")),
                },
                CODE_MOVE => match r.code_move(body, end) {
                    Some((addr, code_size, index)) => match by_index.get(&index) {
                        Some(name) => {
                            let name = name.clone();
                            self.insert(addr, code_size, &name);
                        }
                        None => bad.push(format!(
                            "byte {at}: JIT_CODE_MOVE of code index {index}, which no JIT_CODE_LOAD before it loads"
                        )),
                    },
                    None => bad.push(format!("byte {at}: JIT_CODE_MOVE record cut short")),
                },
                CODE_CLOSE => return Ok(()),
                _ => {}
            }
            at = end;
        }
        Ok(())
    }
}

/// Adds the warnings `bad` of the file `path` to `warnings`, at most
/// [`MAX_WARNINGS`] of them and a count of the rest.
fn warn(path: &Path, bad: Vec<String>, warnings: &mut Vec<String>) {
    let more = bad.len().saturating_sub(MAX_WARNINGS);
    warnings.extend(
        bad.into_iter()
            .take(MAX_WARNINGS)
            .map(|w| format!("{}: {w}, skipped", path.display())),
    );
    if more > 0 {
        warnings.push(format!(
            "{}: {more} more bad lines or records, skipped",
            path.display()
        ));
    }
}

/// One perf map line: start, size and name.
fn perf_map_line(line: &[u8]) -> Option<(u64, u64, String)> {
    let line = std::str::from_utf8(line).ok()?;
    let (start, rest) = line.trim_start().split_once(' ')?;
    let (size, name) = rest.trim_start().split_once(' ').unwrap_or((rest, ""));
    let hex = |s: &str| {
        let s = s.strip_prefix("0x").unwrap_or(s);
        (!s.is_empty() && !s.starts_with('+'))
            .then(|| u64::from_str_radix(s, 16).ok())
            .flatten()
    };
    let name = name.trim();
    if name.is_empty() {
        return None;
    }
    Some((hex(start)?, hex(size)?, name.to_string()))
}

/// Fields of a jitdump file in its writer's byte order.
struct Reader<'a> {
    bytes: &'a [u8],
    little: bool,
}

impl Reader<'_> {
    fn u32(&self, at: usize) -> Option<u32> {
        let b: [u8; 4] = self.bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(if self.little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let b: [u8; 8] = self.bytes.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(if self.little {
            u64::from_le_bytes(b)
        } else {
            u64::from_be_bytes(b)
        })
    }

    /// A `JIT_CODE_LOAD` body in `body..end`: pid, tid, vma, code address,
    /// size, index, name; the code follows. The code runs where `vma`
    /// says (the code address is where the JIT wrote it).
    fn code_load(&self, body: usize, end: usize) -> Option<(u64, u64, u64, String)> {
        let fixed = body + 40;
        if fixed > end {
            return None;
        }
        let vma = self.u64(body + 8)?;
        let size = self.u64(body + 24)?;
        let index = self.u64(body + 32)?;
        let rest = &self.bytes[fixed..end];
        let nul = rest.iter().position(|&b| b == 0)?;
        let name = String::from_utf8_lossy(&rest[..nul]).into_owned();
        Some((vma, size, index, name))
    }

    /// A `JIT_CODE_MOVE` body: pid, tid, vma, old address, new address,
    /// size, index.
    fn code_move(&self, body: usize, end: usize) -> Option<(u64, u64, u64)> {
        if body + 48 > end {
            return None;
        }
        Some((
            self.u64(body + 8)?,
            self.u64(body + 32)?,
            self.u64(body + 40)?,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(text: &str) -> (JitSymbols, Vec<String>) {
        let mut j = JitSymbols::new();
        let mut w = Vec::new();
        j.read_perf_map(Path::new("/tmp/perf-7.map"), text.as_bytes(), &mut w);
        (j, w)
    }

    #[test]
    fn perf_map_lines_name_their_ranges() {
        let (j, w) = map("1000 20 JS:*hot /a.js:1:2\n\
             2000 0x10 LazyCompile:cold\r\n\
             \n\
             7f0000000000 8 Interpreter\n");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(j.lookup(0x1000), Some((0x1000, "JS:*hot /a.js:1:2")));
        assert_eq!(j.lookup(0x101f), Some((0x1000, "JS:*hot /a.js:1:2")));
        assert_eq!(j.lookup(0x1020), None);
        assert_eq!(j.lookup(0xfff), None);
        assert_eq!(j.lookup(0x200f), Some((0x2000, "LazyCompile:cold")));
        assert_eq!(
            j.lookup(0x7f00_0000_0007),
            Some((0x7f00_0000_0000, "Interpreter"))
        );
    }

    #[test]
    fn bad_perf_map_lines_are_skipped_with_the_file_and_line() {
        let (j, w) = map("1000 20 good\nzz 10 bad\n2000 10\n3000 -1 neg\n4000 8 fine\n");
        assert_eq!(j.lookup(0x1004).map(|l| l.1), Some("good"));
        assert_eq!(j.lookup(0x4004).map(|l| l.1), Some("fine"));
        assert_eq!(j.lookup(0x2004), None);
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("/tmp/perf-7.map: line 2: "), "{}", w[0]);
        assert!(w[1].starts_with("/tmp/perf-7.map: line 3: "), "{}", w[1]);
        assert!(w[2].starts_with("/tmp/perf-7.map: line 4: "), "{}", w[2]);
        let (_, w) = map(&"x\n".repeat(25));
        assert_eq!(w.len(), MAX_WARNINGS + 1);
        assert!(w[MAX_WARNINGS].contains("15 more"), "{w:?}");
    }

    #[test]
    fn later_functions_take_the_addresses_they_overlap() {
        let (j, _) = map("1000 100 old\n1040 20 new\n10f0 20 tail\n");
        assert_eq!(j.lookup(0x1010), Some((0x1000, "old")));
        assert_eq!(j.lookup(0x1050), Some((0x1040, "new")));
        // What is left of `old` after `new` still starts where `old` does.
        assert_eq!(j.lookup(0x1070), Some((0x1000, "old")));
        assert_eq!(j.lookup(0x10f8), Some((0x10f0, "tail")));
        assert_eq!(j.lookup(0x110f), Some((0x10f0, "tail")));
        // One covering several replaces them all.
        let (j, _) = map("1000 10 a\n1010 10 b\n1020 10 c\n1008 20 d\n");
        assert_eq!(j.lookup(0x1004).map(|l| l.1), Some("a"));
        assert_eq!(j.lookup(0x1010).map(|l| l.1), Some("d"));
        assert_eq!(j.lookup(0x1027).map(|l| l.1), Some("d"));
        assert_eq!(j.lookup(0x1028).map(|l| l.1), Some("c"));
    }

    /// A jitdump record of type `id` with body `body`.
    fn record(id: u32, body: &[u8], big: bool) -> Vec<u8> {
        let mut r = Vec::new();
        let size = (RECORD_HEADER + body.len()) as u32;
        let (a, b) = if big {
            (id.to_be_bytes(), size.to_be_bytes())
        } else {
            (id.to_le_bytes(), size.to_le_bytes())
        };
        r.extend(a);
        r.extend(b);
        r.extend([0u8; 8]);
        r.extend(body);
        r
    }

    fn words(values: &[u64], big: bool) -> Vec<u8> {
        values
            .iter()
            .flat_map(|v| {
                if big {
                    v.to_be_bytes()
                } else {
                    v.to_le_bytes()
                }
            })
            .collect()
    }

    fn load(addr: u64, size: u64, index: u64, name: &str, big: bool) -> Vec<u8> {
        // pid and tid (two 32-bit words), vma, code address, size, index.
        let mut body = words(&[0, addr, addr, size, index], big);
        body.extend(name.as_bytes());
        body.push(0);
        body.extend(std::iter::repeat_n(0x90, size as usize));
        record(CODE_LOAD, &body, big)
    }

    fn dump(records: &[Vec<u8>], big: bool) -> Vec<u8> {
        let w32 = |v: u32| {
            if big {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        let mut d = Vec::new();
        d.extend(w32(JITDUMP_MAGIC));
        d.extend(w32(1));
        d.extend(w32(JITDUMP_HEADER as u32));
        d.extend(w32(62));
        d.extend(w32(0));
        d.extend(w32(4242));
        d.extend([0u8; 16]);
        for r in records {
            d.extend(r);
        }
        d
    }

    fn read_dump(bytes: &[u8]) -> (JitSymbols, Vec<String>) {
        let mut j = JitSymbols::new();
        let mut w = Vec::new();
        j.read_jitdump(Path::new("/x/jit-4242.dump"), bytes, &mut w);
        (j, w)
    }

    #[test]
    fn jitdump_loads_and_moves_in_either_byte_order() {
        for big in [false, true] {
            let debug = record(2, &words(&[0x5000, 0], big), big);
            let mv = record(
                CODE_MOVE,
                &words(&[0, 0x9000, 0x6000, 0x9000, 0x20, 2], big),
                big,
            );
            let bytes = dump(
                &[
                    debug,
                    load(0x5000, 0x40, 1, "Interpreted::run", big),
                    load(0x6000, 0x20, 2, "Lfoo;::bar", big),
                    mv,
                    record(CODE_CLOSE, &[], big),
                    // Past the close: not read.
                    load(0x7000, 0x20, 3, "after", big),
                ],
                big,
            );
            let (j, w) = read_dump(&bytes);
            assert!(w.is_empty(), "{w:?}");
            assert_eq!(j.lookup(0x503f), Some((0x5000, "Interpreted::run")));
            assert_eq!(j.lookup(0x9010), Some((0x9000, "Lfoo;::bar")));
            assert_eq!(j.lookup(0x7000), None);
        }
    }

    #[test]
    fn damaged_jitdumps_warn_with_the_byte_offset_and_keep_what_came_first() {
        let good = load(0x5000, 0x10, 1, "f", false);
        let mut bytes = dump(&[good.clone(), load(0x6000, 0x10, 2, "g", false)], false);
        // The second record cut short, as a JIT killed mid-write leaves it.
        bytes.truncate(bytes.len() - 4);
        let (j, w) = read_dump(&bytes);
        assert_eq!(j.lookup(0x5000).map(|l| l.1), Some("f"));
        assert_eq!(j.lookup(0x6000), None);
        let at = JITDUMP_HEADER + good.len();
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with(&format!("/x/jit-4242.dump: byte {at}: record of")),
            "{}",
            w[0]
        );
        // A record too small for its own header stops the reading.
        let mut bytes = dump(std::slice::from_ref(&good), false);
        bytes.extend(record(CODE_LOAD, &[], false)[..4].iter());
        bytes.extend(3u32.to_le_bytes());
        bytes.extend([0u8; 8]);
        let (_, w) = read_dump(&bytes);
        assert!(w[0].contains("shorter than its header"), "{w:?}");
        // A load whose name runs to the end of its record, and a move of
        // an unknown index, are skipped.
        let mut body = words(&[0, 0x8000, 0x8000, 4, 9], false);
        body.extend(b"no-nul");
        let bytes = dump(
            &[
                record(CODE_LOAD, &body, false),
                record(CODE_MOVE, &words(&[0, 1, 2, 1, 4, 77], false), false),
                good,
            ],
            false,
        );
        let (j, w) = read_dump(&bytes);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("JIT_CODE_LOAD record cut short"));
        assert!(w[1].contains("code index 77"));
        assert_eq!(j.lookup(0x5000).map(|l| l.1), Some("f"));
        // Not a jitdump at all, or too short for a header.
        let (j, w) = read_dump(b"JITX and some more bytes than a header holds.....");
        assert!(j.is_empty() && w[0].contains("not a jitdump"), "{w:?}");
        let (_, w) = read_dump(b"JiTD");
        assert!(w[0].contains("too short"), "{w:?}");
    }
}
