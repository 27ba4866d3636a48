//! `tally graph`: the call graph as a picture, in the manner of gprof2dot.
//!
//! The graph is built from the one gprof [`Report`] (gmon data or a
//! Callgrind profile), so its costs are the ones `tally gprof` prints:
//!
//! - a node is a routine with its self cost and its total: Callgrind's
//!   measured inclusive cost where there is one (cycle-correct, so never
//!   above 100 % under recursion), else gprof's propagated self + children;
//! - an edge is an arc with its call count and the cost it passes to the
//!   caller: Callgrind's measured inclusive cost of the arc, else gprof's
//!   share of the callee. Arcs inside a cycle (and self calls) pass no
//!   cost of their own: they show their counts only;
//! - a cycle (strongly connected routines, as gprof collapses them) is a
//!   group with the cycle's total.
//!
//! [`prune`] then applies gprof2dot's rules; [`dot`] writes the DOT text.

pub mod dot;
mod layout;
pub mod svg;

use crate::ReportError;
use std::path::Path;

use tally_analysis::gprof::{Costs, Report};

/// One function of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Its name as printed.
    pub name: String,
    /// Where it lives: its file when known, else its object.
    pub place: Option<String>,
    /// Own cost (samples or event counts).
    pub self_cost: f64,
    /// Own cost plus its callees' (see the module docs).
    pub total: f64,
    /// Calls into it, self calls included.
    pub calls: u64,
    /// Its cycle, an index into [`Graph::cycles`].
    pub cycle: Option<usize>,
}

/// One call arc of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Edge {
    /// Calling node.
    pub from: usize,
    /// Called node.
    pub to: usize,
    /// Calls along it.
    pub calls: u64,
    /// Cost passed along it to the caller; `None` for self calls and arcs
    /// inside a cycle.
    pub cost: Option<f64>,
}

/// Routines calling each other: a cycle, drawn as a group.
#[derive(Debug, Clone, PartialEq)]
pub struct Cycle {
    /// gprof's number for it.
    pub number: u32,
    /// Its members' nodes.
    pub members: Vec<usize>,
    /// Its members' self costs plus what their calls out of it cost.
    pub total: f64,
}

/// What a cost is.
#[derive(Debug, Clone, PartialEq)]
pub enum Unit {
    /// Histogram samples, `hz` per second (gmon).
    Samples {
        /// Samples per second.
        hz: f64,
    },
    /// Counts of one event.
    Event(String),
}

/// The call graph of a profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// The functions.
    pub nodes: Vec<Node>,
    /// The arcs.
    pub edges: Vec<Edge>,
    /// The cycles.
    pub cycles: Vec<Cycle>,
    /// The 100 %: the sum of the self costs.
    pub total: f64,
    /// What the costs are.
    pub unit: Unit,
    /// A title (the program or command).
    pub title: String,
    /// Whether the profile recorded calls at all (Cachegrind's do not).
    pub has_arcs: bool,
}

impl Graph {
    /// The share of the total that `cost` is, as a fraction (0 when the
    /// total is 0).
    pub fn ratio(&self, cost: f64) -> f64 {
        if self.total > 0.0 {
            cost / self.total
        } else {
            0.0
        }
    }

    /// A node's weight for pruning and colouring: its total's share.
    pub fn node_weight(&self, n: usize) -> f64 {
        self.ratio(self.nodes[n].total)
    }

    /// An edge's weight: the share of the cost it passes, or, for arcs
    /// that pass none of their own, the smaller of its ends' weights (the
    /// safe estimate gprof2dot makes).
    pub fn edge_weight(&self, e: &Edge) -> f64 {
        match e.cost {
            Some(c) => self.ratio(c),
            None => self.node_weight(e.from).min(self.node_weight(e.to)),
        }
    }
}

