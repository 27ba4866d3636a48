//! `tally gprof CALLGRIND-PROFILE`: gprof's call-graph analysis on
//! Callgrind profiles. A hand-checked small profile (every number worked
//! out below), the cycles and their measured costs against `tally annotate
//! --inclusive=yes` on every fixture, `calls=0` arcs, multi-part files, and
//! the options.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use tally_testutil::data;

fn tally(args: &[&str]) -> Output {
    tally_testutil::tally!().run(args)
}

fn ok(args: &[&str]) -> String {
    String::from_utf8(tally_testutil::tally!().ok(args).stdout).expect("UTF-8")
}

fn json(args: &[&str]) -> Value {
    serde_json::from_str(&ok(args)).expect("JSON")
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_owned()
}

/// The whitespace-separated words of the line that ends with `suffix`
/// within the section starting at `section`.
fn words_of(text: &str, section: &str, suffix: &str) -> Vec<String> {
    let start = text.find(section).unwrap_or_else(|| panic!("no {section}"));
    let line = text[start..]
        .lines()
        .find(|l| l.ends_with(suffix))
        .unwrap_or_else(|| panic!("no line ending with `{suffix}` in:\n{text}"));
    line.split_whitespace().map(str::to_owned).collect()
}

/// All lines (as words) of the call-graph entry whose own line ends with
/// `own`: (callers, own line, callees).
type Entry = (Vec<Vec<String>>, Vec<String>, Vec<Vec<String>>);

fn entry(text: &str, own: &str) -> Entry {
    let graph = &text[text.find("Call graph").expect("call graph")..];
    let graph = &graph[graph.find("\nindex ").expect("column header") + 1..];
    let graph = &graph[graph.find('\n').expect("header line") + 1..];
    for block in graph.split("\n---") {
        let lines: Vec<&str> = block
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('-'))
            .collect();
        if let Some(i) = lines
            .iter()
            .position(|l| l.starts_with('[') && l.ends_with(own))
        {
            let w = |l: &&str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
            return (
                lines[..i].iter().map(w).collect(),
                w(&lines[i]),
                lines[i + 1..].iter().map(w).collect(),
            );
        }
    }
    panic!("no entry for `{own}` in:\n{text}");
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| (*x).to_owned()).collect()
}

/// main calls `a` twice and `leaf` once; `a` and `b` call each other (a
/// cycle); `b` calls `leaf` four times. The run behind the numbers:
///
/// ```text
/// main (self 10)
///   a1 (40) -> b1 (20) -> leaf, leaf (8 each)
///                      -> a2 (30) -> b2 (20) -> leaf, leaf
///   a3 (30) -> b3 (20)
///   leaf
/// ```
///
/// so b2 = 36, a2 = 66, b1 = 102, a1 = 142, b3 = 20, a3 = 50: the arcs
/// main→a 192, a→b 102+36+20 = 158, b→a 66, b→leaf 32, main→leaf 8.
const HAND: &str = "# callgrind format
version: 1
creator: hand-written
cmd: ./hand
positions: line
events: Ir
summary: 210

fl=hand.c
fn=main
1 10
cfn=a
calls=2 10
2 192
cfn=leaf
calls=1 30
3 8

fn=a
10 100
cfn=b
calls=3 20
11 158

fn=b
20 60
cfn=a
calls=1 10
21 66
cfn=leaf
calls=4 30
22 32

fn=leaf
30 40
";

