//! The analysis of one input in one event: gprof's report (the same one
//! `tally gprof` prints, so the butterfly's numbers are its numbers) and
//! the rows of the functions table drawn from it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};

use serde_json::{Value, json};
use tally_analysis::gprof::{Costs, Report};
use tally_analysis::{Aggregate, CostTable};
use tally_model::{EventColumns, FunctionId};
use tally_report::graph::Graph;

use crate::session::Input;
use crate::session::sums::SelfSums;

/// One row of the functions table: a function, or a cycle.
#[derive(Clone, Debug)]
pub struct Row {
    /// The gprof node: a routine, or (at and after the routines) a cycle.
    pub node: usize,
    /// The name as printed (`<cycle N>` for a cycle).
    pub name: String,
    /// Source file, if known (one copy shared by the table's rows).
    pub file: Arc<str>,
    /// Object, if known (shared likewise).
    pub object: Arc<str>,
    /// Self cost in the view's event (seconds for gmon input).
    pub self_cost: f64,
    /// Inclusive cost: measured and cycle-correct for Callgrind (as
    /// `tally annotate --inclusive=yes`; derived for a cycle member), self
    /// plus descendants for gmon.
    pub inclusive: Option<f64>,
    /// Calls into it, self calls excluded.
    pub calls: u64,
    /// Its cycle number, for a member.
    pub cycle: Option<u32>,
    /// Whether the row is a cycle.
    pub is_cycle: bool,
    /// Self cost in every event (Callgrind: one per event of the profile).
    pub events: Vec<f64>,
}

/// A view: gprof's report of one event, and its table rows.
pub struct View {
    /// The event.
    pub event: String,
    /// The events of [`Row::events`].
    pub events: Vec<String>,
    /// What the costs are in (an event name, or `seconds`).
    pub unit: String,
    /// The 100 % of the percentages, per event of [`View::events`].
    pub totals: Vec<f64>,
    /// Functions with a cost or a call, then cycles; shared with the
    /// view's table by function, which would otherwise copy every row.
    pub rows: Arc<[Row]>,
    /// gprof's report.
    pub report: Report,
    /// The node of each gprof index (`[index]`), for the arcs of an entry.
    nodes_of_index: HashMap<usize, usize>,
    /// The call graph, made on the first graph request.
    call_graph: OnceLock<CallGraph>,
}

/// `tally graph`'s graph of a view, with each node's arcs in and out, so
/// that drawing the neighbourhood of a function reads only its arcs.
pub(crate) struct CallGraph {
    /// The graph.
    pub(crate) graph: Graph,
    /// Per node `n`, its arcs out are `out[out_at[n]..out_at[n + 1]]`
    /// (indices into the graph's edges, in their order).
    out_at: Vec<u32>,
    out: Vec<u32>,
    /// The same for the arcs into each node.
    in_at: Vec<u32>,
    into: Vec<u32>,
}

impl CallGraph {
    /// Indexes the arcs of `graph` by the node they leave and the node
    /// they reach.
    pub(crate) fn new(graph: Graph) -> CallGraph {
        let n = graph.nodes.len();
        let index = |end: fn(&tally_report::graph::Edge) -> usize| {
            let mut at = vec![0u32; n + 1];
            for e in &graph.edges {
                at[end(e) + 1] += 1;
            }
            for k in 0..n {
                at[k + 1] += at[k];
            }
            let mut next = at.clone();
            let mut arcs = vec![0u32; graph.edges.len()];
            for (k, e) in graph.edges.iter().enumerate() {
                let slot = &mut next[end(e)];
                arcs[*slot as usize] = k as u32;
                *slot += 1;
            }
            (at, arcs)
        };
        let (out_at, out) = index(|e| e.from);
        let (in_at, into) = index(|e| e.to);
        CallGraph {
            graph,
            out_at,
            out,
            in_at,
            into,
        }
    }

    /// The arcs leaving `node`, as indices into the graph's edges.
    pub(crate) fn arcs_out(&self, node: usize) -> &[u32] {
        &self.out[self.out_at[node] as usize..self.out_at[node + 1] as usize]
    }

    /// The arcs reaching `node`, as indices into the graph's edges.
    pub(crate) fn arcs_in(&self, node: usize) -> &[u32] {
        &self.into[self.in_at[node] as usize..self.in_at[node + 1] as usize]
    }
}

/// How the functions table is grouped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Grouping {
    /// One row per function (and per cycle).
    Function,
    /// One row per source file.
    File,
    /// One row per object.
    Object,
}

impl Grouping {
    /// The grouping a request names (`function`, `file`, `object`).
    pub fn parse(s: &str) -> Option<Grouping> {
        match s {
            "function" => Some(Grouping::Function),
            "file" => Some(Grouping::File),
            "object" => Some(Grouping::Object),
            _ => None,
        }
    }
}

