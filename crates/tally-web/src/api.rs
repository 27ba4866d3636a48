//! The JSON API the page calls: one function from a path and its query to
//! a reply, shared by the server and the HTML report (which embeds the
//! replies it needs). No path of a profile or source file comes from a
//! request: files are the ones given on the command line, and sources are
//! found by the same search as `tally annotate`.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Value, json};
use tally_report::annotate::{self, Grouping, Threshold};
use tally_report::flame::{FlameOptions, Tree, write_svg};
use tally_report::graph::{self, Graph, Prune};

use crate::Error;
use crate::session::Session;
use crate::view::{Row, View};

/// A reply: its content type and body.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `application/json`, `image/svg+xml` or `text/plain`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    fn json(v: &Value) -> Reply {
        Reply {
            content_type: "application/json",
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }
}

/// The query of a request.
pub type Query = HashMap<String, String>;

fn get<'q>(q: &'q Query, k: &str) -> Option<&'q str> {
    q.get(k).map(String::as_str).filter(|s| !s.is_empty())
}

fn number(q: &Query, k: &str) -> Result<Option<usize>, Error> {
    get(q, k)
        .map(|s| {
            s.parse()
                .map_err(|_| Error::BadRequest(format!("{k}: `{s}` is not a number")))
        })
        .transpose()
}

/// Answers `GET /api/<path>?<query>`.
pub fn handle(s: &Session, path: &str, q: &Query) -> Result<Reply, Error> {
    match path {
        "meta" => Ok(Reply::json(&meta(s))),
        "functions" => functions(s, q).map(|v| Reply::json(&v)),
        "function" => function(s, q).map(|v| Reply::json(&v)),
        "graph" => graph_svg(s, q),
        "flame" => flame_svg(s, q),
        "source" => annotated(s, q, false),
        "asm" => annotated(s, q, true),
        _ => Err(Error::NotFound(format!("no API `{path}`"))),
    }
}

fn view_of(s: &Session, q: &Query, input: usize) -> Result<std::sync::Arc<View>, Error> {
    s.view(input, get(q, "event"), number(q, "part")?)
}

/// The inputs, events and parts.
pub fn meta(s: &Session) -> Value {
    let inputs: Vec<Value> = s
        .inputs
        .iter()
        .map(|i| {
            let parts: Vec<Value> = i
                .profile
                .parts
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let mut label = format!("part {}", p.info.number.unwrap_or(k as u64 + 1));
                    if let Some(t) = p.info.thread {
                        label.push_str(&format!(", thread {t}"));
                    }
                    if let Some(pid) = p.info.pid {
                        label.push_str(&format!(", pid {pid}"));
                    }
                    json!({"index": k, "label": label})
                })
                .collect();
            json!({
                "name": i.name,
                "gmon": i.gmon.is_some(),
                "estimated": i.estimated,
                "parts": parts,
                "warnings": i.warnings,
            })
        })
        .collect();
    json!({
        "inputs": inputs,
        "events": s.events(s.main()),
        "diff": s.diff,
    })
}

/// A table row as JSON.
fn row_json(r: &Row, total: f64) -> Value {
    json!({
        "node": r.node,
        "name": r.name,
        "file": r.file,
        "object": r.object,
        "self": r.self_cost,
        "self_percent": if total != 0.0 { 100.0 * r.self_cost / total } else { 0.0 },
        "inclusive": r.inclusive,
        "inclusive_percent": r.inclusive.map(|v| if total != 0.0 { 100.0 * v / total } else { 0.0 }),
        "calls": r.calls,
        "cycle": r.cycle,
        "is_cycle": r.is_cycle,
        "events": r.events,
    })
}

/// Rows of a table, grouped or not, before filtering and sorting.
struct TableRow {
    json: Value,
    name: String,
    file: String,
}

