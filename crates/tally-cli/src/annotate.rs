//! `tally annotate`: function tables, inclusive costs, call trees, source,
//! assembly and jumps for Callgrind and Cachegrind profiles.

use crate::Outcome;
use crate::progress::Progress;
use anyhow::{Context, bail};
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use tally_analysis::AggregateBuilder;
use tally_formats::callgrind::{ReadOptions, Sink};
use tally_formats::{Error, ParseErrorKind};
use tally_model::{CallInfo, Cost, FileId, FunctionId, JumpInfo, Jumps, Positions, Profile};
use tally_report::annotate::{Options, PartFilter, Tree};

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
    /// Show functions until this percentage of the primary sort event is
    /// covered; 100 shows all.
    #[arg(long, default_value = "99", value_parser = parse_percent)]
    threshold: f64,
    /// Show and sort by inclusive costs, correct under recursion.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "no", value_parser = yes_no)]
    inclusive: bool,
    /// Call trees: callers, callees, or both.
    #[arg(long, value_enum, default_value = "none")]
    tree: TreeArg,
    /// Annotate the sources of all functions above the threshold.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "no", value_parser = yes_no)]
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
    /// Show percentages after the counts.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "yes", default_value = "no", value_parser = yes_no)]
    show_percs: bool,
    /// Sum only these parts (numbers as in `part:`; repeatable or comma-separated).
    #[arg(long, value_delimiter = ',', conflicts_with = "thread")]
    part: Vec<u64>,
    /// Sum only the parts of these threads.
    #[arg(long, value_delimiter = ',')]
    thread: Vec<u64>,
    /// An extra event as a formula of recorded events, `NAME=Ir+2*Dr`
    /// (repeatable).
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
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum TreeArg {
    None,
    Caller,
    Calling,
    Both,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

fn yes_no(s: &str) -> Result<bool, String> {
    match s {
        "yes" | "true" | "1" => Ok(true),
        "no" | "false" | "0" => Ok(false),
        _ => Err(format!("expected yes or no, got `{s}`")),
    }
}

fn parse_percent(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("expected a percentage, got `{s}`"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("the threshold must be between 0 and 100, got {v}"))
    }
}

/// Whether a file looks like a profile (rather than a source file to
/// annotate), by its first bytes.
fn is_profile(path: &Path) -> bool {
    if path.as_os_str() == "-" {
        return true;
    }
    let mut head = [0u8; 512];
    let n = match std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) {
        Ok(n) => n,
        // Let the reader report it.
        Err(_) => return true,
    };
    let head = &head[..n];
    if head.starts_with(&[0x1f, 0x8b]) {
        return true;
    }
    let first = head
        .split(|&b| b == b'\n')
        .map(|l| l.trim_ascii())
        .find(|l| !l.is_empty() && (!l.starts_with(b"#") || l.starts_with(b"# callgrind format")));
    let Some(first) = first else {
        return false;
    };
    [
        &b"# callgrind format"[..],
        b"version:",
        b"creator:",
        b"pid:",
        b"cmd:",
        b"part:",
        b"desc:",
        b"positions:",
        b"event:",
        b"events:",
        b"summary:",
    ]
    .iter()
    .any(|k| first.starts_with(k))
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let (profiles, sources): (Vec<PathBuf>, Vec<PathBuf>) = {
        let mut p = Vec::new();
        let mut s = Vec::new();
        for (i, f) in args.files.iter().enumerate() {
            if i == 0 || (s.is_empty() && is_profile(f)) {
                p.push(f.clone());
            } else {
                s.push(f.clone());
            }
        }
        (p, s)
    };
    let opts = options(&args, profiles.clone(), sources)?;
    if args.diff {
        let [a, b] = profiles.as_slice() else {
            bail!(
                "--diff compares two profiles, A and B; {} given",
                profiles.len()
            );
        };
        let options = tally_analysis::combine::CombineOptions {
            combine_parts: true,
            ..Default::default()
        };
        let inputs = crate::diff::inputs(a, b, options, false, true)?;
        let d = crate::diff::difference(&inputs, a, b)?;
        return report(d.profile, None, &args, &opts);
    }
    let paths: Vec<&Path> = profiles.iter().map(PathBuf::as_path).collect();
    let total: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
        .sum();
    let stdin = paths.iter().any(|p| p.as_os_str() == "-");
    // One file and no source or assembly: sum while reading, keep no lines.
    let stream = paths.len() == 1 && !tally_report::annotate::needs_lines(&opts);
    let mut progress = Progress::new(Some(total));
    let mut update = |n| progress.update(n);
    let first = if stream {
        streamed::<u64>(paths[0], Some(&mut update), &args, &opts)
    } else {
        match tally_formats::read_files::<u64>(&paths, Some(&mut update)) {
            Ok((p, w)) => {
                warn(&paths, &w);
                report(p, None, &args, &opts)
            }
            Err(e) => Err(e.into()),
        }
    };
    drop(progress);
    match first {
        Err(e) if !stdin && is_negative(&e) => {
            if stream {
                streamed::<i64>(paths[0], None, &args, &opts)
            } else {
                let (p, w) = tally_formats::read_files::<i64>(&paths, None)?;
                warn(&paths, &w);
                report(p, None, &args, &opts)
            }
        }
        r => r,
    }
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

