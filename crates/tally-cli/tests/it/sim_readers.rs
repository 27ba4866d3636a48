//! The Callgrind profile `tally sim --callgrind` writes, as Valgrind's own
//! reader sees it: callgrind_annotate 3.19 loads it without a warning and
//! prints, function by function and event by event, `tally annotate`'s
//! numbers (self and inclusive). Run live (missing tools: skipped
//! locally, a failure under `CI`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tally_testutil::{path_str as s, qemu, temp_dir, text};

fn tally_path() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

/// The function table of an annotate report (callgrind_annotate's or
/// tally's): each `file:function`'s counts, `.` read as 0. The object is
/// left out and the functions of one `file:function` summed, as
/// callgrind_annotate 3.19 keys them (it merges, say, `fstat` of ld.so
/// and of libc, and names no object for costs under `fi=`).
fn table(report: &str) -> BTreeMap<String, Vec<u64>> {
    let mut out = BTreeMap::new();
    for l in report.lines() {
        if l.contains("PROGRAM TOTALS") {
            continue;
        }
        let mut nums = Vec::new();
        let mut rest = l.trim_start();
        loop {
            let (w, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            if w == "." {
                nums.push(0);
            } else if let Ok(n) = w.replace(',', "").parse::<u64>() {
                nums.push(n);
            } else if w.starts_with('(') && w.ends_with(')') || w == "(" {
                // A percentage, `( 0.47%)` split or not.
            } else if w.ends_with("%)") {
            } else {
                break;
            }
            rest = tail.trim_start();
        }
        if !nums.is_empty() && rest.contains(':') {
            let key = match rest.rfind(" [") {
                Some(k) if rest.ends_with(']') => &rest[..k],
                _ => rest,
            };
            let e: &mut Vec<u64> = out.entry(key.to_string()).or_default();
            e.resize(nums.len().max(e.len()), 0);
            for (a, b) in e.iter_mut().zip(nums) {
                *a += b;
            }
        }
    }
    out
}

#[test]
fn callgrind_annotate_reads_sims_callgrind_profile_with_tallys_numbers() {
    if !qemu::require(tally_path(), &["callgrind_annotate"]) {
        return;
    }
    let dir = temp_dir();
    let prof = dir.path().join("cg.out");
    let workload =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dcpi/real/workload");
    let o = Command::new(tally_path())
        .args([
            "sim",
            "--callgrind",
            "--branch-sim=yes",
            "--out-file",
            s(&prof),
            "--",
        ])
        .arg(&workload)
        .args(["1500", "1"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    for inclusive in ["no", "yes"] {
        let incl = format!("--inclusive={inclusive}");
        let cga = Command::new("callgrind_annotate")
            .args([&incl, "--threshold=100", "--auto=no", s(&prof)])
            .output()
            .unwrap();
        assert!(cga.status.success(), "{}", text(&cga.stderr));
        assert!(cga.stderr.is_empty(), "warnings: {}", text(&cga.stderr));
        let ours = Command::new(tally_path())
            .args(["annotate", &incl, "--threshold=100", "--auto=no", s(&prof)])
            .output()
            .unwrap();
        assert!(ours.status.success(), "{}", text(&ours.stderr));
        let (theirs, mut ours) = (table(&text(&cga.stdout)), table(&text(&ours.stdout)));
        // With inclusive costs tally shows the self costs beside them,
        // callgrind_annotate only the inclusive ones.
        let events = theirs.values().map(Vec::len).max().unwrap_or(0);
        for v in ours.values_mut() {
            v.truncate(events);
        }
        assert!(theirs.len() > 20, "{theirs:?}");
        let differ: Vec<_> = theirs
            .keys()
            .chain(ours.keys())
            // Inclusive costs: the program's own functions. (Under `fi=`
            // lines of ld.so and libc, callgrind_annotate books calls by
            // the inlined file's name, so the two key some of those
            // differently.)
            // And not the recursive `quicksort`, whose inclusive cost
            // callgrind_annotate adds up level by level (7.7 times the
            // real one here) where tally counts each instruction once.
            .filter(|k| {
                inclusive == "no" || k.contains("workload.c:") && !k.ends_with(":quicksort")
            })
            .filter(|k| theirs.get(*k) != ours.get(*k))
            .map(|k| (k, theirs.get(k), ours.get(k)))
            .collect();
        assert!(differ.is_empty(), "--inclusive={inclusive}: {differ:?}");
    }
}
