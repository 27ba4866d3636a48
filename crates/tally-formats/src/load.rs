//! The one way into a Callgrind or Cachegrind profile: one file, several
//! files as one profile (a dump series or a thread set), a streaming scan,
//! or any sink of the caller's.
//!
//! Whether a profile's counts are signed (a difference) is known only once
//! a negative count is met. Every entry here reads as unsigned first and,
//! at a negative count, reads the same [`Source`] again as signed (a file
//! is reopened, standard input comes from its buffer), so callers get an
//! [`AnyProfile`] and never retry themselves. Sinks stay generic
//! parameters: the reader is monomorphised for each.

use crate::callgrind::{self, ProfileSink, ReadOptions, ReadOutcome};
use crate::error::{Error, ParseErrorKind, Warnings};
use crate::fold::FoldSink;
use crate::source::Source;
use std::path::Path;
pub use tally_model::NullSink;
use tally_model::{AnyCost, AnyProfile, Cost, Profile, Sink};

/// A read with unsigned counts and its sink, or one with signed counts.
pub type AnyRead<U, S> = AnyCost<(ReadOutcome<u64>, U), (ReadOutcome<i64>, S)>;

/// Parses a source into a sink of the caller's, unsigned if it can be and
/// signed (with the sink `signed` makes) if it holds a negative count.
/// Refuses files of other formats ([`Source::expect_callgrind`]).
pub fn parse_any<U: Sink<u64>, S: Sink<i64>>(
    source: &Source,
    mut unsigned: U,
    signed: impl FnOnce() -> S,
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<AnyRead<U, S>, Error> {
    source.expect_callgrind()?;
    let memory_limit = crate::limits::memory_limit()?;
    let first = {
        let mut step = |n: u64| {
            if let Some(p) = progress.as_mut() {
                p(n)
            }
        };
        let options = ReadOptions {
            progress: Some(&mut step),
            memory_limit,
            ..Default::default()
        };
        callgrind::parse(source.input()?, &mut unsigned, options)
    };
    match first {
        Ok(o) => Ok(AnyCost::Unsigned((o, unsigned))),
        Err(e) if is_negative(&e) => {
            let mut s = signed();
            let options = ReadOptions {
                progress,
                memory_limit,
                ..Default::default()
            };
            let o = callgrind::parse(source.input()?, &mut s, options)?;
            Ok(AnyCost::Signed((o, s)))
        }
        Err(e) => Err(e),
    }
}

/// Whether a read failed only because a count is negative.
fn is_negative(e: &Error) -> bool {
    matches!(
        e,
        Error::Parse {
            kind: ParseErrorKind::Negative(_),
            ..
        }
    )
}

/// How a full load keeps the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Records {
    /// Every record as read, in the file's order (compactly coded): what
    /// `read(write(p)) == p` needs.
    Exact,
    /// Each distinct record once, repeats summed into it (see
    /// [`crate::fold`]): memory grows with the distinct records, not with
    /// the lines.
    Folded,
}

/// A sink that becomes a whole profile.
trait Store<C: Cost>: Sink<C> + Default {
    fn finish(self, read: ReadOutcome<C>, path: &Path) -> Result<(Profile<C>, Warnings), Error>;
}

impl<C: Cost> Store<C> for ProfileSink<C> {
    fn finish(self, read: ReadOutcome<C>, _: &Path) -> Result<(Profile<C>, Warnings), Error> {
        Ok(self.into_profile(read))
    }
}

impl<C: Cost> Store<C> for FoldSink<C> {
    fn finish(self, read: ReadOutcome<C>, path: &Path) -> Result<(Profile<C>, Warnings), Error> {
        self.into_profile(read, path)
    }
}

