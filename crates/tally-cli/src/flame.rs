//! `tally flame`: a flame graph (or icicle graph) of one profile, or a
//! differential one of two, as an interactive SVG (see docs/flame.md).

use crate::Outcome;
use anyhow::{Context, anyhow, bail};
use std::path::{Path, PathBuf};
use tally_analysis::{Aggregate, AggregateBuilder, EstimateOptions, StackTree, estimate_tree};
use tally_formats::Source;
use tally_formats::detect::Format as FileFormat;
use tally_input::Summing;
use tally_model::{AnyCost, EventColumns, EventValue, Profile, Stacks};
use tally_report::flame::{FlameOptions, Tree, write_svg};

/// Arguments of `tally flame`.
#[derive(clap::Args)]
pub struct Args {
    /// The profile (several files are summed as one: a dump series, a
    /// thread set); with --diff, exactly two: A (before) and B (after).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// The SVG to write (`-` for standard output).
    #[arg(short, long, value_name = "OUT.svg")]
    output: PathBuf,
    /// A differential flame graph of `A B`: B's shape, frames red where
    /// their self cost grew against A, blue where it shrank.
    #[arg(long)]
    diff: bool,
    /// The event the widths show, recorded or derived (default: the
    /// first).
    #[arg(long, value_name = "EVENT")]
    event: Option<String>,
    /// The title (default: "Flame Graph", "Icicle Graph" or
    /// "Differential Flame Graph").
    #[arg(long)]
    title: Option<String>,
    /// A line under the title (default: the event and the files).
    #[arg(long)]
    subtitle: Option<String>,
    /// Image width in pixels.
    #[arg(long, default_value_t = 1200)]
    width: u32,
    /// Leave out frames narrower than this many pixels.
    #[arg(long, default_value_t = 0.1)]
    minwidth: f64,
    /// Draw top-down (roots at the top): an icicle graph.
    #[arg(long)]
    icicle: bool,
    /// gmon.out input: the program that wrote it (built with `-pg`).
    #[arg(long, value_name = "PROG")]
    binary: Option<PathBuf>,
}

/// A profile read for drawing, with its stacks.
struct Drawn {
    profile: Profile<u64>,
    stacks: Drawing,
}

/// Stacks as recorded, or estimated from the arcs.
enum Drawing {
    Recorded(Stacks<u64>),
    Estimated(StackTree),
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    crate::inputs::stdin_once(&args.files)?;
    if args.diff && args.files.len() != 2 {
        crate::usage_bail!(
            "--diff takes exactly two files, A (before) and B (after); {} given",
            args.files.len()
        );
    }
    if !(args.minwidth >= 0.0 && args.minwidth.is_finite()) {
        crate::usage_bail!("--minwidth: {} is not a width in pixels", args.minwidth);
    }
    if args.width < 100 {
        crate::usage_bail!(
            "--width: {} pixels is too narrow (100 at least)",
            args.width
        );
    }
    // Shares narrower than the narrowest frame drawn are not split
    // further but follow their heaviest caller: they move less than that
    // width, and the stacks stay few.
    let min_share = args.minwidth.max(0.01) / args.width as f64;
    let (tree, name, estimated) = match direct(&args)? {
        Some(direct) => direct,
        None => through_model(&args, min_share)?,
    };
    if tree.nodes[0].value == 0 {
        bail!(
            "{}: no cost in event {name} to draw",
            args.files[args.files.len() - 1].display()
        );
    }

    let mut title = args.title.clone().unwrap_or_else(|| {
        if args.diff {
            "Differential Flame Graph".into()
        } else if args.icicle {
            "Icicle Graph".into()
        } else {
            "Flame Graph".into()
        }
    });
    if estimated && args.title.is_none() {
        title.push_str(" (stacks estimated from call arcs)");
    }
    let files: Vec<String> = args.files.iter().map(|f| f.display().to_string()).collect();
    let subtitle = args.subtitle.clone().or_else(|| {
        Some(if args.diff {
            format!("{name}: {} against {}", files[1], files[0])
        } else {
            format!("{name}: {}", files.join(" "))
        })
    });
    let mut legend = Vec::new();
    if args.diff {
        legend.push("Shape of B; red: self cost grew against A, blue: shrank".to_string());
    }
    if estimated {
        legend.push(
            "Stacks estimated: each function's cost split across its callers in proportion to the calls' costs; recursion collapsed"
                .to_string(),
        );
    }
    let options = FlameOptions {
        title,
        subtitle,
        legend: (!legend.is_empty()).then(|| legend.join(". ")),
        event: name,
        width: args.width,
        min_width: args.minwidth,
        icicle: args.icicle,
    };
    // Durably and whole, as every output (temporary file, renamed).
    tally_formats::output::write_file(&args.output, |mut w| write_svg(&tree, &options, &mut w))?;
    Ok(Outcome::Ok)
}

/// The merged tree of one folded file read straight from its lines, when
/// that is all the picture needs (no --diff, the file's one event): the
/// tree [`through_model`] makes of it, without building a profile first.
fn direct(args: &Args) -> anyhow::Result<Option<(Tree, String, bool)>> {
    // Standard input is read once, by whichever path takes it.
    let [file] = &args.files[..] else {
        return Ok(None);
    };
    if file.as_os_str() == "-" {
        return Ok(None);
    }
    let event = tally_formats::folded::EVENT;
    if args.diff || args.binary.is_some() || args.event.as_deref().is_some_and(|e| e != event) {
        return Ok(None);
    }
    let source = Source::open(file)?;
    if source.format() != FileFormat::Folded {
        return Ok(None);
    }
    let mut tree = tally_report::flame::read_folded(source.input()?)?;
    tree.finish();
    Ok(Some((tree, event.to_owned(), false)))
}

