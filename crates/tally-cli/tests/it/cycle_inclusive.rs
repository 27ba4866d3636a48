//! Every function keeps an inclusive number: on a Callgrind profile of an
//! interpreter compiled here (a dispatch loop that recurses through call
//! helpers and a library callback, as Lua's `luaV_execute` does), the
//! loop is a member of a cycle, and `tally annotate` (text and JSON),
//! `tally gate`, the Parquet export and the web UI's JSON API all give it
//! the same derived inclusive cost, marked as derived, above 80 % of the
//! program and at least what callgrind_annotate measures of its entries;
//! the estimated flame graph's widest frame of it is within 10 points.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use tally_testutil::serve::Server;
use tally_testutil::{require, require_python, tally, temp_dir};

/// A bytecode interpreter: `execute` runs a function's code; its `CALL`
/// goes through `call` and `precall` back into `execute` (a Lua function)
/// or into a library function, `lib_sort`, that calls back into Lua for
/// each comparison through `call`. `hash` and `alloc` are leaves outside
/// the cycle. `main` enters it through `pcall`.
const PROGRAM: &str = r#"
#include <stdlib.h>
volatile unsigned long sink;
enum { OP_ADD, OP_HASH, OP_ALLOC, OP_CALL, OP_SORT, OP_RET };
typedef struct { const int *code; } Proto;
static const int leaf_code[] = { OP_ADD, OP_HASH, OP_ADD, OP_RET };
static const int cmp_code[] = { OP_ADD, OP_ADD, OP_HASH, OP_RET };
static const int mid_code[] = { OP_HASH, OP_CALL, OP_ALLOC, OP_CALL, OP_ADD, OP_RET };
static const int main_code[] = { OP_CALL, OP_SORT, OP_HASH, OP_CALL, OP_ALLOC, OP_RET };
static const Proto leaf = { leaf_code }, cmp = { cmp_code }, mid = { mid_code }, top = { main_code };
int call(const Proto *p, int depth);
__attribute__((noinline)) unsigned long hash(int n) {
    unsigned long h = 5381;
    for (int i = 0; i < 40 + n % 7; i++) h = h * 33 + (unsigned long)i;
    return h;
}
__attribute__((noinline)) void *alloc(int n) { void *p = malloc(16 + n % 32); sink += (unsigned long)p & 7; return p; }
__attribute__((noinline)) int lib_sort(int depth) {
    int v[12];
    for (int i = 0; i < 12; i++) v[i] = (i * 7) % 12;
    for (int i = 1; i < 12; i++)
        for (int j = i; j > 0 && call(&cmp, depth + 1) + v[j - 1] > v[j]; j--) {
            int t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    return v[0];
}
__attribute__((noinline)) int execute(const Proto *p, int depth) {
    int acc = 0;
    for (const int *pc = p->code;; pc++) {
        switch (*pc) {
        case OP_ADD: for (int i = 0; i < 30; i++) acc += i ^ depth; break;
        case OP_HASH: acc += (int)hash(acc); break;
        case OP_ALLOC: free(alloc(acc)); break;
        case OP_CALL: acc += call(depth < 3 ? &mid : &leaf, depth + 1); break;
        case OP_SORT: acc += lib_sort(depth); break;
        case OP_RET: return acc;
        }
    }
}
__attribute__((noinline)) int precall(const Proto *p, int depth) { sink++; return execute(p, depth); }
__attribute__((noinline)) int call(const Proto *p, int depth) { return precall(p, depth); }
__attribute__((noinline)) int pcall(const Proto *p) { return call(p, 0); }
int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    for (int r = 0; r < rounds; r++) sink += pcall(&top);
    return 0;
}
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

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The interpreter compiled (`-O2 -g`) and run under Callgrind. With
/// recursion levels apart (Callgrind's default `--separate-recs=2`) only
/// `execute'2` and the other deeper levels would recurse; one level makes
/// `execute` itself a member, as `luaV_execute` is in a default run of Lua
/// (which recurses through `longjmp`-protected calls).
fn profile(dir: &Path) -> PathBuf {
    let src = dir.join("interp.c");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("interp");
    run(Command::new("gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src));
    let out = dir.join("interp.callgrind");
    run(Command::new("valgrind")
        .args(["--tool=callgrind", "--separate-recs=1"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&exe));
    out
}

fn ok(args: &[&str]) -> String {
    tally_testutil::text(&tally!().ok(args).stdout)
}

fn percent(v: f64, total: f64) -> f64 {
    100.0 * v / total
}

/// The row of `function` in annotate's JSON table `table`.
fn row<'a>(j: &'a Value, table: &str, function: &str) -> &'a Value {
    j[table]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["function"] == function)
        .unwrap_or_else(|| panic!("{function} not in {table}"))
}

/// The widest frame of `function` in folded stacks: the largest sum of
/// the stacks through one node (a stack prefix ending in it).
fn widest_frame(folded: &str, function: &str) -> u64 {
    let mut nodes: HashMap<&str, u64> = HashMap::new();
    for line in folded.lines() {
        let (stack, v) = line.rsplit_once(' ').unwrap();
        let v: u64 = v.parse().unwrap();
        let mut end = 0;
        for frame in stack.split(';') {
            end += frame.len();
            if frame == function {
                *nodes.entry(&stack[..end]).or_default() += v;
            }
            end += 1;
        }
    }
    nodes.values().copied().max().unwrap_or(0)
}

