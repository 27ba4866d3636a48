//! Profiles of whole stacks: a perf.data of a program compiled and run
//! under `perf record -g` here, against `perf report` (self costs through
//! a Callgrind file read by callgrind_annotate, and cumulative costs from
//! `tally annotate`, recursion counted once); `perf script` text and
//! folded stacks against the same run; bad input.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tally_testutil::{path_str, require, tally};

/// Self work at several depths, a self recursion (`rec`) and a mutual one
/// (`ping`/`pong`), whose functions the call graph alone can only show as
/// a cycle.
const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noinline)) long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noinline)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += i ^ (s << 1); return s + spin(n / 2); }
__attribute__((noinline)) long rec(int d, long n) { long s = spin(n / 8); if (d == 0) return s + leaf(n); return s + rec(d - 1, n); }
long pong(int d, long n);
__attribute__((noinline)) long ping(int d, long n) { long s = leaf(n / 4); return d ? s + pong(d - 1, n) : s; }
__attribute__((noinline)) long pong(int d, long n) { long s = spin(n / 4); return d ? s + ping(d - 1, n) : s; }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 400;
  long t = 0;
  for (long i = 0; i < n; i++) { t += rec(3, 20000); t += ping(4, 20000); t += spin(30000); }
  sink = t; printf("%ld\n", t); return 0;
}
"#;