/// The merged tree of the inputs read as profiles (B's shape with A's
/// costs for --diff), the event drawn and whether the stacks are
/// estimated.
fn through_model(args: &Args, min_share: f64) -> anyhow::Result<(Tree, String, bool)> {
    let groups: Vec<&[PathBuf]> = if args.diff {
        args.files.chunks(1).collect()
    } else {
        vec![&args.files[..]]
    };
    let drawn = groups
        .iter()
        .map(|files| read(files, args.binary.as_deref(), min_share))
        .collect::<anyhow::Result<Vec<Drawn>>>()?;

    let first = &drawn[0].profile;
    let columns = EventColumns::new(&first.events);
    let name = match &args.event {
        Some(e) => e.clone(),
        None => columns
            .names()
            .first()
            .cloned()
            .ok_or_else(|| anyhow!("{}: the profile has no event", args.files[0].display()))?,
    };
    let mut tree = Tree::new();
    for (i, d) in drawn.iter().enumerate().rev() {
        let event = event_of(&d.profile, &name, &args.files[i.min(args.files.len() - 1)])?;
        let base = args.diff && i == 0;
        match &d.stacks {
            Drawing::Recorded(s) => tree.add_stacks(&d.profile, s, &event, false, base),
            Drawing::Estimated(s) => tree.add_stack_tree(&d.profile, s, &event, true, base),
        }
    }
    tree.finish();
    let estimated = drawn
        .iter()
        .any(|d| matches!(d.stacks, Drawing::Estimated(_)));
    Ok((tree, name, estimated))
}

/// The event `name` of `profile`, a count (not a ratio).
fn event_of(profile: &Profile<u64>, name: &str, file: &Path) -> anyhow::Result<EventValue> {
    let columns = EventColumns::new(&profile.events);
    let e = columns
        .find(name)
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    if columns.is_ratio(e) {
        crate::usage_bail!("--event {name}: a ratio cannot be a width; choose a count");
    }
    Ok(columns
        .column(e)
        .cloned()
        .expect("a found event has a column"))
}

/// Reads `files` as one profile with its stacks: recorded ones, or
/// estimated from the arcs.
fn read(files: &[PathBuf], binary: Option<&Path>, min_share: f64) -> anyhow::Result<Drawn> {
    let sources = tally_input::open_all(files)?;
    if binary.is_none()
        && sources
            .iter()
            .all(|s| s.format() != tally_input::FileFormat::Gmon)
    {
        return summed(&sources, min_share);
    }
    let input = tally_input::read_gmon(&sources, binary)?;
    let conv = input.to_profile(&tally_report::gprof::Options::default())?;
    for n in &conv.notices {
        eprintln!("tally flame: warning: {n}");
    }
    with_stacks(conv.profile, &files[0], min_share)
}

/// A loaded profile with its stacks: the recorded ones, or estimated from
/// its arcs.
fn with_stacks(mut profile: Profile<u64>, file: &Path, min_share: f64) -> anyhow::Result<Drawn> {
    let stacks = match profile.stacks.take() {
        Some(s) if !s.is_empty() => Drawing::Recorded(s),
        _ => {
            let options = EstimateOptions { min_share };
            let s = estimate_tree(&Aggregate::new(&profile, |_| true), options)
                .with_context(|| format!("{}: estimating stacks", file.display()))?;
            Drawing::Estimated(s)
        }
    };
    Ok(Drawn { profile, stacks })
}

/// Prints a read's warnings.
fn warn(file: &Path, w: &tally_formats::Warnings) {
    for line in tally_input::warning_lines(file, w) {
        eprintln!("{line}");
    }
}

/// Profiles other than gmon: one Callgrind file summed as it is read (no
/// line is stored: the estimate needs only self costs and arcs); recorded
/// stacks, or several files, loaded whole.
fn summed(sources: &[Source], min_share: f64) -> anyhow::Result<Drawn> {
    let read = tally_input::read_summing(
        sources,
        true,
        || AggregateBuilder::<u64>::keeping_jumps(false),
        || tally_model::NullSink,
        None,
    )?;
    let (outcome, builder) = match read {
        Summing::Streamed(AnyCost::Unsigned(read)) => read,
        Summing::Streamed(AnyCost::Signed(_))
        | Summing::Whole {
            profile: AnyCost::Signed(_),
            ..
        } => bail!(
            "{}: a difference (negative counts) has no flame graph: draw `tally flame --diff A B` of the two profiles",
            sources[0].path().display()
        ),
        Summing::Whole {
            profile: AnyCost::Unsigned(profile),
            warnings,
        } => {
            for w in &warnings {
                eprintln!("{w}");
            }
            return with_stacks(profile, sources[0].path(), min_share);
        }
    };
    let file = sources[0].path();
    warn(file, &outcome.warnings);
    let profile = outcome.profile;
    let agg = builder.finish(profile.names.function_count(), |_| true);
    let stacks = estimate_tree(&agg, EstimateOptions { min_share })
        .with_context(|| format!("{}: estimating stacks", file.display()))?;
    Ok(Drawn {
        profile,
        stacks: Drawing::Estimated(stacks),
    })
}
