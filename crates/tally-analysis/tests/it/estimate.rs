//! Stacks estimated from arcs: exact totals on random executions (recursion
//! included), the true stacks where every function has one caller, and a
//! hand-checked split between two callers.

use proptest::prelude::*;
use std::collections::BTreeMap;
use tally_analysis::{
    Aggregate, EstimateOptions, StackTree, estimate_split, estimate_stacks, estimate_stacks_with,
};
use tally_model::{CallInfo, Events, FileId, Format, FunctionId, FunctionKey, Positions, Profile};

/// A random execution: a tree of activations, each of one function with a
/// self cost in two events.
#[derive(Clone, Debug)]
struct Node {
    function: usize,
    cost: [u64; 2],
    children: Vec<Node>,
}

fn tree(n: usize) -> impl Strategy<Value = Node> {
    let leaf = (0..n, 0u64..50, 0u64..9).prop_map(|(function, a, b)| Node {
        function,
        cost: [a, b],
        children: vec![],
    });
    leaf.prop_recursive(6, 80, 4, move |inner| {
        (0..n, 0u64..50, 0u64..9, prop::collection::vec(inner, 0..4)).prop_map(
            |(function, a, b, children)| Node {
                function,
                cost: [a, b],
                children,
            },
        )
    })
}

fn subtree(t: &Node) -> [u64; 2] {
    let mut c = t.cost;
    for k in &t.children {
        let s = subtree(k);
        c[0] += s[0];
        c[1] += s[1];
    }
    c
}

/// Renumbers functions so that each activation is its own function: then
/// every function has exactly one caller.
fn number(t: &mut Node, next: &mut usize) {
    t.function = *next;
    *next += 1;
    for c in &mut t.children {
        number(c, next);
    }
}

fn profile(root: &Node, n: usize) -> (Profile<u64>, Vec<FunctionId>) {
    let mut p = Profile::<u64>::new(
        Format::Callgrind,
        Events::new(["Ir", "Dr"]).unwrap(),
        Positions::LINE,
    );
    let file = p.names.file(b"t.c");
    let ids: Vec<FunctionId> = (0..n)
        .map(|i| {
            let name = p.names.symbol(format!("f{i}").as_bytes());
            p.names.function(FunctionKey {
                object: tally_model::ObjectId::NONE,
                file,
                name,
            })
        })
        .collect();
    p.add_part();
    record(root, &ids, file, &mut p);
    (p, ids)
}

/// Records the run as Valgrind would: self costs, and per call its count
/// and inclusive cost.
fn record(t: &Node, ids: &[FunctionId], file: FileId, p: &mut Profile<u64>) {
    let part = &mut p.parts[0];
    part.lines.push(ids[t.function], file, &[1], &t.cost);
    for c in &t.children {
        let info = CallInfo {
            caller: ids[t.function],
            site_file: file,
            callee: ids[c.function],
            count: 1,
            seq: 0,
        };
        part.calls.push(info, &[1], &[1], &subtree(c));
    }
    for c in &t.children {
        record(c, ids, file, p);
    }
}

fn true_stacks(t: &Node, path: &mut Vec<usize>, out: &mut BTreeMap<Vec<usize>, [u64; 2]>) {
    path.push(t.function);
    if t.cost != [0, 0] {
        let e = out.entry(path.clone()).or_default();
        e[0] += t.cost[0];
        e[1] += t.cost[1];
    }
    for c in &t.children {
        true_stacks(c, path, out);
    }
    path.pop();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn totals_are_exact_under_recursion(root in tree(6), coarse in any::<bool>()) {
        let (p, _) = profile(&root, 6);
        let options = EstimateOptions { min_share: if coarse { 0.05 } else { 0.0 } };
        let s = estimate_stacks_with(&p, options).unwrap();
        let total = subtree(&root);
        prop_assert_eq!(s.totals(2).unwrap(), total.to_vec());
        // Recursion is collapsed: no stack is deeper than the tree.
        for sample in &s.samples {
            prop_assert!(sample.frames.len() <= 7);
            prop_assert!(sample.costs.iter().any(|&c| c > 0));
        }
    }

    #[test]
    fn a_split_walk_gives_the_one_walk(
        root in tree(6),
        coarse in any::<bool>(),
        pieces in 2usize..6,
    ) {
        let (p, _) = profile(&root, 6);
        let options = EstimateOptions { min_share: if coarse { 0.05 } else { 0.0 } };
        let agg = Aggregate::new(&p, |_| true);
        let one = estimate_split(&agg, options, 1).unwrap();
        let split = estimate_split(&agg, options, pieces).unwrap();
        prop_assert_eq!(listed(&split), listed(&one));
    }

    #[test]
    fn one_caller_each_is_exact(mut root in tree(1)) {
        let mut n = 0;
        number(&mut root, &mut n);
        let (p, ids) = profile(&root, n);
        let s = estimate_stacks(&p).unwrap();
        let mut want = BTreeMap::new();
        true_stacks(&root, &mut Vec::new(), &mut want);
        let mut got = BTreeMap::new();
        for sample in &s.samples {
            let path: Vec<usize> = sample
                .frames
                .iter()
                .map(|f| {
                    let func = s.frames[f.index()].function;
                    ids.iter().position(|&x| x == func).unwrap()
                })
                .collect();
            got.insert(path, [sample.costs[0], sample.costs[1]]);
        }
        prop_assert_eq!(got, want);
    }
}

