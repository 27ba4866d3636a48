//! Opening inputs and loading a profile of any format.

use std::path::PathBuf;

use tally_analysis::gprof;
use tally_formats::FileFormat;
use tally_formats::Source;
use tally_model::AnyProfile;

use crate::{
    Error, GmonInput, Program, convert_gmon, read_dcpi, read_gmon, sum_gmon, warning_lines,
};

/// Refuses standard input (`-`) named more than once: it can be read only
/// once, so a second `-` would be an empty profile or a second reader of
/// the same stream.
pub fn stdin_once<'a>(files: impl IntoIterator<Item = &'a PathBuf>) -> Result<(), Error> {
    if files.into_iter().filter(|f| f.as_os_str() == "-").count() > 1 {
        return Err(Error::Usage(
            "`-` (standard input) is given more than once: it can be read only once".into(),
        ));
    }
    Ok(())
}

/// Opens every path (`-` is standard input), in order; the first that
/// cannot be opened is the error.
pub fn open_all(files: &[PathBuf]) -> Result<Vec<Source>, Error> {
    Ok(files
        .iter()
        .map(|p| Source::open(p))
        .collect::<Result<Vec<_>, _>>()?)
}

/// What [`load_profile`] needs besides the inputs.
#[derive(Default)]
pub struct Options {
    /// The program that wrote gmon inputs (`--binary`).
    pub program: Option<PathBuf>,
    /// How gmon inputs are turned into functions (gprof's rules).
    pub gprof: gprof::Options,
}

/// A profile loaded from one or more inputs.
pub struct Loaded {
    /// The profile (several inputs summed); signed when an input holds a
    /// difference.
    pub profile: AnyProfile,
    /// The readers' warnings, as printed (`FILE: warning: …`).
    pub warnings: Vec<String>,
    /// What converting gmon input had to say (each command prefixes them
    /// with its name).
    pub notices: Vec<String>,
    /// The gmon inputs and their program, when the profile came from them
    /// (gprof's own reports use them).
    pub gmon: Option<GmonInput>,
}

/// Loads `sources` as one profile: gmon files (with `options.program`,
/// which only they take) summed and converted by gprof's rules; any other
/// profile tally reads, several summed, signed when one holds a
/// difference. A truncated input is a warning, as every warning is.
pub fn load_profile(sources: &[Source], options: &Options) -> Result<Loaded, Error> {
    let is_gmon = sources.iter().any(|s| s.format() == FileFormat::Gmon);
    if is_gmon || options.program.is_some() {
        let gmon = read_gmon(sources, options.program.as_deref())?;
        let conv = gmon.to_profile(&options.gprof)?;
        return Ok(Loaded {
            profile: AnyProfile::Unsigned(conv.profile),
            warnings: Vec::new(),
            notices: conv.notices,
            gmon: Some(gmon),
        });
    }
    let (profile, read) = tally_formats::read_all(sources, None)?;
    let warnings = sources
        .iter()
        .zip(&read)
        .flat_map(|(s, w)| warning_lines(s.path(), w))
        .collect();
    Ok(Loaded {
        profile,
        warnings,
        notices: Vec::new(),
        gmon: None,
    })
}

/// Reads the inputs as one profile: every record as read while they take
/// less than [`exact_limit`](tally_formats::limits::exact_limit) in
/// memory (twice their decompressed size), else read again with repeated
/// records summed, so that a file of many repeated lines converts in the
/// memory its distinct records need.
pub fn read_within_memory(
    sources: &[Source],
    update: &mut dyn FnMut(u64),
) -> Result<(AnyProfile, Vec<tally_formats::Warnings>), Error> {
    use tally_formats::{ParseErrorKind, Records, limits};
    let ceiling = limits::memory_limit()?;
    let content_bytes = sources.iter().filter_map(Source::content_size_hint).sum();
    let exact_limit = limits::exact_limit(content_bytes, ceiling);
    let first =
        tally_formats::read_all_kept(sources, Records::Exact, Some(exact_limit), Some(update));
    match first {
        Err(tally_formats::Error::Parse {
            kind: ParseErrorKind::MemoryLimit { .. },
            ..
        }) if ceiling.is_none_or(|c| c > exact_limit) => Ok(tally_formats::read_all_kept(
            sources,
            Records::Folded,
            ceiling,
            Some(update),
        )?),
        r => Ok(r?),
    }
}

/// One input of any format as a profile, with a program opened once for
/// many inputs (`tally export`): gmon input needs it, DCPI input is mapped
/// with it when given; anything else is read as it is.
pub fn load_one(source: &Source, program: Option<&Program>) -> Result<Loaded, Error> {
    let sources = std::slice::from_ref(source);
    let (profile, warnings, notices) = match source.format() {
        FileFormat::Gmon => {
            let program = GmonInput::check(sources, program)?;
            let gmon = sum_gmon(sources, program)?;
            let conv = convert_gmon(program, &gmon, &gprof::Options::default())?;
            (AnyProfile::Unsigned(conv.profile), Vec::new(), conv.notices)
        }
        FileFormat::Dcpi => {
            let input = read_dcpi(sources)?;
            let profile = input.to_profile(program)?;
            (AnyProfile::Unsigned(profile), Vec::new(), Vec::new())
        }
        _ => {
            let (p, w) = tally_formats::read(source, None)?;
            (p, warning_lines(source.path(), &w), Vec::new())
        }
    };
    Ok(Loaded {
        profile,
        warnings,
        notices,
        gmon: None,
    })
}

/// The paths of `sources` joined for a title (`a.out b.out`).
pub fn names(sources: &[Source], sep: &str) -> String {
    sources
        .iter()
        .map(|s| s.path().display().to_string())
        .collect::<Vec<_>>()
        .join(sep)
}
