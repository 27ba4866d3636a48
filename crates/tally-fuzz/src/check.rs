//! What counts as a failure of one case, apart from panics and budgets:
//! an error without a location, and output tally cannot read back.
//!
//! An error is *located* when its message (its `Display`) holds the
//! input's name followed by a place in it: `NAME:LINE:` with LINE between
//! 1 and the input's line count + 1 (the end of the input), or
//! `NAME: byte N` with N at most the input's size. A *whole-input
//! verdict* needs only the name: what the file is (a gmon file given to
//! the Callgrind reader), events, positions or formats that differ
//! between two inputs, a profile a report cannot analyse as a whole.
//! Every other error must be located: parse and read errors, broken
//! compression, sums that overflow.

use std::fmt;

/// The name inputs are given in messages.
pub const NAME: &str = "fuzz-input";

/// Why a case failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The condition that failed (`panic`, `unlocated-error`, `read-back`,
    /// `time`, `memory`).
    pub condition: &'static str,
    /// Where (the path driven: `read`, `annotate-json`, `merge`, …).
    pub path: &'static str,
    /// The detail: the panic's message and place, the error's text, what
    /// differed.
    pub detail: String,
}

impl Failure {
    /// A failure of `condition` on `path`.
    pub fn new(condition: &'static str, path: &'static str, detail: impl Into<String>) -> Self {
        Failure {
            condition,
            path,
            detail: detail.into(),
        }
    }

    /// What makes two failures the same finding: the condition, the path
    /// and the detail with numbers and long runs blanked out.
    pub fn signature(&self) -> String {
        let mut s = String::new();
        let mut last = '\0';
        for c in self.detail.chars().take(160) {
            let c = if c.is_ascii_digit() { '#' } else { c };
            if c != '#' || last != '#' {
                s.push(c);
            }
            last = c;
        }
        format!("{} {}: {s}", self.condition, self.path)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let detail: String = self.detail.chars().take(400).collect();
        write!(f, "{} in {}: {detail}", self.condition, self.path)
    }
}

/// The input as its reader sees it: how many lines and bytes.
#[derive(Clone, Copy, Debug)]
pub struct Extent {
    /// Lines (newlines + 1).
    pub lines: u64,
    /// Bytes (the larger of stored and decompressed).
    pub bytes: u64,
}

impl Extent {
    /// The extent of an input, decompressing it if it is gzip'd (as far as
    /// the stream goes).
    pub fn of(stored: &[u8]) -> Extent {
        use std::io::Read;
        let mut plain = Vec::new();
        let data = if stored.starts_with(&[0x1f, 0x8b]) {
            let _ = flate2::read::MultiGzDecoder::new(stored).read_to_end(&mut plain);
            &plain[..]
        } else {
            stored
        };
        Extent {
            lines: data.iter().filter(|&&b| b == b'\n').count() as u64 + 1,
            bytes: data.len().max(stored.len()) as u64,
        }
    }
}

/// Whether `msg` names a place in the input called `name`.
pub fn located(msg: &str, name: &str, extent: Extent) -> bool {
    let mut rest = msg;
    while let Some(i) = rest.find(name) {
        let after = &rest[i + name.len()..];
        if let Some(n) = after.strip_prefix(':').and_then(number_then(':'))
            && (1..=extent.lines + 1).contains(&n)
        {
            return true;
        }
        if let Some(n) = after.strip_prefix(": byte ").and_then(number_then(':'))
            && n <= extent.bytes
        {
            return true;
        }
        rest = after;
    }
    false
}

fn number_then(end: char) -> impl Fn(&str) -> Option<u64> {
    move |s: &str| {
        let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || !s[digits..].starts_with(end) {
            return None;
        }
        s[..digits].parse().ok()
    }
}

/// Checks an error: located, or a whole-input verdict (`verdict`) that
/// names the input.
pub fn error(path: &'static str, msg: &str, verdict: bool, extent: Extent) -> Result<(), Failure> {
    if located(msg, NAME, extent) || (verdict && msg.contains(NAME)) {
        Ok(())
    } else {
        Err(Failure::new("unlocated-error", path, msg))
    }
}

/// Whether a reader error is a whole-input verdict.
pub fn reader_verdict(e: &tally_formats::Error) -> bool {
    matches!(e, tally_formats::Error::WrongFormat { .. })
}

/// Whether a merge or diff error is a whole-input verdict (the inputs'
/// events, positions or formats differ; a negative unsigned sum; a
/// part's total over all inputs that does not fit, where every record's
/// own sum did, so no line of any input is to blame).
pub fn combine_verdict(e: &tally_analysis::Error) -> bool {
    use tally_analysis::Error as E;
    matches!(
        e,
        E::Events { .. }
            | E::MissingEvent { .. }
            | E::Positions { .. }
            | E::Formats { .. }
            | E::Negative { .. }
    ) || matches!(e, E::Overflow { function, .. } if function.is_empty())
        || matches!(e, E::Unreadable { function, .. } if function.is_empty())
}

/// Whether a report error is a whole-input verdict (a profile the report
/// cannot analyse as a whole: no events, no such part).
pub fn report_verdict(e: &tally_report::ReportError) -> bool {
    use tally_report::ReportError as E;
    match e {
        E::Input(m) => whole_input(m),
        E::Analysis(a) => analysis_verdict(a),
        _ => false,
    }
}

/// [`report_verdict`] for an analysis's or conversion's error.
pub fn analysis_verdict(e: &tally_analysis::Error) -> bool {
    !matches!(e, tally_analysis::Error::UnknownEvent { .. }) && whole_input(&e.to_string())
}

/// A message of no line's overflow: the input as a whole is refused.
fn whole_input(m: &str) -> bool {
    !m.contains("overflow") && !m.contains("does not fit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_located() {
        let e = Extent {
            lines: 10,
            bytes: 100,
        };
        assert!(located("fuzz-input:3: unrecognised line `x`", NAME, e));
        assert!(located("fuzz-input:11: `calls=` at the end", NAME, e));
        assert!(!located("fuzz-input:12: past the end", NAME, e));
        assert!(!located("fuzz-input:0: no line 0", NAME, e));
        assert!(located("fuzz-input: byte 100: truncated record", NAME, e));
        assert!(!located("fuzz-input: byte 101: past the end", NAME, e));
        assert!(!located(
            "fuzz-input: a summed count does not fit in 64 bits",
            NAME,
            e
        ));
        assert!(!located("the output: a summed count does not fit", NAME, e));
        assert!(!located("fuzz-input:3 without a colon", NAME, e));
    }
}
