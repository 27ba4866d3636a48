//! `tally annotate --call-tree`: a call tree, top-down or inverted, as
//! text (indented, heaviest child first) and as JSON (the rows in the same
//! order, each with its depth).

use std::io::{self, Write};
use std::path::PathBuf;

use serde_json::{Value, json};
use tally_analysis::calltree::{TreeKind, TreeRow};
use tally_analysis::transform::Transform;
use tally_model::Profile;

use crate::format::{pad_left, percent, thousands};

/// What the writers lay out.
pub struct View<'a> {
    /// The profile the rows' functions belong to.
    pub profile: &'a Profile<u64>,
    /// Which tree.
    pub kind: TreeKind,
    /// The event rows were ordered and cut by.
    pub event: usize,
    /// The root's total, per event.
    pub totals: &'a [u64],
    /// The rows, depth first.
    pub rows: &'a [TreeRow],
    /// The transforms applied before.
    pub transforms: &'a [Transform],
    /// Whether the stacks are estimated from call arcs.
    pub estimated: bool,
    /// The input files.
    pub files: &'a [PathBuf],
}

impl View<'_> {
    fn kind_name(&self) -> &'static str {
        match self.kind {
            TreeKind::TopDown => "top-down",
            TreeKind::Inverted => "inverted",
        }
    }

    fn stacks(&self) -> &'static str {
        if self.estimated {
            "estimated from call arcs"
        } else {
            "recorded"
        }
    }

    fn label(&self, row: &TreeRow) -> (String, String, String) {
        let n = &self.profile.names;
        let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (
            s(n.function_name(row.function)),
            s(n.function_file(row.function)),
            s(n.function_object(row.function)),
        )
    }
}

/// The tree as text: a header, then one line per row with the total and
/// self cost of the event and the function indented by its depth.
pub fn write_text(v: &View<'_>, out: &mut dyn Write) -> io::Result<()> {
    let event = v
        .profile
        .events
        .recorded()
        .get(v.event)
        .map_or("", |e| e.name.as_str());
    let total = v.totals.get(v.event).copied().unwrap_or(0);
    let rule = "-".repeat(80);
    writeln!(out, "{rule}")?;
    let files: Vec<String> = v.files.iter().map(|f| f.display().to_string()).collect();
    writeln!(out, "Profile data:     {}", files.join(" "))?;
    writeln!(out, "Call tree:        {}", v.kind_name())?;
    writeln!(out, "Stacks:           {}", v.stacks())?;
    if !v.transforms.is_empty() {
        let t: Vec<String> = v.transforms.iter().map(ToString::to_string).collect();
        writeln!(out, "Transforms:       {}", t.join(" "))?;
    }
    writeln!(out, "Event:            {event}")?;
    writeln!(out, "Total:            {}", thousands(i128::from(total)))?;
    writeln!(out, "{rule}")?;
    let cell = |c: u64| {
        format!(
            "{}{}",
            thousands(i128::from(c)),
            percent(i128::from(c), i128::from(total))
        )
    };
    let w = v
        .rows
        .iter()
        .map(|r| cell(r.total[v.event]).len())
        .chain([cell(total).len(), event.len() + 6])
        .max()
        .unwrap_or(0);
    writeln!(
        out,
        "{}  {}  function",
        pad_left(&format!("{event} total"), w),
        pad_left(&format!("{event} self"), w)
    )?;
    writeln!(out, "{rule}")?;
    for r in v.rows {
        let (name, file, object) = v.label(r);
        let mut line = format!(
            "{}  {}  {}{file}:{name}",
            pad_left(&cell(r.total[v.event]), w),
            pad_left(&cell(r.self_cost[v.event]), w),
            "  ".repeat(r.depth as usize)
        );
        if !object.is_empty() {
            line.push_str(&format!(" [{object}]"));
        }
        if r.hidden_children > 0 {
            line.push_str(&format!(" (+{} below)", r.hidden_children));
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// The tree as JSON: the header's facts and `nodes`, depth first, each
/// with its depth, names and the costs of every event.
pub fn write_json(v: &View<'_>, out: &mut dyn Write) -> io::Result<()> {
    let events: Vec<&str> = v
        .profile
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    let nodes: Vec<Value> = v
        .rows
        .iter()
        .map(|r| {
            let (name, file, object) = v.label(r);
            json!({
                "depth": r.depth,
                "function": name,
                "file": file,
                "object": object,
                "total": r.total,
                "self": r.self_cost,
                "hidden_children": r.hidden_children,
            })
        })
        .collect();
    let doc = json!({
        "files": v.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "call_tree": v.kind_name(),
        "stacks": v.stacks(),
        "transforms": v.transforms.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "events": events,
        "event": events.get(v.event),
        "totals": v.totals,
        "nodes": nodes,
    });
    serde_json::to_writer_pretty(&mut *out, &doc).map_err(io::Error::other)?;
    writeln!(out)
}
