//! Helpers shared by tally's tests (a dev-dependency only, never published).
//!
//! Many tests compare tally with the reference tools live (Valgrind's
//! annotate scripts, GNU gprof, binutils, gcc). Those tools are optional on
//! a developer's machine but installed by CI, so one rule decides what a
//! test does without them, in [`tools`]: locally the test is skipped (or
//! compares with committed outputs), under CI (the `CI` environment
//! variable is set) it fails, because there a missing tool is a broken
//! setup and a green run would have tested nothing.
//!
//! [`cli`] runs the `tally` binary as a user does, [`qemu`] says whether
//! `tally sim -- PROG` can run (QEMU and tally's plugin, under the same
//! rule), [`recorder`] what `tally record` may sample here (the rights of
//! `perf_event_open`) and runs recordings one at a time, [`browser`]
//! opens and drives pages in headless chromium (under the same rule) and
//! keeps their screenshots, and the functions here find the shared test
//! data and turn outputs into text.

#![deny(missing_docs)]

pub mod browser;
pub mod cli;
pub mod qemu;
pub mod recorder;
pub mod serve;
pub mod tools;

pub use cli::Tally;
pub use tools::{gprof2dot, live, require, require_python, skip, tool, trial};

use std::path::{Path, PathBuf};

/// The workspace's `tests/data`: fixtures and committed reference outputs
/// shared by the tests of every crate.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data")
}

/// `rel` inside [`data_dir`].
pub fn data(rel: &str) -> PathBuf {
    data_dir().join(rel)
}

/// Profiles of the test data to cut a split read in: Valgrind's Callgrind
/// files with calls, jumps, inlined files, callers in names, several
/// dumps, threads and names spelled out, and Cachegrind files.
pub const SPLIT_PROFILES: &[&str] = &[
    "callgrind/workload.combo.out",
    "callgrind/workload.callers2.out",
    "callgrind/recursion.jumps.out",
    "callgrind/threads.jumps.out",
    "callgrind/mutual.instr.out",
    "callgrind/inline.nocompress.out",
    "callgrind/mutual.dumpevery.out.1",
    "cachegrind/recursion.out",
    "cachegrind/workload.branch.out",
];

/// The offsets of the `fn=` lines of a profile: where a split read can
/// cut it.
pub fn function_lines(bytes: &[u8]) -> Vec<u64> {
    bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"\nfn=")
        .map(|(i, _)| i as u64 + 1)
        .collect()
}

/// Program output as text, lossily: assertions and messages need a
/// `String` even when a tool prints bytes that are not UTF-8.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The first count on the `PROGRAM TOTALS` line of an annotate report
/// (tally's, callgrind_annotate's or cg_annotate's); panics with the
/// report if there is none.
pub fn program_total(report: &str) -> u64 {
    report
        .lines()
        .find(|l| l.contains("PROGRAM TOTALS"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no PROGRAM TOTALS count in:\n{report}"))
}

/// A path as the `&str` a command line takes; test paths are UTF-8, so
/// anything else is a broken test setup and panics.
pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A fresh temporary directory, removed when dropped.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}
