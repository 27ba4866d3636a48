//! What `tally merge`, `tally diff` and `tally annotate --diff` share:
//! loading inputs (signed or not), the rename options, and writing the
//! result.

use anyhow::{Context, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use tally_analysis::combine::{CombineError, Combined, Combiner, Sign};
use tally_analysis::subst::Subst;
use tally_formats::{Error, ParseErrorKind, Warnings, callgrind, output};
use tally_model::{Cost, Format, Profile};

/// A profile as read: unsigned counts, or a difference with signed ones.
pub enum Loaded {
    /// Measured counts.
    Unsigned(Profile<u64>),
    /// A difference (some count is negative).
    Signed(Profile<i64>),
}

impl Loaded {
    pub fn format(&self) -> Format {
        match self {
            Loaded::Unsigned(p) => p.format,
            Loaded::Signed(p) => p.format,
        }
    }

    /// The `cmd:` of the first part that has one.
    pub fn cmd(&self) -> Option<Vec<u8>> {
        match self {
            Loaded::Unsigned(p) => p.parts.iter().find_map(|p| p.info.cmd.clone()),
            Loaded::Signed(p) => p.parts.iter().find_map(|p| p.info.cmd.clone()),
        }
    }

    pub fn is_signed(&self) -> bool {
        matches!(self, Loaded::Signed(_))
    }

    /// Adds or subtracts this profile.
    pub fn add_to<C: Cost>(
        &self,
        c: &mut Combiner<C>,
        sign: Sign,
        label: &str,
    ) -> Result<(), CombineError> {
        match self {
            Loaded::Unsigned(p) => c.add(p, sign, label),
            Loaded::Signed(p) => c.add(p, sign, label),
        }
    }
}

/// Reads a Callgrind or Cachegrind file; a file with negative counts (a
/// diff) is read as signed.
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let (loaded, warnings): (Loaded, Warnings) = match tally_formats::read_file::<u64>(path, None) {
        Ok((p, w)) => (Loaded::Unsigned(p), w),
        Err(Error::Parse {
            kind: ParseErrorKind::Negative(_),
            ..
        }) if path.as_os_str() != "-" => {
            let (p, w) = tally_formats::read_file::<i64>(path, None)?;
            (Loaded::Signed(p), w)
        }
        Err(e) => return Err(e.into()),
    };
    for w in warnings.iter() {
        eprintln!("{}: warning: {w}", path.display());
    }
    Ok(loaded)
}

/// Parses `--mod-filename` / `--mod-funcname`.
pub fn subst(expr: Option<&str>, flag: &str) -> anyhow::Result<Option<Subst>> {
    expr.map(|e| Subst::parse(e).with_context(|| flag.to_string()))
        .transpose()
}

/// Output formats of merge and diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Callgrind format.
    Callgrind,
    /// Cachegrind format (self costs per file, function and line).
    Cachegrind,
    /// JSON (see docs/json.md).
    Json,
}

/// Writes the result (temporary file and rename; `-` is standard output),
/// in the inputs' format unless `to` says otherwise; warns where the
/// inputs' stated totals do not add up to their costs.
pub fn write_result<C: Cost>(
    c: Combined<C>,
    out: &Path,
    to: Option<To>,
    compress: bool,
    command: &str,
) -> anyhow::Result<()> {
    warn_stated(&c, command, out);
    let p = &c.profile;
    let to = to.unwrap_or(match p.format {
        Format::Callgrind => To::Callgrind,
        Format::Cachegrind => To::Cachegrind,
    });
    let gzip = out.extension().is_some_and(|e| e == "gz");
    let options = callgrind::WriteOptions { compress };
    output::write_file(out, |w| {
        let emit = |p: &Profile<C>, w: &mut dyn Write| match to {
            To::Callgrind => callgrind::write(p, w, options),
            To::Cachegrind => tally_formats::cachegrind::write(p, w),
            To::Json => tally_formats::json::write(p, w),
        };
        if gzip {
            let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            emit(p, &mut gz)?;
            gz.finish()?.flush()
        } else {
            emit(p, w)
        }
    })
    .with_context(|| format!("writing {}", out.display()))?;
    Ok(())
}

/// Warns where the inputs' stated totals (`summary:`/`totals:`) do not add
/// up to their costs; the output states the costs.
pub fn warn_stated<C: Cost>(c: &Combined<C>, command: &str, what: &Path) {
    for (i, (part, stated)) in c.profile.parts.iter().zip(&c.stated).enumerate() {
        let Some(stated) = stated else { continue };
        let computed = part.info.totals.as_ref().or(part.info.summary.as_ref());
        if let Some(computed) = computed
            && computed
                .iter()
                .map(|v| v.to_i128())
                .ne(stated.iter().copied())
        {
            let show = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(" ");
            eprintln!(
                "tally {command}: warning: {}: part {}: the inputs' stated totals add up to {} but their costs to {}; the output states the costs",
                what.display(),
                i + 1,
                show(&mut stated.iter().map(|v| v.to_string())),
                show(&mut computed.iter().map(|v| v.to_string())),
            );
        }
    }
}

/// The label of an input in messages.
pub fn label(p: &Path) -> String {
    p.display().to_string()
}

/// `--events`: a comma list, or `common` for the events every input has
/// (in the first input's order).
pub fn event_choice(
    arg: Option<&str>,
    files: &[PathBuf],
) -> anyhow::Result<tally_analysis::combine::EventChoice> {
    use tally_analysis::combine::EventChoice;
    let Some(arg) = arg else {
        return Ok(EventChoice::Same);
    };
    if arg != "common" {
        let v: Vec<String> = arg
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if v.is_empty() {
            bail!("--events: no event names given");
        }
        return Ok(EventChoice::Only(v));
    }
    // Only the headers are needed; a scan keeps no records.
    let mut common: Option<Vec<String>> = None;
    for f in files {
        let names: Vec<String> = match tally_formats::scan_file::<i64>(f, None) {
            Ok(o) => o
                .profile
                .events
                .recorded()
                .iter()
                .map(|e| e.name.clone())
                .collect(),
            Err(e) => return Err(e.into()),
        };
        common = Some(match common {
            None => names,
            Some(c) => c.into_iter().filter(|n| names.contains(n)).collect(),
        });
    }
    let common = common.unwrap_or_default();
    if common.is_empty() {
        bail!("--events common: the inputs have no event in common");
    }
    Ok(EventChoice::Only(common))
}
