//! Valgrind Lackey memory traces (`valgrind --tool=lackey --trace-mem=yes`),
//! read as a stream: one line at a time from any reader (a file or a pipe),
//! never the whole trace.
//!
//! Lines are `I  ADDR,SIZE` (an instruction), ` L ADDR,SIZE` (a load),
//! ` S ADDR,SIZE` (a store) and ` M ADDR,SIZE` (a modify: load then store),
//! with hexadecimal addresses and decimal sizes. Valgrind's own messages
//! (`==PID== …`) are skipped; anything else is an error with its line
//! number.

use std::io::BufRead;

/// One record of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// An instruction fetch.
    Instr { addr: u64, size: u64 },
    /// A data load.
    Load { addr: u64, size: u64 },
    /// A data store.
    Store { addr: u64, size: u64 },
    /// A load and a store of the same bytes.
    Modify { addr: u64, size: u64 },
}

/// Why a trace cannot be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TraceError {
    /// Reading failed.
    #[error("line {line}: {source}")]
    Io {
        /// The line being read.
        line: u64,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line that is not a Lackey record.
    #[error("line {line}: not a Lackey trace line: `{text}`")]
    Bad {
        /// Its number.
        line: u64,
        /// Its text (cut to 80 characters).
        text: String,
    },
}

/// A streaming reader of Lackey traces.
pub struct LackeyReader<R> {
    input: R,
    buf: Vec<u8>,
    line: u64,
}

impl<R: BufRead> LackeyReader<R> {
    /// Reads from `input`.
    pub fn new(input: R) -> Self {
        LackeyReader {
            input,
            buf: Vec::with_capacity(64),
            line: 0,
        }
    }

    /// The number of the last line read.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The next record; `None` at the end of the trace.
    pub fn next_access(&mut self) -> Result<Option<Access>, TraceError> {
        loop {
            self.buf.clear();
            let n = self
                .input
                .read_until(b'\n', &mut self.buf)
                .map_err(|source| TraceError::Io {
                    line: self.line + 1,
                    source,
                })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            let l = self.buf.trim_ascii_end();
            if l.is_empty() || l.starts_with(b"==") || l.starts_with(b"--") {
                continue;
            }
            return parse(l).map(Some).ok_or_else(|| TraceError::Bad {
                line: self.line,
                text: String::from_utf8_lossy(&l[..l.len().min(80)]).into_owned(),
            });
        }
    }
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
        let mut cut = LackeyReader::new("I  0401ab7".as_bytes());
        assert!(cut.next_access().is_err());
    }
}
