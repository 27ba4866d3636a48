//! DCPI reports, as the DCPI tools printed them: `cat` (dcpicat: the
//! header and the count of every sampled address), `prof` (dcpiprof:
//! samples per procedure), `list` (dcpilist: one procedure's instructions
//! with their samples and source lines) and `diff` (dcpidiff: two profiles
//! of one image, per procedure or per instruction). The conversions to and
//! from Callgrind, and the sum of profiles, are in
//! `tally_analysis::convert::dcpi`.
//!
//! Addresses are `text start + offset`: the text start is the header's
//! `tstart` line if it has one, else the image's `.text` section address,
//! else 0. Procedures are the image's ELF function symbols; samples outside
//! every symbol go to `unknown_rtns`, the name dcpiprof gave them.

use crate::ReportError;
use crate::format::{MAX_COLUMN, pad_left, thousands};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use tally_analysis::convert::dcpi::text_start;
use tally_formats::dcpi::DcpiProfile;
use tally_symbols::ObjectFile;

fn th(v: u64) -> String {
    thousands(i128::from(v))
}

/// A signed difference with its sign (`+1,234`, `-5`, `0`).
fn signed(d: i128) -> String {
    if d > 0 {
        format!("+{}", thousands(d))
    } else {
        thousands(d)
    }
}

/// The procedure name of samples outside every symbol.
pub const UNKNOWN: &str = "unknown_rtns";

/// `tally dcpi cat`: the header, then address and count per sampled
/// instruction, then the totals.
pub fn cat(p: &DcpiProfile, offsets: bool, out: &mut dyn Write) -> Result<(), ReportError> {
    for l in &p.header.lines {
        let end = l
            .iter()
            .position(|&b| b == b' ' || b == b'\t')
            .unwrap_or(l.len());
        let value = l[end..].trim_ascii_start();
        writeln!(
            out,
            "{:<20} {}",
            String::from_utf8_lossy(&l[..end]),
            String::from_utf8_lossy(value)
        )?;
    }
    let start = if offsets {
        0
    } else {
        text_start(&p.header, None)
    };
    for (&o, &c) in &p.samples {
        writeln!(out, "0x{:012x} {c:>8}", start + o)?;
    }
    writeln!(
        out,
        "# {} sampled addresses, {} samples",
        p.samples.len(),
        p.total()
    )?;
    Ok(())
}

/// Samples of one procedure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcRow {
    /// Its name (demangled), or [`UNKNOWN`].
    pub name: String,
    /// Its start address (0 for unknown).
    pub address: u64,
    /// Samples.
    pub samples: u64,
}

