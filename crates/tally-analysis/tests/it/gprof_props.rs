//! Properties of gprof's analysis (`tally_analysis::gprof`) on random call
//! graphs: propagation conserves time, the cycles are the strongly
//! connected components (checked against the independent Tarjan of
//! `tally_analysis::strongly_connected`), the fast cycle collapsing and arc orders give
//! exactly what GNU gprof's walks give (reference copies below), and deep
//! chains and huge cycles neither overflow the stack nor take quadratic
//! time.

use std::collections::BTreeSet;

use proptest::prelude::*;
use tally_analysis::gprof::{AssembleOptions, CallGraph, Graph, assemble, depth_first};
use tally_analysis::{Digraph, strongly_connected};

/// A random call graph: `n` routines, arcs `(parent, child, count)` (a
/// pair may repeat: counts add up), a self time per routine.
#[derive(Debug, Clone)]
struct Case {
    n: usize,
    arcs: Vec<(usize, usize, u64)>,
    time: Vec<f64>,
}

fn case(max_n: usize, max_arcs: usize) -> impl Strategy<Value = Case> {
    (1..=max_n).prop_flat_map(move |n| {
        (
            prop::collection::vec((0..n, 0..n, 1u64..1000), 0..=max_arcs),
            prop::collection::vec(1u32..100_000, n),
        )
            .prop_map(move |(arcs, t)| Case {
                n,
                arcs,
                time: t.into_iter().map(f64::from).collect(),
            })
    })
}

/// The graph as the CLI builds it: every arc's count into the callee's
/// calls, then the arc.
fn graph(c: &Case) -> Graph {
    let mut g = Graph::new(c.n);
    for &(p, ch, count) in &c.arcs {
        g.ncalls[ch] += count;
        g.add(p, ch, count);
    }
    g
}

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("f{i:05}")).collect()
}

fn analyse(c: &Case) -> CallGraph {
    let names = names(c.n);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    assemble(graph(c), &c.time, &refs, &AssembleOptions::default())
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0)
}

/// The strongly connected components of two or more routines, by Tarjan.
fn tarjan_cycles(c: &Case) -> BTreeSet<BTreeSet<usize>> {
    let g = Digraph::from_edges(
        c.n,
        c.arcs
            .iter()
            .filter(|a| a.0 != a.1)
            .map(|&(p, ch, _)| (p as u32, ch as u32)),
    );
    let comps = strongly_connected(&g);
    let mut sets = vec![BTreeSet::new(); comps.sizes.len()];
    for (node, &k) in comps.component.iter().enumerate() {
        sets[k as usize].insert(node);
    }
    sets.into_iter().filter(|s| s.len() >= 2).collect()
}

/// GNU gprof's `cg_dfn` as first transcribed (walking the stack and the
/// member chains at every cycle closed): the reference for the faster
/// `depth_first`.
mod reference {
    use tally_analysis::gprof::Graph;

    const NAN: i64 = 0;
    const BUSY: i64 = -1;

