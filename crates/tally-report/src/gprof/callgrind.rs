//! gprof's call-graph analysis on a Callgrind profile: one routine per
//! function, its self cost in one event as gprof's "time", Callgrind's call
//! arcs as gprof's arcs, then gprof's propagation (cycles collapsed, each
//! callee's cost shared among its callers by their calls).
//!
//! Callgrind also records what gprof has to estimate: the inclusive cost of
//! every arc. The report shows it beside gprof's estimate, as `measured`:
//!
//! - for an arc, the arc's inclusive cost as recorded (summed over call
//!   sites and parts);
//! - for a function outside cycles, its inclusive cost computed
//!   cycle-correctly by [`Inclusive`] (what `tally annotate --inclusive=yes`
//!   shows); cycle members have none of their own;
//! - for a cycle, the cycle's inclusive cost (members' self costs plus the
//!   arcs that leave it).
//!
//! Arcs recorded with `calls=0` (calls still active when a dump was
//! written) are kept, as `tally annotate` keeps them: they become arcs with
//! count 0, like gprof's static arcs (`-c`). They take part in finding
//! cycles (so the cycles are exactly [`Inclusive`]'s), are listed with
//! their measured cost, and propagate nothing, since gprof shares a
//! callee's cost by counts.

use std::fmt::Write as _;
use std::io::{self, Write};

use rustc_hash::FxHashMap;
use serde_json::{Value, json};
use tally_analysis::gprof::{
    AssembleOptions, CallGraph, Graph, Routine, Selection, SymbolTable, assemble,
};
use tally_analysis::{Aggregate, Inclusive};
use tally_model::{Cost, EventColumns, FunctionId, Profile, program_total};

use super::{ArcSpec, Notice, Options, SymSpec};
use crate::ReportError;

