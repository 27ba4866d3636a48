//! `tally gate` on real runs: a C program compiled here four times (the
//! base, an unchanged rebuild, a change under budget, and a slowdown of
//! one function, each by a `-D` flag), each run under Callgrind and
//! Cachegrind. The gate must fail on the slowdown only, naming that
//! function, and its JUnit XML and Markdown must parse. A second program
//! seeds its hash table at random, as Lua, Perl and Python do: two runs of
//! it must pass by default, and a function of it doing 30 % more work must
//! still fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use tally_testutil::{path_str as s, text};

/// `compute` is a few percent of the program: 1600 more iterations are
/// +20 % of its cost but under 1 % of the total, so only its own
/// budget (5 %) catches it; 100 more are about +1.3 %, under every budget.
const PROGRAM: &str = r#"
#include <stdio.h>

#ifndef EXTRA
#define EXTRA 0
#endif

static volatile long sink;

__attribute__((noinline)) long bulk(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += (i * 2654435761u) >> 7;
    return s;
}

__attribute__((noinline)) long compute(long n) {
    long s = 0;
    for (long i = 0; i < n + EXTRA; i++)
        s += i % 7;
    return s;
}

__attribute__((noinline)) long fib(int n) {
    return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

int main(void) {
    long t = bulk(400000) + compute(8000) + fib(18);
    sink = t;
    printf("%ld\n", t);
    return 0;
}
"#;

/// The builds: folder (all names of one length, so that the dynamic
/// loader's work on the program's path does not change) and `EXTRA`.
const BUILDS: [(&str, u32); 4] = [("base", 0), ("same", 0), ("tiny", 100), ("slow", 1600)];

/// The folder holding `BUILD/callgrind.out` and `BUILD/cachegrind.out`
/// for every build; `None` when gcc or Valgrind is missing (locally).
fn runs() -> Option<&'static Path> {
    static RUNS: OnceLock<Option<PathBuf>> = OnceLock::new();
    RUNS.get_or_init(|| {
        if !tally_testutil::require(&["gcc", "valgrind"]) {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gate");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("work.c"), PROGRAM).unwrap();
        for (build, extra) in BUILDS {
            let b = dir.join(build);
            std::fs::create_dir_all(&b).unwrap();
            run(Command::new("gcc")
                .current_dir(&dir)
                .args(["-O1", "-g", &format!("-DEXTRA={extra}"), "-o"])
                .arg(format!("{build}/prog"))
                .arg("work.c"));
            for (tool, out) in [
                ("callgrind", "--callgrind-out-file=callgrind.out"),
                ("cachegrind", "--cachegrind-out-file=cachegrind.out"),
            ] {
                run(Command::new("valgrind")
                    .current_dir(&b)
                    .env("LC_ALL", "C")
                    .args([&format!("--tool={tool}"), out, "./prog"]));
            }
        }
        Some(dir)
    })
    .as_deref()
}

fn run(c: &mut Command) -> Output {
    let o = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(o.status.success(), "{c:?}: {}", text(&o.stderr));
    o
}

fn profile(dir: &Path, build: &str, tool: &str) -> String {
    s(&dir.join(build).join(format!("{tool}.out"))).to_string()
}

fn gate(args: &[&str]) -> Output {
    let mut all = vec!["gate"];
    all.extend_from_slice(args);
    tally_testutil::tally!().run(&all)
}

fn status(o: &Output) -> i32 {
    let code = o.status.code().expect("exit status");
    assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
    code
}

#[test]
fn a_slowdown_of_one_function_fails_and_names_it() {
    let Some(dir) = runs() else { return };
    for tool in ["callgrind", "cachegrind"] {
        let (base, slow) = (profile(dir, "base", tool), profile(dir, "slow", tool));
        let o = gate(&[&base, &slow]);
        let out = text(&o.stdout);
        assert_eq!(status(&o), 1, "{tool}: {out}{}", text(&o.stderr));
        assert!(out.contains("\ncompute ("), "{tool}: {out}");
        assert!(
            out.contains("FAIL: 1 function over budget"),
            "{tool}: {out}"
        );
        // The total rose by less than its budget; nothing else is over.
        let v = json(&[&base, &slow]);
        assert_eq!(v["passed"], false);
        assert_eq!(v["total"]["over"], false, "{tool}");
        let over: Vec<&str> = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["over"] == true)
            .map(|f| f["function"].as_str().unwrap())
            .collect();
        assert_eq!(over, ["compute"], "{tool}");
        let compute = &v["functions"][0];
        let delta = compute["self"]["delta"].as_i64().unwrap();
        // 1600 more iterations of a loop of several instructions each.
        assert!((1600 * 3..1600 * 20).contains(&delta), "{tool}: {delta}");
        assert_eq!(compute["self"]["over"], true);
        // compute calls nothing: its inclusive cost is its self cost.
        assert_eq!(compute["inclusive"]["delta"].as_i64(), Some(delta));
    }
}

