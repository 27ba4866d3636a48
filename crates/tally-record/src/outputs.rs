//! The outputs that are not profiles of stacks: gprof's `gmon.out` of the
//! main program and DCPI's one profile per image. Both count samples (not
//! periods) at ELF addresses, from [`crate::Recording::sample_counts`].

use object::{Object, ObjectSection, ObjectSegment};
use std::collections::BTreeMap;
use tally_formats::dcpi::{DcpiProfile, Header};
use tally_formats::gmon::{self, Gmon, Histogram};
use tally_model::{FunctionId, Profile};

/// What tally writes in the 12 spare bytes of a `gmon.out` header it made
/// from samples (glibc writes zeros there and gprof ignores them), so that
/// `tally gprof` can say that the arcs count sampled stacks, not calls.
pub const GMON_SAMPLED_MARK: &[u8; 12] = b"tally-sample";

/// The sampled leaf addresses of `object` (a path as mapped) and their
/// sample counts, and the arcs between its functions: (return address in
/// the caller, callee) with the number of sampled stacks through them (a
/// recursion counted once per stack) and an address in the callee.
struct Sampled {
    leaves: BTreeMap<u64, u64>,
    arcs: BTreeMap<(u64, FunctionId), (u64, u64)>,
}

fn sampled(profile: &Profile<u64>, object: &[u8], arcs: bool) -> Sampled {
    let mut s = Sampled {
        leaves: BTreeMap::new(),
        arcs: BTreeMap::new(),
    };
    let Some(stacks) = &profile.stacks else {
        return s;
    };
    let ours = |f: FunctionId| profile.names.objects.get(profile.names.key(f).object.0) == object;
    let mut seen = Vec::new();
    for sample in &stacks.samples {
        let n = sample.costs.first().copied().unwrap_or(0);
        let frames: Vec<_> = sample
            .frames
            .iter()
            .map(|&f| stacks.frames[f.index()])
            .collect();
        if let Some(leaf) = frames.last()
            && ours(leaf.function)
        {
            *s.leaves.entry(leaf.address).or_default() += n;
        }
        if !arcs {
            continue;
        }
        seen.clear();
        for pair in frames.windows(2) {
            let (caller, callee) = (pair[0], pair[1]);
            if !ours(caller.function) || !ours(callee.function) {
                continue;
            }
            let key = (caller.address, callee.function);
            if seen.contains(&key) {
                continue;
            }
            seen.push(key);
            s.arcs.entry(key).or_insert((callee.address, 0)).1 += n;
        }
    }
    s
}

/// The executable segment of the ELF file at `path`: (address, size).
fn text_range(path: &[u8]) -> Option<(u64, u64)> {
    let data = std::fs::read(std::str::from_utf8(path).ok()?).ok()?;
    let file = object::File::parse(&*data).ok()?;
    if let Some(t) = file.section_by_name(".text") {
        let seg = file.segments().find(|s| {
            matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0)
                && s.address() <= t.address()
                && t.address() < s.address() + s.size()
        });
        return Some(match seg {
            Some(s) => (s.address(), s.size()),
            None => (t.address(), t.size()),
        });
    }
    None
}

/// The `gmon.out` of `program` (its path as mapped): a histogram of the
/// sampled instructions over its executable segment, two bytes a bin, at
/// `rate` samples per second when the event is a clock (else one per
/// sample, in `samples`), and arcs whose counts are sampled stacks.
pub fn gmon(profile: &Profile<u64>, program: &[u8], rate: Option<u32>) -> Gmon {
    let s = sampled(profile, program, true);
    let mut g = Gmon::default();
    let (mut low, mut high) = text_range(program).map_or((u64::MAX, 0), |(a, n)| (a, a + n));
    if let (Some((&first, _)), Some((&last, _))) =
        (s.leaves.first_key_value(), s.leaves.last_key_value())
    {
        low = low.min(first);
        high = high.max(last + 1);
    }
    if low < high {
        let low = low & !1;
        let high = (high + 1) & !1;
        let mut bins = vec![0u64; ((high - low) / 2) as usize];
        for (&a, &n) in &s.leaves {
            let b = &mut bins[((a - low) / 2) as usize];
            // gprof's bins are 16 bits wide.
            *b = (*b + n).min(u64::from(u16::MAX));
        }
        let (prof_rate, dimension, abbrev) = match rate {
            Some(hz) => (hz, gmon::DEFAULT_DIMENSION, gmon::DEFAULT_DIMENSION_ABBREV),
            None => (1, "samples", 's'),
        };
        g.histograms.push(Histogram {
            low_pc: low,
            high_pc: high,
            prof_rate,
            dimension: dimension.into(),
            dimension_abbrev: abbrev,
            bins,
        });
    }
    for ((from_pc, _), (self_pc, count)) in s.arcs {
        g.arcs.push(gmon::Arc {
            from_pc,
            self_pc,
            count: count.min(u64::from(u32::MAX)),
        });
    }
    g
}

