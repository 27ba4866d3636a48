//! The text verdict: one line for the total, two for each function over
//! budget, and the conclusion.

use super::{GateReport, allowed_text, change_text, cost_text, function_label};
use crate::format::{column_width, pad_left, pad_right};
use std::io::{self, Write};
use tally_analysis::gate::Change;
use tally_model::thousands;

/// Writes the text verdict.
pub fn text(r: &GateReport, w: &mut dyn Write) -> io::Result<()> {
    let v = r.verdict;
    writeln!(
        w,
        "tally gate: {}: {} → {}",
        v.event,
        r.base.join(" + "),
        r.new.join(" + ")
    )?;
    let mut rows: Vec<[String; 6]> = vec![[
        String::new(),
        "base".into(),
        "new".into(),
        "change".into(),
        "allowed".into(),
        String::new(),
    ]];
    rows.push(row(
        format!("total (budget {})", r.options.max_increase),
        &v.total,
    ));
    for f in v.functions.iter().filter(|f| f.over()) {
        rows.push([
            format!("{}  budget {}", function_label(&f.function), f.budget),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
        rows.push(row("    self".into(), &f.self_cost));
        let label = if f.inclusive_derived {
            "    inclusive (derived: a cycle member's)"
        } else {
            "    inclusive"
        };
        rows.push(row(label.into(), &f.inclusive));
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            column_width(
                rows.iter()
                    .filter(|r| !r[1].is_empty() || c == 0 && r[0].is_empty())
                    .map(|r| r[c].chars().count()),
            )
        })
        .collect();
    for row in &rows {
        if row[1].is_empty() && !row[0].is_empty() {
            writeln!(w, "{}", row[0])?;
            continue;
        }
        let mut line = pad_right(&row[0], widths[0]);
        for (cell, &width) in row[1..5].iter().zip(&widths[1..5]) {
            line.push_str("  ");
            line.push_str(&pad_left(cell, width));
        }
        line.push_str("  ");
        line.push_str(&row[5]);
        writeln!(w, "{}", line.trim_end())?;
    }
    let over = v.functions_over();
    writeln!(
        w,
        "{} functions judged, {over} over budget; {} below --min-cost {}, {} ignored; \
         increases up to --noise-floor {} (+{}) pass",
        v.functions.len(),
        v.below_min_cost,
        r.options.min_cost,
        v.ignored,
        r.options.noise_floor,
        thousands(v.noise_floor)
    )?;
    for e in &v.unused_baseline {
        writeln!(
            w,
            "note: {}:{}: no function `{}` in either profile",
            r.options.baseline.path,
            e.line,
            String::from_utf8_lossy(&e.function)
        )?;
    }
    let verdict = match (v.total.over, over) {
        (false, 0) => "PASS: within budget".to_string(),
        (true, 0) => "FAIL: the total is over budget".to_string(),
        (false, n) => format!("FAIL: {n} function{} over budget", plural(n)),
        (true, n) => format!("FAIL: the total and {n} function{} over budget", plural(n)),
    };
    writeln!(w, "{verdict}")
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A row: label, base, new, change, allowed increase, mark.
fn row(label: String, c: &Change) -> [String; 6] {
    let (allowed, mark) = if !c.checked {
        ("not judged".to_string(), "")
    } else if c.over {
        (allowed_text(c), "OVER")
    } else {
        (allowed_text(c), "ok")
    };
    [
        label,
        cost_text(c.base),
        cost_text(c.new),
        change_text(c),
        allowed,
        mark.to_string(),
    ]
}
