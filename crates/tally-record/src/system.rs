//! `tally record --system`: DCPI's daemon mode. One event per online CPU
//! samples every process (user code: the kernel's image is not a file
//! tally can read), and each sample is placed at once in its image, as an
//! offset from the image's executable segment, so nothing but counts is
//! kept: memory grows with the live processes' mappings and the code that
//! was sampled, not with time or with the number of processes that come
//! and go (a process's mappings are dropped on its `exit` record, an
//! image once neither a live mapping nor a count of the epoch holds it:
//! at the end of each epoch, and whenever the images held have doubled).
//!
//! The processes' mappings are a [`tally_symbols::AddressSpace`], the
//! perf.data reader's type; it opens no file: an image's headers are read
//! here, at its first sample.
//!
//! Processes running before the recording starts are placed by their
//! `/proc/PID/maps`, read once the events are open (so that any later
//! mapping arrives as a record); others by their `mmap`, `fork` and
//! `exec` records. A sample of a process not seen yet (a lost record)
//! reads its `/proc/PID/maps` once.
//!
//! Each epoch (`--epoch`, else the whole recording) becomes a directory
//! `DIR/YYYYMMDDHHMMSS` (its UTC start) of one DCPI profile per image,
//! written under a hidden name and renamed whole when complete: a reader
//! sees a full epoch or none, also when a signal ends the recording.

use crate::outputs::{DcpiFacts, Image, Machine};
use crate::records::{Record, Timed};
use crate::{CallGraph, EVENTS, Event, Events, Rate, Reader, RecordError, sys};
use std::cell::OnceCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tally_symbols::AddressSpace;

/// How to record the whole system.
#[derive(Clone, Debug)]
pub struct SystemOptions {
    /// The event.
    pub event: Event,
    /// The rate, per CPU.
    pub rate: Rate,
    /// Data pages of each CPU's ring buffer (a power of two; 0: 64).
    pub pages: usize,
    /// The profile database: epochs are directories in it.
    pub dir: PathBuf,
    /// Stop after this long (else on SIGINT, SIGTERM or SIGHUP).
    pub duration: Option<Duration>,
    /// Start a new epoch this often (else one epoch for the recording).
    pub epoch: Option<Duration>,
}

/// One epoch, written.
#[derive(Clone, Debug)]
pub struct Epoch {
    /// Its directory (`None`: no samples, nothing written).
    pub dir: Option<PathBuf>,
    /// Profiles written (images with samples).
    pub images: usize,
    /// Samples taken.
    pub samples: u64,
    /// Samples in no readable image (anonymous or JIT code, deleted
    /// files, `[vdso]`), not written.
    pub unattributed: u64,
    /// Samples the kernel lost (full buffers).
    pub lost: u64,
}

/// How the recording ended.
#[derive(Debug)]
pub struct SystemRecording {
    /// Epochs ended (written, or empty).
    pub epochs: usize,
    /// The event sampled (after any fallback).
    pub event: Event,
    /// The signal that ended the recording, if one did.
    pub interrupted: Option<i32>,
    /// Things the user should know (a fallback).
    pub notes: Vec<String>,
}

/// A file (an image of the space whose path is absolute), read at its
/// first sample.
struct Mapped {
    /// Where this process can read it (through the root of the process
    /// that mapped it first, for processes in other mount namespaces).
    file: PathBuf,
    image: OnceCell<Option<Image>>,
}

impl Mapped {
    /// The image of the file mapped as `path`.
    fn image(&self, path: &[u8]) -> Option<&Image> {
        self.image
            .get_or_init(|| {
                Image::open(&self.file, path).or_else(|| {
                    let p = std::str::from_utf8(path).ok()?;
                    Image::open(Path::new(p), path)
                })
            })
            .as_ref()
    }
}

/// Images the space may hold before the first release between epochs.
const SWEPT_AT_LEAST: usize = 256;