impl Graph {
    /// The graph of a gprof report: every routine with a cost or a call,
    /// every arc, and gprof's cycles.
    pub fn from_report(r: &Report) -> Graph {
        let (unit, title) = match &r.costs {
            Costs::Samples(h) => (
                Unit::Samples { hz: h.hz },
                h.program.file_name().map_or_else(
                    || h.program.display().to_string(),
                    |f| f.to_string_lossy().into_owned(),
                ),
            ),
            Costs::Events(e) => (
                Unit::Event(e.event.clone()),
                e.commands
                    .first()
                    .cloned()
                    .unwrap_or_else(|| e.source.clone()),
            ),
        };
        let n = r.table.len();
        let place = |i: usize| -> Option<String> {
            let file = r.table.routines[i]
                .file
                .as_deref()
                .filter(|f| !f.is_empty());
            match (&r.costs, file) {
                (_, Some(f)) => Some(short_path(f)),
                (Costs::Events(e), None) => e
                    .objects
                    .get(i)
                    .filter(|o| !o.is_empty())
                    .map(|o| short_path(o)),
                (Costs::Samples(_), None) => None,
            }
        };
        let Some(g) = &r.graph else {
            // Without a call graph: self costs only.
            let nodes = (0..n)
                .map(|i| {
                    let c = self_of(r, i);
                    Node {
                        name: r.display(i).to_owned(),
                        place: place(i),
                        self_cost: c,
                        total: c,
                        calls: r.ncalls[i],
                        cycle: None,
                    }
                })
                .collect::<Vec<_>>();
            let total = nodes.iter().map(|n| n.self_cost).sum();
            return Graph {
                nodes,
                edges: Vec::new(),
                cycles: Vec::new(),
                total,
                unit,
                title,
                has_arcs: false,
            };
        };
        let measured = r.measured.as_ref();
        let cycle_of =
            |i: usize| -> Option<usize> { (g.cycle[i] != 0).then(|| g.cycle[i] as usize - 1) };
        let mut nodes = Vec::with_capacity(n);
        for i in 0..n {
            let estimate = g.prop_self[i] + g.prop_child[i];
            let total = measured
                .and_then(|m| m.nodes.get(i).copied().flatten())
                .map_or(estimate, |v| v as f64);
            nodes.push(Node {
                name: r.display(i).to_owned(),
                place: place(i),
                self_cost: g.prop_self[i],
                total,
                calls: g.ncalls[i].saturating_add(g.self_calls[i]),
                cycle: cycle_of(i),
            });
        }
        let mut edges = Vec::with_capacity(g.graph.arcs.len());
        for (k, a) in g.graph.arcs.iter().enumerate() {
            if a.parent >= n || a.child >= n {
                continue;
            }
            let cost = (!r.within(k)).then(|| {
                measured
                    .and_then(|m| m.arcs.get(k))
                    .map_or(a.time + a.child_time, |&v| v as f64)
            });
            edges.push(Edge {
                from: a.parent,
                to: a.child,
                calls: a.count,
                cost,
            });
        }
        // Self calls (gprof keeps them apart from the arcs) as loops.
        for (i, &c) in g.self_calls[..n].iter().enumerate() {
            if c != 0 {
                edges.push(Edge {
                    from: i,
                    to: i,
                    calls: c,
                    cost: None,
                });
            }
        }
        let cycles = g
            .cycles
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let node = g.routines + k;
                let estimate = g.prop_self[node] + g.prop_child[node];
                Cycle {
                    number: c.number,
                    members: c.members.clone(),
                    total: measured
                        .and_then(|m| m.nodes.get(node).copied().flatten())
                        .map_or(estimate, |v| v as f64),
                }
            })
            .collect();
        let has_arcs = !g.graph.arcs.is_empty();
        Graph {
            nodes,
            edges,
            cycles,
            total: g.print_time,
            unit,
            title,
            has_arcs,
        }
    }
}

/// A routine's self cost without a call graph.
fn self_of(r: &Report, i: usize) -> f64 {
    match &r.costs {
        Costs::Samples(h) => h.times.time[i],
        Costs::Events(e) => e.self_cost[i] as f64,
    }
}

