//! The address spaces of processes: which object file (an image) holds a
//! run-time address, and at which of the file's own addresses. One type
//! for every reader of mappings: perf's `mmap` records (the perf.data
//! reader and `tally record`), `/proc/PID/maps` lines, and an image's
//! load bias (a run-time address minus the file's own, as Valgrind's
//! `svma`/`avma` pairs give it).
//!
//! Each image is opened once (by the space's opener, [`Opener`]), shared
//! by every process that maps it, and kept until
//! [`AddressSpace::release_unmapped`] finds that no process maps it any
//! more (never, for a reader of one recording, which keeps them all).
//! A process's mappings are kept by start address; a new mapping replaces
//! whatever it overlaps, as the kernel does (or, in a space made
//! [`AddressSpace::layered`], stays under it: `tally sim`'s mappings, which
//! QEMU's plugin reports piecemeal). A forked process shares its parent's
//! mappings until either changes them ([`AddressSpace::fork`]); one that
//! `exec`s starts with none ([`AddressSpace::exec`]); one that ends is
//! forgotten ([`AddressSpace::exit`]).
//!
//! `tally record --system` tracks every process of the machine in one
//! space for as long as it records: it opens no file through the space
//! (its opener opens nothing; it reads the headers of the images it
//! samples itself), and releases the images that no live process maps
//! (but for those with samples not yet written), so that memory follows
//! the live processes, not every file mapped since the recording started.

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

/// The mappings of a process by start, shared by the processes forked
/// from it until one of them maps or execs (a system-wide recording sees
/// many forks of large processes, most of which soon `exec`).
type Mappings = Arc<BTreeMap<u64, Mapping>>;

/// The images and mappings of processes, by process id.
#[derive(Clone)]
pub struct AddressSpace {
    /// Images by index; a released one is an empty slot (no path in
    /// `by_path` names it) that the next new image takes.
    images: Vec<Image>,
    by_path: HashMap<Vec<u8>, usize>,
    /// Released slots of `images`.
    free: Vec<usize>,
    /// Each process's mappings by start (a new one replacing those it
    /// overlaps); a process with none still has an entry (it is known:
    /// [`AddressSpace::has_process`]).
    processes: HashMap<i32, Mappings>,
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
            free: Vec::new(),
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

