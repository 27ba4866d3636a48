//! `tally convert`: read profiles (several files become the parts of one
//! profile) and write them as Callgrind, Cachegrind or JSON. gprof's
//! `gmon.out` files are read with the program that wrote them (`--binary`)
//! and converted to self samples and calls (see docs/gprof-convert.md).

use crate::Outcome;
use crate::progress::Progress;
use anyhow::{Context, anyhow, bail};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tally_formats::gmon::{GMON_MAGIC, Gmon};
use tally_formats::{Error, ParseErrorKind, callgrind, output};
use tally_model::{Cost, Format, Profile};
use tally_symbols::ObjectFile;

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

/// Input formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum InputFormat {
    /// Callgrind or Cachegrind text (told apart by content).
    Callgrind,
    /// gprof's `gmon.out` (GNU layout, or BSD layout without magic); needs
    /// `--binary`.
    Gmon,
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
    /// `cachegrind.out*`, `callgrind.out*`), else the input's format.
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
    /// functions and source lines. Several gmon files are summed.
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

/// The first bytes of a file (fewer if it is shorter); empty if it cannot
/// be read. `-`, standard input, is not read (it could not be read again).
fn head(path: &Path) -> Vec<u8> {
    if path == Path::new("-") {
        return Vec::new();
    }
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut buf = Vec::with_capacity(512);
    let _ = f.take(512).read_to_end(&mut buf);
    buf
}

/// Whether a file starts with the magic of a GNU gmon file.
fn has_gmon_magic(path: &Path) -> bool {
    head(path).starts_with(GMON_MAGIC)
}

/// Whether a file (or standard input) is a Callgrind or Cachegrind text
/// profile, gzipped or not, by its first line.
fn looks_like_text_profile(path: &Path) -> bool {
    if path == Path::new("-") {
        return true;
    }
    let head = head(path);
    if head.starts_with(&[0x1f, 0x8b]) {
        return true;
    }
    let first = head
        .split(|&b| b == b'\n')
        .find(|l| !l.iter().all(u8::is_ascii_whitespace))
        .unwrap_or(b"");
    const KEYS: &[&[u8]] = &[
        b"# callgrind format",
        b"version:",
        b"creator:",
        b"pid:",
        b"cmd:",
        b"part:",
        b"thread:",
        b"desc:",
        b"positions:",
        b"events:",
        b"event:",
        b"summary:",
        b"totals:",
        b"ob=",
        b"fl=",
        b"fn=",
    ];
    KEYS.iter().any(|k| first.starts_with(k))
}

/// The input format: `--from`, else gmon when every file has the `gmon`
/// magic or `--binary` is given, else Callgrind/Cachegrind text.
fn input_format(args: &Args) -> anyhow::Result<InputFormat> {
    if let Some(f) = args.from {
        return Ok(f);
    }
    let magic: Vec<bool> = args.files.iter().map(|p| has_gmon_magic(p)).collect();
    if magic.iter().all(|&g| g) {
        return Ok(InputFormat::Gmon);
    }
    if args.binary.is_some() {
        if let Some(text) = args.files.iter().find(|p| looks_like_text_profile(p)) {
            bail!(
                "{} is a Callgrind/Cachegrind profile, not a gmon file: --binary is only for gmon input",
                text.display()
            );
        }
        // Without the magic: a BSD-layout gmon file, or not a gmon file at
        // all (the reader says which).
        return Ok(InputFormat::Gmon);
    }
    if let Some(i) = magic.iter().position(|&g| g) {
        let other = magic.iter().position(|&g| !g).unwrap_or(0);
        bail!(
            "{} is a gmon file but {} is not: gmon files cannot be mixed with other profiles",
            args.files[i].display(),
            args.files[other].display()
        );
    }
    Ok(InputFormat::Callgrind)
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    match input_format(&args)? {
        InputFormat::Gmon => return run_gmon(&args),
        InputFormat::Callgrind => {
            let gmon_only = [
                (args.binary.is_some(), "--binary"),
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

/// Converts gmon files (summed as gprof sums them) with their program.
fn run_gmon(args: &Args) -> anyhow::Result<Outcome> {
    let Some(binary) = &args.binary else {
        bail!(
            "{}: a gmon file needs the program that wrote it: add --binary PROG",
            args.files[0].display()
        );
    };
    // The error names the file already; its source would repeat itself.
    let obj = ObjectFile::open(binary).map_err(|e| anyhow!("{e}"))?;
    let layout = tally_report::gprof::layout_of(&obj);
    let mut gmon: Option<Gmon> = None;
    for path in &args.files {
        let g = Gmon::read_file(path, layout).map_err(|e| {
            if matches!(e, Error::Binary { .. }) && !has_gmon_magic(path) && head(path).len() >= 20
            {
                anyhow!(
                    "{e} (the file has no `gmon` magic, so it was read as a BSD-layout gmon file)"
                )
            } else {
                anyhow::Error::new(e)
            }
        })?;
        match &mut gmon {
            None => gmon = Some(g),
            Some(sum) => sum.merge(g).map_err(|e| {
                anyhow!(
                    "{}: cannot be added to {}: {e}",
                    path.display(),
                    args.files[0].display()
                )
            })?,
        }
    }
    let gmon = gmon.unwrap_or_default();
    if gmon.histograms.is_empty() && gmon.arcs.is_empty() {
        eprintln!(
            "tally convert: warning: {}: no histogram and no call arcs: the profile is empty",
            args.files[0].display()
        );
    }
    let opts = tally_report::gprof::Options {
        gnu_compatible: args.gnu_compatible,
        demangle: !args.no_demangle,
        ..Default::default()
    };
    let conv = tally_report::gprof::convert::convert(&obj, &gmon, &opts)?;
    for n in &conv.notices {
        eprintln!("tally convert: warning: {}", n.0);
    }
    write(&conv.profile, args)
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
