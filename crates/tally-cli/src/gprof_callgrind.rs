//! `tally gprof CALLGRIND-PROFILE`: reads the profile (summing while
//! reading, as `tally annotate` does for one input), then prints gprof's
//! analysis from `tally_analysis::gprof::callgrind`.

use std::io::Write;

use anyhow::{Context, Result};
use tally_analysis::AggregateBuilder;
use tally_analysis::gprof::callgrind as report;
use tally_analysis::gprof::{self, Options};
use tally_formats::Source;
use tally_formats::callgrind::ReadOutcome;
use tally_model::{AnyCost, Cost};
use tally_report::gprof::{json, text};

use crate::Outcome;
use crate::progress::Progress;

/// gprof's analysis of a profile summed while it was read.
fn analyse<C: Cost>(
    source: &Source,
    read: ReadOutcome<C>,
    mut sums: AggregateBuilder<C>,
    opts: &Options,
    event: Option<&str>,
) -> Result<gprof::Report> {
    for line in tally_input::warning_lines(source.path(), &read.warnings) {
        eprintln!("{line}");
    }
    sums.set_events(read.profile.events.len());
    let part_sums = sums.part_totals();
    let agg = sums.finish(read.profile.names.function_count(), |_| true);
    let r = report::analyse(
        &read.profile,
        &agg,
        &part_sums,
        event,
        opts,
        &source.path().display().to_string(),
    )?;
    Ok(r)
}

/// Runs gprof's analysis on a Callgrind profile. `flat`/`graph` are the
/// reports asked for (`-p`, `-q`), `user_flat`/`user_graph` whether `-p`/`-P`
/// or `-q`/`-Q` were given at all.
pub fn run(
    source: &Source,
    opts: &Options,
    (flat, graph): (bool, bool),
    (user_flat, user_graph): (bool, bool),
    json: bool,
    event: Option<&str>,
) -> Result<Outcome> {
    if opts.line {
        crate::usage_bail!("-l (one entry per source line) is not supported for Callgrind input");
    }
    if opts.static_calls {
        crate::usage_bail!(
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

    let mut progress = Progress::new(source.size());
    let mut update = |n| progress.update(n);
    let read = tally_input::read_one_summing(
        source,
        || AggregateBuilder::new(0),
        || AggregateBuilder::new(0),
        Some(&mut update),
    );
    drop(progress);
    // A reader's error names the file already.
    let r = match read? {
        AnyCost::Unsigned((o, s)) => analyse(source, o, s, &opts, event),
        AnyCost::Signed((o, s)) => analyse(source, o, s, &opts, event),
    }
    .with_context(|| format!("{}", source.path().display()))?;
    for n in &r.notices {
        eprintln!("tally gprof: warning: {}", n.0);
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    if json {
        out.write_all(json::write(&r, &opts).as_bytes())?;
    } else {
        text::write_to(&r, &opts, &mut out)?;
    }
    out.flush()?;
    // The report is a few hundred thousand allocations on a large
    // profile: freeing them costs more than the process's end, which
    // returns their memory at once. (The profile and sums are freed
    // before the report is written, which keeps the peak lower.)
    std::mem::forget(r);
    Ok(Outcome::Ok)
}
