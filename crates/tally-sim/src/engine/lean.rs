//! The lean loops: the feeder's record loops for one machine without call
//! tracking ([`Engine::lean`]), the default run.
//!
//! Their state is the current block and the position in it, a few locals
//! that stay in registers. They take only blocks checked lean (see
//! [`LEAN`]: its ids declared, all but the last plain, no locked
//! read-modify-write) and the accesses in them, and at any other record
//! stop having changed nothing, the general path (`feeder`) taking that
//! one record. Each block is checked once, the first time its start id
//! comes ([`Slot`]'s `check` of that id: also whether its last
//! instruction may cross a page, is a branch, whether the block lies in
//! one I1 line), so the loop tests nothing per run.
//!
//! An access is simulated at once, the pieces of the same instruction that
//! follow it read ahead and merged ([`Held::merge`]; the general path holds
//! each access until the next record instead, and an access it holds is
//! simulated here when this loop takes over at a record that starts a
//! block or runs an instruction), and charged to the instruction the last
//! run ended with. A block's `Ir` is counted when it starts (what did not
//! run taken back if the loop stops inside it) and its branch decided when
//! the next block starts; a block in one I1 line is looked up in I1 once.
//!
//! Counting executions only, a stream without accesses (the plugin's
//! `mem=off`) goes through [`Feeder::feed_counts`], where a block record is
//! two entries of the difference array; with calls tracked, through
//! [`Feeder::feed_calls`], where it runs the last block in one step.

use super::feeder::{
    BRANCH_LAST, Block, CHECKED, LEAN, ONE_LINE, PAGE_END, block_flags, block_head, count_runs,
};
use super::{Engine, Feeder, Held, Merge, Position, Slot, branch_events};
use crate::filter::LAST_EXECUTED;
use crate::flow::Kind;
use crate::trace;
use crate::{Counts, Hierarchy};

impl Feeder {
    /// [`Feeder::feed_bytes`] when only executions count (no caches, no
    /// branch predictors, no calls) and the stream has shown no access:
    /// then a block record only counts the last block's rest, as two
    /// entries of the difference array, unless that block was cut short
    /// at a page end. Each block start is checked once (all its ids
    /// declared); the page ends are known from then on. It stops, having
    /// changed nothing for it, at any other record or a block it cannot
    /// take, which the lean loop then takes.
    #[inline(never)]
    pub(super) fn feed_counts(&mut self, e: &mut Engine, bytes: &[u8]) -> usize {
        let mut b = self.block;
        // The last block, if any of it is left to run.
        let mut b_flags = 0;
        if b.done < b.count {
            match block_flags(
                &mut self.heads,
                &mut self.runs,
                &self.slots,
                e.instrs(),
                b.first,
                b.count,
            ) {
                Some(f) => b_flags = f,
                None => return 0,
            }
        }
        let mut last_run = None;
        let mut p = 0;
        while let Some(r) = bytes.get(p..p + 6) {
            if r[0] != trace::T_BLOCK {
                break;
            }
            let first = u32::from_le_bytes([r[1], r[2], r[3], r[4]]);
            let count = u32::from(r[5]);
            let Some(f) = block_flags(
                &mut self.heads,
                &mut self.runs,
                &self.slots,
                e.instrs(),
                first,
                count,
            ) else {
                break;
            };
            if b.done < b.count {
                if b_flags & PAGE_END != 0 {
                    let last = self.slots.get(b.first.wrapping_add(b.count - 1) as usize);
                    let next = self.slots.get(first as usize);
                    if last.map(|s| s.addr) == next.map(|s| s.addr) {
                        break;
                    }
                }
                let (from, to) = (
                    b.first.wrapping_add(b.done) as usize,
                    b.first.wrapping_add(b.count) as usize,
                );
                count_runs(&mut self.runs, from as u32, to as u32);
                last_run = Some(to - 1);
            }
            b = Block {
                first,
                count,
                done: 0,
            };
            b_flags = f;
            p += 6;
        }
        if let Some(last) = last_run.and_then(|k| self.slots.get(k)) {
            // As the general path leaves it after a run.
            e.set_position(Position {
                cur: last.idx,
                pending: None,
                accessed: false,
            });
        }
        self.block = b;
        p
    }