/// The last two components of a path: enough to tell files apart on a
/// node without the whole build directory.
fn short_path(p: &str) -> String {
    let path = Path::new(p);
    let mut parts: Vec<String> = path
        .components()
        .rev()
        .take(2)
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.reverse();
    if parts.len() == 2 && (parts[0] == "/" || parts[0] == ".") {
        parts.remove(0);
    }
    parts.join("/")
}

/// How to prune the graph (gprof2dot's options).
#[derive(Debug, Clone)]
pub struct Prune {
    /// Nodes whose total is below this share (a fraction) are left out,
    /// with their edges.
    pub node_thres: f64,
    /// Edges passing less than this share are left out.
    pub edge_thres: f64,
    /// Keep only what these functions call, directly or not (gprof2dot's
    /// `-z`): glob patterns on names.
    pub root: Vec<String>,
    /// Keep only what calls these functions (gprof2dot's `-l`).
    pub leaf: Vec<String>,
    /// Keep only these functions' callers and callees, both ways.
    pub around: Vec<String>,
}

impl Default for Prune {
    fn default() -> Self {
        Prune {
            node_thres: 0.005,
            edge_thres: 0.001,
            root: Vec::new(),
            leaf: Vec::new(),
            around: Vec::new(),
        }
    }
}

/// What remains of a graph after pruning: which nodes and edges to draw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kept {
    /// Per node.
    pub nodes: Vec<bool>,
    /// Per edge.
    pub edges: Vec<bool>,
}

/// Prunes as gprof2dot does: nodes by total below `node_thres` (their
/// edges with them), then edges below `edge_thres`; then `root` keeps the
/// descendants of the matching functions, `leaf` their ancestors, `around`
/// both, each along the edges that remain.
pub fn prune(g: &Graph, p: &Prune) -> Result<Kept, ReportError> {
    let mut nodes: Vec<bool> = (0..g.nodes.len())
        .map(|i| {
            let n = &g.nodes[i];
            // Functions that neither cost nor were called are not part of
            // the run's graph.
            (n.total != 0.0 || n.calls != 0 || n.self_cost != 0.0)
                && g.node_weight(i) >= p.node_thres
        })
        .collect();
    let mut edges: Vec<bool> = g
        .edges
        .iter()
        .map(|e| nodes[e.from] && nodes[e.to] && g.edge_weight(e) >= p.edge_thres)
        .collect();
    let mut restrict = |option: &'static str, patterns: &[String], down: bool, up: bool| {
        if patterns.is_empty() {
            return Ok(());
        }
        let mut start = Vec::new();
        for pat in patterns {
            let all: Vec<usize> = (0..g.nodes.len())
                .filter(|&i| glob(pat.as_bytes(), g.nodes[i].name.as_bytes()))
                .collect();
            if all.is_empty() {
                return Err(ReportError::NoSuchFunction {
                    option,
                    pattern: pat.clone(),
                });
            }
            let kept: Vec<usize> = all.into_iter().filter(|&i| nodes[i]).collect();
            if kept.is_empty() {
                return Err(ReportError::Pruned {
                    option,
                    pattern: pat.clone(),
                });
            }
            start.extend(kept);
        }
        let mut reach = vec![false; g.nodes.len()];
        if down {
            walk(g, &edges, &start, &mut reach, true);
        }
        if up {
            walk(g, &edges, &start, &mut reach, false);
        }
        for (i, k) in nodes.iter_mut().enumerate() {
            *k &= reach[i];
        }
        for (e, k) in g.edges.iter().zip(edges.iter_mut()) {
            *k &= nodes[e.from] && nodes[e.to];
        }
        Ok(())
    };
    restrict("--root", &p.root, true, false)?;
    restrict("--leaf", &p.leaf, false, true)?;
    restrict("--around", &p.around, true, true)?;
    Ok(Kept { nodes, edges })
}

