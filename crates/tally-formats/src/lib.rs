//! Readers and writers of the profile formats tally understands.
//!
//! One module per format. Readers produce [`tally_model::Profile`] values and
//! never print; writers take a profile and produce bytes, writing files
//! through a temporary file and a rename so that nothing is lost on failure.
//!
//! One way in: [`Source::open`] opens a file or standard input and names
//! its format ([`detect`]); [`load`] reads Callgrind and Cachegrind
//! profiles from it, unsigned or signed, whole, scanned, or into any sink.
//! One way out: [`write_profile`] chooses the format and compression from
//! the options and the output's name.

pub mod cachegrind;
pub mod callgrind;
pub mod dcpi;
pub mod detect;
pub mod error;
pub mod gmon;
pub mod input;
pub mod json;
pub mod load;
pub mod output;
pub mod source;

pub use detect::Detected;
pub use error::{Error, ParseErrorKind, Warning, WarningKind, Warnings};
pub use input::Input;
pub use load::{NullSink, parse_any, read, read_all, read_file, read_files, scan, scan_file};
pub use output::{OutputFormat, OutputOptions, write_profile};
pub use source::Source;
