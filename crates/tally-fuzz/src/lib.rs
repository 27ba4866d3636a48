//! An in-process mutation fuzzer for tally, on stable Rust, run in CI.
//!
//! Seeds are the real fixtures under `tests/data` ([`corpus`]); each case
//! is a seed mutated one to three times ([`mutate`]: byte flips,
//! truncations, lines duplicated, deleted, swapped or spliced from another
//! format, numbers at the edge of 64 bits, names of 64 KiB, NUL bytes,
//! CRLF, comment prefixes, gzip), made from the run's seed and the case
//! number by SplitMix64 ([`rng`]) so that `(seed, case)` names it for
//! ever. [`drive`] sends it through detection, the reader and every report
//! and conversion of what was read, with each output read back; [`run`]
//! catches panics and checks the time and memory budgets; [`check`] says
//! which errors are located. A failing case is written to a file that
//! `tally-fuzz --replay FILE` runs again; the ones kept in `seeds/` are
//! replayed by `cargo test`. See docs/fuzzing.md.
#![deny(missing_docs)]

pub mod check;
pub mod corpus;
pub mod drive;
pub mod fields;
pub mod front;
pub mod mutate;
pub mod rng;
pub mod run;

pub use check::Failure;
pub use corpus::{Corpus, Kind};
pub use drive::{Case, Driver};
pub use run::{Budget, Memory, NoMemory, Settings, run_case, run_target};
