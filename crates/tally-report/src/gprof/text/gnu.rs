//! The layout of gmon reports: GNU gprof's, column for column (times in
//! seconds from the histogram's samples, per-call times with an SI prefix
//! chosen for the slowest routine), so that tools reading gprof's output
//! (gprof2dot and others) read ours.

use std::fmt::Write;

use tally_analysis::gprof::CallGraph;

use crate::gprof::{Histogram, Options, Report};

/// SI prefixes for the per-call columns, from tera to atto, with the factor
/// that brings a time in seconds to that unit.
const SI: [(char, f64); 11] = [
    ('T', 1e-12),
    ('G', 1e-09),
    ('M', 1e-06),
    ('K', 1e-03),
    (' ', 1e+00),
    ('m', 1e+03),
    ('u', 1e+06),
    ('n', 1e+09),
    ('p', 1e+12),
    ('f', 1e+15),
    ('a', 1e+18),
];

const SEPARATOR: &str = "-----------------------------------------------\n";

/// C's `%g` for the small positive numbers gprof prints with it.
pub(super) fn fmt_g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let exp = v.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{v:.5e}");
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = trim_zeros(m);
        let e: i32 = e.parse().unwrap_or(0);
        format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs())
    } else {
        let decimals = (5 - exp).max(0) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_owned()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn child_time(report: &Report, i: usize) -> f64 {
    report.graph.as_ref().map_or(0.0, |g| g.child_time[i])
}

pub(super) fn flat(
    report: &Report,
    h: &Histogram,
    opts: &Options,
    out: &mut String,
    first: &mut bool,
) {
    if !*first {
        out.push_str("\x0c\n");
    }
    *first = false;
    out.push_str("Flat profile:\n");
    let order = report.flat_order();
    let hz = h.hz;

    // The per-call unit: the one that shows the slowest routine's time per
    // call with 1 to 3 digits before the point.
    let mut top_time = 0.0;
    let mut found = false;
    for &i in &order {
        if report.ncalls[i] != 0 {
            let call_time = (h.times.time[i] + child_time(report, i)) / report.ncalls[i] as f64;
            if call_time > top_time {
                top_time = call_time;
                found = true;
            }
        }
    }
    let mut log_scale = 0;
    if found && top_time > 0.0 {
        let top = top_time / hz;
        log_scale = SI.len() - 1;
        for (k, (_, scale)) in SI.iter().enumerate() {
            let v = scale * top;
            if (1.0..1000.0).contains(&v) {
                log_scale = k;
                break;
            }
        }
    }
    let (prefix, scale) = SI[log_scale];
    let unit = format!("{prefix}{}/call", h.abbrev);
    let _ = write!(
        out,
        "\nEach sample counts as {} {}.\n",
        fmt_g(1.0 / hz),
        h.dimension
    );
    let mut total = h.times.total;
    if total <= 0.0 {
        out.push_str(" no time accumulated\n\n");
        total = 1.0;
    }
    let dim = &h.dimension;
    let _ = writeln!(
        out,
        "{:>5.5} {:>10.10} {:>8.8} {:>8.8} {:>8.8} {:>8.8}  {:<8.8}",
        "%  ", "cumulative", "self  ", "", "self  ", "total ", ""
    );
    let _ = writeln!(
        out,
        "{:>5.5} {:>9.9}  {:>8.8} {:>8.8} {:>8.8} {:>8.8}  {:<8.8}",
        "time", dim, dim, "calls", unit, unit, "name"
    );
    let mut accum = 0.0;
    for &i in &order {
        if !report.flat_selection.selects(i) {
            continue;
        }
        let calls = report.ncalls[i];
        let time = h.times.time[i];
        if !opts.zeros && calls == 0 && time == 0.0 {
            continue;
        }
        accum += time;
        let pct = if total > 0.0 {
            100.0 * time / total
        } else {
            0.0
        };
        let _ = write!(out, "{pct:6.2} {:9.2} {:8.2}", accum / hz, time / hz);
        if calls != 0 {
            let c = calls as f64;
            let _ = write!(
                out,
                " {calls:8} {:8.2} {:8.2}  ",
                scale * time / hz / c,
                scale * (time + child_time(report, i)) / hz / c
            );
        } else {
            let _ = write!(out, " {:>8} {:>8} {:>8}  ", "", "", "");
        }
        out.push_str(&report.display[i]);
        out.push('\n');
    }
    if !opts.brief {
        out.push_str(FLAT_BLURB);
    }
}

pub(super) fn call_graph(
    report: &Report,
    h: &Histogram,
    g: &CallGraph,
    opts: &Options,
    out: &mut String,
    first: &mut bool,
) {
    let hz = h.hz;
    if !*first {
        out.push_str("\x0c\n");
    }
    *first = false;
    if opts.brief {
        out.push_str("\t\t\tCall graph\n\n");
    } else {
        out.push_str("\t\t     Call graph (explanation follows)\n\n");
    }
    let _ = write!(
        out,
        "\ngranularity: each sample hit covers {} byte(s)",
        (h.times.scale as i64) * 2
    );
    let mut print_time = g.print_time;
    if print_time > 0.0 {
        let _ = write!(
            out,
            " for {:.2}% of {:.2} seconds\n\n",
            100.0 / print_time,
            print_time / hz
        );
    } else {
        out.push_str(" no time propagated\n\n");
        print_time = 1.0;
    }
    out.push_str("index % time    self  children    called     name\n");
    for &node in &g.order {
        if !report.graph_shows(opts, node) {
            continue;
        }
        if g.is_cycle(node) {
            let number = g.cycle[node];
            let idx = format!("[{}]", g.index[node]);
            let _ = write!(
                out,
                "{idx:<6.6} {:5.1} {:7.2} {:7.2} {:7}",
                100.0 * (g.prop_self[node] + g.prop_child[node]) / print_time,
                g.prop_self[node] / hz,
                g.prop_child[node] / hz,
                g.ncalls[node]
            );
            if g.self_calls[node] != 0 {
                let _ = write!(out, "+{:<7}", g.self_calls[node]);
            } else {
                let _ = write!(out, " {:7}", "");
            }
            let _ = writeln!(out, " <cycle {number} as a whole> [{}]", g.index[node]);
            for m in g.sorted_members(node) {
                let _ = write!(
                    out,
                    "{:6} {:5} {:7.2} {:7.2} {:7}",
                    "",
                    "",
                    g.prop_self[m] / hz,
                    g.prop_child[m] / hz,
                    g.ncalls[m]
                );
                if g.self_calls[m] != 0 {
                    let _ = write!(out, "+{:<7}", g.self_calls[m]);
                } else {
                    let _ = write!(out, " {:7}", "");
                }
                let _ = writeln!(out, "     {}", report.print_name(m));
            }
        } else {
            parents(report, h, g, node, out);
            let idx = format!("[{}]", g.index[node]);
            let _ = write!(
                out,
                "{idx:<6.6} {:5.1} {:7.2} {:7.2}",
                100.0 * (g.prop_self[node] + g.prop_child[node]) / print_time,
                g.prop_self[node] / hz,
                g.prop_child[node] / hz
            );
            if g.ncalls[node] + g.self_calls[node] != 0 {
                let _ = write!(out, " {:7}", g.ncalls[node]);
                if g.self_calls[node] != 0 {
                    let _ = write!(out, "+{:<7} ", g.self_calls[node]);
                } else {
                    let _ = write!(out, " {:7} ", "");
                }
            } else {
                let _ = write!(out, " {:7} {:7} ", "", "");
            }
            let _ = writeln!(out, "{}", report.print_name(node));
            children(report, h, g, node, out);
        }
        out.push_str(SEPARATOR);
    }
    if !opts.brief {
        out.push_str(CALL_GRAPH_BLURB);
    }
}

fn parents(report: &Report, h: &Histogram, g: &CallGraph, child: usize, out: &mut String) {
    let head = g.group(child);
    let arcs = g.sorted_parents(child);
    if arcs.is_empty() {
        let _ = writeln!(
            out,
            "{:6} {:5} {:7} {:7} {:7} {:7}     <spontaneous>",
            "", "", "", "", "", ""
        );
        return;
    }
    for a in arcs {
        arc_line(report, h, g, a, g.graph.arcs[a].parent, g.ncalls[head], out);
    }
}

fn children(report: &Report, h: &Histogram, g: &CallGraph, parent: usize, out: &mut String) {
    for a in g.sorted_children(parent) {
        let child = g.graph.arcs[a].child;
        arc_line(report, h, g, a, child, g.ncalls[g.group(child)], out);
    }
}

/// A caller's or callee's line: the count alone for a self call or a call
/// within a cycle, else the propagated times and `count/total`.
fn arc_line(
    report: &Report,
    h: &Histogram,
    g: &CallGraph,
    a: usize,
    other: usize,
    total_calls: u64,
    out: &mut String,
) {
    let arc = &g.graph.arcs[a];
    let within = report.within(a);
    let name = report.print_name(other);
    if within {
        let _ = writeln!(
            out,
            "{:6} {:5} {:7} {:7} {:7} {:7}     {name}",
            "", "", "", "", arc.count, ""
        );
    } else {
        let _ = writeln!(
            out,
            "{:6} {:5} {:7.2} {:7.2} {:7}/{:<7}     {name}",
            "",
            "",
            arc.time / h.hz,
            arc.child_time / h.hz,
            arc.count,
            total_calls
        );
    }
}

pub(super) fn index(report: &Report, g: &CallGraph, opts: &Options, out: &mut String) {
    let names = report.index_entries(opts).into_iter().map(|node| {
        let mut name = report.display[node].clone();
        let r = &report.table.routines[node];
        if !opts.line
            && r.is_static
            && let Some(file) = &r.file
        {
            let f = if opts.print_path {
                file.as_str()
            } else {
                file.rsplit('/').next().unwrap_or(file)
            };
            let _ = write!(name, " ({f})");
        }
        (node, name)
    });
    out.push_str(&super::index_layout(g, names, opts.width));
}

/// What the flat profile's columns mean (printed unless `-b`).
pub(super) const FLAT_BLURB: &str = "
 %         share of the program's sampled time spent in this function's
 time      own code.

 cumulative running sum of the self seconds of this line and the lines
 seconds   above it.

 self      time spent in the function's own code, from the samples whose
 seconds   address falls in it. The flat profile is sorted by this column,
           then by calls, then by name.

 calls     times the function was called, counted by the code the compiler
           added for -pg; blank if it was never called or was not compiled
           with -pg.

 self      average self time per call, in the unit of the column header.
 ms/call

 total     average time per call of the function and the functions it
 ms/call   calls, in the unit of the column header.

 name      the function; the flat profile lists every function the
           histogram or the call counts mention.
";

/// What the call graph's columns mean (printed unless `-b`).
pub(super) const CALL_GRAPH_BLURB: &str = "
 Each entry of the call graph is the lines between two dashed lines. The
 line with the index number in brackets is the function the entry is
 about; the lines above it are its callers (parents), the lines below it
 the functions it calls (children).

 For the function's own line:
   index      the function's number, used to refer to it in this listing.
   % time     share of the total time spent in the function and its
              children. Functions called from several places can make
              these add up to more than 100%.
   self       time spent in the function's own code.
   children   time its children (and their children) spent on its behalf,
              estimated by giving each call to a child an equal share of
              the child's time.
   called     times it was called from other functions; a second number
              after a '+' counts the calls it made to itself.
   name       its name and index; members of a cycle also show the
              cycle's number.

 For each caller (parent):
   self       the share of the function's self time charged to this
              caller, in proportion to the calls it made.
   children   the share of the function's children's time charged to it.
   called     calls from this caller / all calls to the function (not
              counting calls to itself).
   A function whose callers are unknown shows <spontaneous>.

 For each child:
   self       the share of the child's self time charged to this
              function, in proportion to the calls it made.
   children   the share of the child's children's time charged to it.
   called     calls to the child from this function / all calls to the
              child.

 Functions that call each other, directly or through others, form a
 cycle. A cycle gets an entry of its own (\"<cycle N as a whole>\") listing
 its members; times are passed between a cycle and the rest of the
 program as if the cycle were one function, and calls among its members
 are shown without times.
";
