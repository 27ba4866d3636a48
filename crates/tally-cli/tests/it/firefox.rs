//! `tally convert --to firefox`: Firefox Profiler's processed format from
//! a program recorded here (`tally record`, whole stacks), from a
//! perf.data file (timed samples) and from Callgrind files (stacks estimated from arcs,
//! one thread per part): the format's required structure, and weights
//! that add up to `tally annotate --json`'s totals, per thread where the
//! input has several; one event (`--event`); a difference's negative
//! weights; the file refused as input.

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use tally_testutil::recorder::serial;
use tally_testutil::{data, path_str, require, tally};

/// A recursion and two leaves, so that recorded stacks are several deep.
const PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noipa)) long spin(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noipa)) long leaf(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s + spin(n / 2); }
__attribute__((noipa)) long rec(int d, long n) { long s = spin(n / 8); if (d == 0) return s + leaf(n); return s + rec(d - 1, n); }
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 400;
  long t = 0;
  for (long i = 0; i < n; i++) { t += rec(3, 20000); t += spin(30000); }
  sink = t; printf("%ld\n", t);
  return 0;
}
"#;

/// Checks the processed format's required structure; returns per thread
/// its name, its weights' sum and its deepest stack.
fn check(doc: &Value) -> Vec<(String, i64, usize)> {
    let meta = &doc["meta"];
    assert!(meta["preprocessedProfileVersion"].is_number(), "{meta}");
    assert!(meta["version"].is_number() && meta["interval"].as_f64().unwrap() > 0.0);
    let categories = meta["categories"].as_array().expect("categories");
    assert!(!categories.is_empty());
    let mut out = Vec::new();
    for t in doc["threads"].as_array().expect("threads") {
        let strings = t["stringArray"].as_array().expect("stringArray");
        let len = |table: &str| t[table]["length"].as_u64().unwrap() as usize;
        let col = |table: &str, c: &str| {
            let v = t[table][c]
                .as_array()
                .unwrap_or_else(|| panic!("{table}.{c}"));
            assert_eq!(v.len(), len(table), "{table}.{c}");
            v.clone()
        };
        let in_range = |v: &Value, n: usize| {
            let i = v.as_u64().unwrap() as usize;
            assert!(i < n, "{i} of {n}");
            i
        };
        for f in col("funcTable", "name") {
            assert!(strings[in_range(&f, strings.len())].is_string());
        }
        let func = col("frameTable", "func");
        let (frame, prefix) = (col("stackTable", "frame"), col("stackTable", "prefix"));
        let weights = col("samples", "weight");
        assert_eq!(col("samples", "timeDeltas").len(), weights.len());
        let mut deepest = 0;
        for s in col("samples", "stack") {
            let mut at = Some(in_range(&s, len("stackTable")));
            let mut depth = 0;
            while let Some(i) = at {
                in_range(
                    &func[in_range(&frame[i], len("frameTable"))],
                    len("funcTable"),
                );
                depth += 1;
                at = prefix[i].as_u64().map(|p| in_range(&Value::from(p), i));
            }
            deepest = deepest.max(depth);
        }
        let sum = weights.iter().map(|w| w.as_i64().unwrap()).sum();
        out.push((t["name"].as_str().unwrap().to_string(), sum, deepest));
    }
    out
}

