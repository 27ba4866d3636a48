//! `tally annotate` follows the defaults and meanings of the tool its
//! input comes from: for Cachegrind files, cg_annotate 3.19's per-function
//! `--threshold` (default 0.1); for Callgrind files, callgrind_annotate
//! 3.19's cumulative share (default 99). The function rows (names, counts
//! and order) are compared with the reference tools' text, run live on the
//! fixtures and on a program compiled and profiled here. `--auto` and
//! `--show-percs` default to yes, one function table is printed, and
//! `--event` takes products and ratios.

use std::path::{Path, PathBuf};
use std::process::Command;
use tally_testutil::{data_dir, path_str, tally};

/// One function row: its `file:function` name and its counts.
type Row = (String, Vec<i128>);

/// The rows of the `file:function` table of a report: counts with `.`
/// read as 0, percentages and the object dropped.
fn rows(text: &str) -> Vec<Row> {
    let mut out = Vec::new();
    let mut on = false;
    for l in text.lines() {
        if !on {
            on = l.trim_end().ends_with(" file:function") && !l.starts_with("--");
            continue;
        }
        if l.starts_with("----") {
            continue;
        }
        if l.trim().is_empty() {
            break;
        }
        let mut counts = Vec::new();
        let mut words = l.split_whitespace().peekable();
        let mut name = String::new();
        while let Some(w) = words.next() {
            if w == "." {
                counts.push(0);
            } else if let Ok(v) = w.replace(',', "").parse::<i128>() {
                counts.push(v);
                // Skip a ` (12.34%)` or `( 1.00%)` after the count.
                if words.peek().is_some_and(|n| n.starts_with('(')) {
                    for n in words.by_ref() {
                        if n.ends_with("%)") {
                            break;
                        }
                    }
                }
            } else {
                name = w.to_string();
                break;
            }
        }
        out.push((name, counts));
    }
    out
}

/// Rows with equal counts in name order: cg_annotate leaves their order to
/// Perl's hash order, tally puts them in name order.
fn canonical(mut r: Vec<Row>) -> Vec<Row> {
    let mut i = 0;
    while i < r.len() {
        let mut j = i + 1;
        while j < r.len() && r[j].1 == r[i].1 {
            j += 1;
        }
        r[i..j].sort();
        i = j;
    }
    r
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("runs");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn reference(tool: &str, args: &[&str], file: &Path) -> String {
    run(Command::new(tool)
        .args(args)
        .arg(file)
        .env("PERL_HASH_SEED", "0")
        .env("PERL_PERTURB_KEYS", "0"))
}

fn ours(args: &[&str], file: &Path) -> String {
    run(tally!().command().arg("annotate").args(args).arg(file))
}

/// Compares the function rows for each threshold; returns how many rows
/// were compared.
fn same_rows(tool: &str, file: &Path, thresholds: &[Option<&str>]) -> usize {
    let mut compared = 0;
    for th in thresholds {
        let mut args = vec!["--auto=no".to_string()];
        if let Some(t) = th {
            args.push(format!("--threshold={t}"));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let want = canonical(rows(&reference(tool, &args, file)));
        let got = canonical(rows(&ours(&args, file)));
        assert!(!want.is_empty(), "{}: no rows from {tool}", file.display());
        assert_eq!(
            got,
            want,
            "{} --threshold={}: rows differ from {tool}'s",
            file.display(),
            th.unwrap_or("default")
        );
        compared += got.len();
    }
    compared
}

fn cachegrind_fixtures() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir().join("cachegrind"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "out"))
        .collect();
    v.sort();
    v
}

const CG_THRESHOLDS: [Option<&str>; 3] = [None, Some("1"), Some("5")];

#[test]
fn cachegrind_fixtures_show_cg_annotates_rows() {
    if !tally_testutil::require(&["cg_annotate"]) {
        return;
    }
    let fixtures = cachegrind_fixtures();
    assert!(fixtures.len() >= 10);
    for f in &fixtures {
        same_rows("cg_annotate", f, &CG_THRESHOLDS);
    }
}

