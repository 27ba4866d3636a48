//! The functions table answered from the sums while gprof's analysis runs:
//! it says so (`pending`), shows no inclusive cost or call count, and every
//! number it does show is the one the finished analysis shows.

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;
use tally_testutil::data;
use tally_web::{LoadOptions, Query, Session};

fn query(pairs: &[(&str, &str)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn json(s: &Session, path: &str, q: &Query) -> Value {
    let r = tally_web::handle(s, path, q).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_slice(&r.body).expect("JSON")
}

fn by_node(t: &Value) -> HashMap<u64, Value> {
    t["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| !r["is_cycle"].as_bool().unwrap_or(false))
        .map(|r| (r["node"].as_u64().expect("a function's node"), r.clone()))
        .collect()
}

/// Every event of `file`: the first answer is provisional, the answer after
/// `ready` is gprof's, and they agree on every function and self cost.
fn check(file: PathBuf) {
    let s = Session::load(std::slice::from_ref(&file), &LoadOptions::default()).expect("loads");
    let events = s.events(s.main());
    assert!(!events.is_empty());
    for (k, event) in events.iter().enumerate() {
        let all = [("event", event.as_str()), ("limit", "5000")];
        for sort in ["self", "name", &format!("event:{k}")] {
            let mut q = all.to_vec();
            q.push(("sort", sort));
            let early = json(&s, "functions", &query(&q));
            if early["pending"] != Value::Bool(true) {
                // Only the first event is analysed before its pages are
                // asked for the second time.
                assert!(s.ready(s.main(), Some(event), None).unwrap());
                continue;
            }
            assert_eq!(early["event"], Value::String(event.clone()));
            for r in early["rows"].as_array().unwrap() {
                assert!(r["inclusive"].is_null(), "{file:?} {event}: {r}");
                assert!(r["calls"].is_null(), "{file:?} {event}: {r}");
                assert!(!r["is_cycle"].as_bool().unwrap(), "{file:?} {event}: {r}");
            }
        }
        let early = json(&s, "functions", &query(&all));
        assert_eq!(early["pending"], Value::Bool(true), "{file:?} {event}");
        let ready = json(&s, "ready", &query(&[("event", event)]));
        assert_eq!(ready["ready"], Value::Bool(true));
        let late = json(&s, "functions", &query(&all));
        assert!(late.get("pending").is_none(), "{file:?} {event}: {late}");
        assert_eq!(early["total"], late["total"], "{file:?} {event}");
        assert_eq!(early["events"], late["events"], "{file:?} {event}");
        let (a, b) = (by_node(&early), by_node(&late));
        assert_eq!(
            a.keys().collect::<std::collections::BTreeSet<_>>(),
            b.keys().collect(),
            "{file:?} {event}: the same functions"
        );
        for (node, r) in &a {
            let f = &b[node];
            for key in ["name", "file", "object", "self", "self_percent", "events"] {
                assert_eq!(r[key], f[key], "{file:?} {event} node {node}: {key}");
            }
        }
        // The order by self cost is the same too.
        let names = |t: &Value| -> Vec<Value> {
            t["rows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| !r["is_cycle"].as_bool().unwrap())
                .map(|r| r["node"].clone())
                .collect()
        };
        assert_eq!(names(&early), names(&late), "{file:?} {event}: order");
        // Sorting by inclusive cost waits for the analysis, never guesses.
        let incl = json(
            &s,
            "functions",
            &query(&[("event", event), ("sort", "inclusive")]),
        );
        assert!(incl.get("pending").is_none());
    }
}

#[test]
fn provisional_table_agrees_with_the_analysis_on_recursion_and_cycles() {
    check(data("callgrind/mutual.cache.out"));
    check(data("callgrind/recursion.combined.out"));
    check(data("callgrind/workload.default.out"));
}

#[test]
fn a_comparison_is_never_provisional() {
    let a = data("callgrind/mutual.default.out");
    let b = data("callgrind/recursion.default.out");
    let s = Session::load(
        &[a, b],
        &LoadOptions {
            diff: true,
            ..Default::default()
        },
    )
    .expect("loads");
    let t = json(&s, "functions", &query(&[("sort", "self")]));
    assert!(t.get("pending").is_none(), "{t}");
    assert!(t["rows"][0].get("delta_self").is_some(), "{t}");
}
