//! The one way into tally: every front end (each `tally` command, the web
//! server and its HTML report) opens its inputs here, so that a file gets
//! the same reading, the same warnings and the same refusals whichever
//! command is given it.
//!
//! - [`open_all`] opens paths (`-` is standard input, at most once);
//! - [`Program`] is the object file that gmon files and DCPI profiles need;
//! - [`load_profile`] reads any profile tally knows into one
//!   [`Loaded`] value: gmon files summed with their program and converted,
//!   DCPI profiles summed and mapped with their image, anything else read
//!   (several summed), signed when it holds a difference;
//! - [`read_summing`] is the one rule for when a command sums an input
//!   as it reads it (one file) and when it loads inputs whole;
//! - [`load_with_stacks`] gives the pictures and exporters a profile with
//!   its stacks: recorded, or estimated from its call arcs;
//! - [`warning_lines`] is the one rule for a reader's warnings: a file that
//!   looks truncated is a warning, with the same text, in every command;
//! - [`combine`] reads the inputs of `merge`, `diff` and `gate`, folded as
//!   read, and writes their result.
//!
//! ```no_run
//! use std::path::PathBuf;
//! let files = [PathBuf::from("callgrind.out.1234")];
//! let sources = tally_input::open_all(&files)?;
//! let loaded = tally_input::load_profile(&sources, &tally_input::Options::default())?;
//! for line in &loaded.warnings {
//!     eprintln!("{line}");
//! }
//! # Ok::<(), tally_input::Error>(())
//! ```
#![deny(missing_docs)]

mod check;
pub mod combine;
mod dcpi;
mod error;
mod gmon;
mod load;
mod program;
mod sniff;
mod stacks;
mod stream;
mod warnings;

pub use check::{Scanned, scan};
pub use dcpi::{DcpiInput, by_image, epoch_dir, epoch_profiles, read_dcpi, read_dcpi_paths};
pub use error::Error;
pub use gmon::{Converted, GmonInput, convert_gmon, read_gmon, sum_gmon};
pub use load::{
    Loaded, Options, load_one, load_profile, names, open_all, read_within_memory, stdin_once,
};
pub use program::Program;
pub use sniff::{InputKind, Sniffed, input_kind, profiles_then_sources, sniff};
pub use stacks::{StackSource, WithStacks, folded_tree, load_with_stacks};
pub use stream::{Summing, read_one_summing, read_summing};
pub use warnings::warning_lines;

/// Opens one path (`-` is standard input).
pub fn open(path: &std::path::Path) -> Result<Source, Error> {
    Ok(Source::open(path)?)
}

/// Formats and detection, as the inputs were read.
pub use tally_formats::{FileFormat, Source};