/// Everything the text and JSON writers print.
#[derive(Debug, Clone)]
pub struct Report {
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
    /// The program total in the event: the sum of the parts' own totals
    /// (`summary:`, else `totals:`, else the sum of their costs).
    pub program_total: i128,
    /// The routines: one per function, pseudo-address = function id.
    pub table: SymbolTable,
    /// Object of every function.
    pub objects: Vec<String>,
    /// What the index prints after a name shared by several functions
    /// (their file, or object and file), to tell them apart.
    pub qualifier: Vec<Option<String>>,
    /// Self cost per routine in the event (0 for routines left out of the
    /// flat profile with `-p`/`-P`, as gprof drops their samples).
    pub self_cost: Vec<i128>,
    /// Sum of `self_cost`: the 100 % of the flat profile.
    pub flat_total: i128,
    /// Calls into every routine from other routines.
    pub ncalls: Vec<u64>,
    /// gprof's call graph.
    pub graph: CallGraph,
    /// Measured inclusive cost per node (routines, then cycles); `None`
    /// for cycle members.
    pub measured: Vec<Option<i128>>,
    /// Measured inclusive cost per arc of `graph.graph.arcs`.
    pub arc_measured: Vec<i128>,
    /// Which routines the flat profile shows.
    pub flat_selection: Selection,
    /// Warnings.
    pub notices: Vec<Notice>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn selection(table: &SymbolTable, include: &[SymSpec], exclude: &[SymSpec]) -> Selection {
    let mark = |specs: &[SymSpec]| -> Vec<bool> {
        table
            .routines
            .iter()
            .map(|r| specs.iter().any(|s| s.matches(r)))
            .collect()
    };
    Selection::new(mark(include), mark(exclude))
}

/// Builds the report from a whole profile (all parts summed).
pub fn analyse_profile<C: Cost>(
    profile: &Profile<C>,
    event: Option<&str>,
    opts: &Options,
    source: &str,
) -> Result<Report, ReportError> {
    let agg = Aggregate::new(profile, |_| true);
    let sums: Vec<Vec<C>> = profile
        .parts
        .iter()
        .map(|p| {
            p.lines
                .totals()
                .unwrap_or_else(|| vec![C::ZERO; agg.events])
        })
        .collect();
    analyse(profile, &agg, &sums, event, opts, source)
}

/// Builds the report from the sums of all parts of `profile` (`agg`, made
/// with every part chosen) and the sums of each part's self costs
/// (`part_sums`, for parts that state no total). `event` defaults to the
/// first recorded event.
pub fn analyse<C: Cost>(
    profile: &Profile<C>,
    agg: &Aggregate<C>,
    part_sums: &[Vec<C>],
    event: Option<&str>,
    opts: &Options,
    source: &str,
) -> Result<Report, ReportError> {
    let columns = EventColumns::new(&profile.events);
    let e = match event {
        None if profile.events.is_empty() => {
            return Err(ReportError::Input(format!(
                "{source}: the profile has no events"
            )));
        }
        None => 0,
        Some(name) => columns.find(name)?,
    };
    let value = |costs: &[C]| columns.value(costs, e);
    let event_name = columns.names()[e].clone();
    let event_long = columns.long_name(e).map(str::to_owned);
    let events = columns.names().to_vec();

    let names = &profile.names;
    let n = names.function_count();
    let mut notices = Vec::new();

    // Routines: one per function, in id order; the id is the address.
    let mut routines = Vec::with_capacity(n);
    let mut objects = Vec::with_capacity(n);
    for f in 0..n {
        let id = FunctionId(f as u32);
        let name = lossy(names.function_name(id));
        let file = lossy(names.function_file(id));
        routines.push(Routine {
            display: name.clone(),
            name,
            addr: f as u64,
            end_addr: f as u64,
            is_static: false,
            is_func: true,
            file: (!file.is_empty()).then_some(file),
            line: 0,
        });
        objects.push(lossy(names.function_object(id)));
    }
    let table = SymbolTable { routines };
    let qualifier = qualifiers(&table, &objects);

    let specs = &opts.specs;
    let flat_selection = selection(&table, &specs.flat_include, &specs.flat_exclude);
    let graph_selection = selection(&table, &specs.graph_include, &specs.graph_exclude);
    let time_selection = selection(&table, &specs.time_include, &specs.time_exclude);

    let mut negative = false;
    let mut self_cost = vec![0i128; n];
    let mut flat_total = 0i128;
    for (f, c) in self_cost.iter_mut().enumerate() {
        if f >= agg.function_self.len() || !flat_selection.selects(f) {
            continue;
        }
        *c = value(agg.function_self.get(f));
        negative |= *c < 0;
        flat_total += *c;
    }

    // Arcs: Callgrind's arcs, summed over call-site files, in order of
    // first appearance; `-k` and `-q FROM/TO` as for gmon input.
    let arc_selected = |specs: &[ArcSpec], p: usize, c: usize| {
        specs
            .iter()
            .any(|s| s.from.matches(&table.routines[p]) && s.to.matches(&table.routines[c]))
    };
    let any_include = specs
        .arcs_include
        .iter()
        .any(|s| table.routines.iter().any(|r| s.from.matches(r)));
    let mut graph = Graph::new(n);
    let mut arc_measured: Vec<i128> = Vec::new();
    let filtering = any_include || !specs.arcs_exclude.is_empty();
    let mut kept_arcs = Vec::new();
    for arc in &agg.arcs {
        let (p, c) = (arc.caller.index(), arc.callee.index());
        let keep = if any_include {
            arc_selected(&specs.arcs_include, p, c)
        } else {
            !filtering || !arc_selected(&specs.arcs_exclude, p, c)
        };
        if !keep {
            continue;
        }
        let count = arc.count.to_i128();
        negative |= count < 0;
        let count = u64::try_from(count.max(0)).unwrap_or(u64::MAX);
        graph.ncalls[c] = graph.ncalls[c].saturating_add(count);
        graph.add(p, c, count);
        let a = graph.find(p, c).expect("arc just added");
        if a == arc_measured.len() {
            arc_measured.push(0);
        }
        arc_measured[a] = arc_measured[a].saturating_add(value(&arc.inclusive));
        if filtering {
            kept_arcs.push(arc.clone());
        }
    }
    if negative {
        notices.push(Notice(format!(
            "the profile has negative {event_name} costs or call counts (a difference of profiles?): negative counts are taken as 0, and gprof's shares assume costs that are not negative"
        )));
    }

    // Measured inclusive costs over the same arcs as gprof's graph, so that
    // both find the same cycles.
    let incl_agg;
    let incl_src = if filtering {
        let mut a = agg.clone();
        a.arcs = kept_arcs;
        incl_agg = a;
        &incl_agg
    } else {
        agg
    };
    let incl = Inclusive::new(incl_src);

    let time: Vec<f64> = self_cost.iter().map(|&c| c as f64).collect();
    let raw_names: Vec<&str> = table.routines.iter().map(|r| r.name.as_str()).collect();
    let cg = assemble(
        graph,
        &time,
        &raw_names,
        &AssembleOptions {
            graph: graph_selection,
            time: time_selection,
            static_arcs: Vec::new(),
        },
    );

    let mut measured: Vec<Option<i128>> = (0..n)
        .map(|f| {
            incl.of(FunctionId(f as u32))
                .filter(|v| !v.is_empty())
                .map(&value)
        })
        .collect();
    for c in &cg.cycles {
        let number = incl.cycle_of[c.members[0]];
        let same = number.is_some_and(|k| {
            let ic = &incl.cycles[k as usize - 1];
            ic.members.len() == c.members.len()
                && c.members.iter().all(|&m| incl.cycle_of[m] == Some(k))
        });
        if !same {
            notices.push(Notice(format!(
                "cycle {} of gprof's analysis differs from the strongly connected components (a bug): no measured cost for it",
                c.number
            )));
        }
        measured.push(
            number
                .filter(|_| same)
                .map(|k| value(&incl.cycles[k as usize - 1].inclusive)),
        );
    }

    let program_total = value(&program_total(
        &profile.parts,
        agg.events,
        |_| true,
        |i| part_sums.get(i).cloned(),
    ));

    let mut commands: Vec<String> = Vec::new();
    for p in &profile.parts {
        if let Some(c) = &p.info.cmd {
            let c = lossy(c).trim().to_owned();
            if !commands.contains(&c) {
                commands.push(c);
            }
        }
    }
    if agg.arcs.is_empty() {
        notices.push(Notice(
            "the profile records no calls (Cachegrind profiles never do): every function is <spontaneous>".to_owned(),
        ));
    }

    Ok(Report {
        source: source.to_owned(),
        creator: profile.creator.as_deref().map(lossy),
        commands,
        parts: profile.parts.len(),
        event: event_name,
        event_long,
        events,
        program_total,
        ncalls: cg.ncalls[..n].to_vec(),
        table,
        objects,
        qualifier,
        self_cost,
        flat_total,
        graph: cg,
        measured,
        arc_measured,
        flat_selection,
        notices,
    })
}

/// For names shared by several functions: the file, or the object and
/// the file when the file does not tell them apart.
fn qualifiers(table: &SymbolTable, objects: &[String]) -> Vec<Option<String>> {
    let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (i, r) in table.routines.iter().enumerate() {
        by_name.entry(r.name.as_str()).or_default().push(i);
    }
    let mut out = vec![None; table.len()];
    for group in by_name.values().filter(|g| g.len() > 1) {
        for &i in group {
            let file = table.routines[i].file.as_deref().unwrap_or("");
            let shared = group
                .iter()
                .filter(|&&j| table.routines[j].file.as_deref().unwrap_or("") == file)
                .count()
                > 1;
            out[i] = Some(if shared {
                format!("{}, {file}", objects[i])
            } else {
                file.to_owned()
            });
        }
    }
    out
}

impl Report {
    /// The flat profile's order: self cost, then calls, descending, then
    /// name.
    pub fn flat_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.table.len()).collect();
        order.sort_by(|&l, &r| {
            self.self_cost[r]
                .cmp(&self.self_cost[l])
                .then(self.ncalls[r].cmp(&self.ncalls[l]))
                .then_with(|| {
                    self.table.routines[l]
                        .name
                        .as_bytes()
                        .cmp(self.table.routines[r].name.as_bytes())
                })
        });
        order
    }

    /// Whether the flat profile shows routine `i`.
    pub fn flat_shows(&self, opts: &Options, i: usize) -> bool {
        self.flat_selection.selects(i)
            && (opts.zeros || self.ncalls[i] != 0 || self.self_cost[i] != 0)
    }

    /// Whether the call graph has an entry for `node`.
    pub fn graph_shows(&self, opts: &Options, node: usize) -> bool {
        let g = &self.graph;
        g.print_flag[node]
            && (opts.zeros
                || g.ncalls[node] != 0
                || g.self_calls[node] != 0
                || g.prop_self[node] != 0.0
                || g.prop_child[node] != 0.0)
    }

    /// The routines the index lists: those called or with a cost (all with
    /// `-z`), by name (functions of one name by file and object).
    pub fn index_entries(&self, opts: &Options) -> Vec<usize> {
        let g = &self.graph;
        let mut names: Vec<usize> = (0..g.routines)
            .filter(|&i| opts.zeros || g.ncalls[i] != 0 || self.self_cost[i] != 0)
            .collect();
        names.sort_by(|&l, &r| {
            self.table.routines[l]
                .name
                .as_bytes()
                .cmp(self.table.routines[r].name.as_bytes())
                .then_with(|| self.qualifier[l].cmp(&self.qualifier[r]))
        });
        names
    }

    /// Measured inclusive cost per call of routine `i` (outside cycles).
    pub fn total_per_call(&self, i: usize) -> Option<f64> {
        let calls = self.ncalls[i];
        (calls != 0)
            .then_some(())
            .and(self.measured[i])
            .map(|m| m as f64 / calls as f64)
    }

    /// The name as the call graph prints it: with its cycle and index.
    fn print_name(&self, node: usize) -> PrintName<'_> {
        PrintName(self, node)
    }

    fn within(&self, arc: usize) -> bool {
        let g = &self.graph;
        let a = &g.graph.arcs[arc];
        a.parent == a.child || (g.cycle[a.parent] != 0 && g.cycle[a.parent] == g.cycle[a.child])
    }
}

