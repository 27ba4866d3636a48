//! Running a program for tally, the one way `tally sim` (QEMU running the
//! program) and `tally record` (the program itself, held before `exec`
//! while its counters are attached) do it:
//!
//! - [`launch`]: starting a program ([`Command`]), with its arguments and
//!   environment, descriptors put in place, an optional new process
//!   group and parent-death signal, and optionally held before `exec`
//!   until [`Child::release`]; waiting for it.
//! - [`signals`]: SIGINT, SIGTERM and SIGHUP sent to tally passed on to
//!   the program (and to other processes it started, for `sim
//!   --trace-children`), a second one killing it.
//! - [`helper`]: a helper program (Graphviz's `dot`) run with its input
//!   and output piped, bounded in time, in its own process group, killed
//!   if tally dies.
//! - [`Exit`]: how the program ended, and the status tally then exits
//!   with, as a shell gives it.
//!
//! Both modules make system calls from a forked child or a signal
//! handler, so they are the crate's only modules that allow `unsafe`.
#![deny(missing_docs)]

pub mod helper;
pub mod launch;
pub mod signals;

pub use helper::{Output, Ran, run_bounded};
pub use launch::{Child, Command};
pub use signals::{Forwarding, forward_to};

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

impl Exit {
    /// How the process whose wait status is `status` ended (a status that
    /// is neither, which `wait` without `WUNTRACED` never gives, counts
    /// as a signal 0).
    pub fn of(status: ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(c), _) => Exit::Code(c),
            (None, s) => Exit::Signal(s.unwrap_or(0)),
        }
    }

    /// The status tally exits with to pass this ending on, as a shell
    /// gives it: the code, or 128 plus the signal.
    pub fn code(self) -> i32 {
        match self {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
        }
    }
}

/// The status tally exits with for a program that ended with `status`
/// (see [`Exit::code`]).
pub fn exit_code(status: ExitStatus) -> i32 {
    Exit::of(status).code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses_as_a_shell_gives_them() {
        assert_eq!(Exit::of(ExitStatus::from_raw(0)), Exit::Code(0));
        assert_eq!(Exit::of(ExitStatus::from_raw(3 << 8)), Exit::Code(3));
        assert_eq!(Exit::of(ExitStatus::from_raw(9)), Exit::Signal(9));
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }
}
