//! The outputs that are not profiles of stacks: gprof's `gmon.out` of the
//! main program and DCPI's one profile per image. Both count samples (not
//! periods) at ELF addresses, from [`crate::Recording::sample_counts`].

use crate::RecordError;
use object::{Object, ObjectSection, ObjectSegment};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tally_formats::dcpi::{DcpiProfile, Header};
use tally_formats::gmon::{self, Gmon, Histogram};
use tally_model::{FunctionId, Profile};

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
    let file = std::fs::File::open(std::str::from_utf8(path).ok()?).ok()?;
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache).ok()?;
    let (start, size, _) = layout(&elf)?;
    Some((start, size))
}

/// Loaded segments of an ELF file: (file offset, file size, address).
type Loads = Vec<(u64, u64, u64)>;

/// The executable segment holding `.text` of an ELF file (address, size)
/// and its loaded segments.
fn layout<'a, R: object::ReadRef<'a>>(file: &object::File<'a, R>) -> Option<(u64, u64, Loads)> {
    let t = file.section_by_name(".text")?;
    let seg = file.segments().find(|s| {
        matches!(s.flags(), object::SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0)
            && s.address() <= t.address()
            && t.address() < s.address() + s.size()
    });
    let (start, size) = match seg {
        Some(s) => (s.address(), s.size()),
        None => (t.address(), t.size()),
    };
    let loads = file
        .segments()
        .map(|s| {
            let (off, len) = s.file_range();
            (off, len, s.address())
        })
        .filter(|&(_, len, _)| len > 0)
        .collect();
    Some((start, size, loads))
}

/// An image (executable or shared library) as DCPI names it: its path as
/// mapped, an id from its contents, and its executable segment, which
/// sample offsets count from.
#[derive(Debug)]
pub struct Image {
    /// The path as mapped.
    pub path: Vec<u8>,
    /// DCPI's image id: the first 4 bytes of the GNU build id, else a
    /// hash of the file's size, modification time and inode.
    pub id: u32,
    /// The executable segment's address (`tstart`).
    pub tstart: u64,
    /// Its size (`tsize`).
    pub tsize: u64,
    /// Loaded segments.
    loads: Loads,
}

impl Image {
    /// Reads the ELF file `file` (where this process can open it) mapped
    /// as `path`; `None` when it is not a readable ELF file with `.text`.
    /// Only the headers and notes are read: images can be large.
    pub fn open(file: &Path, path: &[u8]) -> Option<Image> {
        let f = std::fs::File::open(file).ok()?;
        let meta = f.metadata().ok()?;
        let cache = object::ReadCache::new(f);
        let elf = object::File::parse(&cache).ok()?;
        let (tstart, tsize, loads) = layout(&elf)?;
        let id = match elf.build_id() {
            Ok(Some(b)) if b.len() >= 4 => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            _ => {
                use std::os::unix::fs::MetadataExt;
                let mut key = meta.len().to_le_bytes().to_vec();
                key.extend(meta.mtime().to_le_bytes());
                key.extend(meta.mtime_nsec().to_le_bytes());
                key.extend(meta.ino().to_le_bytes());
                (fnv1a(&key) & 0xffff_ffff) as u32
            }
        };
        Some(Image {
            path: path.to_vec(),
            id,
            tstart,
            tsize,
            loads,
        })
    }

    /// The offset from `tstart` of the instruction at `file_offset` in
    /// the file, if a loaded segment holds it at or after `tstart`.
    pub fn text_offset(&self, file_offset: u64) -> Option<u64> {
        let &(off, _, addr) = self
            .loads
            .iter()
            .find(|&&(off, len, _)| off <= file_offset && file_offset - off < len)?;
        (file_offset - off + addr).checked_sub(self.tstart)
    }