/// A node's name with its cycle and index, written without allocating.
struct PrintName<'a>(&'a Report, usize);

impl std::fmt::Display for PrintName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (r, node) = (self.0, self.1);
        let g = &r.graph;
        if g.is_cycle(node) {
            write!(f, "<cycle {}>", g.cycle[node])?;
        } else {
            f.write_str(&r.table.routines[node].display)?;
            if g.cycle[node] != 0 {
                write!(f, " <cycle {}>", g.cycle[node])?;
            }
        }
        if g.index[node] != 0 {
            if g.print_flag[node] {
                write!(f, " [{}]", g.index[node])?;
            } else {
                write!(f, " ({})", g.index[node])?;
            }
        }
        Ok(())
    }
}

/// A cost column: gprof's (fractional) values rounded to the unit, ties
/// to even as `printf("%.0f")` does.
struct CostCell(f64, usize);

impl std::fmt::Display for CostCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0.round_ties_even();
        let w = self.1;
        if v.abs() < 9.0e15 {
            write!(f, "{:>w$}", v as i64)
        } else {
            write!(f, "{:>w$.0}", v + 0.0)
        }
    }
}

/// The measured column: blank when there is no measured value.
struct MeasuredCell(Option<i128>, usize);

impl std::fmt::Display for MeasuredCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let w = self.1;
        match self.0 {
            Some(m) => write!(f, "{m:>w$}"),
            None => write!(f, "{:>w$}", ""),
        }
    }
}

