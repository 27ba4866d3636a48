//! One memory ceiling for every command that holds a profile in memory:
//! each is run once without a limit, to measure the memory it needs (its
//! peak resident size, from `/proc`), then under `ulimit -v` at half of
//! that, where it cannot succeed. It must stop with the ceiling's error
//! naming its input (the ceiling is then half of what the limit leaves),
//! with its error status (1; 2 for `gate`, whose 1
//! means over budget), never with Rust's allocation-failure abort
//! (SIGABRT, 134) or a panic, leaving no temporary file and every
//! existing output as it was.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use tally_testutil::{path_str, text};

/// The generated profiles: two of a C++ program with debug information
/// (`a`, `b`, 24 MiB each) and one of GCC's `cc1` (`cc1`, 128 MiB, many
/// long context names, for the commands whose memory grows with the
/// functions rather than the lines). Each command needs some 150 MB or
/// more of them, so that half of it leaves room past tally's start.
struct Inputs {
    a: PathBuf,
    b: PathBuf,
    cc1: PathBuf,
}

fn inputs() -> &'static Inputs {
    static INPUTS: OnceLock<Inputs> = OnceLock::new();
    INPUTS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("memory_ceiling");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let generate = |name: &str, config: tally_gen::Config| {
            let path = dir.join(name);
            let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
            tally_gen::generate(&config, &mut f).unwrap();
            std::io::Write::flush(&mut f).unwrap();
            path
        };
        let cpp = |seed| tally_gen::Config {
            seed,
            size: 24 << 20,
            ..Default::default()
        };
        Inputs {
            a: generate("a.callgrind", cpp(1)),
            b: generate("b.callgrind", cpp(2)),
            cc1: generate(
                "cc1.callgrind",
                tally_gen::Config {
                    size: 128 << 20,
                    shape: tally_gen::Shape::CC1,
                    ..Default::default()
                },
            ),
        }
    })
}

/// The peak resident size of tally run with `args`, in KiB: `VmHWM`,
/// polled until it ends. Resident memory is memory the command touched
/// at once, so an address space of half of it cannot hold the run.
fn memory_needed(args: &[&str]) -> u64 {
    let dir = tally_testutil::temp_dir();
    let err = dir.path().join("stderr");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tally"))
        .args(args)
        .env_remove("TALLY_MAX_MEMORY")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = format!("/proc/{}/status", child.id());
    let mut peak = 0;
    let exit = loop {
        if let Ok(s) = std::fs::read_to_string(&status)
            && let Some(kib) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak = peak.max(kib);
        }
        if let Some(exit) = child.try_wait().unwrap() {
            break exit;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    // `gate` says 1 when over budget: a and b differ.
    assert!(
        exit.code() == Some(0) || (args[0] == "gate" && exit.code() == Some(1)),
        "tally {args:?} without a limit: {exit}: {}",
        text(&std::fs::read(&err).unwrap())
    );
    peak
}

/// The contents every output holds before the limited run.
const OLD: &[u8] = b"the output before the run\n";

/// Runs tally with `args` under `ulimit -v` at half the memory it needs
/// and checks how it stops: see the module's docs. `inputs` are those it
/// may name; `outputs` exist before and must stay as they were.
fn stops_at_the_ceiling(args: &[&str], inputs: &[&Path], outputs: &[&Path]) {
    let need = memory_needed(args);
    let limit = need / 2;
    // Room past tally's start (some 25 MB of code and libraries): the
    // test is of a command that runs out while holding a profile.
    assert!(limit >= 64 << 10, "tally {args:?} needs only {need} KiB");
    for out in outputs {
        std::fs::write(out, OLD).unwrap();
    }
    let o = Command::new("sh")
        .args(["-c", r#"ulimit -v "$0" || exit 99; exec "$@""#])
        .arg(limit.to_string())
        .arg(env!("CARGO_BIN_EXE_tally"))
        .args(args)
        .env_remove("TALLY_MAX_MEMORY")
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let e = text(&o.stderr);
    let want = if args[0] == "gate" { 2 } else { 1 };
    assert_eq!(
        (o.status.code(), o.status.signal()),
        (Some(want), None),
        "tally {args:?} under ulimit -v {limit} (needs {need} KiB): {e}"
    );
    assert!(
        !e.contains("panicked") && !e.contains("memory allocation of"),
        "{args:?}: {e}"
    );
    // The ceiling's error (while reading, or after), not the system's
    // refusal below it: half of what the limit leaves is room enough.
    assert!(
        inputs.iter().any(|i| e.contains(path_str(i)))
            && e.contains("ceiling")
            && e.contains("(set it with --memory-limit or TALLY_MAX_MEMORY"),
        "{args:?}: {e}"
    );
    for out in outputs {
        assert_eq!(std::fs::read(out).unwrap(), OLD, "{}: {e}", out.display());
        let dir = out.parent().unwrap();
        for entry in std::fs::read_dir(dir).unwrap() {
            let name = entry.unwrap().file_name();
            let name = name.to_string_lossy();
            assert!(!name.starts_with(".tally-"), "{name} left in {dir:?}: {e}");
        }
    }
}

#[test]
fn convert_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("out.callgrind");
    let args = ["convert", path_str(&i.cc1), "-o", path_str(&out)];
    stops_at_the_ceiling(&args, &[&i.cc1], &[&out]);
}

#[test]
fn merge_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("merged.callgrind");
    let args = [
        "merge",
        path_str(&i.a),
        path_str(&i.b),
        "-o",
        path_str(&out),
    ];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[&out]);
}