#[test]
fn an_unchanged_rebuild_and_a_small_change_pass() {
    let Some(dir) = runs() else { return };
    for tool in ["callgrind", "cachegrind"] {
        let base = profile(dir, "base", tool);
        for build in ["same", "tiny"] {
            let o = gate(&[&base, &profile(dir, build, tool)]);
            let out = text(&o.stdout);
            assert_eq!(status(&o), 0, "{tool} {build}: {out}");
            assert!(out.contains("PASS: within budget"), "{out}");
        }
        let v = json(&[&base, &profile(dir, "same", tool)]);
        assert_eq!(v["total"]["delta"], 0, "{tool}: {v}");
        assert_eq!(v["passed"], true);
        // The small change is judged and seen, within budget.
        let v = json(&[&base, &profile(dir, "tiny", tool)]);
        let compute = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == "compute")
            .expect("compute judged");
        let p = compute["self"]["percent"].as_f64().unwrap();
        assert!(p > 0.5 && p < 5.0, "{tool}: {p}");
    }
}

#[test]
fn inclusive_costs_count_recursion_once() {
    let Some(dir) = runs() else { return };
    let base = profile(dir, "base", "callgrind");
    let v = json(&[&base, &base]);
    let f = |name: &str| {
        v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name)
            .unwrap_or_else(|| panic!("{name} judged: {v}"))
            .clone()
    };
    let total = v["total"]["base"].as_i64().unwrap();
    let incl = |name: &str| f(name)["inclusive"]["base"].as_i64().unwrap();
    let main = incl("main");
    let parts: i64 = ["bulk", "compute", "fib"].iter().map(|n| incl(n)).sum();
    assert!(main <= total && main >= parts, "{main} {parts} {total}");
    // Callgrind splits the recursion into `fib` (the first level) and
    // `fib'2` (the deeper ones, calling themselves). fib'2's inclusive
    // cost is what fib's calls into it cost, counted once, not the sum
    // of every nested call's cost.
    let fib_self = f("fib")["self"]["base"].as_i64().unwrap();
    assert_eq!(incl("fib'2"), incl("fib") - fib_self);
    assert!(incl("fib'2") > 100_000);
}

/// A hash table seeded at random (from the time and the process id, or
/// from the argument): how often `lookup` walks a chain and calls
/// `strcmp` depends on the seed, by tens of percent of their own cost,
/// as Lua's string lookups vary from run to run. Together they stay well
/// under 0.5 % of the program. `work` (4 % of the program) does `EXTRA`
/// percent more iterations.
const NOISY: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef EXTRA
#define EXTRA 0
#endif
#define BUCKETS 64
#define KEYS 64

struct entry { char key[8]; long value; struct entry *next; };
static struct entry entries[KEYS];
static struct entry *table[BUCKETS];
static unsigned seed;
static volatile long sink;

__attribute__((noinline)) unsigned hash(const char *s) {
    unsigned h = seed;
    for (; *s; s++)
        h ^= (h << 5) + (h >> 2) + (unsigned char)*s;
    return h;
}

