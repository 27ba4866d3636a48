//! gprof's call-graph analysis proper, on routines already found: the
//! table finalized, samples and arcs assigned to routines, then cycles
//! collapsed and time propagated ([`assemble`]). The steps are listed in
//! the parent module's documentation.

use rustc_hash::FxHashMap;

/// Bytes per histogram counting unit: gprof scales addresses by the size of
/// a 16-bit bin counter, so bins and symbols are compared in these units.
pub const UNIT: u64 = 2;

/// A routine (function, or source line for line-level profiles).
#[derive(Debug, Clone, PartialEq)]
pub struct Routine {
    /// The raw symbol name: sorting and symbol specifications use it.
    pub name: String,
    /// The name to print (demangled, or with a line suffix).
    pub display: String,
    /// Start address.
    pub addr: u64,
    /// Last address (inclusive); 0 until [`SymbolTable::finalize`] sets it.
    pub end_addr: u64,
    /// A local (`static`) symbol.
    pub is_static: bool,
    /// Marked as a function (line symbols are not).
    pub is_func: bool,
    /// Source file of the start address, if known: shared, as thousands
    /// of routines of a large profile come from one file.
    pub file: Option<std::sync::Arc<str>>,
    /// Source line of the start address (0 if unknown).
    pub line: u32,
}

/// The routines, sorted by address and without duplicates.
#[derive(Debug, Clone, Default)]
pub struct SymbolTable {
    /// The routines in address order.
    pub routines: Vec<Routine>,
}

impl SymbolTable {
    /// Sorts and deduplicates as GNU gprof's `symtab_finalize` does:
    /// functions before other symbols and globals before statics at one
    /// address, then of two names at one address the global one, then the
    /// function, then the one without a leading underscore (or with one
    /// underscore rather than two) is kept. Each routine extends to the
    /// next; the last to the end of the text section (`text_end`, exclusive).
    pub fn finalize(mut raw: Vec<Routine>, text_end: u64) -> SymbolTable {
        raw.sort_by(|l, r| {
            l.addr
                .cmp(&r.addr)
                .then(r.is_func.cmp(&l.is_func))
                .then(l.is_static.cmp(&r.is_static))
        });
        let mut out: Vec<Routine> = Vec::with_capacity(raw.len());
        let Some(first) = raw.first() else {
            return SymbolTable::default();
        };
        let mut prev_addr = first.addr.wrapping_sub(1);
        for src in raw {
            if src.addr == prev_addr {
                let Some(dst) = out.last_mut() else { continue };
                let b = |s: &str, i: usize| s.as_bytes().get(i).copied().unwrap_or(0);
                let better = (!src.is_static && dst.is_static)
                    || (src.is_static == dst.is_static
                        && ((src.is_func && !dst.is_func)
                            || (src.is_func == dst.is_func
                                && ((b(&src.name, 0) != b'_' && b(&dst.name, 0) == b'_')
                                    || (b(&src.name, 0) == b'_'
                                        && b(&dst.name, 0) == b'_'
                                        && b(&src.name, 1) != b'_'
                                        && b(&dst.name, 1) == b'_')))));
                if better {
                    *dst = src;
                }
            } else {
                if let Some(dst) = out.last_mut()
                    && dst.end_addr == 0
                {
                    dst.end_addr = src.addr.wrapping_sub(1);
                }
                if src.end_addr == 0 || src.addr <= src.end_addr {
                    prev_addr = src.addr;
                    out.push(src);
                }
            }
        }
        if let Some(last) = out.last_mut()
            && last.end_addr == 0
        {
            last.end_addr = text_end.wrapping_sub(1);
        }
        SymbolTable { routines: out }
    }

    /// Number of routines.
    pub fn len(&self) -> usize {
        self.routines.len()
    }

    /// True without routines.
    pub fn is_empty(&self) -> bool {
        self.routines.is_empty()
    }

    /// The routine whose range holds `addr`: the last one starting at or
    /// before it, if `addr` is not past its end.
    pub fn lookup(&self, addr: u64) -> Option<usize> {
        let i = self.routines.partition_point(|r| r.addr <= addr);
        let i = i.checked_sub(1)?;
        (addr <= self.routines[i].end_addr).then_some(i)
    }
}

/// One histogram record: `bins` counters evenly covering `[low_pc, high_pc)`.
#[derive(Debug, Clone, Copy)]
pub struct Samples<'a> {
    /// First address covered.
    pub low_pc: u64,
    /// First address not covered.
    pub high_pc: u64,
    /// The counters.
    pub bins: &'a [u64],
}

/// The result of [`assign_samples`].
#[derive(Debug, Clone, Default)]
pub struct SelfTimes {
    /// Ticks per routine.
    pub time: Vec<f64>,
    /// All ticks, less those of routines kept out of the flat profile.
    pub total: f64,
    /// Address units per bin (of the first histogram).
    pub scale: f64,
}

