//! Driving one case through every path of tally that reads it, through
//! the library entry points the CLI uses: detection ([`Source`]) and the
//! readers, then the reports and conversions of what was read, with every
//! output written and read back.

use crate::check::{self, Extent, Failure, NAME};
use crate::corpus::{Corpus, Kind, Seed};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use tally_analysis::AggregateBuilder;
use tally_analysis::combine::{CombineOptions, Combiner, EventChoice, Sign};
use tally_analysis::gprof;
use tally_formats::callgrind::{self, WriteOptions};
use tally_formats::dcpi::{self, DcpiProfile};
use tally_formats::gmon::Gmon;
use tally_formats::{Input, Source};
use tally_model::{AnyCost, AnyProfile, Cost, Format, Profile};
use tally_report::annotate::{Options as AnnotateOptions, Threshold, Tree};
use tally_report::gprof::{json, text};
use tally_symbols::ObjectFile;

/// One input to drive: the bytes a reader gets (gzip'd or not), the
/// target, and the seed it was made from (merge and diff add the seed;
/// gprof and DCPI reports take its program or image).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    /// The reader.
    pub kind: Kind,
    /// The seed's path relative to the data directory.
    pub seed: String,
    /// The input.
    pub input: Vec<u8>,
}

const MAGIC: &str = "tally-fuzz-case";

impl Case {
    /// The case as a file: a header line, then the input's bytes.
    pub fn to_file(&self) -> Vec<u8> {
        let mut v = format!("{MAGIC} {} {}\n", self.kind.name(), self.seed).into_bytes();
        v.extend_from_slice(&self.input);
        v
    }

    /// Reads a case file.
    pub fn from_file(bytes: &[u8]) -> Option<Case> {
        let nl = bytes.iter().position(|&b| b == b'\n')?;
        let head = std::str::from_utf8(&bytes[..nl]).ok()?;
        let mut w = head.split(' ');
        if w.next()? != MAGIC {
            return None;
        }
        let kind = Kind::from_name(w.next()?)?;
        let seed = w.next()?.to_string();
        Some(Case {
            kind,
            seed,
            input: bytes[nl + 1..].to_vec(),
        })
    }
}

/// Drives cases; keeps what it read of each seed (merge, diff, DCPI sums).
pub struct Driver<'c> {
    corpus: &'c Corpus,
    profiles: RefCell<HashMap<String, Option<AnyProfile>>>,
    dcpis: RefCell<HashMap<String, Option<DcpiProfile>>>,
}

type Res = Result<(), Failure>;

impl<'c> Driver<'c> {
    /// A driver over a corpus.
    pub fn new(corpus: &'c Corpus) -> Self {
        Driver {
            corpus,
            profiles: RefCell::default(),
            dcpis: RefCell::default(),
        }
    }