    /// Every image opened, in the order they were first mapped (after
    /// [`AddressSpace::release_unmapped`], a released one is an empty
    /// path without a file until a new image takes its place).
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
        let image = Image {
            path: path.to_vec(),
            file: open(),
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.images[i] = image;
                i
            }
            None => {
                self.images.push(image);
                self.images.len() - 1
            }
        };
        self.by_path.insert(path.to_vec(), i);
        i
    }

    /// Whether image `i` is one the space holds (not released, nor past
    /// the last).
    fn is_live(&self, i: usize) -> bool {
        self.images
            .get(i)
            .is_some_and(|image| self.by_path.get(&image.path) == Some(&i))
    }

    /// The number of images held (not released).
    pub fn live_images(&self) -> usize {
        self.images.len() - self.free.len()
    }

    /// Releases every image that no process maps and `keep` does not
    /// hold (say, one with samples not yet written), closing its file
    /// unless a caller holds it, and returns their indices, which new
    /// images may take from then on: a space that lives as long as a
    /// system-wide recording would otherwise keep every file ever mapped.
    /// Whoever keeps facts by image index drops those of the indices
    /// returned.
    pub fn release_unmapped(&mut self, keep: impl Fn(usize) -> bool) -> Vec<usize> {
        let mut mapped = vec![false; self.images.len()];
        let layered = self.layers.iter().flat_map(|l| l.values().flatten());
        for m in self
            .processes
            .values()
            .flat_map(|m| m.values())
            .chain(layered)
        {
            if let Some(b) = mapped.get_mut(m.image) {
                *b = true;
            }
        }
        let released: Vec<usize> = (0..self.images.len())
            .filter(|&i| !mapped[i] && self.is_live(i) && !keep(i))
            .collect();
        for &i in &released {
            let image = std::mem::replace(
                &mut self.images[i],
                Image {
                    path: Vec::new(),
                    file: None,
                },
            );
            self.by_path.remove(&image.path);
            self.free.push(i);
        }
        released
    }

    /// Adds `mapping` to process `pid`, replacing whatever it overlaps
    /// (unless the space is [`AddressSpace::layered`]).
    pub fn insert(&mut self, pid: i32, mapping: Mapping) {
        if let Some(layers) = &mut self.layers {
            layers.entry(pid).or_default().push(mapping);
            return;
        }
        let maps = Arc::make_mut(self.processes.entry(pid).or_default());
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

    /// Whether process `pid` is known: it has mapped something, or was
    /// added, forked or exec'd, and has not exited since. A sampler that
    /// reads `/proc/PID/maps` for the processes it has not heard of asks
    /// this, so that a process without mappings is not read again.
    pub fn has_process(&self, pid: i32) -> bool {
        match &self.layers {
            Some(layers) => layers.contains_key(&pid),
            None => self.processes.contains_key(&pid),
        }
    }

    /// Process `pid` is known from now on ([`AddressSpace::has_process`]),
    /// with whatever mappings it has (none, if it is new).
    pub fn add_process(&mut self, pid: i32) {
        match &mut self.layers {
            Some(layers) => {
                layers.entry(pid).or_default();
            }
            None => {
                self.processes.entry(pid).or_default();
            }
        }
    }

    /// Process `pid` forked from `ppid`: it shares its parent's mappings,
    /// each keeping its own from the first change, as after a `fork` (a
    /// thread, `pid == ppid`, shares them already). A child of a process
    /// the space does not know is known, with the mappings it has.
    pub fn fork(&mut self, pid: i32, ppid: i32) {
        if pid == ppid {
            return;
        }
        match &mut self.layers {
            Some(layers) => match layers.get(&ppid).cloned() {
                Some(m) => {
                    layers.insert(pid, m);
                }
                None => {
                    layers.entry(pid).or_default();
                }
            },
            None => match self.processes.get(&ppid).cloned() {
                Some(m) => {
                    self.processes.insert(pid, m);
                }
                None => {
                    self.processes.entry(pid).or_default();
                }
            },
        }
    }

    /// Process `pid` called `exec`: its mappings are gone (the new
    /// program's come next), but the process is still known.
    pub fn exec(&mut self, pid: i32) {
        match &mut self.layers {
            Some(layers) => {
                layers.insert(pid, Vec::new());
            }
            None => {
                self.processes.insert(pid, Mappings::default());
            }
        }
    }

    /// Process `pid` ended: its mappings are gone and it is forgotten (a
    /// later process of that id starts anew). Its images stay until
    /// [`AddressSpace::release_unmapped`].
    pub fn exit(&mut self, pid: i32) {
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
    fn a_child_shares_its_parents_mappings_until_one_changes_them() {
        let mut s = space();
        let a = s.add_mmap(1, 0x1000, 0x1000, 0, b"/a");
        s.fork(2, 1);
        s.fork(3, 1);
        // Shared, not copied, while neither maps anything.
        assert!(Arc::ptr_eq(&s.processes[&1], &s.processes[&2]));
        assert!(Arc::ptr_eq(&s.processes[&2], &s.processes[&3]));
        // The parent's new mapping is its own; the children keep /a.
        let b = s.add_mmap(1, 0x1000, 0x1000, 0, b"/b");
        assert_eq!(s.lookup(1, 0x1800).unwrap().image, b);
        assert_eq!(s.lookup(2, 0x1800).unwrap().image, a);
        assert_eq!(s.lookup(3, 0x1800).unwrap().image, a);
        // And a child's is its own too.
        s.add_mmap(2, 0x8000, 0x1000, 0, b"/c");
        assert!(s.lookup(3, 0x8800).is_none());
        assert!(!Arc::ptr_eq(&s.processes[&2], &s.processes[&3]));
        // A thread shares everything already.
        s.fork(3, 3);
        assert_eq!(s.lookup(3, 0x1800).unwrap().image, a);
    }

    #[test]
    fn exec_empties_a_process_and_exit_forgets_it() {
        let mut s = space();
        assert!(!s.has_process(1));
        s.add_process(1);
        assert!(s.has_process(1));
        assert_eq!(s.mappings(1).count(), 0);
        s.add_mmap(1, 0x1000, 0x1000, 0, b"/a");
        // Adding a known process keeps its mappings.
        s.add_process(1);
        assert_eq!(s.mappings(1).count(), 1);
        s.exec(1);
        assert!(s.has_process(1));
        assert!(s.lookup(1, 0x1800).is_none());
        s.exit(1);
        assert!(!s.has_process(1));
        // The child of a process never seen is known, without mappings.
        s.fork(5, 4);
        assert!(s.has_process(5));
        assert!(!s.has_process(4));
        assert_eq!(s.mappings(5).count(), 0);
        // The same in a layered space.
        let mut l = space().layered();
        l.add_mapping(1, 0x1000, 0x2000, 0, b"/a");
        l.fork(2, 1);
        l.exec(1);
        assert!(l.has_process(1) && l.mappings(1).count() == 0);
        assert_eq!(l.mappings(2).count(), 1);
        l.exit(2);
        assert!(!l.has_process(2));
    }

    #[test]
    fn images_no_process_maps_are_released_and_their_slots_reused() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let opened = Arc::new(AtomicUsize::new(0));
        let mut s = AddressSpace::with_opener({
            let opened = Arc::clone(&opened);
            Arc::new(move |_| {
                opened.fetch_add(1, Ordering::Relaxed);
                None
            })
        });
        let a = s.add_mmap(1, 0x1000, 0x1000, 0, b"/a");
        let b = s.add_mmap(1, 0x4000, 0x1000, 0, b"/b");
        let c = s.add_mmap(2, 0x1000, 0x1000, 0, b"/c");
        s.fork(3, 1);
        // Everything is mapped: nothing goes.
        assert!(s.release_unmapped(|_| false).is_empty());
        // /a is replaced in 1 but still mapped by its child; /c's process
        // ends.
        s.add_mmap(1, 0x1000, 0x1000, 0, b"/b");
        s.exit(2);
        // Unless the caller keeps it.
        assert!(s.release_unmapped(|i| i == c).is_empty());
        assert_eq!(s.live_images(), 3);
        assert_eq!(s.release_unmapped(|_| false), vec![c]);
        assert_eq!(s.live_images(), 2);
        assert!(s.image(c).path.is_empty() && s.image(c).file.is_none());
        s.exec(3);
        assert_eq!(s.release_unmapped(|_| false), vec![a]);
        // Nothing twice.
        assert!(s.release_unmapped(|_| false).is_empty());
        assert_eq!(s.lookup(1, 0x1800).unwrap().image, b);
        assert_eq!(opened.load(Ordering::Relaxed), 3);
        // New images take the released slots; a released path is opened
        // again.
        let d = s.add_mmap(1, 0x9000, 0x1000, 0, b"/d");
        let a2 = s.image_of(b"/a");
        assert_eq!(
            [d, a2]
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>(),
            [a, c].into_iter().collect()
        );
        assert_eq!(s.image(a2).path, b"/a");
        assert_eq!(opened.load(Ordering::Relaxed), 5);
        assert_eq!(s.images().len(), 3);
        let e = s.image_of(b"/e");
        assert_eq!(e, 3);
        // An image nobody ever mapped goes too, as do layered ones.
        assert_eq!(s.release_unmapped(|_| false), vec![a2, e]);
        let mut l = space().layered();
        let x = l.add_mapping(0, 0x1000, 0x2000, 0, b"/x");
        assert!(l.release_unmapped(|_| false).is_empty());
        l.exit(0);
        assert_eq!(l.release_unmapped(|_| false), vec![x]);
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
