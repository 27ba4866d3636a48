//! The aligned tables that the text writers (`text`, `source`, `asm`)
//! print: cells of the shown events right-aligned under their labels, each
//! row followed by its text, the columns as wide as their widest cell.

use super::view::View;
use crate::format::{Style, cell};
use std::io::{self, Write};
use tally_model::Cost;

/// Where the text writers write: the output, the style and the warnings
/// for the user.
pub(super) struct Page<'a> {
    /// The output.
    pub out: &'a mut dyn Write,
    /// Colours, or none.
    pub style: Style,
    /// Notes for the user.
    pub warnings: &'a mut Vec<String>,
}

pub(super) const RULE: &str =
    "--------------------------------------------------------------------------------";

/// Lines of cells and a text, aligned when printed.
pub(super) struct Table {
    labels: Vec<String>,
    lines: Vec<Line>,
}

/// A line of a [`Table`]: cells and a text, or a text alone.
pub(super) enum Line {
    Row(Vec<String>, String),
    Text(String),
}

impl Table {
    pub(super) fn new(labels: Vec<String>) -> Table {
        Table {
            labels,
            lines: Vec::new(),
        }
    }

    pub(super) fn row(&mut self, cells: Vec<String>, text: String) {
        self.lines.push(Line::Row(cells, text));
    }

    pub(super) fn text(&mut self, text: String) {
        self.lines.push(Line::Text(text));
    }

    fn widths(&self) -> Vec<usize> {
        // Labels are event names, of any length; cells are numbers.
        let mut w: Vec<usize> = self
            .labels
            .iter()
            .map(|l| crate::format::column_width([l.chars().count()]))
            .collect();
        for l in &self.lines {
            if let Line::Row(cells, _) = l {
                for (i, c) in cells.iter().enumerate() {
                    w[i] = w[i].max(c.chars().count());
                }
            }
        }
        w
    }

    /// Prints the header (labels and `title`) between rules, then the lines.
    pub(super) fn print(&self, out: &mut dyn Write, title: &str, style: Style) -> io::Result<()> {
        let w = self.widths();
        writeln!(out, "{RULE}")?;
        let mut head = String::new();
        for (l, &w) in self.labels.iter().zip(&w) {
            head.push_str(&crate::format::pad_right(l, w));
            head.push(' ');
        }
        writeln!(out, "{}", style.bold(format!("{head} {title}").trim_end()))?;
        writeln!(out, "{RULE}")?;
        self.print_lines(out, &w)
    }

    /// Prints the lines only, with the widths of this table.
    pub(super) fn print_lines(&self, out: &mut dyn Write, w: &[usize]) -> io::Result<()> {
        for l in &self.lines {
            match l {
                Line::Row(cells, text) => {
                    let mut s = String::with_capacity(128);
                    for (c, &w) in cells.iter().zip(w) {
                        let len = c.chars().count();
                        s.extend(std::iter::repeat_n(' ', w.saturating_sub(len)));
                        s.push_str(c);
                        s.push(' ');
                    }
                    s.push(' ');
                    s.push_str(text);
                    s.push('\n');
                    out.write_all(s.as_bytes())?;
                }
                Line::Text(t) => writeln!(out, "{t}")?,
            }
        }
        Ok(())
    }
}

/// Cells of a cost vector for the shown events.
pub(super) fn cells<C: Cost>(a: &View<C>, v: Option<&[C]>, dot: bool) -> Vec<String> {
    a.shown
        .iter()
        .map(|&e| {
            if a.events.is_ratio(e) {
                return ratio_cell(a, v, e, dot);
            }
            let total = a.events.value(&a.totals, e);
            cell(
                v.map(|v| a.events.value(v, e)),
                total,
                a.options.show_percs,
                dot,
            )
        })
        .collect()
}

/// A ratio's cell: its value with decimals, `-` where unknown, blank
/// where the cost has none of the denominator (no percentage: a ratio is
/// no share of a total). Padded as wide as a count with its percentage.
pub(super) fn ratio_cell<C: Cost>(a: &View<C>, v: Option<&[C]>, e: usize, dot: bool) -> String {
    let pad = if a.options.show_percs {
        "         "
    } else {
        ""
    };
    match v {
        None => format!("-{pad}"),
        Some(v) => match a.events.ratio(v, e) {
            Some(r) => format!("{}{pad}", crate::format::decimal(r)),
            None if dot => format!(".{pad}"),
            None => format!("-{pad}"),
        },
    }
}

/// The names of the shown events, the labels of a table's columns.
pub(super) fn shown_labels<C>(a: &View<C>) -> Vec<String> {
    a.shown
        .iter()
        .map(|&e| a.events.names()[e].clone())
        .collect()
}
