//! Off-CPU time (`tally record --off-cpu`): where threads wait, and how
//! long.
//!
//! A second event, the software event `PERF_COUNT_SW_CONTEXT_SWITCHES`
//! with a period of 1, is opened on the same threads with its own ring
//! buffers; it samples the stack of each thread being switched out (the
//! kernel's `schedule` under the system call the thread blocks in, under
//! its user stack), and with `context_switch` set it writes a
//! `PERF_RECORD_SWITCH` record at each switch out and in. A switch out
//! that is not a preemption (`PERF_RECORD_MISC_SWITCH_OUT_PREEMPT` clear:
//! the thread blocked, so it was not runnable) costs the time until the
//! same thread is switched in again, or until the recording ends; the
//! stack sampled just before it is where that time went. Preempted
//! threads were still runnable: the time they wait for a CPU is not
//! counted, so on-CPU plus off-CPU time is a thread's wall time less its
//! time in the run queue. Both events then use `CLOCK_MONOTONIC`, so that
//! the end of the recording can be read on the same clock.

use crate::records::{Record, Timed};
use rustc_hash::FxHashMap;

/// The name of the off-CPU event in the profile; its unit is ns.
pub const EVENT: &str = "off-cpu";

/// `PERF_TYPE_SOFTWARE`.
pub const SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CONTEXT_SWITCHES`.
pub const CONTEXT_SWITCHES: u64 = 3;

/// The attribute of the context-switch event, from that of the on-CPU
/// event `on_cpu`: the same sample layout and inheritance, every switch
/// sampled, and none of the mapping, `comm` and task records, which the
/// on-CPU event writes already.
pub fn attr(on_cpu: &crate::sys::Attr) -> crate::sys::Attr {
    use crate::sys::flag::*;
    let mut a = *on_cpu;
    a.kind = SOFTWARE;
    a.config = CONTEXT_SWITCHES;
    a.sample_period_or_freq = 1;
    a.flags &= !(FREQ | MMAP | MMAP2 | COMM | COMM_EXEC | TASK);
    a.flags |= CONTEXT_SWITCH;
    a
}

/// Opens `--off-cpu`'s context-switch event on `tids` (each on every
/// CPU) into `ev`, its first descriptor of each CPU with a ring buffer of
/// its own, so that its samples are told from the on-CPU ones.
pub(crate) fn open(
    options: &crate::Options,
    event: crate::Event,
    exclude_kernel: bool,
    tids: &[i32],
    cpus: &[i32],
    command: bool,
    ev: &mut crate::Events,
) -> Result<(), crate::RecordError> {
    let refused = |what: &str| crate::RecordError::OffCpuNotPermitted {
        what: what.to_string(),
        paranoid: crate::paranoid(),
    };
    // The switches happen in the kernel: an event that excludes it never
    // samples one.
    if exclude_kernel {
        return Err(refused("kernel sampling"));
    }
    let a = attr(&crate::attr(options, event, false, command));
    for &cpu in cpus {
        let mut first: Option<usize> = None;
        for &tid in tids {
            let fd = match crate::sys::perf_event_open(&a, tid, cpu) {
                Ok(fd) => fd,
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) && first.is_some() => continue,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
                    return Err(refused("the context-switch event"));
                }
                Err(e) => {
                    return Err(crate::RecordError::System {
                        what: "perf_event_open of the context-switch event (--off-cpu)".into(),
                        source: e,
                    });
                }
            };
            let placed = match first {
                None => crate::sys::Ring::map(&fd, options.pages).map(|r| {
                    ev.switch_rings.push(r);
                    first = Some(ev.fds.len());
                }),
                Some(i) => crate::sys::set_output(&fd, &ev.fds[i]),
            };
            placed.map_err(|e| crate::RecordError::System {
                what: "the context-switch event's ring buffer (--off-cpu)".into(),
                source: e,
            })?;
            ev.fds.push(fd);
        }
    }
    Ok(())
}

/// The time off the CPU that each blocking switch out of `records` (in
/// time order) starts, by the index of its [`Record::SwitchStack`] in
/// `records`: until the thread's next switch in, or `until` (the end of
/// the recording) if it never ran again. A thread that exits is no longer
/// waiting; a preempted one is not counted (see the module's text).
pub fn blocked(records: &[Timed], until: u64) -> FxHashMap<usize, u64> {
    // Per thread: the stack last sampled at a switch out, and the switch
    // out it belongs to (the stack's index and the time it began).
    let mut stack: FxHashMap<i32, usize> = FxHashMap::default();
    let mut away: FxHashMap<i32, (usize, u64)> = FxHashMap::default();
    let mut out = FxHashMap::default();
    for (i, t) in records.iter().enumerate() {
        match t.record {
            Record::SwitchStack { tid, .. } => {
                stack.insert(tid, i);
            }
            Record::Switch {
                tid,
                out: true,
                preempt,
                ..
            } => {
                let s = stack.remove(&tid);
                away.remove(&tid);
                if let (Some(s), false) = (s, preempt) {
                    away.insert(tid, (s, t.time));
                }
            }
            Record::Switch {
                tid, out: false, ..
            } => {
                if let Some((s, from)) = away.remove(&tid) {
                    out.insert(s, t.time.saturating_sub(from));
                }
            }
            Record::Exit { tid, .. } => {
                stack.remove(&tid);
                away.remove(&tid);
            }
            _ => {}
        }
    }
    for (_, (s, from)) in away {
        out.insert(s, until.saturating_sub(from));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(time: u64, record: Record) -> Timed {
        Timed { time, record }
    }

    fn stack(tid: i32) -> Record {
        Record::SwitchStack {
            pid: 1,
            tid,
            chain: vec![0x1000],
            kernel: true,
            stack: None,
        }
    }

    fn switch(tid: i32, out: bool, preempt: bool) -> Record {
        Record::Switch {
            pid: 1,
            tid,
            out,
            preempt,
        }
    }

    #[test]
    fn a_blocked_thread_costs_the_time_until_it_runs_again() {
        let records = vec![
            at(100, stack(1)),
            at(101, switch(1, true, false)),
            // Thread 2 preempted: not counted.
            at(150, stack(2)),
            at(151, switch(2, true, true)),
            at(160, switch(2, false, false)),
            at(301, switch(1, false, false)),
            // Blocked again, then exits (the kernel's last switch out).
            at(400, stack(1)),
            at(401, switch(1, true, false)),
            at(450, switch(1, false, false)),
            at(500, stack(2)),
            at(501, switch(2, true, false)),
            at(520, Record::Exit { pid: 1, tid: 2 }),
            // Still blocked when the recording ends.
            at(600, stack(3)),
            at(601, switch(3, true, false)),
        ];
        let b = blocked(&records, 1000);
        let mut got: Vec<(usize, u64)> = b.into_iter().collect();
        got.sort_unstable();
        assert_eq!(got, [(0, 200), (6, 49), (12, 399)]);
    }

    #[test]
    fn a_switch_without_its_stack_or_a_stack_without_its_switch_costs_nothing() {
        let records = vec![
            at(10, switch(1, true, false)),
            at(20, switch(1, false, false)),
            at(30, stack(1)),
            at(40, switch(1, false, false)),
        ];
        assert!(blocked(&records, 100).is_empty());
    }

    #[test]
    fn the_switch_event_samples_every_switch_and_writes_switch_records() {
        use crate::sys::flag::*;
        let on_cpu = crate::sys::Attr {
            kind: 0,
            config: 0,
            sample_period_or_freq: 999,
            flags: FREQ | MMAP | MMAP2 | COMM | TASK | INHERIT | DISABLED | ENABLE_ON_EXEC,
            sample_type: crate::DWARF_SAMPLE_TYPE,
            ..Default::default()
        };
        let a = attr(&on_cpu);
        assert_eq!((a.kind, a.config, a.sample_period_or_freq), (1, 3, 1));
        assert_eq!(a.flags & (FREQ | MMAP | MMAP2 | COMM | TASK), 0);
        assert_eq!(
            a.flags & (CONTEXT_SWITCH | INHERIT | DISABLED | ENABLE_ON_EXEC),
            CONTEXT_SWITCH | INHERIT | DISABLED | ENABLE_ON_EXEC
        );
        assert_eq!(a.sample_type, crate::DWARF_SAMPLE_TYPE);
    }
}