/// The functions table: `event`, `part`, `group` (`function`, `file`,
/// `object`), `filter` (a regex on name or file), `sort` (`name`, `self`,
/// `inclusive`, `calls`, `event:K`, `delta`), `desc` (0 or 1), `offset`,
/// `limit`. Only the page asked for is sent.
pub fn functions(s: &Session, q: &Query) -> Result<Value, Error> {
    let v = view_of(s, q, s.main())?;
    let total = v.total();
    let group = get(q, "group").unwrap_or("function");
    let mut rows: Vec<TableRow> = match group {
        "function" => v
            .rows
            .iter()
            .map(|r| TableRow {
                json: row_json(r, total),
                name: r.name.clone(),
                file: r.file.clone(),
            })
            .collect(),
        "file" | "object" => {
            let mut by: Vec<(String, Row)> = Vec::new();
            let mut at: HashMap<String, usize> = HashMap::new();
            for r in v.rows.iter().filter(|r| !r.is_cycle) {
                let key = if group == "file" {
                    r.file.clone()
                } else {
                    r.object.clone()
                };
                let k = *at.entry(key.clone()).or_insert_with(|| {
                    by.push((
                        key.clone(),
                        Row {
                            node: usize::MAX,
                            name: if key.is_empty() { "???".into() } else { key },
                            file: String::new(),
                            object: String::new(),
                            self_cost: 0.0,
                            inclusive: None,
                            calls: 0,
                            cycle: None,
                            is_cycle: false,
                            events: vec![0.0; r.events.len()],
                        },
                    ));
                    by.len() - 1
                });
                let g = &mut by[k].1;
                g.self_cost += r.self_cost;
                g.calls += r.calls;
                for (a, b) in g.events.iter_mut().zip(&r.events) {
                    *a += b;
                }
            }
            by.into_iter()
                .map(|(key, r)| {
                    let mut j = row_json(&r, total);
                    j["node"] = Value::Null;
                    TableRow {
                        json: j,
                        name: key.clone(),
                        file: key,
                    }
                })
                .collect()
        }
        g => return Err(Error::BadRequest(format!("group: no grouping `{g}`"))),
    };
    if s.diff {
        let base = view_of(s, q, 0)?;
        add_base(&mut rows, &base, group);
    }
    if let Some(f) = get(q, "filter") {
        let re = Regex::new(f).map_err(|e| Error::BadRequest(format!("filter: {e}")))?;
        rows.retain(|r| re.is_match(&r.name) || re.is_match(&r.file));
    }
    let sort = get(q, "sort").unwrap_or(if s.diff { "delta" } else { "self" });
    let desc = get(q, "desc").map_or(sort != "name", |d| d == "1");
    let key = |r: &TableRow| -> f64 {
        let j = &r.json;
        match sort {
            "self" => j["self"].as_f64().unwrap_or(0.0),
            "inclusive" => j["inclusive"].as_f64().unwrap_or(f64::NEG_INFINITY),
            "calls" => j["calls"].as_f64().unwrap_or(0.0),
            "delta" => j["delta_self"].as_f64().unwrap_or(0.0).abs(),
            "delta_inclusive" => j["delta_inclusive"].as_f64().unwrap_or(0.0).abs(),
            k => k
                .strip_prefix("event:")
                .and_then(|k| k.parse::<usize>().ok())
                .and_then(|k| j["events"].get(k))
                .and_then(Value::as_f64)
                .unwrap_or(0.0),
        }
    };
    if sort == "name" {
        rows.sort_by(|a, b| a.name.cmp(&b.name));
    } else if sort == "file" {
        rows.sort_by(|a, b| a.file.cmp(&b.file).then(a.name.cmp(&b.name)));
    } else {
        rows.sort_by(|a, b| {
            key(a)
                .partial_cmp(&key(b))
                .unwrap_or(std::cmp::Ordering::Equal)
                .then_with(|| b.name.cmp(&a.name))
        });
    }
    if desc {
        rows.reverse();
    }
    let offset = number(q, "offset")?.unwrap_or(0);
    let limit = number(q, "limit")?.unwrap_or(200).min(5000);
    let count = rows.len();
    let page: Vec<Value> = rows
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|r| r.json)
        .collect();
    Ok(json!({
        "event": v.event,
        "events": v.events,
        "unit": v.unit,
        "total": total,
        "count": count,
        "offset": offset,
        "rows": page,
        "diff": s.diff,
    }))
}

