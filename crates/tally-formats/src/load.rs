//! The one way into a Callgrind, Cachegrind, pprof or tally JSON profile: one file,
//! several files as one profile (a dump series or a thread set), a
//! streaming scan, or any sink of the caller's. A pprof profile is read
//! whole (it is small and holds stacks) and its records are then given to
//! the sink.
//!
//! Profiles of whole stacks (folded stacks, `perf script` text, perf.data)
//! and tally's JSON form come in through the same entries: they are read whole, with their
//! stacks, and their derived records are replayed into a sink as the
//! Callgrind reader would push them. Their counts are never negative.
//!
//! Whether a profile's counts are signed (a difference) is known only once
//! a negative count is met. Every entry here reads as unsigned first and,
//! at a negative count, reads the same [`Source`] again as signed (a file
//! is reopened, standard input comes from its buffer), so callers get an
//! [`AnyProfile`] and never retry themselves. Sinks stay generic
//! parameters: the reader is monomorphised for each.

use crate::callgrind::{self, ProfileSink, ReadOptions, ReadOutcome};
use crate::detect::Format;
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
pub fn parse_any<U: Sink<u64> + Send, S: Sink<i64> + Send>(
    source: &Source,
    mut unsigned: U,
    signed: impl FnOnce() -> S,
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<AnyRead<U, S>, Error> {
    // Formats read whole are replayed into the sink as a reader would.
    if let Some(reader) = crate::shape::reader(source.format()) {
        let _place = crate::limits::reading(source.name());
        let size = source.size().unwrap_or(0);
        let read = match reader.read(source.name(), &source.bytes()?)? {
            AnyCost::Unsigned(p) => {
                let mut outcome = replay(p, &mut unsigned);
                outcome.bytes = size;
                AnyCost::Unsigned((outcome, unsigned))
            }
            AnyCost::Signed(p) => {
                let mut sink = signed();
                let mut outcome = replay(p, &mut sink);
                outcome.bytes = size;
                AnyCost::Signed((outcome, sink))
            }
        };
        if let Some(p) = progress.as_mut() {
            p(size)
        }
        return Ok(read);
    }
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
    /// the `fold` module): memory grows with the distinct records, not with
    /// the lines.
    Folded,
}

/// A sink that becomes a whole profile.
trait Store<C: Cost>: Sink<C> + Default + Send {
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
        // pprof and JSON counts become `C` as they are built; the other
        // formats read whole are measured profiles.
        let place = crate::limits::reading(source.name());
        let stacked = if source.format() == Format::Pprof {
            Some(crate::pprof::read_as::<C>(source.name(), &source.bytes()?)?)
        } else if source.format() == Format::TallyJson {
            Some(crate::json::read_as::<C>(source.name(), &source.bytes()?)?)
        } else {
            match crate::shape::reader(source.format()) {
                Some(reader) => Some(any_as::<C>(
                    reader.read(source.name(), &source.bytes()?)?,
                    source,
                )?),
                None => None,
            }
        };
        drop(place);
        if let Some(p) = stacked {
            done += source.size().unwrap_or(0);
            warnings.push(Warnings::default());
            match all.as_mut() {
                None => all = Some(p),
                Some(a) => a.absorb(p).map_err(|e| cannot_load(source, sources, e))?,
            }
            continue;
        }
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
            ..Default::default()
        };
        let mut sink = K::default();
        let mut outcome = callgrind::parse::<C, _>(source.input()?, &mut sink, options)?;
        sums = Some(std::mem::take(&mut outcome.sums));
        let (p, w) = sink.finish(outcome, source.path())?;
        done += source.size().unwrap_or(0);
        warnings.push(w);
        match all.as_mut() {
            None => all = Some(p),
            Some(a) => a.absorb(p).map_err(|e| cannot_load(source, sources, e))?,
        }
    }
    let profile = all.ok_or_else(|| Error::Incompatible("no input files".into()))?;
    Ok((profile, warnings))
}

fn cannot_load(source: &Source, sources: &[Source], e: tally_model::Error) -> Error {
    Error::Incompatible(format!(
        "{}: cannot be loaded with {}: {e}",
        source.path().display(),
        sources[0].path().display()
    ))
}

/// A profile of stacks (always unsigned) as a profile of `C`: the same
/// value for `u64`; for a signed load (with a difference profile) refused.
fn any_as<C: Cost>(p: AnyProfile, source: &Source) -> Result<Profile<C>, Error> {
    let any: Box<dyn std::any::Any> = match p {
        AnyCost::Unsigned(p) => Box::new(p),
        AnyCost::Signed(p) => Box::new(p),
    };
    any.downcast::<Profile<C>>().map(|p| *p).map_err(|_| {
        Error::Incompatible(format!(
            "{}: {} cannot be loaded with a difference profile (negative counts)",
            source.name().display(),
            source.format().describe()
        ))
    })
}

