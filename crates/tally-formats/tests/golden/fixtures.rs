//! Tests driven by the fixture corpus in `tests/data/` (see its README):
//! one test per fixture and check, compared with what the files say of
//! themselves and with what the real tools (callgrind_annotate, cg_annotate)
//! print for the original and for our rewrite.

use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_formats::{Error, Input, WarningKind, callgrind, read_file, read_files};
use tally_model::{Cost, Format, Profile};
use tally_testutil::data_dir;

fn files_in(dir: &str, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir().join(dir))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| p.is_file() && keep(&p.file_name().unwrap().to_string_lossy()));
    v.sort();
    v
}

/// Profiles written by Valgrind: everything in callgrind/ and cachegrind/
/// that is not a report, and not the empty base file of a thread set.
fn valgrind_profiles() -> Vec<PathBuf> {
    let report = |n: &str| n.contains(".annotate") || n.ends_with(".cg_annotate");
    let mut v = files_in("callgrind", |n| !report(n));
    v.extend(files_in("cachegrind", |n| !report(n)));
    v.retain(|p| std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false));
    v
}

fn other_profiles() -> Vec<PathBuf> {
    files_in("other", |n| n.ends_with(".callgrind"))
}

fn spec_profiles() -> Vec<PathBuf> {
    files_in("spec", |n| !n.ends_with(".expected") && !n.ends_with(".md"))
}

fn name(p: &Path) -> String {
    let d = p.parent().unwrap().file_name().unwrap().to_string_lossy();
    format!("{d}/{}", p.file_name().unwrap().to_string_lossy())
}

fn load(p: &Path) -> Result<Profile<u64>, Failed> {
    load_as::<u64>(p)
}

fn load_as<C: Cost>(p: &Path) -> Result<Profile<C>, Failed> {
    read_file::<C>(p, None)
        .map(|(p, _)| p)
        .map_err(|e| format!("{e}").into())
}

/// True for difference profiles (negative counts), read as `i64`.
fn is_signed(p: &Path) -> bool {
    matches!(
        read_file::<u64>(p, None),
        Err(Error::Parse {
            kind: tally_formats::ParseErrorKind::Negative(_),
            ..
        })
    )
}

fn write_callgrind<C: Cost>(p: &Profile<C>, compress: bool) -> Vec<u8> {
    let mut out = Vec::new();
    callgrind::write(p, &mut out, callgrind::WriteOptions { compress }).unwrap();
    out
}

fn reread<C: Cost>(bytes: Vec<u8>) -> Result<Profile<C>, Failed> {
    callgrind::read::<C>(Input::from_bytes("rewritten", bytes).unwrap())
        .map(|(p, _)| p)
        .map_err(|e| format!("rewritten file does not read back: {e}").into())
}

/// The `totals:` (or Cachegrind's trailing `summary:`) values of each part,
/// else `summary:`, must equal the sums of the cost lines.
fn check_totals<C: Cost>(path: &Path, exact_summary: bool) -> Result<(), Failed> {
    let p = load_as::<C>(path)?;
    for (i, part) in p.parts.iter().enumerate() {
        let sum = part.lines.totals().ok_or("sum overflows")?;
        let given = match (&part.info.totals, &part.info.summary) {
            (Some(t), _) => t.clone(),
            (None, Some(s)) if exact_summary => s.clone(),
            (None, Some(_)) => continue,
            (None, None) => return Err(format!("part {i} has neither summary: nor totals:").into()),
        };
        let mut given = given;
        given.resize(sum.len(), C::ZERO);
        if given != sum {
            return Err(format!("part {i}: file says {given:?}, cost lines sum to {sum:?}").into());
        }
    }
    Ok(())
}

