//! perf.data recorded with `perf record --call-graph dwarf` (user
//! registers and stack copies, no user call chains) read by tally: its
//! stacks are unwound, and the inclusive shares agree with
//! `perf report --children` on the same file.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tally_testutil::recorder::serial;
use tally_testutil::{path_str, require, tally};

/// `main` → `top` → `mid` → `leaf`, and `main` → `leaf`, each with work
/// of its own: without the callers' frames every inclusive cost would be
/// the self cost.
const DEEP: &str = r#"#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noipa)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noipa)) long mid(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * 7) ^ (s >> 2); return s + leaf(2 * n); }
__attribute__((noipa)) long top(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * 3) ^ (s >> 1); return s + mid(n); }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200;
  long t = 0;
  for (long i = 0; i < n; i++) { t += top(100000); t += leaf(200000); }
  sink = t; printf("%ld\n", t);
  return 0;
}
"#;

const OURS: [&str; 4] = ["main", "top", "mid", "leaf"];

fn run(cmd: &mut Command) -> Vec<u8> {
    let o = cmd.output().expect("run a tool");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// `perf report --children`'s (children, self) percentages of the
/// program's functions in `data`.
fn perf_children(data: &Path) -> BTreeMap<String, (f64, f64)> {
    let out = run(Command::new("perf").args([
        "report",
        "--children",
        "--stdio",
        "-g",
        "none",
        "--percent-limit",
        "0",
        "-i",
        path_str(data),
    ]));
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out).lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        // children% self% comm dso [.] symbol
        if w.len() == 6 && w[4] == "[.]" && OURS.contains(&w[5]) {
            let pct = |s: &str| s.trim_end_matches('%').parse::<f64>().unwrap();
            m.insert(w[5].to_string(), (pct(w[0]), pct(w[1])));
        }
    }
    m
}

/// tally's (inclusive, self) shares in percent of the program's
/// functions in `data`.
fn tally_shares(dir: &Path, data: &str) -> BTreeMap<String, (f64, f64)> {
    let out = tally!().in_dir(dir).ok(&[
        "annotate",
        "--inclusive=yes",
        "--threshold=100",
        "--json",
        data,
    ]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let total: f64 = json["totals"]
        .as_object()
        .and_then(|t| t.values().next())
        .and_then(Value::as_f64)
        .expect("a total");
    let mut m = BTreeMap::new();
    for f in json["functions"].as_array().expect("functions") {
        let name = f["function"].as_str().unwrap();
        if OURS.contains(&name) {
            let share = |v: &Value| {
                100.0
                    * v.as_object()
                        .and_then(|o| o.values().next())
                        .and_then(Value::as_f64)
                        .unwrap_or(0.0)
                    / total
            };
            m.insert(
                name.to_string(),
                (share(&f["inclusive"]), share(&f["self"])),
            );
        }
    }
    m
}

#[test]
fn dwarf_stacks_of_perf_data_agree_with_perf_report_children() {
    let _serial = serial();
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("deep.c");
    std::fs::write(&src, DEEP).unwrap();
    let exe = d.join("deep");
    run(Command::new("gcc").args([
        "-O2",
        "-fomit-frame-pointer",
        "-g",
        "-o",
        path_str(&exe),
        path_str(&src),
    ]));
    let data = d.join("x.data");
    run(Command::new("perf").args([
        "record",
        "-q",
        "--call-graph",
        "dwarf",
        "-o",
        path_str(&data),
        path_str(&exe),
        "600",
    ]));
    let perf = perf_children(&data);
    let ours = tally_shares(d, "x.data");
    assert_eq!(
        perf.keys().collect::<Vec<_>>(),
        ours.keys().collect::<Vec<_>>(),
        "perf {perf:?}, tally {ours:?}"
    );
    for (name, &(children, own)) in &perf {
        let (incl, self_) = ours[name];
        assert!(
            (incl - children).abs() <= 3.0 && (self_ - own).abs() <= 3.0,
            "{name}: tally {incl:.2} % inclusive, {self_:.2} % self; perf {children:.2} % children, {own:.2} % self"
        );
    }
    // The callers are there: `top`'s inclusive cost holds `mid`'s and
    // `leaf`'s work under it, and `main` holds nearly everything.
    let (top_incl, top_self) = ours["top"];
    assert!(top_incl > top_self + 20.0, "top: {ours:?}");
    assert!(ours["main"].0 > 90.0, "main: {ours:?}");
}
