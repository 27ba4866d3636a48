//! The gprof report as text: the flat profile, the call graph and its
//! index, as the options choose. Which columns a report has depends on
//! what its costs are: gmon samples are laid out as GNU gprof lays them out
//! (`gnu`, times in seconds, fixed widths), Callgrind event counts with
//! the measured inclusive cost beside gprof's estimate (`counts`). The
//! index by name is laid out the same for both.

mod counts;
mod gnu;

use std::fmt::Write as _;
use std::io;

use super::{Costs, Options, Report};

/// Writes the report: flat profile, call graph and index, as chosen.
pub fn write_to(report: &Report, opts: &Options, out: &mut impl io::Write) -> io::Result<()> {
    match (&report.costs, &report.graph, &report.measured) {
        (Costs::Samples(h), _, _) => {
            let mut s = String::new();
            let mut first = true;
            if opts.flat {
                gnu::flat(report, h, opts, &mut s, &mut first);
            }
            if opts.graph
                && let Some(g) = &report.graph
            {
                gnu::call_graph(report, h, g, opts, &mut s, &mut first);
                gnu::index(report, g, opts, &mut s);
            }
            out.write_all(s.as_bytes())
        }
        (Costs::Events(e), Some(g), Some(m)) => {
            let view = counts::View { r: report, e, g, m };
            counts::write(&view, opts, out)
        }
        // A report of event counts always has a call graph and measured
        // costs; without them there is nothing to lay out.
        (Costs::Events(_), _, _) => Ok(()),
    }
}

/// The text report as a string.
pub fn write(report: &Report, opts: &Options) -> String {
    let mut v = Vec::new();
    // Writing to memory does not fail.
    let _ = write_to(report, opts, &mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// The index by function name, in gprof's layout: three columns filled
/// down, each entry `[index] name` (or `(index)` for entries the call graph
/// does not show), the names (already sorted, with any suffix) first, then
/// the cycles.
fn index_layout(
    g: &tally_analysis::gprof::CallGraph,
    names: impl Iterator<Item = (usize, String)>,
    width: usize,
) -> String {
    let mut entries: Vec<(usize, String)> = names.collect();
    for c in &g.cycles {
        entries.push((g.cycle_node(c.number), format!("<cycle {}>", c.number)));
    }
    let column_width = (width.max(1) as i64 - 1) / 3;
    let mut out = String::from("\x0c\nIndex by function name\n\n");
    let todo = entries.len();
    let rows = todo.div_ceil(3);
    for i in 0..rows {
        // gprof counts the index number but not the blanks around it.
        let mut col: i64 = 0;
        let mut starting_col: i64 = 0;
        let mut j = i;
        while j < todo {
            let (node, name) = &entries[j];
            let buf = if g.print_flag[*node] {
                format!("[{}]", g.index[*node])
            } else {
                format!("({})", g.index[*node])
            };
            col += buf.len() as i64;
            while col < starting_col + 5 {
                out.push(' ');
                col += 1;
            }
            let _ = write!(out, " {buf} {name}");
            col += name.len() as i64;
            starting_col += column_width;
            j += rows;
        }
        out.push('\n');
    }
    out
}
