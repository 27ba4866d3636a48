//! Inclusive costs under recursion: a hand-checked mutual recursion, and a
//! property test on random executions whose true inclusive costs are known.

use proptest::prelude::*;
use tally_analysis::{Aggregate, CallKind, Inclusive};
use tally_model::{CallInfo, Events, FileId, Format, FunctionId, FunctionKey, Positions, Profile};

/// main calls a; a and b call each other; b calls the leaf c. The run:
/// main(10) → a(5) → b(7) → { c(3), a(5) → b(7) → c(3) }, 40 in all.
/// Each arc carries the cost of its calls including everything below, as
/// Valgrind records it: main→a 30, a→b 25+10, b→a 15, b→c 3+3.
const MUTUAL: &str = "\
events: Ir
fl=m.c
fn=main
1 10
cfn=a
calls=1 10
2 30
fn=a
10 10
cfn=b
calls=2 20
11 35
fn=b
20 14
cfn=a
calls=1 10
21 15
cfn=c
calls=2 30
22 6
fn=c
30 6
";

#[test]
fn hand_checked_mutual_recursion() {
    let input =
        tally_formats::Input::from_bytes("mutual.callgrind", MUTUAL.as_bytes().to_vec()).unwrap();
    let (p, _) = tally_formats::callgrind::read::<u64>(input).unwrap();
    let agg = Aggregate::new(&p, |_| true);
    let inc = Inclusive::new(&agg);
    let f = |name: &str| {
        p.names
            .functions()
            .find(|&(id, _)| p.names.function_name(id) == name.as_bytes())
            .unwrap()
            .0
    };
    assert_eq!(agg.totals, vec![40]);
    // main: a root, its self cost plus its call into the cycle.
    assert_eq!(inc.of(f("main")), Some(&[40u64][..]));
    assert_eq!(inc.of(f("c")), Some(&[6u64][..]));
    // a and b form cycle 1: self 10 + 14, plus the arcs leaving it (b→c 6).
    assert_eq!(inc.of(f("a")), None);
    assert_eq!(inc.of(f("b")), None);
    assert_eq!(inc.cycles.len(), 1);
    let cy = &inc.cycles[0];
    assert_eq!(cy.number, 1);
    assert_eq!(cy.self_cost, vec![24]);
    assert_eq!(cy.inclusive, vec![30]);
    assert_eq!(cy.calls_in, 1);
    assert_eq!(cy.calls_within, 3);
    // b has the larger self cost, so it is listed first.
    assert_eq!(cy.members, vec![f("b"), f("a")]);
    // callgrind_annotate would say a = 30 + 15 = 45 (112 %), b = 35.

    // Calls: into and out of the cycle exact, between members not.
    assert_eq!(inc.call_kind(f("main"), f("a")), CallKind::Exact);
    assert_eq!(inc.call_kind(f("b"), f("c")), CallKind::Exact);
    assert_eq!(inc.call_kind(f("a"), f("b")), CallKind::WithinCycle(1));
    assert_eq!(inc.call_kind(f("b"), f("a")), CallKind::WithinCycle(1));
    assert_eq!(inc.call_kind(f("c"), f("c")), CallKind::Recursive);
    assert_eq!(inc.call_cost(f("a"), f("b"), &[35u64]), None);
    assert_eq!(inc.call_cost(f("b"), f("c"), &[6u64]), Some(&[6u64][..]));
    // What the file measures for members: their entries from outside.
    assert_eq!(inc.entered(f("a")), Some((&[30u64][..], 1)));
    assert_eq!(inc.entered(f("b")), Some((&[0u64][..], 0)));
    assert_eq!(inc.entered(f("main")), None);
}

/// Callgrind's `--separate-recs` levels are functions of their own: `fib`
/// calling `fib'2` is exact, `fib'2` calling itself is recursive.
#[test]
fn recursion_levels() {
    let text = "\
events: Ir
fl=f.c
fn=main
1 1
cfn=fib
calls=1 2
2 20
fn=fib
2 3
cfn=fib'2
calls=2 3
3 17
fn=fib'2
3 17
cfn=fib'2
calls=4 3
3 12
";
    let input = tally_formats::Input::from_bytes("levels", text.as_bytes().to_vec()).unwrap();
    let (p, _) = tally_formats::callgrind::read::<u64>(input).unwrap();
    let agg = Aggregate::new(&p, |_| true);
    let inc = Inclusive::new(&agg);
    let f = |name: &str| {
        p.names
            .functions()
            .find(|&(id, _)| p.names.function_name(id) == name.as_bytes())
            .unwrap()
            .0
    };
    assert_eq!(inc.call_kind(f("main"), f("fib")), CallKind::Exact);
    assert_eq!(inc.call_kind(f("fib"), f("fib'2")), CallKind::Exact);
    assert_eq!(inc.call_kind(f("fib'2"), f("fib'2")), CallKind::Recursive);
    assert!(inc.cycles.is_empty());
    assert_eq!(inc.of(f("fib'2")), Some(&[17u64][..]));
}

