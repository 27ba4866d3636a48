//! The context menu of the flame graph and the call graph, and the
//! assembly view's control-flow graph, in Debian's chromium
//! (`tests/web/cfg.mjs`) over Callgrind profiles of a C program compiled
//! here: focus from a flame frame and hide from a graph node give the
//! functions `tally annotate` keeps with the same flags; the blocks and
//! the loop's back edge are those Callgrind's `jump=`/`jcnd=` lines and
//! the program's disassembly give; a profile without jumps says so.
//! Screenshots go to `target/test-artefacts/web-cfg/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tally_testutil::serve::Server;
use tally_testutil::{browser, tally, temp_dir};

/// Iterations of the loop in `classify`.
const LOOPS: u64 = 1000;

/// `classify` has a loop with an if in it; `work` calls it, `idle` does
/// not: focusing on `classify` keeps `work` and drops `idle`.
fn program() -> String {
    format!(
        r#"volatile long odd, even, other;
__attribute__((noinline)) void spin(int n) {{ for (int i = 0; i < n; i++) other += i; }}
__attribute__((noinline)) void classify(int n) {{
  for (int i = 0; i < n; i++) {{
    if (i % 3 == 0) even += i;
    else odd += i;
  }}
}}
__attribute__((noinline)) void work(int n) {{ classify(n); spin(n); }}
__attribute__((noinline)) void idle(int n) {{ spin(n / 2); }}
int main(void) {{ work({LOOPS}); idle(4000); return 0; }}
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

/// The program, and its Callgrind profile (`jumps`: with
/// `--collect-jumps=yes`), positions and names written out in full so
/// that this test reads the jump lines itself.
fn profile(dir: &Path, exe: &Path, name: &str, jumps: bool) -> PathBuf {
    let out = dir.join(name);
    let mut c = Command::new("valgrind");
    c.args([
        "--tool=callgrind",
        "--dump-instr=yes",
        "--compress-pos=no",
        "--compress-strings=no",
    ]);
    if jumps {
        c.arg("--collect-jumps=yes");
    }
    run(c
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe));
    out
}

/// One `jump=` or `jcnd=` record: source, target, conditional, executed,
/// taken.
type Record = (u64, u64, bool, u64, u64);

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or_else(|_| panic!("{s}"))
}

/// Callgrind's jump records in `function`: each `jump=COUNT TARGET LINE`
/// or `jcnd=TAKEN/EXECUTED TARGET LINE` line, and the source position on
/// the line after it.
fn records(profile: &Path, function: &str) -> Vec<Record> {
    let text = std::fs::read_to_string(profile).unwrap();
    let mut inside = false;
    let mut pending: Option<(u64, bool, u64, u64)> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("fn=") {
            inside = f == function;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((target, conditional, executed, taken)) = pending.take() {
            let source = hex(line.split_whitespace().next().unwrap());
            out.push((source, target, conditional, executed, taken));
            continue;
        }
        let (conditional, rest) = match (line.strip_prefix("jump="), line.strip_prefix("jcnd=")) {
            (Some(r), _) => (false, r),
            (_, Some(r)) => (true, r),
            _ => continue,
        };
        let mut w = rest.split_whitespace();
        let counts = w.next().unwrap();
        let target = hex(w.next().unwrap());
        // Valgrind writes `jcnd=FOLLOWED/EXECUTED` (docs/formats.md).
        let (executed, taken) = match counts.split_once('/') {
            Some((t, e)) => (e.parse().unwrap(), t.parse().unwrap()),
            None => (counts.parse().unwrap(), counts.parse().unwrap()),
        };
        pending = Some((target, conditional, executed, taken));
    }
    out
}

