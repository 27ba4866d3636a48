//! `tally sim` against Cachegrind on a real program (the committed
//! `tests/data/dcpi/real/workload`, built from tests/data/src/workload.c):
//!
//! - a Lackey trace (with Valgrind's load addresses, `-v -v`) gives
//!   Cachegrind's nine cache events exactly, per function and in total,
//!   for two machines simulated in one pass;
//! - the native path (QEMU and tally's plugin) gives the same Ir, Dr and
//!   Dw per function for the program's own functions and misses within
//!   1 %, and Ir totals within the difference the dynamic loader and libc's
//!   CPU dispatch make;
//! - the profiles are read by cg_annotate and callgrind_annotate;
//! - bad input: geometry, missing program, truncated traces, a crash and
//!   a kill.
//!
//! Valgrind, QEMU and the plugin are installed and built by CI; elsewhere a
//! test without them says so and checks nothing live (under `CI` it fails).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_testutil::{qemu, require};

fn workload() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dcpi/real/workload")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Runs a command with the fixed environment the comparisons need: the
/// environment strings sit on the stack, so another one moves addresses.
fn clean(cmd: &str, args: &[&str]) -> Output {
    Command::new("env")
        .args(["-i", "PATH=/usr/bin:/bin", "LC_ALL=C", cmd])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

fn tally_path() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

fn tally(args: &[&str]) -> Output {
    clean(tally_path(), args)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A Cachegrind file's events and counts summed per function name.
fn per_function(p: &Path) -> (Vec<String>, BTreeMap<String, Vec<u64>>) {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut events = Vec::new();
    let mut f = String::new();
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for l in text.lines() {
        if let Some(e) = l.strip_prefix("events:") {
            events = e.split_whitespace().map(String::from).collect();
        } else if let Some(n) = l.strip_prefix("fn=") {
            f = n.to_string();
        } else if l.starts_with(|c: char| c.is_ascii_digit()) {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            let e = out
                .entry(f.clone())
                .or_insert_with(|| vec![0; events.len()]);
            for (a, b) in e.iter_mut().zip(v) {
                *a += b;
            }
        }
    }
    (events, out)
}

fn summary(p: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(p).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// `1234567` as `1,234,567`, as the summary prints counts.
fn commas(n: u64) -> String {
    tally_report::thousands(i128::from(n))
}

const GEO_A: [&str; 3] = ["--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64"];
const GEO_B: [&str; 3] = ["--I1=4096,2,32", "--D1=2048,4,32", "--LL=65536,8,32"];

fn cachegrind(dir: &Path, name: &str, geo: &[&str], args: &[&str]) -> PathBuf {
    let out = dir.join(name);
    let mut a = vec!["-q", "--tool=cachegrind", "--branch-sim=yes"];
    a.extend_from_slice(geo);
    let of = format!("--cachegrind-out-file={}", out.display());
    a.push(&of);
    let w = workload();
    a.push(s(&w));
    a.extend_from_slice(args);
    let o = clean("valgrind", &a);
    assert!(o.status.success(), "cachegrind: {}", stderr(&o));
    out
}

#[test]
fn lackey_trace_gives_cachegrinds_counts_per_function() {
    if !require(&["valgrind"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace");
    let log = format!("--log-file={}", trace.display());
    let o = clean(
        "valgrind",
        &[
            "-v",
            "-v",
            "--tool=lackey",
            "--trace-mem=yes",
            &log,
            s(&workload()),
            "1500",
            "1",
        ],
    );
    assert!(o.status.success(), "lackey: {}", stderr(&o));
    let cg_a = cachegrind(dir.path(), "cg.a", &GEO_A, &["1500", "1"]);
    let cg_b = cachegrind(dir.path(), "cg.b", &GEO_B, &["1500", "1"]);

    // Both machines in one pass over the trace.
    let ours = dir.path().join("sim.out");
    let config = format!("b: {}", GEO_B.join(" "));
    let mut args = vec!["sim", "--lackey", s(&trace), "--branch-sim=yes"];
    args.extend_from_slice(&GEO_A);
    args.extend_from_slice(&["--config", &config, "--out-file", s(&ours)]);
    let o = tally(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let ours_b = dir.path().join("sim.out.b");
    for (cg, sim) in [(&cg_a, &ours), (&cg_b, &ours_b)] {
        let (ev, want) = per_function(cg);
        let (ev2, got) = per_function(sim);
        assert_eq!(ev, ev2);
        // The nine cache events: equal for every function and in total.
        for (f, w) in &want {
            let g = got
                .get(f)
                .unwrap_or_else(|| panic!("{f} missing from {}", sim.display()));
            assert_eq!(&g[..9], &w[..9], "{f}: {}", sim.display());
        }
        assert_eq!(want.len(), got.len(), "functions of {}", sim.display());
        assert_eq!(summary(cg)[..9], summary(sim)[..9]);
        // Indirect branches are the same instructions; conditional ones
        // differ where Valgrind's JIT turns a short if-then into a guarded
        // move (no side exit, so Cachegrind counts no branch), see
        // docs/sim.md.
        let (cs, ts) = (summary(cg), summary(sim));
        assert!(cs[11].abs_diff(ts[11]) <= 2, "Bi {} vs {}", cs[11], ts[11]);
        assert!(
            ts[9] >= cs[9] && ts[9] - cs[9] < cs[9] / 10,
            "Bc {} vs {}",
            cs[9],
            ts[9]
        );
    }
    // The end summary is Cachegrind's.
    let text = stderr(&o);
    let ir = format!("I   refs:      {}", commas(summary(&cg_a)[0]));
    assert!(text.contains(&ir), "{text}");
    assert!(text.contains("configuration b"), "{text}");
}

/// Functions defined in the workload program itself.
const OWN: [&str; 12] = [
    "main",
    "cmp_str",
    "count_vowels",
    "make_word",
    "matmul_trace",
    "partition",
    "binary_search",
    "table_put",
    "fnv1a",
    "rng_next",
    "insertion_sort",
    "quicksort",
];

/// The miss and branch events compared per function.
const MISSES: [&str; 9] = [
    "I1mr", "D1mr", "D1mw", "DLmr", "DLmw", "Bc", "Bcm", "Bi", "Bim",
];

#[test]
fn native_run_matches_cachegrind() {
    if !qemu::require_beside(tally_path(), &["valgrind"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cg = cachegrind(dir.path(), "cg", &GEO_A, &["1500", "1"]);
    let ours = dir.path().join("sim.out");
    let mut args = vec!["sim", "--branch-sim=yes", "--out-file", s(&ours)];
    args.extend_from_slice(&GEO_A);
    let w = workload();
    args.extend_from_slice(&["--", s(&w), "1500", "1"]);
    let o = tally(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let (ev, want) = per_function(&cg);
    let (_, got) = per_function(&ours);
    let ix = |e: &str| ev.iter().position(|x| x == e).unwrap();
    for f in OWN {
        let (w, g) = (&want[f], &got[f]);
        for e in ["Ir", "Dr", "Dw"] {
            assert_eq!(w[ix(e)], g[ix(e)], "{f} {e}");
        }
        // Misses per function: within 1 %, or a handful where the counts
        // are tiny (the stack sits elsewhere under QEMU, so a frame can
        // straddle one more or one fewer line).
        for e in MISSES {
            let (a, b) = (w[ix(e)], g[ix(e)]);
            assert!(
                a.abs_diff(b) <= (a / 100).max(5),
                "{f} {e}: Cachegrind {a}, tally {b}"
            );
        }
    }
    // The program's misses together: within 1 % per event.
    for e in MISSES {
        let a: u64 = OWN.iter().map(|f| want[*f][ix(e)]).sum();
        let b: u64 = OWN.iter().map(|f| got[*f][ix(e)]).sum();
        assert!(
            a.abs_diff(b) <= (a / 100).max(5),
            "{e} of the program's functions: Cachegrind {a}, tally {b}"
        );
    }
    // In total: the loader and libc's CPU dispatch run differently under
    // QEMU (another CPU model), a few per cent of this short run.
    let (cs, ts) = (summary(&cg), summary(&ours));
    assert!(
        cs[0].abs_diff(ts[0]) < cs[0] / 20,
        "Ir {} vs {}",
        cs[0],
        ts[0]
    );

    // cg_annotate reads the profile and agrees on the total.
    let a = Command::new("cg_annotate").arg(&ours).output().unwrap();
    assert!(a.status.success(), "{}", stderr(&a));
    let text = String::from_utf8_lossy(&a.stdout);
    assert!(text.contains(&commas(ts[0])), "{text}");
}

/// Without cache and branch simulation the plugin records no accesses;
/// the instructions counted are the same, function by function, and the
/// profile has `Ir` only, as Cachegrind's `--cache-sim=no` writes it.
#[test]
fn counts_without_simulation_need_no_accesses() {
    if !qemu::require_beside(tally_path(), &[]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let w = workload();
    let run = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let mut args = vec!["sim", "--out-file", s(&out)];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", s(&w), "1500", "1"]);
        let o = tally(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        per_function(&out)
    };
    let (ev, full) = run("full.out", &[]);
    let (ev_ir, ir) = run("ir.out", &["--cache-sim=no"]);
    assert_eq!(ev_ir, ["Ir"]);
    assert_eq!(ev[0], "Ir");
    assert_eq!(full.len(), ir.len());
    for (f, v) in &full {
        assert_eq!(ir.get(f).map(|c| c[0]), Some(v[0]), "Ir of {f}");
    }
}

#[test]
fn callgrind_output_has_the_calls() {
    if !qemu::require_beside(tally_path(), &["valgrind"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = dir.path().join("cg.out");
    let o = tally(&[
        "sim",
        "--callgrind",
        "--out-file",
        s(&ours),
        "--",
        s(&workload()),
        "1500",
        "1",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let vg = dir.path().join("vg.out");
    let of = format!("--callgrind-out-file={}", vg.display());
    let v = clean(
        "valgrind",
        &["-q", "--tool=callgrind", &of, s(&workload()), "1500", "1"],
    );
    assert!(v.status.success(), "{}", stderr(&v));
    // callgrind_annotate reads it without complaint.
    let a = Command::new("callgrind_annotate")
        .args(["--inclusive=yes", s(&ours)])
        .output()
        .unwrap();
    assert!(a.status.success() && a.stderr.is_empty(), "{}", stderr(&a));
    // Inclusive costs of the program's functions against Callgrind's.
    let incl = |p: &Path| -> BTreeMap<String, u64> {
        let o = Command::new(tally_path())
            .args([
                "annotate",
                "--inclusive=yes",
                "--show=Ir",
                "--threshold=100",
                "--auto=no",
                s(p),
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let n: u64 = w.next()?.replace(',', "").parse().ok()?;
                let name = l
                    .split("workload.c:")
                    .nth(1)?
                    .split(' ')
                    .next()?
                    .to_string();
                Some((name, n))
            })
            .collect()
    };
    let (mine, theirs) = (incl(&ours), incl(&vg));
    for f in [
        "main",
        "count_vowels",
        "matmul_trace",
        "make_word",
        "table_put",
    ] {
        let (a, b) = (theirs[f], mine[f]);
        assert!(a.abs_diff(b) <= a / 500, "{f}: Callgrind {a}, tally {b}");
    }
}

#[test]
fn bad_input_is_reported_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let e = stderr(&tally(&["sim", "--D1=1000,3,64", "--lackey", "/dev/null"]));
    assert!(e.contains("invalid D1 cache") && e.contains("1000"), "{e}");
    let e = stderr(&tally(&[
        "sim",
        "--cache",
        "L2=3000,2,64",
        "--lackey",
        "/dev/null",
    ]));
    assert!(e.contains("L2"), "{e}");
    let e = stderr(&tally(&["sim", "--policy=mru", "--lackey", "/dev/null"]));
    assert!(e.contains("mru"), "{e}");
    let e = stderr(&tally(&["sim", "--", "/no/such/program"]));
    assert!(
        e.contains("/no/such/program") && e.contains("no such program"),
        "{e}"
    );
    // A Lackey trace cut inside a line.
    let cut = dir.path().join("cut.trace");
    std::fs::write(&cut, "I  04011a0,4\n L 1ffefffd08,8\nI  04011a").unwrap();
    let o = tally(&[
        "sim",
        "--lackey",
        s(&cut),
        "--out-file",
        s(&dir.path().join("x")),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("cut.trace") && e.contains("line 3"), "{e}");
    // A tally trace stream cut inside a record: the profile so far is
    // written and marked incomplete.
    let mut bytes = b"TALLYTR1".to_vec();
    bytes.push(1);
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&0x401000u64.to_le_bytes());
    bytes.push(1);
    bytes.push(0x90);
    for _ in 0..3 {
        bytes.push(2);
        bytes.extend_from_slice(&0u32.to_le_bytes());
    }
    bytes.extend_from_slice(&[3, 0, 0x10]);
    let stream = dir.path().join("cut.stream");
    std::fs::write(&stream, &bytes).unwrap();
    let out = dir.path().join("cut.out");
    let o = tally(&["sim", "--trace", s(&stream), "--out-file", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("byte 38"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("desc: incomplete:"), "{text}");
    assert_eq!(summary(&out)[0], 3);
    let e = stderr(&tally(&["sim", "--trace", s(&cut)]));
    assert!(e.contains("not a tally trace"), "{e}");
}

/// The plugin says why it will not load on standard error, not only in
/// QEMU's log.
#[test]
fn the_plugin_says_why_it_refuses() {
    // QEMU runs here without tally, in the test's environment.
    if !qemu::require(tally_path(), &[]) {
        return;
    }
    let plugin = qemu::plugin(tally_path()).expect("the plugin, required above");
    for (arg, says) in [
        ("bogus=1", "unknown argument `bogus=1`"),
        ("fd=x", "bad argument `fd=x`"),
        ("free=5", "no output"),
        ("mem=maybe", "bad argument `mem=maybe` (mem=on or mem=off)"),
    ] {
        let o = Command::new("qemu-x86_64")
            .arg("-plugin")
            .arg(format!("{},{arg}", plugin.display()))
            .arg("/bin/true")
            .output()
            .unwrap();
        assert!(!o.status.success());
        let e = stderr(&o);
        assert!(e.contains(&format!("tally-qemu-plugin: {says}")), "{e}");
    }
}

#[test]
fn a_crash_or_a_kill_leaves_an_incomplete_profile() {
    if !qemu::require_beside(tally_path(), &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("crash.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n#include <string.h>\nstatic volatile int sink;\n\
         __attribute__((noinline)) int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += i * i; sink = s; return s; }\n\
         int main(int argc, char **argv) {\n  sink = work(atoi(argv[1]));\n\
         if (!strcmp(argv[2], \"crash\")) { int *p = 0; *p = 1; }\n\
         if (!strcmp(argv[2], \"loop\")) for (;;) sink = work(1000);\n  return 3;\n}\n",
    )
    .unwrap();
    let prog = dir.path().join("crash");
    let g = Command::new("gcc")
        .args(["-O1", "-g", "-o", s(&prog), s(&src)])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", stderr(&g));

    // The program's status is passed on; a normal exit is complete.
    let out = dir.path().join("ok.out");
    let o = tally(&["sim", "--out-file", s(&out), "--", s(&prog), "1000", "exit"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        !std::fs::read_to_string(&out)
            .unwrap()
            .contains("incomplete")
    );

    // A crash: the profile is written, marked, and its counts include
    // `work` (1000 iterations ran before the crash).
    let out = dir.path().join("crash.out");
    let o = tally(&[
        "sim",
        "--out-file",
        s(&out),
        "--",
        s(&prog),
        "1000",
        "crash",
    ]);
    assert_eq!(o.status.code(), Some(139), "{}", stderr(&o));
    assert!(stderr(&o).contains("signal 11"), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("desc: incomplete: the program was killed by signal 11"));
    let (_, f) = per_function(&out);
    assert!(f["work"][0] > 1000, "{:?}", f.get("work"));

    // Killed from outside while running.
    let out = dir.path().join("kill.out");
    let child = Command::new(tally_path())
        .args(["sim", "--out-file", s(&out), "--", s(&prog), "10", "loop"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SIGTERM to tally: passed on to the program.
    let k = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(128 + 15), "{}", stderr(&o));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("desc: incomplete: the program was killed by signal 15"));
    let (_, f) = per_function(&out);
    assert!(f["work"][0] > 10_000);
}

/// The plugin simulates D1 beside the program (the default with one
/// machine); the profile is the one tally writes simulating every access
/// itself (`--plugin-d1=no`): on the workload, with another policy, and on
/// a program with threads (where the plugin hands D1 over to tally when
/// the second thread starts).
#[test]
fn the_plugins_d1_gives_the_same_profile() {
    if !qemu::require_beside(tally_path(), &["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let threads = dir.path().join("threads");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/src/threads.c");
    let g = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o", s(&threads), s(&src)])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", stderr(&g));
    let w = workload();
    let body = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("cmd:") && !l.starts_with("desc:"))
            .map(str::to_owned)
            .collect()
    };
    let cases: [(&str, Vec<&str>); 3] = [
        (
            "workload",
            vec!["--branch-sim=yes", "--", s(&w), "1500", "1"],
        ),
        (
            "fifo",
            vec!["--policy=fifo", "--D1=8192,4,64", "--", s(&w), "300", "1"],
        ),
        ("threads", vec!["--branch-sim=yes", "--", s(&threads)]),
    ];
    for (name, run) in cases {
        let mut outs = Vec::new();
        for d1 in ["yes", "no"] {
            let out = dir.path().join(format!("{name}.{d1}.out"));
            let flag = format!("--plugin-d1={d1}");
            let mut args = vec!["sim", flag.as_str(), "--out-file", s(&out)];
            args.extend_from_slice(&run);
            let o = tally(&args);
            assert!(o.status.success(), "{name}: {}", stderr(&o));
            outs.push(body(&out));
        }
        if name == "threads" {
            // Several threads: how long they wait for each other (and so
            // the counts of the waiting code, and the misses) changes from
            // run to run; the work each thread does does not.
            let (ev, a) = per_function(&dir.path().join("threads.yes.out"));
            let (_, b) = per_function(&dir.path().join("threads.no.out"));
            for f in ["is_prime", "collatz_len", "reverse"] {
                for e in ["Ir", "Dr", "Dw"] {
                    let k = ev.iter().position(|x| x == e).unwrap();
                    assert_eq!(a[f][k], b[f][k], "{name}: {f} {e}");
                }
            }
        } else {
            assert_eq!(outs[0], outs[1], "{name}");
        }
    }
}
