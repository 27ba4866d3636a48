//! The plain Cachegrind way of `tally merge` and `tally diff`
//! (`tally_formats::cachegrind::flat`) against the general one (each input
//! folded, the combiner, the Cachegrind writer), byte for byte, on real
//! Cachegrind files and on edits of them: other event lists, files missing
//! from one side, a function under two `fl=`, blocks met twice, unsorted
//! and repeated lines, leading zeros, compressed names.

use tally_analysis::Folding;
use tally_analysis::combine::{CombineOptions, Combiner, Sign};
use tally_formats::Source;
use tally_formats::cachegrind::flat::{self, FlatInput};
use tally_model::{AnyCost, Cost};

fn real(name: &str) -> Vec<u8> {
    std::fs::read(tally_testutil::data(&format!("cachegrind/{name}"))).expect("fixture")
}

/// Each input read as `tally merge` and `tally diff` read them: folded,
/// per function or not.
fn folded(bytes: &[u8], per_function: bool) -> (tally_model::Profile<u64>, Folding<u64>) {
    let source = Source::from_bytes("input", bytes.to_vec());
    let make = || {
        if per_function {
            Folding::per_function()
        } else {
            Folding::default()
        }
    };
    let read = tally_formats::parse_any(&source, make(), Folding::<i64>::default, None)
        .expect("a readable input");
    let AnyCost::Unsigned((outcome, folding)) = read else {
        panic!("an unsigned input");
    };
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
    (outcome.profile, folding)
}

fn write<C: Cost>(p: &tally_model::Profile<C>) -> Vec<u8> {
    let mut out = Vec::new();
    tally_formats::cachegrind::write(p, &mut out).expect("written");
    out
}

/// `tally merge`'s general way: inputs folded and summed in order.
fn general_merge(inputs: &[&[u8]]) -> Vec<u8> {
    let mut c = Combiner::<u64>::new(CombineOptions {
        keep_zero: true,
        ..Default::default()
    });
    for bytes in inputs {
        let (p, f) = folded(bytes, false);
        c.add_folded_owned(&p, f, Sign::Plus, "input")
            .expect("summed");
    }
    write(&c.finish().expect("finished").profile)
}

/// `tally diff`'s general way for Cachegrind inputs: per function, B − A,
/// described as `tally diff` describes it.
fn general_diff(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut c = Combiner::<i64>::new(CombineOptions {
        combine_parts: true,
        per_function: true,
        ..Default::default()
    });
    let (pa, fa) = folded(a, true);
    let (pb, fb) = folded(b, true);
    c.add_folded(&pa, &fa, Sign::Minus, "A")
        .expect("subtracted");
    c.add_folded(&pb, &fb, Sign::Plus, "B").expect("added");
    let mut d = c.finish().expect("finished");
    let cmd = |p: &tally_model::Profile<u64>| {
        p.parts[0]
            .info
            .cmd
            .clone()
            .unwrap_or_default()
            .trim_ascii()
            .to_vec()
    };
    for part in &mut d.profile.parts {
        part.info.desc = vec![(b"Files compared".to_vec(), b"   A; B".to_vec())];
        let mut both = cmd(&pa);
        both.extend_from_slice(b"; ");
        both.extend_from_slice(&cmd(&pb));
        part.info.cmd = Some(both);
    }
    write(&d.profile)
}

fn scan(bytes: &[u8]) -> Option<FlatInput> {
    FlatInput::scan(bytes.to_vec())
}

fn flat_merge(inputs: &[&[u8]]) -> Option<Vec<u8>> {
    let scanned: Option<Vec<FlatInput>> = inputs.iter().map(|b| scan(b)).collect();
    let scanned = scanned?;
    let plan = flat::merge_plan(&scanned)?;
    let mut out = Vec::new();
    plan.write(&mut out).expect("written");
    Some(out)
}

fn flat_diff(a: &[u8], b: &[u8]) -> Option<Vec<u8>> {
    let (a, b) = (scan(a)?, scan(b)?);
    let plan = flat::diff_plan(&a, &b, ["A", "B"])?;
    let mut out = Vec::new();
    plan.write(&mut out).expect("written");
    Some(out)
}

/// The flat way takes the inputs and agrees with the general way, for a
/// merge of them in order and a diff of the first two both ways.
fn agrees(inputs: &[&[u8]]) {
    let merged = flat_merge(inputs).expect("the flat way takes these inputs");
    assert_eq!(
        tally_testutil::text(&merged),
        tally_testutil::text(&general_merge(inputs))
    );
    let (a, b) = (inputs[0], inputs[1]);
    for (a, b) in [(a, b), (b, a)] {
        let d = flat_diff(a, b).expect("the flat way takes these inputs");
        assert_eq!(
            tally_testutil::text(&d),
            tally_testutil::text(&general_diff(a, b))
        );
    }
}

