//! What several commands share about their inputs and outputs: the input
//! library's merge and diff inputs, and the options that name them
//! (`--to`, `--mod-filename`, `--mod-funcname`).

use anyhow::Context;
use tally_analysis::subst::Subst;
use tally_formats::OutputFormat;

pub use tally_input::combine::*;
pub use tally_input::stdin_once;

/// Parses `--mod-filename` / `--mod-funcname`.
pub fn subst(expr: Option<&str>, flag: &str) -> anyhow::Result<Option<Subst>> {
    expr.map(|e| Subst::parse(e).with_context(|| flag.to_string()))
        .transpose()
}

/// Output formats of merge and diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Callgrind format.
    Callgrind,
    /// Cachegrind format (self costs per file, function and line).
    Cachegrind,
    /// JSON (see docs/json.md).
    Json,
    /// pprof (profile.proto, gzip'd): inputs with whole stacks only.
    Pprof,
    /// Folded stacks (`a;b;c COUNT`): inputs with whole stacks only.
    Folded,
    /// speedscope JSON: inputs with whole stacks only.
    Speedscope,
}

/// The output format a `--to` value names (the values of every `--to`
/// enum are [`OutputFormat`] names).
pub fn output_format(to: impl clap::ValueEnum) -> OutputFormat {
    let value = to
        .to_possible_value()
        .expect("`--to` values are never skipped");
    value
        .get_name()
        .parse()
        .expect("`--to` values name output formats")
}