/// The node budget of a picture unless the user gives another.
pub const MAX_NODES: usize = 500;

/// Keeps at most `max_nodes` nodes (0: no bound), the heaviest, as a
/// higher `--node-thres` would, with their edges: Graphviz's layout time
/// grows much faster than the graph, so a picture keeps to a budget.
/// Returns how many nodes were left out and the smallest share kept.
pub fn limit(g: &Graph, kept: &mut Kept, max_nodes: usize) -> (usize, f64) {
    let mut nodes: Vec<usize> = (0..g.nodes.len()).filter(|&i| kept.nodes[i]).collect();
    if max_nodes == 0 || nodes.len() <= max_nodes {
        return (0, 0.0);
    }
    nodes.sort_by(|&a, &b| {
        g.node_weight(b)
            .total_cmp(&g.node_weight(a))
            .then(a.cmp(&b))
    });
    for &i in &nodes[max_nodes..] {
        kept.nodes[i] = false;
    }
    for (e, k) in g.edges.iter().zip(kept.edges.iter_mut()) {
        *k &= kept.nodes[e.from] && kept.nodes[e.to];
    }
    (nodes.len() - max_nodes, g.node_weight(nodes[max_nodes - 1]))
}

/// Marks in `reach` everything reachable from `start` along kept edges,
/// forwards (callees) or backwards (callers).
fn walk(g: &Graph, kept: &[bool], start: &[usize], reach: &mut [bool], forward: bool) {
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); g.nodes.len()];
    for (e, &k) in g.edges.iter().zip(kept) {
        if k {
            let (a, b) = if forward {
                (e.from, e.to)
            } else {
                (e.to, e.from)
            };
            next[a].push(b);
        }
    }
    let mut seen = vec![false; g.nodes.len()];
    let mut stack: Vec<usize> = start.to_vec();
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut seen[n], true) {
            continue;
        }
        reach[n] = true;
        stack.extend(next[n].iter().copied().filter(|&m| !seen[m]));
    }
}

/// Shell-style matching as gprof2dot's (fnmatch): `*` any run, `?` any
/// byte, `[...]` a set (`!` or `^` negates), everything else itself.
pub fn glob(pat: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let (mut star_p, mut star_n) = (usize::MAX, 0);
    while n < name.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    star_p = p;
                    star_n = n;
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, len)) = class(&pat[p..], name[n]) {
                        if matched {
                            p += len;
                            n += 1;
                            continue;
                        }
                    } else if name[n] == b'[' {
                        p += 1;
                        n += 1;
                        continue;
                    }
                }
                c if c == name[n] => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
        }
        if star_p == usize::MAX {
            return false;
        }
        p = star_p + 1;
        star_n += 1;
        n = star_n;
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// A `[...]` set at the start of `pat`: whether `c` is in it and the set's
/// length; `None` when the set is not closed (then `[` is itself).
fn class(pat: &[u8], c: u8) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(pat.get(i), Some(b'!' | b'^'));
    if negate {
        i += 1;
    }
    let mut found = false;
    let mut first = true;
    while i < pat.len() {
        if pat[i] == b']' && !first {
            return Some((found != negate, i + 1));
        }
        first = false;
        if i + 2 < pat.len() && pat[i + 1] == b'-' && pat[i + 2] != b']' {
            found |= pat[i] <= c && c <= pat[i + 2];
            i += 3;
        } else {
            found |= pat[i] == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs_match_as_fnmatch() {
        assert!(glob(b"main", b"main"));
        assert!(!glob(b"main", b"main2"));
        assert!(glob(b"work_*", b"work_a"));
        assert!(glob(b"*a*", b"bab"));
        assert!(glob(b"f?b", b"fib"));
        assert!(glob(b"[a-c]x", b"bx"));
        assert!(!glob(b"[!a-c]x", b"bx"));
        assert!(glob(b"[x", b"[x"));
        assert!(!glob(b"*z", b"abc"));
    }
}
