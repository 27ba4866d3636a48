//! The one gprof report, whatever the input: gmon data (`super::analyse`)
//! or a Callgrind profile (`super::callgrind::analyse`). Both fill the same
//! routine table, call counts and gprof call graph; what differs is what a
//! cost is, held in [`Costs`]: histogram samples (printed as seconds) or
//! counts of one Callgrind event. Callgrind also measured what gprof
//! estimates, the inclusive cost of every function and call: that is the
//! optional [`Measured`] part, which the writers print beside the estimate.
//!
//! The questions every writer asks (which rows the flat profile lists and
//! in what order, which call graph entries and index entries exist, how a
//! node is named) are answered here, once.

use std::cmp::Ordering;
use std::path::PathBuf;

use super::{CallGraph, Notice, Options, Selection, SelfTimes, SymbolTable};

/// Everything the text and JSON writers print.
#[derive(Debug, Clone)]
pub struct Report {
    /// The routines.
    pub table: SymbolTable,
    /// Names as printed, per routine, where they are not the routines'
    /// own names (see [`Report::display`]): a Callgrind profile's
    /// functions print as they are named, and a copy of every name would
    /// be the largest part of the report.
    pub display_names: Option<Vec<String>>,
    /// Calls into every routine (self calls taken out when there is a
    /// call graph).
    pub ncalls: Vec<u64>,
    /// The call graph, if the profile has arcs.
    pub graph: Option<CallGraph>,
    /// Which routines the flat profile shows.
    pub flat_selection: Selection,
    /// Source files in the order the symbol table first names them (for
    /// annotated source; empty for Callgrind input).
    pub source_files: Vec<String>,
    /// Warnings.
    pub notices: Vec<Notice>,
    /// What the costs are.
    pub costs: Costs,
    /// The inclusive costs Callgrind measured, when the input is Callgrind.
    pub measured: Option<Measured>,
}

/// What a report's costs are.
#[derive(Debug, Clone)]
pub enum Costs {
    /// gmon histogram samples, printed as time.
    Samples(Histogram),
    /// Counts of one event of a Callgrind profile.
    Events(EventCounts),
}

/// The histogram side of a gmon report.
#[derive(Debug, Clone)]
pub struct Histogram {
    /// The program.
    pub program: PathBuf,
    /// Self times, in samples.
    pub times: SelfTimes,
    /// Samples per second.
    pub hz: f64,
    /// The unit of the histogram (`seconds`).
    pub dimension: String,
    /// Its abbreviation (`s`).
    pub abbrev: char,
    /// The gmon.out came from sampling (`tally record`): arc counts are
    /// sampled stacks through each arc, not calls, and the reports say so.
    pub sampled_arcs: bool,
}

/// The event side of a report of a Callgrind profile.
#[derive(Debug, Clone)]
pub struct EventCounts {
    /// The profile's file name, as given.
    pub source: String,
    /// `creator:`.
    pub creator: Option<String>,
    /// The distinct `cmd:` lines of the parts.
    pub commands: Vec<String>,
    /// Number of parts summed.
    pub parts: usize,
    /// The event analysed.
    pub event: String,
    /// Its long name, if the profile gives one.
    pub event_long: Option<String>,
    /// All events of the profile (recorded, then derived).
    pub events: Vec<String>,
    /// The program total in the event (`tally_model::program_total`).
    pub program_total: i128,
    /// The profile's objects (`ob=`), by id.
    pub objects: Vec<String>,
    /// Each function's object, an index into `objects`.
    pub object_of: Vec<u32>,
    /// What the index prints after a name shared by several functions
    /// (their file, or object and file), to tell them apart.
    pub qualifier: Vec<Option<String>>,
    /// Self cost per routine in the event (0 for routines left out of the
    /// flat profile with `-p`/`-P`, as gprof drops their samples).
    pub self_cost: Vec<i128>,
    /// Sum of `self_cost`: the 100 % of the flat profile.
    pub flat_total: i128,
}

impl EventCounts {
    /// The object of routine `i`.
    pub fn object(&self, i: usize) -> &str {
        &self.objects[self.object_of[i] as usize]
    }
}

/// Inclusive costs as measured, beside gprof's estimates.
#[derive(Debug, Clone)]
pub struct Measured {
    /// Per node (routines, then cycles); `None` for cycle members, which
    /// have no inclusive cost of their own.
    pub nodes: Vec<Option<i128>>,
    /// Per arc of the call graph.
    pub arcs: Vec<i128>,
}

impl Report {
    /// The name of routine `i` as printed.
    pub fn display(&self, i: usize) -> &str {
        match &self.display_names {
            Some(d) => &d[i],
            None => &self.table.routines[i].name,
        }
    }

    /// The object of routine `i`, for a report of a Callgrind profile.
    pub fn object(&self, i: usize) -> Option<&str> {
        match &self.costs {
            Costs::Events(e) => Some(e.object(i)),
            Costs::Samples(_) => None,
        }
    }

    /// Whether routine `i` has a self cost.
    fn has_self_cost(&self, i: usize) -> bool {
        match &self.costs {
            Costs::Samples(h) => h.times.time[i] != 0.0,
            Costs::Events(e) => e.self_cost[i] != 0,
        }
    }

