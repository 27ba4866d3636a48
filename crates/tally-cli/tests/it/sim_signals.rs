//! `tally sim` when the run is disturbed: SIGINT, SIGTERM and SIGHUP sent
//! to tally (passed on to the program, the profile so far written and
//! marked incomplete, nothing temporary left), a program that ignores
//! them (a second one ends it), a program that closes every descriptor
//! below 1024 (the plugin's stream must survive), and an output that
//! cannot be written (refused before the program runs).
//!
//! Programs are compiled here with gcc; Cachegrind is run live where
//! counts are compared (missing tools: skipped locally, a failure under
//! `CI`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tally_testutil::{path_str as s, qemu, temp_dir, text};

fn tally_path() -> &'static str {
    env!("CARGO_BIN_EXE_tally")
}

/// Compiles C `src` into `dir/name`.
fn gcc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let o = Command::new("gcc")
        .args(["-O1", "-g", "-o", s(&out), s(&c)])
        .output()
        .unwrap();
    assert!(o.status.success(), "gcc: {}", text(&o.stderr));
    out
}

const LOOP: &str = "#include <signal.h>\n#include <string.h>\nstatic volatile long sink;\n\
    __attribute__((noinline)) long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i; sink = s; return s; }\n\
    int main(int argc, char **argv) {\n\
      if (argc > 1 && !strcmp(argv[1], \"ignore\")) { signal(SIGINT, SIG_IGN); signal(SIGTERM, SIG_IGN); signal(SIGHUP, SIG_IGN); }\n\
      for (;;) work(1000);\n}\n";

/// `kill -SIG pid`.
fn kill(sig: &str, pid: &str) {
    let k = Command::new("kill")
        .args([&format!("-{sig}"), "--", pid])
        .status()
        .unwrap();
    assert!(k.success());
}

/// Waits for `child` at most `secs` seconds (killing it and failing if
/// it is still running then); its exit code and standard error.
fn wait_within(mut child: std::process::Child, secs: f64, what: &str) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (st.code(), err);
        }
        if start.elapsed() > Duration::from_secs_f64(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: tally still runs {secs} s after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Checks the profile at `out`: tally reads it back, it is marked
/// incomplete and its `work` ran; no temporary file is left beside it.
fn check_incomplete(out: &Path, what: &str) {
    let t = std::fs::read_to_string(out).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(t.contains("desc: incomplete: "), "{what}: not marked");
    let o = Command::new(tally_path())
        .args(["annotate", "--auto=no", s(out)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{what}: {}", text(&o.stderr));
    assert!(text(&o.stdout).contains(":work"), "{what}");
    let left: Vec<_> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".tally-"))
        .collect();
    assert!(left.is_empty(), "{what}: left behind: {left:?}");
}

fn start(out: &Path, prog: &Path, args: &[&str], own_group: bool) -> std::process::Child {
    let mut c = Command::new(tally_path());
    c.args(["sim", "--out-file", s(out), "--", s(prog)])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if own_group {
        use std::os::unix::process::CommandExt;
        c.process_group(0);
    }
    c.spawn().unwrap()
}

/// SIGINT, SIGTERM and SIGHUP to tally's process id: passed on; tally ends
/// at once with the program's status (128 + the signal) and the profile
/// so far, marked incomplete. SIGINT to the whole group (as Ctrl-C): the
/// same.
#[test]
fn signals_to_tally_end_the_run_with_the_profile_so_far() {
    if !qemu::require(tally_path(), &["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "loop", LOOP);
    for (sig, n) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let out = dir.path().join(format!("{sig}.out"));
        let child = start(&out, &prog, &[], false);
        std::thread::sleep(Duration::from_millis(1500));
        kill(sig, &child.id().to_string());
        let (code, err) = wait_within(child, 2.0, sig);
        assert_eq!(code, Some(128 + n), "{sig}: {err}");
        assert!(err.contains("incomplete"), "{sig}: {err}");
        check_incomplete(&out, sig);
    }
    let out = dir.path().join("group.out");
    let child = start(&out, &prog, &[], true);
    std::thread::sleep(Duration::from_millis(1500));
    kill("INT", &format!("-{}", child.id()));
    let (code, err) = wait_within(child, 2.0, "group");
    assert_eq!(code, Some(130), "group: {err}");
    check_incomplete(&out, "group");
}

/// A program that ignores the signal keeps running; a second signal ends
/// it (SIGKILL), with the profile so far.
#[test]
fn a_second_signal_ends_a_program_that_ignores_the_first() {
    if !qemu::require(tally_path(), &["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(dir.path(), "loop", LOOP);
    let out = dir.path().join("ignore.out");
    let mut child = start(&out, &prog, &["ignore"], false);
    std::thread::sleep(Duration::from_millis(1500));
    let pid = child.id().to_string();
    kill("TERM", &pid);
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        child.try_wait().unwrap().is_none(),
        "ended on an ignored signal"
    );
    kill("TERM", &pid);
    let (code, err) = wait_within(child, 2.0, "second");
    assert_eq!(code, Some(128 + 9), "{err}");
    check_incomplete(&out, "second");
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

/// A program that closes descriptors 3 to 1023, as daemons do, keeps its
/// profile: complete, with `work`'s instructions after the closing
/// counted as Cachegrind counts them.
#[test]
fn closing_every_low_descriptor_keeps_the_profile() {
    if !qemu::require(tally_path(), &["gcc", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let prog = gcc(
        dir.path(),
        "closer",
        "#include <unistd.h>\nstatic volatile long sink;\n\
         __attribute__((noinline)) long work(long n) { long s = 0; for (long i = 0; i < n; i++) s += i * i; sink = s; return s; }\n\
         int main(void) { work(100000); for (int fd = 3; fd < 1024; fd++) close(fd); work(200000); return 0; }\n",
    );
    let out = dir.path().join("tally.out");
    let o = Command::new(tally_path())
        .args(["sim", "--out-file", s(&out), "--", s(&prog)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        !text(&o.stderr).contains("incomplete"),
        "{}",
        text(&o.stderr)
    );
    let vg = dir.path().join("vg.out");
    let v = Command::new("valgrind")
        .args([
            "-q",
            "--tool=cachegrind",
            &format!("--cachegrind-out-file={}", vg.display()),
            s(&prog),
        ])
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", text(&v.stderr));
    let (ours, theirs) = (ir_per_function(&out), ir_per_function(&vg));
    assert_eq!(ours.get("work"), theirs.get("work"));
    assert!(theirs["work"] > 3 * 200_000);
}

/// An output that cannot be written is refused before the program runs
/// (the program would create a file): a missing directory, a directory
/// given as the file, and (unless running as root, whom permissions do
/// not stop) a read-only directory.
#[test]
fn an_unwritable_output_is_refused_before_the_run() {
    if !qemu::require(tally_path(), &["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let marker = dir.path().join("ran");
    let ro = dir.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    let root = std::fs::write(ro.join("probe"), "").is_ok();
    let mut cases = vec![dir.path().join("missing/x.out"), dir.path().to_path_buf()];
    if !root {
        cases.push(ro.join("x.out"));
    }
    for out in cases {
        let o = Command::new(tally_path())
            .args([
                "sim",
                "--out-file",
                s(&out),
                "--",
                "/usr/bin/touch",
                s(&marker),
            ])
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{}: {err}", out.display());
        assert!(err.contains(s(&out)) && err.contains("not run"), "{err}");
        assert!(!marker.exists(), "{}: the program ran", out.display());
    }
}
