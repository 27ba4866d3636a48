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
//!
//! Accesses are taken as Cachegrind sees them. VEX splits and merges
//! differently from QEMU, so with [`EngineOptions::merge_modify`] each
//! access is held until the next one: contiguous pieces of one
//! instruction are merged (32-byte AVX moves come as two halves), a load
//! and a store of the same bytes become one modify (a read), and a locked
//! read-modify-write counts once. `rep` instructions are one conditional
//! branch per iteration, decided by whether the iteration accessed memory.
//! Counting executions only, runs can leave out the instruction cache
//! ([`EngineOptions::no_icache`]).
//!
//! Any number of machines are simulated in one pass: each instruction's
//! costs are kept per machine (`costs[i * machines + k]`, see
//! [`Output`]).
//!
//! The engine takes instructions one at a time; a trace stream's records
//! reach it through the [`Feeder`] (`feeder`: stream ids to engine
//! instructions, blocks run as far as the stream shows), whose commonest
//! case, one machine without call tracking, has its own record loop
//! (`lean`). Both call the engine's small methods below and share its
//! rules for merging accesses (`Held::merge`) and counting branches
//! (`branch_events`).

mod feeder;
mod lean;
#[cfg(test)]
mod tests;

pub use feeder::{Feeder, NO_FETCH, Slot};

use crate::flow::{Flow, Kind};
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
    /// The running totals' `Ir` at the call.
    start_ir: u64,
    /// The call was made when the running totals held more than `Ir`
    /// (`Engine::wide`): they were kept whole, last in `Thread::starts`.
    /// A frame is small that way, for the run whose totals are only
    /// `Ir` (`--cache-sim=no`), where calls are many and the rest is
    /// quick.
    whole: bool,
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
    /// The running totals at the calls of `stack` that keep them whole,
    /// in the same order.
    starts: Vec<Counts>,
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

/// Where a thread is: its current instruction, the branch that waits for
/// the next one, and whether the current instruction accessed memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    cur: u32,
    pending: Option<u32>,
    accessed: bool,
}

/// Costs per instruction and machine, and the calls. Cloned when a
/// traced program forks: the child goes on from the parent's state, as
/// under Valgrind.
#[derive(Clone)]
pub struct Engine {
    machines: Vec<Hierarchy>,
    opts: EngineOptions,
    instrs: Vec<Instr>,
    by_addr: FxHashMap<(u64, u8), u32>,
    costs: Vec<Counts>,
    running: Counts,
    /// `running` has held an event other than `Ir`.
    wide: bool,
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
            wide: false,
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
            if !self.wide
                && d != (Counts {
                    ir: d.ir,
                    ..Counts::default()
                })
            {
                self.wide = true;
            }
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

    /// The running totals and the call stack after a whole block of `len`
    /// instructions ran, as [`Engine::exec_plain`] leaves them, when no
    /// access is held and the instruction fetches are the caller's; the
    /// branch before it was decided by [`Engine::resolve_cold`] if
    /// [`Engine::branch_work`] said so. `fresh` is
    /// [`Engine::fresh_open`], which a loop keeps (it changes only here
    /// and where a branch is decided); its value after the block is
    /// returned. The caller keeps the block's last instruction as the
    /// pending branch and the current one ([`Engine::set_position`]).
    #[inline(always)]
    fn count_block(&mut self, len: u32, fresh: bool) -> bool {
        self.th.accessed = false;
        if !self.opts.calls {
            return false;
        }
        self.running.ir += u64::from(len);
        if fresh && let Some(f) = self.th.stack.last_mut() {
            f.fresh = (u32::from(f.fresh) + len).min(3) as u8;
            return f.fresh < 3;
        }
        false
    }

    /// Whether the call in progress has run fewer than 3 instructions
    /// (see `Frame::fresh`): once it has, a block changes nothing of it.
    fn fresh_open(&self) -> bool {
        self.th.stack.last().is_some_and(|f| f.fresh < 3)
    }

    /// The kinds of branch whose outcome the engine has work for, as bits
    /// by [`Kind`]: a loop that decides branches itself calls
    /// [`Engine::resolve_cold`] only for these.
    fn branch_work(&self) -> u32 {
        let bits = |kinds: &[Kind]| kinds.iter().fold(0, |m, &k| m | 1 << k as u32);
        let mut m = 0;
        if self.opts.branch_sim {
            m |= bits(&[
                Kind::Cond,
                Kind::Rep,
                Kind::RepCond,
                Kind::IndirectJump,
                Kind::IndirectCall,
            ]);
        }
        if self.opts.calls {
            m |= bits(&[
                Kind::IndirectJump,
                Kind::Call,
                Kind::IndirectCall,
                Kind::Ret,
            ]);
        }
        m
    }

