//! The Callgrind profile format (and Cachegrind's subset): reader and
//! writer.

pub mod reader;
pub mod writer;

pub use reader::{
    PartStats, ProfileSink, ReadOptions, ReadOutcome, Sink, Sums, parse, read, read_with,
};
pub use writer::{WriteOptions, write};
