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

use crate::flow::{Flow, Kind, classify_x86_64};
use crate::trace::Record;
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
        Engine {
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
        for (k, m) in self.machines.iter_mut().enumerate() {
            if k == 0 && self.opts.calls {
                let mut d = Counts::default();
                f(m, &mut d);
                self.costs[base].add(&d);
                self.running.add(&d);
            } else {
                f(m, &mut self.costs[base + k]);
            }
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
        self.on(i, |m, c| m.fetch(ins.addr, u64::from(ins.size), c));
        if ins.flow.kind != Kind::Other {
            self.th.pending = Some(i);
        }
    }

    /// The pending branch `p` is followed by the instruction at `next`.
    fn resolve(&mut self, p: u32, next: u64) {
        let ins = self.instrs[p as usize];
        let fall = ins.addr.wrapping_add(u64::from(ins.size));
        let bs = self.opts.branch_sim;
        match ins.flow.kind {
            Kind::Cond if bs => self.on(p, |m, c| m.cond_branch(ins.addr, next != fall, c)),
            Kind::IndirectJump => {
                if bs {
                    self.on(p, |m, c| m.indirect_branch(ins.addr, next, c));
                }
                if let Some(f) = self.th.stack.last_mut()
                    && f.fresh <= 2
                {
                    f.target = next;
                }
            }
            Kind::Rep if bs => {
                let ran = self.th.accessed;
                self.on(p, |m, c| m.cond_branch(ins.addr, ran, c));
            }
            Kind::RepCond if bs => {
                let ran = self.th.accessed;
                self.on(p, |m, c| {
                    m.cond_branch(ins.addr, ran, c);
                    if ran {
                        m.cond_branch(ins.addr, next == ins.addr, c);
                    }
                });
            }
            Kind::Call | Kind::IndirectCall => {
                if bs && ins.flow.kind == Kind::IndirectCall {
                    self.on(p, |m, c| m.indirect_branch(ins.addr, next, c));
                }
                if self.opts.calls {
                    self.th.stack.push(Frame {
                        fresh: 0,
                        site: p,
                        target: next,
                        ret: fall,
                        start: self.running,
                    });
                }
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
                self.on(cur, |m, c| m.write(h.addr, h.size, c));
            } else {
                self.on(cur, |m, c| m.read(h.addr, h.size, c));
            }
        }
    }

    /// A load by the current instruction.
    #[inline(always)]
    pub fn load(&mut self, addr: u64, size: u8) {
        self.th.accessed = true;
        let cur = self.th.cur;
        if self.opts.merge_modify {
            match &mut self.th.held {
                Some(h) if !h.store && h.addr.wrapping_add(h.size) == addr => {
                    h.size += u64::from(size)
                }
                _ => {
                    self.release();
                    self.th.held = Some(Held {
                        store: false,
                        addr,
                        size: u64::from(size),
                    });
                }
            }
            return;
        }
        self.on(cur, |m, c| m.read(addr, u64::from(size), c));
    }

    /// A store by the current instruction.
    #[inline(always)]
    pub fn store(&mut self, addr: u64, size: u8) {
        self.th.accessed = true;
        let cur = self.th.cur;
        if self.opts.merge_modify {
            let size = u64::from(size);
            match self.th.held {
                // The store half of a read-modify-write: one modify, which
                // is a read.
                Some(h) if !h.store && h.addr == addr && h.size == size => self.release(),
                Some(ref mut h) if h.store && h.addr.wrapping_add(h.size) == addr => h.size += size,
                _ => {
                    self.release();
                    if self.instrs[cur as usize].flow.atomic_rmw {
                        // A locked read-modify-write is reported once.
                        self.on(cur, |m, c| m.read(addr, size, c));
                    } else {
                        self.th.held = Some(Held {
                            store: true,
                            addr,
                            size,
                        });
                    }
                }
            }
            return;
        }
        self.on(cur, |m, c| m.write(addr, u64::from(size), c));
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
#[derive(Default)]
pub struct Feeder {
    ids: Vec<u32>,
    block: Block,
    thread: u32,
    parked: FxHashMap<u32, Block>,
}

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
                e.exec(self.index(id)?);
            }
            Record::Block { first, count } => {
                // Blocks that did not run to their end, as QEMU (7.2)
                // reports them: the new block starts at the instruction
                // where the old one stopped, which did not run in it.
                // - An instruction that may cross into the next page ends
                //   a block before it; the plugin was shown it (its bytes
                //   cut at the page end) as the block's last, and it runs
                //   as the first of the next block.
                // - A fault QEMU handles itself (a store into a page
                //   holding translated code) restarts at that access.
                let b = self.block;
                if b.done < b.count {
                    let next = e.instrs[self.index(first)? as usize].addr;
                    let last = e.instrs[self.index(b.first.wrapping_add(b.count - 1))? as usize];
                    if last.addr == next && last.addr & 0xfff > 0x1000 - 16 {
                        self.block.count -= 1;
                    } else if (e.instrs[self.index(b.first)? as usize].addr..last.addr)
                        .contains(&next)
                    {
                        // The access that faulted is not among those seen.
                        for k in b.done..b.count {
                            let at = e.instrs[self.index(b.first.wrapping_add(k))? as usize];
                            if at.addr == next && at.flow.memory {
                                self.block.count = k;
                                break;
                            }
                        }
                    }
                }
                self.run_block(e)?;
                self.block = Block {
                    first,
                    count: u32::from(count),
                    done: 0,
                };
            }
            Record::LoadAt { index, addr, size } => {
                self.run_to(e, u32::from(index) + 1)?;
                e.load(addr, size);
            }
            Record::StoreAt { index, addr, size } => {
                self.run_to(e, u32::from(index) + 1)?;
                e.store(addr, size);
            }
            Record::Load { addr, size } => e.load(addr, size),
            Record::Store { addr, size } => e.store(addr, size),
            Record::Declare { id, addr, code } => {
                let flow = if x86 {
                    classify_x86_64(code, addr)
                } else {
                    Flow::default()
                };
                let i = e.declare(addr, code.len() as u8, || flow);
                let id = id as usize;
                if self.ids.len() <= id {
                    self.ids.resize(id + 1, u32::MAX);
                }
                self.ids[id] = i;
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
            Record::Map { .. } => {}
        }
        Ok(())
    }

    /// Runs what is left of every thread's block (at the end of a stream).
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
        Ok(())
    }

    #[inline(always)]
    fn index(&self, id: u32) -> Result<u32, u32> {
        match self.ids.get(id as usize) {
            Some(&i) if i != u32::MAX => Ok(i),
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
        let end = end.min(self.block.count);
        while self.block.done < end {
            let id = self.block.first.wrapping_add(self.block.done);
            e.exec(self.index(id)?);
            self.block.done += 1;
        }
        Ok(())
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

    /// Declares `code` (one instruction per slice) from `addr` with stream
    /// ids from `id`.
    fn declare(f: &mut Feeder, e: &mut Engine, id: u32, mut addr: u64, code: &[&[u8]]) {
        for (k, c) in code.iter().enumerate() {
            let r = Record::Declare {
                id: id + k as u32,
                addr,
                code: c,
            };
            f.feed(e, &r, true).unwrap();
            addr += c.len() as u64;
        }
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
        let (mut f, mut e) = (Feeder::new(), engine());
        declare(&mut f, &mut e, 0, 0x1000, &[NOP, STORE, NOP]);
        let feed = |f: &mut Feeder, e: &mut Engine, r: Record| f.feed(e, &r, true).unwrap();
        feed(&mut f, &mut e, Record::Block { first: 0, count: 3 });
        feed(
            &mut f,
            &mut e,
            Record::StoreAt {
                index: 1,
                addr: 0x8000,
                size: 8,
            },
        );
        // Two threads: thread 1 runs the block whole; thread 0 is still in
        // its block when thread 1's records come.
        feed(&mut f, &mut e, Record::Thread(1));
        feed(&mut f, &mut e, Record::Block { first: 0, count: 3 });
        feed(&mut f, &mut e, Record::Thread(0));
        // A store into a code page faults; QEMU restarts at the store.
        feed(&mut f, &mut e, Record::Block { first: 0, count: 3 });
        feed(&mut f, &mut e, Record::Block { first: 1, count: 2 });
        f.finish(&mut e).unwrap();
        let out = e.finish();
        // Thread 0: 0x1000 x2, 0x1001 x2 (one faulted before it ran, then
        // ran in the restarted block), 0x1004 x2; thread 1: one of each.
        assert_eq!(ir_by_addr(&out), [(0x1000, 3), (0x1001, 3), (0x1004, 3)]);
        assert_eq!(out.totals(0).dw, 1);
    }

    #[test]
    fn an_instruction_at_a_page_end_runs_in_the_next_block() {
        let (mut f, mut e) = (Feeder::new(), engine());
        // The plugin saw the instruction at 0x1ffe cut to one byte.
        declare(&mut f, &mut e, 0, 0x1ffc, &[NOP, NOP, &[0x48]]);
        declare(&mut f, &mut e, 3, 0x1ffe, &[&[0x48, 0x89, 0xc3]]);
        for r in [
            Record::Block { first: 0, count: 3 },
            Record::Block { first: 3, count: 1 },
        ] {
            f.feed(&mut e, &r, true).unwrap();
        }
        f.finish(&mut e).unwrap();
        let out = e.finish();
        assert_eq!(ir_by_addr(&out), [(0x1ffc, 1), (0x1ffd, 1), (0x1ffe, 1)]);
        assert_eq!(out.totals(0).ir, 3);
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
