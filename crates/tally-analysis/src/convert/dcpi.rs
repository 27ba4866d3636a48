//! DCPI ↔ Callgrind, and DCPI profiles of one image summed ([`sum`]).
//!
//! A DCPI profile becomes a Callgrind profile with `positions: instr line`
//! and one event named after the header's `event`: each sampled address is
//! a cost line of the function (ELF symbol) and source line (DWARF) that
//! hold it. The DCPI header travels in `desc: dcpi: LINE` lines, and the
//! text start used in `desc: dcpi-text-start: 0x…`, so that the way back
//! gives the same file.
//!
//! The way back sums one event per instruction address of one object. For
//! a Callgrind profile of a position-independent program the addresses are
//! where Valgrind loaded it (0x108000 for the main program): the load bias
//! is found from the image's symbols, so DCPI offsets are image offsets.

use crate::Error;
use std::collections::BTreeMap;
use tally_formats::dcpi::{DcpiProfile, Header};
use tally_model::{Events, FunctionKey, Positions, Profile};
use tally_symbols::ObjectFile;

/// `desc:` type of the DCPI header lines.
const DESC_LINE: &[u8] = b"dcpi";
/// `desc:` type of the text start a conversion used.
const DESC_START: &[u8] = b"dcpi-text-start";

/// The address the chunk offsets are relative to.
pub fn text_start(h: &Header, image: Option<&ObjectFile>) -> u64 {
    h.tstart()
        .or_else(|| image.and_then(|i| i.section(".text")).map(|s| s.address))
        .unwrap_or(0)
}

/// Profiles of one image summed: they must sample the same event.
pub fn sum(profiles: &[(String, DcpiProfile)]) -> Result<DcpiProfile, Error> {
    let Some((first_name, first)) = profiles.first() else {
        return Err(Error::Input("no profiles".into()));
    };
    let mut out = first.clone();
    for (name, p) in &profiles[1..] {
        if p.header.event() != first.header.event() {
            return Err(Error::Input(format!(
                "{name} samples `{}` but {first_name} samples `{}`: profiles of different events cannot be summed",
                p.header.event().unwrap_or("?"),
                first.header.event().unwrap_or("?")
            )));
        }
        if p.header.image() != first.header.image() {
            return Err(Error::Input(format!(
                "{name} is a profile of image {:x} but {first_name} of image {:x}",
                p.header.image().unwrap_or(0),
                first.header.image().unwrap_or(0)
            )));
        }
        if text_start(&p.header, None) != text_start(&first.header, None) {
            return Err(Error::Input(format!(
                "{name} and {first_name} have different text starts"
            )));
        }
        for (&o, &c) in &p.samples {
            let e = out.samples.entry(o).or_insert(0);
            *e = e.checked_add(c).ok_or_else(|| {
                Error::Input(format!(
                    "{name}: the summed count at offset {o:#x} exceeds 32 bits"
                ))
            })?;
        }
    }
    Ok(out)
}

/// A Callgrind event name from DCPI's event text (`cycles`, `imiss`,
/// `pm:retired`): letters, digits and `_`.
fn event_name(event: &str) -> String {
    let mut s: String = event
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, 'e');
    }
    s
}

