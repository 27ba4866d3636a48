//! `tally dcpi` and the DCPI conversions on real counts: Callgrind runs of
//! tests/data/dcpi/real/workload converted to DCPI (generate.sh there),
//! checked against the Callgrind files they came from.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use tally_formats::dcpi;
use tally_testutil::{Tally, path_str as s, text};

fn real(rel: &str) -> PathBuf {
    tally_testutil::data("dcpi/real").join(rel)
}

fn spec(rel: &str) -> PathBuf {
    tally_testutil::data("dcpi/spec").join(rel)
}

/// tally run from the real runs' folder, where their files are.
fn in_real() -> Tally {
    tally_testutil::tally!().in_dir(real(""))
}

fn tally(args: &[&str]) -> Output {
    in_real().run(args)
}

fn ok(args: &[&str]) -> String {
    text(&in_real().ok(args).stdout)
}

fn ok_in(dir: &Path, args: &[&str]) -> String {
    text(&tally_testutil::tally!().in_dir(dir).ok(args).stdout)
}

fn fails(args: &[&str]) -> String {
    in_real().fails(args)
}

/// Ir per function of the main object in a Callgrind file, by name.
fn callgrind_ir(file: &Path) -> BTreeMap<String, u64> {
    let (p, _) = tally_formats::read_file::<u64>(file, None).unwrap();
    let mut m = BTreeMap::new();
    for part in &p.parts {
        part.lines.for_each(|l| {
            let obj = p.names.function_object(l.function);
            if obj.ends_with(b"/workload") || obj.ends_with(b"/workload.pie") {
                let n = String::from_utf8_lossy(p.names.function_name(l.function)).into_owned();
                // Callgrind names recursion levels `f'2`; DCPI knows `f`.
                let n = match n.rsplit_once('\'') {
                    Some((b, d)) if d.chars().all(|c| c.is_ascii_digit()) => b.to_string(),
                    _ => n,
                };
                *m.entry(n).or_default() += l.costs[0];
            }
        });
    }
    m
}

/// DCPI's procedures (ELF symbols) against Callgrind's functions: equal
/// counts for every function Callgrind names by its symbol. Valgrind calls
/// `_start` `(below main)` and names a few functions it finds no symbol for
/// by their address; those are compared in sum.
fn same_counts(dcpi: &BTreeMap<String, u64>, callgrind: &BTreeMap<String, u64>) {
    let mut named = 0;
    let mut rest = 0u64;
    for (name, &v) in callgrind {
        match name.as_str() {
            "(below main)" => assert_eq!(dcpi.get("_start"), Some(&v), "_start"),
            n if n.starts_with("0x") => rest += v,
            n => {
                assert_eq!(dcpi.get(n), Some(&v), "{n}");
                named += 1;
            }
        }
    }
    assert!(named >= 12, "{named}");
    let dcpi_rest: u64 = dcpi
        .iter()
        .filter(|(k, _)| !callgrind.contains_key(*k) && k.as_str() != "_start")
        .map(|(_, v)| v)
        .sum();
    if rest > 0 {
        assert_eq!(dcpi_rest, rest);
    }
}

/// `samples  %  cum%  procedure  image` rows of `tally dcpi prof`.
fn prof_rows(out: &str) -> Vec<(u64, f64, f64, String)> {
    out.lines()
        .skip_while(|l| !l.starts_with("====="))
        .skip(2)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 5 {
                return None;
            }
            Some((
                f[0].replace(',', "").parse().ok()?,
                f[1].trim_end_matches('%').parse().ok()?,
                f[2].trim_end_matches('%').parse().ok()?,
                f[3].to_string(),
            ))
        })
        .collect()
}

#[test]
fn prof_gives_callgrinds_counts_per_procedure() {
    let out = ok(&["dcpi", "prof", "workload", "workload.run1.dcpi"]);
    let rows = prof_rows(&out);
    let want = callgrind_ir(&real("workload.run1.callgrind"));
    assert!(rows.len() >= 10, "{out}");
    let got: BTreeMap<String, u64> = rows.iter().map(|r| (r.3.clone(), r.0)).collect();
    same_counts(&got, &want);
    // Sorted by samples; percentages add up; the last cumulative is 100.
    assert!(rows.windows(2).all(|w| w[0].0 >= w[1].0));
    let sum: f64 = rows.iter().map(|r| r.1).sum();
    assert!((sum - 100.0).abs() < 0.1, "{sum}");
    assert!((rows.last().unwrap().2 - 100.0).abs() < 0.01);
    // The DCPI total is the object's Ir.
    let p = dcpi::read_file(&real("workload.run1.dcpi")).unwrap();
    assert_eq!(p.total(), want.values().sum::<u64>());
    let head = out.lines().nth(2).unwrap();
    assert!(
        head.starts_with("Ir ") && head.contains(" 957,404  1"),
        "{out}"
    );
}

