//! The `tally` binary as a user runs it: exit codes, messages, outputs.

use std::process::{Command, Output};
use tally_testutil::{data, text};

fn tally(args: &[&str]) -> Output {
    tally_testutil::tally!().run(args)
}

#[test]
fn check_summarises_a_valgrind_profile() {
    let f = data("callgrind/workload.combo.out");
    let o = tally(&["check", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("valid Callgrind profile"), "{out}");
    assert!(out.contains("creator:    callgrind-3.19.0"), "{out}");
    assert!(out.contains("positions:  instr line"), "{out}");
    // The summary line of the file and our total agree on Ir.
    let body = std::fs::read_to_string(&f).unwrap();
    let totals = body
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .unwrap();
    let ir: u64 = totals.split_whitespace().next().unwrap().parse().unwrap();
    let shown = out
        .lines()
        .find(|l| l.trim_start().starts_with("Ir "))
        .unwrap()
        .replace(',', "");
    assert!(shown.ends_with(&ir.to_string()), "{shown} vs {ir}");
}

#[test]
fn bad_input_is_file_line_message_and_exit_1() {
    for f in std::fs::read_dir(data("bad")).unwrap() {
        let p = f.unwrap().path();
        let name = p.to_string_lossy().to_string();
        if name.ends_with(".expected") || name.ends_with(".md") {
            continue;
        }
        let o = tally(&["check", &name]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = text(&o.stderr);
        assert!(err.starts_with(&name), "{name}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(tally(&["check"]).status.code(), Some(2));
    assert_eq!(tally(&["convert", "x"]).status.code(), Some(2));
    assert_eq!(tally(&["frobnicate"]).status.code(), Some(2));
    let o = tally(&["convert", "x", "-o", "y", "--to", "pdf"]);
    assert_eq!(o.status.code(), Some(2));
    // Errors found after clap: options that do not fit, a missing program.
    let one = data("callgrind/mutual.default.out");
    let one = one.to_str().unwrap();
    for args in [
        &["sim"][..],
        &["sim", "--cache", "L2=oops", "--", "true"],
        &["annotate", "--diff", one],
        &["annotate", "--event", "nonsense", one],
        &["gprof", "-T", one],
        &["gprof", "-l", one],
        &["merge", one, "--events", "", "-o", "-"],
        // Numbers out of range or not numbers at all.
        &["gprof", "-m", "-1", one],
        &["gprof", "-w", "wide", one],
        &["gprof", "-k", "nothing", one],
        &["gprof", one, "-m"],
        &["graph", one, "-n", "101", "-o", "-"],
        &["record", "-F", "999999999999", "--", "true"],
        &["record", "-F", "0", "--", "true"],
    ] {
        let o = tally(args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "tally {args:?}: {}",
            text(&o.stderr)
        );
        assert!(!text(&o.stderr).contains("panicked"));
    }
}

#[test]
fn missing_files_are_named() {
    let o = tally(&["check", "/nonexistent/callgrind.out"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("/nonexistent/callgrind.out"));
}

#[test]
fn convert_infers_the_format_and_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let src = data("callgrind/recursion.jumps.out");
    let src = src.to_str().unwrap();
    let cg = dir.path().join("callgrind.out.1");
    let json = dir.path().join("p.json");
    let cache = dir.path().join("cachegrind.out.1.gz");
    for out in [&cg, &json, &cache] {
        let o = tally(&["convert", src, "-o", out.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    }
    let head = std::fs::read(&cg).unwrap();
    assert!(head.starts_with(b"# callgrind format\n"));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["tally_json"], 1);
    let gz = std::fs::read(&cache).unwrap();
    assert_eq!(&gz[..2], &[0x1f, 0x8b]);
    // The Cachegrind rewrite has the same totals as the original.
    let a = text(&tally(&["check", src]).stdout);
    let b = text(&tally(&["check", cache.to_str().unwrap()]).stdout);
    let ir = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("Ir "))
            .map(str::to_string)
    };
    assert_eq!(ir(&a), ir(&b));
    assert!(b.contains("valid Cachegrind profile"));
}

#[test]
fn a_failed_conversion_keeps_the_old_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("callgrind.out");
    std::fs::write(&out, b"precious").unwrap();
    let bad = data("bad/overflow.callgrind");
    let o = tally(&[
        "convert",
        bad.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
}

#[test]
fn several_files_become_parts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("all.out");
    let files: Vec<String> = (1..=4)
        .map(|i| {
            data(&format!("callgrind/threads.threads.out-0{i}"))
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let mut args = vec!["convert"];
    args.extend(files.iter().map(String::as_str));
    args.extend(["-o", out.to_str().unwrap(), "--to", "callgrind"]);
    let o = tally(&args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let c = text(&tally(&["check", out.to_str().unwrap()]).stdout);
    assert!(c.contains("parts:      4"), "{c}");
    assert!(c.contains("(thread: 4)"), "{c}");
}

#[test]
fn stdin_and_mismatched_files() {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"events: Ir\nfn=main\n1 5\n")
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(text(&o.stdout).starts_with("<stdin>: valid"));
    // A Cachegrind file and a Callgrind file with other events cannot be
    // parts of one profile.
    let a = data("cachegrind/workload.out");
    let b = data("callgrind/workload.default.out");
    let o = tally(&[
        "convert",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "-o",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("events differ"),
        "{}",
        text(&o.stderr)
    );
}