/// Feeds the reader's records to the sums, keeping only jumps (for
/// `--jumps`).
struct SumSink<C: Cost> {
    sums: AggregateBuilder<C>,
    jumps: Vec<Jumps<C>>,
    keep_jumps: bool,
}

impl<C: Cost> Sink<C> for SumSink<C> {
    fn start_part(&mut self, positions: Positions, events: usize) {
        // The number of events is known once the first header is read.
        if self.jumps.is_empty() {
            self.sums = AggregateBuilder::new(events);
        }
        self.sums.start_part();
        self.jumps.push(Jumps::new(positions));
    }
    #[inline]
    fn line(&mut self, function: FunctionId, file: FileId, _: &[u64], costs: &[C]) {
        self.sums.line(function, file, costs);
    }
    fn call(&mut self, info: CallInfo<C>, _: &[u64], _: &[u64], inclusive: &[C]) {
        self.sums.call(&info, inclusive);
    }
    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        self.sums.jump(info.function);
        if self.keep_jumps
            && let Some(j) = self.jumps.last_mut()
        {
            j.push(info, source, target);
        }
    }
}

fn streamed<C: Cost>(
    path: &Path,
    progress: Option<&mut dyn FnMut(u64)>,
    args: &Args,
    opts: &Options,
) -> anyhow::Result<Outcome> {
    let input = tally_formats::Input::open(path)?;
    let mut sink = SumSink {
        sums: AggregateBuilder::<C>::new(0),
        jumps: Vec::new(),
        keep_jumps: opts.jumps.is_some(),
    };
    let out = tally_formats::callgrind::parse(input, &mut sink, ReadOptions { progress })?;
    if sink.jumps.is_empty() {
        sink.sums = AggregateBuilder::new(out.profile.events.len());
    }
    warn(&[path], std::slice::from_ref(&out.warnings));
    let mut profile = out.profile;
    for (part, jumps) in profile.parts.iter_mut().zip(sink.jumps) {
        part.jumps = jumps;
    }
    report(profile, Some(sink.sums), args, opts)
}

fn warn(paths: &[&Path], warnings: &[tally_formats::Warnings]) {
    for (p, ws) in paths.iter().zip(warnings) {
        for w in ws.iter() {
            eprintln!("{}: warning: {w}", p.display());
        }
    }
}

fn options(args: &Args, inputs: Vec<PathBuf>, sources: Vec<PathBuf>) -> anyhow::Result<Options> {
    let mut sort = Vec::new();
    for s in &args.sort {
        match s.rsplit_once(':') {
            Some((ev, th)) => sort.push((
                ev.to_string(),
                Some(parse_percent(th).map_err(anyhow::Error::msg)?),
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
        threshold: args.threshold,
        inclusive: args.inclusive,
        tree: match args.tree {
            TreeArg::None => Tree::None,
            TreeArg::Caller => Tree::Caller,
            TreeArg::Calling => Tree::Calling,
            TreeArg::Both => Tree::Both,
        },
        auto: args.auto,
        files: sources,
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
    })
}

fn report<C: Cost>(
    mut profile: Profile<C>,
    sums: Option<AggregateBuilder<C>>,
    args: &Args,
    opts: &Options,
) -> anyhow::Result<Outcome> {
    for e in &args.events {
        let Some((name, formula)) = e.split_once('=') else {
            bail!("--event `{e}`: expected NAME=FORMULA, e.g. `S=Ir+Dr`");
        };
        let name = name.trim();
        if name.is_empty() || profile.events.find(name).is_some() {
            bail!("--event `{e}`: the name `{name}` is empty or already an event");
        }
        let terms =
            tally_model::parse_formula(formula.trim()).with_context(|| format!("--event `{e}`"))?;
        profile.events.add_derived(name.to_string(), None, terms);
        profile
            .events
            .resolve()
            .with_context(|| format!("--event `{e}`"))?;
    }
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let warnings = match sums {
        Some(s) => tally_report::annotate::annotate_sums(&profile, s, opts, &mut out)?,
        None => tally_report::annotate::annotate(&profile, opts, &mut out)?,
    };
    out.flush()?;
    for w in warnings {
        eprintln!("tally: warning: {w}");
    }
    Ok(Outcome::Ok)
}
