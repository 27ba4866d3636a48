//! `tally graph`: the call graph of a profile as DOT or SVG. The graph is
//! built from gprof's analysis (`tally_report::graph`), so its numbers are
//! `tally gprof`'s; this module reads the inputs, prunes and writes.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use tally_analysis::AggregateBuilder;
use tally_analysis::gprof::{self, Options};
use tally_formats::FileFormat;
use tally_formats::Source;
use tally_formats::callgrind::ReadOutcome;
use tally_input::{GmonInput, Program, Summing};
use tally_model::{AnyCost, Cost, Profile};
use tally_report::graph::{self, Graph, Prune};

use crate::Outcome;
use crate::progress::Progress;
use crate::values;

/// What to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Graphviz's DOT text.
    Dot,
    /// SVG, laid out by Graphviz's `dot`.
    Svg,
}

/// Arguments of `tally graph`.
#[derive(clap::Args)]
pub struct Args {
    /// Callgrind or Cachegrind profiles (several are summed), or gmon.out
    /// files with `--binary` (summed as gprof sums them).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output: `*.svg` (needs Graphviz's `dot`), `*.dot`, or `-` for DOT on
    /// standard output.
    #[arg(short, long)]
    output: PathBuf,
    /// Output format, instead of the one the output name says.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// The program that wrote the gmon files (built with `-pg`).
    #[arg(long, visible_alias = "program", value_name = "PROG")]
    binary: Option<PathBuf>,
    /// The event (Callgrind): a recorded one (`Ir`), or a new one as a sum
    /// of recorded ones, `NAME=FORMULA` (`S=Ir+10*D1mr`); default: the
    /// first.
    #[arg(long)]
    event: Option<String>,
    /// Leave out functions whose total is below this percentage of the
    /// program's total, and their calls.
    #[arg(short = 'n', long, default_value = "0.5", value_name = "PERCENT", value_parser = values::fraction)]
    node_thres: f64,
    /// Leave out calls that pass less than this percentage.
    #[arg(short = 'e', long, default_value = "0.1", value_name = "PERCENT", value_parser = values::fraction)]
    edge_thres: f64,
    /// Show only what these functions call, directly or not (glob
    /// patterns; repeatable).
    #[arg(short = 'z', long, value_name = "FUNCTION")]
    root: Vec<String>,
    /// Show only what calls these functions, directly or not.
    #[arg(short = 'l', long, value_name = "FUNCTION")]
    leaf: Vec<String>,
    /// Show only these functions' callers and callees, directly or not
    /// (glob patterns; repeatable).
    #[arg(long, value_name = "FUNCTION")]
    around: Vec<String>,
    /// Draw at most this many functions, the heaviest (0: no bound), as
    /// a higher --node-thres would.
    #[arg(long, default_value_t = graph::MAX_NODES, value_name = "N")]
    max_nodes: usize,
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

/// Runs `tally graph`.
pub fn run(args: Args) -> Result<Outcome> {
    let format = match args.format {
        Some(f) => f,
        None => match args.output.extension().and_then(|e| e.to_str()) {
            _ if args.output.as_os_str() == "-" => Format::Dot,
            Some(e) if e.eq_ignore_ascii_case("svg") => Format::Svg,
            Some(e) if e.eq_ignore_ascii_case("dot") || e.eq_ignore_ascii_case("gv") => Format::Dot,
            _ => crate::usage_bail!(
                "{}: name the output `*.svg` or `*.dot` (or `-` for DOT), or give --format",
                args.output.display()
            ),
        },
    };
    let list = args.transforms.list()?;
    let sources = tally_input::open_all(&args.files)?;
    let report = if !list.is_empty() {
        let d = crate::explore::load("graph", &sources, args.binary.as_deref(), 0.0, &list)?;
        whole(d.into_profile(), &args, &tally_input::names(&sources, ", "))?
    } else if sources.iter().any(|s| s.format() == FileFormat::Gmon) || args.binary.is_some() {
        gmon_report(&args, &sources)?
    } else {
        callgrind_report(&args, &sources)?
    };
    let g = Graph::from_report(&report);
    // gprof's notice about a profile without calls speaks of its own
    // report (`<spontaneous>`); the graph's is said below.
    for n in report
        .notices
        .iter()
        .filter(|n| g.has_arcs || !n.0.contains("records no calls"))
    {
        eprintln!("tally graph: warning: {}", n.0);
    }
    if !g.has_arcs {
        eprintln!(
            "tally graph: warning: the profile records no calls: the graph has functions only"
        );
    }
    let prune = Prune {
        node_thres: args.node_thres,
        edge_thres: args.edge_thres,
        root: args.root.clone(),
        leaf: args.leaf.clone(),
        around: args.around.clone(),
    };
    let mut kept = graph::prune(&g, &prune)?;
    let (left_out, smallest) = graph::limit(&g, &mut kept, args.max_nodes);
    if left_out > 0 {
        eprintln!(
            "tally graph: {left_out} more functions above --node-thres left out to keep to \
             --max-nodes {} (the smallest total drawn: {:.2}%)",
            args.max_nodes,
            smallest * 100.0
        );
    }
    let bytes = match format {
        Format::Dot => {
            let mut text = Vec::new();
            graph::dot::write(&g, &kept, &mut text)?;
            text
        }
        Format::Svg => {
            let r = graph::svg::render_graph(&g, &kept)?;
            for l in r.dot_stderr.lines().filter(|l| !l.trim().is_empty()) {
                eprintln!("tally graph: dot: {l}");
            }
            for n in &r.notes {
                eprintln!("tally graph: {n}");
            }
            r.svg
        }
    };
    tally_formats::write_file(&args.output, |w| std::io::Write::write_all(w, &bytes))?;
    Ok(Outcome::Ok)
}

/// gprof's analysis of gmon files and their program.
fn gmon_report(args: &Args, sources: &[Source]) -> Result<gprof::Report> {
    let program = GmonInput::check(sources, args.binary.as_deref())?;
    if args.event.is_some() {
        crate::usage_bail!("--event is for Callgrind profiles; gmon files hold time samples");
    }
    let input = GmonInput::sum(sources, Program::open(program)?)?;
    if input.is_empty() {
        bail!(
            "{}: no histogram and no call arcs: the profile is empty",
            args.files[0].display()
        );
    }
    Ok(gprof::analyse(
        input.program.object(),
        &input.gmon,
        &graph_options(),
    )?)
}

/// The gprof options a graph needs: a call graph, nothing printed.
fn graph_options() -> Options {
    Options {
        flat: false,
        graph: true,
        ..Default::default()
    }
}

/// gprof's analysis of Callgrind profiles: one file summed while read,
/// several loaded and summed.
fn callgrind_report(args: &Args, sources: &[Source]) -> Result<gprof::Report> {
    let total: u64 = sources.iter().filter_map(Source::size).sum();
    let mut progress = Progress::new(Some(total));
    let mut update = |n| progress.update(n);
    let read = tally_input::read_summing(
        sources,
        false,
        || AggregateBuilder::new(0),
        || AggregateBuilder::new(0),
        Some(&mut update),
    );
    drop(progress);
    let (p, warnings) = match read? {
        Summing::Streamed(read) => {
            let source = &sources[0];
            let name = source.path().display().to_string();
            return match read {
                AnyCost::Unsigned((o, s)) => streamed(source, o, s, args, &name),
                AnyCost::Signed((o, s)) => streamed(source, o, s, args, &name),
            };
        }
        Summing::Whole { profile, warnings } => (profile, warnings),
    };
    for w in warnings {
        eprintln!("{w}");
    }
    let name = tally_input::names(sources, ", ");
    match p {
        AnyCost::Unsigned(p) => whole(p, args, &name),
        AnyCost::Signed(p) => whole(p, args, &name),
    }
}

/// Prints a read's warnings.
fn warn(source: &Source, warnings: &tally_formats::Warnings) {
    for line in tally_input::warning_lines(source.path(), warnings) {
        eprintln!("{line}");
    }
}

/// The report of one profile summed while it was read.
fn streamed<C: Cost>(
    source: &Source,
    mut read: ReadOutcome<C>,
    mut sums: AggregateBuilder<C>,
    args: &Args,
    name: &str,
) -> Result<gprof::Report> {
    warn(source, &read.warnings);
    sums.set_events(read.profile.events.len());
    let event = event(&mut read.profile, args.event.as_deref())?;
    let part_sums = sums.part_totals();
    let agg = sums.finish(read.profile.names.function_count(), |_| true);
    gprof::callgrind::analyse(
        &read.profile,
        &agg,
        &part_sums,
        event.as_deref(),
        &graph_options(),
        name,
    )
    .with_context(|| name.to_owned())
}

/// The report of a profile loaded whole (several files).
fn whole<C: Cost>(mut p: Profile<C>, args: &Args, name: &str) -> Result<gprof::Report> {
    let event = event(&mut p, args.event.as_deref())?;
    gprof::callgrind::analyse_profile(&p, event.as_deref(), &graph_options(), name)
        .with_context(|| name.to_owned())
}

/// The event to draw: a recorded one, or `NAME=FORMULA` added to the
/// profile's events. Ratios cannot be drawn: a graph sums costs.
fn event<C: Cost>(p: &mut Profile<C>, event: Option<&str>) -> Result<Option<String>> {
    let Some(e) = event else {
        return Ok(None);
    };
    let name = match e.split_once('=') {
        None => e.trim().to_owned(),
        Some((name, formula)) => {
            let name = name.trim();
            if name.is_empty() || p.events.find(name).is_some() {
                bail!("--event `{e}`: the name `{name}` is empty or already an event");
            }
            let formula = tally_model::parse_expression(formula.trim())
                .with_context(|| format!("--event `{e}`"))?;
            p.events.add_formula(name.to_owned(), None, formula);
            p.events
                .resolve()
                .with_context(|| format!("--event `{e}`"))?;
            name.to_owned()
        }
    };
    let columns = tally_model::EventColumns::new(&p.events);
    if let Ok(i) = columns.find(&name)
        && columns.is_ratio(i)
    {
        bail!(
            "--event `{e}`: a ratio cannot be drawn as a call graph, whose costs add up; give a sum"
        );
    }
    Ok(Some(name))
}
