//! `tally gprof`: GNU gprof's command line (parsed in `gprof_args`) over
//! the library's gprof analysis, for a program and its gmon files or for a
//! Callgrind profile.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use tally_analysis::gprof;
use tally_formats::FileFormat;
use tally_input::Sniffed;
use tally_input::{GmonInput, Program};
use tally_report::gprof::{json, source, text};

use crate::Outcome;
use crate::gprof_args::parse;

/// Runs `tally gprof` with the raw arguments after the subcommand.
pub fn run(args: Vec<String>) -> Result<Outcome> {
    let mut p = parse(&args)?;
    if let [only] = &p.positional[..] {
        let sniffed = tally_input::sniff(Path::new(only))?;
        if let Sniffed::Profile(source) = &sniffed {
            return crate::gprof_callgrind::run(
                source,
                &p.opts,
                (p.flat, p.graph),
                (p.user_flat, p.user_graph),
                p.json,
                p.event.as_deref(),
            );
        }
        if let Sniffed::Other(source) = &sniffed
            && source.format() == FileFormat::Gmon
        {
            bail!(
                "{only}: {}: name the program that wrote it first: `tally gprof PROG {only}`",
                FileFormat::Gmon.describe()
            );
        }
    }
    let program = PathBuf::from(p.positional.first().map_or("a.out", String::as_str));
    let gmon_paths: Vec<PathBuf> = if p.positional.len() > 1 {
        p.positional[1..].iter().map(PathBuf::from).collect()
    } else {
        vec![PathBuf::from("gmon.out")]
    };
    let program = Program::open(&program)?;
    let sources = tally_input::open_all(&gmon_paths)?;
    let input = GmonInput::sum(&sources, program)?;
    let (obj, gmon) = (input.program.object(), &input.gmon);

    // The reports gprof prints when none is asked for: flat profile and
    // call graph (less those turned off).
    if !(p.flat || p.graph || p.anno || p.sum) {
        if !gmon.histograms.is_empty() || !gmon.arcs.is_empty() {
            p.flat = !p.user_flat;
            p.graph = !p.user_graph;
        } else {
            p.anno = !p.user_anno;
        }
    }
    if p.sum {
        gmon.write_file(Path::new("gmon.sum"), gprof::layout_of(obj))?;
    }
    p.opts.flat = p.flat;
    p.opts.graph = p.graph;
    if p.flat && gmon.histograms.is_empty() {
        bail!(
            "{}: the profile has no histogram, so there is no flat profile (use -q for the call graph only)",
            gmon_paths[0].display()
        );
    }
    if p.graph && gmon.arcs.is_empty() {
        bail!(
            "{}: the profile has no call-graph data (was the program built with -pg?)",
            gmon_paths[0].display()
        );
    }
    if !(p.flat || p.graph || p.anno) {
        return Ok(Outcome::Ok);
    }
    let report = gprof::analyse(obj, gmon, &p.opts)?;
    for n in &report.notices {
        eprintln!("tally gprof: warning: {}", n.0);
    }
    let mut out = if p.json {
        json::write(&report, &p.opts)
    } else {
        text::write(&report, &p.opts)
    };
    if p.anno {
        let anno = source::Annotate {
            min_count: p.min_count,
            dirs: p.source_dirs.clone(),
            all_lines: p.all_lines,
        };
        let (text, notices) = source::write(&report, &p.opts, gmon, &anno, !p.flat && !p.graph);
        out.push_str(&text);
        for n in notices {
            eprintln!("tally gprof: {n}");
        }
    }
    let stdout = std::io::stdout();
    let mut lock = stdout.lock();
    lock.write_all(out.as_bytes())?;
    lock.flush()?;
    Ok(Outcome::Ok)
}
