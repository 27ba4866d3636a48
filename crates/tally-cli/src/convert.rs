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
    /// DCPI 0.07 profile (one event, per instruction, one object; see
    /// docs/dcpi-format.md).
    Dcpi,
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
    /// DCPI output: the event to take (default: the first).
    #[arg(long)]
    event: Option<String>,
    /// DCPI output: the object (`ob=`) whose instructions are taken
    /// (default: the one that is `--binary`, or the only one).
    #[arg(long)]
    object: Option<String>,
}

fn infer(out: &Path) -> Option<To> {
    let name = out.file_name()?.to_string_lossy().to_string();
    let name = name.strip_suffix(".gz").unwrap_or(&name);
    if name.ends_with(".json") {
        Some(To::Json)
    } else if name.ends_with(".dcpi") {
        Some(To::Dcpi)
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
    head_n(path, 512)
}

fn head_n(path: &Path, n: u64) -> Vec<u8> {
    if path == Path::new("-") {
        return Vec::new();
    }
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut buf = Vec::with_capacity(n.min(1 << 16) as usize);
    let _ = f.take(n).read_to_end(&mut buf);
    buf
}

/// Whether the output is to be DCPI.
fn wants_dcpi(args: &Args) -> bool {
    args.to.or_else(|| infer(&args.output)) == Some(To::Dcpi)
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
    let dcpi: Vec<bool> = args
        .files
        .iter()
        .map(|p| tally_formats::dcpi::is_dcpi(&head_n(p, 1 << 16)))
        .collect();
    if dcpi.iter().all(|&d| d) {
        return Ok(InputFormat::Dcpi);
    }
    if let Some(i) = dcpi.iter().position(|&d| d) {
        bail!(
            "{} is a DCPI profile but {} is not: convert DCPI profiles on their own",
            args.files[i].display(),
            args.files[dcpi.iter().position(|&d| !d).unwrap_or(0)].display()
        );
    }
    if args.binary.is_some() && wants_dcpi(args) {
        return Ok(InputFormat::Callgrind);
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
    if !wants_dcpi(&args)
        && let Some(flag) = [
            (args.event.is_some(), "--event"),
            (args.object.is_some(), "--object"),
        ]
        .iter()
        .find(|f| f.0)
        .map(|f| f.1)
    {
        bail!("{flag} is only for DCPI output (`--to dcpi` or an output name ending in .dcpi)");
    }
    match input_format(&args)? {
        InputFormat::Gmon => return run_gmon(&args),
        InputFormat::Dcpi => return run_dcpi(&args),
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

/// Converts a DCPI profile (several are summed) with its image.
fn run_dcpi(args: &Args) -> anyhow::Result<Outcome> {
    let mut v = Vec::new();
    for f in &args.files {
        v.push((f.display().to_string(), tally_formats::dcpi::read_file(f)?));
    }
    let p = tally_report::dcpi::sum(&v)?;
    if wants_dcpi(args) {
        tally_formats::dcpi::write_file(&p, &args.output)?;
        return Ok(Outcome::Ok);
    }
    let obj = match &args.binary {
        Some(b) => Some(ObjectFile::open(b).map_err(|e| anyhow!("{e}"))?),
        None => {
            eprintln!(
                "tally convert: warning: no --binary IMAGE: addresses are not mapped to functions and lines"
            );
            None
        }
    };
    let name = match (&args.binary, p.header.path()) {
        (Some(b), _) => b.display().to_string(),
        (None, Some(path)) => path.to_string(),
        (None, None) => "???".to_string(),
    };
    let prof = tally_report::convert::dcpi::to_callgrind(&p, obj.as_ref(), &name)?;
    write(&prof, args)
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
    let conv = tally_report::convert::gmon::convert(&obj, &gmon, &opts)?;
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
    if wants_dcpi(args) {
        let obj = match &args.binary {
            Some(b) => Some(ObjectFile::open(b).map_err(|e| anyhow!("{e}"))?),
            None => None,
        };
        let opts = tally_report::convert::dcpi::FromCallgrind {
            event: args.event.as_deref(),
            object: args.object.as_deref(),
        };
        let d = tally_report::convert::dcpi::from_callgrind(p, obj.as_ref(), &opts)?;
        tally_formats::dcpi::write_file(&d, &args.output)?;
        return Ok(Outcome::Ok);
    }
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
        To::Dcpi => Err(std::io::Error::other("DCPI output is written on its own")),
    }
}
