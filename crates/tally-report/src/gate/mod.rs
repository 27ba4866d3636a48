//! The outputs of `tally gate`: a [`Verdict`] laid out as text for a CI
//! log, JSON for programs (schema in docs/gate.md), JUnit XML for the test
//! reports of CI servers, and Markdown for a pull-request comment.

mod json;
mod junit;
mod markdown;
mod text;

pub use json::json;
pub use junit::junit;
pub use markdown::markdown;
pub use text::text;

use std::io::{self, Write};
use tally_analysis::gate::{Change, FunctionName, GateOptions, Verdict};
use tally_model::thousands;

/// A verdict and what it was made of, as every output shows it.
pub struct GateReport<'a> {
    /// The decision.
    pub verdict: &'a Verdict,
    /// The base profiles, as named on the command line.
    pub base: Vec<String>,
    /// The new profiles.
    pub new: Vec<String>,
    /// The budgets applied.
    pub options: &'a GateOptions,
}

/// The output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateFormat {
    /// Plain text for a CI log.
    Text,
    /// JSON (see docs/gate.md).
    Json,
    /// JUnit XML, one test case per judged function and one for the total.
    Junit,
    /// Markdown for a pull-request comment.
    Markdown,
}

/// Writes `report` in `format`.
pub fn write(report: &GateReport, format: GateFormat, w: &mut dyn Write) -> io::Result<()> {
    match format {
        GateFormat::Text => text(report, w),
        GateFormat::Json => {
            serde_json::to_writer_pretty(&mut *w, &json(report))?;
            writeln!(w)
        }
        GateFormat::Junit => junit(report, w),
        GateFormat::Markdown => markdown(report, w),
    }
}

/// A name from a profile as text (`???` when empty, as the annotators
/// show a missing name).
fn show(b: &[u8]) -> String {
    if b.is_empty() {
        "???".into()
    } else {
        String::from_utf8_lossy(b).into_owned()
    }
}

/// `function (file)`, the way a function is named in every output.
fn function_label(f: &FunctionName) -> String {
    format!("{} ({})", show(&f.name), show(&f.file))
}

/// `+1,234 (+5.67%)`, or `+1,234 (new)` when the base had none.
fn change_text(c: &Change) -> String {
    let sign = if c.delta > 0 { "+" } else { "" };
    let mut s = format!("{sign}{}", thousands(c.delta));
    match c.percent {
        Some(p) => s.push_str(&format!(" ({}{p:.2}%)", if p > 0.0 { "+" } else { "" })),
        None if c.delta != 0 => s.push_str(" (new)"),
        None => {}
    }
    s
}

/// A cost or `-` when the side lacks the function.
fn cost_text(v: Option<i128>) -> String {
    v.map_or_else(|| "-".to_string(), thousands)
}

/// The increase allowed: `+20,000`, or `any`.
fn allowed_text(c: &Change) -> String {
    match c.allowed {
        Some(a) => format!("+{}", thousands(a)),
        None => "any".to_string(),
    }
}