/// gprof by hand on [`HAND`]:
///
/// - leaf: self 40, called 1 (main) + 4 (b) = 5 times; main gets 40·1/5 =
///   8, the cycle (through b) 40·4/5 = 32.
/// - cycle 1 = {a, b}: self 100 + 60 = 160; children 32 (from b); called 2
///   times from outside (main→a), 3 + 1 = 4 times within. Calls within the
///   cycle propagate nothing: a's children are 0.
/// - main: self 10; children = the cycle's (160 + 32)·2/2 + leaf's 8 = 200.
///   main + its children = 210 = the total: nothing lost.
/// - measured: main 210 (nobody calls it: self + its arcs 192 + 8), leaf
///   8 + 32 = 40, the cycle 160 + the arcs leaving it (b→leaf 32) = 192,
///   which is also what main's calls to a cost. a and b have none of
///   their own.
/// - order by self + children: main 210 [1], cycle 192 [2], a 100 [3],
///   b 60 + 32 = 92 [4], leaf 40 [5].
#[test]
fn hand_checked_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(dir.path(), "hand.out", HAND);
    let text = ok(&["gprof", "-b", &f]);

    assert!(text.contains("Event: Ir; program total: 210 Ir"), "{text}");
    // Flat profile: % time, cumulative, self, calls, self/call, total/call.
    assert_eq!(
        words_of(&text, "Flat profile", " a <cycle 1>"),
        s(&["47.62", "100", "100", "3", "33.33", "a", "<cycle", "1>"])
    );
    assert_eq!(
        words_of(&text, "Flat profile", " b <cycle 1>"),
        s(&["28.57", "160", "60", "3", "20.00", "b", "<cycle", "1>"])
    );
    assert_eq!(
        words_of(&text, "Flat profile", " leaf"),
        s(&["19.05", "200", "40", "5", "8.00", "8.00", "leaf"])
    );
    assert_eq!(
        words_of(&text, "Flat profile", " main"),
        s(&["4.76", "210", "10", "main"])
    );

    // Call graph: self, children (gprof), measured, called.
    let (callers, own, callees) = entry(&text, "main [1]");
    assert_eq!(callers, vec![s(&["<spontaneous>"])]);
    assert_eq!(own, s(&["[1]", "100.0", "10", "200", "210", "main", "[1]"]));
    assert_eq!(
        callees,
        vec![
            s(&["160", "32", "192", "2/2", "a", "<cycle", "1>", "[3]"]),
            s(&["8", "0", "8", "1/5", "leaf", "[5]"]),
        ]
    );

    let (_, own, members) = entry(&text, "<cycle 1 as a whole> [2]");
    assert_eq!(
        own,
        s(&[
            "[2]", "91.4", "160", "32", "192", "2+4", "<cycle", "1", "as", "a", "whole>", "[2]"
        ])
    );
    assert_eq!(
        members,
        vec![
            s(&["100", "0", "3", "a", "<cycle", "1>", "[3]"]),
            s(&["60", "32", "3", "b", "<cycle", "1>", "[4]"]),
        ]
    );

    // Within the cycle: counts and the arcs' measured costs only.
    let (callers, own, callees) = entry(&text, "a <cycle 1> [3]");
    assert_eq!(
        callers,
        vec![
            s(&["66", "1", "b", "<cycle", "1>", "[4]"]),
            s(&["160", "32", "192", "2/2", "main", "[1]"]),
        ]
    );
    assert_eq!(
        own,
        s(&["[3]", "47.6", "100", "0", "3", "a", "<cycle", "1>", "[3]"])
    );
    assert_eq!(callees, vec![s(&["158", "3", "b", "<cycle", "1>", "[4]"])]);

    let (callers, own, callees) = entry(&text, "b <cycle 1> [4]");
    assert_eq!(callers, vec![s(&["158", "3", "a", "<cycle", "1>", "[3]"])]);
    assert_eq!(
        own,
        s(&["[4]", "43.8", "60", "32", "3", "b", "<cycle", "1>", "[4]"])
    );
    assert_eq!(
        callees,
        vec![
            s(&["32", "0", "32", "4/5", "leaf", "[5]"]),
            s(&["66", "1", "a", "<cycle", "1>", "[3]"]),
        ]
    );

    let (callers, own, callees) = entry(&text, "leaf [5]");
    assert_eq!(
        callers,
        vec![
            s(&["8", "0", "8", "1/5", "main", "[1]"]),
            s(&["32", "0", "32", "4/5", "b", "<cycle", "1>", "[4]"]),
        ]
    );
    assert_eq!(
        own,
        s(&["[5]", "19.0", "40", "0", "40", "5", "leaf", "[5]"])
    );
    assert!(callees.is_empty());

    // The same numbers as JSON.
    let j = json(&["gprof", "--json", &f]);
    assert_eq!(j["program_total"], 210);
    assert_eq!(j["event"], "Ir");
    let cycles = j["cycles"].as_array().unwrap();
    assert_eq!(cycles.len(), 1);
    assert_eq!(cycles[0]["measured"], 192);
    assert_eq!(cycles[0]["calls_in"], 2);
    assert_eq!(cycles[0]["calls_within"], 4);
    let members: Vec<&str> = cycles[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(members, ["a", "b"]);
    let main = &j["call_graph"][0];
    assert_eq!(main["name"], "main");
    assert_eq!(main["self"], 10.0);
    assert_eq!(main["descendants"], 200.0);
    assert_eq!(main["measured"], 210);
    assert_eq!(main["spontaneous"], true);
    assert_eq!(main["children"][0]["self"], 160.0);
    assert_eq!(main["children"][0]["descendants"], 32.0);
    assert_eq!(main["children"][0]["measured"], 192);
    let flat = j["flat"].as_array().unwrap();
    let leaf = flat.iter().find(|r| r["name"] == "leaf").unwrap();
    assert_eq!(leaf["measured"], 40);
    assert_eq!(leaf["total_per_call"], 8.0);
    let a = flat.iter().find(|r| r["name"] == "a").unwrap();
    assert_eq!(a["measured"], Value::Null);
    assert_eq!(a["cycle"], 1);

    // Without -b the columns are explained.
    let long = ok(&["gprof", &f]);
    assert!(long.contains("gprof's estimate"));
    assert!(long.contains("inclusive cost Callgrind"));
    assert!(!text.contains("gprof's estimate"));
}

