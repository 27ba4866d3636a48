//! Exploring a profile in `tally serve` and `tally report --html` as in
//! Firefox Profiler or pprof, in Debian's chromium (`tests/web/explore.mjs`)
//! over a Callgrind profile of a C++ program compiled here: a deep link
//! opens its view and selection, back and forward walk the history, no
//! number is clipped at 1920×1080 or 1280×800 beside a long C++ name, the
//! source view's heat table and the assembly's jump arrows give the
//! numbers of `tally annotate --json`, and the search marks the flame
//! graph. Screenshots go to `target/test-artefacts/web-explore/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tally_testutil::serve::Server;
use tally_testutil::{browser, tally, temp_dir};

/// The long name, demangled as Callgrind writes it.
const LONG: &str = "very_long_namespace_for_testing::detail_implementation::\
AccumulatorWithAVeryLongDescriptiveName<unsigned long>::accumulate_values_into_the_global_sink(int)";

/// The recursive function, as Callgrind names it.
const FACT: &str = "fact(int)";

/// `helper` is inlined into the long function from far above it in the
/// same file (as Lua's lvm.c inlines its helpers into `luaV_execute`);
/// `fact` recurses and calls the long function.
fn program() -> String {
    let gap = "// a line between the helper and the code using it\n".repeat(60);
    format!(
        r#"#include <cstdlib>
volatile unsigned long sink;
static inline __attribute__((always_inline)) void helper(int n) {{ for (int i = 0; i < n; i++) sink += i * 3; }}
{gap}namespace very_long_namespace_for_testing {{ namespace detail_implementation {{
template <typename Element> struct AccumulatorWithAVeryLongDescriptiveName {{
  __attribute__((noinline)) static void accumulate_values_into_the_global_sink(int n) {{
    helper(n / 8);
    for (int i = 0; i < n; i++) {{ sink += i; }} // the body
  }}
}};
}} }}
using Acc = very_long_namespace_for_testing::detail_implementation::AccumulatorWithAVeryLongDescriptiveName<unsigned long>;
__attribute__((noinline)) int fact(int n) {{ Acc::accumulate_values_into_the_global_sink(200); return n <= 1 ? 1 : n * fact(n - 1); }}
__attribute__((noinline)) void work(int rounds) {{
  for (int r = 0; r < rounds; r++) {{ sink += fact(12); Acc::accumulate_values_into_the_global_sink(4000); }}
}}
int main(int argc, char **argv) {{ work(argc > 1 ? atoi(argv[1]) : 100); return 0; }}
"#
    )
}