/// Credits every bin's count to the routines its address range overlaps,
/// in proportion to the overlap, as GNU gprof's `hist_assign_samples` does:
/// a routine's range runs from its start to the next routine's start (so it
/// takes the padding after it), and addresses are compared in [`UNIT`]s.
/// `credited(i)` is false for routines whose time is to be left out (the
/// `-P`/`-p` flat-profile selections): their share is taken off the total.
pub fn assign_samples(
    table: &SymbolTable,
    hists: &[Samples<'_>],
    credited: impl Fn(usize) -> bool,
) -> SelfTimes {
    let n = table.len();
    let mut out = SelfTimes {
        time: vec![0.0; n],
        total: 0.0,
        scale: 0.0,
    };
    let Some(first) = hists.first() else {
        return out;
    };
    let scale = if first.bins.is_empty() {
        0.0
    } else {
        (first.high_pc.saturating_sub(first.low_pc) / UNIT) as f64 / first.bins.len() as f64
    };
    out.scale = scale;
    let scaled: Vec<u64> = table.routines.iter().map(|r| r.addr / UNIT).collect();
    let high_of = |j: usize| -> u64 {
        match scaled.get(j + 1) {
            Some(&next) => next,
            None => table.routines[j].end_addr.wrapping_add(1) / UNIT,
        }
    };
    for h in hists {
        let lowpc = h.low_pc / UNIT;
        let mut k: usize = 1;
        for (i, &count) in h.bins.iter().enumerate() {
            if count == 0 {
                continue;
            }
            let bin_low = lowpc.wrapping_add((scale * i as f64) as u64);
            let bin_high = lowpc.wrapping_add((scale * (i + 1) as f64) as u64);
            let count_time = count as f64;
            out.total += count_time;
            let mut j = k - 1;
            while j < n {
                let sym_low = scaled[j];
                let sym_high = high_of(j);
                if bin_high < sym_low {
                    break;
                }
                if bin_low < sym_high {
                    let overlap = bin_high.min(sym_high).wrapping_sub(bin_low.max(sym_low));
                    if overlap > 0 {
                        let credit = overlap as f64 * count_time / scale;
                        if credited(j) {
                            out.time[j] += credit;
                        } else {
                            out.total -= credit;
                        }
                    }
                }
                j += 1;
                k = j;
            }
        }
    }
    out
}

/// A call arc.
#[derive(Debug, Clone, PartialEq)]
pub struct Arc {
    /// Calling routine.
    pub parent: usize,
    /// Called routine.
    pub child: usize,
    /// Traversals (0 for static arcs).
    pub count: u64,
    /// Self time of the child propagated along this arc (after
    /// [`assemble`]).
    pub time: f64,
    /// Descendant time of the child propagated along this arc.
    pub child_time: f64,
}

/// The arcs between routines, with gprof's list orders: the newest arc
/// first in both the caller's and the callee's list.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// All arcs, oldest first. Add arcs with [`Graph::add`] only: it keeps
    /// the lists of every routine's arcs up to date.
    pub arcs: Vec<Arc>,
    /// The arc of each caller and callee, made when first needed: a graph
    /// made whole by [`Graph::from_arcs`] does without.
    index: std::sync::OnceLock<FxHashMap<(usize, usize), usize>>,
    /// Calls into every routine, self calls included until [`assemble`].
    pub ncalls: Vec<u64>,
    /// Every routine's arcs, made when first asked for after the last
    /// [`Graph::add`].
    lists: std::sync::OnceLock<Lists>,
}

/// The arcs out of and into every routine, oldest first, in two flat
/// tables (a list per routine would be an allocation per routine, and a
/// walk over the graph would chase a pointer per routine). Indices are
/// 32-bit: the lists stay in the report, and a large profile has millions
/// of arcs (a graph of 2³² arcs would not fit in memory anyway).
#[derive(Debug, Clone, Default)]
struct Lists {
    /// `child_arcs[child_start[r]..child_start[r + 1]]` are `r`'s arcs to
    /// its callees; `child_nodes` has their callees, for the depth-first
    /// walk, which needs nothing else of an arc.
    child_start: Vec<u32>,
    child_arcs: Vec<u32>,
    child_nodes: Vec<u32>,
    /// The same for the arcs into every routine.
    parent_start: Vec<u32>,
    parent_arcs: Vec<u32>,
}

