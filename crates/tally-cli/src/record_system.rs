//! `tally record --system`: every process sampled into DCPI epoch
//! directories (the library's `tally_record::record_system`), with a line per
//! epoch on stderr.

use crate::Outcome;
use crate::record::Args;
use std::time::Duration;
use tally_record::{Event, Rate, SystemOptions, record_system};

/// Runs `tally record --system -d DIR`.
pub fn run(
    args: &Args,
    event: Event,
    rate: Rate,
    duration: Option<Duration>,
    epoch: Option<Duration>,
) -> anyhow::Result<Outcome> {
    let Some(dir) = args.db.clone() else {
        crate::usage_bail!("--system writes DCPI epochs: give the database with -d DIR");
    };
    if epoch.is_some_and(|e| e < Duration::from_secs(1)) {
        crate::usage_bail!("--epoch: at least 1 second (epochs are named to the second)");
    }
    let options = SystemOptions {
        event,
        rate,
        pages: args.mmap_pages.unwrap_or(0),
        dir,
        duration,
        epoch,
    };
    let recording = record_system(&options, |e| match &e.dir {
        Some(dir) => eprintln!(
            "tally record: {} samples written to {} ({} images; {} in no readable image, {} lost)",
            e.samples,
            dir.display(),
            e.images,
            e.unattributed,
            e.lost
        ),
        None => eprintln!(
            "tally record: an epoch of {} samples, none in a readable image: nothing written",
            e.samples
        ),
    })?;
    for note in &recording.notes {
        eprintln!("tally record: note: {note}");
    }
    if let Some(s) = recording.interrupted {
        eprintln!(
            "tally record: stopped by {} after {} epochs",
            tally_record::signal_name(s),
            recording.epochs
        );
    }
    Ok(Outcome::Ok)
}