#[test]
fn prof_keep_and_json() {
    let out = ok(&[
        "dcpi",
        "prof",
        "--keep",
        "50",
        "workload",
        "workload.run1.dcpi",
    ]);
    let rows = prof_rows(&out);
    assert!(rows.len() >= 2 && rows.len() < 10, "{out}");
    let last = rows.last().unwrap().2;
    let before = rows[rows.len() - 2].2;
    assert!(last >= 50.0 && before < 50.0, "{out}");
    assert!(out.contains("more procedures"), "{out}");
    let j: serde_json::Value = serde_json::from_str(&ok(&[
        "dcpi",
        "prof",
        "--json",
        "workload",
        "workload.run1.dcpi",
    ]))
    .unwrap();
    assert_eq!(j["event"], "Ir");
    assert_eq!(j["total"], 957_404);
    assert_eq!(j["procedures"][0]["procedure"], "make_word");
    // Two profiles of the image are summed.
    let two = prof_rows(&ok(&[
        "dcpi",
        "prof",
        "workload",
        "workload.run1.dcpi",
        "workload.run2.dcpi",
    ]));
    let (a, b) = (
        callgrind_ir(&real("workload.run1.callgrind")),
        callgrind_ir(&real("workload.run2.callgrind")),
    );
    for r in &two {
        if let (Some(x), Some(y)) = (a.get(&r.3), b.get(&r.3)) {
            assert_eq!(r.0, x + y, "{}", r.3);
        }
    }
    let total: u64 = two.iter().map(|r| r.0).sum();
    assert_eq!(total, a.values().sum::<u64>() + b.values().sum::<u64>());
}

#[test]
fn list_shows_instructions_sources_and_the_procedure_total() {
    // From tests/data, where the image's DWARF paths (./src/workload.c)
    // lead to the source.
    let out = ok_in(
        &real("../.."),
        &[
            "dcpi",
            "list",
            "dcpi/real/workload",
            "dcpi/real/workload.run1.dcpi",
            "--proc",
            "fnv1a",
        ],
    );
    let want = callgrind_ir(&real("workload.run1.callgrind"))["fnv1a"];
    let total = out
        .lines()
        .last()
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .replace(',', "");
    assert_eq!(total, want.to_string(), "{out}");
    assert!(
        out.contains("./src/workload.c:98: h *= 16777619u;"),
        "{out}"
    );
    assert!(out.contains("imul"), "{out}");
    // The per-instruction counts add up to the total.
    let sum: u64 = out
        .lines()
        .filter(|l| l.contains("  0x"))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|v| v.replace(',', "").parse::<u64>().ok())
        .sum();
    assert_eq!(sum, want);
    let e = fails(&[
        "dcpi",
        "list",
        "workload",
        "workload.run1.dcpi",
        "--proc",
        "fnv",
    ]);
    assert!(
        e.contains("no procedure `fnv`") && e.contains("fnv1a"),
        "{e}"
    );
}

#[test]
fn diff_compares_runs() {
    let same = ok(&[
        "dcpi",
        "diff",
        "workload",
        "workload.run1.dcpi",
        "workload.run1.dcpi",
    ]);
    for l in same.lines().skip(3) {
        assert_eq!(l.split_whitespace().nth(2), Some("0"), "{l}");
    }
    let out = ok(&[
        "dcpi",
        "diff",
        "workload",
        "workload.run1.dcpi",
        "workload.run2.dcpi",
    ]);
    let (a, b) = (
        callgrind_ir(&real("workload.run1.callgrind")),
        callgrind_ir(&real("workload.run2.callgrind")),
    );
    let top = out.lines().nth(3).unwrap();
    let name = top.split_whitespace().last().unwrap();
    let d = b[name] as i64 - a[name] as i64;
    let shown: i64 = top
        .split_whitespace()
        .nth(2)
        .unwrap()
        .replace([',', '+'], "")
        .parse()
        .unwrap();
    assert_eq!(shown, d, "{top}");
    assert!(d > 0);
    // Per instruction of one procedure.
    let per = ok(&[
        "dcpi",
        "diff",
        "workload",
        "workload.run1.dcpi",
        "workload.run2.dcpi",
        "--proc",
        "fnv1a",
    ]);
    assert!(per.contains("imul"), "{per}");
    // Different events cannot be compared.
    let e = fails(&[
        "dcpi",
        "diff",
        "workload",
        "workload.run1.dcpi",
        "workload.run1.D1mr.dcpi",
    ]);
    assert!(e.contains("D1mr") && e.contains("Ir"), "{e}");
    let e = fails(&[
        "dcpi",
        "prof",
        "workload",
        "workload.run1.dcpi",
        "workload.run1.D1mr.dcpi",
    ]);
    assert!(e.contains("different events"), "{e}");
}