    /// The corpus.
    pub fn corpus(&self) -> &'c Corpus {
        self.corpus
    }

    /// Runs one case; `Err` is the first condition that failed.
    pub fn run(&self, case: &Case) -> Res {
        let seed = self.corpus.seed(&case.seed);
        let extent = Extent::of(&case.input);
        match case.kind {
            Kind::Callgrind | Kind::Cachegrind => self.text(case, seed, extent),
            Kind::Gmon => self.gmon(case, seed, extent),
            Kind::Dcpi => self.dcpi(case, seed, extent),
            Kind::PerfData | Kind::PerfScript | Kind::Folded | Kind::Pprof => {
                self.stacked(case, seed, extent)
            }
        }
    }

    fn image(&self, seed: Option<&Seed>) -> Option<&'c ObjectFile> {
        let i = seed?.image.as_ref()?;
        self.corpus.images.get(i)
    }

    /// Callgrind and Cachegrind: detection, the reader, annotate (text and
    /// JSON), gprof on the profile (summed while read, as the CLI does),
    /// merge and diff with the seed, and every writer read back.
    fn text(&self, case: &Case, seed: Option<&Seed>, extent: Extent) -> Res {
        let source = Source::from_bytes(NAME, case.input.clone());
        if let Err(e) = source.expect_callgrind() {
            return check::error("detect", &e.to_string(), check::reader_verdict(&e), extent);
        }
        let read = match tally_formats::read(&source, None) {
            Ok((p, _)) => p,
            Err(e) => {
                return check::error("read", &e.to_string(), check::reader_verdict(&e), extent);
            }
        };
        // One path after the read, chosen by the input's length (so that
        // a replay takes the same): a case costs one path, not five.
        match case.input.len() % 5 {
            0 => match &read {
                AnyCost::Unsigned(p) => round_trip(p, "write-read"),
                AnyCost::Signed(p) => round_trip(p, "write-read"),
            },
            1 => match &read {
                AnyCost::Unsigned(p) => annotate(p, extent),
                AnyCost::Signed(p) => annotate(p, extent),
            },
            2 => gprof_streamed(&source, extent),
            k => match seed.and_then(|s| Some((s, self.seed_profile(s)?))) {
                Some((s, b)) => {
                    let both = Both {
                        seed: &Source::from_bytes("fuzz-seed", s.bytes.clone()),
                        input: &source,
                        extent,
                    };
                    if k == 3 {
                        merge(&read, &b, &both)
                    } else {
                        diff(&read, &b, &both)
                    }
                }
                None => Ok(()),
            },
        }
    }

    /// Profiles of whole stacks (perf.data, `perf script`, folded,
    /// pprof): detection and the reader as the CLI calls them, then one of
    /// the Callgrind round trip, annotate, the pprof writer read back, the
    /// folded and speedscope writers, merge and diff with the seed; the
    /// stacks must survive each (their totals are the profile's).
    fn stacked(&self, case: &Case, seed: Option<&Seed>, extent: Extent) -> Res {
        let source = Source::from_bytes(NAME, case.input.clone());
        let read = match tally_formats::read(&source, None) {
            Ok((p, _)) => p,
            Err(e) => {
                return check::error("read", &e.to_string(), check::reader_verdict(&e), extent);
            }
        };
        match &read {
            AnyCost::Unsigned(p) => stacks_agree(p, "read")?,
            AnyCost::Signed(p) => stacks_agree(p, "read")?,
        }
        match case.input.len() % 6 {
            0 => match &read {
                AnyCost::Unsigned(p) => {
                    round_trip(p, "write-read").and_then(|()| cachegrind_trip(p))
                }
                AnyCost::Signed(p) => round_trip(p, "write-read").and_then(|()| cachegrind_trip(p)),
            },
            1 => match &read {
                AnyCost::Unsigned(p) => annotate(p, extent),
                AnyCost::Signed(p) => annotate(p, extent),
            },
            2 => match &read {
                AnyCost::Unsigned(p) => pprof_trip(p, "pprof-write"),
                AnyCost::Signed(p) => pprof_trip(p, "pprof-write"),
            },
            3 => match &read {
                AnyCost::Unsigned(p) => folded_trip(p),
                AnyCost::Signed(p) => folded_trip(p),
            },
            k => match seed.and_then(|s| Some((s, self.seed_profile(s)?))) {
                Some((s, b)) => {
                    let both = Both {
                        seed: &Source::from_bytes("fuzz-seed", s.bytes.clone()),
                        input: &source,
                        extent,
                    };
                    if k == 4 {
                        merge(&read, &b, &both)
                    } else {
                        diff(&read, &b, &both)
                    }
                }
                None => Ok(()),
            },
        }
    }

    fn seed_profile(&self, seed: &Seed) -> Option<AnyProfile> {
        let mut cache = self.profiles.borrow_mut();
        cache
            .entry(seed.path.clone())
            .or_insert_with(|| {
                let s = Source::from_bytes("fuzz-seed", seed.bytes.clone());
                tally_formats::read(&s, None).ok().map(|r| r.0)
            })
            .clone()
    }

    /// gmon: detection, the reader with the seed's program, gprof's
    /// reports (text, JSON), the conversion to Callgrind read back, and
    /// the gmon writer read back.
    fn gmon(&self, case: &Case, seed: Option<&Seed>, extent: Extent) -> Res {
        let Some(obj) = self.image(seed) else {
            return Ok(());
        };
        let source = Source::from_bytes(NAME, case.input.clone());
        let layout = gprof::layout_of(obj);
        let g = match Gmon::sum(std::slice::from_ref(&source), layout) {
            Ok(g) => g,
            Err(e) => {
                return check::error("read", &e.to_string(), check::reader_verdict(&e), extent);
            }
        };
        let opts = gprof::Options {
            flat: !g.histograms.is_empty(),
            graph: !g.arcs.is_empty(),
            ..Default::default()
        };
        if opts.flat || opts.graph {
            match gprof::analyse(obj, &g, &opts) {
                Ok(r) => {
                    let _ = text::write(&r, &opts);
                    json_parses(&json::write(&r, &opts), "gprof-json")?;
                }
                Err(e) => {
                    check::error("gprof", &e.to_string(), check::analysis_verdict(&e), extent)?
                }
            }
        }
        match tally_analysis::convert::gmon::convert(obj, &g, &opts) {
            Ok(c) => round_trip(&c.profile, "gmon-to-callgrind")?,
            Err(e) => check::error(
                "gmon-to-callgrind",
                &e.to_string(),
                check::analysis_verdict(&e),
                extent,
            )?,
        }
        let mut out = Vec::new();
        if g.write(&mut out, layout).is_ok() {
            match Gmon::parse(&out, Path::new("fuzz-output"), layout) {
                Ok(back) if (&back.histograms, &back.arcs) == (&g.histograms, &g.arcs) => {}
                Ok(_) => {
                    return Err(Failure::new(
                        "read-back",
                        "gmon-write",
                        "the written gmon file reads back different",
                    ));
                }
                Err(e) => return Err(Failure::new("read-back", "gmon-write", e.to_string())),
            }
        }
        Ok(())
    }

    fn seed_dcpi(&self, seed: &Seed) -> Option<DcpiProfile> {
        let mut cache = self.dcpis.borrow_mut();
        cache
            .entry(seed.path.clone())
            .or_insert_with(|| dcpi::parse(&seed.bytes, Path::new("fuzz-seed")).ok())
            .clone()
    }

    /// DCPI: detection and the reader, dcpicat, dcpiprof (text, JSON),
    /// dcpilist and dcpidiff with the seed's image, the sum with the seed,
    /// the conversion to Callgrind and the DCPI writer, read back.
    fn dcpi(&self, case: &Case, seed: Option<&Seed>, extent: Extent) -> Res {
        let source = Source::from_bytes(NAME, case.input.clone());
        let parsed = source.bytes().and_then(|b| dcpi::parse(&b, source.name()));
        let p = match parsed {
            Ok(p) => p,
            Err(e) => {
                return check::error("read", &e.to_string(), check::reader_verdict(&e), extent);
            }
        };
        let report = |path: &'static str, r: Result<(), tally_report::ReportError>| match r {
            Ok(()) => Ok(()),
            Err(e) => check::error(path, &e.to_string(), check::report_verdict(&e), extent),
        };
        report(
            "dcpi-cat",
            tally_report::dcpi::cat(&p, false, &mut std::io::sink()),
        )?;
        let obj = self.image(seed);
        let base = seed.and_then(|s| self.seed_dcpi(s));
        if let Some(obj) = obj {
            for json in [false, true] {
                let o = tally_report::dcpi::ProfOptions {
                    keep: 100.0,
                    image_name: "image".into(),
                    json,
                };
                let mut out = Vec::new();
                report("dcpi-prof", tally_report::dcpi::prof(&p, obj, &o, &mut out))?;
                if json {
                    json_parses_bytes(&out, "dcpi-prof-json")?;
                }
            }
            if let Some(row) = tally_report::dcpi::procedures(&p, obj).first() {
                let name = row.name.clone();
                report(
                    "dcpi-list",
                    tally_report::dcpi::list(&p, obj, &name, &mut std::io::sink()),
                )?;
            }
            if let Some(b) = &base {
                let o = tally_report::dcpi::DiffOptions {
                    proc_name: None,
                    names: ("fuzz-seed".into(), NAME.into()),
                };
                report(
                    "dcpi-diff",
                    tally_report::dcpi::diff(b, &p, obj, &o, &mut std::io::sink()),
                )?;
            }
        }
        if let Some(b) = base {
            let v = vec![("fuzz-seed".to_string(), b), (NAME.to_string(), p.clone())];
            report(
                "dcpi-sum",
                tally_analysis::convert::dcpi::sum(&v)
                    .map(|_| ())
                    .map_err(Into::into),
            )?;
        }
        match tally_analysis::convert::dcpi::to_callgrind(&p, obj, NAME) {
            Ok(prof) => round_trip(&prof, "dcpi-to-callgrind")?,
            Err(e) => check::error(
                "dcpi-to-callgrind",
                &e.to_string(),
                check::analysis_verdict(&e),
                extent,
            )?,
        }
        let mut out = Vec::new();
        match dcpi::write(&p, &mut out) {
            Ok(()) => match dcpi::parse(&out, Path::new("fuzz-output")) {
                Ok(back) if back == p => Ok(()),
                Ok(_) => Err(Failure::new(
                    "read-back",
                    "dcpi-write",
                    "the written DCPI profile reads back different",
                )),
                Err(e) => Err(Failure::new("read-back", "dcpi-write", e.to_string())),
            },
            Err(e) => Err(Failure::new("read-back", "dcpi-write", e.to_string())),
        }
    }
}

