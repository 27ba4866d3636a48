//! Function blocks: the body of the file.
//!
//! Each block is one segment of one function. Its instruction layout
//! (addresses, lines, inlined stretches) and its structure (which basic
//! blocks call or jump where) come from a stream seeded by the function and
//! segment, so a segment written again in a later round has the same code;
//! execution counts come from a stream seeded by the block's index.
//!
//! Positions are written as Valgrind 3.19's `dump.c` writes them: relative
//! (`+d`, `-d`, `*`) only when the previous value is non-zero and the
//! difference is within ±99, else absolute; every subposition is followed
//! by a space. Call targets, call sites, jump targets and jump sources are
//! relative to the last plain cost line and do not replace it.

use crate::EventSet;
use crate::emit::{Emit, Num};
use crate::model::{Func, Model, NO_FILE};
use crate::rng::{Rng, hash2};

/// The cache events, in Valgrind's order.
pub(crate) const CACHE_EVENTS: usize = 9;
/// The cache events and the branch events after them.
const MAX_EVENTS: usize = CACHE_EVENTS + 4;

#[derive(Clone, Copy, Debug, Default)]
struct Ins {
    addr: u64,
    line: u32,
    inline: bool,
}

/// What the generator wrote.
#[derive(Clone, Debug, Default)]
pub(crate) struct Counts {
    pub totals: Vec<u64>,
    pub lines: u64,
    pub calls: u64,
    pub jumps: u64,
    pub blocks: u64,
    /// Executed basic blocks, for `desc: Timerange:`.
    pub bb_execs: u64,
    pub functions: u64,
    pub objects: u64,
    pub files: u64,
}

/// How a basic block ends, and with what.
#[derive(Clone, Copy)]
struct Step {
    action: Action,
    /// The callee, or the function a tail jump enters.
    callee: u32,
    /// A copy of that function.
    g: Func,
    /// The target of a jump within the function.
    target: Ins,
    /// The call site's distance from the last cost line (usually 0).
    site_shift: u64,
}

impl Counts {
    /// Adds the counts of a later stretch of blocks (the per-name counts,
    /// `functions`, `objects` and `files`, are not additive and kept).
    pub(crate) fn add(&mut self, o: &Counts) {
        for (a, b) in self.totals.iter_mut().zip(&o.totals) {
            *a += b;
        }
        self.lines += o.lines;
        self.calls += o.calls;
        self.jumps += o.jumps;
        self.blocks += o.blocks;
        self.bb_execs += o.bb_execs;
    }
}

#[derive(Clone, Copy)]
enum Action {
    Fall,
    Call,
    /// A first call through the PLT: the resolver, then the function.
    PltCall,
    Loop,
    Cond,
    Jump,
    /// A tail jump into another function (`jfn=`).
    Tail,
}

const OBJECT: usize = 0;
const FILE: usize = 1;
const SYMBOL: usize = 2;

/// x86-64 instruction lengths, roughly as compiled C++ has them.
const INSTR_LEN: [u8; 64] = [
    1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4,
    4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 8, 8, 9, 10, 11,
    15,
];

pub(crate) struct Body<'m, E> {
    m: &'m Model,
    pub(crate) e: E,
    compress: bool,
    /// Events per cost line: 1, [`CACHE_EVENTS`] or [`MAX_EVENTS`].
    ne: usize,
    seen: [Vec<bool>; 3],
    fn_seen: Vec<bool>,
    ctx_ob: u32,
    ctx_fl: u32,
    pub(crate) counts: Counts,
    ins: Vec<Ins>,
    bbs: Vec<u32>,
    last_addr: u64,
    last_line: u64,
    cur_file: u32,
    costs: [u64; MAX_EVENTS],
    plan: Vec<Step>,
    /// Sink of loads made only to bring data into the cache.
    touch: u32,
    /// Measuring mode of the first pass: names are written as if already
    /// defined, and the names and functions a chunk of blocks refers to are
    /// listed instead (`refs`, `fn_refs`, with the block's offset in the
    /// chunk), so that chunks can be measured independently and in
    /// parallel; see `lib.rs`.
    pub(crate) defer: bool,
    pub(crate) refs: Vec<(u8, u32, u32)>,
    pub(crate) fn_refs: Vec<(u32, u32)>,
    /// Offset of the current block in its chunk.
    pub(crate) block_off: u32,
    /// Per name and function: the chunk (`epoch`) that listed it last.
    stamps: [Vec<u32>; 3],
    fn_stamps: Vec<u32>,
    epoch: u32,
}

