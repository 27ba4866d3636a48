//! `tally convert`: read profiles (several files become the parts of one
//! profile) and write them as Callgrind, Cachegrind, JSON, pprof, speedscope,
//! folded stacks or Firefox Profiler's format. gprof's `gmon.out` files are
//! read with the program that wrote them (`--binary`) and converted to self
//! samples and calls (see docs/gprof-convert.md).

use crate::Outcome;
use crate::progress::Progress;
use anyhow::bail;
use std::path::PathBuf;
use tally_formats::{OutputFormat, OutputOptions, Source};
use tally_input::{GmonInput, InputKind, Program};
use tally_model::{AnyCost, Cost, Profile};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Callgrind format (calls and jumps kept).
    Callgrind,
    /// Cachegrind format (self costs per file, function and line).
    Cachegrind,
    /// JSON (see docs/json.md).
    Json,
    /// DCPI 0.07 profile (one event, per instruction, one object; see
    /// docs/dcpi-format.md).
    Dcpi,
    /// pprof (profile.proto, gzip'd; every event a sample type; see
    /// docs/interchange.md).
    Pprof,
    /// speedscope's JSON file format (every event a profile).
    Speedscope,
    /// Folded stacks (`main;f;g 12` lines) of one event (`--event`), for
    /// flamegraph.pl, inferno and speedscope.
    Folded,
    /// Firefox Profiler's processed format, for profiler.firefox.com (the
    /// weights of one event, `--event`; see docs/interchange.md).
    Firefox,
}

/// Input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Callgrind or Cachegrind text (told apart by content).
    Callgrind,
    /// gprof's `gmon.out` (GNU layout, or BSD layout without magic); needs
    /// `--binary`.
    Gmon,
    /// A DCPI profile (recognised by its header); `--binary` names its
    /// image.
    Dcpi,
}