    /// [`Feeder::feed_bytes`] when calls are tracked and the stream has
    /// shown no access (`tally sim --callgrind --cache-sim=no`, the
    /// plugin's `mem=off`): every block then runs whole, so a block record
    /// runs the last block in one step (its branch, the call stack, the
    /// running totals: [`Engine::count_block`]) without the general path's
    /// tests of where it stopped; a block cut at a page end is told by its
    /// flags, not by looking at its ids. A record reads one line, its
    /// block's head (`HeadRuns`, where its executions are counted too),
    /// and hands the engine only the branches it has work for (calls,
    /// returns, indirect jumps): this loop runs once per block of the
    /// program, so every instruction in it counts. It stops, having
    /// changed nothing for it, at any other record, a block not checked
    /// lean or one that the general path must cut, which the general path
    /// then takes.
    #[inline(never)]
    pub(super) fn feed_calls<const ICACHE: bool>(&mut self, e: &mut Engine, bytes: &[u8]) -> usize {
        if e.holds_access() {
            return 0;
        }
        let (heads, runs, slots) = (&mut self.heads[..], &mut self.runs[..], &self.slots[..]);
        // The block that runs when the next record shows where it went,
        // and what of its head the loop needs.
        let mut b = self.block;
        let mut p = 0;
        if b.done >= b.count {
            // Nothing left to run: the first record's block is the next.
            let Some(r) = bytes.get(..6).filter(|r| r[0] == trace::T_BLOCK) else {
                return 0;
            };
            b = Block {
                first: u32::from_le_bytes([r[1], r[2], r[3], r[4]]),
                count: u32::from(r[5]),
                done: 0,
            };
            p = 6;
        } else if b.done != 0 {
            return 0;
        }
        let bh = match block_head(heads, runs, slots, e.instrs(), b.first, b.count) {
            Some(h) if h.check & LEAN != 0 => h,
            _ => return 0,
        };
        let (mut b_check, mut b_last, mut b_kind) = (bh.check, bh.last_idx, bh.last_kind);
        // The branch before the block (kind `Other`: none) by its engine
        // index, and the kinds the engine has work for when one is decided.
        let (mut pend_idx, mut pend_kind) = e.pending_kind();
        let work = e.branch_work();
        // Whether the call in progress has yet to count its first
        // instructions (see `Engine::count_block`).
        let mut fresh = e.fresh_open();
        let mut cur = None;
        while let Some(r) = bytes.get(p..p + 6) {
            if r[0] != trace::T_BLOCK {
                break;
            }
            let first = u32::from_le_bytes([r[1], r[2], r[3], r[4]]);
            let count = u32::from(r[5]);
            let Some(mut h) = heads.get(first as usize).map(|h| h.head) else {
                break;
            };
            if h.check & (CHECKED | LEAN | 0xff) != CHECKED | LEAN | count as u16 {
                match block_head(heads, runs, slots, e.instrs(), first, count) {
                    Some(checked) if checked.check & LEAN != 0 => h = checked,
                    _ => break,
                }
            }
            if b_check & PAGE_END != 0 && page_cut(slots, b, first) {
                break;
            }
            // Block `b` runs whole, as `Engine::exec_plain` runs it.
            if work >> (pend_kind as u32) & 1 != 0 {
                let next = slots.get(b.first as usize).map_or(0, |s| s.addr);
                e.resolve_cold(pend_idx, next);
                fresh = e.fresh_open();
            }
            fresh = e.count_block(b.count, fresh);
            let (from, to) = (b.first, b.first.wrapping_add(b.count));
            if ICACHE && let Some(run) = slots.get(from as usize..to as usize) {
                e.fetch_run(run);
            }
            if b_check & BRANCH_LAST != 0 {
                (pend_idx, pend_kind) = (b_last, b_kind);
            } else {
                pend_kind = Kind::Other;
            }
            cur = Some(b_last);
            match heads.get_mut(from as usize) {
                // Still this block's head (not checked again for another
                // length by the record just read).
                Some(x) if x.head.check == b_check => x.execs += 1,
                _ => count_runs(runs, from, to),
            }
            b = Block {
                first,
                count,
                done: 0,
            };
            (b_check, b_last, b_kind) = (h.check, h.last_idx, h.last_kind);
            p += 6;
        }
        if let Some(cur) = cur {
            // As `Engine::exec_plain` leaves it.
            e.set_position(Position {
                cur,
                pending: (pend_kind != Kind::Other).then_some(pend_idx),
                accessed: false,
            });
        }
        self.block = b;
        p
    }