impl<'m, E: Emit> Body<'m, E> {
    pub(crate) fn new(m: &'m Model, e: E, compress: bool, events: EventSet) -> Self {
        let ne = events.names().len();
        Body {
            m,
            e,
            compress,
            ne,
            seen: [
                vec![false; m.objects.names.len()],
                vec![false; m.files.names.len()],
                vec![false; m.symbols.names.len()],
            ],
            fn_seen: vec![false; m.funcs.len()],
            ctx_ob: NO_FILE,
            ctx_fl: NO_FILE,
            counts: Counts {
                totals: vec![0; ne],
                ..Counts::default()
            },
            ins: Vec::new(),
            bbs: Vec::new(),
            last_addr: 0,
            last_line: 0,
            cur_file: NO_FILE,
            costs: [0; MAX_EVENTS],
            plan: Vec::new(),
            touch: 0,
            defer: false,
            refs: Vec::new(),
            fn_refs: Vec::new(),
            block_off: 0,
            stamps: [Vec::new(), Vec::new(), Vec::new()],
            fn_stamps: Vec::new(),
            epoch: 0,
        }
    }

    /// Starts measuring a new chunk (see `defer`): clears the counts and
    /// the lists of references.
    pub(crate) fn new_chunk(&mut self) {
        if self.stamps[0].is_empty() {
            self.stamps = [
                vec![0; self.seen[0].len()],
                vec![0; self.seen[1].len()],
                vec![0; self.seen[2].len()],
            ];
            self.fn_stamps = vec![0; self.fn_seen.len()];
        }
        self.epoch += 1;
        self.refs.clear();
        self.fn_refs.clear();
        self.counts = Counts {
            totals: vec![0; self.events()],
            ..Counts::default()
        };
    }

    /// Marks names as already defined (by blocks another thread writes).
    pub(crate) fn mark_seen(&mut self, uses: &[(u8, u32)]) {
        for &(space, index) in uses {
            self.seen[space as usize][index as usize] = true;
        }
    }

    /// Prepares to write block `index` without having written the ones
    /// before it: the object and file of the previous block are the
    /// context, as the reader would have it.
    pub(crate) fn start_at(&mut self, index: u64) {
        let m = self.m;
        (self.ctx_ob, self.ctx_fl) = match index.checked_sub(1) {
            Some(prev) => {
                let f = &m.funcs[m.order[(prev % m.order.len() as u64) as usize].0 as usize];
                (f.object, f.file)
            }
            None => (NO_FILE, NO_FILE),
        };
    }

    fn events(&self) -> usize {
        self.ne
    }

    fn cache(&self) -> bool {
        self.ne >= CACHE_EVENTS
    }

    /// `key=(id) name` on first use, `key=(id)` later; `key=name` plain.
    fn name(&mut self, key: &[u8], space: usize, index: u32) {
        let m = self.m;
        let text = |i| match space {
            OBJECT => m.objects.get(i),
            FILE => m.files.get(i),
            _ => m.symbols.get(i),
        };
        self.e.bytes(key);
        let first = if self.defer {
            let stamp = &mut self.stamps[space][index as usize];
            if *stamp != self.epoch {
                *stamp = self.epoch;
                self.refs.push((space as u8, index, self.block_off));
            }
            false
        } else {
            let seen = &mut self.seen[space][index as usize];
            let first = !*seen;
            if first {
                *seen = true;
                match space {
                    OBJECT => self.counts.objects += 1,
                    FILE => self.counts.files += 1,
                    _ => {}
                }
            }
            first
        };
        if self.compress {
            self.e.byte(b'(');
            self.e.dec(u64::from(index) + 1);
            self.e.byte(b')');
            if first {
                self.e.byte(b' ');
                self.e.bytes(text(index));
            }
        } else {
            self.e.bytes(text(index));
        }
        self.e.byte(b'\n');
    }

    fn function_name(&mut self, key: &[u8], f: u32) {
        if self.defer {
            let stamp = &mut self.fn_stamps[f as usize];
            if *stamp != self.epoch {
                *stamp = self.epoch;
                self.fn_refs.push((f, self.block_off));
            }
        } else {
            let fs = &mut self.fn_seen[f as usize];
            if !*fs {
                *fs = true;
                self.counts.functions += 1;
            }
        }
        self.name(key, SYMBOL, self.m.funcs[f as usize].name);
    }

