//! Valgrind Lackey memory traces (`valgrind --tool=lackey --trace-mem=yes`),
//! read as a stream: one line at a time from any reader (a file or a pipe),
//! never the whole trace.
//!
//! Lines are `I  ADDR,SIZE` (an instruction), ` L ADDR,SIZE` (a load),
//! ` S ADDR,SIZE` (a store) and ` M ADDR,SIZE` (a modify: load then store),
//! with hexadecimal addresses and decimal sizes. Valgrind's own messages
//! (`==PID== …`) are skipped; anything else is an error with its line
//! number.

use crate::Error;
use std::io::BufRead;

/// One record of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// An instruction fetch.
    Instr {
        /// The instruction's address.
        addr: u64,
        /// Its length in bytes.
        size: u64,
    },
    /// A data load.
    Load {
        /// The first byte loaded.
        addr: u64,
        /// Bytes loaded.
        size: u64,
    },
    /// A data store.
    Store {
        /// The first byte stored.
        addr: u64,
        /// Bytes stored.
        size: u64,
    },
    /// A load and a store of the same bytes.
    Modify {
        /// The first byte modified.
        addr: u64,
        /// Bytes modified.
        size: u64,
    },
}

/// A streaming reader of Lackey traces.
pub struct LackeyReader<R> {
    input: R,
    buf: Vec<u8>,
    line: u64,
    reading: Option<String>,
    /// Valgrind's `--PID--` messages were seen: unprefixed lines that are
    /// not records continue them.
    verbose: bool,
}

impl<R: BufRead> LackeyReader<R> {
    /// Reads from `input`.
    pub fn new(input: R) -> Self {
        LackeyReader {
            input,
            buf: Vec::with_capacity(64),
            line: 0,
            reading: None,
            verbose: false,
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next record; `None` at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<Record>, Error> {
        loop {
            self.buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| Error::LackeyIo {
                    line: self.line + 1,
                    source,
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let l = self.buf.trim_ascii_end();
            if l.starts_with(b"--") {
                self.verbose = true;
                let l = l.to_vec();
                if let Some(o) = self.object_line(&l) {
                    return Ok(Some(Record::Object(o)));
                }
                continue;
            }
            if l.is_empty() || l.starts_with(b"==") {
                continue;
            }
            let record_like =
                l.starts_with(b"I  ") || matches!(l, [b' ', b'L' | b'S' | b'M', b' ', ..]);
            if self.verbose && !record_like {
                // The continuation of a multi-line `-v -v` message.
                continue;
            }
            return parse(l)
                .map(|a| Some(Record::Access(a)))
                .ok_or_else(|| Error::LackeyLine {
                    line: self.line,
                    text: String::from_utf8_lossy(&l[..l.len().min(80)]).into_owned(),
                });
        }
    }

    /// Valgrind's `-v -v` lines `--PID-- Reading syms from PATH` and, next,
    /// `--PID--    svma 0x…, avma 0x…`: where each object was loaded.
    fn object_line(&mut self, l: &[u8]) -> Option<Object> {
        let text = std::str::from_utf8(l).ok()?;
        let rest = text.trim_start_matches('-').split_once("--")?.1.trim();
        if let Some(path) = rest.strip_prefix("Reading syms from ") {
            self.reading = Some(path.trim().to_string());
            return None;
        }
        let (svma, avma) = rest.strip_prefix("svma ")?.split_once(", avma ")?;
        let hex = |s: &str| u64::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
        let (svma, avma) = (hex(svma)?, hex(avma)?);
        Some(Object {
            path: self.reading.take()?,
            bias: avma.wrapping_sub(svma),
        })
    }

    /// The next access, skipping object records.
    pub fn next_access(&mut self) -> Result<Option<Access>, Error> {
        loop {
            match self.next_record()? {
                Some(Record::Access(a)) => return Ok(Some(a)),
                Some(Record::Object(_)) => {}
                None => return Ok(None),
            }
        }
    }
}

/// An object Valgrind loaded (from `-v -v` output in the trace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// Its path.
    pub path: String,
    /// Run-time address minus file address.
    pub bias: u64,
}

/// One record of a trace with Valgrind's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// An access.
    Access(Access),
    /// An object and its load bias.
    Object(Object),
}

fn parse(l: &[u8]) -> Option<Access> {
    let (kind, rest) = match l {
        [b'I', b' ', b' ', rest @ ..] => (b'I', rest),
        [b' ', k @ (b'L' | b'S' | b'M'), b' ', rest @ ..] => (*k, rest),
        _ => return None,
    };
    let comma = rest.iter().position(|&b| b == b',')?;
    let addr = u64::from_str_radix(std::str::from_utf8(&rest[..comma]).ok()?, 16).ok()?;
    let size: u64 = std::str::from_utf8(&rest[comma + 1..]).ok()?.parse().ok()?;
    Some(match kind {
        b'I' => Access::Instr { addr, size },
        b'L' => Access::Load { addr, size },
        b'S' => Access::Store { addr, size },
        _ => Access::Modify { addr, size },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_kind_and_skips_valgrind_messages() {
        let text = "==12== Lackey\nI  0401ab70,3\n S 1fff000738,8\n L 04022e40,4\n M 0403f0a8,8\n==12== done\n";
        let mut r = LackeyReader::new(text.as_bytes());
        let mut v = Vec::new();
        while let Some(a) = r.next_access().unwrap() {
            v.push(a);
        }
        assert_eq!(
            v,
            [
                Access::Instr {
                    addr: 0x401ab70,
                    size: 3
                },
                Access::Store {
                    addr: 0x1fff000738,
                    size: 8
                },
                Access::Load {
                    addr: 0x4022e40,
                    size: 4
                },
                Access::Modify {
                    addr: 0x403f0a8,
                    size: 8
                },
            ]
        );
        let mut bad = LackeyReader::new("I  0401ab70,3\nX 12,3\n".as_bytes());
        assert!(bad.next_access().unwrap().is_some());
        let e = bad.next_access().unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("X 12,3"), "{e}");
        let maps = "--9-- Reading syms from /lib/x.so\n--9--    svma 0x0000001060, avma 0x0004001060\nI  04001060,3\n";
        let mut r = LackeyReader::new(maps.as_bytes());
        assert_eq!(
            r.next_record().unwrap(),
            Some(Record::Object(Object {
                path: "/lib/x.so".into(),
                bias: 0x4000000
            }))
        );
        assert!(matches!(r.next_record().unwrap(), Some(Record::Access(_))));
        let mut cut = LackeyReader::new("I  0401ab7".as_bytes());
        assert!(cut.next_access().is_err());
    }
}
