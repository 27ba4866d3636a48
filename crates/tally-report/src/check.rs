//! `tally check`'s summary of a profile: its format, header facts,
//! totals and record counts, as the scan (`tally_input::scan`) found them.

use std::io::{self, Write};

use tally_formats::FileFormat;
use tally_formats::callgrind::ReadOutcome;
use tally_formats::{WarningKind, Warnings};
use tally_model::{Cost, Format};

use crate::format::thousands;

/// What a file's check found besides errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    /// Any warning.
    pub warned: bool,
    /// The file looks cut short ([`tally_formats::WarningKind::Truncated`]).
    pub truncated: bool,
}

impl Found {
    /// What a read's warnings say.
    pub fn of(warnings: &Warnings) -> Found {
        Found {
            warned: !warnings.is_empty(),
            truncated: warnings.contains(WarningKind::Truncated),
        }
    }

    /// Whether the check fails (exit status 1): a truncated file always
    /// does (a validator cannot pass a file it knows to be incomplete),
    /// other warnings only with `--strict`.
    pub fn fails(self, strict: bool) -> bool {
        self.truncated || (strict && self.warned)
    }
}

/// The name of the format a profile was read from, as the header line
/// says it: what the content was detected as, or for the Callgrind
/// reader's input (which includes text it does not recognise ahead), the
/// kind of profile it turned out to be.
pub fn format_name(detected: FileFormat, model: Format) -> &'static str {
    match detected {
        FileFormat::PerfData => "perf.data",
        FileFormat::PerfScript => "perf script",
        FileFormat::Folded => "folded stacks",
        FileFormat::Pprof => "pprof",
        FileFormat::TallyJson => "tally JSON",
        FileFormat::Gmon => "gmon",
        FileFormat::Dcpi => "DCPI",
        _ => match model {
            Format::Callgrind => "Callgrind",
            Format::Cachegrind => "Cachegrind",
        },
    }
}

/// The summary of a DCPI profile.
pub fn write_dcpi(
    out: &mut dyn Write,
    path: &std::path::Path,
    p: &tally_formats::dcpi::DcpiProfile,
) -> io::Result<()> {
    let h = &p.header;
    writeln!(out, "{}: valid DCPI profile (format 0.07)", path.display())?;
    writeln!(
        out,
        "  image:      {}",
        h.image().map_or("?".into(), |i| format!("{i:x}"))
    )?;
    writeln!(out, "  path:       {}", h.path().unwrap_or("-"))?;
    writeln!(
        out,
        "  event:      {} (period {})",
        h.event().unwrap_or("?"),
        h.period().unwrap_or(0)
    )?;
    writeln!(out, "  platform:   {}", h.platform().unwrap_or("?"))?;
    writeln!(out, "  epoch:      {}", h.epoch().unwrap_or("?"))?;
    writeln!(out, "  header:     {} lines", h.lines.len())?;
    writeln!(
        out,
        "  samples:    {} at {} addresses (address step {})",
        p.total(),
        p.samples.len(),
        h.address_step()
    )?;
    Ok(())
}

/// The file a summary is of.
pub struct Checked<'a> {
    /// Its name as given.
    pub name: &'a str,
    /// The format its content was detected as.
    pub detected: FileFormat,
    /// Its size as stored, when it is gzip'd (a pprof file is gzip'd by
    /// its format, and that is not said).
    pub gzip_size: Option<u64>,
}

