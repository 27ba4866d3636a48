//! Call costs under recursion, on every Callgrind fixture and on programs
//! compiled and profiled here (a recursive `fib` and a mutual recursion,
//! with Callgrind's recursion levels on and off, and CPython): no call
//! cost shown by a call tree, a source or assembly call line or a diff
//! exceeds the program total or its caller's inclusive cost, and the call
//! costs a function shows add up to at most its inclusive cost.
//!
//! A function's inclusive cost is its own, or for a cycle member its
//! cycle's, since members have none of their own.

use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::{data_dir, path_str};

const FIB: &str = r#"#include <stdio.h>
#include <stdlib.h>
static int fib(int n){ return n<2?n:fib(n-1)+fib(n-2); }
static int even(int n); static int odd(int n){ return n==0?0:even(n-1); }
static int even(int n){ return n==0?1:odd(n-1); }
int main(int c,char**v){ int n=c>1?atoi(v[1]):25; long s=0; for(int i=0;i<200;i++) s+=even(i*50); printf("%d %ld\n",fib(n),s); return 0; }
"#;

/// A function as JSON names it: object and name.
type Fn = (String, String);

fn tally(args: &[&str]) -> Result<Vec<u8>, Failed> {
    let out = tally_testutil::tally!()
        .command()
        .args(args)
        .output()
        .map_err(|e| format!("tally: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tally {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(out.stdout)
}

fn json(args: &[&str]) -> Result<Value, Failed> {
    serde_json::from_slice(&tally(args)?).map_err(|e| format!("tally's JSON: {e}").into())
}

fn num(v: &Value) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or(0)
}

fn costs(v: &Value, events: &[String]) -> Vec<i128> {
    events.iter().map(|e| num(&v[e])).collect()
}

fn function(v: &Value, name: &str, object: &str) -> Fn {
    (
        v[object].as_str().unwrap_or("").to_string(),
        v[name].as_str().unwrap_or("").to_string(),
    )
}

/// The annotate report with everything that shows call costs.
fn annotate(profile: &Path, extra: &[&str]) -> Result<Value, Failed> {
    let inc = data_dir();
    let mut args = vec![
        "annotate",
        "--json",
        "--threshold=100",
        "--inclusive=yes",
        "--tree=both",
        "--auto=yes",
        "-I",
        path_str(&inc),
    ];
    args.extend_from_slice(extra);
    args.push(path_str(profile));
    json(&args)
}

/// Checks the invariants on one annotate report; returns how many call
/// costs were checked.
fn check(j: &Value) -> Result<usize, Failed> {
    let events: Vec<String> = j["events"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_string))
        .collect();
    let total = costs(&j["totals"], &events);
    // Each function's bound: its inclusive cost, or its cycle's (once per
    // cycle when homonyms share one).
    let cycles: BTreeMap<i128, Vec<i128>> = j["cycles"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (num(&c["number"]), costs(&c["inclusive"], &events)))
        .collect();
    let mut bound: BTreeMap<Fn, (Vec<i128>, Vec<i128>)> = BTreeMap::new();
    for f in j["functions_by_name"].as_array().into_iter().flatten() {
        let e = bound
            .entry(function(f, "function", "object"))
            .or_insert_with(|| (vec![0; events.len()], Vec::new()));
        let add = if let Some(n) = f["cycle"].as_i64().map(i128::from) {
            if e.1.contains(&n) {
                continue;
            }
            e.1.push(n);
            cycles
                .get(&n)
                .cloned()
                .ok_or("a cycle number without a cycle")?
        } else {
            costs(&f["inclusive"], &events)
        };
        e.0.iter_mut().zip(add).for_each(|(a, b)| *a += b);
    }
    if bound.is_empty() {
        return Err("no functions_by_name in the report".into());
    }
    let mut errors = Vec::new();
    let mut checked = 0;
    let mut one = |what: &str, caller: &Fn, c: &Value, sums: &mut BTreeMap<Fn, Vec<i128>>| {
        if c["inclusive"].is_null() {
            if c["recursion"].is_null() {
                errors.push(format!("{what}: a call without cost outside recursion"));
            }
            return;
        }
        if !c["recursion"].is_null() {
            errors.push(format!("{what}: a call inside a recursion with a cost"));
        }
        checked += 1;
        let v = costs(&c["inclusive"], &events);
        let b = bound.get(caller).map(|b| b.0.clone());
        for (i, &x) in v.iter().enumerate() {
            if x > total[i] {
                errors.push(format!(
                    "{what}: {} {x} above the program total {}",
                    events[i], total[i]
                ));
            }
            if let Some(b) = &b
                && x > b[i]
            {
                errors.push(format!(
                    "{what}: {} {x} above the caller's inclusive {}",
                    events[i], b[i]
                ));
            }
        }
        let s = sums
            .entry(caller.clone())
            .or_insert_with(|| vec![0; v.len()]);
        s.iter_mut().zip(&v).for_each(|(a, b)| *a += b);
    };
    // Trees: callers under each row, callees of each row (the callees of
    // all of a function's rows together are its calls).
    let mut tree_sums = BTreeMap::new();
    let mut caller_sums = BTreeMap::new();
    for r in j["functions"].as_array().into_iter().flatten() {
        let me = function(r, "function", "object");
        for c in r["callees"].as_array().into_iter().flatten() {
            let what = format!("tree: {} -> {}", me.1, c["function"]);
            one(&what, &me, c, &mut tree_sums);
        }
        for c in r["callers"].as_array().into_iter().flatten() {
            let caller = function(c, "function", "object");
            let what = format!("tree: {} <- {}", me.1, caller.1);
            one(&what, &caller, c, &mut caller_sums);
        }
    }
    // Source call lines.
    let mut source_sums = BTreeMap::new();
    for f in j["source"]["files"].as_array().into_iter().flatten() {
        for l in f["lines"].as_array().into_iter().flatten() {
            for c in l["calls"].as_array().into_iter().flatten() {
                let caller = function(c, "caller", "caller_object");
                let what = format!("{}:{}: => {}", f["file"], l["line"], c["function"]);
                one(&what, &caller, c, &mut source_sums);
            }
        }
    }
    // Assembly call lines.
    let mut asm_sums = BTreeMap::new();
    for f in j["asm"].as_array().into_iter().flatten() {
        let me = function(f, "function", "object");
        for i in f["instructions"].as_array().into_iter().flatten() {
            for c in i["calls"].as_array().into_iter().flatten() {
                let what = format!("asm {}: => {}", i["address"], c["function"]);
                one(&what, &me, c, &mut asm_sums);
            }
        }
    }
    for (view, sums) in [
        ("tree callees", &tree_sums),
        ("tree callers", &caller_sums),
        ("source", &source_sums),
        ("asm", &asm_sums),
    ] {
        for (f, s) in sums {
            let Some(b) = bound.get(f) else { continue };
            for (i, (&x, &y)) in s.iter().zip(&b.0).enumerate() {
                if x > y {
                    errors.push(format!(
                        "{view}: the calls of {} sum to {} {x}, above its inclusive {y}",
                        f.1, events[i]
                    ));
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(checked)
    } else {
        errors.truncate(20);
        Err(errors.join("\n").into())
    }
}

/// Callgrind fixtures: those with a callgrind_annotate report beside them.
fn fixtures() -> Vec<PathBuf> {
    let dir = data_dir().join("callgrind");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    // Differences (signed) have no such bounds.
    v.retain(|p| {
        let mut a = p.clone().into_os_string();
        a.push(".annotate");
        PathBuf::from(a).is_file() && !p.to_string_lossy().contains(".diff.")
    });
    v.sort();
    v
}

fn fixture(p: &Path) -> Result<(), Failed> {
    let j = annotate(p, &[])?;
    check(&j).map(|_| ())
}

/// Compiles the recursive program into `dir`.
fn compile(dir: &Path) -> Result<PathBuf, Failed> {
    let src = dir.join("fib.c");
    std::fs::write(&src, FIB).map_err(|e| e.to_string())?;
    let exe = dir.join("fib");
    let ok = Command::new("gcc")
        .args(["-g", "-O0", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .map_err(|e| e.to_string())?
        .success();
    if !ok {
        return Err("gcc failed".into());
    }
    Ok(exe)
}

/// Runs `program args` under Callgrind with `options`, into `out`.
fn callgrind(out: &Path, options: &[&str], program: &[&str]) -> Result<(), Failed> {
    let o = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", path_str(out)))
        .args(options)
        .args(program)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("valgrind: {}", String::from_utf8_lossy(&o.stderr)).into());
    }
    Ok(())
}

/// The compiled program, with recursion levels (Callgrind's default), as
/// one function (`--separate-recs=1`), and per instruction (`--asm`).
fn compiled() -> Result<(), Failed> {
    let dir = tally_testutil::temp_dir();
    let exe = compile(dir.path())?;
    let exe = path_str(&exe);
    for (name, opts, extra) in [
        ("levels", &[][..], &[][..]),
        ("one", &["--separate-recs=1"][..], &[][..]),
        ("instr", &["--dump-instr=yes"][..], &["--asm"][..]),
    ] {
        let out = dir.path().join(format!("{name}.cg"));
        callgrind(&out, opts, &[exe, "22"])?;
        let mut args = vec!["-I", path_str(dir.path())];
        args.extend_from_slice(extra);
        let j =
            annotate(&out, &args).map_err(|e| format!("{name}: {}", e.message().unwrap_or("")))?;
        let n = check(&j).map_err(|e| format!("{name}: {}", e.message().unwrap_or("")))?;
        if n == 0 {
            return Err(format!("{name}: no call cost checked").into());
        }
        // fib's recursive calls are shown, by count, without a cost.
        let recursive = j["source"]["files"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|f| f["lines"].as_array().into_iter().flatten())
            .flat_map(|l| l["calls"].as_array().into_iter().flatten())
            .filter(|c| {
                c["function"].as_str().is_some_and(|f| f.starts_with("fib"))
                    && c["recursion"] == "recursive"
            })
            .map(|c| num(&c["count"]))
            .sum::<i128>();
        if recursive < 10_000 {
            return Err(format!("{name}: fib's recursive calls not marked ({recursive})").into());
        }
        if name == "instr" && j["asm"].as_array().is_none_or(|a| a.is_empty()) {
            return Err("instr: no assembly".into());
        }
        // The even/odd cycle: what enters it from outside is what it costs.
        let cycle = j["cycles"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| {
                c["members"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["function"].as_str())
                    .any(|m| m.starts_with("even") || m.starts_with("odd"))
            })
            .ok_or(format!("{name}: no even/odd cycle"))?;
        let entered: i128 = cycle["members"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| num(&m["entered_from_outside"]["Ir"]))
            .sum();
        if entered != num(&cycle["inclusive"]["Ir"]) || entered == 0 {
            return Err(format!(
                "{name}: cycle entries {entered}, cycle inclusive {}",
                cycle["inclusive"]["Ir"]
            )
            .into());
        }
    }
    Ok(())
}

/// `tally diff --json` and `annotate --diff` of two depths of the same
/// recursion: no call grows more than the program does.
fn diff() -> Result<(), Failed> {
    let dir = tally_testutil::temp_dir();
    let exe = compile(dir.path())?;
    let (a, b) = (dir.path().join("a.cg"), dir.path().join("b.cg"));
    callgrind(&a, &["--separate-recs=1"], &[path_str(&exe), "18"])?;
    callgrind(&b, &["--separate-recs=1"], &[path_str(&exe), "22"])?;
    let j = json(&["diff", "--json", "--top=1000", path_str(&a), path_str(&b)])?;
    let growth = num(&j["totals"]["delta"][0]);
    let mut errors = Vec::new();
    let calls = j["calls"].as_array().cloned().unwrap_or_default();
    for c in &calls {
        let what = format!("{} -> {}", c["caller"], c["callee"]);
        match (&c["inclusive_delta"], c["recursive"].as_bool()) {
            (Value::Null, Some(true)) => {}
            (d, Some(false)) if !d.is_null() => {
                // The recursion is what grows; printing the other result
                // changes by a few instructions.
                let d = num(&d[0]);
                if d.abs() > growth.abs() + growth.abs() / 100 {
                    errors.push(format!("{what}: grew {d}, the program {growth}"));
                }
            }
            (d, r) => errors.push(format!("{what}: delta {d}, recursive {r:?}")),
        }
    }
    if !calls
        .iter()
        .any(|c| c["callee"] == "fib" && c["recursive"] == true)
    {
        errors.push("fib's self call is not marked recursive".into());
    }
    // annotate --diff: the same calls in the source annotation.
    let inc = dir.path();
    let d = json(&[
        "annotate",
        "--diff",
        "--json",
        "--threshold=100",
        "--auto=yes",
        "-I",
        path_str(inc),
        path_str(&a),
        path_str(&b),
    ])?;
    let mut marked = 0;
    for f in d["source"]["files"].as_array().into_iter().flatten() {
        for l in f["lines"].as_array().into_iter().flatten() {
            for c in l["calls"].as_array().into_iter().flatten() {
                if c["recursion"].is_null() {
                    let v = num(&c["inclusive"]["Ir"]);
                    if v.abs() > growth.abs() + growth.abs() / 100 {
                        errors.push(format!("annotate --diff: => {} {v}", c["function"]));
                    }
                } else {
                    marked += 1;
                    if !c["inclusive"].is_null() {
                        errors.push(format!("annotate --diff: {} has a cost", c["function"]));
                    }
                }
            }
        }
    }
    if marked == 0 {
        errors.push("annotate --diff: no call marked as inside a recursion".into());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n").into())
    }
}

/// CPython under Callgrind: one cycle of hundreds of functions.
fn cpython() -> Result<(), Failed> {
    let exe = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .map_err(|e| e.to_string())?;
    let exe = String::from_utf8_lossy(&exe.stdout).trim().to_string();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("py.cg");
    callgrind(
        &out,
        &[],
        &[
            &exe,
            "-c",
            "import json; d=[{'a': i, 'b': [str(i)] * 3} for i in range(500)]; json.loads(json.dumps(d))",
        ],
    )?;
    let j = annotate(&out, &[])?;
    check(&j)?;
    let big = j["cycles"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["members"].as_array().map_or(0, |m| m.len()))
        .max()
        .unwrap_or(0);
    if big < 100 {
        return Err(format!("the largest cycle has {big} members; expected hundreds").into());
    }
    // The text: member lists wrapped and abbreviated, entries labelled.
    let text = tally(&[
        "annotate",
        "--threshold=100",
        "--inclusive=yes",
        path_str(&out),
    ])?;
    let text = String::from_utf8_lossy(&text);
    let longest = text
        .lines()
        .filter(|l| l.contains("<cycle") || l.starts_with("    "))
        .map(str::len)
        .max()
        .unwrap_or(0);
    if longest > 400 {
        return Err(format!("a cycle line of {longest} characters").into());
    }
    if !text.contains(&format!("... and {} more", big - 20)) {
        return Err("the biggest cycle's member list is not abbreviated".into());
    }
    if !text.contains("Ir entered") {
        return Err("no column of entries into cycle members".into());
    }
    Ok(())
}

/// Every recursion trial, named `recursion/…`.
pub fn trials() -> Vec<Trial> {
    let mut tests = Vec::new();
    for p in fixtures() {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        tests.push(Trial::test(format!("recursion/fixture/{n}"), move || {
            fixture(&p)
        }));
    }
    tests.push(tally_testutil::trial(
        "recursion/compiled/fib",
        &["gcc", "valgrind"],
        compiled,
    ));
    tests.push(tally_testutil::trial(
        "recursion/compiled/diff",
        &["gcc", "valgrind"],
        diff,
    ));
    tests.push(tally_testutil::trial(
        "recursion/cpython",
        &["valgrind", "python3"],
        cpython,
    ));
    tests
}
