//! The address spaces of processes: which object file (an image) holds a
//! run-time address, and at which of the file's own addresses. One type
//! for every reader of mappings: perf's `mmap` records (the perf.data
//! reader and `tally record`), `/proc/PID/maps` lines, and an image's
//! load bias (a run-time address minus the file's own, as Valgrind's
//! `svma`/`avma` pairs give it).
//!
//! Each image is opened once (by the space's opener, [`Opener`]) and kept
//! for as long as the space lives, shared by every process that maps it.
//! A process's mappings are kept by start address; a new mapping replaces
//! whatever it overlaps, as the kernel does (or, in a space made
//! [`AddressSpace::layered`], stays under it: `tally sim`'s mappings, which
//! QEMU's plugin reports piecemeal). A forked process starts with a copy
//! of its parent's mappings ([`AddressSpace::fork`]); one that `exec`s
//! starts with none ([`AddressSpace::exec`]).
//!
//! `tally record --system` keeps its own mappings: its images are read
//! lazily, at their first sample, and dropped as soon as no live mapping
//! holds them, which this type, whose images live as long as it does,
//! does not do.

use crate::ObjectFile;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// Opens the object file at a mapping's path (`None`: it cannot be read).
pub type Opener = Arc<dyn Fn(&[u8]) -> Option<Arc<ObjectFile>> + Send + Sync>;

/// An object file mapped by some process.
#[derive(Clone)]
pub struct Image {
    /// The path as mapped (not always a file: `[vdso]`, `//anon`).
    pub path: Vec<u8>,
    /// The parsed file; `None` if it could not be read.
    pub file: Option<Arc<ObjectFile>>,
}

impl Image {
    /// The file address of file offset `offset`: in the code range whose
    /// part of the file holds it.
    pub fn address_of_offset(&self, offset: u64) -> Option<u64> {
        self.file.as_ref()?.code_ranges().find_map(|(s, e, off)| {
            (off <= offset && offset - off < e - s).then(|| offset - off + s)
        })
    }

    /// The file offset of file address `address`, in the code range that
    /// holds it.
    pub fn offset_of_address(&self, address: u64) -> Option<u64> {
        self.file
            .as_ref()?
            .code_ranges()
            .find_map(|(s, e, off)| (s <= address && address < e).then(|| address - s + off))
    }
}

/// How a mapping's run-time addresses become file addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Through the file offset, in the code range whose part of the file
    /// holds it (perf's `mmap` records, [`AddressSpace::add_mmap`]).
    Offset,
    /// Run-time address minus this bias ([`AddressSpace::add_biased`],
    /// and `/proc/PID/maps`-style mappings that hold the start of some
    /// code range, [`AddressSpace::add_mapping`]).
    Bias(u64),
    /// Not at all: a `/proc/PID/maps`-style mapping that holds no code
    /// of its file, or anonymous memory.
    Nothing,
}

/// A part of a process's address space mapped from an image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// The first run-time address.
    pub start: u64,
    /// Past the last run-time address.
    pub end: u64,
    /// The file offset mapped at `start` (for [`AddressSpace::add_biased`],
    /// the offset of the file's first code).
    pub offset: u64,
    /// How its addresses become file addresses.
    pub placement: Placement,
    /// The image, an index in [`AddressSpace::images`].
    pub image: usize,
}

impl Mapping {
    /// The bias, if the mapping is placed by one.
    pub fn bias(&self) -> Option<u64> {
        match self.placement {
            Placement::Bias(b) => Some(b),
            _ => None,
        }
    }
}

/// Where a run-time address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The image, an index in [`AddressSpace::images`].
    pub image: usize,
    /// The run-time address where its mapping starts.
    pub start: u64,
    /// The offset in the file.
    pub offset: u64,
    /// The file's own address (`None`: not in the file's code, or the
    /// file cannot be read).
    pub address: Option<u64>,
}

/// The images and mappings of processes, by process id.
#[derive(Clone)]
pub struct AddressSpace {
    images: Vec<Image>,
    by_path: HashMap<Vec<u8>, usize>,
    /// Each process's mappings by start (a new one replacing those it
    /// overlaps).
    processes: HashMap<i32, BTreeMap<u64, Mapping>>,
    /// With [`AddressSpace::layered`]: each process's mappings in the
    /// order added, the newest holding an address the one that counts.
    layers: Option<HashMap<i32, Vec<Mapping>>>,
    open: Opener,
}

impl Default for AddressSpace {
    fn default() -> Self {
        AddressSpace::new()
    }
}

