//! The column set of a text report: what a cost cell prints (seconds or
//! event counts), how wide each column is, whether the measured column is
//! there, and the texts around the tables. `gnu` makes the set for gmon
//! samples, `counts` the one for Callgrind event counts; the walk in
//! `mod.rs` only places the cells, so both layouts share it.

use std::io::Write as _;

use tally_analysis::gprof::{CallGraph, Costs, EventCounts, Histogram, Measured, Options, Report};

/// Everything that differs between the layouts, as data.
pub(super) struct Columns<'a> {
    /// What a cost is and how it prints.
    pub unit: Unit<'a>,
    /// The measured inclusive costs: a column beside gprof's estimates.
    pub measured: Option<&'a Measured>,
    /// The widths of the columns.
    pub width: Widths,
    /// The flat profile's texts.
    pub flat: Section,
    /// The call graph's texts.
    pub graph: Section,
    /// The line after every call graph entry.
    pub separator: String,
    /// Whether the flat profile names a function's cycle (GNU gprof does not).
    pub flat_cycles: bool,
    /// Whether a cycle member's `called` shows calls even when there are
    /// none (GNU gprof prints the 0).
    pub member_zero_calls: bool,
}

/// What a cost is.
pub(super) enum Unit<'a> {
    /// Histogram samples, printed as seconds; per-call times are
    /// multiplied by `scale` (the SI prefix of the column header).
    Seconds {
        /// The histogram.
        h: &'a Histogram,
        /// The per-call factor.
        scale: f64,
    },
    /// Counts of one Callgrind event.
    Counts(&'a EventCounts),
}

/// The widths of the columns; flat profile and call graph have their own.
pub(super) struct Widths {
    /// The call graph's `index` column (longer indexes are cut, as gprof does).
    pub index: usize,
    /// The call graph's cost columns.
    pub cost: usize,
    /// The call graph's call counts (each side of `/` or `+`).
    pub calls: usize,
    /// The flat profile's `cumulative`.
    pub cumulative: usize,
    /// The flat profile's `self`.
    pub flat_self: usize,
    /// The flat profile's `calls`.
    pub flat_calls: usize,
    /// The flat profile's per-call columns.
    pub per_call: usize,
}

/// The texts of one table, and its 100 %.
pub(super) struct Section {
    /// What comes between the title and the column headings.
    pub intro: String,
    /// The column headings, each line ended.
    pub headings: String,
    /// The divisor of the table's percentages.
    pub total: f64,
    /// What the columns mean, printed after the table unless `-b`.
    pub blurb: &'static str,
}

/// A cost as the report holds it: gprof's estimates and the histogram's
/// samples are fractions, Callgrind's self costs exact counts (kept exact
/// in sums, which a float would round above 2^53).
#[derive(Clone, Copy)]
pub(super) enum Cost {
    /// A fractional cost.
    Fraction(f64),
    /// An exact count.
    Exact(i128),
}

impl Cost {
    /// The cost as a float, for shares and averages.
    pub fn as_f64(self) -> f64 {
        match self {
            Cost::Fraction(v) => v,
            Cost::Exact(n) => n as f64,
        }
    }

    /// The sum, exact when both are.
    pub fn add(self, other: Cost) -> Cost {
        match (self, other) {
            (Cost::Exact(a), Cost::Exact(b)) => Cost::Exact(a + b),
            _ => Cost::Fraction(self.as_f64() + other.as_f64()),
        }
    }
}

