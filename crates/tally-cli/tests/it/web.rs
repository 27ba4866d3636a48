//! `tally serve` and `tally report --html` in Debian's chromium (driven by
//! playwright-core, `tests/web/drive.mjs`) on real profiles of a program
//! compiled here: Callgrind (recursion and a cycle), Cachegrind, and
//! gprof's gmon.out. The callers and callees the page shows are checked
//! against `tally gprof --json`, the inclusive costs against `tally
//! annotate --inclusive=yes`; screenshots go to
//! `target/test-artefacts/web/`, and with `TALLY_SCREENSHOTS=1` the
//! README's also to `docs/images/`. The server's guards (token, Host
//! header, paths outside the API, loopback only) are checked with plain
//! requests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tally_testutil::serve::Server;
use tally_testutil::{browser, require, tally, temp_dir};

/// `fact` recurses, `even` and `odd` call each other (a cycle), `leaf` is
/// called from all of them and from `work`.
const PROGRAM: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void leaf(int n) { for (int i = 0; i < n; i++) sink += i; }
__attribute__((noinline)) int fact(int n) { leaf(200); return n <= 1 ? 1 : n * fact(n - 1); }
int odd(int n);
__attribute__((noinline)) int even(int n) { leaf(300); return n == 0 ? 1 : odd(n - 1); }
__attribute__((noinline)) int odd(int n) { leaf(500); return n == 0 ? 0 : even(n - 1); }
__attribute__((noinline)) void work(int rounds) {
    for (int r = 0; r < rounds; r++) { sink += fact(12); sink += even(31); leaf(4000); }
}
int main(int argc, char **argv) { work(argc > 1 ? atoi(argv[1]) : 200); return 0; }
"#;

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().expect("runs");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The program, with `-pg` or not.
fn build(dir: &Path, pg: bool) -> PathBuf {
    let src = dir.join("rec.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(if pg { "rec-pg" } else { "rec" });
    let mut c = Command::new("gcc");
    c.args(["-O1", "-g", "-fno-inline", "-o"])
        .arg(&exe)
        .arg(&src);
    if pg {
        c.arg("-pg");
    }
    run(&mut c);
    exe
}

fn callgrind(dir: &Path, exe: &Path) -> PathBuf {
    let out = dir.join("rec.callgrind");
    run(Command::new("valgrind")
        .args(["--tool=callgrind", "--dump-instr=yes"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe));
    out
}

fn cachegrind(dir: &Path, exe: &Path) -> PathBuf {
    let out = dir.join("rec.cachegrind");
    run(Command::new("valgrind")
        .args(["--tool=cachegrind", "--cache-sim=yes"])
        .arg(format!("--cachegrind-out-file={}", out.display()))
        .arg(exe));
    out
}

/// gmon.out of the `-pg` program, long enough to take samples.
fn gmon(dir: &Path, exe: &Path) -> PathBuf {
    run(Command::new(exe).arg("20000").current_dir(dir));
    dir.join("gmon.out")
}

/// Where this file's screenshots go.
fn shots() -> PathBuf {
    browser::artefacts("web")
}

/// The views whose screenshots the README shows, and the screenshot of
/// the test each is (`PREFIX-SHOT`).
const README_VIEWS: [(&str, &str); 7] = [
    ("functions", "callgrind-functions"),
    ("butterfly", "callgrind-butterfly"),
    ("graph", "callgrind-graph"),
    ("flame", "callgrind-flame"),
    ("source", "callgrind-source"),
    ("asm", "callgrind-asm"),
    ("compare", "compare-overview"),
];

/// Checks that the README shows exactly the screenshots of
/// [`README_VIEWS`], which this test takes; with `TALLY_SCREENSHOTS=1`
/// copies the Callgrind run's to `docs/images/web-VIEW.png`, where the
/// README shows them (tracked files: a test run does not rewrite them
/// unless asked).
fn publish_screenshots() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for (_, shot) in README_VIEWS {
        let from = shots().join(format!("{shot}.png"));
        assert!(from.is_file(), "{}: no screenshot", from.display());
    }
    for (view, shot) in README_VIEWS {
        let from = shots().join(format!("{shot}.png"));
        browser::publish(&from, &root.join(format!("docs/images/web-{view}.png")));
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut shown: Vec<&str> = readme
        .split("docs/images/web-")
        .skip(1)
        .filter_map(|rest| rest.split_once(".png").map(|(view, _)| view))
        .collect();
    shown.sort_unstable();
    let mut views: Vec<&str> = README_VIEWS.iter().map(|(v, _)| *v).collect();
    views.sort_unstable();
    assert_eq!(shown, views, "README.md's screenshots of the web UI");
}

/// `tally serve ARGS…`, stopped when dropped.
fn serve(args: &[&str]) -> Server {
    let mut command = tally!().command();
    command.arg("serve").args(args).stderr(Stdio::inherit());
    Server::start(command)
}

/// `tally gprof --json`'s call graph entry of `name`.
fn gprof_entry(args: &[&str], name: &str) -> Value {
    let mut full = vec!["gprof", "--json"];
    full.extend_from_slice(args);
    let out = tally!().ok(&full);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["call_graph"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in tally gprof's call graph"))
        .clone()
}

/// The page's numbers as plain numbers (`1,234` → 1234).
fn number(s: &str) -> f64 {
    s.replace(',', "").trim().parse().unwrap_or(f64::NAN)
}

/// Checks the butterfly the page showed against gprof's entry: the same
/// callers and callees, with the same counts and costs.
fn check_butterfly(page: &Value, entry: &Value, seconds: bool) {
    let rows = page["butterfly"].as_array().unwrap();
    let close = |a: f64, b: f64| {
        if seconds {
            (a - b).abs() < 0.006
        } else {
            a == b.round()
        }
    };
    let primary = rows.iter().find(|r| r["kind"] == "primary").unwrap();
    assert!(close(
        number(primary["cells"][1].as_str().unwrap()),
        entry["self"].as_f64().unwrap()
    ));
    assert!(close(
        number(primary["cells"][2].as_str().unwrap()),
        entry["descendants"].as_f64().unwrap()
    ));
    for (kind, key) in [("caller", "parents"), ("callee", "children")] {
        let shown: Vec<&Value> = rows.iter().filter(|r| r["kind"] == kind).collect();
        let want = entry[key].as_array().unwrap();
        assert_eq!(
            shown.len(),
            want.len(),
            "{kind}s: {shown:?} against {want:?}"
        );
        for (s, w) in shown.iter().zip(want) {
            assert!(
                s["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(w["name"].as_str().unwrap()),
                "{s} against {w}"
            );
            assert_eq!(s["count"].as_str().unwrap(), w["count"].to_string());
            if let Some(m) = w.get("measured") {
                assert_eq!(s["measured"].as_str().unwrap(), m.to_string(), "{s}");
            }
            if let Some(x) = w.get("self").and_then(Value::as_f64) {
                assert!(close(number(s["cells"][1].as_str().unwrap()), x), "{s} {w}");
            }
        }
    }
}

/// `tally annotate --inclusive=yes`'s inclusive cost of `function`.
fn annotate_inclusive(profile: &Path, function: &str) -> f64 {
    let out = tally!().ok(&[
        "annotate",
        "--inclusive=yes",
        "--auto=no",
        "--threshold=100",
        profile.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| {
            let l = l.trim_end();
            // `FILE:FUNCTION [OBJECT]`
            l.contains(&format!(":{function} [")) || l.ends_with(&format!(":{function}"))
        })
        .unwrap_or_else(|| panic!("{function} not in annotate's table:\n{text}"));
    number(line.split_whitespace().next().unwrap())
}

#[test]
fn browser_views_match_the_reports() {
    if !browser::require_driver(&["gcc", "valgrind", "dot"]) {
        return;
    }
    let dir = temp_dir();
    let exe = build(dir.path(), false);
    let cg = callgrind(dir.path(), &exe);
    let cgs = cg.to_str().unwrap();

    // Callgrind: recursion (fact) and a cycle (even, odd).
    let server = serve(&[cgs]);
    let page = browser::drive(&server.url, &shots(), "callgrind", "fact", false);
    // Sorted by inclusive cost, largest first, as annotate computes it.
    let col = page["inclusive_column"].as_u64().unwrap() as usize;
    let incl: Vec<f64> = page["by_inclusive"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| number(r["cells"][col].as_str().unwrap()))
        .collect();
    assert!(incl.windows(2).all(|w| w[0] >= w[1]), "{incl:?}");
    let work = page["by_inclusive"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "work")
        .expect("work in the table");
    assert_eq!(
        number(work["cells"][col].as_str().unwrap()),
        annotate_inclusive(&cg, "work")
    );
    check_butterfly(&page, &gprof_entry(&[cgs], "fact"), false);
    let primary = page["butterfly"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "primary")
        .unwrap()
        .clone();
    assert_eq!(
        number(primary["measured"].as_str().unwrap()),
        annotate_inclusive(&cg, "fact")
    );
    assert!(
        page["graph_nodes"].as_array().is_some_and(|n| n.len() > 1),
        "{}",
        page["graph_error"]
    );
    assert!(
        page["flame_click_selected"]
            .as_str()
            .is_some_and(|s| s.starts_with("main")),
        "{}",
        page["flame_click_selected"]
    );
    assert!(page["source"].as_str().unwrap().contains("fact"));
    // The selected function (`main`, chosen in the flame graph) is
    // disassembled: its call of `work`.
    assert!(
        page["asm"].as_str().unwrap().contains("<work>"),
        "{}",
        page["asm"]
    );
    drop(server);

    // Compare: B (a longer run) against A; the selected function's B − A
    // is annotate's inclusive cost of B less A's.
    let b = dir.path().join("rec-b.callgrind");
    run(Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", b.display()))
        .arg(&exe)
        .arg("300"));
    let server = serve(&["--diff", cgs, b.to_str().unwrap()]);
    let page = browser::drive(&server.url, &shots(), "compare", "work", false);
    assert!(page.get("failure").is_none(), "{}", page["failure"]);
    let primary = page["butterfly"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "primary")
        .unwrap()
        .clone();
    let delta = primary["cells"].as_array().unwrap().last().unwrap();
    let want = annotate_inclusive(&b, "work") - annotate_inclusive(&cg, "work");
    assert!(want > 0.0);
    assert_eq!(number(delta.as_str().unwrap()), want, "{primary}");
    assert!(page["overview"].as_bool().unwrap_or(false), "{page}");
    drop(server);
    publish_screenshots();

    // The cycle as a row, with its members.
    let server = serve(&[cgs]);
    let page = browser::drive(&server.url, &shots(), "cycle", "<cycle 1>", false);
    let members: Vec<&str> = page["butterfly"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["kind"] == "member")
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    // Callgrind names recursion levels (`even'2`).
    assert!(
        members.iter().any(|m| m.starts_with("even"))
            && members.iter().any(|m| m.starts_with("odd")),
        "{members:?}"
    );
    drop(server);

    // Cachegrind: every event, and switching event.
    let cach = cachegrind(dir.path(), &exe);
    let server = serve(&[cach.to_str().unwrap()]);
    let page = browser::drive(&server.url, &shots(), "cachegrind", "leaf", false);
    assert!(page["events"].as_array().unwrap().len() > 1);
    assert!(
        page["switched_rows"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
    );
    assert_eq!(page["status_error"], false, "{}", page["final_status"]);
    drop(server);

    // gmon.out with its program: gprof's own numbers.
    if require(&["gprof"]) {
        let pg = build(dir.path(), true);
        let gm = gmon(dir.path(), &pg);
        let server = serve(&["--binary", pg.to_str().unwrap(), gm.to_str().unwrap()]);
        let page = browser::drive(&server.url, &shots(), "gmon", "leaf", false);
        check_butterfly(
            &page,
            &gprof_entry(&[pg.to_str().unwrap(), gm.to_str().unwrap()], "leaf"),
            true,
        );
        drop(server);
    }

    // The report, from disk, with networking off: the same numbers.
    let html = dir.path().join("report.html");
    tally!().ok(&["report", cgs, "--html", html.to_str().unwrap()]);
    let url = format!("file://{}", html.display());
    let page = browser::drive(&url, &shots(), "report", "fact", true);
    assert_eq!(
        page["requests"],
        serde_json::json!([]),
        "the report fetched"
    );
    check_butterfly(&page, &gprof_entry(&[cgs], "fact"), false);
    // The selected function's own source lines, not the whole file.
    let source = page["source"].as_str().unwrap();
    assert!(
        source.contains("fact(int n)") && !source.contains("int main("),
        "{source}"
    );
}

/// A raw HTTP/1.1 GET; returns the status code.
fn get(port: u16, host: &str, target: &str) -> u16 {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// This machine's IPv4 addresses other than loopback.
fn other_addresses() -> Vec<String> {
    let out = Command::new("hostname").arg("-I").output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|a| {
            a.parse::<std::net::Ipv4Addr>()
                .is_ok_and(|a| !a.is_loopback())
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn server_refuses_what_it_should() {
    let cg = tally_testutil::data("callgrind/inline.default.out");
    let server = serve(&[cg.to_str().unwrap()]);
    let port = server.port;
    let host = format!("127.0.0.1:{port}");
    let token = server.url.split("?t=").nth(1).unwrap().to_owned();
    assert_eq!(get(port, &host, &format!("/?t={token}")), 200);
    assert_eq!(get(port, &host, &format!("/api/meta?t={token}")), 200);
    assert_eq!(
        get(
            port,
            &format!("localhost:{port}"),
            &format!("/api/meta?t={token}")
        ),
        200
    );
    // No token, a wrong one, or a token cut short.
    assert_eq!(get(port, &host, "/"), 403);
    assert_eq!(get(port, &host, "/api/meta"), 403);
    assert_eq!(
        get(port, &host, "/api/meta?t=0123456789abcdef0123456789abcdef"),
        403
    );
    assert_eq!(
        get(port, &host, &format!("/api/meta?t={}", &token[..8])),
        403
    );
    // Another Host header (DNS rebinding), even with the token.
    assert_eq!(get(port, "evil.example:80", &format!("/?t={token}")), 403);
    assert_eq!(
        get(
            port,
            &format!("evil.example:{port}"),
            &format!("/api/meta?t={token}")
        ),
        403
    );
    // Outside the API, or an unknown call.
    assert_eq!(get(port, &host, &format!("/etc/passwd?t={token}")), 404);
    assert_eq!(get(port, &host, &format!("/api/nothing?t={token}")), 404);
    assert_eq!(
        get(
            port,
            &host,
            &format!("/api/file?t={token}&path=/etc/passwd")
        ),
        404
    );
    // Loopback only: not reachable on the machine's other addresses.
    for a in other_addresses() {
        let addr: std::net::SocketAddr = format!("{a}:{port}").parse().unwrap();
        assert!(
            TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(2)).is_err(),
            "reachable on {addr}"
        );
    }
}

#[test]
fn bad_input_fails_before_serving() {
    let dir = temp_dir();
    let bad = dir.path().join("bad.out");
    std::fs::write(&bad, "# callgrind format\nevents: Ir\nfn=main\n1 x\n").unwrap();
    let serve_err = tally!().fails(&["serve", bad.to_str().unwrap()]);
    let check_err = tally!().fails(&["annotate", bad.to_str().unwrap()]);
    assert_eq!(serve_err.lines().next(), check_err.lines().next());
    let report_err = tally!().fails(&[
        "report",
        bad.to_str().unwrap(),
        "--html",
        dir.path().join("r.html").to_str().unwrap(),
    ]);
    assert_eq!(report_err.lines().next(), check_err.lines().next());
    assert!(!dir.path().join("r.html").exists());
}

/// The server answers from the profile as it was read: the file rewritten
/// (cut in half, then garbage) while served changes no answer.
#[test]
fn a_profile_rewritten_while_served_is_not_read_again() {
    let dir = temp_dir();
    let data =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/callgrind/mutual.cache.out");
    let profile = dir.path().join("served.out");
    std::fs::copy(&data, &profile).unwrap();
    let server = serve(&[profile.to_str().unwrap()]);
    // Sorting by inclusive cost waits for the analysis: the full view.
    let calls = [
        "functions?sort=inclusive&limit=50",
        "functions?sort=self&limit=50",
        "meta",
    ];
    let before: Vec<(u16, String)> = calls.iter().map(|c| server.get(c)).collect();
    for (status, body) in &before {
        assert_eq!(*status, 200, "{body}");
    }
    let text = std::fs::read(&profile).unwrap();
    let mut half = text[..text.len() / 2].to_vec();
    half.extend_from_slice(b"\nfn=(99\n1 x y z\n");
    std::fs::write(&profile, &half).unwrap();
    let after: Vec<(u16, String)> = calls.iter().map(|c| server.get(c)).collect();
    assert_eq!(before, after);
}

/// The table's node of the function (or cycle) named exactly `name`,
/// once the analysis is done.
fn node_of(server: &Server, name: &str) -> u64 {
    let re: String = name
        .chars()
        .map(|c| {
            if ".*+?^${}()|[]\\".contains(c) {
                format!("\\{c}")
            } else {
                c.to_string()
            }
        })
        .collect();
    // Cycle rows and exact inclusive costs come with gprof's analysis:
    // until `ready` answers, the table is the provisional one.
    let (status, body) = server.get("ready");
    assert_eq!(status, 200, "{body}");
    let q = format!("functions?filter=%5E{}%24", urlencode(&re));
    let (status, body) = server.get(&q);
    assert_eq!(status, 200, "{body}");
    let t: Value = serde_json::from_str(&body).unwrap();
    t["rows"][0]["node"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name} not in the table: {body}"))
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// The call graph of a cycle (its members as a group) and of a profile
/// without calls (the one node), the source cut to the function (the
/// whole file on request), and a comparison's callers and callees as
/// B − A, checked against `tally annotate --inclusive=yes` of A and B.
#[test]
fn graph_source_and_compare_views() {
    if !require(&["gcc", "valgrind", "dot"]) {
        return;
    }
    let dir = temp_dir();
    let exe = build(dir.path(), false);
    let a = callgrind(dir.path(), &exe);
    let b = dir.path().join("rec-b.callgrind");
    run(Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", b.display()))
        .arg(&exe)
        .arg("300"));

    let server = serve(&[a.to_str().unwrap()]);
    // A cycle's graph: its members drawn as a group.
    let cycle = node_of(&server, "<cycle 1>");
    let (status, svg) = server.get(&format!("graph?node={cycle}"));
    assert_eq!(status, 200, "{svg}");
    assert!(svg.contains("cycle 1"), "no cycle group");
    assert!(svg.contains("even") && svg.contains("odd"), "{svg}");
    // A member's graph has the group too.
    let even = node_of(&server, "even");
    let (status, svg) = server.get(&format!("graph?node={even}"));
    assert_eq!(status, 200);
    assert!(svg.contains("cycle 1") && svg.contains("leaf"));
    // Source: the function's lines, not the whole file, unless asked.
    let fact = node_of(&server, "fact");
    let (status, src) = server.get(&format!("source?node={fact}"));
    assert_eq!(status, 200);
    assert!(src.contains("int fact(int n)"), "{src}");
    assert!(src.contains("-- lines "), "{src}");
    assert!(!src.contains("int main("), "{src}");
    let (_, whole) = server.get(&format!("source?node={fact}&whole=1"));
    assert!(whole.contains("int fact(int n)") && whole.contains("int main("));
    drop(server);

    // Cachegrind (no calls): the selected function alone, not a 404.
    let cach = tally_testutil::data("cachegrind/inline.out");
    let server = serve(&[cach.to_str().unwrap()]);
    let (_, meta) = server.get("meta");
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert_eq!(meta["inputs"][0]["calls"], false);
    let (_, t) = server.get("functions?limit=1");
    let t: Value = serde_json::from_str(&t).unwrap();
    let top = t["rows"][0]["node"].as_u64().unwrap();
    let (status, svg) = server.get(&format!("graph?node={top}"));
    assert_eq!(status, 200, "{svg}");
    assert_eq!(svg.matches("class=\"node\"").count(), 1, "{svg}");
    drop(server);

    // Compare: B − A of the function and of each callee, by change.
    let server = serve(&["--diff", a.to_str().unwrap(), b.to_str().unwrap()]);
    let work = node_of(&server, "work");
    let (status, f) = server.get(&format!("function?node={work}"));
    assert_eq!(status, 200, "{f}");
    let f: Value = serde_json::from_str(&f).unwrap();
    let want = annotate_inclusive(&b, "work") - annotate_inclusive(&a, "work");
    assert_eq!(f["delta"].as_f64().unwrap(), want, "{f}");
    assert!(want > 0.0);
    let children = f["children"].as_array().unwrap();
    assert!(!children.is_empty());
    let deltas: Vec<f64> = children
        .iter()
        .map(|c| c["delta"].as_f64().unwrap().abs())
        .collect();
    assert!(deltas.windows(2).all(|w| w[0] >= w[1]), "{deltas:?}");
    let leaf = children.iter().find(|c| c["name"] == "leaf").unwrap();
    assert_eq!(
        leaf["delta"].as_f64().unwrap(),
        leaf["measured"].as_f64().unwrap() - leaf["base_cost"].as_f64().unwrap()
    );
    let (status, svg) = server.get(&format!("graph?node={work}"));
    assert_eq!(status, 200);
    assert!(svg.contains("B−A +"), "no B − A in the graph");
    drop(server);

    // The report says what it left out.
    let html = dir.path().join("r.html");
    tally!().ok(&[
        "report",
        a.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--threshold",
        "5",
    ]);
    let text = std::fs::read_to_string(&html).unwrap();
    let at = text.find("\"left_out\":").expect("left_out embedded");
    let n: u64 = text[at + 11..]
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(n > 0, "nothing left out at 5 %");
}

/// The embedded data of a report.
fn report_data(html: &str) -> Value {
    let start = html.find("const DATA = ").unwrap() + "const DATA = ".len();
    let end = start + html[start..].find(";</script>").unwrap();
    serde_json::from_str(&html[start..end].replace("<\\/", "</")).unwrap()
}

/// The report of a large profile (a generated 24 MB Callgrind file of
/// about 8,000 functions) stays small: at most a fixed part (page,
/// graph, flame graph) and 4 KiB per embedded function, and at most
/// that for 1 / threshold functions; every entry keeps at most 12
/// callers and callees, every source is a window, the page says what
/// was left out, and it still opens offline.
#[test]
fn report_of_a_large_profile_is_small() {
    let dir = temp_dir();
    let profile = dir.path().join("gen.out");
    let config = tally_gen::Config {
        size: 24 << 20,
        ..Default::default()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&profile).unwrap());
    tally_gen::generate(&config, &mut f).unwrap();
    f.flush().unwrap();
    drop(f);
    const FIXED: f64 = 400.0 * 1024.0;
    const PER_FUNCTION: f64 = 4.0 * 1024.0;
    let mut first = None;
    for threshold in [0.1, 1.0] {
        let html = dir.path().join(format!("report-{threshold}.html"));
        tally!().ok(&[
            "report",
            profile.to_str().unwrap(),
            "--html",
            html.to_str().unwrap(),
            "--threshold",
            &threshold.to_string(),
        ]);
        let text = std::fs::read_to_string(&html).unwrap();
        let size = text.len() as f64;
        let data = report_data(&text);
        let view = &data["views"]["Ir"];
        let kept = view["rows"].as_array().unwrap().len() as f64;
        assert!(
            view["left_out"].as_u64().unwrap() > 1000,
            "{}",
            view["left_out"]
        );
        assert!(
            size <= FIXED + PER_FUNCTION * kept,
            "threshold {threshold}%: {size} bytes for {kept} functions"
        );
        assert!(
            size <= FIXED + PER_FUNCTION * 100.0 / threshold,
            "threshold {threshold}%: {size} bytes"
        );
        for (node, entry) in view["functions"].as_object().unwrap() {
            for key in ["parents", "children", "members"] {
                let n = entry[key].as_array().map_or(0, Vec::len);
                assert!(n <= 12, "function {node}: {n} {key}");
            }
        }
        for (node, source) in data["sources"].as_object().unwrap() {
            let lines = source["rows"].as_array().map_or(0, Vec::len);
            assert!(lines <= 1011, "function {node}: {lines} lines of source");
        }
        assert!(data["trimmed"]["arcs_left_out"].as_u64().unwrap() > 0);
        if first.is_none() {
            let top = view["rows"][0]["name"].as_str().unwrap().to_owned();
            first = Some((html, top));
        }
    }
    if !browser::require_driver(&[]) {
        return;
    }
    let (html, top) = first.unwrap();
    let page = browser::drive(
        &format!("file://{}", html.display()),
        &shots(),
        "large-report",
        &top,
        true,
    );
    assert_eq!(
        page["requests"],
        serde_json::json!([]),
        "the report fetched"
    );
    let status = page["status"].as_str().unwrap();
    assert!(
        status.contains("functions below 0.1% of the total left out")
            && status.contains("at most 12 callers and callees"),
        "{status}"
    );
    assert!(
        page["butterfly"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["kind"] == "primary")),
        "{}",
        page["butterfly"]
    );
}
