//! Whole stacks estimated from caller→callee arcs.
//!
//! Callgrind and gmon keep only arcs, so where a function's cost sat on the
//! stack can only be estimated. The estimate here is the usual one (gprof's
//! propagation, speedscope's Callgrind import): a function's self cost is
//! split across its callers in proportion to what each call arc cost (its
//! inclusive cost, per event), and each caller's share again across that
//! caller's callers, up to a root. A root is a function nobody calls (a
//! thread's first function, `(below main)`); a function that is called but
//! costs more than all calls to it (it was also entered without a call)
//! keeps the rest as a stack of its own beginning there.
//!
//! Recursion is collapsed, never unrolled: the walk runs on the call
//! graph's components ([`crate::Inclusive`]), so a self call adds no frame
//! and a cycle of mutually recursive functions shows each member at most
//! once in a stack: from the member it was entered by, the path through
//! the cycle to the member whose cost it is (or that made the call being
//! followed). That path is the likeliest one from the member entered, each
//! call weighed by its share of its callee's calls as the split weighs
//! callers, so the members that the cycle's work runs through, such as an
//! interpreter's loop that every call goes through, hold the members they
//! call, and their frames come close to their derived inclusive costs
//! ([`crate::Inclusive::shown`]) rather than to their self costs. The
//! calls inside a cycle carry no cost of their own, so nothing is counted
//! twice and the walk always ends.
//!
//! Callgrind's `--separate-callers=N` contexts (`f'g'h`) are functions of
//! their own with arcs between contexts, so the walk follows the stack the
//! file knows for those N levels and estimates only above them; the frames
//! keep the context names (a picture shows the part before the first `'`).
//!
//! Integer costs are split by largest remainder, so the estimated stacks
//! sum to the profile's totals exactly, event by event. Where every
//! function has a single caller the estimate is the true stack.
//!
//! The walk's time grows with the nodes of the stacks' tree, not with the
//! frames of every stack listed whole (which grow with the square of a
//! chain's depth): a run of functions with one caller each (or, for a
//! share too small to split, their heaviest callers) passes a share up
//! unchanged, so the walk crosses the run in one step, and where the run
//! from a function ends in the tree, under a given node, is found once and
//! remembered.

use crate::{Aggregate, Error};
use rustc_hash::FxHashMap;
use tally_model::{Frame, FrameId, FunctionId, Profile, Stacks};

/// How finely to split.
#[derive(Clone, Copy, Debug, Default)]
pub struct EstimateOptions {
    /// A share of a stack smaller than this fraction of the total (in every
    /// event) is no longer split across callers but follows the caller
    /// whose arc costs most. 0 splits everything; a picture that cannot
    /// show less than a pixel uses a small fraction, which bounds the
    /// number of stacks without changing any total.
    pub min_share: f64,
}

/// One way into a component: a call arc from another component, or the
/// component's own entry as a root.
#[derive(Clone, Debug)]
struct Way {
    /// `(caller, callee)`; `None` for the entry as a root.
    arc: Option<(FunctionId, FunctionId)>,
    /// Where its weights (the arc's inclusive cost, or the cost of the
    /// entry as a root; one value per event) begin in [`Walk::weights`]: one
    /// table rather than a vector per way, as there is a way per arc.
    weights: u32,
    count: u64,
}

/// Estimates the stacks of `profile` (all parts, every recorded event),
/// splitting everything: see the module documentation.
pub fn estimate_stacks(profile: &Profile<u64>) -> Result<Stacks<u64>, Error> {
    estimate_stacks_with(profile, EstimateOptions::default())
}

/// [`estimate_stacks`] with options.
pub fn estimate_stacks_with(
    profile: &Profile<u64>,
    options: EstimateOptions,
) -> Result<Stacks<u64>, Error> {
    estimate_from(&Aggregate::new(profile, |_| true), options)
}

/// The same from self costs and arcs already summed, so that a profile
/// can be drawn without storing its lines (an [`crate::AggregateBuilder`]
/// fed by the reader).
pub fn estimate_from(agg: &Aggregate<u64>, options: EstimateOptions) -> Result<Stacks<u64>, Error> {
    Ok(estimate_tree(agg, options)?.to_stacks())
}