    /// One subposition and its trailing space.
    #[inline(always)]
    fn sub(&mut self, v: u64, last: u64, hex: bool) {
        if self.compress && last > 0 {
            let d = v.wrapping_sub(last).wrapping_add(99);
            if d < 199 {
                let (text, len) = REL[d as usize];
                self.e.short(text, len as usize);
                return;
            }
        }
        if hex {
            self.e.hex(v);
        } else {
            self.e.dec(v);
        }
        self.e.byte(b' ');
    }

    /// A position relative to the last plain cost line, not replacing it.
    #[inline(always)]
    fn pos(&mut self, addr: u64, line: u64) {
        self.sub(addr, self.last_addr, true);
        self.sub(line, self.last_line, false);
    }

    /// Counts after a position: trailing zeros dropped, the first always.
    #[inline]
    fn cost_values(&mut self, n: usize) {
        let c = self.costs;
        let k = c[..n].iter().rposition(|&x| x != 0).map_or(1, |i| i + 1);
        self.e.dec(c[0]);
        for &x in &c[1..k] {
            self.e.byte(b' ');
            self.e.dec(x);
        }
        self.e.byte(b'\n');
    }

    fn file_of(f: &Func, inline: bool) -> u32 {
        if inline { f.inline } else { f.file }
    }

    /// Lays out segment `seg` of function `fi` into `self.ins` and the
    /// starts of its basic blocks into `self.bbs` (plus the end).
    fn layout(&mut self, fi: u32, seg: u32) {
        let f = &self.m.funcs[fi as usize];
        self.ins.clear();
        self.bbs.clear();
        let (start, n) = f.segment(seg);
        let mut r = Rng::new(hash2(self.m.layout_seed ^ u64::from(fi), u64::from(seg)));
        let mut addr = f.addr + u64::from(start) * 16;
        let debug = f.line > 0;
        let mut line = if debug {
            u64::from(f.line) + u64::from(start / 3)
        } else {
            0
        };
        let mut inline_left = 0u32;
        let mut saved = 0u64;
        // 16 random bits per instruction (length and line step), four
        // instructions per draw.
        let mut bits = 0u64;
        let mut left = 0u32;
        let mut i = 0u32;
        while i < n {
            self.bbs.push(i);
            let len = (1 + r.below(9) as u32).min(n - i);
            if f.inline != NO_FILE && inline_left == 0 && i > 0 && r.chance(self.m.inline_rate) {
                inline_left = r.range(1, 4) as u32;
                saved = line;
                line = u64::from(f.inline_line) + r.below(200);
            }
            for j in 0..len {
                if i + j > 0 {
                    if left == 0 {
                        bits = r.next_u64();
                        left = 4;
                    }
                    let x = bits;
                    bits >>= 16;
                    left -= 1;
                    addr += u64::from(INSTR_LEN[(x & 63) as usize]);
                    if debug {
                        line = step_line(line, x >> 6);
                    }
                }
                self.ins.push(Ins {
                    addr,
                    line: line as u32,
                    inline: inline_left > 0,
                });
            }
            i += len;
            if inline_left > 0 {
                inline_left -= 1;
                if inline_left == 0 {
                    line = saved + r.below(3);
                }
            }
        }
        self.bbs.push(n);
    }

    fn pick_callee(&self, s: &mut Rng, fi: u32, object: u32) -> u32 {
        let m = self.m;
        let (lo, hi) = m.object_funcs[object as usize];
        match s.below(100) {
            0..62 => {
                let a = fi.saturating_sub(24).max(lo);
                let b = (fi + 25).min(hi);
                a + s.below(u64::from(b - a)) as u32
            }
            62..72 => lo + s.below(u64::from(hi - lo)) as u32,
            72..95 => s.pick(&m.popular),
            _ => s.below(m.funcs.len() as u64) as u32,
        }
    }