impl Lists {
    /// The lists of `arcs` over `routines` routines: a counting sort by
    /// each end, which keeps every routine's arcs oldest first.
    fn new(arcs: &[Arc], routines: usize) -> Lists {
        fn by(arcs: &[Arc], routines: usize, end: impl Fn(&Arc) -> usize) -> (Vec<u32>, Vec<u32>) {
            let mut start = vec![0u32; routines + 1];
            for a in arcs {
                start[end(a) + 1] += 1;
            }
            for r in 0..routines {
                start[r + 1] += start[r];
            }
            let mut next = start.clone();
            let mut out = vec![0u32; arcs.len()];
            for (i, a) in arcs.iter().enumerate() {
                let slot = &mut next[end(a)];
                out[*slot as usize] = i as u32;
                *slot += 1;
            }
            (start, out)
        }
        let (child_start, child_arcs) = by(arcs, routines, |a| a.parent);
        let child_nodes = (child_arcs.iter())
            .map(|&a| arcs[a as usize].child as u32)
            .collect();
        let (parent_start, parent_arcs) = by(arcs, routines, |a| a.child);
        Lists {
            child_start,
            child_arcs,
            child_nodes,
            parent_start,
            parent_arcs,
        }
    }

    fn children(&self, r: usize) -> std::ops::Range<usize> {
        self.child_start[r] as usize..self.child_start[r + 1] as usize
    }

    fn parents(&self, r: usize) -> &[u32] {
        &self.parent_arcs[self.parent_start[r] as usize..self.parent_start[r + 1] as usize]
    }
}

impl Graph {
    /// A graph without arcs over `routines` routines.
    pub fn new(routines: usize) -> Graph {
        Graph {
            arcs: Vec::new(),
            index: std::sync::OnceLock::new(),
            ncalls: vec![0; routines],
            lists: std::sync::OnceLock::new(),
        }
    }

    /// A graph over `routines` routines with the arcs `(caller, callee,
    /// count)` of `records`, in order, those of one caller and callee
    /// summed into the first one's arc (as [`Graph::add`] would), and the
    /// arc of each record. Call counts are not touched. The records are
    /// grouped by a counting sort by caller and a mark per callee, not
    /// hashed: a large profile has a million of them, and each probe of a
    /// table that large is a cache miss.
    pub fn from_arcs(routines: usize, records: &[(usize, usize, u64)]) -> (Graph, Vec<usize>) {
        let ends = records
            .iter()
            .map(|&(p, c, _)| p.max(c) + 1)
            .max()
            .unwrap_or(0)
            .max(routines);
        // Each caller's records, in order.
        let mut start = vec![0usize; ends + 1];
        for &(p, _, _) in records {
            start[p + 1] += 1;
        }
        for k in 1..start.len() {
            start[k] += start[k - 1];
        }
        let mut by_caller = vec![0usize; records.len()];
        let mut next = start.clone();
        for (k, &(p, _, _)) in records.iter().enumerate() {
            by_caller[next[p]] = k;
            next[p] += 1;
        }
        drop(next);
        // The first record of each caller and callee, found per caller
        // with the callee's mark.
        let mut first = vec![0usize; records.len()];
        let mut marked_by = vec![usize::MAX; ends];
        let mut first_of_callee = vec![0usize; ends];
        for p in 0..ends {
            for &k in &by_caller[start[p]..start[p + 1]] {
                let c = records[k].1;
                if marked_by[c] != p {
                    marked_by[c] = p;
                    first_of_callee[c] = k;
                }
                first[k] = first_of_callee[c];
            }
        }
        drop((by_caller, marked_by, first_of_callee, start));
        // Arcs in the order of their first records.
        let mut graph = Graph::new(routines);
        let mut arc_of = vec![0usize; records.len()];
        for (k, &(parent, child, count)) in records.iter().enumerate() {
            if first[k] == k {
                arc_of[k] = graph.arcs.len();
                graph.arcs.push(Arc {
                    parent,
                    child,
                    count,
                    time: 0.0,
                    child_time: 0.0,
                });
            } else {
                let a = arc_of[first[k]];
                arc_of[k] = a;
                graph.arcs[a].count = graph.arcs[a].count.saturating_add(count);
            }
        }
        (graph, arc_of)
    }

    fn index(&self) -> &FxHashMap<(usize, usize), usize> {
        self.index.get_or_init(|| {
            (self.arcs.iter().enumerate())
                .map(|(a, arc)| ((arc.parent, arc.child), a))
                .collect()
        })
    }

    fn lists(&self) -> &Lists {
        self.lists
            .get_or_init(|| Lists::new(&self.arcs, self.ncalls.len()))
    }

