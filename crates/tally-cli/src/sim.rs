//! `tally sim`: Cachegrind's cache and branch simulation of a program run
//! under QEMU with tally's tracing plugin, or of a Lackey trace.

use clap::Parser;
use std::path::PathBuf;
use tally_model::Format;
use tally_sim::{
    Ending, EngineOptions, Hierarchy, Machine, MachineOptions, ProfileSpec, Run, describe,
    event_indices, summary, to_profile,
};

use crate::Outcome;

/// Arguments of `tally sim`.
#[derive(Parser, Debug)]
#[command(
    about = "Simulate caches and branch predictors as Cachegrind does, on a program run under QEMU or a Lackey trace",
    after_help = "Examples:\n  tally sim --branch-sim=yes -- ./prog args\n  tally sim --I1=32768,8,64 --D1=32768,8,64 --LL=8388608,16,64 -- ./prog\n  tally sim --cache L2=262144,4,64 --policy=plru -- ./prog\n  tally sim --config 'small: --D1=8192,2,64 --LL=262144,8,64' -- ./prog\n  valgrind --tool=lackey --trace-mem=yes -v -v --log-file=trace ./prog\n  tally sim --lackey trace --binary ./prog"
)]
pub struct Args {
    /// I1 cache: SIZE,ASSOC,LINE_SIZE (default: the host's, as Cachegrind).
    #[arg(long = "I1", value_name = "S,A,L")]
    i1: Option<String>,
    /// D1 cache: SIZE,ASSOC,LINE_SIZE.
    #[arg(long = "D1", value_name = "S,A,L")]
    d1: Option<String>,
    /// Last-level cache: SIZE,ASSOC,LINE_SIZE.
    #[arg(long = "LL", value_name = "S,A,L")]
    ll: Option<String>,
    /// A level between L1 and LL, `NAME=SIZE,ASSOC,LINE_SIZE`; repeat for
    /// more, in order from L1 outwards.
    #[arg(long = "cache", value_name = "NAME=S,A,L")]
    cache: Vec<String>,
    /// Replacement policy of every cache: lru (Cachegrind's), fifo, plru, random (random:SEED for a seed).
    #[arg(long, default_value = "lru")]
    policy: String,
    /// Another machine simulated in the same pass: `NAME: --D1=… --LL=… --policy=…`
    /// (caches not given are the main machine's); written to OUT.NAME.
    #[arg(long = "config", value_name = "SPEC")]
    configs: Vec<String>,
    /// Simulate the caches.
    #[arg(long = "cache-sim", value_name = "yes|no", default_value = "yes", value_parser = crate::values::yes_no, action = clap::ArgAction::Set)]
    cache_sim: bool,
    /// Simulate the branch predictors.
    #[arg(long = "branch-sim", value_name = "yes|no", default_value = "no", value_parser = crate::values::yes_no, action = clap::ArgAction::Set)]
    branch_sim: bool,
    /// Output file (`%p`: the process id) [default: cachegrind.out.%p, or
    /// callgrind.out.%p with --callgrind].
    #[arg(long = "out-file", alias = "cachegrind-out-file", value_name = "FILE")]
    out_file: Option<PathBuf>,
    /// Write a Callgrind profile with call arcs instead of a Cachegrind one.
    #[arg(long)]
    callgrind: bool,
    /// Write source file names as Valgrind 3.19 does (DWARF 5 names under
    /// a relative directory with it doubled), to diff against its profiles.
    #[arg(long)]
    valgrind_names: bool,
    /// Simulate a Lackey trace (`valgrind --tool=lackey --trace-mem=yes`; with
    /// `-v -v` in the same file the shared libraries are found too); `-` reads standard input.
    #[arg(long, value_name = "TRACE")]
    lackey: Option<PathBuf>,
    /// Simulate a tally trace stream written by the QEMU plugin with `out=FILE`.
    #[arg(long, value_name = "FILE", conflicts_with = "lackey")]
    trace: Option<PathBuf>,
    /// The program a trace is of (for symbols when the trace does not name it).
    #[arg(long, value_name = "PROG")]
    binary: Option<PathBuf>,
    /// The QEMU user-mode emulator [default: qemu-ARCH on PATH, ARCH being PROG's].
    #[arg(long, value_name = "PATH")]
    qemu: Option<PathBuf>,
    /// tally's QEMU plugin [default: $TALLY_QEMU_PLUGIN, else
    /// libtally_qemu_plugin.so next to tally, else in $XDG_DATA_HOME/tally
    /// (~/.local/share/tally)].
    #[arg(long, value_name = "PATH")]
    plugin: Option<PathBuf>,
    /// Copy a built plugin into $XDG_DATA_HOME/tally (~/.local/share/tally),
    /// where tally looks for it, and exit.
    #[arg(long, value_name = "PLUGIN", exclusive = true)]
    install_plugin: Option<PathBuf>,
    /// Simulate D1 inside QEMU's process, beside the program, with one
    /// machine (the results are the same; `no` sends every access to tally).
    #[arg(long = "plugin-d1", value_name = "yes|no", default_value = "yes", value_parser = crate::values::yes_no, action = clap::ArgAction::Set)]
    plugin_d1: bool,
    /// Follow the processes the program forks and execs, one profile per
    /// process (`%p` in --out-file: its pid); `no`: only the first process,
    /// up to an exec, with a warning when it forked or exec'd.
    #[arg(long = "trace-children", value_name = "yes|no", default_value = "no", value_parser = crate::values::yes_no, action = clap::ArgAction::Set)]
    trace_children: bool,
    /// The program and its arguments.
    #[arg(last = true, value_name = "PROG ARGS")]
    command: Vec<String>,
}

