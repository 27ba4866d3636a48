//! `tally record --off-cpu` on a program compiled here that sleeps half
//! its time: the sleep's stack holds its share of the wall time, the
//! off-CPU total agrees with the sleeping time the program measures
//! itself, nothing is off-CPU without the option, and without the rights
//! the option is refused with the cause.

use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use tally_testutil::recorder::{Rights, as_nobody, serial};
use tally_testutil::{path_str, require, tally};

/// 25 turns of 20 ms of the thread's own CPU time, then `usleep(20000)`:
/// half on the CPU, half blocked, however busy the machine is (the spin
/// counts CPU time, not wall time, so a preempted turn still does its
/// 20 ms). Prints the nanoseconds spent in `usleep`, measured around it.
const SLEEPY: &str = r#"#include <stdio.h>
#include <time.h>
#include <unistd.h>
static volatile long sink;
static double clock_of(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec / 1e9; }
__attribute__((noipa)) void spin(double s) {
  double end = clock_of(CLOCK_THREAD_CPUTIME_ID) + s; long x = 0;
  while (clock_of(CLOCK_THREAD_CPUTIME_ID) < end) for (int i = 0; i < 1000; i++) x += i ^ (x >> 3);
  sink = x;
}
int main(void) {
  double slept = 0;
  for (int i = 0; i < 25; i++) {
    spin(0.02);
    double t = clock_of(CLOCK_MONOTONIC);
    usleep(20000);
    slept += clock_of(CLOCK_MONOTONIC) - t;
  }
  printf("%.0f\n", slept * 1e9);
  return 0;
}
"#;

fn compile(dir: &Path) -> std::path::PathBuf {
    let src = dir.join("sleepy.c");
    std::fs::write(&src, SLEEPY).unwrap();
    let exe = dir.join("sleepy");
    let o = Command::new("gcc")
        .args(["-O2", "-g", "-o", path_str(&exe), path_str(&src)])
        .output()
        .expect("gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    exe
}

/// Whether this process may sample the kernel, which `--off-cpu` needs:
/// root, or `kernel.perf_event_paranoid` at most 1.
fn may_sample_kernel() -> bool {
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map_or(2, |s| s.trim().parse().unwrap_or(2));
    Rights::here().root || paranoid <= 1
}

/// `tally annotate --json` of `file`: (totals, inclusive costs of the
/// function `name`), by event.
fn annotate(dir: &Path, file: &str, name: &str) -> (Value, Value) {
    let out = tally!().in_dir(dir).ok(&[
        "annotate",
        "--inclusive=yes",
        "--threshold=100",
        "--json",
        file,
    ]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let f = json["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .find(|f| f["function"] == name)
        .map_or(Value::Null, |f| f["inclusive"].clone());
    (json["totals"].clone(), f)
}

#[test]
fn the_sleep_holds_half_the_wall_time_under_its_stack() {
    let _serial = serial();
    if !require(&["gcc"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let exe = compile(d);
    let t = tally!().in_dir(d);
    if !may_sample_kernel() {
        let err = t.fails(&[
            "record",
            "--off-cpu",
            "-o",
            "off.json",
            "--",
            path_str(&exe),
        ]);
        assert!(
            err.contains("--off-cpu") && err.contains("kernel.perf_event_paranoid is"),
            "{err}"
        );
        return;
    }
    let out = t.ok(&[
        "record",
        "--off-cpu",
        "-o",
        "off.json",
        "--",
        path_str(&exe),
    ]);
    let slept: f64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the program prints its sleeping time");
    let (totals, usleep) = annotate(d, "off.json", "usleep");
    let on = totals["cpu-clock"].as_f64().expect("cpu-clock");
    let off = totals["off-cpu"].as_f64().expect("an off-cpu event");
    let under = usleep["cpu-clock"].as_f64().unwrap_or(0.0)
        + usleep["off-cpu"]
            .as_f64()
            .expect("usleep's stack holds off-CPU time");
    let share = 100.0 * under / (on + off);
    assert!(
        (40.0..=60.0).contains(&share),
        "usleep's stack holds {share:.1} % of {on} ns on and {off} ns off the CPU"
    );
    assert!(
        (off / slept - 1.0).abs() <= 0.10,
        "off-CPU {off} ns, slept {slept} ns"
    );
    // The program's stack above the sleep: main called it.
    let (_, main) = annotate(d, "off.json", "main");
    assert!(main["off-cpu"].as_f64().unwrap_or(0.0) >= usleep["off-cpu"].as_f64().unwrap());

    // Without the option: no off-CPU event at all.
    t.ok(&["record", "-o", "on.json", "--", path_str(&exe)]);
    let (totals, _) = annotate(d, "on.json", "usleep");
    let events: Vec<&String> = totals.as_object().expect("totals").keys().collect();
    assert_eq!(events, ["cpu-clock"]);
    let json: Value = serde_json::from_slice(&std::fs::read(d.join("on.json")).unwrap()).unwrap();
    assert!(!json.to_string().contains("off-cpu"));
}

/// Run as root: as nobody, where `kernel.perf_event_paranoid` forbids
/// kernel sampling, the option is refused before the program runs.
#[test]
fn without_kernel_sampling_off_cpu_is_refused_with_the_cause() {
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map_or(2, |s| s.trim().parse().unwrap_or(2));
    if !Rights::here().root || paranoid <= 1 || !require(&["setpriv"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let marker = dir.path().join("ran");
    let o = as_nobody(env!("CARGO_BIN_EXE_tally"))
        .current_dir(dir.path())
        .args(["record", "--off-cpu", "-o", "off.json", "--", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--off-cpu samples threads as the kernel switches them out")
            && err.contains(&format!("kernel.perf_event_paranoid is {paranoid}")),
        "{err}"
    );
    assert!(!marker.exists(), "the program did not run");
    assert!(!dir.path().join("off.json").exists());
}
