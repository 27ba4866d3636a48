//! `tally gprof CALLGRIND-PROFILE`: reads the profile (summing while
//! reading, as `tally annotate` does for one input), then prints gprof's
//! analysis from `tally_report::gprof::callgrind`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result, bail};
use tally_analysis::AggregateBuilder;
use tally_formats::callgrind::{ReadOptions, Sink};
use tally_formats::{Error, ParseErrorKind};
use tally_model::{CallInfo, Cost, FileId, FunctionId, JumpInfo, Positions};
use tally_report::gprof::callgrind as report;
use tally_report::gprof::{self, Options};

use crate::Outcome;
use crate::progress::Progress;

/// Sums self costs and arcs while the profile is read.
struct SumSink<C: Cost> {
    sums: AggregateBuilder<C>,
    started: bool,
}

impl<C: Cost> Sink<C> for SumSink<C> {
    fn start_part(&mut self, _: Positions, events: usize) {
        if !self.started {
            self.sums = AggregateBuilder::new(events);
            self.started = true;
        }
        self.sums.start_part();
    }
    #[inline]
    fn line(&mut self, function: FunctionId, file: FileId, _: &[u64], costs: &[C]) {
        self.sums.line(function, file, costs);
    }
    fn call(&mut self, info: CallInfo<C>, _: &[u64], _: &[u64], inclusive: &[C]) {
        self.sums.call(&info, inclusive);
    }
    fn jump(&mut self, info: JumpInfo<C>, _: &[u64], _: &[u64]) {
        self.sums.jump(info.function);
    }
}

fn analyse<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
    opts: &Options,
    event: Option<&str>,
) -> Result<gprof::Report> {
    let input = tally_formats::Input::open(path)?;
    let mut sink = SumSink {
        sums: AggregateBuilder::<C>::new(0),
        started: false,
    };
    let out = tally_formats::callgrind::parse(input, &mut sink, ReadOptions { progress })?;
    for w in out.warnings.iter() {
        eprintln!("{}: warning: {w}", path.display());
    }
    if !sink.started {
        sink.sums = AggregateBuilder::new(out.profile.events.len());
    }
    let part_sums = sink.sums.part_totals();
    let agg = sink
        .sums
        .finish(out.profile.names.function_count(), |_| true);
    let r = report::analyse(
        &out.profile,
        &agg,
        &part_sums,
        event,
        opts,
        &path.display().to_string(),
    )?;
    Ok(r)
}

fn is_negative(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<Error>(),
        Some(Error::Parse {
            kind: ParseErrorKind::Negative(_),
            ..
        })
    )
}

/// Runs gprof's analysis on a Callgrind profile. `flat`/`graph` are the
/// reports asked for (`-p`, `-q`), `user_flat`/`user_graph` whether `-p`/`-P`
/// or `-q`/`-Q` were given at all.
#[allow(clippy::too_many_arguments)]
pub fn run(
    path: &Path,
    opts: &Options,
    flat: bool,
    graph: bool,
    user_flat: bool,
    user_graph: bool,
    json: bool,
    event: Option<&str>,
) -> Result<Outcome> {
    if opts.line {
        bail!("-l (one entry per source line) is not supported for Callgrind input");
    }
    if opts.static_calls {
        bail!(
            "-c (calls found in the code) is not supported for Callgrind input: Callgrind records every call"
        );
    }
    let mut opts = opts.clone();
    let (mut flat, mut graph) = (flat, graph);
    if !(flat || graph) {
        flat = !user_flat;
        graph = !user_graph;
    }
    if !(flat || graph) {
        return Ok(Outcome::Ok);
    }
    opts.flat = flat;
    opts.graph = graph;

    let total = std::fs::metadata(path).ok().map(|m| m.len());
    let mut progress = Progress::new(total);
    let mut update = |n| progress.update(n);
    let first = analyse::<u64>(path, Some(&mut update), &opts, event);
    drop(progress);
    let r = match first {
        Err(e) if is_negative(&e) => analyse::<i64>(path, None, &opts, event),
        r => r,
    }
    .with_context(|| format!("{}", path.display()))?;
    for n in &r.notices {
        eprintln!("tally gprof: warning: {}", n.0);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    if json {
        out.write_all(gprof::json::write(&r, &opts).as_bytes())?;
    } else {
        gprof::text::write_to(&r, &opts, &mut out)?;
    }
    out.flush()?;
    Ok(Outcome::Ok)
}
