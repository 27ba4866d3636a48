//! The simulation driver: one pass over an access stream through any
//! number of machines, costs kept per instruction.
//!
//! Instructions are declared once ([`Engine::declare`]) and executed by
//! index ([`Engine::exec`]); loads and stores that follow an execution
//! belong to that instruction. A branch's outcome is known only when the
//! next instruction starts, so branch instructions wait in `pending` until
//! then: a conditional branch is taken when the next address is not the
//! fall-through, an indirect branch's target is the next address.
//!
//! With call tracking on, a call pushes a frame holding the running totals
//! of the first machine; the matching return pops it and the difference is
//! the call's inclusive cost, as Callgrind reports it.

use crate::filter::LAST_EXECUTED;
use crate::flow::{Flow, Kind, classify_x86_64};
use crate::trace::{self, Record};
use crate::{Counts, Hierarchy};
use rustc_hash::FxHashMap;

/// A declared instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instr {
    /// Its address.
    pub addr: u64,
    /// Its length in bytes.
    pub size: u8,
    /// What it does to control flow.
    pub flow: Flow,
}

/// What the engine does beyond caches.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineOptions {
    /// Simulate the branch predictors.
    pub branch_sim: bool,
    /// Track calls and their inclusive costs (first machine).
    pub calls: bool,
    /// A load then a store of the same address and size by one instruction
    /// is one modify (counted as a read), as Cachegrind merges them; for
    /// sources that report the two halves separately (QEMU).
    pub merge_modify: bool,
    /// Leave the instruction cache out of runs of instructions (for
    /// counts without cache simulation, where only `Ir` is reported).
    pub no_icache: bool,
}

/// A call in progress.
#[derive(Clone, Debug)]
struct Frame {
    /// Instructions run in the call so far, counted up to 3: a call whose
    /// first or second instruction jumps indirectly (a PLT stub) is a call
    /// of where that jump goes, as Callgrind reports it.
    fresh: u8,
    site: u32,
    target: u64,
    ret: u64,
    start: Counts,
}

/// A call arc's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Arc {
    /// Calls made.
    pub count: u64,
    /// Events from the call to its return (first machine).
    pub inclusive: Counts,
}

/// Where a thread is.
#[derive(Clone, Debug, Default)]
struct Thread {
    cur: u32,
    pending: Option<u32>,
    accessed: bool,
    /// QEMU mode: an access held back until it is known whether the next
    /// one continues it (QEMU splits a 32-byte access into halves) or is
    /// the store half of a modify.
    held: Option<Held>,
    stack: Vec<Frame>,
}

/// An access not yet simulated.
#[derive(Clone, Copy, Debug)]
struct Held {
    store: bool,
    addr: u64,
    size: u64,
}

/// What an access does to the one held before it ([`Held::merge`]).
enum Merge {
    /// It continued the held one, which grew.
    Into,
    /// It is the store half of a read-modify-write of the held load: one
    /// modify, which is a read, so the held load stands for both.
    Modify,
    /// Neither: the held one is done, and this one starts.
    Apart,
}

impl Held {
    /// QEMU's pieces of one instruction's accesses put back together as
    /// Cachegrind sees them: a load or store continuing the held one of
    /// the same kind (QEMU splits a 32-byte access in halves) joins it; a
    /// store of the very bytes of a held load is a modify. The rules of
    /// both the engine and the feeder's lean loop.
    #[inline(always)]
    fn merge(held: &mut Option<Held>, store: bool, addr: u64, size: u64) -> Merge {
        match held {
            Some(h) if store && !h.store && h.addr == addr && h.size == size => Merge::Modify,
            Some(h) if h.store == store && h.addr.wrapping_add(h.size) == addr => {
                h.size += size;
                Merge::Into
            }
            _ => Merge::Apart,
        }
    }
}

/// Costs per instruction and machine, and the calls.
pub struct Engine {
    machines: Vec<Hierarchy>,
    opts: EngineOptions,
    instrs: Vec<Instr>,
    by_addr: FxHashMap<(u64, u8), u32>,
    costs: Vec<Counts>,
    running: Counts,
    arcs: FxHashMap<(u32, u64), Arc>,
    th: Thread,
    thread_id: u32,
    parked: FxHashMap<u32, Thread>,
    /// log2 of the smallest I1 line size of the machines.
    i1_line_bits: u32,
}

/// What a run produced.
pub struct Output {
    /// Instructions; index 0 stands for accesses seen before any
    /// instruction (address 0, size 0).
    pub instrs: Vec<Instr>,
    /// `costs[i * machines + k]`: instruction `i` on machine `k`.
    pub costs: Vec<Counts>,
    /// The number of machines.
    pub machines: usize,
    /// Call arcs by (call-site instruction, target address).
    pub arcs: FxHashMap<(u32, u64), Arc>,
}

impl Output {
    /// The totals of machine `k`.
    pub fn totals(&self, k: usize) -> Counts {
        let mut t = Counts::default();
        for c in self.costs.iter().skip(k).step_by(self.machines) {
            t.add(c);
        }
        t
    }
}

impl Engine {
    /// An engine over `machines` (at least one).
    pub fn new(machines: Vec<Hierarchy>, opts: EngineOptions) -> Engine {
        let n = machines.len().max(1);
        let i1_line_bits = machines
            .iter()
            .map(|m| m.i1_line_size().trailing_zeros())
            .min()
            .unwrap_or(0);
        Engine {
            i1_line_bits,
            machines,
            opts,
            instrs: vec![Instr::default()],
            by_addr: FxHashMap::default(),
            costs: vec![Counts::default(); n],
            running: Counts::default(),
            arcs: FxHashMap::default(),
            th: Thread::default(),
            thread_id: 0,
            parked: FxHashMap::default(),
        }
    }