fn json_parses(s: &str, path: &'static str) -> Res {
    json_parses_bytes(s.as_bytes(), path)
}

/// Checks the syntax only (`IgnoredAny` builds no tree), so the memory
/// measured is tally's, not the checker's.
fn json_parses_bytes(s: &[u8], path: &'static str) -> Res {
    serde_json::from_slice::<serde::de::IgnoredAny>(s)
        .map(|_| ())
        .map_err(|e| Failure::new("read-back", path, format!("JSON does not parse: {e}")))
}

/// Writes a profile as Callgrind (compressed names and not), as
/// Cachegrind when it is one, and as JSON; reads each back.
pub fn round_trip<C: Cost>(p: &Profile<C>, path: &'static str) -> Res {
    let fail = |what: String| Err(Failure::new("read-back", path, what));
    for compress in [true, false] {
        let mut out = Vec::new();
        if let Err(e) = callgrind::write(p, &mut out, WriteOptions { compress }) {
            if refused(&e) {
                return Ok(());
            }
            return fail(format!("the Callgrind writer failed: {e}"));
        }
        match reread::<C>(out) {
            Ok(mut q) => {
                q.format = p.format;
                if let Some(what) = differs(p, &q) {
                    return fail(format!(
                        "the Callgrind output (compress={compress}) reads back different: {what}"
                    ));
                }
                // Names are interned in the order the output has them;
                // once read back, writing is a fixed point.
                let mut again = Vec::new();
                let _ = callgrind::write(&q, &mut again, WriteOptions { compress });
                match reread::<C>(again) {
                    Ok(mut r) => {
                        r.format = q.format;
                        if r != q {
                            return fail(format!(
                                "the Callgrind output (compress={compress}) written again reads back different: {}",
                                difference(&q, &r)
                            ));
                        }
                    }
                    Err(e) => {
                        return fail(format!(
                            "the Callgrind output written again does not read back: {e}"
                        ));
                    }
                }
            }
            Err(e) => return fail(format!("the Callgrind output does not read back: {e}")),
        }
    }
    if p.format == Format::Cachegrind {
        let mut out = Vec::new();
        if let Err(e) = tally_formats::cachegrind::write(p, &mut out) {
            return fail(format!("the Cachegrind writer failed: {e}"));
        }
        match reread::<C>(out) {
            Ok(mut q) => {
                // The writer supplies `cmd:` and a final `summary:` where
                // the input had none.
                for (a, b) in p.parts.iter().zip(q.parts.iter_mut()) {
                    // With no cost lines the final `summary:` comes right
                    // after `events:` and is read as the header's.
                    if a.info.summary.is_none() && b.info.totals.is_none() {
                        b.info.totals = b.info.summary.take();
                    }
                    if a.info.cmd.is_none() && b.info.cmd.as_deref() == Some(b"") {
                        b.info.cmd = None;
                    }
                    if a.info.totals.is_none() && b.info.totals == a.lines.totals() {
                        b.info.totals = None;
                    }
                }
                if let Some(what) = differs(p, &q) {
                    return fail(format!(
                        "the Cachegrind output reads back different: {what}"
                    ));
                }
            }
            Err(e) => return fail(format!("the Cachegrind output does not read back: {e}")),
        }
    }
    let mut out = Vec::new();
    if let Err(e) = tally_formats::json::write(p, &mut out) {
        return fail(format!("the JSON writer failed: {e}"));
    }
    held_output(out.len());
    json_parses_bytes(&out, path)
}

