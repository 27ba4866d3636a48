//! Loading profiles from paths: one file, several files as one profile
//! (a dump series or a thread set), or a streaming check.

use crate::callgrind::{self, ReadOptions, ReadOutcome, Sink};
use crate::error::{Error, Warnings};
use crate::input::Input;
use std::path::Path;
use tally_model::{CallInfo, Cost, FileId, FunctionId, JumpInfo, Positions, Profile};

/// Reads one file (or `-`), gzip or not, into memory.
pub fn read_file<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Warnings), Error> {
    let input = Input::open(path)?;
    callgrind::read_with(input, ReadOptions { progress })
}

/// Reads several files as one profile, each file's parts kept apart, in the
/// order given. Returns the warnings of each file.
pub fn read_files<C: Cost>(
    paths: &[&Path],
    mut progress: Option<&mut dyn FnMut(u64)>,
) -> Result<(Profile<C>, Vec<Warnings>), Error> {
    let mut all: Option<Profile<C>> = None;
    let mut warnings = Vec::new();
    let mut done = 0u64;
    for path in paths {
        let mut step = |n: u64| {
            if let Some(p) = progress.as_mut() {
                p(done + n)
            }
        };
        let (p, w) = read_file::<C>(path, Some(&mut step))?;
        done += std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        warnings.push(w);
        match all.as_mut() {
            None => all = Some(p),
            Some(a) => a.absorb(p).map_err(|e| {
                Error::Incompatible(format!(
                    "{}: cannot be loaded with {}: {e}",
                    path.display(),
                    paths[0].display()
                ))
            })?,
        }
    }
    let profile = all.ok_or_else(|| Error::Incompatible("no input files".into()))?;
    Ok((profile, warnings))
}

/// A sink that keeps nothing: reading with it costs memory for names only.
pub struct NullSink;

impl<C: Cost> Sink<C> for NullSink {
    fn start_part(&mut self, _: Positions, _: usize) {}
    #[inline]
    fn line(&mut self, _: FunctionId, _: FileId, _: &[u64], _: &[C]) {}
    fn call(&mut self, _: CallInfo<C>, _: &[u64], _: &[u64], _: &[C]) {}
    fn jump(&mut self, _: JumpInfo<C>, _: &[u64], _: &[u64]) {}
}

/// Reads a file without keeping its records: header facts, names, per-part
/// counts and totals, warnings. Memory grows with names, not lines.
pub fn scan_file<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
) -> Result<ReadOutcome<C>, Error> {
    let input = Input::open(path)?;
    callgrind::parse(input, &mut NullSink, ReadOptions { progress })
}
