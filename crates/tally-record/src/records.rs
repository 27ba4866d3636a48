//! The records of the ring buffer, parsed from their bytes (native
//! endian), for the sample layout [`crate::SAMPLE_TYPE`] asks for (with
//! the user registers and stack of [`crate::DWARF_SAMPLE_TYPE`] when
//! unwinding with DWARF) and with `sample_id_all`, so that every record
//! carries its time.

use crate::unwind::UserStack;

/// `PERF_RECORD_MMAP`.
const MMAP: u32 = 1;
/// `PERF_RECORD_LOST`.
const LOST: u32 = 2;
/// `PERF_RECORD_COMM`.
const COMM: u32 = 3;
/// `PERF_RECORD_EXIT`.
const EXIT: u32 = 4;
/// `PERF_RECORD_FORK`.
const FORK: u32 = 7;
/// `PERF_RECORD_SAMPLE`.
const SAMPLE: u32 = 9;
/// `PERF_RECORD_MMAP2`.
const MMAP2: u32 = 10;
/// `PERF_RECORD_MISC_COMM_EXEC`: a `comm` record made by `exec`.
const MISC_COMM_EXEC: u16 = 1 << 13;
/// `PERF_RECORD_MISC_CPUMODE_MASK` and its kernel value.
const CPUMODE_MASK: u16 = 7;
/// `PERF_RECORD_MISC_KERNEL`.
const CPUMODE_KERNEL: u16 = 1;

/// What a record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    /// A sample: process, thread, call chain leaf first (with context
    /// markers), whether the first addresses are kernel ones, period.
    Sample {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Leaf first, with perf's context markers.
        chain: Vec<u64>,
        /// The sampled instruction was in the kernel.
        kernel: bool,
        /// The sample's period.
        period: u64,
        /// The user registers and stack, to unwind (then dropped).
        stack: Option<Box<UserStack>>,
    },
    /// A file mapped into a process.
    Mmap {
        /// Process id.
        pid: i32,
        /// Start address.
        start: u64,
        /// Length.
        len: u64,
        /// Offset in the file.
        offset: u64,
        /// The file's path (or a pseudo name like `[vdso]`).
        path: Vec<u8>,
    },
    /// A thread's name changed (`exec` when `exec` is set).
    Comm {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// The new name.
        name: Vec<u8>,
        /// Made by `exec`.
        exec: bool,
    },
    /// A process or thread was created.
    Fork {
        /// New process id.
        pid: i32,
        /// Parent process id.
        ppid: i32,
        /// New thread id.
        tid: i32,
    },
    /// A process or thread ended.
    Exit {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
    },
    /// Samples the kernel dropped because the buffer was full.
    Lost(u64),
}

/// A record with its time stamp.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed {
    /// Nanoseconds (perf's clock).
    pub time: u64,
    /// The record.
    pub record: Record,
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A NUL-terminated string at `at` (padded to 8 bytes), and the offset
/// after its padding.
fn string_at(b: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    let rest = b.get(at..)?;
    let n = rest.iter().position(|&c| c == 0)?;
    Some((rest[..n].to_vec(), at + (n + 8) / 8 * 8))
}

/// The time stamp of a non-sample record: the sample id fields at its end
/// are `pid, tid` and `time` (the order of [`crate::SAMPLE_TYPE`]), so
/// the time is the last word.
fn trailing_time(b: &[u8]) -> u64 {
    b.len()
        .checked_sub(8)
        .and_then(|at| u64_at(b, at))
        .unwrap_or(0)
}

/// Parses the records in `bytes` (whole records, as the ring buffer gives
/// them), appending them to `out`; a malformed record ends the parse.
pub fn parse(bytes: &[u8], out: &mut Vec<Timed>) {
    parse_with(bytes, false, out)
}

/// [`parse`], for samples that carry the user registers and stack
/// (`dwarf`) or not.
pub fn parse_with(bytes: &[u8], dwarf: bool, out: &mut Vec<Timed>) {
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = u32_at(bytes, at).unwrap_or(0);
        let misc = u16::from_ne_bytes([bytes[at + 4], bytes[at + 5]]);
        let size = u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]) as usize;
        if size < 8 || at + size > bytes.len() {
            return;
        }
        if let Some(t) = one(kind, misc, &bytes[at + 8..at + size], dwarf) {
            out.push(t);
        }
        at += size;
    }
}

