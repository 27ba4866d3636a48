//! The Markdown verdict for a pull-request comment: a headline, the total,
//! and a table of the functions over budget followed by the largest other
//! changes among the judged functions.

use super::{GateReport, allowed_text, change_text, cost_text, show};
use std::io::{self, Write};

/// How many functions within budget the table shows after those over it.
const OTHERS: usize = 10;

/// Writes the Markdown verdict.
pub fn markdown(r: &GateReport, w: &mut dyn Write) -> io::Result<()> {
    let v = r.verdict;
    let over = v.functions_over();
    let head = if v.passed() {
        "PASS: within budget".to_string()
    } else if v.total.over {
        format!("FAIL: the total and {over} function(s) over budget")
    } else {
        format!("FAIL: {over} function(s) over budget")
    };
    writeln!(w, "### tally gate ({}): {head}", escape(&v.event))?;
    writeln!(w)?;
    writeln!(
        w,
        "Base: {}; new: {}. Budgets: total {}, functions {} (at least {} of the total), judged from {} of the total.",
        escape(&r.base.join(", ")),
        escape(&r.new.join(", ")),
        escape(&r.options.max_increase.to_string()),
        escape(&r.options.max_function_increase.to_string()),
        escape(&r.options.noise_floor.to_string()),
        escape(&r.options.min_cost.to_string()),
    )?;
    writeln!(w)?;
    writeln!(w, "| | base | new | change | allowed | status |")?;
    writeln!(w, "|---|---:|---:|---:|---:|---|")?;
    let t = &v.total;
    writeln!(
        w,
        "| total | {} | {} | {} | {} | {} |",
        cost_text(t.base),
        cost_text(t.new),
        change_text(t),
        allowed_text(t),
        status(t.over)
    )?;
    writeln!(w)?;
    let shown: Vec<_> = v
        .functions
        .iter()
        .filter(|f| f.over())
        .chain(
            v.functions
                .iter()
                .filter(|f| !f.over() && f.rank() != 0)
                .take(OTHERS),
        )
        .collect();
    if shown.is_empty() {
        writeln!(w, "No judged function changed.")?;
    } else {
        writeln!(
            w,
            "| function | file | self change | inclusive change | budget | status |"
        )?;
        writeln!(w, "|---|---|---:|---:|---:|---|")?;
        for f in shown {
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} |",
                escape(&show(&f.function.name)),
                escape(&show(&f.function.file)),
                change_text(&f.self_cost),
                if f.inclusive_derived {
                    format!("{} (derived)", change_text(&f.inclusive))
                } else {
                    change_text(&f.inclusive)
                },
                f.budget,
                status(f.over())
            )?;
        }
    }
    writeln!(w)?;
    writeln!(
        w,
        "{} functions judged, {over} over budget, {} below the minimum cost, {} ignored.",
        v.functions.len(),
        v.below_min_cost,
        v.ignored
    )
}

fn status(over: bool) -> &'static str {
    if over { "**over budget**" } else { "ok" }
}

/// Text that Markdown shows as it is: the characters that start inline
/// markup (emphasis, code, links, HTML, entities, strike-through) and the
/// table's `|` backslash-escaped, line breaks as spaces. A table cell holds
/// inline content only, so block markup (`#`, `-`, `1.`) needs nothing.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '!' | '$' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}
