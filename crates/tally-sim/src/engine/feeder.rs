//! The feeder: a trace stream's records ([`crate::trace`]) as engine
//! instructions.
//!
//! The stream names instructions by ids the plugin gives them as it
//! translates code; each id gets a [`Slot`] with what the feeder needs of
//! it (the engine's index, its I1 line, whether it branches). A block
//! record runs ids lazily: an instruction counts once a later record
//! shows it ran, so a block cut short counts only what ran. What runs
//! between two records is a run of consecutive ids ending at most at one
//! branch: it is executed in one step ([`Engine::exec_plain`]), its `Ir`
//! counted as two entries of a difference array over stream ids, its I1
//! lookups only where an instruction leaves the line of the one before
//! ([`Slot::next`]). Block and access records are decoded straight from
//! the read buffer ([`Feeder::feed_bytes`]); with one machine and no call
//! tracking that is the lean loop (`lean`), with calls tracked and no
//! access in the stream `Feeder::feed_calls` (`lean` too), and this
//! module's general path takes what it leaves.
//!
//! QEMU 7.2's two ways of cutting blocks (an instruction crossing a page,
//! shown to the plugin but moved to the next block; a restart at a
//! faulting store) are recognised by where the next block starts
//! ([`Feeder::start_block`]).

use super::{Engine, Instr};
use crate::Error;
use crate::filter::LAST_EXECUTED;
use crate::flow::{Flow, Kind, classify_x86_64};
use crate::trace::{self, Record};
use rustc_hash::FxHashMap;

/// Feeds the records of a tally trace stream to an [`Engine`]: maps the
/// stream's instruction ids to the engine's, and runs blocks as the stream
/// shows their instructions ran (see [`Record::Block`]).
///
/// Most of a block is instructions that neither branch nor touch memory
/// between two records; those run in bulk ([`Engine::exec_plain`]), their
/// executions counted as differences over stream ids (a run of ids
/// `a..b` adds one at `a` and takes one at `b`), summed at the end.
#[derive(Clone, Default)]
pub struct Feeder {
    pub(super) slots: Vec<Slot>,
    /// By stream id, beside `slots`: the block that starts there.
    pub(super) heads: Vec<HeadRuns>,
    pub(super) runs: Vec<u64>,
    pub(super) block: Block,
    thread: u32,
    parked: FxHashMap<u32, Block>,
    /// An access record has been fed. Until then (for good, in a stream
    /// recorded with the plugin's `mem=off`) a block that a later one
    /// starts inside is taken as a loop, never as a restart at a faulting
    /// access, which only access records show.
    pub(super) accesses_seen: bool,
}

/// A stream id's instruction, as the feeder needs it.
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Its address.
    pub addr: u64,
    /// The I1 line it is in (of the machine with the smallest lines), if
    /// it does not straddle two ([`Slot::straddle`]): the lean loop's
    /// instruction fetch is one comparison when I1's last line is this one.
    pub line: u64,
    /// The engine's index (`u32::MAX`: not declared).
    pub idx: u32,
    /// What it does to control flow.
    pub kind: Kind,
    /// It spans two I1 lines.
    pub straddle: bool,
    /// Its length in bytes.
    pub size: u8,
    /// It has a memory operand.
    pub memory: bool,
    /// How many ids up to and including this one are plain, neither a
    /// branch nor anything else [`Engine::exec`] must see (at most 255; 0:
    /// this one is not): a run of a block is checked in one step.
    pub plain_behind: u8,
    /// How far ahead the next id is that leaves the I1 line (of every
    /// machine) where the instruction of the id before it ends
    /// ([`NO_FETCH`]: none known). Fetched right after that one, an id
    /// that does not leave it hits and changes nothing, so a run looks up
    /// its first id and then only these, without a test per id. (A
    /// lookup too many would change nothing either, so an id declared out
    /// of order just says 1.)
    pub next: u8,
}

/// What the lean loops ([`Feeder::feed_lean`], [`Feeder::feed_counts`],
/// [`Feeder::feed_calls`]) need of the block that starts at a stream id,
/// kept apart from the slots (see [`HeadRuns`]): the block's check and
/// its last instruction.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Head {
    /// The last instruction's engine index.
    pub(super) last_idx: u32,
    /// 0, or the block checked once (all its ids declared): its length,
    /// with [`CHECKED`] and the other flags.
    pub(super) check: u16,
    /// What the last instruction does to control flow.
    pub(super) last_kind: Kind,
}

