//! `tally annotate`: the function table, inclusive costs with cycles, call
//! trees, source, assembly and jump annotation, as text or JSON.
//!
//! The analysis ([`tally_analysis::annotate`]) chooses and orders what is
//! shown and hands it over as a view; the writers here lay the view out.
//! Source and assembly need what is on disk: this module finds the
//! sources and object files of the view's rows, asks the analysis for
//! their costs per line or instruction, and hands both to the writers.

mod asm;
mod json;
mod source;
mod table;
mod text;

use crate::ReportError;
use std::io::Write;
use std::path::PathBuf;
use tally_analysis::AggregateBuilder;
use tally_analysis::annotate::Analysis;
use tally_model::{Cost, FunctionId, Profile};

pub use source::{Located, SourceDirs};
pub use tally_analysis::annotate::{
    Grouping, Options, PartFilter, Threshold, Tree, needs_lines, view,
};

/// Writes the report for `profile` to `out`; returns warnings for the user.
pub fn annotate<C: Cost>(
    profile: &Profile<C>,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<Vec<String>, ReportError> {
    write(Analysis::new(profile, opts)?, None, out)
}

/// [`annotate`] for a report made to be published: sources are read only
/// from under `dirs`, and the summary lists those left out; object files
/// only if regular files outside `/proc`, `/sys` and `/dev`.
pub fn annotate_within<C: Cost>(
    profile: &Profile<C>,
    opts: &Options,
    dirs: &SourceDirs,
    out: &mut dyn Write,
) -> Result<Vec<String>, ReportError> {
    write(Analysis::new(profile, opts)?, Some(dirs), out)
}

/// Writes the report for a difference of two profiles; `calls` as for
/// [`Analysis::for_difference`].
pub fn annotate_difference<C: Cost>(
    profile: &Profile<C>,
    calls: Vec<(FunctionId, FunctionId)>,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<Vec<String>, ReportError> {
    write(Analysis::for_difference(profile, opts, calls)?, None, out)
}

/// An [`AggregateBuilder`] and the records a report needs, filled by one
/// read: for a report that needs the lines themselves (source or assembly
/// annotation) as well as the sums, which are then made while reading
/// rather than by decoding every line again afterwards.
///
/// Source annotation only shows files found on disk, and a profile names
/// many that are not (`???`, or sources of another machine): whether a
/// file can be found is decided when the reader first names it, and the
/// lines and calls of the others are not kept (see [`AggregateAndRecords::new`]).
pub struct AggregateAndRecords<C: Cost> {
    sums: AggregateBuilder<C>,
    records: tally_formats::callgrind::ProfileSink<C>,
    /// Which files' lines and calls to keep; `None`: all.
    files: Option<FileFilter>,
    /// Keep the jumps (a jump listing or assembly annotation shows them).
    jumps: bool,
}

/// Which files' records to keep: those source annotation can find, with
/// the search it uses ([`source::locate`]), each decided once.
struct FileFilter {
    include: Vec<PathBuf>,
    inputs: Vec<PathBuf>,
    /// Per file id: kept or not; ids past the end are not decided yet.
    keep: Vec<Option<bool>>,
    locator: source::Locator,
}

impl FileFilter {
    fn decide(&mut self, file: tally_model::FileId, name: &[u8]) {
        let i = file.index();
        if i >= self.keep.len() {
            self.keep.resize(i + 1, None);
        }
        if self.keep[i].is_none() {
            let found = !source::is_unknown(name)
                && self
                    .locator
                    .locate(&String::from_utf8_lossy(name), &self.include, &self.inputs)
                    .is_some();
            self.keep[i] = Some(found);
        }
    }

    #[inline]
    fn keeps(&self, file: tally_model::FileId) -> bool {
        match self.keep.get(file.index()) {
            Some(&Some(k)) => k,
            // Never named: the empty name (no file given), which is never
            // annotated; any other id is kept, to be safe.
            _ => file != tally_model::FileId::NONE,
        }
    }
}

impl<C: Cost> AggregateAndRecords<C> {
    /// A sink for a report with `opts`: everything is kept for assembly
    /// annotation (it finds object files, not sources); otherwise the lines
    /// and calls of files source annotation can find, and the jumps only
    /// for a jump listing.
    pub fn new(opts: &Options) -> Self {
        AggregateAndRecords {
            sums: AggregateBuilder::keeping_jumps(false),
            records: Default::default(),
            files: (!opts.asm).then(|| FileFilter {
                include: opts.include.clone(),
                inputs: opts.inputs.clone(),
                keep: Vec::new(),
                locator: source::Locator::default(),
            }),
            jumps: opts.asm || opts.jumps.is_some(),
        }
    }

    /// The sums and the records.
    pub fn into_parts(
        self,
    ) -> (
        AggregateBuilder<C>,
        tally_formats::callgrind::ProfileSink<C>,
    ) {
        (self.sums, self.records)
    }

    #[inline]
    fn keeps(&self, file: tally_model::FileId) -> bool {
        self.files.as_ref().is_none_or(|f| f.keeps(file))
    }
}

/// A sink that summed a profile as it was read (`tally annotate` of one
/// file), turned into what [`annotate_sums`] takes: the profile (header
/// facts, names, and what the sink kept of the records), the sums, and the
/// read's warnings.
pub trait Summed<C: Cost>: tally_model::Sink<C> + Send {
    /// Ends the read.
    fn finish_read(
        self,
        read: tally_formats::callgrind::ReadOutcome<C>,
    ) -> (Profile<C>, AggregateBuilder<C>, tally_formats::Warnings);
}

/// The sums only: the profile keeps the jumps they kept.
impl<C: Cost> Summed<C> for AggregateBuilder<C> {
    fn finish_read(
        mut self,
        read: tally_formats::callgrind::ReadOutcome<C>,
    ) -> (Profile<C>, AggregateBuilder<C>, tally_formats::Warnings) {
        self.set_events(read.profile.events.len());
        let mut profile = read.profile;
        for (part, jumps) in profile.parts.iter_mut().zip(self.take_jumps()) {
            part.jumps = jumps;
        }
        (profile, self, read.warnings)
    }
}

/// The sums and the records kept for source and assembly annotation.
impl<C: Cost> Summed<C> for AggregateAndRecords<C> {
    fn finish_read(
        self,
        read: tally_formats::callgrind::ReadOutcome<C>,
    ) -> (Profile<C>, AggregateBuilder<C>, tally_formats::Warnings) {
        let (mut sums, records) = self.into_parts();
        sums.set_events(read.profile.events.len());
        let (profile, warnings) = records.into_profile(read);
        (profile, sums, warnings)
    }
}

/// Everything kept, as a whole profile's read keeps it.
impl<C: Cost> Default for AggregateAndRecords<C> {
    fn default() -> Self {
        AggregateAndRecords {
            sums: AggregateBuilder::keeping_jumps(false),
            records: Default::default(),
            files: None,
            jumps: true,
        }
    }
}

impl<C: Cost> tally_model::Sink<C> for AggregateAndRecords<C> {
    fn start_part(&mut self, positions: tally_model::Positions, events: usize) {
        tally_model::Sink::<C>::start_part(&mut self.sums, positions, events);
        tally_model::Sink::<C>::start_part(&mut self.records, positions, events);
    }
    #[inline(always)]
    fn line(
        &mut self,
        function: FunctionId,
        file: tally_model::FileId,
        positions: &[u64],
        costs: &[C],
    ) {
        AggregateBuilder::line(&mut self.sums, function, file, costs);
        if self.keeps(file) {
            tally_model::Sink::<C>::line(&mut self.records, function, file, positions, costs);
        }
    }
    fn call(
        &mut self,
        info: tally_model::CallInfo<C>,
        site: &[u64],
        target: &[u64],
        inclusive: &[C],
    ) {
        AggregateBuilder::call(&mut self.sums, &info, inclusive);
        if self.keeps(info.site_file) {
            tally_model::Sink::<C>::call(&mut self.records, info, site, target, inclusive);
        }
    }
    fn jump(&mut self, info: tally_model::JumpInfo<C>, source: &[u64], target: &[u64]) {
        AggregateBuilder::jump(&mut self.sums, info.function);
        if self.jumps {
            tally_model::Sink::<C>::jump(&mut self.records, info, source, target);
        }
    }
    fn file_named(&mut self, file: tally_model::FileId, name: &[u8]) {
        if let Some(f) = &mut self.files {
            f.decide(file, name);
        }
    }
    fn held_bytes(&self) -> usize {
        tally_model::Sink::<C>::held_bytes(&self.records)
    }
    /// A sink for a later region, keeping what this one keeps: its file
    /// filter starts undecided, as its ids are the second reader's.
    fn split(&self) -> Option<Self> {
        Some(AggregateAndRecords {
            sums: tally_model::Sink::<C>::split(&self.sums)?,
            records: Default::default(),
            files: self.files.as_ref().map(|f| FileFilter {
                include: f.include.clone(),
                inputs: f.inputs.clone(),
                keep: Vec::new(),
                locator: source::Locator::default(),
            }),
            jumps: self.jumps,
        })
    }
    /// The later region's records are filtered again here: the files it
    /// only knew by their ids from before the cut were undecided there
    /// (kept), and every file has its decision here by now (the reader
    /// names each file new in the region to this sink before this call).
    fn absorb(&mut self, later: Self, ids: &tally_model::Renumbering) {
        tally_model::Sink::<C>::absorb(&mut self.sums, later.sums, ids);
        let files = &self.files;
        self.records.append(later.records, ids, |file| {
            files.as_ref().is_none_or(|f| f.keeps(file))
        });
    }
}

/// Writes the report from sums made while reading; see [`needs_lines`].
pub fn annotate_sums<C: Cost>(
    profile: &Profile<C>,
    sums: AggregateBuilder<C>,
    opts: &Options,
    out: &mut dyn Write,
) -> Result<Vec<String>, ReportError> {
    write(Analysis::from_sums(profile, opts, sums)?, None, out)
}

/// The words after a call that has no cost of its own: whose activation
/// already counts it.
fn inside_mark(kind: tally_analysis::CallKind) -> String {
    match kind {
        tally_analysis::CallKind::Exact => String::new(),
        tally_analysis::CallKind::Recursive => {
            " [recursive: cost counted in the caller's]".to_string()
        }
        tally_analysis::CallKind::WithinCycle(n) => {
            format!(" [within <cycle {n}>: cost counted in the cycle's]")
        }
    }
}

/// The one path of every report: the analysis's view, then the sources
/// and assembly it names (sources only under `dirs`, when given), each
/// laid out by its writer.
fn write<C: Cost>(
    a: Analysis<'_, C>,
    dirs: Option<&SourceDirs>,
    out: &mut dyn Write,
) -> Result<Vec<String>, ReportError> {
    let view = a.view();
    let opts = &view.options;
    let mut warnings = view.warnings.clone();
    let wants_sources = opts.auto || !opts.files.is_empty();
    if opts.json {
        let sources =
            (wants_sources && view.header.lines).then(|| source::plan(&a, dirs, &mut warnings));
        let assembly = opts
            .asm
            .then(|| asm::plan(&a, view.header.instrs, dirs, &mut warnings));
        json::write(&view, sources.as_ref(), assembly.as_deref(), out, &warnings)?;
        return Ok(warnings);
    }
    let mut page = table::Page {
        out,
        style: crate::format::Style { on: opts.color },
        warnings: &mut warnings,
    };
    text::write(&view, &mut page)?;
    if wants_sources {
        if view.header.lines {
            let plan = source::plan(&a, dirs, page.warnings);
            source::write_text(&view, &plan, &mut page)?;
        } else {
            page.warnings
                .push("the profile has no line positions: no source to annotate".into());
        }
    }
    if opts.asm {
        let plan = asm::plan(&a, view.header.instrs, dirs, page.warnings);
        asm::write_text(&view, &plan, &mut page)?;
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {

    /// Reads `text` with the sink source annotation uses; returns the
    /// files of the lines, calls and jumps kept, and the sums' row count.
    fn kept(text: &str, opts: &super::Options) -> (Vec<u32>, Vec<u32>, usize, usize) {
        let input = tally_formats::Input::from_bytes("t.out", text.as_bytes().to_vec()).unwrap();
        let mut both = super::AggregateAndRecords::<u64>::new(opts);
        let read = tally_formats::callgrind::parse::<u64, _>(input, &mut both, Default::default())
            .unwrap();
        let (sums, records) = both.into_parts();
        let (profile, _) = records.into_profile(read);
        let part = &profile.parts[0];
        let mut lines = Vec::new();
        for (i, b) in part.lines.blocks().iter().enumerate() {
            part.lines.for_each_in_block(i, |_| lines.push(b.file.0));
        }
        let calls = part.calls.iter().map(|c| c.info.site_file.0).collect();
        let rows = sums
            .finish(profile.names.function_count(), |_| true)
            .rows
            .len();
        (lines, calls, part.jumps.iter().count(), rows)
    }

    /// Only the lines and calls of files that can be found are kept (the
    /// sums have every row); jumps only for a jump listing; everything for
    /// assembly annotation.
    #[test]
    fn records_are_kept_for_files_found_only() {
        let here = concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs");
        let text = format!(
            "positions: line\nevents: Ir\nfl=(1) {here}\nfn=(1) a\n1 5\ncfn=(2) b\ncalls=1 1\n2 7\njump=1 4\n\
             fl=(2) /nonexistent/x.c\nfn=(2)\n3 7\ncfn=(1)\ncalls=1 1\n4 1\n\
             fl=(3) ???\nfn=(3) c\n5 1\nfl=(1)\nfn=(1)\n6 2\n"
        );
        let mut opts = super::Options::default();
        let (lines, calls, jumps, rows) = kept(&text, &opts);
        assert_eq!((lines, calls, jumps, rows), (vec![1, 1], vec![1], 0, 3));
        opts.jumps = Some(5);
        assert_eq!(kept(&text, &opts).2, 1);
        opts.asm = true;
        let (lines, calls, jumps, _) = kept(&text, &opts);
        assert_eq!((lines, calls, jumps), (vec![1, 2, 3, 1], vec![1, 2], 1));
    }

    /// Reads the file at `path` with the sink for `opts`, cut at `cut`
    /// (one pass if `None`); returns the parts, the sums and whether the
    /// cut was taken.
    fn read_at(path: &str, opts: &super::Options, cut: Option<u64>) -> (String, String, bool) {
        let input = tally_formats::Input::open(std::path::Path::new(path)).unwrap();
        let mut sink = super::AggregateAndRecords::<u64>::new(opts);
        let options = tally_formats::callgrind::ReadOptions {
            split: Some(cut.is_some()),
            split_at: cut,
            ..Default::default()
        };
        let read = tally_formats::callgrind::parse::<u64, _>(input, &mut sink, options).unwrap();
        let taken = read.split_at.is_some();
        let (profile, sums, _) = super::Summed::finish_read(sink, read);
        let sums = sums.finish(profile.names.function_count(), |_| true);
        (format!("{:?}", profile.parts), format!("{sums:?}"), taken)
    }

    /// A read cut in two regions keeps the records and sums of one pass:
    /// the kept files' lines and calls only (some sources are found under
    /// the include directory), or everything for assembly annotation.
    #[test]
    fn a_split_read_keeps_what_one_pass_keeps() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/data");
        let mut taken = 0;
        for name in [
            "workload.combo.out",
            "mutual.instr.out",
            "recursion.jumps.out",
        ] {
            let path = format!("{data}/callgrind/{name}");
            let bytes = std::fs::read(&path).unwrap();
            let cuts: Vec<u64> = bytes
                .windows(4)
                .enumerate()
                .filter(|(_, w)| *w == b"\nfn=")
                .map(|(i, _)| i as u64 + 1)
                .collect();
            for asm in [false, true] {
                let opts = super::Options {
                    include: vec![data.into()],
                    asm,
                    ..Default::default()
                };
                let whole = read_at(&path, &opts, None);
                assert!(!whole.2);
                assert!(whole.0.contains("Coded"), "{name}: no lines kept");
                for &cut in cuts.iter().step_by(cuts.len().div_ceil(12).max(1)) {
                    let split = read_at(&path, &opts, Some(cut));
                    assert_eq!(split.0, whole.0, "{name}, asm {asm}, cut at {cut}: records");
                    assert_eq!(split.1, whole.1, "{name}, asm {asm}, cut at {cut}: sums");
                    taken += usize::from(split.2);
                }
            }
        }
        assert!(taken > 20, "only {taken} cuts taken");
    }
}