#[test]
fn conversions_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let cg = dir.path().join("x.callgrind");
    let back = dir.path().join("x.dcpi");
    // DCPI → Callgrind → DCPI gives the same bytes.
    for f in [
        "workload.run1.dcpi",
        "workload.run1.D1mr.dcpi",
        "workload.pie.dcpi",
    ] {
        let img = if f.contains("pie") {
            "workload.pie"
        } else {
            "workload"
        };
        ok(&["convert", f, "--binary", img, "-o", s(&cg)]);
        ok(&["convert", s(&cg), "--to", "dcpi", "-o", s(&back)]);
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(real(f)).unwrap(),
            "{f}"
        );
    }
    // Without the image too, and for the hand-made files.
    for f in [
        "minimal.dcpi",
        "full.dcpi",
        "alpha.dcpi",
        "tabs-unpadded.dcpi",
    ] {
        let o = tally(&["convert", s(&spec(f)), "-o", s(&cg)]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        ok(&["convert", s(&cg), "-o", s(&back)]);
        assert_eq!(
            dcpi::read_file(&back).unwrap(),
            dcpi::read_file(&spec(f)).unwrap(),
            "{f}"
        );
    }
    // The Callgrind file is one tally annotate and check read, with the
    // symbols and lines of the image.
    ok(&[
        "convert",
        "workload.run1.dcpi",
        "--binary",
        "workload",
        "-o",
        s(&cg),
    ]);
    let ann = ok(&["annotate", "--show-percs=no", s(&cg)]);
    assert!(ann.contains("957,404  PROGRAM TOTALS"), "{ann}");
    assert!(ann.contains("./src/workload.c:make_word"), "{ann}");
    ok(&["check", s(&cg)]);
}

#[test]
fn pie_offsets_are_image_offsets() {
    // Valgrind ran the PIE build at 0x108000; the DCPI offsets must still
    // land in the right symbols of the image.
    let out = ok(&["dcpi", "prof", "workload.pie", "workload.pie.dcpi"]);
    let rows = prof_rows(&out);
    let want = callgrind_ir(&real("workload.pie.callgrind"));
    let got: BTreeMap<String, u64> = rows.iter().map(|r| (r.3.clone(), r.0)).collect();
    same_counts(&got, &want);
    let total: u64 = rows.iter().map(|r| r.0).sum();
    let p = dcpi::read_file(&real("workload.pie.dcpi")).unwrap();
    assert_eq!(total, p.total());
}

#[test]
fn bad_input_is_a_clear_error() {
    let e = fails(&["dcpi", "cat", s(&spec("overlap.dcpi"))]);
    assert!(
        e.contains("overlap.dcpi") && e.contains("byte") && e.contains("overlaps"),
        "{e}"
    );
    let e = fails(&["dcpi", "cat", s(&spec("footer-sum.dcpi"))]);
    assert!(e.contains("footer"), "{e}");
    let e = fails(&["dcpi", "cat", s(&spec("no-samples-line.dcpi"))]);
    assert!(e.contains("no `samples` line"), "{e}");
    // A Callgrind file without instruction positions cannot become DCPI.
    let lines = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/merge/workload.a.lines.callgrind.out");
    let e = fails(&[
        "convert",
        s(&lines),
        "--to",
        "dcpi",
        "-o",
        "/tmp/never.dcpi",
    ]);
    assert!(e.contains("instruction"), "{e}");
    assert!(!Path::new("/tmp/never.dcpi").exists());
    // Options that do not fit together: a usage error, exit status 2.
    let o = in_real().run(&[
        "convert",
        s(&lines),
        "--event",
        "Ir",
        "-o",
        "/tmp/never.callgrind",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("only for DCPI output"), "{e}");
    // The wrong image: a warning.
    let o = tally(&["dcpi", "prof", "/bin/true", "workload.run1.dcpi"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not of /bin/true"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let e = fails(&["dcpi", "prof", "/nonexistent", "workload.run1.dcpi"]);
    assert!(e.contains("/nonexistent"), "{e}");
}

#[test]
fn cat_dumps_header_and_addresses() {
    let out = ok(&["dcpi", "cat", s(&spec("full.dcpi"))]);
    assert!(out.starts_with("image                3f2a9c01\n"), "{out}");
    assert!(
        out.contains("vendor-note          kept\tverbatim  by writers\n"),
        "{out}"
    );
    assert!(
        out.contains("0x000000401000        1\n0x000000401002        2\n"),
        "{out}"
    );
    assert!(
        out.ends_with("# 4 sampled addresses, 19 samples\n"),
        "{out}"
    );
    let off = ok(&["dcpi", "cat", "--offsets", s(&spec("full.dcpi"))]);
    assert!(off.contains("0x000000000023        9\n"), "{off}");
}

#[test]
fn check_reads_dcpi_files() {
    let out = ok(&["check", "workload.run1.dcpi"]);
    assert!(out.contains("valid DCPI profile"), "{out}");
    assert!(out.contains("samples:    957404 at 583 addresses"), "{out}");
    let o = tally(&["check", "workload.run1.dcpi", s(&spec("decreasing.dcpi"))]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("decreasing.dcpi: byte 128: chunk offsets must increase"),
        "{e}"
    );
}