/// A's costs of a row of B, when comparing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Base {
    /// A's self cost.
    pub self_cost: f64,
    /// A's inclusive cost (functions only).
    pub inclusive: Option<f64>,
}

/// The rows of one view's table, grouped, with A's costs when comparing;
/// the sort and filter of a request work on indices into it.
pub struct Table {
    /// The rows (by function: the view's own, shared).
    pub rows: Arc<[Row]>,
    /// Per row, A's costs (matched by name and object, or by file or
    /// object when grouped); `None` unless comparing.
    pub base: Option<Vec<Base>>,
}

impl Table {
    /// The table of `v`, grouped by `group`; `base` is A's view when
    /// comparing.
    pub fn new(v: &View, base: Option<&View>, group: Grouping) -> Table {
        let rows = match group {
            Grouping::Function => v.rows.clone(),
            Grouping::File | Grouping::Object => grouped(&v.rows, group).into(),
        };
        let base = base.map(|a| {
            let empty: Arc<str> = Arc::from("");
            let key = |r: &Row| match group {
                Grouping::Function => (r.name.clone(), r.object.clone()),
                _ => (r.name.clone(), empty.clone()),
            };
            let a_rows = match group {
                Grouping::Function => a.rows.clone(),
                _ => grouped(&a.rows, group).into(),
            };
            let mut by: HashMap<(String, Arc<str>), Base> = HashMap::new();
            for r in a_rows.iter().filter(|r| !r.is_cycle) {
                let e = by.entry(key(r)).or_insert(Base {
                    self_cost: 0.0,
                    inclusive: Some(0.0),
                });
                e.self_cost += r.self_cost;
                e.inclusive = match (e.inclusive, r.inclusive) {
                    (Some(x), Some(y)) if group == Grouping::Function => Some(x + y),
                    _ => None,
                };
            }
            rows.iter()
                .map(|r| {
                    by.get(&key(r)).copied().unwrap_or(Base {
                        self_cost: 0.0,
                        inclusive: Some(0.0),
                    })
                })
                .collect()
        });
        Table { rows, base }
    }
}

/// Rows summed by file or object (cycles left out: their members are
/// counted already).
fn grouped(rows: &[Row], group: Grouping) -> Vec<Row> {
    let mut by: Vec<Row> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::new();
    let empty: Arc<str> = Arc::from("");
    for r in rows.iter().filter(|r| !r.is_cycle) {
        let key = if group == Grouping::File {
            &r.file
        } else {
            &r.object
        };
        let k = *at.entry(key).or_insert_with(|| {
            by.push(Row {
                node: usize::MAX,
                name: if key.is_empty() {
                    "???".into()
                } else {
                    key.to_string()
                },
                file: key.clone(),
                object: empty.clone(),
                self_cost: 0.0,
                inclusive: None,
                calls: 0,
                cycle: None,
                is_cycle: false,
                events: vec![0.0; r.events.len()],
            });
            by.len() - 1
        });
        let g = &mut by[k];
        g.self_cost += r.self_cost;
        g.calls += r.calls;
        for (a, b) in g.events.iter_mut().zip(&r.events) {
            *a += b;
        }
    }
    by
}