impl fmt::Debug for AddressSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressSpace")
            .field("images", &self.images.len())
            .field("processes", &self.processes.len())
            .finish_non_exhaustive()
    }
}

/// The default opener: an absolute path to a readable ELF file.
pub fn open_object(path: &[u8]) -> Option<Arc<ObjectFile>> {
    std::str::from_utf8(path)
        .ok()
        .filter(|p| p.starts_with('/'))
        .and_then(|p| ObjectFile::open(Path::new(p)).ok())
        .map(Arc::new)
}

impl AddressSpace {
    /// No process, no image; images are opened by [`open_object`].
    pub fn new() -> Self {
        AddressSpace::with_opener(Arc::new(open_object))
    }

    /// No process, no image; images are opened by `open` (a cache shared
    /// with threads that open files ahead of time, say).
    pub fn with_opener(open: Opener) -> Self {
        AddressSpace {
            images: Vec::new(),
            by_path: HashMap::default(),
            processes: HashMap::default(),
            layers: None,
            open,
        }
    }

    /// The same space where a mapping does not replace those it overlaps:
    /// each stays, and an address is in the newest mapping that holds it
    /// (for mappings reported piecemeal, as QEMU's plugin reports them
    /// while code is translated, and looked up after the run).
    pub fn layered(mut self) -> Self {
        self.layers.get_or_insert_with(HashMap::default);
        self
    }

    /// Every image opened, in the order they were first mapped.
    pub fn images(&self) -> &[Image] {
        &self.images
    }

    /// Image `i`.
    pub fn image(&self, i: usize) -> &Image {
        &self.images[i]
    }

    /// The image of `path`, opened now by the space's opener if it is new.
    pub fn image_of(&mut self, path: &[u8]) -> usize {
        let open = Arc::clone(&self.open);
        self.image_with(path, || open(path))
    }

    /// The image of `path`, opened now by `open` if it is new.
    pub fn image_with(
        &mut self,
        path: &[u8],
        open: impl FnOnce() -> Option<Arc<ObjectFile>>,
    ) -> usize {
        if let Some(&i) = self.by_path.get(path) {
            return i;
        }
        let file = open();
        self.images.push(Image {
            path: path.to_vec(),
            file,
        });
        self.by_path.insert(path.to_vec(), self.images.len() - 1);
        self.images.len() - 1
    }

    /// Adds `mapping` to process `pid`, replacing whatever it overlaps
    /// (unless the space is [`AddressSpace::layered`]).
    pub fn insert(&mut self, pid: i32, mapping: Mapping) {
        if let Some(layers) = &mut self.layers {
            layers.entry(pid).or_default().push(mapping);
            return;
        }
        let maps = self.processes.entry(pid).or_default();
        let overlapping: Vec<u64> = maps
            .range(..mapping.end)
            .filter(|(_, m)| m.end > mapping.start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            maps.remove(&s);
        }
        maps.insert(mapping.start, mapping);
    }

    /// `path` mapped at `start..start + len` of process `pid` from file
    /// offset `pgoff`, as perf's `mmap` records give it; returns its image.
    pub fn add_mmap(&mut self, pid: i32, start: u64, len: u64, pgoff: u64, path: &[u8]) -> usize {
        let image = self.image_of(path);
        self.insert(
            pid,
            Mapping {
                start,
                end: start.saturating_add(len),
                offset: pgoff,
                placement: Placement::Offset,
                image,
            },
        );
        image
    }

    /// Image `image` mapped at `[start, end)` of process `pid` from file
    /// `offset`, as `/proc/PID/maps` shows it: placed by the bias of the
    /// first code range whose start lies in the mapped part of the file
    /// (by nothing if none does).
    pub fn map_range(&mut self, pid: i32, start: u64, end: u64, offset: u64, image: usize) {
        let bias = self.images[image].file.as_ref().and_then(|f| {
            f.code_ranges()
                .find(|&(_, _, off)| offset <= off && off - offset < end.wrapping_sub(start))
                .map(|(s, _, off)| start.wrapping_add(off - offset).wrapping_sub(s))
        });
        self.insert(
            pid,
            Mapping {
                start,
                end,
                offset,
                placement: bias.map_or(Placement::Nothing, Placement::Bias),
                image,
            },
        );
    }

    /// `path` mapped at `[start, end)` of process `pid` from file
    /// `offset`, as `/proc/PID/maps` shows it ([`AddressSpace::map_range`]);
    /// returns its image.
    pub fn add_mapping(
        &mut self,
        pid: i32,
        start: u64,
        end: u64,
        offset: u64,
        path: &[u8],
    ) -> usize {
        let image = self.image_of(path);
        self.map_range(pid, start, end, offset, image);
        image
    }