    /// The image's DCPI profile of `samples` (counts per offset from
    /// `tstart`), named `BASENAME_ID`.
    pub fn dcpi(
        &self,
        samples: BTreeMap<u64, u32>,
        facts: &DcpiFacts<'_>,
        machine: &Machine,
    ) -> (String, DcpiProfile) {
        let mut h = Header::default();
        h.set("image", format!("{:08x}", self.id).as_bytes());
        h.set("epoch", facts.epoch.as_bytes());
        h.set(
            "platform",
            format!("{} Linux", std::env::consts::ARCH).as_bytes(),
        );
        h.set("event", facts.event.as_bytes());
        h.set("period", facts.period.to_string().as_bytes());
        h.set("tsize", self.tsize.to_string().as_bytes());
        h.set("cpuspeed", machine.mhz.to_string().as_bytes());
        h.set("cpucount", machine.cpus.to_string().as_bytes());
        h.set("path", &self.path);
        h.set("tstart", format!("{:x}", self.tstart).as_bytes());
        let base = String::from_utf8_lossy(&self.path)
            .rsplit('/')
            .next()
            .filter(|b| !b.is_empty())
            .unwrap_or("image")
            .to_string();
        (
            format!("{base}_{:08x}", self.id),
            DcpiProfile { header: h, samples },
        )
    }
}

/// The machine facts of a DCPI header.
#[derive(Clone, Copy, Debug)]
pub struct Machine {
    /// Online CPUs.
    pub cpus: usize,
    /// Their clock in MHz (0 when unknown).
    pub mhz: u64,
}

impl Machine {
    /// This machine's.
    pub fn here() -> Machine {
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            mhz: cpu_mhz(),
        }
    }
}

/// The `gmon.out` of `program` (its path as mapped): a histogram of the
/// sampled instructions over its executable segment, two bytes a bin, at
/// `rate` samples per second when the event is a clock (else one per
/// sample, in `samples`), and arcs whose counts are sampled stacks, so
/// it is marked [`Gmon::sampled`] (its header says so to `tally gprof`).
pub fn gmon(profile: &Profile<u64>, program: &[u8], rate: Option<u32>) -> Gmon {
    let s = sampled(profile, program, true);
    let mut g = Gmon {
        sampled: true,
        ..Gmon::default()
    };
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

/// The bytes of `g` as a GNU `gmon.out` of this machine's layout.
pub fn gmon_bytes(g: &Gmon) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    g.write(&mut out, gmon::Layout::host())?;
    Ok(out)
}

/// The facts a DCPI header holds beyond the samples.
pub struct DcpiFacts<'a> {
    /// `YYYYMMDDHHMMSS`, UTC.
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
    let machine = Machine::here();
    for object in profile.names.objects.iter() {
        if !object.starts_with(b"/") {
            continue;
        }
        let s = sampled(profile, object, false);
        if s.leaves.is_empty() {
            continue;
        }
        let file = String::from_utf8_lossy(object);
        let Some(image) = Image::open(Path::new(file.as_ref()), object) else {
            continue;
        };
        let mut samples = BTreeMap::new();
        for (&a, &n) in &s.leaves {
            if let Some(off) = a.checked_sub(image.tstart) {
                let c: &mut u32 = samples.entry(off).or_default();
                *c = c.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            }
        }
        if samples.is_empty() {
            continue;
        }
        out.push(image.dcpi(samples, facts, &machine));
    }
    out
}

/// Writes `recording`'s `gmon.out` of its main program to `output`.
pub fn write_gmon(recording: &crate::Recording, output: &Path) -> Result<(), RecordError> {
    let counts = recording.sample_counts()?;
    let program = recording
        .program
        .as_ref()
        .ok_or_else(|| RecordError::System {
            what: format!("writing {}", output.display()),
            source: std::io::Error::other("the main program's path is unknown"),
        })?;
    let g = gmon(
        &counts,
        program.as_os_str().as_encoded_bytes(),
        recording.clock_hz(),
    );
    let failed = |source| RecordError::System {
        what: format!("writing {}", output.display()),
        source,
    };
    let bytes = gmon_bytes(&g).map_err(failed)?;
    std::fs::write(output, bytes).map_err(failed)
}