/// The function's instructions (address, mnemonic) as objdump lists them
/// within its symbol (`nm -S`).
fn instructions(exe: &Path, function: &str) -> Vec<(u64, String)> {
    let nm = run(Command::new("nm").args(["-S", "--defined-only"]).arg(exe));
    let (start, size) = nm
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 4 && w[3] == function).then(|| (hex(w[0]), hex(w[1])))
        })
        .unwrap_or_else(|| panic!("no symbol {function}: {nm}"));
    let dump = run(Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(format!("--start-address={start:#x}"))
        .arg(format!("--stop-address={:#x}", start + size))
        .arg(exe));
    dump.lines()
        .filter_map(|l| {
            let (addr, ins) = l.trim_start().split_once(":\t")?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            let mnemonic = ins
                .split_whitespace()
                .find(|w| !["bnd", "notrack", "rep"].contains(w))?;
            Some((addr, mnemonic.to_owned()))
        })
        .collect()
}

/// The first address of every basic block: the function's first
/// instruction, every jump target in it, and the instruction after every
/// jump (a record's source, or a jump or return by its mnemonic).
fn block_starts(ins: &[(u64, String)], recs: &[Record]) -> BTreeSet<u64> {
    let addrs: BTreeSet<u64> = ins.iter().map(|i| i.0).collect();
    let mut starts: BTreeSet<u64> = ins.first().map(|i| i.0).into_iter().collect();
    let after = |a: u64| addrs.range(a + 1..).next().copied();
    for r in recs {
        starts.extend(addrs.get(&r.1));
        starts.extend(after(r.0));
    }
    for (a, m) in ins {
        if m.starts_with('j') || m.starts_with("ret") {
            starts.extend(after(*a));
        }
    }
    starts
}

/// `tally annotate --json --inclusive=yes` with `flags`: the functions it
/// lists.
fn annotate_functions(profile: &Path, flags: &[&str]) -> BTreeSet<String> {
    let mut args = vec!["annotate", "--json", "--inclusive=yes", "--threshold=100"];
    args.extend_from_slice(flags);
    args.push(profile.to_str().unwrap());
    let v: Value = serde_json::from_slice(&tally!().ok(&args).stdout).unwrap();
    v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap().to_owned())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

fn serve(dir: &Path, profile: &Path) -> Server {
    let mut command = tally!().command();
    command
        .current_dir(dir)
        .arg("serve")
        .arg(profile)
        .stderr(Stdio::inherit());
    Server::start(command)
}

