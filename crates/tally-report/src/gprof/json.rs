//! The gprof report as JSON: the same rows and numbers as the text.
//!
//! The document has the input's header fields, `flat` rows in the flat
//! profile's order, `call_graph` entries in the call graph's order with
//! their callers and callees, and the `index`. Costs are in the report's
//! unit: seconds for gmon data (`*_ticks` fields keep the unrounded sample
//! counts), counts of the event for Callgrind input, where `self` and
//! `measured` are exact and `descendants` and the arcs' shares are gprof's
//! estimates, unrounded. Callgrind input adds the measured inclusive costs
//! (`measured`), the `cycles` and the warnings.

use serde_json::{Map, Value, json};
use tally_analysis::gprof::{CallGraph, Costs, EventCounts, Histogram, Options, Report};

/// The report as a JSON document.
pub fn write(report: &Report, opts: &Options) -> String {
    let mut doc = Map::new();
    // What one unit of the call graph's costs is worth in the output.
    let unit = match &report.costs {
        Costs::Samples(h) => {
            header_samples(report, h, opts, &mut doc);
            h.hz
        }
        Costs::Events(e) => {
            header_events(report, e, opts, &mut doc);
            1.0
        }
    };
    if let (true, Some(g)) = (opts.graph, report.graph.as_ref()) {
        call_graph(report, g, unit, opts, &mut doc);
    }
    if let Costs::Events(_) = report.costs
        && !report.notices.is_empty()
    {
        doc.insert(
            "warnings".into(),
            report.notices.iter().map(|n| json!(n.0)).collect(),
        );
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default();
    s.push('\n');
    s
}

/// An exact count: an integer where it fits, else a float.
fn num(v: i128) -> Value {
    match i64::try_from(v) {
        Ok(x) => json!(x),
        Err(_) => json!(v as f64),
    }
}

fn cycle_of(g: Option<&CallGraph>, n: usize) -> Option<u32> {
    g.and_then(|g| (g.cycle[n] != 0).then_some(g.cycle[n]))
}

fn header_samples(report: &Report, h: &Histogram, opts: &Options, doc: &mut Map<String, Value>) {
    let hz = h.hz;
    doc.insert("program".into(), json!(h.program.display().to_string()));
    doc.insert("sample_rate".into(), json!(hz));
    doc.insert("dimension".into(), json!(h.dimension));
    doc.insert("total_ticks".into(), json!(h.times.total));
    if h.sampled_arcs {
        doc.insert("arc_counts".into(), json!("sampled stacks"));
    }
    if !opts.flat {
        return;
    }
    let rows: Vec<Value> = report
        .flat_order(opts)
        .into_iter()
        .map(|i| {
            let r = &report.table.routines[i];
            let child = report.graph.as_ref().map_or(0.0, |g| g.child_time[i]);
            let time = h.times.time[i];
            json!({
                "name": report.display(i),
                "symbol": r.name,
                "address": format!("{:#x}", r.addr),
                "file": r.file.as_deref(),
                "line": r.line,
                "static": r.is_static,
                "self_ticks": time,
                "self": time / hz,
                "percent": if h.times.total > 0.0 { 100.0 * time / h.times.total } else { 0.0 },
                "calls": report.ncalls[i],
                "descendants": child / hz,
            })
        })
        .collect();
    doc.insert("flat".into(), Value::Array(rows));
}

fn header_events(report: &Report, e: &EventCounts, opts: &Options, doc: &mut Map<String, Value>) {
    let g = report.graph.as_ref();
    doc.insert("profile".into(), json!(e.source));
    doc.insert("creator".into(), json!(e.creator));
    doc.insert("commands".into(), json!(e.commands));
    doc.insert("parts".into(), json!(e.parts));
    doc.insert("event".into(), json!(e.event));
    doc.insert("event_long_name".into(), json!(e.event_long));
    doc.insert("events".into(), json!(e.events));
    doc.insert("program_total".into(), num(e.program_total));
    doc.insert("flat_total".into(), num(e.flat_total));
    doc.insert(
        "propagated_total".into(),
        json!(g.map_or(0.0, |g| g.print_time)),
    );
    if !opts.flat {
        return;
    }
    let measured = |n: usize| report.measured.as_ref().and_then(|m| m.nodes[n]);
    let rows: Vec<Value> = report
        .flat_order(opts)
        .into_iter()
        .map(|i| {
            let rt = &report.table.routines[i];
            let calls = report.ncalls[i];
            let s = e.self_cost[i];
            json!({
                "name": report.display(i),
                "file": rt.file.as_deref(),
                "object": e.object(i),
                "cycle": cycle_of(g, i),
                "self": num(s),
                "percent": if e.flat_total != 0 { 100.0 * s as f64 / e.flat_total as f64 } else { 0.0 },
                "calls": calls,
                "self_calls": g.map_or(0, |g| g.self_calls[i]),
                "self_per_call": (calls != 0).then(|| s as f64 / calls as f64),
                "measured": measured(i).map(num),
                "total_per_call": report.total_per_call(i),
                "descendants": g.map_or(0.0, |g| g.child_time[i]),
            })
        })
        .collect();
    doc.insert("flat".into(), Value::Array(rows));
}

/// What one unit of the call graph's costs is worth in the output:
/// samples per second for gmon data, 1 for event counts.
fn unit_of(report: &Report) -> f64 {
    match &report.costs {
        Costs::Samples(h) => h.hz,
        Costs::Events(_) => 1.0,
    }
}

/// The 100 % of the call graph's percentages.
fn print_time_of(report: &Report, g: &CallGraph) -> f64 {
    match &report.costs {
        Costs::Samples(_) if g.print_time > 0.0 => g.print_time,
        Costs::Events(_) if g.print_time != 0.0 => g.print_time,
        _ => 1.0,
    }
}

/// The call graph entry of `node` (a routine or a cycle) as `tally gprof
/// --json` prints it in `call_graph`, whether or not the report prints
/// it; `None` without a call graph or for a node out of range. The web UI
/// shows it as the selected function's callers and callees.
pub fn call_graph_entry(report: &Report, node: usize) -> Option<Value> {
    let g = report.graph.as_ref()?;
    if node >= g.cycle.len() {
        return None;
    }
    Some(entry(
        report,
        g,
        unit_of(report),
        print_time_of(report, g),
        node,
    ))
}

/// One node's entry: its costs, and its callers and callees (or, for a
/// cycle, its members).
fn entry(report: &Report, g: &CallGraph, unit: f64, print_time: f64, n: usize) -> Value {
    let measured = report.measured.as_ref();
    let name = |n: usize| -> String {
        if g.is_cycle(n) {
            format!("<cycle {}>", g.cycle[n])
        } else {
            report.display(n).to_owned()
        }
    };
    let arc = |a: usize, other: usize| {
        let arc = &g.graph.arcs[a];
        let within = report.within(a);
        let mut v = json!({
            "name": name(other),
            "index": g.index[other],
            "count": arc.count,
        });
        if let Some(m) = measured {
            v["cycle"] = json!(cycle_of(Some(g), other));
            v["measured"] = num(m.arcs[a]);
            v["within_cycle"] = json!(within);
        }
        if !within {
            v["self"] = json!(arc.time / unit);
            v["descendants"] = json!(arc.child_time / unit);
            v["total_calls"] = json!(g.ncalls[g.group(arc.child)]);
        }
        v
    };
    let mut e = json!({
        "index": g.index[n],
        "name": name(n),
        "cycle": cycle_of(Some(g), n),
        "percent": 100.0 * (g.prop_self[n] + g.prop_child[n]) / print_time,
        "self": g.prop_self[n] / unit,
        "descendants": g.prop_child[n] / unit,
        "called": g.ncalls[n],
        "self_calls": g.self_calls[n],
    });
    if let Some(m) = measured {
        e["measured"] = json!(m.nodes[n].map(num));
    }
    if g.is_cycle(n) {
        e["members"] = g
            .sorted_members(n)
            .into_iter()
            .map(|m| {
                json!({
                    "name": name(m),
                    "index": g.index[m],
                    "self": g.prop_self[m] / unit,
                    "descendants": g.prop_child[m] / unit,
                    "called": g.ncalls[m],
                    "self_calls": g.self_calls[m],
                })
            })
            .collect();
    } else {
        let parents: Vec<Value> = g
            .sorted_parents(n)
            .into_iter()
            .map(|a| arc(a, g.graph.arcs[a].parent))
            .collect();
        e["spontaneous"] = json!(parents.is_empty());
        e["parents"] = Value::Array(parents);
        e["children"] = g
            .sorted_children(n)
            .into_iter()
            .map(|a| arc(a, g.graph.arcs[a].child))
            .collect();
    }
    e
}

/// `call_graph` and `index` (and, for Callgrind input, `cycles`); costs
/// divided by `unit`.
fn call_graph(
    report: &Report,
    g: &CallGraph,
    unit: f64,
    opts: &Options,
    doc: &mut Map<String, Value>,
) {
    let events = match &report.costs {
        Costs::Events(e) => Some(e),
        Costs::Samples(_) => None,
    };
    let print_time = print_time_of(report, g);
    let entries: Vec<Value> = g
        .order
        .iter()
        .copied()
        .filter(|&n| report.graph_shows(opts, n))
        .map(|n| entry(report, g, unit, print_time, n))
        .collect();
    doc.insert("call_graph".into(), Value::Array(entries));
    if let Some(ev) = events {
        doc.insert("cycles".into(), cycles(report, ev, g));
    }
    doc.insert(
        "index".into(),
        report
            .index_entries(opts)
            .into_iter()
            .map(|i| {
                let mut v = json!({"name": report.display(i), "index": g.index[i]});
                if let Some(ev) = events {
                    v["qualifier"] = json!(ev.qualifier[i]);
                }
                v
            })
            .collect(),
    );
}

/// The cycles of a Callgrind report, with their members and measured cost.
fn cycles(report: &Report, e: &EventCounts, g: &CallGraph) -> Value {
    let measured = |n: usize| report.measured.as_ref().and_then(|m| m.nodes[n]);
    g.cycles
        .iter()
        .map(|c| {
            let node = g.cycle_node(c.number);
            let members: Vec<Value> = c
                .members
                .iter()
                .map(|&m| {
                    json!({
                        "name": report.display(m),
                        "file": report.table.routines[m].file.as_deref(),
                        "object": e.object(m),
                        "index": g.index[m],
                        "self": num(e.self_cost[m]),
                    })
                })
                .collect();
            json!({
                "number": c.number,
                "index": g.index[node],
                "members": members,
                "self": g.self_time[node],
                "measured": measured(node).map(num),
                "calls_in": g.ncalls[node],
                "calls_within": g.self_calls[node],
            })
        })
        .collect()
}