    /// The index of the instruction at `addr` of `size` bytes, declared
    /// with `flow()` when first seen.
    #[inline]
    pub fn declare(&mut self, addr: u64, size: u8, flow: impl FnOnce() -> Flow) -> u32 {
        if let Some(&i) = self.by_addr.get(&(addr, size)) {
            return i;
        }
        let i = self.instrs.len() as u32;
        self.instrs.push(Instr {
            addr,
            size,
            flow: flow(),
        });
        self.costs
            .extend(std::iter::repeat_n(Counts::default(), self.machines.len()));
        self.by_addr.insert((addr, size), i);
        i
    }

    /// Applies `f` to machine `k` and the counts of instruction `i`; the
    /// first machine's events also go to the running totals when calls
    /// are tracked.
    #[inline(always)]
    fn on(&mut self, i: u32, mut f: impl FnMut(&mut Hierarchy, &mut Counts)) {
        let n = self.machines.len();
        let base = i as usize * n;
        let Some(costs) = self.costs.get_mut(base..base + n) else {
            return;
        };
        let mut pairs = self.machines.iter_mut().zip(costs.iter_mut());
        if self.opts.calls
            && let Some((m, c)) = pairs.next()
        {
            let mut d = Counts::default();
            f(m, &mut d);
            c.add(&d);
            self.running.add(&d);
        }
        for (m, c) in pairs {
            f(m, c);
        }
    }

    /// Instruction `i` executes.
    #[inline(always)]
    pub fn exec(&mut self, i: u32) {
        self.release();
        let ins = self.instrs[i as usize];
        if let Some(p) = self.th.pending.take() {
            self.resolve(p, ins.addr);
        }
        self.th.cur = i;
        self.th.accessed = false;
        if self.opts.calls
            && let Some(f) = self.th.stack.last_mut()
            && f.fresh < 3
        {
            f.fresh += 1;
        }
        if self.opts.no_icache {
            self.on(i, |_, c| c.ir += 1);
        } else {
            self.on(i, |m, c| m.fetch(ins.addr, u64::from(ins.size), c));
        }
        if ins.flow.kind != Kind::Other {
            self.th.pending = Some(i);
        }
    }