/// Where every live process's code is, and the epoch's counts.
struct Tracker {
    /// The live processes' mappings (a process is known once its
    /// mappings are, from records or from `/proc`, so that a sample does
    /// not read `/proc` again).
    space: AddressSpace,
    /// The files of the space's images, by image index (`None`: not a
    /// file, `[vdso]` say, or a released image).
    files: Vec<Option<Mapped>>,
    /// The epoch's samples per image (which the space keeps while they
    /// are counted) and offset from its `tstart`.
    counts: HashMap<usize, BTreeMap<u64, u64>>,
    /// The space's images after the last release of the unmapped ones.
    swept: usize,
    samples: u64,
    unattributed: u64,
    lost: u64,
    periods: u64,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            // Images are read here, at their first sample, not by the space.
            space: AddressSpace::with_opener(Arc::new(|_| None)),
            files: Vec::new(),
            counts: HashMap::new(),
            swept: 0,
            samples: 0,
            unattributed: 0,
            lost: 0,
            periods: 0,
        }
    }
}

impl Tracker {
    fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        // A new mapping replaces whatever it overlaps.
        let image = self.space.add_mmap(pid, start, len, offset, path);
        if !path.starts_with(b"/") {
            return;
        }
        if self.files.len() <= image {
            self.files.resize_with(image + 1, || None);
        }
        self.files[image].get_or_insert_with(|| {
            let mut file = format!("/proc/{pid}/root").into_bytes();
            file.extend_from_slice(path);
            Mapped {
                file: PathBuf::from(String::from_utf8_lossy(&file).into_owned()),
                image: OnceCell::new(),
            }
        });
    }

    /// Reads the executable mappings of `pid` from `/proc`.
    fn read_proc(&mut self, pid: i32) {
        self.space.add_process(pid);
        let mut records = Vec::new();
        crate::synthesize(pid, &mut records);
        for t in records {
            if let Record::Mmap {
                pid,
                start,
                len,
                offset,
                path,
            } = t.record
            {
                self.mmap(pid, start, len, offset, &path);
            }
        }
    }

    /// Reads every process's mappings from `/proc`.
    fn read_all_proc(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|n| n.parse().ok()) {
                self.read_proc(pid);
            }
        }
    }

    fn feed(&mut self, records: &[Timed]) {
        for t in records {
            match &t.record {
                Record::Sample {
                    pid, chain, period, ..
                } => {
                    if let Some(&ip) = chain.first() {
                        self.sample(*pid, ip, *period);
                    }
                }
                Record::Mmap {
                    pid,
                    start,
                    len,
                    offset,
                    path,
                } => {
                    self.mmap(*pid, *start, *len, *offset, path);
                }
                Record::Fork { pid, ppid, .. } if pid != ppid => {
                    self.space.fork(*pid, *ppid);
                }
                Record::Comm {
                    pid, exec: true, ..
                } => {
                    // The new program's mappings follow as records.
                    self.space.exec(*pid);
                }
                Record::Exit { pid, tid } if pid == tid => {
                    self.space.exit(*pid);
                }
                Record::Lost(n) => self.lost += n,
                _ => {}
            }
        }
        // Images are released once they are twice as many as after the
        // last release, not only at the end of an epoch (which may be the
        // whole recording): memory follows the live processes, and the
        // time to find the unmapped images is paid by the new ones.
        if self.space.live_images() > 2 * self.swept.max(SWEPT_AT_LEAST) {
            self.release();
        }
    }

    /// Releases the images that no live process maps and no count of
    /// the epoch holds.
    fn release(&mut self) {
        let counts = &self.counts;
        for i in self.space.release_unmapped(|i| counts.contains_key(&i)) {
            if let Some(m) = self.files.get_mut(i) {
                *m = None;
            }
        }
        self.swept = self.space.live_images();
    }

    fn sample(&mut self, pid: i32, ip: u64, period: u64) {
        self.samples += 1;
        self.periods = self.periods.saturating_add(period);
        if !self.space.has_process(pid) {
            self.read_proc(pid);
        }
        let place = self.space.lookup(pid, ip).and_then(|l| {
            let mapped = self.files.get(l.image)?.as_ref()?;
            let off = mapped
                .image(&self.space.image(l.image).path)?
                .text_offset(l.offset)?;
            Some((l.image, off))
        });
        let Some((image, off)) = place else {
            self.unattributed += 1;
            return;
        };
        *self
            .counts
            .entry(image)
            .or_default()
            .entry(off)
            .or_default() += 1;
    }

    /// Writes the epoch that started at `started` into `db` and starts
    /// a new one.
    fn end_epoch(
        &mut self,
        db: &Path,
        started: SystemTime,
        event: Event,
        rate: Rate,
    ) -> Result<Epoch, RecordError> {
        let name = crate::outputs::epoch(started);
        let period = match rate {
            Rate::Period(p) => p,
            Rate::Frequency(hz) if event.kind == 1 && event.config <= 1 => {
                1_000_000_000 / hz.max(1)
            }
            Rate::Frequency(_) => self.periods / self.samples.max(1),
        };
        let facts = DcpiFacts {
            epoch: &name,
            event: event.name,
            period,
        };
        let machine = Machine::here();
        // Files of one name (a path mapped again after all its mappings
        // had gone) are summed.
        let mut profiles: BTreeMap<String, tally_formats::dcpi::DcpiProfile> = BTreeMap::new();
        for (i, counts) in self.counts.drain() {
            let path = &self.space.image(i).path;
            let Some(image) = self.files.get(i).and_then(|m| m.as_ref()?.image(path)) else {
                continue;
            };
            let samples = counts
                .into_iter()
                .map(|(off, n)| (off, u32::try_from(n).unwrap_or(u32::MAX)))
                .collect();
            let (file, p) = image.dcpi(samples, &facts, &machine);
            match profiles.get_mut(&file) {
                Some(q) => {
                    for (off, n) in p.samples {
                        let c = q.samples.entry(off).or_default();
                        *c = c.saturating_add(n);
                    }
                }
                None => {
                    profiles.insert(file, p);
                }
            }
        }
        let epoch = Epoch {
            dir: if profiles.is_empty() {
                None
            } else {
                Some(write_epoch(db, &name, &profiles)?)
            },
            images: profiles.len(),
            samples: self.samples,
            unattributed: self.unattributed,
            lost: self.lost,
        };
        (self.samples, self.unattributed, self.lost, self.periods) = (0, 0, 0, 0);
        // Images no live process maps are done with: their samples are
        // written.
        self.release();
        Ok(epoch)
    }
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> RecordError {
    move |source| RecordError::System { what, source }
}

