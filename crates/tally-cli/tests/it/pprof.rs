//! pprof in and out, against Go's own pprof: a Go program profiles itself
//! with `runtime/pprof` (recursion, inlined calls, several callers of one
//! function); tally reads the profile, and `tally annotate --inclusive`
//! shows the same flat and cumulative values per function as
//! `go tool pprof -top`, for every sample type. tally's pprof export of it
//! gives `go tool pprof -top` the same table and totals again, and a
//! Callgrind profile exported as pprof shows its self costs in pprof with
//! a comment saying that its stacks are not known. Damaged pprof input is
//! refused with the byte offset.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::{data, path_str, require, text};

const PROGRAM: &str = r#"package main

import (
	"os"
	"runtime/pprof"
)

// sq is small enough to be inlined into its callers.
func sq(i int) int { return i * i % 7 }

//go:noinline
func leaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += sq(i)
	}
	return s
}

//go:noinline
func fib(n int) int {
	if n < 2 {
		return leaf(3000)
	}
	return fib(n-1) + fib(n-2)
}

//go:noinline
func busy() int { return leaf(150000000) }

//go:noinline
func other() int {
	s := 0
	for i := 0; i < 60000000; i++ {
		s += sq(i + 1)
	}
	return s
}

func main() {
	f, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		panic(err)
	}
	s := busy() + fib(21) + other()
	pprof.StopCPUProfile()
	f.Close()
	if s == 1 {
		println(s)
	}
}
"#;

/// Runs the Go program above offline (no modules, caches in `dir`) and
/// returns its CPU profile.
pub(crate) fn go_profile(dir: &Path) -> PathBuf {
    let src = dir.join("main.go");
    std::fs::write(&src, PROGRAM).unwrap();
    let out = dir.join("cpu.pb.gz");
    let run = Command::new("go")
        .args(["run", path_str(&src), path_str(&out)])
        .env("GOPATH", dir.join("gopath"))
        .env("GOCACHE", dir.join("gocache"))
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .output()
        .unwrap();
    assert!(run.status.success(), "go run: {}", text(&run.stderr));
    out
}

fn tally(args: &[&str]) -> Vec<u8> {
    tally_testutil::tally!().ok(args).stdout
}

/// `go tool pprof -top` of one sample type, in raw units: function →
/// (flat, cum), and the total.
fn pprof_top(file: &Path, index: usize) -> (BTreeMap<String, (i64, i64)>, i64) {
    pprof_top_with(file, index, &[])
}

/// [`pprof_top`] with more options (`-focus=…`).
pub(crate) fn pprof_top_with(
    file: &Path,
    index: usize,
    extra: &[&str],
) -> (BTreeMap<String, (i64, i64)>, i64) {
    let out = Command::new("go")
        .args(["tool", "pprof", "-top", "-nodecount=100000"])
        .arg(format!("-sample_index={index}"))
        .args(["-unit=ns", "-nodefraction=0", "-edgefraction=0"])
        .args(extra)
        .arg(file)
        .output()
        .unwrap();
    assert!(out.status.success(), "go tool pprof: {}", text(&out.stderr));
    let report = text(&out.stdout);
    let mut rows = BTreeMap::new();
    let mut total = None;
    let mut table = false;
    for line in report.lines() {
        if let Some(rest) = line.split("of ").nth(1)
            && line.starts_with("Showing nodes")
        {
            total = Some(value(rest.split_whitespace().next().unwrap()));
        }
        if line.trim_start().starts_with("flat") {
            table = true;
            continue;
        }
        if !table {
            continue;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 6 {
            continue;
        }
        let name = w[5..].join(" ");
        // Inlined functions are marked `(inline)`: the name is before it.
        let name = name.trim_end_matches(" (inline)").to_string();
        let e = rows.entry(name).or_insert((0, 0));
        e.0 += value(w[0]);
        e.1 += value(w[3]);
    }
    (
        rows,
        total.unwrap_or_else(|| panic!("no total in\n{report}")),
    )
}

/// A pprof value as `-unit=ns` prints it: nanoseconds, or a count or a
/// size with its unit.
fn value(s: &str) -> i64 {
    let digits: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == '-')
        .collect();
    let v: f64 = digits.parse().unwrap_or_else(|_| panic!("number {s}"));
    let unit = &s[digits.len()..];
    let scale = match unit {
        "" | "ns" | "B" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => panic!("unit {unit} in {s}"),
    };
    (v * scale).round() as i64
}