    /// A jump target after basic block `b`: a later block, or past the
    /// segment's end.
    fn forward(&self, s: &mut Rng, b: usize) -> Ins {
        let t = b + 2 + s.below(3) as usize;
        if t + 1 < self.bbs.len() {
            return self.ins[self.bbs[t] as usize];
        }
        let last = self.ins[self.ins.len() - 1];
        Ins {
            addr: last.addr + s.range(2, 40),
            line: if last.line == 0 {
                0
            } else {
                last.line + s.below(4) as u32
            },
            inline: last.inline,
        }
    }

    fn backward(&self, s: &mut Rng, b: usize) -> Ins {
        let t = b - s.below(b.min(2) as u64 + 1) as usize;
        self.ins[self.bbs[t] as usize]
    }

    /// Writes block number `index` of the body.
    pub(crate) fn block(&mut self, index: u64) {
        let m = self.m;
        let len = m.order.len() as u64;
        let (fi, seg) = m.order[(index % len) as usize];
        // Functions are visited in random order and the table is larger than
        // the caches: start loading the function of a later block now.
        let ahead = m.order[((index + 4) % len) as usize].0;
        self.touch ^= m.funcs[ahead as usize].segments;
        let f = m.funcs[fi as usize];
        self.layout(fi, seg);
        let mut c = Rng::new(hash2(m.cost_seed, index));
        self.plan(fi, &f, seg);
        if self.ctx_ob != f.object {
            self.name(b"ob=", OBJECT, f.object);
            self.ctx_ob = f.object;
        }
        if self.ctx_fl != f.file {
            self.name(b"fl=", FILE, f.file);
            self.ctx_fl = f.file;
        }
        self.function_name(b"fn=", fi);
        self.last_addr = 0;
        self.last_line = 0;
        self.cur_file = f.file;
        for b in 0..self.plan.len() {
            let step = self.plan[b];
            let ec = exec_count(&mut c, f.hot, matches!(step.action, Action::Loop));
            let ec_text = Num::new(ec);
            self.counts.bb_execs += ec;
            let (lo, hi) = (self.bbs[b] as usize, self.bbs[b + 1] as usize);
            // The basic block's last instruction is its branch or call.
            let branch = match step.action {
                _ if self.ne < MAX_EVENTS => Branch::None,
                Action::Cond | Action::Loop => Branch::Conditional,
                Action::PltCall => Branch::Indirect,
                // Calls through a pointer: one in eight; and jumps through
                // a table (an interpreter's dispatch): one in two.
                Action::Call if step.site_shift == 0 && step.callee.is_multiple_of(8) => {
                    Branch::Indirect
                }
                Action::Jump if (step.target.addr >> 1) & 1 == 0 => Branch::Indirect,
                _ => Branch::None,
            };
            for k in lo..hi {
                let ins = self.ins[k];
                let file = Self::file_of(&f, ins.inline);
                if file != self.cur_file {
                    let key: &[u8] = if file == f.file { b"fe=" } else { b"fi=" };
                    self.name(key, FILE, file);
                    self.cur_file = file;
                }
                let line = u64::from(ins.line);
                self.pos(ins.addr, line);
                self.last_addr = ins.addr;
                self.last_line = line;
                if self.cache() {
                    let b = if k + 1 == hi { branch } else { Branch::None };
                    self.cache_costs(&mut c, ec, &ec_text, b);
                } else {
                    self.e.num(&ec_text);
                    self.e.byte(b'\n');
                }
            }
            let n = (hi - lo) as u64;
            if !self.cache() {
                self.counts.totals[0] += ec * n;
            }
            self.counts.lines += n;
            let t = step.target;
            match step.action {
                Action::Fall => {}
                Action::Call => {
                    self.call(&f, step.callee, &step.g, ec, step.site_shift, &mut c);
                }
                Action::PltCall => {
                    // The resolver of ld.so is the first function of that
                    // object (see `model`).
                    let r = m.object_funcs[2].0;
                    self.call(&f, r, &m.funcs[r as usize], 1, 0, &mut c);
                    self.call(&f, step.callee, &step.g, ec, step.site_shift, &mut c);
                }
                Action::Loop => {
                    let followed = ec.saturating_sub(1 + c.below(ec / 16 + 1)).max(1);
                    self.jump(t, Self::file_of(&f, t.inline), None, Some(followed), ec);
                }
                Action::Cond => {
                    let followed = 1 + c.below(ec);
                    self.jump(t, Self::file_of(&f, t.inline), None, Some(followed), ec);
                }
                Action::Jump => {
                    self.jump(t, Self::file_of(&f, t.inline), None, None, ec);
                }
                Action::Tail => {
                    let g = step.g;
                    let t = Ins {
                        addr: g.addr,
                        line: g.line,
                        inline: false,
                    };
                    let target_fn = (step.callee != fi).then_some(step.callee);
                    self.jump(t, g.file, target_fn, None, ec);
                }
            }
        }
        if self.cur_file != f.file {
            self.name(b"fe=", FILE, f.file);
            self.cur_file = f.file;
        }
        self.e.byte(b'\n');
        self.counts.blocks += 1;
        self.e.block_done();
    }

