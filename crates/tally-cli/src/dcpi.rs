//! `tally dcpi`: DCPI profiles as dcpicat, dcpiprof, dcpilist and dcpidiff
//! showed them (see docs/dcpi.md).

use crate::Outcome;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use tally_formats::dcpi::DcpiProfile;
use tally_input::{DcpiInput, Program};
use tally_report::dcpi as report;

/// `tally dcpi` commands.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Dump profiles: the header, then address and count per sampled
    /// instruction (dcpicat).
    Cat {
        /// DCPI profile files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Print offsets from the text start instead of addresses.
        #[arg(long)]
        offsets: bool,
    },
    /// Samples per procedure, most first, with percent and cumulative
    /// percent (dcpiprof). Several profiles of the image are summed.
    Prof {
        /// The image (executable or shared library) the profiles sample.
        image: PathBuf,
        /// DCPI profile files.
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// Show just the top procedures that cover this percentage of the
        /// samples.
        #[arg(long, default_value_t = 100.0, value_name = "P")]
        keep: f64,
        /// JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// One procedure's instructions with their samples, disassembly and
    /// source lines (dcpilist).
    List {
        /// The image.
        image: PathBuf,
        /// DCPI profile files (summed).
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        /// The procedure.
        #[arg(long = "proc", value_name = "NAME")]
        proc_name: String,
    },
    /// Two profiles of one image compared per procedure, or per
    /// instruction of one procedure (dcpidiff).
    Diff {
        /// The image.
        image: PathBuf,
        /// The old profile (A).
        a: PathBuf,
        /// The new profile (B).
        b: PathBuf,
        /// Compare the instructions of this procedure.
        #[arg(long = "proc", value_name = "NAME")]
        proc_name: Option<String>,
    },
}

/// Warns when a profile names another image than the one given: its
/// samples would be mapped to the wrong procedures.
fn check_image(p: &DcpiProfile, file: &Path, img: &Path) {
    let name = |s: &Path| s.file_name().map(|f| f.to_string_lossy().into_owned());
    if let Some(path) = p.header.path()
        && name(Path::new(path)) != name(img)
    {
        eprintln!(
            "tally dcpi: warning: {} is a profile of {path}, not of {}",
            file.display(),
            img.display()
        );
    }
}

fn read(path: &Path) -> anyhow::Result<DcpiProfile> {
    Ok(DcpiInput::read_one(path)?.profile)
}

fn summed(paths: &[PathBuf]) -> anyhow::Result<DcpiProfile> {
    Ok(tally_input::read_dcpi_paths(paths)?.profile)
}

pub fn run(c: Command) -> anyhow::Result<Outcome> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    match c {
        Command::Cat { files, offsets } => {
            for (i, f) in files.iter().enumerate() {
                if files.len() > 1 {
                    if i > 0 {
                        writeln!(out)?;
                    }
                    writeln!(out, "# {}", f.display())?;
                }
                report::cat(&read(f)?, offsets, &mut out)?;
            }
        }
        Command::Prof {
            image: img,
            profiles,
            keep,
            json,
        } => {
            if !(0.0..=100.0).contains(&keep) {
                crate::usage_bail!("--keep must be a percentage between 0 and 100, got {keep}");
            }
            let image = Program::open(&img)?;
            let obj = image.object();
            let p = summed(&profiles)?;
            check_image(&p, &profiles[0], &img);
            let o = report::ProfOptions {
                keep,
                image_name: img.display().to_string(),
                json,
            };
            report::prof(&p, obj, &o, &mut out)?;
        }
        Command::List {
            image: img,
            profiles,
            proc_name,
        } => {
            let image = Program::open(&img)?;
            let obj = image.object();
            let p = summed(&profiles)?;
            check_image(&p, &profiles[0], &img);
            report::list(&p, obj, &proc_name, &mut out)?;
        }
        Command::Diff {
            image: img,
            a,
            b,
            proc_name,
        } => {
            let image = Program::open(&img)?;
            let obj = image.object();
            let (pa, pb) = (read(&a)?, read(&b)?);
            check_image(&pa, &a, &img);
            check_image(&pb, &b, &img);
            let o = report::DiffOptions {
                proc_name,
                names: (a.display().to_string(), b.display().to_string()),
            };
            report::diff(&pa, &pb, obj, &o, &mut out)?;
        }
    }
    out.flush()?;
    Ok(Outcome::Ok)
}
