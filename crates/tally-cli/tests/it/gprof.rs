//! `tally gprof` beyond the fixture-by-fixture comparison: where tally is
//! right and GNU gprof is not, JSON, defaults, a program compiled and
//! profiled now, and gprof2dot reading tally's reports.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;
use tally_testutil::{gprof2dot, text};

fn dir() -> PathBuf {
    tally_testutil::data("gprof")
}

fn tally(args: &[&str]) -> (String, String, i32) {
    let mut a = vec!["gprof"];
    a.extend_from_slice(args);
    let out = tally_testutil::tally!().in_dir(dir()).run(&a);
    (
        text(&out.stdout),
        text(&out.stderr),
        out.status.code().unwrap_or(-1),
    )
}

/// The flat profile's row of `name`: (self seconds, calls).
fn flat_row(report: &str, name: &str) -> Option<(f64, u64)> {
    report
        .split('\x0c')
        .next()?
        .lines()
        .find(|l| l.trim_end().ends_with(&format!("  {name}")))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let calls = if f.len() > 6 {
                f[3].parse().unwrap_or(0)
            } else {
                0
            };
            (f[2].parse().unwrap(), calls)
        })
}

#[test]
fn gcc_clones_keep_their_own_entry() {
    // GNU gprof 2.40 drops `fill.constprop.0` (its name check runs on into
    // the next names of the string table) and gives its time and calls to
    // the function before it, `checksum`.
    let (gnu, _, code) = tally(&["-b", "--gnu-compatible", "multi.O2", "multi.O2.gmon"]);
    assert_eq!(code, 0);
    let (ours, _, code) = tally(&["-b", "multi.O2", "multi.O2.gmon"]);
    assert_eq!(code, 0);
    assert!(flat_row(&gnu, "fill.constprop.0").is_none());
    let (clone_time, clone_calls) = flat_row(&ours, "fill.constprop.0").expect("clone listed");
    let (gnu_time, gnu_calls) = flat_row(&gnu, "checksum").expect("checksum");
    let (our_time, our_calls) = flat_row(&ours, "checksum").expect("checksum");
    assert!(
        clone_calls > 0 && clone_time > 0.0,
        "{clone_time} {clone_calls}"
    );
    assert_eq!(our_calls + clone_calls, gnu_calls);
    assert!(
        (our_time + clone_time - gnu_time).abs() < 0.015,
        "{our_time} {clone_time} {gnu_time}"
    );
}

#[test]
fn static_call_graph_finds_backward_calls() {
    // cold_path() is before main() and cold_after() after it; both calls
    // are never made. GNU gprof reads the call displacement unsigned and
    // finds only the forward one in 64-bit code.
    let arc = |report: &str, callee: &str| {
        report
            .lines()
            .any(|l| l.contains("0/0") && l.contains(callee) && !l.starts_with('['))
    };
    let (gnu, _, _) = tally(&[
        "-b",
        "-c",
        "--gnu-compatible",
        "cycles.O0",
        "cycles.O0.gmon",
    ]);
    let (ours, _, _) = tally(&["-b", "-c", "cycles.O0", "cycles.O0.gmon"]);
    assert!(arc(&gnu, "cold_after") && !arc(&gnu, "cold_path"), "{gnu}");
    assert!(
        arc(&ours, "cold_after") && arc(&ours, "cold_path"),
        "{ours}"
    );
}

