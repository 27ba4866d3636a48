//! Sample times and threads: a two-thread program compiled here and
//! recorded by `perf record`; its perf.data and its `perf script` text are
//! read with every sample's time and thread (named by the program with
//! `pthread_setname_np`), checked against what `perf script` prints, and
//! the timeline goes through tally's JSON and back unchanged.

use std::path::Path;
use std::process::Command;

use tally_formats::json;
use tally_formats::perf::{data, script};
use tally_testutil::{require, temp_dir};

/// The main thread spins in `spin_a` beside a worker in `spin_b`, then
/// alone after joining it.
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

/// The program recorded by `perf record -g` into `perf.data` in `d`.
pub(crate) fn recorded(d: &Path) -> std::path::PathBuf {
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
    run(Command::new("perf").current_dir(d).args([
        "record",
        "-q",
        "-e",
        "cpu-clock",
        "-g",
        "-o",
        "perf.data",
        "./two",
    ]));
    d.join("perf.data")
}

/// `perf script`'s thread name, tid and time (in microseconds, as it
/// prints them) of every sample.
fn perf_script_times(perf_data: &Path) -> Vec<(String, i32, u64)> {
    let out = run(Command::new("perf")
        .args(["script", "-F", "comm,tid,time", "-i"])
        .arg(perf_data));
    String::from_utf8_lossy(&out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let time = w[w.len() - 1].trim_end_matches(':');
            let (s, us) = time.split_once('.').unwrap();
            let us = s.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap();
            (
                w[..w.len() - 2].join(" "),
                w[w.len() - 2].parse().unwrap(),
                us,
            )
        })
        .collect()
}

#[test]
fn perf_data_and_script_keep_times_and_named_threads() {
    if !require(&["gcc", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let perf_data = recorded(dir.path());
    let bytes = std::fs::read(&perf_data).unwrap();
    let p = data::read(&perf_data, &bytes).unwrap();
    let stacks = p.stacks.as_ref().expect("stacks");
    let t = stacks.timeline.as_ref().expect("a timeline");
    assert!(t.len() > 100, "{} samples", t.len());
    assert!(t.times.is_sorted() && t.times[0] < t.times[t.len() - 1]);

    // Every sample, with perf script's time and thread.
    let theirs = perf_script_times(&perf_data);
    let ours: Vec<(i32, u64)> = (0..t.len())
        .map(|i| (t.threads[t.thread[i] as usize].tid, t.times[i] / 1000))
        .collect();
    let mut theirs_sorted: Vec<(i32, u64)> =
        theirs.iter().map(|(_, tid, us)| (*tid, *us)).collect();
    theirs_sorted.sort_by_key(|&(_, us)| us);
    let mut ours_sorted = ours.clone();
    ours_sorted.sort();
    theirs_sorted.sort();
    assert_eq!(ours_sorted, theirs_sorted);

    // Both threads, by the names the program gave them; the worker's
    // samples are in spin_b.
    let names: Vec<String> = t
        .threads
        .iter()
        .map(|th| String::from_utf8_lossy(&th.name).into_owned())
        .collect();
    for n in ["tl-main", "tl-worker"] {
        assert!(names.iter().any(|x| x == n), "{names:?}");
    }
    let leaf_of = |i: usize| {
        let s = &stacks.samples[t.stack[i] as usize];
        let f = stacks.frames[s.frames.last().unwrap().index()].function;
        String::from_utf8_lossy(p.names.function_name(f)).into_owned()
    };
    let worker = names.iter().position(|x| x == "tl-worker").unwrap() as u32;
    let in_b = (0..t.len())
        .filter(|&i| t.thread[i] == worker && leaf_of(i) == "spin_b")
        .count();
    let of_worker = t.thread.iter().filter(|&&x| x == worker).count();
    assert!(in_b * 10 >= of_worker * 8, "{in_b} of {of_worker}");
    // After the worker's last sample, the main thread is alone in spin_a.
    let end_of_worker = (0..t.len()).rfind(|&i| t.thread[i] == worker).unwrap();
    let alone: Vec<String> = (end_of_worker + 1..t.len()).map(leaf_of).collect();
    let in_a = alone.iter().filter(|n| *n == "spin_a").count();
    assert!(in_a * 10 >= alone.len() * 8 && in_a > 10, "{alone:?}");

    // Every sample's costs sum to the stacks'.
    let events = p.events.len();
    let mut sums = vec![0u64; events];
    for i in 0..t.len() {
        for (a, b) in sums.iter_mut().zip(t.costs_of(i)) {
            *a += b;
        }
    }
    assert_eq!(Some(sums), stacks.totals(events));

    // Through tally's JSON and back.
    let mut text = Vec::new();
    json::write(&p, &mut text).unwrap();
    let back = json::read_stacks(Path::new("t.json"), &text)
        .unwrap()
        .unwrap();
    assert_eq!(&back, stacks);
    assert_eq!(back.timeline.as_ref(), Some(t));

    // perf script's text gives the same times (to the microsecond) and
    // the threads' names of each sample.
    let text = run(Command::new("perf").arg("script").arg("-i").arg(&perf_data));
    let s = script::read(Path::new("perf.script"), &text).unwrap();
    let st = s.stacks.as_ref().unwrap().timeline.as_ref().unwrap();
    let from_text: Vec<(i32, u64)> = (0..st.len())
        .map(|i| (st.threads[st.thread[i] as usize].tid, st.times[i] / 1000))
        .collect();
    let mut from_text_sorted = from_text.clone();
    from_text_sorted.sort();
    assert_eq!(from_text_sorted, ours_sorted);
    assert!(
        st.threads.iter().any(|th| th.name == b"tl-worker"),
        "{:?}",
        st.threads
    );
}

#[test]
fn malformed_timelines_are_refused_with_the_reason() {
    let doc = |timeline: &str| {
        format!(
            r#"{{"tally_json":1,"functions":[{{"id":0}}],"stacks":{{"frames":[[0,0,0]],"samples":[{{"frames":[0],"costs":[3]}}],"timeline":{timeline}}}}}"#
        )
    };
    let read = |t: &str| json::read_stacks(Path::new("x.json"), doc(t).as_bytes());
    let ok = read(r#"{"threads":[{"pid":1,"tid":2,"name":"w"}],"time":[5,9],"thread":[0,0],"stack":[0,0],"costs":[1,2]}"#)
        .unwrap()
        .unwrap();
    let t = ok.timeline.unwrap();
    assert_eq!(
        (t.times, t.costs, t.threads[0].tid),
        (vec![5, 9], vec![1, 2], 2)
    );
    let err = |t: &str| read(t).unwrap_err().to_string();
    assert!(
        err(r#"{"threads":[],"time":[5],"thread":[0],"stack":[0],"costs":[1]}"#)
            .contains("thread 0 is out of range"),
    );
    assert!(
        err(r#"{"threads":[{"pid":1,"tid":2}],"time":[5],"thread":[0],"stack":[4],"costs":[1]}"#)
            .contains("stack 4 is out of range")
    );
    assert!(
        err(r#"{"threads":[{"pid":1,"tid":2}],"time":[9,5],"thread":[0,0],"stack":[0,0],"costs":[1,1]}"#)
            .contains("not in order")
    );
    assert!(
        err(r#"{"threads":[{"pid":1,"tid":2}],"time":[5],"thread":[0],"stack":[0],"costs":[]}"#)
            .starts_with("x.json:1: malformed `stacks`: the timeline's columns differ")
    );
}