    pub struct Dfn<'g> {
        graph: &'g Graph,
        pub top: Vec<i64>,
        pub head: Vec<usize>,
        pub next: Vec<Option<usize>>,
        stack: Vec<usize>,
        counter: i64,
    }

    impl<'g> Dfn<'g> {
        pub fn run_all(graph: &'g Graph) -> Dfn<'g> {
            let n = graph.ncalls.len();
            let mut d = Dfn {
                graph,
                top: vec![NAN; n],
                head: (0..n).collect(),
                next: vec![None; n],
                stack: Vec::new(),
                counter: 0,
            };
            for r in 0..n {
                if d.top[r] == NAN {
                    d.run(r);
                }
            }
            d
        }

        fn run(&mut self, root: usize) {
            let mut frames: Vec<(usize, Vec<usize>, usize)> = Vec::new();
            if !self.enter(root) {
                return;
            }
            frames.push((root, self.graph.children_of(root).collect(), 0));
            while let Some((node, kids, pos)) = frames.last_mut() {
                if let Some(&a) = kids.get(*pos) {
                    *pos += 1;
                    let child = self.graph.arcs[a].child;
                    if self.enter(child) {
                        frames.push((child, self.graph.children_of(child).collect(), 0));
                    }
                } else {
                    let node = *node;
                    frames.pop();
                    if self.head[node] == node {
                        self.counter += 1;
                        let mut m = Some(node);
                        while let Some(x) = m {
                            self.top[x] = self.counter;
                            m = self.next[x];
                        }
                    }
                    self.stack.pop();
                }
            }
        }

        fn enter(&mut self, n: usize) -> bool {
            if self.top[n] != NAN && self.top[n] != BUSY {
                return false;
            }
            if self.top[n] != NAN {
                self.find_cycle(n);
                return false;
            }
            self.stack.push(n);
            self.top[n] = BUSY;
            true
        }

        fn find_cycle(&mut self, child: usize) {
            let mut top = self.stack.len();
            let mut head = child;
            while top > 0 {
                head = self.stack[top - 1];
                if child == head || (self.head[child] != child && self.head[child] == head) {
                    break;
                }
                top -= 1;
            }
            if top == 0 || top == self.stack.len() {
                return;
            }
            let mut tail = head;
            while let Some(n) = self.next[tail] {
                tail = n;
            }
            if self.head[head] != head {
                head = self.head[head];
            }
            for i in top..self.stack.len() {
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
        }
    }
}

/// gprof's `arc_compare`, from the public fields.
fn cmp_arc(cg: &CallGraph, l: usize, r: usize) -> i32 {
    let (la, ra) = (&cg.graph.arcs[l], &cg.graph.arcs[r]);
    if la.parent == la.child {
        return -1;
    }
    if ra.parent == ra.child {
        return 1;
    }
    let within = |p: usize, c: usize| cg.cycle[p] != 0 && cg.cycle[p] == cg.cycle[c];
    let cmp = |x: f64, y: f64| (x > y) as i32 - (x < y) as i32;
    match (within(la.parent, la.child), within(ra.parent, ra.child)) {
        (true, true) => cmp(la.count as f64, ra.count as f64),
        (true, false) => -1,
        (false, true) => 1,
        (false, false) => match cmp(la.time + la.child_time, ra.time + ra.child_time) {
            0 => cmp(la.count as f64, ra.count as f64),
            c => c,
        },
    }
}

/// gprof's insertion sorts (`sort_parents`, `sort_children`,
/// `sort_members`), quadratic but the definition of the orders.
fn reference_parents(cg: &CallGraph, r: usize) -> Vec<usize> {
    let mut sorted: Vec<usize> = Vec::new();
    for a in cg.graph.parents_of(r) {
        let pos = sorted
            .iter()
            .position(|&e| cmp_arc(cg, a, e) != 1)
            .unwrap_or(sorted.len());
        sorted.insert(pos, a);
    }
    sorted
}

fn reference_children(cg: &CallGraph, r: usize) -> Vec<usize> {
    let mut sorted: Vec<usize> = Vec::new();
    for a in cg.graph.children_of(r) {
        let pos = sorted
            .iter()
            .position(|&e| cmp_arc(cg, a, e) != -1)
            .unwrap_or(sorted.len());
        sorted.insert(pos, a);
    }
    sorted
}

fn reference_members(cg: &CallGraph, c: usize) -> Vec<usize> {
    let key = |m: usize| {
        (
            cg.prop_self[m] + cg.prop_child[m],
            cg.ncalls[m] + cg.self_calls[m],
        )
    };
    let mut sorted: Vec<usize> = Vec::new();
    for &m in &cg.cycles[c - cg.routines].members {
        let (t, calls) = key(m);
        let pos = sorted
            .iter()
            .position(|&e| {
                let (et, ec) = key(e);
                t > et || (t == et && calls > ec)
            })
            .unwrap_or(sorted.len());
        sorted.insert(pos, m);
    }
    sorted
}

/// What the roots of the collapsed graph carry: routines outside cycles
/// that no other routine calls, and cycles that nothing outside them calls.
/// A cycle nobody calls gets no propagation fraction of its own in gprof
/// (`inherit_flags` sums it from callers outside the cycle; its members get
/// 1 each afterwards), so its entry shows no self time (`cycle_time`): its
/// time is counted on its members' lines, which are summed here instead.
fn at_roots(cg: &CallGraph) -> f64 {
    let n = cg.routines;
    let mut called = vec![false; n + cg.cycles.len()];
    for a in &cg.graph.arcs {
        let (p, c) = (cg.group(a.parent), cg.group(a.child));
        if p != c {
            called[c] = true;
        }
    }
    let mut sum = 0.0;
    for (r, &is_called) in called.iter().enumerate().take(n) {
        if cg.cycle[r] == 0 && !is_called {
            sum += cg.prop_self[r] + cg.prop_child[r];
        }
    }
    for k in &cg.cycles {
        if !called[cg.cycle_node(k.number)] {
            sum += k
                .members
                .iter()
                .map(|&m| cg.prop_self[m] + cg.prop_child[m])
                .sum::<f64>();
        }
    }
    sum
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// A graph made whole from its records has the arcs, in the order,
    /// with the counts, that adding them one by one gives, and each
    /// record's arc is the one `add` returned for it; arcs added after
    /// find their pair as in a graph built by `add`.
    #[test]
    fn graph_from_records_is_graph_added_to(c in case(40, 200)) {
        let mut added = Graph::new(c.n);
        let want: Vec<usize> = (c.arcs.iter()).map(|&(p, ch, k)| added.add(p, ch, k)).collect();
        let (mut made, got) = Graph::from_arcs(c.n, &c.arcs);
        prop_assert_eq!(&got, &want);
        let ends = |g: &Graph| -> Vec<(usize, usize, u64)> {
            g.arcs.iter().map(|a| (a.parent, a.child, a.count)).collect()
        };
        prop_assert_eq!(ends(&made), ends(&added));
        for &(p, ch, _) in c.arcs.iter().take(5) {
            prop_assert_eq!(made.find(p, ch), added.find(p, ch));
            prop_assert_eq!(made.add(ch, p, 1), added.add(ch, p, 1));
        }
    }

    /// Every routine's time reaches the roots exactly once: a callee's
    /// self + children is split among its callers by calls / total calls,
    /// and those fractions add up to 1.
    #[test]
    fn propagation_conserves_time(c in case(30, 80)) {
        let cg = analyse(&c);
        let total: f64 = c.time.iter().sum();
        let at_roots = at_roots(&cg);
        prop_assert!(close(at_roots, total), "roots {at_roots} total {total}");
        prop_assert!(close(cg.print_time, total));
        // No entry exceeds the total.
        for node in 0..cg.prop_self.len() {
            prop_assert!(cg.prop_self[node] + cg.prop_child[node] <= total * (1.0 + 1e-9));
        }
    }

    /// Every routine's arc lists, asked for between additions (so that
    /// they are made, dropped and made again), hold its arcs newest first,
    /// and `add` returns the arc it added to.
    #[test]
    fn arc_lists_follow_additions(c in case(20, 60)) {
        let mut g = Graph::new(c.n);
        for (k, &(p, ch, count)) in c.arcs.iter().enumerate() {
            let a = g.add(p, ch, count);
            prop_assert_eq!((g.arcs[a].parent, g.arcs[a].child), (p, ch));
            if k % 3 == 0 {
                let mine: Vec<usize> = g.children_of(p).collect();
                let naive: Vec<usize> =
                    (0..g.arcs.len()).rev().filter(|&a| g.arcs[a].parent == p).collect();
                prop_assert_eq!(mine, naive);
            }
        }
        for r in 0..c.n {
            let children: Vec<usize> = g.children_of(r).collect();
            let parents: Vec<usize> = g.parents_of(r).collect();
            let arcs = 0..g.arcs.len();
            prop_assert_eq!(children, arcs.clone().rev().filter(|&a| g.arcs[a].parent == r).collect::<Vec<_>>());
            prop_assert_eq!(parents, arcs.rev().filter(|&a| g.arcs[a].child == r).collect::<Vec<_>>());
        }
    }

    /// A cycle called from outside carries its members' self time and
    /// what they pass on; one that nothing calls shows none (GNU gprof).
    #[test]
    fn cycle_entries_carry_their_members(c in case(30, 80)) {
        let cg = analyse(&c);
        for k in &cg.cycles {
            let node = cg.cycle_node(k.number);
            let own: f64 = k.members.iter().map(|&m| c.time[m]).sum();
            let passed: f64 = k.members.iter().map(|&m| cg.prop_child[m]).sum();
            prop_assert!(close(cg.prop_child[node], passed));
            if cg.ncalls[node] == 0 {
                prop_assert_eq!(cg.prop_self[node], 0.0);
            } else {
                prop_assert!(close(cg.prop_self[node], own));
            }
        }
    }

    /// gprof's cycles are the strongly connected components of two or
    /// more routines.
    #[test]
    fn cycles_are_the_strongly_connected_components(c in case(30, 80)) {
        let expected = tarjan_cycles(&c);
        let cg = analyse(&c);
        let got: BTreeSet<BTreeSet<usize>> = cg
            .cycles
            .iter()
            .map(|k| k.members.iter().copied().collect())
            .collect();
        prop_assert_eq!(&got, &expected);
        // depth_first's chains say the same.
        let (_, head, next) = depth_first(&graph(&c));
        let mut chains = BTreeSet::new();
        for r in 0..c.n {
            if head[r] == r && next[r].is_some() {
                let mut set = BTreeSet::new();
                let mut m = Some(r);
                while let Some(x) = m {
                    prop_assert_eq!(head[x], r);
                    set.insert(x);
                    m = next[x];
                }
                chains.insert(set);
            }
        }
        prop_assert_eq!(&chains, &expected);
        // Member cycle numbers agree with the cycle list.
        for k in &cg.cycles {
            for &m in &k.members {
                prop_assert_eq!(cg.cycle[m], k.number);
            }
        }
    }

    /// The faster cycle collapsing gives GNU gprof's numbering, heads and
    /// chains exactly.
    #[test]
    fn depth_first_matches_gnu_walk(c in case(40, 120)) {
        let g = graph(&c);
        let (top, head, next) = depth_first(&g);
        let r = reference::Dfn::run_all(&g);
        prop_assert_eq!(top, r.top);
        prop_assert_eq!(head, r.head);
        prop_assert_eq!(next, r.next);
    }

    /// The sorted arc and member lists are gprof's insertion orders.
    #[test]
    fn list_orders_match_gnu_insertion(c in case(20, 80)) {
        let cg = analyse(&c);
        for r in 0..cg.routines {
            prop_assert_eq!(cg.sorted_parents(r), reference_parents(&cg, r));
            prop_assert_eq!(cg.sorted_children(r), reference_children(&cg, r));
        }
        for k in cg.routines..cg.routines + cg.cycles.len() {
            prop_assert_eq!(cg.sorted_members(k), reference_members(&cg, k));
        }
    }
}

/// Small counts make many equal keys, so ties in the list orders are
/// exercised too.
#[test]
fn list_orders_match_with_ties() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = (2usize..12).prop_flat_map(|n| {
        (
            prop::collection::vec((0..n, 0..n, 1u64..3), 0..40),
            prop::collection::vec(1u32..3, n),
        )
            .prop_map(move |(arcs, t)| Case {
                n,
                arcs,
                time: t.into_iter().map(f64::from).collect(),
            })
    });
    runner
        .run(&strategy, |c| {
            let cg = analyse(&c);
            for r in 0..cg.routines {
                prop_assert_eq!(cg.sorted_parents(r), reference_parents(&cg, r));
                prop_assert_eq!(cg.sorted_children(r), reference_children(&cg, r));
            }
            for k in cg.routines..cg.routines + cg.cycles.len() {
                prop_assert_eq!(cg.sorted_members(k), reference_members(&cg, k));
            }
            Ok(())
        })
        .unwrap();
}

