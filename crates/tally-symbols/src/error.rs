//! The one error type of the crate.

use std::path::{Path, PathBuf};

/// Why an object file could not be read, or a request on it not answered.
///
/// Every variant names the file, because `tally annotate` may read several
/// objects (the executable and its shared libraries) for one profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SymbolsError {
    /// Reading the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ELF file at all (empty, text, another format).
    #[error("{}: not an ELF file ({reason})", path.display())]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },
    /// The file starts like an ELF file but its headers or tables are
    /// damaged or truncated.
    #[error("{}: malformed ELF file: {reason}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What could not be read.
        reason: String,
    },
    /// The file is ELF, but for a machine this crate cannot disassemble.
    #[error(
        "{}: cannot disassemble code for {machine} (only x86-64 and x86 are supported)",
        path.display()
    )]
    UnsupportedArchitecture {
        /// The file.
        path: PathBuf,
        /// The ELF machine, by name where known.
        machine: String,
    },
    /// No executable section of the file holds this address.
    #[error(
        "address {address:#x} is not in an executable section of {}",
        path.display()
    )]
    AddressNotExecutable {
        /// The address asked for.
        address: u64,
        /// The file.
        path: PathBuf,
    },
    /// A range that ends before it starts.
    #[error(
        "address range {start:#x}..{end:#x} of {} ends before it starts",
        path.display()
    )]
    InvalidRange {
        /// Start of the range.
        start: u64,
        /// End of the range (exclusive).
        end: u64,
        /// The file.
        path: PathBuf,
    },
}

impl SymbolsError {
    pub(crate) fn malformed(path: &Path, reason: impl std::fmt::Display) -> Self {
        SymbolsError::Malformed {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }
}
