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
    #[inline]
    pub fn exec(&mut self, i: u32) {
        self.release();
        let ins = self.instrs[i as usize];
        if let Some(p) = self.th.pending.take() {
            self.resolve(p, ins.addr);
        }
        self.th.cur = i;
        self.th.accessed = false;
        if let Some(f) = self.th.stack.last_mut()
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
    #[inline]
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
    #[inline]
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
    #[inline]
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
