//! `tally export`: profiles of any format as Parquet tables for Spark,
//! DataFusion and other engines (docs/parquet.md). Each input is one
//! profile, loaded, written and dropped before the next, so thousands of
//! inputs stream through the memory of one.

use crate::Outcome;
use anyhow::Context;
use std::path::{Path, PathBuf};
use tally_formats::FileFormat;
use tally_input::Program;
use tally_model::AnyCost;
use tally_parquet::{Exporter, ProfileInfo, Table};

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum To {
    /// Four Parquet files (costs, functions, arcs, profiles) in `-o DIR`.
    Parquet,
}

/// Arguments of `tally export`.
#[derive(clap::Args)]
pub struct Args {
    /// Input profiles, each exported as one profile: Callgrind,
    /// Cachegrind, gmon.out (with `--binary`), DCPI, perf.data, `perf
    /// script` text, folded stacks, pprof, tally JSON.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum)]
    to: To,
    /// Output directory (created if missing); its `costs.parquet`,
    /// `functions.parquet`, `arcs.parquet` and `profiles.parquet` are
    /// replaced whole at the end.
    #[arg(short, long, value_name = "DIR")]
    output: PathBuf,
    /// A label of every profile of this run, as `KEY=VALUE` (e.g.
    /// `service=api`, `version=1.4`, `host=$(hostname)`); repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// The program that wrote the gmon files (needed for them), or the
    /// image DCPI profiles sample.
    #[arg(long, value_name = "PROG")]
    binary: Option<PathBuf>,
    #[command(flatten)]
    transforms: crate::explore::TransformArgs,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}`: a label is KEY=VALUE with a non-empty KEY")),
    }
}

pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let To::Parquet = args.to;
    crate::inputs::stdin_once(&args.files)?;
    let mut seen = std::collections::HashSet::new();
    if let Some((k, _)) = args.labels.iter().find(|(k, _)| !seen.insert(k)) {
        crate::usage_bail!("--label {k}=…: the key `{k}` is given more than once");
    }
    let dir = &args.output;
    let created = !dir.exists();
    std::fs::create_dir_all(dir).with_context(|| format!("{}: cannot create", dir.display()))?;
    let result = export_to(&args, dir);
    if result.is_err() && created {
        // A failed export leaves nothing behind: not even the empty
        // directory it made (remove_dir removes only an empty one).
        let _ = std::fs::remove_dir(dir);
    }
    result
}

fn export_to(args: &Args, dir: &Path) -> anyhow::Result<Outcome> {
    let binary = match &args.binary {
        Some(b) => {
            let program = Program::open(b)?;
            let bytes = std::fs::read(b).with_context(|| format!("{}", b.display()))?;
            let id = tally_parquet::profile_id([bytes.as_slice()], &[]);
            Some((program, id))
        }
        None => None,
    };
    let paths: Vec<PathBuf> = Table::ALL.iter().map(|t| dir.join(t.file_name())).collect();
    let mut failure: Option<anyhow::Error> = None;
    let mut counts = None;
    // Four files written at once, each through a temporary file renamed
    // at the end; an input error stops all four, leaving the old files.
    let written = tally_formats::write_file_send(&paths[0], |c| {
        write(&paths[1], |f| {
            write(&paths[2], |a| {
                write(&paths[3], |p| {
                    let outputs: [(Boxed<'_>, PathBuf); 4] = [
                        (Box::new(c), paths[0].clone()),
                        (Box::new(f), paths[1].clone()),
                        (Box::new(a), paths[2].clone()),
                        (Box::new(p), paths[3].clone()),
                    ];
                    let result = export(args, binary.as_ref(), outputs);
                    match result {
                        Ok(n) => {
                            counts = Some(n);
                            Ok(())
                        }
                        Err(e) => {
                            failure = Some(e);
                            Err(std::io::Error::other("export stopped"))
                        }
                    }
                })
            })
        })
    });
    if let Some(e) = failure {
        return Err(e);
    }
    written.map_err(|e| crate::inputs::write_error(e, &args.files))?;
    if let Some(n) = counts {
        eprintln!(
            "tally export: {} profiles; rows: {} costs, {} functions, {} arcs, {} profiles in {}",
            n.profiles,
            n.rows[0],
            n.rows[1],
            n.rows[2],
            n.rows[3],
            dir.display()
        );
    }
    Ok(Outcome::Ok)
}

type Out<'a> = &'a mut (dyn std::io::Write + Send);

/// The four outputs as one type, whatever their lifetimes.
type Boxed<'a> = Box<dyn std::io::Write + Send + 'a>;

/// One output file written through `f`; a nested write's own error is
/// passed on as an I/O error.
fn write(path: &Path, f: impl FnOnce(Out<'_>) -> std::io::Result<()>) -> std::io::Result<()> {
    tally_formats::write_file_send(path, f).map_err(std::io::Error::other)
}

fn export(
    args: &Args,
    binary: Option<&(Program, String)>,
    outputs: [(Boxed<'_>, PathBuf); 4],
) -> anyhow::Result<tally_parquet::Counts> {
    let mut ex = Exporter::new(outputs)?;
    let list = &args.transforms.list()?;
    for path in &args.files {
        let source = tally_input::open(path)?;
        let mut info = ProfileInfo {
            source: path.display().to_string(),
            labels: args.labels.clone(),
            ..ProfileInfo::default()
        };
        if !list.is_empty() {
            // What was applied is recorded with the profile, as a label,
            // and makes it another profile.
            let t = crate::explore::describe(list);
            info.labels.push(("tally.transforms".into(), t));
        }
        let bytes = source.bytes()?;
        let extra = binary.map(|b| b.1.as_bytes()).unwrap_or_default();
        info.id = tally_parquet::profile_id([bytes.as_ref(), extra], &info.labels);
        drop(bytes);
        let file_format = source.format();
        if !list.is_empty() {
            let program = args.binary.as_deref();
            let d = crate::explore::load("export", &[source], program, 0.0, list)?;
            info.format = format_name(file_format, d.profile.format).into();
            ex.add(&d.into_profile(), &info)?;
            continue;
        }
        let loaded = tally_input::load_one(&source, binary.map(|b| &b.0))?;
        for w in &loaded.warnings {
            eprintln!("{w}");
        }
        info.format = format_name(file_format, loaded.profile.format()).into();
        match &loaded.profile {
            AnyCost::Unsigned(p) => ex.add(p, &info)?,
            AnyCost::Signed(p) => ex.add(p, &info)?,
        }
    }
    Ok(ex.finish()?)
}

/// The `format` column: the input's format as detected.
fn format_name(f: FileFormat, p: tally_model::Format) -> &'static str {
    match f {
        FileFormat::PerfData => "perf.data",
        FileFormat::PerfScript => "perf-script",
        FileFormat::Folded => "folded",
        FileFormat::Pprof => "pprof",
        FileFormat::Gmon => "gmon",
        FileFormat::Dcpi => "dcpi",
        FileFormat::TallyJson => "tally-json",
        _ => match p {
            tally_model::Format::Cachegrind => "cachegrind",
            _ => "callgrind",
        },
    }
}