    /// Adds `count` to the arc `parent → child`, creating it if new
    /// (`arc_add`), and returns the arc's index. Does not touch the call
    /// counts.
    pub fn add(&mut self, parent: usize, child: usize, count: u64) -> usize {
        self.index();
        let index = self.index.get_mut().expect("made above");
        if let Some(&a) = index.get(&(parent, child)) {
            self.arcs[a].count = self.arcs[a].count.saturating_add(count);
            return a;
        }
        let a = self.arcs.len();
        self.arcs.push(Arc {
            parent,
            child,
            count,
            time: 0.0,
            child_time: 0.0,
        });
        index.insert((parent, child), a);
        self.lists.take();
        a
    }

    /// Records a gmon arc record (`cg_tally`): both ends are looked up; a
    /// record whose caller or callee is in no routine is dropped. The callee
    /// is moved back to the function holding it (for line symbols).
    /// `keep(parent, child)` applies `-k` and the arc selections. Returns
    /// whether the record was kept.
    pub fn tally(
        &mut self,
        table: &SymbolTable,
        from_pc: u64,
        self_pc: u64,
        count: u64,
        keep: impl Fn(usize, usize) -> bool,
    ) -> bool {
        let (Some(parent), Some(mut child)) = (table.lookup(from_pc), table.lookup(self_pc)) else {
            return false;
        };
        while !table.routines[child].is_func {
            if child == 0 {
                return false;
            }
            child -= 1;
        }
        if !keep(parent, child) {
            return false;
        }
        self.ncalls[child] = self.ncalls[child].saturating_add(count);
        self.add(parent, child, count);
        true
    }

    /// Arc indices out of `r`, newest first (gprof's list order).
    pub fn children_of(&self, r: usize) -> impl DoubleEndedIterator<Item = usize> + '_ {
        let l = self.lists();
        l.child_arcs[l.children(r)]
            .iter()
            .rev()
            .map(|&a| a as usize)
    }

    /// Arc indices into `r`, newest first.
    pub fn parents_of(&self, r: usize) -> impl DoubleEndedIterator<Item = usize> + '_ {
        self.lists().parents(r).iter().rev().map(|&a| a as usize)
    }

    /// The arc `parent → child`, if any.
    pub fn find(&self, parent: usize, child: usize) -> Option<usize> {
        self.index().get(&(parent, child)).copied()
    }
}

/// An include/exclude selection of routines, from symbol specifications.
/// A routine is selected when it is included, or when nothing is included
/// and it is not excluded.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    include: Vec<bool>,
    exclude: Vec<bool>,
    any_included: bool,
}

impl Selection {
    /// A selection from the routines named by including and by excluding
    /// specifications (empty vectors: none).
    pub fn new(include: Vec<bool>, exclude: Vec<bool>) -> Selection {
        let any_included = include.iter().any(|&b| b);
        Selection {
            include,
            exclude,
            any_included,
        }
    }

    fn inc(&self, i: usize) -> bool {
        self.include.get(i).copied().unwrap_or(false)
    }
    fn exc(&self, i: usize) -> bool {
        self.exclude.get(i).copied().unwrap_or(false)
    }
    fn any_included(&self) -> bool {
        self.any_included
    }

    /// Selected for a routine that nothing else selected.
    pub fn selects(&self, i: usize) -> bool {
        self.inc(i) || (!self.any_included() && !self.exc(i))
    }

    /// Still selected for a routine already selected by its callers.
    fn keeps(&self, i: usize) -> bool {
        self.inc(i) || !self.exc(i)
    }
}

/// What [`assemble`] needs besides the graph.
#[derive(Debug, Clone, Default)]
pub struct AssembleOptions {
    /// Which routines the call graph shows (`-f`/`-e`, `-q`/`-Q`).
    pub graph: Selection,
    /// Which routines pass time to their callers (`-F`/`-E`, `-n`/`-N`).
    pub time: Selection,
    /// Static arcs (`-c`): `(caller, callee)` in the order found.
    pub static_arcs: Vec<(usize, usize)>,
}

/// A cycle: routines calling each other, collapsed into one node.
#[derive(Debug, Clone, PartialEq)]
pub struct CycleInfo {
    /// Its number (1-based, in address order of the member found first).
    pub number: u32,
    /// Members, in the order gprof chains them.
    pub members: Vec<usize>,
}