__attribute__((noinline)) long lookup(const char *key) {
    for (struct entry *e = table[hash(key) % BUCKETS]; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e->value;
    return -1;
}

__attribute__((noinline)) long work(long n) {
    long s = 0;
    for (long i = 0; i < n + n * EXTRA / 100; i++)
        s += (i * 2654435761u) >> 7;
    return s;
}

__attribute__((noinline)) long bulk(long n) {
    long s = 0;
    for (long i = 0; i < n; i++)
        s += i % 7;
    return s;
}

int main(int argc, char **argv) {
    srand(argc > 1 ? (unsigned)atoi(argv[1]) : (unsigned)time(NULL) ^ (unsigned)getpid());
    seed = (unsigned)rand();
    for (int i = 0; i < KEYS; i++) {
        snprintf(entries[i].key, sizeof entries[i].key, "k%d", i);
        entries[i].value = i;
        unsigned b = hash(entries[i].key) % BUCKETS;
        entries[i].next = table[b];
        table[b] = &entries[i];
    }
    long s = 0;
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < KEYS; i++)
            s += lookup(entries[i].key);
    sink = s + work(60000) + bulk(600000);
    printf("%ld\n", (long)sink);
    return 0;
}
"#;

/// Fixed seeds the noisy program is also run with, so that some pair of
/// runs surely differs.
const SEEDS: [u32; 5] = [1, 2, 3, 4, 5];

/// The folder holding Callgrind profiles of [`NOISY`]: `random1.out` and
/// `random2.out` (seeded from the time and process id), `seedN.out` for
/// each of [`SEEDS`], and `slow.out` (`work` doing 30 % more, seeded at
/// random); `None` when gcc or Valgrind is missing (locally).
fn noisy_runs() -> Option<&'static Path> {
    static RUNS: OnceLock<Option<PathBuf>> = OnceLock::new();
    RUNS.get_or_init(|| {
        if !tally_testutil::require(&["gcc", "valgrind"]) {
            return None;
        }
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gate-noise");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("noisy.c"), NOISY).unwrap();
        // One program name (functions are matched by their object's), in
        // folders named alike, so that the dynamic loader's work on the
        // program's path does not change.
        for (build, extra) in [("base", 0), ("slow", 30)] {
            std::fs::create_dir_all(dir.join(build)).unwrap();
            run(Command::new("gcc").current_dir(&dir).args([
                "-O1",
                "-g",
                &format!("-DEXTRA={extra}"),
                "-o",
                &format!("{build}/noisy"),
                "noisy.c",
            ]));
        }
        let mut runs: Vec<(String, &str, Option<String>)> = vec![
            ("random1".into(), "base/noisy", None),
            ("random2".into(), "base/noisy", None),
            ("slow".into(), "slow/noisy", None),
        ];
        for seed in SEEDS {
            runs.push((format!("seed{seed}"), "base/noisy", Some(seed.to_string())));
        }
        for (name, exe, arg) in runs {
            run(Command::new("valgrind")
                .current_dir(&dir)
                .env("LC_ALL", "C")
                .args([
                    "--tool=callgrind",
                    &format!("--callgrind-out-file={name}.out"),
                    exe,
                ])
                .args(arg));
        }
        Some(dir)
    })
    .as_deref()
}

