//! Sample times and threads, on a two-thread program compiled here:
//! `tally record`'s JSON keeps each sample's time and its thread's name;
//! `tally serve` of a `perf record` of the program (and, in the browser,
//! of `tally record`'s default output) draws a track per
//! thread and a stack chart, and a time range (`range=START-END`) cuts
//! every view to the samples in it, checked sample by sample against
//! `perf script`; in Chromium (`tests/web/timeline.mjs`) dragging on a
//! track changes the table's total. Screenshots go to
//! `target/test-artefacts/web-timeline/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tally_testutil::recorder::serial;
use tally_testutil::serve::Server;
use tally_testutil::{browser, path_str, require, tally, temp_dir};

/// The main thread spins in `spin_a` beside a worker in `spin_b`, then
/// alone after joining it; each names itself.
const TWO_THREADS: &str = r#"
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void spin_a(long n) { for (long i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) void spin_b(long n) { for (long i = 0; i < n; i++) sink ^= i; }
static void *worker(void *arg) {
    pthread_setname_np(pthread_self(), "tl-worker");
    spin_b((long)arg);
    return 0;
}
int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000000;
    pthread_setname_np(pthread_self(), "tl-main");
    pthread_t t;
    pthread_create(&t, 0, worker, (void *)n);
    spin_a(n / 4);
    pthread_join(t, 0);
    spin_a(n / 2);
    return 0;
}
"#;