/// The estimated stacks as a tree: what [`estimate_from`] returns, before
/// it is turned into a list of stacks.
///
/// A node is a stack (its parent's frames and one more function), so two
/// stacks with the same beginning share it and no stack is ever compared
/// frame by frame: a flame graph is drawn from the nodes directly.
#[derive(Clone, Debug)]
pub struct StackTree {
    /// Recorded events: each node's costs are this many values.
    pub events: usize,
    /// Number of functions of the profile (the frames of
    /// [`StackTree::to_stacks`], one per function, in id order).
    pub functions: usize,
    /// `(parent, function)` of every node but the root (node 0, the empty
    /// stack, stored as `(0, FunctionId(0))`). A parent comes before its
    /// children.
    pub nodes: Vec<(u32, FunctionId)>,
    /// The costs of the stacks that end at each node (not their callees'),
    /// `events` values per node.
    pub costs: Vec<u64>,
    /// The nodes at which some stack ends, in the order the estimate first
    /// reached them.
    pub ends: Vec<u32>,
    child: FxHashMap<(u32, FunctionId), u32>,
}

impl StackTree {
    pub(crate) fn new(events: usize, functions: usize) -> StackTree {
        StackTree {
            events,
            functions,
            nodes: vec![(0, FunctionId(0))],
            costs: vec![0; events],
            ends: Vec::new(),
            child: FxHashMap::default(),
        }
    }

    /// The node of function `f` called from node `at`, added if new.
    pub(crate) fn child_of(&mut self, at: u32, f: FunctionId) -> u32 {
        let next = self.nodes.len() as u32;
        let c = *self.child.entry((at, f)).or_insert(next);
        if c == next {
            self.nodes.push((at, f));
            self.costs.extend(std::iter::repeat_n(0, self.events));
        }
        c
    }

    /// Adds `costs` to the stacks ending at node `at`.
    pub(crate) fn add_at(&mut self, at: u32, costs: &[u64]) -> Result<(), Error> {
        let ev = self.events;
        let row = &mut self.costs[at as usize * ev..(at as usize + 1) * ev];
        if row.iter().all(|&c| c == 0) {
            self.ends.push(at);
        }
        for (a, &b) in row.iter().zip(costs) {
            a.checked_add(b).ok_or(Error::StacksOverflow)?;
        }
        for (a, &b) in row.iter_mut().zip(costs) {
            *a += b;
        }
        Ok(())
    }

    /// Adds the stacks of `later`, the estimate of functions after this
    /// tree's, as if its walk had gone on here: its nodes in order (a
    /// parent first), then its ends in the order it reached them. The
    /// sums are the same whatever the order, and a stack is new here
    /// exactly when a single walk would have reached it first in `later`'s
    /// functions, so the result is that walk's tree.
    fn append(&mut self, later: &StackTree) -> Result<(), Error> {
        let mut map = vec![0u32; later.nodes.len()];
        for (i, &(parent, f)) in later.nodes.iter().enumerate().skip(1) {
            map[i] = self.child_of(map[parent as usize], f);
        }
        for &end in &later.ends {
            self.add_at(map[end as usize], later.cost(end))?;
        }
        Ok(())
    }

    /// The costs of the stacks ending at `node`.
    pub fn cost(&self, node: u32) -> &[u64] {
        &self.costs[node as usize * self.events..(node as usize + 1) * self.events]
    }

    /// The stacks as a list: one frame per function (line and address 0),
    /// one sample per node where a stack ends, in [`StackTree::ends`]
    /// order.
    pub fn to_stacks(&self) -> Stacks<u64> {
        let mut stacks = Stacks::<u64>::default();
        for f in 0..self.functions {
            stacks.frame(Frame {
                function: FunctionId(f as u32),
                line: 0,
                address: 0,
            });
        }
        let mut frames = Vec::new();
        for &end in &self.ends {
            frames.clear();
            let mut at = end;
            while at != 0 {
                let (parent, f) = self.nodes[at as usize];
                frames.push(FrameId(f.0));
                at = parent;
            }
            frames.reverse();
            // Distinct stacks and sums already checked: nothing can fail.
            let _ = stacks.add(&frames, self.cost(end));
        }
        stacks
    }
}