/// A stream id's [`Head`] and the whole runs of its block counted but not
/// yet in the difference array ([`Feeder::runs`]), which they join when
/// the block is checked again or the stream ends: 16 bytes, four to a
/// cache line, so that a block record reads one line where the slots of
/// its first and last instructions and the difference array would be
/// three or four (ids are spread, so each is likely a miss).
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(16))]
pub(super) struct HeadRuns {
    pub(super) head: Head,
    pub(super) execs: u64,
}

impl HeadRuns {
    /// Moves the whole runs counted here into the difference array.
    #[inline]
    fn flush(&mut self, runs: &mut [u64], first: u32) {
        if self.execs != 0 {
            let end = first.wrapping_add(u32::from(self.head.check as u8));
            count_runs_n(runs, first, end, self.execs);
            self.execs = 0;
        }
    }
}

/// [`Slot::next`] when no later id is known to need an I1 lookup: past
/// the end of any run (a block is at most 255 ids).
pub const NO_FETCH: u8 = u8::MAX;

/// [`Head::check`]: the block was checked.
pub(super) const CHECKED: u16 = 1 << 8;
/// [`Head::check`]: its last instruction may cross into the next page.
pub(super) const PAGE_END: u16 = 1 << 9;
/// [`Head::check`]: the lean loop ([`Feeder::feed_lean`]) may take
/// it: all its instructions but the last are plain, so any part of it from
/// its start is one run, and none is a locked read-modify-write (whose
/// store the general path counts as a read).
pub(super) const LEAN: u16 = 1 << 10;
/// [`Head::check`]: its instructions are all in one I1 line (none
/// straddling), so once its first has been fetched, the rest hit I1's
/// last line and need no lookup.
pub(super) const ONE_LINE: u16 = 1 << 11;
/// [`Head::check`]: its last instruction is a branch (of any kind).
pub(super) const BRANCH_LAST: u16 = 1 << 12;

/// The [`Head::check`] of id `first` for a block of ids `first .. first +
/// count`, checked the first time; `None` if some id is not declared.
#[inline(always)]
pub(super) fn block_flags(
    heads: &mut [HeadRuns],
    runs: &mut [u64],
    slots: &[Slot],
    instrs: &[Instr],
    first: u32,
    count: u32,
) -> Option<u16> {
    block_head(heads, runs, slots, instrs, first, count).map(|h| h.check)
}

/// The [`Head`] of id `first` for a block of ids `first .. first + count`,
/// checked the first time; `None` if some id is not declared.
#[inline(always)]
pub(super) fn block_head(
    heads: &mut [HeadRuns],
    runs: &mut [u64],
    slots: &[Slot],
    instrs: &[Instr],
    first: u32,
    count: u32,
) -> Option<Head> {
    let h = heads.get(first as usize)?.head;
    if h.check & (CHECKED | 0xff) == CHECKED | count as u16 {
        return Some(h);
    }
    check_block(heads, runs, slots, instrs, first, count)
}

#[cold]
fn check_block(
    heads: &mut [HeadRuns],
    runs: &mut [u64],
    slots: &[Slot],
    instrs: &[Instr],
    first: u32,
    count: u32,
) -> Option<Head> {
    let ids = slots
        .get(first as usize..first as usize + count as usize)
        .filter(|s| !s.is_empty() && s.iter().all(|s| s.idx != u32::MAX))?;
    let (last, body) = ids.split_last()?;
    let mut f = CHECKED | count as u16;
    if near_page_end(last.addr) {
        f |= PAGE_END;
    }
    let atomic = |s: &Slot| instrs.get(s.idx as usize).is_none_or(|i| i.flow.atomic_rmw);
    if body.iter().all(|s| s.plain_behind != 0) && !ids.iter().any(atomic) {
        f |= LEAN;
    }
    if ids.iter().all(|s| !s.straddle && s.line == ids[0].line) {
        f |= ONE_LINE;
    }
    if last.plain_behind == 0 {
        f |= BRANCH_LAST;
    }
    let h = heads.get_mut(first as usize)?;
    // The runs counted for the block this id started until now.
    h.flush(runs, first);
    h.head = Head {
        last_idx: last.idx,
        check: f,
        last_kind: last.kind,
    };
    Some(h.head)
}