fn run(cmd: &mut Command) -> Vec<u8> {
    let o = cmd.output().expect("run a tool");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

fn compile(d: &Path) -> PathBuf {
    std::fs::write(d.join("two.c"), TWO_THREADS).unwrap();
    run(Command::new("gcc").current_dir(d).args([
        "-O1",
        "-g",
        "-fno-omit-frame-pointer",
        "-pthread",
        "-o",
        "two",
        "two.c",
    ]));
    d.join("two")
}

/// `perf record -g` of the program into `perf.data` in `d`.
fn perf_recorded(d: &Path) -> PathBuf {
    let exe = compile(d);
    run(Command::new("perf").current_dir(d).args([
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-g",
        "-o",
        "perf.data",
        path_str(&exe),
    ]));
    d.join("perf.data")
}

/// Every sample as `perf script` prints it: time in microseconds, tid,
/// period and leaf function.
fn perf_samples(perf_data: &Path) -> Vec<(u64, i64, u64, String)> {
    let text = run(Command::new("perf").arg("script").arg("-i").arg(perf_data));
    let text = String::from_utf8_lossy(&text);
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(head) = lines.next() {
        if head.trim().is_empty() {
            continue;
        }
        let w: Vec<&str> = head.split_whitespace().collect();
        let at = w.iter().position(|x| x.ends_with(':')).unwrap();
        let (s, us) = w[at].trim_end_matches(':').split_once('.').unwrap();
        let time = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
        let tid = w[at - 1].parse().unwrap();
        let period = w[at + 1].parse().unwrap();
        let leaf = lines
            .next()
            .unwrap_or("")
            .split_whitespace()
            .nth(1)
            .unwrap_or("");
        let leaf = leaf.split("+0x").next().unwrap().to_string();
        out.push((time, tid, period, leaf));
        for l in lines.by_ref() {
            if l.trim().is_empty() {
                break;
            }
        }
    }
    out
}

fn get(server: &Server, call: &str) -> Value {
    let (status, body) = server.get(call);
    assert_eq!(status, 200, "{call}: {body}");
    serde_json::from_str(&body).unwrap()
}

#[test]
fn recorded_json_has_each_samples_time_and_named_thread() {
    let _serial = serial();
    if !require(&["gcc"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    let exe = compile(d);
    tally!()
        .in_dir(d)
        .ok(&["record", "-o", "rec.json", "--", path_str(&exe)]);
    let json: Value = serde_json::from_slice(&std::fs::read(d.join("rec.json")).unwrap()).unwrap();
    let stacks = &json["stacks"];
    let t = &stacks["timeline"];
    let names: Vec<&str> = t["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|th| th["name"].as_str().unwrap())
        .collect();
    for n in ["tl-main", "tl-worker"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let pids: Vec<i64> = t["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|th| th["pid"].as_i64().unwrap())
        .collect();
    assert!(
        pids.windows(2).all(|w| w[0] == w[1]),
        "one process: {pids:?}"
    );
    let times: Vec<u64> = t["time"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert!(times.len() > 50, "{} samples", times.len());
    assert!(times.is_sorted() && times[0] < times[times.len() - 1]);
    let thread = t["thread"].as_array().unwrap();
    let stack = t["stack"].as_array().unwrap();
    let costs = t["costs"].as_array().unwrap();
    assert_eq!(
        (thread.len(), stack.len(), costs.len()),
        (times.len(), times.len(), times.len())
    );
    // Every stack's cost is the sum of its samples'.
    let samples = stacks["samples"].as_array().unwrap();
    let mut sums = vec![0u64; samples.len()];
    for (s, c) in stack.iter().zip(costs) {
        sums[s.as_u64().unwrap() as usize] += c.as_u64().unwrap();
    }
    let recorded: Vec<u64> = samples
        .iter()
        .map(|s| s["costs"][0].as_u64().unwrap())
        .collect();
    assert_eq!(sums, recorded);
    // The worker's samples are in spin_b, by the functions' names.
    let functions = json["functions"].as_array().unwrap();
    let frames = stacks["frames"].as_array().unwrap();
    let leaf = |s: usize| {
        let f = samples[s]["frames"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .as_u64()
            .unwrap();
        let function = frames[f as usize][0].as_u64().unwrap();
        functions[function as usize]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let worker = names.iter().position(|&n| n == "tl-worker").unwrap() as u64;
    let of_worker: Vec<String> = (0..times.len())
        .filter(|&i| thread[i].as_u64() == Some(worker))
        .map(|i| leaf(stack[i].as_u64().unwrap() as usize))
        .collect();
    let in_b = of_worker.iter().filter(|n| *n == "spin_b").count();
    assert!(in_b * 10 >= of_worker.len() * 8, "{of_worker:?}");

    // The Firefox Profiler export: a thread each, its samples at their
    // times, as many as the recording has. The viewer names a process's
    // main thread after the process (the program), the others by name.
    tally!().in_dir(d).ok(&[
        "convert",
        "rec.json",
        "--to",
        "firefox",
        "-o",
        "rec.fx.json",
    ]);
    let fx: Value = serde_json::from_slice(&std::fs::read(d.join("rec.fx.json")).unwrap()).unwrap();
    let fx_threads: Vec<(String, bool, u64)> = fx["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["isMainThread"].as_bool().unwrap(),
                t["samples"]["length"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(fx_threads.len(), 2, "{fx_threads:?}");
    assert!(
        fx_threads.iter().any(|t| t.1 && t.0.contains("two")),
        "{fx_threads:?}"
    );
    assert!(
        fx_threads.iter().any(|t| !t.1 && t.0 == "tl-worker"),
        "{fx_threads:?}"
    );
    let n: u64 = fx_threads.iter().map(|t| t.2).sum();
    assert_eq!(n, times.len() as u64, "{fx_threads:?}");
    let worker = fx["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tl-worker")
        .unwrap();
    let span: f64 = worker["samples"]["timeDeltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .sum();
    let (first, last) = (times[0] as f64, times[times.len() - 1] as f64);
    assert!(
        span > 0.0 && span <= (last - first) / 1e6 + 1.0,
        "the worker's samples span {span} ms of a {} ms recording",
        (last - first) / 1e6
    );
}

#[test]
fn a_range_keeps_only_its_samples_in_every_view() {
    let _serial = serial();
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let perf_data = perf_recorded(dir.path());
    let theirs = perf_samples(&perf_data);
    let mut command = tally!().command();
    command
        .arg("serve")
        .arg(&perf_data)
        .stderr(Stdio::inherit());
    let server = Server::start(command);
    let tl = get(&server, "timeline?buckets=50");
    assert_eq!(tl["timed"], true, "{tl}");
    assert_eq!(tl["samples"].as_u64().unwrap() as usize, theirs.len());
    let origin = tl["origin"].as_u64().unwrap();
    let mut names: Vec<&str> = tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["tl-main", "tl-worker"]);
    // Each thread's buckets add up to its total, the totals to the
    // periods perf script prints.
    let mut all = 0;
    for t in tl["threads"].as_array().unwrap() {
        let sum: u64 = t["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_u64().unwrap())
            .sum();
        assert_eq!(sum, t["total"].as_u64().unwrap());
        all += sum;
    }
    assert_eq!(all, theirs.iter().map(|s| s.2).sum::<u64>());

    // A range from a quarter to three quarters of the recording, its ends
    // half way between two samples, so that perf script's microseconds
    // place every sample on one side.
    let mut times: Vec<u64> = theirs.iter().map(|s| s.0 * 1000).collect();
    times.sort();
    let between = |k: usize| (times[k] + times[k + 1]) / 2 - origin;
    let (a, b) = (between(times.len() / 4), between(3 * times.len() / 4));
    let inside: Vec<&(u64, i64, u64, String)> = theirs
        .iter()
        .filter(|s| (origin + a..origin + b).contains(&(s.0 * 1000)))
        .collect();
    let total: u64 = inside.iter().map(|s| s.2).sum();
    let mut by_leaf: BTreeMap<&str, u64> = BTreeMap::new();
    for s in &inside {
        *by_leaf.entry(&s.3).or_default() += s.2;
    }
    let range = format!("range={a}-{b}");
    get(&server, &format!("ready?{range}"));
    let table = get(&server, &format!("functions?{range}&limit=500"));
    assert_eq!(table["total"].as_f64().unwrap() as u64, total, "{table}");
    for row in table["rows"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        let own = row["self"].as_f64().unwrap() as u64;
        if own > 0 {
            assert_eq!(Some(&own), by_leaf.get(name), "{name}: {by_leaf:?}");
        }
    }
    // A transform with the range: the range still counts from the
    // recording's first sample, so focusing on spin_b leaves the stacks
    // through it in the same samples.
    let spin_b = table["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "spin_b")
        .unwrap()["inclusive"]
        .as_f64()
        .unwrap();
    get(&server, &format!("ready?tf=focus%3D%5Espin_b%24&{range}"));
    let focused = get(
        &server,
        &format!("functions?tf=focus%3D%5Espin_b%24&{range}&limit=1"),
    );
    assert_eq!(focused["total"].as_f64().unwrap(), spin_b, "{focused}");
    let whole = get(&server, "functions?limit=1");
    assert!(whole["total"].as_f64().unwrap() as u64 > total);

    // The stack chart of the worker: boxes in time order per depth, its
    // functions at the depth of their frames.
    let worker = tl["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "tl-worker")
        .unwrap()["index"]
        .clone();
    let chart = get(
        &server,
        &format!("stackchart?thread={worker}&from={a}&to={b}"),
    );
    let boxes = chart["boxes"].as_array().unwrap();
    assert!(!boxes.is_empty(), "{chart}");
    assert!(boxes.iter().any(|x| x["name"] == "spin_b"));
    for x in boxes {
        let (s, e) = (x["start"].as_u64().unwrap(), x["end"].as_u64().unwrap());
        assert!(a <= s && s < e, "{x}");
    }

    // A range is refused where it cannot apply, with the reason.
    let (status, body) = server.get("functions?range=9-3");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("START-END"), "{body}");
}

#[test]
fn a_profile_without_times_says_so() {
    let dir = temp_dir();
    let folded = dir.path().join("x.folded");
    std::fs::write(&folded, "main;work;leaf 30\nmain;other 10\n").unwrap();
    let mut command = tally!().command();
    command.arg("serve").arg(&folded).stderr(Stdio::inherit());
    let server = Server::start(command);
    let tl = get(&server, "timeline");
    assert_eq!(tl["timed"], false);
    assert!(tl["note"].as_str().unwrap().contains("no times"), "{tl}");
    let (status, body) = server.get("functions?range=0-100");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("no times"), "{body}");
}

/// In Chromium, on `perf record`'s perf.data and on `tally record`'s
/// default output of the same program.
#[test]
fn dragging_on_a_track_cuts_the_table_to_the_range() {
    let _serial = serial();
    if !browser::require_driver(&["gcc", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let perf_data = perf_recorded(dir.path());
    drag_on(&perf_data, "web-timeline");
    let exe = dir.path().join("two");
    let o = tally!()
        .in_dir(dir.path())
        .ok(&["record", "--", path_str(&exe)]);
    let err = String::from_utf8_lossy(&o.stderr);
    let recorded = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("tally.") && name.ends_with(".json")
        })
        .unwrap_or_else(|| panic!("no tally.PID.json: {err}"));
    drag_on(&recorded, "web-timeline-record");
}

/// Serves `input`, drags on its first track and checks every view.
fn drag_on(input: &Path, artefacts: &str) {
    let mut command = tally!().command();
    command.arg("serve").arg(input).stderr(Stdio::inherit());
    let server = Server::start(command);
    let shots = browser::artefacts(artefacts);
    let o = Command::new("node")
        .current_dir(browser::driver_dir())
        .arg("timeline.mjs")
        .args([&server.url, shots.to_str().unwrap(), "two", "0.6", "0.95"])
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the driver's JSON");
    assert!(v.get("failure").is_none(), "{}", v["failure"]);
    assert_eq!(v["errors"], serde_json::json!([]), "page errors");
    assert_eq!(v["tab_shown"], true);
    let tracks: Vec<&str> = v["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(tracks.len(), 2, "{tracks:?}");
    assert!(
        tracks.iter().any(|t| t.starts_with("tl-worker")),
        "{tracks:?}"
    );
    assert!(v["boxes"].as_u64().unwrap() > 0);
    let (before, after) = (
        v["total_before"].as_f64().unwrap(),
        v["total_after"].as_f64().unwrap(),
    );
    assert!(after > 0.0 && after < before, "{before} -> {after}");
    // The range is in the link, and the flame graph was asked for it.
    let hash = v["hash"].as_str().unwrap();
    let range = hash
        .split('&')
        .find_map(|p| p.strip_prefix("range="))
        .unwrap_or_else(|| panic!("{hash}"));
    let table = get(&server, &format!("functions?range={range}&limit=1"));
    assert_eq!(table["total"].as_f64().unwrap(), after);
    let flames = v["flame_requests"].as_array().unwrap();
    assert!(
        flames
            .iter()
            .any(|u| u.as_str().unwrap().contains("range=")),
        "{flames:?}"
    );
}