fn convert(dir: &Path, args: &[&str]) -> Value {
    let out = dir.join("out.json");
    let mut all = vec!["convert", "--to", "firefox", "-o", path_str(&out)];
    all.extend_from_slice(args);
    tally!().ok(&all);
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

/// `tally annotate --json`'s total of `event`.
fn total(inputs: &[&str], event: &str) -> i64 {
    let mut args = vec!["annotate", "--json"];
    args.extend_from_slice(inputs);
    let v: Value = serde_json::from_slice(&tally!().ok(&args).stdout).unwrap();
    v["totals"][event].as_i64().unwrap_or_else(|| panic!("{v}"))
}

#[test]
fn a_recorded_program_keeps_its_stacks_and_totals() {
    let _serial = serial();
    if !require(&["gcc"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let d = dir.path();
    std::fs::write(d.join("p.c"), PROGRAM).unwrap();
    let exe = d.join("p");
    let cc = Command::new("gcc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .args([path_str(&exe), path_str(&d.join("p.c"))])
        .status()
        .unwrap();
    assert!(cc.success());
    let rec = d.join("rec.pb.gz");
    tally!().ok(&["record", "-o", path_str(&rec), "--", path_str(&exe), "3000"]);
    let doc = convert(d, &[path_str(&rec)]);
    let threads = check(&doc);
    assert_eq!(threads.len(), 1, "{threads:?}");
    let event = tally!().ok(&["annotate", "--json", path_str(&rec)]).stdout;
    let v: Value = serde_json::from_slice(&event).unwrap();
    let event = v["events"][0].as_str().unwrap().to_string();
    assert_eq!(threads[0].1, total(&[path_str(&rec)], &event));
    // main → rec ×4 → leaf → spin.
    assert!(threads[0].2 >= 6, "{threads:?}");
    let product = doc["meta"]["product"].as_str().unwrap();
    assert!(!product.contains("estimated"), "{product}");

    // The perf.data fixture: recorded by `perf record -g`.
    let perf = data("stacks/stacks.perf.data");
    let doc = convert(d, &[path_str(&perf)]);
    let threads = check(&doc);
    assert_eq!(threads[0].1, total(&[path_str(&perf)], "cpu-clock"));
    assert!(threads[0].2 >= 3, "{threads:?}");
    // Its samples are timed: each at its time (a run of over 0.5 s at
    // 400 Hz), not one per distinct stack 1 ms apart.
    let samples = &doc["threads"][0]["samples"];
    let span: f64 = samples["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_f64().unwrap())
        .sum();
    let n = samples["length"].as_u64().unwrap();
    assert!(span > 500.0 && n > doc["threads"][0]["stackTable"]["length"].as_u64().unwrap());
}

#[test]
fn callgrind_parts_are_threads_of_estimated_stacks() {
    let dir = tally_testutil::temp_dir();
    let files: Vec<_> = (1..=4)
        .map(|i| data(&format!("callgrind/threads.threads.out-0{i}")))
        .collect();
    let files: Vec<&str> = files.iter().map(|f| path_str(f)).collect();
    let doc = convert(dir.path(), &files);
    let threads = check(&doc);
    assert_eq!(threads.len(), 4, "{threads:?}");
    for (file, (name, sum, _)) in files.iter().zip(&threads) {
        assert_eq!(*sum, total(&[file], "Ir"), "{file} {name}");
    }
    assert!(threads.iter().any(|t| t.2 >= 3), "{threads:?}");
    let product = doc["meta"]["product"].as_str().unwrap();
    assert!(
        product.contains("stacks estimated from call arcs"),
        "{product}"
    );
    // The first event unless `--event` names another.
    assert!(product.ends_with(", Ir"), "{product}");

    // (The stated `summary:` of this file's Ir is 2 above its cost lines,
    // which annotate's total follows: the other events are compared.)
    let cache = data("callgrind/mutual.cache.out");
    let cache = path_str(&cache);
    for (args, event) in [
        (vec!["--event", "Dr", cache], "Dr"),
        (vec!["--event", "Dw", cache], "Dw"),
    ] {
        let doc = convert(dir.path(), &args);
        assert_eq!(check(&doc)[0].1, total(&[cache], event), "{event}");
        let product = doc["meta"]["product"].as_str().unwrap();
        assert!(product.ends_with(&format!(", {event}")), "{product}");
    }
    let out = dir.path().join("x.json");
    let e = tally!().fails(&[
        "convert",
        "--to",
        "firefox",
        "--event",
        "Nope",
        cache,
        "-o",
        path_str(&out),
    ]);
    assert!(e.contains("Nope") && e.contains("Dr"), "{e}");
}

#[test]
fn a_difference_has_negative_weights_and_the_file_is_not_read_back() {
    let dir = tally_testutil::temp_dir();
    let d = dir.path();
    let diff = d.join("d.callgrind");
    let (a, b) = (
        data("callgrind/recursion.default.out"),
        data("callgrind/mutual.default.out"),
    );
    tally!().ok(&["diff", path_str(&a), path_str(&b), "-o", path_str(&diff)]);
    let doc = convert(d, &[path_str(&diff)]);
    let weights = doc["threads"][0]["samples"]["weight"].as_array().unwrap();
    assert!(weights.iter().any(|w| w.as_i64().unwrap() < 0));
    assert_eq!(check(&doc)[0].1, total(&[path_str(&diff)], "Ir"));

    // The name `*.firefox.json` picks the format; tally refuses to read it.
    let named = d.join("p.firefox.json");
    tally!().ok(&["convert", path_str(&b), "-o", path_str(&named)]);
    let doc: Value = serde_json::from_slice(&std::fs::read(&named).unwrap()).unwrap();
    check(&doc);
    let o = tally!().run(&["annotate", path_str(&named)]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("p.firefox.json") && e.contains("Firefox Profiler"),
        "{e}"
    );
}
