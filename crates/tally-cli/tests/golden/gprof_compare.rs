//! `tally gprof` against GNU gprof 2.40 on every fixture of
//! `tests/data/gprof` (programs built with `-pg`, their gmon files and GNU
//! gprof's reports, listed in `MANIFEST.tsv`).
//!
//! GNU gprof runs live when it is installed (in CI it is); otherwise its
//! committed report is the reference. tally runs with `--gnu-compatible`,
//! which reproduces the two results GNU gprof gets wrong (see
//! docs/gprof.md); other tests check that without it tally is right.
//! Reports with explanations are compared without them: tally writes its
//! own.

use libtest_mimic::{Failed, Trial};
use std::path::PathBuf;
use std::process::Command;

fn dir() -> PathBuf {
    tally_testutil::data("gprof")
}

fn tally() -> Command {
    let mut c = tally_testutil::tally!().in_dir(dir()).command();
    c.env("LC_ALL", "C");
    c
}

/// One line of MANIFEST.tsv.
#[derive(Clone, Debug)]
struct Case {
    output: String,
    binary: String,
    gmons: Vec<String>,
    args: Vec<String>,
}

fn manifest() -> Vec<Case> {
    let text = std::fs::read_to_string(dir().join("MANIFEST.tsv")).expect("MANIFEST.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let words = |s: Option<&&str>| -> Vec<String> {
                s.map(|s| s.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default()
            };
            Case {
                output: f[0].to_owned(),
                binary: f[1].to_owned(),
                gmons: words(f.get(2)),
                args: words(f.get(3)),
            }
        })
        .collect()
}

fn run(mut cmd: Command) -> Result<(String, String, i32), Failed> {
    let out = cmd.output().map_err(|e| format!("cannot run: {e}"))?;
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    ))
}

fn reference(case: &Case, live: bool) -> Result<String, Failed> {
    if live {
        let mut c = Command::new("gprof");
        c.current_dir(dir())
            .env("LC_ALL", "C")
            .args(&case.args)
            .arg(&case.binary)
            .args(&case.gmons);
        Ok(run(c)?.0)
    } else {
        std::fs::read_to_string(dir().join(&case.output))
            .map_err(|e| format!("{}: {e}", case.output).into())
    }
}

/// The report without the explanations: in each form-feed section, the
/// text after the flat profile's table or after the call graph's last
/// separator.
fn without_blurbs(text: &str) -> String {
    text.split('\x0c')
        // GNU gprof ends its explanations with a section of its own holding
        // its copyright notice.
        .filter(|section| !section.trim_start().starts_with("Copyright"))
        .map(|section| {
            if section.contains("Flat profile:") {
                // The table ends at its first empty line after the header.
                let mut out = String::new();
                let mut in_table = false;
                for line in section.split_inclusive('\n') {
                    if line.starts_with(" time ") {
                        in_table = true;
                    } else if in_table && line.trim().is_empty() {
                        break;
                    }
                    out.push_str(line);
                }
                out
            } else if section.contains("Call graph") {
                const SEPARATOR: &str = "-----------------------------------------------\n";
                match section.rfind(SEPARATOR) {
                    Some(i) => section[..i + SEPARATOR.len()].to_owned(),
                    None => section.to_owned(),
                }
            } else {
                section.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\x0c")
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}:\n  gprof: {x:?}\n  tally: {y:?}", i + 1);
        }
    }
    format!(
        "lengths differ: gprof {} lines, tally {} lines",
        a.lines().count(),
        b.lines().count()
    )
}

fn compare_report(case: &Case, live: bool) -> Result<(), Failed> {
    let expected = reference(case, live)?;
    let mut c = tally();
    c.arg("gprof")
        .arg("--gnu-compatible")
        .args(&case.args)
        .arg(&case.binary)
        .args(&case.gmons);
    let (got, err, code) = run(c)?;
    if code != 0 {
        return Err(format!("tally failed ({code}): {err}").into());
    }
    let brief = case.args.iter().any(|a| a == "-b");
    let (expected, got) = if brief {
        (expected, got)
    } else {
        (without_blurbs(&expected), without_blurbs(&got))
    };
    if expected != got {
        return Err(first_difference(&expected, &got).into());
    }
    Ok(())
}

/// `-s`: tally's gmon.sum gives the same report as GNU gprof's own.
fn compare_sum(case: &Case, live: bool) -> Result<(), Failed> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let bin = dir().join(&case.binary);
    let mut c = Command::new(env!("CARGO_BIN_EXE_tally"));
    c.current_dir(tmp.path())
        .arg("gprof")
        .arg("-s")
        .arg(&bin)
        .args(case.gmons.iter().map(|g| dir().join(g)));
    let (_, err, code) = run(c)?;
    if code != 0 {
        return Err(format!("tally gprof -s failed: {err}").into());
    }
    let ours = tmp.path().join("gmon.sum");
    let expected =
        std::fs::read_to_string(dir().join("cycles.O0.sum.b.txt")).map_err(|e| e.to_string())?;
    // tally on its own sum, and GNU gprof on tally's sum.
    let mut readers = vec![("tally", {
        let mut c = tally();
        c.arg("gprof").arg("-b").arg(&bin).arg(&ours);
        c
    })];
    if live {
        let mut c = Command::new("gprof");
        c.env("LC_ALL", "C").arg("-b").arg(&bin).arg(&ours);
        readers.push(("gprof", c));
    }
    for (who, c) in readers {
        let (got, err, code) = run(c)?;
        if code != 0 || got != expected {
            return Err(format!(
                "{who} on tally's gmon.sum: {} {err}",
                first_difference(&expected, &got)
            )
            .into());
        }
    }
    Ok(())
}

/// Bad inputs: an error naming the file and no report, or (for a profile
/// of another program, which GNU gprof reports as nonsense) a warning.
fn check_bad(case: &Case) -> Result<(), Failed> {
    let mut c = tally();
    c.arg("gprof")
        .args(&case.args)
        .arg(&case.binary)
        .args(&case.gmons);
    let (out, err, code) = run(c)?;
    if err.contains("panicked") {
        return Err(format!("panic: {err}").into());
    }
    let name = case
        .output
        .trim_start_matches("bad/")
        .trim_end_matches(".stdout");
    if name.starts_with("wrong-binary") {
        if code != 0 || !err.contains("another program") {
            return Err(format!("expected a warning, got ({code}) {err}").into());
        }
        return Ok(());
    }
    if code == 0 || !out.is_empty() {
        return Err(format!("expected an error, got exit {code} and {} bytes", out.len()).into());
    }
    let named = case
        .gmons
        .iter()
        .chain(std::iter::once(&case.binary))
        .any(|f| err.contains(f.as_str()));
    if !named {
        return Err(format!("the error does not name the file: {err}").into());
    }
    Ok(())
}

/// Every fixture of MANIFEST.tsv tally compares, named `gprof_compare/…`.
pub fn trials() -> Vec<Trial> {
    let live = tally_testutil::live(&["gprof"]);
    let mut trials = Vec::new();
    for case in manifest() {
        let name = format!("gprof_compare/{}", case.output);
        let unsupported = case
            .args
            .iter()
            .any(|a| matches!(a.as_str(), "-i" | "-C" | "-T"));
        let c = case.clone();
        if case.output.starts_with("bad/") {
            trials.push(Trial::test(name, move || check_bad(&c)));
        } else if case.args.iter().any(|a| a == "-s") {
            trials.push(Trial::test(name, move || compare_sum(&c, live)));
        } else if !unsupported {
            trials.push(Trial::test(name, move || compare_report(&c, live)));
        }
    }
    trials
}