fn round_trip<C: Cost>(path: &Path) -> Result<(), Failed> {
    let p = load_as::<C>(path)?;
    for compress in [true, false] {
        let q: Profile<C> = reread(write_callgrind(&p, compress))?;
        let mut q = q;
        // The Callgrind writer always writes Callgrind.
        q.format = p.format;
        if q != p {
            return Err(describe_difference(&p, &q, compress).into());
        }
    }
    if p.format == Format::Cachegrind {
        let mut out = Vec::new();
        tally_formats::cachegrind::write(&p, &mut out).unwrap();
        let mut q: Profile<C> = reread(out)?;
        // Cachegrind files must have `cmd:` and a final `summary:`; the
        // writer supplies them where the input had none.
        for (a, b) in p.parts.iter().zip(q.parts.iter_mut()) {
            if a.info.cmd.is_none() && b.info.cmd.as_deref() == Some(b"") {
                b.info.cmd = None;
            }
            if a.info.totals.is_none() && b.info.totals == a.lines.totals() {
                b.info.totals = None;
            }
        }
        if q != p {
            return Err(describe_difference(&p, &q, false).into());
        }
    }
    let mut json = Vec::new();
    tally_formats::json::write(&p, &mut json).unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&json).map_err(|e| format!("JSON does not parse: {e}"))?;
    let parts = v["parts"].as_array().ok_or("no parts")?;
    if parts.len() != p.parts.len() {
        return Err("JSON has another number of parts".into());
    }
    for (jp, part) in parts.iter().zip(&p.parts) {
        let want: Vec<String> = part
            .lines
            .totals()
            .unwrap()
            .iter()
            .map(|c| c.to_string())
            .collect();
        let got: Vec<String> = jp["self_totals"]
            .as_array()
            .ok_or("no self_totals")?
            .iter()
            .map(|v| v.to_string())
            .collect();
        if want != got {
            return Err(format!("JSON self_totals {got:?} != {want:?}").into());
        }
        let calls = jp["calls"].as_array().map_or(0, Vec::len);
        if calls != part.calls.len() {
            return Err("JSON has another number of calls".into());
        }
    }
    Ok(())
}

/// The fast path (single spaces) and the careful path (here forced by
/// tabs between the numbers of every cost line) read the same profile.
fn fast_and_careful_paths_agree(path: &Path) -> Result<(), Failed> {
    let text = std::fs::read(path)?;
    let tabbed = crate::common::tabbed(&text);
    let fast = callgrind::read::<u64>(Input::from_bytes("fast", text).unwrap());
    let careful = callgrind::read::<u64>(Input::from_bytes("careful", tabbed).unwrap());
    match (fast, careful) {
        (Ok((a, wa)), Ok((b, wb))) => {
            if a != b {
                return Err(describe_difference(&a, &b, false).into());
            }
            let kinds = |w: &tally_formats::Warnings| -> Vec<_> {
                w.iter().map(|x| (x.kind, x.count, x.first_line)).collect()
            };
            if kinds(&wa) != kinds(&wb) {
                return Err(format!("warnings differ: {wa:?} vs {wb:?}").into());
            }
            Ok(())
        }
        (Err(Error::Parse { line: a, .. }), Err(Error::Parse { line: b, .. })) if a == b => Ok(()),
        (a, b) => Err(format!("paths disagree: {:?} vs {:?}", a.err(), b.err()).into()),
    }
}

fn describe_difference<C: Cost>(p: &Profile<C>, q: &Profile<C>, compress: bool) -> String {
    let what = if (p.version, &p.creator, p.positions) != (q.version, &q.creator, q.positions) {
        "version, creator or positions"
    } else if p.names != q.names {
        "names"
    } else if p.events != q.events {
        "events"
    } else if p.parts.len() != q.parts.len() {
        "part count"
    } else {
        let mut s = "a part";
        for (a, b) in p.parts.iter().zip(&q.parts) {
            s = if a.info != b.info {
                "part header"
            } else if a.lines != b.lines {
                "cost lines"
            } else if a.calls != b.calls {
                "calls"
            } else if a.jumps != b.jumps {
                "jumps"
            } else {
                continue;
            };
            break;
        }
        s
    };
    format!("round trip (compress={compress}) changed the {what}")
}

/// Runs a Valgrind annotate script and returns its report without the line
/// naming the data file, sorted (equal-cost rows may come in any order).
fn annotate(tool: &str, args: &[&str], file: &Path) -> Result<Vec<String>, Failed> {
    let out = Command::new(tool)
        .args(args)
        .arg(file)
        .env("PERL_HASH_SEED", "0")
        .env("PERL_PERTURB_KEYS", "0")
        .current_dir(data_dir())
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{tool} failed on {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.starts_with("Profile data file") && !l.starts_with("Data file:"))
        .map(str::to_string)
        .collect();
    lines.sort();
    Ok(lines)
}

