//! What several commands share about their inputs and outputs: the input
//! library's merge and diff inputs, and the options that name them
//! (`--to`, `--mod-filename`, `--mod-funcname`, `--event NAME=FORMULA`).

use anyhow::Context;
use tally_analysis::Subst;
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

/// Adds the events `--event NAME=FORMULA` defines (`S=Ir+Dr`), in order,
/// each a new name.
pub fn define_events(events: &mut tally_model::Events, specs: &[String]) -> anyhow::Result<()> {
    for e in specs {
        let Some((name, formula)) = e.split_once('=') else {
            crate::usage_bail!("--event `{e}`: expected NAME=FORMULA, e.g. `S=Ir+Dr`");
        };
        let name = name.trim();
        if name.is_empty() || events.find(name).is_some() {
            anyhow::bail!("--event `{e}`: the name `{name}` is empty or already an event");
        }
        let formula = tally_model::parse_expression(formula.trim())
            .with_context(|| format!("--event `{e}`"))?;
        events.add_formula(name.to_string(), None, formula);
        events.resolve().with_context(|| format!("--event `{e}`"))?;
    }
    Ok(())
}

/// The index of the recorded event `name` (for one-event output).
pub fn recorded_event<C: tally_model::Cost>(
    p: &tally_model::Profile<C>,
    name: &str,
) -> anyhow::Result<usize> {
    let names: Vec<&str> = p
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    names.iter().position(|n| *n == name).ok_or_else(|| {
        anyhow::anyhow!(
            "--event {name}: not a recorded event of the profile (it has {})",
            names.join(", ")
        )
    })
}