/// Writes `profiles` in a hidden directory of `db`, then renames it
/// `NAME` (`NAME-2`, … when an epoch of that second exists already).
fn write_epoch(
    db: &Path,
    name: &str,
    profiles: &BTreeMap<String, tally_formats::dcpi::DcpiProfile>,
) -> Result<PathBuf, RecordError> {
    let partial = db.join(format!(".{name}.partial"));
    if partial.exists() {
        std::fs::remove_dir_all(&partial)
            .map_err(io_error(format!("removing {}", partial.display())))?;
    }
    std::fs::create_dir(&partial).map_err(io_error(format!("creating {}", partial.display())))?;
    for (file, p) in profiles {
        let path = partial.join(file);
        let bytes = tally_formats::dcpi::encode(p).map_err(|e| RecordError::System {
            what: format!("encoding {}", path.display()),
            source: std::io::Error::other(e.to_string()),
        })?;
        std::fs::write(&path, bytes).map_err(io_error(format!("writing {}", path.display())))?;
    }
    let mut n = 1;
    loop {
        let dir = if n == 1 {
            db.join(name)
        } else {
            db.join(format!("{name}-{n}"))
        };
        if !dir.exists() {
            std::fs::rename(&partial, &dir).map_err(io_error(format!(
                "renaming {} to {}",
                partial.display(),
                dir.display()
            )))?;
            return Ok(dir);
        }
        n += 1;
    }
}

/// The attribute of a CPU-wide event: user code only, the sampled
/// instruction without a call chain (DCPI's profiles are flat), and the
/// records that place samples in images.
fn attr(o: &SystemOptions, event: Event) -> sys::Attr {
    use sys::flag::*;
    let mut flags = MMAP
        | MMAP2
        | COMM
        | COMM_EXEC
        | TASK
        | SAMPLE_ID_ALL
        | EXCLUDE_HV
        | EXCLUDE_KERNEL
        | EXCLUDE_CALLCHAIN_KERNEL
        | EXCLUDE_CALLCHAIN_USER;
    let rate = match o.rate {
        Rate::Frequency(hz) => {
            flags |= FREQ;
            hz
        }
        Rate::Period(p) => p,
    };
    sys::Attr {
        kind: event.kind,
        config: event.config,
        sample_period_or_freq: rate,
        sample_type: crate::SAMPLE_TYPE,
        flags,
        wakeup: 64,
        ..Default::default()
    }
}

