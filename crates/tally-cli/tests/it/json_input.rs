//! tally's JSON form as an input to every command: a profile converted to
//! JSON annotates, draws and converts as the original does; `tally
//! record`'s default output is that JSON, so its recorded stacks are drawn
//! and not estimated; and a recording's threads and times become pprof
//! labels that `go tool pprof -tags` shows.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::recorder::serial;
use tally_testutil::serve::Server;
use tally_testutil::{data, path_str, require, tally, temp_dir, text};

/// `tally ARGS` run in `dir` on `input`, its output with `input`'s name
/// replaced, so that the report of a copy compares with the original's.
fn report(dir: &Path, args: &[&str], input: &Path) -> String {
    let mut all = args.to_vec();
    all.push(path_str(input));
    let out = tally!().in_dir(dir).ok(&all);
    text(&out.stdout).replace(path_str(input), "INPUT")
}

fn convert_to_json(dir: &Path, input: &Path, name: &str) -> PathBuf {
    let json = dir.join(name);
    tally!().ok(&[
        "convert",
        path_str(input),
        "--to",
        "json",
        "-o",
        path_str(&json),
    ]);
    json
}

#[test]
fn a_json_copy_reports_as_its_original() {
    let dir = temp_dir();
    let d = dir.path();
    for (rel, stacks) in [
        ("stacks/stacks.perf.data", true),
        ("callgrind/mutual.default.out", false),
        ("callgrind/inline.jumps.out", false),
    ] {
        let original = data(rel);
        let json = convert_to_json(d, &original, "copy.json");
        let mut reports = vec![
            vec!["annotate", "--json", "--inclusive=yes", "--threshold=100"],
            vec!["annotate", "--inclusive=yes"],
            vec!["convert", "--to", "folded", "-o", "-"],
        ];
        if stacks {
            reports.push(vec!["annotate", "--call-tree", "--json"]);
            reports.push(vec!["annotate", "--call-tree=inverted", "--json"]);
        }
        for args in reports {
            let a = report(d, &args, &original);
            let b = report(d, &args, &json);
            assert!(!a.is_empty(), "{rel} {args:?}");
            assert_eq!(a, b, "{rel}: tally {args:?}");
        }
        // Per function, self and inclusive, as numbers.
        let per_function = |p: &Path| {
            let v: Value = serde_json::from_str(&report(
                d,
                &["annotate", "--json", "--inclusive=yes", "--threshold=100"],
                p,
            ))
            .unwrap();
            let list = v["functions"].as_array().unwrap().clone();
            assert!(!list.is_empty());
            list.iter()
                .map(|f| {
                    (
                        f["function"].as_str().unwrap().to_string(),
                        (f["self"].clone(), f["inclusive"].clone()),
                    )
                })
                .collect::<BTreeMap<_, _>>()
        };
        assert_eq!(per_function(&original), per_function(&json), "{rel}");
        // The flame graph of recorded stacks says nothing is estimated.
        let svg = d.join("f.svg");
        tally!().ok(&["flame", path_str(&json), "-o", path_str(&svg)]);
        let svg = std::fs::read_to_string(&svg).unwrap();
        assert_eq!(svg.contains("estimated"), !stacks, "{rel}");
    }
}

#[test]
fn bad_json_is_refused_with_its_line() {
    let dir = temp_dir();
    let json = convert_to_json(dir.path(), &data("callgrind/mutual.default.out"), "p.json");
    let good = std::fs::read_to_string(&json).unwrap();
    // The first call's callee, out of range.
    let call = good.find("\n{\"caller\":").unwrap();
    let callee = call + good[call..].find("\"callee\":").unwrap() + "\"callee\":".len();
    let end = callee + good[callee..].find(',').unwrap();
    let bad = format!("{}123456{}", &good[..callee], &good[end..]);
    let line = bad[..callee].matches('\n').count() + 1;
    let path = dir.path().join("bad.json");
    std::fs::write(&path, &bad).unwrap();
    let svg = dir.path().join("f.svg");
    for command in [
        vec!["annotate", path_str(&path)],
        vec!["check", path_str(&path)],
        vec!["flame", path_str(&path), "-o", path_str(&svg)],
    ] {
        let e = tally!().fails(&command);
        assert!(
            e.contains(&format!(
                "{}:{line}: malformed `parts[0].calls[0].callee`: function 123456 is out of range",
                path.display()
            )),
            "tally {command:?}: {e}"
        );
    }
    // Cut short: JSON's own error, with its line.
    std::fs::write(&path, &good[..good.len() / 3]).unwrap();
    let line = good[..good.len() / 3].matches('\n').count() + 1;
    let e = tally!().fails(&["annotate", path_str(&path)]);
    assert!(
        e.contains(&format!("{}:{line}: not tally's JSON form", path.display())),
        "{e}"
    );
}