    /// Decides what ends each basic block (from the structure stream of
    /// the function and segment), then fetches the callees: independent
    /// loads from the large function table overlap instead of stalling one
    /// at a time.
    fn plan(&mut self, fi: u32, f: &Func, seg: u32) {
        let m = self.m;
        let mut s = Rng::new(hash2(
            m.layout_seed ^ 0x5eed ^ u64::from(fi),
            u64::from(seg),
        ));
        self.plan.clear();
        for b in 0..self.bbs.len() - 1 {
            let mut action = match s.below(1000) {
                0..160 => Action::Call,
                160..172 => Action::PltCall,
                172..252 => Action::Loop,
                252..452 => Action::Cond,
                452..507 => Action::Jump,
                507..511 => Action::Tail,
                _ => Action::Fall,
            };
            if matches!(action, Action::Fall) && m.extra_calls > 0 {
                let x = s.below(1000);
                if x < m.extra_calls {
                    action = Action::Call;
                } else if x < m.extra_calls + m.extra_jumps {
                    action = Action::Cond;
                }
            }
            let mut step = Step {
                action,
                callee: 0,
                g: Func::default(),
                target: Ins::default(),
                site_shift: 0,
            };
            match action {
                Action::Fall => {}
                Action::Call | Action::PltCall => {
                    step.callee = self.pick_callee(&mut s, fi, f.object);
                    if s.chance(20) {
                        step.site_shift = s.range(1, 6);
                    }
                }
                Action::Loop => step.target = self.backward(&mut s, b),
                Action::Cond => step.target = self.forward(&mut s, b),
                Action::Jump => {
                    step.target = if s.chance(500) {
                        self.forward(&mut s, b)
                    } else {
                        self.backward(&mut s, b)
                    }
                }
                Action::Tail => {
                    let (lo, hi) = m.object_funcs[f.object as usize];
                    step.callee = lo + s.below(u64::from(hi - lo)) as u32;
                }
            }
            self.plan.push(step);
        }
        for step in &mut self.plan {
            if matches!(step.action, Action::Call | Action::PltCall | Action::Tail) {
                step.g = m.funcs[step.callee as usize];
            }
        }
    }

    fn call(&mut self, f: &Func, gi: u32, g: &Func, count: u64, shift: u64, c: &mut Rng) {
        if g.object != f.object {
            self.name(b"cob=", OBJECT, g.object);
        }
        if g.file != self.cur_file {
            self.name(b"cfi=", FILE, g.file);
        }
        self.function_name(b"cfn=", gi);
        self.e.bytes(b"calls=");
        self.e.dec(count);
        self.e.byte(b' ');
        self.pos(g.addr, u64::from(g.line));
        self.e.byte(b'\n');
        // The call site is the call instruction, the last cost line; now and
        // then the next one, which is then not the base of what follows.
        self.pos(self.last_addr + shift, self.last_line);
        self.inclusive(c, g, count);
        let ne = self.events();
        self.cost_values(ne);
        self.counts.calls += 1;
    }

    fn jump(
        &mut self,
        t: Ins,
        target_file: u32,
        target_fn: Option<u32>,
        followed: Option<u64>,
        executed: u64,
    ) {
        if target_file != self.cur_file {
            self.name(b"jfi=", FILE, target_file);
        }
        if let Some(g) = target_fn {
            self.function_name(b"jfn=", g);
        }
        match followed {
            Some(n) => {
                self.e.bytes(b"jcnd=");
                self.e.dec(n);
                self.e.byte(b'/');
                self.e.dec(executed);
            }
            None => {
                self.e.bytes(b"jump=");
                self.e.dec(executed);
            }
        }
        self.e.byte(b' ');
        self.pos(t.addr, u64::from(t.line));
        self.e.byte(b'\n');
        // The source: the jump instruction, the last cost line.
        self.pos(self.last_addr, self.last_line);
        self.e.byte(b'\n');
        self.counts.jumps += 1;
    }