/// Converts a DCPI profile (with its image, if available) to Callgrind.
pub fn to_callgrind(
    p: &DcpiProfile,
    image: Option<&ObjectFile>,
    image_name: &str,
) -> Result<Profile<u64>, Error> {
    let event = p.header.event().unwrap_or("samples");
    let name = event_name(event);
    let mut events = Events::new([name.clone()]).map_err(|e| Error::Input(e.to_string()))?;
    if name != event {
        events.set_long_name(&name, event.to_string());
    }
    let mut prof = Profile::new(
        tally_model::Format::Callgrind,
        events,
        Positions::INSTR_LINE,
    );
    prof.creator = Some(format!("tally {} (from DCPI)", env!("CARGO_PKG_VERSION")).into_bytes());
    let start = text_start(&p.header, image);
    let object = prof.names.object(image_name.as_bytes());
    let unknown = prof.names.file(b"???");
    let mut part = tally_model::Part::new(Positions::INSTR_LINE, 1);
    part.info.cmd = Some(p.header.path().unwrap_or(image_name).as_bytes().to_vec());
    for l in &p.header.lines {
        // A carriage return at the end (a CRLF header) cannot be written
        // back: the Callgrind reader drops it.
        let end = l.iter().rposition(|&b| b != b'\r').map_or(0, |i| i + 1);
        let mut v = b" ".to_vec();
        v.extend_from_slice(&l[..end]);
        part.info.desc.push((DESC_LINE.to_vec(), v));
    }
    part.info
        .desc
        .push((DESC_START.to_vec(), format!(" {start:#x}").into_bytes()));
    // Symbol lookups per address; the function's own file is the source
    // file of its first instruction.
    for (&off, &count) in &p.samples {
        let addr = start + off;
        let sym = image.and_then(|i| i.symbol_at(addr));
        let fname = sym.map_or("???", |s| s.display_name());
        let ffile = match (image, sym) {
            (Some(i), Some(s)) => i.source_line(s.address).map(|l| l.0),
            _ => None,
        };
        let (lfile, line) = match image.and_then(|i| i.source_line(addr)) {
            Some((f, l)) => (Some(f), u64::from(l)),
            None => (None, 0),
        };
        let file = ffile.map_or(unknown, |f| prof.names.file(f.as_bytes()));
        let lfile = lfile.map_or(file, |f| prof.names.file(f.as_bytes()));
        let sym_id = prof.names.symbol(fname.as_bytes());
        let function = prof.names.function(FunctionKey {
            object,
            file,
            name: sym_id,
        });
        part.lines
            .push(function, lfile, &[addr, line], &[u64::from(count)]);
    }
    part.info.totals = Some(vec![p.total()]);
    prof.parts.push(part);
    Ok(prof)
}

/// What to take from a Callgrind profile.
#[derive(Clone, Debug, Default)]
pub struct FromCallgrind<'a> {
    /// The event to sum (default: the first).
    pub event: Option<&'a str>,
    /// The object (`ob=`) whose instructions are taken; default: the one
    /// that matches the image, or the only one.
    pub object: Option<&'a str>,
}

/// Converts a Callgrind profile with instruction positions to DCPI.
pub fn from_callgrind<C: tally_model::Cost>(
    p: &Profile<C>,
    image: Option<&ObjectFile>,
    opts: &FromCallgrind<'_>,
) -> Result<DcpiProfile, Error> {
    let Some(ix) = p.positions.instr() else {
        return Err(Error::Input(
            "the profile has no instruction addresses (`positions: instr line`, Callgrind's --dump-instr=yes): DCPI counts samples per instruction".into(),
        ));
    };
    let names: Vec<&str> = p
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    // DCPI stores one count per instruction: only recorded events.
    let ev = match opts.event {
        None => 0,
        Some(e) => tally_model::EventColumns::recorded(&p.events).find(e)?,
    };
    let event = names.first().map(|_| names[ev]).unwrap_or("samples");
    // The header, if this profile came from DCPI.
    let info = p.parts.first().map(|x| &x.info);
    let mut restored: Vec<Vec<u8>> = Vec::new();
    let mut recorded_start = None;
    for (t, v) in info.map(|i| i.desc.as_slice()).unwrap_or_default() {
        if t == DESC_LINE {
            restored.push(v.strip_prefix(b" ").unwrap_or(v).to_vec());
        } else if t == DESC_START {
            let s = String::from_utf8_lossy(v);
            let s = s.trim();
            recorded_start = u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
        }
    }
    let object = choose_object(p, image, opts.object)?;
    // Sum the event per instruction address of the object.
    let mut sums: BTreeMap<u64, u128> = BTreeMap::new();
    let mut by_function: Vec<(u64, tally_model::FunctionId)> = Vec::new();
    for part in &p.parts {
        part.lines.for_each(|l| {
            if let Some(o) = object
                && p.names.key(l.function).object.0 != o
            {
                return;
            }
            let v = l.costs.get(ev).map_or(0, |c| c.to_i128());
            if v <= 0 {
                return;
            }
            *sums.entry(l.positions[ix]).or_default() += v as u128;
            by_function.push((l.positions[ix], l.function));
        });
    }
    let (header, start, bias) = if !restored.is_empty() {
        let header = Header { lines: restored };
        let start = header
            .tstart()
            .or(recorded_start)
            .unwrap_or_else(|| text_start(&header, image));
        (header, start, 0)
    } else {
        let bias = match image {
            Some(img) => load_bias(p, img, &by_function),
            None => 0,
        };
        let start = match image.and_then(|i| i.section(".text")) {
            Some(t) => t.address,
            None => sums.keys().next().map_or(0, |&a| a & !0xfff),
        };
        let header = synthesise(p, image, object, event, start, &sums, bias);
        (header, start, bias)
    };
    let mut samples = BTreeMap::new();
    for (addr, v) in sums {
        let a = addr.wrapping_sub(bias);
        let Some(off) = a.checked_sub(start) else {
            return Err(Error::Input(format!(
                "instruction {addr:#x} lies below the text start {start:#x}{}",
                if bias != 0 {
                    format!(" (load bias {bias:#x})")
                } else {
                    String::new()
                }
            )));
        };
        let c = u32::try_from(v).map_err(|_| {
            Error::Input(format!("{v} {event} at {addr:#x}: DCPI counts are 32-bit"))
        })?;
        samples.insert(off, c);
    }
    Ok(DcpiProfile { header, samples })
}