/// Writes `recording`'s DCPI profiles, one per image, into a new epoch
/// directory `db/YYYYMMDDHHMMSS` (its UTC start; `-2`, `-3`… after it when
/// a recording of the same second is there); returns the directory and
/// the number of profiles.
pub fn write_dcpi(
    recording: &crate::Recording,
    db: &Path,
) -> Result<(PathBuf, usize), RecordError> {
    let counts = recording.sample_counts()?;
    let mut epoch = epoch(recording.started);
    std::fs::create_dir_all(db).map_err(|source| RecordError::System {
        what: format!("creating {}", db.display()),
        source,
    })?;
    let stem = epoch.clone();
    let mut n = 1;
    let dir = loop {
        let dir = db.join(&epoch);
        match std::fs::create_dir(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                n += 1;
                epoch = format!("{stem}-{n}");
            }
            Err(source) => {
                return Err(RecordError::System {
                    what: format!("creating {}", dir.display()),
                    source,
                });
            }
        }
    };
    let facts = DcpiFacts {
        epoch: &epoch,
        event: recording.event.name,
        period: recording.period(),
    };
    let profiles = dcpi(&counts, &facts);
    for (name, p) in &profiles {
        let path = dir.join(name);
        tally_formats::dcpi::write_file(p, &path).map_err(|e| RecordError::System {
            what: format!("writing {}", path.display()),
            source: std::io::Error::other(e.to_string()),
        })?;
    }
    Ok((dir, profiles.len()))
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