/// Whether a writer refused the profile, and said why: a sum that does
/// not fit, or a name the format cannot hold. Not a failure.
fn refused(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|e| e.downcast_ref::<tally_formats::Error>())
        .is_some_and(|e| {
            matches!(
                e,
                tally_formats::Error::CachegrindSumOverflow
                    | tally_formats::Error::NameNotWritable { .. }
            )
        })
}

/// A profile's stacks, if it has any, sum to its self totals: the part
/// derived from them holds every stack's cost at its leaf.
/// A profile of another format written as Cachegrind (`tally convert
/// --to cachegrind`) reads back, with the same totals: the writer keeps
/// every name on its line, or refuses one it cannot.
fn cachegrind_trip<C: Cost>(p: &Profile<C>) -> Res {
    let fail = |m: String| Err(Failure::new("read-back", "cachegrind-write", m));
    let mut out = Vec::new();
    if let Err(e) = tally_formats::cachegrind::write(p, &mut out) {
        if refused(&e) {
            return Ok(());
        }
        return fail(format!("the Cachegrind writer failed: {e}"));
    }
    match reread::<C>(out) {
        Ok(q) if q.totals() == p.totals() => Ok(()),
        Ok(q) => fail(format!(
            "the Cachegrind output reads back with totals {:?}, not {:?}",
            q.totals(),
            p.totals()
        )),
        Err(e) => fail(format!("the Cachegrind output does not read back: {e}")),
    }
}

