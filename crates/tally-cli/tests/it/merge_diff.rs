//! `tally merge`, `tally diff` and `tally annotate --diff` on real profiles
//! (tests/data/merge, made by its generate.sh), against cg_merge and cg_diff:
//! their committed outputs, and the tools run live (Valgrind is installed
//! wherever the tests run; CI installs it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tally_analysis::combine::{RecordKey, records};
use tally_testutil::{path_str as s, temp_dir as tmp};

fn data(rel: &str) -> PathBuf {
    tally_testutil::data("merge").join(rel)
}

fn ok(args: &[&str]) -> Output {
    tally_testutil::tally!().ok(args)
}

fn fails(args: &[&str]) -> String {
    tally_testutil::tally!().fails(args)
}

type Records = BTreeMap<RecordKey, Vec<i128>>;

/// A profile's records (see `records`), read signed so that diffs read too.
fn read(p: &Path) -> Records {
    let (prof, _) =
        tally_formats::read_file::<i64>(p, None).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    records(&prof)
}

fn summary_line(p: &Path) -> Vec<i64> {
    let text = std::fs::read_to_string(p).unwrap();
    let line = text
        .lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .unwrap_or_else(|| panic!("{}: no summary", p.display()));
    line.split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// Runs cg_merge or cg_diff; `false` (and a note) where Valgrind is not
/// installed, which fails under CI: the committed outputs are compared in
/// any case.
fn run_tool(tool: &str, args: &[&str], stdout_to: Option<&Path>) -> bool {
    if !tally_testutil::live(&[tool]) {
        return false;
    }
    let o = Command::new(tool)
        .args(args)
        .env("LC_ALL", "C")
        .output()
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
    assert!(
        o.status.success(),
        "{tool}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    if let Some(p) = stdout_to {
        std::fs::write(p, &o.stdout).unwrap();
    }
    true
}

const ABC: [&str; 3] = [
    "workload.a.cachegrind.out",
    "workload.b.cachegrind.out",
    "workload.c.cachegrind.out",
];

#[test]
fn merge_of_cachegrind_files_equals_cg_merge() {
    let d = tmp();
    let out = d.path().join("merged.out");
    let files: Vec<PathBuf> = ABC.iter().map(|f| data(f)).collect();
    let mut args = vec!["merge", "-o", s(&out)];
    args.extend(files.iter().map(|p| s(p)));
    ok(&args);
    let ours = read(&out);
    assert!(ours.len() > 4000, "{} records", ours.len());
    // The committed output of cg_merge, and cg_merge run now.
    assert_eq!(ours, read(&data("abc.cg_merge")));
    let live = d.path().join("live.cg_merge");
    let mut cg = vec!["-o", s(&live)];
    cg.extend(files.iter().map(|p| s(p)));
    if run_tool("cg_merge", &cg, None) {
        assert_eq!(ours, read(&live));
        assert_eq!(summary_line(&out), summary_line(&live));
    }
    assert_eq!(summary_line(&out), summary_line(&data("abc.cg_merge")));
    // cg_merge's other outputs: the first file's desc: and cmd: lines.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.starts_with("desc: I1 cache:"), "{}", &text[..200]);
    assert!(text.contains("\ncmd: ../bin/workload 1500 1\n"));
}

#[test]
fn merge_order_does_not_matter() {
    let d = tmp();
    let mut outs = Vec::new();
    for (i, order) in [[0, 1, 2], [2, 0, 1], [1, 2, 0]].iter().enumerate() {
        let out = d.path().join(format!("m{i}.out"));
        let files: Vec<PathBuf> = order.iter().map(|&k| data(ABC[k])).collect();
        let mut args = vec!["merge", "-o", s(&out)];
        args.extend(files.iter().map(|p| s(p)));
        ok(&args);
        outs.push(read(&out));
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
    // (a + b) + c
    let ab = d.path().join("ab.out");
    let abc = d.path().join("ab_c.out");
    ok(&["merge", "-o", s(&ab), s(&data(ABC[0])), s(&data(ABC[1]))]);
    ok(&["merge", "-o", s(&abc), s(&ab), s(&data(ABC[2]))]);
    assert_eq!(outs[0], read(&abc));
}

#[test]
fn diff_of_cachegrind_files_equals_cg_diff() {
    let d = tmp();
    let (a, b) = (data(ABC[0]), data(ABC[1]));
    let out = d.path().join("d.out");
    ok(&["diff", s(&a), s(&b), "-o", s(&out)]);
    let ours = read(&out);
    assert!(
        ours.values().any(|v| v.iter().any(|&x| x < 0)),
        "no decrease at all"
    );
    assert_eq!(ours, read(&data("ab.cg_diff")));
    let live = d.path().join("live.cg_diff");
    if run_tool("cg_diff", &[s(&a), s(&b)], Some(&live)) {
        assert_eq!(ours, read(&live));
        assert_eq!(summary_line(&out), summary_line(&live));
    }
    assert_eq!(summary_line(&out), summary_line(&data("ab.cg_diff")));
    // Per function, at line 0, as cg_diff.
    assert!(
        ours.keys()
            .all(|k| matches!(k, RecordKey::Line(_, _, p) if p == &[0]))
    );
    // Valid for check and annotate.
    let o = ok(&["check", s(&out)]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("signed costs"));
    ok(&["annotate", s(&out)]);
}

#[test]
fn diff_renames_as_cg_diff_does() {
    let d = tmp();
    let (a, b, c) = (data(ABC[0]), data(ABC[1]), data(ABC[2]));
    let out = d.path().join("mod.out");
    let (mf, mn) = (r"s/.*\///", r"s/\.(part|constprop|isra)\.\d+$//g");
    ok(&[
        "diff",
        &format!("--mod-filename={mf}"),
        &format!("--mod-funcname={mn}"),
        s(&a),
        s(&b),
        "-o",
        s(&out),
    ]);
    let ours = read(&out);
    assert_eq!(ours, read(&data("ab.mod.cg_diff")));
    let live = d.path().join("live.cg_diff");
    let ran = run_tool(
        "cg_diff",
        &[
            &format!("--mod-filename={mf}"),
            &format!("--mod-funcname={mn}"),
            s(&a),
            s(&b),
        ],
        Some(&live),
    );
    if ran {
        assert_eq!(ours, read(&live));
    }
    let keys: Vec<_> = ours.keys().collect();
    assert!(keys.iter().all(|k| match k {
        RecordKey::Line(f, file, _) => !file.contains(&b'/') && !f[2].ends_with(b".part.0"),
        _ => false,
    }));
    // The `i` flag.
    let out = d.path().join("modi.out");
    ok(&[
        "diff",
        "--mod-funcname=s/STR/x/i",
        s(&a),
        s(&c),
        "-o",
        s(&out),
    ]);
    assert_eq!(read(&out), read(&data("ac.modi.cg_diff")));
}

/// `--mod-filename` and `--mod-funcname` apply once to each name, as in
/// cg_diff, with and without `--json` (whose path sums each input first):
/// a substitution that is not idempotent tells once from twice.
#[test]
fn diff_renames_each_name_once() {
    let d = tmp();
    let (a, b) = (
        data("workload.a.callgrind.out"),
        data("workload.b.callgrind.out"),
    );
    let plain = d.path().join("plain.out");
    ok(&["diff", s(&a), s(&b), "-o", s(&plain)]);
    // The first `a` of a function name doubled, the first `c` of a file
    // name: both one-to-one, so no two records meet.
    let once = |n: &[u8], c: u8| {
        let mut n = n.to_vec();
        if let Some(i) = n.iter().position(|&x| x == c) {
            n.insert(i, c);
        }
        n
    };
    let func = |f: &[Vec<u8>; 3]| [f[0].clone(), once(&f[1], b'c'), once(&f[2], b'a')];
    let file = |f: &[u8]| once(f, b'c');
    let want: Records = read(&plain)
        .into_iter()
        .map(|(k, v)| {
            let k = match k {
                RecordKey::Line(f, fl, p) => RecordKey::Line(func(&f), file(&fl), p),
                RecordKey::Call(f, fl, g, p, q) => {
                    RecordKey::Call(func(&f), file(&fl), func(&g), p, q)
                }
                RecordKey::Jump(f, fl, g, gl, c, p, q) => {
                    RecordKey::Jump(func(&f), file(&fl), func(&g), file(&gl), c, p, q)
                }
            };
            (k, v)
        })
        .collect();
    assert!(want.keys().any(|k| matches!(k, RecordKey::Call(..))));
    for json in [false, true] {
        let out = d.path().join(format!("renamed.{json}.out"));
        let mut args = vec!["diff", "--mod-funcname=s/a/aa/", "--mod-filename=s/c/cc/"];
        if json {
            args.push("--json");
        }
        args.extend([s(&a), s(&b), "-o", s(&out)]);
        ok(&args);
        assert_eq!(read(&out), want, "--json: {json}");
    }
}

#[test]
fn callgrind_diff_keeps_lines_calls_and_jumps_and_merge_undoes_it() {
    let d = tmp();
    let (a, b) = (
        data("workload.a.callgrind.out"),
        data("workload.b.callgrind.out"),
    );
    let diff = d.path().join("d.callgrind");
    ok(&["diff", s(&a), s(&b), "-o", s(&diff)]);
    let rd = read(&diff);
    let calls = rd
        .keys()
        .filter(|k| matches!(k, RecordKey::Call(..)))
        .count();
    let jumps = rd
        .keys()
        .filter(|k| matches!(k, RecordKey::Jump(..)))
        .count();
    let lines = rd
        .keys()
        .filter(|k| matches!(k, RecordKey::Line(..)))
        .count();
    assert!(
        calls > 10 && jumps > 10 && lines > 100,
        "{lines} {calls} {jumps}"
    );
    // Every delta is B − A, record by record.
    let (ra, rb) = (read(&a), read(&b));
    for (k, v) in &rd {
        let zero = vec![0; v.len()];
        let want: Vec<i128> = rb
            .get(k)
            .unwrap_or(&zero)
            .iter()
            .zip(ra.get(k).unwrap_or(&zero))
            .map(|(y, x)| y - x)
            .collect();
        assert_eq!(v, &want, "{k:?}");
    }
    // merge(A, diff(A, B)) == B.
    let back = d.path().join("back.callgrind");
    ok(&["merge", s(&a), s(&diff), "-o", s(&back)]);
    assert_eq!(read(&back), rb);
    // diff(A, A) is empty and its totals zero.
    let zero = d.path().join("zero.callgrind");
    ok(&["diff", s(&a), s(&a), "-o", s(&zero)]);
    assert!(read(&zero).is_empty());
    assert_eq!(summary_line(&zero), vec![0]);
    // check and annotate read the diff; annotate --diff shows the same.
    ok(&["check", s(&diff)]);
    let direct = ok(&["annotate", "--diff", "--inclusive=yes", s(&a), s(&b)]);
    let via_file = ok(&["annotate", "--inclusive=yes", "--threshold=99", s(&diff)]);
    let body = |o: &Output| {
        let t = String::from_utf8_lossy(&o.stdout).into_owned();
        t.split_once("PROGRAM TOTALS")
            .map(|x| x.0.to_string())
            .unwrap()
    };
    assert_eq!(body(&direct).lines().last(), body(&via_file).lines().last());
    let shown = String::from_utf8_lossy(&direct.stdout).into_owned();
    assert!(shown.contains("src/workload.c:main"), "{shown}");
}

#[test]
fn annotate_diff_ranks_decreases_too() {
    // B − A with A the bigger run: everything shrinks, and the rows still
    // come largest change first.
    let (a, b) = (
        data("workload.b.callgrind.out"),
        data("workload.a.callgrind.out"),
    );
    let o = ok(&["annotate", "--diff", s(&a), s(&b)]);
    let t = String::from_utf8_lossy(&o.stdout).into_owned();
    let rows: Vec<i64> = t
        .split_once("file:function")
        .unwrap()
        .1
        .lines()
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|v| v.replace(',', "").parse().ok())
        .collect();
    assert!(rows.len() > 5, "{t}");
    assert!(rows[0] < 0, "{t}");
    assert!(
        rows.windows(2).all(|w| w[0].abs() >= w[1].abs()),
        "{rows:?}"
    );
}

#[test]
fn diff_json_summarises_the_largest_changes() {
    let (a, b) = (
        data("workload.a.callgrind.out"),
        data("workload.b.callgrind.out"),
    );
    let o = ok(&["diff", "--json", "--top", "5", s(&a), s(&b)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["events"][0], "Ir");
    let t = &v["totals"];
    assert_eq!(
        t["delta"][0].as_i64().unwrap(),
        t["b"][0].as_i64().unwrap() - t["a"][0].as_i64().unwrap()
    );
    let f = v["functions"].as_array().unwrap();
    assert_eq!(f.len(), 5);
    let d: Vec<i64> = f.iter().map(|x| x["delta"][0].as_i64().unwrap()).collect();
    assert!(d.windows(2).all(|w| w[0].abs() >= w[1].abs()), "{d:?}");
    // The top function's delta is what the diff file holds for it.
    let rd = {
        let dir = tmp();
        let out = dir.path().join("d.callgrind");
        ok(&["diff", s(&a), s(&b), "-o", s(&out)]);
        read(&out)
    };
    let name = f[0]["function"].as_str().unwrap().as_bytes().to_vec();
    let sum: i128 = rd
        .iter()
        .filter_map(|(k, v)| match k {
            RecordKey::Line(f, _, _) if f[2] == name => Some(v[0]),
            _ => None,
        })
        .sum();
    assert_eq!(sum, i128::from(d[0]));
    let calls = v["calls"].as_array().unwrap();
    assert!(!calls.is_empty());
    assert!(calls[0]["count_delta"].is_i64());
}

#[test]
fn mismatches_are_clear_errors() {
    let d = tmp();
    let out = d.path().join("x.out");
    let (a, br) = (data(ABC[0]), data("workload.a.branch.cachegrind.out"));
    // Different events: the file that differs and both event lists.
    let e = fails(&["merge", s(&a), s(&br), "-o", s(&out)]);
    assert!(
        e.contains("workload.a.branch.cachegrind.out") && e.contains("Bc"),
        "{e}"
    );
    assert!(e.contains("--events"), "{e}");
    assert!(!out.exists());
    // ... unless the events are chosen.
    ok(&["merge", "--events=common", s(&a), s(&br), "-o", s(&out)]);
    let m = read(&out);
    let twice = {
        let t = d.path().join("twice.out");
        ok(&["merge", s(&a), s(&a), "-o", s(&t)]);
        read(&t)
    };
    assert_eq!(m, twice);
    let e = fails(&["merge", "--events=Ir,Bogus", s(&a), s(&br), "-o", s(&out)]);
    assert!(e.contains("Bogus"), "{e}");
    // Callgrind against Cachegrind.
    let cg = data("workload.a.callgrind.out");
    let e = fails(&["diff", s(&cg), s(&a), "-o", s(&out)]);
    assert!(e.contains("Callgrind") && e.contains("Cachegrind"), "{e}");
    let e = fails(&["merge", s(&cg), s(&a), "-o", s(&out)]);
    assert!(e.contains("Callgrind") && e.contains("Cachegrind"), "{e}");
    // Instruction-level against line-level Callgrind.
    let lines = data("workload.a.lines.callgrind.out");
    let e = fails(&["merge", s(&cg), s(&lines), "-o", s(&out)]);
    assert!(e.contains("positions"), "{e}");
    // Bad expressions.
    let e = fails(&["diff", "--mod-funcname=s/(?<=x)y//", s(&a), s(&a)]);
    assert!(e.contains("--mod-funcname"), "{e}");
    // A missing file.
    let e = fails(&["merge", s(&a), "/nonexistent.out", "-o", s(&out)]);
    assert!(e.contains("/nonexistent.out"), "{e}");
}

#[test]
fn merge_keeps_or_combines_parts() {
    let d = tmp();
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/callgrind");
    let dumps = base.join("recursion.combined.out");
    let kept = d.path().join("kept.out");
    let one = d.path().join("one.out");
    ok(&["merge", s(&dumps), s(&dumps), "-o", s(&kept)]);
    ok(&[
        "merge",
        "--combine-parts",
        s(&dumps),
        s(&dumps),
        "-o",
        s(&one),
    ]);
    let parts = |p: &Path| {
        let (prof, _) = tally_formats::read_file::<u64>(p, None).unwrap();
        prof
    };
    let (input, k, o) = (parts(&dumps), parts(&kept), parts(&one));
    assert!(input.parts.len() >= 3);
    assert_eq!(k.parts.len(), input.parts.len());
    assert_eq!(o.parts.len(), 1);
    // Part i of the output is twice part i of the input, totals included.
    for (pi, po) in input.parts.iter().zip(&k.parts) {
        let t: Vec<u64> = pi.lines.totals().unwrap().iter().map(|v| v * 2).collect();
        assert_eq!(po.lines.totals().unwrap(), t);
        assert_eq!(po.info.totals.as_ref(), Some(&t));
    }
    let all: Vec<u64> = input.totals().unwrap().iter().map(|v| v * 2).collect();
    assert_eq!(o.parts[0].info.totals.as_ref(), Some(&all));
    assert_eq!(read(&kept), read(&one));
}

/// Inputs are read on threads, but their warnings come in the order the
/// inputs are named, every time: the first input's reading is made the
/// slower one (a larger file), so that a race would show.
#[test]
fn warnings_come_in_input_order() {
    let dir = tmp();
    // A stated total above the cost lines: a warning naming the file.
    let small =
        std::fs::read_to_string(tally_testutil::data_dir().join("callgrind/workload.combo.out"))
            .unwrap();
    assert!(small.contains("summary:"));
    let a = dir.path().join("a.out");
    let b = dir.path().join("b.out");
    let c = dir.path().join("c.out");
    // A: the same profile with many more (zero-cost) lines, so it reads last.
    let mut big = small.clone();
    big.push_str("fn=padding\n");
    for i in 0..200_000 {
        big.push_str(&format!("{} 0\n", i + 1));
    }
    std::fs::write(&a, big).unwrap();
    std::fs::write(&b, &small).unwrap();
    std::fs::write(&c, &small).unwrap();
    let first = |err: &str, p: &Path| err.find(&format!("{}: warning", p.display()));
    for _ in 0..5 {
        let out = ok(&["diff", s(&a), s(&b)]);
        let err = String::from_utf8_lossy(&out.stderr);
        let (wa, wb) = (first(&err, &a), first(&err, &b));
        assert!(wa.is_some() && wb.is_some() && wa < wb, "{err}");
        let merged = dir.path().join("m.out");
        let out = ok(&["merge", s(&a), s(&b), s(&c), "-o", s(&merged)]);
        let err = String::from_utf8_lossy(&out.stderr);
        let (wa, wb, wc) = (first(&err, &a), first(&err, &b), first(&err, &c));
        assert!(wa.is_some() && wa < wb && wb < wc, "{err}");
    }
}

/// Plain Cachegrind inputs are merged and diffed from their bytes; naming
/// every event with `--events` takes the general way (inputs folded into
/// the combiner). Both write the same bytes, on standard output and to a
/// file.
#[test]
fn plain_cachegrind_way_writes_what_the_general_way_writes() {
    let d = tmp();
    let a = data("workload.a.cachegrind.out");
    let b = data("workload.b.cachegrind.out");
    let c = data("workload.c.cachegrind.out");
    let text = std::fs::read_to_string(&a).unwrap();
    let events = text
        .lines()
        .find_map(|l| l.strip_prefix("events:"))
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(",");
    let runs: Vec<Vec<&str>> = vec![
        vec!["merge", s(&a), s(&b)],
        vec!["merge", s(&a), s(&b), s(&c), s(&a)],
        vec!["merge", s(&c), s(&c)],
        vec!["diff", s(&a), s(&b)],
        vec!["diff", s(&c), s(&a)],
        vec!["diff", s(&a), s(&a)],
    ];
    for args in runs {
        let plain = ok(&args);
        let mut general = args.clone();
        general.extend(["--events", &events]);
        let general = ok(&general);
        assert!(plain.stdout.len() > 300, "{args:?}");
        assert_eq!(
            tally_testutil::text(&plain.stdout),
            tally_testutil::text(&general.stdout),
            "{args:?}"
        );
        assert_eq!(plain.stderr, general.stderr, "{args:?}");
        let (x, y) = (d.path().join("plain.out"), d.path().join("general.out"));
        let mut to_file = args.clone();
        to_file.extend(["-o", s(&x)]);
        ok(&to_file);
        let mut general = args.clone();
        general.extend(["-o", s(&y), "--events", &events]);
        ok(&general);
        assert_eq!(
            std::fs::read(&x).unwrap(),
            std::fs::read(&y).unwrap(),
            "{args:?}"
        );
    }
}