/// Opens the event on every CPU for every process, falling back from a
/// hardware event the machine lacks to `cpu-clock`.
fn open(o: &SystemOptions, notes: &mut Vec<String>) -> Result<(Events, Event), RecordError> {
    let cpus = sys::online_cpus();
    let pages = if o.pages == 0 { 64 } else { o.pages };
    let mut event = o.event;
    loop {
        let a = attr(o, event);
        let mut ev = Events {
            fds: Vec::new(),
            rings: Vec::new(),
            switch_rings: Vec::new(),
        };
        let opened = cpus.iter().try_for_each(|&cpu| {
            let fd = sys::perf_event_open(&a, -1, cpu)?;
            ev.rings.push(sys::Ring::map(&fd, pages)?);
            ev.fds.push(fd);
            Ok::<_, std::io::Error>(())
        });
        let Err(e) = opened else {
            return Ok((ev, event));
        };
        let code = e.raw_os_error();
        if event.is_hardware()
            && matches!(
                code,
                Some(libc::ENOENT) | Some(libc::EOPNOTSUPP) | Some(libc::ENODEV)
            )
        {
            notes.push(format!(
                "the hardware event {} is not supported on this machine: sampling cpu-clock instead",
                event.name
            ));
            event = EVENTS[0];
            continue;
        }
        if matches!(code, Some(libc::EACCES) | Some(libc::EPERM)) {
            return Err(RecordError::SystemNotPermitted {
                source: e,
                paranoid: crate::paranoid(),
            });
        }
        return Err(RecordError::System {
            what: format!("perf_event_open of {} on every CPU", event.name),
            source: e,
        });
    }
}

