//! The comparison of two runs of one program (one function made slower,
//! one faster, one removed, one added; profiled under Callgrind as
//! `web_compare` profiles them) on the call trees and the differential
//! flame graph, in Chromium (`tests/web/compare-trees.mjs`): in `tally
//! serve --diff A B` and in the report of the same opened from file://
//! with networking off, the trees' roots add up to `tally diff --json`'s
//! total difference, the slower function is red and the faster blue in
//! the trees and the flame graph, the removed one is listed as only in A,
//! and the report's four lists carry `tally diff --json`'s numbers; a
//! report made with a transform shows its tree and its breadcrumb.

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use tally_testutil::serve::Server;
use tally_testutil::{browser, path_str, tally};

use crate::web_compare::profile;

/// `"-1,234"` or `"+5"` as a number.
fn number(s: &str) -> f64 {
    s.replace([',', '+'], "")
        .parse()
        .unwrap_or_else(|_| panic!("not a number: {s}"))
}

/// `rgb(R,G,B)` as its three values.
fn rgb(fill: &str) -> (u32, u32, u32) {
    let v: Vec<u32> = fill
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|x| x.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

fn row<'a>(rows: &'a Value, name: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["fn"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {rows}"))
}

#[test]
fn trees_flame_and_offline_report_compare_two_runs() {
    if !browser::require_driver(&["gcc", "valgrind"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let a = profile(dir.path(), "before", &["-DHOT=200000", "-DWARM=300000"]);
    let b = profile(
        dir.path(),
        "after",
        &["-DAFTER", "-DHOT=600000", "-DWARM=60000"],
    );
    let (pa, pb) = (path_str(&a), path_str(&b));
    let diff: Value = serde_json::from_slice(
        &tally!()
            .ok(&["diff", "--json", "--top", "100000", pa, pb])
            .stdout,
    )
    .unwrap();
    let total_delta = diff["totals"]["delta"][0].as_f64().unwrap();
    // Per function (by name, where the name is one function's): self in A
    // and B.
    let mut by_name: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for f in diff["functions"].as_array().unwrap() {
        by_name
            .entry(f["function"].as_str().unwrap().to_string())
            .or_default()
            .push((f["a"][0].as_f64().unwrap(), f["b"][0].as_f64().unwrap()));
    }
    let expected = |name: &str| -> (f64, f64) {
        match &by_name[name][..] {
            [one] => *one,
            more => panic!("{name} names {} functions", more.len()),
        }
    };

    let diff_report = dir.path().join("diff.html");
    tally!().ok(&["report", "--html", path_str(&diff_report), "--diff", pa, pb]);
    let tf_report = dir.path().join("focused.html");
    tally!().ok(&[
        "report",
        "--html",
        path_str(&tf_report),
        "--focus-subtree=^main$",
        pb,
    ]);
    let mut command = tally!().command();
    command
        .args(["serve", "--diff", pa, pb])
        .stderr(Stdio::inherit());
    let server = Server::start(command);
    let shots = browser::artefacts("web-compare-trees");
    let o = Command::new("node")
        .current_dir(browser::driver_dir())
        .arg("compare-trees.mjs")
        .arg(&server.url)
        .arg(format!("file://{}", diff_report.display()))
        .arg(format!("file://{}", tf_report.display()))
        .arg(&shots)
        .arg("hot")
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the driver's JSON");
    assert!(v.get("failure").is_none(), "{}", v["failure"]);
    assert_eq!(v["errors"], serde_json::json!([]), "page errors");
    assert_eq!(
        v["requests"],
        serde_json::json!([]),
        "the reports fetch nothing"
    );

    for side in ["served", "report"] {
        let s = &v[side];
        // The roots' differences add up to tally diff's total difference.
        let roots: f64 = s["roots"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["delta"].as_f64().unwrap())
            .sum();
        assert_eq!(roots, total_delta, "{side}: {}", s["roots"]);
        assert!(s["found"].as_bool().unwrap(), "{side}: hot in the tree");
        // hot and warm are leaves: their node's totals are their self
        // costs, tally diff's; the slower one red, the faster one blue.
        for (name, change) in [("hot", "regressed"), ("warm", "improved")] {
            let r = row(&s["tree"], name);
            let (ea, eb) = expected(name);
            assert_eq!(
                (r["a"].as_f64().unwrap(), r["b"].as_f64().unwrap()),
                (ea, eb),
                "{side}: {r}"
            );
            assert_eq!(r["change"], change, "{side}: {r}");
            assert_eq!(number(r["cells"][2].as_str().unwrap()), eb - ea, "{r}");
            let i = row(&s["inverted"], name);
            assert_eq!(i["change"], change, "{side} inverted: {i}");
        }
        // The differential flame graph: hot red, warm blue, old (only in
        // A) listed with A's cost.
        let frames = s["flame"]["frames"].as_array().unwrap();
        let frame = |name: &str| {
            frames
                .iter()
                .find(|f| f["name"] == name)
                .unwrap_or_else(|| panic!("{side}: no frame {name}"))
        };
        let hot = frame("hot");
        let (r, g, bl) = rgb(hot["fill"].as_str().unwrap());
        assert!(
            hot["change"] == "up" && r == 255 && g < 100 && bl < 100,
            "{side}: {hot}"
        );
        let warm = frame("warm");
        let (r, g, bl) = rgb(warm["fill"].as_str().unwrap());
        assert!(
            warm["change"] == "down" && bl == 255 && r < 200 && g < 200,
            "{side}: {warm}"
        );
        assert_eq!(frame("all")["b"].as_f64(), diff["totals"]["b"][0].as_f64());
        let old = &s["flame"]["only_in_a"][0];
        assert_eq!(old["name"], "old", "{side}: {}", s["flame"]);
        assert_eq!(old["a"].as_f64().unwrap(), expected("old").0);
        // The four lists, with tally diff's numbers.
        let lists = &s["lists"];
        for (list, name) in [
            ("regressed", "hot"),
            ("improved", "warm"),
            ("only_in_b", "fresh"),
            ("only_in_a", "old"),
        ] {
            assert!(
                lists[list]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|e| e["fn"] == name),
                "{side}: {name} in {list}: {lists}"
            );
            for e in lists[list].as_array().unwrap() {
                let n = e["fn"].as_str().unwrap();
                let (ea, eb) = expected(n);
                let got = (
                    number(e["a"].as_str().unwrap()),
                    number(e["b"].as_str().unwrap()),
                );
                assert_eq!(got, (ea, eb), "{side}: {list}: {e}");
                assert_eq!(number(e["delta"].as_str().unwrap()), eb - ea, "{e}");
            }
        }
    }

    // The report made with --focus-subtree: rooted at main, the transform
    // in its breadcrumb, which cannot be popped there.
    let t = &v["transformed"];
    let roots: Vec<&str> = t["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["fn"].as_str().unwrap())
        .collect();
    assert_eq!(roots, ["main"], "{t}");
    let crumb = t["crumbs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["text"] == "› focus-subtree ^main$")
        .unwrap_or_else(|| panic!("{t}"));
    assert_eq!(crumb["read_only"], true, "{t}");
}
