//! `tally report --html`: the page in one file, the API's replies it needs
//! embedded, for a CI artefact or an e-mail. Rows are trimmed by a
//! threshold (a share of the total, self or inclusive) so a large profile
//! gives a small file; the call graph and flame graph are embedded once
//! (the flame graph in the first event, frames narrower than the
//! threshold left out), each embedded function with at most [`ARCS`]
//! callers and callees and its own source lines (not whole files), the
//! assembly as `tally annotate --asm` gives it (small programs only).
//! Sources come only from the session's source directories: the report is
//! made to be published, and a profile may name any file.
//!
//! The call trees of the first event are embedded a few levels deep
//! ([`TREE_DEPTH`]), only under nodes at or above the threshold; the
//! transforms the profile went through are named for the page's
//! breadcrumb. With `--diff`, the comparison's four lists (by self and
//! by inclusive cost, every change at or above the threshold, the page
//! applying the noise threshold), its trees and its differential flame
//! graph are embedded instead of a single profile's.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::api::{self, Query};
use crate::session::{Session, code};
use crate::view::Grouping;
use crate::{Error, compare, explore, page};

/// The most functions a profile may have for the report to embed its
/// assembly view.
const ASM_FUNCTIONS: usize = 5000;

/// What the report holds.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Keep functions whose self or inclusive cost is at least this share
    /// (a fraction) of the total, in some event.
    pub threshold: f64,
    /// The transforms the session's profile went through, in order, as
    /// `(key, pattern)`: the page shows them as its breadcrumb.
    pub transforms: Vec<(String, String)>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            threshold: 0.001,
            transforms: Vec::new(),
        }
    }
}

/// Levels of each call tree embedded (the roots' level the first).
pub const TREE_DEPTH: usize = 10;

/// The most tree levels (one per expanded node) embedded per tree.
const TREE_LEVELS: usize = 400;

/// The most entries of each of the comparison's lists embedded.
const COMPARE_TOP: usize = 1000;

