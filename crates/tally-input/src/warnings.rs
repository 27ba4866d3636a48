//! The one rule for a reader's warnings.

use std::path::Path;

use tally_formats::Warnings;

/// A read's warnings as the lines every command prints:
/// `FILE: warning: TEXT`. A file that looks truncated is one of them: it
/// is still shown (a validator, `tally check`, also fails on it), so the
/// same file gets the same answer from every command.
pub fn warning_lines(path: &Path, warnings: &Warnings) -> Vec<String> {
    warnings
        .iter()
        .map(|w| format!("{}: warning: {w}", path.display()))
        .collect()
}