/// The bytes of `g` as a GNU `gmon.out`, marked [`GMON_SAMPLED_MARK`].
pub fn gmon_bytes(g: &Gmon) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    g.write(&mut out, gmon::Layout::host())?;
    if out.len() >= 20 {
        out[8..20].copy_from_slice(GMON_SAMPLED_MARK);
    }
    Ok(out)
}

/// The facts a DCPI header holds beyond the samples.
pub struct DcpiFacts<'a> {
    /// `YYMMDDHHMM`, UTC.
    pub epoch: &'a str,
    /// The event's name.
    pub event: &'a str,
    /// Events (ns for the clocks) per sample.
    pub period: u64,
}

/// One DCPI profile per image that has samples: the sample counts of its
/// instructions as offsets from its executable segment (`tstart`), with
/// the header fields the format requires. Images that cannot be read
/// (`[vdso]`, deleted files) are left out.
pub fn dcpi(profile: &Profile<u64>, facts: &DcpiFacts<'_>) -> Vec<(String, DcpiProfile)> {
    let mut out = Vec::new();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mhz = cpu_mhz();
    for object in profile.names.objects.iter() {
        if !object.starts_with(b"/") {
            continue;
        }
        let s = sampled(profile, object, false);
        let Some((start, size)) = text_range(object) else {
            continue;
        };
        let mut samples = BTreeMap::new();
        for (&a, &n) in &s.leaves {
            if let Some(off) = a.checked_sub(start) {
                let c: &mut u32 = samples.entry(off).or_default();
                *c = c.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        if samples.is_empty() {
            continue;
        }
        let bytes = std::fs::read(String::from_utf8_lossy(object).as_ref()).unwrap_or_default();
        let id = fnv1a(&bytes) & 0xffff_ffff;
        let mut h = Header::default();
        h.set("image", format!("{id:08x}").as_bytes());
        h.set("epoch", facts.epoch.as_bytes());
        h.set(
            "platform",
            format!("{} Linux", std::env::consts::ARCH).as_bytes(),
        );
        h.set("event", facts.event.as_bytes());
        h.set("period", facts.period.to_string().as_bytes());
        h.set("tsize", size.to_string().as_bytes());
        h.set("cpuspeed", mhz.to_string().as_bytes());
        h.set("cpucount", cpus.to_string().as_bytes());
        h.set("path", object);
        h.set("tstart", format!("{start:x}").as_bytes());
        let base = String::from_utf8_lossy(object)
            .rsplit('/')
            .next()
            .unwrap_or("image")
            .to_string();
        out.push((
            format!("{base}_{id:08x}"),
            DcpiProfile { header: h, samples },
        ));
    }
    out
}

/// The CPU's clock in MHz, from `/proc/cpuinfo` (0 when unknown).
fn cpu_mhz() -> u64 {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("cpu MHz"))
                .and_then(|l| l.split(':').nth(1))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .map_or(0, |m| m.round() as u64)
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A time as DCPI's epoch, `YYMMDDHHMM` (UTC).
pub fn epoch(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Walk the years and months from 1970: a few dozen steps.
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let (mut year, mut left) = (1970u64, days);
    loop {
        let n = if leap(year) { 366 } else { 365 };
        if left < n {
            break;
        }
        left -= n;
        year += 1;
    }
    let lengths = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut month = 0;
    while left >= lengths[month] {
        left -= lengths[month];
        month += 1;
    }
    format!(
        "{:02}{:02}{:02}{:02}{:02}",
        year % 100,
        month + 1,
        left + 1,
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn epochs_are_utc_dates() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_700_000);
        // date -u -d @1795700000: Thu Nov 26 13:33:20 UTC 2026
        assert_eq!(super::epoch(t), "2611261333");
        let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        // 2000-02-29 00:00:00 UTC
        assert_eq!(super::epoch(leap), "0002290000");
    }
}