pub fn run(a: Args) -> anyhow::Result<Outcome> {
    if let Some(p) = &a.install_plugin {
        let to = tally_sim::install_plugin(p)?;
        eprintln!("tally sim: the plugin is installed as {}", to.display());
        return Ok(Outcome::Ok);
    }
    if a.trace_children {
        if a.lackey.is_some() || a.trace.is_some() {
            crate::usage_bail!(
                "--trace-children=yes follows a program run (tally sim -- PROG), not a trace"
            );
        }
        if let Some(o) = &a.out_file
            && !o.to_string_lossy().contains("%p")
        {
            crate::usage_bail!(
                "--trace-children=yes writes one profile per process: put %p (the pid) in --out-file, e.g. --out-file {}.%p",
                o.display()
            );
        }
    }
    // Every machine error is in the options (geometries, policies).
    let ms = tally_sim::machines(&MachineOptions {
        i1: a.i1.as_deref(),
        d1: a.d1.as_deref(),
        ll: a.ll.as_deref(),
        cache: &a.cache,
        policy: &a.policy,
        configs: &a.configs,
    })
    .map_err(|e| crate::usage!("{e}"))?;
    if a.cache_sim
        && a.ll.is_none()
        && let Some(n) = tally_sim::host_ll_note()
    {
        eprintln!("tally sim: note: {n}");
    }
    let opts = EngineOptions {
        branch_sim: a.branch_sim,
        calls: a.callgrind,
        merge_modify: false,
        no_icache: !a.cache_sim,
    };
    let hier: Vec<Hierarchy> = ms
        .iter()
        .map(|m| Hierarchy::new(&m.config))
        .collect::<Result<_, _>>()?;
    // Before the program runs: an output that cannot be written would
    // waste the run.
    for m in &ms {
        tally_sim::check_output(&out_path(&a, m.name.as_deref(), 0))?;
    }
    let run = if let Some(t) = &a.lackey {
        tally_sim::lackey_trace(t, a.binary.as_deref(), hier, opts)?
    } else if let Some(t) = &a.trace {
        tally_sim::trace_file(t, a.binary.as_deref(), hier, opts)?
    } else {
        if a.command.is_empty() {
            crate::usage_bail!(
                "no program given: tally sim [OPTIONS] -- PROG ARGS (or --lackey TRACE, --trace FILE)"
            );
        }
        let native = tally_sim::Native {
            command: &a.command,
            qemu: a.qemu.as_deref(),
            plugin: a.plugin.as_deref(),
            accesses: a.cache_sim || a.branch_sim,
            // The plugin simulates D1 when there is one, with the cache
            // simulated: tally then has hits counted and misses to go on
            // with.
            d1: match ms.as_slice() {
                [m] if a.cache_sim && a.plugin_d1 => Some(&m.config),
                _ => None,
            },
            count_hits: !a.callgrind,
        };
        if a.trace_children {
            return family(&a, &ms, tally_sim::native_children(&native, hier, opts)?);
        }
        tally_sim::native(&native, hier, opts)?
    };
    for p in &run.space.problems {
        eprintln!("tally sim: warning: {p} (its code is counted as ???)");
    }
    let u = run.unfollowed;
    if u.forks + u.execs > 0 {
        eprintln!(
            "tally sim: warning: the program forked {} time(s) and called execve {} time(s); only its first process is profiled, up to an exec (children are not followed)",
            u.forks, u.execs
        );
    }
    warn_incomplete(&run);
    report(&a, &ms, &run)?;
    exit_as(run.status)
}