impl View {
    /// Draws the rows from `report`; `agg` is the sums it was made from,
    /// dropped once each function's own costs are read, before the rows
    /// are drawn (on a large profile its arcs are a fifth of the memory
    /// served); `totals` are the program totals per event (Callgrind),
    /// `None` for gmon input.
    pub fn new(
        input: &Input,
        report: Report,
        agg: Aggregate<u64>,
        event: &str,
        totals: Option<Vec<i128>>,
    ) -> View {
        let g = report.graph.as_ref();
        let measured = |n: usize| report.measured.as_ref().and_then(|m| m.nodes[n]);
        let mut shared = Shared::default();
        let (unit, events, totals, rows) = match &report.costs {
            Costs::Samples(h) => {
                let hz = h.hz;
                drop(agg);
                let listed: Vec<usize> = (0..report.table.len())
                    .filter(|&i| h.times.time[i] != 0.0 || report.ncalls[i] != 0)
                    .collect();
                let cycle_rows = Row::cycles(g, &mut shared, |g, _, n| {
                    (
                        g.self_time[n] / hz,
                        Some((g.prop_self[n] + g.prop_child[n]) / hz),
                        vec![g.self_time[n] / hz],
                    )
                });
                let object = shared.get(&h.program.display().to_string());
                let functions = listed.iter().map(|&i| {
                    let time = h.times.time[i];
                    let child = g.map_or(0.0, |g| g.child_time[i]);
                    let r = &report.table.routines[i];
                    Row {
                        node: i,
                        name: report.display(i).to_owned(),
                        file: shared.get(r.file.as_deref().unwrap_or_default()),
                        object: object.clone(),
                        self_cost: time / hz,
                        inclusive: Some((time + child) / hz),
                        calls: report.ncalls[i],
                        cycle: g.and_then(|g| (g.cycle[i] != 0).then_some(g.cycle[i])),
                        is_cycle: false,
                        events: vec![time / hz],
                    }
                });
                (
                    "seconds".to_string(),
                    vec!["time".to_string()],
                    vec![h.times.total / hz],
                    functions.chain(cycle_rows).collect(),
                )
            }
            Costs::Events(e) => {
                let columns = EventColumns::new(&input.profile.events);
                let names = columns.names().to_vec();
                let k = columns.find(&e.event).unwrap_or(0);
                // A cycle member has no measured cost: its derived one, as
                // `tally annotate` shows it.
                let derived: HashMap<usize, f64> = if g.is_none_or(|g| g.cycles.is_empty()) {
                    HashMap::new()
                } else {
                    let d = tally_analysis::Inclusive::new(&agg);
                    (0..agg.function_self.len())
                        .map(|i| FunctionId(i as u32))
                        .filter(|&f| d.is_derived(f))
                        .map(|f| (f.index(), columns.value(d.shown(f).0, k) as f64))
                        .collect()
                };
                let function_self = own_costs(agg);
                let listed: Vec<usize> = (0..report.table.len())
                    .filter(|&i| e.self_cost[i] != 0 || report.ncalls[i] != 0)
                    .collect();
                let cycle_rows = Row::cycles(g, &mut shared, |_, c, n| {
                    let members = c.members.iter().map(|&m| e.self_cost[m] as f64).sum();
                    (members, measured(n).map(|v| v as f64), Vec::new())
                });
                let functions = listed.iter().map(|&i| {
                    let r = &report.table.routines[i];
                    let per_event = if i < function_self.len() {
                        let costs = function_self.get(FunctionId(i as u32).index());
                        (0..names.len())
                            .map(|k| columns.value(costs, k) as f64)
                            .collect()
                    } else {
                        vec![0.0; names.len()]
                    };
                    Row {
                        node: i,
                        name: report.display(i).to_owned(),
                        file: shared.get(r.file.as_deref().unwrap_or_default()),
                        object: shared.get(report.object(i).unwrap_or_default()),
                        self_cost: e.self_cost[i] as f64,
                        inclusive: measured(i)
                            .map(|v| v as f64)
                            .or_else(|| derived.get(&i).copied()),
                        calls: report.ncalls[i],
                        cycle: g.and_then(|g| (g.cycle[i] != 0).then_some(g.cycle[i])),
                        is_cycle: false,
                        events: per_event,
                    }
                });
                let rows: Arc<[Row]> = functions.chain(cycle_rows).collect();
                let totals = totals
                    .map(|t| t.into_iter().map(|v| v as f64).collect())
                    .unwrap_or_else(|| vec![e.program_total as f64; names.len()]);
                (e.event.clone(), names, totals, rows)
            }
        };
        let nodes_of_index = report
            .graph
            .as_ref()
            .map(|g| {
                g.index
                    .iter()
                    .enumerate()
                    .rev()
                    .map(|(n, &i)| (i, n))
                    .collect()
            })
            .unwrap_or_default();
        View {
            event: event.to_owned(),
            events,
            unit,
            totals,
            rows,
            report,
            nodes_of_index,
            call_graph: OnceLock::new(),
        }
    }

    /// The call graph of the report, made on first use and kept: building
    /// it reads every arc, too slow to repeat for each request.
    pub(crate) fn call_graph(&self) -> &CallGraph {
        self.call_graph
            .get_or_init(|| CallGraph::new(Graph::from_report(&self.report)))
    }

    /// The 100 % of the view's event.
    pub fn total(&self) -> f64 {
        let k = self
            .events
            .iter()
            .position(|e| *e == self.event)
            .unwrap_or(0);
        self.totals.get(k).copied().unwrap_or(0.0)
    }

    /// The members of cycle `number`, as routine nodes.
    pub fn members(&self, number: u32) -> Vec<usize> {
        self.report.graph.as_ref().map_or_else(Vec::new, |g| {
            g.cycles
                .iter()
                .find(|c| c.number == number)
                .map(|c| c.members.clone())
                .unwrap_or_default()
        })
    }

    /// The node gprof prints as `[index]`.
    pub fn node_of_index(&self, index: usize) -> Option<usize> {
        self.nodes_of_index.get(&index).copied()
    }

