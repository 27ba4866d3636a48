//! JIT-compiled and stripped code in recorded profiles: a Node.js and a
//! Java program's hottest function named by the JIT's perf map (and
//! Node's jitdump), in `tally record`'s output and in a perf.data that
//! `perf report` reads with the same map; Debian's stripped `xz` split by
//! page where it was one `[unknown]` row.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tally_testutil::recorder::serial;
use tally_testutil::{require, tally, temp_dir};

/// A hot JavaScript function and a cooler one, for about a second.
const NODE_PROGRAM: &str = r#"
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

/// A hot Java method, for about a second and a half after start-up.
const JAVA_PROGRAM: &str = r#"
public class Hot {
    static long hotMethod(long n) {
        long s = 0;
        for (long i = 0; i < n; i++) { s = (s * 31 + i) % 1000003; }
        return s;
    }
    public static void main(String[] args) {
        long end = System.currentTimeMillis() + 1500;
        long t = 0;
        while (System.currentTimeMillis() < end) { t += hotMethod(1000000); }
        System.out.println(t);
    }
}
"#;

/// The JVM's options that make it write its perf map when it exits.
const JAVA_MAP: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit"];

fn run(cmd: &mut Command) -> Vec<u8> {
    let o = cmd.output().expect("run a tool");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A self share: object, function, percent.
type Row = (String, String, f64);

/// `tally annotate --json`'s functions by self cost, hottest first.
fn tally_rows(d: &Path, file: &str) -> Vec<Row> {
    let out = tally!()
        .in_dir(d)
        .ok(&["annotate", "--threshold=100", "--json", file]);
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let event = json["events"][0].as_str().expect("an event").to_string();
    let total = json["totals"][&event].as_f64().expect("a total");
    let mut rows: Vec<Row> = json["functions"]
        .as_array()
        .expect("functions")
        .iter()
        .map(|f| {
            (
                f["object"].as_str().unwrap_or_default().to_string(),
                f["function"].as_str().unwrap().to_string(),
                100.0 * f["self"][&event].as_f64().unwrap_or(0.0) / total,
            )
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// `perf report`'s self shares of a perf.data by object and symbol
/// (the rows of one name summed: a JIT compiles a function more than
/// once), hottest first.
fn perf_rows(d: &Path) -> Vec<Row> {
    let out = run(Command::new("perf").current_dir(d).args([
        "report",
        "-i",
        "perf.data",
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
    let mut sums: BTreeMap<(String, String), f64> = BTreeMap::new();
    for l in String::from_utf8_lossy(&out).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let [pct, dso, sym] = f[..] else { continue };
        let Ok(pct) = pct.trim().trim_end_matches('%').parse::<f64>() else {
            continue;
        };
        let sym = sym.split_once("] ").map_or(sym, |x| x.1).trim();
        *sums
            .entry((dso.trim().to_string(), sym.to_string()))
            .or_default() += pct;
    }
    let mut rows: Vec<Row> = sums.into_iter().map(|((o, s), v)| (o, s, v)).collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// Removes the perf maps of the JIT objects (`[JIT] tid PID`) of `rows`
/// when dropped: the JITs write them to /tmp.
struct Maps(Vec<String>);

impl Maps {
    fn of(rows: &[Row]) -> Maps {
        Maps(
            rows.iter()
                .filter_map(|r| r.0.strip_prefix("[JIT] tid "))
                .map(|pid| format!("/tmp/perf-{pid}.map"))
                .collect(),
        )
    }
}

impl Drop for Maps {
    fn drop(&mut self) {
        for m in &self.0 {
            let _ = std::fs::remove_file(m);
        }
    }
}

/// The hottest row is the JIT's function `name` (a part of its name).
fn hottest_is_jit(rows: &[Row], name: &str) {
    let (object, function, share) = &rows[0];
    assert!(
        object.starts_with("[JIT] tid ") && function.contains(name),
        "hottest is {function} [{object}], not {name}: {:?}",
        &rows[..rows.len().min(8)]
    );
    assert!(*share > 30.0, "{share}%: {:?}", &rows[..rows.len().min(8)]);
}

/// The same perf.data read by tally and by `perf report`: the same
/// hottest row, the same self share within 2 points (one reading of
/// the same samples and the same map).
fn agrees_with_perf(d: &Path, name: &str) {
    let ours = tally_rows(d, "perf.data");
    let _maps = Maps::of(&ours);
    let theirs = perf_rows(d);
    eprintln!("tally {:?}\nperf {:?}", &ours[..3], &theirs[..3]);
    hottest_is_jit(&ours, name);
    let (o, f, share) = &ours[0];
    // tally writes a function name as perf does; perf's object is the
    // same `[JIT] tid PID`.
    let theirs_top = &theirs[0];
    assert_eq!((o, f), (&theirs_top.0, &theirs_top.1), "{theirs:?}");
    assert!(
        (share - theirs_top.2).abs() < 2.0,
        "tally {share}%, perf {}%",
        theirs_top.2
    );
}

#[test]
fn node_functions_are_named_from_the_perf_map() {
    let _serial = serial();
    if !require(&["node", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    std::fs::write(d.join("prog.js"), NODE_PROGRAM).unwrap();
    tally!().in_dir(d).ok(&[
        "record",
        "-o",
        "out.json",
        "--",
        "node",
        "--perf-basic-prof",
        "prog.js",
    ]);
    let rows = tally_rows(d, "out.json");
    let _maps = Maps::of(&rows);
    hottest_is_jit(&rows, "JS:*hotLoop");

    // perf record of the same program, read by both.
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
    agrees_with_perf(d, "JS:*hotLoop");
}

/// Node's `--perf-prof` writes a jitdump file (`jit-PID.dump`, in the
/// current directory) and no perf map: tally finds it by its mapping.
#[test]
fn node_functions_are_named_from_the_jitdump() {
    let _serial = serial();
    if !require(&["node"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    std::fs::write(d.join("prog.js"), NODE_PROGRAM).unwrap();
    tally!().in_dir(d).ok(&[
        "record",
        "-o",
        "out.json",
        "--",
        "node",
        "--perf-prof",
        "prog.js",
    ]);
    let dumps: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("jit-"))
        .collect();
    assert_eq!(dumps.len(), 1, "node wrote one jitdump");
    let rows = tally_rows(d, "out.json");
    let _maps = Maps::of(&rows);
    for (object, _, _) in &rows {
        let pid = object.strip_prefix("[JIT] tid ").unwrap_or("none");
        assert!(
            !Path::new(&format!("/tmp/perf-{pid}.map")).exists(),
            "no perf map is written with --perf-prof"
        );
    }
    hottest_is_jit(&rows, "JS:*hotLoop");
}

#[test]
fn java_methods_are_named_from_the_perf_map() {
    let _serial = serial();
    if !require(&["java", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    std::fs::write(d.join("Hot.java"), JAVA_PROGRAM).unwrap();
    let mut args = vec!["record", "-o", "out.json", "--", "java"];
    args.extend(JAVA_MAP);
    args.push("Hot.java");
    tally!().in_dir(d).ok(&args);
    let rows = tally_rows(d, "out.json");
    let _maps = Maps::of(&rows);
    hottest_is_jit(&rows, "Hot.hotMethod");

    let mut args = vec!["record", "-q", "-g", "-o", "perf.data", "--", "java"];
    args.extend(JAVA_MAP);
    args.push("Hot.java");
    run(Command::new("perf").current_dir(d).args(&args));
    agrees_with_perf(d, "Hot.hotMethod");
}

/// The page rows tally makes of a stripped library's samples,
/// `[0xPAGE] …`, from perf's per-address rows (`0x…`); named rows are
/// kept as they are.
fn by_page(rows: &[Row]) -> Vec<Row> {
    let mut sums: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (object, sym, v) in rows {
        let name = match sym
            .strip_prefix("0x")
            .and_then(|a| u64::from_str_radix(a, 16).ok())
        {
            Some(a) => format!("[{:#x}]", a & !0xfff),
            None => sym.clone(),
        };
        *sums.entry((object.clone(), name)).or_default() += v;
    }
    let mut rows: Vec<Row> = sums.into_iter().map(|((o, s), v)| (o, s, v)).collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2));
    rows
}

/// Debian's xz keeps only exported functions in liblzma: its samples are
/// split by page, several rows of the library where there was one, and
/// the hottest page is the one perf's hottest addresses are in.
#[test]
fn stripped_xz_is_split_by_page_as_perf_shows_its_addresses() {
    let _serial = serial();
    if !require(&["xz", "perf"]) {
        return;
    }
    let dir = temp_dir();
    let d = dir.path();
    // About a second of xz -9: 2 MB of text with some repetition.
    let text: String = (0..200_000u64)
        .map(|i| {
            format!(
                "{:08x} {}\n",
                i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32,
                i % 97
            )
        })
        .collect();
    std::fs::write(d.join("input.txt"), text).unwrap();
    let xz = ["xz", "-9", "-k", "-f", "input.txt"];
    let mut args = vec!["record", "-o", "out.json", "--"];
    args.extend(xz);
    tally!().in_dir(d).ok(&args);
    let rows = tally_rows(d, "out.json");
    let lzma: Vec<&Row> = rows.iter().filter(|r| r.0.contains("liblzma")).collect();
    eprintln!("{:?}", &lzma[..lzma.len().min(6)]);
    assert!(
        lzma.iter().all(|r| r.1 != "[unknown]"),
        "liblzma has an [unknown] row: {lzma:?}"
    );
    let named = lzma.iter().filter(|r| r.2 > 2.0).count();
    assert!(named >= 3, "{named} rows over 2 %: {lzma:?}");
    let paged = lzma
        .iter()
        .find(|r| r.1.starts_with("[0x"))
        .expect("a page");
    // Named by the page and by an exported function before it.
    assert!(paged.1.contains("] lzma_"), "{paged:?}");

    let mut args = vec!["record", "-q", "-g", "-o", "perf.data", "--"];
    args.extend(xz);
    run(Command::new("perf").current_dir(d).args(&args));
    let ours = tally_rows(d, "perf.data");
    let theirs = by_page(&perf_rows(d));
    eprintln!("tally {:?}\nperf {:?}", &ours[..3], &theirs[..3]);
    let (object, name, share) = &ours[0];
    assert!(object.ends_with(&theirs[0].0), "{object} {:?}", theirs[0]);
    assert!(
        name == &theirs[0].1 || name.starts_with(&format!("{} ", theirs[0].1)),
        "tally's hottest {name}, perf's {:?}",
        theirs[0]
    );
    assert!((share - theirs[0].2).abs() < 2.0, "{share} {:?}", theirs[0]);
}
