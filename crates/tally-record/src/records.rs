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
/// `PERF_RECORD_SWITCH`: the thread of a per-thread event was switched in
/// or out.
const SWITCH: u32 = 14;
/// `PERF_RECORD_MISC_SWITCH_OUT`: a `SWITCH` record of a switch out.
const MISC_SWITCH_OUT: u16 = 1 << 13;
/// `PERF_RECORD_MISC_SWITCH_OUT_PREEMPT`: switched out while runnable
/// (preempted or yielding), not blocked.
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;
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
    /// The stack of a thread being switched out (`--off-cpu`'s
    /// context-switch event): where it blocks, if the switch that follows
    /// is not a preemption.
    SwitchStack {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Leaf first, with perf's context markers.
        chain: Vec<u64>,
        /// The first addresses are kernel ones.
        kernel: bool,
        /// The user registers and stack, to unwind (then dropped).
        stack: Option<Box<UserStack>>,
    },
    /// A thread was switched out or in.
    Switch {
        /// Process id.
        pid: i32,
        /// Thread id.
        tid: i32,
        /// Switched out (else in).
        out: bool,
        /// Switched out while still runnable (preempted, or yielding).
        preempt: bool,
    },
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
    parse_all(bytes, dwarf, false, out)
}

/// [`parse_with`] for the buffers of the context-switch event: its samples
/// are the stacks of threads switched out ([`Record::SwitchStack`]).
pub fn parse_switches(bytes: &[u8], dwarf: bool, out: &mut Vec<Timed>) {
    parse_all(bytes, dwarf, true, out)
}

