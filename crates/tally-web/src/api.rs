//! The JSON API the page calls: one function from a path and its query to
//! a reply, shared by the server and the HTML report (which embeds the
//! replies it needs). No path of a profile or source file comes from a
//! request: files are the ones given on the command line, and sources are
//! found by the same search as `tally annotate`, and read only from under
//! the session's source directories ([`Session::sources`]).

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Value, json};
use tally_report::annotate::{self, Threshold};
use tally_report::flame::{FlameOptions, Tree, write_svg};
use tally_report::graph::{self, Graph, Prune};

use crate::Error;
use crate::session::{Answer, Input, Session, TableId, WholeStacks, cfg, code};
use crate::view::{Base, CallGraph, Grouping, Row, Table, View};
use tally_model::FunctionId;

/// A reply: its content type and body.
#[derive(Debug, Clone)]
pub struct Reply {
    /// `application/json`, `image/svg+xml` or `text/plain`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Reply {
    /// A JSON reply.
    pub(crate) fn json(v: &Value) -> Reply {
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
    reply_to(s, path, q).map(|(r, _)| r)
}

/// The server's answer: the reply kept for the same request if there is
/// one, else made and kept (unless it is a provisional table, which the
/// finished analysis replaces).
pub(crate) fn answer(s: &Session, path: &str, q: &Query) -> Result<Answer, Error> {
    let key = request_key(path, q);
    if let Some(a) = s.reply(&key) {
        return Ok(a);
    }
    let (reply, keep) = reply_to(s, path, q)?;
    let a = Answer {
        content_type: reply.content_type,
        body: reply.body.into(),
    };
    if keep {
        s.keep_reply(key, &a);
    }
    Ok(a)
}

/// The reply kept for the request, if any: a lookup that never waits for
/// an analysis, so the server answers it on the thread that reads
/// requests.
pub(crate) fn cached(s: &Session, path: &str, q: &Query) -> Option<Answer> {
    s.reply(&request_key(path, q))
}

/// What a reply is kept under: the path and the query's pairs but the
/// token, sorted, each part preceded by its length so that no two
/// requests share a key.
fn request_key(path: &str, q: &Query) -> String {
    let mut pairs: Vec<(&String, &String)> = q.iter().filter(|(k, _)| *k != "t").collect();
    pairs.sort();
    let mut key = format!("{}:{path}", path.len());
    for (k, v) in pairs {
        key.push_str(&format!("{}:{k}{}:{v}", k.len(), v.len()));
    }
    key
}

/// The reply, and whether it may be kept for the same request.
fn reply_to(s: &Session, path: &str, q: &Query) -> Result<(Reply, bool), Error> {
    if let Some(answer) = crate::explore::route(s, path, q, reply_to) {
        return answer;
    }
    if let Some(answer) = crate::timeline::route(s, path, q, reply_to) {
        return answer;
    }
    let reply = match path {
        "meta" => Reply::json(&meta(s)),
        "functions" => {
            let v = functions(s, q)?;
            let finished = v.get("pending").is_none();
            return Ok((Reply::json(&v), finished));
        }
        "ready" => Reply::json(&ready(s, q)?),
        "function" => Reply::json(&function(s, q)?),
        "graph" => graph_svg(s, q)?,
        "flame" => flame_svg(s, q)?,
        "source" => annotated(s, q, false)?,
        "asm" => annotated(s, q, true)?,
        "lines" => Reply::json(&code_table(s, q, false)?),
        "instructions" => Reply::json(&code_table(s, q, true)?),
        "cfg" => Reply::json(&cfg::reply(s, &code_table(s, q, true)?, get(q, "event"))?),
        "compare" => Reply::json(&crate::compare::compare(s, q)?),
        _ => return Err(Error::NotFound(format!("no API `{path}`"))),
    };
    Ok((reply, true))
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
                "calls": i.gmon.is_some() || i.profile.parts.iter().any(|p| !p.calls.is_empty()),
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

/// A table row as JSON, with A's costs and B − A when comparing.
pub fn row_json(r: &Row, base: Option<&Base>, total: f64) -> Value {
    let share = |v: f64| if total != 0.0 { 100.0 * v / total } else { 0.0 };
    let mut j = json!({
        "node": (r.node != usize::MAX).then_some(r.node),
        "name": r.name,
        "file": &*r.file,
        "object": &*r.object,
        "self": r.self_cost,
        "self_percent": share(r.self_cost),
        "inclusive": r.inclusive,
        "inclusive_percent": r.inclusive.map(share),
        "calls": r.calls,
        "cycle": r.cycle,
        "is_cycle": r.is_cycle,
        "events": r.events,
    });
    // A cycle member's inclusive cost is derived, as annotate's JSON says.
    if r.cycle.is_some() && !r.is_cycle && r.inclusive.is_some() {
        j["inclusive_derived"] = json!(true);
    }
    if let Some(b) = base {
        j["base_self"] = json!(b.self_cost);
        j["delta_self"] = json!(r.self_cost - b.self_cost);
        if let (Some(bi), Some(ai)) = (r.inclusive, b.inclusive) {
            j["base_inclusive"] = json!(ai);
            j["delta_inclusive"] = json!(bi - ai);
        }
    }
    j
}

/// The rows of `t` that pass `filter` (a regex on name or file), sorted
/// by `sort` as [`sorted`] sorts, as indices. The server keeps the order
/// unfiltered and filtered instead ([`Session::order`]); this is the same
/// order made at once.
#[cfg(test)]
pub fn order(t: &Table, filter: Option<&str>, sort: &str, desc: bool) -> Result<Vec<usize>, Error> {
    let all = sorted(t, sort);
    let kept = match filter {
        Some(f) => filtered(t, &all, f)?,
        None => all,
    };
    let mut idx: Vec<usize> = kept.into_iter().map(|i| i as usize).collect();
    if desc {
        idx.reverse();
    }
    Ok(idx)
}

/// Every row of `t` in ascending order of `sort` (`name`, `file`, `self`,
/// `inclusive`, `calls`, `event:K`, `delta`, `delta_inclusive`), ties by
/// name, descending; as indices: the rows are neither copied nor turned
/// into JSON.
fn sorted(t: &Table, sort: &str) -> Vec<u32> {
    let rows = &t.rows;
    let mut idx: Vec<u32> = (0..rows.len() as u32).collect();
    let base = |i: usize| t.base.as_ref().map(|b| b[i]).unwrap_or_default();
    let event = sort
        .strip_prefix("event:")
        .and_then(|k| k.parse::<usize>().ok());
    let key = |i: usize| -> f64 {
        let r = &rows[i];
        match sort {
            "self" => r.self_cost,
            "inclusive" => r.inclusive.unwrap_or(f64::NEG_INFINITY),
            "calls" => r.calls as f64,
            "delta" => (r.self_cost - base(i).self_cost).abs(),
            "delta_inclusive" => match (r.inclusive, base(i).inclusive) {
                (Some(b), Some(a)) => (b - a).abs(),
                _ => 0.0,
            },
            _ => event.and_then(|k| r.events.get(k).copied()).unwrap_or(0.0),
        }
    };
    let row = |i: u32| &rows[i as usize];
    match sort {
        "name" => idx.sort_by(|&a, &b| row(a).name.cmp(&row(b).name)),
        "file" => idx.sort_by(|&a, &b| {
            row(a)
                .file
                .cmp(&row(b).file)
                .then(row(a).name.cmp(&row(b).name))
        }),
        _ => {
            let keys: Vec<f64> = (0..rows.len()).map(key).collect();
            idx.sort_by(|&a, &b| {
                keys[a as usize]
                    .partial_cmp(&keys[b as usize])
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then_with(|| row(b).name.cmp(&row(a).name))
            });
        }
    }
    idx
}

/// The rows of `order` whose name or file matches the regex `filter`,
/// in that order.
fn filtered(t: &Table, order: &[u32], filter: &str) -> Result<Vec<u32>, Error> {
    let re = Regex::new(filter).map_err(|e| Error::BadRequest(format!("filter: {e}")))?;
    Ok(order
        .iter()
        .copied()
        .filter(|&i| {
            let r = &t.rows[i as usize];
            re.is_match(&r.name) || re.is_match(&r.file)
        })
        .collect())
}

/// The functions table: `event`, `part`, `group` (`function`, `file`,
/// `object`), `filter` (a regex on name or file), `sort` (a column, as
/// [`sorted`] sorts), `desc` (0 or 1), `offset`, `limit`. Only the page
/// asked for is sent.
///
/// While gprof's analysis of the view runs, a page sorted by self cost,
/// an event's self cost, name or file comes from the sums alone
/// ([`Session::provisional`]): `pending` is true, inclusive costs and
/// calls are `null` until [`ready`] says the analysis is done.
pub fn functions(s: &Session, q: &Query) -> Result<Value, Error> {
    let group = get(q, "group").unwrap_or("function");
    let grouping = Grouping::parse(group)
        .ok_or_else(|| Error::BadRequest(format!("group: no grouping `{group}`")))?;
    let sort = get(q, "sort").unwrap_or(if s.diff { "delta" } else { "self" });
    let from_sums = matches!(sort, "self" | "name" | "file") || sort.starts_with("event:");
    let part = number(q, "part")?;
    if grouping == Grouping::Function
        && from_sums
        && let Some(p) = s.provisional(get(q, "event"), part)?
    {
        let id = TableId::Provisional((s.main(), p.event.clone(), part));
        let (count, offset, page) = page_of(s, id, &p.table, q, sort, |i| {
            let mut j = row_json(&p.table.rows[i], None, p.total);
            j["calls"] = Value::Null;
            j
        })?;
        return Ok(json!({
            "event": p.event,
            "events": p.events,
            "unit": p.event,
            "total": p.total,
            "count": count,
            "offset": offset,
            "rows": page,
            "diff": false,
            "pending": true,
        }));
    }
    let v = view_of(s, q, s.main())?;
    let total = v.total();
    let t = s.table(Some(&v.event), part, grouping)?;
    let id = TableId::Full(((s.main(), v.event.clone(), part), grouping));
    let (count, offset, page) = page_of(s, id, &t, q, sort, |i| {
        row_json(&t.rows[i], t.base.as_ref().map(|b| &b[i]), total)
    })?;
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

/// The page of table `t` (`id`) that `q` asks for (`filter`, `desc`,
/// `offset`, `limit`), sorted by `sort`: the number of rows matching, the
/// offset, and the page's rows as `row` makes them from a row's index.
/// The order, filtered or not, is made once and kept ([`Session::order`]);
/// a descending page reads it from the end.
fn page_of(
    s: &Session,
    id: TableId,
    t: &Table,
    q: &Query,
    sort: &str,
    row: impl Fn(usize) -> Value,
) -> Result<(usize, usize, Vec<Value>), Error> {
    let desc = get(q, "desc").map_or(sort != "name", |d| d == "1");
    let all = s.order((id.clone(), sort.to_owned(), None), || Ok(sorted(t, sort)))?;
    let order = match get(q, "filter") {
        Some(f) => s.order((id, sort.to_owned(), Some(f.to_owned())), || {
            filtered(t, &all, f)
        })?,
        None => all,
    };
    let offset = number(q, "offset")?.unwrap_or(0);
    let limit = number(q, "limit")?.unwrap_or(200).min(5000);
    let count = order.len();
    let at = |&i: &u32| row(i as usize);
    let page = if desc {
        order
            .iter()
            .rev()
            .skip(offset)
            .take(limit)
            .map(at)
            .collect()
    } else {
        order.iter().skip(offset).take(limit).map(at).collect()
    };
    Ok((count, offset, page))
}

/// Waits until gprof's analysis of the view (`event`, `part`) is done:
/// the page asks once it has shown a provisional table, then reloads it.
pub fn ready(s: &Session, q: &Query) -> Result<Value, Error> {
    let v = view_of(s, q, s.main())?;
    Ok(json!({"ready": true, "event": v.event}))
}

/// The selected function: its row and gprof's entry (`node`).
pub fn function(s: &Session, q: &Query) -> Result<Value, Error> {
    let v = view_of(s, q, s.main())?;
    let node = number(q, "node")?.ok_or_else(|| Error::BadRequest("node: missing".into()))?;
    let Some(row) = v.rows.iter().find(|r| r.node == node) else {
        return Err(Error::NotFound(format!("no function {node}")));
    };
    let mut b = v.butterfly(node);
    b["row"] = row_json(row, None, v.total());
    if s.diff {
        let a = view_of(s, q, 0)?;
        let a_node = a
            .rows
            .iter()
            .find(|r| r.name == row.name && r.object == row.object && r.is_cycle == row.is_cycle)
            .map(|r| r.node);
        let base = a_node.map(|n| a.butterfly(n));
        compare_entry(&mut b, base.as_ref());
    }
    if row.is_cycle
        && let Some(c) = row.cycle
    {
        b["member_nodes"] = json!(v.members(c));
    }
    Ok(b)
}

/// An arc's or entry's cost: measured inclusive when known, else self
/// plus descendants.
fn cost_of(v: &Value) -> f64 {
    v["measured"].as_f64().unwrap_or_else(|| {
        v["self"].as_f64().unwrap_or(0.0) + v["descendants"].as_f64().unwrap_or(0.0)
    })
}

/// Adds A's numbers and B − A to an entry of B (`base`: A's entry of the
/// same function, if A has it): `base_cost`, `delta` on the entry and on
/// every caller and callee (matched by name), callers and callees only A
/// has added with B's cost 0, each list sorted by the size of its change.
fn compare_entry(b: &mut Value, base: Option<&Value>) {
    let before = base.map_or(0.0, cost_of);
    b["base_cost"] = json!(before);
    b["delta"] = json!(cost_of(b) - before);
    for key in ["parents", "children", "members"] {
        let a_arcs: Vec<Value> = base
            .and_then(|a| a[key].as_array().cloned())
            .unwrap_or_default();
        let Some(Value::Array(arcs)) = b.get_mut(key) else {
            continue;
        };
        let mut seen = vec![false; a_arcs.len()];
        for arc in arcs.iter_mut() {
            let at = a_arcs
                .iter()
                .enumerate()
                .position(|(k, x)| !seen[k] && x["name"] == arc["name"]);
            let (cost, count) = match at {
                Some(k) => {
                    seen[k] = true;
                    (
                        cost_of(&a_arcs[k]),
                        a_arcs[k]["count"].as_u64().unwrap_or(0),
                    )
                }
                None => (0.0, 0),
            };
            arc["base_cost"] = json!(cost);
            arc["base_count"] = json!(count);
            arc["delta"] = json!(cost_of(arc) - cost);
        }
        for (k, x) in a_arcs.iter().enumerate() {
            if !seen[k] {
                arcs.push(json!({
                    "name": x["name"],
                    "node": null,
                    "count": 0,
                    "self": 0.0,
                    "descendants": 0.0,
                    "base_cost": cost_of(x),
                    "base_count": x["count"],
                    "delta": -cost_of(x),
                    "only_in_a": true,
                }));
            }
        }
        arcs.sort_by(|x, y| {
            let d = |v: &Value| v["delta"].as_f64().unwrap_or(0.0).abs();
            d(y).total_cmp(&d(x))
        });
    }
}

fn svg(body: Vec<u8>) -> Reply {
    Reply {
        content_type: "image/svg+xml",
        body,
    }
}

/// Direct callers and callees kept around the selection, each way, and
/// the next ring (callers' callers, callees' callees) in all.
const RING1: usize = 12;
const RING2: usize = 10;
/// Members of a large cycle drawn around a selection in it.
const CYCLE_MEMBERS: usize = 24;

/// The call graph around `node` (`tally graph --focus`, bounded: its
/// callers and callees, and theirs, the heaviest arcs first), as SVG:
/// nodes are `f<node>` (their `<title>`), which the page makes clickable.
/// A cycle (or a member of one) brings its members, drawn as a group; a
/// profile without calls gives the one node. Without `node`: the whole
/// graph pruned as `tally graph` prunes it. When comparing, every node
/// says B − A of its total.
pub fn graph_svg(s: &Session, q: &Query) -> Result<Reply, Error> {
    let v = view_of(s, q, s.main())?;
    let calls = v.call_graph();
    let kept = match number(q, "node")? {
        Some(node) => {
            let start = start_nodes(&v, &calls.graph, node)?;
            neighbourhood(calls, &start)
        }
        None => {
            let mut kept = graph::prune(&calls.graph, &Prune::default())
                .map_err(|e| Error::NotFound(e.to_string()))?;
            graph::limit(&calls.graph, &mut kept, graph::MAX_NODES);
            kept
        }
    };
    let rendered = if !s.diff {
        graph::svg::render_graph(&calls.graph, &kept)
    } else {
        // Places carry B − A here: a copy, the kept graph is shared.
        let mut g = calls.graph.clone();
        let a = view_of(s, q, 0)?;
        let ga = &a.call_graph().graph;
        let by_name: HashMap<(&str, Option<&str>), f64> = ga
            .nodes
            .iter()
            .map(|n| ((n.name.as_str(), n.place.as_deref()), n.total))
            .collect();
        let total = g.total;
        for (i, n) in g.nodes.iter_mut().enumerate() {
            if !kept.nodes[i] {
                continue;
            }
            let before = by_name
                .get(&(n.name.as_str(), n.place.as_deref()))
                .copied()
                .unwrap_or(0.0);
            let d = n.total - before;
            let share = if total != 0.0 { 100.0 * d / total } else { 0.0 };
            n.place = Some(format!("B−A {d:+} ({share:+.2}%)"));
        }
        graph::svg::render_graph(&g, &kept)
    };
    let out = rendered.map_err(|e| Error::Input(e.to_string()))?.svg;
    Ok(svg(out))
}

/// The nodes a graph is drawn around: the function, and the members of
/// its cycle; for a cycle's row, its members.
fn start_nodes(v: &View, g: &Graph, node: usize) -> Result<Vec<usize>, Error> {
    let cycle = if node < g.nodes.len() {
        g.nodes[node].cycle
    } else {
        let number = v
            .rows
            .iter()
            .find(|r| r.node == node && r.is_cycle)
            .and_then(|r| r.cycle)
            .ok_or_else(|| Error::NotFound(format!("no function {node}")))?;
        g.cycles.iter().position(|c| c.number == number)
    };
    let mut start: Vec<usize> = if node < g.nodes.len() {
        vec![node]
    } else {
        Vec::new()
    };
    if let Some(c) = cycle.and_then(|c| g.cycles.get(c)) {
        let mut members: Vec<usize> = c.members.iter().copied().filter(|&m| m != node).collect();
        members.sort_by(|&a, &b| g.nodes[b].total.total_cmp(&g.nodes[a].total));
        members.truncate(CYCLE_MEMBERS);
        start.extend(members);
    }
    if start.is_empty() {
        return Err(Error::NotFound(format!("cycle {node} has no members")));
    }
    Ok(start)
}

/// The graph kept around `start`: the heaviest direct callers and
/// callees, then the heaviest of their callers and callees, and every
/// arc between what is kept.
fn neighbourhood(calls: &CallGraph, start: &[usize]) -> graph::Kept {
    let g = &calls.graph;
    let mut nodes = vec![false; g.nodes.len()];
    for &n in start {
        nodes[n] = true;
    }
    // The heaviest `max` arcs leaving `from` (forwards: to callees).
    let ring = |from: &[usize], forward: bool, max: usize, nodes: &[bool]| -> Vec<usize> {
        let mut arcs: Vec<usize> = from
            .iter()
            .flat_map(|&n| {
                if forward {
                    calls.arcs_out(n)
                } else {
                    calls.arcs_in(n)
                }
            })
            .map(|&k| k as usize)
            .filter(|&k| {
                let e = &g.edges[k];
                !nodes[if forward { e.to } else { e.from }]
            })
            .collect();
        arcs.sort_by(|&a, &b| {
            g.edge_weight(&g.edges[b])
                .total_cmp(&g.edge_weight(&g.edges[a]))
        });
        let mut picked = Vec::new();
        for k in arcs {
            let e = &g.edges[k];
            let n = if forward { e.to } else { e.from };
            if !picked.contains(&n) {
                picked.push(n);
            }
            if picked.len() == max {
                break;
            }
        }
        picked
    };
    for forward in [false, true] {
        let first = ring(start, forward, RING1, &nodes);
        for &n in &first {
            nodes[n] = true;
        }
        for n in ring(&first, forward, RING2, &nodes) {
            nodes[n] = true;
        }
    }
    let edges = g
        .edges
        .iter()
        .map(|e| nodes[e.from] && nodes[e.to])
        .collect();
    graph::Kept { nodes, edges }
}

/// The flame graph's width in pixels, unless the page asks for its pane's.
pub const FLAME_WIDTH: u32 = 1200;

/// The width a request asks for (`width=`, the page's pane), bounded.
pub fn flame_width(q: &Query) -> Result<u32, Error> {
    Ok(number(q, "width")?.map_or(FLAME_WIDTH, |w| w.clamp(320, 4096) as u32))
}

/// The flame graph (`tally flame`) in `event`; differential (B against
/// A, [`crate::compare::flame_svg`]) when comparing.
pub fn flame_svg(s: &Session, q: &Query) -> Result<Reply, Error> {
    flame_svg_with(s, q, 0.1)
}

/// The flame graph, frames narrower than `min_width` pixels left out.
pub fn flame_svg_with(s: &Session, q: &Query, min_width: f64) -> Result<Reply, Error> {
    if s.diff {
        return crate::compare::flame_svg(s, q, min_width);
    }
    let events = s.events(s.main());
    let name = get(q, "event")
        .map(str::to_owned)
        .or_else(|| events.first().cloned())
        .ok_or_else(|| Error::Input("no event".into()))?;
    let mut tree = Tree::new();
    for inp in &s.inputs {
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
            .map_err(|e| Error::NotFound(tally_analysis::Error::from(e).to_string()))?;
        if columns.is_ratio(e) {
            return Err(Error::BadRequest(format!(
                "event {name}: a ratio cannot be a width; choose a count"
            )));
        }
        let Some(ev) = columns.column(e).cloned() else {
            return Err(Error::NotFound(format!("no event {name}")));
        };
        match inp.stacks()? {
            WholeStacks::Recorded(st) => tree.add_stacks(&inp.profile, st, &ev, false, false),
            WholeStacks::Estimated(st) => tree.add_stack_tree(&inp.profile, st, &ev, true, false),
        }
    }
    tree.finish();
    let estimated = s.inputs.iter().any(|i| i.estimated);
    let mut title = "Flame Graph".to_string();
    if estimated {
        title.push_str(" (stacks estimated from call arcs)");
    }
    let opts = FlameOptions {
        title,
        subtitle: Some(format!("{name}: {}", s.inputs[s.main()].name)),
        legend: None,
        event: name,
        width: flame_width(q)?,
        min_width,
        icicle: false,
    };
    let mut out = Vec::new();
    write_svg(&tree, &opts, &mut out).map_err(|e| Error::Input(e.to_string()))?;
    Ok(svg(out))
}

/// The function of the profile a table's row names: its node, or for
/// gmon input (whose nodes are gprof's symbols) the function of the same
/// name in the converted profile. `None` for a cycle's row.
pub fn function_of(inp: &Input, row: &Row) -> Option<usize> {
    if row.is_cycle {
        return None;
    }
    let names = &inp.profile.names;
    if inp.gmon.is_none() {
        return (row.node < names.function_count()).then_some(row.node);
    }
    (0..names.function_count())
        .find(|&f| names.function_name(FunctionId(f as u32)) == row.name.as_bytes())
}

/// The source (`asm`: assembly) of the selected function (`node`) as a
/// table of lines or instructions with their costs in every event
/// ([`crate::session::code`]); the source cut to the function's window
/// unless `whole=1`.
pub fn code_table(s: &Session, q: &Query, asm: bool) -> Result<Value, Error> {
    let v = view_of(s, q, s.main())?;
    let node = number(q, "node")?.ok_or_else(|| Error::BadRequest("node: missing".into()))?;
    let row = v
        .rows
        .iter()
        .find(|r| r.node == node)
        .ok_or_else(|| Error::NotFound(format!("no function {node}")))?;
    let inp = &s.inputs[s.main()];
    let Some(f) = function_of(inp, row) else {
        return Ok(json!({
            "function": row.name,
            "events": s.events(s.main()),
            "rows": [],
            "note": "a cycle has no code of its own: select one of its members",
        }));
    };
    let part = number(q, "part")?;
    if asm {
        code::asm(s, s.main(), f, part)
    } else {
        code::source(s, s.main(), f, part, get(q, "whole") == Some("1"))
    }
}

/// `tally annotate`'s source section cut to lines `lo..=hi` (with the
/// calls printed under them), after a note saying so; `None` when the
/// text has no such section. Lines are numbered from its `-- line N`
/// marks; a call line (`=>`) belongs to the line above it.
pub fn window(text: &str, lo: u32, hi: u32) -> Option<String> {
    let call = Regex::new(r"^\s*\S+(\s+\(\s*[-\d.]+%\))?\s+=> ").ok()?;
    let mark = Regex::new(r"^-- line (\d+) -+$").ok()?;
    let mut out = String::new();
    let mut lines = text.lines();
    // The header and the table, up to the source section's heading.
    for l in lines.by_ref() {
        out.push_str(l);
        out.push('\n');
        if l.starts_with("-- User-annotated source:") || l.starts_with("-- Auto-annotated source:")
        {
            break;
        }
    }
    let mut number: Option<u32> = None;
    let mut kept = false;
    let mut any = false;
    let mut body = String::new();
    let mut in_header = true;
    for l in lines {
        if l.starts_with("-- ") && !l.starts_with("-- line ") {
            // The next section: the window ends.
            break;
        }
        if let Some(c) = mark.captures(l) {
            number = c[1].parse().ok();
            in_header = false;
            continue;
        }
        if in_header {
            body.push_str(l);
            body.push('\n');
            continue;
        }
        let Some(n) = number else { continue };
        if call.is_match(l) {
            if kept {
                body.push_str(l);
                body.push('\n');
            }
            continue;
        }
        kept = (lo..=hi).contains(&n);
        if kept {
            if !any {
                body.push_str(&format!(
                    "-- line {n} ----------------------------------------\n"
                ));
            }
            any = true;
            body.push_str(l);
            body.push('\n');
        }
        number = Some(n + 1);
    }
    if !any {
        return None;
    }
    out.push_str(&format!(
        "-- lines {lo} to {hi} only: the selected function with {} lines of context (see the whole file)\n",
        code::CONTEXT
    ));
    out.push_str(&body);
    Some(out)
}

/// Annotated source (`tally annotate` of the function's file, cut to a
/// window around the function unless `whole=1`) or assembly (`tally
/// annotate --asm`) as text.
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
        grouping: annotate::Grouping::Function,
        auto: !asm,
        asm,
        show_percs: true,
        include: s.sources.search(),
        ..Default::default()
    };
    if !asm && let Some(r) = row.filter(|r| !r.file.is_empty()) {
        opts.auto = false;
        opts.files = vec![r.file.to_string().into()];
    }
    let part = number(q, "part")?;
    if let Some(p) = part {
        opts.parts = annotate::PartFilter::Parts(vec![p as u64 + 1]);
    }
    let key = (
        s.main(),
        asm,
        opts.files.first().map(|f| f.display().to_string()),
        event.clone(),
        part,
    );
    let whole = s.annotation(key, || {
        let mut out = Vec::new();
        let warnings = annotate::annotate_within(&inp.profile, &opts, &s.sources, &mut out)?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let warnings: String = warnings.iter().map(|w| format!("\nwarning: {w}")).collect();
        Ok((text, warnings))
    })?;
    let mut text = whole.0.as_str();
    let cut;
    if !asm
        && get(q, "whole") != Some("1")
        && inp.gmon.is_none()
        && let Some(f) = row.and_then(|r| function_of(inp, r))
        && let Some((lo, hi)) = inp.window(FunctionId(f as u32))
        && let Some(w) = window(text, lo as u32, hi as u32)
    {
        cut = w;
        text = &cut;
    }
    let text = format!("{text}{}", whole.1);
    Ok(Reply {
        content_type: "text/plain; charset=utf-8",
        body: text.into_bytes(),
    })
}
