//! What a test of `tally record` needs besides the tools: the rights
//! `perf_event_open` grants this process, and running one recording at a
//! time.
//!
//! Sampling a program the test starts is allowed to every user at the
//! kernel's default `kernel.perf_event_paranoid` (2), so those tests need
//! only the tools of [`crate::tools`] (`gcc`, `perf`), under its rule.
//! Sampling every process (`tally record --system`) needs root or the
//! sysctl at most 0, which neither a developer's machine nor CI promises:
//! such a test asks [`Rights`] and, without them, checks tally's refusal
//! instead, so it checks something on every machine.

use std::process::Command;
use std::sync::{Mutex, MutexGuard};

/// What `perf_event_open` lets this process sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rights {
    /// The process runs as root (effective uid 0): CPU-wide events are
    /// allowed whatever the sysctl says.
    pub root: bool,
    /// `kernel.perf_event_paranoid` is at most 0, which allows CPU-wide
    /// events to every user (unreadable counts as 2, the kernel's
    /// default).
    pub paranoid_allows_system: bool,
}

impl Rights {
    /// This process's rights, read from `/proc`.
    pub fn here() -> Rights {
        let root = std::fs::read_to_string("/proc/self/status")
            .expect("/proc/self/status")
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false);
        let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map_or(2, |s| s.trim().parse().unwrap_or(2));
        Rights {
            root,
            paranoid_allows_system: paranoid <= 0,
        }
    }

    /// Whether `tally record --system` may open its CPU-wide events.
    pub fn may_sample_system(self) -> bool {
        self.root || self.paranoid_allows_system
    }
}

/// `program` run as nobody (uid and gid 65534, no groups) through
/// util-linux's `setpriv`: how a test run as root sees what a user without
/// the rights is told. Only root can switch users, and `setpriv` is a tool
/// like any other ([`crate::require`] it first).
pub fn as_nobody(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(program);
    c
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Held for the whole of a test that samples, so that such tests run one
/// at a time (within a test binary): they compare time shares, which
/// another test's program running beside them moves by several points
/// (shared caches), and `--system` samples every process. A test that
/// panicked while holding it does not poison it for the others.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rights_are_read_from_proc() {
        let r = Rights::here();
        assert_eq!(
            r.may_sample_system(),
            r.root || r.paranoid_allows_system,
            "{r:?}"
        );
        let nobody = Rights {
            root: false,
            paranoid_allows_system: false,
        };
        assert!(!nobody.may_sample_system());
    }

    #[test]
    fn serial_survives_a_panic() {
        let _ = std::thread::spawn(|| {
            let _g = serial();
            panic!("a failed test");
        })
        .join();
        drop(serial());
    }
}