/// Records every process until the duration passes or tally gets
/// SIGINT, SIGTERM or SIGHUP, writing an epoch directory of DCPI profiles
/// at the end of each epoch (and of the recording); `ended` hears of each.
pub fn record_system(
    o: &SystemOptions,
    mut ended: impl FnMut(&Epoch),
) -> Result<SystemRecording, RecordError> {
    let mut notes = Vec::new();
    let (mut events, event) = open(o, &mut notes)?;
    std::fs::create_dir_all(&o.dir).map_err(io_error(format!("creating {}", o.dir.display())))?;
    let mut tracker = Tracker::default();
    tracker.read_all_proc();
    // Signals end the recording; the last epoch is still written.
    let forwarding = tally_process::forward_to(0);
    let start = Instant::now();
    let mut epoch_start = (start, SystemTime::now());
    let mut reader = Reader::new(CallGraph::FramePointers);
    let mut batch = Vec::new();
    let mut epochs = 0;
    loop {
        sys::poll(&events.fds, 100);
        let stop =
            forwarding.received().is_some() || o.duration.is_some_and(|d| start.elapsed() >= d);
        if stop {
            for fd in &events.fds {
                let _ = sys::set_enabled(fd, false);
            }
        }
        batch.clear();
        reader.drain(&mut events, &mut batch);
        // Stable: records of one CPU keep their order at equal times.
        batch.sort_by_key(|t| t.time);
        tracker.feed(&batch);
        let over = o
            .epoch
            .is_some_and(|e| epoch_start.0.elapsed() >= e.max(Duration::from_millis(1)));
        if stop || over {
            let e = tracker.end_epoch(&o.dir, epoch_start.1, event, o.rate)?;
            epochs += 1;
            ended(&e);
            if stop {
                break;
            }
            epoch_start = (Instant::now(), SystemTime::now());
        }
    }
    let interrupted = forwarding.received();
    drop(forwarding);
    Ok(SystemRecording {
        epochs,
        event,
        interrupted,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};

    /// Process ids no process has (above the kernel's `pid_max`), so
    /// that nothing is read from `/proc` for them.
    const PARENT: i32 = 2_000_000_001;
    const CHILD: i32 = 2_000_000_002;
    /// Where the test program is mapped in them.
    const BASE: u64 = 0x1000_0000;

    /// The test program (an ELF file with code): its path, its image,
    /// and the file offset and address of a byte of its `.text`.
    fn program() -> (Vec<u8>, Image, u64, u64) {
        let exe = std::fs::canonicalize(std::env::current_exe().unwrap()).unwrap();
        let path = exe.as_os_str().as_encoded_bytes().to_vec();
        let image = Image::open(&exe, &path).expect("an ELF image");
        let data = std::fs::read(&exe).unwrap();
        let elf = object::File::parse(&*data).unwrap();
        let text = elf.section_by_name(".text").unwrap();
        let (offset, _) = text.file_range().unwrap();
        (path, image, offset + 0x10, text.address() + 0x10)
    }

    fn mmap(pid: i32, path: &[u8]) -> Timed {
        Timed {
            time: 0,
            record: Record::Mmap {
                pid,
                start: BASE,
                len: 0x1000_0000,
                offset: 0,
                path: path.to_vec(),
            },
        }
    }

    fn sample(pid: i32, ip: u64) -> Timed {
        Timed {
            time: 0,
            record: Record::Sample {
                pid,
                tid: pid,
                chain: vec![ip],
                kernel: false,
                period: 1000,
                stack: None,
            },
        }
    }

    fn at(time: u64, record: Record) -> Timed {
        Timed { time, record }
    }

    #[test]
    fn samples_are_counted_at_offsets_in_their_images() {
        let (path, image, file_offset, address) = program();
        let ip = BASE + file_offset;
        let mut t = Tracker::default();
        t.feed(&[
            mmap(PARENT, &path),
            sample(PARENT, ip),
            sample(PARENT, ip),
            // In no mapping.
            sample(PARENT, 0x10),
            at(0, Record::Lost(5)),
        ]);
        assert_eq!((t.samples, t.unattributed, t.lost), (3, 1, 5));

        let db = tempfile::tempdir().unwrap();
        let started = std::time::UNIX_EPOCH + Duration::from_secs(1_795_700_000);
        let e = t
            .end_epoch(db.path(), started, EVENTS[0], Rate::Frequency(1000))
            .unwrap();
        let dir = db.path().join("20261126133320");
        assert_eq!(e.dir.as_deref(), Some(dir.as_path()));
        assert_eq!((e.images, e.samples, e.unattributed, e.lost), (1, 3, 1, 5));
        let base = path.rsplit(|&b| b == b'/').next().unwrap();
        let name = format!("{}_{:08x}", String::from_utf8_lossy(base), image.id);
        let file = dir.join(&name);
        let p = tally_formats::dcpi::parse(&std::fs::read(&file).unwrap(), &file).unwrap();
        assert_eq!(
            p.samples.into_iter().collect::<Vec<_>>(),
            vec![(address - image.tstart, 2)]
        );
        assert_eq!(p.header.period(), Some(1_000_000));
        assert_eq!(p.header.tstart(), Some(image.tstart));
        // The next epoch starts from nothing.
        assert_eq!((t.samples, t.unattributed, t.lost), (0, 0, 0));
        let e = t
            .end_epoch(db.path(), started, EVENTS[0], Rate::Frequency(1000))
            .unwrap();
        assert_eq!((e.dir, e.images, e.samples), (None, 0, 0));
    }

    #[test]
    fn a_fork_shares_its_parents_code_until_it_execs_or_exits() {
        let (path, image, file_offset, address) = program();
        let ip = BASE + file_offset;
        let mut t = Tracker::default();
        t.feed(&[
            mmap(PARENT, &path),
            at(
                1,
                Record::Fork {
                    pid: CHILD,
                    ppid: PARENT,
                    tid: CHILD,
                },
            ),
            sample(CHILD, ip),
            at(
                2,
                Record::Exit {
                    pid: CHILD,
                    tid: CHILD,
                },
            ),
            sample(CHILD, ip),
            at(
                3,
                Record::Comm {
                    pid: PARENT,
                    tid: PARENT,
                    name: b"other".to_vec(),
                    exec: true,
                },
            ),
            sample(PARENT, ip),
        ]);
        assert_eq!((t.samples, t.unattributed), (3, 2));
        let [(mapped, counts)] = t.counts.iter().collect::<Vec<_>>()[..] else {
            panic!("one image");
        };
        assert_eq!(t.space.image(*mapped).path, path);
        assert_eq!(
            counts.iter().map(|(&o, &n)| (o, n)).collect::<Vec<_>>(),
            vec![(address - image.tstart, 1)]
        );
    }

    #[test]
    fn pseudo_files_are_not_images() {
        let mut t = Tracker::default();
        t.feed(&[mmap(PARENT, b"[vdso]"), sample(PARENT, BASE + 0x10)]);
        assert_eq!((t.samples, t.unattributed), (1, 1));
        assert!(t.files.iter().all(Option::is_none));
    }

    #[test]
    fn a_later_mapping_replaces_what_it_overlaps() {
        let mut t = Tracker::default();
        t.mmap(PARENT, 0x1000, 0x3000, 0, b"/a");
        t.mmap(PARENT, 0x5000, 0x1000, 0, b"/b");
        t.mmap(PARENT, 0x2000, 0x1000, 0x40, b"/c");
        let maps: Vec<_> = t.space.mappings(PARENT).collect();
        assert_eq!(
            maps.iter().map(|m| m.start).collect::<Vec<_>>(),
            vec![0x2000, 0x5000]
        );
        assert_eq!(maps[0].end, 0x3000);
        assert_eq!(maps[0].offset, 0x40);
        // One image per path, shared while a mapping holds it.
        t.mmap(CHILD, 0x9000, 0x1000, 0, b"/b");
        let b1 = t.space.mapping(PARENT, 0x5000).unwrap().image;
        let b2 = t.space.mapping(CHILD, 0x9000).unwrap().image;
        assert_eq!(b1, b2);
        assert_eq!(
            t.files[b1].as_ref().unwrap().file,
            PathBuf::from(format!("/proc/{PARENT}/root/b"))
        );
    }

    #[test]
    fn a_counted_image_is_kept_until_its_epoch_is_written() {
        let (path, image, file_offset, address) = program();
        let ip = BASE + file_offset;
        let mut t = Tracker::default();
        t.feed(&[
            mmap(PARENT, &path),
            mmap(CHILD, b"/never/read"),
            sample(PARENT, ip),
            at(
                1,
                Record::Exit {
                    pid: PARENT,
                    tid: PARENT,
                },
            ),
        ]);
        let db = tempfile::tempdir().unwrap();
        let started = std::time::UNIX_EPOCH + Duration::from_secs(1_795_700_000);
        // The sample of the ended process is written.
        let e = t
            .end_epoch(db.path(), started, EVENTS[0], Rate::Frequency(1000))
            .unwrap();
        assert_eq!((e.images, e.samples), (1, 1));
        let base = path.rsplit(|&b| b == b'/').next().unwrap();
        let name = format!("{}_{:08x}", String::from_utf8_lossy(base), image.id);
        let file = e.dir.unwrap().join(name);
        let p = tally_formats::dcpi::parse(&std::fs::read(&file).unwrap(), &file).unwrap();
        assert_eq!(p.samples.values().copied().collect::<Vec<_>>(), vec![1]);
        assert_eq!(p.samples.keys().next(), Some(&(address - image.tstart)));
        // Then its image is released; the live process's is not.
        let live: Vec<usize> = t
            .files
            .iter()
            .enumerate()
            .filter_map(|(i, m)| m.as_ref().map(|_| i))
            .collect();
        let [i] = live[..] else {
            panic!("one file left: {live:?}");
        };
        assert_eq!(t.space.image(i).path, b"/never/read");
        // A new process of the path maps it anew, read through its root.
        t.feed(&[mmap(PARENT + 2, &path), sample(PARENT + 2, ip)]);
        let j = t.space.mapping(PARENT + 2, BASE).unwrap().image;
        assert_eq!(
            t.files[j].as_ref().unwrap().file,
            PathBuf::from(format!(
                "/proc/{}/root{}",
                PARENT + 2,
                String::from_utf8_lossy(&path)
            ))
        );
        assert_eq!(t.counts[&j].values().sum::<u64>(), 1);
    }

    #[test]
    fn unmapped_images_are_released_before_the_epoch_ends_unless_counted() {
        let (path, _, file_offset, _) = program();
        let mut t = Tracker::default();
        let mut records = vec![mmap(PARENT, &path), sample(PARENT, BASE + file_offset)];
        let n = 2 * SWEPT_AT_LEAST as u64;
        for k in 0..n {
            records.push(at(
                1,
                Record::Mmap {
                    pid: PARENT,
                    start: 0x1000 * (k + 1),
                    len: 0x1000,
                    offset: 0,
                    path: format!("/lib/{k}.so").into_bytes(),
                },
            ));
        }
        records.push(at(
            2,
            Record::Exit {
                pid: PARENT,
                tid: PARENT,
            },
        ));
        t.feed(&records);
        // Only the sampled image is left.
        assert_eq!(t.space.live_images(), 1);
        let [(&i, _)] = t.counts.iter().collect::<Vec<_>>()[..] else {
            panic!("one image");
        };
        assert_eq!(t.space.image(i).path, path);
        assert_eq!(t.files.iter().filter(|m| m.is_some()).count(), 1);
        assert_eq!(t.swept, 1);
        // Released slots are taken by new images.
        t.feed(&[mmap(CHILD, b"/new")]);
        assert!(t.space.mapping(CHILD, BASE).unwrap().image <= n as usize);
        assert_eq!(t.space.images().len() as u64, n + 1);
    }

    #[test]
    fn epochs_of_one_second_get_their_own_directories() {
        let (path, image, _, _) = program();
        let facts = DcpiFacts {
            epoch: "20260101000000",
            event: "cpu-clock",
            period: 1_000_000,
        };
        let machine = Machine { cpus: 1, mhz: 0 };
        let profiles = BTreeMap::from([image.dcpi(BTreeMap::from([(0, 1)]), &facts, &machine)]);
        let db = tempfile::tempdir().unwrap();
        // A partial epoch left by a crash is replaced.
        let partial = db.path().join(".20260101000000.partial");
        std::fs::create_dir(&partial).unwrap();
        std::fs::write(partial.join("stale"), b"x").unwrap();
        let first = write_epoch(db.path(), "20260101000000", &profiles).unwrap();
        let second = write_epoch(db.path(), "20260101000000", &profiles).unwrap();
        assert_eq!(first, db.path().join("20260101000000"));
        assert_eq!(second, db.path().join("20260101000000-2"));
        assert!(!partial.exists());
        let names = |d: &Path| {
            let mut v: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let base = String::from_utf8_lossy(path.rsplit(|&b| b == b'/').next().unwrap());
        let want = vec![format!("{base}_{:08x}", image.id)];
        assert_eq!(names(&first), want);
        assert_eq!(names(&second), want);
    }

    #[test]
    fn the_system_event_samples_user_code_of_every_process() {
        let o = SystemOptions {
            event: EVENTS[4],
            rate: Rate::Period(100_000),
            pages: 0,
            dir: PathBuf::from("db"),
            duration: None,
            epoch: None,
        };
        let a = attr(&o, o.event);
        assert_eq!((a.kind, a.config), (0, 0));
        assert_eq!(a.sample_period_or_freq, 100_000);
        assert_eq!(a.sample_type, crate::SAMPLE_TYPE);
        assert_ne!(a.flags & sys::flag::EXCLUDE_KERNEL, 0);
        assert_ne!(a.flags & sys::flag::EXCLUDE_CALLCHAIN_USER, 0);
        assert_eq!(a.flags & sys::flag::FREQ, 0);
        // CPU-wide events: nothing to inherit, nothing held for an exec.
        assert_eq!(a.flags & (sys::flag::INHERIT | sys::flag::DISABLED), 0);
        let f = attr(
            &SystemOptions {
                rate: Rate::Frequency(99),
                ..o
            },
            EVENTS[0],
        );
        assert_ne!(f.flags & sys::flag::FREQ, 0);
        assert_eq!(f.sample_period_or_freq, 99);
    }
}