/// The object to take: the one asked for, else the image's, else the only
/// one with costs. `None` when the profile names no objects.
fn choose_object<C: tally_model::Cost>(
    p: &Profile<C>,
    image: Option<&ObjectFile>,
    asked: Option<&str>,
) -> Result<Option<u32>, Error> {
    let mut used: Vec<u32> = Vec::new();
    for part in &p.parts {
        for b in part.lines.blocks() {
            let o = p.names.key(b.function).object.0;
            if !used.contains(&o) {
                used.push(o);
            }
        }
    }
    let name = |o: u32| String::from_utf8_lossy(p.names.objects.get(o)).into_owned();
    let list = || used.iter().map(|&o| name(o)).collect::<Vec<_>>().join(", ");
    let file_name = |s: &str| {
        std::path::Path::new(s)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
    };
    if let Some(a) = asked {
        return used
            .iter()
            .find(|&&o| name(o) == a)
            .or_else(|| {
                used.iter()
                    .find(|&&o| file_name(&name(o)).as_deref() == Some(a))
            })
            .map(|&o| Some(o))
            .ok_or_else(|| {
                Error::Input(format!(
                    "no object `{a}` in the profile (it has: {})",
                    list()
                ))
            });
    }
    if used.iter().all(|&o| name(o).is_empty()) {
        return Ok(None);
    }
    if let Some(img) = image {
        let path = img.path().to_string_lossy().into_owned();
        let canon = std::fs::canonicalize(img.path()).ok();
        let found = used.iter().find(|&&o| {
            let n = name(o);
            n == path
                || canon
                    .as_ref()
                    .is_some_and(|c| std::fs::canonicalize(&n).ok().as_ref() == Some(c))
        });
        let found = found.or_else(|| {
            let f = file_name(&path);
            let same: Vec<&u32> = used.iter().filter(|&&o| file_name(&name(o)) == f).collect();
            (same.len() == 1).then(|| same[0])
        });
        return found.map(|&o| Some(o)).ok_or_else(|| {
            Error::Input(format!(
                "no object of the profile is {path} (it has: {}); name one with --object",
                list()
            ))
        });
    }
    let real: Vec<u32> = used
        .iter()
        .copied()
        .filter(|&o| !name(o).is_empty())
        .collect();
    match real.as_slice() {
        [o] => Ok(Some(*o)),
        _ => Err(Error::Input(format!(
            "the profile has several objects ({}); give the image (--binary) or --object",
            list()
        ))),
    }
}