/// The `called` column of a node's own line: calls from others, `+` calls
/// within (itself, or its cycle).
struct CalledCell<'a>(&'a CallGraph, usize, usize);

impl std::fmt::Display for CalledCell<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (g, n, kw) = (self.0, self.1, self.2);
        if g.self_calls[n] != 0 {
            write!(f, "{:>kw$}+{:<kw$}", g.ncalls[n], g.self_calls[n])
        } else if g.ncalls[n] != 0 || g.is_cycle(n) {
            write!(f, "{:>kw$} {:kw$}", g.ncalls[n], "")
        } else {
            write!(f, "{:>kw$} {:kw$}", "", "")
        }
    }
}

/// Column widths, wide enough for every number printed.
struct Widths {
    index: usize,
    cost: usize,
    calls: usize,
}

fn digits(v: i128) -> usize {
    v.to_string().len()
}

impl Widths {
    fn of(r: &Report) -> Widths {
        let g = &r.graph;
        let mut big = r.program_total.abs().max(r.flat_total.abs());
        for m in r.measured.iter().chain(std::iter::once(&None)).flatten() {
            big = big.max(m.abs());
        }
        for &m in &r.arc_measured {
            big = big.max(m.abs());
        }
        for (&s, &c) in g.prop_self.iter().zip(&g.prop_child) {
            big = big.max((s + c).abs().round() as i128);
        }
        let mut calls = 0u64;
        for (&c, &s) in g.ncalls.iter().zip(&g.self_calls) {
            calls = calls.max(c).max(s);
        }
        Widths {
            index: 6.max(digits(g.index.len() as i128) + 2),
            cost: 14.max(digits(big) + 1),
            calls: 10.max(digits(i128::from(calls))),
        }
    }
}

