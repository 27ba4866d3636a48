//! DCPI profiles: read, summed (profiles of one image and event), and
//! mapped to functions and lines with their image.

use std::path::{Path, PathBuf};

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

/// The epoch directory of a DCPI database: `epoch` if given, else the
/// latest (epochs are named by their UTC start, so the greatest name).
pub fn epoch_dir(db: &Path, epoch: Option<&str>) -> Result<PathBuf, Error> {
    if let Some(e) = epoch {
        let dir = db.join(e);
        if !dir.is_dir() {
            return Err(Error::Input(format!(
                "{}: no epoch `{e}` in this database",
                db.display()
            )));
        }
        return Ok(dir);
    }
    let read = std::fs::read_dir(db)
        .map_err(|e| Error::Input(format!("{}: cannot read the database: {e}", db.display())))?;
    read.filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        })
        .max()
        .ok_or_else(|| Error::Input(format!("{}: no epoch in this database", db.display())))
}

/// The profiles of an epoch directory, by name.
pub fn epoch_profiles(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let read = std::fs::read_dir(dir)
        .map_err(|e| Error::Input(format!("{}: cannot read the epoch: {e}", dir.display())))?;
    let mut v: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    Ok(v)
}

/// Profiles grouped by the image they sample: `image` for all of them
/// when given, else the path each records. Groups come in first-seen
/// order; a profile that records no image needs `image`.
pub fn by_image(
    profiles: &[PathBuf],
    image: Option<&Path>,
) -> Result<Vec<(PathBuf, Vec<PathBuf>)>, Error> {
    let mut groups: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    for p in profiles {
        let img = match image {
            Some(i) => i.to_path_buf(),
            None => {
                let d = dcpi::read_file(p)?;
                let Some(path) = d.header.path() else {
                    return Err(Error::Usage(format!(
                        "{}: the profile records no image path; give it with --image",
                        p.display()
                    )));
                };
                PathBuf::from(path)
            }
        };
        match groups.iter_mut().find(|g| g.0 == img) {
            Some(g) => g.1.push(p.clone()),
            None => groups.push((img, vec![p.clone()])),
        }
    }
    Ok(groups)
}