/// The user registers (`bp`, `sp`, `ip`: the bit order of
/// [`crate::REGS_USER`]) and stack that follow a call chain ending at `at`.
fn user_stack(b: &[u8], at: usize) -> Option<Box<UserStack>> {
    let abi = u64_at(b, at)?;
    let (regs, at) = if abi == 0 {
        (None, at + 8)
    } else {
        let r = (u64_at(b, at + 8)?, u64_at(b, at + 16)?, u64_at(b, at + 24)?);
        (Some(r), at + 32)
    };
    let size = usize::try_from(u64_at(b, at)?).ok()?;
    let data = b.get(at + 8..at + 8 + size)?;
    let dyn_size = if size == 0 {
        0
    } else {
        usize::try_from(u64_at(b, at + 8 + size)?).ok()?.min(size)
    };
    let (bp, sp, ip) = regs?;
    Some(Box::new(UserStack {
        bp,
        sp,
        ip,
        bytes: data[..dyn_size].to_vec(),
    }))
}

fn one(kind: u32, misc: u16, b: &[u8], dwarf: bool) -> Option<Timed> {
    let pid_tid = |at| Some((u32_at(b, at)? as i32, u32_at(b, at + 4)? as i32));
    let time = trailing_time(b);
    let record = match kind {
        SAMPLE => {
            // ip, pid tid, time, period, nr, ips[nr]
            let (pid, tid) = pid_tid(8)?;
            let time = u64_at(b, 16)?;
            let period = u64_at(b, 24)?;
            let nr = (u64_at(b, 32)? as usize).min(b.len() / 8);
            let stack = if dwarf {
                user_stack(b, 40 + 8 * nr)
            } else {
                None
            };
            let chain = (0..nr)
                .map(|i| u64_at(b, 40 + 8 * i))
                .collect::<Option<Vec<u64>>>()?;
            let chain = if chain.is_empty() && stack.is_none() {
                vec![u64_at(b, 0)?]
            } else {
                chain
            };
            return Some(Timed {
                time,
                record: Record::Sample {
                    pid,
                    tid,
                    chain,
                    kernel: misc & CPUMODE_MASK == CPUMODE_KERNEL,
                    period,
                    stack,
                },
            });
        }
        MMAP => {
            let (pid, _) = pid_tid(0)?;
            let (path, _) = string_at(b, 32)?;
            Record::Mmap {
                pid,
                start: u64_at(b, 8)?,
                len: u64_at(b, 16)?,
                offset: u64_at(b, 24)?,
                path,
            }
        }
        MMAP2 => {
            // pid tid, addr, len, pgoff, maj min, ino, ino_generation,
            // prot flags, filename
            let (pid, _) = pid_tid(0)?;
            let (path, _) = string_at(b, 64)?;
            Record::Mmap {
                pid,
                start: u64_at(b, 8)?,
                len: u64_at(b, 16)?,
                offset: u64_at(b, 24)?,
                path,
            }
        }
        COMM => {
            let (pid, tid) = pid_tid(0)?;
            let (name, _) = string_at(b, 8)?;
            Record::Comm {
                pid,
                tid,
                name,
                exec: misc & MISC_COMM_EXEC != 0,
            }
        }
        FORK | EXIT => {
            // pid, ppid, tid, ptid, time
            let (pid, ppid) = pid_tid(0)?;
            let (tid, _) = pid_tid(8)?;
            let time = u64_at(b, 16)?;
            let record = if kind == FORK {
                Record::Fork { pid, ppid, tid }
            } else {
                Record::Exit { pid, tid }
            };
            return Some(Timed { time, record });
        }
        LOST => Record::Lost(u64_at(b, 8)?),
        _ => return None,
    };
    Some(Timed { time, record })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend(misc.to_ne_bytes());
        r.extend(((body.len() + 8) as u16).to_ne_bytes());
        r.extend(body);
        r
    }

    #[test]
    fn a_sample_and_a_cut_record() {
        let mut body = Vec::new();
        for w in [
            0x401000u64,
            (7u64 << 32) | 5,
            99,
            1000,
            2,
            0x401000,
            0x402000,
        ] {
            body.extend(w.to_ne_bytes());
        }
        let mut bytes = record(SAMPLE, 2, &body);
        let mut cut = record(SAMPLE, 2, &body);
        cut.truncate(20);
        bytes.extend(cut);
        let mut out = Vec::new();
        parse(&bytes, &mut out);
        assert_eq!(
            out,
            vec![Timed {
                time: 99,
                record: Record::Sample {
                    pid: 5,
                    tid: 7,
                    chain: vec![0x401000, 0x402000],
                    kernel: false,
                    period: 1000,
                    stack: None,
                }
            }]
        );
    }
}