/// Writes the report: flat profile, call graph and index, as chosen.
pub fn write_text<W: Write>(r: &Report, opts: &Options, out: &mut W) -> io::Result<()> {
    let w = Widths::of(r);
    let mut first = true;
    if opts.flat {
        flat(r, opts, &w, out)?;
        first = false;
    }
    if opts.graph {
        if !first {
            out.write_all(b"\x0c\n")?;
        }
        call_graph(r, opts, &w, out)?;
        index(r, opts, out)?;
    }
    Ok(())
}

/// The text report as a string.
pub fn text(r: &Report, opts: &Options) -> String {
    let mut v = Vec::new();
    write_text(r, opts, &mut v).expect("writing to memory");
    String::from_utf8_lossy(&v).into_owned()
}

fn event_title(r: &Report) -> String {
    match &r.event_long {
        Some(l) => format!("{} ({l})", r.event),
        None => r.event.clone(),
    }
}

fn header(r: &Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Profile: {} ({} part{}{})",
        r.source,
        r.parts,
        if r.parts == 1 { "" } else { "s, summed" },
        r.creator
            .as_deref()
            .map(|c| format!(", creator {c}"))
            .unwrap_or_default()
    )?;
    for c in &r.commands {
        writeln!(out, "Command: {c}")?;
    }
    writeln!(
        out,
        "Event: {}; program total: {} {}",
        event_title(r),
        r.program_total,
        r.event
    )?;
    Ok(())
}

fn flat(r: &Report, opts: &Options, w: &Widths, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Flat profile:\n")?;
    header(r, out)?;
    if r.flat_total != r.program_total {
        writeln!(
            out,
            "Self costs of the functions listed sum to {} {} (the 100 % of this table)",
            r.flat_total, r.event
        )?;
    }
    if !opts.brief {
        writeln!(
            out,
            "Costs are {} counts, not seconds; `total/call` is the inclusive cost Callgrind measured.",
            r.event
        )?;
    }
    out.write_all(b"\n")?;
    let total = if r.flat_total != 0 {
        r.flat_total as f64
    } else {
        1.0
    };
    let cw = w.cost;
    let kw = w.calls;
    let per = format!("{}/call", r.event);
    writeln!(
        out,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}",
        "%", "cumulative", "self", "", "self", "total"
    )?;
    writeln!(
        out,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}  name",
        "time", r.event, r.event, "calls", per, per
    )?;
    let mut accum = 0i128;
    for i in r.flat_order() {
        if !r.flat_shows(opts, i) {
            continue;
        }
        let s = r.self_cost[i];
        accum += s;
        write!(
            out,
            "{:6.2} {accum:>cw$} {s:>cw$}",
            100.0 * s as f64 / total
        )?;
        let calls = r.ncalls[i];
        if calls != 0 {
            write!(out, " {calls:>kw$} {:>cw$.2}", s as f64 / calls as f64)?;
            match r.total_per_call(i) {
                Some(t) => write!(out, " {t:>cw$.2}  ")?,
                None => write!(out, " {:>cw$}  ", "")?,
            }
        } else {
            write!(out, " {:>kw$} {:>cw$} {:>cw$}  ", "", "", "")?;
        }
        let name = &r.table.routines[i].display;
        match r.graph.cycle[i] {
            0 => writeln!(out, "{name}")?,
            c => writeln!(out, "{name} <cycle {c}>")?,
        }
    }
    if !opts.brief {
        out.write_all(FLAT_BLURB.as_bytes())?;
    }
    Ok(())
}