const DEEP: usize = 100_000;

fn deep_case(arcs: Vec<(usize, usize, u64)>) -> Case {
    Case {
        n: DEEP,
        arcs,
        time: vec![1.0; DEEP],
    }
}

/// 100,000 routines in a line: no recursion in the walk, and all the time
/// reaches the first one.
#[test]
fn deep_chain() {
    let c = deep_case((0..DEEP - 1).map(|i| (i, i + 1, 1)).collect());
    let cg = analyse(&c);
    assert!(cg.cycles.is_empty());
    assert!(close(cg.prop_self[0] + cg.prop_child[0], DEEP as f64));
    assert_eq!(cg.index[0], 1);
}

/// One cycle of 100,000 routines, entered from outside it.
#[test]
fn deep_cycle() {
    let mut arcs: Vec<(usize, usize, u64)> = (1..DEEP - 1).map(|i| (i, i + 1, 1)).collect();
    arcs.push((DEEP - 1, 1, 1));
    arcs.push((0, 1, 1));
    let c = deep_case(arcs);
    let cg = analyse(&c);
    assert_eq!(cg.cycles.len(), 1);
    assert_eq!(cg.cycles[0].members.len(), DEEP - 1);
    let node = cg.cycle_node(1);
    assert!(close(cg.prop_self[node], (DEEP - 1) as f64));
    assert!(close(cg.prop_self[0] + cg.prop_child[0], DEEP as f64));
    assert_eq!(cg.sorted_members(node).len(), DEEP - 1);
}

/// A line of 100,000 routines where every routine also calls back to the
/// first: GNU gprof's walk down the stack at every closed cycle would make
/// this quadratic (5·10⁹ steps); it must stay fast.
#[test]
fn deep_cycle_closed_at_every_level() {
    let mut arcs: Vec<(usize, usize, u64)> = (0..DEEP - 1).map(|i| (i, i + 1, 1)).collect();
    arcs.extend((1..DEEP).map(|i| (i, 0, 1)));
    let c = deep_case(arcs);
    let start = std::time::Instant::now();
    let cg = analyse(&c);
    assert_eq!(cg.cycles.len(), 1);
    assert_eq!(cg.cycles[0].members.len(), DEEP);
    assert!(start.elapsed().as_secs() < 20, "took {:?}", start.elapsed());
}
