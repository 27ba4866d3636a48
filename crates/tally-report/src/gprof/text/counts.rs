//! The column set of reports of Callgrind profiles: gprof's flat profile,
//! call graph and index with costs as counts of the event, in columns as
//! wide as the largest number, and the `measured` column (the inclusive
//! cost Callgrind recorded) beside gprof's `self` and `children` estimates.

use std::fmt::Write;

use tally_analysis::gprof::{CallGraph, EventCounts, Measured, Options};

use super::columns::{Columns, Section, Unit, Widths};

/// The columns of a report of a Callgrind profile.
pub(super) fn columns<'a>(
    e: &'a EventCounts,
    g: &CallGraph,
    m: &'a Measured,
    opts: &Options,
) -> Columns<'a> {
    let width = widths(e, g, m);
    let (iw, cw, kw) = (width.index, width.cost, width.calls);

    let mut intro = format!("\n{}", header(e));
    if e.flat_total != e.program_total {
        let _ = writeln!(
            intro,
            "Self costs of the functions listed sum to {} {} (the 100 % of this table)",
            e.flat_total, e.event
        );
    }
    if !opts.brief {
        let _ = writeln!(
            intro,
            "Costs are {} counts, not seconds; `total/call` is the inclusive cost Callgrind measured.",
            e.event
        );
    }
    intro.push('\n');
    let per = format!("{}/call", e.event);
    let mut headings = String::new();
    let _ = writeln!(
        headings,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}",
        "%", "cumulative", "self", "", "self", "total"
    );
    let _ = writeln!(
        headings,
        "{:>6} {:>cw$} {:>cw$} {:>kw$} {:>cw$} {:>cw$}  name",
        "time", e.event, e.event, "calls", per, per
    );
    let flat = Section {
        intro,
        headings,
        total: if e.flat_total != 0 {
            e.flat_total as f64
        } else {
            1.0
        },
        blurb: if opts.brief { "" } else { FLAT_BLURB },
    };

    let mut intro = header(e);
    let mut print_time = g.print_time;
    if print_time != 0.0 {
        let _ = writeln!(
            intro,
            "Cost propagated (the 100 % of `% time`): {:.0} {}",
            print_time, e.event
        );
    } else {
        intro.push_str("No cost propagated\n");
        print_time = 1.0;
    }
    if !opts.brief {
        intro.push_str(
            "`children` is gprof's estimate (a callee's cost shared among its callers by calls);\n`measured` is the inclusive cost Callgrind recorded.\n",
        );
    }
    intro.push('\n');
    let graph = Section {
        intro,
        headings: format!(
            "{:<iw$} {:>5} {:>cw$} {:>cw$} {:>cw$} {:>kw$} {:kw$}     name\n",
            "index", "%time", "self", "children", "measured", "called", ""
        ),
        total: print_time,
        blurb: if opts.brief { "" } else { CALL_GRAPH_BLURB },
    };

    Columns {
        unit: Unit::Counts(e),
        measured: Some(m),
        separator: "-".repeat(iw + 7 + 3 * (cw + 1) + 2 * kw + 2 + 20),
        width,
        flat,
        graph,
        flat_cycles: true,
        member_zero_calls: false,
    }
}

/// Column widths, wide enough for every number printed.
fn widths(e: &EventCounts, g: &CallGraph, m: &Measured) -> Widths {
    let mut big = e.program_total.abs().max(e.flat_total.abs());
    for v in m.nodes.iter().flatten() {
        big = big.max(v.abs());
    }
    for &v in &m.arcs {
        big = big.max(v.abs());
    }
    for (&s, &c) in g.prop_self.iter().zip(&g.prop_child) {
        big = big.max((s + c).abs().round() as i128);
    }
    let mut calls = 0u64;
    for (&c, &s) in g.ncalls.iter().zip(&g.self_calls) {
        calls = calls.max(c).max(s);
    }
    let cost = 14.max(digits(big) + 1);
    let calls = 10.max(digits(i128::from(calls)));
    Widths {
        index: 6.max(digits(g.index.len() as i128) + 2),
        cost,
        calls,
        cumulative: cost,
        flat_self: cost,
        flat_calls: calls,
        per_call: cost,
    }
}

fn digits(v: i128) -> usize {
    v.to_string().len()
}

/// The lines naming the profile and the event, above both tables.
fn header(e: &EventCounts) -> String {
    let mut s = format!(
        "Profile: {} ({} part{}{})\n",
        e.source,
        e.parts,
        if e.parts == 1 { "" } else { "s, summed" },
        e.creator
            .as_deref()
            .map(|c| format!(", creator {c}"))
            .unwrap_or_default()
    );
    for c in &e.commands {
        let _ = writeln!(s, "Command: {c}");
    }
    let title = match &e.event_long {
        Some(l) => format!("{} ({l})", e.event),
        None => e.event.clone(),
    };
    let _ = writeln!(
        s,
        "Event: {title}; program total: {} {}",
        e.program_total, e.event
    );
    s
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