    /// The callers and callees of `node` as gprof's call graph entry
    /// (`tally gprof --json`), each arc with the node it leads to.
    pub fn butterfly(&self, node: usize) -> Value {
        let Some(mut e) = tally_report::gprof::json::call_graph_entry(&self.report, node) else {
            return json!({"name": self.name(node), "parents": [], "children": []});
        };
        for key in ["parents", "children", "members"] {
            if let Some(Value::Array(arcs)) = e.get_mut(key) {
                for a in arcs {
                    let n = a["index"]
                        .as_u64()
                        .and_then(|i| self.node_of_index(i as usize));
                    a["node"] = json!(n);
                }
            }
        }
        e["node"] = json!(node);
        e["unit"] = json!(self.unit);
        e["total"] = json!(self.total());
        e
    }

    /// The printed name of a node.
    pub fn name(&self, node: usize) -> String {
        match self.report.graph.as_ref() {
            Some(g) if g.is_cycle(node) => format!("<cycle {}>", g.cycle[node]),
            _ if node < self.report.table.len() => self.report.display(node).to_owned(),
            _ => String::new(),
        }
    }
}

/// Each function's own costs, the rest of `agg` dropped.
fn own_costs(agg: Aggregate<u64>) -> CostTable<u64> {
    agg.function_self
}

/// One shared copy of each file and object name of a table: a large
/// profile has hundreds of thousands of functions in a few thousand files
/// and a few objects, and a copy per row would take more memory than the
/// rest of the row.
#[derive(Default)]
struct Shared(HashSet<Arc<str>>);

impl Row {
    /// The rows of `g`'s cycles, with no file or object; `costs` gives a
    /// cycle's self cost, inclusive cost and per-event costs from the
    /// graph, the cycle and its node.
    fn cycles(
        g: Option<&tally_analysis::gprof::CallGraph>,
        shared: &mut Shared,
        costs: impl Fn(
            &tally_analysis::gprof::CallGraph,
            &tally_analysis::gprof::CycleInfo,
            usize,
        ) -> (f64, Option<f64>, Vec<f64>),
    ) -> Vec<Row> {
        let Some(g) = g else {
            return Vec::new();
        };
        let empty = shared.get("");
        g.cycles
            .iter()
            .map(|c| {
                let n = g.cycle_node(c.number);
                let (self_cost, inclusive, events) = costs(g, c, n);
                Row {
                    node: n,
                    name: format!("<cycle {}>", c.number),
                    file: empty.clone(),
                    object: empty.clone(),
                    self_cost,
                    inclusive,
                    calls: g.ncalls[n],
                    cycle: Some(c.number),
                    is_cycle: true,
                    events,
                }
            })
            .collect()
    }
}

impl Shared {
    /// The shared copy of `s`.
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.0.get(s) {
            return a.clone();
        }
        let a: Arc<str> = Arc::from(s);
        self.0.insert(a.clone());
        a
    }
}

/// The functions table drawn from the sums alone, shown while gprof's
/// analysis of the same view runs: each function's self costs, exact, and
/// nothing that analysis decides (inclusive costs, calls, cycles), so the
/// page never shows a number that changes when the analysis ends.
pub struct Provisional {
    /// The event.
    pub event: String,
    /// The events of [`Row::events`].
    pub events: Vec<String>,
    /// The 100 % of the view's event.
    pub total: f64,
    /// The rows: functions only, without inclusive costs and calls.
    pub table: Table,
}

impl Provisional {
    /// The rows of `input`'s functions in `event` from `sums`: the
    /// functions gprof's view lists (a self cost in `event`, or calls from
    /// another function), numbered as it numbers them. `totals`: per event.
    pub(crate) fn new(
        input: &Input,
        sums: &SelfSums,
        event: &str,
        totals: Vec<i128>,
    ) -> Provisional {
        let columns = EventColumns::new(&input.profile.events);
        let names = columns.names().to_vec();
        let e = names.iter().position(|n| n == event).unwrap_or(0);
        let pnames = &input.profile.names;
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let listed: Vec<usize> = (0..sums.called.len())
            .filter(|&i| sums.called[i] || columns.value(sums.get(i), e) != 0)
            .collect();
        let mut shared = Shared::default();
        let rows: Arc<[Row]> = listed
            .iter()
            .map(|&i| {
                let costs = sums.get(i);
                let id = FunctionId(i as u32);
                Row {
                    node: i,
                    name: lossy(pnames.function_name(id)),
                    file: shared.get(&String::from_utf8_lossy(pnames.function_file(id))),
                    object: shared.get(&String::from_utf8_lossy(pnames.function_object(id))),
                    self_cost: columns.value(costs, e) as f64,
                    inclusive: None,
                    calls: 0,
                    cycle: None,
                    is_cycle: false,
                    events: (0..names.len())
                        .map(|k| columns.value(costs, k) as f64)
                        .collect(),
                }
            })
            .collect();
        Provisional {
            event: names[e].clone(),
            total: totals.get(e).copied().unwrap_or(0) as f64,
            events: names,
            table: Table { rows, base: None },
        }
    }
}
