//! Sessions built from the repository's fixtures: the numbers of the
//! views and of the API's replies checked against sums over the profile's
//! cost lines, the files' own `totals:` lines, and the reports of the
//! reference tools (callgrind_annotate, GNU gprof) kept beside them.

use std::path::PathBuf;

use serde_json::Value;
use tally_model::Profile;
use tally_testutil::{data, temp_dir};

use crate::api::{self, Query};
use crate::view::{Base, Grouping, Row, Table};
use crate::{Error, LoadOptions, Session};

fn load(files: &[PathBuf], opts: &LoadOptions) -> Result<Session, Error> {
    Session::load(files, opts)
}

fn session(rel: &str) -> Session {
    load(&[data(rel)], &LoadOptions::default()).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn query(pairs: &[(&str, &str)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn reply(s: &Session, path: &str, pairs: &[(&str, &str)]) -> Value {
    let r = api::handle(s, path, &query(pairs)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_slice(&r.body).expect("JSON")
}

/// Self cost per function (by id) and event, and the totals, summed over
/// the cost lines of `part` (all parts: `None`).
fn line_sums(p: &Profile<u64>, part: Option<usize>) -> (Vec<Vec<u64>>, Vec<u64>) {
    let events = p.events.recorded().len();
    let mut by = vec![vec![0u64; events]; p.names.function_count()];
    let mut total = vec![0u64; events];
    for (i, pt) in p.parts.iter().enumerate() {
        if part.is_some_and(|k| k != i) {
            continue;
        }
        pt.lines.for_each(|l| {
            for (e, &c) in l.costs.iter().enumerate() {
                by[l.function.index()][e] += c;
                total[e] += c;
            }
        });
    }
    (by, total)
}

/// The self cost of `node` in event `e` from [`line_sums`]: 0 for a node
/// past the profile's functions.
fn own(by: &[Vec<u64>], node: usize, e: usize) -> f64 {
    by.get(node).map_or(0.0, |c| c[e] as f64)
}

/// The numbers after `totals:` in a Callgrind file, one list per part.
fn stated_totals(rel: &str) -> Vec<Vec<u64>> {
    std::fs::read_to_string(data(rel))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("totals:"))
        .map(|t| t.split_whitespace().map(|n| n.parse().unwrap()).collect())
        .collect()
}

/// The first count of the line of callgrind_annotate's report `rel`
/// that names `place` (`FILE:FUNCTION [OBJECT]`).
fn annotate_count(rel: &str, place: &str) -> f64 {
    let report = std::fs::read_to_string(data(rel)).unwrap();
    let line = report
        .lines()
        .find(|l| l.contains(place))
        .unwrap_or_else(|| panic!("{rel}: no {place}"));
    line.split_whitespace()
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap()
}

/// The one function row (not a cycle) named `name`.
fn row<'a>(rows: &'a [Row], name: &str) -> &'a Row {
    let mut found = rows.iter().filter(|r| !r.is_cycle && r.name == name);
    let r = found.next().unwrap_or_else(|| panic!("no row {name}"));
    assert!(found.next().is_none(), "two rows {name}");
    r
}

const MUTUAL: &str = "callgrind/mutual.default.out";

/// Every function's self cost is the sum of its cost lines, and the 100 %
/// is callgrind_annotate's program total (here also the lines' sum).
#[test]
fn self_costs_are_line_sums_and_the_total_is_callgrind_annotates() {
    let s = session(MUTUAL);
    let v = s.view(0, None, None).unwrap();
    assert_eq!((v.event.as_str(), v.unit.as_str()), ("Ir", "Ir"));
    let (by, total) = line_sums(&s.inputs[0].profile, None);
    let report = std::fs::read_to_string(data(&format!("{MUTUAL}.annotate"))).unwrap();
    assert_eq!(total[0], tally_testutil::program_total(&report));
    assert_eq!(v.total(), total[0] as f64);
    let functions: Vec<&Row> = v.rows.iter().filter(|r| !r.is_cycle).collect();
    for r in &functions {
        assert_eq!(r.self_cost, own(&by, r.node, 0), "{}", r.name);
        assert_eq!(r.events, [own(&by, r.node, 0)], "{}", r.name);
    }
    let with_cost = by.iter().filter(|c| c[0] != 0).count();
    assert_eq!(
        functions.iter().filter(|r| r.self_cost != 0.0).count(),
        with_cost
    );
    let sum: f64 = functions.iter().map(|r| r.self_cost).sum();
    assert_eq!(sum, total[0] as f64);
}

/// main is in no cycle: its inclusive cost is callgrind_annotate's.
#[test]
fn inclusive_cost_outside_cycles_is_callgrind_annotates() {
    let s = session(MUTUAL);
    let v = s.view(0, None, None).unwrap();
    let main = row(&v.rows, "main");
    let place = "./src/mutual.c:main [";
    assert_eq!(
        main.self_cost,
        annotate_count(&format!("{MUTUAL}.annotate"), place)
    );
    let inclusive = annotate_count(&format!("{MUTUAL}.annotate-inclusive"), place);
    assert_eq!(main.inclusive, Some(inclusive));
    assert_eq!(main.cycle, None);
    // The JSON row says the same, with its share of the total.
    let page = reply(
        &s,
        "functions",
        &[("filter", "^main$"), ("sort", "inclusive")],
    );
    let r = &page["rows"][0];
    assert_eq!(r["inclusive"], Value::from(inclusive));
    let share = 100.0 * inclusive / v.total();
    assert!((r["inclusive_percent"].as_f64().unwrap() - share).abs() < 1e-9);
}

/// GNU gprof's flat profile of the same run (`gprof -b -p`): seconds per
/// function, calls, and the cumulative total.
#[test]
fn gmon_input_is_marked_and_shown_in_seconds_of_its_time_event() {
    let opts = LoadOptions {
        binary: Some(data("gprof/cycles.O0")),
        ..Default::default()
    };
    let s = load(&[data("gprof/cycles.O0.gmon")], &opts).unwrap();
    assert!(s.inputs[0].gmon.is_some());
    assert_eq!(s.events(0), ["time"]);
    let meta = api::meta(&s);
    assert_eq!(meta["inputs"][0]["gmon"], Value::Bool(true));
    assert_eq!(meta["events"], serde_json::json!(["time"]));
    // No provisional table: gmon's self costs come from the analysis.
    assert!(s.provisional(None, None).unwrap().is_none());
    let v = s.view(0, None, None).unwrap();
    assert_eq!((v.event.as_str(), v.unit.as_str()), ("time", "seconds"));
    let flat = std::fs::read_to_string(data("gprof/cycles.O0.p.txt")).unwrap();
    let mut cumulative = 0.0;
    let mut checked = 0;
    for l in flat.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.len() != 7 || w[0].parse::<f64>().is_err() {
            continue;
        }
        let r = row(&v.rows, w[6]);
        // gprof prints hundredths.
        assert!(
            (r.self_cost - w[2].parse::<f64>().unwrap()).abs() < 0.006,
            "{l}"
        );
        assert_eq!(r.calls, w[3].parse::<u64>().unwrap(), "{l}");
        cumulative = w[1].parse().unwrap();
        checked += 1;
    }
    assert_eq!(checked, 10);
    assert!((v.total() - cumulative).abs() < 0.006, "{}", v.total());
}