/// A time as an epoch's name, `YYYYMMDDHHMMSS` (UTC): DCPI's epoch
/// names to the second, one form for program runs and `--system` epochs
/// alike, so that names sort by time.
pub fn epoch(t: std::time::SystemTime) -> String {
    let (year, month, day, secs) = utc(t);
    format!(
        "{year:04}{month:02}{day:02}{:02}{:02}{:02}",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// The UTC date of `t` (year, month and day from 1) and the seconds into
/// that day.
fn utc(t: std::time::SystemTime) -> (u64, u64, u64, u64) {
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
    (year, month as u64 + 1, left + 1, rem)
}

#[cfg(test)]
mod tests {
    #[test]
    fn epochs_are_utc_dates() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_700_000);
        // date -u -d @1795700000: Thu Nov 26 13:33:20 UTC 2026
        assert_eq!(super::epoch(t), "20261126133320");
        let leap = std::time::UNIX_EPOCH + std::time::Duration::from_secs(951_782_400);
        // 2000-02-29 00:00:00 UTC
        assert_eq!(super::epoch(leap), "20000229000000");
    }

    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn epochs_at_the_ends_of_days_and_years() {
        assert_eq!(epoch(UNIX_EPOCH), "19700101000000");
        // 2024-12-31 23:59:59 UTC, the last second of a leap year.
        let t = UNIX_EPOCH + Duration::from_secs(1_735_689_599);
        assert_eq!(epoch(t), "20241231235959");
        assert_eq!(epoch(t + Duration::from_secs(1)), "20250101000000");
        // 1900 was no leap year, 2100 will not be: 2100-03-01.
        let t = UNIX_EPOCH + Duration::from_secs(4_107_542_400);
        assert_eq!(epoch(t), "21000301000000");
        // Before 1970 (not a time a recording starts): the epoch's start.
        let before = UNIX_EPOCH - Duration::from_secs(10);
        assert_eq!(epoch(before), "19700101000000");
    }

    #[test]
    fn fnv1a_is_the_reference_hash() {
        // The FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    /// An image of `/opt/app/bin/prog` whose code segment (file offsets
    /// 0x1000..0x3000) is loaded at 0x401000, after a data-only segment.
    fn image() -> Image {
        Image {
            path: b"/opt/app/bin/prog".to_vec(),
            id: 0xdead_beef,
            tstart: 0x40_1000,
            tsize: 0x2000,
            loads: vec![(0, 0x1000, 0x40_0000), (0x1000, 0x2000, 0x40_1000)],
        }
    }

    #[test]
    fn file_offsets_become_offsets_from_the_text_start() {
        let i = image();
        assert_eq!(i.text_offset(0x1000), Some(0));
        assert_eq!(i.text_offset(0x1010), Some(0x10));
        assert_eq!(i.text_offset(0x2fff), Some(0x1fff));
        // Before the code segment, and past every segment.
        assert_eq!(i.text_offset(0x10), None);
        assert_eq!(i.text_offset(0x3000), None);
    }

    #[test]
    fn an_images_dcpi_profile_has_the_required_header() {
        let facts = DcpiFacts {
            epoch: "2611261333",
            event: "cycles",
            period: 65_536,
        };
        let machine = Machine { cpus: 4, mhz: 2400 };
        let samples = BTreeMap::from([(0x10, 3), (0x24, 1)]);
        let (name, p) = image().dcpi(samples.clone(), &facts, &machine);
        assert_eq!(name, "prog_deadbeef");
        assert_eq!(p.samples, samples);
        let h = &p.header;
        assert_eq!(h.image(), Some(0xdead_beef));
        assert_eq!(h.event(), Some("cycles"));
        assert_eq!(h.period(), Some(65_536));
        assert_eq!(h.path(), Some("/opt/app/bin/prog"));
        assert_eq!(h.tstart(), Some(0x40_1000));
        assert_eq!(h.get("tsize"), Some(&b"8192"[..]));
        assert_eq!(h.get("cpucount"), Some(&b"4"[..]));
        assert_eq!(h.get("cpuspeed"), Some(&b"2400"[..]));
        assert_eq!(h.get("epoch"), Some(&b"2611261333"[..]));
        for key in tally_formats::dcpi::REQUIRED {
            assert!(h.get(key).is_some(), "{key}");
        }
        // It encodes and reads back as it is.
        let bytes = tally_formats::dcpi::encode(&p).unwrap();
        let back = tally_formats::dcpi::parse(&bytes, Path::new("prog_deadbeef")).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn an_image_without_a_file_name_is_called_image() {
        let mut i = image();
        i.path = b"/".to_vec();
        let facts = DcpiFacts {
            epoch: "x",
            event: "cycles",
            period: 1,
        };
        let machine = Machine { cpus: 1, mhz: 0 };
        assert_eq!(
            i.dcpi(BTreeMap::new(), &facts, &machine).0,
            "image_deadbeef"
        );
    }

    #[test]
    fn images_are_read_from_elf_files_only() {
        let exe = std::env::current_exe().unwrap();
        let i = Image::open(&exe, b"/mapped/as/this").expect("the test program is ELF");
        assert_eq!(i.path, b"/mapped/as/this");
        assert!(i.tsize > 0);
        // Its `.text` lies in the executable segment.
        let data = std::fs::read(&exe).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let text = elf.section_by_name(".text").unwrap();
        assert!(i.tstart <= text.address() && text.address() < i.tstart + i.tsize);
        let (text_offset, _) = text.file_range().unwrap();
        assert_eq!(
            i.text_offset(text_offset + 0x10),
            Some(text.address() + 0x10 - i.tstart)
        );
        assert!(
            Image::open(
                Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml")),
                b"/x"
            )
            .is_none()
        );
        assert!(Image::open(Path::new("/nonexistent/prog"), b"/x").is_none());
    }

    /// The sample counts of a recording of `/nonexistent/prog`: the
    /// symbol reader cannot open it, so its frames' addresses are file
    /// offsets: leaves at 0x10 (twice) and 0x30, 0x10 called from 0x20.
    fn counts(per_sample: u64) -> Profile<u64> {
        use crate::records::{Record, Timed};
        let sample = |chain: &[u64]| Timed {
            time: 0,
            record: Record::Sample {
                pid: 10,
                tid: 10,
                chain: chain.to_vec(),
                kernel: false,
                period: per_sample,
                stack: None,
            },
        };
        let r = crate::Recording {
            records: vec![
                Timed {
                    time: 0,
                    record: Record::Mmap {
                        pid: 10,
                        start: 0x40_0000,
                        len: 0x1_0000,
                        offset: 0,
                        path: b"/nonexistent/prog".to_vec(),
                    },
                },
                sample(&[0x40_0010, 0x40_0020]),
                sample(&[0x40_0010, 0x40_0020]),
                sample(&[0x40_0030]),
            ],
            event: crate::EVENTS[0],
            rate: crate::Rate::Frequency(1000),
            lost: 0,
            ending: crate::Ending::Exited(0),
            interrupted: None,
            user_only: false,
            notes: Vec::new(),
            cmd: "prog".into(),
            pid: 10,
            call_graph: crate::CallGraph::FramePointers,
            program: Some(PathBuf::from("/nonexistent/prog")),
            started: UNIX_EPOCH,
            symbols: Default::default(),
            off_cpu_until: None,
        };
        r.profile().unwrap()
    }

    #[test]
    fn gmon_histograms_the_leaves_and_counts_stacks_through_arcs() {
        let g = gmon(&counts(1), b"/nonexistent/prog", Some(1000));
        assert!(g.sampled);
        let [h] = &g.histograms[..] else {
            panic!("{:?}", g.histograms);
        };
        // Two-byte bins from the lowest leaf to past the highest.
        assert_eq!((h.low_pc, h.high_pc), (0x10, 0x32));
        assert_eq!(h.bins.len(), 0x11);
        assert_eq!(h.bins[0], 2);
        assert_eq!(h.bins[0x10], 1);
        assert_eq!(h.bins.iter().sum::<u64>(), 3);
        assert_eq!(h.prof_rate, 1000);
        assert_eq!(
            g.arcs,
            vec![gmon::Arc {
                from_pc: 0x20,
                self_pc: 0x10,
                count: 2,
            }]
        );
        // Without a clock the histogram counts samples.
        let g = gmon(&counts(1), b"/nonexistent/prog", None);
        assert_eq!(g.histograms[0].dimension, "samples");
        assert_eq!(g.histograms[0].prof_rate, 1);
        // Another object's samples are not the program's.
        let other = gmon(&counts(1), b"/other/prog", Some(1000));
        assert!(other.histograms.is_empty() && other.arcs.is_empty());
    }

    #[test]
    fn gmon_bins_are_sixteen_bits() {
        let g = gmon(&counts(100_000), b"/nonexistent/prog", Some(1000));
        assert_eq!(g.histograms[0].bins[0], u64::from(u16::MAX));
        assert_eq!(g.arcs[0].count, 200_000);
    }

    #[test]
    fn gmon_bytes_read_back_as_gmon() {
        let g = gmon(&counts(1), b"/nonexistent/prog", Some(1000));
        let bytes = gmon_bytes(&g).unwrap();
        let back = Gmon::parse(&bytes, Path::new("gmon.out"), gmon::Layout::host()).unwrap();
        assert!(back.sampled);
        assert_eq!(back.arcs, g.arcs);
        assert_eq!(back.histograms[0].bins, g.histograms[0].bins);
        assert_eq!(back.histograms[0].low_pc, 0x10);
    }

    #[test]
    fn unreadable_images_have_no_dcpi_profile() {
        let facts = DcpiFacts {
            epoch: "2611261333",
            event: "cpu-clock",
            period: 1_000_000,
        };
        assert!(dcpi(&counts(1), &facts).is_empty());
    }
}
