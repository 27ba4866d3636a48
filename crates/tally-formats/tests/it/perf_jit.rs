//! perf.data of JIT-compiled and stripped code, read by tally and by
//! `perf report` from the same file: Node.js code named from its perf map
//! (`node --perf-basic-prof`), and a stripped library's code named by
//! page and nearest exported function.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_formats::perf::data;
use tally_model::Profile;
use tally_testutil::{path_str, require, temp_dir};

/// A hot JavaScript function and a cooler one, for about a second.
pub const NODE_PROGRAM: &str = r#"
function hotLoop(n) {
  let s = 0;
  for (let i = 0; i < n; i++) { s = (s * 31 + i) % 1000003; }
  return s;
}
function coldPart(n) { const a = []; for (let i = 0; i < n; i++) a.push(i); return a.length; }
let t = 0;
const end = Date.now() + 1000;
while (Date.now() < end) { t += hotLoop(1e6); t += coldPart(1e4); }
console.log(t);
"#;

/// A shared library whose exported function calls two static ones, hot
/// in different pages after it (built in source order); stripped, only
/// `work` keeps a name.
const LIBRARY: &str = r#"
static volatile long sink;
static long mix(long n);
static long fold(long n);
long work(long n) { long t = 0; for (int k = 0; k < 3; k++) t += mix(n); t += fold(n / 3); sink = t; return t; }
__attribute__((noinline)) static long mix(long n) { long s = 0; for (long i = 0; i < n; i++) s += (i * i) ^ (s >> 3); return s; }
__attribute__((noinline, aligned(4096))) static long fold(long n) { long s = 1; for (long i = 0; i < n; i++) s = s * 7 + (i ^ (s >> 5)); return s; }
"#;

const MAIN: &str = r#"
#include <stdio.h>
long work(long n);
int main(void) { long t = 0; for (int i = 0; i < 40; i++) t += work(2000000); printf("%ld\n", t); return 0; }
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

/// `perf report`'s self shares of one perf.data, in percent, by
/// (object, symbol), summed over the rows of one name.
fn perf_report(perf_data: &Path) -> BTreeMap<(String, String), f64> {
    let out = run(Command::new("perf").args([
        "report",
        "-i",
        path_str(perf_data),
        "--stdio",
        "--no-children",
        "-g",
        "none",
        "--percent-limit",
        "0",
        "--sort",
        "dso,sym",
        "--field-separator",
        "\t",
    ]));
    let mut rows = BTreeMap::new();
    for l in String::from_utf8_lossy(&out).lines() {
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split('\t').collect();
        let [pct, dso, sym] = f[..] else { continue };
        let Ok(pct) = pct.trim().trim_end_matches('%').parse::<f64>() else {
            continue;
        };
        // `[.] name`: the privilege level before the symbol.
        let sym = sym.split_once("] ").map_or(sym, |x| x.1).trim();
        *rows
            .entry((dso.trim().to_string(), sym.to_string()))
            .or_default() += pct;
    }
    rows
}

/// tally's self shares of `p`, in percent, by (object, function).
fn self_shares(p: &Profile<u64>) -> BTreeMap<(String, String), f64> {
    let stacks = p.stacks.as_ref().expect("stacks");
    let mut by = BTreeMap::new();
    let mut total = 0.0;
    for s in &stacks.samples {
        let f = stacks.frames[s.frames.last().expect("a leaf").index()].function;
        let cost: u64 = s.costs.iter().sum();
        total += cost as f64;
        let key = (
            String::from_utf8_lossy(p.names.function_object(f)).into_owned(),
            String::from_utf8_lossy(p.names.function_name(f)).into_owned(),
        );
        *by.entry(key).or_default() += cost as f64;
    }
    by.values_mut().for_each(|v| *v *= 100.0 / total);
    by
}

fn top<K: Clone>(m: &BTreeMap<K, f64>) -> (K, f64) {
    m.iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, v)| (k.clone(), *v))
        .expect("some rows")
}

fn read(perf_data: &Path) -> Profile<u64> {
    let bytes = std::fs::read(perf_data).unwrap();
    data::read(perf_data, &bytes).unwrap()
}

/// The perf map a process wrote, removed when the test ends.
struct PerfMap(std::path::PathBuf);

impl Drop for PerfMap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The pid of the process sampled in `p` whose perf map exists.
fn perf_map_of(p: &Profile<u64>) -> Option<PerfMap> {
    let t = p.stacks.as_ref()?.timeline.as_ref()?;
    t.threads
        .iter()
        .map(|th| PathBuf::from(format!("/tmp/perf-{}.map", th.pid)))
        .find(|m| m.exists())
        .map(PerfMap)
}