/// The summary of a profile scanned into `o`: its format (`truncated`
/// when `found` says so), header facts, totals per part, what the stated
/// totals say, counts of names and records, and the bytes read.
pub fn write_profile<C: Cost>(
    out: &mut dyn Write,
    file: &Checked<'_>,
    o: &ReadOutcome<C>,
    found: Found,
) -> io::Result<()> {
    let p = &o.profile;
    let name = file.name;
    let format = format_name(file.detected, p.format);
    let signed = if C::SIGNED {
        ", signed costs (a difference)"
    } else {
        ""
    };
    let valid = if found.truncated {
        "truncated"
    } else {
        "valid"
    };
    writeln!(out, "{name}: {valid} {format} profile{signed}")?;
    if let Some(c) = &p.creator {
        writeln!(out, "  creator:    {}", String::from_utf8_lossy(c))?;
    }
    if let Some(cmd) = p.parts.iter().find_map(|x| x.info.cmd.as_deref()) {
        writeln!(out, "  command:    {}", String::from_utf8_lossy(cmd).trim())?;
    }
    let events: Vec<String> = p
        .events
        .recorded()
        .iter()
        .map(|e| match &e.long_name {
            Some(l) => format!("{} ({l})", e.name),
            None => e.name.clone(),
        })
        .collect();
    writeln!(out, "  events:     {}", events.join(" "))?;
    for d in p.events.derived() {
        writeln!(out, "  derived:    {} = {}", d.name, d.formula())?;
    }
    writeln!(out, "  positions:  {}", p.positions.names().join(" "))?;
    writeln!(out, "  parts:      {}", p.parts.len())?;

    let ne = p.events.len();
    let mut totals = vec![C::ZERO; ne];
    let (mut lines, mut calls, mut jumps) = (0u64, 0u64, 0u64);
    for s in &o.stats {
        for (a, &b) in totals.iter_mut().zip(&s.totals) {
            *a = a.saturating_add(b);
        }
        lines += s.lines;
        calls += s.calls;
        jumps += s.jumps;
    }
    let width = crate::format::column_width(
        p.events
            .recorded()
            .iter()
            .map(|e| e.name.chars().count())
            .chain(p.events.derived().iter().map(|d| d.name.chars().count())),
    );
    let pad = |name: &str| crate::format::pad_right(name, width);
    writeln!(out, "  totals:")?;
    for (e, t) in p.events.recorded().iter().zip(&totals) {
        writeln!(out, "    {} {:>20}", pad(&e.name), thousands(t.to_i128()))?;
    }
    for d in p.events.derived() {
        let v = d
            .evaluate(&totals)
            .map_or_else(|| "out of range".to_string(), |v| thousands(v.to_i128()));
        writeln!(out, "    {} {:>20}  (derived)", pad(&d.name), v)?;
    }
    if p.parts.len() > 1 {
        for (i, (part, s)) in p.parts.iter().zip(&o.stats).enumerate() {
            let mut label = format!("part {}", i + 1);
            if let Some(n) = part.info.number {
                label.push_str(&format!(" (part: {n})"));
            }
            if let Some(t) = part.info.thread {
                label.push_str(&format!(" (thread: {t})"));
            }
            let v: Vec<String> = s.totals.iter().map(|c| thousands(c.to_i128())).collect();
            writeln!(out, "  {label}: {}", v.join(" "))?;
        }
    }
    let given = p
        .parts
        .iter()
        .any(|x| x.info.summary.is_some() || x.info.totals.is_some());
    if given {
        let agree = !o.warnings.iter().any(|w| {
            matches!(
                w.kind,
                WarningKind::SummaryAboveTotal
                    | WarningKind::SummaryBelowTotal
                    | WarningKind::TotalsMismatch
                    | WarningKind::Truncated
            )
        });
        writeln!(
            out,
            "  summary/totals lines: {}",
            if agree {
                "agree with the cost lines"
            } else {
                "differ from the cost lines (see warnings)"
            }
        )?;
    }
    let n = &p.names;
    writeln!(
        out,
        "  objects {}, files {}, functions {}, cost lines {}, call arcs {}, jumps {}",
        thousands(n.objects.len() as i128 - 1),
        thousands(n.files.len() as i128 - 1),
        thousands(n.function_count() as i128),
        thousands(i128::from(lines)),
        thousands(i128::from(calls)),
        thousands(i128::from(jumps)),
    )?;
    if !o.warnings.is_empty() {
        writeln!(out, "  warnings:   {}", o.warnings.len())?;
    }
    let stored = match file.gzip_size {
        Some(n) => format!(" ({} gzip'd)", thousands(i128::from(n))),
        None => String::new(),
    };
    writeln!(
        out,
        "  read:       {} bytes{stored}",
        thousands(i128::from(o.bytes))
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_truncated_file_fails_with_or_without_strict() {
        let truncated = Found {
            warned: true,
            truncated: true,
        };
        assert!(truncated.fails(false));
        assert!(truncated.fails(true));
        let warned = Found {
            warned: true,
            truncated: false,
        };
        assert!(!warned.fails(false));
        assert!(warned.fails(true));
        let clean = Found {
            warned: false,
            truncated: false,
        };
        assert!(!clean.fails(true));
    }

    #[test]
    fn the_format_read_is_named() {
        assert_eq!(
            format_name(FileFormat::PerfData, Format::Callgrind),
            "perf.data"
        );
        assert_eq!(
            format_name(FileFormat::PerfScript, Format::Callgrind),
            "perf script"
        );
        assert_eq!(
            format_name(FileFormat::Folded, Format::Callgrind),
            "folded stacks"
        );
        assert_eq!(format_name(FileFormat::Pprof, Format::Callgrind), "pprof");
        assert_eq!(
            format_name(FileFormat::Callgrind, Format::Callgrind),
            "Callgrind"
        );
        // Text the detector did not recognise is named by what the reader
        // made of it.
        assert_eq!(
            format_name(FileFormat::Unknown, Format::Cachegrind),
            "Cachegrind"
        );
        assert_eq!(
            format_name(FileFormat::OnlyComments, Format::Callgrind),
            "Callgrind"
        );
    }
}