fn same_report(tool: &str, args: &[&str], a: &Path, b: &Path) -> Result<(), Failed> {
    let x = annotate(tool, args, a)?;
    let y = annotate(tool, args, b)?;
    if x == y {
        return Ok(());
    }
    let only_a: Vec<_> = x.iter().filter(|l| !y.contains(l)).take(5).collect();
    let only_b: Vec<_> = y.iter().filter(|l| !x.contains(l)).take(5).collect();
    Err(
        format!("{tool} {args:?} differs\n original only: {only_a:#?}\n rewrite only: {only_b:#?}")
            .into(),
    )
}

fn rewritten_file<C: Cost>(p: &Profile<C>, to: &str, compress: bool) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    match to {
        "callgrind" => callgrind::write(p, f.as_file_mut(), callgrind::WriteOptions { compress }),
        _ => tally_formats::cachegrind::write(p, f.as_file_mut()),
    }
    .unwrap();
    f
}

fn callgrind_annotate_agrees(path: &Path) -> Result<(), Failed> {
    let p = load(path)?;
    for compress in [true, false] {
        let f = rewritten_file(&p, "callgrind", compress);
        for args in [
            &["--auto=no", "--threshold=100"][..],
            &["--auto=no", "--threshold=100", "--inclusive=yes"],
            &["--auto=no", "--threshold=100", "--tree=both"],
        ] {
            same_report("callgrind_annotate", args, path, f.path())?;
        }
    }
    Ok(())
}

fn cg_annotate_agrees(path: &Path) -> Result<(), Failed> {
    let f = if is_signed(path) {
        rewritten_file(&load_as::<i64>(path)?, "cachegrind", false)
    } else {
        rewritten_file(&load(path)?, "cachegrind", false)
    };
    same_report(
        "cg_annotate",
        &["--auto=no", "--threshold=0"],
        path,
        f.path(),
    )
}

/// `FILE.expected` of a hand-written file: `EVENT TOTAL` lines.
fn spec_expected(path: &Path) -> Result<(), Failed> {
    let p = load(path)?;
    let exp = std::fs::read_to_string(path.with_file_name(format!(
        "{}.expected",
        path.file_name().unwrap().to_string_lossy()
    )))?;
    let totals = p.totals().ok_or("overflow")?;
    for line in exp
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut w = line.split_whitespace();
        let (ev, want) = (w.next().unwrap(), w.next().ok_or("bad expected line")?);
        let want: u64 = want.parse()?;
        let got = match p.events.find(ev) {
            Some(tally_model::EventRef::Recorded(i)) => totals[i],
            Some(tally_model::EventRef::Derived(i)) => p.events.derived()[i]
                .evaluate(&totals)
                .ok_or("derived out of range")?,
            None => return Err(format!("no event {ev}").into()),
        };
        if got != want {
            return Err(format!("{ev}: expected {want}, got {got}").into());
        }
    }
    Ok(())
}

/// `FILE.expected` of a bad file: the line of the error, then words.
fn bad_input(path: &Path) -> Result<(), Failed> {
    let exp = std::fs::read_to_string(path.with_file_name(format!(
        "{}.expected",
        path.file_name().unwrap().to_string_lossy()
    )))?;
    let want_line: u64 = exp
        .split_whitespace()
        .next()
        .ok_or("empty .expected")?
        .parse()?;
    for signed in [false, true] {
        let r = if signed {
            read_file::<i64>(path, None).map(|_| ())
        } else {
            read_file::<u64>(path, None).map(|_| ())
        };
        match r {
            Ok(()) => return Err("bad input was accepted".into()),
            Err(Error::Parse { line, .. }) if line == want_line => {}
            Err(Error::Read { line, .. }) if line == want_line => {}
            Err(e) => return Err(format!("expected an error at line {want_line}, got: {e}").into()),
        }
    }
    Ok(())
}