/// `tally annotate --inclusive` per function name: (self, inclusive) for
/// `event`, and the event's total.
fn tally_top(file: &Path, event: &str) -> (BTreeMap<String, (i64, i64)>, i64) {
    tally_top_with(file, event, &[])
}

/// [`tally_top`] with more options (`--focus=…`).
pub(crate) fn tally_top_with(
    file: &Path,
    event: &str,
    extra: &[&str],
) -> (BTreeMap<String, (i64, i64)>, i64) {
    let mut args = vec![
        "annotate",
        "--inclusive=yes",
        "--json",
        "--threshold=all",
        "--auto=no",
    ];
    args.extend(extra);
    args.push(path_str(file));
    let out = tally(&args);
    let v: Value = serde_json::from_slice(&out).unwrap();
    let mut rows = BTreeMap::new();
    for f in v["functions_by_name"].as_array().unwrap() {
        let name = f["function"].as_str().unwrap().to_string();
        let e = rows.entry(name).or_insert((0, 0));
        e.0 += f["self"][event].as_i64().unwrap();
        // Cycle members have no inclusive cost of their own.
        e.1 += f["inclusive"][event].as_i64().unwrap_or(0);
    }
    (rows, v["totals"][event].as_i64().unwrap())
}

fn events(file: &Path) -> Vec<String> {
    let out = tally(&["annotate", "--json", "--auto=no", path_str(file)]);
    let v: Value = serde_json::from_slice(&out).unwrap();
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

/// pprof leaves out functions whose flat and cum are 0; so does this.
pub(crate) fn nonzero(m: BTreeMap<String, (i64, i64)>) -> BTreeMap<String, (i64, i64)> {
    m.into_iter().filter(|(_, v)| *v != (0, 0)).collect()
}

#[test]
fn go_profile_reads_as_pprof_shows_it_and_round_trips() {
    if !require(&["go"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let profile = go_profile(dir.path());
    let events = events(&profile);
    assert_eq!(events, ["samples", "cpu"], "Go's CPU profile sample types");
    let back = dir.path().join("back.pb.gz");
    tally(&["convert", path_str(&profile), "-o", path_str(&back)]);
    for (index, event) in events.iter().enumerate() {
        let (go, go_total) = pprof_top(&profile, index);
        assert!(
            go.contains_key("main.fib") && go.contains_key("main.leaf"),
            "{go:?}"
        );
        assert!(go_total > 0);
        let (mine, total) = tally_top(&profile, event);
        assert_eq!(total, go_total, "{event}: total");
        assert_eq!(nonzero(mine), go, "{event}: flat and cum per function");
        let (again, again_total) = pprof_top(&back, index);
        assert_eq!(again_total, go_total, "{event}: total after the round trip");
        assert_eq!(again, go, "{event}: flat and cum after the round trip");
    }
}

/// `tally annotate` self cost per function name of `event`, and its total.
fn self_costs(file: &Path, event: &str) -> (BTreeMap<String, i64>, i64) {
    let (rows, total) = tally_top(file, event);
    let flat = rows
        .into_iter()
        .map(|(k, v)| (k, v.0))
        .filter(|(_, v)| *v != 0)
        .collect();
    (flat, total)
}

#[test]
fn callgrind_profile_as_pprof_keeps_self_costs_and_says_stacks_are_estimated() {
    if !require(&["go"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let input = data("callgrind/mutual.default.out");
    let out = dir.path().join("mutual.pb.gz");
    tally(&["convert", path_str(&input), "-o", path_str(&out)]);
    let (go, go_total) = pprof_top(&out, 0);
    let (mine, total) = self_costs(&input, "Ir");
    assert_eq!(go_total, total, "total");
    let go_flat: BTreeMap<String, i64> = go
        .iter()
        .map(|(k, v)| (k.clone(), v.0))
        .filter(|(_, v)| *v != 0)
        .collect();
    assert_eq!(go_flat, mine, "flat per function");
    // The estimated stacks are whole stacks: callers get cum values.
    assert!(go["main"].1 > go["main"].0, "{:?}", go["main"]);
    let comments = Command::new("go")
        .args(["tool", "pprof", "-comments"])
        .arg(&out)
        .output()
        .unwrap();
    let comments = text(&comments.stdout);
    assert!(comments.contains("stacks estimated"), "{comments}");
}

/// A pprof file written by tally, decompressed.
fn pprof_bytes(dir: &Path) -> Vec<u8> {
    use std::io::Read;
    let out = dir.join("p.pb.gz");
    let input = data("callgrind/mutual.default.out");
    tally(&["convert", path_str(&input), "-o", path_str(&out)]);
    let z = std::fs::read(&out).unwrap();
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&z[..])
        .read_to_end(&mut plain)
        .unwrap();
    plain
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn damaged_pprof_is_refused_with_the_byte_offset() {
    let dir = tally_testutil::temp_dir();
    let plain = pprof_bytes(dir.path());
    let t = tally_testutil::tally!();
    // The protocol buffer cut in the middle, then gzip'd whole.
    let cut = dir.path().join("cut.pb.gz");
    std::fs::write(&cut, gzip(&plain[..plain.len() / 2])).unwrap();
    for cmd in [
        &["annotate"][..],
        &["check"],
        &["convert", "-o", "/dev/null"],
    ] {
        let mut args = cmd.to_vec();
        args.insert(1, path_str(&cut));
        let e = t.fails(&args);
        assert!(
            e.contains("cut.pb.gz: byte ") && e.contains("cut short"),
            "{cmd:?}: {e}"
        );
    }
    // The gzip stream itself cut short.
    let z = std::fs::read(dir.path().join("p.pb.gz")).unwrap();
    let short = dir.path().join("short.pb.gz");
    std::fs::write(&short, &z[..z.len() * 2 / 3]).unwrap();
    let e = t.fails(&["annotate", path_str(&short)]);
    assert!(
        e.contains("short.pb.gz: byte ") && e.contains("gzip"),
        "{e}"
    );
    // An event the profile does not have.
    let good = dir.path().join("p.pb.gz");
    let e = t.fails(&["annotate", "--show=cpu", path_str(&good)]);
    assert!(e.contains("cpu"), "{e}");
    // A sample naming a location the profile does not have: a location
    // id of 999 in the first sample.
    let mut bad = Vec::new();
    // sample_type {type: "x", unit: "y"}
    bad.extend_from_slice(&[0x0a, 0x04, 0x08, 0x01, 0x10, 0x02]);
    // sample {location_id: 999, value: 5}, at byte 6
    bad.extend_from_slice(&[0x12, 0x05, 0x08, 0xe7, 0x07, 0x10, 0x05]);
    // string_table: "", "x", "y"
    bad.extend_from_slice(&[0x32, 0x00, 0x32, 0x01, b'x', 0x32, 0x01, b'y']);
    let named = dir.path().join("bad.pb.gz");
    std::fs::write(&named, gzip(&bad)).unwrap();
    let e = t.fails(&["annotate", path_str(&named)]);
    assert!(
        e.contains("bad.pb.gz: byte 6") && e.contains("location 999"),
        "{e}"
    );
}

/// `go tool pprof -tags`: per label key, each value's share, and the
/// key's total.
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
fn go_sample_labels_survive_convert() {
    if !require(&["go"]) {
        return;
    }
    // A Go program that runs its work under two `pprof.Do` labels.
    let dir = tally_testutil::temp_dir();
    let src = dir.path().join("main.go");
    std::fs::copy(data("stacks/src/labels.go"), &src).unwrap();
    let profile = dir.path().join("labels.pb.gz");
    let run = Command::new("go")
        .args(["run", path_str(&src), path_str(&profile)])
        .env("GOPATH", dir.path().join("gopath"))
        .env("GOCACHE", dir.path().join("gocache"))
        .env("GO111MODULE", "off")
        .env("GOFLAGS", "")
        .env("GOPROXY", "off")
        .output()
        .unwrap();
    assert!(run.status.success(), "go run: {}", text(&run.stderr));
    let go = pprof_tags(&profile);
    assert!(go.contains("worker:") && go.contains("large"), "{go}");

    // Converted, the profile shows the same labels with the same values.
    let back = dir.path().join("back.pb.gz");
    tally(&["convert", path_str(&profile), "-o", path_str(&back)]);
    assert_eq!(pprof_tags(&back), go);
}