fn stacks_agree<C: Cost>(p: &Profile<C>, path: &'static str) -> Res {
    let Some(s) = &p.stacks else { return Ok(()) };
    let n = p.events.len();
    let Some(stacked) = s.totals(n) else {
        return Err(Failure::new(
            "read-back",
            path,
            "the stacks' totals overflow",
        ));
    };
    let mut parts = vec![C::ZERO; n];
    for part in &p.parts {
        for (a, b) in parts
            .iter_mut()
            .zip(part.lines.totals().unwrap_or_default())
        {
            *a = a.saturating_add(b);
        }
    }
    if stacked != parts {
        return Err(Failure::new(
            "read-back",
            path,
            format!("the stacks sum to {stacked:?}, the self costs to {parts:?}"),
        ));
    }
    Ok(())
}

/// A merge or diff of two profiles with stacks has stacks, which sum to
/// its self totals and survive the pprof writer.
fn stacks_kept<C: Cost>(
    p: &AnyProfile,
    seed: &AnyProfile,
    out: &Profile<C>,
    path: &'static str,
) -> Res {
    let has = |p: &AnyProfile| match p {
        AnyCost::Unsigned(p) => p.stacks.as_ref().is_some_and(|s| !s.is_empty()),
        AnyCost::Signed(p) => p.stacks.as_ref().is_some_and(|s| !s.is_empty()),
    };
    if !(has(p) && has(seed)) {
        return Ok(());
    }
    let nonzero = out.parts.iter().any(|part| {
        part.lines
            .totals()
            .is_some_and(|t| t.iter().any(|c| !c.is_zero()))
    });
    if out.stacks.is_none() && nonzero {
        return Err(Failure::new(
            "read-back",
            path,
            "two profiles with stacks combine into one without",
        ));
    }
    stacks_agree(out, path)?;
    pprof_trip(out, path)
}