/// callgrind_annotate's inclusive cost of `function`: for a function
/// in a cycle, its own cost plus its calls, nested ones included.
fn reference_inclusive(file: &Path, function: &str) -> Option<u64> {
    let out = run(Command::new("callgrind_annotate").args([
        "--inclusive=yes",
        "--threshold=100",
        s(file),
    ]));
    let name = format!(":{function} [");
    out.lines()
        .find(|l| l.contains(&name))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.replace(',', "").parse().ok())
}

#[test]
fn an_interpreter_loop_in_a_cycle_has_one_derived_inclusive_cost_everywhere() {
    if !require(&["gcc", "valgrind", "callgrind_annotate"]) {
        return;
    }
    let tmp = temp_dir();
    let dir = tmp.path();
    let file = profile(dir);

    // annotate --json: `execute` is a member of a cycle, with a derived
    // inclusive cost above 80 % and at most the total.
    let j: Value = serde_json::from_str(&ok(&[
        "annotate",
        "--inclusive=yes",
        "--json",
        "--threshold=100",
        s(&file),
    ]))
    .unwrap();
    let total = j["totals"]["Ir"].as_f64().unwrap();
    let exec = row(&j, "functions", "execute");
    assert!(exec["cycle"].is_u64(), "{exec}");
    assert_eq!(exec["inclusive_derived"], true, "{exec}");
    let incl = exec["inclusive"]["Ir"].as_f64().unwrap();
    let share = percent(incl, total);
    assert!(share > 80.0 && incl <= total, "execute: {share:.2} %");
    // The same in the function:file table.
    let by_name = row(&j, "functions_by_name", "execute");
    assert_eq!(by_name["inclusive"]["Ir"].as_f64(), Some(incl));
    assert_eq!(by_name["inclusive_derived"], true);
    // A function outside the cycle is exact: no such field.
    let hash = row(&j, "functions", "hash");
    assert!(hash["cycle"].is_null() && hash.get("inclusive_derived").is_none());
    // The cycle's own row stays, and bounds its members.
    let cycle = j["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["number"] == exec["cycle"])
        .unwrap();
    assert!(incl <= cycle["inclusive"]["Ir"].as_f64().unwrap());
    // callgrind_annotate counts nested calls again (above the total
    // here); it measures at least the outermost activations, as ours.
    let reference = reference_inclusive(&file, "execute").expect("execute in callgrind_annotate");
    assert!(
        reference as f64 >= incl,
        "callgrind_annotate {reference} < ours {incl}"
    );

    // annotate's text: the number, marked, and the legend; no bare `-`.
    let text = ok(&["annotate", "--inclusive=yes", "--threshold=100", s(&file)]);
    let line = text
        .lines()
        .find(|l| l.contains(":execute <cycle"))
        .expect("execute's row");
    assert!(line.trim_start().starts_with('~'), "{line}");
    let shown: f64 = line.trim_start()[1..]
        .split_whitespace()
        .next()
        .unwrap()
        .replace(',', "")
        .parse()
        .unwrap();
    assert_eq!(shown, incl, "{line}");
    assert!(text.contains("\n~ derived: "), "no legend");

    // gate: the inclusive cost it budgets is the same, marked derived.
    let g: Value = serde_json::from_str(&ok(&[
        "gate",
        "--base",
        s(&file),
        "--new",
        s(&file),
        "--format",
        "json",
        "--min-cost",
        "0",
    ]))
    .unwrap();
    let f = g["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["function"] == "execute")
        .unwrap_or_else(|| panic!("execute not judged: {g}"));
    assert_eq!(f["inclusive"]["new"].as_f64(), Some(incl), "{f}");
    assert_eq!(f["inclusive_derived"], true, "{f}");

    // The estimated stacks: the widest frame of `execute` within 10
    // points of its inclusive cost (names as the flame graph draws them).
    let folded_path = dir.join("interp.folded");
    ok(&["convert", s(&file), "--to", "folded", "-o", s(&folded_path)]);
    let folded = std::fs::read_to_string(&folded_path).unwrap();
    let widest = percent(widest_frame(&folded, "execute") as f64, total);
    assert!(
        share - widest <= 10.0,
        "widest frame {widest:.2} %, inclusive {share:.2} %"
    );

    // The web UI's table.
    let mut command = tally!().command();
    command.arg("serve").arg(&file).stderr(Stdio::inherit());
    let server = Server::start(command);
    let (status, body) = server.get("ready");
    assert_eq!(status, 200, "{body}");
    let (status, body) = server.get("functions?filter=%5Eexecute%24");
    assert_eq!(status, 200, "{body}");
    let t: Value = serde_json::from_str(&body).unwrap();
    let r = &t["rows"][0];
    assert_eq!(r["inclusive"].as_f64(), Some(incl), "{r}");
    assert_eq!(r["inclusive_derived"], true, "{r}");
    drop(server);

    // Parquet: the same number, marked derived.
    if require_python(&["pyarrow"]) {
        let out = dir.join("parquet");
        ok(&["export", s(&file), "--to", "parquet", "-o", s(&out)]);
        let o = run(Command::new("python3").args([
            "-c",
            "import sys, pyarrow.parquet as pq\n\
             for r in pq.read_table(sys.argv[1] + '/functions.parquet').to_pylist():\n\
             \x20   if r['function'] == 'execute' and r['event'] == 'Ir':\n\
             \x20       print(r['inclusive'], r['inclusive_derived'])",
            s(&out),
        ]));
        assert_eq!(o.trim(), format!("{} True", incl as u64));
    }
}