    /// [`Feeder::feed_bytes`] for the commonest case: one machine, no call
    /// tracking, accesses merged as QEMU's must be. Its state is a few
    /// locals, so that the loop keeps them in registers:
    /// - blocks are taken only if checked lean (see [`LEAN`]), so every
    ///   part of one from its start is one run, and a block taken runs to
    ///   its end before the next one starts;
    /// - an access is simulated at once, charged to the instruction the
    ///   last run ended with: the records after it that belong to the same
    ///   instruction are read ahead and merged into it as [`Held::merge`]
    ///   does (which the general path must hold back for);
    /// - a block's executions are counted when it starts (and what did not
    ///   run taken back if the loop stops inside it), its branch resolved
    ///   when the next one starts.
    ///
    /// At any other record it stops, having changed nothing for it, and
    /// returns the bytes taken, so the general path handles that record;
    /// it stops too before an access whose pieces may go on past `bytes`.
    #[inline(never)]
    pub(super) fn feed_lean<const BS: bool, const ICACHE: bool>(
        &mut self,
        e: &mut Engine,
        bytes: &[u8],
    ) -> usize {
        let b = self.block;
        let mut first = b.first;
        let mut end = b.first.wrapping_add(b.count);
        let mut at = b.first.wrapping_add(b.done);
        // An access the general path holds back: simulated now if the
        // first record starts a block or runs an instruction (the general
        // path would simulate it before anything else then); if it may
        // merge with that record, that path goes on.
        if e.holds_access() {
            let runs_first = match bytes {
                // The filter's records come whole (and never after a held
                // access but at a thread's start).
                [
                    trace::T_BLOCK
                    | trace::T_BLOCK_AFTER
                    | trace::T_READ_HIT..=trace::T_WRITE_MISS
                    | trace::T_SHORT_HIT..,
                    ..,
                ] => true,
                [trace::T_LOAD_AT | trace::T_STORE_AT, index, ..] => {
                    first.wrapping_add(u32::from(*index) + 1).min(end) > at
                }
                _ => false,
            };
            if !runs_first {
                return 0;
            }
            e.release();
        }
        let pos = e.position();
        let Some((m, costs, instrs)) = e.lean_parts() else {
            return 0;
        };
        let (slots, heads, runs) = (&self.slots[..], &mut self.heads[..], &mut self.runs[..]);
        let mut flags = 0;
        if end > first {
            match block_flags(heads, runs, slots, instrs, b.first, b.count) {
                Some(f) if f & LEAN != 0 => flags = f,
                _ => return 0,
            }
        }
        let mut accessed = pos.accessed;
        // A branch the general path left waiting is decided here by the
        // next instruction of this block to run; or, this block having
        // run to its end, it is its last, decided when the next starts.
        if at < end {
            if let Some(p) = pos.pending
                && BS
                && let (Some(next), Some(ins), Some(c)) = (
                    slots.get(at as usize),
                    instrs.get(p as usize),
                    costs.get_mut(p as usize),
                )
            {
                branch_events(m, c, ins.flow.kind, ins.addr, ins.size, next.addr, accessed);
            }
        } else {
            let last = end.checked_sub(1).and_then(|k| slots.get(k as usize));
            let waits = (end > first && flags & BRANCH_LAST != 0)
                .then(|| last.map(|s| s.idx))
                .flatten();
            if pos.pending != waits {
                return 0;
            }
        }
        // The engine's current instruction, as long as this loop has not
        // run any (then the one before `at`).
        let mut cur = pos.cur;
        if at < end {
            // Counted now; what does not run here is taken back at the end.
            count_runs(runs, at, end);
        }
        let mut accesses_seen = self.accesses_seen;
        let mut p = 0;
        'records: while let Some(&tag) = bytes.get(p) {
            // Block records first: with the plugin counting D1 hits,
            // nearly every record is one.
            if tag == trace::T_BLOCK_AFTER || tag == trace::T_BLOCK {
                let n = if tag == trace::T_BLOCK { 6 } else { 7 };
                let Some(r) = bytes.get(p..p + n) else { break };
                let new_first = u32::from_le_bytes([r[1], r[2], r[3], r[4]]);
                let count = u32::from(r[5]);
                // How far the last block ran, as its last access shows
                // (D1 hits counted by the plugin have no record).
                if n == 7 && r[6] != 0 && end > first {
                    accesses_seen = true;
                    let to = first.wrapping_add(u32::from(r[6])).min(end);
                    LeanBlock { first, end, flags }.run::<ICACHE>(m, slots, costs, &mut at, to);
                    accessed |= at == to;
                }
                let f = match block_flags(heads, runs, slots, instrs, new_first, count) {
                    Some(f) if f & LEAN != 0 => f,
                    _ => break,
                };
                if end > first {
                    let (Some(next), Some(last)) = (
                        slots.get(new_first as usize).map(|s| s.addr),
                        slots.get(end as usize - 1),
                    ) else {
                        break;
                    };
                    if at < end {
                        // The rest of the last block, unless it was cut
                        // short (see `start_block`).
                        if flags & PAGE_END != 0 && last.addr == next {
                            break;
                        }
                        if accesses_seen {
                            let Some(from) = slots.get(at as usize) else {
                                break;
                            };
                            if (from.addr..last.addr).contains(&next) {
                                break;
                            }
                        }
                        LeanBlock { first, end, flags }
                            .run::<ICACHE>(m, slots, costs, &mut at, end);
                        accessed = false;
                    }
                    if BS
                        && flags & BRANCH_LAST != 0
                        && let Some(c) = costs.get_mut(last.idx as usize)
                    {
                        branch_events(m, c, last.kind, last.addr, last.size, next, accessed);
                    }
                    cur = last.idx;
                }
                first = new_first;
                end = new_first.wrapping_add(count);
                at = new_first;
                flags = f;
                count_runs(runs, first, end);
                p += n;
            } else if tag == trace::T_LOAD_AT || tag == trace::T_STORE_AT {
                let Some(r) = bytes.get(p..p + 11) else { break };
                let index = r[1];
                let mut held = Some(Held {
                    store: tag == trace::T_STORE_AT,
                    addr: u64::from_le_bytes([r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]]),
                    size: u64::from(r[10]),
                });
                // The pieces of the same instruction's access that follow,
                // merged as the general path merges them.
                let mut n = 11;
                loop {
                    let Some(&t) = bytes.get(p + n) else {
                        break 'records;
                    };
                    if t != trace::T_LOAD_AT && t != trace::T_STORE_AT {
                        break;
                    }
                    let Some(q) = bytes.get(p + n..p + n + 11) else {
                        break 'records;
                    };
                    if q[1] != index {
                        break;
                    }
                    let qaddr =
                        u64::from_le_bytes([q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9]]);
                    match Held::merge(&mut held, t == trace::T_STORE_AT, qaddr, u64::from(q[10])) {
                        Merge::Into => n += 11,
                        // The load stands for both.
                        Merge::Modify => {
                            n += 11;
                            break;
                        }
                        Merge::Apart => break,
                    }
                }
                let Some(Held { store, addr, size }) = held else {
                    break;
                };
                let run = LeanBlock { first, end, flags };
                let Some(i) = run.to_access::<ICACHE>(m, slots, costs, &mut at, index) else {
                    break;
                };
                if let Some(c) = costs.get_mut(i as usize) {
                    if store {
                        m.write(addr, size, c);
                    } else {
                        m.read(addr, size, c);
                    }
                }
                accessed = true;
                accesses_seen = true;
                p += n;
            } else if tag >= trace::T_SHORT_HIT
                || (trace::T_READ_HIT..=trace::T_WRITE_MISS).contains(&tag)
            {
                // A whole access that the plugin's D1 filter decided.
                let short = tag >= trace::T_SHORT_HIT;
                let miss = !short && tag >= trace::T_READ_MISS;
                let n = if short {
                    1
                } else if miss {
                    12
                } else {
                    2
                };
                let Some(r) = bytes.get(p..p + n) else { break };
                let (index, store) = if short {
                    (tag & 63, tag & 64 != 0)
                } else {
                    // Odd tags are stores.
                    (r[1], tag & 1 != 0)
                };
                if index == LAST_EXECUTED {
                    break;
                }
                let run = LeanBlock { first, end, flags };
                let Some(i) = run.to_access::<ICACHE>(m, slots, costs, &mut at, index) else {
                    break;
                };
                if let Some(c) = costs.get_mut(i as usize) {
                    if miss {
                        let addr =
                            u64::from_le_bytes([r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]]);
                        m.d1_missed(
                            store,
                            addr,
                            u64::from(u16::from_le_bytes([r[10], r[11]])),
                            c,
                        );
                    } else if store {
                        c.dw += 1;
                    } else {
                        c.dr += 1;
                    }
                }
                accessed = true;
                accesses_seen = true;
                p += n;
            } else {
                break;
            }
        }
        if at < end {
            // Taken back: ids `at .. end` have not run.
            count_runs(runs, end, at);
        }
        self.block = Block {
            first,
            count: end.wrapping_sub(first),
            done: at.wrapping_sub(first),
        };
        self.accesses_seen = accesses_seen;
        // The engine's state as the general path would leave it: the last
        // instruction run, and its branch if it ended the block (an
        // earlier block's was decided when the next started).
        let last = (at > first)
            .then(|| at.checked_sub(1).and_then(|k| slots.get(k as usize)))
            .flatten();
        e.set_position(Position {
            cur: last.map_or(cur, |s| s.idx),
            pending: last
                .filter(|_| at == end && flags & BRANCH_LAST != 0)
                .map(|s| s.idx),
            accessed,
        });
        p
    }
}

