//! The one shape of a format: a reader turns a file's bytes into a
//! profile, a writer turns a profile into bytes. Each format module
//! implements what its format supports (as inferno's `Collapse` gives
//! every collapser one shape), and [`reader`] and [`OutputFormat::writer`]
//! choose the implementation, so that loading and writing are written
//! once for all formats.
//!
//! Callgrind and Cachegrind files are also streamed into a sink without
//! being held whole ([`crate::callgrind::parse`]); gmon.out and DCPI files
//! hold histograms that need the program's symbols, and are read and
//! converted by their own modules and tally-analysis.

use crate::detect::Format;
use crate::error::Error;
use crate::output::OutputFormat;
use std::io::{self, Write};
use std::path::Path;
use tally_model::{AnyCost, AnyProfile, Cost, Profile};

/// A format read whole from its bytes.
pub trait ReadProfile: Sync {
    /// Reads the bytes of `path` (named in errors).
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<AnyProfile, Error>;
}

/// A format a profile is written in.
pub trait WriteProfile<C: Cost> {
    /// Writes `profile` to `out`.
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()>;
}

/// The reader of a format read whole (pprof, folded stacks, `perf script`,
/// perf.data, tally's JSON); `None` for the streamed and converted ones.
pub fn reader(format: Format) -> Option<&'static dyn ReadProfile> {
    match format {
        Format::Pprof => Some(&crate::pprof::Pprof),
        Format::Folded => Some(&crate::folded::Folded { event: 0 }),
        Format::PerfScript => Some(&crate::perf::script::PerfScript),
        Format::PerfData => Some(&crate::perf::data::PerfData),
        Format::TallyJson => Some(&crate::json::Json),
        _ => None,
    }
}

/// A reader of measured profiles only (no negative counts).
pub(crate) fn unsigned(p: Result<Profile<u64>, Error>) -> Result<AnyProfile, Error> {
    p.map(AnyCost::Unsigned)
}

impl OutputFormat {
    /// The writer of this format. `title` names the profile where the
    /// format has a title (speedscope, Firefox); `event` is the recorded
    /// event a one-event format writes (folded stacks, Firefox); `compress` asks for
    /// Callgrind's name compression. DCPI has its own writer
    /// ([`crate::dcpi::write_file`]), as its files hold one event each.
    pub fn writer<'a, C: Cost>(
        self,
        title: &'a str,
        event: usize,
        compress: bool,
    ) -> Box<dyn WriteProfile<C> + 'a> {
        match self {
            OutputFormat::Callgrind => Box::new(crate::callgrind::Callgrind {
                options: crate::callgrind::WriteOptions { compress },
            }),
            OutputFormat::Cachegrind => Box::new(crate::cachegrind::Cachegrind),
            OutputFormat::Json => Box::new(crate::json::Json),
            OutputFormat::Pprof => Box::new(crate::pprof::Pprof),
            OutputFormat::Speedscope => Box::new(crate::speedscope::Speedscope { title }),
            OutputFormat::Folded => Box::new(crate::folded::Folded { event }),
            OutputFormat::Firefox => Box::new(crate::firefox::Firefox { title, event }),
            OutputFormat::Dcpi => Box::new(NoWriter),
        }
    }
}

/// DCPI through the common path: an error, as its writer is its own.
struct NoWriter;

impl<C: Cost> WriteProfile<C> for NoWriter {
    fn write(&self, _: &Profile<C>, _: &mut dyn Write) -> io::Result<()> {
        Err(io::Error::other("DCPI output is written on its own"))
    }
}