#[test]
fn gmon_input_without_its_program_is_a_usage_error_naming_it() {
    let gmon = data("gprof/cycles.O0.gmon");
    let Err(e) = load(std::slice::from_ref(&gmon), &LoadOptions::default()) else {
        panic!("loaded without --binary");
    };
    assert!(matches!(e, Error::Usage(_)), "{e:?}");
    assert!(e.to_string().contains(&gmon.display().to_string()), "{e}");
}

/// Cut at a `fn=` line half-way: a profile that ends early is shown,
/// with the warning every command gives.
#[test]
fn a_truncated_profile_loads_with_a_warning() {
    let bytes = std::fs::read(data(MUTUAL)).unwrap();
    let cuts = tally_testutil::function_lines(&bytes);
    let at = cuts[cuts.len() / 2] as usize;
    let dir = temp_dir();
    let cut = dir.path().join("cut.out");
    std::fs::write(&cut, &bytes[..at]).unwrap();
    let s = load(std::slice::from_ref(&cut), &LoadOptions::default()).expect("loads");
    let w = &s.inputs[0].warnings;
    let name = cut.display().to_string();
    assert!(
        w.iter()
            .any(|w| w.starts_with(&name) && w.contains("truncated")),
        "{w:?}"
    );
    let meta = api::meta(&s);
    assert_eq!(meta["inputs"][0]["warnings"], serde_json::json!(w));
    // What was read is shown, against the total the header states (as
    // callgrind_annotate shows it): the functions add up to less.
    let (_, total) = line_sums(&s.inputs[0].profile, None);
    let v = s.view(0, None, None).unwrap();
    let shown: f64 = v
        .rows
        .iter()
        .filter(|r| !r.is_cycle)
        .map(|r| r.self_cost)
        .sum();
    assert_eq!(shown, total[0] as f64);
    assert_eq!(v.total(), stated_totals(MUTUAL)[0][0] as f64);
    assert!(shown < v.total());
}