/// The functions over budget in a JSON verdict.
fn over(v: &serde_json::Value) -> Vec<String> {
    v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["over"] == true)
        .map(|f| f["function"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn repeated_runs_of_a_randomly_seeded_program_pass() {
    let Some(dir) = noisy_runs() else { return };
    let p = |name: &str| s(&dir.join(format!("{name}.out"))).to_string();
    let o = gate(&[&p("random1"), &p("random2")]);
    assert_eq!(status(&o), 0, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("PASS: within budget"));
    // Every pair of seeds passes by default; judged by each function's own
    // budget alone (no floor), the seeds' lookups differ by more than it.
    let mut noisy = Vec::new();
    for (i, a) in SEEDS.iter().enumerate() {
        for b in &SEEDS[i + 1..] {
            let (a, b) = (p(&format!("seed{a}")), p(&format!("seed{b}")));
            for (x, y) in [(&a, &b), (&b, &a)] {
                let v = json(&[x, y]);
                assert_eq!(v["passed"], true, "{x} {y}: {v}");
                let floor = v["summary"]["noise_floor"].as_i64().unwrap();
                let total = v["total"]["base"].as_i64().unwrap();
                assert_eq!(floor, total / 200, "0.5 % of the base total");
                let v = json(&["--noise-floor", "0", x, y]);
                noisy.extend(over(&v));
            }
        }
    }
    assert!(
        noisy.iter().any(|f| f == "lookup" || f.contains("strcmp")),
        "{noisy:?}"
    );
    assert!(
        noisy
            .iter()
            .all(|f| ["lookup", "main", "(below main)"].contains(&f.as_str())
                || f.contains("strcmp")
                || f.contains("libc_start")),
        "{noisy:?}"
    );
}

#[test]
fn more_work_in_a_randomly_seeded_program_fails() {
    let Some(dir) = noisy_runs() else { return };
    let p = |name: &str| s(&dir.join(format!("{name}.out"))).to_string();
    for base in ["random1", "random2"] {
        let o = gate(&[&p(base), &p("slow")]);
        let out = text(&o.stdout);
        assert_eq!(status(&o), 1, "{out}");
        assert!(out.contains("FAIL: 1 function over budget"), "{out}");
        let v = json(&[&p(base), &p("slow")]);
        assert_eq!(over(&v), ["work"]);
        assert_eq!(v["total"]["over"], false);
        let work = &v["functions"][0];
        let percent = work["self"]["percent"].as_f64().unwrap();
        assert!((29.0..31.0).contains(&percent), "{percent}");
        assert!(work["self"]["delta"].as_i64() > v["summary"]["noise_floor"].as_i64());
    }
    // A floor above the increase lets it pass.
    let o = gate(&["--noise-floor", "3%", &p("random1"), &p("slow")]);
    assert_eq!(status(&o), 0, "{}", text(&o.stdout));
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let o = gate(&all);
    assert!(matches!(status(&o), 0 | 1), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON output")
}

#[test]
fn sets_of_profiles_are_summed_per_side() {
    let Some(dir) = runs() else { return };
    let p = |b: &str| profile(dir, b, "callgrind");
    // Two base runs against a base run and a slow one: compute is up by
    // half the slowdown (+10 %), still over 5 %, judged by its own budget
    // (the noise floor, 0.5 % of the summed base, would let it pass).
    let o = gate(&[
        "--noise-floor",
        "0",
        "--base",
        &p("base"),
        &p("same"),
        "--new",
        &p("base"),
        &p("slow"),
    ]);
    assert_eq!(status(&o), 1, "{}", text(&o.stdout));
    assert!(text(&o.stdout).contains("\ncompute ("));
    let o = gate(&[
        "--base",
        &p("base"),
        &p("same"),
        "--new",
        &p("same"),
        &p("tiny"),
    ]);
    assert_eq!(status(&o), 0, "{}", text(&o.stdout));
}

#[test]
fn absolute_budgets_and_derived_events() {
    let Some(dir) = runs() else { return };
    let (base, slow) = (
        profile(dir, "base", "cachegrind"),
        profile(dir, "slow", "cachegrind"),
    );
    let v = json(&[&base, &slow]);
    let delta = v["functions"][0]["self"]["delta"].as_i64().unwrap();
    let at = |limit: i64| {
        status(&gate(&[
            "--max-function-increase",
            &limit.to_string(),
            "--max-increase",
            "1000000",
            &base,
            &slow,
        ]))
    };
    assert_eq!(at(delta), 0);
    assert_eq!(at(delta - 1), 1);
    // A derived event of the user's: judged on its own values.
    let o = gate(&["--format", "json", "--event", "Twice=2*Ir", &base, &slow]);
    assert_eq!(status(&o), 1);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["event"], "Twice");
    assert_eq!(v["functions"][0]["function"], "compute");
    assert_eq!(v["functions"][0]["self"]["delta"].as_i64(), Some(2 * delta));
    // A ratio is refused as an input error.
    let o = gate(&["--event", "R=Dr/Ir", &base, &slow]);
    assert_eq!(status(&o), 2, "{}", text(&o.stderr));
}

#[test]
fn junit_output_parses_with_a_failure_for_the_slow_function() {
    let Some(dir) = runs() else { return };
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("gate-junit.xml");
    let (base, slow) = (
        profile(dir, "base", "callgrind"),
        profile(dir, "slow", "callgrind"),
    );
    let o = gate(&["--format", "junit", "-o", s(&out), &base, &slow]);
    assert_eq!(status(&o), 1);
    // The text verdict still goes to the log.
    assert!(text(&o.stdout).contains("FAIL"), "{}", text(&o.stdout));
    let xml = std::fs::read_to_string(&out).unwrap();
    let suite = junit::parse(&xml);
    assert_eq!(suite.name, "testsuites");
    let ts = &suite.children[0];
    assert_eq!(ts.name, "testsuite");
    let cases: Vec<&junit::Element> = ts
        .children
        .iter()
        .filter(|c| c.name == "testcase")
        .collect();
    assert_eq!(ts.attr("tests"), Some(cases.len().to_string().as_str()));
    let failed: Vec<&str> = cases
        .iter()
        .filter(|c| c.children.iter().any(|f| f.name == "failure"))
        .map(|c| c.attr("name").unwrap())
        .collect();
    // Callgrind names the source file as the debug information does.
    assert_eq!(failed.len(), 1);
    assert!(failed[0].starts_with("compute (") && failed[0].ends_with("work.c)"));
    assert_eq!(ts.attr("failures"), Some("1"));
    assert_eq!(suite.attr("failures"), Some("1"));
    assert!(cases.iter().any(|c| c.attr("name") == Some("total Ir")));
    assert!(cases.iter().all(|c| c.attr("classname").is_some()));
    let failure = cases
        .iter()
        .find(|c| c.attr("name") == Some(failed[0]))
        .unwrap()
        .children
        .iter()
        .find(|f| f.name == "failure")
        .unwrap();
    assert!(failure.attr("message").unwrap().contains("over budget"));
    assert!(failure.text.contains("self: base"), "{}", failure.text);
    // Every case of the common schema: only the elements it knows.
    for c in &ts.children {
        assert!(
            ["properties", "testcase", "system-out", "system-err"].contains(&c.name.as_str()),
            "{}",
            c.name
        );
    }
}

#[test]
fn markdown_output_is_a_table_naming_the_slow_function() {
    let Some(dir) = runs() else { return };
    let (base, slow) = (
        profile(dir, "base", "callgrind"),
        profile(dir, "slow", "callgrind"),
    );
    let o = gate(&["--format", "markdown", &base, &slow]);
    assert_eq!(status(&o), 1);
    let md = text(&o.stdout);
    let tables = markdown_tables(&md);
    assert_eq!(tables.len(), 2, "{md}");
    assert_eq!(
        tables[0][0],
        ["", "base", "new", "change", "allowed", "status"]
    );
    assert_eq!(tables[0][1][0], "total");
    let functions = &tables[1];
    assert_eq!(functions[0][0], "function");
    // The function over budget comes first, with its change and status.
    assert_eq!(functions[1][0], "compute");
    assert!(functions[1][1].ends_with("work.c"), "{:?}", functions[1]);
    assert!(functions[1][2].starts_with('+'), "{:?}", functions[1]);
    assert_eq!(functions[1][5], "over budget");
    assert!(functions[2..].iter().all(|r| r[5] == "ok"));
    assert!(functions.iter().all(|r| r.len() == 6));
}

/// The tables of a Markdown document as rendered (header row first), by a
/// CommonMark parser with GitHub's tables.
fn markdown_tables(md: &str) -> Vec<Vec<Vec<String>>> {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let mut tables = Vec::new();
    let (mut rows, mut row, mut cell): (Vec<Vec<String>>, Vec<String>, String) = Default::default();
    for e in Parser::new_ext(md, Options::ENABLE_TABLES) {
        match e {
            Event::Start(Tag::Table(_)) => rows.clear(),
            Event::End(TagEnd::Table) => tables.push(std::mem::take(&mut rows)),
            Event::Start(Tag::TableHead | Tag::TableRow) => row.clear(),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => rows.push(std::mem::take(&mut row)),
            Event::Start(Tag::TableCell) => cell.clear(),
            Event::End(TagEnd::TableCell) => row.push(std::mem::take(&mut cell)),
            Event::Text(t) | Event::Code(t) => cell.push_str(&t),
            _ => {}
        }
    }
    tables
}

#[test]
fn a_baseline_file_accepts_a_known_increase() {
    let Some(dir) = runs() else { return };
    let d = tally_testutil::temp_dir();
    let (base, slow) = (
        profile(dir, "base", "callgrind"),
        profile(dir, "slow", "callgrind"),
    );
    let file = d.path().join("budgets.txt");
    std::fs::write(
        &file,
        format!(
            "# compute does more work on purpose\n30%  file={}  compute\n5% no_such_function\n",
            dir.join("work.c").display()
        ),
    )
    .unwrap();
    let o = gate(&["--baseline-file", s(&file), &base, &slow]);
    let out = text(&o.stdout);
    assert_eq!(status(&o), 0, "{out}");
    assert!(
        out.contains("budgets.txt:3: no function `no_such_function`"),
        "{out}"
    );
    // A budget below the change does not accept it.
    std::fs::write(&file, "10% compute\n").unwrap();
    assert_eq!(
        status(&gate(&["--baseline-file", s(&file), &base, &slow])),
        1
    );
    // `--ignore` leaves it out entirely.
    let o = gate(&["--ignore", "^comp", &base, &slow]);
    assert_eq!(status(&o), 0, "{}", text(&o.stdout));
}

#[test]
fn input_errors_exit_2_naming_file_and_line() {
    let d = tally_testutil::temp_dir();
    let bad = d.path().join("budgets.txt");
    std::fs::write(&bad, "5% main\n\nfast compute\n").unwrap();
    let good = tally_testutil::data("callgrind/inline.default.out");
    let g = s(&good);
    let o = gate(&["--baseline-file", s(&bad), g, g]);
    assert_eq!(status(&o), 2);
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!("{}:3: `fast` is not a budget", bad.display())),
        "{e}"
    );
    // A missing input, a file that is no profile, a malformed option.
    let missing = d.path().join("missing.out");
    assert_eq!(status(&gate(&[g, s(&missing)])), 2);
    let notes = d.path().join("notes.txt");
    std::fs::write(&notes, "hello\n").unwrap();
    assert_eq!(status(&gate(&[g, s(&notes)])), 2);
    assert_eq!(status(&gate(&["--max-increase", "2 percent", g, g])), 2);
    assert_eq!(status(&gate(&["--ignore", "(", g, g])), 2);
    assert_eq!(status(&gate(&[g])), 2);
    assert_eq!(status(&gate(&["--event", "NoSuch", g, g])), 2);
    // A profile compared with itself passes.
    assert_eq!(status(&gate(&[g, g])), 0);
}

