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
    /// percent (dcpiprof). Profiles of one image are summed; profiles of
    /// several images (a database's epoch) get one report per image,
    /// after a table of the images by samples.
    Prof {
        #[command(flatten)]
        inputs: Inputs,
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
        #[command(flatten)]
        inputs: Inputs,
        /// The procedure.
        #[arg(long = "proc", value_name = "NAME")]
        proc_name: String,
    },
    /// Two profiles of one image compared per procedure, or per
    /// instruction of one procedure (dcpidiff).
    Diff {
        /// The old profile (A), and the new (B); an image may come first.
        #[arg(required = true, num_args = 2..=3, value_name = "[IMAGE] A B")]
        files: Vec<PathBuf>,
        /// The image both profiles sample (default: the path they record).
        #[arg(long, value_name = "IMAGE")]
        image: Option<PathBuf>,
        /// Compare the instructions of this procedure.
        #[arg(long = "proc", value_name = "NAME")]
        proc_name: Option<String>,
    },
}

/// Which profiles a report reads: files, a database's epoch, or both.
#[derive(clap::Args)]
pub struct Inputs {
    /// DCPI profiles. An image (executable or library) may come first, as
    /// dcpiprof took it; otherwise each profile's recorded image is used.
    #[arg(required_unless_present = "db", value_name = "[IMAGE] PROFILE")]
    files: Vec<PathBuf>,
    /// The image every profile samples, instead of the path each records.
    #[arg(long, value_name = "IMAGE")]
    image: Option<PathBuf>,
    /// A profile database (`tally record --format dcpi -d DIR`): the
    /// profiles of its latest epoch, or of `--epoch`.
    #[arg(short = 'd', long = "db", value_name = "DIR")]
    db: Option<PathBuf>,
    /// The epoch of the database to read (a directory name).
    #[arg(long, requires = "db", value_name = "EPOCH")]
    epoch: Option<String>,
}

/// Whether `path` holds a DCPI profile (an image otherwise, or a file
/// that cannot be read, which opening it as an image then reports).
fn is_profile(path: &Path) -> bool {
    use std::io::Read;
    let mut head = vec![0u8; 4096];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let n = f.read(&mut head).unwrap_or(0);
    tally_formats::dcpi::is_dcpi(&head[..n])
}

/// The profiles to read, grouped by the image they sample.
fn groups(
    files: &[PathBuf],
    image: Option<&Path>,
    db: Option<&Path>,
    epoch: Option<&str>,
) -> anyhow::Result<Vec<(PathBuf, Vec<PathBuf>)>> {
    let mut files = files.to_vec();
    let mut image = image.map(Path::to_path_buf);
    if image.is_none() && !files.is_empty() && !is_profile(&files[0]) {
        image = Some(files.remove(0));
    }
    if let Some(db) = db {
        let dir = tally_input::epoch_dir(db, epoch)?;
        let found = tally_input::epoch_profiles(&dir)?;
        if found.is_empty() && files.is_empty() {
            anyhow::bail!("{}: no profile in this epoch", dir.display());
        }
        files.extend(found);
    }
    if files.is_empty() {
        crate::usage_bail!("no DCPI profile given");
    }
    Ok(tally_input::by_image(&files, image.as_deref())?)
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
        Command::Prof { inputs, keep, json } => {
            if !(0.0..=100.0).contains(&keep) {
                crate::usage_bail!("--keep must be a percentage between 0 and 100, got {keep}");
            }
            let i = &inputs;
            let groups = groups(
                &i.files,
                i.image.as_deref(),
                i.db.as_deref(),
                i.epoch.as_deref(),
            )?;
            prof(&groups, keep, json, &mut out)?;
        }
        Command::List { inputs, proc_name } => {
            let i = &inputs;
            let groups = groups(
                &i.files,
                i.image.as_deref(),
                i.db.as_deref(),
                i.epoch.as_deref(),
            )?;
            let [(img, profiles)] = &groups[..] else {
                crate::usage_bail!(
                    "the profiles sample {} images: give one image's profiles, or --image",
                    groups.len()
                );
            };
            let image = Program::open(img)?;
            let p = summed(profiles)?;
            check_image(&p, &profiles[0], img);
            report::list(&p, image.object(), &proc_name, &mut out)?;
        }
        Command::Diff {
            files,
            image,
            proc_name,
        } => {
            let groups = groups(&files, image.as_deref(), None, None)?;
            let (img, a, b) = match &groups[..] {
                [(img, ab)] if ab.len() == 2 => (img, &ab[0], &ab[1]),
                _ => crate::usage_bail!(
                    "dcpi diff compares two profiles of one image; give [IMAGE] A B"
                ),
            };
            let image = Program::open(img)?;
            let (pa, pb) = (read(a)?, read(b)?);
            check_image(&pa, a, img);
            check_image(&pb, b, img);
            let o = report::DiffOptions {
                proc_name,
                names: (a.display().to_string(), b.display().to_string()),
            };
            report::diff(&pa, &pb, image.object(), &o, &mut out)?;
        }
    }
    out.flush()?;
    Ok(Outcome::Ok)
}

/// dcpiprof's report of each image's profiles; with several images, a
/// table of the images by samples first (JSON: `images`, each with its
/// report).
fn prof(
    groups: &[(PathBuf, Vec<PathBuf>)],
    keep: f64,
    json: bool,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let mut summed_groups = Vec::with_capacity(groups.len());
    for (img, profiles) in groups {
        let p = summed(profiles)?;
        check_image(&p, &profiles[0], img);
        summed_groups.push((img, p));
    }
    summed_groups.sort_by(|a, b| b.1.total().cmp(&a.1.total()).then(a.0.cmp(b.0)));
    let report_of = |img: &PathBuf, p: &DcpiProfile, out: &mut dyn Write| -> anyhow::Result<()> {
        let image = Program::open(img)?;
        let o = report::ProfOptions {
            keep,
            image_name: img.display().to_string(),
            json,
        };
        report::prof(p, image.object(), &o, out)?;
        Ok(())
    };
    if let [(img, p)] = &summed_groups[..] {
        return report_of(img, p, out);
    }
    let all: u64 = summed_groups.iter().map(|g| g.1.total()).sum();
    if json {
        let mut images = Vec::new();
        for (img, p) in &summed_groups {
            let mut buf = Vec::new();
            report_of(img, p, &mut buf)?;
            let v: serde_json::Value = serde_json::from_slice(&buf)?;
            images.push(serde_json::json!({"image": img, "samples": p.total(), "report": v}));
        }
        let doc = serde_json::json!({"samples": all, "images": images});
        serde_json::to_writer_pretty(&mut *out, &doc)?;
        writeln!(out)?;
        return Ok(());
    }
    writeln!(out, "{:>12} {:>7}  image", "samples", "%")?;
    for (img, p) in &summed_groups {
        let share = p.total() as f64 * 100.0 / all.max(1) as f64;
        writeln!(out, "{:>12} {share:>6.2}%  {}", p.total(), img.display())?;
    }
    for (img, p) in &summed_groups {
        writeln!(out)?;
        report_of(img, p, out)?;
    }
    Ok(())
}