/// cachegrind/workload.diff.out is cg_diff's output: negative counts.
#[test]
fn a_difference_is_refused_naming_the_file() {
    let file = data("cachegrind/workload.diff.out");
    let Err(e) = load(std::slice::from_ref(&file), &LoadOptions::default()) else {
        panic!("a difference was loaded");
    };
    let msg = e.to_string();
    assert!(msg.starts_with(&file.display().to_string()), "{msg}");
    assert!(
        msg.contains("difference") && msg.contains("--diff"),
        "{msg}"
    );
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let dir = temp_dir();
    let missing = dir.path().join("no-such.out");
    let Err(e) = load(std::slice::from_ref(&missing), &LoadOptions::default()) else {
        panic!("a missing file loaded");
    };
    assert!(
        e.to_string().contains(&missing.display().to_string()),
        "{e}"
    );
}

#[test]
fn diff_takes_exactly_two_files() {
    let diff = LoadOptions {
        diff: true,
        ..Default::default()
    };
    for n in [1, 3] {
        let files = vec![data(MUTUAL); n];
        let Err(e) = load(&files, &diff) else {
            panic!("--diff with {n} files");
        };
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
        assert!(e.to_string().contains(&format!("{n} given")), "{e}");
    }
    let Err(e) = load(&[], &LoadOptions::default()) else {
        panic!("no files loaded");
    };
    assert!(matches!(e, Error::Usage(_)), "{e:?}");
}