    /// A line of `/proc/PID/maps` of process `pid` (`start-end perms
    /// offset dev inode path`); only executable mappings of a path are
    /// added. Returns the image, if one was.
    pub fn add_maps_line(&mut self, pid: i32, line: &str) -> Option<usize> {
        let mut w = line.split_whitespace();
        let (start, end) = w.next()?.split_once('-')?;
        let start = u64::from_str_radix(start, 16).ok()?;
        let end = u64::from_str_radix(end, 16).ok()?;
        let perms = w.next()?;
        let offset = u64::from_str_radix(w.next()?, 16).ok()?;
        let _dev = w.next()?;
        let _inode = w.next()?;
        // The path is the rest of the line, spaces included.
        let path = line
            .splitn(6, |c: char| c.is_ascii_whitespace())
            .filter(|f| !f.is_empty())
            .nth(5)
            .map(str::trim)
            .filter(|p| !p.is_empty())?;
        if !perms.contains('x') || end <= start {
            return None;
        }
        Some(self.add_mapping(pid, start, end, offset, path.as_bytes()))
    }

    /// `path` loaded in process `pid` at `bias` (run-time address minus
    /// file address); it covers the run-time range of the file's code.
    /// Returns its image, unless the file has no code (or cannot be read).
    pub fn add_biased(&mut self, pid: i32, path: &[u8], bias: u64) -> Option<usize> {
        let image = self.image_of(path);
        self.map_biased(pid, image, bias).then_some(image)
    }

    /// Image `image` loaded in process `pid` at `bias`
    /// ([`AddressSpace::add_biased`]); whether it has code to map.
    pub fn map_biased(&mut self, pid: i32, image: usize, bias: u64) -> bool {
        let Some(file) = self.images[image].file.clone() else {
            return false;
        };
        let (mut start, mut end, mut offset) = (u64::MAX, 0, 0);
        for (s, e, off) in file.code_ranges() {
            if s.wrapping_add(bias) < start {
                start = s.wrapping_add(bias);
                offset = off;
            }
            end = end.max(e.wrapping_add(bias));
        }
        if start >= end {
            return false;
        }
        self.insert(
            pid,
            Mapping {
                start,
                end,
                offset,
                placement: Placement::Bias(bias),
                image,
            },
        );
        true
    }

    /// The mapping of process `pid` that holds run-time `addr`.
    pub fn mapping(&self, pid: i32, addr: u64) -> Option<&Mapping> {
        self.mapping_indexed(pid, addr).map(|(_, m)| m)
    }

    /// [`AddressSpace::mapping`] with its index in
    /// [`AddressSpace::mappings`].
    pub fn mapping_indexed(&self, pid: i32, addr: u64) -> Option<(usize, &Mapping)> {
        if let Some(layers) = &self.layers {
            return layers
                .get(&pid)?
                .iter()
                .enumerate()
                .rev()
                .find(|(_, m)| m.start <= addr && addr < m.end);
        }
        let maps = self.processes.get(&pid)?;
        let (&start, m) = maps.range(..=addr).next_back()?;
        (addr < m.end).then(|| (maps.range(..start).count(), m))
    }

    /// Where run-time `addr` of process `pid` is: its image, file offset
    /// and file address.
    pub fn lookup(&self, pid: i32, addr: u64) -> Option<Location> {
        let m = self.mapping(pid, addr)?;
        let image = &self.images[m.image];
        let offset = (addr - m.start).wrapping_add(m.offset);
        let address = match m.placement {
            Placement::Offset => image.address_of_offset(offset),
            Placement::Bias(bias) => image.file.as_ref().map(|_| addr.wrapping_sub(bias)),
            Placement::Nothing => None,
        };
        Some(Location {
            image: m.image,
            start: m.start,
            offset,
            address,
        })
    }