/// Writes a profile as pprof and reads it back: the same sample types
/// and, stack by stack or self cost by self cost, the same totals.
pub fn pprof_trip<C: Cost>(p: &Profile<C>, path: &'static str) -> Res {
    let fail = |what: String| Err(Failure::new("read-back", path, what));
    let mut out = Vec::new();
    if let Err(e) = tally_formats::pprof::write(p, &mut out) {
        // A writer that refuses is right to: pprof's values are signed
        // 64-bit, and a self cost past 64 bits has no one-frame stack.
        let refused = e.to_string().contains("does not fit") || p.stacks.is_none();
        if refused {
            return Ok(());
        }
        return fail(format!("the pprof writer failed: {e}"));
    }
    let q = match tally_formats::pprof::read_as::<C>(Path::new("fuzz-output"), &out) {
        Ok(q) => q,
        Err(e) => return fail(format!("the pprof output does not read back: {e}")),
    };
    let names = |p: &Profile<C>| -> Vec<String> {
        p.events.recorded().iter().map(|e| e.name.clone()).collect()
    };
    if names(p) != names(&q) {
        return fail(format!(
            "the pprof output's sample types differ: {:?} against {:?}",
            names(p),
            names(&q)
        ));
    }
    let n = p.events.recorded().len();
    let before = p.stacks.as_ref().and_then(|s| s.totals(n));
    let after = q.stacks.as_ref().and_then(|s| s.totals(n));
    if p.stacks.is_some() && before != after {
        return fail(format!(
            "the pprof output's stacks sum to {after:?}, the input's to {before:?}"
        ));
    }
    stacks_agree(&q, path)
}

/// Writes the stacks as folded lines of each event and reads them back:
/// the same total (stacks without frames or cost are left out); and as
/// speedscope JSON, which must parse.
fn folded_trip<C: Cost>(p: &Profile<C>) -> Res {
    let fail = |what: String| Err(Failure::new("read-back", "folded-write", what));
    let mut out = Vec::new();
    if let Err(e) = tally_formats::speedscope::write(p, "fuzz", &mut out) {
        return fail(format!("the speedscope writer failed: {e}"));
    }
    held_output(out.len());
    json_parses_bytes(&out, "speedscope")?;
    let Some(s) = &p.stacks else { return Ok(()) };
    for event in 0..p.events.recorded().len() {
        let mut out = Vec::new();
        if let Err(e) = tally_formats::folded::write(&p.names, s, event, &mut out) {
            return fail(format!("the folded writer failed: {e}"));
        }
        let mut want = C::ZERO;
        for sample in s.samples.iter().filter(|s| !s.frames.is_empty()) {
            want = want.saturating_add(sample.costs[event]);
        }
        if out.is_empty() {
            if want.is_zero() {
                continue;
            }
            return fail(format!("no folded lines for a total of {want:?}"));
        }
        match tally_formats::folded::read(Path::new("fuzz-output"), &out) {
            Ok(q) => {
                let got = q.stacks.as_ref().and_then(|s| s.totals(1));
                if got.as_deref().map(|g| g[0].to_string()) != Some(want.to_string()) {
                    return fail(format!(
                        "the folded output of event {event} sums to {got:?}, the stacks to {want:?}"
                    ));
                }
            }
            Err(e) => return fail(format!("the folded output does not read back: {e}")),
        }
    }
    Ok(())
}

thread_local! {
    static HELD: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Notes an output the harness holds in memory to read it back. JSON
/// repeats a line's file name on every line, so its size is not bounded by
/// the input's; the CLI streams it to a file, while the harness keeps it
/// (grown by doubling), so the case's budget allows for it.
fn held_output(bytes: usize) {
    HELD.with(|h| h.set(h.get().max(bytes)));
}

/// The largest output held since the last call, and resets it.
pub fn take_held_output() -> usize {
    HELD.with(|h| h.replace(0))
}

fn reread<C: Cost>(bytes: Vec<u8>) -> Result<Profile<C>, tally_formats::Error> {
    let input = Input::from_bytes("fuzz-output", bytes)?;
    callgrind::read::<C>(input).map(|r| r.0)
}

/// What differs between a profile and its output read back, names
/// aside (the output interns them in its own order and leaves out those
/// nothing uses): events, positions, part headers, each part's self
/// totals and number of calls.
fn differs<C: Cost>(p: &Profile<C>, q: &Profile<C>) -> Option<&'static str> {
    if (p.version, &p.creator, p.positions) != (q.version, &q.creator, q.positions) {
        return Some("version, creator or positions");
    }
    if p.events != q.events {
        return Some("events");
    }
    if p.parts.len() != q.parts.len() {
        return Some("part count");
    }
    for (a, b) in p.parts.iter().zip(&q.parts) {
        if a.info != b.info {
            return Some("part header");
        }
        if a.lines.totals() != b.lines.totals() {
            return Some("self totals");
        }
        if a.calls.len() != b.calls.len() {
            return Some("number of calls");
        }
    }
    None
}

