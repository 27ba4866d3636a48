//! What the reader checks once the whole file is read: whether the stated
//! `summary:`/`totals:` agree with the cost lines, and whether the file
//! looks cut short.

use super::Parser;
use crate::error::WarningKind;
use tally_model::{Cost, Format, Sink};

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// Warns when the file looks cut short: its last part ends without the
    /// closing line its writer always writes (Cachegrind's `summary:`,
    /// Callgrind's `totals:`), or its costs fall short of the `summary:`
    /// stated before them by more than Valgrind's rounding (a few counts).
    /// Only the last part can be cut; a closing line proves the end. A
    /// file that looks cut may end after a `calls=` line, before its cost
    /// line (elsewhere that is an error). Returns whether it warned.
    pub(super) fn check_truncation(&mut self) -> bool {
        let (Some(part), Some(stats)) = (self.profile.parts.last(), self.stats.last()) else {
            return false;
        };
        let closing = match self.profile.format {
            Format::Cachegrind => "`summary:`",
            Format::Callgrind => "`totals:`",
        };
        let header_summary =
            part.info.summary.as_ref().filter(|_| {
                stats.summary_line < stats.first_body_line || stats.first_body_line == 0
            });
        if part.info.totals.is_some() || (part.info.summary.is_some() && header_summary.is_none()) {
            return false;
        }
        let mut reasons = Vec::new();
        if let Some(s) = header_summary {
            let short = s
                .iter()
                .zip(&stats.totals)
                .enumerate()
                .filter_map(|(e, (stated, sum))| {
                    let (stated, sum) = (stated.to_i128(), sum.to_i128());
                    (stated - sum > 32 + stated / 10_000).then(|| (e, sum as f64 / stated as f64))
                })
                .min_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((e, share)) = short {
                let name = self
                    .profile
                    .events
                    .recorded()
                    .get(e)
                    .map_or(String::new(), |ev| format!(" of {}", ev.name));
                reasons.push(format!(
                    "its costs add up to {:.1} % of the stated `summary:`{name}",
                    share * 100.0
                ));
            }
        }
        // Cachegrind always writes `cmd:` (cg_annotate refuses a file
        // without it); a file without one is hand-made, not cut short.
        let cachegrind = self.profile.format == Format::Cachegrind
            && self.profile.parts.iter().any(|p| p.info.cmd.is_some());
        let valgrind = cachegrind
            || self
                .profile
                .creator
                .as_ref()
                .is_some_and(|c| c.starts_with(b"callgrind-"));
        if valgrind {
            reasons.push(format!(
                "it ends without the {closing} line Valgrind writes last"
            ));
        }
        if reasons.is_empty() {
            return false;
        }
        if let Some(line) = self.dangling_call {
            reasons.push(format!(
                "it ends after the `calls=` of line {line}, before its cost line"
            ));
        }
        let line = self.line_no;
        self.warnings.add(WarningKind::Truncated, line, || {
            format!("the file looks truncated: {}", reasons.join(", and "))
        });
        true
    }

    /// Compares `summary:`/`totals:` (already padded to the events) with the
    /// sums of the cost lines.
    pub(super) fn check_totals(&mut self) {
        for (part, stats) in self.profile.parts.iter().zip(&self.stats) {
            if let Some(s) = &part.info.summary
                && *s != stats.totals
            {
                let below = s.iter().zip(&stats.totals).any(|(a, b)| a < b);
                let kind = if below {
                    WarningKind::SummaryBelowTotal
                } else {
                    WarningKind::SummaryAboveTotal
                };
                self.warnings.add(kind, stats.summary_line, || {
                    let how = if below {
                        "is smaller than"
                    } else {
                        "is larger than (the format allows this)"
                    };
                    format!(
                        "`summary:` {} {how} the sum of the cost lines {}",
                        join(s),
                        join(&stats.totals)
                    )
                });
            }
            if let Some(t) = &part.info.totals
                && *t != stats.totals
            {
                // Cachegrind's total is its trailing `summary:` line.
                let key = match self.profile.format {
                    Format::Cachegrind => "summary:",
                    Format::Callgrind => "totals:",
                };
                self.warnings
                    .add(WarningKind::TotalsMismatch, stats.totals_line, || {
                        format!(
                            "`{key}` {} differs from the sum of the cost lines {}",
                            join(t),
                            join(&stats.totals)
                        )
                    });
            }
        }
    }
}

/// Counts as a message shows them.
fn join<C: Cost>(v: &[C]) -> String {
    v.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}