/// An instruction that may cross into the next page: QEMU (7.2) ends a
/// block before it (see [`Feeder::start_block`]).
#[inline(always)]
fn near_page_end(addr: u64) -> bool {
    addr & 0xfff > 0x1000 - 16
}

const UNDECLARED: Slot = Slot {
    addr: 0,
    kind: Kind::Other,
    line: 0,
    straddle: false,
    idx: u32::MAX,
    size: 0,
    memory: false,
    plain_behind: 0,
    next: NO_FETCH,
};

/// The current block of a thread: stream ids `first + done .. first + count`
/// have not run yet.
#[derive(Clone, Copy, Default)]
pub(super) struct Block {
    pub(super) first: u32,
    pub(super) count: u32,
    pub(super) done: u32,
}

impl Feeder {
    /// A feeder for a new stream.
    pub fn new() -> Feeder {
        Feeder::default()
    }

    /// Feeds one record. `Map` records are the caller's (they name code,
    /// they cost nothing); `End` ends every thread's block. Instructions
    /// are classified as x86-64 when `x86`. The error is a stream id used
    /// before its declaration.
    #[inline]
    pub fn feed(&mut self, e: &mut Engine, rec: &Record<'_>, x86: bool) -> Result<(), u32> {
        match *rec {
            Record::Exec { id } => {
                self.run_block(e)?;
                e.exec(self.slot(id)?.idx);
            }
            Record::Block { first, count } => self.start_block(e, first, count)?,
            Record::Progress { progress } => self.progress(e, progress)?,
            Record::BlockAfter {
                first,
                count,
                progress,
            } => {
                self.progress(e, progress)?;
                self.start_block(e, first, count)?;
            }
            Record::LoadAt { index, addr, size } => {
                self.accesses_seen = true;
                self.run_to(e, u32::from(index) + 1)?;
                e.load(addr, size);
            }
            Record::StoreAt { index, addr, size } => {
                self.accesses_seen = true;
                self.run_to(e, u32::from(index) + 1)?;
                e.store(addr, size);
            }
            Record::Hit { index, store } => {
                self.run_to_access(e, index)?;
                e.d1_hit(store);
            }
            Record::Miss {
                index,
                store,
                addr,
                size,
            } => {
                self.run_to_access(e, index)?;
                e.d1_miss(store, addr, size);
            }
            Record::Load { addr, size } => {
                self.accesses_seen = true;
                e.load(addr, size)
            }
            Record::Store { addr, size } => {
                self.accesses_seen = true;
                e.store(addr, size)
            }
            Record::Declare { id, addr, code } => {
                let flow = if x86 {
                    classify_x86_64(code, addr)
                } else {
                    Flow::default()
                };
                let size = code.len() as u8;
                let idx = e.declare(addr, size, || flow);
                let id = id as usize;
                let in_order = id == self.slots.len();
                if self.slots.len() <= id {
                    self.slots.resize(id + 1, UNDECLARED);
                    self.heads.resize(id + 1, HeadRuns::default());
                    self.runs.resize(id + 2, 0);
                } else if self.slots[id].idx != u32::MAX {
                    // An id declared again: every block checked may hold
                    // what it replaces.
                    self.forget_heads();
                }
                let bits = e.i1_line_bits();
                let line = |a: u64| a >> bits;
                let end = addr.wrapping_add(u64::from(size.max(1)) - 1);
                let cont = in_order
                    && id > 0
                    && self.slots[id - 1].idx != u32::MAX
                    && line(addr) == line(end)
                    && {
                        let p = self.slots[id - 1];
                        line(p.addr.wrapping_add(u64::from(p.size.max(1)) - 1)) == line(addr)
                    };
                if !cont {
                    // Runs through the ids before it must look it up.
                    for k in (id.saturating_sub(usize::from(NO_FETCH) - 1)..id).rev() {
                        let s = &mut self.slots[k];
                        if s.idx == u32::MAX || s.next != NO_FETCH {
                            break;
                        }
                        s.next = (id - k) as u8;
                    }
                }
                let flow = e.instrs()[idx as usize].flow;
                let plain = flow.kind == Kind::Other;
                let plain_behind = match (plain, id.checked_sub(1)) {
                    (false, _) => 0,
                    (true, None) => 1,
                    (true, Some(p)) => self.slots[p].plain_behind.saturating_add(1),
                };
                self.slots[id] = Slot {
                    addr,
                    kind: flow.kind,
                    line: line(addr),
                    straddle: line(addr) != line(end),
                    idx,
                    size,
                    plain_behind,
                    memory: flow.memory,
                    next: if in_order { NO_FETCH } else { 1 },
                };
            }
            Record::Thread(t) => {
                if t != self.thread {
                    let b = std::mem::take(&mut self.block);
                    self.parked.insert(self.thread, b);
                    self.block = self.parked.remove(&t).unwrap_or_default();
                    self.thread = t;
                    e.thread(t);
                }
            }
            Record::End => self.finish(e)?,
            // The caller's: mappings name code, slots hold records, the
            // filter's records concern the machine.
            Record::Map { .. }
            | Record::Slot { .. }
            | Record::D1State(_)
            | Record::Fork { .. }
            | Record::Execve
            | Record::D1Filter { .. } => {}
        }
        Ok(())
    }