    /// The cache events of one instruction executed `ec` times (`ec_text`
    /// rendered), written after its position, and added to the totals.
    /// Most instructions miss no cache: their counts are `ec` or 0 and are
    /// written from the rendered text; the others take the general path.
    #[inline]
    fn cache_costs(&mut self, c: &mut Rng, ec: u64, ec_text: &Num, branch: Branch) {
        let r = c.next_u64();
        let dr = r & 1023 < 360;
        let dw = (r >> 10) & 1023 < 170;
        let miss =
            (r >> 20) & 1023 < 25 || dr && (r >> 34) & 1023 < 150 || dw && (r >> 51) & 1023 < 100;
        if miss || branch != Branch::None {
            self.costs[..CACHE_EVENTS].copy_from_slice(&miss_costs(r, ec));
            self.costs[CACHE_EVENTS..].copy_from_slice(&branch_costs(c, branch, ec));
            self.cost_values(self.ne);
            for (t, &v) in self.counts.totals.iter_mut().zip(&self.costs) {
                *t += v;
            }
            return;
        }
        self.e.num(ec_text);
        if dr || dw {
            self.e.byte(b' ');
            if dr {
                self.e.num(ec_text);
            } else {
                self.e.byte(b'0');
            }
        }
        if dw {
            self.e.byte(b' ');
            self.e.num(ec_text);
        }
        self.e.byte(b'\n');
        let t = &mut self.counts.totals;
        t[0] += ec;
        t[1] += if dr { ec } else { 0 };
        t[2] += if dw { ec } else { 0 };
    }

    /// Inclusive costs of `count` calls of `g`, into `self.costs`: not the
    /// callee's real cost (the generator does not simulate), but of the
    /// right magnitude and with misses below accesses.
    fn inclusive(&mut self, c: &mut Rng, g: &Func, count: u64) {
        let ir = count.saturating_mul(g.per_call);
        self.costs[0] = ir;
        if !self.cache() {
            return;
        }
        let r = c.next_u64();
        let dr = ir / 100 * (20 + (r & 31)) + ir % 100 / 4;
        let dw = ir / 100 * (8 + ((r >> 5) & 15)) + ir % 100 / 8;
        let i1 = (u64::from(g.instrs) / 16 + ((r >> 9) & 7)).min(ir);
        let d1r = dr / (16 + ((r >> 12) & 255));
        let d1w = dw / (16 + ((r >> 20) & 255));
        let il = i1 * (50 + ((r >> 28) & 63)) / 113;
        let dlr = d1r >> ((r >> 34) & 3);
        let dlw = d1w >> ((r >> 36) & 3);
        self.costs[..CACHE_EVENTS].copy_from_slice(&[ir, dr, dw, i1, d1r, d1w, il, dlr, dlw]);
        if self.ne == MAX_EVENTS {
            // About one instruction in seven is a conditional branch, one
            // in forty an indirect one.
            let bc = ir / 7;
            let bi = ir / 40;
            let bcm = bc / (10 + ((r >> 38) & 15));
            let bim = bi / (3 + ((r >> 44) & 3));
            self.costs[CACHE_EVENTS..].copy_from_slice(&[bc, bcm, bi, bim]);
        }
    }
}

/// The kind of branch an instruction is, for the branch events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Branch {
    None,
    Conditional,
    Indirect,
}

/// The branch events (`Bc Bcm Bi Bim`) of an instruction executed `ec`
/// times: a branch each time, mispredicted now and then. Rates as in
/// CPython's Cachegrind profile: about 6 % of conditional branches, 22 %
/// of indirect ones.
fn branch_costs(c: &mut Rng, branch: Branch, ec: u64) -> [u64; 4] {
    match branch {
        Branch::None => [0; 4],
        Branch::Conditional => {
            let r = c.next_u64();
            let missed = if !r.is_multiple_of(3) {
                (ec / (2 + (r >> 8) % 30)).max(1).min(ec)
            } else {
                0
            };
            [ec, missed, 0, 0]
        }
        Branch::Indirect => {
            let r = c.next_u64();
            let missed = (ec / (2 + (r >> 8) % 8)).max(1).min(ec);
            [0, 0, ec, missed]
        }
    }
}

