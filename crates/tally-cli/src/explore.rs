//! The transforms every command that reads stacks takes (`--focus`,
//! `--hide`, …), the same flags with the same meaning everywhere, and
//! `tally annotate --call-tree`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use tally_analysis::calltree::{CallTree, ListOptions, TreeKind};
use tally_analysis::transform::{Kind, Transform, tree_of_stacks};
use tally_input::{Source, StackSource, WithStacks};

use crate::Outcome;

/// Transforms of the stacks, applied after loading and before anything
/// else (in the order listed in docs/explore.md, whatever the order on the
/// command line). Patterns are regular expressions matched, as pprof
/// matches them, against a function's name, file and object.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct TransformArgs {
    /// Keep only the stacks through a matching function (pprof's -focus).
    #[arg(long, value_name = "RE")]
    focus: Vec<String>,
    /// Drop the stacks through a matching function (pprof's -ignore).
    #[arg(long, value_name = "RE")]
    ignore: Vec<String>,
    /// Take matching functions out of the stacks, their cost going to
    /// their callers (pprof's -hide).
    #[arg(long, value_name = "RE")]
    hide: Vec<String>,
    /// Keep only matching functions in the stacks (pprof's -show).
    #[arg(long = "show-frames", value_name = "RE")]
    show_frames: Vec<String>,
    /// Root every stack at its first matching function; drop the others.
    #[arg(long, value_name = "RE")]
    focus_subtree: Vec<String>,
    /// Fold recursion, direct or through other functions, into one frame
    /// (of the matching functions; of every function without a pattern).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "", value_name = "RE")]
    collapse_recursion: Option<String>,
    /// Make each run of frames in a matching object (library) one frame
    /// named after it.
    #[arg(long, value_name = "RE")]
    collapse_object: Vec<String>,
}

impl TransformArgs {
    /// Whether no transform is asked for.
    pub fn is_empty(&self) -> bool {
        self.focus.is_empty()
            && self.ignore.is_empty()
            && self.hide.is_empty()
            && self.show_frames.is_empty()
            && self.focus_subtree.is_empty()
            && self.collapse_recursion.is_none()
            && self.collapse_object.is_empty()
    }

    /// The transforms, in the order they apply.
    pub fn list(&self) -> anyhow::Result<Vec<Transform>> {
        let mut out = Vec::new();
        for kind in Kind::ALL {
            let patterns: &[String] = match kind {
                Kind::Focus => &self.focus,
                Kind::Ignore => &self.ignore,
                Kind::Hide => &self.hide,
                Kind::Show => &self.show_frames,
                Kind::FocusSubtree => &self.focus_subtree,
                Kind::CollapseObject => &self.collapse_object,
                Kind::CollapseRecursion => self.collapse_recursion.as_slice(),
                // A time range is chosen in the web UI's timeline.
                Kind::Range => &[],
            };
            for p in patterns {
                match Transform::new(kind, p) {
                    Ok(t) => out.push(t),
                    Err(e) => crate::usage_bail!("--{}: {e}", kind.key()),
                }
            }
        }
        Ok(out)
    }
}

/// Loads `sources` with their stacks and applies the transforms: the one
/// way every command that takes transforms reads its input.
pub fn load(
    command: &str,
    sources: &[Source],
    binary: Option<&Path>,
    min_share: f64,
    list: &[Transform],
) -> anyhow::Result<WithStacks> {
    let d = tally_input::load_with_stacks(sources, binary, min_share)?;
    for n in &d.notices {
        eprintln!("tally {command}: warning: {n}");
    }
    for w in &d.warnings {
        eprintln!("{w}");
    }
    let d = d.transformed(list)?;
    if !list.is_empty() && d.profile.parts.iter().all(|p| p.lines.is_empty()) {
        eprintln!(
            "tally {command}: warning: no stack is left after {}",
            describe(list)
        );
    }
    Ok(d)
}

/// The transforms as `key=value` pairs, as JSON and the web UI's address
/// write them.
pub fn describe(list: &[Transform]) -> String {
    list.iter()
        .map(|t| format!("--{}={}", t.kind().key(), t.pattern()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `--call-tree`: which tree.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CallTreeArg {
    /// From the roots down.
    TopDown,
    /// From the functions with self cost up through their callers.
    Inverted,
}

/// `annotate --call-tree` and how much of the tree it lists.
#[derive(clap::Args, Clone, Debug)]
pub struct CallTreeArgs {
    /// Print a call tree instead of the tables: `top-down` (from the
    /// roots; the default) or `inverted` (functions by self cost, expanded
    /// into their callers).
    #[arg(long, value_enum, num_args = 0..=1, require_equals = true, default_missing_value = "top-down", value_name = "KIND")]
    pub call_tree: Option<CallTreeArg>,
    /// Levels of the call tree to print.
    #[arg(long, default_value_t = 12, requires = "call_tree", value_name = "N")]
    depth: u32,
    /// Leave out call-tree nodes below this percentage of the total.
    #[arg(long, default_value = "0.5", requires = "call_tree", value_name = "PERCENT", value_parser = crate::values::percent_0_100)]
    min_share: f64,
    /// The event the call tree is ordered and cut by (default: the first).
    #[arg(long = "tree-event", requires = "call_tree", value_name = "EVENT")]
    tree_event: Option<String>,
}

/// Prints the call tree of `files` after the transforms, as text or JSON.
pub fn call_tree(
    files: &[PathBuf],
    list: &[Transform],
    o: &CallTreeArgs,
    json: bool,
) -> anyhow::Result<Outcome> {
    let d = load("annotate", &tally_input::open_all(files)?, None, 0.0, list)?;
    let p = &d.profile;
    let events = p.events.len();
    let tree = match &d.stacks {
        StackSource::Recorded(s) => tree_of_stacks(s, events, p.names.function_count())?,
        StackSource::Estimated(t) => t.clone(),
    };
    let top = CallTree::new(tree);
    let names: Vec<&str> = p
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let event = match o.tree_event.as_deref() {
        None => 0,
        Some(e) => names.iter().position(|&n| n == e).with_context(|| {
            format!(
                "{}: no recorded event `{e}` (it has: {})",
                files[0].display(),
                names.join(" ")
            )
        })?,
    };
    let kind = match o.call_tree {
        Some(CallTreeArg::Inverted) => TreeKind::Inverted,
        _ => TreeKind::TopDown,
    };
    let rows = tally_analysis::calltree::list(
        &top,
        kind,
        ListOptions {
            event,
            depth: o.depth,
            min_share: o.min_share / 100.0,
        },
    );
    let view = tally_report::calltree::View {
        profile: p,
        kind,
        event,
        totals: top.total(0),
        rows: &rows,
        transforms: list,
        estimated: d.estimated(),
        files,
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if json {
        tally_report::calltree::write_json(&view, &mut out)?;
    } else {
        tally_report::calltree::write_text(&view, &mut out)?;
    }
    out.flush()?;
    Ok(Outcome::Ok)
}
