//! speedscope's file format (JSON, <https://www.speedscope.app/file-format-schema.json>):
//! one "sampled" profile per recorded event, weights in that event, over
//! one shared list of frames (one per function: name and file).
//!
//! JSON strings are Unicode: a byte of a name that is not UTF-8 is
//! written `\xHH`, as folded stacks write it ([`crate::escape`]), so that
//! names stay apart and say what they hold.
//!
//! The stacks are the profile's own (recorded, or estimated from arcs by
//! the caller); a profile without stacks is written as one-frame samples
//! of its self costs. Either way the file's name says so (speedscope shows
//! it in its title bar).

use crate::pprof::stacks_to_write;
use rustc_hash::FxHashMap;
use serde_json::{Value, json};
use std::io::{self, Write};
use tally_model::{Cost, FunctionId, Profile};

/// speedscope's unit for a pprof-style unit name, else `none`.
fn unit(name: Option<&str>) -> &'static str {
    match name {
        Some("nanoseconds" | "ns") => "nanoseconds",
        Some("microseconds" | "us") => "microseconds",
        Some("milliseconds" | "ms") => "milliseconds",
        Some("seconds" | "s") => "seconds",
        Some("bytes" | "B") => "bytes",
        _ => "none",
    }
}

/// Writes `profile` as a speedscope file; `name` is shown as the file's
/// name. Weights must be non-negative (speedscope refuses negative ones):
/// a difference profile is refused.
pub fn write<C: Cost>(profile: &Profile<C>, name: &str, out: &mut dyn Write) -> io::Result<()> {
    let (stacks, note) = stacks_to_write(profile)?;
    let names = &profile.names;
    let mut frames: Vec<Value> = Vec::new();
    let mut frame_of: FxHashMap<FunctionId, usize> = FxHashMap::default();
    let mut stack_ids: Vec<Vec<usize>> = Vec::with_capacity(stacks.samples.len());
    for s in &stacks.samples {
        let ids = s
            .frames
            .iter()
            .map(|f| {
                let function = stacks.frames[f.index()].function;
                *frame_of.entry(function).or_insert_with(|| {
                    let mut frame = json!({
                        "name": crate::escape::text(names.function_name(function)),
                    });
                    let file = names.function_file(function);
                    if !file.is_empty() {
                        frame["file"] = json!(crate::escape::text(file));
                    }
                    frames.push(frame);
                    frames.len() - 1
                })
            })
            .collect();
        stack_ids.push(ids);
    }
    let mut profiles = Vec::new();
    for (e, event) in profile.events.recorded().iter().enumerate() {
        let mut samples = Vec::new();
        let mut weights = Vec::new();
        let mut total: u64 = 0;
        for (s, ids) in stacks.samples.iter().zip(&stack_ids) {
            let c = s.costs[e];
            if c.is_zero() {
                continue;
            }
            let w = u64::try_from(c.to_i128()).map_err(|_| {
                io::Error::other(format!(
                    "event `{}` has a negative cost: speedscope takes no negative weights",
                    event.name
                ))
            })?;
            total = total
                .checked_add(w)
                .ok_or_else(|| io::Error::other("a total passes 64 bits"))?;
            samples.push(ids);
            weights.push(w);
        }
        let unit = unit(crate::pprof::event_unit(
            &event.name,
            event.long_name.as_deref(),
        ));
        profiles.push(json!({
            "type": "sampled",
            "name": event.long_name.as_deref().unwrap_or(&event.name),
            "unit": unit,
            "startValue": 0,
            "endValue": total,
            "samples": samples,
            "weights": weights,
        }));
    }
    let title = match note {
        Some(_) => format!("{name} (self costs only: the input holds no call stacks)"),
        None if crate::pprof::stacks_estimated(profile) => {
            format!("{name} (stacks estimated from call arcs)")
        }
        None => name.to_string(),
    };
    let doc = json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": { "frames": frames },
        "profiles": profiles,
        "name": title,
        "activeProfileIndex": 0,
        "exporter": concat!("tally ", env!("CARGO_PKG_VERSION")),
    });
    serde_json::to_writer(&mut *out, &doc).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// The speedscope format, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Speedscope<'a> {
    /// The profile's name in the viewer.
    pub title: &'a str,
}

impl<C: Cost> crate::shape::WriteProfile<C> for Speedscope<'_> {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, self.title, out)
    }
}