/// Two runs of one program: B − A of the totals is the difference of the
/// files' `totals:` lines, and summed over the objects (both runs have
/// the same ones) the rows' B − A adds up to it.
#[test]
fn diff_session_b_minus_a_is_the_difference_of_the_totals() {
    let (a, b) = (
        "merge/workload.a.callgrind.out",
        "merge/workload.b.callgrind.out",
    );
    let opts = LoadOptions {
        diff: true,
        ..Default::default()
    };
    let s = load(&[data(a), data(b)], &opts).unwrap();
    assert!(s.diff);
    assert_eq!(s.main(), 1);
    let (ta, tb) = (stated_totals(a)[0][0] as f64, stated_totals(b)[0][0] as f64);
    assert_eq!(s.view(0, None, None).unwrap().total(), ta);
    assert_eq!(s.view(1, None, None).unwrap().total(), tb);
    let page = reply(&s, "functions", &[("group", "object"), ("limit", "5000")]);
    assert_eq!(page["diff"], Value::Bool(true));
    let rows = page["rows"].as_array().unwrap();
    let delta: f64 = rows.iter().map(|r| r["delta_self"].as_f64().unwrap()).sum();
    assert_eq!(delta, tb - ta);
    // One function: B's self cost minus A's, each summed over its lines.
    let self_of = |k: usize| {
        let p = &s.inputs[k].profile;
        let (by, _) = line_sums(p, None);
        let main: Vec<_> = p
            .names
            .functions()
            .filter(|(f, _)| p.names.function_name(*f) == b"main")
            .collect();
        assert_eq!(main.len(), 1);
        by[main[0].0.index()][0] as f64
    };
    let page = reply(&s, "functions", &[("filter", "^main$")]);
    let r = &page["rows"][0];
    assert_eq!(r["name"], "main");
    assert_eq!(r["base_self"].as_f64(), Some(self_of(0)));
    assert_eq!(r["delta_self"].as_f64(), Some(self_of(1) - self_of(0)));
}

/// mutual.cache.out records 13 events; callgrind_annotate's report
/// gives their totals.
#[test]
fn the_event_chosen_changes_the_view() {
    let rel = "callgrind/mutual.cache.out";
    let s = session(rel);
    let report = std::fs::read_to_string(data(&format!("{rel}.annotate"))).unwrap();
    let shown: Vec<&str> = report
        .lines()
        .find_map(|l| l.strip_prefix("Events shown:"))
        .unwrap()
        .split_whitespace()
        .collect();
    let totals: Vec<f64> = report
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .unwrap()
        .split_whitespace()
        .filter(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w.replace(',', "").parse().unwrap())
        .collect();
    assert_eq!(shown.len(), 13);
    assert_eq!(&s.events(0)[..13], &shown[..]);
    let (by, _) = line_sums(&s.inputs[0].profile, None);
    for (e, (&event, total)) in shown.iter().zip(&totals).enumerate().take(3) {
        let v = s.view(0, Some(event), None).unwrap();
        assert_eq!(v.event, event);
        assert_eq!(v.total(), *total, "{event}");
        let main = row(&v.rows, "main");
        assert_eq!(main.self_cost, own(&by, main.node, e), "{event}");
        let page = reply(&s, "functions", &[("event", event)]);
        assert_eq!(page["event"], event);
        assert_eq!(page["total"].as_f64(), Some(*total));
    }
    assert_ne!(totals[0], totals[1]);
    let Err(e) = s.view(0, Some("Nope"), None) else {
        panic!("an unknown event has a view");
    };
    assert!(
        matches!(e, Error::NotFound(_)) && e.to_string().contains("Nope"),
        "{e}"
    );
}

/// mutual.combined.out holds three dumps as parts, each with its
/// `totals:` line.
#[test]
fn the_part_chosen_changes_the_view() {
    let rel = "callgrind/mutual.combined.out";
    let s = session(rel);
    let parts = stated_totals(rel);
    assert_eq!(parts.len(), 3);
    assert_eq!(s.inputs[0].profile.parts.len(), 3);
    let all: u64 = parts.iter().map(|t| t[0]).sum();
    assert_eq!(s.view(0, None, None).unwrap().total(), all as f64);
    for (k, t) in parts.iter().enumerate() {
        let v = s.view(0, None, Some(k)).unwrap();
        assert_eq!(v.total(), t[0] as f64, "part {k}");
        let (by, _) = line_sums(&s.inputs[0].profile, Some(k));
        for r in v.rows.iter().filter(|r| !r.is_cycle) {
            assert_eq!(r.self_cost, own(&by, r.node, 0), "part {k}: {}", r.name);
        }
    }
    let meta = api::meta(&s);
    let labels: Vec<&str> = meta["inputs"][0]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels.len(), 3);
    for (k, l) in labels.iter().enumerate() {
        assert!(l.starts_with(&format!("part {}", k + 1)), "{l}");
    }
    let Err(e) = s.view(0, None, Some(3)) else {
        panic!("a fourth part");
    };
    assert_eq!(e.to_string(), "no part 3");
}