#[test]
fn node_jit_code_is_named_from_its_perf_map_as_perf_report_names_it() {
    if !require(&["perf", "node"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    std::fs::write(d.join("prog.js"), NODE_PROGRAM).unwrap();
    run(Command::new("perf").current_dir(d).args([
        "record",
        "-q",
        "-g",
        "-o",
        "perf.data",
        "--",
        "node",
        "--perf-basic-prof",
        "prog.js",
    ]));
    let perf_data = d.join("perf.data");
    let p = read(&perf_data);
    let map = perf_map_of(&p).expect("node wrote its perf map");
    let ours = self_shares(&p);
    let theirs = perf_report(&perf_data);
    let ((object, name), share) = top(&ours);
    eprintln!(
        "tally: {object} {name} {share:.1}%; perf: {:?}",
        top(&theirs)
    );
    assert!(
        object.starts_with("[JIT] tid ") && name.starts_with("JS:") && name.contains("hotLoop"),
        "{object} {name}: {ours:?}"
    );
    assert!(share > 50.0, "{share}");
    // The same file, the same map: the same row, the same share.
    let ((their_object, their_name), their_share) = top(&theirs);
    assert_eq!((&object, &name), (&their_object, &their_name));
    assert!((share - their_share).abs() < 1.0, "{share} {their_share}");
    // Nothing of the JIT's code is left unnamed where perf names it.
    let unnamed: f64 = ours
        .iter()
        .filter(|((o, n), _)| o == "//anon" && n == "[unknown]")
        .map(|(_, v)| v)
        .sum();
    assert!(unnamed < 2.0, "{unnamed}% in anonymous memory: {ours:?}");

    // A bad line of the map is skipped with a warning naming the file
    // and the line; the rest is read.
    let mut text = std::fs::read(&map.0).unwrap();
    let lines = text.iter().filter(|&&b| b == b'\n').count();
    text.extend(b"not a map line\n");
    std::fs::write(&map.0, &text).unwrap();
    let again = read(&perf_data);
    let warning = format!(
        "{}: line {}: not `START SIZE NAME`",
        map.0.display(),
        lines + 1
    );
    let desc: Vec<String> = again.parts[0]
        .info
        .desc
        .iter()
        .map(|(k, v)| {
            format!(
                "{}:{}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    assert!(
        desc.iter()
            .any(|d| d.starts_with(&format!("Warning: {warning}"))),
        "{desc:?}"
    );
    assert_eq!(self_shares(&again), ours);
}

#[test]
fn stripped_code_is_named_by_page_and_the_exported_function_before_it() {
    if !require(&["perf", "gcc", "strip"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    std::fs::write(d.join("lib.c"), LIBRARY).unwrap();
    std::fs::write(d.join("main.c"), MAIN).unwrap();
    run(Command::new("gcc").current_dir(d).args([
        "-O1",
        "-fno-toplevel-reorder",
        "-fno-omit-frame-pointer",
        "-shared",
        "-fPIC",
        "-o",
        "libwork.so",
        "lib.c",
    ]));
    run(Command::new("strip").current_dir(d).arg("libwork.so"));
    run(Command::new("gcc").current_dir(d).args([
        "-O1",
        "-o",
        "main",
        "main.c",
        "-L.",
        "-lwork",
        "-Wl,-rpath,$ORIGIN",
    ]));
    run(Command::new("perf").current_dir(d).args([
        "record",
        "-q",
        "-g",
        "-o",
        "perf.data",
        "--",
        "./main",
    ]));
    let perf_data = d.join("perf.data");
    let ours = self_shares(&read(&perf_data));
    let lib: BTreeMap<String, f64> = ours
        .iter()
        .filter(|((o, _), _)| o.ends_with("/libwork.so"))
        .map(|((_, n), v)| (n.clone(), *v))
        .collect();
    eprintln!("tally: {lib:?}");
    // Two hot places, apart, each named by its page and by `work`, the
    // one exported function, which comes before both.
    let hot: Vec<&String> = lib.iter().filter(|(_, v)| **v > 5.0).map(|x| x.0).collect();
    assert!(hot.len() >= 2, "{lib:?}");
    for name in &hot {
        assert!(
            name.starts_with("[0x") && name.contains("] work+0x"),
            "{name}"
        );
    }
    // perf shows each address: summed by page, its hottest page is ours.
    let mut pages: BTreeMap<u64, f64> = BTreeMap::new();
    for ((dso, sym), v) in perf_report(&perf_data) {
        if dso == "libwork.so"
            && let Some(addr) = sym.strip_prefix("0x")
        {
            let addr = u64::from_str_radix(addr, 16).expect("a hexadecimal address");
            *pages.entry(addr & !0xfff).or_default() += v;
        }
    }
    let (page, share) = top(&pages);
    let (name, ours_share) = top(&lib);
    eprintln!("perf's pages: {pages:x?}");
    assert!(
        name.starts_with(&format!("[{page:#x}] ")),
        "{name} {page:#x}"
    );
    assert!((share - ours_share).abs() < 1.0, "{share} {ours_share}");
}