    /// The routines the flat profile shows, in its order: self cost, then
    /// calls, descending, then name, then address. Only the rows shown are
    /// sorted (most functions of a large profile have neither cost nor
    /// calls), and their keys side by side: names are reached only on a
    /// tie.
    pub fn flat_order(&self, opts: &Options) -> Vec<usize> {
        let shown = (0..self.table.len()).filter(|&i| self.flat_shows(opts, i));
        match &self.costs {
            Costs::Samples(h) => self.sorted_rows(
                shown
                    .map(|i| (h.times.time[i], self.ncalls[i], i))
                    .collect(),
                |l, r| {
                    let diff = r - l;
                    if diff > 0.0 {
                        Ordering::Greater
                    } else if diff < 0.0 {
                        Ordering::Less
                    } else {
                        Ordering::Equal
                    }
                },
            ),
            Costs::Events(e) => self.sorted_rows(
                shown.map(|i| (e.self_cost[i], self.ncalls[i], i)).collect(),
                |l, r| r.cmp(l),
            ),
        }
    }

    /// `rows` (cost, calls, routine) in the flat profile's order, `cost`
    /// ordering the costs.
    fn sorted_rows<K: Copy>(
        &self,
        mut rows: Vec<(K, u64, usize)>,
        cost: impl Fn(&K, &K) -> Ordering,
    ) -> Vec<usize> {
        let name = |i: usize| self.table.routines[i].name.as_bytes();
        rows.sort_unstable_by(|l, r| {
            cost(&l.0, &r.0)
                .then(r.1.cmp(&l.1))
                .then_with(|| name(l.2).cmp(name(r.2)))
                .then(l.2.cmp(&r.2))
        });
        rows.into_iter().map(|(_, _, i)| i).collect()
    }

    /// Whether the flat profile shows routine `i`.
    pub fn flat_shows(&self, opts: &Options, i: usize) -> bool {
        self.flat_selection.selects(i)
            && (opts.zeros || self.ncalls[i] != 0 || self.has_self_cost(i))
    }

    /// Whether the call graph has an entry for `node`.
    pub fn graph_shows(&self, opts: &Options, node: usize) -> bool {
        let Some(g) = &self.graph else {
            return false;
        };
        if !g.print_flag[node] {
            return false;
        }
        if !opts.zeros
            && g.ncalls[node] == 0
            && g.self_calls[node] == 0
            && g.prop_self[node] == 0.0
            && g.prop_child[node] == 0.0
        {
            return false;
        }
        // Under -l only functions get entries: not line routines, and (as in
        // GNU gprof, whose cycle entries are not marked as functions) not
        // cycles either.
        !(opts.line && (node >= g.routines || !self.table.routines[node].is_func))
    }

    /// The routines the index lists: those called or with a cost (all with
    /// `-z`), by name (for Callgrind input, functions of one name by their
    /// qualifier), then by address.
    pub fn index_entries(&self, opts: &Options) -> Vec<usize> {
        let Some(g) = &self.graph else {
            return Vec::new();
        };
        let name = |i: usize| self.table.routines[i].name.as_bytes();
        // Each name's first eight bytes, as a number that orders as they
        // do (short names padded with zeros), sorted beside the routine:
        // most comparisons end there, without reaching the names.
        let prefix = |i: usize| {
            let mut b = [0u8; 8];
            let n = name(i);
            let k = n.len().min(8);
            b[..k].copy_from_slice(&n[..k]);
            u64::from_be_bytes(b)
        };
        let mut entries: Vec<(u64, usize)> = (0..g.routines)
            .filter(|&i| opts.zeros || g.ncalls[i] != 0 || self.has_self_cost(i))
            .map(|i| (prefix(i), i))
            .collect();
        let qualifier = match &self.costs {
            Costs::Events(e) => Some(&e.qualifier),
            Costs::Samples(_) => None,
        };
        entries.sort_unstable_by(|&(lp, l), &(rp, r)| {
            lp.cmp(&rp)
                .then_with(|| name(l).cmp(name(r)))
                .then_with(|| qualifier.map_or(Ordering::Equal, |q| q[l].cmp(&q[r])))
                .then(l.cmp(&r))
        });
        entries.into_iter().map(|(_, i)| i).collect()
    }

    /// Whether arc `arc` of the call graph is a self call or a call between
    /// members of one cycle (such arcs propagate nothing).
    pub fn within(&self, arc: usize) -> bool {
        let Some(g) = &self.graph else {
            return false;
        };
        let a = &g.graph.arcs[arc];
        a.parent == a.child || (g.cycle[a.parent] != 0 && g.cycle[a.parent] == g.cycle[a.child])
    }

    /// Measured inclusive cost per call of routine `i` (outside cycles).
    pub fn total_per_call(&self, i: usize) -> Option<f64> {
        let calls = self.ncalls[i];
        let m = self.measured.as_ref()?.nodes[i]?;
        (calls != 0).then(|| m as f64 / calls as f64)
    }
}
