//! A profile cut short is called truncated by every command that reads
//! it, with the share of the stated summary its costs reach; intact
//! profiles (every fixture, merge and diff outputs) are not.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_testutil::{data_dir, path_str, text};

fn tally(args: &[&str]) -> Output {
    tally_testutil::tally!().run(args)
}

/// Compiles `tests/data/src/workload.c` and profiles it with Callgrind.
fn profile(dir: &Path, n: &str) -> PathBuf {
    let bin = dir.join("workload");
    if !bin.is_file() {
        let ok = Command::new("gcc")
            .args(["-g", "-O1", "-o"])
            .arg(&bin)
            .arg(data_dir().join("src/workload.c"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "gcc failed");
    }
    let out = dir.join(format!("callgrind.out.{n}"));
    let ok = Command::new("valgrind")
        .args(["-q", "--tool=callgrind"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&bin)
        .arg(n)
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "valgrind failed");
    out
}

fn truncated(o: &Output) -> bool {
    text(&o.stderr).contains("looks truncated")
}

#[test]
fn a_cut_profile_is_called_truncated_by_check_and_annotate() {
    if !tally_testutil::require(&["gcc", "valgrind"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let whole = profile(dir.path(), "400");
    let bytes = std::fs::read(&whole).unwrap();
    let lines: Vec<&[u8]> = bytes.split_inclusive(|&b| b == b'\n').collect();
    // 10, 50 and 90 % of the lines, and a cut right after a `calls=` line
    // (past the middle), before its cost line.
    let after_call = lines.len() / 2
        + lines[lines.len() / 2..]
            .iter()
            .position(|l| l.starts_with(b"calls="))
            .expect("a call in the second half")
        + 1;
    for (pc, n) in [10, 50, 90]
        .map(|pc| (pc, lines.len() * pc / 100))
        .into_iter()
        .chain([(0, after_call)])
    {
        let cut = dir.path().join(format!("cut{pc}"));
        std::fs::write(&cut, lines[..n].concat()).unwrap();
        let c = path_str(&cut);
        let check = tally(&["check", c]);
        assert!(truncated(&check), "check, {pc} %: {}", text(&check.stderr));
        assert!(text(&check.stdout).contains(": truncated Callgrind profile"));
        assert!(
            text(&check.stderr).contains("its costs add up to"),
            "{pc} %: {}",
            text(&check.stderr)
        );
        let strict = tally(&["check", "--strict", c]);
        assert_eq!(strict.status.code(), Some(1), "check --strict, {pc} %");
        let annotate = tally(&["annotate", c]);
        assert!(
            truncated(&annotate),
            "annotate, {pc} %: {}",
            text(&annotate.stderr)
        );
        assert_eq!(
            text(&annotate.stderr).matches("looks truncated").count(),
            1,
            "once per file"
        );
        // One rule in every command: the same warning line, and the
        // command goes on.
        let warning = text(&check.stderr)
            .lines()
            .find(|l| l.contains("looks truncated"))
            .expect("check warns")
            .to_owned();
        let out = dir.path().join(format!("cut{pc}.svg"));
        let dot = dir.path().join(format!("cut{pc}.dot"));
        for args in [
            vec!["flame", c, "-o", path_str(&out)],
            vec!["graph", c, "-o", path_str(&dot)],
            vec!["gprof", "-b", c],
            vec!["convert", c, "-o", "-"],
        ] {
            let o = tally(&args);
            assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
            assert!(
                text(&o.stderr).lines().any(|l| l == warning),
                "{args:?}: {}",
                text(&o.stderr)
            );
        }
    }
    // The intact profile, and what merge and diff write, are not.
    let other = profile(dir.path(), "600");
    let (w, o) = (path_str(&whole), path_str(&other));
    let merged = dir.path().join("merged");
    let diffed = dir.path().join("diffed");
    assert!(
        tally(&["merge", w, o, "-o", path_str(&merged)])
            .status
            .success()
    );
    assert!(
        tally(&["diff", w, o, "-o", path_str(&diffed)])
            .status
            .success()
    );
    for f in [w, o, path_str(&merged), path_str(&diffed)] {
        let check = tally(&["check", "--strict", f]);
        assert!(check.status.success(), "{f}: {}", text(&check.stderr));
        assert!(!truncated(&check), "{f}");
    }
}

#[test]
fn a_cut_cachegrind_profile_lacks_its_summary() {
    let dir = tally_testutil::temp_dir();
    let bytes = std::fs::read(data_dir().join("cachegrind/workload.out")).unwrap();
    let cut = dir.path().join("cachegrind.out.cut");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let o = tally(&["check", path_str(&cut)]);
    assert!(truncated(&o), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("`summary:`"));
}

#[test]
fn no_fixture_is_called_truncated() {
    let mut n = 0;
    for dir in ["callgrind", "cachegrind", "other", "merge"] {
        let Ok(entries) = std::fs::read_dir(data_dir().join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.contains("annotate") || name.ends_with(".md") || !p.is_file() {
                continue;
            }
            let o = tally(&["check", "-q", path_str(&p)]);
            // A truncated file fails check too: look before skipping
            // what is not a profile (sources, scripts).
            assert!(!truncated(&o), "{name}: {}", text(&o.stderr));
            if !o.status.success() {
                continue;
            }
            n += 1;
            assert!(!truncated(&o), "{name}: {}", text(&o.stderr));
        }
    }
    assert!(n > 40, "only {n} fixtures checked");
}
