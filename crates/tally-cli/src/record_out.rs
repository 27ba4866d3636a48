//! Where `tally record`'s recording goes: checked before the program
//! runs, and the sample counts written as gmon.out or DCPI profiles.

use crate::record::{Args, To};
use std::path::PathBuf;

/// Whether the recording is written as sample counts (gmon.out, or DCPI
/// with `-d`) rather than as a profile of stacks.
pub fn counts(args: &Args) -> Option<To> {
    match (args.format, &args.db, &args.output) {
        (Some(To::Dcpi), _, _) | (None, Some(_), None) => Some(To::Dcpi),
        (Some(To::Gmon), _, _) => Some(To::Gmon),
        (None, _, Some(o)) if o.file_name().is_some_and(|n| n == "gmon.out") => Some(To::Gmon),
        _ => None,
    }
}

/// Fails before the program runs if its recording could not be written
/// (`-o` in a missing or read-only folder, a DCPI database that cannot be
/// made or written), so that no run is wasted.
pub fn check_output(args: &Args) -> anyhow::Result<()> {
    if counts(args) == Some(To::Dcpi)
        && let Some(o) = &args.output
    {
        crate::usage_bail!(
            "-o {}: DCPI profiles go into a database of epochs, one file per image: give -d DIR",
            o.display()
        );
    }
    if args.db.is_some() && counts(args).is_none() {
        crate::usage_bail!("-d is the DCPI database: give --format dcpi, or -o for other outputs");
    }
    let probe = if counts(args) == Some(To::Dcpi) {
        // The database is made if missing, as writing it would.
        let db = args.db.clone().unwrap_or_else(|| ".".into());
        std::fs::create_dir_all(&db)
            .map_err(|e| anyhow::anyhow!("{}: cannot make the database: {e}", db.display()))?;
        db.join("epoch")
    } else {
        args.output
            .clone()
            .unwrap_or_else(|| default_output(args.format, 0))
    };
    tally_formats::check_writable(&probe)?;
    Ok(())
}

/// The output without `-o`: tally's JSON (`tally.PID.json`), which keeps
/// the recorded stacks, times and threads and which every command reads;
/// with `--format`, a name of that format (`callgrind.out.PID`,
/// `tally.PID.pb.gz`…).
pub fn default_output(format: Option<To>, pid: impl std::fmt::Display) -> PathBuf {
    PathBuf::from(match format {
        Some(To::Callgrind) => format!("callgrind.out.{pid}"),
        Some(To::Pprof) => format!("tally.{pid}.pb.gz"),
        Some(To::Speedscope) => format!("tally.{pid}.speedscope.json"),
        Some(To::Folded) => format!("tally.{pid}.folded"),
        Some(To::Gmon) => "gmon.out".to_string(),
        Some(To::Json | To::Dcpi) | None => format!("tally.{pid}.json"),
    })
}

/// Writes the sample counts as gmon.out (`-o`, default `gmon.out`) or as
/// DCPI profiles in a new epoch directory of `-d` (default `.`).
pub fn write_counts(
    recording: &tally_record::Recording,
    to: To,
    args: &Args,
) -> anyhow::Result<()> {
    use tally_record::{write_dcpi, write_gmon};
    let what = format!(
        "{} samples of {}",
        recording.samples(),
        recording.event.name
    );
    if to == To::Gmon {
        let output = args.output.clone().unwrap_or_else(|| "gmon.out".into());
        write_gmon(recording, &output)?;
        eprintln!(
            "tally record: {what} written to {} (arcs count sampled stacks, not calls)",
            output.display()
        );
        return Ok(());
    }
    let db = args.db.clone().unwrap_or_else(|| ".".into());
    let (dir, images) = write_dcpi(recording, &db)?;
    eprintln!(
        "tally record: {what} written to {} ({images} images)",
        dir.display()
    );
    Ok(())
}
