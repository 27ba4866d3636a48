//! One rule for when a profile is summed as it is read and when it is
//! loaded whole.

use tally_formats::AnyRead;
use tally_formats::Source;
use tally_model::{AnyProfile, Sink};

use crate::{Error, warning_lines};

/// Inputs read for a command that sums them.
pub enum Summing<U, S> {
    /// One input read straight into the command's sink: nothing is stored
    /// but what the sink keeps, so memory does not grow with the file.
    Streamed(AnyRead<U, S>),
    /// Several inputs (or one whose whole stacks the command needs),
    /// loaded and summed.
    Whole {
        /// The sum.
        profile: AnyProfile,
        /// The readers' warnings, as printed.
        warnings: Vec<String>,
    },
}

/// Reads `sources` for a command that sums costs: one input is read into
/// the sink `unsigned` (or the one `signed` makes, for a difference),
/// unless the command `needs_stacks` and the input records whole stacks
/// (perf.data, pprof, folded: a sink sees only their arcs); several are
/// loaded whole and summed. `progress` is told the bytes read.
pub fn read_summing<U, S>(
    sources: &[Source],
    needs_stacks: bool,
    unsigned: impl FnOnce() -> U,
    signed: impl FnOnce() -> S,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<Summing<U, S>, Error>
where
    U: Sink<u64> + Send,
    S: Sink<i64> + Send,
{
    if let [source] = sources
        && (!needs_stacks || source.detected().is_callgrind_reader_input())
    {
        return Ok(Summing::Streamed(read_one_summing(
            source, unsigned, signed, progress,
        )?));
    }
    let (profile, read) = tally_formats::read_all(sources, progress)?;
    let warnings = sources
        .iter()
        .zip(&read)
        .flat_map(|(s, w)| warning_lines(s.path(), w))
        .collect();
    Ok(Summing::Whole { profile, warnings })
}

/// One input read into a sink as it goes (see [`read_summing`]).
pub fn read_one_summing<U, S>(
    source: &Source,
    unsigned: impl FnOnce() -> U,
    signed: impl FnOnce() -> S,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<AnyRead<U, S>, Error>
where
    U: Sink<u64> + Send,
    S: Sink<i64> + Send,
{
    Ok(tally_formats::parse_any(
        source,
        unsigned(),
        signed,
        progress,
    )?)
}