fn parse_all(bytes: &[u8], dwarf: bool, switches: bool, out: &mut Vec<Timed>) {
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let kind = u32_at(bytes, at).unwrap_or(0);
        let misc = u16::from_ne_bytes([bytes[at + 4], bytes[at + 5]]);
        let size = u16::from_ne_bytes([bytes[at + 6], bytes[at + 7]]) as usize;
        if size < 8 || at + size > bytes.len() {
            return;
        }
        if let Some(mut t) = one(kind, misc, &bytes[at + 8..at + size], dwarf) {
            if switches
                && let Record::Sample {
                    pid,
                    tid,
                    chain,
                    kernel,
                    stack,
                    ..
                } = t.record
            {
                t.record = Record::SwitchStack {
                    pid,
                    tid,
                    chain,
                    kernel,
                    stack,
                };
            }
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
        SWITCH => {
            // Only the sample id fields: pid tid, time.
            let (pid, tid) = pid_tid(b.len().checked_sub(16)?)?;
            Record::Switch {
                pid,
                tid,
                out: misc & MISC_SWITCH_OUT != 0,
                preempt: misc & MISC_SWITCH_OUT_PREEMPT != 0,
            }
        }
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

    /// Words in native byte order, as the kernel writes them.
    fn words(ws: &[u64]) -> Vec<u8> {
        ws.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    /// Two 32-bit fields in one word, `a` first in memory.
    fn pair(a: u32, b: u32) -> Vec<u8> {
        let mut v = a.to_ne_bytes().to_vec();
        v.extend(b.to_ne_bytes());
        v
    }

    /// A NUL-terminated string padded to 8 bytes.
    fn padded(s: &[u8]) -> Vec<u8> {
        let mut v = s.to_vec();
        v.push(0);
        while !v.len().is_multiple_of(8) {
            v.push(0);
        }
        v
    }

    /// The sample id fields every non-sample record ends with: pid, tid,
    /// time.
    fn id(pid: u32, tid: u32, time: u64) -> Vec<u8> {
        let mut v = pair(pid, tid);
        v.extend(time.to_ne_bytes());
        v
    }

    fn parsed(bytes: &[u8]) -> Vec<Timed> {
        let mut out = Vec::new();
        parse(bytes, &mut out);
        out
    }

    #[test]
    fn strings_are_padded_to_eight_bytes() {
        assert_eq!(
            string_at(b"abc\0\0\0\0\0xyz", 0),
            Some((b"abc".to_vec(), 8))
        );
        // Eight bytes and the NUL: two words.
        assert_eq!(
            string_at(b"abcdefgh\0\0\0\0\0\0\0\0", 0),
            Some((b"abcdefgh".to_vec(), 16))
        );
        assert_eq!(string_at(b"xxxxxxxxab\0", 8), Some((b"ab".to_vec(), 16)));
        // No NUL: not a string.
        assert_eq!(string_at(b"abc", 0), None);
        assert_eq!(string_at(b"abc", 9), None);
    }

    #[test]
    fn mmap_and_mmap2_records() {
        let mut body = pair(42, 43);
        body.extend(words(&[0x7f00_0000_1000, 0x2000, 0x1000]));
        body.extend(padded(b"/usr/lib/libc.so.6"));
        body.extend(id(42, 43, 555));
        let mmap = record(MMAP, 2, &body);

        let mut body = pair(42, 44);
        body.extend(words(&[0x5555_0000, 0x3000, 0x0]));
        body.extend(pair(8, 1)); // maj, min
        body.extend(words(&[1234, 0])); // ino, ino_generation
        body.extend(pair(5, 2)); // prot, flags
        body.extend(padded(b"/bin/prog"));
        body.extend(id(42, 44, 777));
        let mmap2 = record(MMAP2, 2, &body);

        let out = parsed(&[mmap, mmap2].concat());
        assert_eq!(
            out,
            vec![
                Timed {
                    time: 555,
                    record: Record::Mmap {
                        pid: 42,
                        start: 0x7f00_0000_1000,
                        len: 0x2000,
                        offset: 0x1000,
                        path: b"/usr/lib/libc.so.6".to_vec(),
                    }
                },
                Timed {
                    time: 777,
                    record: Record::Mmap {
                        pid: 42,
                        start: 0x5555_0000,
                        len: 0x3000,
                        offset: 0,
                        path: b"/bin/prog".to_vec(),
                    }
                },
            ]
        );
    }

    #[test]
    fn comm_records_say_whether_exec_made_them() {
        let mut body = pair(7, 8);
        body.extend(padded(b"worker"));
        body.extend(id(7, 8, 10));
        let renamed = record(COMM, 0, &body);
        let mut body = pair(7, 7);
        body.extend(padded(b"prog"));
        body.extend(id(7, 7, 11));
        let exec = record(COMM, MISC_COMM_EXEC, &body);
        let out = parsed(&[renamed, exec].concat());
        assert_eq!(
            out,
            vec![
                Timed {
                    time: 10,
                    record: Record::Comm {
                        pid: 7,
                        tid: 8,
                        name: b"worker".to_vec(),
                        exec: false,
                    }
                },
                Timed {
                    time: 11,
                    record: Record::Comm {
                        pid: 7,
                        tid: 7,
                        name: b"prog".to_vec(),
                        exec: true,
                    }
                },
            ]
        );
    }

    #[test]
    fn switch_records_and_the_stacks_of_switched_out_threads() {
        let out_blocked = record(SWITCH, MISC_SWITCH_OUT, &id(5, 6, 100));
        let out_preempted = record(
            SWITCH,
            MISC_SWITCH_OUT | MISC_SWITCH_OUT_PREEMPT,
            &id(5, 6, 200),
        );
        let back_in = record(SWITCH, 0, &id(5, 6, 300));
        let mut body = Vec::new();
        for w in [0x401000u64, (6u64 << 32) | 5, 90, 1, 1, 0x401000] {
            body.extend(w.to_ne_bytes());
        }
        let sample = record(SAMPLE, 2, &body);
        let bytes = [sample, out_blocked, out_preempted, back_in].concat();
        let switch = |time, out, preempt| Timed {
            time,
            record: Record::Switch {
                pid: 5,
                tid: 6,
                out,
                preempt,
            },
        };
        let mut all = Vec::new();
        parse_switches(&bytes, false, &mut all);
        assert_eq!(
            all,
            vec![
                Timed {
                    time: 90,
                    record: Record::SwitchStack {
                        pid: 5,
                        tid: 6,
                        chain: vec![0x401000],
                        kernel: false,
                        stack: None,
                    }
                },
                switch(100, true, false),
                switch(200, true, true),
                switch(300, false, false),
            ]
        );
        // The same bytes from the on-CPU buffers: an ordinary sample.
        assert!(matches!(parsed(&bytes)[0].record, Record::Sample { .. }));
    }

    #[test]
    fn fork_exit_and_lost_records() {
        // pid, ppid, tid, ptid, time (then the sample id fields).
        let mut body = pair(20, 10);
        body.extend(pair(21, 11));
        body.extend(words(&[300]));
        body.extend(id(20, 21, 300));
        let fork = record(FORK, 0, &body);
        let mut body = pair(20, 10);
        body.extend(pair(22, 22));
        body.extend(words(&[400]));
        body.extend(id(20, 22, 400));
        let exit = record(EXIT, 0, &body);
        // id, lost, then the sample id fields.
        let mut body = words(&[1, 17]);
        body.extend(id(0, 0, 500));
        let lost = record(LOST, 0, &body);
        let out = parsed(&[fork, exit, lost].concat());
        assert_eq!(
            out,
            vec![
                Timed {
                    time: 300,
                    record: Record::Fork {
                        pid: 20,
                        ppid: 10,
                        tid: 21,
                    }
                },
                Timed {
                    time: 400,
                    record: Record::Exit { pid: 20, tid: 22 }
                },
                Timed {
                    time: 500,
                    record: Record::Lost(17)
                },
            ]
        );
    }

    #[test]
    fn unknown_records_are_skipped_and_the_next_read() {
        // PERF_RECORD_THROTTLE (5), then a lost record.
        let throttle = record(5, 0, &words(&[1, 2, 3]));
        let mut body = words(&[1, 4]);
        body.extend(id(0, 0, 9));
        let lost = record(LOST, 0, &body);
        assert_eq!(
            parsed(&[throttle, lost].concat()),
            vec![Timed {
                time: 9,
                record: Record::Lost(4)
            }]
        );
    }

    #[test]
    fn a_record_of_size_below_its_header_ends_the_parse() {
        let mut body = words(&[1, 4]);
        body.extend(id(0, 0, 9));
        let lost = record(LOST, 0, &body);
        // A header claiming 4 bytes: the parse cannot step over it.
        let mut bad = LOST.to_ne_bytes().to_vec();
        bad.extend(0u16.to_ne_bytes());
        bad.extend(4u16.to_ne_bytes());
        let out = parsed(&[lost.clone(), bad, lost].concat());
        assert_eq!(out.len(), 1, "{out:?}");
    }

    #[test]
    fn a_kernel_sample_without_a_chain_is_its_instruction() {
        // ip, pid tid, time, period, nr = 0.
        let mut body = words(&[0xffff_ffff_8100_0000]);
        body.extend(pair(3, 4));
        body.extend(words(&[123, 10_000, 0]));
        let out = parsed(&record(SAMPLE, CPUMODE_KERNEL, &body));
        assert_eq!(
            out,
            vec![Timed {
                time: 123,
                record: Record::Sample {
                    pid: 3,
                    tid: 4,
                    chain: vec![0xffff_ffff_8100_0000],
                    kernel: true,
                    period: 10_000,
                    stack: None,
                }
            }]
        );
    }

    #[test]
    fn a_chain_longer_than_its_record_is_dropped() {
        let mut body = words(&[0x401000]);
        body.extend(pair(3, 4));
        // nr = 1000, one address given.
        body.extend(words(&[123, 1, 1000, 0x401000]));
        let mut good = words(&[0x402000]);
        good.extend(pair(3, 4));
        good.extend(words(&[124, 1, 1, 0x402000]));
        let out = parsed(&[record(SAMPLE, 2, &body), record(SAMPLE, 2, &good)].concat());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].time, 124);
    }

    /// A DWARF sample: kernel chain, then the user registers (abi, bp,
    /// sp, ip), the stack's size, bytes and dynamic size.
    fn dwarf_sample(chain: &[u64], abi: u64, stack: &[u8], dyn_size: u64) -> Vec<u8> {
        let mut body = words(&[0x401234]);
        body.extend(pair(9, 9));
        body.extend(words(&[50, 1000, chain.len() as u64]));
        body.extend(words(chain));
        body.extend(words(&[abi]));
        if abi != 0 {
            body.extend(words(&[0x7ffd_0100, 0x7ffd_0000, 0x401234]));
        }
        body.extend(words(&[stack.len() as u64]));
        body.extend(stack);
        if !stack.is_empty() {
            body.extend(words(&[dyn_size]));
        }
        record(SAMPLE, 2, &body)
    }

    #[test]
    fn dwarf_samples_carry_their_registers_and_stack() {
        let stack: Vec<u8> = (0..16).collect();
        let bytes = dwarf_sample(&[], 2, &stack, 8);
        let mut out = Vec::new();
        parse_with(&bytes, true, &mut out);
        let [
            Timed {
                time: 50,
                record:
                    Record::Sample {
                        chain,
                        stack: Some(s),
                        period: 1000,
                        ..
                    },
            },
        ] = &out[..]
        else {
            panic!("{out:?}");
        };
        assert!(chain.is_empty(), "the user part is unwound later");
        assert_eq!(
            **s,
            UserStack {
                bp: 0x7ffd_0100,
                sp: 0x7ffd_0000,
                ip: 0x401234,
                // Only the dynamic size was written by the program.
                bytes: (0..8).collect(),
            }
        );
        // Read without DWARF, the same record has no stack: its
        // instruction stands for the chain.
        let out = parsed(&bytes);
        assert!(matches!(
            &out[0].record,
            Record::Sample { chain, stack: None, .. } if chain == &[0x401234]
        ));
    }

    #[test]
    fn a_dwarf_sample_without_registers_has_no_stack() {
        // abi 0: the kernel had no user registers (a kernel thread).
        let bytes = dwarf_sample(&[CONTEXT_KERNEL_MARK, 0xffff_ffff_8100_0010], 0, &[], 0);
        let mut out = Vec::new();
        parse_with(&bytes, true, &mut out);
        assert!(
            matches!(
                &out[0].record,
                Record::Sample { chain, stack: None, .. }
                    if chain == &[CONTEXT_KERNEL_MARK, 0xffff_ffff_8100_0010]
            ),
            "{out:?}"
        );
    }

    /// `PERF_CONTEXT_KERNEL`.
    const CONTEXT_KERNEL_MARK: u64 = -128i64 as u64;
}