#[test]
fn diff_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("diff.callgrind");
    let args = ["diff", path_str(&i.a), path_str(&i.b), "-o", path_str(&out)];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[&out]);
}

#[test]
fn export_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("tables");
    std::fs::create_dir(&out).unwrap();
    let args = [
        "export",
        "--to",
        "parquet",
        path_str(&i.a),
        "-o",
        path_str(&out),
    ];
    let tables =
        ["costs", "functions", "arcs", "profiles"].map(|t| out.join(format!("{t}.parquet")));
    let tables: Vec<&Path> = tables.iter().map(PathBuf::as_path).collect();
    stops_at_the_ceiling(&args, &[&i.a], &tables);
}

#[test]
fn report_html_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("report.html");
    let args = [
        "report",
        "--html",
        path_str(&out),
        path_str(&i.a),
        path_str(&i.b),
    ];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[&out]);
}

#[test]
fn gate_stops_at_the_ceiling() {
    let i = inputs();
    let args = ["gate", path_str(&i.a), path_str(&i.b)];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[]);
}

#[test]
fn flame_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("flame.svg");
    let args = [
        "flame",
        path_str(&i.a),
        path_str(&i.b),
        path_str(&i.a),
        "-o",
        path_str(&out),
    ];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[&out]);
}

#[test]
fn graph_stops_at_the_ceiling() {
    let i = inputs();
    let dir = tally_testutil::temp_dir();
    let out = dir.path().join("graph.dot");
    let args = ["graph", path_str(&i.cc1), "-o", path_str(&out)];
    stops_at_the_ceiling(&args, &[&i.cc1], &[&out]);
}

#[test]
fn gprof_stops_at_the_ceiling() {
    let i = inputs();
    stops_at_the_ceiling(&["gprof", path_str(&i.cc1)], &[&i.cc1], &[]);
}

#[test]
fn annotate_of_several_profiles_stops_at_the_ceiling() {
    let i = inputs();
    let args = [
        "annotate",
        "--inclusive=yes",
        path_str(&i.a),
        path_str(&i.b),
        path_str(&i.a),
    ];
    stops_at_the_ceiling(&args, &[&i.a, &i.b], &[]);
}