/// Reads one source whole, unsigned or signed.
pub fn read(
    source: &Source,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(AnyProfile, Warnings), Error> {
    read_kept(source, Records::Exact, progress)
}

/// Reads one source whole, unsigned or signed, keeping its records as
/// asked.
pub fn read_kept(
    source: &Source,
    records: Records,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(AnyProfile, Warnings), Error> {
    match records {
        Records::Exact => read_into::<ProfileSink<u64>, ProfileSink<i64>>(source, progress),
        Records::Folded => read_into::<FoldSink<u64>, FoldSink<i64>>(source, progress),
    }
}

fn read_into<U: Store<u64>, S: Store<i64>>(
    source: &Source,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(AnyProfile, Warnings), Error> {
    let path = source.path();
    Ok(
        match parse_any(source, U::default(), S::default, progress)? {
            AnyCost::Unsigned((o, sink)) => {
                let (p, w) = sink.finish(o, path)?;
                (AnyCost::Unsigned(p), w)
            }
            AnyCost::Signed((o, sink)) => {
                let (p, w) = sink.finish(o, path)?;
                (AnyCost::Signed(p), w)
            }
        },
    )
}

/// Reads a source without keeping its records (header facts, names,
/// per-part counts and totals, warnings): memory grows with names, not
/// lines.
pub fn scan(
    source: &Source,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<AnyCost<ReadOutcome<u64>, ReadOutcome<i64>>, Error> {
    Ok(match parse_any(source, NullSink, || NullSink, progress)? {
        AnyCost::Unsigned((o, _)) => AnyCost::Unsigned(o),
        AnyCost::Signed((o, _)) => AnyCost::Signed(o),
    })
}

/// Reads several sources as one profile, each file's parts kept apart, in
/// the order given; signed if any of them is. Returns the warnings of each.
pub fn read_all(
    sources: &[Source],
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(AnyProfile, Vec<Warnings>), Error> {
    read_all_kept(sources, Records::Exact, None, progress)
}

/// [`read_all`], keeping the records as asked, under a memory ceiling of
/// the caller's (`None`: the configured one, [`crate::limits`]).
pub fn read_all_kept(
    sources: &[Source],
    records: Records,
    memory_limit: Option<u64>,
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(AnyProfile, Vec<Warnings>), Error> {
    let memory_limit = match memory_limit {
        Some(l) => Some(l),
        None => crate::limits::memory_limit()?,
    };
    let first = {
        let mut step = |n: u64| {
            if let Some(p) = progress.as_mut() {
                p(n)
            }
        };
        read_sources_kept::<u64>(sources, records, memory_limit, Some(&mut step))
    };
    match first {
        Ok((p, w)) => Ok((AnyCost::Unsigned(p), w)),
        Err(e) if is_negative(&e) => {
            let (p, w) = read_sources_kept::<i64>(sources, records, memory_limit, progress)?;
            Ok((AnyCost::Signed(p), w))
        }
        Err(e) => Err(e),
    }
}

fn read_sources<C: Cost>(
    sources: &[Source],
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Vec<Warnings>), Error> {
    let limit = crate::limits::memory_limit()?;
    read_sources_kept(sources, Records::Exact, limit, progress)
}

fn read_sources_kept<C: Cost>(
    sources: &[Source],
    records: Records,
    memory_limit: Option<u64>,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Vec<Warnings>), Error> {
    match records {
        Records::Exact => read_sources_into::<C, ProfileSink<C>>(sources, memory_limit, progress),
        Records::Folded => read_sources_into::<C, FoldSink<C>>(sources, memory_limit, progress),
    }
}

fn read_sources_into<C: Cost, K: Store<C>>(
    sources: &[Source],
    memory_limit: Option<u64>,
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Vec<Warnings>), Error> {
    let mut all: Option<Profile<C>> = None;
    let mut warnings = Vec::new();
    let mut done = 0u64;
    let mut sums = None;
    for source in sources {
        source.expect_callgrind()?;
        let mut step = |n: u64| {
            if let Some(p) = progress.as_mut() {
                p(done + n)
            }
        };
        // The running sums go on from file to file: what the files hold
        // together must fit, as the reports sum them.
        let options = ReadOptions {
            progress: Some(&mut step),
            carried: sums.take(),
            memory_limit,
        };
        let mut sink = K::default();
        let mut outcome = callgrind::parse::<C, _>(source.input()?, &mut sink, options)?;
        sums = Some(std::mem::take(&mut outcome.sums));
        let (p, w) = sink.finish(outcome, source.path())?;
        done += source.size().unwrap_or(0);
        warnings.push(w);
        match all.as_mut() {
            None => all = Some(p),
            Some(a) => a.absorb(p).map_err(|e| {
                Error::Incompatible(format!(
                    "{}: cannot be loaded with {}: {e}",
                    source.path().display(),
                    sources[0].path().display()
                ))
            })?,
        }
    }
    let profile = all.ok_or_else(|| Error::Incompatible("no input files".into()))?;
    Ok((profile, warnings))
}

/// Opens every path as a [`Source`].
pub fn open_all(paths: &[&Path]) -> Result<Vec<Source>, Error> {
    paths.iter().map(|p| Source::open(p)).collect()
}

/// Reads one file (or `-`) into memory with counts of type `C`.
pub fn read_file<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Warnings), Error> {
    let (p, mut w) = read_sources::<C>(&[Source::open(path)?], progress)?;
    Ok((p, w.pop().unwrap_or_default()))
}

/// Reads several files as one profile with counts of type `C`, each file's
/// parts kept apart, in the order given. Returns the warnings of each file.
pub fn read_files<C: Cost>(
    paths: &[&Path],
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Vec<Warnings>), Error> {
    read_sources::<C>(&open_all(paths)?, progress)
}

/// Reads a file without keeping its records, with counts of type `C`.
pub fn scan_file<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<ReadOutcome<C>, Error> {
    let source = Source::open(path)?;
    source.expect_callgrind()?;
    let options = ReadOptions {
        progress,
        ..Default::default()
    };
    callgrind::parse(source.input()?, &mut NullSink, options)
}