/// The nine cache events of an instruction executed `ec` times, from the
/// random bits `r`: reads in about a third of the instructions, writes in a
/// sixth, misses rarely and never more than the accesses.
fn miss_costs(r: u64, ec: u64) -> [u64; CACHE_EVENTS] {
    let dr = if r & 1023 < 360 { ec } else { 0 };
    let dw = if (r >> 10) & 1023 < 170 { ec } else { 0 };
    let i1 = if (r >> 20) & 1023 < 25 {
        ec.min(1 + ((r >> 30) & 3))
    } else {
        0
    };
    let il = if i1 > 0 && (r >> 32) & 3 != 0 { i1 } else { 0 };
    let d1r = if dr > 0 && (r >> 34) & 1023 < 150 {
        dr.min(1 + (dr >> (1 + ((r >> 44) & 7))))
    } else {
        0
    };
    let dlr = if d1r > 0 && (r >> 47) & 3 == 0 {
        (d1r >> ((r >> 49) & 3)).max(1)
    } else {
        0
    };
    let d1w = if dw > 0 && (r >> 51) & 1023 < 100 {
        dw.min(1 + (dw >> (1 + ((r >> 61) & 7))))
    } else {
        0
    };
    let dlw = if d1w > 0 && (r >> 3) & 1 == 0 { d1w } else { 0 };
    [ec, dr, dw, i1, d1r, d1w, il, dlr, dlw]
}

/// The next line number: mostly the same or the next, sometimes back a
/// little, rarely far (written absolute then). A table lookup rather than
/// branches on random bits, which the processor cannot predict.
#[inline]
fn step_line(line: u64, y: u64) -> u64 {
    (line as i64 + i64::from(LINE_STEP[(y & 1023) as usize])).max(1) as u64
}

/// Line differences by probability (out of 1024).
const LINE_STEP: [i16; 1024] = line_steps();

const fn line_steps() -> [i16; 1024] {
    let mut t = [0i16; 1024];
    let mut i = 0;
    while i < 1024 {
        let k = (i as i16).wrapping_mul(37) & 0x3ff;
        t[i] = if i < 600 {
            0
        } else if i < 850 {
            1
        } else if i < 920 {
            2 + k % 3
        } else if i < 970 {
            -1 - k % 3
        } else if i < 995 {
            5 + k % 36
        } else if i < 1015 {
            -5 - k % 36
        } else {
            100 + k % 400
        };
        i += 1;
    }
    t
}

/// Relative subpositions `-99 ` to `+99 `, by difference + 99.
const REL: [([u8; 4], u8); 199] = rel_table();

const fn rel_table() -> [([u8; 4], u8); 199] {
    let mut t = [([b' '; 4], 0u8); 199];
    let mut i = 0;
    while i < 199 {
        let d = i as i64 - 99;
        let a = d.unsigned_abs() as u8;
        let sign = if d > 0 { b'+' } else { b'-' };
        t[i] = if d == 0 {
            ([b'*', b' ', b' ', b' '], 2)
        } else if a < 10 {
            ([sign, b'0' + a, b' ', b' '], 3)
        } else {
            ([sign, b'0' + a / 10, b'0' + a % 10, b' '], 4)
        };
        i += 1;
    }
    t
}

/// How often a basic block ran: mostly 1-10 times, loops far more, hot
/// functions scaled up. One draw, and selects rather than branches: the
/// processor cannot predict random choices.
#[inline]
fn exec_count(c: &mut Rng, hot: u32, looping: bool) -> u64 {
    let r = c.next_u64();
    let p = r & 1023;
    let small = 1 + ((((r >> 10) & 0xffff) * 10) >> 16);
    let mid = 11 + ((((r >> 26) & 0xffff) * 290) >> 16);
    // Log-uniform: a power of two from the top bits, then bits below it.
    let (lo, hi) = if looping { (3, 17) } else { (8, 15) };
    let e = lo + ((((r >> 42) & 0xff) * (hi - lo + 1)) >> 8);
    let big = (1 << e) | ((r >> 10) & ((1 << e) - 1));
    let base = if looping {
        big
    } else if p < 768 {
        small
    } else if p < 973 {
        mid
    } else {
        big
    };
    base * u64::from(hot)
}
