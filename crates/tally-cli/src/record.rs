//! `tally record`: a sampling profile of a program run natively (or of a
//! running process, `-p`), through `perf_event_open`, written in any
//! output format tally has.

use crate::Outcome;
use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;
use tally_formats::{OutputFormat, OutputOptions};
use tally_record::{CallGraph, DEFAULT_STACK_SIZE, Ending, Event, Options, Rate, Target};

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
    /// GNU gmon.out of the main program, for gprof: its PC histogram, and
    /// arcs whose counts are sampled stacks (not calls).
    Gmon,
    /// One DCPI profile per image, in an epoch directory under `-d DIR`.
    Dcpi,
}

/// Arguments of `tally record`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  tally record -o callgrind.out -- ./prog args\n  tally record -F 4999 -o prof.pb.gz -- ./prog\n  tally record -p 1234 --duration 10 -o callgrind.out.1234"
)]
pub struct Args {
    /// Output file; its name picks the format (`callgrind.out*`, `*.pb.gz`,
    /// `*.folded`, `*.json`, `*.speedscope.json`) unless `--format` says
    /// [default: tally.PID.json, tally's JSON with the recorded stacks,
    /// times and threads, which every command reads].
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Output format (`gmon` for an output named `gmon.out`, `dcpi` with
    /// `-d`).
    #[arg(long, value_enum)]
    pub(crate) format: Option<To>,
    /// DCPI output: the profile database; each recording writes an epoch
    /// directory `DIR/YYMMDDHHMM` of one profile per image.
    #[arg(short = 'd', long = "db", value_name = "DIR")]
    pub(crate) db: Option<PathBuf>,
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
    /// Record every process (root, or kernel.perf_event_paranoid at most
    /// 0) into DCPI epoch directories of `-d DIR`, until `--duration` or
    /// SIGINT/SIGTERM.
    #[arg(long, requires = "db", conflicts_with_all = ["command", "pid", "output"])]
    system: bool,
    /// With `--system`: start a new epoch directory every S seconds.
    #[arg(long, value_name = "S", requires = "system", value_parser = crate::values::seconds)]
    epoch: Option<Duration>,
    /// With `-p` or `--system`: stop after this many seconds.
    #[arg(long, value_name = "S", value_parser = crate::values::seconds)]
    duration: Option<Duration>,
    /// Ring buffer pages per CPU (a power of two; more for high rates)
    /// [default: 128 with frame pointers, 1024 with DWARF].
    #[arg(long, value_name = "PAGES")]
    pub(crate) mmap_pages: Option<usize>,
    /// How call stacks are taken: `fp` (frame pointers), `dwarf[,BYTES]`
    /// (unwinding a copy of BYTES of user stack, default 16384, with the
    /// images' DWARF call frame information), or `auto`: fp when the
    /// program's functions keep frame pointers, else dwarf.
    #[arg(
        long = "call-graph",
        default_value = "auto",
        value_name = "fp|dwarf[,BYTES]|auto"
    )]
    call_graph: String,
    /// Sample the processes the program forks (and the programs they
    /// exec) too, not only its threads.
    #[arg(long)]
    follow_children: bool,
    /// Also record where threads wait (blocked in the kernel: sleep, I/O,
    /// locks) and for how long, as a second event, `off-cpu`, in ns (needs
    /// kernel sampling: root, CAP_PERFMON or kernel.perf_event_paranoid at
    /// most 1).
    #[arg(long, conflicts_with = "system")]
    off_cpu: bool,
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
        (Some(hz), None) => match tally_record::max_frequency() {
            Some(max) if hz > max => crate::usage_bail!(
                "-F {hz}: above the kernel's highest rate, {max} Hz \
                 (/proc/sys/kernel/perf_event_max_sample_rate)"
            ),
            _ => Rate::Frequency(hz),
        },
        (None, None) => Rate::Frequency(999),
    };
    if let Some(p) = args.mmap_pages
        && !p.is_power_of_two()
    {
        crate::usage_bail!("--mmap-pages {p}: not a power of two");
    }
    let call_graph = match args.call_graph.split_once(',') {
        None if args.call_graph == "fp" => CallGraph::FramePointers,
        None if args.call_graph == "auto" => CallGraph::Auto,
        None if args.call_graph == "dwarf" => CallGraph::Dwarf(DEFAULT_STACK_SIZE),
        Some(("dwarf", n)) => match n.parse::<u32>() {
            Ok(n) if (8..=65528).contains(&n) => CallGraph::Dwarf(n),
            _ => crate::usage_bail!(
                "--call-graph dwarf,{n}: the stack size must be 8 to 65528 bytes"
            ),
        },
        _ => crate::usage_bail!(
            "--call-graph {}: not fp, dwarf, dwarf,BYTES or auto",
            args.call_graph
        ),
    };
    // The program may follow without `--`, so an option tally does not
    // know would otherwise be taken for the program's name.
    if let Some(first) = args.command.first()
        && first.starts_with('-')
        && first != "-"
    {
        crate::usage_bail!(
            "{first}: not an option of tally record (the program comes after the options; a program whose name starts with `-` is run as ./{first})"
        );
    }
    let duration = args.duration;
    if args.system {
        return crate::record_system::run(&args, event, rate, duration, args.epoch);
    }
    let target = match (args.pid, args.command.split_first()) {
        (Some(pid), _) => Target::Pid { pid, duration },
        (None, Some(_)) if duration.is_some() => {
            crate::usage_bail!("--duration is for -p and --system: a program runs until it ends")
        }
        (None, Some((program, _))) => Target::Command {
            program: PathBuf::from(program),
            args: args.command.clone(),
        },
        (None, None) => crate::usage_bail!("nothing to record: give `-- PROG ARGS…` or `-p PID`"),
    };
    crate::record_out::check_output(&args)?;
    let options = Options {
        event,
        rate,
        pages: args.mmap_pages.unwrap_or(0),
        call_graph,
        follow_children: args.follow_children,
        off_cpu: args.off_cpu,
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
    if let Some(to) = crate::record_out::counts(&args) {
        crate::record_out::write_counts(&recording, to, &args)?;
        return status(&recording);
    }
    let output = args
        .output
        .clone()
        .unwrap_or_else(|| crate::record_out::default_output(args.format, recording.pid));
    let format = args
        .format
        .map(crate::inputs::output_format)
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
    status(&recording)
}

/// The program's status is tally's, as a shell gives it.
fn status(recording: &tally_record::Recording) -> anyhow::Result<Outcome> {
    match recording.ending {
        Ending::Exited(0) | Ending::Detached => Ok(Outcome::Ok),
        Ending::Exited(c) => std::process::exit(tally_process::Exit::Code(c).code()),
        Ending::Killed(s) => std::process::exit(tally_process::Exit::Signal(s).code()),
    }
}