/// Grouped by file, a row's self cost is the sum over the functions of
/// that file; grouped by object, the rows add up to the total.
#[test]
fn grouped_tables_sum_the_functions_of_a_file_or_object() {
    let s = session(MUTUAL);
    let p = &s.inputs[0].profile;
    let (by, total) = line_sums(p, None);
    let mut per_file: std::collections::HashMap<String, f64> = Default::default();
    for (f, _) in p.names.functions() {
        let file = String::from_utf8_lossy(p.names.function_file(f)).into_owned();
        *per_file.entry(file).or_default() += by[f.index()][0] as f64;
    }
    per_file.retain(|_, v| *v != 0.0);
    let t = s.table(None, None, Grouping::File).unwrap();
    for r in t.rows.iter().filter(|r| r.self_cost != 0.0) {
        assert_eq!(Some(&r.self_cost), per_file.get(&*r.file), "{}", r.file);
    }
    assert_eq!(
        t.rows.iter().filter(|r| r.self_cost != 0.0).count(),
        per_file.len()
    );
    let t = s.table(None, None, Grouping::Object).unwrap();
    let sum: f64 = t.rows.iter().map(|r| r.self_cost).sum();
    assert_eq!(sum, total[0] as f64);
}

/// Callgrind input has no stacks: they are estimated, keeping every
/// total; folded input brings its own.
#[test]
fn stacks_are_estimated_for_callgrind_and_kept_for_folded_input() {
    let s = session(MUTUAL);
    let inp = &s.inputs[0];
    assert!(inp.estimated);
    let (_, total) = line_sums(&inp.profile, None);
    let crate::session::WholeStacks::Estimated(tree) = inp.stacks().unwrap() else {
        panic!("recorded stacks for a Callgrind profile");
    };
    assert_eq!(tree.to_stacks().totals(1), Some(total));
    assert_eq!(api::meta(&s)["inputs"][0]["estimated"], Value::Bool(true));
    // The folded file by hand: every stack starts in main; `spin` is the
    // leaf of five of them.
    let rel = "stacks/stacks.folded";
    let text = std::fs::read_to_string(data(rel)).unwrap();
    let stacks: Vec<(Vec<&str>, u64)> = text
        .lines()
        .map(|l| {
            let (frames, n) = l.rsplit_once(' ').unwrap();
            (frames.split(';').collect(), n.parse().unwrap())
        })
        .collect();
    let all: u64 = stacks.iter().map(|s| s.1).sum();
    let spin: u64 = stacks
        .iter()
        .filter(|s| s.0.last() == Some(&"spin"))
        .map(|s| s.1)
        .sum();
    let s = session(rel);
    assert!(!s.inputs[0].estimated);
    let crate::session::WholeStacks::Recorded(stacks) = s.inputs[0].stacks().unwrap() else {
        panic!("the folded file's stacks were not kept");
    };
    assert_eq!(stacks.totals(1), Some(vec![all]));
    let v = s.view(0, None, None).unwrap();
    assert_eq!(v.total(), all as f64);
    assert_eq!(row(&v.rows, "spin").self_cost, spin as f64);
    assert_eq!(row(&v.rows, "main").inclusive, Some(all as f64));
}

