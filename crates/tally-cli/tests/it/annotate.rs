//! `tally annotate` as a user runs it: source annotation (snapshot), JSON
//! content, parts and threads, derived events, jumps, and the messages for
//! bad options and missing files.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_testutil::{data, text};

fn run_in(dir: &Path, args: &[&str]) -> Output {
    let mut a = vec!["annotate"];
    a.extend_from_slice(args);
    tally_testutil::tally!().in_dir(dir).run(&a)
}

fn run(args: &[&str]) -> Output {
    run_in(&data(""), args)
}

fn json(args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = run(&a);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn n(v: &Value) -> i64 {
    v.as_i64().expect("a number")
}

/// Copies a profile into a fresh directory, so that it is newer than the
/// sources whatever the checkout's file times.
fn fresh_copy(rel: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let to = dir.path().join(Path::new(rel).file_name().unwrap());
    std::fs::copy(data(rel), &to).unwrap();
    (dir, to)
}

#[test]
fn source_annotation_snapshot() {
    let (dir, _) = fresh_copy("callgrind/inline.default.out");
    let inc = data("");
    let out = run_in(
        dir.path(),
        &[
            "--auto=yes",
            "--context=3",
            "--threshold=99",
            "--show-percs=no",
            "--grouping=both",
            "-I",
            inc.to_str().unwrap(),
            "inline.default.out",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("newer"),
        "{}",
        text(&out.stderr)
    );
    let got = text(&out.stdout).replace(inc.to_str().unwrap(), "DATA/");
    let snap = data("annotate/inline.default.auto.txt");
    if std::env::var_os("TALLY_BLESS").is_some() {
        std::fs::create_dir_all(snap.parent().unwrap()).unwrap();
        std::fs::write(&snap, &got).unwrap();
    }
    let want = std::fs::read_to_string(&snap).expect("snapshot (TALLY_BLESS=1 writes it)");
    if got != want {
        let diff: Vec<String> = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .filter(|(_, (a, b))| a != b)
            .take(5)
            .map(|(i, (a, b))| format!("line {}:\n  got  {a}\n  want {b}", i + 1))
            .collect();
        panic!(
            "source annotation differs from {} ({} vs {} lines):\n{}",
            snap.display(),
            got.lines().count(),
            want.lines().count(),
            diff.join("\n")
        );
    }
}

#[test]
fn source_lines_agree_with_the_profile() {
    // Every line count shown in the JSON source annotation adds up to the
    // file's self cost in the function table.
    let j = json(&[
        "--auto=yes",
        "--threshold=100",
        "callgrind/workload.default.out",
    ]);
    let files = j["source"]["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["file"] == "./src/workload.c"));
    for f in files {
        let lines: i64 = f["lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| n(&l["self"]["Ir"]))
            .sum();
        let rows: i64 = j["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["file"] == f["file"])
            .map(|r| n(&r["self"]["Ir"]))
            .sum();
        assert_eq!(lines, rows, "{}", f["file"]);
    }
}

#[test]
fn source_newer_than_profile_and_lines_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("src")).unwrap();
    // A source cut short, written after the profile.
    let src = std::fs::read_to_string(data("src/inline.c")).unwrap();
    let short: String = src.lines().take(20).map(|l| format!("{l}\n")).collect();
    let prof = dir.path().join("p.out");
    std::fs::copy(data("callgrind/inline.default.out"), &prof).unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&prof)
        .unwrap()
        .set_modified(old)
        .unwrap();
    std::fs::write(dir.path().join("src/inline.c"), short).unwrap();
    let out = run_in(dir.path(), &["p.out", "src/inline.c"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let (o, e) = (text(&out.stdout), text(&out.stderr));
    assert!(e.contains("newer than the profile"), "{e}");
    assert!(e.contains("past the end of the file (20 lines)"), "{e}");
    assert!(
        o.contains("-- User-annotated source: ./src/inline.c"),
        "{o}"
    );
    assert!(
        o.contains("counts on lines past the end of the file (20 lines)"),
        "{o}"
    );
    assert!(
        o.contains("<line 43 past the end>") || o.contains("past the end>"),
        "{o}"
    );
}

#[test]
fn missing_sources_are_summarised() {
    let (dir, _) = fresh_copy("callgrind/inline.default.out");
    let out = run_in(dir.path(), &["--auto=yes", "inline.default.out"]);
    assert!(out.status.success());
    let o = text(&out.stdout);
    assert!(o.contains("not found: ./src/inline.c"), "{o}");
    assert!(o.contains("unannotated: files known, not found"), "{o}");
}

#[test]
fn json_has_rows_inclusive_costs_and_cycles() {
    let j = json(&[
        "--inclusive=yes",
        "--threshold=100",
        "callgrind/mutual.default.out",
    ]);
    let total = n(&j["totals"]["Ir"]);
    assert_eq!(total, 145_054);
    let rows = j["functions"].as_array().unwrap();
    let row = |f: &str| rows.iter().find(|r| r["function"] == f).unwrap();
    // is_even'2 and is_odd'2 call each other: a cycle; their inclusive
    // costs are derived.
    let even = row("is_even'2");
    assert_eq!(even["inclusive_derived"], true, "{even}");
    let c = n(&even["cycle"]);
    let cycle = j["cycles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| n(&x["number"]) == c)
        .unwrap();
    let names: Vec<&str> = cycle["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["function"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"is_even'2") && names.contains(&"is_odd'2"),
        "{names:?}"
    );
    assert!(n(&cycle["inclusive"]["Ir"]) <= total);
    // No row above the total (callgrind_annotate shows 298 % here).
    for r in rows {
        if let Some(i) = r.get("inclusive") {
            assert!(n(&i["Ir"]) <= total, "{r}");
        }
        assert!(r["object"].is_string() && r["file"].is_string());
    }
    assert_eq!(n(&row("main")["inclusive"]["Ir"]), 39_644);
    // The by-function grouping is there too.
    assert!(j["functions_by_name"].as_array().unwrap().len() <= rows.len());
}

#[test]
fn parts_and_threads_are_selected_and_summed() {
    let all = json(&[
        "--threshold=100",
        "callgrind/threads.threads.out-01",
        "callgrind/threads.threads.out-02",
        "callgrind/threads.threads.out-03",
        "callgrind/threads.threads.out-04",
    ]);
    let mut sum = 0;
    for t in 1..=4 {
        let one = json(&[&format!("callgrind/threads.threads.out-0{t}")]);
        sum += n(&one["totals"]["Ir"]);
        let sel = json(&[
            &format!("--thread={t}"),
            "callgrind/threads.threads.out-01",
            "callgrind/threads.threads.out-02",
            "callgrind/threads.threads.out-03",
            "callgrind/threads.threads.out-04",
        ]);
        assert_eq!(sel["totals"], one["totals"], "thread {t}");
    }
    assert_eq!(n(&all["totals"]["Ir"]), sum);
    assert_eq!(all["parts"].as_array().unwrap().len(), 4);
    // A multi-part file: the total is the sum of the parts, not the last.
    let combined = json(&["callgrind/mutual.combined.out"]);
    let parts = combined["parts"].as_array().unwrap().len();
    assert!(parts > 1);
    let mut s = 0;
    for p in 1..=parts {
        s += n(&json(&[&format!("--part={p}"), "callgrind/mutual.combined.out"])["totals"]["Ir"]);
    }
    assert_eq!(n(&combined["totals"]["Ir"]), s);
}

#[test]
fn derived_and_ad_hoc_events() {
    let j = json(&["--show=CEst,W", "spec/event-derived-factors.callgrind"]);
    let t = &j["totals"];
    assert_eq!(
        n(&t["CEst"]),
        n(&t["Ir"]) + 10 * n(&t["Bm"]) + 100 * n(&t["LLm"])
    );
    assert_eq!(n(&t["W"]), 2 * n(&t["Ir"]) + n(&t["Bm"]));
    let j = json(&["--event=Mem=Dr+Dw", "--show=Mem", "cachegrind/workload.out"]);
    let t = &j["totals"];
    assert_eq!(n(&t["Mem"]), n(&t["Dr"]) + n(&t["Dw"]));
    for r in j["functions"].as_array().unwrap() {
        assert_eq!(
            n(&r["self"]["Mem"]),
            n(&r["self"]["Dr"]) + n(&r["self"]["Dw"])
        );
    }
}

#[test]
fn jumps_are_listed_hottest_first() {
    let j = json(&["--jumps=10", "callgrind/workload.jumps.out"]);
    let jumps = j["jumps"].as_array().unwrap();
    assert_eq!(jumps.len(), 10);
    for w in jumps.windows(2) {
        assert!(n(&w[0]["executed"]) >= n(&w[1]["executed"]));
    }
    for x in jumps {
        assert!(n(&x["taken"]) <= n(&x["executed"]));
    }
    let out = run(&["--jumps=5", "callgrind/workload.jumps.out"]);
    let o = text(&out.stdout);
    assert!(o.contains("jcnd ") || o.contains("jump "), "{o}");
}

#[test]
fn bad_options_and_inputs_get_clear_messages() {
    let out = run(&["--show=Nope", "callgrind/mutual.default.out"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unknown event `Nope` (the profile has: Ir)"));

    let out = run(&["--part=9", "callgrind/mutual.default.out"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no part 9"),
        "{}",
        text(&out.stderr)
    );

    let out = run(&["--threshold=150", "callgrind/mutual.default.out"]);
    assert_eq!(out.status.code(), Some(2));

    let out = run(&["--event=Ir=Dr", "cachegrind/workload.out"]);
    assert_eq!(out.status.code(), Some(1));

    // A Cachegrind profile has no calls to draw trees from.
    let out = run(&["--tree=both", "cachegrind/workload.out"]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("no calls"),
        "{}",
        text(&out.stderr)
    );

    let out = run(&["callgrind/no-such-file.out"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no-such-file.out"));

    let out = run(&["bad/garbage-line.callgrind"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn colour_only_when_asked_or_on_a_terminal() {
    let out = run(&["callgrind/mutual.default.out"]);
    assert!(!text(&out.stdout).contains('\x1b'));
    let out = run(&["--color=always", "callgrind/mutual.default.out"]);
    assert!(text(&out.stdout).contains("\x1b[1m"));
}

/// Compiles a small program, profiles it with Callgrind at instruction
/// level, and checks `--asm` against the program itself: every costly
/// address of `main` and `work` is an instruction objdump also decodes, and
/// the instructions' costs add up to the functions' self costs.
#[test]
fn assembly_annotation_of_a_fresh_profile() {
    if !tally_testutil::require(&["gcc", "valgrind", "objdump"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("p.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n\
         __attribute__((noinline)) static long work(int n) {\n\
           long s = 0;\n\
           for (int i = 0; i < n; i++) s += (i % 3) ? i : -i;\n\
           return s;\n\
         }\n\
         int main(void) { printf(\"%ld\\n\", work(1000)); return 0; }\n",
    )
    .unwrap();
    let bin = dir.path().join("p");
    let ok = Command::new("gcc")
        .args(["-g", "-O1", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let prof = dir.path().join("callgrind.out");
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-jumps=yes",
        ])
        .arg(format!("--callgrind-out-file={}", prof.display()))
        .arg(&bin)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j = json(&["--asm", "--threshold=100", prof.to_str().unwrap()]);
    let objdump = Command::new("objdump")
        .arg("-d")
        .arg(&bin)
        .output()
        .unwrap();
    let dump = text(&objdump.stdout);
    for name in ["main", "work"] {
        let f = j["asm"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["function"] == name && f["object"] == bin.to_str().unwrap())
            .unwrap_or_else(|| panic!("no assembly for {name}"));
        assert!(f["problem"].is_null(), "{}", f["problem"]);
        let ins = f["instructions"].as_array().unwrap();
        assert!(!ins.is_empty());
        let mut sum = 0;
        for i in ins {
            let addr = i["address"].as_u64().unwrap();
            // objdump prints "    1139:\tinsn" for every instruction.
            assert!(
                dump.contains(&format!("\n    {addr:x}:\t"))
                    || dump.contains(&format!("\n  {addr:x}:\t")),
                "0x{addr:x} of {name} is not an instruction start in objdump -d"
            );
            if let Some(c) = i.get("self") {
                sum += n(&c["Ir"]);
            }
        }
        let row: i64 = j["functions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["function"] == name && r["object"] == bin.to_str().unwrap())
            .map(|r| n(&r["self"]["Ir"]))
            .sum();
        assert!(row > 0);
        assert_eq!(sum, row, "{name}: instruction costs vs self cost");
    }
    // The loop's conditional jump was recorded and is shown.
    let text_out = run(&["--asm", "--threshold=100", prof.to_str().unwrap()]);
    assert!(text(&text_out.stdout).contains("jcnd: executed"));

    // A missing object file is said, not fatal.
    std::fs::remove_file(&bin).unwrap();
    let out = run(&["--asm", prof.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(
        text(&out.stderr).contains("object files not available"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn thresholds_cut_where_callgrind_annotate_cuts() {
    // Callgrind input, --sort with per-event thresholds: rows are shown
    // until every listed event reaches its share of the total, and not one
    // row more (Cachegrind input follows cg_annotate: annotate_defaults).
    let j = json(&["--sort=Dr:40,Dw:60", "callgrind/workload.combo.out"]);
    let rows = j["functions"].as_array().unwrap();
    assert!(share(rows, &j, "Dr") >= 40.0 && share(rows, &j, "Dw") >= 60.0);
    let fewer = &rows[..rows.len() - 1];
    assert!(share(fewer, &j, "Dr") < 40.0 || share(fewer, &j, "Dw") < 60.0);
    // Sorted by Dr, then Dw.
    for w in rows.windows(2) {
        let k = |r: &Value| (n(&r["self"]["Dr"]), n(&r["self"]["Dw"]));
        assert!(k(&w[0]) >= k(&w[1]));
    }
    // The default: 99 % of the first event.
    let j = json(&["callgrind/workload.default.out"]);
    let all = json(&["--threshold=100", "callgrind/workload.default.out"]);
    let shown = j["functions"].as_array().unwrap().len();
    assert!(shown < all["functions"].as_array().unwrap().len());
    assert!(share(&j["functions"].as_array().unwrap()[..], &j, "Ir") >= 99.0);
}

/// Percentage of event `e`'s total that `rows` cover.
fn share(rows: &[Value], report: &Value, e: &str) -> f64 {
    rows.iter().map(|r| n(&r["self"][e])).sum::<i64>() as f64 * 100.0
        / n(&report["totals"][e]) as f64
}

#[test]
fn every_cycle_is_listed_when_every_row_is() {
    let j = json(&[
        "--inclusive=yes",
        "--threshold=100",
        "callgrind/mutual.recs.out",
    ]);
    let cycles = j["cycles"].as_array().unwrap().len();
    assert!(cycles >= 2, "{cycles}");
    let out = run(&[
        "--inclusive=yes",
        "--threshold=100",
        "callgrind/mutual.recs.out",
    ]);
    let o = text(&out.stdout);
    for c in 1..=cycles {
        assert_eq!(
            o.matches(&format!("<cycle {c}> as a whole")).count(),
            1,
            "cycle {c}"
        );
    }
}

#[test]
fn summing_while_reading_equals_a_full_load() {
    // Without source or assembly annotation a single input is summed while
    // it is read; `--auto` loads every line. Both must give the same rows,
    // trees, cycles and jumps.
    for f in [
        "callgrind/mutual.combined.out",
        "callgrind/workload.jumps.out",
        "cachegrind/workload.out",
    ] {
        let args = [
            "--threshold=100",
            "--inclusive",
            "--tree=both",
            "--jumps=50",
            f,
        ];
        let streamed = json(&args);
        let mut full_args = vec!["--auto"];
        full_args.extend_from_slice(&args);
        let full = json(&full_args);
        for k in [
            "totals",
            "functions",
            "functions_by_name",
            "cycles",
            "jumps",
            "parts",
        ] {
            assert_eq!(streamed[k], full[k], "{f}: {k}");
        }
    }
    // Optional values need `=`, so a flag before the file does not eat it.
    let out = run(&["--inclusive", "--auto", "callgrind/mutual.default.out"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
