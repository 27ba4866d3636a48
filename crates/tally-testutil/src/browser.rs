//! Debian's `chromium`, headless, for the tests of what tally draws for a
//! browser: flame graph SVGs, `tally serve`'s pages and `tally report
//! --html`.
//!
//! A page is checked in a real browser because its scripts are what the
//! user runs: [`dump_dom`] loads it once and prints the DOM the scripts
//! left (a flame graph's), [`drive`] clicks through tally's web UI with
//! playwright-core (`tests/web/drive.mjs`, run by node). The rule of
//! [`crate::tools`] applies to chromium, node and the driver's npm
//! install alike ([`require`], [`require_driver`]): missing, the test is
//! skipped locally and fails under CI, which installs them.
//!
//! Screenshots go to `target/test-artefacts/` ([`artefacts`]), where CI
//! keeps them; tracked images (the README's) are rewritten only when the
//! run asks for it with `TALLY_SCREENSHOTS=1` ([`publish`]).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The flags of every headless chromium a test starts: no sandbox
/// (chromium will not run as root with it), no GPU, nothing that reaches
/// the network on its own (updates, sync, QUIC), and its log on standard
/// error, where the tests look for script errors.
const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
];

/// For a test that opens pages in [`dump_dom`] or [`screenshot`] and also
/// needs `tools`: `true` when `chromium` and every one of `tools` are
/// installed; otherwise the test is skipped ([`crate::skip`], a failure
/// under CI) and this returns `false`.
pub fn require(tools: &[&str]) -> bool {
    crate::require(&["chromium"]) && crate::require(tools)
}

/// For a test that [`drive`]s tally's web UI and also needs `tools`:
/// [`require`] with `node` too, and the driver's npm install (`npm ci` in
/// `tests/web`, as CI does), treated as a missing tool when absent.
pub fn require_driver(tools: &[&str]) -> bool {
    if !require(&["node"]) || !crate::require(tools) {
        return false;
    }
    let ready = driver_dir().join("node_modules/playwright-core").is_dir();
    if !ready {
        crate::skip("tests/web/node_modules (run `npm ci` in tests/web)");
    }
    ready
}

/// Where the browser tests leave their screenshots for people to look at:
/// `target/test-artefacts/NAME/`, created if need be. Never tracked.
pub fn artefacts(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/test-artefacts")
        .join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether this run was asked to rewrite the tracked screenshots
/// (`TALLY_SCREENSHOTS=1`).
pub fn publishing() -> bool {
    std::env::var_os("TALLY_SCREENSHOTS").is_some_and(|v| v == "1")
}

/// Copies the screenshot `from` (in [`artefacts`]) over the tracked image
/// `to` when [`publishing`], and does nothing otherwise: an ordinary test
/// run leaves the work tree as it was.
pub fn publish(from: &Path, to: &Path) {
    if publishing() {
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
}

/// What headless chromium printed for a page: its standard output and its
/// log (standard error, where script errors show as `Uncaught`).
#[derive(Clone, Debug)]
pub struct Run {
    /// Standard output: the DOM, for [`dump_dom`].
    pub stdout: String,
    /// Standard error: chromium's log, the page's console included.
    pub log: String,
}

/// Runs headless chromium once on `url` with `extra` flags, in a fresh
/// profile removed afterwards; see [`dump_dom`] and [`screenshot`].
pub fn chromium(extra: &[&str], url: &str) -> Run {
    let profile = crate::temp_dir();
    let o = Command::new("chromium")
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    Run {
        stdout: crate::text(&o.stdout),
        log: crate::text(&o.stderr),
    }
}

/// The DOM of the page at `url` once its scripts have run.
pub fn dump_dom(url: &str) -> Run {
    chromium(&["--dump-dom"], url)
}

/// Takes a `width`×`height` screenshot of the page at `url` into `png`
/// (a path in [`artefacts`]); the caller checks that it was written.
pub fn screenshot(url: &str, png: &Path, (width, height): (u32, u32)) -> Run {
    chromium(
        &[
            &format!("--screenshot={}", png.display()),
            &format!("--window-size={width},{height}"),
        ],
        url,
    )
}

/// The driver of tally's web UI: `drive.mjs` and its npm project.
pub fn driver_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/web")
}

/// Drives tally's page at `url` (a server's or a report's `file://` URL)
/// with `tests/web/drive.mjs`: selects `function`, goes through every
/// view, saves screenshots `PREFIX-VIEW.png` in `shots`, with networking
/// off when `offline`. Returns what it saw; panics when the driver failed
/// or the page reported an error.
pub fn drive(
    url: &str,
    shots: &Path,
    prefix: &str,
    function: &str,
    offline: bool,
) -> serde_json::Value {
    let mut c = Command::new("node");
    c.current_dir(driver_dir())
        .arg("drive.mjs")
        .arg(url)
        .arg(shots)
        .arg(prefix)
        .arg(function);
    if offline {
        c.arg("offline");
    }
    let o = c.output().expect("runs");
    assert!(o.status.success(), "{c:?}: {}", crate::text(&o.stderr));
    let out = crate::text(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("driver's JSON");
    assert!(v.get("failure").is_none(), "{prefix}: {}", v["failure"]);
    // Every view answers, a cycle's and Cachegrind's graph included.
    let errors: Vec<&serde_json::Value> = v["errors"].as_array().unwrap().iter().collect();
    assert!(errors.is_empty(), "{prefix}: page errors: {errors:?}");
    v
}