/// Samples per procedure, most first (ties by name).
pub fn procedures(p: &DcpiProfile, image: &ObjectFile) -> Vec<ProcRow> {
    let start = text_start(&p.header, Some(image));
    let mut rows: BTreeMap<(u64, String), u64> = BTreeMap::new();
    for (&o, &c) in &p.samples {
        let key = match image.symbol_at(start + o) {
            Some(s) => (s.address, s.display_name().to_string()),
            None => (0, UNKNOWN.to_string()),
        };
        *rows.entry(key).or_default() += u64::from(c);
    }
    let mut v: Vec<ProcRow> = rows
        .into_iter()
        .map(|((address, name), samples)| ProcRow {
            name,
            address,
            samples,
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
    v
}

fn pct(part: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        part as f64 * 100.0 / total as f64
    }
}

/// Options of `tally dcpi prof`.
#[derive(Clone, Debug)]
pub struct ProfOptions {
    /// Show the top procedures that cover this percentage of the samples.
    pub keep: f64,
    /// The image's name as shown.
    pub image_name: String,
    /// JSON instead of text.
    pub json: bool,
}

/// `tally dcpi prof`: dcpiprof's per-procedure histogram.
pub fn prof(
    p: &DcpiProfile,
    image: &ObjectFile,
    o: &ProfOptions,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    let rows = procedures(p, image);
    let total = p.total();
    let event = p.header.event().unwrap_or("samples");
    let mut shown = Vec::new();
    let mut cum = 0u64;
    for r in &rows {
        if o.keep < 100.0 && pct(cum, total) >= o.keep {
            break;
        }
        cum += r.samples;
        shown.push((r, cum));
    }
    if o.json {
        let v = json!({
            "image": o.image_name,
            "event": event,
            "period": p.header.period(),
            "total": total,
            "procedures": shown.iter().map(|(r, cum)| json!({
                "procedure": r.name,
                "address": r.address,
                "samples": r.samples,
                "percent": pct(r.samples, total),
                "cumulative_percent": pct(*cum, total),
            })).collect::<Vec<_>>(),
        });
        serde_json::to_writer_pretty(&mut *out, &v).map_err(std::io::Error::from)?;
        writeln!(out)?;
        return Ok(());
    }
    let period = p
        .header
        .period()
        .map_or_else(|| "-".to_string(), |v| v.to_string());
    writeln!(out, "Column{:>22}  Period (for events)", "Total")?;
    writeln!(out, "------{:>22}  ------", "-----")?;
    writeln!(out, "{event:<16}{:>12}  {period}", th(total))?;
    writeln!(out)?;
    writeln!(
        out,
        "Samples of each procedure of {}, most first{}.",
        o.image_name,
        if o.keep < 100.0 {
            format!(", enough to cover {}% of them", o.keep)
        } else {
            String::new()
        }
    )?;
    writeln!(out, "{}", "=".repeat(72))?;
    let w = th(total).len().max(event.len().min(MAX_COLUMN));
    writeln!(
        out,
        "{}       %    cum%  {:<30} image",
        pad_left(event, w),
        "procedure"
    )?;
    for (r, cum) in &shown {
        writeln!(
            out,
            "{:>w$} {:>6.2}% {:>6.2}%  {:<30} {}",
            th(r.samples),
            pct(r.samples, total),
            pct(*cum, total),
            r.name,
            o.image_name
        )?;
    }
    if shown.len() < rows.len() {
        writeln!(
            out,
            "({} more procedures with {} samples not shown)",
            rows.len() - shown.len(),
            th(total - cum)
        )?;
    }
    Ok(())
}

/// Finds a procedure by name; the error lists similar names.
fn find_proc<'a>(
    image: &'a ObjectFile,
    name: &str,
) -> Result<&'a tally_symbols::Symbol, ReportError> {
    if let Some(s) = image.find_function(name) {
        return Ok(s);
    }
    let lower = name.to_lowercase();
    let mut close: Vec<&str> = image
        .symbols()
        .iter()
        .map(|s| s.display_name())
        .filter(|n| n.to_lowercase().contains(&lower) || lower.contains(&n.to_lowercase()))
        .collect();
    close.sort_unstable();
    close.dedup();
    close.truncate(8);
    Err(ReportError::Input(format!(
        "no procedure `{name}` in {}{}",
        image.path().display(),
        if close.is_empty() {
            String::new()
        } else {
            format!(" (similar: {})", close.join(", "))
        }
    )))
}

/// `tally dcpi list`: one procedure's instructions with their samples and
/// the source lines they come from.
pub fn list(
    p: &DcpiProfile,
    image: &ObjectFile,
    proc_name: &str,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    let sym = find_proc(image, proc_name)?;
    let start = text_start(&p.header, Some(image));
    let insns = image
        .disassemble(sym.address, sym.end)
        .map_err(|e| ReportError::Input(e.to_string()))?;
    let event = p.header.event().unwrap_or("samples");
    let count = |a: u64, len: u64| -> u64 {
        // Every sampled address inside the instruction counts for it
        // (byte-addressed profiles of variable-length code).
        (a..a + len.max(1))
            .filter_map(|x| x.checked_sub(start))
            .filter_map(|o| p.samples.get(&o))
            .map(|&c| u64::from(c))
            .sum()
    };
    let counts: Vec<u64> = insns
        .iter()
        .map(|i| count(i.address, i.len() as u64))
        .collect();
    let total: u64 = counts.iter().sum();
    let w = th(total).len().max(event.len().min(MAX_COLUMN)).max(7);
    writeln!(
        out,
        "{} ({}), {} {} in {:#x}..{:#x}",
        sym.display_name(),
        image.path().display(),
        th(total),
        event,
        sym.address,
        sym.end
    )?;
    writeln!(
        out,
        "{}  {:>8}  address    instruction",
        pad_left(event, w),
        "%"
    )?;
    let mut last_line: Option<(String, u32)> = None;
    let mut sources: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    for (i, c) in insns.iter().zip(&counts) {
        if let Some((file, line)) = image.source_line(i.address)
            && last_line.as_ref() != Some(&(file.clone(), line))
        {
            let text = sources
                .entry(file.clone())
                .or_insert_with(|| {
                    std::fs::read_to_string(&file)
                        .ok()
                        .map(|t| t.lines().map(str::to_string).collect())
                })
                .as_ref()
                .and_then(|v| v.get((line as usize).wrapping_sub(1)).cloned());
            match text {
                Some(t) => writeln!(out, "{:>w$}  {file}:{line}: {}", "", t.trim())?,
                None => writeln!(out, "{:>w$}  {file}:{line}", "")?,
            }
            last_line = Some((file, line));
        }
        let share = if *c > 0 {
            format!("{:.2}%", pct(*c, total))
        } else {
            String::new()
        };
        writeln!(
            out,
            "{:>w$}  {share:>8}  {:#x}  {}",
            if *c > 0 { th(*c) } else { ".".into() },
            i.address,
            i.text
        )?;
    }
    writeln!(
        out,
        "{:>w$}  total {event} of {}",
        th(total),
        sym.display_name()
    )?;
    Ok(())
}