/// What differs between two profiles, for the failure's message.
fn difference<C: Cost>(p: &Profile<C>, q: &Profile<C>) -> &'static str {
    if (p.version, &p.creator, p.positions) != (q.version, &q.creator, q.positions) {
        "version, creator or positions"
    } else if p.names != q.names {
        "names"
    } else if p.events != q.events {
        "events"
    } else if p.parts.len() != q.parts.len() {
        "part count"
    } else {
        for (a, b) in p.parts.iter().zip(&q.parts) {
            if a.info != b.info {
                return "part header";
            } else if a.lines != b.lines {
                return "cost lines";
            } else if a.calls != b.calls {
                return "calls";
            } else if a.jumps != b.jumps {
                return "jumps";
            }
        }
        "a part"
    }
}

/// `tally annotate` of a whole profile: text with inclusive costs and
/// both trees, and JSON (which must parse).
fn annotate<C: Cost>(p: &Profile<C>, extent: Extent) -> Res {
    for json in [false, true] {
        let opts = AnnotateOptions {
            inputs: vec![NAME.into()],
            auto: false,
            inclusive: true,
            tree: Tree::Both,
            threshold: Threshold::All,
            jumps: Some(5),
            json,
            ..Default::default()
        };
        let mut out = Vec::new();
        let path = if json {
            "annotate-json"
        } else {
            "annotate-text"
        };
        match tally_report::annotate::annotate(p, &opts, &mut out) {
            Ok(_) if json => json_parses_bytes(&out, path)?,
            Ok(_) => {}
            Err(e) => check::error(path, &e.to_string(), check::report_verdict(&e), extent)?,
        }
    }
    Ok(())
}

/// `tally gprof PROFILE`: summed while read, as the CLI does.
fn gprof_streamed(source: &Source, extent: Extent) -> Res {
    let read = tally_formats::parse_any(
        source,
        AggregateBuilder::new(0),
        || AggregateBuilder::new(0),
        None,
    );
    let opts = gprof::Options::default();
    let report = match read {
        Ok(AnyCost::Unsigned((o, s))) => gprof_report(o, s, &opts),
        Ok(AnyCost::Signed((o, s))) => gprof_report(o, s, &opts),
        Err(e) => {
            return check::error(
                "gprof-read",
                &e.to_string(),
                check::reader_verdict(&e),
                extent,
            );
        }
    };
    match report {
        Ok(r) => {
            let mut sink = Vec::new();
            text::write_to(&r, &opts, &mut sink)
                .map_err(|e| Failure::new("read-back", "gprof-text", e.to_string()))?;
            json_parses(&json::write(&r, &opts), "gprof-json")
        }
        Err(e) => check::error("gprof", &e.to_string(), check::report_verdict(&e), extent),
    }
}

fn gprof_report<C: Cost>(
    read: callgrind::ReadOutcome<C>,
    mut sums: AggregateBuilder<C>,
    opts: &gprof::Options,
) -> Result<gprof::Report, tally_report::ReportError> {
    sums.set_events(read.profile.events.len());
    let part_sums = sums.part_totals();
    let agg = sums.finish(read.profile.names.function_count(), |_| true);
    gprof::callgrind::analyse(&read.profile, &agg, &part_sums, None, opts, NAME).map_err(Into::into)
}