/// The analysed call graph. Node indices `0..routines` are routines,
/// `routines..routines + cycles.len()` the cycles.
#[derive(Debug, Clone)]
pub struct CallGraph {
    /// Number of routines.
    pub routines: usize,
    /// The arcs, with propagated times.
    pub graph: Graph,
    /// Calls from other routines (self calls taken out); for a cycle,
    /// calls from outside it.
    pub ncalls: Vec<u64>,
    /// Self calls; for a cycle, calls among its members.
    pub self_calls: Vec<u64>,
    /// Own time (ticks); for a cycle, its members'.
    pub self_time: Vec<f64>,
    /// Time of descendants, before scaling by the propagation fraction.
    pub child_time: Vec<f64>,
    /// Fraction of time passed on to callers.
    pub fract: Vec<f64>,
    /// Self time as printed (`self_time · fract`).
    pub prop_self: Vec<f64>,
    /// Descendant time as printed.
    pub prop_child: Vec<f64>,
    /// Shown in the call graph.
    pub print_flag: Vec<bool>,
    /// Cycle number (0 for none), for routines and cycles.
    pub cycle: Vec<u32>,
    /// The cycles.
    pub cycles: Vec<CycleInfo>,
    /// Total propagated self time: the 100 % of the call graph.
    pub print_time: f64,
    /// Nodes by decreasing total time (gprof's order of entries).
    pub order: Vec<usize>,
    /// Index number (`[n]`) of every node, 1-based.
    pub index: Vec<usize>,
    /// Topological number of every routine (callees lower).
    pub top_order: Vec<i64>,
}

const DFN_NAN: i64 = 0;
const DFN_BUSY: i64 = -1;

/// Depth-first numbering with cycle collapsing, as `cg_dfn` does it but
/// with an explicit stack: `head[n]` is the first-visited member of `n`'s
/// strongly connected component and `next[n]` chains the members from it.
struct Dfn<'g> {
    lists: &'g Lists,
    top: Vec<i64>,
    head: Vec<usize>,
    next: Vec<Option<usize>>,
    stack: Vec<usize>,
    counter: i64,
    /// Stack position of every node pushed (valid while it is on the
    /// stack: each node is pushed at most once).
    pos: Vec<usize>,
    /// Last member of the chain of every head.
    last: Vec<usize>,
    /// Stack positions of the entries that are still their own head,
    /// ascending: the only ones `find_cycle` links in, so that closing a
    /// cycle does not walk the whole stack (GNU gprof's walk is quadratic
    /// on large cycles; the result is the same).
    own: Vec<usize>,
}

impl Dfn<'_> {
    fn numbered(&self, n: usize) -> bool {
        self.top[n] != DFN_NAN && self.top[n] != DFN_BUSY
    }

    fn run(&mut self, root: usize) {
        // Frames: (node, the end of its child arcs not yet taken). The arcs
        // are taken newest first ([`Graph::children_of`]), from the end of
        // the node's list, which the walk does not change: no list is
        // copied.
        let mut frames: Vec<(usize, usize)> = Vec::new();
        if !self.enter(root) {
            return;
        }
        let l = self.lists;
        frames.push((root, l.child_start[root + 1] as usize));
        while let Some((node, end)) = frames.last_mut() {
            if *end > l.child_start[*node] as usize {
                *end -= 1;
                let child = l.child_nodes[*end] as usize;
                if self.enter(child) {
                    frames.push((child, l.child_start[child + 1] as usize));
                }
            } else {
                let node = *node;
                frames.pop();
                self.post_visit(node);
            }
        }
    }

    /// Visits `n`: false if it is numbered, or busy (then a cycle is closed).
    fn enter(&mut self, n: usize) -> bool {
        if self.numbered(n) {
            return false;
        }
        if self.top[n] != DFN_NAN {
            self.find_cycle(n);
            return false;
        }
        self.pos[n] = self.stack.len();
        self.own.push(self.stack.len());
        self.stack.push(n);
        self.top[n] = DFN_BUSY;
        true
    }

    fn post_visit(&mut self, n: usize) {
        if self.head[n] == n {
            self.counter += 1;
            let mut m = Some(n);
            while let Some(x) = m {
                self.top[x] = self.counter;
                m = self.next[x];
            }
        }
        if self.own.last() == Some(&(self.stack.len() - 1)) {
            self.own.pop();
        }
        self.stack.pop();
    }

    fn on_stack(&self, n: usize) -> bool {
        self.stack.get(self.pos[n]) == Some(&n)
    }

    /// `cg_dfn`'s `find_cycle`: the topmost stack entry that is `child` or
    /// its cycle's head, then every entry above it that is still its own
    /// head is linked into that entry's chain. `head[m]` is always the
    /// first node of `m`'s chain, so the chain's end is `last[head[m]]`.
    fn find_cycle(&mut self, child: usize) {
        let mut found = self.on_stack(child).then_some(self.pos[child]);
        let h = self.head[child];
        if h != child && self.on_stack(h) {
            found = found.max(Some(self.pos[h]));
        }
        let top = found.map_or(0, |i| i + 1);
        if top == 0 || top == self.stack.len() {
            // Not on the stack (cannot happen), or a self call.
            return;
        }
        let mut head = self.stack[top - 1];
        let mut tail = self.last[self.head[head]];
        if self.head[head] != head {
            head = self.head[head];
        }
        let split = self.own.partition_point(|&i| i < top);
        let above = self.own.split_off(split);
        for &i in &above {
            let c = self.stack[i];
            if self.head[c] == c {
                self.next[tail] = Some(c);
                self.head[c] = head;
                tail = c;
                while let Some(n) = self.next[tail] {
                    self.head[n] = head;
                    tail = n;
                }
            }
        }
        self.last[head] = tail;
        for i in above {
            let c = self.stack[i];
            if self.head[c] == c {
                self.own.push(i);
            }
        }
    }
}