#[test]
fn a_json_row_gives_shares_and_b_minus_a() {
    let r = Row {
        node: 3,
        name: "f".into(),
        file: "f.c".into(),
        object: "a.out".into(),
        self_cost: 30.0,
        inclusive: Some(45.0),
        calls: 2,
        cycle: None,
        is_cycle: false,
        events: vec![30.0],
    };
    let base = Base {
        self_cost: 40.0,
        inclusive: Some(20.0),
    };
    let j = api::row_json(&r, Some(&base), 120.0);
    assert_eq!(j["node"], 3);
    assert_eq!(j["self_percent"], 25.0);
    assert_eq!(j["inclusive_percent"], 37.5);
    assert_eq!(j["base_self"], 40.0);
    assert_eq!(j["delta_self"], -10.0);
    assert_eq!(j["base_inclusive"], 20.0);
    assert_eq!(j["delta_inclusive"], 25.0);
    // A grouped row has no node; a total of 0 gives shares of 0.
    let grouped = Row {
        node: usize::MAX,
        ..r
    };
    let j = api::row_json(&grouped, None, 0.0);
    assert!(j["node"].is_null() && j.get("delta_self").is_none(), "{j}");
    assert_eq!(j["self_percent"], 0.0);
}

#[test]
fn order_filters_by_name_or_file_and_sorts() {
    let r = |name: &str, file: &str, own: f64| Row {
        node: 0,
        name: name.into(),
        file: file.into(),
        object: "".into(),
        self_cost: own,
        inclusive: None,
        calls: 0,
        cycle: None,
        is_cycle: false,
        events: vec![own],
    };
    let t = Table {
        rows: vec![r("b", "x.c", 5.0), r("a", "y.c", 9.0), r("c", "y.c", 1.0)].into(),
        base: None,
    };
    assert_eq!(api::order(&t, None, "self", true).unwrap(), [1, 0, 2]);
    assert_eq!(api::order(&t, None, "name", false).unwrap(), [1, 0, 2]);
    assert_eq!(api::order(&t, Some("^y"), "self", false).unwrap(), [2, 1]);
    assert_eq!(api::order(&t, Some("^b$"), "event:0", true).unwrap(), [0]);
    let Err(e) = api::order(&t, Some("("), "self", true) else {
        panic!("a bad regex filtered");
    };
    assert!(matches!(e, Error::BadRequest(_)), "{e:?}");
}

#[test]
fn an_unknown_api_path_is_not_found() {
    let s = session("spec/extended.callgrind");
    let Err(e) = api::handle(&s, "nope", &Query::new()) else {
        panic!("answered");
    };
    assert!(matches!(e, Error::NotFound(_)), "{e:?}");
    let Err(e) = api::handle(&s, "functions", &query(&[("group", "line")])) else {
        panic!("grouped by line");
    };
    assert!(matches!(e, Error::BadRequest(_)), "{e:?}");
}

/// The rows of one table hold one copy of each file and object name: a
/// large profile has hundreds of thousands of functions in a few files,
/// and a copy per row would be most of a table's memory.
#[test]
fn rows_share_their_file_and_object_names() {
    fn check(rows: &[Row]) -> usize {
        let mut first: std::collections::HashMap<&str, &Row> = Default::default();
        let mut shared = 0;
        for r in rows.iter().filter(|r| !r.is_cycle && !r.file.is_empty()) {
            let f = *first.entry(&r.file).or_insert(r);
            assert!(std::sync::Arc::ptr_eq(&f.file, &r.file), "{}", r.file);
            if f.object == r.object {
                assert!(std::sync::Arc::ptr_eq(&f.object, &r.object), "{}", r.object);
            }
            shared += usize::from(!std::ptr::eq(f, r));
        }
        shared
    }
    let s = session(MUTUAL);
    let p = s
        .provisional(None, None)
        .unwrap()
        .expect("a provisional table");
    assert!(check(&p.table.rows) > 0, "no two functions in one file");
    let v = s.view(0, None, None).unwrap();
    assert!(check(&v.rows) > 0, "no two functions in one file");
    assert_eq!(
        v.rows.iter().filter(|r| !r.is_cycle).count(),
        p.table.rows.len()
    );
}