/// The estimate itself, as a [`StackTree`]; [`estimate_from`] lists its
/// stacks.
///
/// On a large profile the walk is shared between threads: each walks the
/// stacks of a range of functions into a tree of its own, and the trees are
/// appended in function order, which gives the tree
/// (and the order of [`StackTree::ends`]) of one walk over all functions.
pub fn estimate_tree(agg: &Aggregate<u64>, options: EstimateOptions) -> Result<StackTree, Error> {
    // Below this many arcs the walk takes well under a millisecond: a
    // thread would cost more than it saves.
    if agg.arcs.len() < 4096 {
        return estimate_split(agg, options, 1);
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    estimate_split(agg, options, threads.min(MAX_THREADS) * PIECES_PER_THREAD)
}

/// More threads than this gain little: the walks are short and the trees'
/// appending is done by one.
const MAX_THREADS: usize = 4;

/// Pieces per thread: more and smaller pieces even out the threads' work
/// (a thread takes the next piece when it is done with one), fewer cost
/// less to append.
const PIECES_PER_THREAD: usize = 2;

/// [`estimate_tree`] with the functions cut into `pieces` ranges of about
/// equal work (1: one walk, no thread), walked by as many threads as the
/// machine has processors (at most 4), each taking the next range when
/// done with one. The result does not depend on `pieces` or the threads.
pub fn estimate_split(
    agg: &Aggregate<u64>,
    options: EstimateOptions,
    pieces: usize,
) -> Result<StackTree, Error> {
    let walk = Walk::new(agg, options);
    let cuts = walk.cuts(pieces.max(1));
    if cuts.len() <= 2 {
        return walk.run(0..walk.nf);
    }
    let ranges: Vec<std::ops::Range<usize>> = cuts.windows(2).map(|w| w[0]..w[1]).collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_THREADS)
        .min(ranges.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Vec<std::sync::Mutex<Option<Result<StackTree, Error>>>> =
        ranges.iter().map(|_| std::sync::Mutex::new(None)).collect();
    let work = || {
        loop {
            let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(range) = ranges.get(i) else { break };
            let tree = walk.run(range.clone());
            *done[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(tree);
        }
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(work);
        }
        work();
    });
    let mut trees = done.into_iter().map(|m| {
        m.into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .expect("every piece walked")
    });
    let mut tree = trees.next().expect("one piece at least")?;
    for t in trees {
        tree.append(&t?)?;
    }
    Ok(tree)
}

/// What the walk of every function needs, built once and shared by the
/// threads that walk.
struct Walk<'a> {
    agg: &'a Aggregate<u64>,
    options: EstimateOptions,
    /// Number of functions.
    nf: usize,
    /// Component of each function: itself, or `nf + cycle index`.
    node_of: Vec<u32>,
    /// The ways into each component.
    ways: Vec<Vec<Way>>,
    /// The ways' weights, [`Aggregate::events`] values per way.
    weights: Vec<u64>,
    /// The totals as floats, for [`EstimateOptions::min_share`].
    totals: Vec<f64>,
    /// The way of each component that takes a share too small to split
    /// (see [`heaviest`]); empty when every share is split.
    heavy_way: Vec<u32>,
    /// Where a share goes on from each function while it is split: the
    /// run of components with one caller above it.
    split_runs: Runs,
    /// The same for a share too small to split: the run of heaviest ways
    /// above it.
    small_runs: Runs,
    /// The paths that stacks take through cycles.
    paths: CyclePaths,
}

/// The paths through cycles that a cycle member's stacks take from the
/// member its cycle was entered by (see the module documentation).
struct CyclePaths {
    /// Per function: its index among its cycle's members, `u32::MAX`
    /// outside cycles.
    local: Vec<u32>,
    /// Per member entered (by a call from outside, or as a root): each
    /// member's caller on the likeliest path from it, by local index.
    trees: FxHashMap<FunctionId, Vec<FunctionId>>,
    /// Per cycle node entered without a call: the member taken as entered,
    /// the one whose self cost plus calls most exceeds the calls into it.
    roots: FxHashMap<u32, FunctionId>,
}

/// The calls between two members of a cycle, listed by caller, each with
/// its share of the callee's calls (of their first event's cost, or of
/// their count where that cost is 0).
type InsideCalls = FxHashMap<FunctionId, Vec<(FunctionId, f64)>>;