/// Arguments of `tally convert`.
#[derive(clap::Args)]
pub struct Args {
    /// Input profiles; several files (a dump series, a thread set) become
    /// the parts of one profile. gprof's gmon files (with `--binary`) are
    /// summed into one.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output file (`-` for standard output; a `.gz` name is compressed).
    #[arg(short, long)]
    output: PathBuf,
    /// Output format; by default inferred from the output name (`*.json`,
    /// `*.speedscope.json`, `*.firefox.json`, `*.pb.gz`, `*.folded`, `cachegrind.out*`,
    /// `callgrind.out*`), else the input's format.
    #[arg(long, value_enum)]
    to: Option<To>,
    /// Write plain names and absolute positions (Callgrind output).
    #[arg(long)]
    no_compress: bool,
    /// Input format; by default gmon files are recognised by their `gmon`
    /// magic, or by `--binary` (BSD-layout gmon files have no magic), and
    /// anything else is read as Callgrind or Cachegrind.
    #[arg(long, value_enum)]
    from: Option<InputFormat>,
    /// The program that wrote the gmon files (built with `-pg`, not
    /// stripped): its symbols and DWARF lines map the samples and calls to
    /// functions and source lines. Several gmon files are summed. For DCPI
    /// input and output: the image the profile samples.
    #[arg(long, value_name = "PROG")]
    binary: Option<PathBuf>,
    /// gmon input: build the function table with GNU gprof 2.40's errors,
    /// as `tally gprof --gnu-compatible` does, to compare with GNU gprof
    /// (it loses some GCC clones such as `f.constprop.0` to the preceding
    /// function).
    #[arg(long)]
    gnu_compatible: bool,
    /// gmon input: keep C++ and Rust names mangled.
    #[arg(long)]
    no_demangle: bool,
    /// DCPI, folded and Firefox output: the event to take (default: the first).
    #[arg(long)]
    event: Option<String>,
    /// DCPI output: the object (`ob=`) whose instructions are taken
    /// (default: the one that is `--binary`, or the only one).
    #[arg(long)]
    object: Option<String>,
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

/// The output format: `--to`, else the one the output's name implies.
fn output_format(args: &Args) -> Option<OutputFormat> {
    args.to
        .map(crate::inputs::output_format)
        .or_else(|| OutputFormat::from_name(&args.output))
}

/// Whether the output is to be DCPI.
fn wants_dcpi(args: &Args) -> bool {
    output_format(args) == Some(OutputFormat::Dcpi)
}

/// The input format: `--from`, else what the inputs are.
fn input_format(args: &Args, sources: &[Source]) -> anyhow::Result<InputFormat> {
    if let Some(f) = args.from {
        return Ok(f);
    }
    let binary = args.binary.is_some();
    Ok(
        match tally_input::input_kind(sources, binary, wants_dcpi(args))? {
            InputKind::Dcpi => InputFormat::Dcpi,
            InputKind::Gmon => InputFormat::Gmon,
            InputKind::Profile => InputFormat::Callgrind,
        },
    )
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let stray_event =
        args.event.is_some() && !output_format(&args).is_some_and(OutputFormat::one_event);
    if !wants_dcpi(&args)
        && let Some((_, flag, and)) = [
            (stray_event, "--event", ", folded and Firefox output"),
            (args.object.is_some(), "--object", ""),
        ]
        .iter()
        .find(|f| f.0)
    {
        crate::usage_bail!(
            "{flag} is only for DCPI output (`--to dcpi` or an output name ending in .dcpi){and}"
        );
    }
    crate::inputs::stdin_once(&args.files)?;
    let sources = tally_input::open_all(&args.files)?;
    let list = args.transforms.list()?;
    if !list.is_empty() {
        let binary = args.binary.as_deref();
        let d = crate::explore::load("convert", &sources, binary, 0.0, &list)?;
        let estimated = d.estimated();
        let mut p = d.into_profile();
        if estimated && let Some(s) = p.stacks.take() {
            tally_formats::pprof::set_estimated_stacks(&mut p, s);
        }
        return write(&p, &args);
    }
    match input_format(&args, &sources)? {
        InputFormat::Gmon => return run_gmon(&args, &sources),
        InputFormat::Dcpi => return run_dcpi(&args, &sources),
        InputFormat::Callgrind => {
            let gmon_only = [
                (args.binary.is_some() && !wants_dcpi(&args), "--binary"),
                (args.gnu_compatible, "--gnu-compatible"),
                (args.no_demangle, "--no-demangle"),
            ];
            if let Some((_, flag)) = gmon_only.iter().find(|f| f.0) {
                bail!(
                    "{flag} is only for gmon input, and {} is read as a Callgrind/Cachegrind profile \
                     (a gmon file without the `gmon` magic needs --from gmon)",
                    args.files[0].display()
                );
            }
        }
    }
    let total: u64 = sources.iter().filter_map(Source::size).sum();
    let mut progress = Progress::new(Some(total));
    let mut update = |n| progress.update(n);
    let (p, warnings) = tally_input::read_within_memory(&sources, &mut update)?;
    drop(progress);
    for (s, ws) in sources.iter().zip(&warnings) {
        for line in tally_input::warning_lines(s.path(), ws) {
            eprintln!("{line}");
        }
    }
    match &p {
        AnyCost::Unsigned(p) => write_unsigned(p, &args),
        AnyCost::Signed(p) => write(p, &args),
    }
}

/// Writes a measured profile. Output of stacks (pprof, speedscope, folded,
/// Firefox) from a profile without them (Callgrind, gmon, DCPI) has them
/// estimated from its call arcs, by the estimate `tally flame` draws (for
/// Firefox's threads, each part on its own), and marked as estimated: in
/// the file where the format has room for it (pprof's comment, speedscope's
/// title, Firefox's product name), else on standard error.
fn write_unsigned(p: &Profile<u64>, args: &Args) -> anyhow::Result<Outcome> {
    let format = output_format(args);
    if !format.is_some_and(OutputFormat::holds_stacks) || p.stacks.is_some() {
        return write(p, args);
    }
    let stacks = if format == Some(OutputFormat::Firefox) {
        tally_formats::firefox::stacks_per_part(p, tally_analysis::estimate_stacks)?
    } else {
        tally_analysis::estimate_stacks(p)?
    };
    if format == Some(OutputFormat::Folded) {
        eprintln!(
            "tally convert: note: the input holds caller-callee arcs, not stacks: the folded stacks \
             are estimated (each function's cost split across its callers in proportion to the arcs)"
        );
    }
    let mut with = p.clone();
    tally_formats::pprof::set_estimated_stacks(&mut with, stacks);
    write(&with, args)
}

/// Converts a DCPI profile (several are summed) with its image.
fn run_dcpi(args: &Args, sources: &[Source]) -> anyhow::Result<Outcome> {
    let input = tally_input::read_dcpi(sources)?;
    if wants_dcpi(args) {
        tally_formats::dcpi::write_file(&input.profile, &args.output)?;
        return Ok(Outcome::Ok);
    }
    let image = match &args.binary {
        Some(b) => Some(Program::open(b)?),
        None => {
            eprintln!(
                "tally convert: warning: no --binary IMAGE: addresses are not mapped to functions and lines"
            );
            None
        }
    };
    let prof = input.to_profile(image.as_ref())?;
    write_unsigned(&prof, args)
}

/// Converts gmon files (summed as gprof sums them) with their program.
fn run_gmon(args: &Args, sources: &[Source]) -> anyhow::Result<Outcome> {
    // `--from gmon` reads files not detected as gmon: the reader names
    // what is wrong with each.
    let binary = GmonInput::need_program(&args.files[0], args.binary.as_deref())?;
    let input = GmonInput::sum(sources, Program::open(binary)?)?;
    if input.is_empty() {
        eprintln!(
            "tally convert: warning: {}: no histogram and no call arcs: the profile is empty",
            args.files[0].display()
        );
    }
    let opts = tally_analysis::gprof::Options {
        gnu_compatible: args.gnu_compatible,
        demangle: !args.no_demangle,
        ..Default::default()
    };
    let conv = input.to_profile(&opts)?;
    for n in &conv.notices {
        eprintln!("tally convert: warning: {n}");
    }
    write_unsigned(&conv.profile, args)
}

fn write<C: Cost>(p: &Profile<C>, args: &Args) -> anyhow::Result<Outcome> {
    if wants_dcpi(args) {
        let image = args.binary.as_deref().map(Program::open).transpose()?;
        let opts = tally_analysis::convert::dcpi::FromCallgrind {
            event: args.event.as_deref(),
            object: args.object.as_deref(),
        };
        let d = tally_analysis::convert::dcpi::from_callgrind(
            p,
            image.as_ref().map(Program::object),
            &opts,
        )?;
        tally_formats::dcpi::write_file(&d, &args.output)?;
        return Ok(Outcome::Ok);
    }
    let format = output_format(args);
    let event = match (&args.event, format) {
        (Some(name), Some(f)) if f.one_event() => Some(crate::inputs::recorded_event(p, name)?),
        _ => None,
    };
    if format == Some(OutputFormat::Folded) && p.stacks.is_none() {
        bail!("folded output of a difference profile (negative counts) is not supported");
    }
    let options = OutputOptions {
        event,
        format,
        compress_names: !args.no_compress,
        gzip: None,
    };
    tally_formats::write_profile(p, &args.output, &options)
        .map_err(|e| crate::inputs::write_error(e, &args.files))?;
    Ok(Outcome::Ok)
}