fn call_graph(r: &Report, opts: &Options, w: &Widths, out: &mut impl Write) -> io::Result<()> {
    let g = &r.graph;
    if opts.brief {
        writeln!(out, "\t\t\tCall graph\n")?;
    } else {
        writeln!(out, "\t\t     Call graph (explanation follows)\n")?;
    }
    header(r, out)?;
    let mut print_time = g.print_time;
    if print_time != 0.0 {
        writeln!(
            out,
            "Cost propagated (the 100 % of `% time`): {:.0} {}",
            print_time, r.event
        )?;
    } else {
        writeln!(out, "No cost propagated")?;
        print_time = 1.0;
    }
    if !opts.brief {
        writeln!(
            out,
            "`children` is gprof's estimate (a callee's cost shared among its callers by calls);\n`measured` is the inclusive cost Callgrind recorded."
        )?;
    }
    out.write_all(b"\n")?;
    let (iw, cw, kw) = (w.index, w.cost, w.calls);
    writeln!(
        out,
        "{:<iw$} {:>5} {:>cw$} {:>cw$} {:>cw$} {:>kw$} {:kw$}     name",
        "index", "%time", "self", "children", "measured", "called", ""
    )?;
    let sep = "-".repeat(iw + 7 + 3 * (cw + 1) + 2 * kw + 2 + 20);
    // Lines are put together here and written in large pieces.
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    for &node in &g.order {
        if !r.graph_shows(opts, node) {
            continue;
        }
        let idx = format!("[{}]", g.index[node]);
        let pct = 100.0 * (g.prop_self[node] + g.prop_child[node]) / print_time;
        let calls = |n: usize| CalledCell(g, n, kw);
        if g.is_cycle(node) {
            writeln!(
                buf,
                "{idx:<iw$} {pct:5.1} {} {} {} {} <cycle {} as a whole> [{}]",
                CostCell(g.prop_self[node], cw),
                CostCell(g.prop_child[node], cw),
                MeasuredCell(r.measured[node], cw),
                calls(node),
                g.cycle[node],
                g.index[node]
            )?;
            for m in g.sorted_members(node) {
                spaces(&mut buf, iw + 7);
                writeln!(
                    buf,
                    "{} {} {} {}     {}",
                    CostCell(g.prop_self[m], cw),
                    CostCell(g.prop_child[m], cw),
                    MeasuredCell(None, cw),
                    calls(m),
                    r.print_name(m)
                )?;
            }
        } else {
            let parents = g.sorted_parents(node);
            if parents.is_empty() {
                spaces(&mut buf, iw + 7 + 3 * (cw + 1) + 2 * (kw + 1) + 4);
                buf.extend_from_slice(b"<spontaneous>\n");
            }
            for a in parents {
                arc_line(r, a, g.graph.arcs[a].parent, w, &mut buf);
            }
            writeln!(
                buf,
                "{idx:<iw$} {pct:5.1} {} {} {} {} {}",
                CostCell(g.prop_self[node], cw),
                CostCell(g.prop_child[node], cw),
                MeasuredCell(r.measured[node], cw),
                calls(node),
                r.print_name(node)
            )?;
            for a in g.sorted_children(node) {
                arc_line(r, a, g.graph.arcs[a].child, w, &mut buf);
            }
        }
        buf.extend_from_slice(sep.as_bytes());
        buf.push(b'\n');
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    if !opts.brief {
        out.write_all(CALL_GRAPH_BLURB.as_bytes())?;
    }
    Ok(())
}

/// Appends `n` spaces.
fn spaces(buf: &mut Vec<u8>, n: usize) {
    buf.resize(buf.len() + n, b' ');
}

/// Appends the decimal digits of `v`, right-aligned in `w` columns (left-
/// aligned with `left`). Padding through `fmt` goes a character at a time,
/// which was most of the time of a report with millions of lines.
fn number(buf: &mut Vec<u8>, v: i128, w: usize, left: bool) {
    let mut digits = [0u8; 48];
    let mut i = digits.len();
    let mut u = v.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (u % 10) as u8;
        u /= 10;
        if u == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        digits[i] = b'-';
    }
    let d = &digits[i..];
    let pad = w.saturating_sub(d.len());
    if !left {
        spaces(buf, pad);
    }
    buf.extend_from_slice(d);
    if left {
        spaces(buf, pad);
    }
}

/// One of gprof's (fractional) costs in `w` columns, rounded as
/// [`CostCell`] rounds.
fn cost_number(buf: &mut Vec<u8>, v: f64, w: usize) {
    let r = v.round_ties_even();
    if r.abs() < 9.0e15 {
        number(buf, r as i128, w, false);
    } else {
        let _ = write!(buf, "{}", CostCell(v, w));
    }
}

/// A caller or callee line: the arc's propagated shares (none within a
/// cycle), its measured cost, and its calls out of the callee's calls.
fn arc_line(r: &Report, a: usize, other: usize, w: &Widths, buf: &mut Vec<u8>) {
    let g = &r.graph;
    let (iw, cw, kw) = (w.index, w.cost, w.calls);
    let arc = &g.graph.arcs[a];
    spaces(buf, iw + 7);
    if r.within(a) {
        spaces(buf, 2 * (cw + 1));
        number(buf, r.arc_measured[a], cw, false);
        buf.push(b' ');
        number(buf, i128::from(arc.count), kw, false);
        spaces(buf, kw + 6);
    } else {
        cost_number(buf, arc.time, cw);
        buf.push(b' ');
        cost_number(buf, arc.child_time, cw);
        buf.push(b' ');
        number(buf, r.arc_measured[a], cw, false);
        buf.push(b' ');
        number(buf, i128::from(arc.count), kw, false);
        buf.push(b'/');
        number(buf, i128::from(g.ncalls[g.group(arc.child)]), kw, true);
        spaces(buf, 5);
    }
    let _ = writeln!(buf, "{}", r.print_name(other));
}