impl<'a> Columns<'a> {
    /// The column set for the report's costs; `None` for event counts
    /// without the call graph and measured costs they always come with.
    pub fn of(report: &'a Report, opts: &Options) -> Option<Columns<'a>> {
        match (&report.costs, &report.graph, &report.measured) {
            (Costs::Samples(h), _, _) => Some(super::gnu::columns(report, h, opts)),
            (Costs::Events(e), Some(g), Some(m)) => Some(super::counts::columns(e, g, m, opts)),
            (Costs::Events(_), _, _) => None,
        }
    }

    /// Routine `i`'s self cost.
    pub fn self_cost(&self, i: usize) -> Cost {
        match self.unit {
            Unit::Seconds { h, .. } => Cost::Fraction(h.times.time[i]),
            Unit::Counts(e) => Cost::Exact(e.self_cost[i]),
        }
    }

    /// Routine `i`'s cost with its callees, for `total/call`: gprof's
    /// estimate for samples, the measured cost for counts (none for cycle
    /// members).
    pub fn total_cost(&self, report: &Report, i: usize) -> Option<f64> {
        match self.unit {
            Unit::Seconds { h, .. } => {
                let child = report.graph.as_ref().map_or(0.0, |g| g.child_time[i]);
                Some(h.times.time[i] + child)
            }
            Unit::Counts(_) => self.measured?.nodes[i].map(|m| m as f64),
        }
    }

    /// A cost divided by `calls`, in the per-call columns' unit.
    pub fn per_call(&self, v: f64, calls: u64) -> f64 {
        match self.unit {
            Unit::Seconds { h, scale } => scale * v / h.hz / calls as f64,
            Unit::Counts(_) => v / calls as f64,
        }
    }

    /// Appends a cost cell `w` wide: seconds with two decimals, or a count
    /// (gprof's fractional costs rounded, ties to even as `printf("%.0f")`).
    pub fn cost(&self, buf: &mut Vec<u8>, v: Cost, w: usize) {
        match (&self.unit, v) {
            (Unit::Seconds { h, .. }, v) => {
                fixed(buf, v.as_f64() / h.hz, w, 2);
            }
            (Unit::Counts(_), Cost::Exact(n)) => number(buf, n, w, false),
            (Unit::Counts(_), Cost::Fraction(v)) => {
                let r = v.round_ties_even();
                if r.abs() < 9.0e15 {
                    number(buf, r as i128, w, false);
                } else {
                    let _ = write!(buf, "{:>w$.0}", r + 0.0);
                }
            }
        }
    }

    /// Appends the measured cell and a blank when the report has the
    /// column (a blank cell for `None`); nothing when it has not.
    pub fn measured(&self, buf: &mut Vec<u8>, v: impl FnOnce(&Measured) -> Option<i128>) {
        if let Some(m) = self.measured {
            match v(m) {
                Some(n) => number(buf, n, self.width.cost, false),
                None => spaces(buf, self.width.cost),
            }
            buf.push(b' ');
        }
    }

    /// How many cost columns the call graph has.
    pub fn cost_columns(&self) -> usize {
        2 + usize::from(self.measured.is_some())
    }

    /// Appends the `called` cell of a node's own line (or a cycle
    /// member's): calls from others, then `+` calls within (itself, or its
    /// cycle).
    pub fn called(&self, buf: &mut Vec<u8>, g: &CallGraph, n: usize, member: bool) {
        let kw = self.width.calls;
        let shown = g.ncalls[n] != 0 || g.is_cycle(n) || (member && self.member_zero_calls);
        if g.self_calls[n] != 0 {
            number(buf, i128::from(g.ncalls[n]), kw, false);
            buf.push(b'+');
            number(buf, i128::from(g.self_calls[n]), kw, true);
        } else if shown {
            number(buf, i128::from(g.ncalls[n]), kw, false);
            spaces(buf, kw + 1);
        } else {
            spaces(buf, 2 * kw + 1);
        }
    }

    /// The index's name of routine `node`: with what tells it apart from
    /// others of its name.
    pub fn index_name<'r>(
        &self,
        report: &'r Report,
        node: usize,
        opts: &Options,
    ) -> std::borrow::Cow<'r, str> {
        match self.unit {
            Unit::Seconds { .. } => super::gnu::index_name(report, node, opts).into(),
            Unit::Counts(e) => match &e.qualifier[node] {
                Some(q) => format!("{} ({q})", report.display(node)).into(),
                None => report.display(node).into(),
            },
        }
    }
}

/// Appends `n` spaces.
pub(super) fn spaces(buf: &mut Vec<u8>, n: usize) {
    buf.resize(buf.len() + n, b' ');
}

/// Appends the decimal digits of `v`, right-aligned in `w` columns (left-
/// aligned with `left`). Padding through `fmt` goes a character at a time,
/// which was most of the time of a report with millions of lines.
pub(super) fn number(buf: &mut Vec<u8>, v: i128, w: usize, left: bool) {
    // Counts fit 64 bits nearly always, and itoa's 64-bit path is the
    // faster one.
    let mut n = itoa::Buffer::new();
    let digits = match u64::try_from(v) {
        Ok(u) => n.format(u),
        Err(_) => n.format(v),
    };
    aligned(buf, digits.as_bytes(), w, left);
}

/// Appends `text` padded with blanks to `w` columns: right-aligned, or
/// left-aligned with `left`.
fn aligned(buf: &mut Vec<u8>, text: &[u8], w: usize, left: bool) {
    let pad = w.saturating_sub(text.len());
    if !left {
        spaces(buf, pad);
    }
    buf.extend_from_slice(text);
    if left {
        spaces(buf, pad);
    }
}

/// Appends `v` as `format!("{v:>w$.d$}")` does, for up to two decimals.
/// `fmt` prints the exact decimal value of the float, correctly rounded
/// (ties to even), through a slow general path; a report has a few such
/// cells on each of its hundreds of thousands of lines. Here `v` is scaled
/// to an integer count of the last decimal: when the scaled value is below
/// 2^32 its rounding error is under 5e-7, so unless its fraction is that
/// close to one half, rounding it gives fmt's digits. Ties, near-ties, huge
/// values, infinities and NaN are left to `fmt`.
pub(super) fn fixed(buf: &mut Vec<u8>, v: f64, w: usize, d: usize) {
    const SCALE: [f64; 3] = [1.0, 10.0, 100.0];
    const UNIT: [u64; 3] = [1, 10, 100];
    let x = v.abs() * SCALE[d.min(2)];
    let frac = x - x.floor();
    if d > 2 || !x.is_finite() || x >= 4_294_967_296.0 || (frac - 0.5).abs() < 1e-6 {
        let _ = write!(buf, "{v:>w$.d$}");
        return;
    }
    let n = x.floor() as u64 + u64::from(frac > 0.5);
    let mut cell = [0u8; 24];
    let mut at = cell.len();
    let mut put = |b: u8| {
        at -= 1;
        cell[at] = b;
    };
    let mut f = n % UNIT[d];
    for _ in 0..d {
        put(b'0' + (f % 10) as u8);
        f /= 10;
    }
    if d > 0 {
        put(b'.');
    }
    let mut i = n / UNIT[d];
    loop {
        put(b'0' + (i % 10) as u8);
        i /= 10;
        if i == 0 {
            break;
        }
    }
    if v.is_sign_negative() {
        put(b'-');
    }
    aligned(buf, &cell[at..], w, false);
}
