//! Readers and writers of the profile formats tally understands.
//!
//! One module per format. Readers produce [`tally_model::Profile`] values and
//! never print; writers take a profile and produce bytes, writing files
//! through a temporary file and a rename so that nothing is lost on failure.

pub mod cachegrind;
pub mod callgrind;
pub mod dcpi;
pub mod error;
pub mod gmon;
pub mod input;
pub mod json;
pub mod load;
pub mod output;

pub use error::{Error, ParseErrorKind, Warning, WarningKind, Warnings};
pub use input::Input;
pub use load::{NullSink, read_file, read_files, scan_file};