#[test]
fn cachegrind_sort_thresholds_follow_cg_annotate() {
    if !tally_testutil::require(&["cg_annotate"]) {
        return;
    }
    let f = data_dir().join("cachegrind/workload.branch.out");
    // A secondary sort event must reach 100 % of its total; per-event
    // thresholds leave the events without one at 0 (every row).
    for sort in ["--sort=D1mr,Ir", "--sort=Bim:50,Ir:2", "--sort=D1mr:10"] {
        let args = ["--auto=no", sort];
        let want = canonical(rows(&reference("cg_annotate", &args, &f)));
        let got = canonical(rows(&ours(&args, &f)));
        assert_eq!(got, want, "{sort}");
    }
}

/// A Cachegrind profile of a program compiled here.
#[test]
fn cachegrind_profile_of_a_fresh_program_shows_cg_annotates_rows() {
    if !tally_testutil::require(&["gcc", "valgrind", "cg_annotate"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let bin = dir.path().join("workload");
    let src = data_dir().join("src/workload.c");
    run(Command::new("gcc").args(["-O1", "-g", "-o", path_str(&bin), path_str(&src)]));
    let out = dir.path().join("cachegrind.out");
    run(Command::new("valgrind").args([
        "-q",
        "--tool=cachegrind",
        "--cache-sim=yes",
        "--branch-sim=yes",
        &format!("--cachegrind-out-file={}", out.display()),
        path_str(&bin),
        "800",
    ]));
    let n = same_rows("cg_annotate", &out, &CG_THRESHOLDS);
    assert!(n > 10, "only {n} rows compared");
}

/// Callgrind fixtures keep callgrind_annotate's cumulative threshold. Rows
/// are compared up to the first that callgrind_annotate sums over several
/// objects (tally keeps objects apart, which moves where the share is
/// reached); files where callgrind_annotate's totals or self costs differ
/// for known reasons (several parts, `calls=0`) are left to
/// annotate_compare.
#[test]
fn callgrind_fixtures_show_callgrind_annotates_rows() {
    if !tally_testutil::require(&["callgrind_annotate"]) {
        return;
    }
    let mut compared = 0;
    let mut files = 0;
    for e in std::fs::read_dir(data_dir().join("callgrind")).unwrap() {
        let f = e.unwrap().path();
        if f.extension().is_none_or(|e| e != "out") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let (split, parts) = split_keys(&f);
        if text.contains("\ncalls=0 ") || parts > 1 {
            continue;
        }
        files += 1;
        for th in [None, Some("50"), Some("90"), Some("100")] {
            let mut args = vec!["--auto=no".to_string()];
            if let Some(t) = th {
                args.push(format!("--threshold={t}"));
            }
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let want = rows(&reference("callgrind_annotate", &args, &f));
            let got = rows(&ours(&args, &f));
            let cut = want
                .iter()
                .position(|r| split.contains(&r.0))
                .unwrap_or(want.len());
            let n = if cut == want.len() { got.len() } else { cut };
            assert_eq!(
                &got[..n.min(got.len())],
                &want[..cut],
                "{} --threshold={}",
                f.display(),
                th.unwrap_or("default")
            );
            compared += cut;
        }
    }
    assert!(
        files >= 10 && compared > 500,
        "{files} files, {compared} rows"
    );
}

/// `file:function` names that tally shows once per object, and the
/// number of parts.
fn split_keys(f: &Path) -> (Vec<String>, usize) {
    let j: serde_json::Value =
        serde_json::from_str(&ours(&["--json", "--auto=no", "--threshold=all"], f)).unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    for r in j["functions"].as_array().unwrap() {
        let k = format!(
            "{}:{}",
            r["file"].as_str().unwrap_or(""),
            r["function"].as_str().unwrap_or("")
        );
        *seen.entry(k).or_default() += 1;
    }
    let split = seen
        .into_iter()
        .filter(|(_, c)| *c > 1)
        .map(|(k, _)| k)
        .collect();
    (split, j["parts"].as_array().map_or(0, Vec::len))
}

#[test]
fn auto_and_percentages_default_to_yes() {
    let f = data_dir().join("cachegrind/workload.out");
    let text = ours(&["-I", path_str(&data_dir())], &f);
    assert!(text.contains("Auto-annotation:  on"), "{text}");
    assert!(text.contains("-- Auto-annotated source:"), "{text}");
    assert!(text.contains("(100.0%)  PROGRAM TOTALS"), "{text}");
    let off = ours(&["--auto=no", "--show-percs=no"], &f);
    assert!(off.contains("Auto-annotation:  off"));
    assert!(!off.contains("-- Auto-annotated source:"));
    assert!(!off.contains("%)"));
}

#[test]
fn percentages_are_formatted_as_cg_annotate_formats_them() {
    if !tally_testutil::require(&["cg_annotate"]) {
        return;
    }
    let f = data_dir().join("cachegrind/workload.out");
    let percs = |t: &str| -> Vec<String> {
        let mut v: Vec<String> = t
            .lines()
            .flat_map(|l| l.match_indices('(').map(move |(i, _)| &l[i..]))
            .filter_map(|s| s.find("%)").map(|e| s[..e + 2].to_string()))
            .collect();
        v.sort();
        v
    };
    let args = ["--auto=no"];
    let want = percs(&reference("cg_annotate", &args, &f));
    let got = percs(&ours(&args, &f));
    assert!(want.len() > 20);
    assert_eq!(got, want);
}

#[test]
fn one_function_table_by_default() {
    let f = data_dir().join("callgrind/workload.default.out");
    let text = ours(&["--auto=no"], &f);
    assert_eq!(text.matches(" file:function\n").count(), 1);
    assert_eq!(text.matches(" function:file\n").count(), 0);
    let both = ours(&["--auto=no", "--grouping=both"], &f);
    assert_eq!(both.matches(" file:function\n").count(), 1);
    assert_eq!(both.matches(" function:file\n").count(), 1);
    let by_fn = ours(&["--auto=no", "--grouping=function"], &f);
    assert_eq!(by_fn.matches(" file:function\n").count(), 0);
    assert_eq!(by_fn.matches(" function:file\n").count(), 1);
}

/// Equal up to the last bits of a decimal printing of a float.
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn totals_of(j: &serde_json::Value, e: &str) -> f64 {
    j["totals"][e].as_f64().unwrap()
}

#[test]
fn event_formulas_take_products_and_ratios() {
    let f = data_dir().join("cachegrind/workload.out");
    let j: serde_json::Value = serde_json::from_str(&ours(
        &[
            "--json",
            "--auto=no",
            "--threshold=all",
            "--event",
            "A=Ir*2",
            "--event",
            "B=2*Ir + Dr*3 - Dw",
            "--event",
            "rate=D1mr/Dr",
            "--event",
            "both=(D1mr + D1mw) / (Dr + Dw)",
        ],
        &f,
    ))
    .unwrap();
    let t = |e| totals_of(&j, e);
    assert_eq!(t("A"), 2.0 * t("Ir"));
    assert_eq!(t("B"), 2.0 * t("Ir") + 3.0 * t("Dr") - t("Dw"));
    assert!(close(t("rate"), t("D1mr") / t("Dr")));
    assert!(close(
        t("both"),
        (t("D1mr") + t("D1mw")) / (t("Dr") + t("Dw"))
    ));
    // A ratio per function is its own misses over its own reads, not a sum.
    for r in j["functions"].as_array().unwrap() {
        let s = &r["self"];
        let (m, d) = (s["D1mr"].as_f64().unwrap(), s["Dr"].as_f64().unwrap());
        if d == 0.0 {
            assert!(s["rate"].is_null());
        } else {
            assert!(close(s["rate"].as_f64().unwrap(), m / d));
        }
    }
    // In text, with decimals and no percentage.
    let text = ours(
        &[
            "--auto=no",
            "--event",
            "rate=D1mr/Dr",
            "--show=Dr,D1mr,rate",
        ],
        &f,
    );
    let want = format!("{:.4}", t("rate"));
    let totals = text
        .lines()
        .find(|l| l.ends_with("PROGRAM TOTALS"))
        .unwrap();
    assert!(totals.contains(&format!(" {want} ")), "{totals}");
}

#[test]
fn bad_formulas_name_the_formula_and_the_position() {
    let f = data_dir().join("cachegrind/workload.out");
    let err = tally!().fails(&["annotate", "--event", "X=Ir*", path_str(&f)]);
    assert!(
        err.contains("`Ir*`") && err.contains("character 4"),
        "{err}"
    );
    let err = tally!().fails(&["annotate", "--event", "X=Ir+/Dr", path_str(&f)]);
    assert!(err.contains("character 4"), "{err}");
    let err = tally!().fails(&["annotate", "--event", "X=Nope*2", path_str(&f)]);
    assert!(err.contains("unknown event `Nope`"), "{err}");
    let err = tally!().fails(&["annotate", "--event", "r=D1mr/Dr", "--sort=r", path_str(&f)]);
    assert!(err.contains("ratio"), "{err}");
}
