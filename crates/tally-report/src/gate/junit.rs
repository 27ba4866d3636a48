//! The JUnit XML verdict: one `testsuite` with a `testcase` for the total
//! and one for each judged function, a `failure` for each over budget, in
//! the shape Jenkins' and GitLab's JUnit readers take (the attributes and
//! elements of the common JUnit schema only).

use super::{GateReport, allowed_text, change_text, cost_text, function_label, show};
use std::io::{self, Write};
use tally_analysis::gate::Change;

/// Writes the JUnit XML verdict.
pub fn junit(r: &GateReport, w: &mut dyn Write) -> io::Result<()> {
    let v = r.verdict;
    let tests = v.functions.len() + 1;
    let failures = v.functions_over() + usize::from(v.total.over);
    let suite = format!("tally gate {}", v.event);
    let class = format!("tally-gate.{}", v.event);
    writeln!(w, r#"<?xml version="1.0" encoding="UTF-8"?>"#)?;
    writeln!(
        w,
        r#"<testsuites name="{}" tests="{tests}" failures="{failures}" errors="0" time="0">"#,
        escape(&suite)
    )?;
    writeln!(
        w,
        r#"  <testsuite name="{}" tests="{tests}" failures="{failures}" errors="0" skipped="0" time="0">"#,
        escape(&suite)
    )?;
    writeln!(w, "    <properties>")?;
    for (name, value) in [
        ("base", r.base.join(" ")),
        ("new", r.new.join(" ")),
        ("max-increase", r.options.max_increase.to_string()),
        (
            "max-function-increase",
            r.options.max_function_increase.to_string(),
        ),
        ("min-cost", r.options.min_cost.to_string()),
        ("noise-floor", r.options.noise_floor.to_string()),
    ] {
        writeln!(
            w,
            r#"      <property name="{name}" value="{}"/>"#,
            escape(&value)
        )?;
    }
    writeln!(w, "    </properties>")?;
    let total = [("total", &v.total)];
    case(
        w,
        &class,
        &format!("total {}", v.event),
        &total,
        &r.options.max_increase.to_string(),
    )?;
    for f in &v.functions {
        let budget = f.budget.to_string();
        case(
            w,
            &class,
            &function_label(&f.function),
            &[("self", &f.self_cost), ("inclusive", &f.inclusive)],
            &budget,
        )?;
    }
    writeln!(w, "  </testsuite>")?;
    writeln!(w, "</testsuites>")
}

/// One test case, failed when any of `changes` is over budget.
fn case(
    w: &mut dyn Write,
    class: &str,
    name: &str,
    changes: &[(&str, &Change)],
    budget: &str,
) -> io::Result<()> {
    let over: Vec<&(&str, &Change)> = changes.iter().filter(|(_, c)| c.over).collect();
    let open = format!(
        r#"    <testcase classname="{}" name="{}" time="0""#,
        escape(class),
        escape(name)
    );
    if over.is_empty() {
        return writeln!(w, "{open}/>");
    }
    writeln!(w, "{open}>")?;
    let message: Vec<String> = over
        .iter()
        .map(|(what, c)| format!("{what} {} over budget {budget}", change_text(c)))
        .collect();
    let mut body = String::new();
    for (what, c) in changes {
        body.push_str(&format!(
            "{what}: base {} new {} change {} allowed {}{}\n",
            cost_text(c.base),
            cost_text(c.new),
            change_text(c),
            allowed_text(c),
            if c.over { " OVER" } else { "" }
        ));
    }
    writeln!(
        w,
        r#"      <failure message="{}" type="over-budget">{}</failure>"#,
        escape(&format!("{name}: {}", message.join("; "))),
        escape(&body)
    )?;
    writeln!(w, "    </testcase>")
}

/// Text as XML character data or an attribute value: markup escaped, and
/// characters XML 1.0 forbids (controls other than tab and line breaks,
/// which names from a profile may hold) replaced.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in show(s.as_bytes()).chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
