//! `tally gate BASE NEW`: fails (exit status 1) when the new profile costs
//! more than the budgets allow over the base; 2 for usage and input errors
//! (see docs/gate.md).

use crate::Outcome;
use crate::inputs as combine;
use anyhow::Context;
use std::path::{Path, PathBuf};
use tally_analysis::combine::{CombineOptions, Combiner, EventChoice, Sign};
use tally_analysis::gate::{self, Baseline, GateOptions, Limit, SideCosts};
use tally_model::Profile;
use tally_report::gate::{GateFormat, GateReport};

/// Arguments of `tally gate`.
#[derive(clap::Args)]
pub struct Args {
    /// The base profile and the new one (or `--base` and `--new`).
    #[arg(value_name = "BASE NEW", num_args = 0..=2)]
    files: Vec<PathBuf>,
    /// Base profiles, summed (instead of BASE).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "files")]
    base: Vec<PathBuf>,
    /// New profiles, summed (instead of NEW).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "files")]
    new: Vec<PathBuf>,
    /// The event judged: a name (recorded or derived) or `NAME=FORMULA`
    /// (e.g. `Cost=Ir+10*D1mr`). Default: `Ir` when the base has it, else
    /// its first event.
    #[arg(long, value_name = "EVENT|NAME=FORMULA")]
    event: Option<String>,
    /// The largest accepted increase of the total: a percentage of the
    /// base total, or a count.
    #[arg(long, default_value = "2%", value_parser = limit, value_name = "N%|N")]
    max_increase: Limit,
    /// The largest accepted increase of a function's self or inclusive
    /// cost: a percentage of its base cost (of the base total for a new
    /// function), or a count.
    #[arg(long, default_value = "5%", value_parser = limit, value_name = "N%|N")]
    max_function_increase: Limit,
    /// Functions below this share of their side's total (or count) on
    /// both sides are not judged.
    #[arg(long, default_value = "0.1%", value_parser = limit, value_name = "N%|N")]
    min_cost: Limit,
    /// Run-to-run noise: a function's increase up to this share of the
    /// base total (or count) is never over budget (0 to judge every
    /// increase by the function's own budget).
    #[arg(long, default_value = "0.5%", value_parser = limit, value_name = "N%|N")]
    noise_floor: Limit,
    /// Functions whose name matches this regular expression are not
    /// judged (repeatable).
    #[arg(long, value_name = "REGEX")]
    ignore: Vec<String>,
    /// Accepted per-function budgets, one `BUDGET [file=F] [object=O]
    /// FUNCTION` a line.
    #[arg(long, value_name = "FILE")]
    baseline_file: Option<PathBuf>,
    /// The report's format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// Write the report here (`-` for standard output); the text verdict
    /// then goes to standard output too.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// A Perl-style `s/regex/replacement/` applied to every file name of
    /// both sides (builds in different folders).
    #[arg(long, value_name = "EXPR")]
    mod_filename: Option<String>,
    /// A Perl-style `s/regex/replacement/` applied to every function name
    /// of both sides.
    #[arg(long, value_name = "EXPR")]
    mod_funcname: Option<String>,
}

/// Report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    /// The functions over budget with their changes.
    Text,
    /// Everything judged (schema in docs/gate.md).
    Json,
    /// JUnit XML: a test case per judged function and for the total.
    Junit,
    /// A summary table for a pull-request comment.
    Markdown,
}

