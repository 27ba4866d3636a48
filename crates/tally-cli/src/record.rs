//! `tally record`: a sampling profile of a program run natively (or of a
//! running process, `-p`), through `perf_event_open`, written in any
//! output format tally has.

use crate::Outcome;
use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;
use tally_formats::{OutputFormat, OutputOptions};
use tally_record::{Ending, Event, Options, Rate, Target};

/// Output formats of `tally record`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Callgrind (self samples per line and instruction, call arcs).
    Callgrind,
    /// JSON (see docs/json.md).
    Json,
    /// pprof (profile.proto, gzip'd).
    Pprof,
    /// speedscope's JSON file format.
    Speedscope,
    /// Folded stacks (`main;f;g 12` lines).
    Folded,
}

/// Arguments of `tally record`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  tally record -o callgrind.out -- ./prog args\n  tally record -F 4999 -o prof.pb.gz -- ./prog\n  tally record -p 1234 --duration 10 -o callgrind.out.1234"
)]
pub struct Args {
    /// Output file; its name picks the format (`callgrind.out*`, `*.pb.gz`,
    /// `*.folded`, `*.json`, `*.speedscope.json`) unless `--format` says
    /// [default: callgrind.out.PID].
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    format: Option<To>,
    /// Event to sample: cpu-clock, task-clock, page-faults,
    /// context-switches, or the hardware cycles, instructions,
    /// cache-references, cache-misses, branches, branch-misses (cpu-clock
    /// instead, with a note, where the machine has no such counter).
    #[arg(short, long, default_value = "cpu-clock")]
    event: String,
    /// Samples per second.
    #[arg(
        short = 'F',
        long = "freq",
        value_name = "HZ",
        conflicts_with = "count"
    )]
    freq: Option<u64>,
    /// One sample every PERIOD events (ns for the clocks).
    #[arg(short = 'c', long = "count", value_name = "PERIOD")]
    count: Option<u64>,
    /// Record this running process instead of starting a program.
    #[arg(short, long, value_name = "PID", conflicts_with = "command")]
    pid: Option<i32>,
    /// With `-p`: stop after this many seconds.
    #[arg(long, value_name = "S", requires = "pid")]
    duration: Option<f64>,
    /// Ring buffer pages per CPU (a power of two; more for high rates).
    #[arg(long, default_value_t = 128, value_name = "PAGES")]
    mmap_pages: usize,
    /// The program and its arguments.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROG ARGS"
    )]
    command: Vec<String>,
}

/// Runs `tally record`; the exit status is the program's.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let event = Event::named(&args.event).ok_or_else(|| {
        let names: Vec<&str> = tally_record::EVENTS.iter().map(|e| e.name).collect();
        crate::usage!(
            "-e {}: unknown event (known: {})",
            args.event,
            names.join(", ")
        )
    })?;
    let rate = match (args.freq, args.count) {
        (_, Some(0)) | (Some(0), _) => {
            crate::usage_bail!("the rate and the period must be above 0")
        }
        (_, Some(p)) => Rate::Period(p),
        (Some(hz), None) => Rate::Frequency(hz),
        (None, None) => Rate::Frequency(999),
    };
    if !args.mmap_pages.is_power_of_two() {
        crate::usage_bail!("--mmap-pages {}: not a power of two", args.mmap_pages);
    }
    let target = match (args.pid, args.command.split_first()) {
        (Some(pid), _) => Target::Pid {
            pid,
            duration: match args.duration {
                Some(s) if !(s > 0.0 && s.is_finite()) => {
                    crate::usage_bail!("--duration {s}: not a positive number of seconds")
                }
                Some(s) => Some(Duration::from_secs_f64(s)),
                None => None,
            },
        },
        (None, Some((program, _))) => Target::Command {
            program: PathBuf::from(program),
            args: args.command.clone(),
        },
        (None, None) => crate::usage_bail!("nothing to record: give `-- PROG ARGS…` or `-p PID`"),
    };
    let options = Options {
        event,
        rate,
        pages: args.mmap_pages,
    };
    let recording = tally_record::record(&target, &options)?;
    for note in &recording.notes {
        eprintln!("tally record: note: {note}");
    }
    let samples = recording.samples();
    if recording.lost > 0 {
        eprintln!(
            "tally record: warning: {} samples lost (the ring buffer was full; try a larger --mmap-pages or a lower -F)",
            recording.lost
        );
    }
    if let Some(s) = recording.interrupted {
        eprintln!(
            "tally record: stopped by {}: the profile is incomplete",
            tally_record::signal_name(s)
        );
    }
    if let Ending::Killed(s) = recording.ending {
        eprintln!(
            "tally record: the program was killed by {}",
            tally_record::signal_name(s)
        );
    }
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("callgrind.out.{}", recording.pid)));
    let format = args
        .format
        .map(crate::combine::output_format)
        .or_else(|| OutputFormat::from_name(&output))
        .unwrap_or(OutputFormat::Callgrind);
    if matches!(format, OutputFormat::Dcpi | OutputFormat::Cachegrind) {
        crate::usage_bail!(
            "{}: tally record writes callgrind, json, pprof, speedscope or folded",
            output.display()
        );
    }
    let profile = recording.profile()?;
    tally_formats::write_profile(
        &profile,
        &output,
        &OutputOptions {
            format: Some(format),
            ..Default::default()
        },
    )
    .with_context(|| format!("writing {}", output.display()))?;
    eprintln!(
        "tally record: {samples} samples of {} ({} lost, {} threads) written to {}",
        recording.event.name,
        recording.lost,
        recording.threads(),
        output.display()
    );
    if samples == 0 {
        eprintln!("tally record: warning: no samples: the program ran too briefly for the rate");
    }
    // The program's status is tally's, as a shell gives it.
    match recording.ending {
        Ending::Exited(0) | Ending::Detached => Ok(Outcome::Ok),
        Ending::Exited(c) => std::process::exit(c),
        Ending::Killed(s) => std::process::exit(128 + s),
    }
}
