//! Call trees and transforms in the web UI, in Chromium
//! (`tests/web/transforms.mjs`): the trees' levels are `tally annotate
//! --call-tree`'s, a transform from the context menu gives the total of the
//! same flag on the command line and is kept in the address, back and the
//! breadcrumb pop it, and a link with a transform opens as it says.

use serde_json::Value;
use std::process::{Command, Stdio};
use tally_testutil::serve::Server;
use tally_testutil::{browser, data, path_str, tally};

fn driver(url: &str, focus: &str, collapse: &str, inv_focus: &str) -> Value {
    let shots = browser::artefacts("web-transforms");
    let o = Command::new("node")
        .current_dir(browser::driver_dir())
        .arg("transforms.mjs")
        .args([url, shots.to_str().unwrap(), focus, collapse, inv_focus])
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the driver's JSON");
    assert!(v.get("failure").is_none(), "{}", v["failure"]);
    assert_eq!(v["errors"], serde_json::json!([]), "page errors");
    v
}

/// `tally annotate --call-tree=KIND --json` with `extra`: the nodes'
/// (depth, function).
fn tree(kind: &str, extra: &[&str]) -> Vec<(u64, String)> {
    let f = data("stacks/stacks.pb.gz");
    let mut args = vec!["annotate", "--json", "--depth=2", "--min-share=0"];
    let k = format!("--call-tree={kind}");
    args.push(&k);
    args.extend(extra);
    args.push(path_str(&f));
    let v: Value = serde_json::from_slice(&tally!().ok(&args).stdout).unwrap();
    v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["depth"].as_u64().unwrap(),
                n["function"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn names(items: &Value) -> Vec<String> {
    items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["fn"].as_str().unwrap().to_string())
        .collect()
}

/// The total a status line gives (`… · total 205,000,000 …`).
fn total(status: &Value) -> u64 {
    let s = status.as_str().unwrap();
    let after = s.split("total ").nth(1).unwrap_or_else(|| panic!("{s}"));
    after
        .split(|c: char| !(c.is_ascii_digit() || c == ','))
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap()
}

/// `tally annotate --json`'s total of the first event with `extra`.
fn annotate_total(extra: &[&str]) -> u64 {
    let f = data("stacks/stacks.pb.gz");
    let mut args = vec!["annotate", "--json", "--auto=no"];
    args.extend(extra);
    args.push(path_str(&f));
    let v: Value = serde_json::from_slice(&tally!().ok(&args).stdout).unwrap();
    let e = v["events"][0].as_str().unwrap().to_string();
    v["totals"][&e].as_u64().unwrap()
}

#[test]
fn trees_and_transforms_in_the_browser() {
    if !browser::require_driver(&[]) {
        return;
    }
    let mut command = tally!().command();
    command
        .arg("serve")
        .arg(data("stacks/stacks.pb.gz"))
        .stderr(Stdio::inherit());
    let server = Server::start(command);
    let v = driver(&server.url, "rec", "rec", "^spin$");

    // The trees' levels are annotate's.
    let cli = tree("top-down", &[]);
    let level = |d: u64| -> Vec<String> {
        cli.iter()
            .filter(|n| n.0 == d)
            .map(|n| n.1.clone())
            .collect()
    };
    assert_eq!(names(&v["roots"]), level(0), "{v}");
    assert_eq!(names(&v["second"]), level(1), "{v}");
    assert_eq!(
        v["selected"], v["focused"],
        "Enter selects the node's function"
    );

    // A focus from the menu: the CLI's total, in the address and the crumbs.
    assert_eq!(
        total(&v["focused_total"]),
        annotate_total(&["--focus=^rec$"])
    );
    assert_ne!(total(&v["focused_total"]), total(&v["before"]));
    let h = v["focused_hash"].as_str().unwrap();
    assert!(h.contains("focus=^rec$"), "{h}");
    assert_eq!(v["two_crumbs"].as_array().unwrap().len(), 2);
    let h2 = v["two_hash"].as_str().unwrap();
    assert!(
        h2.find("focus=^rec$").unwrap() < h2.find("collapse-recursion=^rec$").unwrap(),
        "transforms in order: {h2}"
    );
    // rec calls itself: collapsed, no rec under rec in the tree.
    let tree_after: Vec<String> = names(&v["two_tree"]);
    assert!(
        tree_after.iter().filter(|n| *n == "rec").count() <= 1,
        "{tree_after:?}"
    );
    // Back pops the last transform; the breadcrumb pops the rest.
    let back = v["back_hash"].as_str().unwrap();
    assert!(
        back.contains("focus=") && !back.contains("collapse-recursion"),
        "{back}"
    );
    assert_eq!(total(&v["popped_total"]), total(&v["before"]));
    assert!(!v["popped_hash"].as_str().unwrap().contains("focus="));

    // A link with a transform opens the inverted tree as annotate lists it.
    assert_eq!(v["inverted_tab"], "inverted");
    assert_eq!(v["inverted_crumbs"].as_array().unwrap().len(), 1);
    let inv: Vec<String> = tree("inverted", &["--focus=^spin$"])
        .into_iter()
        .filter(|n| n.0 == 0)
        .map(|n| n.1)
        .collect();
    assert_eq!(names(&v["inverted"]), inv);
}
