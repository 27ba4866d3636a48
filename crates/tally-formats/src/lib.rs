//! Readers and writers of the profile formats tally understands.
//!
//! One module per format. Readers produce [`tally_model::Profile`] values and
//! never print; writers take a profile and produce bytes, writing files
//! through a temporary file and a rename so that nothing is lost on failure.
//!
//! One way in: [`Source::open`] opens a file or standard input and names
//! its format ([`detect`]); [`read`], [`scan`] and [`parse_any`] read any
//! profile format from it, unsigned or signed, whole, scanned, or into any
//! sink. One way out: [`write_profile`] chooses the format and compression
//! from the options and the output's name. Each format module implements
//! the one shape of a format, [`ReadProfile`] and [`WriteProfile`].
//!
//! # Example: read, aggregate, write
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::path::Path;
//! use tally_formats::{OutputFormat, OutputOptions, Source, write_profile};
//! use tally_model::AnyCost;
//!
//! # fn main() -> Result<(), tally_formats::Error> {
//! let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data/callgrind/mutual.default.out");
//! // Read: the format is detected from the content; a difference
//! // (negative counts) would come back as `AnyCost::Signed`.
//! let source = Source::open(Path::new(path))?;
//! let (profile, _warnings) = tally_formats::read(&source, None)?;
//! let AnyCost::Unsigned(profile) = profile else { panic!("a measured profile") };
//!
//! // Aggregate: the first event's self cost per function, over all parts.
//! let mut by_function: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
//! for part in &profile.parts {
//!     part.lines.for_each(|line| {
//!         let name = profile.names.function_name(line.function).to_vec();
//!         *by_function.entry(name).or_default() += line.costs[0];
//!     });
//! }
//! assert!(by_function.contains_key(&b"main"[..]));
//!
//! // Write: Cachegrind, gzip'd because the name ends in `.gz`, through a
//! // temporary file renamed into place.
//! let dir = tempfile::tempdir().unwrap();
//! let out = dir.path().join("cachegrind.out.gz");
//! let options = OutputOptions { format: Some(OutputFormat::Cachegrind), ..Default::default() };
//! write_profile(&profile, &out, &options)?;
//!
//! // The file reads back with the same self costs.
//! let (back, _) = tally_formats::read(&Source::open(&out)?, None)?;
//! let AnyCost::Unsigned(back) = back else { unreachable!() };
//! let mut total = 0;
//! back.parts[0].lines.for_each(|line| total += line.costs[0]);
//! assert_eq!(total, by_function.values().sum::<u64>());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod cachegrind;
pub mod callgrind;
pub mod dcpi;
mod detect;
mod error;
pub mod escape;
pub mod firefox;
mod fold;
pub mod folded;
pub mod gmon;
mod input;
pub mod json;
pub mod limits;
mod load;
mod output;
pub mod perf;
pub mod pprof;
mod shape;
pub mod signals;
mod source;
pub mod speedscope;
mod stacked;

pub use detect::{Detected, Format as FileFormat, HEAD_LEN, detect};
pub use error::{Error, ParseErrorKind, Warning, WarningKind, Warnings};
pub use input::Input;
pub use load::{
    AnyRead, NullSink, Records, parse_any, read, read_all, read_all_kept, read_file, read_files,
    read_kept, scan, scan_file, sum_bound,
};
pub use output::{
    Abandoned, OutputFormat, OutputOptions, abandon_writes, check_writable, write_file,
    write_file_send, write_profile,
};
pub use shape::{ReadProfile, WriteProfile, reader};
pub use source::{GZIP_MAX_RATIO, Source};
