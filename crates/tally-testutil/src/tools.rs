//! Finding the external tools a test compares with, and what a test does
//! when one is missing: skipped locally, failed under CI.

use libtest_mimic::{Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `name` is, found the way `Command::new(name)` finds it (a path
/// as given, otherwise the first executable file of that name on `PATH`);
/// `None` when it is not installed.
pub fn tool(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return executable(Path::new(name)).then(|| PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

#[cfg(unix)]
fn executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn executable(p: &Path) -> bool {
    p.is_file()
}

/// Whether the tests run under CI, which installs every tool: there a
/// missing tool fails the test instead of skipping it.
fn in_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// The first of `names` that is not installed.
fn first_missing<'a>(names: &[&'a str]) -> Option<&'a str> {
    names.iter().copied().find(|n| tool(n).is_none())
}

/// Says that the calling test does not run because `name` is missing:
/// prints `skipped: NAME not installed` for the caller to return early,
/// or panics under CI.
pub fn skip(name: &str) {
    assert!(
        !in_ci(),
        "{name} not installed, and CI is set: CI must install every tool"
    );
    eprintln!("skipped: {name} not installed");
}

/// For a `#[test]` that needs every one of `names`: `true` when all are
/// installed; otherwise [`skip`]s and returns `false`, so that the test
/// returns early (`if !require(&["gcc"]) { return; }`).
pub fn require(names: &[&str]) -> bool {
    match first_missing(names) {
        None => true,
        Some(name) => {
            skip(name);
            false
        }
    }
}

/// For a test that compares with the tools `names` live when they are
/// installed and with their committed outputs otherwise: `true` to run
/// them; `false` with a note when one is missing, or a panic under CI,
/// where the comparison must be live.
pub fn live(names: &[&str]) -> bool {
    let Some(name) = first_missing(names) else {
        return true;
    };
    assert!(
        !in_ci(),
        "{name} not installed, and CI is set: CI must compare live"
    );
    eprintln!("note: {name} not installed: comparing with the committed outputs");
    false
}

/// A libtest-mimic test that needs every one of `tools`: as given when
/// they are installed; otherwise ignored, or under CI a test that fails
/// naming the missing tool.
pub fn trial(
    name: impl Into<String>,
    tools: &[&str],
    test: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    match first_missing(tools) {
        None => Trial::test(name, test),
        Some(missing) if in_ci() => {
            let message = format!("{missing} not installed, and CI is set: CI must install it");
            Trial::test(name, move || Err(message.into()))
        }
        Some(_) => Trial::test(name, test).with_ignored_flag(true),
    }
}

/// gprof2dot's command, if it is installed: pip installs it as a script on
/// `PATH` or only as a Python module, depending on the machine.
pub fn gprof2dot() -> Option<Command> {
    if tool("gprof2dot").is_some() {
        return Some(Command::new("gprof2dot"));
    }
    let module = Command::new("python3")
        .args(["-m", "gprof2dot", "--help"])
        .output()
        .is_ok_and(|o| o.status.success());
    module.then(|| {
        let mut c = Command::new("python3");
        c.args(["-m", "gprof2dot"]);
        c
    })
}

/// For a `#[test]` that needs the Python modules `modules` (`pyarrow`,
/// `datafusion`, `pyspark`): `true` when `python3` imports every one;
/// otherwise [`skip`]s (a failure under CI) and returns `false`.
pub fn require_python(modules: &[&str]) -> bool {
    if !require(&["python3"]) {
        return false;
    }
    for m in modules {
        let imported = Command::new("python3")
            .args(["-c", &format!("import {m}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !imported {
            skip(&format!("python3 module {m}"));
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_installed_programs_only() {
        assert!(tool("sh").is_some_and(|p| p.is_absolute()));
        assert!(tool("/bin/sh").is_some());
        assert_eq!(tool("tally-testutil-no-such-program"), None);
        assert_eq!(tool("/no/such/dir/sh"), None);
    }

    #[test]
    fn nothing_needed_is_never_missing() {
        assert!(require(&[]));
        assert!(live(&[]));
        assert!(!trial("t", &[], || Ok(())).has_ignored_flag());
    }

    #[test]
    fn a_missing_program_skips_locally_and_fails_under_ci() {
        let missing = ["tally-testutil-no-such-program"];
        if in_ci() {
            assert!(std::panic::catch_unwind(|| require(&missing)).is_err());
            assert!(std::panic::catch_unwind(|| live(&missing)).is_err());
            assert!(!trial("t", &missing, || Ok(())).has_ignored_flag());
        } else {
            assert!(!require(&missing));
            assert!(!live(&missing));
            assert!(trial("t", &missing, || Ok(())).has_ignored_flag());
        }
    }
}
