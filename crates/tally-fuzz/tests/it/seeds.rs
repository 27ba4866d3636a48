//! Replays the fuzzer's regression seeds: cases that broke tally once.
//! Every case in `seeds/` must pass.

use std::path::{Path, PathBuf};
use tally_fuzz::{Budget, Case, Corpus, Driver, NoMemory};

fn cases(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    v.sort();
    v
}

fn replay(dir: &str) {
    let corpus = Corpus::load(&tally_fuzz::corpus::default_dir()).unwrap();
    let driver = Driver::new(&corpus);
    tally_fuzz::run::silence_panics();
    // Debug builds are slow: time is the release run's condition.
    let budget = Budget {
        time: std::time::Duration::from_secs(60),
        ..Budget::default()
    };
    let files = cases(dir);
    assert!(!files.is_empty(), "no cases in {dir}");
    let mut failed = Vec::new();
    for f in &files {
        let case = Case::from_file(&std::fs::read(f).unwrap())
            .unwrap_or_else(|| panic!("{}: not a case file", f.display()));
        if let Err(e) = tally_fuzz::run_case(&driver, &case, &budget, &NoMemory) {
            failed.push(format!("{}: {e}", f.display()));
        }
    }
    let _ = std::panic::take_hook();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn regression_seeds_pass() {
    replay("seeds");
}