    /// Feeds the block, load and store records at the start of `bytes`
    /// (the commonest, decoded here without building [`Record`]s), up to
    /// the first record of another kind or cut off; returns the bytes
    /// taken. The error is the bytes taken before the record that names
    /// an undeclared id, and that id.
    #[inline]
    pub fn feed_bytes(&mut self, e: &mut Engine, bytes: &[u8]) -> Result<usize, (usize, u32)> {
        let opts = e.options();
        if opts.calls && !self.accesses_seen {
            return self.feed_bytes_calls(e, bytes);
        }
        if !(e.lean() && opts.merge_modify) {
            return self.feed_bytes_as(e, bytes);
        }
        let mut p = 0;
        loop {
            // Counting executions only, and no access so far (a stream of
            // the plugin's `mem=off`): blocks alone, with little to do.
            if !opts.branch_sim && opts.no_icache && !self.accesses_seen {
                p += self.feed_counts(e, bytes.get(p..).unwrap_or_default());
            }
            let rest = bytes.get(p..).unwrap_or_default();
            p += match (opts.branch_sim, opts.no_icache) {
                (true, false) => self.feed_lean::<true, true>(e, rest),
                (true, true) => self.feed_lean::<true, false>(e, rest),
                (false, false) => self.feed_lean::<false, true>(e, rest),
                (false, true) => self.feed_lean::<false, false>(e, rest),
            };
            // A block or access record the lean loop does not take goes
            // through the general path alone, then the lean loop goes on;
            // anything else is the caller's.
            let len = match bytes.get(p) {
                Some(&trace::T_BLOCK) => 6,
                Some(&trace::T_BLOCK_AFTER) => 7,
                Some(&trace::T_PROGRESS) => 2,
                Some(&(trace::T_LOAD_AT | trace::T_STORE_AT)) => 11,
                Some(&(trace::T_READ_MISS | trace::T_WRITE_MISS)) => 12,
                Some(&(trace::T_READ_HIT | trace::T_WRITE_HIT)) => 2,
                Some(&(trace::T_SHORT_HIT..)) => 1,
                _ => return Ok(p),
            };
            let Some(one) = bytes.get(p..p + len) else {
                return Ok(p);
            };
            match self.feed_bytes_as(e, one) {
                Ok(n) if n == len => p += n,
                Ok(n) => return Ok(p + n),
                Err((n, id)) => return Err((p + n, id)),
            }
        }
    }

