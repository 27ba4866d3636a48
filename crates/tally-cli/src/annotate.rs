//! `tally annotate`: function tables, inclusive costs, call trees, source,
//! assembly and jumps for Callgrind and Cachegrind profiles.

use crate::progress::Progress;
use crate::{Outcome, values};
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use tally_analysis::AggregateBuilder;
use tally_formats::Source;
use tally_formats::callgrind::ReadOutcome;
use tally_model::{AnyCost, Cost, Profile};
use tally_report::annotate::{AggregateAndRecords, Summed};
use tally_report::annotate::{Grouping, Options, PartFilter, Threshold, Tree};
use {anyhow::Result, tally_analysis::transform::Transform as Tf, tally_input::Summing};

/// Arguments of `tally annotate`. Option names follow callgrind_annotate and
/// cg_annotate, so that existing habits and scripts carry over.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles (Callgrind or Cachegrind; `.gz` is decompressed; several are
    /// summed), then optionally source files to annotate.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Events to show, comma-separated (derived events too). Default: all.
    #[arg(long, value_delimiter = ',')]
    show: Vec<String>,
    /// Sort events, comma-separated, each with an optional threshold
    /// (`--sort=DLmr:1,DLmw:1`).
    #[arg(long, value_delimiter = ',')]
    sort: Vec<String>,
    /// Which functions to show, read as the input's tool reads it. Cachegrind
    /// input (as cg_annotate): each function with at least this percentage
    /// of the primary sort event; default 0.1, 0 shows all. Callgrind input
    /// (as callgrind_annotate): functions until together they cover this
    /// percentage; default 99, 100 shows all. `all` shows every function.
    #[arg(long, value_parser = values::threshold, value_name = "PERCENT|all")]
    threshold: Option<Threshold>,
    /// Function tables: `file` (file:function rows, as callgrind_annotate
    /// and cg_annotate), `function` (function:file rows, each function
    /// once), or `both`.
    #[arg(long, value_enum, default_value = "file")]
    grouping: GroupingArg,
    /// Show and sort by inclusive costs, correct under recursion.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "no", value_parser = values::yes_no_or_bool)]
    inclusive: bool,
    /// Call trees: callers, callees, or both.
    #[arg(long, value_enum, default_value = "none")]
    tree: TreeArg,
    /// Annotate the sources of all functions above the threshold (default
    /// yes, as in Valgrind's tools).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "yes", value_parser = values::yes_no_or_bool)]
    auto: bool,
    /// Lines of context around costly source lines.
    #[arg(long, default_value_t = 8)]
    context: usize,
    /// A directory to look for source files in (repeatable).
    #[arg(short = 'I', long = "include", value_name = "DIR")]
    include: Vec<PathBuf>,
    /// Annotate the disassembly of functions above the threshold (profiles
    /// with instruction positions).
    #[arg(long)]
    asm: bool,
    /// List the N hottest jumps and conditional jumps.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "20", value_name = "N")]
    jumps: Option<usize>,
    /// Show each count's percentage of the program total, ` (12.34%)`
    /// (default yes, as in Valgrind's tools).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "yes", value_parser = values::yes_no_or_bool)]
    show_percs: bool,
    /// Sum only these parts (numbers as in `part:`; repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "thread")]
    part: Vec<u64>,
    /// Sum only the parts of these threads.
    #[arg(long, value_delimiter = ',')]
    thread: Vec<u64>,
    /// An extra event as a formula of recorded events (repeatable): a sum
    /// of terms `N*EVENT`, `EVENT*N` or `EVENT`, added or subtracted
    /// (`S=Ir+2*Dr`), or a ratio of two such sums, computed from summed
    /// costs and shown with decimals (`rate=D1mr/Dr`, `r=(A+B)/C`).
    #[arg(long = "event", value_name = "NAME=FORMULA")]
    events: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Compare two profiles: annotate B − A (the first two files are A and
    /// B), ranking rows by the size of their change.
    #[arg(long)]
    diff: bool,
    /// Colour: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(long, value_enum, default_value = "auto")]
    color: ColorArg,
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
    #[command(flatten)]
    call_tree: crate::explore::CallTreeArgs,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TreeArg {
    None,
    Caller,
    Calling,
    Both,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum GroupingArg {
    File,
    Function,
    Both,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

pub fn run(args: Args) -> Result<Outcome> {
    let (mut profiles, mut sources) = tally_input::profiles_then_sources(&args.files)?;
    // With --diff the first two files are A and B even when the second
    // does not look like a profile: its reader then says what is wrong.
    if args.diff && profiles.len() == 1 && args.files.len() >= 2 {
        profiles = args.files[..2].to_vec();
        sources = args.files[2..].to_vec();
    }
    if args.diff && profiles.len() != 2 {
        crate::usage_bail!(
            "--diff compares two profiles, A and B; {} given",
            profiles.len()
        );
    }
    let transforms = args.transforms.list()?;
    if args.call_tree.call_tree.is_some() {
        return crate::explore::call_tree(&profiles, &transforms, &args.call_tree, args.json);
    }
    let opts = options(&args, profiles.clone(), sources, &transforms)?;
    if !transforms.is_empty() {
        let sources = tally_input::open_all(&profiles)?;
        let d = crate::explore::load("annotate", &sources, None, 0.0, &transforms)?;
        return report(d.into_profile(), None, Vec::new(), &args, &opts);
    }
    if let [a, b] = profiles.as_slice()
        && args.diff
    {
        let options = tally_analysis::combine::CombineOptions {
            combine_parts: true,
            ..Default::default()
        };
        let inputs = crate::diff::inputs(a, b, options, false, true)?;
        let d = crate::diff::difference(&inputs, a, b)?;
        // Both inputs' calls say where recursion is (the difference lacks some).
        let calls = match (&inputs.a, &inputs.b) {
            (AnyCost::Signed(pa), AnyCost::Signed(pb)) => {
                tally_report::diff::calls_by_name(&d.profile.names, &[pa, pb])
            }
            _ => Vec::new(),
        };
        return report(d.profile, None, calls, &args, &opts);
    }
    let sources = tally_input::open_all(&profiles)?;
    // One file: sum while reading; keep the lines only for source or
    // assembly annotation. (Stack formats are loaded whole: their stacks
    // give exact inclusive costs.)
    if tally_report::annotate::needs_lines(&opts) {
        let (u, s) = (AggregateAndRecords::new, AggregateAndRecords::new);
        annotate_inputs(&sources, || u(&opts), || s(&opts), &args, &opts)
    } else {
        let keep = opts.jumps.is_some();
        let (u, s) = (
            AggregateBuilder::keeping_jumps,
            AggregateBuilder::keeping_jumps,
        );
        annotate_inputs(&sources, || u(keep), || s(keep), &args, &opts)
    }
}

/// Annotates one input summed as it is read into the sinks `unsigned` or
/// `signed` make, or several loaded whole.
fn annotate_inputs<U: Summed<u64>, S: Summed<i64>>(
    sources: &[Source],
    unsigned: impl FnOnce() -> U,
    signed: impl FnOnce() -> S,
    args: &Args,
    opts: &Options,
) -> Result<Outcome> {
    let total: u64 = sources.iter().filter_map(Source::size).sum();
    let mut progress = Progress::new(Some(total));
    let mut update = |n| progress.update(n);
    let read = tally_input::read_summing(sources, true, unsigned, signed, Some(&mut update))?;
    drop(progress);
    match read {
        Summing::Streamed(AnyCost::Unsigned((o, s))) => streamed(&sources[0], o, s, args, opts),
        Summing::Streamed(AnyCost::Signed((o, s))) => streamed(&sources[0], o, s, args, opts),
        Summing::Whole { profile, warnings } => {
            for w in warnings {
                eprintln!("{w}");
            }
            match profile {
                AnyCost::Unsigned(p) => report(p, None, Vec::new(), args, opts),
                AnyCost::Signed(p) => report(p, None, Vec::new(), args, opts),
            }
        }
    }
}

/// Reports a profile summed while it was read.
fn streamed<C: Cost>(
    source: &Source,
    read: ReadOutcome<C>,
    sink: impl Summed<C>,
    args: &Args,
    opts: &Options,
) -> Result<Outcome> {
    let (profile, sums, warnings) = sink.finish_read(read);
    for line in tally_input::warning_lines(source.path(), &warnings) {
        eprintln!("{line}");
    }
    report(profile, Some(sums), Vec::new(), args, opts)
}

fn options(args: &Args, inputs: Vec<PathBuf>, files: Vec<PathBuf>, t: &[Tf]) -> Result<Options> {
    let mut sort = Vec::new();
    for s in &args.sort {
        match s.rsplit_once(':') {
            Some((ev, th)) => sort.push((
                ev.to_string(),
                Some(values::percent_0_100(th).map_err(anyhow::Error::msg)?),
            )),
            None => sort.push((s.clone(), None)),
        }
    }
    let color = match args.color {
        ColorArg::Always => true,
        ColorArg::Never => false,
        ColorArg::Auto => {
            !args.json
                && io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    };
    Ok(Options {
        inputs,
        show: args.show.clone(),
        sort,
        threshold: args.threshold.unwrap_or_default(),
        grouping: match args.grouping {
            GroupingArg::File => Grouping::File,
            GroupingArg::Function => Grouping::Function,
            GroupingArg::Both => Grouping::Both,
        },
        inclusive: args.inclusive,
        tree: match args.tree {
            TreeArg::None => Tree::None,
            TreeArg::Caller => Tree::Caller,
            TreeArg::Calling => Tree::Calling,
            TreeArg::Both => Tree::Both,
        },
        auto: args.auto,
        files,
        context: args.context,
        include: args.include.clone(),
        asm: args.asm,
        jumps: args.jumps,
        show_percs: args.show_percs,
        color,
        parts: if !args.part.is_empty() {
            PartFilter::Parts(args.part.clone())
        } else if !args.thread.is_empty() {
            PartFilter::Threads(args.thread.clone())
        } else {
            PartFilter::All
        },
        json: args.json,
        magnitude: args.diff,
        transforms: t.iter().map(ToString::to_string).collect(),
    })
}

fn report<C: Cost>(
    mut profile: Profile<C>,
    sums: Option<AggregateBuilder<C>>,
    calls: Vec<(tally_model::FunctionId, tally_model::FunctionId)>,
    args: &Args,
    opts: &Options,
) -> Result<Outcome> {
    crate::inputs::define_events(&mut profile.events, &args.events)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let warnings = match sums {
        Some(s) => tally_report::annotate::annotate_sums(&profile, s, opts, &mut out)?,
        None => tally_report::annotate::annotate_difference(&profile, calls, opts, &mut out)?,
    };
    out.flush()?;
    for w in warnings {
        eprintln!("tally: warning: {w}");
    }
    Ok(Outcome::Ok)
}