fn add<C: Cost>(
    c: &mut Combiner<C>,
    p: &AnyProfile,
    sign: Sign,
    label: &str,
) -> Result<(), tally_analysis::Error> {
    match p {
        AnyCost::Unsigned(p) => c.add(p, sign, label),
        AnyCost::Signed(p) => c.add(p, sign, label),
    }
}

/// The two inputs of a merge or diff, the seed first, as the CLI reads
/// them again to locate an overflow.
struct Both<'a> {
    seed: &'a Source,
    input: &'a Source,
    extent: Extent,
}

/// A merge's or diff's error, checked as the CLI shows it: an overflow
/// located by scanning the inputs again as one sum
/// ([`tally_formats::sum_bound`]).
fn combine_error<C: Cost>(
    path: &'static str,
    e: &tally_analysis::Error,
    events: &[String],
    both: &Both<'_>,
) -> Res {
    use tally_analysis::Error as E;
    // An error about the seed alone is not this case's.
    if !e.to_string().contains(NAME) && check::combine_verdict(e) {
        return Ok(());
    }
    // A stack format without lines (perf.data, pprof, `perf script`)
    // can only be named whole when its samples pass the bound.
    let mut whole = check::combine_verdict(e);
    let msg = match e {
        E::Overflow { .. } | E::Unreadable { .. } => {
            match tally_formats::sum_bound::<C>(&[both.seed, both.input], events) {
                Err(located) => {
                    whole |= matches!(located, tally_formats::Error::Incompatible(_));
                    located.to_string()
                }
                Ok(()) => e.to_string(),
            }
        }
        _ => e.to_string(),
    };
    check::error(path, &msg, whole, both.extent)
}

fn event_names<C: Cost>(c: &Combiner<C>) -> Vec<String> {
    c.events().map_or_else(Vec::new, |e| {
        e.recorded().iter().map(|e| e.name.clone()).collect()
    })
}

/// `tally merge SEED INPUT`: the sum, written and read back.
fn merge(p: &AnyProfile, seed: &AnyProfile, both: &Both<'_>) -> Res {
    fn go<C: Cost>(p: &AnyProfile, seed: &AnyProfile, both: &Both<'_>) -> Res {
        let options = CombineOptions {
            events: EventChoice::Same,
            keep_zero: true,
            ..Default::default()
        };
        let mut c = Combiner::<C>::new(options);
        let r = add(&mut c, seed, Sign::Plus, "fuzz-seed")
            .and_then(|_| add(&mut c, p, Sign::Plus, NAME));
        let events = event_names(&c);
        match r.and_then(|_| c.finish()) {
            Ok(sum) => {
                round_trip(&sum.profile, "merge")?;
                stacks_kept(p, seed, &sum.profile, "merge")
            }
            Err(e) => combine_error::<C>("merge", &e, &events, both),
        }
    }
    if p.is_signed() || seed.is_signed() {
        go::<i64>(p, seed, both)
    } else {
        go::<u64>(p, seed, both)
    }
}

/// `tally diff SEED INPUT`: INPUT − SEED, written and read back.
fn diff(p: &AnyProfile, seed: &AnyProfile, both: &Both<'_>) -> Res {
    let options = CombineOptions {
        events: EventChoice::Same,
        combine_parts: true,
        per_function: p.format() == Format::Cachegrind,
        ..Default::default()
    };
    let mut c = Combiner::<i64>::new(options);
    let r =
        add(&mut c, seed, Sign::Minus, "fuzz-seed").and_then(|_| add(&mut c, p, Sign::Plus, NAME));
    let events = event_names(&c);
    match r.and_then(|_| c.finish()) {
        Ok(d) => {
            round_trip(&d.profile, "diff")?;
            stacks_kept(p, seed, &d.profile, "diff")
        }
        Err(e) => combine_error::<i64>("diff", &e, &events, both),
    }
}

/// Writes a case file into `dir`, named by target, seed and case number.
pub fn save(
    dir: &Path,
    case: &Case,
    seed: u64,
    number: u64,
) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{}-{seed}-{number}.case", case.kind.name()));
    let mut f = std::fs::File::create(&path)?;
    f.write_all(&case.to_file())?;
    Ok(path)
}