    /// [`Feeder::feed_bytes`] with calls tracked, until the stream shows an
    /// access: blocks through [`Feeder::feed_calls`], a record it does not
    /// take through the general path alone.
    #[inline(never)]
    fn feed_bytes_calls(&mut self, e: &mut Engine, bytes: &[u8]) -> Result<usize, (usize, u32)> {
        let mut p = 0;
        while !self.accesses_seen {
            let rest = bytes.get(p..).unwrap_or_default();
            p += if e.options().no_icache {
                self.feed_calls::<false>(e, rest)
            } else {
                self.feed_calls::<true>(e, rest)
            };
            let len = match bytes.get(p) {
                Some(&trace::T_BLOCK) => 6,
                _ => break,
            };
            let Some(one) = bytes.get(p..p + len) else {
                return Ok(p);
            };
            match self.feed_bytes_as(e, one) {
                Ok(n) if n == len => p += n,
                Ok(n) => return Ok(p + n),
                Err((n, id)) => return Err((p + n, id)),
            }
        }
        match self.feed_bytes_as(e, bytes.get(p..).unwrap_or_default()) {
            Ok(n) => Ok(p + n),
            Err((n, id)) => Err((p + n, id)),
        }
    }

    #[inline(never)]
    fn feed_bytes_as(&mut self, e: &mut Engine, bytes: &[u8]) -> Result<usize, (usize, u32)> {
        let mut p = 0;
        while let Some(&tag) = bytes.get(p) {
            match tag {
                trace::T_BLOCK => {
                    let Some(b) = bytes.get(p..p + 6) else { break };
                    let first = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
                    self.start_block(e, first, b[5]).map_err(|id| (p, id))?;
                    p += 6;
                }
                trace::T_LOAD_AT | trace::T_STORE_AT => {
                    let Some(b) = bytes.get(p..p + 11) else { break };
                    let mut a = [0u8; 8];
                    a.copy_from_slice(&b[2..10]);
                    let addr = u64::from_le_bytes(a);
                    self.run_to(e, u32::from(b[1]) + 1).map_err(|id| (p, id))?;
                    e.access(tag == trace::T_STORE_AT, addr, u64::from(b[10]));
                    self.accesses_seen = true;
                    p += 11;
                }
                trace::T_BLOCK_AFTER | trace::T_PROGRESS => {
                    let n = if tag == trace::T_PROGRESS { 2 } else { 7 };
                    let Some(b) = bytes.get(p..p + n) else { break };
                    self.progress(e, b[n - 1]).map_err(|id| (p, id))?;
                    if tag == trace::T_BLOCK_AFTER {
                        let first = u32::from_le_bytes([b[1], b[2], b[3], b[4]]);
                        self.start_block(e, first, b[5]).map_err(|id| (p, id))?;
                    }
                    p += n;
                }
                trace::T_SHORT_HIT.. => {
                    self.run_to(e, u32::from(tag & 63) + 1)
                        .map_err(|id| (p, id))?;
                    self.accesses_seen = true;
                    e.d1_hit(tag & 64 != 0);
                    p += 1;
                }
                trace::T_READ_HIT..=trace::T_WRITE_MISS => {
                    let miss = tag >= trace::T_READ_MISS;
                    let Some(b) = bytes.get(p..p + if miss { 12 } else { 2 }) else {
                        break;
                    };
                    self.run_to_access(e, b[1]).map_err(|id| (p, id))?;
                    // Odd tags are stores.
                    let store = tag & 1 != 0;
                    if miss {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(&b[2..10]);
                        e.d1_miss(
                            store,
                            u64::from_le_bytes(a),
                            u16::from_le_bytes([b[10], b[11]]),
                        );
                    } else {
                        e.d1_hit(store);
                    }
                    p += b.len();
                }
                _ => break,
            }
        }
        Ok(p)
    }