fn run(cmd: &mut Command) -> Vec<u8> {
    let o = cmd.output().expect("run a tool");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// Compiles the program and records it; returns the perf.data path.
fn record(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("work.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("work");
    run(Command::new("gcc").args([
        "-O1",
        "-g",
        "-fno-omit-frame-pointer",
        "-o",
        path_str(&exe),
        path_str(&src),
    ]));
    let data = dir.join("perf.data");
    // cpu-clock is a software event: it samples where hardware counters
    // are not available (virtual machines, containers).
    run(Command::new("perf").args([
        "record",
        "-q",
        "-g",
        "-e",
        "cpu-clock",
        "-o",
        path_str(&data),
        path_str(&exe),
        "1500",
    ]));
    data
}

fn perf_report(data: &Path, args: &[&str]) -> String {
    let out = run(Command::new("perf")
        .args(["report", "-i", path_str(data), "--stdio", "-g", "none"])
        .args(["--percent-limit", "0"])
        .args(args));
    String::from_utf8_lossy(&out).into_owned()
}

/// `perf report` rows `VALUE [x] SYMBOL`, summed by symbol; symbols perf
/// could not name (`0x…`) are left out.
fn report_rows(text: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((value, rest)) = l.trim().split_once("  ") else {
            continue;
        };
        let Some(sym) = rest.trim().split_once("] ").map(|x| x.1.trim()) else {
            continue;
        };
        // An address perf could not name (`0x…`, or bare hex digits).
        let hex = sym.trim_start_matches("0x");
        if sym.starts_with("0x") || (hex.len() >= 8 && hex.bytes().all(|c| c.is_ascii_hexdigit())) {
            continue;
        }
        let v: f64 = value.trim().trim_end_matches('%').parse().unwrap();
        *m.entry(sym.to_string()).or_default() += v;
    }
    m
}

/// callgrind_annotate's `COUNT (PCT)  file:function [object]` rows, summed
/// by function.
fn annotate_rows(text: &str) -> BTreeMap<String, f64> {
    let mut m = BTreeMap::new();
    for l in text.lines() {
        let l = l.trim();
        let Some((count, rest)) = l.split_once(' ') else {
            continue;
        };
        let Ok(v) = count.replace(',', "").parse::<f64>() else {
            continue;
        };
        let Some(name) = rest.split_once(")  ").map(|x| x.1) else {
            continue;
        };
        let name = name.rsplit_once(" [").map_or(name, |x| x.0);
        if name.ends_with("PROGRAM TOTALS") {
            continue;
        }
        let function = name.split_once(':').map_or(name, |x| x.1);
        *m.entry(function.to_string()).or_default() += v;
    }
    m
}

#[test]
fn perf_data_agrees_with_perf_report() {
    if !require(&["gcc", "perf", "callgrind_annotate"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path());
    let t = tally!().in_dir(dir.path());

    // Enough samples for the comparison to mean something.
    let header = perf_report(&data, &["--no-children", "-F", "period,sym"]);
    let samples: u64 = header
        .lines()
        .find_map(|l| l.strip_prefix("# Samples: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("perf report names its samples");
    assert!(samples >= 300, "only {samples} samples");

    // Self cost: callgrind_annotate on the converted file, against perf
    // report's period per symbol.
    t.ok(&["convert", "perf.data", "-o", "perf.callgrind"]);
    let ca = run(Command::new("callgrind_annotate")
        .arg("--threshold=100")
        .arg(dir.path().join("perf.callgrind")));
    let ours = annotate_rows(&String::from_utf8_lossy(&ca));
    let perf = report_rows(&header);
    for f in ["spin", "leaf"] {
        assert!(perf.contains_key(f), "perf report lacks {f}: {perf:?}");
    }
    for (sym, v) in &perf {
        assert_eq!(
            ours.get(sym).copied().unwrap_or(0.0),
            *v,
            "self cost of {sym}: callgrind_annotate {ours:?}, perf report {perf:?}"
        );
    }

    // Cumulative cost: tally annotate --inclusive=yes against perf report
    // --children, to perf's two decimals.
    let json: Value = serde_json::from_slice(
        &t.ok(&[
            "annotate",
            "--inclusive=yes",
            "--threshold=100",
            "--json",
            "perf.data",
        ])
        .stdout,
    )
    .unwrap();
    let total = json["totals"]["cpu-clock"].as_f64().expect("a total");
    let mut inclusive: BTreeMap<String, f64> = BTreeMap::new();
    for f in json["functions"].as_array().expect("functions") {
        let name = f["function"].as_str().unwrap().to_string();
        let v = f["inclusive"]["cpu-clock"]
            .as_f64()
            .unwrap_or_else(|| panic!("no inclusive cost for {name}: {f}"));
        *inclusive.entry(name).or_default() += v;
    }
    let children = report_rows(&perf_report(
        &data,
        &["--children", "-F", "overhead_children,sym"],
    ));
    for f in ["main", "rec", "ping", "pong", "spin"] {
        assert!(children.contains_key(f), "perf report lacks {f}");
    }
    for (sym, pct) in &children {
        // perf and tally may pick different aliases of a library function
        // (`__GI___libc_write`, `write`); the program's own are compared.
        let Some(&v) = inclusive.get(sym) else {
            assert!(
                !["main", "rec", "ping", "pong", "spin", "leaf"].contains(&sym.as_str()),
                "tally lacks {sym}"
            );
            continue;
        };
        let ours = v * 100.0 / total;
        assert!(
            (ours - pct).abs() <= 0.005 + 1e-9,
            "cumulative cost of {sym}: tally {ours:.4}%, perf report {pct}%"
        );
    }
}

/// Folded stacks written from `perf script` text as stackcollapse-perf
/// writes them (frames root first by symbol, offsets dropped), with each
/// sample's period as its count.
fn collapse(script: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for block in script.split("\n\n") {
        let mut lines = block.lines().filter(|l| !l.trim().is_empty());
        let Some(header) = lines.next() else {
            continue;
        };
        let words: Vec<&str> = header.split_whitespace().collect();
        let period: u64 = words[words.len() - 2].parse().unwrap();
        let mut frames: Vec<&str> = lines
            .map(|l| {
                let sym = l.trim().split_once(' ').unwrap().1;
                let sym = sym.rsplit_once(" (").map_or(sym, |x| x.0);
                sym.rsplit_once("+0x").map_or(sym, |x| x.0)
            })
            .collect();
        frames.reverse();
        *out.entry(frames.join(";")).or_default() += period;
    }
    out
}

fn folded(text: &[u8]) -> BTreeMap<String, u64> {
    String::from_utf8_lossy(text)
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn perf_script_and_folded_stacks() {
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path());
    let t = tally!().in_dir(dir.path());
    let script = run(Command::new("perf").args(["script", "-i", path_str(&data)]));
    std::fs::write(dir.path().join("perf.txt"), &script).unwrap();

    // perf script text → folded equals the collapse of the same text.
    t.ok(&["convert", "perf.txt", "-o", "script.folded"]);
    let from_script = std::fs::read(dir.path().join("script.folded")).unwrap();
    assert_eq!(
        folded(&from_script),
        collapse(&String::from_utf8_lossy(&script))
    );

    // perf.data → folded: the same stacks where both name the frames.
    t.ok(&["convert", "perf.data", "--to", "folded", "-o", "data.out"]);
    let from_data = folded(&std::fs::read(dir.path().join("data.out")).unwrap());
    let ours_total: u64 = from_data.values().sum();
    let theirs_total: u64 = folded(&from_script).values().sum();
    assert_eq!(ours_total, theirs_total);
    // Every stack, the loader's too: code after an untyped label (its
    // entry, `_dl_start_user`) is named after the label, as perf names it.
    assert_eq!(from_data, folded(&from_script));

    // Folded round trip, and its annotate totals.
    t.ok(&["convert", "script.folded", "-o", "again.folded"]);
    assert_eq!(
        std::fs::read(dir.path().join("again.folded")).unwrap(),
        from_script
    );
    t.ok(&["check", "script.folded"]);
}

#[test]
fn bad_stack_input_is_named() {
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = record(dir.path());
    let t = tally!().in_dir(dir.path());
    let bytes = std::fs::read(&data).unwrap();
    let cut = bytes.len() / 2;
    std::fs::write(dir.path().join("cut.data"), &bytes[..cut]).unwrap();
    let e = t.fails(&["annotate", "cut.data"]);
    assert!(
        e.contains("cut.data: byte ") && e.contains("truncated"),
        "{e}"
    );
    let e = t.fails(&[
        "convert",
        "perf.data",
        "--event",
        "cycles",
        "-o",
        "x.folded",
    ]);
    assert!(
        e.contains("--event cycles") && e.contains("cpu-clock"),
        "{e}"
    );

    std::fs::write(dir.path().join("bad.folded"), "main;a 1\nmain;;b 2\n").unwrap();
    let e = t.fails(&["annotate", "bad.folded"]);
    assert!(e.contains("bad.folded:2: an empty frame"), "{e}");
    std::fs::write(
        dir.path().join("bad.perf"),
        "prog 1 2.5: 100 cpu-clock:\n\t1152 leaf+0x19 (/tmp/prog)\n\tnot a frame\n",
    )
    .unwrap();
    let e = t.fails(&["convert", "bad.perf", "-o", "x.callgrind"]);
    assert!(e.contains("bad.perf:3: expected a frame"), "{e}");
}

#[test]
fn callgrind_to_folded_estimates_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let t = tally!().in_dir(dir.path());
    let input = tally_testutil::data("callgrind/threads.threads.out-03");
    let out = t.ok(&["convert", path_str(&input), "-o", "est.folded"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("estimated"),
        "the user is told the stacks are estimated"
    );
    let stacks = folded(&std::fs::read(dir.path().join("est.folded")).unwrap());
    let json: Value =
        serde_json::from_slice(&t.ok(&["annotate", "--json", path_str(&input)]).stdout).unwrap();
    let event = json["events"][0].as_str().unwrap().to_string();
    let total = json["totals"][&event].as_u64().unwrap();
    assert_eq!(stacks.values().sum::<u64>(), total);
}

/// Two real `perf record -g` runs merged and diffed keep their stacks:
/// the merge's folded stacks are the two runs' summed, through folded and
/// through pprof; the merge minus one run gives the other run's stacks;
/// inputs with arcs only are refused for stack output.
#[test]
fn merge_and_diff_keep_real_stacks() {
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    record(&a);
    record(&b);
    let t = tally!().in_dir(dir.path());
    let read = |name: &str| folded(&std::fs::read(dir.path().join(name)).unwrap());
    t.ok(&["convert", "a/perf.data", "--to", "folded", "-o", "a.folded"]);
    t.ok(&["convert", "b/perf.data", "--to", "folded", "-o", "b.folded"]);
    let mut sum = read("a.folded");
    for (k, v) in read("b.folded") {
        *sum.entry(k).or_default() += v;
    }

    t.ok(&[
        "merge",
        "a/perf.data",
        "b/perf.data",
        "--to",
        "folded",
        "-o",
        "m.folded",
    ]);
    assert_eq!(read("m.folded"), sum, "merge --to folded");
    t.ok(&[
        "merge",
        "a/perf.data",
        "b/perf.data",
        "--to",
        "pprof",
        "-o",
        "m.pb.gz",
    ]);
    t.ok(&["convert", "m.pb.gz", "--to", "folded", "-o", "m2.folded"]);
    assert_eq!(read("m2.folded"), sum, "merge --to pprof");

    // (a + b) − a = b, stack by stack.
    t.ok(&["convert", "a/perf.data", "--to", "pprof", "-o", "a.pb.gz"]);
    t.ok(&[
        "diff", "a.pb.gz", "m.pb.gz", "--to", "folded", "-o", "d.folded",
    ]);
    assert_eq!(read("d.folded"), read("b.folded"), "diff --to folded");

    // Arcs only: a clear refusal, exit 1, nothing written.
    let cg = tally_testutil::data("callgrind/mutual.default.out");
    let e = t.fails(&["merge", path_str(&cg), "--to", "folded", "-o", "x.folded"]);
    assert!(e.contains("not whole stacks"), "{e}");
    assert!(!dir.path().join("x.folded").exists());
}
