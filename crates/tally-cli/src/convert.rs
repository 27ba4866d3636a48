//! `tally convert`: read profiles (several files become the parts of one
//! profile) and write them as Callgrind, Cachegrind or JSON.

use crate::Outcome;
use crate::progress::Progress;
use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use tally_formats::{Error, ParseErrorKind, callgrind, output};
use tally_model::{Cost, Format, Profile};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Callgrind format (calls and jumps kept).
    Callgrind,
    /// Cachegrind format (self costs per file, function and line).
    Cachegrind,
    /// JSON (see docs/json.md).
    Json,
}

/// Arguments of `tally convert`.
#[derive(clap::Args)]
pub struct Args {
    /// Input profiles; several files (a dump series, a thread set) become
    /// the parts of one profile.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output file (`-` for standard output; a `.gz` name is compressed).
    #[arg(short, long)]
    output: PathBuf,
    /// Output format; by default inferred from the output name (`*.json`,
    /// `cachegrind.out*`, `callgrind.out*`), else the input's format.
    #[arg(long, value_enum)]
    to: Option<To>,
    /// Write plain names and absolute positions (Callgrind output).
    #[arg(long)]
    no_compress: bool,
}

fn infer(out: &Path) -> Option<To> {
    let name = out.file_name()?.to_string_lossy().to_string();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".json") {
        Some(To::Json)
    } else if name.starts_with("cachegrind.out") || name.ends_with(".cachegrind") {
        Some(To::Cachegrind)
    } else if name.starts_with("callgrind.out") || name.ends_with(".callgrind") {
        Some(To::Callgrind)
    } else {
        None
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let paths: Vec<&Path> = args.files.iter().map(PathBuf::as_path).collect();
    let total: u64 = paths
        .iter()
        .filter_map(|p| std::fs::metadata(p).ok().map(|m| m.len()))
        .sum();
    let mut progress = Progress::new(Some(total));
    let mut update = |n| progress.update(n);
    match tally_formats::read_files::<u64>(&paths, Some(&mut update)) {
        Ok((p, w)) => {
            drop(progress);
            warn(&paths, &w);
            write(&p, &args)
        }
        Err(Error::Parse {
            kind: ParseErrorKind::Negative(_),
            ..
        }) => {
            drop(progress);
            let (p, w) = tally_formats::read_files::<i64>(&paths, None)?;
            warn(&paths, &w);
            write(&p, &args)
        }
        Err(e) => Err(e.into()),
    }
}

fn warn(paths: &[&Path], warnings: &[tally_formats::Warnings]) {
    for (p, ws) in paths.iter().zip(warnings) {
        for w in ws.iter() {
            eprintln!("{}: warning: {w}", p.display());
        }
    }
}

fn write<C: Cost>(p: &Profile<C>, args: &Args) -> anyhow::Result<Outcome> {
    let to = args
        .to
        .or_else(|| infer(&args.output))
        .unwrap_or(match p.format {
            Format::Callgrind => To::Callgrind,
            Format::Cachegrind => To::Cachegrind,
        });
    let gzip = args.output.extension().is_some_and(|e| e == "gz");
    let options = callgrind::WriteOptions {
        compress: !args.no_compress,
    };
    output::write_file(&args.output, |w| {
        if gzip {
            let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            emit(p, to, options, &mut gz)?;
            gz.finish()?.flush()
        } else {
            emit(p, to, options, w)
        }
    })
    .with_context(|| format!("writing {}", args.output.display()))?;
    Ok(Outcome::Ok)
}

fn emit<C: Cost>(
    p: &Profile<C>,
    to: To,
    options: callgrind::WriteOptions,
    w: &mut dyn Write,
) -> std::io::Result<()> {
    match to {
        To::Callgrind => callgrind::write(p, w, options),
        To::Cachegrind => tally_formats::cachegrind::write(p, w),
        To::Json => tally_formats::json::write(p, w),
    }
}