fn warn_incomplete(run: &Run) {
    if let Ending::Incomplete(why) = &run.ending {
        eprintln!(
            "tally sim: warning: {why}; the profile covers the run up to there and is marked incomplete"
        );
    }
}

/// The program's own failure is passed on, as Valgrind does.
fn exit_as(status: Option<std::process::ExitStatus>) -> anyhow::Result<Outcome> {
    match status {
        Some(s) if !s.success() => std::process::exit(tally_process::exit_code(s)),
        _ => Ok(Outcome::Ok),
    }
}

/// Writes the profile of every process of a run with children followed.
fn family(a: &Args, ms: &[Machine], f: tally_sim::Family) -> anyhow::Result<Outcome> {
    for path in &f.unfollowed {
        eprintln!(
            "tally sim: warning: {path} was exec'd without being followed (not a program for this emulator, or QEMU could not run it)"
        );
    }
    let mut problems = std::collections::BTreeSet::new();
    for run in &f.runs {
        for p in &run.space.problems {
            if problems.insert(p.clone()) {
                eprintln!("tally sim: warning: {p} (its code is counted as ???)");
            }
        }
        if let Ending::Incomplete(why) = &run.ending {
            eprintln!(
                "tally sim: warning: process {}: {why}; its profile covers the run up to there and is marked incomplete",
                run.pid
            );
        }
        report(a, ms, run)?;
    }
    exit_as(f.runs.first().and_then(|r| r.status))
}

fn out_path(a: &Args, name: Option<&str>, pid: u32) -> PathBuf {
    tally_sim::out_path(a.out_file.as_deref(), a.callgrind, name, pid)
}

fn report(a: &Args, ms: &[Machine], run: &Run) -> anyhow::Result<()> {
    let (out, pid) = (&run.output, run.pid);
    for (k, m) in ms.iter().enumerate() {
        let middle = m.config.middle.len();
        let ev = event_indices(a.cache_sim, a.branch_sim, middle);
        let mut desc = if a.cache_sim {
            describe(&m.config)
        } else {
            Vec::new()
        };
        if let Ending::Incomplete(why) = &run.ending {
            desc.push(("incomplete".into(), why.clone()));
        }
        let spec = ProfileSpec {
            format: if a.callgrind {
                Format::Callgrind
            } else {
                Format::Cachegrind
            },
            cmd: run.cmd.clone(),
            desc,
            events: &ev,
            calls: a.callgrind,
            pid: Some(u64::from(pid)),
            valgrind_names: a.valgrind_names,
        };
        let prof = to_profile(out, k, &run.space, &spec);
        let path = out_path(a, m.name.as_deref(), pid);
        // The profile's own format (set above); gzip'd when the name ends in `.gz`.
        tally_formats::write_profile(&prof, &path, &Default::default())?;
        let t = out.totals(k);
        let prefix = format!("=={pid}==");
        if let Some(n) = &m.name {
            eprintln!("{prefix} configuration {n} ({})", path.display());
        }
        for line in summary(&t, a.cache_sim, a.branch_sim, middle) {
            if line.is_empty() {
                eprintln!("{prefix} ");
            } else {
                eprintln!("{prefix} {line}");
            }
        }
        if m.name.is_none() && ms.len() > 1 {
            eprintln!("{prefix} ");
        }
    }
    Ok(())
}
