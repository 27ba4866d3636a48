//! `tally sim` on a program that forks and execs, children not followed:
//! only the first process is profiled (up to an exec), its counts
//! Cachegrind's, and a warning says the program forked and exec'd.
//! Programs are compiled here with gcc; Cachegrind runs live (missing
//! tools: skipped locally, a failure under `CI`).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tally_testutil::{path_str as s, qemu, temp_dir, text};

fn tally_path() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

/// The Ir of each function of a Cachegrind-format file.
fn ir_per_function(p: &Path) -> BTreeMap<String, u64> {
    let t = std::fs::read_to_string(p).unwrap();
    let mut f = String::new();
    let mut out = BTreeMap::new();
    for l in t.lines() {
        if let Some(n) = l.strip_prefix("fn=") {
            f = n.to_string();
        } else if l.starts_with(|c: char| c.is_ascii_digit()) {
            let ir: u64 = l.split_whitespace().nth(1).unwrap().parse().unwrap();
            *out.entry(f.clone()).or_insert(0) += ir;
        }
    }
    out
}

#[test]
fn a_forking_program_is_profiled_in_its_first_process_with_a_warning() {
    if !qemu::require(tally_path(), &["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let c = dir.path().join("forker.c");
    std::fs::write(
        &c,
        "#include <unistd.h>\n#include <sys/wait.h>\nstatic volatile long sink;\n\
         __attribute__((noinline)) long parent_work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i; sink = s; return s; }\n\
         __attribute__((noinline)) long child_work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i ^ 3; sink = s; return s; }\n\
         int main(int argc, char **argv) {\n  parent_work(100000);\n  pid_t p = fork();\n\
           if (p == 0) { child_work(300000); execv(argv[1], argv + 1); _exit(1); }\n\
           int st; waitpid(p, &st, 0);\n  parent_work(50000);\n  return 0;\n}\n",
    )
    .unwrap();
    let prog = dir.path().join("forker");
    let g = Command::new("gcc")
        .args(["-O1", "-g", "-o", s(&prog), s(&c)])
        .output()
        .unwrap();
    assert!(g.status.success(), "{}", text(&g.stderr));

    let out = dir.path().join("tally.out");
    let o = Command::new(tally_path())
        .args(["sim", "--out-file", s(&out), "--", s(&prog), "/bin/true"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains("forked 1 time(s) and called execve 1 time(s)"),
        "{err}"
    );
    let vg = dir.path().join("vg.out.%p");
    let v = Command::new("valgrind")
        .args([
            "-q",
            "--tool=cachegrind",
            "--trace-children=no",
            &format!("--cachegrind-out-file={}", vg.display()),
            s(&prog),
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", text(&v.stderr));
    let theirs: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains("vg.out."))
        .collect();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    let (ours, theirs) = (ir_per_function(&out), ir_per_function(&theirs[0]));
    assert_eq!(ours.get("parent_work"), theirs.get("parent_work"));
    assert!(theirs["parent_work"] > 3 * 150_000);
    // The child is not followed, by either.
    assert_eq!(ours.get("child_work"), None);
    assert_eq!(theirs.get("child_work"), None);

    // Following children with one output name for all is refused, with
    // the way to do it.
    let o = Command::new(tally_path())
        .args([
            "sim",
            "--trace-children=yes",
            "--out-file",
            s(&out),
            "--",
            s(&prog),
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("put %p (the pid) in --out-file"),
        "{}",
        text(&o.stderr)
    );
}
