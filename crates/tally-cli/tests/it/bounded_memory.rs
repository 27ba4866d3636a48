//! `convert` and `merge` of an input whose lines repeat: a gzip file of a
//! few MB that expands to hundreds of MB of valid lines converts and
//! merges under a memory ceiling far below its expanded size, because
//! repeated records are summed as they are read. The expected result is
//! built independently, by doubling a real Valgrind profile with `tally
//! merge` (checked against callgrind_annotate on a small copy).

use std::io::Write;
use std::path::{Path, PathBuf};
use tally_testutil::{data, path_str, tally, text};

/// A real Callgrind profile cut in three: the header (with [`SUMMARY`] in
/// place of its `summary:` line), the body of records, and the totals.
struct Cut {
    header: Vec<u8>,
    body: Vec<u8>,
    totals: Vec<u64>,
}

fn cut(path: &Path) -> Cut {
    let all = std::fs::read(path).unwrap();
    let mut header = Vec::new();
    let mut body = Vec::new();
    let mut totals = Vec::new();
    let mut in_body = false;
    for line in all.split_inclusive(|&b| b == b'\n') {
        let t = String::from_utf8_lossy(line);
        if let Some(v) = t.strip_prefix("totals:") {
            totals = v.split_whitespace().map(|n| n.parse().unwrap()).collect();
            continue;
        }
        if t.starts_with("summary:") {
            header.extend_from_slice(SUMMARY);
            continue;
        }
        in_body |= ["ob=", "fl=", "fn="].iter().any(|k| t.starts_with(k));
        if in_body {
            body.extend_from_slice(line);
        } else {
            header.extend_from_slice(line);
        }
    }
    assert!(!body.is_empty() && !totals.is_empty());
    Cut {
        header,
        body,
        totals,
    }
}

/// Where the header's `summary:` line goes.
const SUMMARY: &[u8] = b"\0summary\n";

/// The profile with its body `copies` times, and the totals it states.
fn repeated(c: &Cut, copies: u64, out: &mut dyn Write) {
    let totals: Vec<String> = c.totals.iter().map(|t| (t * copies).to_string()).collect();
    let totals = totals.join(" ");
    let summary = format!("summary: {totals}\n");
    let header = String::from_utf8(c.header.clone()).unwrap();
    let header = header.replace(std::str::from_utf8(SUMMARY).unwrap(), &summary);
    out.write_all(header.as_bytes()).unwrap();
    for _ in 0..copies {
        out.write_all(&c.body).unwrap();
    }
    writeln!(out, "\ntotals: {totals}").unwrap();
}

/// Asserts that two files are equal, naming them (not dumping them).
fn same(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(x == y, "{} and {} differ", a.display(), b.display());
}

/// `tally merge` of a profile with itself, `times` times over: the
/// profile with every count multiplied by 2^times.
fn doubled(dir: &Path, src: &Path, times: u32) -> Vec<PathBuf> {
    let mut all = vec![src.to_path_buf()];
    for i in 1..=times {
        let prev = all.last().unwrap().clone();
        let next = dir.join(format!("x{i}.callgrind"));
        let p = path_str(&prev);
        tally!().ok(&["merge", p, p, "-o", path_str(&next)]);
        all.push(next);
    }
    all
}

fn callgrind_annotate(path: &Path) -> String {
    let o = std::process::Command::new("callgrind_annotate")
        .arg(path)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Everything but the lines that name the file.
    text(&o.stdout)
        .lines()
        .filter(|l| !l.contains(path_str(path)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The doubling is right: callgrind_annotate reads 8 copies of the body
/// as it reads the profile merged three times with itself.
#[test]
fn doubling_matches_callgrind_annotate() {
    if !tally_testutil::require(&["callgrind_annotate"]) {
        return;
    }
    let dir = tally_testutil::temp_dir();
    let src = data("callgrind/mutual.dumpevery.out");
    let x = doubled(dir.path(), &src, 3);
    let small = dir.path().join("small.callgrind");
    let mut f = std::fs::File::create(&small).unwrap();
    repeated(&cut(&src), 8, &mut f);
    drop(f);
    assert_eq!(callgrind_annotate(&small), callgrind_annotate(&x[3]));
}

/// Repeated records with jumps, under merge (which always sums repeats
/// as it reads): two copies of a body merge as two files do.
#[test]
fn repeated_jumps_merge_as_two_files() {
    let dir = tally_testutil::temp_dir();
    let src = data("callgrind/recursion.jumps.out");
    let twice = dir.path().join("twice.callgrind");
    let mut f = std::fs::File::create(&twice).unwrap();
    repeated(&cut(&src), 2, &mut f);
    drop(f);
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let s = path_str(&src);
    tally!().ok(&["merge", s, s, "-o", path_str(&a)]);
    tally!().ok(&["merge", path_str(&twice), "-o", path_str(&b)]);
    same(&a, &b);
}

/// 2^14 copies of a 16 KB body: 256 MiB of lines in a gzip file of a few
/// MB, converted and merged under a ceiling of 64 MiB.
#[test]
fn a_large_repeating_input_converts_and_merges_in_little_memory() {
    const TIMES: u32 = 14;
    let dir = tally_testutil::temp_dir();
    let src = data("callgrind/mutual.dumpevery.out");
    let c = cut(&src);
    let big = dir.path().join("big.callgrind.gz");
    let f = std::io::BufWriter::new(std::fs::File::create(&big).unwrap());
    let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    repeated(&c, 1 << TIMES, &mut z);
    z.finish().unwrap().flush().unwrap();
    let expanded = (c.body.len() as u64) << TIMES;
    assert!(expanded > 200 << 20);
    let x = doubled(dir.path(), &src, TIMES + 1);
    let g = path_str(&big);
    let run = |args: &[&str]| {
        let o = tally!()
            .command()
            .args(args)
            .env("TALLY_MAX_MEMORY", "64M")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    };

    // convert: the stated totals are the sum of every copy, and the
    // records are those of the doubled profile (merge of one profile puts
    // them in merge's order).
    let conv = dir.path().join("conv.callgrind");
    run(&["convert", g, "-o", path_str(&conv)]);
    let out = std::fs::read_to_string(&conv).unwrap();
    let totals = out
        .lines()
        .find_map(|l| l.strip_prefix("totals: "))
        .unwrap()
        .to_string();
    let want: Vec<String> = c.totals.iter().map(|t| (t << TIMES).to_string()).collect();
    assert_eq!(totals, want.join(" "));
    let norm = dir.path().join("norm.callgrind");
    tally!().ok(&["merge", path_str(&conv), "-o", path_str(&norm)]);
    same(&norm, &x[TIMES as usize]);

    // merge: of the file alone, and of the file with itself.
    let m = dir.path().join("m.callgrind");
    run(&["merge", g, "-o", path_str(&m)]);
    same(&m, &x[TIMES as usize]);
    run(&["merge", g, g, "-o", path_str(&m)]);
    same(&m, &x[TIMES as usize + 1]);
}