/// Profiles of the fixture corpus (not the reports beside them).
fn fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data("callgrind"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.contains(".out") && !name.contains("annotate")
        })
        .collect();
    v.sort();
    v
}

type Members = Vec<(String, String, String)>;

fn members(v: &Value, name: &str) -> Members {
    let mut m: Members = v
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x[name].as_str().unwrap().to_owned(),
                x["file"].as_str().unwrap_or("").to_owned(),
                x["object"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    m.sort();
    m
}

/// On every fixture, gprof's cycles are `tally annotate`'s: the same
/// members, the same measured inclusive cost and calls into the cycle, for
/// the first and the last event.
#[test]
fn cycles_match_annotate_on_fixtures() {
    let mut with_cycles = 0;
    for f in fixtures() {
        let f = f.to_str().unwrap();
        let ann = json(&[
            "annotate",
            "--json",
            "--inclusive=yes",
            "--threshold=100",
            f,
        ]);
        let events: Vec<String> = ann["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_owned())
            .collect();
        let expected: BTreeMap<Members, &Value> = ann["cycles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (members(&c["members"], "function"), c))
            .collect();
        let mut evs = vec![events[0].clone()];
        if events.len() > 1 {
            evs.push(events[events.len() - 1].clone());
        }
        for ev in evs {
            let g = json(&["gprof", "--json", "--event", &ev, f]);
            let got: BTreeMap<Members, &Value> = g["cycles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (members(&c["members"], "name"), c))
                .collect();
            assert_eq!(
                got.keys().collect::<Vec<_>>(),
                expected.keys().collect::<Vec<_>>(),
                "{f}: cycle members"
            );
            for (m, c) in &got {
                let e = expected[m];
                assert_eq!(c["measured"], e["inclusive"][&ev], "{f} {ev}: cycle {m:?}");
                assert_eq!(c["calls_in"], e["calls_in"], "{f}: calls into {m:?}");
                let own: i64 = c["members"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x["self"].as_i64().unwrap())
                    .sum();
                assert_eq!(Some(own), e["self"][&ev].as_i64(), "{f} {ev}: cycle self");
            }
            // Functions outside cycles: measured = annotate's inclusive.
            let incl: BTreeMap<(String, String, String), &Value> = ann["functions_by_name"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        (
                            r["function"].as_str().unwrap().to_owned(),
                            r["file"].as_str().unwrap_or("").to_owned(),
                            r["object"].as_str().unwrap_or("").to_owned(),
                        ),
                        &r["inclusive"],
                    )
                })
                .collect();
            for row in g["flat"].as_array().unwrap() {
                let key = (
                    row["name"].as_str().unwrap().to_owned(),
                    row["file"].as_str().unwrap_or("").to_owned(),
                    row["object"].as_str().unwrap_or("").to_owned(),
                );
                if row["cycle"].is_null()
                    && let Some(i) = incl.get(&key)
                {
                    assert_eq!(row["measured"], i[&ev], "{f} {ev}: {key:?}");
                }
            }
        }
        if !expected.is_empty() {
            with_cycles += 1;
        }
    }
    assert!(with_cycles >= 10, "only {with_cycles} fixtures with cycles");
}

/// `calls=0` arcs (calls still running when a dump was written) are arcs
/// with count 0: they close cycles (as for `tally annotate`), show their
/// measured cost, and carry none of gprof's shares.
#[test]
fn calls_zero_arcs() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(
        dir.path(),
        "zero.out",
        "# callgrind format
events: Ir
fl=z.c
fn=main
1 5
cfn=a
calls=1 10
2 50
cfn=c
calls=0 40
3 7

fn=a
10 20
cfn=b
calls=2 20
11 30

fn=b
20 30
cfn=a
calls=0 10
21 10

fn=c
40 7
",
    );
    let text = ok(&["gprof", "-b", &f]);
    let (_, own, members) = entry(&text, "<cycle 1 as a whole> [2]");
    // Cycle {a, b}: 1 call in, 2 + 0 within; measured 20 + 30.
    assert_eq!(own[2..7], s(&["50", "0", "50", "1+2", "<cycle"]));
    assert_eq!(members.len(), 2);
    // Entries: main 5 + 50, the cycle 50, b 30, a 20, c 7.
    let (callers, own, _) = entry(&text, "a <cycle 1> [4]");
    assert!(
        callers.contains(&s(&["10", "0", "b", "<cycle", "1>", "[3]"])),
        "{callers:?}"
    );
    assert_eq!(
        own,
        s(&["[4]", "32.3", "20", "0", "1", "a", "<cycle", "1>", "[4]"])
    );
    // c is called (not spontaneous) but its cost is not charged to main.
    let (callers, own, _) = entry(&text, "c [5]");
    assert_eq!(callers, vec![s(&["0", "0", "7", "0/0", "main", "[1]"])]);
    assert_eq!(own, s(&["[5]", "11.3", "7", "0", "7", "c", "[5]"]));
    let (_, own, _) = entry(&text, "main [1]");
    assert_eq!(own, s(&["[1]", "88.7", "5", "50", "62", "main", "[1]"]));
}

/// A file of several parts is summed: the dumps of a run as parts of one
/// file give the numbers of the same run dumped once.
#[test]
fn parts_are_summed() {
    let one = json(&[
        "gprof",
        "--json",
        data("callgrind/mutual.default.out").to_str().unwrap(),
    ]);
    let parts = json(&[
        "gprof",
        "--json",
        data("callgrind/mutual.combined.out").to_str().unwrap(),
    ]);
    assert_eq!(parts["parts"], 3);
    assert_eq!(one["program_total"], parts["program_total"]);
    let rows = |j: &Value| -> BTreeMap<String, (Value, Value, Value)> {
        j["flat"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    format!("{} {} {}", r["name"], r["file"], r["object"]),
                    (r["self"].clone(), r["calls"].clone(), r["measured"].clone()),
                )
            })
            .collect()
    };
    assert_eq!(rows(&one), rows(&parts));
    // Cycles: the same, members compared as sets (their chain order
    // follows the order arcs first appear in).
    let cycles = |j: &Value| -> Vec<Value> {
        let mut v: Vec<Value> = j["cycles"].as_array().unwrap().clone();
        for c in &mut v {
            let mut m = c["members"].as_array().unwrap().clone();
            m.sort_by_key(|x| x["name"].as_str().unwrap().to_owned());
            c["members"] = Value::Array(m);
        }
        v
    };
    assert_eq!(cycles(&one), cycles(&parts));
}

