//! `tally convert GMON --binary PROG`: gprof data as Callgrind, checked
//! against Valgrind's callgrind_annotate (live, skipped with a note when it
//! is not installed, failed under CI), against GNU gprof's committed reports in
//! `tests/data/gprof/`, and against `tally annotate`; bad input gets a clear
//! error.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_model::Profile;
use tally_testutil::text;

/// The programs of `tests/data/gprof/` with their `BIN.gmon`.
const BINARIES: &[&str] = &[
    "cycles.O0",
    "cycles.O2",
    "deep.O0",
    "deep.O2",
    "multi.O0",
    "multi.O2",
    "demangle.O1",
];

fn gprof_dir() -> PathBuf {
    tally_testutil::data("gprof")
}

fn data(rel: &str) -> PathBuf {
    gprof_dir().join(rel)
}

fn tally(dir: &Path, args: &[&str]) -> Output {
    tally_testutil::tally!().in_dir(dir).run(args)
}

/// Runs `tally convert` from `tests/data/gprof` with `args` (paths
/// relative to it) into `out`; panics with tally's message on failure.
fn convert_to(out: &Path, args: &[&str]) {
    let mut a = vec!["convert"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let o = tally(&gprof_dir(), &a);
    assert!(o.status.success(), "tally {a:?}: {}", text(&o.stderr));
    assert!(
        o.stderr.is_empty(),
        "tally {a:?} warned: {}",
        text(&o.stderr)
    );
}

/// Converts `BIN.gmon` with `BIN` into `dir/BIN.callgrind`.
fn convert(dir: &Path, bin: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{bin}.callgrind"));
    let gmon = format!("{bin}.gmon");
    let mut args = vec![gmon.as_str(), "--binary", bin];
    args.extend_from_slice(extra);
    convert_to(&out, &args);
    out
}

fn load(path: &Path) -> Profile<u64> {
    let (p, w) = tally_formats::read_files::<u64>(&[path], None).expect("tally reads it");
    assert!(w.iter().all(|w| w.iter().next().is_none()), "warnings");
    p
}

/// What the converted profile says, by printed function names.
#[derive(Default, Debug)]
struct Ours {
    /// Self samples per function name.
    self_by_name: BTreeMap<String, u64>,
    /// Self samples per `file:function`, as callgrind_annotate keys them:
    /// the file of the lines (an inlined header's, after `fi=`).
    self_by_file_fn: BTreeMap<String, u64>,
    /// Calls per (caller, callee) name.
    calls: BTreeMap<(String, String), u64>,
    /// The sum of all self samples.
    total: u64,
}

fn ours(p: &Profile<u64>) -> Ours {
    let mut o = Ours::default();
    let name = |f| text(p.names.function_name(f));
    let file = |f| text(p.names.file_name(f));
    for part in &p.parts {
        part.lines.for_each(|l| {
            let k = l.costs.first().copied().unwrap_or(0);
            *o.self_by_name.entry(name(l.function)).or_default() += k;
            *o.self_by_file_fn
                .entry(format!("{}:{}", file(l.file), name(l.function)))
                .or_default() += k;
            o.total += k;
        });
        for c in part.calls.iter() {
            *o.calls
                .entry((name(c.info.caller), name(c.info.callee)))
                .or_default() += c.info.count;
        }
    }
    o
}

/// GNU gprof's flat profile: self seconds per name (summed over entries of
/// one name, such as two statics `checksum`) and the sampling rate.
fn gprof_flat(report: &str) -> (BTreeMap<String, f64>, f64) {
    let mut out = BTreeMap::new();
    let mut rate = 0.0;
    let mut in_flat = false;
    for line in report.lines() {
        if let Some(rest) = line.strip_prefix("Each sample counts as ") {
            let secs: f64 = rest.split_whitespace().next().unwrap().parse().unwrap();
            rate = (1.0 / secs).round();
        }
        if line.starts_with("Flat profile") {
            in_flat = true;
            continue;
        }
        if line.contains("Call graph") {
            in_flat = false;
        }
        if !in_flat {
            continue;
        }
        // Up to six numeric columns, then the name.
        let mut rest = line;
        let mut numbers = Vec::new();
        while numbers.len() < 6 {
            let t = rest.trim_start();
            let end = t
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(t.len());
            if end == 0 || !(t[end..].is_empty() || t[end..].starts_with(char::is_whitespace)) {
                break;
            }
            numbers.push(t[..end].parse::<f64>().unwrap());
            rest = &t[end..];
        }
        let name = rest.trim();
        if numbers.len() >= 3 && !name.is_empty() {
            *out.entry(name.to_owned()).or_default() += numbers[2];
        }
    }
    assert!(rate > 0.0, "no sampling rate in the report");
    (out, rate)
}

/// The total of GNU gprof's call graph (`... of 2.39 seconds`).
fn gprof_total_seconds(report: &str) -> f64 {
    let line = report
        .lines()
        .find(|l| l.starts_with("granularity:"))
        .expect("granularity line");
    let before = line.trim_end().strip_suffix(" seconds").unwrap();
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// A name as the call graph prints it, without ` <cycle N>` and ` [N]`.
fn graph_name(s: &str) -> String {
    let mut s = s.trim();
    if let Some(i) = s.rfind(" [")
        && s.ends_with(']')
    {
        s = &s[..i];
    }
    if let Some(i) = s.rfind(" <cycle ")
        && s.ends_with('>')
    {
        s = &s[..i];
    }
    s.to_owned()
}

/// GNU gprof's call counts per (caller, callee), from the parent lines of
/// every call-graph entry (`<spontaneous>` and the members of `<cycle N as
/// a whole>` are not arcs).
fn gprof_calls(report: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let mut in_graph = false;
    let mut entry: Vec<&str> = Vec::new();
    let flush = |entry: &mut Vec<&str>, out: &mut BTreeMap<(String, String), u64>| {
        let lines = std::mem::take(entry);
        let Some(primary) = lines.iter().position(|l| l.starts_with('[')) else {
            return;
        };
        // `[N]  %time  self  children  [called]  name [N]`
        let mut rest = lines[primary];
        rest = &rest[rest.find(']').unwrap() + 1..];
        for _ in 0..3 {
            let t = rest.trim_start();
            rest = &t[t.find(char::is_whitespace).unwrap()..];
        }
        let t = rest.trim_start();
        if t.starts_with(|c: char| c.is_ascii_digit()) {
            rest = &t[t.find(char::is_whitespace).unwrap()..];
        }
        let callee = graph_name(rest);
        if callee.starts_with("<cycle") && callee.contains("as a whole") {
            return;
        }
        for l in &lines[..primary] {
            let t = l.trim();
            if t == "<spontaneous>" {
                continue;
            }
            // `[self children] count[/total] name [N]`
            let tokens: Vec<&str> = t.split_whitespace().collect();
            let k = tokens
                .iter()
                .position(|w| w.contains('/') || !w.contains('.'))
                .expect("a count");
            let count: u64 = tokens[k].split('/').next().unwrap().parse().unwrap();
            let at = t.find(tokens[k]).unwrap() + tokens[k].len();
            let caller = graph_name(&t[at..]);
            *out.entry((caller, callee.clone())).or_default() += count;
        }
    };
    for line in report.lines() {
        if line.contains("Call graph") {
            in_graph = true;
            continue;
        }
        if !in_graph {
            continue;
        }
        if line.starts_with("Index by function name") {
            break;
        }
        if line.starts_with("-----") {
            flush(&mut entry, &mut out);
            continue;
        }
        if line.trim().is_empty() || line.starts_with("index") || line.starts_with("granularity") {
            continue;
        }
        entry.push(line);
    }
    flush(&mut entry, &mut out);
    out
}

/// The flat profile and call graph reports of `bin`: `-p` and `-q` where
/// they exist, else `-b` (both).
fn gprof_reports(bin: &str) -> (String, String) {
    let read = |s: &str| std::fs::read_to_string(data(s)).ok();
    match (read(&format!("{bin}.p.txt")), read(&format!("{bin}.q.txt"))) {
        (Some(p), Some(q)) => (p, q),
        _ => {
            let b = read(&format!("{bin}.b.txt")).expect("a -b report");
            (b.clone(), b)
        }
    }
}

/// Per-function self samples match GNU gprof's flat profile: within one
/// sample of the printed seconds (the printed value is rounded to 0.01 s,
/// and a bin split between two functions goes whole to one of them where
/// gprof gives each a fraction: a 1-sample bin half in `frame_dummy`, half
/// in `next_random` is 0.005 s each, printed `0.01` twice), and the sum
/// equals gprof's total exactly.
fn check_flat(bin: &str, o: &Ours, flat_report: &str, graph_report: &str) {
    let (flat, rate) = gprof_flat(flat_report);
    let total = gprof_total_seconds(graph_report);
    assert!(
        (o.total as f64 / rate - total).abs() < 1e-6,
        "{bin}: total {} samples, gprof {total} s",
        o.total
    );
    let mut names: Vec<&String> = flat.keys().chain(o.self_by_name.keys()).collect();
    names.sort();
    names.dedup();
    let mut inexact = Vec::new();
    for name in names {
        let theirs = flat.get(name).copied().unwrap_or(0.0);
        let mine = o.self_by_name.get(name).copied().unwrap_or(0) as f64 / rate;
        assert!(
            (mine - theirs).abs() <= 1.0 / rate + 1e-9,
            "{bin}: {name}: {mine} s here, {theirs} s in gprof's flat profile"
        );
        if (mine - theirs).abs() > 1e-9 {
            inexact.push(name.clone());
        }
    }
    if !inexact.is_empty() {
        eprintln!("{bin}: one sample off gprof's rounded seconds: {inexact:?}");
    }
}

#[test]
fn self_samples_and_call_counts_match_gnu_gprof() {
    let dir = tempfile::tempdir().unwrap();
    for bin in BINARIES {
        // GNU gprof 2.40 loses some GCC clones (`fill.constprop.0` in
        // multi.O2) to the preceding function; compare in its mode.
        let out = convert(dir.path(), bin, &["--gnu-compatible"]);
        let o = ours(&load(&out));
        let (flat, graph) = gprof_reports(bin);
        check_flat(bin, &o, &flat, &graph);
        let theirs = gprof_calls(&graph);
        assert!(!theirs.is_empty(), "{bin}: no arcs parsed");
        assert_eq!(o.calls, theirs, "{bin}: calls per (caller, callee)");
    }
}

#[test]
fn clones_are_functions_of_their_own_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let o = ours(&load(&convert(dir.path(), "multi.O2", &[])));
    let g = ours(&load(&convert(
        dir.path(),
        "multi.O2",
        &["--gnu-compatible"],
    )));
    assert_eq!(o.total, g.total);
    assert!(!g.self_by_name.contains_key("fill.constprop.0"));
    // GNU's `checksum` (multi_a.c) takes the clone's samples.
    assert_eq!(
        o.self_by_name.get("fill.constprop.0").copied().unwrap_or(0)
            + o.self_by_name.get("checksum").copied().unwrap_or(0),
        g.self_by_name.get("checksum").copied().unwrap_or(0)
    );
    assert_eq!(
        o.calls.get(&("main".into(), "fill.constprop.0".into())),
        Some(&10),
        "{:?}",
        o.calls
    );
}

#[test]
fn several_gmon_files_are_summed_as_gprof_sums_them() {
    let dir = tempfile::tempdir().unwrap();
    let both = dir.path().join("both.callgrind");
    convert_to(
        &both,
        &[
            "cycles.O0.gmon",
            "cycles.O0.run2.gmon",
            "--binary",
            "cycles.O0",
        ],
    );
    let o = ours(&load(&both));
    let report = std::fs::read_to_string(data("cycles.O0.sum.b.txt")).unwrap();
    check_flat("cycles.O0 (2 runs)", &o, &report, &report);
    assert_eq!(o.calls, gprof_calls(&report));
    let one = ours(&load(&convert(dir.path(), "cycles.O0", &[])));
    let two = dir.path().join("run2.callgrind");
    convert_to(&two, &["cycles.O0.run2.gmon", "--binary", "cycles.O0"]);
    assert_eq!(o.total, one.total + ours(&load(&two)).total);

    // gprof -s's gmon.sum (from_pc at line starts, arcs merged) gives the
    // same calls and samples.
    let sum = dir.path().join("sum.callgrind");
    convert_to(&sum, &["cycles.O0.sum.gmon", "--binary", "cycles.O0"]);
    let s = ours(&load(&sum));
    assert_eq!(s.calls, o.calls);
    assert_eq!(s.self_by_name, o.self_by_name);
}

/// callgrind_annotate's `file:function` table: the first number of each
/// row per name (`.` is 0).
fn annotate_table(out: &str, header: &str) -> BTreeMap<String, u64> {
    let mut rows = BTreeMap::new();
    let mut lines = out.lines();
    for l in lines.by_ref() {
        if l.trim_end().ends_with(header) && l.trim_start().starts_with("Samples") {
            break;
        }
    }
    lines.next(); // dashes
    for l in lines {
        if l.trim().is_empty() {
            break;
        }
        let t = l.trim_start();
        let (count, rest) = t.split_once(char::is_whitespace).unwrap();
        let count: u64 = if count == "." {
            0
        } else {
            count.replace(',', "").parse().unwrap()
        };
        let mut rest = rest.trim_start();
        if rest.starts_with('(') {
            rest = rest[rest.find(')').unwrap() + 1..].trim_start();
        }
        let name = rest.rsplit_once(" [").map_or(rest, |(n, _)| n);
        *rows.entry(name.to_owned()).or_default() += count;
    }
    rows
}

fn callgrind_annotate(dir: &Path, args: &[&str]) -> Output {
    Command::new("callgrind_annotate")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run callgrind_annotate")
}

#[test]
fn callgrind_annotate_reads_the_conversion() {
    if !tally_testutil::require(&["callgrind_annotate"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for bin in BINARIES {
        let out = convert(dir.path(), bin, &[]);
        let path = out.to_str().unwrap();
        let o = ours(&load(&out));
        let mine: BTreeMap<String, u64> = o
            .self_by_file_fn
            .iter()
            .filter(|e| *e.1 > 0)
            .map(|(k, v)| (k.clone(), *v))
            .collect();

        // cycles.O0 with the default auto-annotation, from the folder of
        // its sources: no complaint at all. (Elsewhere callgrind_annotate
        // 3.19 prints Perl warnings when it auto-annotates a source file
        // that holds call sites but no samples, such as an inlined STL
        // header; hence --auto=no.)
        let auto = if *bin == "cycles.O0" {
            "--auto=yes"
        } else {
            "--auto=no"
        };
        let r = callgrind_annotate(&gprof_dir(), &["--threshold=100", auto, path]);
        assert!(r.status.success(), "{bin}: {}", text(&r.stderr));
        assert!(r.stderr.is_empty(), "{bin}: {}", text(&r.stderr));
        let report = text(&r.stdout);
        assert!(
            report.contains(&format!("{} (100.0%)  PROGRAM TOTALS", o.total))
                || report.contains(&format!("{}  PROGRAM TOTALS", o.total)),
            "{bin}: {report}"
        );
        let theirs: BTreeMap<String, u64> = annotate_table(&report, "file:function")
            .into_iter()
            .filter(|e| e.1 > 0)
            .collect();
        assert_eq!(theirs, mine, "{bin}: self samples per file:function");

        // With calls: inclusive costs and trees read, none above the total.
        let r = callgrind_annotate(
            dir.path(),
            &["--threshold=100", "--auto=no", "--inclusive=yes", path],
        );
        assert!(r.status.success(), "{bin}: {}", text(&r.stderr));
        assert!(r.stderr.is_empty(), "{bin}: {}", text(&r.stderr));
        let inclusive = annotate_table(&text(&r.stdout), "file:function");
        assert!(inclusive.len() >= mine.len(), "{bin}: {inclusive:?}");
        for (f, v) in &inclusive {
            assert!(
                *v <= o.total,
                "{bin}: {f} inclusive {v} > total {}",
                o.total
            );
        }
        let r = callgrind_annotate(
            dir.path(),
            &[
                "--threshold=100",
                "--auto=no",
                "--inclusive=yes",
                "--tree=both",
                path,
            ],
        );
        assert!(r.status.success(), "{bin}: {}", text(&r.stderr));
        assert!(r.stderr.is_empty(), "{bin}: {}", text(&r.stderr));
        let tree = text(&r.stdout);
        for l in tree.lines().filter(|l| l.contains(" [/")) {
            let n = l.split_whitespace().next().unwrap();
            if n != "." {
                let n: u64 = n.replace(',', "").parse().unwrap();
                assert!(n <= o.total, "{bin}: {l}");
            }
        }
    }
}

fn annotate_json(file: &Path, extra: &[&str]) -> Value {
    let mut a = vec!["annotate", "--json", "--threshold=100"];
    a.extend_from_slice(extra);
    a.push(file.to_str().unwrap());
    let out = tally(&gprof_dir(), &a);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn tally_annotate_shows_gprofs_top_function() {
    let dir = tempfile::tempdir().unwrap();
    for bin in BINARIES {
        let out = convert(dir.path(), bin, &["--gnu-compatible"]);
        let (flat, _) = gprof_reports(bin);
        let first = flat
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("time"))
            .nth(1)
            .expect("a flat profile row");
        let top = first.split_whitespace().last().unwrap();
        let j = annotate_json(&out, &[]);
        let total = j["totals"]["Samples"].as_u64().unwrap();
        let rows = j["functions"].as_array().unwrap();
        assert!(
            rows[0]["function"].as_str().unwrap().ends_with(top),
            "{bin}: {} first, gprof has {top}",
            rows[0]
        );
        // Inclusive costs (estimates) stay within the total, cycles too.
        let j = annotate_json(&out, &["--inclusive=yes"]);
        for r in j["functions"].as_array().unwrap() {
            if let Some(i) = r.get("inclusive").and_then(|i| i["Samples"].as_u64()) {
                assert!(i <= total, "{bin}: {r}");
            }
        }
        for c in j["cycles"].as_array().into_iter().flatten() {
            assert!(
                c["inclusive"]["Samples"].as_u64().unwrap() <= total,
                "{bin}: {c}"
            );
        }
    }

    // Text, trees, source and assembly annotation work on it.
    let out = convert(dir.path(), "cycles.O0", &[]);
    let o = out.to_str().unwrap();
    for args in [
        vec!["annotate", o],
        vec!["annotate", "--inclusive=yes", "--tree=both", o],
        vec!["annotate", "--auto=yes", "--threshold=50", o],
        vec!["annotate", "--asm", "--threshold=50", o],
    ] {
        let r = tally(&gprof_dir(), &args);
        assert!(r.status.success(), "{args:?}: {}", text(&r.stderr));
        let s = text(&r.stdout);
        assert!(s.contains("hot_loop"), "{args:?}: {s}");
        if args.contains(&"--auto=yes") {
            // The source is found (names are relative to tests/data/gprof)
            // and hot_loop's loop line carries samples.
            let line = s
                .lines()
                .find(|l| l.contains("b ^= a >> 17;"))
                .unwrap_or_else(|| panic!("{s}"));
            assert!(
                line.trim_start().starts_with(|c: char| c.is_ascii_digit()),
                "{line}"
            );
            assert!(!s.contains("not found: ./src/cycles.c"), "{s}");
        }
        if args.contains(&"--asm") {
            // Samples sit on instructions: none left over.
            assert!(!s.contains("outside the disassembly"), "{s}");
        }
    }
}

#[test]
fn the_header_says_what_is_measured_and_what_is_estimated() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("callgrind.out.plain");
    convert_to(
        &out,
        &["cycles.O0.gmon", "--binary", "cycles.O0", "--no-compress"],
    );
    let s = std::fs::read_to_string(&out).unwrap();
    let header: Vec<&str> = s.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(header[0], "# callgrind format");
    assert!(header.contains(&"creator: tally"), "{header:?}");
    assert!(header.contains(&"cmd: cycles.O0"), "{header:?}");
    assert!(header.contains(&"positions: instr line"), "{header:?}");
    assert!(header.contains(&"events: Samples"), "{header:?}");
    assert!(header.contains(&"summary: 239"), "{header:?}");
    assert!(s.trim_end().ends_with("totals: 239"));
    let desc: Vec<&&str> = header.iter().filter(|l| l.starts_with("desc: ")).collect();
    assert!(
        desc.iter().any(|d| d.contains("Self cost: sampled")),
        "{desc:?}"
    );
    assert!(
        desc.iter()
            .any(|d| d.contains("Call cost: estimated") && d.contains("average")),
        "{desc:?}"
    );
    assert!(s.contains("\nob=/"), "the program by its absolute path");
    assert!(s.contains("\nfl=./src/cycles.c\n"));

    // main's calls sit on its call instructions (objdump -d cycles.O0):
    // the gmon from_pc 0x1760 holds both main → scramble and main → mix.
    let main = &s[s.find("\nfn=main\n").unwrap()..];
    for (callee, site) in [
        ("scramble", "0x175b 156"),
        ("mix", "0x176a 157"),
        ("hot_loop", "0x17b1 161"),
    ] {
        let at = main.find(&format!("\ncfn={callee}\n")).unwrap();
        let mut rest = main[at..].lines().skip(3);
        let site_line = rest.next().unwrap();
        assert!(site_line.starts_with(site), "{callee}: {site_line}");
    }
    // The hot loop's call carries its whole time: 108 samples.
    assert!(main.contains("\n0x17b1 161 108\n"), "{main}");
}

#[test]
fn other_output_formats() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cycles.json");
    convert_to(&json, &["cycles.O0.gmon", "--binary", "cycles.O0"]);
    let j: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(j["creator"], "tally");

    let cg = dir.path().join("cachegrind.out.1");
    convert_to(
        &cg,
        &["--from", "gmon", "cycles.O0.gmon", "--binary", "cycles.O0"],
    );
    let p = load(&cg);
    assert_eq!(p.totals(), Some(vec![239]));

    let gz = dir.path().join("callgrind.out.gz");
    convert_to(
        &gz,
        &[
            "cycles.O0.gmon",
            "--binary",
            "cycles.O0",
            "--to",
            "callgrind",
        ],
    );
    assert_eq!(load(&gz).totals(), Some(vec![239]));
}

/// Runs a conversion expected to fail: exit status 1, a message on stderr
/// naming `names`, no panic, no output file.
fn fails(args: &[&str], names: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.callgrind");
    let mut a = vec!["convert"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", out.to_str().unwrap()]);
    let o = tally(&gprof_dir(), &a);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{a:?}: {err}");
    assert!(!err.contains("panicked"), "{a:?}: {err}");
    for n in names {
        assert!(err.contains(n), "{a:?}: `{n}` not in: {err}");
    }
    assert!(!out.exists(), "{a:?} wrote a file");
}

#[test]
fn bad_input_gets_a_clear_error() {
    // gmon without --binary: a usage error, as in every command.
    let o = tally(&gprof_dir(), &["convert", "cycles.O0.gmon", "-o", "-"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("cycles.O0.gmon: a gmon file needs the program"));
    // A truncated gmon file: the file and the offset of the cut record.
    fails(
        &["bad/truncated.gmon", "--binary", "cycles.O0"],
        &["bad/truncated.gmon", "truncated"],
    );
    fails(
        &["bad/empty.gmon", "--binary", "cycles.O0"],
        &["bad/empty.gmon", "too short"],
    );
    fails(
        &["bad/not-gmon.gmon", "--binary", "cycles.O0"],
        &["bad/not-gmon.gmon", "magic"],
    );
    fails(
        &[
            "bad/no-such-file.gmon",
            "--from",
            "gmon",
            "--binary",
            "cycles.O0",
        ],
        &["bad/no-such-file.gmon"],
    );
    // Not an ELF file, no symbols, no file.
    fails(
        &["cycles.O0.gmon", "--binary", "bad/not-elf.bin"],
        &["bad/not-elf.bin", "not an ELF file"],
    );
    fails(
        &["cycles.O0.gmon", "--binary", "bad/cycles.O0.stripped"],
        &["bad/cycles.O0.stripped", "no symbols"],
    );
    fails(
        &["cycles.O0.gmon", "--binary", "no-such-program"],
        &["no-such-program"],
    );
    // Runs of two programs cannot be summed.
    fails(
        &["cycles.O0.gmon", "deep.O0.gmon", "--binary", "cycles.O0"],
        &["deep.O0.gmon", "cycles.O0.gmon"],
    );
    // gmon options on a Callgrind profile, and mixed inputs.
    fails(
        &["../callgrind/mutual.default.out", "--binary", "cycles.O0"],
        &["mutual.default.out", "--binary"],
    );
    fails(
        &["cycles.O0.gmon", "../callgrind/mutual.default.out"],
        &["cycles.O0.gmon", "mutual.default.out"],
    );
}

#[test]
fn a_profile_of_another_program_is_converted_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("wrong.callgrind");
    let o = tally(
        &gprof_dir(),
        &[
            "convert",
            "cycles.O0.gmon",
            "--binary",
            "cycles.O2",
            "-o",
            out.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("warning") && err.contains("another program"),
        "{err}"
    );
}