fn query(pairs: &[(&str, String)]) -> Query {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn text(r: api::Reply) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

/// The most callers, callees or cycle members a function's entry keeps
/// (the heaviest, in gprof's order); the page says how many were left out.
pub const ARCS: usize = 12;

/// The embedded data: `meta`, and per event its `rows` and the selected
/// function's entries (`functions`, at most [`ARCS`] callers and callees
/// each), plus `flame`, `graph`, each function's source window
/// (`sources`) and `asm`. Only functions at or above the threshold are
/// embedded; how many were left out, and how, is embedded for the page to
/// say, and so are the source files left out (`sources_left_out`).
pub fn data(s: &Session, opts: &ReportOptions) -> Result<Value, Error> {
    let events = s.events(s.main());
    let mut views = Map::new();
    let mut nodes = std::collections::BTreeSet::new();
    let mut arcs_left_out = 0usize;
    for e in &events {
        let q = query(&[("event", e.clone()), ("limit", "0".into())]);
        // The view first: the table's head is then gprof's, not the
        // provisional one of the sums.
        let view = s.view(s.main(), Some(e), None)?;
        let head = api::functions(s, &q)?;
        let total = view.total();
        let table = s.table(Some(e), None, Grouping::Function)?;
        let share = |v: f64| {
            if total == 0.0 {
                1.0
            } else {
                v.abs() / total.abs()
            }
        };
        let kept: Vec<usize> = (0..table.rows.len())
            .filter(|&i| {
                let r = &table.rows[i];
                let delta = table
                    .base
                    .as_ref()
                    .map_or(0.0, |b| r.self_cost - b[i].self_cost);
                // A cycle member's inclusive cost is derived and near the
                // cycle's for many members: it keeps only members with
                // some cost of their own, so the report stays small.
                let member = r.cycle.is_some() && !r.is_cycle;
                let own = !member || share(r.self_cost) >= opts.threshold / 10.0;
                share(r.self_cost) >= opts.threshold
                    || (own && r.inclusive.is_some_and(|v| share(v) >= opts.threshold))
                    || share(delta) >= opts.threshold
            })
            .collect();
        let mut rows = Vec::with_capacity(kept.len());
        let mut functions = Map::new();
        // Nodes (a cycle's above all) belong to one event's view.
        let mut names = Map::new();
        for &i in &kept {
            rows.push(api::row_json(
                &table.rows[i],
                table.base.as_ref().map(|b| &b[i]),
                total,
            ));
            let n = table.rows[i].node;
            nodes.insert(n);
            let mut f = api::function(s, &query(&[("event", e.clone()), ("node", n.to_string())]))?;
            arcs_left_out += trim_arcs(&mut f);
            share_names(&mut f, &mut names);
            functions.insert(n.to_string(), f);
        }
        views.insert(
            e.clone(),
            json!({
                "head": head,
                "rows": rows,
                "functions": functions,
                "names": names,
                "left_out": table.rows.len() - kept.len(),
            }),
        );
    }
    let first = query(&[("event", events.first().cloned().unwrap_or_default())]);
    // Frames narrower than the threshold's share of the width are left out.
    let min_width = (opts.threshold * f64::from(api::FLAME_WIDTH)).max(0.1);
    let flame = api::flame_svg_with(s, &first, min_width).map(text).ok();
    let trees = json!({
        "event": first.get("event"),
        "tree": tree(s, &first, "tree", opts.threshold),
        "inverted": tree(s, &first, "inverted", opts.threshold),
    });
    let comparison = if s.diff {
        let mut by = Map::new();
        for m in ["self", "inclusive"] {
            let mut q = first.clone();
            q.insert("by".into(), m.into());
            q.insert("noise".into(), "0".into());
            q.insert("top".into(), COMPARE_TOP.to_string());
            let mut lists = compare::compare(s, &q)?;
            // Changes under the threshold are left out, as rows are.
            let floor = opts.threshold * lists["totals"]["a"].as_f64().unwrap_or(0.0).abs();
            for list in ["regressed", "improved", "only_in_b", "only_in_a"] {
                if let Some(e) = lists[list]["entries"].as_array_mut() {
                    e.retain(|e| e[m]["delta"].as_f64().is_some_and(|d| d.abs() >= floor));
                }
            }
            lists["floor_percent"] = json!(opts.threshold * 100.0);
            by.insert(m.into(), lists);
        }
        Value::Object(by)
    } else {
        Value::Null
    };
    let graph = api::graph_svg(s, &first).map(text).ok();
    let (sources, sources_left_out) = sources(s, &first, &nodes);
    // The assembly view disassembles every object above the threshold:
    // for a large program (cc1: minutes, megabytes) it is left out.
    let functions = s.table(None, None, Grouping::Function)?.rows.len();
    let asm = if functions <= ASM_FUNCTIONS {
        Some(assembly(s, &first, &nodes)?)
    } else {
        None
    };
    Ok(json!({
        "meta": api::meta(s),
        "threshold": opts.threshold,
        "trimmed": {
            "arcs": ARCS,
            "arcs_left_out": arcs_left_out,
            "flame_min_width": min_width,
            "asm": asm.is_none(),
        },
        "views": views,
        "transforms": opts.transforms,
        "trees": trees,
        "compare": comparison,
        "flame": flame,
        "graph": graph,
        "sources": sources,
        "sources_left_out": sources_left_out,
        "asm": asm,
    }))
}

/// The levels of a call tree (`kind`: `tree` or `inverted`) the page
/// opens first, by where they hang (a node's number, or the inverted
/// tree's path of function ids; the roots' level under `0` and `""`):
/// [`TREE_DEPTH`] levels, each holding and opening the nodes whose total,
/// or with `--diff` whose change, is at least `threshold` of the total
/// (how many were left out in `left_out`). A tree that
/// cannot be made (no stacks) is `null`, the page says why.
fn tree(s: &Session, first: &Query, kind: &str, threshold: f64) -> Value {
    // The comparison's stacks are merged once for every level.
    let merged = if s.diff {
        match compare::diff_tree(s, first) {
            Ok(m) => Some(m),
            Err(_) => return Value::Null,
        }
    } else {
        None
    };
    let level = |at: &str| -> Result<Value, Error> {
        let mut q = first.clone();
        q.insert(
            (if kind == "tree" { "node" } else { "path" }).into(),
            at.into(),
        );
        if let Some((event, t)) = &merged {
            compare::level_of(s, event, t, &q, kind)
        } else if kind == "tree" {
            explore::top_down(s, &q)
        } else {
            explore::inverted(s, &q)
        }
    };
    let root = if kind == "tree" { "0" } else { "" };
    let mut out = Map::new();
    let mut work = std::collections::VecDeque::from([(root.to_owned(), 0usize)]);
    while let Some((at, depth)) = work.pop_front() {
        if out.len() >= TREE_LEVELS {
            break;
        }
        let Ok(mut v) = level(&at) else {
            if out.is_empty() {
                return Value::Null;
            }
            continue;
        };
        let grand = v["grand_total"].as_f64().unwrap_or(0.0).max(1.0);
        let big = |c: &Value| {
            ["total", "a", "b"]
                .iter()
                .filter_map(|k| c[k].as_f64())
                .chain(c["delta"].as_f64().map(f64::abs))
                .fold(0.0, f64::max)
        };
        // Children under the threshold are left out, and counted.
        if let Some(children) = v["children"].as_array_mut() {
            let before = children.len();
            children.retain(|c| big(c) / grand >= threshold);
            v["left_out"] = json!(before - children.len());
        }
        if depth + 1 < TREE_DEPTH {
            for c in v["children"].as_array().into_iter().flatten() {
                if c["more"] != Value::Bool(true) {
                    continue;
                }
                let next = if kind == "tree" {
                    c["node"].to_string()
                } else if at.is_empty() {
                    c["id"].to_string()
                } else {
                    format!("{at},{}", c["id"])
                };
                work.push_back((next, depth + 1));
            }
        }
        out.insert(at, v);
    }
    Value::Object(out)
}

/// Keeps the [`ARCS`] heaviest callers, callees and members of an entry
/// (in their order), noting how many went in `<key>_left_out`; returns
/// how many went.
fn trim_arcs(f: &mut Value) -> usize {
    let mut gone = 0;
    for key in ["parents", "children", "members"] {
        let Some(Value::Array(arcs)) = f.get_mut(key) else {
            continue;
        };
        if arcs.len() <= ARCS {
            continue;
        }
        let cost = |v: &Value| {
            v["delta"].as_f64().map(f64::abs).unwrap_or_else(|| {
                v["measured"].as_f64().unwrap_or_else(|| {
                    v["self"].as_f64().unwrap_or(0.0) + v["descendants"].as_f64().unwrap_or(0.0)
                })
            })
        };
        let mut by: Vec<usize> = (0..arcs.len()).collect();
        by.sort_by(|&a, &b| cost(&arcs[b]).total_cmp(&cost(&arcs[a])));
        let mut keep = vec![false; arcs.len()];
        for &k in &by[..ARCS] {
            keep[k] = true;
        }
        let n = arcs.len() - ARCS;
        let mut k = 0;
        arcs.retain(|_| {
            k += 1;
            keep[k - 1]
        });
        f[format!("{key}_left_out")] = json!(n);
        gone += n;
    }
    gone
}

/// Moves the names of an entry's arcs to `names` (by node, in the view's
/// `names`), where the
/// page finds them: the same long names recur in many entries. The
/// entry's own row goes too: the table's rows hold it already.
fn share_names(f: &mut Value, names: &mut Map<String, Value>) {
    if let Some(o) = f.as_object_mut() {
        o.remove("row");
    }
    for key in ["parents", "children", "members"] {
        let Some(Value::Array(arcs)) = f.get_mut(key) else {
            continue;
        };
        for a in arcs {
            let Some(n) = a["node"].as_u64() else {
                continue;
            };
            if let Some(o) = a.as_object_mut()
                && let Some(name) = o.remove("name")
            {
                names.insert(n.to_string(), name);
            }
        }
    }
}

/// Each function's source table (its window, as the server shows it):
/// functions whose file is not found have none, those whose file is
/// outside the source directories a note saying so. Returns the tables
/// and the files left out.
fn sources(
    s: &Session,
    q: &Query,
    nodes: &std::collections::BTreeSet<usize>,
) -> (Map<String, Value>, Vec<String>) {
    let mut out = Map::new();
    let mut left_out = std::collections::BTreeSet::new();
    for &n in nodes {
        let mut q = q.clone();
        q.insert("node".into(), n.to_string());
        let Ok(mut t) = api::code_table(s, &q, false) else {
            continue;
        };
        if t["left_out"] == Value::Bool(true) {
            let file = t["file"].as_str().unwrap_or_default().to_owned();
            t["note"] = json!(format!(
                "-- {file}: left out of this report: the file is outside the directories \
                 sources are read from (by default the profile's and the current one; \
                 `tally report --source-dir DIR` names them)"
            ));
            left_out.insert(file);
        } else if t["rows"].as_array().is_none_or(Vec::is_empty) {
            continue;
        }
        out.insert(n.to_string(), t);
    }
    (out, left_out.into_iter().collect())
}

/// Each function's assembly table, as the server shows it.
fn assembly(
    s: &Session,
    q: &Query,
    nodes: &std::collections::BTreeSet<usize>,
) -> Result<Map<String, Value>, Error> {
    let inp = &s.inputs[s.main()];
    let view = s.view(s.main(), q.get("event").map(String::as_str), None)?;
    let mut ids = Vec::new();
    let mut of = Vec::new();
    for &n in nodes {
        if let Some(row) = view.rows.iter().find(|r| r.node == n)
            && let Some(f) = api::function_of(inp, row)
        {
            ids.push(tally_model::FunctionId(f as u32));
            of.push(n);
        }
    }
    let tables = code::instructions(s, inp, &ids, None)?;
    Ok(of
        .into_iter()
        .zip(tables)
        .map(|(n, t)| (n.to_string(), t))
        .collect())
}

/// What [`write()`] wrote.
#[derive(Clone, Debug)]
pub struct Written {
    /// The file's size in bytes.
    pub bytes: u64,
    /// The source files left out, outside the source directories (as the
    /// profile names them).
    pub sources_left_out: Vec<String>,
}

/// Writes the report to `out` through tally-formats' safe output
/// (temporary file, renamed).
pub fn write(s: &Session, opts: &ReportOptions, out: &Path) -> Result<Written, Error> {
    let data = data(s, opts)?;
    let sources_left_out = data["sources_left_out"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let title = format!("tally report — {}", s.inputs[s.main()].name);
    let html = page(&title, &serde_json::to_string(&data).unwrap_or_default());
    tally_formats::write_file(out, |w| std::io::Write::write_all(w, html.as_bytes()))?;
    Ok(Written {
        bytes: html.len() as u64,
        sources_left_out,
    })
}