/// Options of `tally dcpi diff`.
#[derive(Clone, Debug, Default)]
pub struct DiffOptions {
    /// Per instruction of this procedure instead of per procedure.
    pub proc_name: Option<String>,
    /// Names of A and B as shown.
    pub names: (String, String),
}

/// `tally dcpi diff`: samples of A and B per procedure (or per instruction
/// of one), the difference and the change, largest difference first.
pub fn diff(
    a: &DcpiProfile,
    b: &DcpiProfile,
    image: &ObjectFile,
    o: &DiffOptions,
    out: &mut dyn Write,
) -> Result<(), ReportError> {
    if a.header.event() != b.header.event() {
        return Err(ReportError::Input(format!(
            "{} samples `{}` but {} samples `{}`: a diff needs one event",
            o.names.0,
            a.header.event().unwrap_or("?"),
            o.names.1,
            b.header.event().unwrap_or("?")
        )));
    }
    let event = a.header.event().unwrap_or("samples");
    let (ta, tb) = (a.total(), b.total());
    // Rows: (label, A, B).
    let rows: Vec<(String, u64, u64)> = match &o.proc_name {
        None => {
            let mut m: BTreeMap<String, (u64, u64)> = BTreeMap::new();
            for r in procedures(a, image) {
                m.entry(r.name).or_default().0 += r.samples;
            }
            for r in procedures(b, image) {
                m.entry(r.name).or_default().1 += r.samples;
            }
            m.into_iter().map(|(k, (x, y))| (k, x, y)).collect()
        }
        Some(name) => {
            let sym = find_proc(image, name)?;
            let insns = image
                .disassemble(sym.address, sym.end)
                .map_err(|e| ReportError::Input(e.to_string()))?;
            let count = |p: &DcpiProfile, addr: u64, len: u64| -> u64 {
                let s = text_start(&p.header, Some(image));
                (addr..addr + len.max(1))
                    .filter_map(|x| x.checked_sub(s))
                    .filter_map(|off| p.samples.get(&off))
                    .map(|&c| u64::from(c))
                    .sum()
            };
            insns
                .iter()
                .map(|i| {
                    (
                        format!("{:#x}  {}", i.address, i.text),
                        count(a, i.address, i.len() as u64),
                        count(b, i.address, i.len() as u64),
                    )
                })
                .collect()
        }
    };
    let mut rows: Vec<_> = rows;
    if o.proc_name.is_none() {
        rows.sort_by(|x, y| {
            let d = |r: &(String, u64, u64)| (r.2 as i128 - r.1 as i128).unsigned_abs();
            d(y).cmp(&d(x)).then_with(|| x.0.cmp(&y.0))
        });
    }
    writeln!(out, "A: {} ({} {event})", o.names.0, th(ta))?;
    writeln!(out, "B: {} ({} {event})", o.names.1, th(tb))?;
    let w = th(ta.max(tb)).len().max(7);
    writeln!(
        out,
        "{:>w$} {:>w$} {:>w$}  {:>8}  {}",
        "A",
        "B",
        "B-A",
        "change",
        if o.proc_name.is_some() {
            "address    instruction"
        } else {
            "procedure"
        }
    )?;
    for (label, x, y) in rows {
        let d = y as i128 - x as i128;
        let change = if x == 0 {
            if y == 0 { String::new() } else { "new".into() }
        } else {
            format!("{:+.1}%", d as f64 * 100.0 / x as f64)
        };
        let ds = signed(d);
        writeln!(
            out,
            "{:>w$} {:>w$} {ds:>w$}  {change:>8}  {label}",
            th(x),
            th(y)
        )?;
    }
    let d = tb as i128 - ta as i128;
    writeln!(
        out,
        "{:>w$} {:>w$} {:>w$}  {:>8}  total",
        th(ta),
        th(tb),
        signed(d),
        if ta == 0 {
            String::new()
        } else {
            format!("{:+.1}%", d as f64 * 100.0 / ta as f64)
        }
    )?;
    Ok(())
}
