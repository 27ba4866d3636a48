//! `tally graph` against gprof2dot: the same nodes and edges, with the
//! same call counts and shares, for GNU gprof's report of a gmon.out (the
//! repo's fixture and a program compiled and run now) and for a Callgrind
//! profile of a program run now; Graphviz renders the DOT without
//! warnings, also at 2,000 nodes; bad input fails cleanly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use tally_testutil::{gprof2dot, path_str, require, text};

/// A program with a shared callee split between callers, self recursion
/// and a chain, so every kind of arc is there; `prog SCALE`.
const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static volatile unsigned long sink;
__attribute__((noinline)) unsigned long leaf(unsigned long x) {
    unsigned long s = x;
    for (int i = 0; i < 300; i++) s += (x * i) ^ (s >> 3);
    return s;
}
__attribute__((noinline)) unsigned long fib(int n) {
    return n < 2 ? leaf(n) : fib(n - 1) + fib(n - 2);
}
__attribute__((noinline)) unsigned long heavy(int n) {
    unsigned long s = 0;
    for (int i = 0; i < n; i++) s += leaf(i);
    return s;
}
__attribute__((noinline)) unsigned long light(int n) {
    unsigned long s = 0;
    for (int i = 0; i < n; i++) s += leaf(i + 7);
    return s;
}
__attribute__((noinline)) unsigned long both(int n) { return heavy(n) + light(n / 4); }
int main(int argc, char **argv) {
    int scale = argc > 1 ? atoi(argv[1]) : 1;
    for (int r = 0; r < scale; r++) {
        sink += both(20000);
        sink += heavy(10000);
        sink += fib(16);
    }
    printf("%lu\n", sink);
    return 0;
}
"#;

fn run(cmd: &mut Command) -> Vec<u8> {
    let o = cmd.output().expect("run");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn build(dir: &Path, flags: &[&str]) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("prog");
    run(Command::new("gcc")
        .args(flags)
        .args(["-g", "-O1", "-fno-inline", "-o"])
        .arg(&exe)
        .arg(&src));
    exe
}

