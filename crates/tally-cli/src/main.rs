//! `tally`: the command-line front end. Parsing of arguments, progress and
//! printing live here; everything else is in the library crates.

mod annotate;
mod check;
mod convert;
mod dcpi;
mod diff;
mod exit;
mod explore;
#[cfg(feature = "parquet")]
mod export;
mod flame;
mod gate;
mod gprof;
mod gprof_args;
mod gprof_callgrind;
mod graph;
mod inputs;
mod merge;
mod progress;
#[cfg(feature = "record")]
mod record;
#[cfg(feature = "record")]
mod record_out;
#[cfg(feature = "record")]
mod record_system;
#[cfg(feature = "web")]
mod serve;
#[cfg(feature = "sim")]
mod sim;
mod values;

use clap::{Parser, Subcommand};
use std::io::{self, Write};
use std::process::ExitCode;

pub use exit::{Usage, report};

/// Counts tally's memory for the ceiling (`--memory-limit`), so that no
/// command ends in an allocation-failure abort.
#[global_allocator]
static ALLOCATOR: tally_formats::limits::Allocator = tally_formats::limits::Allocator;

/// tally: read, check, convert, merge, compare and analyse program profiles (Callgrind, Cachegrind, gprof, DCPI).
#[derive(Parser)]
#[command(name = "tally", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// The memory a command may hold its profiles in (`512M`, `16G`, or
    /// `none`); past it the command stops with an error naming the input
    /// and line. Default: `TALLY_MAX_MEMORY`, else three quarters of the
    /// machine's or control group's memory, and half of what `ulimit -v`
    /// leaves.
    #[arg(long, global = true, value_name = "SIZE")]
    memory_limit: Option<String>,
}

#[derive(Subcommand)]
enum Command {
    /// Validate profiles and print a short summary of each.
    Check(check::Args),
    /// Convert profiles between Callgrind, Cachegrind, JSON and DCPI, and
    /// gprof's gmon.out (with its program) to them.
    Convert(convert::Args),
    /// Annotate profiles: function tables, inclusive costs, call trees,
    /// source, assembly and jumps.
    Annotate(annotate::Args),
    /// Sum profiles per function, line, instruction, call arc and jump
    /// (Callgrind or Cachegrind; cg_merge's results for Cachegrind).
    Merge(merge::Args),
    /// The difference B − A of two profiles, written as a profile with
    /// signed counts (cg_diff's results for Cachegrind; call arcs too for
    /// Callgrind).
    Diff(diff::Args),
    /// Profiles of any format as Parquet tables (costs, functions, arcs,
    /// profiles) for Spark, DataFusion and other engines, with labels.
    #[cfg(feature = "parquet")]
    Export(export::Args),
    /// A flame graph (or icicle graph) as an interactive SVG; `--diff A B`
    /// for a differential one. Callgrind and gmon stacks are estimated
    /// from the call arcs, and the picture says so.
    Flame(flame::Args),
    /// DCPI profiles: dump, per-procedure and per-instruction reports,
    /// and comparisons, as the DCPI tools gave them.
    #[command(subcommand)]
    Dcpi(dcpi::Command),
    /// gprof's flat profile and call graph from a program and its gmon.out
    /// files, or from a Callgrind profile.
    #[command(disable_help_flag = true)]
    Gprof(GprofArgs),
    /// The call graph as a picture (SVG through Graphviz, or DOT), as
    /// gprof2dot draws it: functions coloured by their total, calls with
    /// their counts and costs, cycles grouped.
    Graph(graph::Args),
    /// A regression check for CI: exit status 1 when the new profile
    /// costs more than the budgets allow over the base (per function,
    /// self and inclusive, and in total), 2 on usage or input errors.
    Gate(gate::Args),
    /// Cachegrind's cache and branch simulation of a program run under
    /// QEMU, or of a Lackey trace, written as a Cachegrind or Callgrind
    /// profile.
    #[cfg(feature = "sim")]
    Sim(sim::Args),
    /// A local web UI on 127.0.0.1: functions, callers and callees, call
    /// graph, flame graph, source and assembly (`--diff A B` compares).
    #[cfg(feature = "web")]
    Serve(serve::Args),
    /// The web UI's page as one self-contained HTML file (`--html`).
    #[cfg(feature = "web")]
    Report(serve::ReportArgs),
    /// A sampling profile of a program run natively (or of a running
    /// process) through perf_event_open, with whole call stacks, written
    /// as Callgrind, pprof, folded stacks, JSON or speedscope.
    #[cfg(feature = "record")]
    Record(record::Args),
}

/// `tally gprof` takes gprof's own command line.
#[derive(clap::Args)]
struct GprofArgs {
    /// gprof's options and files (see `tally gprof --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    args: Vec<String>,
}

/// What a command reports besides errors.
pub enum Outcome {
    /// Everything was fine.
    Ok,
    /// The command ran but found invalid input (already reported).
    Invalid,
    /// `tally gate`: a budget was exceeded (exit status 1).
    OverBudget,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A gate's own failure is exit status 1, so that a CI job tells it
    // from a gate that could not run (bad input), which is 2.
    let error_status = if matches!(cli.command, Command::Gate(_)) {
        2
    } else {
        1
    };
    if let Some(size) = &cli.memory_limit
        && let Err(e) = tally_formats::limits::set_memory_limit("--memory-limit", size)
    {
        eprintln!("tally: {e}");
        return ExitCode::from(2);
    }
    tally_formats::limits::enforce(error_status.into());
    if let Err(e) = tally_formats::signals::install(say_stopped) {
        eprintln!("tally: cannot handle SIGINT, SIGTERM and SIGHUP: {e}");
    }
    let result = match cli.command {
        Command::Check(a) => check::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Annotate(a) => annotate::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Diff(a) => diff::run(a),
        #[cfg(feature = "parquet")]
        Command::Export(a) => export::run(a),
        Command::Flame(a) => flame::run(a),
        Command::Dcpi(c) => dcpi::run(c),
        Command::Gprof(a) => gprof::run(a.args),
        Command::Graph(a) => graph::run(a),
        Command::Gate(a) => gate::run(a),
        #[cfg(feature = "sim")]
        Command::Sim(a) => sim::run(a),
        #[cfg(feature = "web")]
        Command::Serve(a) => serve::run(a),
        #[cfg(feature = "web")]
        Command::Report(a) => serve::report(a),
        #[cfg(feature = "record")]
        Command::Record(a) => record::run(a),
    };
    // A signal that came as the work finished still decides the status.
    tally_formats::signals::await_stop();
    match result {
        Ok(Outcome::Ok) => ExitCode::SUCCESS,
        Ok(Outcome::Invalid | Outcome::OverBudget) => ExitCode::from(1),
        Err(e) => {
            if exit::is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let _ = io::stdout().flush();
            report(&e);
            if exit::is_usage(&e) {
                ExitCode::from(2)
            } else {
                ExitCode::from(error_status)
            }
        }
    }
}

/// The one line tally prints when a signal stops it (after a progress
/// bar, on a line of its own).
fn say_stopped(stop: &tally_formats::signals::Stop) {
    use std::io::IsTerminal;
    let mut line = String::new();
    if io::stderr().is_terminal() {
        line.push_str("\r\x1b[K");
    }
    line.push_str(&format!("tally: stopped by {}", stop.name()));
    for out in &stop.abandoned {
        line.push_str(&format!("; {} left as it was", out.display()));
    }
    let _ = writeln!(io::stderr(), "{line}");
}
