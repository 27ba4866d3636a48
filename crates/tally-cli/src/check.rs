//! `tally check`: validate profiles and summarise them, streaming.

use crate::progress::Progress;
use crate::{Outcome, report};
use std::io::{self, Write};
use std::path::PathBuf;
use tally_formats::FileFormat;
use tally_formats::Source;
use tally_formats::callgrind::ReadOutcome;
use tally_input::Scanned;
use tally_model::{AnyCost, Cost};
use tally_report::check::{Checked, Found, write_dcpi, write_profile};

/// Arguments of `tally check`.
#[derive(clap::Args)]
pub struct Args {
    /// Profiles to check (`-` for standard input; `.gz` is decompressed).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print only errors and warnings.
    #[arg(short, long)]
    quiet: bool,
    /// Treat every warning as an error (exit status 1). A file that looks
    /// truncated is one without this option.
    #[arg(long)]
    strict: bool,
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let mut outcome = Outcome::Ok;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for (i, path) in args.files.iter().enumerate() {
        let result = tally_input::open(path).and_then(|s| check(&s).map(|c| (s, c)));
        match result {
            Ok((source, checked)) => {
                if i > 0 && !args.quiet {
                    writeln!(out)?;
                }
                match checked {
                    Scanned::Dcpi(p) if !args.quiet => write_dcpi(&mut out, source.name(), &p)?,
                    Scanned::Dcpi(_) => {}
                    Scanned::Profile(read) => {
                        let found = match *read {
                            AnyCost::Unsigned(o) => summary(&mut out, &source, &o, args.quiet)?,
                            AnyCost::Signed(o) => summary(&mut out, &source, &o, args.quiet)?,
                        };
                        if found.fails(args.strict) {
                            outcome = Outcome::Invalid;
                        }
                    }
                }
            }
            Err(e) => {
                out.flush()?;
                report(&anyhow::Error::new(e));
                outcome = Outcome::Invalid;
            }
        }
    }
    Ok(outcome)
}

fn check(source: &Source) -> Result<Scanned, tally_input::Error> {
    let size = if source.detected().gzip {
        None
    } else {
        source.size()
    };
    let mut progress = Progress::new(size);
    let mut update = |n| progress.update(n);
    tally_input::scan(source, Some(&mut update))
}

/// Prints a scan's warnings, then (unless `quiet`) its summary.
fn summary<C: Cost>(
    out: &mut dyn Write,
    source: &Source,
    o: &ReadOutcome<C>,
    quiet: bool,
) -> io::Result<Found> {
    for line in tally_input::warning_lines(source.name(), &o.warnings) {
        eprintln!("{line}");
    }
    let found = Found::of(&o.warnings);
    if !quiet {
        let name = source.name().display().to_string();
        // pprof is gzip'd by its format: its bytes are the stored ones.
        let gzip = source.detected().gzip && source.format() != FileFormat::Pprof;
        let file = Checked {
            name: &name,
            detected: source.format(),
            gzip_size: source.size().filter(|_| gzip),
        };
        write_profile(out, &file, o, found)?;
    }
    Ok(found)
}