/// Adds A's costs and B − A to rows of B, matched by name (and, for
/// functions, object).
fn add_base(rows: &mut [TableRow], base: &View, group: &str) {
    let mut a: HashMap<(String, String), (f64, Option<f64>)> = HashMap::new();
    for r in base.rows.iter().filter(|r| !r.is_cycle) {
        let key = match group {
            "file" => (r.file.clone(), String::new()),
            "object" => (r.object.clone(), String::new()),
            _ => (r.name.clone(), r.object.clone()),
        };
        let e = a.entry(key).or_insert((0.0, Some(0.0)));
        e.0 += r.self_cost;
        e.1 = match (e.1, r.inclusive) {
            (Some(x), Some(y)) if group == "function" => Some(x + y),
            _ => None,
        };
    }
    for r in rows.iter_mut() {
        let key = match group {
            "function" => (
                r.name.clone(),
                r.json["object"].as_str().unwrap_or("").to_owned(),
            ),
            _ => (r.name.clone(), String::new()),
        };
        let (s, i) = a.get(&key).copied().unwrap_or((0.0, Some(0.0)));
        let bs = r.json["self"].as_f64().unwrap_or(0.0);
        r.json["base_self"] = json!(s);
        r.json["delta_self"] = json!(bs - s);
        if let (Some(bi), Some(ai)) = (r.json["inclusive"].as_f64(), i) {
            r.json["base_inclusive"] = json!(ai);
            r.json["delta_inclusive"] = json!(bi - ai);
        }
    }
}

/// The selected function: its row and gprof's entry (`node`).
pub fn function(s: &Session, q: &Query) -> Result<Value, Error> {
    let v = view_of(s, q, s.main())?;
    let node = number(q, "node")?.ok_or_else(|| Error::BadRequest("node: missing".into()))?;
    let Some(row) = v.rows.iter().find(|r| r.node == node) else {
        return Err(Error::NotFound(format!("no function {node}")));
    };
    let mut b = v.butterfly(node);
    b["row"] = row_json(row, v.total());
    if row.is_cycle
        && let Some(c) = row.cycle
    {
        b["member_nodes"] = json!(v.members(c));
    }
    Ok(b)
}

fn svg(body: Vec<u8>) -> Reply {
    Reply {
        content_type: "image/svg+xml",
        body,
    }
}

/// The call graph around `node` (`tally graph --focus`), as SVG: nodes
/// are `f<node>` (their `<title>`), which the page makes clickable.
pub fn graph_svg(s: &Session, q: &Query) -> Result<Reply, Error> {
    let v = view_of(s, q, s.main())?;
    let g = Graph::from_report(&v.report);
    let mut prune = Prune::default();
    if let Some(node) = number(q, "node")? {
        let name = g
            .nodes
            .get(node)
            .map(|n| n.name.clone())
            .ok_or_else(|| Error::NotFound(format!("no function {node}")))?;
        prune.focus = vec![escape_glob(&name)];
        prune.node_thres = 0.0;
        prune.edge_thres = 0.0;
    }
    let kept = match graph::prune(&g, &prune) {
        Ok(k) => k,
        Err(e) => return Err(Error::NotFound(e.to_string())),
    };
    let mut dot = Vec::new();
    graph::dot::write(&g, &kept, &mut dot).map_err(|e| Error::Input(e.to_string()))?;
    let (out, _) = graph::svg::render(&dot).map_err(|e| Error::Input(e.to_string()))?;
    Ok(svg(out))
}

