//! `tally`: the command-line front end. Parsing of arguments, progress and
//! printing live here; everything else is in the library crates.

mod annotate;
mod check;
mod convert;
mod dcpi;
mod diff;
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
mod record_system;
#[cfg(feature = "web")]
mod serve;
#[cfg(feature = "sim")]
mod sim;

use clap::{Parser, Subcommand};
use std::io::{self, Write};
use std::process::ExitCode;

/// tally: read, check, convert, merge, compare and analyse program profiles (Callgrind, Cachegrind, gprof, DCPI).
#[derive(Parser)]
#[command(name = "tally", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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

/// A command called wrongly (a missing argument, options that do not fit
/// together, a malformed option value): exit status 2, as for the errors
/// clap finds, where errors in the input exit with 1.
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// A [`Usage`] error, formatted as `format!` does.
#[macro_export]
macro_rules! usage {
    ($($t:tt)*) => { anyhow::Error::new($crate::Usage(format!($($t)*))) };
}

/// Returns a [`Usage`] error from the enclosing function.
#[macro_export]
macro_rules! usage_bail {
    ($($t:tt)*) => { return Err($crate::usage!($($t)*)) };
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
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let _ = io::stdout().flush();
            report(&e);
            if e.chain().any(|c| {
                c.is::<Usage>() || matches!(c.downcast_ref(), Some(tally_input::Error::Usage(_)))
            }) {
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

/// Prints an error: parse errors as `FILE:LINE: message`, others with their
/// chain of causes.
pub fn report(e: &anyhow::Error) {
    // A reader's error names its file and line already; with context
    // added, the whole chain is printed.
    let outer = e.chain().next();
    let formats = outer.and_then(|o| match o.downcast_ref::<tally_input::Error>() {
        Some(tally_input::Error::Formats(f)) => Some(f),
        _ => o.downcast_ref::<tally_formats::Error>(),
    });
    if let Some(f) = formats {
        eprintln!("{f}");
    } else {
        eprintln!("tally: {}", chain(e));
    }
}

/// The error and its causes joined by `: `, leaving out a cause whose text
/// is already said (an I/O error that names its cause in its message and
/// carries it as its source too).
fn chain(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for c in e.chain() {
        let s = c.to_string();
        if msg.contains(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}

/// Whether an error comes from a closed standard output (`tally … | head`):
/// tally then ends quietly with status 0, as ripgrep and other filters do.
/// Rust ignores SIGPIPE in its binaries, so a write to a closed pipe fails
/// with EPIPE (this error) instead of killing the process.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(broken_pipe)
}

/// Whether `e`, or an error it wraps, is an I/O error of kind
/// [`io::ErrorKind::BrokenPipe`]. `source()` does not always lead there:
/// an `io::Error::other(inner)` gives `inner`'s source, never `inner`
/// itself, and serde_json's error hides the I/O error it carries; both
/// are opened here.
fn broken_pipe(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(c) = next {
        if let Some(io) = c.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::BrokenPipe {
                return true;
            }
            if let Some(inner) = io.get_ref()
                && broken_pipe(inner)
            {
                return true;
            }
        }
        if let Some(j) = c.downcast_ref::<serde_json::Error>()
            && j.io_error_kind() == Some(io::ErrorKind::BrokenPipe)
        {
            return true;
        }
        if let Some(
            tally_formats::Error::Io { source, .. } | tally_formats::Error::Read { source, .. },
        ) = c.downcast_ref::<tally_formats::Error>()
            && source.kind() == io::ErrorKind::BrokenPipe
        {
            return true;
        }
        next = c.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn pipe() -> io::Error {
        io::Error::from(io::ErrorKind::BrokenPipe)
    }

    #[test]
    fn a_closed_pipe_is_seen_however_it_is_wrapped() {
        assert!(is_broken_pipe(&anyhow::Error::new(pipe())));
        assert!(is_broken_pipe(
            &anyhow::Error::new(pipe()).context("writing the report")
        ));
        // `tally annotate --json`: serde_json's error in io::Error::other,
        // in the report's error.
        let json = io::Error::other(serde_json::Error::io(pipe()));
        let report = tally_report::ReportError::Io(json);
        assert!(is_broken_pipe(&anyhow::Error::new(report)));
        let formats = tally_formats::Error::Io {
            path: "-".into(),
            source: pipe(),
        };
        let input = tally_input::Error::Formats(formats);
        assert!(is_broken_pipe(
            &Err::<(), _>(input).context("converting").unwrap_err()
        ));
    }

    #[test]
    fn other_errors_are_not_a_closed_pipe() {
        let denied = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(!is_broken_pipe(&anyhow::Error::new(denied)));
        let json = serde_json::from_str::<u32>("x").unwrap_err();
        assert!(!is_broken_pipe(&anyhow::Error::new(io::Error::other(json))));
        assert!(!is_broken_pipe(&anyhow::anyhow!("Broken pipe")));
        assert!(!is_broken_pipe(&anyhow::Error::new(Usage("x".into()))));
    }
}