fn read(text: &str) -> Profile<u64> {
    let input = tally_formats::Input::from_bytes("t.callgrind", text.as_bytes().to_vec()).unwrap();
    tally_formats::callgrind::read::<u64>(input).unwrap().0
}

fn folded(p: &Profile<u64>) -> BTreeMap<String, Vec<u64>> {
    let s = estimate_stacks(p).unwrap();
    s.samples
        .iter()
        .map(|x| {
            let names: Vec<String> = x
                .frames
                .iter()
                .map(|f| {
                    String::from_utf8_lossy(p.names.function_name(s.frames[f.index()].function))
                        .into_owned()
                })
                .collect();
            (names.join(";"), x.costs.clone())
        })
        .collect()
}

/// `c` (self 10) is called by `a` for 3 and by `b` for 7: its cost splits
/// 3:7; a remainder goes to the larger remainder.
#[test]
fn two_callers_split_in_proportion() {
    let p = read(
        "events: Ir
fl=t.c
fn=main
1 1
cfn=a
calls=1 1
1 4
cfn=b
calls=1 1
1 8
fn=a
1 1
cfn=c
calls=1 1
1 3
fn=b
1 1
cfn=c
calls=1 1
1 7
fn=c
1 10
",
    );
    let got = folded(&p);
    let want: BTreeMap<String, Vec<u64>> = [
        ("main", 1),
        ("main;a", 1),
        ("main;b", 1),
        ("main;a;c", 3),
        ("main;b;c", 7),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), vec![v]))
    .collect();
    assert_eq!(got, want);
}

/// main → a ⇄ b → c: the cycle shows as its entry `a` and, above it, `b`;
/// the total is kept.
#[test]
fn a_cycle_is_collapsed() {
    let p = read(
        "events: Ir
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
",
    );
    let got = folded(&p);
    let want: BTreeMap<String, Vec<u64>> = [
        ("main", 10),
        ("main;a", 10),
        ("main;a;b", 14),
        ("main;a;b;c", 6),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), vec![v]))
    .collect();
    assert_eq!(got, want);
}

/// A tree's stacks as listed (in [`StackTree::ends`] order), frames by
/// function id.
fn listed(t: &StackTree) -> Vec<(Vec<u32>, Vec<u64>)> {
    let s = t.to_stacks();
    s.samples
        .iter()
        .map(|x| {
            let frames = x
                .frames
                .iter()
                .map(|f| s.frames[f.index()].function.0)
                .collect();
            (frames, x.costs.clone())
        })
        .collect()
}

/// Walked by threads over ranges of functions, the estimate is the one of
/// a single walk, stack for stack and in the same order, on real profiles
/// (threads, recursion, caller contexts) and a generated one large enough
/// for `estimate_tree` to use threads itself.
#[test]
fn split_walks_of_real_and_generated_profiles_are_the_one_walk() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/callgrind");
    let mut profiles = Vec::new();
    for f in [
        "workload.combo.out",
        "threads.jumps.out",
        "mutual.callers2.out",
        "mutual.combined.out",
    ] {
        let input = tally_formats::Input::open(&dir.join(f)).unwrap();
        profiles.push((
            f.to_owned(),
            tally_formats::callgrind::read::<u64>(input).unwrap().0,
        ));
    }
    let config = tally_gen::Config {
        seed: 3,
        size: 4 << 20,
        events: tally_gen::EventSet::Ir,
        compress: true,
        blocks: None,
        shape: Default::default(),
    };
    let mut text = Vec::new();
    tally_gen::generate(&config, &mut text).unwrap();
    let input = tally_formats::Input::from_bytes("gen.out", text).unwrap();
    profiles.push((
        "generated".to_owned(),
        tally_formats::callgrind::read::<u64>(input).unwrap().0,
    ));
    for (name, p) in &profiles {
        let agg = Aggregate::new(p, |_| true);
        assert!(agg.arcs.len() > 10, "{name}");
        for min_share in [0.0, 0.1 / 1200.0] {
            let options = EstimateOptions { min_share };
            let one = listed(&estimate_split(&agg, options, 1).unwrap());
            assert!(one.len() > 10, "{name}");
            for pieces in [2, 3, 7] {
                let split = listed(&estimate_split(&agg, options, pieces).unwrap());
                assert!(
                    split == one,
                    "{name}, {pieces} pieces, min_share {min_share}"
                );
            }
            let auto = listed(&tally_analysis::estimate_tree(&agg, options).unwrap());
            assert!(auto == one, "{name}, min_share {min_share}");
        }
    }
}