/// The I1 lookups of ids `from .. to` of a lean block, run one after
/// another (see [`Slot::next`]); misses kept by instruction.
#[inline(always)]
fn fetch_run(m: &mut Hierarchy, slots: &[Slot], costs: &mut [Counts], from: u32, to: u32) {
    let mut j = from;
    while let Some(s) = slots.get(j as usize) {
        let miss = m.fetch_line(s.line, s.straddle, s.addr, u64::from(s.size));
        if miss != 0
            && let Some(c) = costs.get_mut(s.idx as usize)
        {
            m.count_fetch_miss(miss, c);
        }
        j += u32::from(s.next);
        if j >= to {
            break;
        }
    }
}

/// The block the lean loop is in: ids `first .. end`, its
/// [`Slot`] check flags.
#[derive(Clone, Copy)]
struct LeanBlock {
    first: u32,
    end: u32,
    flags: u16,
}

impl LeanBlock {
    /// The I1 lookups of ids `from .. to` of the block, run one after
    /// another (none after the first if the block lies in one I1 line).
    #[inline(always)]
    fn fetch<const ICACHE: bool>(
        self,
        m: &mut Hierarchy,
        slots: &[Slot],
        costs: &mut [Counts],
        from: u32,
        to: u32,
    ) {
        if ICACHE && (self.flags & ONE_LINE == 0 || from == self.first) {
            fetch_run(m, slots, costs, from, to);
        }
    }

