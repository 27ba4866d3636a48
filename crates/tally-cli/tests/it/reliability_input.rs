//! Inputs a hostile user may give: names of any length, profiles that
//! start with long comment blocks, counts whose sums do not fit 64 bits,
//! and inputs too large to hold in memory. Every command either prints a
//! correct result or fails with a message naming the input, the line and
//! the function; none panics, saturates or aborts.

use std::io::Write;
use std::path::{Path, PathBuf};
use tally_testutil::{data, path_str, tally, text};

/// A name longer than any formatting width (`format!` widths stop at 2^16).
fn long(c: char) -> String {
    std::iter::repeat_n(c, 70_000).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A Callgrind profile whose event and function names are 70,000 bytes
/// long, with a call so that trees and call graphs show them.
fn long_names_callgrind(event: &str, function: &str) -> String {
    format!(
        "# callgrind format\nversion: 1\npositions: line\nevents: Ir {event}\n\
         fl=a.c\nfn={function}\n1 5 6\ncfn=main\ncalls=2 3\n3 4 4\nfn=main\n2 7 8\n"
    )
}

#[test]
fn names_of_any_length_print_in_every_command() {
    let dir = tally_testutil::temp_dir();
    let (event, function) = (long('E'), long('f'));
    let cg = write(
        dir.path(),
        "long.callgrind",
        long_names_callgrind(&event, &function).as_bytes(),
    );
    let cache = write(
        dir.path(),
        "long.cachegrind",
        format!("events: Ir {event}\nfl=a.c\nfn={function}\n1 5 6\nfn=main\n2 7 8\n").as_bytes(),
    );
    let t = tally!();
    let d = dir.path().join("d.callgrind");
    t.ok(&["diff", path_str(&cg), path_str(&cg), "-o", path_str(&d)]);
    for input in [&cg, &cache] {
        let f = path_str(input);
        let runs: Vec<Vec<&str>> = vec![
            vec!["annotate", f],
            vec!["annotate", "--inclusive=yes", "--tree=both", f],
            vec!["gprof", f],
            vec!["gprof", "-b", "-q", f],
        ];
        for args in runs {
            let out = text(&t.ok(&args).stdout);
            assert!(out.contains(&function), "{args:?}: the full function name");
        }
        let out = text(&t.ok(&["check", f]).stdout);
        assert!(out.contains(&event), "check: the full event name");
        let out = text(&t.ok(&["annotate", "--show", &event, f]).stdout);
        assert!(out.contains(&event), "annotate: the full event name");
        let out = text(&t.ok(&["annotate", "--diff", f, f]).stdout);
        assert!(out.contains(&event), "annotate --diff: the full event name");
        let json: serde_json::Value =
            serde_json::from_slice(&t.ok(&["annotate", "--json", f]).stdout).unwrap();
        assert!(json.to_string().contains(&function), "annotate --json");
    }
    // A difference (signed counts) goes through the same columns.
    let out = text(&t.ok(&["annotate", path_str(&d)]).stdout);
    assert!(out.contains(&event));
    t.ok(&["check", path_str(&d)]);
    // Columns are capped: the numbers of a short event stay aligned.
    let out = text(&t.ok(&["check", path_str(&cg)]).stdout);
    let ir = out
        .lines()
        .find(|l| l.trim_start().starts_with("Ir "))
        .unwrap();
    assert!(ir.len() < 100, "the Ir line is padded to the cap: {ir}");
}

/// `file` with a block of comment lines of `bytes` bytes before it.
fn commented(file: &Path, bytes: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while out.len() < bytes {
        out.extend_from_slice(b"# a long comment block before the profile's first line\n");
    }
    out.extend(std::fs::read(file).unwrap());
    out
}

#[test]
fn a_profile_after_long_comments_is_a_profile_in_every_argument() {
    let dir = tally_testutil::temp_dir();
    let plain = data("spec/subpositions.callgrind");
    let p = path_str(&plain);
    let c = write(dir.path(), "c.callgrind", &commented(&plain, 4096));
    let c = path_str(&c);
    let t = tally!();
    // As the second profile of annotate: the same totals as the file twice.
    let twice = text(&t.ok(&["annotate", p, p]).stdout);
    let with = text(&t.ok(&["annotate", p, c]).stdout);
    let totals = |s: &str| {
        s.lines()
            .find(|l| l.contains("PROGRAM TOTALS"))
            .unwrap()
            .to_string()
    };
    assert_eq!(totals(&with), totals(&twice));
    // annotate --diff takes it as B.
    let d = text(&t.ok(&["annotate", "--diff", p, c]).stdout);
    assert_eq!(
        totals(&d),
        totals(&text(&t.ok(&["annotate", "--diff", p, p]).stdout))
    );
    // gprof reads it as a Callgrind profile, not a program.
    let g = text(&t.ok(&["gprof", "-b", c]).stdout);
    assert_eq!(g.replace(c, p), text(&t.ok(&["gprof", "-b", p]).stdout));
}

#[test]
fn comments_past_the_head_are_an_error_not_a_source_file() {
    let dir = tally_testutil::temp_dir();
    let plain = data("spec/subpositions.callgrind");
    let p = path_str(&plain);
    let c = write(dir.path(), "c.callgrind", &commented(&plain, 100_000));
    let c = path_str(&c);
    let t = tally!();
    for args in [
        vec!["annotate", p, c],
        vec!["annotate", "--diff", p, c],
        vec!["gprof", c],
    ] {
        let e = t.fails(&args);
        assert!(
            e.contains(c) && e.contains("only comment lines in its first 64 KiB"),
            "{args:?}: {e}"
        );
    }
    // The readers decide by content: as the first argument it is read.
    let first = text(&t.ok(&["annotate", c]).stdout);
    assert!(first.contains("PROGRAM TOTALS"));
}

const MAX: u64 = u64::MAX;

/// Two parts whose self costs of `big` sum past 2^64 − 1: each part fits.
fn parts_overflowing() -> String {
    format!(
        "# callgrind format\nversion: 1\nevents: Ir\npart: 1\nfl=a.c\nfn=big\n1 {MAX}\n\
         part: 2\nfl=a.c\nfn=big\n1 1\n"
    )
}

/// Call counts that sum past 2^64 − 1 (two sites of one arc).
fn calls_overflowing() -> String {
    format!(
        "# callgrind format\nversion: 1\nevents: Ir\nfl=a.c\nfn=caller\n1 1\n\
         cfn=callee\ncalls={MAX} 9\n2 1\ncfn=callee\ncalls=1 9\n3 1\nfn=callee\n9 1\n"
    )
}

#[test]
fn overflowing_sums_fail_with_file_line_and_function() {
    let dir = tally_testutil::temp_dir();
    let t = tally!();
    let parts = write(
        dir.path(),
        "parts.callgrind",
        parts_overflowing().as_bytes(),
    );
    let calls = write(
        dir.path(),
        "calls.callgrind",
        calls_overflowing().as_bytes(),
    );
    let (parts, calls) = (path_str(&parts), path_str(&calls));
    let out = path_str(&dir.path().join("out")).to_string();
    for (args, at, function) in [
        (vec!["annotate", parts], format!("{parts}:11:"), "big"),
        (vec!["check", parts], format!("{parts}:11:"), "big"),
        (
            vec!["convert", parts, "-o", &out],
            format!("{parts}:11:"),
            "big",
        ),
        (vec!["gprof", parts], format!("{parts}:11:"), "big"),
        (vec!["annotate", calls], format!("{calls}:12:"), "caller"),
        (vec!["gprof", calls], format!("{calls}:12:"), "caller"),
        (vec!["check", calls], format!("{calls}:12:"), "caller"),
    ] {
        let e = t.fails(&args);
        assert!(
            e.contains(&at) && e.contains(&format!("in function `{function}`")),
            "{args:?}: {e}"
        );
    }
    // Across files: the second file's line that passes the bound.
    let one = write(
        dir.path(),
        "one.callgrind",
        format!("events: Ir\nfl=a.c\nfn=big\n1 {MAX}\n").as_bytes(),
    );
    let one = path_str(&one);
    let two = write(
        dir.path(),
        "two.callgrind",
        b"events: Ir\nfl=a.c\nfn=small\n1 1\n",
    );
    let two = path_str(&two);
    let e = t.fails(&["annotate", one, two]);
    assert!(
        e.contains(&format!("{two}:4:")) && e.contains("`small`"),
        "{e}"
    );
    // merge and diff: the inputs are scanned again as one sum, so the
    // error names the input, the line and the function.
    let e = t.fails(&["merge", one, one, "-o", &out]);
    assert!(
        e.contains(&format!("{one}:4:")) && e.contains("in function `big`"),
        "{e}"
    );
    let e = t.fails(&["merge", "--combine-parts", parts, "-o", &out]);
    assert!(e.contains(&format!("{parts}:11:")), "{e}");
    // A diff is signed: 2^64 − 1 is refused at its line.
    let e = t.fails(&["diff", two, one, "-o", &out]);
    assert!(
        e.contains(&format!("{one}:4:")) && e.contains("does not fit"),
        "{e}"
    );
}

/// A difference whose magnitudes sum past 2^63 − 1 although each count
/// fits and each input alone sums below it: written, it could not be read
/// back, so `diff` refuses it at the input's line and function. (Each
/// input's own sum is no bound: B − A of B = 2^62 + 2^62 and A = 1 reads
/// back.)
#[test]
fn a_diff_that_could_not_be_read_back_is_refused_at_its_line() {
    let dir = tally_testutil::temp_dir();
    let t = tally!();
    // A profile of functions of file a.c, each with one line's `Ir`.
    let profile = |name: &str, lines: &[(&str, u64, u64)]| {
        let mut text = String::from("events: Ir\nfl=a.c\n");
        for (f, line, ir) in lines {
            text.push_str(&format!("fn={f}\n{line} {ir}\n"));
        }
        write(dir.path(), name, text.as_bytes())
    };
    let half = 1u64 << 62;
    let big = 3u64 << 61;
    let b = profile("b.callgrind", &[("x", 1, 1), ("y", 2, big)]);
    let a = profile("a.callgrind", &[("x", 1, big)]);
    let (a, b) = (path_str(&a), path_str(&b));
    let out = dir.path().join("d.callgrind");
    let e = t.fails(&["diff", a, b, "-o", path_str(&out)]);
    assert!(
        e.contains(&format!("{b}:6:")) && e.contains("in function `y`") && e.contains("2^63"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written");
    // 2^62 alone fits, and its difference reads back.
    let c = profile("c.callgrind", &[("x", 1, half)]);
    t.ok(&["diff", a, path_str(&c), "-o", path_str(&out)]);
    t.ok(&["check", path_str(&out)]);
    let d = profile("halves.callgrind", &[("x", 1, half), ("y", 2, half)]);
    let one = profile("one.callgrind", &[("x", 1, 1)]);
    t.ok(&["diff", path_str(&one), path_str(&d), "-o", path_str(&out)]);
    t.ok(&["check", path_str(&out)]);
}

#[test]
fn call_counts_are_unsigned_64_bit_and_differences_signed() {
    let dir = tally_testutil::temp_dir();
    let t = tally!();
    let big = 1u64 << 63;
    let a = write(
        dir.path(),
        "a.callgrind",
        format!(
            "# callgrind format\nversion: 1\nevents: Ir\nfl=a.c\nfn=caller\n1 1\n\
             cfn=callee\ncalls={big} 9\n2 1\nfn=callee\n9 1\n"
        )
        .as_bytes(),
    );
    let a = path_str(&a);
    // 2^63 calls is a valid count of a measured profile.
    let out = text(&t.ok(&["gprof", "-b", a]).stdout);
    assert!(out.contains(&big.to_string()), "{out}");
    // As a difference it does not fit a signed count: an error, not a
    // wrapped number.
    let empty = write(
        dir.path(),
        "e.callgrind",
        b"# callgrind format\nversion: 1\nevents: Ir\nfl=a.c\nfn=caller\n1 1\nfn=callee\n9 1\n",
    );
    let out = path_str(&dir.path().join("d")).to_string();
    let e = t.fails(&["diff", path_str(&empty), a, "-o", &out]);
    assert!(e.contains(a) && e.contains("does not fit"), "{e}");
}

/// Jump counts are summed by `merge` too: an overflow says it is a jump
/// count, of which jump (its source and target lines) and in which
/// function, and nothing is written.
#[test]
fn jump_counts_that_overflow_in_a_merge_are_named() {
    let dir = tally_testutil::temp_dir();
    let t = tally!();
    let big = 1u64 << 63;
    let a = write(
        dir.path(),
        "j.callgrind",
        format!(
            "# callgrind format\nversion: 1\nevents: Ir\nfl=a.c\nfn=loop\n1 1\n\
             jcnd={big}/{big} 3\n2 1\n3 1\n"
        )
        .as_bytes(),
    );
    let a = path_str(&a);
    let out = dir.path().join("m.callgrind");
    let e = t.fails(&["merge", a, a, "-o", path_str(&out)]);
    assert!(
        e.contains(a)
            && e.contains("in function `loop`")
            && e.contains("execution counts of the jump at line 2 to line 3"),
        "{e}"
    );
    assert!(!out.exists(), "nothing written");
}

/// A gzip'd profile of `lines` distinct cost lines (each line number once),
/// small compressed and large expanded.
fn expanding_gzip(path: &Path, lines: u64) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    z.write_all(b"events: Ir\nfl=a.c\nfn=main\n").unwrap();
    let mut buf = Vec::new();
    for i in 1..=lines {
        writeln!(buf, "{i} 1").unwrap();
        if buf.len() > 1 << 16 {
            z.write_all(&buf).unwrap();
            buf.clear();
        }
    }
    z.write_all(&buf).unwrap();
    z.finish().unwrap();
}

#[test]
fn an_input_past_the_memory_ceiling_is_a_clean_error() {
    let dir = tally_testutil::temp_dir();
    let gz = dir.path().join("big.callgrind.gz");
    expanding_gzip(&gz, 2_000_000);
    let g = path_str(&gz);
    let out = path_str(&dir.path().join("out")).to_string();
    for args in [
        vec!["convert", g, "-o", &out],
        vec!["merge", g, g, "-o", &out],
    ] {
        let o = tally!()
            .command()
            .args(&args)
            .env("TALLY_MAX_MEMORY", "1M")
            .output()
            .unwrap();
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains(&format!("{g}:")) && e.contains("TALLY_MAX_MEMORY"),
            "{args:?}: {e}"
        );
    }
    // The option sets the same ceiling, before or after the command, and
    // outranks the environment.
    for args in [
        vec!["--memory-limit", "1M", "convert", g, "-o", &out],
        vec!["convert", g, "-o", &out, "--memory-limit=1M"],
    ] {
        let o = tally!()
            .command()
            .args(&args)
            .env("TALLY_MAX_MEMORY", "none")
            .output()
            .unwrap();
        let e = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert!(
            e.contains(&format!("{g}:")) && e.contains("ceiling"),
            "{args:?}: {e}"
        );
    }
    let o = tally!()
        .command()
        .args(["convert", g, "-o", &out, "--memory-limit", "lots"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--memory-limit: expected a size"));
    // Without the small ceiling the same input converts.
    tally!().ok(&["convert", g, "-o", &out]);
    let o = tally!()
        .command()
        .args(["convert", g, "-o", &out])
        .env("TALLY_MAX_MEMORY", "lots")
        .output()
        .unwrap();
    assert!(text(&o.stderr).contains("TALLY_MAX_MEMORY: expected a size"));
}

/// `annotate --diff A B` with a B that is no profile (empty, or text)
/// names B and what is wrong with it, rather than counting one profile.
#[test]
fn annotate_diff_names_a_bad_second_input() {
    let dir = tally_testutil::temp_dir();
    let a = tally_testutil::data("callgrind/mutual.default.out");
    let t = tally!();
    for (name, bytes) in [
        ("empty.out", &b""[..]),
        ("notes.txt", &b"just some text\n"[..]),
    ] {
        let b = write(dir.path(), name, bytes);
        let e = t.fails(&["annotate", "--diff", path_str(&a), path_str(&b)]);
        assert!(e.contains(path_str(&b)), "{name}: {e}");
        assert!(!e.contains("given"), "{name}: {e}");
    }
}