#[test]
fn menus_on_flame_and_graph_and_the_control_flow_graph() {
    if !browser::require_driver(&["valgrind", "gcc", "objdump", "nm", "dot"]) {
        return;
    }
    let dir = temp_dir();
    let src = dir.path().join("cfg.c");
    std::fs::write(&src, program()).unwrap();
    let exe = dir.path().join("cfg");
    run(Command::new("gcc")
        .args(["-O0", "-g", "-o"])
        .arg(&exe)
        .arg(&src));
    let with_jumps = profile(dir.path(), &exe, "cfg.callgrind", true);

    let server = serve(dir.path(), &with_jumps);
    let shots = browser::artefacts("web-cfg");
    let o = Command::new("node")
        .current_dir(browser::driver_dir())
        .arg("cfg.mjs")
        .args([
            &server.url,
            shots.to_str().unwrap(),
            "classify",
            "work",
            "classify",
        ])
        .output()
        .expect("node runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("the driver's JSON");
    assert!(v.get("failure").is_none(), "{}", v["failure"]);
    assert_eq!(v["errors"], serde_json::json!([]), "page errors");

    // The menu of a flame frame and of a graph node: select and every
    // transform, for the function under the pointer.
    for (menu, name) in [("flame_menu", "classify"), ("graph_menu", "work")] {
        let items = strings(&v[menu]);
        for want in ["select", "focus", "focus-subtree", "ignore", "hide", "show"] {
            assert!(items.iter().any(|i| i == want), "{menu}: {items:?}");
        }
        assert_eq!(v[format!("{menu}_fn")], name);
    }

    // Focus from the flame graph: the functions of the stacks through
    // `classify` only, as annotate keeps them, and a breadcrumb.
    let focused: BTreeSet<String> = strings(&v["focused"]).into_iter().collect();
    let cli = annotate_functions(&with_jumps, &["--focus=^classify$"]);
    assert!(focused.is_subset(&cli), "{focused:?} ⊄ {cli:?}");
    for f in ["classify", "work", "main"] {
        assert!(focused.contains(f), "{focused:?}");
    }
    let complete: BTreeSet<String> = strings(&v["complete"]).into_iter().collect();
    assert!(complete.contains("spin") && !focused.contains("spin"));
    assert_eq!(strings(&v["focused_crumbs"]), ["› focus ^classify$"]);
    assert!(
        v["focused_hash"]
            .as_str()
            .unwrap()
            .contains("focus=^classify$")
    );

    // Hide from the call graph: `work` merged into its callers everywhere.
    let hidden: BTreeSet<String> = strings(&v["hidden"]).into_iter().collect();
    let cli = annotate_functions(&with_jumps, &["--focus=^classify$", "--hide=^work$"]);
    assert!(hidden.is_subset(&cli), "{hidden:?} ⊄ {cli:?}");
    assert!(!hidden.contains("work") && hidden.contains("classify"));
    assert!(!strings(&v["hidden_graph"]).iter().any(|t| t == "work"));
    assert_eq!(strings(&v["hidden_crumbs"]).len(), 2);
    let h = v["hidden_hash"].as_str().unwrap();
    assert!(
        h.find("focus=").unwrap() < h.find("hide=^work$").unwrap(),
        "{h}"
    );

    // The control-flow graph: the blocks the records and the code give.
    let ins = instructions(&exe, "classify");
    let recs = records(&with_jumps, "classify");
    assert!(!recs.is_empty(), "no jump records of classify");
    let want = block_starts(&ins, &recs);
    let blocks = v["blocks"].as_array().unwrap();
    let got: BTreeSet<u64> = blocks
        .iter()
        .map(|b| b["start"].as_u64().unwrap())
        .collect();
    assert_eq!(blocks.len(), want.len(), "{}", v["blocks"]);
    assert_eq!(got, want);
    // The loop's back edge: every backward record summed, one edge, the
    // program's iterations taken, once more executed.
    let back: Vec<&Record> = recs.iter().filter(|r| r.1 <= r.0).collect();
    let taken: u64 = back.iter().map(|r| r.4).sum();
    let executed: u64 = back.iter().map(|r| r.3).sum();
    assert_eq!((taken, executed), (LOOPS, LOOPS + 1), "{back:?}");
    let index = |b: &str| -> usize { b.trim().trim_start_matches('b').parse().unwrap() };
    let back_edges: Vec<&Value> = v["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            let (from, to) = e["title"].as_str().unwrap().split_once("->").unwrap();
            index(to) <= index(from)
        })
        .collect();
    assert_eq!(back_edges.len(), 1, "{}", v["edges"]);
    assert_eq!(back_edges[0]["text"], "1,000 of 1,001");
    // A click on the loop's first block marks its instructions, in view.
    let target = back[0].1;
    let next = want.range(target + 1..).next().copied().unwrap_or(u64::MAX);
    let expected: Vec<u64> = ins
        .iter()
        .map(|i| i.0)
        .filter(|&a| a >= target && a < next)
        .collect();
    let marked: Vec<u64> = v["marked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_u64().unwrap())
        .collect();
    assert_eq!(marked, expected);
    assert_eq!(v["marked_in_view"], true);

    // Without --collect-jumps=yes: a line saying so, no graph.
    let plain = profile(dir.path(), &exe, "plain.callgrind", false);
    let server = serve(dir.path(), &plain);
    let (status, body) = server.get("functions?filter=%5Eclassify%24");
    assert_eq!(status, 200, "{body}");
    let t: Value = serde_json::from_str(&body).unwrap();
    let node = t["rows"][0]["node"].as_u64().unwrap();
    let (status, body) = server.get(&format!("cfg?node={node}"));
    assert_eq!(status, 200, "{body}");
    let c: Value = serde_json::from_str(&body).unwrap();
    assert!(
        c["note"].as_str().unwrap().contains("--collect-jumps=yes"),
        "{c}"
    );
    assert_eq!(c["svg"], Value::Null);
    assert_eq!(c["blocks"], serde_json::json!([]));
}
