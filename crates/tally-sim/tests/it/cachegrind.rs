//! Exactness against Cachegrind: the Lackey trace of a real program run
//! through tally-sim gives Cachegrind's totals for the same program, run
//! with the same explicit caches and the same (minimal) environment, for
//! two cache geometries. Needs Valgrind (CI installs it); without it the
//! test says so and checks nothing live.

use std::path::{Path, PathBuf};
use std::process::Command;
use tally_sim::lackey::LackeyReader;
use tally_sim::{CacheConfig, Counts, Hierarchy, HierarchyConfig, Policy};

fn program() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/dcpi/real/workload")
}

/// Runs Valgrind with a fixed environment: the environment strings sit
/// on the client's stack, so a different one changes the counts.
fn valgrind(args: &[&str]) -> bool {
    match Command::new("env")
        .args(["-i", "PATH=/usr/bin:/bin", "LC_ALL=C", "valgrind", "-q"])
        .args(args)
        .arg(program())
        .output()
    {
        Ok(o) if o.status.success() => true,
        Ok(o) => panic!("valgrind {args:?}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => false,
    }
}

fn cachegrind_summary(file: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(file).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("summary:"))
        .unwrap();
    line.split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

#[test]
fn lackey_traces_give_cachegrinds_totals() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        eprintln!("note: valgrind not installed; nothing compared");
        return;
    }
    let dir = tempfile_dir();
    let trace = dir.join("lackey.trace");
    assert!(valgrind(&[
        "--tool=lackey",
        "--trace-mem=yes",
        &format!("--log-file={}", trace.display()),
    ]));
    for geometry in [
        ["32768,8,64", "32768,8,64", "8388608,16,64"],
        ["4096,2,32", "2048,4,32", "65536,8,32"],
    ] {
        let out = dir.join("cachegrind.out");
        assert!(valgrind(&[
            "--tool=cachegrind",
            "--cache-sim=yes",
            &format!("--I1={}", geometry[0]),
            &format!("--D1={}", geometry[1]),
            &format!("--LL={}", geometry[2]),
            &format!("--cachegrind-out-file={}", out.display()),
        ]));
        let want = cachegrind_summary(&out);
        let cfg = HierarchyConfig {
            i1: CacheConfig::parse("I1", geometry[0]).unwrap(),
            d1: CacheConfig::parse("D1", geometry[1]).unwrap(),
            middle: vec![],
            ll: CacheConfig::parse("LL", geometry[2]).unwrap(),
            policy: Policy::Lru,
            iaddr_zero_bits: 0,
        };
        let mut h = Hierarchy::new(&cfg).unwrap();
        let mut c = Counts::default();
        let f = std::io::BufReader::new(std::fs::File::open(&trace).unwrap());
        let mut r = LackeyReader::new(f);
        while let Some(a) = r.next_access().unwrap() {
            h.lackey(a, &mut c);
        }
        assert_eq!(c.values()[..9], want[..], "{geometry:?}");
        assert!(c.d1mr > 1000 && c.ir > 1_000_000, "{c:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("tally-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}
