//! What a path names, for commands whose arguments mix profiles with
//! other files (`tally annotate PROFILE SOURCE…`, `tally gprof PROG
//! GMON…` against `tally gprof PROFILE`).

use std::path::Path;

use tally_formats::Source;

use crate::Error;

/// A path told apart by its first bytes.
pub enum Sniffed {
    /// A Callgrind, Cachegrind or pprof profile (or gzip'd and not
    /// recognised as anything else), opened.
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