    /// The instructions of `run` execute one after another: none but the
    /// last branches, and none accesses memory before the next starts. Their
    /// `Ir` is the caller's to count ([`Engine::add_ir`]), which lets a
    /// stream count a run of a block with two additions; only the I1
    /// misses are kept here, by instruction.
    #[inline(always)]
    pub fn exec_plain(&mut self, run: &[Slot]) {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return;
        };
        self.release();
        if let Some(p) = self.th.pending.take() {
            self.resolve(p, first.addr);
        }
        self.th.cur = last.idx;
        self.th.accessed = false;
        if self.opts.calls {
            if let Some(f) = self.th.stack.last_mut() {
                f.fresh = (usize::from(f.fresh) + run.len()).min(3) as u8;
            }
            self.running.ir += run.len() as u64;
        }
        if !self.opts.no_icache {
            self.fetch_run(run);
        }
        if last.plain_behind == 0 {
            self.th.pending = Some(last.idx);
        }
    }

    /// One machine and no call tracking, the default run: the stream's
    /// commonest records then go through the feeder's lean loop.
    pub fn lean(&self) -> bool {
        self.machines.len() == 1 && !self.opts.calls
    }

    /// The I1 lookups of a run: only where an instruction leaves the line
    /// of the one before; misses kept by instruction (and in the running
    /// totals when `calls`).
    #[inline(always)]
    fn fetch_run(&mut self, run: &[Slot]) {
        let calls = self.opts.calls;
        let n = self.machines.len();
        for (k, m) in self.machines.iter_mut().enumerate() {
            let mut j = 0;
            while let Some(s) = run.get(j) {
                j += usize::from(s.next);
                let miss = m.fetch_lines(s.addr, u64::from(s.size));
                if miss != 0 {
                    let c = &mut self.costs[s.idx as usize * n + k];
                    c.i1mr += 1;
                    c.ilmr += u64::from(miss >> 1);
                    if k == 0 && calls {
                        self.running.i1mr += 1;
                        self.running.ilmr += u64::from(miss >> 1);
                    }
                }
            }
        }
    }

    /// D1 hits of instruction `i` counted outside the stream (first
    /// machine: a D1 filter is one machine's).
    pub fn add_hits(&mut self, i: u32, reads: u64, writes: u64) {
        if let Some(c) = self.costs.get_mut(i as usize * self.machines.len()) {
            c.dr += reads;
            c.dw += writes;
        }
    }

    /// Instruction `i` executed `count` more times, counted outside
    /// [`Engine::exec`] (see [`Engine::exec_plain`]).
    pub fn add_ir(&mut self, i: u32, count: u64) {
        let n = self.machines.len();
        let base = i as usize * n;
        for c in &mut self.costs[base..base + n] {
            c.ir += count;
        }
    }

    /// The pending branch `p` is followed by the instruction at `next`:
    /// the predictors' events ([`branch_events`]), then the call stack.
    #[inline(always)]
    fn resolve(&mut self, p: u32, next: u64) {
        let ins = self.instrs[p as usize];
        if self.opts.branch_sim && !matches!(ins.flow.kind, Kind::Call | Kind::Ret) {
            let ran = self.th.accessed;
            self.on(p, |m, c| {
                branch_events(m, c, ins.flow.kind, ins.addr, ins.size, next, ran)
            });
        }
        match ins.flow.kind {
            Kind::IndirectJump => {
                if let Some(f) = self.th.stack.last_mut()
                    && f.fresh <= 2
                {
                    f.target = next;
                }
            }
            Kind::Call | Kind::IndirectCall if self.opts.calls => {
                self.th.stack.push(Frame {
                    fresh: 0,
                    site: p,
                    target: next,
                    ret: ins.addr.wrapping_add(u64::from(ins.size)),
                    start: self.running,
                });
            }
            Kind::Ret if self.opts.calls => {
                // Pop to the frame this returns to; a return to nowhere on
                // the stack (longjmp, hand-made stacks) pops nothing.
                if let Some(d) = self.th.stack.iter().rposition(|f| f.ret == next) {
                    while self.th.stack.len() > d {
                        if let Some(f) = self.th.stack.pop() {
                            self.close(f);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn close(&mut self, f: Frame) {
        let now = self.running.values();
        let start = f.start.values();
        let mut d = [0u64; 13];
        for (x, (a, b)) in d.iter_mut().zip(now.iter().zip(start)) {
            *x = a - b;
        }
        let a = self.arcs.entry((f.site, f.target)).or_default();
        a.count += 1;
        a.inclusive.add(&Counts::from_values(d));
    }

    /// Simulates the held access, if any.
    #[inline(always)]
    fn release(&mut self) {
        if let Some(h) = self.th.held.take() {
            let cur = self.th.cur;
            if h.store {
                self.on(
                    cur,
                    #[inline(always)]
                    |m, c| m.write(h.addr, h.size, c),
                );
            } else {
                self.on(
                    cur,
                    #[inline(always)]
                    |m, c| m.read(h.addr, h.size, c),
                );
            }
        }
    }

    /// A load by the current instruction.
    #[inline]
    pub fn load(&mut self, addr: u64, size: u8) {
        self.access(false, addr, u64::from(size))
    }

    /// A store by the current instruction.
    #[inline]
    pub fn store(&mut self, addr: u64, size: u8) {
        self.access(true, addr, u64::from(size))
    }

    #[inline(always)]
    fn access(&mut self, store: bool, addr: u64, size: u64) {
        self.th.accessed = true;
        let cur = self.th.cur;
        if !self.opts.merge_modify {
            self.on(cur, |m, c| {
                if store {
                    m.write(addr, size, c)
                } else {
                    m.read(addr, size, c)
                }
            });
            return;
        }
        match Held::merge(&mut self.th.held, store, addr, size) {
            Merge::Into => {}
            Merge::Modify => self.release(),
            Merge::Apart => {
                self.release();
                if store && self.instrs[cur as usize].flow.atomic_rmw {
                    // A locked read-modify-write is reported once.
                    self.on(cur, |m, c| m.read(addr, size, c));
                } else {
                    self.th.held = Some(Held { store, addr, size });
                }
            }
        }
    }

    /// A whole access by the current instruction that hit D1 where D1 was
    /// simulated (the plugin's [`crate::filter`]): only counted.
    #[inline]
    pub fn d1_hit(&mut self, store: bool) {
        self.th.accessed = true;
        self.release();
        let cur = self.th.cur;
        self.on(cur, |_, c| if store { c.dw += 1 } else { c.dr += 1 });
    }

    /// A whole access by the current instruction that missed D1 where D1
    /// was simulated: counted and taken to the levels below.
    #[inline]
    pub fn d1_miss(&mut self, store: bool, addr: u64, size: u16) {
        self.th.accessed = true;
        self.release();
        let cur = self.th.cur;
        self.on(cur, |m, c| m.d1_missed(store, addr, u64::from(size), c));
    }

    /// Whether a stream whose D1 the plugin simulated, with this geometry
    /// and policy, can be fed to this engine: one machine with that D1,
    /// accesses merged as the filter merges them.
    pub fn takes_d1_filter(&self, config: crate::CacheConfig, policy: crate::Policy) -> bool {
        self.opts.merge_modify
            && matches!(self.machines.as_slice(), [m] if m.d1().config() == config && m.d1().policy() == policy)
    }

    /// Takes over D1's state from the plugin's filter; `false` if it is
    /// not a state of this engine's D1.
    pub fn restore_d1(&mut self, state: &[u8]) -> bool {
        match self.machines.as_mut_slice() {
            [m] => m.d1_mut().restore(state),
            _ => false,
        }
    }

    /// A modify (load and store of the same bytes): one read.
    #[inline]
    pub fn modify(&mut self, addr: u64, size: u8) {
        self.th.accessed = true;
        let cur = self.th.cur;
        self.on(cur, |m, c| m.read(addr, u64::from(size), c));
    }

    /// Records that follow are of thread `t`.
    pub fn thread(&mut self, t: u32) {
        if t == self.thread_id {
            return;
        }
        self.release();
        let now = std::mem::take(&mut self.th);
        self.parked.insert(self.thread_id, now);
        self.th = self.parked.remove(&t).unwrap_or_default();
        self.thread_id = t;
    }

    /// Ends the run: calls still open (the program exited inside them) are
    /// closed with the costs so far, as Callgrind closes them at its dump.
    pub fn finish(mut self) -> Output {
        let mut threads: Vec<Thread> = self.parked.drain().map(|(_, t)| t).collect();
        threads.push(std::mem::take(&mut self.th));
        for t in threads {
            self.th = t;
            self.release();
            // A branch at the very end has no successor; a conditional one
            // is resolved as not taken (the exit path).
            if let Some(p) = self.th.pending.take()
                && self.instrs[p as usize].flow.kind == Kind::Cond
            {
                let ins = self.instrs[p as usize];
                self.resolve(p, ins.addr.wrapping_add(u64::from(ins.size)));
            }
            while let Some(f) = self.th.stack.pop() {
                self.close(f);
            }
        }
        Output {
            instrs: self.instrs,
            costs: self.costs,
            machines: self.machines.len(),
            arcs: self.arcs,
        }
    }
}

/// Feeds the records of a tally trace stream to an [`Engine`]: maps the
/// stream's instruction ids to the engine's, and runs blocks as the stream
/// shows their instructions ran (see [`Record::Block`]).
///
/// Most of a block is instructions that neither branch nor touch memory
/// between two records; those run in bulk ([`Engine::exec_plain`]), their
/// executions counted as differences over stream ids (a run of ids
/// `a..b` adds one at `a` and takes one at `b`), summed at the end.
#[derive(Default)]
pub struct Feeder {
    slots: Vec<Slot>,
    runs: Vec<u64>,
    block: Block,
    thread: u32,
    parked: FxHashMap<u32, Block>,
    /// An access record has been fed. Until then (for good, in a stream
    /// recorded with the plugin's `mem=off`) a block that a later one
    /// starts inside is taken as a loop, never as a restart at a faulting
    /// access, which only access records show.
    accesses_seen: bool,
}

/// What is wrong with a record in a slot of the shared buffer file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SliceError {
    /// An instruction executed before its declaration.
    #[error("instruction {0} executed before it was declared")]
    Undeclared(u32),
    /// An unknown tag.
    #[error("unknown record tag {0}")]
    Tag(u8),
    /// The slot ends inside a record.
    #[error("the slot ends inside a record")]
    Truncated,
    /// A record that belongs in the stream itself.
    #[error("a mapping, end or slot record inside a slot")]
    Misplaced,
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
    /// For the lean loops ([`Feeder::feed_lean`], [`Feeder::feed_counts`]):
    /// 0, or the block that starts at this id, checked once (all its ids
    /// declared): its length, with [`CHECKED`] and the other flags.
    check: u16,
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

/// [`Slot::next`] when no later id is known to need an I1 lookup: past
/// the end of any run (a block is at most 255 ids).
pub const NO_FETCH: u8 = u8::MAX;

/// [`Slot::check`]: the block was checked.
const CHECKED: u16 = 1 << 8;
/// [`Slot::check`]: its last instruction may cross into the next page.
const PAGE_END: u16 = 1 << 9;
/// [`Slot::check`]: the lean loop ([`Feeder::feed_lean`]) may take
/// it: all its instructions but the last are plain, so any part of it from
/// its start is one run, and none is a locked read-modify-write (whose
/// store the general path counts as a read).
const LEAN: u16 = 1 << 10;
/// [`Slot::check`]: its instructions are all in one I1 line (none
/// straddling), so once its first has been fetched, the rest hit I1's
/// last line and need no lookup.
const ONE_LINE: u16 = 1 << 11;
/// [`Slot::check`]: its last instruction is a branch (of any kind).
const BRANCH_LAST: u16 = 1 << 12;

/// The [`Slot::check`] of id `first` for a block of ids `first .. first +
/// count`, checked the first time; `None` if some id is not declared.
#[inline(always)]
fn block_flags(slots: &mut [Slot], instrs: &[Instr], first: u32, count: u32) -> Option<u16> {
    let f = slots.get(first as usize)?.check;
    if f & (CHECKED | 0xff) == CHECKED | count as u16 {
        return Some(f);
    }
    check_block(slots, instrs, first, count)
}

#[cold]
fn check_block(slots: &mut [Slot], instrs: &[Instr], first: u32, count: u32) -> Option<u16> {
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
    slots.get_mut(first as usize)?.check = f;
    Some(f)
}

/// An instruction that may cross into the next page: QEMU (7.2) ends a
/// block before it (see [`Feeder::start_block`]).
#[inline(always)]
fn near_page_end(addr: u64) -> bool {
    addr & 0xfff > 0x1000 - 16
}

const UNDECLARED: Slot = Slot {
    addr: 0,
    check: 0,
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
struct Block {
    first: u32,
    count: u32,
    done: u32,
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
                self.accesses_seen = true;
                if index != LAST_EXECUTED {
                    self.run_to(e, u32::from(index) + 1)?;
                }
                e.d1_hit(store);
            }
            Record::Miss {
                index,
                store,
                addr,
                size,
            } => {
                self.accesses_seen = true;
                if index != LAST_EXECUTED {
                    self.run_to(e, u32::from(index) + 1)?;
                }
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
                    self.runs.resize(id + 2, 0);
                }
                let bits = e.i1_line_bits;
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
                let plain = e.instrs[idx as usize].flow.kind == Kind::Other;
                let plain_behind = match (plain, id.checked_sub(1)) {
                    (false, _) => 0,
                    (true, None) => 1,
                    (true, Some(p)) => self.slots[p].plain_behind.saturating_add(1),
                };
                self.slots[id] = Slot {
                    addr,
                    check: 0,
                    kind: e.instrs[idx as usize].flow.kind,
                    line: line(addr),
                    straddle: line(addr) != line(end),
                    idx,
                    size,
                    plain_behind,
                    memory: e.instrs[idx as usize].flow.memory,
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
        if !(e.lean() && e.opts.merge_modify) {
            return self.feed_bytes_as(e, bytes);
        }
        let mut p = 0;
        loop {
            // Counting executions only, and no access so far (a stream of
            // the plugin's `mem=off`): blocks alone, with little to do.
            if !e.opts.branch_sim && e.opts.no_icache && !self.accesses_seen {
                p += self.feed_counts(e, bytes.get(p..).unwrap_or_default());
            }
            let rest = bytes.get(p..).unwrap_or_default();
            p += match (e.opts.branch_sim, e.opts.no_icache) {
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

    /// [`Feeder::feed_bytes`] when only executions count (no caches, no
    /// branch predictors, no calls) and the stream has shown no access:
    /// then a block record only counts the last block's rest, as two
    /// entries of the difference array, unless that block was cut short
    /// at a page end. Each block start is checked once (all its ids
    /// declared); the page ends are known from then on. It stops, having
    /// changed nothing for it, at any other record or a block it cannot
    /// take, which the lean loop then takes.
    #[inline(never)]
    fn feed_counts(&mut self, e: &mut Engine, bytes: &[u8]) -> usize {
        let mut b = self.block;
        // The last block, if any of it is left to run.
        let mut b_flags = 0;
        if b.done < b.count {
            match block_flags(&mut self.slots, &e.instrs, b.first, b.count) {
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
            let Some(f) = block_flags(&mut self.slots, &e.instrs, first, count) else {
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
            e.th.cur = last.idx;
            e.th.accessed = false;
            e.th.pending = None;
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
    fn feed_lean<const BS: bool, const ICACHE: bool>(
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
        if e.th.held.is_some() {
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
        let Some(m) = e.machines.first_mut() else {
            return 0;
        };
        let (slots, runs, costs) = (&mut self.slots[..], &mut self.runs[..], &mut e.costs[..]);
        let mut flags = 0;
        if end > first {
            match block_flags(slots, &e.instrs, b.first, b.count) {
                Some(f) if f & LEAN != 0 => flags = f,
                _ => return 0,
            }
        }
        let mut accessed = e.th.accessed;
        // A branch the general path left waiting is decided here by the
        // next instruction of this block to run; or, this block having
        // run to its end, it is its last, decided when the next starts.
        if at < end {
            if let Some(p) = e.th.pending
                && BS
                && let (Some(next), Some(ins), Some(c)) = (
                    slots.get(at as usize),
                    e.instrs.get(p as usize),
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
            if e.th.pending != waits {
                return 0;
            }
        }
        // The engine's current instruction, as long as this loop has not
        // run any (then the one before `at`).
        let mut cur = e.th.cur;
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
                    if at < to {
                        if ICACHE && (flags & ONE_LINE == 0 || at == first) {
                            fetch_run(m, slots, costs, at, to);
                        }
                        at = to;
                    }
                    accessed |= at == to;
                }
                let f = match block_flags(slots, &e.instrs, new_first, count) {
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
                        if ICACHE && (flags & ONE_LINE == 0 || at == first) {
                            fetch_run(m, slots, costs, at, end);
                        }
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
                let to = first.wrapping_add(u32::from(index) + 1).min(end);
                if at < to {
                    if ICACHE && (flags & ONE_LINE == 0 || at == first) {
                        fetch_run(m, slots, costs, at, to);
                    }
                    at = to;
                } else if at == first {
                    // Nothing of this block ran: the general path knows
                    // whose access this is.
                    break;
                }
                let Some(i) = slots.get(at as usize - 1).map(|s| s.idx) else {
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
                let to = first.wrapping_add(u32::from(index) + 1).min(end);
                if at < to {
                    if ICACHE && (flags & ONE_LINE == 0 || at == first) {
                        fetch_run(m, slots, costs, at, to);
                    }
                    at = to;
                } else if at == first {
                    break;
                }
                let Some(i) = slots.get(at as usize - 1).map(|s| s.idx) else {
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
        e.th.cur = last.map_or(cur, |s| s.idx);
        e.th.accessed = accessed;
        e.th.pending = last
            .filter(|_| at == end && flags & BRANCH_LAST != 0)
            .map(|s| s.idx);
        p
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
                    if b[1] != LAST_EXECUTED {
                        self.run_to(e, u32::from(b[1]) + 1).map_err(|id| (p, id))?;
                    }
                    self.accesses_seen = true;
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
    ) -> Result<(), (usize, SliceError)> {
        let mut p = 0;
        while p < bytes.len() {
            p += self
                .feed_bytes(e, &bytes[p..])
                .map_err(|(n, id)| (p + n, SliceError::Undeclared(id)))?;
            match trace::decode(&bytes[p..]) {
                Err(tag) => return Err((p, SliceError::Tag(tag))),
                Ok(trace::Decoded::Need(_)) if p == bytes.len() => break,
                Ok(trace::Decoded::Need(_)) => return Err((p, SliceError::Truncated)),
                Ok(trace::Decoded::Record(r, n)) => {
                    if matches!(
                        r,
                        Record::Slot { .. }
                            | Record::Map { .. }
                            | Record::End
                            | Record::D1State(_)
                            | Record::D1Filter { .. }
                    ) {
                        return Err((p, SliceError::Misplaced));
                    }
                    self.feed(e, &r, x86)
                        .map_err(|id| (p, SliceError::Undeclared(id)))?;
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
            e.th.accessed = true;
        }
        Ok(())
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
fn count_runs(runs: &mut [u64], from: u32, to: u32) {
    if let Some(r) = runs.get_mut(from as usize) {
        *r = r.wrapping_add(1);
    }
    if let Some(r) = runs.get_mut(to as usize) {
        *r = r.wrapping_sub(1);
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
            c.i1mr += 1;
            c.ilmr += u64::from(miss >> 1);
        }
        j += u32::from(s.next);
        if j >= to {
            break;
        }
    }
}

/// What Cachegrind's predictors count for a branch followed by the
/// instruction at `next` (`ran`: the instruction accessed memory), for
/// both the engine and the feeder's lean loop.
#[inline(always)]
fn branch_events(
    m: &mut Hierarchy,
    c: &mut Counts,
    kind: Kind,
    addr: u64,
    size: u8,
    next: u64,
    ran: bool,
) {
    if kind == Kind::Cond {
        let taken = next != addr.wrapping_add(u64::from(size));
        m.cond_branch(addr, taken, c);
    } else {
        other_branch_events(m, c, kind, addr, next, ran);
    }
}

/// [`branch_events`] of a branch that is not a conditional jump.
#[inline(never)]
fn other_branch_events(
    m: &mut Hierarchy,
    c: &mut Counts,
    kind: Kind,
    addr: u64,
    next: u64,
    ran: bool,
) {
    match kind {
        // QEMU runs a `rep` instruction one iteration per execution; each
        // is Cachegrind's conditional branch (did it run?), and for
        // `repe`/`repne` a second one when it did (does it go on?).
        Kind::Rep => m.cond_branch(addr, ran, c),
        Kind::RepCond => {
            m.cond_branch(addr, ran, c);
            if ran {
                m.cond_branch(addr, next == addr, c);
            }
        }
        Kind::IndirectJump | Kind::IndirectCall => m.indirect_branch(addr, next, c),
        Kind::Other | Kind::Cond | Kind::Call | Kind::Ret => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CacheConfig, HierarchyConfig, Policy};

    fn engine() -> Engine {
        let c = |size| CacheConfig {
            size,
            assoc: 2,
            line_size: 64,
        };
        let m = Hierarchy::new(&HierarchyConfig {
            i1: c(1024),
            d1: c(1024),
            middle: vec![],
            ll: c(8192),
            policy: Policy::Lru,
            iaddr_zero_bits: 0,
        })
        .unwrap();
        Engine::new(vec![m], EngineOptions::default())
    }

    fn ir_by_addr(out: &Output) -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = out
            .instrs
            .iter()
            .zip(&out.costs)
            .filter(|(_, c)| c.ir > 0)
            .map(|(i, c)| (i.addr, c.ir))
            .collect();
        v.sort();
        v
    }

    const NOP: &[u8] = &[0x90];
    const STORE: &[u8] = &[0x48, 0x89, 0x07]; // mov %rax,(%rdi)

    #[test]
    fn blocks_run_as_far_as_the_stream_shows() {
        let mut v = declarations(0, 0x1000, &[NOP, STORE, NOP]);
        v.extend([
            Record::Block { first: 0, count: 3 },
            Record::StoreAt {
                index: 1,
                addr: 0x8000,
                size: 8,
            },
            // Two threads: thread 1 runs the block whole; thread 0 is
            // still in its block when thread 1's records come.
            Record::Thread(1),
            Record::Block { first: 0, count: 3 },
            Record::Thread(0),
            // A store into a code page faults; QEMU restarts at the store.
            Record::Block { first: 0, count: 3 },
            Record::Block { first: 1, count: 2 },
        ]);
        let out = both_ways(&v);
        // Thread 0: 0x1000 x2, 0x1001 x2 (one faulted before it ran, then
        // ran in the restarted block), 0x1004 x2; thread 1: one of each.
        assert_eq!(ir_by_addr(&out), [(0x1000, 3), (0x1001, 3), (0x1004, 3)]);
        assert_eq!(out.totals(0).dw, 1);
    }

    #[test]
    fn an_instruction_at_a_page_end_runs_in_the_next_block() {
        // The plugin saw the instruction at 0x1ffe cut to one byte.
        let mut v = declarations(0, 0x1ffc, &[NOP, NOP, &[0x48]]);
        v.extend(declarations(3, 0x1ffe, &[&[0x48, 0x89, 0xc3]]));
        v.extend([
            Record::Block { first: 0, count: 3 },
            Record::Block { first: 3, count: 1 },
        ]);
        let out = both_ways(&v);
        assert_eq!(ir_by_addr(&out), [(0x1ffc, 1), (0x1ffd, 1), (0x1ffe, 1)]);
        assert_eq!(out.totals(0).ir, 3);
    }

    /// Declarations of `code` (one instruction per slice) from `addr`
    /// with stream ids from `id`.
    fn declarations<'a>(id: u32, mut addr: u64, code: &[&'a [u8]]) -> Vec<Record<'a>> {
        let mut v = Vec::new();
        for (k, c) in code.iter().enumerate() {
            v.push(Record::Declare {
                id: id + k as u32,
                addr,
                code: c,
            });
            addr += c.len() as u64;
        }
        v
    }

    /// Feeds `records` as `tally sim` reads a stream: written out, the
    /// commonest records decoded by the feeder from the bytes, the rest
    /// read as records.
    fn feed_as_stream(records: &[Record<'_>], f: &mut Feeder, e: &mut Engine) {
        feed_in_chunks(records, f, e, usize::MAX);
    }

    /// [`feed_as_stream`] with the feeder shown at most `chunk` bytes at a
    /// time, as a stream read in pieces may cut records or an
    /// instruction's accesses apart.
    fn feed_in_chunks(records: &[Record<'_>], f: &mut Feeder, e: &mut Engine, chunk: usize) {
        feed_bytes_in_chunks(&stream_of(records), f, e, chunk);
    }

    /// The stream of `records`.
    fn stream_of(records: &[Record<'_>]) -> Vec<u8> {
        let mut w = crate::trace::TraceWriter::new(Vec::new()).unwrap();
        for r in records {
            w.write(r).unwrap();
        }
        w.finish().unwrap()
    }

    /// Feeds a stream's bytes as [`feed_in_chunks`] does; the D1 filter's
    /// records are checked and taken as `tally sim` takes them.
    fn feed_bytes_in_chunks(bytes: &[u8], f: &mut Feeder, e: &mut Engine, chunk: usize) {
        let mut r = crate::trace::TraceReader::new(bytes).unwrap();
        loop {
            let u = r.unread();
            let n = f.feed_bytes(e, &u[..u.len().min(chunk)]).unwrap();
            r.consume(n);
            match r.next_record().unwrap() {
                Some(Record::D1Filter {
                    size,
                    assoc,
                    line_size,
                    policy,
                    seed,
                }) => {
                    let c = CacheConfig {
                        size,
                        assoc,
                        line_size,
                    };
                    let p = crate::filter::policy_from_code(policy, seed).unwrap();
                    assert!(e.takes_d1_filter(c, p));
                }
                Some(Record::D1State(state)) => assert!(e.restore_d1(state)),
                Some(rec) => f.feed(e, &rec, true).unwrap(),
                None => break,
            }
        }
    }

    /// Feeds `records` one at a time, and as `tally sim` reads a stream
    /// (the commonest records decoded by the feeder from the bytes, which
    /// on this engine, merging accesses as for QEMU, is the lean loop);
    /// the two must cost the same.
    /// Counting executions only (without the I1 cache), a stream without
    /// accesses goes through `Feeder::feed_counts`: the same again, `Ir`
    /// alone.
    fn both_ways(records: &[Record<'_>]) -> Output {
        let new = |no_icache: bool| {
            let mut e = engine();
            e.opts.merge_modify = true;
            e.opts.no_icache = no_icache;
            e
        };
        let mut outs = Vec::new();
        for no_icache in [false, true] {
            let (mut f, mut e) = (Feeder::new(), new(no_icache));
            for r in records {
                f.feed(&mut e, r, true).unwrap();
            }
            f.finish(&mut e).unwrap();
            let one = e.finish();
            let (mut f, mut e) = (Feeder::new(), new(no_icache));
            feed_as_stream(records, &mut f, &mut e);
            f.finish(&mut e).unwrap();
            let two = e.finish();
            assert_eq!((&one.instrs, &one.costs), (&two.instrs, &two.costs));
            // With D1 simulated by the plugin's filter (handed over when
            // another thread starts).
            let (mut f, mut e) = (Feeder::new(), new(no_icache));
            let d1 = CacheConfig {
                size: 1024,
                assoc: 2,
                line_size: 64,
            };
            let raw = stream_of(records);
            let bytes =
                crate::filter::filter_stream(&raw[..], Vec::new(), d1, Policy::Lru).unwrap();
            feed_bytes_in_chunks(&bytes, &mut f, &mut e, usize::MAX);
            f.finish(&mut e).unwrap();
            let three = e.finish();
            assert_eq!((&one.instrs, &one.costs), (&three.instrs, &three.costs));
            // And with the hits counted outside the stream.
            let (mut f, mut e) = (Feeder::new(), new(no_icache));
            let (bytes, hits) =
                crate::filter::filter_stream_counting(&raw[..], Vec::new(), d1, Policy::Lru)
                    .unwrap();
            feed_bytes_in_chunks(&bytes, &mut f, &mut e, usize::MAX);
            f.add_hits(&mut e, &hits);
            f.finish(&mut e).unwrap();
            let four = e.finish();
            assert_eq!((&one.instrs, &one.costs), (&four.instrs, &four.costs));
            outs.push(one);
        }
        let counted = outs.pop().unwrap();
        let one = outs.pop().unwrap();
        assert_eq!(ir_by_addr(&one), ir_by_addr(&counted));
        one
    }

    proptest::proptest! {
        /// Blocks run in bulk cost what the same instructions cost run
        /// one by one, with accesses after each (the per-instruction
        /// records): every event of every instruction on two machines
        /// with different I1 lines, and the call arcs; or, `lean`, on one
        /// machine without call tracking, the case with its own code
        /// ([`Engine::lean`]); with or without the instruction cache.
        #[test]
        fn blocks_cost_what_single_instructions_cost(
            shapes in proptest::collection::vec(
                (proptest::collection::vec(0u8..7, 0..12), 0u8..5),
                1..6,
            ),
            path in proptest::collection::vec((0usize..6, 0u64..4096), 1..200),
            lean in proptest::bool::ANY,
            no_icache in proptest::bool::ANY,
            counting in proptest::bool::ANY,
            chunk in 1usize..80,
            policy in 0u8..4,
        ) {
            const LOAD: &[u8] = &[0x48, 0x8b, 0x07]; // mov (%rdi),%rax
            const ADD_MEM: &[u8] = &[0x48, 0x01, 0x07]; // add %rax,(%rdi)
            const LOAD_32: &[u8] = &[0xc5, 0xfe, 0x6f, 0x07]; // vmovdqu (%rdi),%ymm0
            const MOVS: &[u8] = &[0x48, 0xa5]; // movsq
            const JNE: &[u8] = &[0x75, 0x10];
            const CALL: &[u8] = &[0xe8, 0, 0, 0, 0];
            const RET: &[u8] = &[0xc3];
            const JMP_IND: &[u8] = &[0xff, 0xe0]; // jmp *%rax
            const LOCK_ADD: &[u8] = &[0xf0, 0x48, 0x01, 0x07]; // lock add %rax,(%rdi)
            let policy = crate::filter::policy_from_code(policy, 7).unwrap();
            let d1 = CacheConfig {
                size: 1024,
                assoc: 2,
                line_size: 64,
            };
            let machine = |i1_line: u64| {
                let c = |size, line_size| CacheConfig {
                    size,
                    assoc: 2,
                    line_size,
                };
                Hierarchy::new(&HierarchyConfig {
                    i1: c(512, i1_line),
                    d1,
                    middle: vec![],
                    ll: c(8192, 64),
                    policy,
                    iaddr_zero_bits: 0,
                })
                .unwrap()
            };
            // `counting`: executions alone, as `tally sim --cache-sim=no`
            // counts them from a stream without accesses (the lean loop's
            // `Feeder::feed_counts`).
            let lean = lean || counting;
            let opts = EngineOptions {
                branch_sim: !counting,
                calls: !lean,
                merge_modify: true,
                no_icache: no_icache || counting,
            };
            let new = || {
                let machines = if lean {
                    vec![machine(32)]
                } else {
                    vec![machine(64), machine(32)]
                };
                let e = Engine::new(machines, opts);
                assert_eq!(e.lean(), lean);
                e
            };
            // Blocks 0x1020 apart (in different I1 sets), instructions
            // packed from an odd address so that some straddle lines.
            let mut blocks = Vec::new();
            let mut id = 0u32;
            let mut decls = Vec::new();
            for (b, (body, end)) in shapes.iter().enumerate() {
                let mut addr = 0x10_0000 + 0x1020 * b as u64 + 29;
                let mut code: Vec<&[u8]> = body
                    .iter()
                    .map(|&k| [NOP, STORE, LOAD, LOCK_ADD, ADD_MEM, LOAD_32, MOVS][k as usize])
                    .collect();
                match end {
                    1 => code.push(JNE),
                    2 => code.push(CALL),
                    3 => code.push(RET),
                    4 => code.push(JMP_IND),
                    _ => {}
                }
                if code.is_empty() {
                    code.push(NOP);
                }
                let first = id;
                let mut kinds = Vec::new();
                for c in &code {
                    decls.push((id, addr, c.to_vec()));
                    kinds.push(c.to_vec());
                    addr += c.len() as u64;
                    id += 1;
                }
                blocks.push((first, kinds));
            }
            let records = |bulk: bool| {
                let mut v: Vec<Record> = decls
                    .iter()
                    .map(|(id, addr, code)| Record::Declare { id: *id, addr: *addr, code })
                    .collect();
                for &(b, data) in &path {
                    let (first, kinds) = &blocks[b % blocks.len()];
                    let count = kinds.len() as u8;
                    if bulk {
                        v.push(Record::Block { first: *first, count });
                    }
                    for (k, c) in kinds.iter().enumerate() {
                        let addr = 0x8000 + data * 8 + k as u64 * 24;
                        if !bulk {
                            v.push(Record::Exec { id: first + k as u32 });
                        }
                        if counting {
                            continue;
                        }
                        let index = k as u8;
                        // Each access as QEMU shows it: (store, address,
                        // size) in order.
                        let pieces: &[(bool, u64, u8)] = match c.as_slice() {
                            STORE => &[(true, addr, 8)],
                            LOAD => &[(false, addr, 8)],
                            // A locked add as QEMU's atomic helpers report
                            // it (one access, read and written), or, run
                            // single-threaded, as a modify.
                            LOCK_ADD if data % 2 == 0 => &[(true, addr, 8)],
                            // A modify: a load, then a store of the same
                            // bytes.
                            LOCK_ADD | ADD_MEM => &[(false, addr, 8), (true, addr, 8)],
                            // QEMU splits a 32-byte access in halves.
                            LOAD_32 => &[(false, addr, 16), (false, addr + 16, 16)],
                            // Two accesses apart.
                            MOVS => &[(false, addr, 8), (true, addr + 4096, 8)],
                            _ => &[],
                        };
                        for &(store, addr, size) in pieces {
                            v.push(match (bulk, store) {
                                (true, true) => Record::StoreAt { index, addr, size },
                                (true, false) => Record::LoadAt { index, addr, size },
                                (false, true) => Record::Store { addr, size },
                                (false, false) => Record::Load { addr, size },
                            });
                        }
                    }
                }
                v
            };
            let result = |mut f: Feeder, mut e: Engine| {
                f.finish(&mut e).unwrap();
                let out = e.finish();
                let mut arcs: Vec<_> = out.arcs.into_iter().collect();
                arcs.sort_by_key(|(k, _)| *k);
                (out.instrs, out.costs, arcs)
            };
            let fed = |bulk: bool| {
                let (mut f, mut e) = (Feeder::new(), new());
                for r in records(bulk) {
                    f.feed(&mut e, &r, true).unwrap();
                }
                result(f, e)
            };
            // As `tally sim` reads a stream: the commonest records decoded
            // by the feeder from the bytes, the rest as records.
            let read = || {
                let (mut f, mut e) = (Feeder::new(), new());
                feed_in_chunks(&records(true), &mut f, &mut e, chunk);
                result(f, e)
            };
            // With D1 simulated by the plugin's filter (one machine):
            // blocks, or instructions one at a time.
            let filtered = |bulk: bool, counting: bool| {
                let (mut f, mut e) = (Feeder::new(), new());
                let raw = stream_of(&records(bulk));
                let (bytes, hits) = if counting {
                    crate::filter::filter_stream_counting(&raw[..], Vec::new(), d1, policy)
                        .unwrap()
                } else {
                    let b = crate::filter::filter_stream(&raw[..], Vec::new(), d1, policy);
                    (b.unwrap(), Vec::new())
                };
                feed_bytes_in_chunks(&bytes, &mut f, &mut e, chunk);
                f.add_hits(&mut e, &hits);
                result(f, e)
            };
            let one_by_one = fed(false);
            proptest::prop_assert_eq!(&fed(true), &one_by_one);
            proptest::prop_assert_eq!(&read(), &one_by_one);
            // With hits counted outside the stream (`hits=on`) or not.
            if lean && !counting {
                for (bulk, count_hits) in [(true, false), (false, false), (true, true), (false, true)] {
                    proptest::prop_assert_eq!(&filtered(bulk, count_hits), &one_by_one);
                }
            }
        }
    }

    #[test]
    fn undeclared_ids_are_errors() {
        let (mut f, mut e) = (Feeder::new(), engine());
        assert_eq!(f.feed(&mut e, &Record::Exec { id: 4 }, true), Err(4));
        f.feed(&mut e, &Record::Block { first: 9, count: 2 }, true)
            .unwrap();
        assert_eq!(f.finish(&mut e), Err(9));
    }
}
