//! DCPI profiles: read, summed (profiles of one image and event), and
//! mapped to functions and lines with their image.

use std::path::PathBuf;

use tally_formats::Source;
use tally_formats::dcpi::{self, DcpiProfile};
use tally_model::Profile;

use crate::{Error, Program};

/// DCPI profiles summed, as one.
pub struct DcpiInput {
    /// The sum.
    pub profile: DcpiProfile,
}

/// Reads and sums `sources` (files or standard input); profiles of other
/// events or images are refused, naming both files.
pub fn read_dcpi(sources: &[Source]) -> Result<DcpiInput, Error> {
    let mut v = Vec::with_capacity(sources.len());
    for s in sources {
        let p = dcpi::parse(&s.bytes()?, s.name())?;
        v.push((s.path().display().to_string(), p));
    }
    Ok(DcpiInput {
        profile: tally_analysis::convert::dcpi::sum(&v)?,
    })
}

/// [`read_dcpi`] of files named by path (the `tally dcpi` reports, which
/// take no standard input).
pub fn read_dcpi_paths(paths: &[PathBuf]) -> Result<DcpiInput, Error> {
    let mut v = Vec::with_capacity(paths.len());
    for p in paths {
        v.push((p.display().to_string(), dcpi::read_file(p)?));
    }
    Ok(DcpiInput {
        profile: tally_analysis::convert::dcpi::sum(&v)?,
    })
}

impl DcpiInput {
    /// One file, not summed.
    pub fn read_one(path: &std::path::Path) -> Result<DcpiInput, Error> {
        Ok(DcpiInput {
            profile: dcpi::read_file(path)?,
        })
    }

    /// The image the profile names, if it records one.
    pub fn image_path(&self) -> Option<&str> {
        self.profile.header.path()
    }

    /// The samples as a Callgrind-model profile: functions and lines from
    /// `image` where given (else raw addresses), its object named by the
    /// image given, else the one the profile records, else `???`.
    pub fn to_profile(&self, image: Option<&Program>) -> Result<Profile<u64>, Error> {
        let name = match (image, self.image_path()) {
            (Some(b), _) => b.path().display().to_string(),
            (None, Some(path)) => path.to_string(),
            (None, None) => "???".to_string(),
        };
        let object = image.map(Program::object);
        Ok(tally_analysis::convert::dcpi::to_callgrind(
            &self.profile,
            object,
            &name,
        )?)
    }
}