fn limit(s: &str) -> Result<Limit, String> {
    s.parse().map_err(|e: tally_analysis::Error| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let (base, new) = match (&args.files[..], args.base.is_empty(), args.new.is_empty()) {
        ([b, n], true, true) => (vec![b.clone()], vec![n.clone()]),
        ([], false, false) => (args.base.clone(), args.new.clone()),
        _ => crate::usage_bail!("give BASE and NEW, or `--base FILE…` and `--new FILE…`"),
    };
    combine::stdin_once(base.iter().chain(&new))?;
    let ignore = args
        .ignore
        .iter()
        .map(|r| gate::ignore_pattern(r).context("--ignore"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let baseline = match &args.baseline_file {
        None => Baseline::default(),
        Some(p) => {
            let text = std::fs::read(p).with_context(|| format!("{}", p.display()))?;
            Baseline::parse(&p.display().to_string(), &text)?
        }
    };
    let options = CombineOptions {
        events: EventChoice::Same,
        combine_parts: true,
        per_function: true,
        keep_zero: false,
        rename_file: combine::subst(args.mod_filename.as_deref(), "--mod-filename")?,
        rename_function: combine::subst(args.mod_funcname.as_deref(), "--mod-funcname")?,
    };
    // Each side is read and summed on its own thread.
    // Their warnings are printed base first, whichever ends first.
    let (mut wb, mut wn) = (Vec::new(), Vec::new());
    let (pb, pn) = std::thread::scope(|scope| {
        let other = scope.spawn(|| sum(&new, &options, &mut wn));
        let pb = sum(&base, &options, &mut wb);
        let pn = other
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("reading the new profiles failed")));
        (pb, pn)
    });
    combine::print_lines(&wb);
    combine::print_lines(&wn);
    let (mut pb, mut pn) = (pb?, pn?);
    let event = event_name(args.event.as_deref(), &mut [&mut pb, &mut pn])?;
    let sb = SideCosts::new(&pb, &event, &names(&base).join(", "))?;
    let sn = SideCosts::new(&pn, &event, &names(&new).join(", "))?;
    drop((pb, pn));
    let gate_options = GateOptions {
        max_increase: args.max_increase,
        max_function_increase: args.max_function_increase,
        min_cost: args.min_cost,
        noise_floor: args.noise_floor,
        ignore,
        baseline,
    };
    let verdict = gate::check(&sb, &sn, &gate_options);
    let report = GateReport {
        verdict: &verdict,
        base: names(&base),
        new: names(&new),
        options: &gate_options,
    };
    let format = match args.format {
        Format::Text => GateFormat::Text,
        Format::Json => GateFormat::Json,
        Format::Junit => GateFormat::Junit,
        Format::Markdown => GateFormat::Markdown,
    };
    let out = args.output.clone().unwrap_or_else(|| PathBuf::from("-"));
    tally_formats::write_file(&out, |w| tally_report::gate::write(&report, format, w))?;
    if args.output.is_some() && out.as_os_str() != "-" {
        tally_formats::write_file(Path::new("-"), |w| {
            tally_report::gate::write(&report, GateFormat::Text, w)
        })?;
    }
    Ok(if verdict.passed() {
        Outcome::Ok
    } else {
        Outcome::OverBudget
    })
}

/// The files of one side summed into one profile (per function: the gate
/// needs no lines).
fn sum(
    files: &[PathBuf],
    options: &CombineOptions,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Profile<i64>> {
    let mut c = Combiner::<i64>::new(options.clone());
    let all: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
    for f in files {
        let loaded = combine::load_folded(f)?;
        warnings.extend(combine::read_warnings(&loaded, f));
        combine::add_folded_to(&mut c, &loaded, Sign::Plus, &combine::label(f))
            .map_err(|e| combine::locate::<i64>(e, &all, &combine::event_names(&c)))?;
    }
    let events = combine::event_names(&c);
    let summed = c
        .finish()
        .map_err(|e| combine::locate::<i64>(e, &all, &events))?;
    warnings.extend(combine::stated_warnings(
        &summed,
        "gate",
        files.first().map_or(Path::new("-"), |f| f),
    ));
    Ok(summed.profile)
}

/// The event to judge: `--event` (a `NAME=FORMULA` added to both sides),
/// else `Ir` where the base has it, else the base's first event.
fn event_name(arg: Option<&str>, sides: &mut [&mut Profile<i64>]) -> anyhow::Result<String> {
    let Some(arg) = arg else {
        let events = &sides[0].events;
        return Ok(if events.find("Ir").is_some() {
            "Ir".to_string()
        } else {
            events
                .recorded()
                .first()
                .map(|e| e.name.clone())
                .unwrap_or_else(|| "Ir".to_string())
        });
    };
    let Some((name, formula)) = arg.split_once('=') else {
        return Ok(arg.trim().to_string());
    };
    let name = name.trim();
    let formula = tally_model::parse_expression(formula.trim())
        .with_context(|| format!("--event `{arg}`"))?;
    for p in sides.iter_mut() {
        if name.is_empty() || p.events.find(name).is_some() {
            crate::usage_bail!("--event `{arg}`: the name `{name}` is empty or already an event");
        }
        p.events
            .add_formula(name.to_string(), None, formula.clone());
        p.events
            .resolve()
            .with_context(|| format!("--event `{arg}`"))?;
    }
    Ok(name.to_string())
}

fn names(files: &[PathBuf]) -> Vec<String> {
    files.iter().map(|f| f.display().to_string()).collect()
}