    /// The mappings of process `pid`, by start address (layered: in the
    /// order added).
    pub fn mappings(&self, pid: i32) -> Box<dyn Iterator<Item = &Mapping> + '_> {
        match &self.layers {
            Some(layers) => Box::new(layers.get(&pid).into_iter().flatten()),
            None => Box::new(
                self.processes
                    .get(&pid)
                    .into_iter()
                    .flat_map(|m| m.values()),
            ),
        }
    }

    /// Process `pid` forked from `ppid`: it starts with a copy of its
    /// parent's mappings (a thread, `pid == ppid`, shares them already).
    pub fn fork(&mut self, pid: i32, ppid: i32) {
        if pid == ppid {
            return;
        }
        if let Some(m) = self.processes.get(&ppid).cloned() {
            self.processes.insert(pid, m);
        }
        if let Some(layers) = &mut self.layers
            && let Some(m) = layers.get(&ppid).cloned()
        {
            layers.insert(pid, m);
        }
    }

    /// Process `pid` called `exec` (or ended): its mappings are gone.
    pub fn exec(&mut self, pid: i32) {
        self.processes.remove(&pid);
        if let Some(layers) = &mut self.layers {
            layers.remove(&pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> AddressSpace {
        // No file is read: every image is unreadable.
        AddressSpace::with_opener(Arc::new(|_| None))
    }

    #[test]
    fn mappings_replace_what_they_overlap_and_are_copied_on_fork() {
        let mut s = space();
        let a = s.add_mmap(1, 0x1000, 0x2000, 0x10, b"/a");
        let b = s.add_mmap(1, 0x4000, 0x1000, 0, b"/b");
        assert_eq!(s.image_of(b"/a"), a);
        let l = s.lookup(1, 0x1800).unwrap();
        assert_eq!(
            (l.image, l.start, l.offset, l.address),
            (a, 0x1000, 0x810, None)
        );
        assert!(s.lookup(1, 0x3000).is_none());
        assert!(s.lookup(2, 0x1800).is_none());
        s.fork(2, 1);
        assert_eq!(s.lookup(2, 0x4800).unwrap().image, b);
        // Overlapping the end of /a: the whole of /a goes.
        s.add_mmap(1, 0x2800, 0x100, 0, b"/c");
        assert!(s.lookup(1, 0x1800).is_none());
        assert_eq!(s.lookup(2, 0x1800).unwrap().image, a);
        s.exec(2);
        assert!(s.lookup(2, 0x4800).is_none());
        assert_eq!(s.images().len(), 3);
    }

    #[test]
    fn proc_maps_lines() {
        let mut s = space();
        let line = "7f0000001000-7f0000003000 r-xp 00001000 08:01 1234   /usr/lib/with space.so";
        let i = s.add_maps_line(7, line).unwrap();
        assert_eq!(s.image(i).path, b"/usr/lib/with space.so");
        assert_eq!(s.lookup(7, 0x7f0000001004).unwrap().offset, 0x1004);
        assert!(
            s.add_maps_line(7, "1000-2000 r--p 00000000 08:01 1 /x")
                .is_none()
        );
        assert!(
            s.add_maps_line(7, "1000-2000 r-xp 00000000 00:00 0")
                .is_none()
        );
        assert!(s.add_maps_line(7, "garbage").is_none());
    }

    #[test]
    fn an_unreadable_image_has_no_biased_mapping() {
        let mut s = space();
        assert!(s.add_biased(1, b"/nope", 0x1000).is_none());
        assert_eq!(s.mappings(1).count(), 0);
    }

    #[test]
    fn layered_mappings_stay_and_the_newest_counts() {
        let mut s = space().layered();
        let a = s.add_mapping(0, 0x1000, 0x3000, 0, b"/a");
        let b = s.add_mapping(0, 0x2000, 0x2100, 0, b"/b");
        assert_eq!(
            s.mapping_indexed(0, 0x1800).map(|(i, m)| (i, m.image)),
            Some((0, a))
        );
        assert_eq!(
            s.mapping_indexed(0, 0x2010).map(|(i, m)| (i, m.image)),
            Some((1, b))
        );
        assert_eq!(s.mapping(0, 0x2800).map(|m| m.image), Some(a));
        assert_eq!(s.mapping(0, 0x2800).unwrap().placement, Placement::Nothing);
        s.fork(5, 0);
        assert_eq!(s.mappings(5).count(), 2);
    }

    #[test]
    fn a_biased_image_is_placed_by_its_code() {
        let exe = std::env::current_exe().unwrap();
        let path = exe.as_os_str().as_encoded_bytes();
        let mut s = AddressSpace::new();
        let i = s.add_biased(3, path, 0x10_0000).expect("the test has code");
        let file = s.image(i).file.clone().unwrap();
        let (start, _, off) = file.code_ranges().next().unwrap();
        let l = s.lookup(3, start + 0x10_0000).unwrap();
        assert_eq!(l.image, i);
        assert_eq!(l.address, Some(start));
        assert_eq!(s.image(i).address_of_offset(off), Some(start));
        assert_eq!(s.image(i).offset_of_address(start), Some(off));
    }
}