/// gprof2dot's DOT of `input` (a file, or standard input with `stdin`).
fn gprof2dot_of(format: &str, file: Option<&Path>, stdin: &[u8], extra: &[&str]) -> String {
    use std::io::Write;
    let mut cmd = gprof2dot().expect("gprof2dot");
    cmd.args(["-f", format]).args(extra);
    if let Some(f) = file {
        cmd.arg(f);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("gprof2dot");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// One node as a DOT label shows it.
#[derive(Debug, Clone, PartialEq)]
struct Node {
    name: String,
    total: f64,
    selfp: f64,
    calls: u64,
}

/// One edge: the share it passes (if it shows one) and its calls.
#[derive(Debug, Clone, PartialEq)]
struct Edge {
    pct: Option<f64>,
    calls: u64,
}

/// A parsed DOT text: nodes by id, edges by ids, cluster members.
#[derive(Debug, Default)]
struct Dot {
    nodes: BTreeMap<String, Node>,
    edges: Vec<(String, String, Edge)>,
    clustered: BTreeSet<String>,
}

/// The value of `label="..."` in an attribute list, unescaped.
fn label(attrs: &str) -> Option<String> {
    let start = attrs.find("label=\"")? + 7;
    let mut out = String::new();
    let mut chars = attrs[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => match chars.next()? {
                'n' => out.push('\n'),
                c => out.push(c),
            },
            c => out.push(c),
        }
    }
    None
}

fn pct_of(s: &str) -> Option<f64> {
    s.split('%').next()?.trim_start_matches('(').parse().ok()
}

/// Parses gprof2dot's or tally's DOT. tally's labels start with the
/// name; gprof2dot's may start with the object, the name being the line
/// before the first share.
fn parse(dot: &str, tally: bool) -> Dot {
    let mut d = Dot::default();
    let mut in_cluster = false;
    for line in dot.lines().map(str::trim) {
        if line.starts_with("subgraph cluster") {
            in_cluster = true;
            continue;
        }
        if in_cluster && line == "}" {
            in_cluster = false;
            continue;
        }
        if in_cluster && line.ends_with(';') && !line.contains('=') {
            d.clustered.insert(line.trim_end_matches(';').to_owned());
            continue;
        }
        let Some(open) = line.find(" [") else {
            continue;
        };
        let (head, attrs) = line.split_at(open);
        if matches!(head, "graph" | "node" | "edge") {
            continue;
        }
        let Some(l) = label(attrs) else { continue };
        let lines: Vec<&str> = l.lines().collect();
        let calls = lines
            .iter()
            .find_map(|x| x.strip_suffix('×').and_then(|n| n.parse().ok()))
            .unwrap_or(0);
        let first_pct = lines
            .iter()
            .position(|x| x.starts_with(|c: char| c.is_ascii_digit()) && x.contains('%'));
        if let Some((a, b)) = head.split_once(" -> ") {
            d.edges.push((
                a.trim_matches('"').to_owned(),
                b.trim_matches('"').to_owned(),
                Edge {
                    pct: first_pct.and_then(|i| pct_of(lines[i])),
                    calls,
                },
            ));
        } else {
            let t = first_pct.expect("a node shows its total");
            let name = if tally { lines[0] } else { lines[t - 1] };
            let selfp = lines[t + 1..]
                .iter()
                .find_map(|x| x.starts_with('(').then(|| pct_of(x)).flatten())
                .expect("a node shows its self cost");
            d.nodes.insert(
                head.trim_matches('"').to_owned(),
                Node {
                    name: name.to_owned(),
                    total: pct_of(lines[t]).unwrap(),
                    selfp,
                    calls,
                },
            );
        }
    }
    d
}

/// Nodes keyed by name and calls (functions of one name, e.g. static
/// functions of two files, differ in their calls here), with whether they
/// are in a cycle; edges by those keys.
type Key = (String, u64);

/// Also returns the names of several nodes (Valgrind names two libc
/// functions `(below main)`; gprof2dot merges functions by name, tally
/// keeps them apart) and of their callers: those are not compared.
type Keyed = (
    BTreeMap<Key, (Node, bool)>,
    BTreeMap<(Key, Key), Edge>,
    BTreeSet<String>,
);

fn keyed(d: &Dot) -> Keyed {
    let mut nodes = BTreeMap::new();
    let mut by_id = BTreeMap::new();
    let mut dups = BTreeSet::new();
    for (id, n) in &d.nodes {
        let k = (n.name.clone(), n.calls);
        nodes.insert(k.clone(), (n.clone(), d.clustered.contains(id)));
        by_id.insert(id.clone(), k);
    }
    let names: Vec<&String> = d.nodes.values().map(|n| &n.name).collect();
    for n in &names {
        if names.iter().filter(|m| **m == *n).count() > 1 {
            dups.insert((*n).clone());
        }
    }
    // Their callers' totals in gprof2dot come from the merged node.
    let callers: Vec<String> = d
        .edges
        .iter()
        .filter(|(_, b, _)| dups.contains(&d.nodes[b].name))
        .map(|(a, _, _)| d.nodes[a].name.clone())
        .collect();
    dups.extend(callers);
    let mut edges = BTreeMap::new();
    for (a, b, e) in &d.edges {
        edges.insert((by_id[a].clone(), by_id[b].clone()), e.clone());
    }
    (nodes, edges, dups)
}

/// Compares tally's graph with gprof2dot's: the same nodes (but for
/// those within `tol` of the node threshold `nthres`, where rounding
/// decides), totals and self shares within `tol` (points), the same
/// calls; the same edges (likewise near `ethres`) with the same calls and
/// shares. Arcs inside cycles and the totals of cycle members are
/// estimates that gprof2dot makes its own way, so they are not compared.
fn compare(ours: &str, theirs: &str, nthres: f64, ethres: f64, tol: f64) {
    let (on, oe, dups) = keyed(&parse(ours, true));
    let (tn, te, _) = keyed(&parse(theirs, false));
    let near = |p: f64, t: f64| (p - t).abs() <= tol;
    let keep = |k: &Key, n: &Node| !near(n.total, nthres) && !dups.contains(&k.0);
    let onames: BTreeSet<&Key> = on.keys().filter(|k| keep(k, &on[*k].0)).collect();
    let tnames: BTreeSet<&Key> = tn.keys().filter(|k| keep(k, &tn[*k].0)).collect();
    assert_eq!(onames, tnames, "node sets differ");
    assert!(onames.len() >= 4, "too few nodes to compare: {onames:?}");
    for k in &onames {
        let ((o, cyc), (t, _)) = (&on[*k], &tn[*k]);
        let close =
            |a: f64, b: f64| (a - b).abs() <= tol + 0.01 * a.max(b) * (tol > 0.05) as u8 as f64;
        if !cyc {
            assert!(
                close(o.total, t.total),
                "{k:?} total: {} vs {}",
                o.total,
                t.total
            );
        }
        assert!(
            close(o.selfp, t.selfp),
            "{k:?} self: {} vs {}",
            o.selfp,
            t.selfp
        );
    }
    let in_cycle = |k: &Key| on.get(k).is_some_and(|n| n.1);
    let shown = |edges: &BTreeMap<(Key, Key), Edge>| -> BTreeSet<(Key, Key)> {
        edges
            .iter()
            .filter(|((a, b), e)| {
                onames.contains(a)
                    && onames.contains(b)
                    && !(in_cycle(a) && in_cycle(b))
                    && !e.pct.is_some_and(|p| near(p, ethres))
            })
            .map(|(k, _)| k.clone())
            .collect()
    };
    let (os, ts) = (shown(&oe), shown(&te));
    assert_eq!(os, ts, "edge sets differ");
    for k in &os {
        let (o, t) = (&oe[k], &te[k]);
        assert_eq!(o.calls, t.calls, "{k:?} calls");
        if let (Some(a), Some(b)) = (o.pct, t.pct) {
            assert!(
                (a - b).abs() <= tol + 0.01 * a.max(b) * (tol > 0.05) as u8 as f64,
                "{k:?}: {a} vs {b}"
            );
        }
    }
}

fn tally_graph(dir: &Path, args: &[&str]) -> String {
    let mut a = vec!["graph"];
    a.extend_from_slice(args);
    a.extend(["-o", "-"]);
    text(&tally_testutil::tally!().in_dir(dir).ok(&a).stdout)
}

/// gprof prints times to 0.01 s, from which gprof2dot computes its shares
/// (tally uses the samples): shares agree to that rounding.
const GMON_TOL: f64 = 0.35;

#[test]
fn gmon_fixture_agrees_with_gprof2dot() {
    if !require(&["gprof"]) || gprof2dot().is_none() {
        tally_testutil::skip("gprof2dot");
        return;
    }
    let dir = tally_testutil::data("gprof");
    for bin in ["multi.O0", "deep.O0", "cycles.O0"] {
        let gnu = run(Command::new("gprof")
            .current_dir(&dir)
            .args([bin, &format!("{bin}.gmon")]));
        let theirs = gprof2dot_of("prof", None, &gnu, &[]);
        let ours = tally_graph(&dir, &[&format!("{bin}.gmon"), "--binary", bin]);
        compare(&ours, &theirs, 0.5, 0.1, GMON_TOL);
    }
}

#[test]
fn gmon_of_a_program_run_now_agrees_with_gprof2dot() {
    if !require(&["gcc", "gprof"]) || gprof2dot().is_none() {
        tally_testutil::skip("gprof2dot");
        return;
    }
    let tmp = tally_testutil::temp_dir();
    let exe = build(tmp.path(), &["-pg"]);
    run(Command::new(&exe).current_dir(tmp.path()).arg("150"));
    let gnu = run(Command::new("gprof")
        .current_dir(tmp.path())
        .args(["prog", "gmon.out"]));
    for (n, e) in [("0.5", "0.1"), ("2", "1")] {
        let theirs = gprof2dot_of("prof", None, &gnu, &["-n", n, "-e", e]);
        let ours = tally_graph(
            tmp.path(),
            &["gmon.out", "--binary", "prog", "-n", n, "-e", e],
        );
        compare(
            &ours,
            &theirs,
            n.parse().unwrap(),
            e.parse().unwrap(),
            GMON_TOL,
        );
    }
}

/// A Callgrind profile of the program, run now.
fn callgrind_profile(dir: &Path) -> PathBuf {
    let exe = build(dir, &[]);
    let out = dir.join("callgrind.out");
    run(Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", path_str(&out)))
        .arg(&exe)
        .arg("1"));
    out
}

#[test]
fn callgrind_agrees_with_gprof2dot_and_tally_gprof() {
    if !require(&["gcc", "valgrind"]) || gprof2dot().is_none() {
        tally_testutil::skip("gprof2dot");
        return;
    }
    let tmp = tally_testutil::temp_dir();
    let out = callgrind_profile(tmp.path());
    let file = path_str(&out);
    for (n, e) in [("0.5", "0.1"), ("0", "0"), ("5", "2")] {
        let theirs = gprof2dot_of("callgrind", Some(&out), b"", &["-n", n, "-e", e]);
        let ours = tally_graph(tmp.path(), &[file, "-n", n, "-e", e]);
        // Both compute from exact counts: shares agree to the last digit
        // printed.
        compare(
            &ours,
            &theirs,
            n.parse().unwrap(),
            e.parse().unwrap(),
            0.0101,
        );
    }
    // The calls and self shares are `tally gprof`'s flat profile's.
    let ours = parse(&tally_graph(tmp.path(), &[file]), true);
    let flat = text(
        &tally_testutil::tally!()
            .in_dir(tmp.path())
            .ok(&["gprof", "-b", "-p", file])
            .stdout,
    );
    for name in ["leaf", "heavy", "light", "fib", "both"] {
        let node = ours.nodes.values().find(|n| n.name == name).expect(name);
        let row: Vec<&str> = flat
            .lines()
            .find(|l| l.split_whitespace().last() == Some(name))
            .expect(name)
            .split_whitespace()
            .collect();
        let share: f64 = row[0].parse().unwrap();
        assert!(
            (share - node.selfp).abs() <= 0.0051,
            "{name}: {share} vs {}",
            node.selfp
        );
        let calls: u64 = row[3].parse().unwrap();
        assert_eq!(calls, node.calls, "{name} calls");
    }
}

#[test]
fn cycles_are_groups_with_their_total() {
    let dir = tally_testutil::data("gprof");
    let dot = tally_graph(
        &dir,
        &[
            "cycles.O0.gmon",
            "--binary",
            "cycles.O0",
            "-n",
            "0",
            "-e",
            "0",
        ],
    );
    let d = parse(&dot, true);
    let names: BTreeSet<&str> = d
        .clustered
        .iter()
        .map(|id| d.nodes[id].name.as_str())
        .collect();
    for m in ["is_even", "is_odd", "tri_a", "tri_b", "tri_c"] {
        assert!(names.contains(m), "{m} not in a cycle: {names:?}");
    }
    assert!(!names.contains("fib"), "self recursion is not a cycle");
    // gprof's `<cycle 1 as a whole>` line gives the cycle's share.
    let gnu = std::fs::read_to_string(dir.join("cycles.O0.b.txt")).unwrap();
    for line in gnu
        .lines()
        .filter(|l| l.contains("as a whole>") && l.starts_with('['))
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let share: f64 = f[1].parse().unwrap();
        let n = line
            .split("<cycle ")
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        let label = dot
            .lines()
            .find(|l| l.contains(&format!("label=\"cycle {n}: ")))
            .unwrap_or_else(|| panic!("cycle {n} drawn"));
        let ours: f64 = label
            .split(": ")
            .nth(1)
            .unwrap()
            .split('%')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (ours - share).abs() <= 0.051,
            "cycle {n}: {ours} vs {share}"
        );
    }
}

