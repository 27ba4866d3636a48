//! The layout of reports of Callgrind profiles: gprof's flat profile, call
//! graph and index with costs as counts of the event, in columns as wide
//! as the largest number, and the `measured` column (the inclusive cost
//! Callgrind recorded) beside gprof's `self` and `children` estimates.
//! Lines are put together in a byte buffer and written in large pieces:
//! such reports can have millions of lines.

use std::fmt::Write as _;
use std::io::{self, Write};

use tally_analysis::gprof::CallGraph;

use crate::gprof::{EventCounts, Measured, Options, Report};

/// A report of a Callgrind profile, with its parts that such reports
/// always have.
pub(super) struct View<'a> {
    /// The report.
    pub r: &'a Report,
    /// The event counts.
    pub e: &'a EventCounts,
    /// The call graph.
    pub g: &'a CallGraph,
    /// The measured inclusive costs.
    pub m: &'a Measured,
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
    fn of(r: &View<'_>) -> Widths {
        let g = r.g;
        let mut big = r.e.program_total.abs().max(r.e.flat_total.abs());
        for m in r.m.nodes.iter().chain(std::iter::once(&None)).flatten() {
            big = big.max(m.abs());
        }
        for &m in &r.m.arcs {
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
pub(super) fn write<W: Write>(r: &View<'_>, opts: &Options, out: &mut W) -> io::Result<()> {
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

fn event_title(r: &View<'_>) -> String {
    match &r.e.event_long {
        Some(l) => format!("{} ({l})", r.e.event),
        None => r.e.event.clone(),
    }
}

fn header(r: &View<'_>, out: &mut impl Write) -> io::Result<()> {
    writeln!(
        out,
        "Profile: {} ({} part{}{})",
        r.e.source,
        r.e.parts,
        if r.e.parts == 1 { "" } else { "s, summed" },
        r.e.creator
            .as_deref()
            .map(|c| format!(", creator {c}"))
            .unwrap_or_default()
    )?;
    for c in &r.e.commands {
        writeln!(out, "Command: {c}")?;
    }
    writeln!(
        out,
        "Event: {}; program total: {} {}",
        event_title(r),
        r.e.program_total,
        r.e.event
    )?;
    Ok(())
}

fn flat(r: &View<'_>, opts: &Options, w: &Widths, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "Flat profile:\n")?;
    header(r, out)?;
    if r.e.flat_total != r.e.program_total {
        writeln!(
            out,
            "Self costs of the functions listed sum to {} {} (the 100 % of this table)",
            r.e.flat_total, r.e.event
        )?;
    }
    if !opts.brief {
        writeln!(
            out,
            "Costs are {} counts, not seconds; `total/call` is the inclusive cost Callgrind measured.",
            r.e.event
        )?;
    }
    out.write_all(b"\n")?;
    let total = if r.e.flat_total != 0 {
        r.e.flat_total as f64
    } else {
        1.0
    };
    let cw = w.cost;
    let kw = w.calls;
    let per = format!("{}/call", r.e.event);
    writeln!(
        out,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}",
        "%", "cumulative", "self", "", "self", "total"
    )?;
    writeln!(
        out,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}  name",
        "time", r.e.event, r.e.event, "calls", per, per
    )?;
    let mut accum = 0i128;
    for i in r.r.flat_order() {
        if !r.r.flat_shows(opts, i) {
            continue;
        }
        let s = r.e.self_cost[i];
        accum += s;
        write!(
            out,
            "{:6.2} {accum:>cw$} {s:>cw$}",
            100.0 * s as f64 / total
        )?;
        let calls = r.r.ncalls[i];
        if calls != 0 {
            write!(out, " {calls:>kw$} {:>cw$.2}", s as f64 / calls as f64)?;
            match r.r.total_per_call(i) {
                Some(t) => write!(out, " {t:>cw$.2}  ")?,
                None => write!(out, " {:>cw$}  ", "")?,
            }
        } else {
            write!(out, " {:>kw$} {:>cw$} {:>cw$}  ", "", "", "")?;
        }
        let name = &r.r.display[i];
        match r.g.cycle[i] {
            0 => writeln!(out, "{name}")?,
            c => writeln!(out, "{name} <cycle {c}>")?,
        }
    }
    if !opts.brief {
        out.write_all(FLAT_BLURB.as_bytes())?;
    }
    Ok(())
}

fn call_graph(r: &View<'_>, opts: &Options, w: &Widths, out: &mut impl Write) -> io::Result<()> {
    let g = r.g;
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
            print_time, r.e.event
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
        if !r.r.graph_shows(opts, node) {
            continue;
        }
        let idx = format!("[{}]", g.index[node]);
        let pct = 100.0 * (g.prop_self[node] + g.prop_child[node]) / print_time;
        let calls = |n: usize| CalledCell(g, n, kw);
        if !g.is_cycle(node) {
            let parents = g.sorted_parents(node);
            if parents.is_empty() {
                spaces(&mut buf, iw + 7 + 3 * (cw + 1) + 2 * (kw + 1) + 4);
                buf.extend_from_slice(b"<spontaneous>\n");
            }
            for a in parents {
                arc_line(r, a, g.graph.arcs[a].parent, w, &mut buf);
            }
        }
        let name = if g.is_cycle(node) {
            format!("<cycle {} as a whole> [{}]", g.cycle[node], g.index[node])
        } else {
            r.r.print_name(node).to_string()
        };
        writeln!(
            buf,
            "{idx:<iw$} {pct:5.1} {} {} {} {} {name}",
            CostCell(g.prop_self[node], cw),
            CostCell(g.prop_child[node], cw),
            MeasuredCell(r.m.nodes[node], cw),
            calls(node),
        )?;
        if g.is_cycle(node) {
            for m in g.sorted_members(node) {
                spaces(&mut buf, iw + 7);
                writeln!(
                    buf,
                    "{} {} {} {}     {}",
                    CostCell(g.prop_self[m], cw),
                    CostCell(g.prop_child[m], cw),
                    MeasuredCell(None, cw),
                    calls(m),
                    r.r.print_name(m)
                )?;
            }
        } else {
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
fn arc_line(r: &View<'_>, a: usize, other: usize, w: &Widths, buf: &mut Vec<u8>) {
    let g = r.g;
    let (iw, cw, kw) = (w.index, w.cost, w.calls);
    let arc = &g.graph.arcs[a];
    spaces(buf, iw + 7);
    if r.r.within(a) {
        spaces(buf, 2 * (cw + 1));
        number(buf, r.m.arcs[a], cw, false);
        buf.push(b' ');
        number(buf, i128::from(arc.count), kw, false);
        spaces(buf, kw + 6);
    } else {
        cost_number(buf, arc.time, cw);
        buf.push(b' ');
        cost_number(buf, arc.child_time, cw);
        buf.push(b' ');
        number(buf, r.m.arcs[a], cw, false);
        buf.push(b' ');
        number(buf, i128::from(arc.count), kw, false);
        buf.push(b'/');
        number(buf, i128::from(g.ncalls[g.group(arc.child)]), kw, true);
        spaces(buf, 5);
    }
    let _ = writeln!(buf, "{}", r.r.print_name(other));
}

fn index(r: &View<'_>, opts: &Options, out: &mut impl Write) -> io::Result<()> {
    let names = r.r.index_entries(opts).into_iter().map(|node| {
        let mut s = r.r.display[node].clone();
        if let Some(q) = &r.e.qualifier[node] {
            let _ = write!(s, " ({q})");
        }
        (node, s)
    });
    out.write_all(super::index_layout(r.g, names, opts.width).as_bytes())
}

/// What the flat profile's columns mean (printed unless `-b`).
const FLAT_BLURB: &str = "
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
const CALL_GRAPH_BLURB: &str = "
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