impl CyclePaths {
    /// The members from `entry` (first) to `to` (left out), root first,
    /// into `out`; empty when `to` is `entry`.
    fn path(&self, entry: FunctionId, to: FunctionId, out: &mut Vec<FunctionId>) {
        out.clear();
        if to == entry {
            return;
        }
        if let Some(tree) = self.trees.get(&entry) {
            let mut x = to;
            while x != entry {
                let up = tree[self.local[x.index()] as usize];
                if up == x {
                    // Not reached from `entry` (which cannot be, in a
                    // cycle): the entry alone.
                    out.clear();
                    break;
                }
                out.push(up);
                x = up;
            }
        }
        if out.is_empty() {
            out.push(entry);
        }
        out.reverse();
    }

    fn new(agg: &Aggregate<u64>, node_of: &[u32], ways: &[Vec<Way>]) -> CyclePaths {
        let nf = node_of.len();
        let mut local = vec![u32::MAX; nf];
        let mut members: FxHashMap<u32, Vec<FunctionId>> = FxHashMap::default();
        for f in 0..nf {
            if node_of[f] as usize >= nf {
                let list = members.entry(node_of[f]).or_default();
                local[f] = list.len() as u32;
                list.push(FunctionId(f as u32));
            }
        }
        let mut paths = CyclePaths {
            local,
            trees: FxHashMap::default(),
            roots: FxHashMap::default(),
        };
        if members.is_empty() {
            return paths;
        }
        let member = |f: usize| paths.local[f] != u32::MAX;
        let mut inside: FxHashMap<(FunctionId, FunctionId), (u64, u64)> = FxHashMap::default();
        // All calls into each member (from inside and outside): cost of
        // the first event, and count.
        let mut into: Vec<(u64, u64)> = vec![(0, 0); nf];
        let mut excess: Vec<i128> = (0..nf)
            .map(|f| agg.function_self.get(f).first().map_or(0, |&v| v as i128))
            .collect();
        for arc in &agg.arcs {
            let (a, b) = (arc.caller.index(), arc.callee.index());
            if a == b || a >= nf || b >= nf {
                continue;
            }
            let first = arc.inclusive.first().copied().unwrap_or(0);
            excess[a] += first as i128;
            excess[b] -= first as i128;
            if member(b) {
                into[b].0 = into[b].0.saturating_add(first);
                into[b].1 = into[b].1.saturating_add(arc.count);
            }
            if member(a) && node_of[a] == node_of[b] {
                let w = inside.entry((arc.caller, arc.callee)).or_default();
                w.0 = w.0.saturating_add(first);
                w.1 = w.1.saturating_add(arc.count);
            }
        }
        let mut calls: Vec<_> = inside.into_iter().collect();
        calls.sort_unstable_by_key(|&(key, _)| key);
        let mut out: InsideCalls = FxHashMap::default();
        for ((a, b), w) in calls {
            let all = into[b.index()];
            let share = if all.0 > 0 {
                w.0 as f64 / all.0 as f64
            } else if all.1 > 0 {
                w.1 as f64 / all.1 as f64
            } else {
                1.0
            };
            out.entry(a).or_default().push((b, share));
        }
        let mut nodes: Vec<u32> = members.keys().copied().collect();
        nodes.sort_unstable();
        for n in nodes {
            let list = &members[&n];
            let mut entries: Vec<FunctionId> = ways[n as usize]
                .iter()
                .filter_map(|w| w.arc.map(|(_, callee)| callee))
                .collect();
            if ways[n as usize].iter().any(|w| w.arc.is_none()) {
                let root = *list
                    .iter()
                    .max_by(|&&x, &&y| excess[x.index()].cmp(&excess[y.index()]).then(y.cmp(&x)))
                    .expect("a cycle has members");
                paths.roots.insert(n, root);
                entries.push(root);
            }
            entries.sort_unstable();
            entries.dedup();
            for e in entries {
                let tree = likeliest(e, list, &paths.local, &out);
                paths.trees.insert(e, tree);
            }
        }
        paths
    }
}