#[test]
fn recursion_never_exceeds_the_whole() {
    let dir = tally_testutil::data("callgrind");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("mutual") || !name.ends_with(".out") {
            continue;
        }
        let dot = tally_graph(&dir, &[&name, "-n", "0", "-e", "0"]);
        let d = parse(&dot, true);
        assert!(!d.nodes.is_empty());
        for n in d.nodes.values() {
            assert!(
                n.total <= 100.0 && n.selfp <= n.total + 0.001,
                "{name}: {n:?}"
            );
        }
    }
}

/// Renders with Graphviz; returns its standard error.
fn render(dir: &Path, args: &[&str], out: &str) -> String {
    let mut a = vec!["graph"];
    a.extend_from_slice(args);
    a.extend(["-o", out]);
    let o = tally_testutil::tally!().in_dir(dir).ok(&a);
    let svg = std::fs::read_to_string(dir.join(out)).unwrap();
    assert!(svg.contains("<svg") && svg.contains("</svg>"), "{svg}");
    text(&o.stderr)
}

#[test]
fn dot_renders_without_warnings() {
    if !require(&["dot", "gcc", "valgrind"]) {
        return;
    }
    let tmp = tally_testutil::temp_dir();
    let out = callgrind_profile(tmp.path());
    let err = render(
        tmp.path(),
        &[path_str(&out), "-n", "0", "-e", "0"],
        "cg.svg",
    );
    assert_eq!(err, "", "dot said something");
    let gprof = tally_testutil::data("gprof");
    for (bin, svg) in [("cycles.O0", "cycles.svg"), ("demangle.O1", "cpp.svg")] {
        let err = render(
            &gprof,
            &[
                &format!("{bin}.gmon"),
                "--binary",
                &format!("{}/{bin}", gprof.display()),
                "-n",
                "0",
            ],
            &format!("{}/{svg}", tmp.path().display()),
        );
        assert_eq!(err, "", "dot said something about {bin}");
    }
}

