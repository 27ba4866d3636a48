//! The gprof report as JSON: the same rows and numbers as the text.

use serde_json::{Value, json};

use super::text::{flat_order, flat_shows, graph_shows, index_entries};
use super::{Options, Report};

/// The report as a JSON document: `flat` rows in the flat profile's order,
/// `call_graph` entries in the call graph's order with their callers and
/// callees, and the `cycles`. Times are in the histogram's unit (seconds);
/// `*_ticks` fields keep the unrounded sample counts.
pub fn write(report: &Report, opts: &Options) -> String {
    let hz = report.hz;
    let mut doc = serde_json::Map::new();
    doc.insert(
        "program".into(),
        json!(report.program.display().to_string()),
    );
    doc.insert("sample_rate".into(), json!(hz));
    doc.insert("dimension".into(), json!(report.dimension));
    doc.insert("total_ticks".into(), json!(report.times.total));
    if opts.flat {
        let rows: Vec<Value> = flat_order(report)
            .into_iter()
            .filter(|&i| flat_shows(report, opts, i))
            .map(|i| {
                let r = &report.table.routines[i];
                let child = report.graph.as_ref().map_or(0.0, |g| g.child_time[i]);
                json!({
                    "name": report.display[i],
                    "symbol": r.name,
                    "address": format!("{:#x}", r.addr),
                    "file": r.file,
                    "line": r.line,
                    "static": r.is_static,
                    "self_ticks": report.times.time[i],
                    "self": report.times.time[i] / hz,
                    "percent": if report.times.total > 0.0 { 100.0 * report.times.time[i] / report.times.total } else { 0.0 },
                    "calls": report.ncalls[i],
                    "descendants": child / hz,
                })
            })
            .collect();
        doc.insert("flat".into(), Value::Array(rows));
    }
    if let (true, Some(g)) = (opts.graph, report.graph.as_ref()) {
        let print_time = if g.print_time > 0.0 {
            g.print_time
        } else {
            1.0
        };
        let name = |n: usize| -> Value {
            if g.is_cycle(n) {
                json!(format!("<cycle {}>", g.cycle[n]))
            } else {
                json!(report.display[n])
            }
        };
        let arc = |a: usize, other: usize| {
            let arc = &g.graph.arcs[a];
            let within = arc.parent == arc.child
                || (g.cycle[arc.parent] != 0 && g.cycle[arc.parent] == g.cycle[arc.child]);
            let mut v = json!({
                "name": name(other),
                "index": g.index[other],
                "count": arc.count,
            });
            if !within {
                v["self"] = json!(arc.time / hz);
                v["descendants"] = json!(arc.child_time / hz);
                v["total_calls"] = json!(g.ncalls[g.group(arc.child)]);
            }
            v
        };
        let entries: Vec<Value> = g
            .order
            .iter()
            .copied()
            .filter(|&n| graph_shows(report, opts, n))
            .map(|n| {
                let mut e = json!({
                    "index": g.index[n],
                    "name": name(n),
                    "percent": 100.0 * (g.prop_self[n] + g.prop_child[n]) / print_time,
                    "self": g.prop_self[n] / hz,
                    "descendants": g.prop_child[n] / hz,
                    "called": g.ncalls[n],
                    "self_calls": g.self_calls[n],
                    "cycle": (g.cycle[n] != 0).then_some(g.cycle[n]),
                });
                if g.is_cycle(n) {
                    e["members"] = g
                        .sorted_members(n)
                        .into_iter()
                        .map(|m| json!({"name": name(m), "index": g.index[m], "self": g.prop_self[m] / hz, "descendants": g.prop_child[m] / hz, "called": g.ncalls[m], "self_calls": g.self_calls[m]}))
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
            })
            .collect();
        doc.insert("call_graph".into(), Value::Array(entries));
        doc.insert(
            "index".into(),
            index_entries(report, opts)
                .into_iter()
                .map(|i| json!({"name": report.display[i], "index": g.index[i]}))
                .collect(),
        );
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default();
    s.push('\n');
    s
}