/// Work under two callers and in a second thread named by the program;
/// built without optimisation, so that every function keeps its frame
/// pointer (leaf functions lose it at -O1) and its callers show.
const PROGRAM: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(long n) { for (long i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) void via_a(long n) { leaf(n); sink++; }
__attribute__((noinline)) void via_b(long n) { leaf(3 * n); sink++; }
__attribute__((noinline)) void spin(long n) { for (long i = 0; i < n; i++) sink ^= i; }
static void *worker(void *arg) {
    pthread_setname_np(pthread_self(), "js-worker");
    spin((long)arg);
    return 0;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 60000000;
    pthread_setname_np(pthread_self(), "js-main");
    pthread_t t;
    pthread_create(&t, 0, worker, (void *)(2 * n));
    via_a(n);
    via_b(n);
    pthread_join(t, 0);
    return 0;
}
"#;

fn compile(dir: &Path) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("prog");
    let o = Command::new("gcc")
        .args(["-O0", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-lpthread")
        .output()
        .unwrap();
    assert!(o.status.success(), "gcc: {}", text(&o.stderr));
    exe
}

/// The frames of a flame graph SVG: name and width (inclusive cost).
fn flame_frames(svg: &str) -> Vec<(String, u64)> {
    let attr = |g: &str, name: &str| -> String {
        let key = format!("{name}=\"");
        let i = g.find(&key).unwrap() + key.len();
        g[i..i + g[i..].find('"').unwrap()].to_string()
    };
    svg.split("<g data-v=")
        .skip(1)
        .map(|g| {
            let g = format!("data-v={g}");
            (attr(&g, "data-n"), attr(&g, "data-w").parse().unwrap())
        })
        .collect()
}

#[test]
fn record_by_default_keeps_the_stacks() {
    let _serial = serial();
    if !require(&["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    let exe = compile(d);
    let out = tally!().in_dir(d).ok(&["record", "--", path_str(&exe)]);
    let written: Vec<String> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("tally.") && n.ends_with(".json"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}: {}", text(&out.stderr));
    let name = &written[0];
    assert!(text(&out.stderr).contains(name.as_str()));
    let profile = d.join(name);

    // The flame graph draws the recorded stacks.
    let svg = d.join("flame.svg");
    tally!().ok(&["flame", path_str(&profile), "-o", path_str(&svg)]);
    let svg = std::fs::read_to_string(&svg).unwrap();
    assert!(!svg.contains("estimated"), "the flame graph says estimated");
    // Its widest frames are the functions' inclusive costs.
    let mut width: BTreeMap<String, u64> = BTreeMap::new();
    for (n, w) in flame_frames(&svg) {
        *width.entry(n).or_default() += w;
    }
    let v: Value = serde_json::from_slice(
        &tally!()
            .ok(&[
                "annotate",
                "--inclusive=yes",
                "--threshold=100",
                "--json",
                path_str(&profile),
            ])
            .stdout,
    )
    .unwrap();
    let inclusive: BTreeMap<String, u64> = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let name = f["function"].as_str().unwrap();
            let name = name.rsplit(':').next().unwrap().to_string();
            (name, f["inclusive"]["cpu-clock"].as_u64().unwrap_or(0))
        })
        .collect();
    for f in ["leaf", "via_a", "via_b", "spin", "worker", "main"] {
        assert!(inclusive[f] > 0, "{f}: {inclusive:?}");
        assert_eq!(width.get(f), Some(&inclusive[f]), "{f}: {width:?}");
    }
    let tree = text(
        &tally!()
            .ok(&["annotate", "--call-tree", path_str(&profile)])
            .stdout,
    );
    assert!(tree.contains("recorded"), "{tree}");

    // The web UI has its timeline, with both threads.
    let mut command = tally!().command();
    command.arg("serve").arg(&profile);
    let server = Server::start(command);
    let (status, body) = server.get("timeline");
    assert_eq!(status, 200, "{body}");
    let tl: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(tl["timed"], true, "{tl}");
    let mut names: Vec<&str> = tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["js-main", "js-worker"]);

    // `-o callgrind.out` still writes Callgrind.
    tally!()
        .in_dir(d)
        .ok(&["record", "-o", "callgrind.out", "--", path_str(&exe)]);
    let head = std::fs::read(d.join("callgrind.out")).unwrap();
    assert!(head.starts_with(b"# callgrind format"));
}

/// `go tool pprof -tags` of a pprof file.
fn pprof_tags(file: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof", "-tags"])
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "go tool pprof: {}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn recorded_threads_and_times_are_pprof_labels() {
    let _serial = serial();
    if !require(&["gcc", "go"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    let exe = compile(d);
    tally!()
        .in_dir(d)
        .ok(&["record", "-o", "rec.json", "--", path_str(&exe)]);
    tally!()
        .in_dir(d)
        .ok(&["convert", "rec.json", "--to", "pprof", "-o", "conv.pb.gz"]);
    tally!()
        .in_dir(d)
        .ok(&["record", "-o", "rec.pb.gz", "--", path_str(&exe)]);
    for file in ["conv.pb.gz", "rec.pb.gz"] {
        let tags = pprof_tags(&d.join(file));
        for key in [" thread:", " tid:", " pid:", " time:"] {
            assert!(tags.contains(key), "{file}: no {key}\n{tags}");
        }
        for name in ["js-main", "js-worker"] {
            assert!(tags.contains(name), "{file}: no {name}\n{tags}");
        }
    }
    // Read back, the pprof file has its timeline again.
    tally!()
        .in_dir(d)
        .ok(&["convert", "conv.pb.gz", "--to", "json", "-o", "back.json"]);
    let back: Value = serde_json::from_slice(&std::fs::read(d.join("back.json")).unwrap()).unwrap();
    let mut names: Vec<&str> = back["stacks"]["timeline"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["js-main", "js-worker"]);
    // The labels do not change the totals: `-top` of the converted file
    // gives the recording's total.
    let v: Value = serde_json::from_slice(
        &tally!()
            .in_dir(d)
            .ok(&["annotate", "--json", "rec.json"])
            .stdout,
    )
    .unwrap();
    let total = v["totals"]["cpu-clock"].as_u64().unwrap();
    let top = Command::new("go")
        .args(["tool", "pprof", "-raw"])
        .arg(d.join("conv.pb.gz"))
        .output()
        .unwrap();
    let raw = text(&top.stdout);
    let sum: u64 = raw
        .lines()
        .skip_while(|l| !l.starts_with("Samples:"))
        .skip(2)
        .take_while(|l| !l.starts_with("Locations"))
        .filter_map(|l| {
            l.split_whitespace()
                .next()?
                .strip_suffix(':')?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(sum, total, "{raw}");
}