/// Every function of a generated 8 MB profile (about 2,500) with the calls
/// passing at least 1 % (about 40): Graphviz's layout time grows with the
/// edges much more than with the nodes (BENCHMARKS.md), so the test keeps
/// them few.
#[test]
fn two_thousand_nodes_render() {
    if !require(&["dot"]) {
        return;
    }
    let tmp = tally_testutil::temp_dir();
    let profile = tmp.path().join("big.out");
    let generator = PathBuf::from(env!("CARGO_BIN_EXE_tally")).with_file_name("tally-gen");
    if !generator.exists() {
        // The generator is built with the workspace; when this test runs
        // alone, build it first, in the profile of the binary under test,
        // where `generator` looks for it.
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "tally-gen"]);
        if generator.parent().is_some_and(|d| d.ends_with("release")) {
            build.arg("--release");
        }
        run(&mut build);
    }
    run(Command::new(&generator)
        .args(["--size", "8M", "-o"])
        .arg(&profile));
    let dot = tally_graph(
        tmp.path(),
        &["big.out", "-n", "0", "-e", "1", "--max-nodes", "0"],
    );
    let d = parse(&dot, true);
    assert!(d.nodes.len() >= 2000, "{} nodes", d.nodes.len());
    let start = std::time::Instant::now();
    let err = render(
        tmp.path(),
        &["big.out", "-n", "0", "-e", "1", "--max-nodes", "0"],
        "big.svg",
    );
    eprintln!(
        "{} nodes, {} edges: tally graph + dot -Tsvg took {:.1?}",
        d.nodes.len(),
        d.edges.len(),
        start.elapsed()
    );
    assert_eq!(err, "", "dot said something");
}

