//! Transforms (`--focus`, `--ignore`, `--hide`, `--show-frames`,
//! `--focus-subtree`, `--collapse-recursion`, `--collapse-object`) and call
//! trees (`annotate --call-tree`).
//!
//! Where pprof has the transform, tally's numbers on tally's own pprof
//! export of a Go program's CPU profile equal `go tool pprof -top`'s with
//! the same flag. The others are checked against hand-worked stacks, and
//! the call trees against `annotate --inclusive=yes` and the self costs.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use tally_testutil::{data, path_str, require, text};

use crate::pprof::{go_profile, nonzero, pprof_top_with, tally_top_with};

fn tally(args: &[&str]) -> Vec<u8> {
    tally_testutil::tally!().ok(args).stdout
}

fn json(args: &[&str]) -> Value {
    serde_json::from_slice(&tally(args)).unwrap()
}

#[test]
fn pprof_transforms_give_go_tool_pprof_numbers() {
    if !require(&["go"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let profile = go_profile(dir.path());
    let export = dir.path().join("export.pb.gz");
    tally(&["convert", path_str(&profile), "-o", path_str(&export)]);
    let cases = [
        ("focus", "focus", "fib"),
        ("focus", "focus", "leaf"),
        ("ignore", "ignore", "fib"),
        ("ignore", "ignore", "busy|other"),
        ("hide", "hide", "fib"),
        ("hide", "hide", "sq"),
        ("show", "show-frames", "fib|leaf"),
        ("show", "show-frames", "main\\.(busy|other)"),
    ];
    for (index, event) in ["samples", "cpu"].into_iter().enumerate() {
        for (go_flag, flag, pattern) in cases {
            let (go, _) = pprof_top_with(&export, index, &[&format!("-{go_flag}={pattern}")]);
            assert!(!go.is_empty(), "-{go_flag}={pattern}: pprof shows nothing");
            let (mine, _) = tally_top_with(&export, event, &[&format!("--{flag}={pattern}")]);
            assert_eq!(
                nonzero(mine),
                go,
                "{event} --{flag}={pattern}: flat and cum per function"
            );
            // convert writes the transformed profile: pprof then shows
            // the same without a flag of its own.
            let out = dir.path().join("t.pb.gz");
            let flag = format!("--{flag}={pattern}");
            tally(&["convert", path_str(&export), &flag, "-o", path_str(&out)]);
            let (again, _) = pprof_top_with(&out, index, &[]);
            assert_eq!(again, go, "{event} convert {flag}");
        }
    }
}

/// Self and inclusive cost per function name of the first event.
fn rows(file: &Path, extra: &[&str]) -> BTreeMap<String, (i64, i64)> {
    let mut args = vec!["annotate", "--inclusive=yes", "--json", "--threshold=all"];
    args.push("--auto=no");
    args.extend(extra);
    args.push(path_str(file));
    let v = json(&args);
    let event = v["events"][0].as_str().unwrap().to_string();
    let mut out = BTreeMap::new();
    for f in v["functions_by_name"].as_array().unwrap() {
        let e = out
            .entry(f["function"].as_str().unwrap().to_string())
            .or_insert((0, 0));
        e.0 += f["self"][&event].as_i64().unwrap();
        e.1 += f["inclusive"][&event].as_i64().unwrap_or(0);
    }
    nonzero(out)
}

fn expect(pairs: &[(&str, i64, i64)]) -> BTreeMap<String, (i64, i64)> {
    pairs
        .iter()
        .map(|&(n, s, i)| (n.to_string(), (s, i)))
        .collect()
}

/// Folded stacks with a direct and an indirect recursion.
const FOLDED: &str = "main;a;b;a;c 10\nmain;a;b 5\nmain;d 3\nmain;a;a;a 7\n";

#[test]
fn collapse_recursion_and_focus_subtree_on_worked_stacks() {
    let dir = tally_testutil::temp_dir();
    let f = dir.path().join("rec.folded");
    std::fs::write(&f, FOLDED).unwrap();
    // a b a c → a c; a a a → a.
    assert_eq!(
        rows(&f, &["--collapse-recursion"]),
        expect(&[
            ("main", 0, 25),
            ("a", 7, 22),
            ("b", 5, 5),
            ("c", 10, 10),
            ("d", 3, 3)
        ])
    );
    // Only b's recursion: nothing to fold (b never recurs).
    assert_eq!(
        rows(&f, &["--collapse-recursion=^b$"]),
        rows(&f, &[]),
        "a pattern limits the folding to its functions"
    );
    // Every stack rooted at its first a; main;d dropped.
    assert_eq!(
        rows(&f, &["--focus-subtree=^a$"]),
        expect(&[("a", 7, 22), ("b", 5, 15), ("c", 10, 10)])
    );
    // Hiding a: its cost goes to its caller; its callees stay.
    assert_eq!(
        rows(&f, &["--hide=^a$"]),
        expect(&[("main", 7, 25), ("b", 5, 15), ("c", 10, 10), ("d", 3, 3)])
    );
    // The tables' JSON names what was applied, in order.
    let v = json(&[
        "annotate",
        "--json",
        "--hide=^a$",
        "--focus=^b$",
        path_str(&f),
    ]);
    assert_eq!(
        v["transforms"],
        serde_json::json!(["focus=^b$", "hide=^a$"])
    );
    let v = json(&["annotate", "--json", path_str(&f)]);
    assert_eq!(v["transforms"], serde_json::json!([]));
    // The same transform in the call tree, which names it.
    let v = json(&[
        "annotate",
        "--call-tree",
        "--json",
        "--collapse-recursion",
        path_str(&f),
    ]);
    assert_eq!(v["transforms"][0], "collapse-recursion=");
    let names: Vec<(u64, &str)> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["depth"].as_u64().unwrap(),
                n["function"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [(0, "main"), (1, "a"), (2, "c"), (2, "b"), (1, "d")],
        "{v}"
    );
}

#[test]
fn collapse_object_makes_one_frame_of_a_library() {
    let f = data("stacks/stacks.pb.gz");
    let before = rows(&f, &[]);
    let after = rows(&f, &["--collapse-object=kallsyms"]);
    let kernel: i64 = ["irqentry_exit_to_user_mode", "handle_softirqs"]
        .iter()
        .map(|n| before[*n].0)
        .sum();
    assert!(kernel > 0, "{before:?}");
    assert_eq!(after["[kernel.kallsyms]"].0, kernel, "{after:?}");
    assert!(!after.contains_key("handle_softirqs"), "{after:?}");
    assert_eq!(after["spin"], before["spin"], "frames outside stay");
}

#[test]
fn transforms_apply_to_estimated_stacks_of_call_arcs() {
    let f = data("callgrind/mutual.default.out");
    let plain = rows(&f, &[]);
    let focused = rows(&f, &["--focus=^cycle_a$"]);
    // The stacks through cycle_a cost its inclusive cost, and it is the
    // whole of what is left.
    assert_eq!(focused["cycle_a"].1, plain["cycle_a"].1, "{focused:?}");
    assert_eq!(focused["main"].1, plain["cycle_a"].1);
    assert!(!focused.contains_key("_dl_start"), "{focused:?}");
    let tree = json(&[
        "annotate",
        "--call-tree",
        "--json",
        "--focus=^cycle_a$",
        path_str(&f),
    ]);
    assert_eq!(tree["stacks"], "estimated from call arcs");
    assert_eq!(tree["totals"][0].as_i64().unwrap(), plain["cycle_a"].1);
}

/// `(depth, function, total)` of a call tree listed whole.
fn tree(file: &Path, kind: &str) -> Vec<(usize, String, i64)> {
    let v = json(&[
        "annotate",
        &format!("--call-tree={kind}"),
        "--depth=1000",
        "--min-share=0",
        "--json",
        path_str(file),
    ]);
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["depth"].as_u64().unwrap() as usize,
                n["function"].as_str().unwrap().to_string(),
                n["total"][0].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn call_trees_add_up_to_inclusive_and_self_costs() {
    for name in ["stacks/stacks.pb.gz", "stacks/stacks.folded"] {
        let f = data(name);
        let want = rows(&f, &[]);
        // Top-down: a function's outermost nodes add up to its inclusive
        // cost (a node below another of the same function is inside it).
        let mut inclusive: BTreeMap<String, i64> = BTreeMap::new();
        let mut path: Vec<String> = Vec::new();
        for (depth, function, total) in tree(&f, "top-down") {
            path.truncate(depth);
            if !path.contains(&function) {
                *inclusive.entry(function.clone()).or_default() += total;
            }
            path.push(function);
        }
        let expected: BTreeMap<String, i64> = want.iter().map(|(k, v)| (k.clone(), v.1)).collect();
        assert_eq!(inclusive, expected, "{name}: top-down totals");
        // Inverted: the first level is the self costs.
        let roots: BTreeMap<String, i64> = tree(&f, "inverted")
            .into_iter()
            .filter(|r| r.0 == 0)
            .map(|r| (r.1, r.2))
            .collect();
        let selfs: BTreeMap<String, i64> = want
            .iter()
            .filter(|(_, v)| v.0 != 0)
            .map(|(k, v)| (k.clone(), v.0))
            .collect();
        assert_eq!(roots, selfs, "{name}: inverted roots");
    }
}

#[test]
fn pictures_and_exports_take_the_same_flags() {
    let dir = tally_testutil::temp_dir();
    let f = dir.path().join("rec.folded");
    std::fs::write(&f, FOLDED).unwrap();
    let svg = dir.path().join("f.svg");
    tally(&["flame", path_str(&f), "--hide=^b$", "-o", path_str(&svg)]);
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("<title>c (") && !s.contains("<title>b ("), "{s}");
    let dot = text(&tally(&["graph", path_str(&f), "--focus=^d$", "-o", "-"]));
    assert!(
        dot.contains("\"d\"") || dot.contains(">d<") || dot.contains("d\\n"),
        "{dot}"
    );
    assert!(!dot.contains("label=\"c"), "{dot}");
    let out = dir.path().join("pq");
    tally(&[
        "export",
        "--to",
        "parquet",
        path_str(&f),
        "--ignore=^d$",
        "-o",
        path_str(&out),
    ]);
    let profiles = std::fs::read(out.join("profiles.parquet")).unwrap();
    let needle = b"tally.transforms";
    assert!(profiles.windows(needle.len()).any(|w| w == needle));
    let bad = tally_testutil::tally!().run(&["annotate", "--focus=(", path_str(&f)]);
    assert_eq!(bad.status.code(), Some(2), "a bad pattern is a usage error");
    assert!(
        text(&bad.stderr).contains("--focus"),
        "{}",
        text(&bad.stderr)
    );
}