/// Each member's caller on the likeliest path from `entry` through its
/// cycle, by local index (`entry`'s own is itself). A call `u → v` is
/// taken with the share of `v`'s calls that `u` makes (what the split of
/// a share across callers gives it), so the likeliest path is the one
/// with the largest product of shares (the smallest sum of their negative
/// logarithms); of equal ones, the shortest.
fn likeliest(
    entry: FunctionId,
    members: &[FunctionId],
    local: &[u32],
    out: &InsideCalls,
) -> Vec<FunctionId> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // Non-negative finite floats order as their bits do.
    type Length = (u64, u32);
    let at = |f: FunctionId| local[f.index()] as usize;
    let mut parent: Vec<FunctionId> = members.to_vec();
    let mut best: Vec<Option<Length>> = vec![None; members.len()];
    let mut done = vec![false; members.len()];
    best[at(entry)] = Some((0, 0));
    let mut heap = BinaryHeap::new();
    heap.push(Reverse(((0u64, 0u32), entry)));
    while let Some(Reverse(((length, depth), u))) = heap.pop() {
        if std::mem::replace(&mut done[at(u)], true) {
            continue;
        }
        for &(v, share) in out.get(&u).map_or(&[][..], Vec::as_slice) {
            let step = -share.max(f64::MIN_POSITIVE).ln();
            let cand: Length = (
                (f64::from_bits(length) + step.max(0.0)).to_bits(),
                depth + 1,
            );
            if !done[at(v)] && best[at(v)].is_none_or(|b| cand < b) {
                best[at(v)] = Some(cand);
                parent[at(v)] = u;
                heap.push(Reverse((cand, v)));
            }
        }
    }
    parent
}

/// One step up from a function whose component passes a share whole to
/// one caller: the frames it adds, leaf first.
#[derive(Clone, Copy)]
struct Step {
    /// The function that made the call, the next top of the stack.
    caller: FunctionId,
    /// The callee named by the call when it is not the function stepped
    /// from (a cycle entered by another member): under `caller`, the path
    /// from it through the cycle ([`CyclePaths::path`]).
    callee: Option<FunctionId>,
}

/// Runs of steps: for each function, its step up (if its component passes
/// a share whole to one caller) and the function where the run of such
/// steps ends, so that a walk crosses a run of any length at once.
struct Runs {
    step: Vec<Option<Step>>,
    /// The function at the end of the run above each function that has a
    /// step (its own id otherwise).
    end: Vec<FunctionId>,
}

impl Runs {
    /// The runs of `step`. Steps go from a component to a caller's, up the
    /// graph of components, which has no cycle, so every run ends.
    fn new(step: Vec<Option<Step>>) -> Runs {
        let mut end: Vec<FunctionId> = (0..step.len() as u32).map(FunctionId).collect();
        let mut known = vec![false; step.len()];
        let mut path = Vec::new();
        for g in 0..step.len() {
            if known[g] || step[g].is_none() {
                continue;
            }
            path.clear();
            let mut x = g;
            let last = loop {
                path.push(x);
                let up = step[x].expect("a step").caller.index();
                if step[up].is_none() {
                    break FunctionId(up as u32);
                }
                if known[up] {
                    break end[up];
                }
                x = up;
            };
            for &p in &path {
                end[p] = last;
                known[p] = true;
            }
        }
        Runs { step, end }
    }
}

/// Chain entries of a walk (see [`Walk::run`]): a frame, or the frames of
/// the run of steps up from a function.
#[derive(Clone, Copy)]
enum Link {
    Frame(FunctionId),
    /// The run of [`Walk::split_runs`] (`small` false) or
    /// [`Walk::small_runs`] from this function, up to and including the
    /// function where it ends.
    Run {
        from: FunctionId,
        small: bool,
    },
}

