//! The column arithmetic of the Callgrind layout, whose widths are
//! computed (the gmon layout is compared with GNU gprof byte for byte by
//! the CLI's tests): on real profiles with recursion and cycles, every
//! name stands in the column its heading names.

use std::path::PathBuf;

use tally_formats::Input;

use tally_analysis::gprof::{Options, Report, callgrind};

fn report(name: &str) -> Report {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/callgrind")
        .join(name);
    let input = Input::open(&path).expect("fixture");
    let (profile, _) = tally_formats::callgrind::read::<u64>(input).expect("profile");
    callgrind::analyse_profile(&profile, None, &Options::default(), name).expect("report")
}

/// Where `word` starts in `heading`.
fn column(heading: &str, word: &str) -> usize {
    heading.rfind(word).expect("heading")
}

/// Whether a name starts at `pos`, after a blank.
fn name_at(line: &str, pos: usize) -> bool {
    let b = line.as_bytes();
    pos >= 1 && b.len() > pos && b[pos] != b' ' && b[pos - 1] == b' '
}

fn check(name: &str) {
    let text = super::write(&report(name), &Options::default());
    let (flat, graph) = text.split_once("\x0c\n").expect("two parts");
    let graph = graph.split("\x0c\n").next().expect("call graph");

    let mut lines = flat.lines().skip_while(|l| !l.starts_with("  time"));
    let heading = lines.next().expect("flat headings");
    let pos = column(heading, "name");
    let rows: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
    assert!(rows.len() > 3, "{name}: flat rows");
    for row in rows {
        assert!(name_at(row, pos), "{name}: flat row `{row}`");
    }

    let mut lines = graph.lines().skip_while(|l| !l.starts_with("index"));
    let heading = lines.next().expect("graph headings");
    let pos = column(heading, "name");
    let mut own = 0;
    for line in lines.take_while(|l| !l.is_empty()) {
        if line.starts_with('-') {
            assert!(line.bytes().all(|b| b == b'-'), "{name}: separator");
        } else if line.starts_with('[') {
            // A node's own line: its name four columns left of its callers'.
            assert!(name_at(line, pos - 4), "{name}: own line `{line}`");
            own += 1;
        } else {
            assert!(name_at(line, pos), "{name}: arc line `{line}`");
        }
    }
    assert!(own > 3, "{name}: call graph entries");
}

#[test]
fn names_stand_under_their_heading() {
    for name in [
        "recursion.default.out",
        "mutual.default.out",
        "workload.default.out",
    ] {
        check(name);
    }
}

/// The percentages and counts written without `fmt` read as `fmt` writes
/// them, at the edges of the short cuts (half a unit of the last decimal,
/// negative zero, 64-bit counts) and on values spread over the range.
#[test]
fn cells_written_by_hand_match_fmt() {
    let mut values = vec![
        0.0,
        -0.0,
        0.05,
        0.049_999_999_999_999_996,
        0.005,
        0.004_999_999_999_999_999,
        0.25,
        0.35,
        99.95,
        100.0,
        -0.01,
        f64::MIN_POSITIVE,
        f64::INFINITY,
        f64::NAN,
    ];
    let mut x = 1e-9;
    while x < 1e12 {
        values.push(x);
        values.push(-x);
        x *= 1.37;
    }
    // Ties and near-ties of each number of decimals, and values spread
    // at random over many magnitudes (a fixed xorshift sequence).
    for k in 0..2000 {
        for d in [1.0, 10.0, 100.0] {
            let t = (f64::from(k) + 0.5) / d;
            values.extend([
                t,
                f64::from_bits(t.to_bits() + 1),
                f64::from_bits(t.to_bits() - 1),
            ]);
        }
    }
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mantissa = (state >> 11) as f64 / (1u64 << 53) as f64;
        let exp = ((state & 63) as i32) - 30;
        values.push(mantissa * 2f64.powi(exp));
    }
    for v in values {
        for (w, d) in [(5, 1), (6, 2), (9, 2), (3, 0), (1, 1)] {
            let mut buf = Vec::new();
            super::columns::fixed(&mut buf, v, w, d);
            assert_eq!(String::from_utf8(buf).unwrap(), format!("{v:w$.d$}"), "{v}");
        }
    }
    for v in [
        0i128,
        7,
        -7,
        1 << 40,
        u64::MAX as i128,
        u64::MAX as i128 + 1,
        i128::MIN + 1,
    ] {
        for left in [false, true] {
            let mut buf = Vec::new();
            super::columns::number(&mut buf, v, 12, left);
            let want = if left {
                format!("{v:<12}")
            } else {
                format!("{v:>12}")
            };
            assert_eq!(String::from_utf8(buf).unwrap(), want);
        }
    }
}

/// The call graph laid out on two threads, in blocks of any size, is the
/// one laid out on one.
#[test]
fn call_graph_on_two_threads_is_the_same() {
    let r = report("workload.combo.out");
    let opts = Options::default();
    let c = super::Columns::of(&r, &opts).expect("columns");
    let g = r.graph.as_ref().expect("graph");
    let lay = |entries: usize| {
        let mut out = Vec::new();
        let mut s = super::Sink {
            buf: Vec::new(),
            out: &mut out,
        };
        super::call_graph(&r, &c, g, &opts, &mut s, entries).expect("laid out");
        let rest = s.buf;
        out.extend_from_slice(&rest);
        out
    };
    let one = lay(usize::MAX / 2);
    assert!(one.len() > 10_000);
    for entries in [1, 2, 3, 7, 100] {
        assert!(lay(entries) == one, "blocks of {entries}");
    }
}
