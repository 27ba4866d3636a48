//! What a path names, for commands whose arguments mix profiles with
//! other files (`tally annotate PROFILE SOURCE…`, `tally gprof PROG
//! GMON…` against `tally gprof PROFILE`).

use std::path::{Path, PathBuf};

use tally_formats::Source;

use crate::Error;

/// A path told apart by its first bytes.
pub enum Sniffed {
    /// A Callgrind, Cachegrind, pprof or tally JSON profile (or gzip'd
    /// and not recognised as anything else), opened.
    Profile(Source),
    /// Another kind of file, opened (a source file, a program, gmon.out).
    Other(Source),
    /// A file that cannot be opened: the reader that takes it says what
    /// is wrong.
    Unopened,
}

/// Tells what `path` names (`-`: standard input, read once and kept in
/// the source returned). A file whose head is comment lines only and goes
/// on is an error: it may be a profile after long comments or a source
/// file, and guessing would read one as the other.
pub fn sniff(path: &Path) -> Result<Sniffed, Error> {
    let Ok(source) = Source::open(path) else {
        return Ok(Sniffed::Unopened);
    };
    if source.detected().undecided() {
        return Err(Error::Input(format!(
            "{}: {}; remove some of its leading comment lines",
            path.display(),
            source.format().describe()
        )));
    }
    Ok(if source.detected().looks_like_profile() {
        Sniffed::Profile(source)
    } else {
        Sniffed::Other(source)
    })
}

/// What a set of inputs is to be read as, when one command takes several
/// kinds (`tally convert`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    /// Callgrind or Cachegrind text (told apart by content), or any other
    /// profile the readers know.
    Profile,
    /// gprof's `gmon.out` files, with their program.
    Gmon,
    /// DCPI profiles, with their image if given.
    Dcpi,
}

/// The kind of `sources`: DCPI when every file is one (mixed with others:
/// an error), else gmon when every file has the `gmon` magic or a
/// `program` is given for input (a gmon file without the magic, in BSD
/// layout, or not one at all, which the reader then says), else a
/// profile. `program_for_output` is a program given for another reason
/// (the image of DCPI output): then the inputs are profiles.
pub fn input_kind(
    sources: &[Source],
    program: bool,
    program_for_output: bool,
) -> Result<InputKind, Error> {
    use tally_formats::FileFormat;
    let first = |f: &dyn Fn(&Source) -> bool| sources.iter().position(f);
    let is = |format: FileFormat| move |s: &Source| s.format() == format;
    let (dcpi, gmon) = (is(FileFormat::Dcpi), is(FileFormat::Gmon));
    let path = |i: usize| sources[i].path().display();
    if let Some(i) = first(&dcpi) {
        if let Some(other) = first(&|s| !dcpi(s)) {
            return Err(Error::Input(format!(
                "{} is a DCPI profile but {} is not: convert DCPI profiles on their own",
                path(i),
                path(other)
            )));
        }
        return Ok(InputKind::Dcpi);
    }
    if program && program_for_output {
        return Ok(InputKind::Profile);
    }
    if sources.iter().all(gmon) {
        return Ok(InputKind::Gmon);
    }
    if program {
        if let Some(i) = first(&|s| s.detected().looks_like_profile()) {
            return Err(Error::Input(format!(
                "{} is a Callgrind/Cachegrind profile, not a gmon file: --binary is only for gmon input",
                path(i)
            )));
        }
        return Ok(InputKind::Gmon);
    }
    if let Some(i) = first(&gmon) {
        return Err(Error::Input(format!(
            "{} is a gmon file but {} is not: gmon files cannot be mixed with other profiles",
            path(i),
            path(first(&|s| !gmon(s)).unwrap_or(0))
        )));
    }
    Ok(InputKind::Profile)
}

/// `tally annotate PROFILE... [SOURCE...]`'s arguments told apart: the
/// first is a profile, and so is each one after it that looks like one,
/// up to the first that does not; that one and all after it are source
/// files. `-` and files that cannot be opened count as profiles (the
/// reader then says what is wrong); standard input is not read here.
pub fn profiles_then_sources(files: &[PathBuf]) -> Result<(Vec<PathBuf>, Vec<PathBuf>), Error> {
    let mut profiles = Vec::new();
    let mut sources = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let profile = i == 0
            || (sources.is_empty()
                && (f.as_os_str() == "-" || !matches!(sniff(f)?, Sniffed::Other(_))));
        if profile {
            profiles.push(f.clone());
        } else {
            sources.push(f.clone());
        }
    }
    Ok((profiles, sources))
}