#[test]
fn json_has_the_text_reports_rows() {
    let (text, _, _) = tally(&["-b", "cycles.O0", "cycles.O0.gmon"]);
    let (json, _, code) = tally(&["-b", "--json", "cycles.O0", "cycles.O0.gmon"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&json).expect("valid JSON");
    let flat = doc["flat"].as_array().expect("flat");
    let text_names: Vec<&str> = text
        .split('\x0c')
        .next()
        .unwrap()
        .lines()
        .skip_while(|l| !l.starts_with(" time"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    let json_names: Vec<&str> = flat.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(text_names, json_names);
    let hot = flat.iter().find(|r| r["name"] == "hot_loop").unwrap();
    assert_eq!(hot["calls"], 1);
    let graph = doc["call_graph"].as_array().expect("call graph");
    let cycles: Vec<&Value> = graph
        .iter()
        .filter(|e| e.get("members").is_some())
        .collect();
    assert_eq!(cycles.len(), 2);
    let members = |c: &Value| -> Vec<String> {
        let mut m: Vec<String> = c["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["name"].as_str().unwrap().to_owned())
            .collect();
        m.sort();
        m
    };
    let sets: Vec<Vec<String>> = cycles.iter().map(|c| members(c)).collect();
    assert!(sets.contains(&vec!["is_even".to_owned(), "is_odd".to_owned()]));
    assert!(sets.contains(&vec![
        "tri_a".to_owned(),
        "tri_b".to_owned(),
        "tri_c".to_owned()
    ]));
    let main = graph.iter().find(|e| e["name"] == "main").unwrap();
    assert_eq!(main["spontaneous"], true);
}

#[test]
fn defaults_are_a_out_and_gmon_out() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(dir().join("cycles.O0"), tmp.path().join("a.out")).unwrap();
    std::fs::copy(dir().join("cycles.O0.gmon"), tmp.path().join("gmon.out")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tally"))
        .current_dir(tmp.path())
        .args(["gprof", "-b"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let expected = std::fs::read_to_string(dir().join("cycles.O0.b.txt")).unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn long_and_attached_options_agree() {
    let (a, _, _) = tally(&["-b", "-phot_loop", "cycles.O0", "cycles.O0.gmon"]);
    let (b, _, _) = tally(&[
        "--brief",
        "--flat-profile=hot_loop",
        "cycles.O0",
        "cycles.O0.gmon",
    ]);
    assert_eq!(a, b);
    assert!(a.contains("hot_loop") && !a.contains("  mix\n"), "{a}");
    let (_, err, code) = tally(&["-k", "cycles.O0"]);
    assert_ne!(code, 0);
    assert!(err.contains("FROM/TO"), "{err}");
    let (_, err, code) = tally(&["--no-such-option"]);
    assert_ne!(code, 0);
    assert!(err.contains("unknown option"), "{err}");
}

#[test]
fn a_program_profiled_now_matches_gnu_gprof() {
    if !tally_testutil::require(&["gcc", "gprof"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("p.c");
    std::fs::write(
        &src,
        r#"
#include <stdio.h>
static volatile unsigned long sink;
__attribute__((noinline)) static unsigned long leaf(unsigned long x) {
    for (int i = 0; i < 2000; i++) x = x * 6364136223846793005UL + i;
    return x;
}
__attribute__((noinline)) unsigned long down(unsigned n);
__attribute__((noinline)) unsigned long up(unsigned n) { return n ? leaf(n) + down(n - 1) : 0; }
__attribute__((noinline)) unsigned long down(unsigned n) { return n ? leaf(n) ^ up(n - 1) : 1; }
__attribute__((noinline)) unsigned long rec(unsigned n) { return n < 2 ? leaf(n) : rec(n - 1) + rec(n - 2); }
int main(void) {
    for (int k = 0; k < 300; k++) sink += up(200);
    sink += rec(18);
    printf("%lu\n", sink);
    return 0;
}
"#,
    )
    .unwrap();
    // A position-independent executable (gcc's default here) and one at
    // a fixed address.
    for pie in ["-pie", "-no-pie"] {
        let ok = Command::new("gcc")
            .current_dir(tmp.path())
            .args(["-pg", "-g", "-O1", pie, "p.c", "-o", "p"])
            .status()
            .unwrap()
            .success();
        assert!(ok, "gcc failed");
        assert!(
            Command::new("./p")
                .current_dir(tmp.path())
                .output()
                .unwrap()
                .status
                .success()
        );
        for args in [&["-b"][..], &["-b", "-l"], &["-b", "-z"], &["-b", "-A"]] {
            let gnu = Command::new("gprof")
                .current_dir(tmp.path())
                .env("LC_ALL", "C")
                .args(args)
                .args(["p", "gmon.out"])
                .output()
                .unwrap();
            let ours = Command::new(env!("CARGO_BIN_EXE_tally"))
                .current_dir(tmp.path())
                .arg("gprof")
                .arg("--gnu-compatible")
                .args(args)
                .args(["p", "gmon.out"])
                .output()
                .unwrap();
            assert_eq!(
                String::from_utf8_lossy(&ours.stdout),
                String::from_utf8_lossy(&gnu.stdout),
                "tally gprof {args:?} ({pie})"
            );
        }
    }
}

fn dot_of(report: &str) -> String {
    use std::io::Write;
    let mut cmd = gprof2dot().expect("gprof2dot");
    let mut child = cmd
        .args(["-f", "prof"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("gprof2dot");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(report.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn gprof2dot_reads_tally_as_it_reads_gnu_gprof() {
    if gprof2dot().is_none() {
        tally_testutil::skip("gprof2dot");
        return;
    }
    for bin in [
        "cycles.O0",
        "cycles.O2",
        "deep.O0",
        "multi.O0",
        "multi.O2",
        "demangle.O1",
    ] {
        let gnu = std::fs::read_to_string(dir().join(format!("{bin}.full.txt")))
            .or_else(|_| std::fs::read_to_string(dir().join(format!("{bin}.b.txt"))))
            .unwrap();
        let brief = !dir().join(format!("{bin}.full.txt")).exists();
        let mut args = vec!["--gnu-compatible"];
        if brief {
            args.push("-b");
        }
        let gmon = format!("{bin}.gmon");
        args.extend([bin, gmon.as_str()]);
        let (ours, _, code) = tally(&args);
        assert_eq!(code, 0);
        assert_eq!(dot_of(&ours), dot_of(&gnu), "{bin}");
    }
}

#[test]
fn block_counts_annotate_like_gnu_gprof() {
    // No current compiler writes basic-block counts, so the test adds them
    // to a real profile: at every line-table row of cycles.O0, some twice
    // (their counts add up), some inside a row (two blocks on one line),
    // some with count 0.
    if !tally_testutil::require(&["gprof"]) {
        return;
    }
    use tally_formats::gmon::{BlockCount, Gmon, Layout};
    let obj = tally_symbols::ObjectFile::open(&dir().join("cycles.O0")).unwrap();
    let text = obj.section(".text").unwrap().clone();
    let mut gmon = Gmon::read_file(&dir().join("cycles.O0.gmon"), Layout::X86_64).unwrap();
    let rows = obj.line_rows(text.address, text.end());
    assert!(rows.len() > 50);
    for (i, &(addr, len, _, _)) in rows.iter().enumerate() {
        let count = (i as u64 * 7919) % 1000;
        gmon.blocks.push(BlockCount {
            address: addr,
            count,
        });
        if i % 5 == 0 {
            gmon.blocks.push(BlockCount {
                address: addr,
                count: 3,
            });
        }
        if i % 7 == 0 && len > 2 {
            gmon.blocks.push(BlockCount {
                address: addr + 1,
                count: count / 2,
            });
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("blocks.gmon");
    gmon.write_file(&path, Layout::X86_64).unwrap();
    for args in [
        &["-b", "-l", "-A"][..],
        &["-b", "-l", "-A", "-x"],
        &["-b", "-l", "-A", "-m", "500"],
    ] {
        let gnu = Command::new("gprof")
            .current_dir(dir())
            .env("LC_ALL", "C")
            .args(args)
            .arg("cycles.O0")
            .arg(&path)
            .output()
            .unwrap();
        let gnu = String::from_utf8_lossy(&gnu.stdout).into_owned();
        assert!(
            gnu.contains(','),
            "the test should put several blocks on a line"
        );
        let mut all = vec!["--gnu-compatible"];
        all.extend_from_slice(args);
        all.push("cycles.O0");
        let p = path.to_str().unwrap();
        all.push(p);
        let (ours, err, code) = tally(&all);
        assert_eq!(code, 0, "{err}");
        assert_eq!(ours, gnu, "tally gprof {args:?}");
    }
}