/// The load bias of a position-independent image in a Callgrind profile:
/// the page-aligned shift under which most sampled addresses fall in the
/// symbol of the function Callgrind attributed them to.
fn load_bias<C: tally_model::Cost>(
    p: &Profile<C>,
    img: &ObjectFile,
    by_function: &[(u64, tally_model::FunctionId)],
) -> u64 {
    let base = |n: &[u8]| {
        let s = String::from_utf8_lossy(n).into_owned();
        match s.rfind('\'') {
            Some(i) if s[i + 1..].chars().all(|c| c.is_ascii_digit()) => s[..i].to_string(),
            _ => s,
        }
    };
    let mut candidates = vec![0u64];
    // Candidates from a few functions: where their symbol would have to be.
    let mut seen = Vec::new();
    for &(addr, f) in by_function {
        if seen.contains(&f) || seen.len() >= 8 {
            continue;
        }
        seen.push(f);
        if let Some(s) = img.find_function(&base(p.names.function_name(f))) {
            let lo = addr.saturating_sub(s.end.max(s.address + 1) - 1);
            let hi = addr.saturating_sub(s.address);
            let mut b = lo & !0xfff;
            while b <= hi {
                if b >= lo && !candidates.contains(&b) {
                    candidates.push(b);
                }
                b += 0x1000;
            }
        }
    }
    let score = |b: u64| {
        by_function
            .iter()
            .step_by((by_function.len() / 2000).max(1))
            .filter(|(a, f)| {
                img.symbol_at(a.wrapping_sub(b)).is_some_and(|s| {
                    s.names().any(|n| n == base(p.names.function_name(*f)))
                        || s.display_name() == base(p.names.function_name(*f))
                })
            })
            .count()
    };
    candidates
        .into_iter()
        .map(|b| (score(b), std::cmp::Reverse(b), b))
        .max()
        .map_or(0, |x| x.2)
}

/// A header for a profile that did not come from DCPI.
fn synthesise<C: tally_model::Cost>(
    p: &Profile<C>,
    image: Option<&ObjectFile>,
    object: Option<u32>,
    event: &str,
    start: u64,
    sums: &BTreeMap<u64, u128>,
    bias: u64,
) -> Header {
    let mut h = Header::default();
    let id = match image {
        Some(i) => std::fs::read(i.path()).map_or(0, |b| fnv1a(&b) & 0xffff_ffff),
        None => 0,
    };
    h.set("image", format!("{id:08x}").as_bytes());
    h.set("epoch", epoch_now().as_bytes());
    let platform = match image {
        Some(i) => format!("{} Linux", i.machine()),
        None => format!("{} Linux", std::env::consts::ARCH),
    };
    h.set("platform", platform.as_bytes());
    h.set("event", event.as_bytes());
    h.set("period", b"1");
    let tsize = match image.and_then(|i| i.section(".text")) {
        Some(t) => t.size,
        None => sums
            .keys()
            .next_back()
            .map_or(0, |&a| a.wrapping_sub(bias).saturating_sub(start) + 1),
    };
    h.set("tsize", tsize.to_string().as_bytes());
    h.set("cpuspeed", b"0");
    let path = match (object, image) {
        (Some(o), _) => String::from_utf8_lossy(p.names.objects.get(o)).into_owned(),
        (None, Some(i)) => i.path().to_string_lossy().into_owned(),
        (None, None) => String::new(),
    };
    if !path.is_empty() {
        h.set("path", path.as_bytes());
    }
    h.set("tstart", format!("{start:x}").as_bytes());
    h
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The current UTC time as YYMMDDHHMM.
fn epoch_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{:02}{m:02}{d:02}{:02}{:02}",
        y % 100,
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_are_callgrind_names() {
        assert_eq!(event_name("cycles"), "cycles");
        assert_eq!(event_name("pm:retired"), "pm_retired");
        assert_eq!(event_name("3x"), "e3x");
    }

    #[test]
    fn epoch_has_ten_digits() {
        let e = epoch_now();
        assert_eq!(e.len(), 10);
        assert!(e.chars().all(|c| c.is_ascii_digit()));
    }
}
