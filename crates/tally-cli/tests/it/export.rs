//! `tally export --to parquet`: the repo's real fixtures of every format
//! exported and read back with pyarrow, every row checked against the
//! profile as `tally convert --to json` gives it; and the fleet queries of
//! examples/fleet in DataFusion and Spark over an export of Callgrind runs
//! of a program compiled here, against `tally merge` and `tally diff`.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::{path_str as s, temp_dir as tmp};

fn ok(args: &[&str]) -> std::process::Output {
    tally_testutil::tally!().ok(args)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every table of an export as rows (JSON objects), through pyarrow.
fn read_back(dir: &Path) -> BTreeMap<String, Vec<Value>> {
    let script = r#"
import json, sys, pyarrow.parquet as pq
out = {}
for t in ("costs", "functions", "arcs", "profiles"):
    f = pq.ParquetFile(f"{sys.argv[1]}/{t}.parquet")
    meta = f.schema_arrow.metadata
    assert meta[b"tally.schema"] == b"1" and meta[b"tally.table"] == t.encode(), meta
    rows = f.read().to_pylist()
    for r in rows:
        r["labels"] = dict(r["labels"])
    out[t] = rows
json.dump(out, sys.stdout)
"#;
    let o = Command::new("python3")
        .args(["-c", script, s(dir)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A profile as tally's JSON (docs/json.md).
fn json_of(input: &[&str], dir: &Path) -> Value {
    let out = dir.join("profile.json");
    let mut args = vec!["convert"];
    args.extend_from_slice(input);
    args.extend_from_slice(&["-o", s(&out)]);
    ok(&args);
    serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap()
}

type CostRow = (
    i64,
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    String,
);

/// The costs rows a profile's JSON implies: lines summed per part and
/// place, zero costs left out.
fn expected_costs(p: &Value) -> BTreeMap<CostRow, i64> {
    let events: Vec<String> = p["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap().to_string())
        .collect();
    let positions: Vec<&str> = p["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let at = |n: &str| positions.iter().position(|p| *p == n);
    let (line_at, instr_at) = (at("line"), at("instr"));
    let functions = p["functions"].as_array().unwrap();
    let mut out = BTreeMap::new();
    for (pi, part) in p["parts"].as_array().unwrap().iter().enumerate() {
        for f in part["functions"].as_array().unwrap() {
            let func = &functions[f["function"].as_u64().unwrap() as usize];
            for l in f["lines"].as_array().unwrap() {
                let pos = l["positions"].as_array().unwrap();
                let get = |i: Option<usize>| i.map(|i| pos[i].as_u64().unwrap() as i64);
                for (e, c) in l["costs"].as_array().unwrap().iter().enumerate() {
                    let key = (
                        pi as i64 + 1,
                        func["object"].as_str().unwrap().to_string(),
                        l["file"].as_str().unwrap().to_string(),
                        func["name"].as_str().unwrap().to_string(),
                        get(line_at),
                        get(instr_at),
                        events[e].clone(),
                    );
                    *out.entry(key).or_insert(0) += c.as_i64().unwrap();
                }
            }
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

fn str_of(v: &Value) -> String {
    v.as_str()
        .unwrap_or_else(|| panic!("not a string: {v}"))
        .to_string()
}

/// The costs rows as exported.
fn exported_costs(rows: &[Value], id: &str) -> BTreeMap<CostRow, i64> {
    let mut out = BTreeMap::new();
    for r in rows.iter().filter(|r| r["profile_id"] == id) {
        let key = (
            r["part"].as_i64().unwrap(),
            str_of(&r["object"]),
            str_of(&r["file"]),
            str_of(&r["function"]),
            r["line"].as_i64(),
            r["address"].as_i64(),
            str_of(&r["event"]),
        );
        let old = out.insert(key.clone(), r["value"].as_i64().unwrap());
        assert!(old.is_none(), "{key:?} exported twice");
    }
    out
}

/// (object, file, function, event) → self cost, from a profile's JSON.
fn function_self(p: &Value) -> BTreeMap<(String, String, String, String), i64> {
    let events: Vec<String> = p["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| str_of(&e["name"]))
        .collect();
    let functions = p["functions"].as_array().unwrap();
    let mut out = BTreeMap::new();
    for part in p["parts"].as_array().unwrap() {
        for f in part["functions"].as_array().unwrap() {
            let func = &functions[f["function"].as_u64().unwrap() as usize];
            for (e, c) in f["self"].as_array().unwrap().iter().enumerate() {
                let key = (
                    str_of(&func["object"]),
                    str_of(&func["file"]),
                    str_of(&func["name"]),
                    events[e].clone(),
                );
                *out.entry(key).or_insert(0) += c.as_i64().unwrap();
            }
        }
    }
    out.retain(|_, v| *v != 0);
    out
}

/// Exports each input on its own and checks every row of every table
/// against the profile.
#[test]
fn fixtures_of_every_format_read_back_row_for_row() {
    if !tally_testutil::require_python(&["pyarrow"]) {
        return;
    }
    let d = tmp();
    let data = tally_testutil::data;
    // pprof and folded stacks made from a real Callgrind profile, by
    // tally's own writers.
    let pprof = d.path().join("mutual.pb.gz");
    let folded = d.path().join("mutual.folded");
    let mutual = data("callgrind/mutual.default.out");
    ok(&["convert", s(&mutual), "-o", s(&pprof)]);
    ok(&["convert", s(&mutual), "-o", s(&folded)]);
    let gmon_prog = data("gprof/cycles.O0");
    let dcpi_image = data("dcpi/real/workload");
    let cases: Vec<(Vec<PathBuf>, Option<PathBuf>, &str)> = vec![
        (vec![data("callgrind/inline.instr.out")], None, "callgrind"),
        (vec![data("callgrind/mutual.cache.out")], None, "callgrind"),
        (vec![data("callgrind/inline.jumps.out")], None, "callgrind"),
        (vec![data("cachegrind/workload.out")], None, "cachegrind"),
        (
            vec![data("cachegrind/workload.diff.out")],
            None,
            "cachegrind",
        ),
        (
            vec![data("gprof/cycles.O0.gmon")],
            Some(gmon_prog.clone()),
            "gmon",
        ),
        (
            vec![data("dcpi/real/workload.run1.dcpi")],
            Some(dcpi_image.clone()),
            "dcpi",
        ),
        (vec![pprof.clone()], None, "pprof"),
        (vec![folded.clone()], None, "folded"),
    ];
    for (inputs, binary, format) in &cases {
        let out = d.path().join("out");
        let mut args = vec!["export", "--to", "parquet", "-o", s(&out)];
        args.extend(inputs.iter().map(|p| s(p)));
        args.extend(["--label", "service=test", "--label", "version=1"]);
        if let Some(b) = binary {
            args.extend(["--binary", s(b)]);
        }
        ok(&args);
        let t = read_back(&out);
        let mut conv: Vec<&str> = inputs.iter().map(|p| s(p)).collect();
        if let Some(b) = binary {
            conv.extend(["--binary", s(b)]);
        }
        let p = json_of(&conv, d.path());
        let profiles = &t["profiles"];
        let id = str_of(&profiles[0]["profile_id"]);
        let what = format!("{} ({format})", inputs[0].display());
        // Profiles: one row per event, totals the self-cost sums.
        let events: Vec<String> = p["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| str_of(&e["name"]))
            .collect();
        assert_eq!(profiles.len(), events.len(), "{what}");
        for (e, row) in events.iter().zip(profiles) {
            assert_eq!(&str_of(&row["event"]), e, "{what}");
            assert_eq!(str_of(&row["format"]), *format, "{what}");
            let total: i64 = p["parts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|part| {
                    let i = events.iter().position(|x| x == e).unwrap();
                    part["self_totals"][i].as_i64().unwrap()
                })
                .sum();
            assert_eq!(row["total"].as_i64(), Some(total), "{what}: {e}");
            assert_eq!(row["creator"], p["creator"], "{what}");
            assert_eq!(
                row["labels"],
                serde_json::json!({"service": "test", "version": "1"})
            );
        }
        // Costs: every place of every part.
        let want = expected_costs(&p);
        assert!(!want.is_empty(), "{what}: no costs");
        assert_eq!(exported_costs(&t["costs"], &id), want, "{what}: costs");
        // Functions: self costs per function.
        let mut got = BTreeMap::new();
        for r in &t["functions"] {
            let v = r["self"].as_i64().unwrap();
            if v != 0 {
                got.insert(
                    (
                        str_of(&r["object"]),
                        str_of(&r["file"]),
                        str_of(&r["function"]),
                        str_of(&r["event"]),
                    ),
                    v,
                );
            }
            assert!(r["inclusive"].as_i64().unwrap() >= v.min(0), "{what}: {r}");
        }
        assert_eq!(got, function_self(&p), "{what}: functions");
        // Arcs: calls per (caller, callee) against the JSON's calls.
        check_arcs(&p, &t["arcs"], &what);
    }
    // Deterministic: the same inputs give the same bytes.
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    for o in [&a, &b] {
        ok(&[
            "export",
            "--to",
            "parquet",
            "-o",
            s(o),
            s(&data("callgrind/inline.instr.out")),
            s(&data("cachegrind/workload.out")),
        ]);
    }
    for t in ["costs", "functions", "arcs", "profiles"] {
        let f = format!("{t}.parquet");
        assert_eq!(
            std::fs::read(a.join(&f)).unwrap(),
            std::fs::read(b.join(&f)).unwrap(),
            "{f} differs between two runs"
        );
    }
}

/// Calls per part, caller and callee summed, as in the JSON.
fn check_arcs(p: &Value, rows: &[Value], what: &str) {
    let functions = p["functions"].as_array().unwrap();
    let first_event = str_of(&p["events"][0]["name"]);
    let mut want: BTreeMap<(i64, String, String), i64> = BTreeMap::new();
    for (pi, part) in p["parts"].as_array().unwrap().iter().enumerate() {
        for c in part["calls"].as_array().unwrap() {
            let name = |k: &str| str_of(&functions[c[k].as_u64().unwrap() as usize]["name"]);
            *want
                .entry((pi as i64 + 1, name("caller"), name("callee")))
                .or_insert(0) += c["count"].as_i64().unwrap();
        }
    }
    let mut got: BTreeMap<(i64, String, String), i64> = BTreeMap::new();
    for r in rows.iter().filter(|r| str_of(&r["event"]) == first_event) {
        *got.entry((
            r["part"].as_i64().unwrap(),
            str_of(&r["caller_function"]),
            str_of(&r["callee_function"]),
        ))
        .or_insert(0) += r["calls"].as_i64().unwrap();
    }
    assert_eq!(got, want, "{what}: arcs");
}

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
static volatile long sink;
__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n * WORK; i++) s += i % 7;
    return s;
}
__attribute__((noinline)) long fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
__attribute__((noinline)) long helper(long n) { return work(n) + fib((int)(n % 15)); }
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100;
    for (int k = 0; k < 3; k++) sink += helper(n + k);
    printf("%ld\n", sink);
    return 0;
}
"#;

/// Callgrind runs of the program built with `-DWORK=work` for several
/// inputs.
fn runs(dir: &Path, version: &str, work: u32, inputs: &[u32]) -> Vec<PathBuf> {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join(format!("prog-{version}"));
    let st = Command::new("gcc")
        .args([
            "-O1",
            "-g",
            &format!("-DWORK={work}"),
            "-o",
            s(&bin),
            s(&src),
        ])
        .status()
        .unwrap();
    assert!(st.success());
    inputs
        .iter()
        .map(|n| {
            let out = dir.join(format!("callgrind.out.{version}.{n}"));
            let st = Command::new("valgrind")
                .args([
                    "-q",
                    "--tool=callgrind",
                    &format!("--callgrind-out-file={}", s(&out)),
                    s(&bin),
                    &n.to_string(),
                ])
                .env("LC_ALL", "C")
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(st.success());
            out
        })
        .collect()
}

type FnKey = (String, String, String);

fn key_of(r: &Value) -> FnKey {
    (
        str_of(&r["object"]),
        str_of(&r["file"]),
        str_of(&r["function"]),
    )
}

/// Self `Ir` per function of a profile file, through `tally convert`.
fn self_ir(file: &Path, dir: &Path) -> BTreeMap<FnKey, i64> {
    function_self(&json_of(&[s(file)], dir))
        .into_iter()
        .filter(|(k, _)| k.3 == "Ir")
        .map(|(k, v)| ((k.0, k.1, k.2), v))
        .collect()
}

/// The fleet queries in one engine, as JSON.
fn query(script: &str, dirs: &[&Path]) -> Value {
    let path = repo().join("examples/fleet").join(script);
    let mut cmd = Command::new("python3");
    cmd.arg(&path)
        .args(["--json", "--event", "Ir", "--label", "version"])
        .args(["--compare", "a", "b", "--top", "3"]);
    cmd.args(dirs.iter().map(|d| s(d)));
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice::<Value>(&o.stdout).unwrap()["results"].clone()
}

#[test]
fn fleet_queries_in_datafusion_and_spark_equal_merge_and_diff() {
    if !tally_testutil::require(&["gcc", "valgrind", "java"])
        || !tally_testutil::require_python(&["pyarrow", "datafusion", "pyspark"])
    {
        return;
    }
    let d = tmp();
    let a = runs(d.path(), "a", 20, &[100, 200, 300]);
    let b = runs(d.path(), "b", 23, &[100, 200, 300]);
    let (da, db) = (d.path().join("export-a"), d.path().join("export-b"));
    for (dir, files, v) in [(&da, &a, "a"), (&db, &b, "b")] {
        let mut args = vec!["export", "--to", "parquet", "-o", s(dir)];
        args.extend(files.iter().map(|p| s(p)));
        let label = format!("version={v}");
        args.extend(["--label", &label, "--label", "service=prog"]);
        ok(&args);
    }
    // What tally merge and tally diff give.
    let merge = |files: &[PathBuf], out: &Path| {
        let mut args = vec!["merge", "-o", s(out)];
        args.extend(files.iter().map(|p| s(p)));
        ok(&args);
    };
    let (ma, mb, mall) = (
        d.path().join("merged.a"),
        d.path().join("merged.b"),
        d.path().join("merged.all"),
    );
    merge(&a, &ma);
    merge(&b, &mb);
    let all: Vec<PathBuf> = a.iter().chain(&b).cloned().collect();
    merge(&all, &mall);
    let diff = d.path().join("diff.out");
    ok(&["diff", s(&ma), s(&mb), "-o", s(&diff)]);
    let merged = self_ir(&mall, d.path());
    let (self_a, self_b) = (self_ir(&ma, d.path()), self_ir(&mb, d.path()));
    let change = self_ir(&diff, d.path());
    assert!(!change.is_empty(), "the two versions do not differ");
    for script in ["datafusion_fleet.py", "spark_fleet.py"] {
        let r = query(script, &[&da, &db]);
        // Per-function totals equal tally merge's.
        let got: BTreeMap<FnKey, i64> = r["merged"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["event"] == "Ir")
            .map(|r| (key_of(r), r["self"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, merged, "{script}: merged");
        // The change between the versions equals tally diff's.
        let got: BTreeMap<FnKey, i64> = r["change"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (key_of(r), r["self_change"].as_i64().unwrap()))
            .collect();
        assert_eq!(got, change, "{script}: change");
        // Grouped by version: the top three by self cost of each merged
        // version, with its numbers.
        for (v, want) in [("a", &self_a), ("b", &self_b)] {
            let mut ranked: Vec<(&FnKey, &i64)> = want.iter().collect();
            ranked.sort_by(|x, y| y.1.cmp(x.1).then(x.0.2.cmp(&y.0.2)));
            let top: Vec<(FnKey, i64)> = r["top_self"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r["grp"] == v)
                .map(|r| (key_of(r), r["self"].as_i64().unwrap()))
                .collect();
            let want: Vec<(FnKey, i64)> = ranked
                .iter()
                .take(3)
                .map(|(k, v)| ((*k).clone(), **v))
                .collect();
            assert_eq!(top, want, "{script}: top of version {v}");
        }
        // Totals: the merged profile's.
        let total: i64 = merged.values().sum();
        let ir = r["totals"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["event"] == "Ir")
            .unwrap()
            .clone();
        assert_eq!(ir["total"].as_i64(), Some(total), "{script}: totals");
        assert_eq!(ir["profiles"].as_i64(), Some(6), "{script}: profiles");
    }
}

/// Bad input stops the export with the file and line, exit 1, and leaves
/// what was there: an earlier export's files unchanged, and no new
/// directory when there was none.
#[test]
fn bad_input_leaves_earlier_files_and_no_new_directory() {
    let t = tmp();
    let bad = t.path().join("bad.out");
    std::fs::write(&bad, "events: Ir\nfn=a\n1 x\n").unwrap();
    let good = repo().join("tests/data/callgrind/mutual.default.out");
    let fresh = t.path().join("fresh");
    let e = tally_testutil::tally!().fails(&[
        "export",
        s(&good),
        s(&bad),
        "--to",
        "parquet",
        "-o",
        s(&fresh),
    ]);
    assert!(e.contains(&format!("{}:3:", bad.display())), "{e}");
    assert!(!fresh.exists(), "a failed export left {}", fresh.display());

    let old = t.path().join("old");
    ok(&["export", s(&good), "--to", "parquet", "-o", s(&old)]);
    let before: Vec<Vec<u8>> = ["costs", "functions", "arcs", "profiles"]
        .iter()
        .map(|n| std::fs::read(old.join(format!("{n}.parquet"))).unwrap())
        .collect();
    tally_testutil::tally!().fails(&["export", s(&bad), "--to", "parquet", "-o", s(&old)]);
    for (n, b) in ["costs", "functions", "arcs", "profiles"]
        .iter()
        .zip(&before)
    {
        let now = std::fs::read(old.join(format!("{n}.parquet"))).unwrap();
        assert!(&now == b, "{n}.parquet changed by a failed export");
    }
    let left: Vec<_> = std::fs::read_dir(&old).unwrap().collect();
    assert_eq!(left.len(), 4, "temporary files left behind: {left:?}");
}