    /// Feeds all the records of `bytes`, a slot of the plugin's shared
    /// buffer file (see [`crate::trace::shared`]): records of one thread
    /// that execute code. The error is the offset in `bytes` of the record
    /// at fault and what is wrong with it.
    pub fn feed_slice(
        &mut self,
        e: &mut Engine,
        bytes: &[u8],
        x86: bool,
    ) -> Result<(), (usize, Error)> {
        let mut p = 0;
        while p < bytes.len() {
            p += self
                .feed_bytes(e, &bytes[p..])
                .map_err(|(n, id)| (p + n, Error::SlotUndeclared(id)))?;
            match trace::decode(&bytes[p..]) {
                Err(tag) => return Err((p, Error::SlotTag(tag))),
                Ok(trace::Decoded::Need(_)) if p == bytes.len() => break,
                Ok(trace::Decoded::Need(_)) => return Err((p, Error::SlotTruncated)),
                Ok(trace::Decoded::Record(r, n)) => {
                    if matches!(
                        r,
                        Record::Slot { .. }
                            | Record::Map { .. }
                            | Record::End
                            | Record::Fork { .. }
                            | Record::Execve
                            | Record::D1State(_)
                            | Record::D1Filter { .. }
                    ) {
                        return Err((p, Error::SlotMisplaced));
                    }
                    self.feed(e, &r, x86)
                        .map_err(|id| (p, Error::SlotUndeclared(id)))?;
                    p += n;
                }
            }
        }
        Ok(())
    }

    /// The current block ran at least to `progress` ([`Record::Progress`]):
    /// as an access by its instruction `progress - 1` shows it.
    fn progress(&mut self, e: &mut Engine, progress: u8) -> Result<(), u32> {
        if progress == 0 {
            return Ok(());
        }
        self.accesses_seen = true;
        let to = u32::from(progress);
        self.run_to(e, to)?;
        if self.block.done == to {
            e.mark_accessed();
        }
        Ok(())
    }

    /// A whole access by the block's instruction `index`, as the plugin's
    /// D1 filter records it: the block runs up to that instruction
    /// ([`LAST_EXECUTED`]: the last one executed, which has run).
    #[inline(always)]
    fn run_to_access(&mut self, e: &mut Engine, index: u8) -> Result<(), u32> {
        self.accesses_seen = true;
        if index == LAST_EXECUTED {
            return Ok(());
        }
        self.run_to(e, u32::from(index) + 1)
    }

    /// Adds the D1 hits the plugin counted (`hits=on`) by stream id:
    /// `hits[2 * id]` reads, `hits[2 * id + 1]` writes.
    pub fn add_hits(&self, e: &mut Engine, hits: &[u64]) {
        for (s, rw) in self.slots.iter().zip(hits.chunks_exact(2)) {
            if rw[0] | rw[1] != 0 && s.idx != u32::MAX {
                e.add_hits(s.idx, rw[0], rw[1]);
            }
        }
    }

    /// A block starts: stream ids `first .. first + count`.
    #[inline(always)]
    fn start_block(&mut self, e: &mut Engine, first: u32, count: u8) -> Result<(), u32> {
        // Blocks that did not run to their end, as QEMU (7.2) reports
        // them: the new block starts at the instruction where the old one
        // stopped, which did not run in it.
        // - An instruction that may cross into the next page ends a block
        //   before it; the plugin was shown it (its bytes cut at the page
        //   end) as the block's last, and it runs as the first of the next
        //   block.
        // - A fault QEMU handles itself (a store into a page holding
        //   translated code) restarts at that access.
        if self.block.done < self.block.count {
            self.cut_block(first)?;
        }
        self.run_block(e)?;
        self.block = Block {
            first,
            count: u32::from(count),
            done: 0,
        };
        Ok(())
    }

    /// Ends the current block where it stopped, if it did not run to its
    /// end (see [`Feeder::start_block`]); the next block starts at `first`.
    #[inline(always)]
    fn cut_block(&mut self, first: u32) -> Result<(), u32> {
        let b = self.block;
        let next = self.slot(first)?.addr;
        let last = self.slot(b.first.wrapping_add(b.count - 1))?;
        if last.addr == next && near_page_end(last.addr) {
            self.block.count -= 1;
        } else if self.accesses_seen
            && (self.slot(b.first.wrapping_add(b.done))?.addr..last.addr).contains(&next)
        {
            // The access that faulted is not among those seen.
            for k in b.done..b.count {
                let at = self.slot(b.first.wrapping_add(k))?;
                if at.addr == next && at.memory {
                    self.block.count = k;
                    break;
                }
            }
        }
        Ok(())
    }

