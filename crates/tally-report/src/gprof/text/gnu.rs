//! The column set of gmon reports: GNU gprof's layout, column for column
//! (times in seconds from the histogram's samples, fixed widths, per-call
//! times with an SI prefix chosen for the slowest routine), so that tools
//! reading gprof's output (gprof2dot and others) read ours.

use std::fmt::Write;

use super::columns::{Columns, Section, Unit, Widths};
use tally_analysis::gprof::{Histogram, Options, Report};

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

/// GNU gprof's widths: fixed, whatever the numbers.
const WIDTHS: Widths = Widths {
    index: 6,
    cost: 7,
    calls: 7,
    cumulative: 9,
    flat_self: 8,
    flat_calls: 8,
    per_call: 8,
};

/// The header line of a report of a gmon.out made by sampling, whose arcs
/// count stacks, not calls (GNU gprof's own arcs are exact call counts).
const SAMPLED_ARCS: &str = "This gmon.out was made by sampling (tally record): call counts are sampled stacks through each arc, not calls.";

/// The columns of a gmon report.
pub(super) fn columns<'a>(report: &'a Report, h: &'a Histogram, opts: &Options) -> Columns<'a> {
    let (prefix, scale) = per_call_unit(report, h);
    let unit = format!("{prefix}{}/call", h.abbrev);
    let dim = &h.dimension;

    let mut intro = format!("\nEach sample counts as {} {dim}.\n", fmt_g(1.0 / h.hz));
    if h.sampled_arcs {
        intro.push_str(SAMPLED_ARCS);
        intro.push('\n');
    }
    let mut total = h.times.total;
    if total <= 0.0 {
        intro.push_str(" no time accumulated\n\n");
        total = 1.0;
    }
    let mut headings = String::new();
    let _ = writeln!(
        headings,
        "{:>5.5} {:>10.10} {:>8.8} {:>8.8} {:>8.8} {:>8.8}  {:<8.8}",
        "%  ", "cumulative", "self  ", "", "self  ", "total ", ""
    );
    let _ = writeln!(
        headings,
        "{:>5.5} {:>9.9}  {:>8.8} {:>8.8} {:>8.8} {:>8.8}  {:<8.8}",
        "time", dim, dim, "calls", unit, unit, "name"
    );
    let flat = Section {
        intro,
        headings,
        total,
        blurb: if opts.brief { "" } else { FLAT_BLURB },
    };

    let mut intro = format!(
        "\ngranularity: each sample hit covers {} byte(s)",
        (h.times.scale as i64) * 2
    );
    let mut print_time = report.graph.as_ref().map_or(0.0, |g| g.print_time);
    if print_time > 0.0 {
        let _ = write!(
            intro,
            " for {:.2}% of {:.2} seconds\n\n",
            100.0 / print_time,
            print_time / h.hz
        );
    } else {
        intro.push_str(" no time propagated\n\n");
        print_time = 1.0;
    }
    if h.sampled_arcs {
        intro.push_str(SAMPLED_ARCS);
        intro.push_str("\n\n");
    }
    let graph = Section {
        intro,
        headings: "index % time    self  children    called     name\n".to_owned(),
        total: print_time,
        blurb: if opts.brief { "" } else { CALL_GRAPH_BLURB },
    };

    Columns {
        unit: Unit::Seconds { h, scale },
        measured: None,
        width: WIDTHS,
        flat,
        graph,
        separator: "-".repeat(47),
        flat_cycles: false,
        member_zero_calls: true,
    }
}

/// The per-call unit: the SI prefix that shows the slowest routine's time
/// per call with 1 to 3 digits before the point, and its factor.
fn per_call_unit(report: &Report, h: &Histogram) -> (char, f64) {
    let mut top_time = 0.0;
    let mut found = false;
    // The largest time per call, whatever the order.
    for i in 0..report.table.len() {
        if report.ncalls[i] != 0 {
            let child = report.graph.as_ref().map_or(0.0, |g| g.child_time[i]);
            let call_time = (h.times.time[i] + child) / report.ncalls[i] as f64;
            if call_time > top_time {
                top_time = call_time;
                found = true;
            }
        }
    }
    let mut log_scale = 0;
    if found && top_time > 0.0 {
        let top = top_time / h.hz;
        log_scale = SI.len() - 1;
        for (k, (_, scale)) in SI.iter().enumerate() {
            let v = scale * top;
            if (1.0..1000.0).contains(&v) {
                log_scale = k;
                break;
            }
        }
    }
    SI[log_scale]
}

/// C's `%g` for the small positive numbers gprof prints with it.
fn fmt_g(v: f64) -> String {
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

/// The index's name of a routine: a static function's file follows it
/// (its base name unless `-L`), as GNU gprof tells such names apart.
pub(super) fn index_name(report: &Report, node: usize, opts: &Options) -> String {
    let mut name = report.display(node).to_owned();
    let r = &report.table.routines[node];
    if !opts.line
        && r.is_static
        && let Some(file) = r.file.as_deref()
    {
        let f = if opts.print_path {
            file
        } else {
            file.rsplit('/').next().unwrap_or(file)
        };
        let _ = write!(name, " ({f})");
    }
    name
}

/// What the flat profile's columns mean (printed unless `-b`).
const FLAT_BLURB: &str = "
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
const CALL_GRAPH_BLURB: &str = "
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