fn run(cmd: &mut Command) -> String {
    let o = cmd.output().expect("runs");
    assert!(
        o.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The program's source, and its Callgrind profile with cache events,
/// instructions and jumps.
fn profile(dir: &Path) -> (PathBuf, PathBuf) {
    let src = dir.join("explore.cpp");
    std::fs::write(&src, program()).unwrap();
    let exe = dir.join("explore");
    run(Command::new("g++")
        .args(["-O1", "-g", "-o"])
        .arg(&exe)
        .arg(&src));
    let out = dir.join("explore.callgrind");
    run(Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--cache-sim=yes",
            "--dump-instr=yes",
            "--collect-jumps=yes",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe));
    (src, out)
}

/// `tally annotate --json ARGS… PROFILE`.
fn annotate_json(profile: &Path, args: &[&str]) -> Value {
    let mut full = vec!["annotate", "--json", "--threshold=100"];
    full.extend_from_slice(args);
    full.push(profile.to_str().unwrap());
    serde_json::from_slice(&tally!().ok(&full).stdout).unwrap()
}

/// The page's numbers as plain numbers (`1,234` → 1234).
fn number(s: &str) -> f64 {
    s.replace(',', "").trim().parse().unwrap_or(f64::NAN)
}

/// Runs `tests/web/explore.mjs` on `url`; panics on a driver failure or
/// an error of the page.
fn explore(url: &str, prefix: &str, function: &str, search: &str) -> Value {
    let shots = browser::artefacts("web-explore");
    let o = Command::new("node")
        .current_dir(browser::driver_dir())
        .arg("explore.mjs")
        .args([url, shots.to_str().unwrap(), prefix, function, search])
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the driver's JSON");
    assert!(v.get("failure").is_none(), "{prefix}: {}", v["failure"]);
    assert_eq!(v["errors"], serde_json::json!([]), "{prefix}: page errors");
    v
}

/// The fragment's pairs as the page shows them (`#k=v&…`, decoded).
fn pairs(hash: &Value) -> Vec<(String, String)> {
    hash.as_str()
        .unwrap()
        .trim_start_matches('#')
        .split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn pair<'a>(p: &'a [(String, String)], key: &str) -> Option<&'a str> {
    p.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Checks what the explorer saw against `tally annotate --json` of the
/// same profile.
fn check(page: &Value, profile: &Path, events: &[Value]) {
    // The deep link's view and selection, read back.
    let deep = &page["deep"];
    assert_eq!(deep["tab"], "source");
    assert_eq!(deep["selected"], FACT);
    let p = pairs(&deep["hash"]);
    assert_eq!(pair(&p, "view"), Some("source"));
    assert_eq!(pair(&p, "fn"), Some(FACT));
    assert_eq!(pair(&p, "event"), deep["event"].as_str());

    // The heat table: a column per event, the numbers of annotate's
    // source lines, heat on the lines with a cost.
    let heads: Vec<&str> = deep["heads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    let names: Vec<&str> = events.iter().map(|e| e.as_str().unwrap()).collect();
    assert_eq!(heads[0], "line");
    assert_eq!(&heads[1..=names.len()], names.as_slice(), "{heads:?}");
    let ann = annotate_json(profile, &["--auto=yes"]);
    let file = ann["source"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("explore.cpp"))
        .expect("explore.cpp annotated");
    let mut compared = 0;
    for l in deep["lines"].as_array().unwrap() {
        let n = l["line"].as_u64().unwrap();
        let cells = l["cells"].as_array().unwrap();
        let want = file["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["line"] == n);
        match want {
            Some(w) => {
                for (k, e) in names.iter().enumerate() {
                    let shown = number(cells[k + 1].as_str().unwrap());
                    assert_eq!(shown, w["self"][e].as_f64().unwrap(), "line {n} {e}");
                }
                if w["self"][names[0]].as_f64().unwrap() > 0.0 {
                    assert!(!l["heat"].as_str().unwrap().is_empty(), "line {n}: no heat");
                }
                compared += 1;
            }
            None => assert!(l["heat"].as_str().unwrap().is_empty(), "line {n}"),
        }
    }
    assert!(compared >= 1, "no line with a cost in {deep}");
    // A call row under `fact`'s line links to its callee.
    let calls = deep["calls"].as_array().unwrap();
    assert!(
        calls.iter().any(|c| c["callee"] == LONG),
        "no call row to {LONG}: {calls:?}"
    );

    // Following the call, then back and forward.
    assert_eq!(page["followed"]["selected"], LONG, "{}", page["followed"]);
    assert_eq!(pair(&pairs(&page["followed"]["hash"]), "fn"), Some(LONG));
    assert_eq!(page["back"]["selected"], FACT);
    assert_eq!(pair(&pairs(&page["back"]["hash"]), "fn"), Some(FACT));
    assert_eq!(page["forward"]["selected"], LONG);
    assert_eq!(pair(&pairs(&page["callers_hash"]), "view"), Some("callers"));

    // No number clipped; the long name cut, with its title.
    for c in page["clipping"].as_array().unwrap() {
        assert!(c["numbers"].as_u64().unwrap() > 20, "{c}");
        assert_eq!(c["table"], serde_json::json!([]), "{c}");
        assert_eq!(c["butterfly"], serde_json::json!([]), "{c}");
        assert_eq!(c["names_without_title"], 0, "{c}");
    }
    let small = &page["clipping"][1];
    assert!(small["names_cut"].as_u64().unwrap() >= 1, "{small}");

    // Assembly: one row per instruction of `fact`, the jumps within it
    // drawn, as annotate --asm lists them.
    let asm = &page["asm"];
    assert_eq!(asm["clipped"], 0);
    let ann = annotate_json(profile, &["--auto=no", "--asm"]);
    let f = ann["asm"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == FACT)
        .expect("fact disassembled");
    let ins = f["instructions"].as_array().unwrap();
    let rows = asm["rows"].as_array().unwrap();
    let shown: Vec<u64> = rows
        .iter()
        .map(|r| r["address"].as_u64().unwrap())
        .collect();
    let want: Vec<u64> = ins.iter().map(|i| i["address"].as_u64().unwrap()).collect();
    assert_eq!(shown, want);
    let at: BTreeSet<u64> = want.iter().copied().collect();
    let want_arrows: BTreeSet<(u64, u64)> = ins
        .iter()
        .flat_map(|i| {
            let from = i["address"].as_u64().unwrap();
            i["jumps"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|j| j["target_function"] == FACT)
                .map(move |j| (from, j["target"].as_u64().unwrap()))
        })
        .filter(|(from, to)| at.contains(to) && from != to)
        .collect();
    let arrows: BTreeSet<(u64, u64)> = asm["arrows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a[0].as_u64().unwrap(), a[1].as_u64().unwrap()))
        .collect();
    assert!(!want_arrows.is_empty(), "fact has no jump: {f}");
    assert_eq!(arrows, want_arrows);

    // Search: the table's rows and the flame graph's marked frames are the
    // functions matching it.
    let s = &page["search"];
    assert_eq!(pair(&pairs(&s["hash"]), "search"), Some("accumulate"));
    let rows = s["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r.as_str().unwrap().contains("accumulate"))
    );
    assert!(
        s["marks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m == "accumulate")
    );
    let frames = s["frames"].as_array().unwrap();
    let matching = frames
        .iter()
        .filter(|t| t.as_str().unwrap().contains("accumulate"))
        .count();
    assert!(matching > 0);
    assert_eq!(s["hits"].as_u64().unwrap() as usize, matching);
    assert!(
        s["hit_titles"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.as_str().unwrap().contains("accumulate"))
    );
    assert_eq!(page["reopened_search"], "accumulate");
}

#[test]
fn explore_in_the_browser() {
    if !browser::require_driver(&["g++", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let (_, prof) = profile(dir.path());
    let mut command = tally!().command();
    command.arg("serve").arg(&prof).stderr(Stdio::inherit());
    let server = Server::start(command);
    let (_, meta) = server.get("meta");
    let meta: Value = serde_json::from_str(&meta).unwrap();
    let events = meta["events"].as_array().unwrap().clone();
    assert!(events.len() > 1, "{meta}");
    let page = explore(&server.url, "serve", FACT, "accumulate");
    check(&page, &prof, &events);
    drop(server);

    // The report, from disk: the same views.
    let html = dir.path().join("report.html");
    tally!().ok(&[
        "report",
        prof.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let page = explore(
        &format!("file://{}", html.display()),
        "report",
        FACT,
        "accumulate",
    );
    check(&page, &prof, &events);
}

/// The source window of a function starts at its own body, not at the
/// helper of the same file inlined into it from far above; its numbers are
/// annotate's.
#[test]
fn source_window_shows_the_function_body() {
    if !tally_testutil::require(&["g++", "valgrind"]) {
        return;
    }
    let dir = temp_dir();
    let (src, prof) = profile(dir.path());
    let text = std::fs::read_to_string(&src).unwrap();
    let line_of = |needle: &str| {
        text.lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
            .unwrap()
    };
    let helper = line_of("void helper(int n)");
    let body = line_of("// the body");
    assert!(body > helper + 50);
    let mut command = tally!().command();
    command.arg("serve").arg(&prof).stderr(Stdio::inherit());
    let server = Server::start(command);
    server.get("ready");
    let (_, t) = server.get("functions?filter=accumulate&limit=1");
    let t: Value = serde_json::from_str(&t).unwrap();
    let node = t["rows"][0]["node"].as_u64().unwrap();
    let (status, lines) = server.get(&format!("lines?node={node}"));
    assert_eq!(status, 200, "{lines}");
    let lines: Value = serde_json::from_str(&lines).unwrap();
    let first = lines["first"].as_u64().unwrap();
    assert!(first > helper && first <= body, "window from line {first}");
    let rows = lines["rows"].as_array().unwrap();
    let shown: Vec<u64> = rows.iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert!(
        shown.contains(&body) && !shown.contains(&helper),
        "{shown:?}"
    );
    // The helper's line is there with the whole file.
    let (_, whole) = server.get(&format!("lines?node={node}&whole=1"));
    let whole: Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(
        whole["rows"].as_array().unwrap().len(),
        text.lines().count()
    );
    // The body's line costs what annotate says, in every event.
    let ann = annotate_json(&prof, &["--auto=yes"]);
    let file = ann["source"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["file"].as_str().unwrap().ends_with("explore.cpp"))
        .unwrap();
    let want = file["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["line"] == body)
        .unwrap();
    let row = rows.iter().find(|r| r["line"] == body).unwrap();
    for (k, e) in lines["events"].as_array().unwrap().iter().enumerate() {
        let e = e.as_str().unwrap();
        if let Some(w) = want["self"][e].as_f64() {
            assert_eq!(row["costs"][k].as_f64(), Some(w), "{e}");
        }
    }
}
