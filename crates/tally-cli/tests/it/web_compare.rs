//! The comparison view of `tally serve --diff A B`: a program profiled
//! before and after a change (one function made slower, one faster, one
//! removed, one added) under Callgrind; the four lists the API gives agree
//! with `tally diff --json`'s per-function numbers.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tally_testutil::serve::Server;
use tally_testutil::{path_str, require, tally, text};

const PROGRAM: &str = r#"
static volatile long sink;
__attribute__((noinline)) static long hot(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += i * i % 7;
    return s;
}
__attribute__((noinline)) static long warm(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s ^= i * 3;
    return s;
}
#ifdef AFTER
__attribute__((noinline)) static long fresh(long n) {
    long s = 0;
    for (long i = 0; i < n; i++) s += i;
    return s;
}
#define THIRD fresh
#else
__attribute__((noinline)) static long old(long n) {
    long s = 1;
    for (long i = 0; i < n; i++) s += s / 3 + i;
    return s;
}
#define THIRD old
#endif
int main(void) {
    sink = hot(HOT) + warm(WARM) + THIRD(20000);
    return 0;
}
"#;

/// The program built with `defines` and profiled by Callgrind; both
/// builds are one path, as a program rebuilt after a change is.
pub(crate) fn profile(dir: &Path, name: &str, defines: &[&str]) -> PathBuf {
    let src = dir.join("prog.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let bin = dir.join("prog");
    let cc = Command::new("gcc")
        .args(["-O1", "-g", "-o", path_str(&bin), path_str(&src)])
        .args(defines)
        .output()
        .unwrap();
    assert!(cc.status.success(), "gcc: {}", text(&cc.stderr));
    let out = dir.join(format!("callgrind.out.{name}"));
    let run = Command::new("valgrind")
        .args(["-q", "--tool=callgrind"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&bin)
        .output()
        .unwrap();
    assert!(run.status.success(), "valgrind: {}", text(&run.stderr));
    out
}

/// The names in one of the API's lists, with (self A, self B).
fn listed(v: &Value, list: &str) -> BTreeMap<String, (f64, f64)> {
    v[list]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = format!(
                "{}:{}",
                e["file"].as_str().unwrap(),
                e["function"].as_str().unwrap()
            );
            let s = &e["self"];
            (name, (s["a"].as_f64().unwrap(), s["b"].as_f64().unwrap()))
        })
        .collect()
}

#[test]
fn four_lists_agree_with_tally_diff() {
    if !require(&["gcc", "valgrind"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let a = profile(dir.path(), "before", &["-DHOT=200000", "-DWARM=300000"]);
    let b = profile(
        dir.path(),
        "after",
        &["-DAFTER", "-DHOT=600000", "-DWARM=60000"],
    );
    let diff: Value = serde_json::from_slice(
        &tally!()
            .ok(&[
                "diff",
                "--json",
                "--top",
                "100000",
                path_str(&a),
                path_str(&b),
            ])
            .stdout,
    )
    .unwrap();
    let mut expected: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for f in diff["functions"].as_array().unwrap() {
        let name = format!(
            "{}:{}",
            f["file"].as_str().unwrap(),
            f["function"].as_str().unwrap()
        );
        let (fa, fb) = (f["a"][0].as_f64().unwrap(), f["b"][0].as_f64().unwrap());
        expected.insert(name, (fa, fb));
    }
    let mut command = tally!().command();
    command
        .args(["serve", "--diff", path_str(&a), path_str(&b)])
        .stderr(Stdio::inherit());
    let server = Server::start(command);
    let (status, body) = server.get("compare?by=self&noise=0&top=100000");
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    let lists = ["regressed", "improved", "only_in_b", "only_in_a"].map(|l| listed(&v, l));
    let find = |name: &str| {
        lists
            .iter()
            .position(|l| l.keys().any(|k| k.ends_with(&format!(":{name}"))))
    };
    assert_eq!(find("hot"), Some(0), "hot regressed: {v}");
    assert_eq!(find("warm"), Some(1), "warm improved: {v}");
    assert_eq!(find("fresh"), Some(2), "fresh only in B: {v}");
    assert_eq!(find("old"), Some(3), "old only in A: {v}");
    // Every function whose self cost changed is in exactly one list, with
    // tally diff's numbers.
    let mut seen: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for l in &lists {
        for (k, &(x, y)) in l {
            if x != y {
                assert!(seen.insert(k.clone(), (x, y)).is_none(), "{k} twice");
            }
        }
    }
    assert_eq!(seen, expected, "per-function self costs");
    // A noise threshold above the small changes leaves them out.
    let (_, quiet) = server.get("compare?by=self&noise=20&top=100000");
    let q: Value = serde_json::from_str(&quiet).unwrap();
    let regressed = listed(&q, "regressed");
    assert!(
        regressed
            .keys()
            .all(|k| k.ends_with(":hot") || k.ends_with(":main")),
        "{q}"
    );
    // The page's Compare tab shows the four lists (Chromium).
    if tally_testutil::browser::require(&["chromium"]) {
        let url = format!("{}#view=compare", server.url);
        let dom =
            tally_testutil::browser::chromium(&["--dump-dom", "--virtual-time-budget=10000"], &url);
        for list in ["regressed", "improved", "only_in_b", "only_in_a"] {
            assert!(
                dom.stdout.contains(&format!("data-list=\"{list}\"")),
                "{list}: {}",
                dom.stdout
            );
        }
        assert!(dom.stdout.contains("data-fn=\"hot\""), "{}", dom.stdout);
    }
    let (_, incl) = server.get("compare?by=inclusive&noise=0&top=100000");
    let i: Value = serde_json::from_str(&incl).unwrap();
    assert!(
        listed(&i, "regressed").keys().any(|k| k.ends_with(":main")),
        "{i}"
    );
}
