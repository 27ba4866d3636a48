//! The push interface between a reader and whatever consumes its records.
//!
//! A streaming reader calls a [`Sink`] for every resolved record, so that a
//! consumer can keep what it needs (a whole profile, sums, nothing) without
//! the reader building anything first. Sinks are generic parameters of the
//! readers, so every call is monomorphised and inlined: no dynamic dispatch
//! per line.

use crate::{CallInfo, Cost, FileId, FunctionId, JumpInfo, Positions};

/// Receives the records of a profile as a reader resolves them.
pub trait Sink<C: Cost> {
    /// Whether [`Sink::line`] needs every cost line. A sink that only sums
    /// the lines of each function and file says `false`; a reader may then
    /// give it a run of lines of one function and file, none of them
    /// negative, as one call with their sums and the positions of the
    /// run's last line: the same sums for one call instead of one a line.
    const EACH_LINE: bool = true;
    /// A new part begins (called before its first record), with the
    /// profile's positions kind and number of recorded events.
    fn start_part(&mut self, positions: Positions, events: usize);
    /// A self-cost line.
    fn line(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]);
    /// A call arc.
    fn call(&mut self, info: CallInfo<C>, site: &[u64], target: &[u64], inclusive: &[C]);
    /// A jump.
    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]);
    /// A file name is defined (`fl=`, `fi=`, `cfi=`...; again for each
    /// definition): a sink that keeps records only for some files can
    /// decide here, once per name, rather than after the read. Ids the
    /// reader never names are [`FileId::NONE`] (no file given).
    fn file_named(&mut self, _file: FileId, _name: &[u8]) {}
    /// Bytes of memory the sink holds for the records so far, for a
    /// reader's memory ceiling (asked now and then, not per record). Sinks
    /// whose memory does not grow with the records say 0.
    fn held_bytes(&self) -> usize {
        0
    }
    /// A fresh sink for a second reader that reads a later region of the
    /// same input on another core, or `None` if this sink cannot take
    /// such a region back ([`Sink::absorb`]); the reader then reads the
    /// input in one pass.
    fn split(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Takes back the records of a sink made by [`Sink::split`], as if
    /// they had come to this one after its own: their ids are the second
    /// reader's, renumbered by `ids` into this reader's, and their
    /// sequence numbers start again from 0. The second reader told its
    /// sink of a part before its first record: that part is the one this
    /// sink is in. Its file names were told to that sink only, in its ids.
    fn absorb(&mut self, _later: Self, _ids: &Renumbering)
    where
        Self: Sized,
    {
    }
}

/// How a second reader's ids map to the first one's ([`Sink::absorb`]):
/// entry `i` is the id that the second reader's id `i` has in the first.
#[derive(Clone, Debug, Default)]
pub struct Renumbering {
    /// File ids.
    pub files: Vec<FileId>,
    /// Function ids.
    pub functions: Vec<FunctionId>,
    /// What to add to the second reader's sequence numbers
    /// ([`crate::CallInfo::seq`]).
    pub seq: u64,
}

/// A sink that keeps nothing: reading with it costs memory for names only
/// (a validating scan, such as `tally check`).
pub struct NullSink;

impl<C: Cost> Sink<C> for NullSink {
    fn start_part(&mut self, _: Positions, _: usize) {}
    #[inline]
    fn line(&mut self, _: FunctionId, _: FileId, _: &[u64], _: &[C]) {}
    fn call(&mut self, _: CallInfo<C>, _: &[u64], _: &[u64], _: &[C]) {}
    fn jump(&mut self, _: JumpInfo<C>, _: &[u64], _: &[u64]) {}
    fn split(&self) -> Option<Self> {
        Some(NullSink)
    }
}
