//! A value made with unsigned counts or with signed ones.
//!
//! A profile's counts are unsigned when measured and signed when it is a
//! difference; which one a file holds is known only once it has been read.
//! [`AnyCost`] carries either, so that one entry point can return both and
//! the caller dispatches to generic code once.

use crate::{Format, Profile};

/// Something built with `u64` counts or with `i64` counts (a difference).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyCost<U, S> {
    /// Built with unsigned (measured) counts.
    Unsigned(U),
    /// Built with signed counts: some count is negative.
    Signed(S),
}

impl<U, S> AnyCost<U, S> {
    /// Whether the counts are signed.
    pub fn is_signed(&self) -> bool {
        matches!(self, AnyCost::Signed(_))
    }
}

/// A profile with unsigned or signed counts.
pub type AnyProfile = AnyCost<Profile<u64>, Profile<i64>>;

impl AnyProfile {
    /// The format the profile was read from.
    pub fn format(&self) -> Format {
        match self {
            AnyCost::Unsigned(p) => p.format,
            AnyCost::Signed(p) => p.format,
        }
    }

    /// The `cmd:` of the first part that has one.
    pub fn cmd(&self) -> Option<&[u8]> {
        match self {
            AnyCost::Unsigned(p) => p.parts.iter().find_map(|p| p.info.cmd.as_deref()),
            AnyCost::Signed(p) => p.parts.iter().find_map(|p| p.info.cmd.as_deref()),
        }
    }
}
