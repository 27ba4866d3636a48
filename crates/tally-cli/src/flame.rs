//! `tally flame`: a flame graph (or icicle graph) of one profile, or a
//! differential one of two, as an interactive SVG (see docs/flame.md).

use crate::Outcome;
use anyhow::{anyhow, bail};
use std::path::{Path, PathBuf};

use tally_input::{StackSource, WithStacks};
use tally_model::{EventColumns, EventValue, Profile};
use tally_report::flame::{FlameOptions, Tree, diff, write_svg};

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
    /// A differential flame graph of `A B`: B's widths, frames red where
    /// their inclusive cost grew against A, blue where it shrank, grey
    /// within the noise; stacks only in A listed under the graph.
    #[arg(long)]
    diff: bool,
    /// With --diff: changes up to this percentage of A's total are drawn
    /// grey.
    #[arg(long, default_value_t = 0.1, value_name = "PERCENT")]
    noise: f64,
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
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    crate::inputs::stdin_once(&args.files)?;
    if args.diff && args.files.len() != 2 {
        crate::usage_bail!(
            "--diff takes exactly two files, A (before) and B (after); {} given",
            args.files.len()
        );
    }
    if !(args.noise >= 0.0 && args.noise.is_finite()) {
        crate::usage_bail!("--noise: {} is not a percentage", args.noise);
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
        legend.push(tally_report::flame::diff::legend(args.noise / 100.0));
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
    tally_formats::write_file(&args.output, |mut w| write_svg(&tree, &options, &mut w))?;
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
    let other_event = args.event.as_deref().is_some_and(|e| e != event);
    if args.diff || args.binary.is_some() || other_event || !args.transforms.is_empty() {
        return Ok(None);
    }
    let tree = tally_input::folded_tree(file)?;
    Ok(tree.map(|tree| (tree, event.to_owned(), false)))
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
    let list = args.transforms.list()?;
    let mut drawn = Vec::new();
    for files in groups {
        let binary = args.binary.as_deref();
        let sources = tally_input::open_all(files)?;
        drawn.push(crate::explore::load(
            "flame", &sources, binary, min_share, &list,
        )?);
    }

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
    let estimated = drawn.iter().any(WithStacks::estimated);
    if let [a, b] = &drawn[..]
        && args.diff
    {
        let (ea, eb) = (
            event_of(&a.profile, &name, &args.files[0])?,
            event_of(&b.profile, &name, &args.files[1])?,
        );
        let tree = diff::DiffTree::new(&side(a, &ea), &side(b, &eb)).flame(args.noise / 100.0);
        return Ok((tree, name, estimated));
    }
    let mut tree = Tree::new();
    for (i, d) in drawn.iter().enumerate().rev() {
        let event = event_of(&d.profile, &name, &args.files[i.min(args.files.len() - 1)])?;
        match &d.stacks {
            StackSource::Recorded(s) => tree.add_stacks(&d.profile, s, &event, false, false),
            StackSource::Estimated(s) => tree.add_stack_tree(&d.profile, s, &event, true, false),
        }
    }
    tree.finish();
    Ok((tree, name, estimated))
}

/// One side of a differential graph.
fn side<'a>(d: &'a WithStacks, event: &'a EventValue) -> diff::Side<'a> {
    diff::Side {
        profile: &d.profile,
        stacks: match &d.stacks {
            StackSource::Recorded(s) => diff::SideStacks::Recorded(s),
            StackSource::Estimated(s) => diff::SideStacks::Estimated(s),
        },
        event,
    }
}

/// The event `name` of `profile`, a count (not a ratio).
fn event_of(profile: &Profile<u64>, name: &str, file: &Path) -> anyhow::Result<EventValue> {
    let columns = EventColumns::new(&profile.events);
    let e = columns
        .find(name)
        .map_err(|e| anyhow!("{}: {}", file.display(), tally_analysis::Error::from(e)))?;
    if columns.is_ratio(e) {
        crate::usage_bail!("--event {name}: a ratio cannot be a width; choose a count");
    }
    Ok(columns
        .column(e)
        .cloned()
        .expect("a found event has a column"))
}