    /// [`Engine::resolve`] out of line, for a loop that takes it seldom.
    #[inline(never)]
    fn resolve_cold(&mut self, p: u32, next: u64) {
        self.resolve(p, next);
    }

    /// The branch waiting for the next instruction, by its index and
    /// kind (`Other`: none waits, as no branch is of that kind).
    fn pending_kind(&self) -> (u32, Kind) {
        let p = self.th.pending;
        match p.and_then(|p| self.instrs.get(p as usize)) {
            Some(ins) => (p.unwrap_or_default(), ins.flow.kind),
            None => (0, Kind::Other),
        }
    }

    /// One machine and no call tracking, the default run: the stream's
    /// commonest records then go through the feeder's lean loop.
    pub fn lean(&self) -> bool {
        self.machines.len() == 1 && !self.opts.calls
    }

    /// What the engine does beyond caches.
    #[inline(always)]
    fn options(&self) -> EngineOptions {
        self.opts
    }

    /// The declared instructions, by index.
    #[inline(always)]
    fn instrs(&self) -> &[Instr] {
        &self.instrs
    }

    /// log2 of the smallest I1 line size of the machines: the lines the
    /// feeder places stream ids in ([`Slot::line`]).
    fn i1_line_bits(&self) -> u32 {
        self.i1_line_bits
    }

    /// Where the current thread is.
    #[inline(always)]
    fn position(&self) -> Position {
        Position {
            cur: self.th.cur,
            pending: self.th.pending,
            accessed: self.th.accessed,
        }
    }

    /// The current thread is at `p`: the feeder's lean loops run
    /// instructions without the engine, then leave it as
    /// [`Engine::exec_plain`] and the accesses would have.
    #[inline(always)]
    fn set_position(&mut self, p: Position) {
        self.th.cur = p.cur;
        self.th.pending = p.pending;
        self.th.accessed = p.accessed;
    }

    /// The current instruction accessed memory (what a `rep` branch is
    /// decided by), as a stream's progress record shows.
    fn mark_accessed(&mut self) {
        self.th.accessed = true;
    }

    /// An access is held back, not yet simulated ([`Held`]).
    #[inline(always)]
    fn holds_access(&self) -> bool {
        self.th.held.is_some()
    }

    /// The first machine, the costs by instruction and the instructions,
    /// borrowed at once: the lean loop's view of a one-machine engine,
    /// where `costs[i]` is instruction `i`'s.
    #[inline(always)]
    fn lean_parts(&mut self) -> Option<(&mut Hierarchy, &mut [Counts], &[Instr])> {
        let m = self.machines.first_mut()?;
        Some((m, &mut self.costs, &self.instrs))
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
                    m.count_fetch_miss(miss, &mut self.costs[s.idx as usize * n + k]);
                    if k == 0 && calls {
                        m.count_fetch_miss(miss, &mut self.running);
                        self.wide = true;
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
                    start_ir: self.running.ir,
                    whole: self.wide,
                });
                if self.wide {
                    self.th.starts.push(self.running);
                }
            }
            Kind::Ret if self.opts.calls => {
                // Pop to the frame this returns to; a return to nowhere on
                // the stack (longjmp, hand-made stacks) pops nothing.
                if let Some(d) = self.th.stack.iter().rposition(|f| f.ret == next) {
                    while self.th.stack.len() > d {
                        self.close_top();
                    }
                }
            }
            _ => {}
        }
    }

    /// Closes the innermost call: its arc gets the events since the call.
    fn close_top(&mut self) {
        let Some(f) = self.th.stack.pop() else {
            return;
        };
        let a = self.arcs.entry((f.site, f.target)).or_default();
        a.count += 1;
        if !self.wide {
            // Then the totals were only `Ir` at the call too.
            a.inclusive.ir += self.running.ir - f.start_ir;
            return;
        }
        let start = match f.whole {
            true => self.th.starts.pop().unwrap_or_default(),
            false => Counts {
                ir: f.start_ir,
                ..Counts::default()
            },
        };
        let now = self.running.values();
        let start = start.values();
        let mut d = [0u64; Counts::N];
        for (x, (a, b)) in d.iter_mut().zip(now.iter().zip(start)) {
            *x = a - b;
        }
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
            while !self.th.stack.is_empty() {
                self.close_top();
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