/// The true cost of the calls into `m` from functions outside `set`.
fn true_entered(t: &Node, m: usize, set: &[usize]) -> u64 {
    t.children
        .iter()
        .map(|c| {
            let here = if c.function == m && !set.contains(&t.function) {
                subtree_cost(c)
            } else {
                0
            };
            here + true_entered(c, m, set)
        })
        .sum()
}

/// A random execution: a tree of activations, each of one of `n` functions
/// with a self cost.
#[derive(Clone, Debug)]
struct Node {
    function: usize,
    cost: u64,
    children: Vec<Node>,
}

fn tree(n: usize) -> impl Strategy<Value = Node> {
    let leaf = (0..n, 0u64..50).prop_map(|(function, cost)| Node {
        function,
        cost,
        children: vec![],
    });
    leaf.prop_recursive(6, 80, 4, move |inner| {
        (0..n, 0u64..50, prop::collection::vec(inner, 0..4)).prop_map(
            |(function, cost, children)| Node {
                function,
                cost,
                children,
            },
        )
    })
}

fn subtree_cost(t: &Node) -> u64 {
    t.cost + t.children.iter().map(subtree_cost).sum::<u64>()
}

/// Records the run as Valgrind would: self cost per function, and per
/// (caller, callee) the count and the inclusive cost of every call.
fn record(t: &Node, ids: &[FunctionId], file: FileId, p: &mut Profile<u64>) {
    let part = &mut p.parts[0];
    part.lines.push(ids[t.function], file, &[1], &[t.cost]);
    for c in &t.children {
        let info = CallInfo {
            caller: ids[t.function],
            site_file: file,
            callee: ids[c.function],
            count: 1,
            seq: 0,
        };
        part.calls.push(info, &[1], &[1], &[subtree_cost(c)]);
    }
    for c in &t.children {
        record(c, ids, file, p);
    }
}

/// The true inclusive cost of a set of functions: the cost of the subtrees
/// of its outermost activations.
fn true_inclusive(t: &Node, set: &[usize], inside: bool) -> u64 {
    let hit = set.contains(&t.function);
    if hit && !inside {
        return subtree_cost(t);
    }
    t.children
        .iter()
        .map(|c| true_inclusive(c, set, inside || hit))
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn inclusive_costs_are_exact_and_bounded(root in tree(6)) {
        let mut p = Profile::<u64>::new(Format::Callgrind, Events::new(["Ir"]).unwrap(), Positions::LINE);
        let file = p.names.file(b"t.c");
        let ids: Vec<FunctionId> = (0..6)
            .map(|i| {
                let name = p.names.symbol(format!("f{i}").as_bytes());
                p.names.function(FunctionKey { object: tally_model::ObjectId::NONE, file, name })
            })
            .collect();
        p.add_part();
        record(&root, &ids, file, &mut p);
        let total = subtree_cost(&root);
        let agg = Aggregate::new(&p, |_| true);
        let inc = Inclusive::new(&agg);
        prop_assert_eq!(agg.totals[0], total);
        for (i, &f) in ids.iter().enumerate() {
            if !agg.function_present[f.index()] {
                continue;
            }
            match inc.of(f) {
                Some(v) => {
                    prop_assert!(v[0] <= total);
                    prop_assert_eq!(v[0], true_inclusive(&root, &[i], false), "f{}", i);
                }
                None => prop_assert!(inc.cycle_of[f.index()].is_some()),
            }
        }
        for cy in &inc.cycles {
            prop_assert!(cy.inclusive[0] <= total);
            let members: Vec<usize> = cy.members.iter().map(|m| ids.iter().position(|x| x == m).unwrap()).collect();
            // Members' self costs plus the arcs that leave the cycle...
            let self_sum: u64 = cy.members.iter().map(|m| agg.function_self.get(m.index())[0]).sum();
            let leaving: u64 = agg.arcs.iter()
                .filter(|a| cy.members.contains(&a.caller) && !cy.members.contains(&a.callee))
                .map(|a| a.inclusive[0])
                .sum();
            prop_assert_eq!(cy.inclusive[0], self_sum + leaving);
            // ...which is the true cost of the cycle's outermost activations.
            prop_assert_eq!(cy.inclusive[0], true_inclusive(&root, &members, false));
            // Each member's entries from outside the cycle are exact.
            for (&m, &i) in cy.members.iter().zip(&members) {
                let (v, _) = inc.entered(m).unwrap();
                prop_assert_eq!(v[0], true_entered(&root, i, &members));
            }
        }
        // The calls each function shows: each within the total, and
        // together within the function's (or its cycle's) inclusive cost.
        let mut shown = vec![0u64; p.names.function_count()];
        for a in &agg.arcs {
            if let Some(v) = inc.call_cost(a.caller, a.callee, &a.inclusive) {
                prop_assert!(v[0] <= total);
                shown[a.caller.index()] += v[0];
            }
        }
        for &f in &ids {
            let bound = match inc.cycle_of[f.index()] {
                Some(n) => inc.cycles[n as usize - 1].inclusive[0],
                None => inc.function.get(f.index())[0],
            };
            prop_assert!(shown[f.index()] <= bound, "{:?}: {} > {}", f, shown[f.index()], bound);
        }
    }
}
