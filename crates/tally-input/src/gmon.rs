//! gmon.out files with the program that wrote them: summed as gprof sums
//! them, with the program's word size and byte order.

use std::path::Path;

use tally_analysis::gprof::{self, Options};
use tally_formats::FileFormat;
use tally_formats::Source;
use tally_formats::gmon::Gmon;
use tally_model::Profile;

use crate::{Error, Program};

/// gmon files summed, with their program.
pub struct GmonInput {
    /// The program that wrote them.
    pub program: Program,
    /// The sum of the files.
    pub gmon: Gmon,
}

/// A gmon sum as a Callgrind-model profile, with what the conversion had
/// to say (gprof's notices, one line each).
pub struct Converted {
    /// The profile: self costs per function and line, call arcs.
    pub profile: Profile<u64>,
    /// Notices, such as symbols that could not be placed.
    pub notices: Vec<String>,
}

/// Sums `sources`, every one a gmon file, with the program at `program`.
/// Without a program it is a usage error; an input of another format with
/// a program given is refused, naming the file and its format.
pub fn read_gmon(sources: &[Source], program: Option<&Path>) -> Result<GmonInput, Error> {
    let program = GmonInput::check(sources, program)?;
    GmonInput::sum(sources, Program::open(program)?)
}

impl GmonInput {
    /// The checks of [`read_gmon`] without the reading: every input a gmon
    /// file, and a program named (returned).
    pub fn check<P>(sources: &[Source], program: Option<P>) -> Result<P, Error> {
        if let Some(s) = sources.iter().find(|s| s.format() != FileFormat::Gmon) {
            return Err(Error::Input(format!(
                "{}: {}: with --binary every input must be a gmon file",
                s.path().display(),
                s.format().describe()
            )));
        }
        let first = sources.first().map_or(Path::new(""), Source::path);
        GmonInput::need_program(first, program)
    }

    /// The program gmon input needs, or the usage error every command
    /// gives without it (naming the first gmon file).
    pub fn need_program<P>(first: &Path, program: Option<P>) -> Result<P, Error> {
        program.ok_or_else(|| {
            Error::Usage(format!(
                "{}: a gmon file needs the program that wrote it: add --binary PROG",
                first.display()
            ))
        })
    }

    /// Sums `sources` (gmon files, or an error naming the one that is not)
    /// with `program`'s word size and byte order.
    pub fn sum(sources: &[Source], program: Program) -> Result<GmonInput, Error> {
        let gmon = sum_gmon(sources, &program)?;
        Ok(GmonInput { program, gmon })
    }

    /// Whether the files hold neither a histogram nor call arcs.
    pub fn is_empty(&self) -> bool {
        self.gmon.histograms.is_empty() && self.gmon.arcs.is_empty()
    }

    /// The sum as a profile every report and writer takes, functions named
    /// by gprof's rules (`opts`).
    pub fn to_profile(&self, opts: &Options) -> Result<Converted, Error> {
        convert_gmon(&self.program, &self.gmon, opts)
    }
}

/// [`GmonInput::sum`] with a program that other inputs share.
pub fn sum_gmon(sources: &[Source], program: &Program) -> Result<Gmon, Error> {
    Ok(Gmon::sum(sources, gprof::layout_of(program.object()))?)
}

/// [`GmonInput::to_profile`] with a program that other inputs share.
pub fn convert_gmon(program: &Program, gmon: &Gmon, opts: &Options) -> Result<Converted, Error> {
    let conv = tally_analysis::convert::gmon::convert(program.object(), gmon, opts)?;
    Ok(Converted {
        notices: conv.notices.iter().map(|n| n.0.clone()).collect(),
        profile: conv.profile,
    })
}
