//! Running the `tally` binary as a user does, with the checks every CLI
//! test repeats: it ran, it succeeded, or it failed cleanly.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The `tally` binary built for the calling test crate, ready to run.
///
/// Only that crate's tests know where cargo put the binary
/// (`CARGO_BIN_EXE_tally` at compile time), so this is a macro expanded
/// there rather than a function compiled here.
#[macro_export]
macro_rules! tally {
    () => {
        $crate::Tally::new(env!("CARGO_BIN_EXE_tally"))
    };
}

/// How to run the `tally` binary: which executable and in which folder.
#[derive(Clone, Debug)]
pub struct Tally {
    bin: PathBuf,
    dir: Option<PathBuf>,
}

impl Tally {
    /// The binary at `bin`; see [`tally!`](crate::tally) for the usual way
    /// to get it.
    pub fn new(bin: impl Into<PathBuf>) -> Self {
        Tally {
            bin: bin.into(),
            dir: None,
        }
    }

    /// Runs in `dir`, so that relative paths in arguments resolve there.
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// The command without arguments, for tests that set more (stdin,
    /// environment). `NO_COLOR` is removed so that the user's environment
    /// does not change what the tests see.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        if let Some(dir) = &self.dir {
            c.current_dir(dir);
        }
        c.env_remove("NO_COLOR");
        c
    }

    /// Runs with `args` and returns what it did, whatever its exit status.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command().args(args).output().expect("run tally")
    }

    /// Runs with `args` and asserts that it succeeded (exit status 0),
    /// with tally's message if not.
    pub fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert_eq!(
            o.status.code(),
            Some(0),
            "tally {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// Runs with `args`, asserts that it failed as bad input should (exit
    /// status 1, no panic) and returns its message.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert_eq!(o.status.code(), Some(1), "tally {args:?} should fail");
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!e.contains("panicked"), "{e}");
        e
    }
}