    /// Runs ids `*at .. to` of the block, if not yet run.
    #[inline(always)]
    fn run<const ICACHE: bool>(
        self,
        m: &mut Hierarchy,
        slots: &[Slot],
        costs: &mut [Counts],
        at: &mut u32,
        to: u32,
    ) {
        if *at < to {
            self.fetch::<ICACHE>(m, slots, costs, *at, to);
            *at = to;
        }
    }

    /// Runs the block up to its instruction `index`, whose access comes
    /// next, and returns the engine's index of the instruction charged
    /// with it: the last run. `None` if nothing of this block ran (the
    /// general path knows whose access it is).
    #[inline(always)]
    fn to_access<const ICACHE: bool>(
        self,
        m: &mut Hierarchy,
        slots: &[Slot],
        costs: &mut [Counts],
        at: &mut u32,
        index: u8,
    ) -> Option<u32> {
        let to = self.first.wrapping_add(u32::from(index) + 1).min(self.end);
        if *at < to {
            self.fetch::<ICACHE>(m, slots, costs, *at, to);
            *at = to;
        } else if *at == self.first {
            return None;
        }
        slots.get(*at as usize - 1).map(|s| s.idx)
    }
}

/// Whether block `b`, whose last instruction may cross into the next
/// page, was cut before it: the next block, at id `next`, starts at that
/// instruction (see [`Feeder::start_block`]).
#[cold]
fn page_cut(slots: &[Slot], b: Block, next: u32) -> bool {
    let last = b.first.wrapping_add(b.count).wrapping_sub(1);
    let addr = |id: u32| slots.get(id as usize).map(|s| s.addr);
    addr(last) == addr(next)
}