    /// Runs what is left of every thread's block (at the end of a stream)
    /// and gives the engine the executions counted here.
    pub fn finish(&mut self, e: &mut Engine) -> Result<(), u32> {
        self.run_block(e)?;
        let parked: Vec<(u32, Block)> = self.parked.drain().collect();
        let home = self.thread;
        for (t, b) in parked {
            if b.done < b.count {
                e.thread(t);
                self.block = b;
                self.run_block(e)?;
            }
        }
        e.thread(home);
        self.flush_heads();
        let mut acc = 0u64;
        for (r, s) in self.runs.iter_mut().zip(&self.slots) {
            acc = acc.wrapping_add(*r);
            *r = 0;
            if acc != 0 && s.idx != u32::MAX {
                e.add_ir(s.idx, acc);
            }
        }
        Ok(())
    }

    /// Moves the whole runs counted in the heads into the difference array.
    fn flush_heads(&mut self) {
        for (first, h) in self.heads.iter_mut().enumerate() {
            h.flush(&mut self.runs, first as u32);
        }
    }

    /// Forgets every block checked, their runs kept.
    #[cold]
    fn forget_heads(&mut self) {
        self.flush_heads();
        self.heads.fill(HeadRuns::default());
    }

    #[inline(always)]
    fn slot(&self, id: u32) -> Result<Slot, u32> {
        match self.slots.get(id as usize) {
            Some(s) if s.idx != u32::MAX => Ok(*s),
            _ => Err(id),
        }
    }

    #[inline(always)]
    fn run_block(&mut self, e: &mut Engine) -> Result<(), u32> {
        let n = self.block.count;
        self.run_to(e, n)
    }

    /// Runs the block's instructions up to (not including) `end`.
    #[inline(always)]
    fn run_to(&mut self, e: &mut Engine, end: u32) -> Result<(), u32> {
        let b = self.block;
        let end = end.min(b.count);
        if b.done >= end {
            return Ok(());
        }
        let (from, to) = (
            b.first.wrapping_add(b.done) as usize,
            b.first.wrapping_add(end) as usize,
        );
        let Some(slots) = self.slots.get(from..to) else {
            // Some id is past every declaration.
            let bad = (from..to).find(|&i| i >= self.slots.len()).unwrap_or(from);
            return Err(bad as u32);
        };
        let n = slots.len();
        if slots[n - 1].idx != u32::MAX
            && (n == 1 || usize::from(slots[n - 2].plain_behind) >= n - 1)
        {
            // The common case: one run (an undeclared id is not plain).
            e.exec_plain(slots);
            count_runs(&mut self.runs, from as u32, (from + n) as u32);
            self.block.done = end;
            return Ok(());
        }
        self.run_runs(e, from, end)
    }

    /// [`Feeder::run_to`] when ids `from ..` (of the block) up to `end`
    /// are more than one run, or hold an undeclared id.
    #[inline(never)]
    fn run_runs(&mut self, e: &mut Engine, from: usize, end: u32) -> Result<(), u32> {
        let to = self.block.first.wrapping_add(end) as usize;
        let Some(slots) = self.slots.get(from..to) else {
            return Err(from as u32);
        };
        let mut k = 0;
        while k < slots.len() {
            // A run: plain instructions, and the branch that ends it.
            let rest = &slots[k..];
            let p = rest
                .iter()
                .position(|s| s.plain_behind == 0)
                .unwrap_or(rest.len());
            let n = p + usize::from(p < rest.len() && rest[p].idx != u32::MAX);
            if n == 0 {
                return Err((from + k) as u32);
            }
            e.exec_plain(&rest[..n]);
            count_runs(&mut self.runs, (from + k) as u32, (from + k + n) as u32);
            k += n;
        }
        self.block.done = end;
        Ok(())
    }
}

/// Ids `from .. to` executed once more (see [`Feeder::runs`]).
#[inline(always)]
pub(super) fn count_runs(runs: &mut [u64], from: u32, to: u32) {
    count_runs_n(runs, from, to, 1);
}

/// Ids `from .. to` executed `n` more times.
#[inline(always)]
fn count_runs_n(runs: &mut [u64], from: u32, to: u32, n: u64) {
    if let Some(r) = runs.get_mut(from as usize) {
        *r = r.wrapping_add(n);
    }
    if let Some(r) = runs.get_mut(to as usize) {
        *r = r.wrapping_sub(n);
    }
}