fn index(r: &Report, opts: &Options, out: &mut impl Write) -> io::Result<()> {
    let names = r.index_entries(opts).into_iter().map(|node| {
        let mut s = r.table.routines[node].display.clone();
        if let Some(q) = &r.qualifier[node] {
            let _ = write!(s, " ({q})");
        }
        (node, s)
    });
    out.write_all(super::text::index_layout(&r.graph, names, opts.width).as_bytes())
}

fn num(v: i128) -> Value {
    match i64::try_from(v) {
        Ok(x) => json!(x),
        Err(_) => json!(v as f64),
    }
}

/// The report as JSON: the same rows and numbers as the text (field names
/// as in the gmon report's JSON), costs in the event's unit: `self` and
/// `measured` exact, `descendants` (the text's `children` column) and the
/// arcs' shares as gprof computes them, unrounded; `parents` and
/// `children` are the arcs.
pub fn json(r: &Report, opts: &Options) -> String {
    let g = &r.graph;
    let mut doc = serde_json::Map::new();
    doc.insert("profile".into(), json!(r.source));
    doc.insert("creator".into(), json!(r.creator));
    doc.insert("commands".into(), json!(r.commands));
    doc.insert("parts".into(), json!(r.parts));
    doc.insert("event".into(), json!(r.event));
    doc.insert("event_long_name".into(), json!(r.event_long));
    doc.insert("events".into(), json!(r.events));
    doc.insert("program_total".into(), num(r.program_total));
    doc.insert("flat_total".into(), num(r.flat_total));
    doc.insert("propagated_total".into(), json!(g.print_time));
    let name = |n: usize| -> String {
        if g.is_cycle(n) {
            format!("<cycle {}>", g.cycle[n])
        } else {
            r.table.routines[n].display.clone()
        }
    };
    let cycle = |n: usize| (g.cycle[n] != 0).then_some(g.cycle[n]);
    if opts.flat {
        let rows: Vec<Value> = r
            .flat_order()
            .into_iter()
            .filter(|&i| r.flat_shows(opts, i))
            .map(|i| {
                let rt = &r.table.routines[i];
                let calls = r.ncalls[i];
                json!({
                    "name": rt.display,
                    "file": rt.file,
                    "object": r.objects[i],
                    "cycle": cycle(i),
                    "self": num(r.self_cost[i]),
                    "percent": if r.flat_total != 0 { 100.0 * r.self_cost[i] as f64 / r.flat_total as f64 } else { 0.0 },
                    "calls": calls,
                    "self_calls": g.self_calls[i],
                    "self_per_call": (calls != 0).then(|| r.self_cost[i] as f64 / calls as f64),
                    "measured": r.measured[i].map(num),
                    "total_per_call": r.total_per_call(i),
                    "descendants": g.child_time[i],
                })
            })
            .collect();
        doc.insert("flat".into(), Value::Array(rows));
    }
    if opts.graph {
        let print_time = if g.print_time != 0.0 {
            g.print_time
        } else {
            1.0
        };
        let arc = |a: usize, other: usize| {
            let arc = &g.graph.arcs[a];
            let mut v = json!({
                "name": name(other),
                "index": g.index[other],
                "cycle": cycle(other),
                "count": arc.count,
                "measured": num(r.arc_measured[a]),
                "within_cycle": r.within(a),
            });
            if !r.within(a) {
                v["self"] = json!(arc.time);
                v["descendants"] = json!(arc.child_time);
                v["total_calls"] = json!(g.ncalls[g.group(arc.child)]);
            }
            v
        };
        let entries: Vec<Value> = g
            .order
            .iter()
            .copied()
            .filter(|&n| r.graph_shows(opts, n))
            .map(|n| {
                let mut e = json!({
                    "index": g.index[n],
                    "name": name(n),
                    "cycle": cycle(n),
                    "percent": 100.0 * (g.prop_self[n] + g.prop_child[n]) / print_time,
                    "self": g.prop_self[n],
                    "descendants": g.prop_child[n],
                    "measured": r.measured[n].map(num),
                    "called": g.ncalls[n],
                    "self_calls": g.self_calls[n],
                });
                if g.is_cycle(n) {
                    e["members"] = g
                        .sorted_members(n)
                        .into_iter()
                        .map(|m| {
                            json!({
                                "name": name(m),
                                "index": g.index[m],
                                "self": g.prop_self[m],
                                "descendants": g.prop_child[m],
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
            })
            .collect();
        doc.insert("call_graph".into(), Value::Array(entries));
        doc.insert(
            "cycles".into(),
            g.cycles
                .iter()
                .map(|c| {
                    let node = g.cycle_node(c.number);
                    let members: Vec<Value> = c
                        .members
                        .iter()
                        .map(|&m| {
                            let rt = &r.table.routines[m];
                            json!({
                                "name": rt.display,
                                "file": rt.file,
                                "object": r.objects[m],
                                "index": g.index[m],
                                "self": num(r.self_cost[m]),
                            })
                        })
                        .collect();
                    json!({
                        "number": c.number,
                        "index": g.index[node],
                        "members": members,
                        "self": g.self_time[node],
                        "measured": r.measured[node].map(num),
                        "calls_in": g.ncalls[node],
                        "calls_within": g.self_calls[node],
                    })
                })
                .collect(),
        );
        doc.insert(
            "index".into(),
            r.index_entries(opts)
                .into_iter()
                .map(|i| {
                    json!({
                        "name": r.table.routines[i].display,
                        "index": g.index[i],
                        "qualifier": r.qualifier[i],
                    })
                })
                .collect(),
        );
    }
    if !r.notices.is_empty() {
        doc.insert(
            "warnings".into(),
            r.notices.iter().map(|n| json!(n.0)).collect(),
        );
    }
    let mut s = serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default();
    s.push('\n');
    s
}

/// What the flat profile's columns mean (printed unless `-b`).
pub const FLAT_BLURB: &str = "
 Columns of the flat profile (costs are counts of the event, from the
 Callgrind profile, not seconds):

 % time      the function's self cost as a share of all self costs listed.
 cumulative  running sum of the self column down to this line.
 self        cost of the function's own code, without the functions it
             calls. The table is sorted by it, then by calls, then by name.
 calls       calls from other functions (calls to itself are not counted
             here; the call graph shows them after a '+'). Blank if none.
 self/call   self cost divided by calls.
 total/call  the inclusive cost Callgrind measured (the function and
             everything it called), divided by calls. Blank for members of
             a cycle: they have no inclusive cost of their own, see the
             cycle's entry in the call graph.
 name        the function, with its cycle if it is in one.
";

/// What the call graph's columns mean (printed unless `-b`).
pub const CALL_GRAPH_BLURB: &str = "
 Each entry, between dashed lines, is about the function on the line with
 its index in brackets. Its callers are listed above that line, the
 functions it calls below it.

 Costs are counts of the event from the Callgrind profile. Two columns are
 gprof's and one is measured:

 self       own cost. On the function's line, its self cost; on a caller's
            or callee's line, the part of the callee's self cost that gprof
            charges to that call, in proportion to its share of the calls.
 children   gprof's estimate of the cost of the functions called, on the
            assumption that every call to a function costs the same.
            A callee's self + children is shared among its callers by their
            calls.
 measured   the inclusive cost Callgrind recorded: for a caller or callee
            line, that of the arc's calls; for the function's line, the
            function's inclusive cost (correct under recursion); for a
            cycle, the cost of the whole cycle. Where measured differs much
            from self + children, calls to that function do not all cost
            the same. On a call between members of a cycle, the recorded
            cost includes the calls nested in it, which are counted again
            at every level of the recursion: it can exceed the total.

 % time     self + children as a share of all cost propagated.
 called     on the function's line, calls from other functions, then
            after '+' calls to itself (for a cycle: calls between its
            members). On a caller's line, calls from that caller / all
            calls; on a callee's line, calls to it from this function / all
            its calls. Calls recorded with calls=0 (active when a dump was
            written) count 0 and carry only their measured cost.
 name       the function, its cycle and its index; <spontaneous> when no
            caller is known.

 Functions that call each other directly or indirectly form a cycle. gprof
 treats a cycle as one function: its entry (<cycle N as a whole>) lists the
 members, calls between members propagate no cost and show no self or
 children, and a member's own line shows no measured cost.
";
