//! The Callgrind profile format (and Cachegrind's subset): reader and
//! writer.

pub mod reader;
pub mod writer;

pub use reader::{
    PartStats, ProfileSink, ReadOptions, ReadOutcome, Sink, Sums, parse, read, read_with,
};
pub use writer::{WriteOptions, write};

/// The Callgrind format, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Callgrind {
    /// How to write.
    pub options: WriteOptions,
}

impl<C: tally_model::Cost> crate::shape::WriteProfile<C> for Callgrind {
    fn write(
        &self,
        profile: &tally_model::Profile<C>,
        out: &mut dyn std::io::Write,
    ) -> std::io::Result<()> {
        write(profile, out, self.options)
    }
}