#[test]
fn gzip_and_events() {
    let dir = tempfile::tempdir().unwrap();
    let plain = data("callgrind/mutual.cache.out");
    let gz = dir.path().join("mutual.cache.out.gz");
    {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(
            std::fs::File::create(&gz).unwrap(),
            flate2::Compression::fast(),
        );
        e.write_all(&std::fs::read(&plain).unwrap()).unwrap();
        e.finish().unwrap();
    }
    let a = ok(&["gprof", "-b", "--event=Dr", plain.to_str().unwrap()]);
    let b = ok(&["gprof", "-b", "--event=Dr", gz.to_str().unwrap()]);
    let body = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with("Profile: "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(body(&a), body(&b));
    assert!(a.contains("Event: Dr; program total: 31776 Dr"), "{a}");
    assert!(b.contains("Event: Dr; program total: 31776 Dr"), "{b}");

    let out = tally(&["gprof", "--event", "Nope", plain.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mutual.cache.out"), "{err}");
    assert!(err.contains("unknown event `Nope`"), "{err}");
    assert!(err.contains("Ir Dr Dw I1mr"), "{err}");
}

#[test]
fn report_selection_options() {
    let f = data("callgrind/mutual.default.out");
    let f = f.to_str().unwrap();
    let both = ok(&["gprof", "-b", f]);
    assert!(both.contains("Flat profile") && both.contains("Call graph"));
    assert!(both.contains("Index by function name"));

    // -p: flat profile only; -q: call graph only.
    let p = ok(&["gprof", "-b", "-p", f]);
    assert!(p.contains("Flat profile") && !p.contains("Call graph"));
    let q = ok(&["gprof", "-b", "-q", f]);
    assert!(!q.contains("Flat profile") && q.contains("Call graph"));
    // -P / -Q: turn one off.
    assert_eq!(ok(&["gprof", "-b", "-P", f]), q);
    assert_eq!(ok(&["gprof", "-b", "-Q", f]), p);

    // -pNAME: only that function's line (and its time alone is the 100 %).
    let only = ok(&["gprof", "-b", "-pcheckSum", f]);
    assert!(!only.contains("Call graph"));
    let only = ok(&["gprof", "-b", "-pchecksum", f]);
    let rows: Vec<&str> = only
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time"))
        .skip(1)
        .collect();
    assert_eq!(rows.len(), 1, "{only}");
    assert!(rows[0].starts_with("100.00"), "{only}");
    assert!(rows[0].ends_with(" checksum"), "{only}");

    // -PNAME: that function's line and time left out.
    let without = ok(&["gprof", "-b", "-Pchecksum", f]);
    assert!(!without.lines().any(|l| l.ends_with(" checksum")));

    // -qNAME: only NAME and what it calls in the call graph.
    let sub = ok(&["gprof", "-b", "-qcycle_a", f]);
    let own_lines: Vec<&str> = sub.lines().filter(|l| l.starts_with('[')).collect();
    assert!(
        own_lines
            .iter()
            .any(|l| l.ends_with("cycle_a [15]") || l.contains(" cycle_a ["))
    );
    assert!(own_lines.iter().all(|l| !l.contains(" main [")), "{sub}");
    // -QNAME: NAME has no entry.
    let no_main = ok(&["gprof", "-b", "-Qmain", f]);
    assert!(
        no_main
            .lines()
            .all(|l| !(l.starts_with('[') && l.contains(" main [")))
    );

    // -z: functions never called and without cost are listed too.
    let z = ok(&["gprof", "-b", "-z", "-p", f]);
    assert!(z.lines().count() >= p.lines().count());

    // --json has the same flat rows as the text.
    let j = json(&["gprof", "--json", "-p", f]);
    let text_rows = p
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time"))
        .skip(1)
        .count();
    assert_eq!(j["flat"].as_array().unwrap().len(), text_rows);
    assert!(j.get("call_graph").is_none());
}

#[test]
fn unsupported_options_are_refused() {
    let f = data("callgrind/mutual.default.out");
    for opt in ["-l", "-c"] {
        let out = tally(&["gprof", opt, f.to_str().unwrap()]);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not supported for Callgrind"));
    }
}