/// Text edits of a profile, its closing `summary:` stating the edited
/// counts' totals.
fn edit(bytes: &[u8], f: impl FnOnce(&mut Vec<String>)) -> Vec<u8> {
    let mut lines: Vec<String> = String::from_utf8(bytes.to_vec())
        .expect("text")
        .lines()
        .map(str::to_string)
        .collect();
    f(&mut lines);
    let mut totals: Vec<u64> = Vec::new();
    for l in lines
        .iter()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
    {
        let counts = l
            .split(' ')
            .skip(1)
            .map(|v| v.parse::<u64>().expect("a count"));
        for (i, v) in counts.enumerate() {
            if totals.len() <= i {
                totals.push(0);
            }
            totals[i] += v;
        }
    }
    let last = lines.len() - 1;
    assert!(lines[last].starts_with("summary:"));
    let stated: Vec<String> = totals.iter().map(u64::to_string).collect();
    lines[last] = format!("summary: {}", stated.join(" "));
    let mut out = lines.join("\n").into_bytes();
    out.push(b'\n');
    out
}

/// The index of the first line starting with `prefix` at or after `from`.
fn find(lines: &[String], prefix: &str, from: usize) -> usize {
    from + lines[from..]
        .iter()
        .position(|l| l.starts_with(prefix))
        .expect("a line with the prefix")
}

#[test]
fn real_pairs_agree() {
    let (a, b) = (real("workload.out"), real("workload.alt.out"));
    agrees(&[&a, &b]);
    agrees(&[&a, &b, &a]);
    agrees(&[&a, &a]);
    let (x, y) = (real("threads.branch.out"), real("mutual.branch.out"));
    agrees(&[&x, &y]);
    agrees(&[&real("inline.out"), &real("recursion.out"), &a]);
}

#[test]
fn files_missing_from_one_side_agree() {
    let a = real("workload.out");
    let b = real("workload.alt.out");
    // B without its second file's blocks, and without its first function.
    let fewer = edit(&b, |l| {
        let first = find(l, "fl=", 0);
        let second = find(l, "fl=", first + 1);
        let third = find(l, "fl=", second + 1);
        l.drain(second..third);
        let f = find(l, "fn=", 0);
        let g = find(l, "fn=", f + 1);
        l.drain(f + 1..g);
    });
    agrees(&[&a, &fewer]);
}

#[test]
fn file_changes_and_blocks_met_twice_agree() {
    let a = real("workload.out");
    let b = real("workload.alt.out");
    // A function's lines split over two files, and its first block met
    // again at the end.
    let split = edit(&a, |l| {
        let f = find(l, "fn=", 0);
        let fn_line = l[f].clone();
        let first_fl = l[find(l, "fl=", 0)].clone();
        l.insert(f + 3, "fl=other/file.c".to_string());
        l.insert(f + 4, fn_line.clone());
        let summary = l.len() - 1;
        let moved = l.remove(f + 1);
        l.insert(summary - 1, first_fl);
        l.insert(summary, fn_line);
        l.insert(summary + 1, moved);
    });
    agrees(&[&split, &b]);
    agrees(&[&b, &split]);
}

#[test]
fn unsorted_repeated_and_padded_lines_agree() {
    let a = real("workload.out");
    let b = real("workload.alt.out");
    let odd = edit(&a, |l| {
        let f = find(l, "fn=", 0);
        // Two lines swapped, one repeated, one with a leading zero.
        l.swap(f + 1, f + 2);
        let again = l[f + 3].clone();
        l.insert(f + 4, again);
        let padded = format!("0{}", l[f + 5]);
        l[f + 5] = padded;
    });
    agrees(&[&odd, &b]);
    agrees(&[&b, &odd]);
    agrees(&[&odd, &odd]);
}

#[test]
fn inputs_for_the_general_way_are_declined() {
    let a = real("workload.out");
    let b = real("workload.alt.out");
    assert!(scan(&a).is_some() && scan(&b).is_some());
    // Events in another order: the general way maps them.
    let reordered = edit(&b, |l| {
        let e = find(l, "events:", 0);
        l[e] = l[e].replacen("Ir I1mr", "I1mr Ir", 1);
        for line in l.iter_mut().skip(e + 1) {
            if line.starts_with(|c: char| c.is_ascii_digit()) && !line.starts_with("summary") {
                let mut v: Vec<&str> = line.split(' ').collect();
                v.swap(1, 2);
                *line = v.join(" ");
            }
        }
    });
    assert!(scan(&reordered).is_some());
    assert!(flat_merge(&[&a, &reordered]).is_none());
    assert!(flat_diff(&a, &reordered).is_none());
    let compressed = edit(&a, |l| {
        let f = find(l, "fn=", 0);
        l[f] = format!("fn=(1) {}", &l[f][3..]);
    });
    let mut stated_wrong = a.clone();
    let at = stated_wrong.len()
        - stated_wrong
            .rsplit(|&c| c == b':')
            .next()
            .map_or(0, <[u8]>::len);
    stated_wrong.insert(at + 1, b'1');
    let short_line = edit(&a, |l| {
        let f = find(l, "fn=", 0);
        l[f + 1] = l[f + 1].rsplit_once(' ').expect("counts").0.to_string();
    });
    let truncated = a[..a.len() / 2].to_vec();
    for declined in [&compressed, &stated_wrong, &short_line, &truncated] {
        assert!(scan(declined).is_none());
    }
    // The general way reads the compressed and short forms the same.
    assert_eq!(general_merge(&[&compressed, &b]), general_merge(&[&a, &b]));
}