fn fails(dir: &Path, args: &[&str], env: Option<(&str, &str)>) -> String {
    let mut a = vec!["graph"];
    a.extend_from_slice(args);
    let mut cmd = tally_testutil::tally!().in_dir(dir).command();
    cmd.args(&a);
    if let Some((k, v)) = env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{a:?}: {}", text(&o.stderr));
    assert!(o.stdout.is_empty());
    text(&o.stderr)
}

#[test]
fn bad_input_fails_clearly() {
    let dir = tally_testutil::data("callgrind");
    let tmp = tally_testutil::temp_dir();
    let f = path_str(&dir.join("workload.combo.out")).to_owned();
    let e = fails(tmp.path(), &[&f, "--event", "Nope", "-o", "-"], None);
    assert!(e.contains("unknown event `Nope`"), "{e}");
    let e = fails(tmp.path(), &[&f, "--root", "no_such_fn", "-o", "-"], None);
    assert!(
        e.contains("--root `no_such_fn`") && e.contains("no function"),
        "{e}"
    );
    let e = fails(tmp.path(), &[&f, "--around", "no_such_fn", "-o", "-"], None);
    assert!(e.contains("--around `no_such_fn`"), "{e}");
    // Truncated: cut inside a line, the reader names the file and line
    // and nothing is written; cut between lines, the graph is drawn with
    // the truncation warning every command gives.
    let bytes = std::fs::read(&f).unwrap();
    let cut = tmp.path().join("cut.out");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let r = tally_testutil::tally!()
        .in_dir(tmp.path())
        .command()
        .args(["graph", "cut.out", "-o", "x.dot"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&r.stderr);
    assert!(e.contains("cut.out") && !e.contains("panicked"), "{e}");
    if r.status.success() {
        assert!(e.contains("looks truncated"), "{e}");
        assert!(tmp.path().join("x.dot").exists());
    } else {
        assert!(e.contains("cut.out:"), "{e}");
        assert!(!tmp.path().join("x.dot").exists());
    }
    // No Graphviz: the message names the package.
    let e = fails(
        tmp.path(),
        &[&f, "-o", "x.svg"],
        Some(("TALLY_DOT", "/no/such/dot")),
    );
    assert!(e.contains("graphviz"), "{e}");
    assert!(!tmp.path().join("x.svg").exists());
}

#[test]
fn derived_events_and_focus() {
    let dir = tally_testutil::data("callgrind");
    let f = "workload.combo.out";
    let ir = parse(
        &tally_graph(&dir, &[f, "--event", "Ir", "-n", "0", "-e", "0"]),
        true,
    );
    let sum = parse(
        &tally_graph(&dir, &[f, "--event", "S=Ir+Ir", "-n", "0", "-e", "0"]),
        true,
    );
    // Twice every cost: the same shares.
    assert_eq!(ir.nodes, sum.nodes);
    let all = parse(&tally_graph(&dir, &[f, "-n", "0", "-e", "0"]), true);
    let main_root = parse(
        &tally_graph(&dir, &[f, "-n", "0", "-e", "0", "--root", "main"]),
        true,
    );
    let main_focus = parse(
        &tally_graph(&dir, &[f, "-n", "0", "-e", "0", "--around", "main"]),
        true,
    );
    let main_leaf = parse(
        &tally_graph(&dir, &[f, "-n", "0", "-e", "0", "--leaf", "main"]),
        true,
    );
    assert!(main_root.nodes.len() < all.nodes.len());
    assert!(main_root.nodes.len() < main_focus.nodes.len());
    assert!(main_leaf.nodes.len() < main_focus.nodes.len());
    assert_eq!(
        main_root.nodes.len() + main_leaf.nodes.len() - 1,
        main_focus.nodes.len(),
        "focus is callers and callees"
    );
}

/// The gmon fixture of a deep program, on which Graphviz's `dot` runs for
/// many minutes with its usual settings.
fn deep_args() -> [String; 4] {
    let d = tally_testutil::data("gprof");
    [
        path_str(&d.join("deep.O0.gmon")).to_string(),
        "--binary".into(),
        path_str(&d.join("deep.O0")).to_string(),
        "-o".into(),
    ]
}

/// A graph `dot` cannot lay out within its bound is laid out again with
/// fewer iterations, with a note, and the SVG is made.
#[test]
fn a_graph_dot_is_slow_on_is_laid_out_again() {
    if !require(&["dot"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("deep.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("graph")
        .args(deep_args())
        .arg(&out)
        .env("TALLY_DOT_TIMEOUT", "1")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("laid out again with fewer iterations"),
        "{err}"
    );
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg") && svg.contains("</svg>"));
    // A bound that is no number is said so, not ignored.
    let o = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("graph")
        .args(deep_args())
        .arg(dir.path().join("bad.svg"))
        .env("TALLY_DOT_TIMEOUT", "soon")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("TALLY_DOT_TIMEOUT: expected a positive number"));
}

/// The `f<node>` names of a DOT text's nodes, or of the node groups of
/// an SVG laid out by tally.
fn node_ids(text: &str, svg: bool) -> BTreeSet<String> {
    if svg {
        text.split("<g class=\"node\"><title>")
            .skip(1)
            .filter_map(|rest| rest.split_once("</title>").map(|x| x.0.to_string()))
            .collect()
    } else {
        text.lines()
            .filter_map(|l| {
                let (id, rest) = l.trim().split_once(' ')?;
                (id.starts_with('f') && rest.starts_with("[label=")).then(|| id.to_string())
            })
            .collect()
    }
}

/// A graph `dot` cannot lay out even with fewer iterations is laid out by
/// tally, with a note: the same nodes as the DOT output, every edge, and
/// each node's `<title>` as `dot` gives it (the web UI's clicks use it).
#[test]
fn a_graph_dot_cannot_lay_out_is_laid_out_by_tally() {
    if !require(&["dot"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let svg_path = dir.path().join("deep.svg");
    let o = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("graph")
        .args(deep_args())
        .arg(&svg_path)
        .env("TALLY_DOT_TIMEOUT", "0.001")
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("laid out by tally instead"), "{err}");
    let dot_path = dir.path().join("deep.dot");
    let o = Command::new(env!("CARGO_BIN_EXE_tally"))
        .arg("graph")
        .args(deep_args())
        .arg(&dot_path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let dot = std::fs::read_to_string(&dot_path).unwrap();
    let nodes = node_ids(&dot, false);
    assert!(nodes.len() > 50, "{nodes:?}");
    assert_eq!(node_ids(&svg, true), nodes);
    let d = parse(&dot, true);
    let arcs = d.edges.iter().filter(|(a, b, _)| a != b).count();
    assert_eq!(svg.matches("<g class=\"edge\">").count(), arcs);
}

/// `--max-nodes` keeps the heaviest functions and says how many it left
/// out; the DOT output keeps to it too.
#[test]
fn the_node_budget_keeps_the_heaviest() {
    let graph = |budget: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_tally"))
            .arg("graph")
            .args(deep_args())
            .args(["-", "-n", "0", "--max-nodes", budget])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        (parse(&text(&o.stdout), true), text(&o.stderr))
    };
    let (all, err) = graph("0");
    assert!(!err.contains("--max-nodes"), "{err}");
    assert!(all.nodes.len() > 7, "{}", all.nodes.len());
    let (seven, err) = graph("7");
    assert!(
        err.contains(&format!(
            "{} more functions above --node-thres left out to keep to --max-nodes 7",
            all.nodes.len() - 7
        )),
        "{err}"
    );
    assert_eq!(seven.nodes.len(), 7);
    // The seven kept are the heaviest: none left out is above any kept.
    let total = |n: &Node| n.total;
    let lightest = seven
        .nodes
        .values()
        .map(total)
        .fold(f64::INFINITY, f64::min);
    for (name, n) in &all.nodes {
        if !seven.nodes.contains_key(name) {
            assert!(total(n) <= lightest, "{name} left out");
        }
    }
    // Every edge kept joins two kept nodes.
    for (a, b, _) in &seven.edges {
        assert!(seven.nodes.contains_key(a) && seven.nodes.contains_key(b));
    }
}

/// The process ids whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut kids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let after = stat.rsplit_once(") ").map(|x| x.1).unwrap_or("");
        if after.split(' ').nth(1).and_then(|s| s.parse::<u32>().ok()) == Some(pid) {
            kids.push(p);
        }
    }
    kids
}

/// Whether process `pid` has ended (gone, or a zombie).
fn ended(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.rsplit_once(") ").is_some_and(|x| x.1.starts_with('Z'))
}

/// SIGINT or SIGTERM to tally while `dot` works ends both: no `dot` is
/// left running, adopted by init.
#[test]
fn no_dot_outlives_tally() {
    if !require(&["dot"]) {
        return;
    }
    for signal in ["INT", "TERM"] {
        let dir = tally_testutil::temp_dir();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
            .arg("graph")
            .args(deep_args())
            .arg(dir.path().join("deep.svg"))
            .env("TALLY_DOT_TIMEOUT", "600")
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait for tally to start dot.
        let mut dots = Vec::new();
        for _ in 0..1000 {
            dots = children_of(child.id());
            if !dots.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!dots.is_empty(), "tally started no dot");
        let kill = Command::new("kill")
            .args([format!("-{signal}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "SIG{signal}: tally ended with {status}");
        let gone = (0..500).all(|_| {
            if dots.iter().all(|&d| ended(d)) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            true
        });
        assert!(
            !gone,
            "SIG{signal}: dot {dots:?} still runs after tally ended"
        );
    }
}