impl<'a> Walk<'a> {
    fn new(agg: &'a Aggregate<u64>, options: EstimateOptions) -> Walk<'a> {
        let ev = agg.events;
        let nf = agg.function_self.len();
        // Components of the call graph (self calls and arcs naming unknown
        // functions left out): cycles become one node each; which number a
        // cycle gets does not matter, only which functions share it.
        let graph = crate::scc::Graph::from_edges(
            nf,
            agg.arcs
                .iter()
                .filter(|a| a.caller != a.callee && a.caller.index() < nf && a.callee.index() < nf)
                .map(|a| (a.caller.0, a.callee.0)),
        );
        let comps = crate::scc::strongly_connected(&graph);
        let mut cycle_node: Vec<u32> = vec![u32::MAX; comps.sizes.len()];
        let mut cycles = 0u32;
        let node_of: Vec<u32> = (0..nf)
            .map(|f| {
                let c = comps.component[f] as usize;
                if comps.sizes[c] < 2 {
                    return f as u32;
                }
                if cycle_node[c] == u32::MAX {
                    cycle_node[c] = (nf as u32) + cycles;
                    cycles += 1;
                }
                cycle_node[c]
            })
            .collect();
        let nodes = nf + cycles as usize;
        let node = |f: FunctionId| node_of[f.index()] as usize;
        let mut ways: Vec<Vec<Way>> = vec![Vec::new(); nodes];
        let mut weights: Vec<u64> = Vec::new();
        let mut own = vec![0u64; nodes * ev];
        for f in 0..nf {
            let n = node(FunctionId(f as u32));
            for (o, &s) in own[n * ev..(n + 1) * ev]
                .iter_mut()
                .zip(agg.function_self.get(f))
            {
                *o = o.saturating_add(s);
            }
        }
        // Arcs between components, summed over call-site files.
        let mut arc_index: FxHashMap<(FunctionId, FunctionId), (usize, usize)> =
            FxHashMap::default();
        for arc in &agg.arcs {
            if arc.caller.index() >= nf || arc.callee.index() >= nf {
                continue;
            }
            let (from, to) = (node(arc.caller), node(arc.callee));
            if from == to {
                continue;
            }
            for (o, &s) in own[from * ev..(from + 1) * ev]
                .iter_mut()
                .zip(&arc.inclusive)
            {
                *o = o.saturating_add(s);
            }
            let key = (arc.caller, arc.callee);
            let (n, i) = *arc_index.entry(key).or_insert_with(|| {
                ways[to].push(Way {
                    arc: Some(key),
                    weights: weights.len() as u32,
                    count: 0,
                });
                weights.extend(std::iter::repeat_n(0, ev));
                (to, ways[to].len() - 1)
            });
            let w = &mut ways[n][i];
            w.count = w.count.saturating_add(arc.count);
            let at = w.weights as usize;
            for (a, &b) in weights[at..at + ev].iter_mut().zip(&arc.inclusive) {
                *a = a.saturating_add(b);
            }
        }
        // Entry as a root: whatever a component costs beyond the calls to it.
        for (n, list) in ways.iter_mut().enumerate() {
            let own = &own[n * ev..(n + 1) * ev];
            let mut rest = own.to_vec();
            for w in list.iter() {
                let at = w.weights as usize;
                for (r, &x) in rest.iter_mut().zip(&weights[at..at + ev]) {
                    *r = r.saturating_sub(x);
                }
            }
            if list.is_empty() || rest.iter().any(|&r| r > 0) {
                list.push(Way {
                    arc: None,
                    weights: weights.len() as u32,
                    count: 0,
                });
                weights.extend_from_slice(&rest);
            }
        }
        let totals: Vec<f64> = agg.totals.iter().map(|&t| t as f64).collect();
        let heavy_way: Vec<u32> = if options.min_share > 0.0 {
            ways.iter()
                .map(|list| heaviest(list, &weights, ev) as u32)
                .collect()
        } else {
            Vec::new()
        };
        let step = |g: usize, way: &Way| {
            way.arc.map(|(caller, callee)| Step {
                caller,
                callee: (callee.index() != g).then_some(callee),
            })
        };
        let split_runs = Runs::new(
            (0..nf)
                .map(|g| match &ways[node_of[g] as usize][..] {
                    [one] => step(g, one),
                    _ => None,
                })
                .collect(),
        );
        let small_runs = Runs::new(if heavy_way.is_empty() {
            Vec::new()
        } else {
            (0..nf)
                .map(|g| {
                    let n = node_of[g] as usize;
                    step(g, &ways[n][heavy_way[n] as usize])
                })
                .collect()
        });
        let paths = CyclePaths::new(agg, &node_of, &ways);
        Walk {
            agg,
            options,
            nf,
            paths,
            node_of,
            ways,
            weights,
            totals,
            heavy_way,
            split_runs,
            small_runs,
        }
    }

    /// The tree node of the frames of the run up from `from` (root first:
    /// the run's end, then down to the caller of `from`'s component) added
    /// under node `at`. Each run from a function below a given node is
    /// followed once: `memo` keeps the node it reached, so that the runs of
    /// a chain's functions, each one step longer than the one before, cost
    /// one step each. `scratch` is two buffers: the run's functions still
    /// to add, and a path through a cycle.
    fn run_node(
        &self,
        tree: &mut StackTree,
        memo: &mut FxHashMap<(u32, FunctionId), u32>,
        scratch: (&mut Vec<FunctionId>, &mut Vec<FunctionId>),
        at: u32,
        from: FunctionId,
        small: bool,
    ) -> u32 {
        let runs = if small {
            &self.small_runs
        } else {
            &self.split_runs
        };
        let step = |x: FunctionId| runs.step[x.index()].expect("a function on a run has a step");
        let (pending, path) = scratch;
        pending.clear();
        let mut x = from;
        let mut node = at;
        loop {
            if let Some(&n) = memo.get(&(at, x)) {
                node = n;
                break;
            }
            pending.push(x);
            let up = step(x).caller;
            if runs.step[up.index()].is_none() {
                break;
            }
            x = up;
        }
        while let Some(x) = pending.pop() {
            let s = step(x);
            node = tree.child_of(node, s.caller);
            if let Some(callee) = s.callee {
                self.paths.path(callee, x, path);
                for &p in path.iter() {
                    node = tree.child_of(node, p);
                }
            }
            memo.insert((at, x), node);
        }
        node
    }

    fn node(&self, f: FunctionId) -> usize {
        self.node_of[f.index()] as usize
    }

    /// Where to cut the functions into `pieces` ranges of about equal
    /// work: `[0, .., nf]`. A function's walk is counted by the ways into
    /// its component (one for a root), as splitting there is what makes
    /// walks long.
    fn cuts(&self, pieces: usize) -> Vec<usize> {
        let weight = |f: usize| -> u64 {
            if self.agg.function_self.get(f).iter().all(|&a| a == 0) {
                0
            } else {
                1 + self.ways[self.node(FunctionId(f as u32))].len() as u64
            }
        };
        let total: u64 = (0..self.nf).map(weight).sum();
        let mut cuts = vec![0];
        let mut sum = 0u64;
        for f in 0..self.nf {
            let next = cuts.len() as u64;
            if next < pieces as u64 && sum >= total * next / pieces as u64 && f > 0 {
                cuts.push(f);
            }
            sum += weight(f);
        }
        cuts.push(self.nf);
        cuts.dedup();
        cuts
    }

    /// The stacks of the functions in `range`, as a tree.
    fn run(&self, range: std::ops::Range<usize>) -> Result<StackTree, Error> {
        let agg = self.agg;
        let ev = agg.events;
        let nf = self.nf;
        let ways = &self.ways;
        let options = self.options;
        let totals = &self.totals;
        let small = |amount: &[u64]| {
            options.min_share > 0.0
                && amount
                    .iter()
                    .zip(totals)
                    .all(|(&a, &t)| (a as f64) < options.min_share * t)
        };

        let mut tree = StackTree::new(ev, nf);
        // The stacks being followed are leaf-first chains in `chain`: an
        // entry is (the entry below it, a frame or a run of them), so a
        // caller is pushed in constant time and, read from the top down, a
        // chain is its stack root first.
        let mut chain: Vec<(u32, Link)> = Vec::new();
        // Work: (top function, chain entry of the top, amount at `amounts`'
        // end, ev values each, last in first out).
        let mut work: Vec<(FunctionId, u32)> = Vec::new();
        let mut amounts: Vec<u64> = Vec::new();
        let mut amount = vec![0u64; ev];
        let mut parts: Vec<u64> = Vec::new();
        let mut scratch = SplitScratch::default();
        let mut memo: [FxHashMap<(u32, FunctionId), u32>; 2] = Default::default();
        let mut pending: Vec<FunctionId> = Vec::new();
        let mut path: Vec<FunctionId> = Vec::new();
        for f in range {
            let own = agg.function_self.get(f);
            if own.iter().all(|&a| a == 0) {
                continue;
            }
            let f = FunctionId(f as u32);
            chain.clear();
            chain.push((u32::MAX, Link::Frame(f)));
            work.push((f, 0));
            amounts.extend_from_slice(own);
            while let Some((top, at)) = work.pop() {
                let from = amounts.len() - ev;
                amount.copy_from_slice(&amounts[from..]);
                let is_small = small(&amount);
                // A share that one caller takes whole (or that follows the
                // heaviest callers) crosses the run of such steps at once,
                // unchanged, as step by step.
                let runs = if is_small {
                    &self.small_runs
                } else {
                    &self.split_runs
                };
                if runs.step[top.index()].is_some() {
                    chain.push((
                        at,
                        Link::Run {
                            from: top,
                            small: is_small,
                        },
                    ));
                    work.push((runs.end[top.index()], chain.len() as u32 - 1));
                    continue;
                }
                amounts.truncate(from);
                let n = self.node(top);
                let list = &ways[n];
                let whole = is_small.then(|| self.heavy_way[n] as usize);
                split(
                    &amount,
                    list,
                    &self.weights,
                    whole,
                    &mut parts,
                    &mut scratch,
                );
                for (way, part) in list.iter().zip(parts.chunks_exact(ev)) {
                    if part.iter().all(|&a| a == 0) {
                        continue;
                    }
                    match way.arc {
                        None => {
                            // Root first: from the top entry down to the
                            // function whose cost this is.
                            let mut node = 0u32;
                            if let Some(&r) = self.paths.roots.get(&(n as u32)) {
                                self.paths.path(r, top, &mut path);
                                for &p in path.iter() {
                                    node = tree.child_of(node, p);
                                }
                            }
                            let mut i = at;
                            while let Some(&(below, link)) = chain.get(i as usize) {
                                node = match link {
                                    Link::Frame(f) => tree.child_of(node, f),
                                    Link::Run { from, small } => self.run_node(
                                        &mut tree,
                                        &mut memo[small as usize],
                                        (&mut pending, &mut path),
                                        node,
                                        from,
                                        small,
                                    ),
                                };
                                i = below;
                            }
                            tree.add_at(node, part)?;
                        }
                        Some((caller, callee)) => {
                            let mut top_at = at;
                            self.paths.path(callee, top, &mut path);
                            for &p in path.iter().rev() {
                                chain.push((top_at, Link::Frame(p)));
                                top_at = chain.len() as u32 - 1;
                            }
                            chain.push((top_at, Link::Frame(caller)));
                            work.push((caller, chain.len() as u32 - 1));
                            amounts.extend_from_slice(part);
                        }
                    }
                }
            }
        }
        Ok(tree)
    }
}

/// The way whose arc costs most (then is called most, then comes first):
/// the one that takes a share too small to split.
fn heaviest(ways: &[Way], weights: &[u64], ev: usize) -> usize {
    let of = |w: &Way| &weights[w.weights as usize..w.weights as usize + ev];
    (0..ways.len())
        .max_by(|&a, &b| {
            let (x, y) = (&ways[a], &ways[b]);
            of(x).cmp(of(y)).then(x.count.cmp(&y.count)).then(b.cmp(&a))
        })
        .unwrap_or(0)
}

/// Buffers [`split`] reuses.
#[derive(Default)]
struct SplitScratch {
    weight: Vec<u128>,
    rem: Vec<(u128, usize)>,
}

/// Splits `amount` across `ways` in proportion to their weights, event by
/// event, by largest remainder; into `out`, `amount.len()` values per way.
/// When the weights of an event are all zero, the calls' counts decide,
/// and failing those the first way takes it. With `whole`, that way (the
/// heaviest) takes everything.
fn split(
    amount: &[u64],
    ways: &[Way],
    weights: &[u64],
    whole: Option<usize>,
    out: &mut Vec<u64>,
    sc: &mut SplitScratch,
) {
    let ev = amount.len();
    out.clear();
    out.resize(ways.len() * ev, 0);
    if ways.len() == 1 {
        out.copy_from_slice(amount);
        return;
    }
    if let Some(heaviest) = whole {
        out[heaviest * ev..(heaviest + 1) * ev].copy_from_slice(amount);
        return;
    }
    let (weight, rem) = (&mut sc.weight, &mut sc.rem);
    for e in 0..ev {
        let a = amount[e] as u128;
        if a == 0 {
            continue;
        }
        weight.clear();
        weight.extend(ways.iter().map(|w| weights[w.weights as usize + e] as u128));
        if weight.iter().all(|&w| w == 0) {
            weight.clear();
            weight.extend(ways.iter().map(|w| w.count as u128));
        }
        let sum: u128 = weight.iter().sum();
        if sum == 0 {
            out[e] = amount[e];
            continue;
        }
        rem.clear();
        let mut given = 0u128;
        for (i, &w) in weight.iter().enumerate() {
            let p = a * w;
            let q = p / sum;
            out[i * ev + e] = q as u64;
            given += q;
            rem.push((p % sum, i));
        }
        if a == given {
            continue;
        }
        // Largest remainders first; ties to the earlier way.
        rem.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, i) in rem.iter().take((a - given) as usize) {
            out[i * ev + e] += 1;
        }
    }
}