/// Numbers the routines and finds the cycles: returns the topological
/// numbers and, per routine, the first-found member of its cycle and the
/// member chain. Public for tests that compare it with Tarjan's algorithm.
pub fn depth_first(graph: &Graph) -> (Vec<i64>, Vec<usize>, Vec<Option<usize>>) {
    let n = graph.ncalls.len();
    let mut dfn = Dfn {
        lists: graph.lists(),
        top: vec![DFN_NAN; n],
        head: (0..n).collect(),
        next: vec![None; n],
        stack: Vec::new(),
        counter: 0,
        pos: vec![usize::MAX; n],
        last: (0..n).collect(),
        own: Vec::new(),
    };
    for r in 0..n {
        if dfn.top[r] == DFN_NAN {
            dfn.run(r);
        }
    }
    (dfn.top, dfn.head, dfn.next)
}

/// GNU gprof's `cg_assemble`: takes self calls out of the call counts, adds
/// static arcs, collapses cycles, propagates flags and fractions from
/// callers to callees and time from callees to callers, and orders the
/// entries. `self_time` is per routine, `names` are the raw names (for the
/// order of entries with equal time).
pub fn assemble(
    mut graph: Graph,
    self_time: &[f64],
    names: &[&str],
    options: &AssembleOptions,
) -> CallGraph {
    let n = graph.ncalls.len();
    let mut ncalls = graph.ncalls.clone();
    let mut self_calls = vec![0u64; n];
    // Arcs are unique per (caller, callee): one pass over them finds the
    // self calls, with no lookup per routine.
    for a in graph.arcs.iter().filter(|a| a.parent == a.child) {
        let r = a.parent;
        ncalls[r] = ncalls[r].saturating_sub(a.count);
        self_calls[r] = a.count;
    }
    for &(p, c) in &options.static_arcs {
        graph.add(p, c, 0);
    }

    let (top_order, head, next) = depth_first(&graph);

    // cycle_link: number cycles by the address of their first member.
    let mut cycles = Vec::new();
    let mut cycle = vec![0u32; n];
    let mut cycle_of = vec![usize::MAX; n]; // node index of a member's cycle
    for r in 0..n {
        if head[r] == r && next[r].is_some() {
            let number = cycles.len() as u32 + 1;
            let mut members = Vec::new();
            let mut m = Some(r);
            while let Some(x) = m {
                members.push(x);
                cycle[x] = number;
                cycle_of[x] = n + cycles.len();
                m = next[x];
            }
            cycles.push(CycleInfo { number, members });
        }
    }
    let total = n + cycles.len();
    ncalls.resize(total, 0);
    self_calls.resize(total, 0);
    let mut node_cycle = cycle.clone();
    for (k, c) in cycles.iter().enumerate() {
        node_cycle.push(c.number);
        for &m in &c.members {
            for a in graph.parents_of(m) {
                let arc = &graph.arcs[a];
                if arc.parent == m {
                    continue;
                }
                if cycle[arc.parent] == c.number {
                    self_calls[n + k] += arc.count;
                } else {
                    ncalls[n + k] += arc.count;
                }
            }
        }
    }
    // The node that stands for a routine in the collapsed graph.
    let group = |r: usize| if cycle[r] != 0 { cycle_of[r] } else { r };

    let top_sorted = by_number(&top_order);

    let mut print_flag = vec![false; total];
    let mut fract = vec![0.0f64; total];
    let mut prop_self = vec![0.0f64; total];
    let mut prop_child = vec![0.0f64; total];
    let mut child_time = vec![0.0f64; total];
    let mut hist = self_time.to_vec();
    hist.resize(total, 0.0);
    for k in 0..cycles.len() {
        print_flag[n + k] = true;
    }
    let mut print_time = 0.0;

    // propagate_flags, callers first.
    let mut old_head = usize::MAX;
    for &child in top_sorted.iter().rev() {
        let g = group(child);
        if g != old_head {
            old_head = g;
            if g == child {
                print_flag[child] = false;
                fract[child] = 0.0;
                for a in graph.parents_of(child) {
                    let arc = &graph.arcs[a];
                    if arc.parent == child {
                        continue;
                    }
                    print_flag[child] |= print_flag[arc.parent];
                    if ncalls[child] != 0 {
                        fract[child] +=
                            fract[arc.parent] * (arc.count as f64 / ncalls[child] as f64);
                    }
                }
            } else {
                print_flag[g] = false;
                fract[g] = 0.0;
                let members = &cycles[g - n].members;
                for &m in members {
                    for a in graph.parents_of(m) {
                        let arc = &graph.arcs[a];
                        if group(arc.parent) == g {
                            continue;
                        }
                        print_flag[g] |= print_flag[arc.parent];
                        if ncalls[g] != 0 {
                            fract[g] += fract[arc.parent] * (arc.count as f64 / ncalls[g] as f64);
                        }
                    }
                }
                for &m in members {
                    print_flag[m] = print_flag[g];
                    fract[m] = fract[g];
                }
            }
        }
        if !print_flag[child] {
            if options.graph.selects(child) {
                print_flag[child] = true;
            }
        } else if !options.graph.keeps(child) {
            print_flag[child] = false;
        }
        if fract[child] == 0.0 {
            if options.time.selects(child) {
                fract[child] = 1.0;
            }
        } else if !options.time.keeps(child) {
            fract[child] = 0.0;
        }
        prop_self[child] = hist[child] * fract[child];
        print_time += prop_self[child];
    }

    // cycle_time
    for (k, c) in cycles.iter().enumerate() {
        for &m in &c.members {
            if fract[m] == 0.0 {
                continue;
            }
            hist[n + k] += hist[m];
        }
        prop_self[n + k] = fract[n + k] * hist[n + k];
    }

    // propagate_time, callees first. The lists are taken out of the graph
    // while its arcs' times are written, and put back after.
    let lists = match graph.lists.take() {
        Some(l) => l,
        None => Lists::new(&graph.arcs, n),
    };
    for &parent in &top_sorted {
        if fract[parent] == 0.0 {
            continue;
        }
        // Newest first, as `children_of`, by index: the arcs' times are
        // written as they are visited.
        for k in lists.children(parent).rev() {
            let a = lists.child_arcs[k] as usize;
            let (count, mut child) = (graph.arcs[a].count, graph.arcs[a].child);
            if count == 0 || child == parent || fract[child] == 0.0 {
                continue;
            }
            if cycle[child] != 0 {
                if cycle[parent] == cycle[child] {
                    continue;
                }
                child = cycle_of[child];
            } else if top_order[parent] <= top_order[child] {
                continue;
            }
            if ncalls[child] == 0 {
                continue;
            }
            let share_of = count as f64 / ncalls[child] as f64;
            let time = hist[child] * share_of;
            let ctime = child_time[child] * share_of;
            let share = time + ctime;
            child_time[parent] += share;
            let prop_share = fract[parent] * share;
            prop_child[parent] += prop_share;
            graph.arcs[a].time = time * fract[parent];
            graph.arcs[a].child_time = ctime * fract[parent];
            if cycle[parent] != 0 {
                let h = cycle_of[parent];
                child_time[h] += share;
                prop_child[h] += prop_share;
            }
        }
    }
    graph.lists = std::sync::OnceLock::from(lists);

    // Order of entries: by total time, cycles first (among themselves in
    // node order), names without a leading underscore first, more calls
    // first, then by name, then by node. The keys themselves are sorted,
    // side by side, not indices into them: a large profile's entries are
    // far apart in memory, and the names are reached only on a tie.
    #[derive(Clone, Copy)]
    struct Entry {
        total: f64,
        calls: u64,
        node: usize,
        /// 0 for a cycle, 1 for a name without a leading underscore, 2 for
        /// one with.
        rank: u8,
    }
    let mut entries: Vec<Entry> = (0..total)
        .map(|i| Entry {
            total: prop_self[i] + prop_child[i],
            calls: ncalls[i],
            node: i,
            rank: if i >= n {
                0
            } else if names[i].starts_with('_') {
                2
            } else {
                1
            },
        })
        .collect();
    entries.sort_unstable_by(|l, r| {
        use std::cmp::Ordering;
        if l.total < r.total {
            return Ordering::Greater;
        }
        if l.total > r.total {
            return Ordering::Less;
        }
        l.rank.cmp(&r.rank).then_with(|| {
            if l.rank == 0 {
                return l.node.cmp(&r.node);
            }
            (r.calls.cmp(&l.calls))
                .then_with(|| names[l.node].as_bytes().cmp(names[r.node].as_bytes()))
                .then(l.node.cmp(&r.node))
        })
    });
    let order: Vec<usize> = entries.iter().map(|e| e.node).collect();
    drop(entries);
    let mut index = vec![0usize; total];
    for (pos, &node) in order.iter().enumerate() {
        index[node] = pos + 1;
    }

    CallGraph {
        routines: n,
        graph,
        ncalls,
        self_calls,
        self_time: hist,
        child_time,
        fract,
        prop_self,
        prop_child,
        print_flag,
        cycle: node_cycle,
        cycles,
        print_time,
        order,
        index,
        top_order,
    }
}