/// Just enough XML for a JUnit report: elements, attributes and text,
/// read with quick-xml.
mod junit {
    use quick_xml::Reader;
    use quick_xml::events::Event;

    #[derive(Debug, Default)]
    pub struct Element {
        pub name: String,
        pub attrs: Vec<(String, String)>,
        pub children: Vec<Element>,
        pub text: String,
    }

    impl Element {
        pub fn attr(&self, name: &str) -> Option<&str> {
            self.attrs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
    }

    fn element(e: &quick_xml::events::BytesStart) -> Element {
        Element {
            name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
            attrs: e
                .attributes()
                .map(|a| {
                    let a = a.expect("well-formed attribute");
                    (
                        String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                        a.unescape_value().expect("escaped value").into_owned(),
                    )
                })
                .collect(),
            ..Default::default()
        }
    }

    /// The root element; panics on XML that is not well formed.
    pub fn parse(xml: &str) -> Element {
        let mut r = Reader::from_str(xml);
        let mut stack: Vec<Element> = vec![Element::default()];
        loop {
            match r.read_event().expect("well-formed XML") {
                Event::Start(e) => stack.push(element(&e)),
                Event::Empty(e) => stack.last_mut().unwrap().children.push(element(&e)),
                Event::End(_) => {
                    let done = stack.pop().unwrap();
                    stack.last_mut().unwrap().children.push(done);
                }
                Event::Text(t) => stack
                    .last_mut()
                    .unwrap()
                    .text
                    .push_str(&t.decode().expect("UTF-8 text")),
                // Entities come apart from the text around them.
                Event::GeneralRef(r) => {
                    let c = match r.resolve_char_ref().expect("character reference") {
                        Some(c) => c,
                        None => match &*r.decode().expect("entity name") {
                            "amp" => '&',
                            "lt" => '<',
                            "gt" => '>',
                            "quot" => '"',
                            "apos" => '\'',
                            other => panic!("undeclared entity &{other};"),
                        },
                    };
                    stack.last_mut().unwrap().text.push(c);
                }
                Event::Eof => break,
                _ => {}
            }
        }
        assert_eq!(stack.len(), 1, "unclosed elements");
        let mut root = stack.pop().unwrap();
        assert_eq!(root.children.len(), 1, "one root element");
        root.children.pop().unwrap()
    }
}