/// A name as a glob that matches only itself: each special character in
/// a set of its own (the matcher has no escape character).
fn escape_glob(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '*' | '?' | '[' => {
                out.push('[');
                out.push(c);
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

/// The flame graph (`tally flame`) in `event`; differential (B against
/// A) when comparing.
pub fn flame_svg(s: &Session, q: &Query) -> Result<Reply, Error> {
    let events = s.events(s.main());
    let name = get(q, "event")
        .map(str::to_owned)
        .or_else(|| events.first().cloned())
        .ok_or_else(|| Error::Input("no event".into()))?;
    let mut tree = Tree::new();
    for (i, inp) in s.inputs.iter().enumerate().rev() {
        let columns = tally_model::EventColumns::new(&inp.profile.events);
        // A gmon input's one event is the histogram's dimension on the
        // page ("time") and the converted profile's own name in the model.
        let own = match &inp.gmon {
            Some(_) => inp
                .profile
                .events
                .recorded()
                .first()
                .map(|e| e.name.clone())
                .unwrap_or_default(),
            None => name.clone(),
        };
        let e = columns
            .find(&own)
            .map_err(|e| Error::NotFound(e.to_string()))?;
        if columns.is_ratio(e) {
            return Err(Error::BadRequest(format!(
                "event {name}: a ratio cannot be a width; choose a count"
            )));
        }
        let Some(ev) = columns.column(e).cloned() else {
            return Err(Error::NotFound(format!("no event {name}")));
        };
        tree.add_stacks(
            &inp.profile,
            &inp.stacks,
            &ev,
            inp.estimated,
            s.diff && i == 0,
        );
    }
    tree.finish();
    let estimated = s.inputs.iter().any(|i| i.estimated);
    let mut title = if s.diff {
        "Differential Flame Graph".to_string()
    } else {
        "Flame Graph".to_string()
    };
    if estimated {
        title.push_str(" (stacks estimated from call arcs)");
    }
    let mut legend = Vec::new();
    if s.diff {
        legend.push("Shape of B; red: self cost grew against A, blue: shrank".to_string());
    }
    let opts = FlameOptions {
        title,
        subtitle: Some(format!("{name}: {}", s.inputs[s.main()].name)),
        legend: (!legend.is_empty()).then(|| legend.join(". ")),
        event: name,
        width: 1200,
        min_width: 0.1,
        icicle: false,
    };
    let mut out = Vec::new();
    write_svg(&tree, &opts, &mut out).map_err(|e| Error::Input(e.to_string()))?;
    Ok(svg(out))
}

/// Annotated source (`tally annotate` of the function's file) or
/// assembly (`tally annotate --asm`) as text.
pub fn annotated(s: &Session, q: &Query, asm: bool) -> Result<Reply, Error> {
    let inp = &s.inputs[s.main()];
    let v = view_of(s, q, s.main())?;
    let node = number(q, "node")?;
    let row = node.and_then(|n| v.rows.iter().find(|r| r.node == n));
    let event = if inp.gmon.is_some() {
        None
    } else {
        Some(v.event.clone())
    };
    let mut opts = annotate::Options {
        inputs: inp.files.clone(),
        show: event.iter().cloned().collect(),
        sort: event.iter().map(|e| (e.clone(), None)).collect(),
        threshold: Threshold::Default,
        grouping: Grouping::Function,
        auto: !asm,
        asm,
        show_percs: true,
        ..Default::default()
    };
    if !asm && let Some(r) = row.filter(|r| !r.file.is_empty()) {
        opts.auto = false;
        opts.files = vec![r.file.clone().into()];
    }
    if let Some(p) = number(q, "part")? {
        opts.parts = annotate::PartFilter::Parts(vec![p as u64 + 1]);
    }
    let mut out = Vec::new();
    let warnings = annotate::annotate(&inp.profile, &opts, &mut out)?;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    for w in warnings {
        text.push_str(&format!("\nwarning: {w}"));
    }
    Ok(Reply {
        content_type: "text/plain; charset=utf-8",
        body: text.into_bytes(),
    })
}