/// Pushes a loaded profile's records into `sink` part by part, as a reader
/// would, and returns what a read returns besides them: the profile
/// without records (its stacks kept), per-part counts and totals.
fn replay<C: Cost>(mut profile: Profile<C>, sink: &mut impl Sink<C>) -> ReadOutcome<C> {
    struct Push<'a, S>(&'a mut S);
    impl<C: Cost, S: Sink<C>> tally_model::PartVisitor<C> for Push<'_, S> {
        fn line(&mut self, l: tally_model::LineRef<'_, C>) {
            self.0.line(l.function, l.file, l.positions, l.costs);
        }
        fn call(&mut self, c: tally_model::CallRef<'_, C>) {
            self.0.call(c.info, c.site, c.target, c.inclusive);
        }
        fn jump(&mut self, j: tally_model::JumpRef<'_, C>) {
            self.0.jump(j.info, j.source, j.target);
        }
    }
    let events = profile.events.len();
    let mut stats = Vec::new();
    for part in &mut profile.parts {
        sink.start_part(profile.positions, events);
        part.visit(&mut Push(sink));
        stats.push(callgrind::PartStats {
            totals: part.lines.totals().unwrap_or_else(|| vec![C::ZERO; events]),
            lines: part.lines.len(),
            calls: part.calls.len() as u64,
            jumps: part.jumps.len() as u64,
            summary_line: 0,
            totals_line: 0,
            first_body_line: 0,
        });
        let empty = tally_model::Part::new(profile.positions, events);
        part.lines = empty.lines;
        part.calls = empty.calls;
        part.jumps = empty.jumps;
    }
    ReadOutcome {
        profile,
        stats,
        warnings: Warnings::default(),
        bytes: 0,
        sums: Default::default(),
        split_at: None,
    }
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

/// Where inputs summed together (a merge, a diff) pass what counts of
/// type `C` hold: the sources are scanned in order, each file's running
/// sums of magnitudes (see [`callgrind::Sums`]) going on from the ones
/// before it for the events named in `events` (matched by name), so the
/// error names the input, the line and the function where their sum first
/// passes the bound every reader keeps. A merge or diff whose arithmetic
/// overflowed asks this for the place to name. `Ok(())` when every line
/// fits.
pub fn sum_bound<C: Cost>(sources: &[&Source], events: &[String]) -> Result<(), Error> {
    let mut running = vec![0u64; events.len()];
    let mut calls = 0u64;
    for source in sources {
        if matches!(
            source.format(),
            Format::Folded
                | Format::PerfScript
                | Format::PerfData
                | Format::Pprof
                | Format::TallyJson
        ) {
            stack_sums::<C>(source, events, &mut running)?;
            continue;
        }
        source.expect_callgrind()?;
        // The file's own events first, to carry the sums in its order.
        let alone =
            callgrind::parse::<C, _>(source.input()?, &mut NullSink, ReadOptions::default())?;
        let index: Vec<Option<usize>> = alone
            .profile
            .events
            .recorded()
            .iter()
            .map(|e| events.iter().position(|n| *n == e.name))
            .collect();
        let carried = callgrind::Sums {
            costs: index.iter().map(|i| i.map_or(0, |i| running[i])).collect(),
            calls,
        };
        let options = ReadOptions {
            carried: Some(carried),
            ..Default::default()
        };
        let outcome = callgrind::parse::<C, _>(source.input()?, &mut NullSink, options)?;
        for (k, i) in index.iter().enumerate() {
            if let Some(i) = *i {
                running[i] = outcome.sums.costs.get(k).copied().unwrap_or(0);
            }
        }
        calls = outcome.sums.calls;
    }
    Ok(())
}

/// [`sum_bound`] over a profile of whole stacks: its samples' magnitudes
/// are added to `running`. Folded stacks name the line where the sum
/// passes the bound; the other stack formats hold no line per sample, so
/// their error names the input and the event.
fn stack_sums<C: Cost>(
    source: &Source,
    events: &[String],
    running: &mut [u64],
) -> Result<(), Error> {
    let limit = if C::SIGNED { "2^63-1" } else { "2^64-1" };
    let over = |event: &str, line: Option<u64>| {
        let what = format!(
            "the samples of event `{event}`, added to the inputs before, sum to more than {limit}, which tally's 64-bit sums cannot hold"
        );
        match line {
            Some(line) => Error::Parse {
                path: source.name().to_path_buf(),
                line,
                kind: ParseErrorKind::Malformed(what),
            },
            None => Error::Incompatible(format!("{}: {what}", source.name().display())),
        }
    };
    if source.format() == Format::Folded {
        let Some(k) = events.iter().position(|e| e == crate::folded::EVENT) else {
            return Ok(());
        };
        let bytes = source.bytes()?;
        for (i, line) in bytes.split(|&c| c == b'\n').enumerate() {
            let line = line.trim_ascii();
            let Some(count) = line
                .rsplit(|c| c.is_ascii_whitespace())
                .next()
                .and_then(|c| tally_model::parse_u64(c).ok())
            else {
                continue;
            };
            match running[k].checked_add(count) {
                Some(v) if v <= C::MAX_MAGNITUDE => running[k] = v,
                _ => return Err(over(crate::folded::EVENT, Some(i as u64 + 1))),
            }
        }
        return Ok(());
    }
    let (profile, _) = read(source, None)?;
    let totals: Vec<(String, u64)> = match &profile {
        AnyCost::Unsigned(p) => magnitudes(p),
        AnyCost::Signed(p) => magnitudes(p),
    };
    for (name, m) in totals {
        let Some(k) = events.iter().position(|e| *e == name) else {
            continue;
        };
        match running[k].checked_add(m) {
            Some(v) if v <= C::MAX_MAGNITUDE => running[k] = v,
            _ => return Err(over(&name, None)),
        }
    }
    Ok(())
}

/// Each recorded event's name and the sum of the magnitudes of its self
/// costs (saturating).
fn magnitudes<C: Cost>(p: &Profile<C>) -> Vec<(String, u64)> {
    let mut sums = vec![0u64; p.events.len()];
    for part in &p.parts {
        part.lines.for_each(|l| {
            for (s, c) in sums.iter_mut().zip(l.costs) {
                *s = s.saturating_add(c.magnitude());
            }
        });
    }
    p.events
        .recorded()
        .iter()
        .zip(sums)
        .map(|(e, s)| (e.name.clone(), s))
        .collect()
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