/// The routines in increasing `top` number, those with equal numbers (a
/// cycle's members) in index order: a stable sort by number, counted
/// (the numbers run from 1 to at most the routine count).
fn by_number(top: &[i64]) -> Vec<usize> {
    let max = top.iter().copied().max().unwrap_or(0).max(0) as usize;
    let mut start = vec![0usize; max + 2];
    for &t in top {
        start[t.max(0) as usize + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut out = vec![0usize; top.len()];
    for (r, &t) in top.iter().enumerate() {
        let slot = &mut start[t.max(0) as usize];
        out[*slot] = r;
        *slot += 1;
    }
    out
}

impl CallGraph {
    /// The cycle node of cycle `number`.
    pub fn cycle_node(&self, number: u32) -> usize {
        self.routines + number as usize - 1
    }

    /// True for cycle nodes.
    pub fn is_cycle(&self, node: usize) -> bool {
        node >= self.routines
    }

    /// The node standing for `r` in the collapsed graph: its cycle, or
    /// itself.
    pub fn group(&self, r: usize) -> usize {
        match self.cycle[r] {
            0 => r,
            c => self.cycle_node(c),
        }
    }

    /// Order of arcs in gprof's listings (`arc_compare`), as a key read
    /// once per arc: a self call least, then calls within a cycle by
    /// count, then the others by propagated time and count. Comparisons
    /// then read the keys side by side rather than the arcs, which a list
    /// reaches in no order.
    fn arc_key(&self, a: usize) -> (u8, f64, f64) {
        let arc = &self.graph.arcs[a];
        if arc.parent == arc.child {
            (0, 0.0, 0.0)
        } else if self.cycle[arc.parent] != 0 && self.cycle[arc.parent] == self.cycle[arc.child] {
            (1, arc.count as f64, 0.0)
        } else {
            (2, arc.time + arc.child_time, arc.count as f64)
        }
    }

    /// `arcs` sorted by [`CallGraph::arc_key`], ascending or descending,
    /// stably (a total preorder: at most one self call per list).
    fn sorted_arcs(&self, arcs: impl Iterator<Item = usize>, descending: bool) -> Vec<usize> {
        let mut keyed: Vec<((u8, f64, f64), usize)> = arcs.map(|a| (self.arc_key(a), a)).collect();
        // Floats compare as gprof's `arc_compare` compares them (`<`, `>`,
        // else equal): unordered is equal.
        let order = |x: &(u8, f64, f64), y: &(u8, f64, f64)| {
            x.0.cmp(&y.0)
                .then(x.1.partial_cmp(&y.1).unwrap_or(std::cmp::Ordering::Equal))
                .then(x.2.partial_cmp(&y.2).unwrap_or(std::cmp::Ordering::Equal))
        };
        if descending {
            keyed.sort_by(|(x, _), (y, _)| order(y, x));
        } else {
            keyed.sort_by(|(x, _), (y, _)| order(x, y));
        }
        keyed.into_iter().map(|(_, a)| a).collect()
    }

    /// The arcs into `r` in print order (`sort_parents`: ascending, an arc
    /// placed before the equal ones already placed). gprof inserts the
    /// arcs newest first, each before the first equal or greater one, so
    /// equal arcs end up oldest first: a stable sort of the arcs oldest
    /// first gives the same order without gprof's quadratic insertion.
    pub fn sorted_parents(&self, r: usize) -> Vec<usize> {
        self.sorted_arcs(self.graph.parents_of(r).rev(), false)
    }

    /// The arcs out of `r` in print order (`sort_children`: descending;
    /// equal arcs oldest first, as gprof's insertion leaves them).
    pub fn sorted_children(&self, r: usize) -> Vec<usize> {
        self.sorted_arcs(self.graph.children_of(r).rev(), true)
    }

    /// Members of cycle node `c` in print order: by total time, then calls,
    /// descending.
    pub fn sorted_members(&self, c: usize) -> Vec<usize> {
        let members = &self.cycles[c - self.routines].members;
        let key = |m: usize| {
            (
                self.prop_self[m] + self.prop_child[m],
                self.ncalls[m] + self.self_calls[m],
            )
        };
        // gprof inserts each member after those with an equal key: a
        // stable descending sort.
        let mut sorted: Vec<usize> = members.clone();
        sorted.sort_by(|&a, &b| {
            let (ta, ca) = key(a);
            let (tb, cb) = key(b);
            if ta > tb || (ta == tb && ca > cb) {
                std::cmp::Ordering::Less
            } else if tb > ta || (tb == ta && cb > ca) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        });
        sorted
    }
}