/// A dump series or thread set loaded together keeps one part per file
/// and sums to the files' own totals.
fn series(paths: Vec<PathBuf>) -> Result<(), Failed> {
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    let (all, _) = read_files::<u64>(&refs, None).map_err(|e| e.to_string())?;
    let mut want = vec![0u64; all.events.len()];
    let mut parts = 0;
    for p in &paths {
        let one = load(p)?;
        parts += one.parts.len();
        for (a, b) in want.iter_mut().zip(one.totals().unwrap()) {
            *a += b;
        }
    }
    if all.parts.len() != parts {
        return Err(format!("{} parts, expected {parts}", all.parts.len()).into());
    }
    if all.totals().unwrap() != want {
        return Err("totals of the series differ from the sum of the files".into());
    }
    let q: Profile<u64> = reread(write_callgrind(&all, true))?;
    if q != all {
        return Err(describe_difference(&all, &q, true).into());
    }
    Ok(())
}

/// One trial per fixture and check.
pub fn trials() -> Vec<Trial> {
    let mut tests = Vec::new();

    for p in valgrind_profiles() {
        let n = name(&p);
        let q = p.clone();
        let signed = is_signed(&p);
        tests.push(Trial::test(format!("totals/{n}"), move || {
            if signed {
                check_totals::<i64>(&q, false)
            } else {
                check_totals::<u64>(&q, false)
            }
        }));
        let q = p.clone();
        tests.push(Trial::test(format!("roundtrip/{n}"), move || {
            if signed {
                round_trip::<i64>(&q)
            } else {
                round_trip::<u64>(&q)
            }
        }));
        let q = p.clone();
        if !signed {
            tests.push(Trial::test(format!("paths/{n}"), move || {
                fast_and_careful_paths_agree(&q)
            }));
        }
        let cachegrind = n.starts_with("cachegrind/");
        let q = p.clone();
        if cachegrind {
            tests.push(tally_testutil::trial(
                format!("cg_annotate/{n}"),
                &["cg_annotate"],
                move || cg_annotate_agrees(&q),
            ));
        } else {
            tests.push(tally_testutil::trial(
                format!("callgrind_annotate/{n}"),
                &["callgrind_annotate"],
                move || callgrind_annotate_agrees(&q),
            ));
        }
    }
    for p in other_profiles() {
        let n = name(&p);
        let q = p.clone();
        tests.push(Trial::test(format!("load/{n}"), move || {
            load(&q).map(|_| ())
        }));
        let q = p.clone();
        tests.push(Trial::test(format!("roundtrip/{n}"), move || {
            round_trip::<u64>(&q)
        }));
    }
    for p in spec_profiles() {
        let n = name(&p);
        let q = p.clone();
        tests.push(Trial::test(format!("expected/{n}"), move || {
            spec_expected(&q)
        }));
        let q = p.clone();
        tests.push(Trial::test(format!("roundtrip/{n}"), move || {
            round_trip::<u64>(&q)
        }));
    }
    for p in files_in("bad", |n| !n.ends_with(".expected") && !n.ends_with(".md")) {
        let n = name(&p);
        tests.push(Trial::test(format!("bad/{n}"), move || bad_input(&p)));
    }
    // Dump series (`X.1`, `X.2`, …, `X`) and thread sets (`X-01`, …).
    let cg = files_in("callgrind", |n| !n.contains(".annotate"));
    let mut bases: Vec<String> = cg
        .iter()
        .filter_map(|p| {
            let s = p.to_string_lossy().to_string();
            if s.ends_with(".1") {
                Some(s[..s.len() - 2].to_string())
            } else if s.ends_with("-01") {
                Some(s[..s.len() - 3].to_string())
            } else {
                None
            }
        })
        .collect();
    bases.dedup();
    for base in bases {
        let members: Vec<PathBuf> = cg
            .iter()
            .filter(|p| {
                let s = p.to_string_lossy();
                s.strip_prefix(base.as_str()).is_some_and(|rest| {
                    rest.is_empty() && std::fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false)
                        || rest
                            .strip_prefix('.')
                            .or(rest.strip_prefix('-'))
                            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                })
            })
            .cloned()
            .collect();
        let n = name(Path::new(&base));
        tests.push(Trial::test(format!("series/{n}"), move || series(members)));
    }
    // The warning for a summary above the total must not hide real errors.
    tests.push(Trial::test("warnings/summary-above-total", || {
        let p = data_dir().join("spec/summary-larger.callgrind");
        let (_, w) = read_file::<u64>(&p, None).map_err(|e| e.to_string())?;
        if w.contains(WarningKind::SummaryAboveTotal) {
            Ok(())
        } else {
            Err("expected a summary-above-total warning".into())
        }
    }));
    tests
}
