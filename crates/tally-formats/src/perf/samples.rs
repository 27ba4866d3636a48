//! Sampled call chains and the mappings they run through, symbolised into
//! a profile of whole stacks: the one path from sampled addresses to
//! functions and lines, shared by the perf.data reader and `tally record`.
//!
//! A user address is mapped through its process's mappings (`mmap`
//! records, copied on `fork`, dropped on `exec`: tally-symbols'
//! [`AddressSpace`], which `tally sim` uses too) to an object file and an
//! offset in it, and from there to the ELF address, the function (its
//! symbol) and, where the object has DWARF, the line. Kernel addresses are
//! named from `/proc/kallsyms` when the samples were taken on the running
//! kernel and the addresses are readable (`kptr_restrict`), with the object
//! `[kernel.kallsyms]`. An address no symbol covers is the function
//! `[unknown]` of its object, unless a code label (as perf takes them)
//! names it.
//!
//! Samples given with their time and thread ([`SampledStacks::sample_at`])
//! also make the profile's [`tally_model::Timeline`]; a thread is named
//! by the last `comm` record of its thread id, or else of its process.

use crate::Error;
use crate::stacked::StackProfile;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tally_model::{Events, FrameId, FunctionId, Positions, Profile, Thread};
use tally_symbols::{AddressSpace, ObjectFile};

/// Call-chain values at or above this are context markers, not addresses
/// (`PERF_CONTEXT_MAX` is -4095).
const CONTEXT_MAX: u64 = -4095i64 as u64;
/// `PERF_CONTEXT_KERNEL`.
const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// The object kernel frames belong to, as perf names it.
const KERNEL: &[u8] = b"[kernel.kallsyms]";
/// The function of an address no symbol covers.
const UNKNOWN: &[u8] = b"[unknown]";

/// The running kernel's function symbols, by address (`/proc/kallsyms`).
/// Reading them costs tens of milliseconds of kernel time, so they are
/// read only when a kernel address needs a name, or ahead of time by a
/// caller with a core to spare ([`Symbols::load_kernel`]).
pub struct KernelSymbols {
    starts: Vec<u64>,
    names: Vec<String>,
}

impl KernelSymbols {
    /// `/proc/kallsyms`, if `release` is the running kernel's and the
    /// addresses are shown.
    pub fn load(release: Option<&str>) -> Option<KernelSymbols> {
        let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        if release? != running.trim() {
            return None;
        }
        let text = std::fs::read("/proc/kallsyms").ok()?;
        let mut syms: Vec<(u64, String)> = text
            .split(|&b| b == b'\n')
            .filter_map(|l| {
                let mut w = l
                    .split(|&b| b == b' ' || b == b'\t')
                    .filter(|w| !w.is_empty());
                let addr = u64::from_str_radix(std::str::from_utf8(w.next()?).ok()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                (addr != 0 && matches!(kind, b"t" | b"T" | b"w" | b"W"))
                    .then(|| (addr, String::from_utf8_lossy(name).into_owned()))
            })
            .collect();
        if syms.is_empty() {
            return None;
        }
        syms.sort_unstable();
        let (starts, names) = syms.into_iter().unzip();
        Some(KernelSymbols { starts, names })
    }

    fn name(&self, addr: u64) -> Option<&str> {
        let i = self.starts.partition_point(|&s| s <= addr).checked_sub(1)?;
        Some(&self.names[i])
    }
}

/// The object files and kernel symbols that symbolising reads, each
/// opened once and shared between threads: a recorder opens them while the
/// program runs, so that little is left to read when it ends. A file
/// another thread is still opening is waited for, never opened twice.
#[derive(Clone, Default)]
pub struct Symbols {
    /// Object files by path (`None`: the file cannot be read).
    objects: Arc<Mutex<FxHashMap<Vec<u8>, ObjectCell>>>,
    kernel: Arc<OnceLock<Option<KernelSymbols>>>,
}

/// An object file, opened by whichever thread needs it first.
type ObjectCell = Arc<OnceLock<Option<Arc<ObjectFile>>>>;

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("kernel", &self.kernel.get().map(Option::is_some))
            .finish_non_exhaustive()
    }
}

impl Symbols {
    fn cell(&self, path: &[u8]) -> ObjectCell {
        let mut objects = self.objects.lock().unwrap_or_else(|e| e.into_inner());
        objects.entry(path.to_vec()).or_default().clone()
    }

    /// The object file at `path` (a mapping's path), opened now if no
    /// thread has opened it.
    fn object(&self, path: &[u8]) -> Option<Arc<ObjectFile>> {
        self.cell(path)
            .get_or_init(|| tally_symbols::address_space::open_object(path))
            .clone()
    }

    /// Opens the object file at `path` unless it is open, and reads its
    /// line tables, which symbolising its addresses reads.
    pub fn load_object(&self, path: &[u8]) {
        if let Some(o) = self.object(path) {
            o.load_lines_now();
        }
    }

    /// Reads the kernel's symbols, for samples taken on kernel `release`.
    pub fn load_kernel(&self, release: Option<&str>) {
        self.kernel.get_or_init(|| KernelSymbols::load(release));
    }
}

/// Symbolises addresses into frames, with caches.
struct Symbolizer {
    /// The processes' mappings and the object files they map (opened
    /// through `preloaded`); an object is an image of the space.
    space: AddressSpace,
    /// Files opened ahead of time.
    preloaded: Symbols,
    /// The kernel release the samples were taken on.
    release: Option<String>,
    /// (object, ELF address, leaf) → frame.
    frames: FxHashMap<(usize, u64, bool), FrameId>,
    kernel_frames: FxHashMap<u64, FrameId>,
    /// (object, symbol start) → function.
    functions: FxHashMap<(usize, u64), FunctionId>,
}

impl Symbolizer {
    /// The frame of user address `addr` in process `pid`; `leaf` for the
    /// sampled instruction itself (a caller's address is a return address,
    /// whose line is looked up one byte back, on the call).
    fn user(&mut self, b: &mut StackProfile, pid: i32, addr: u64, leaf: bool) -> Option<FrameId> {
        let Some(loc) = self.space.lookup(pid, addr) else {
            let f = b.function(UNKNOWN, b"", UNKNOWN)?;
            return Some(b.frame(f, 0, addr));
        };
        let object = loc.image;
        let elf = loc.address;
        let elf_addr = elf.unwrap_or(loc.offset);
        if let Some(&f) = self.frames.get(&(object, elf_addr, leaf)) {
            return Some(f);
        }
        let image = self.space.image(object);
        let (path, file) = (image.path.clone(), image.file.clone());
        let symbol = elf.and_then(|a| {
            let o = file.as_ref()?;
            // perf names code outside any sized function after the label
            // before it (the loader's `_dl_start_user`).
            if let Some((at, name)) = o.code_label_at(a) {
                return Some((at, name.to_string()));
            }
            let s = o.symbol_at(a)?;
            Some((s.address, s.perf_name().to_string()))
        });
        let (function, line) = match symbol {
            Some((sym_start, name)) => {
                let o = file.as_ref().expect("symbol from the file");
                let line = o
                    .source_line(if leaf {
                        elf_addr
                    } else {
                        elf_addr.saturating_sub(1)
                    })
                    .map_or(0, |(_, l)| l);
                let f = match self.functions.get(&(object, sym_start)) {
                    Some(&f) => f,
                    None => {
                        let file = o.source_line(sym_start).map(|(f, _)| f).unwrap_or_default();
                        let f = b.function(&path, file.as_bytes(), name.as_bytes())?;
                        self.functions.insert((object, sym_start), f);
                        f
                    }
                };
                (f, line)
            }
            None => (b.function(&path, b"", UNKNOWN)?, 0),
        };
        let frame = b.frame(function, line, elf_addr);
        self.frames.insert((object, elf_addr, leaf), frame);
        Some(frame)
    }

    fn kernel(&mut self, b: &mut StackProfile, addr: u64) -> Option<FrameId> {
        if let Some(&f) = self.kernel_frames.get(&addr) {
            return Some(f);
        }
        let release = self.release.as_deref();
        let kernel = self
            .preloaded
            .kernel
            .get_or_init(|| KernelSymbols::load(release));
        let name = kernel.as_ref().and_then(|k| k.name(addr));
        let f = b.function(KERNEL, b"", name.map_or(UNKNOWN, str::as_bytes))?;
        let frame = b.frame(f, 0, addr);
        self.kernel_frames.insert(addr, frame);
        Some(frame)
    }
}

/// One sample: frames root first, event index, period, and its time and
/// thread (an index into [`SampledStacks::threads`]) when it has them.
type Taken = (Vec<FrameId>, usize, u64, Option<(u64, u32)>);

/// Samples being symbolised into a profile of whole stacks.
pub struct SampledStacks {
    sym: Symbolizer,
    b: StackProfile,
    samples: Vec<Taken>,
    leaf_first: Vec<FrameId>,
    /// The sampled threads, (pid, tid), in first-seen order, and their
    /// index.
    threads: Vec<(i32, i32)>,
    thread_index: FxHashMap<(i32, i32), u32>,
    /// The last name given to each thread id.
    comms: FxHashMap<i32, Vec<u8>>,
}

impl SampledStacks {
    /// No samples yet; `creator` is the profile's creator, `os_release`
    /// the kernel release the samples were taken on (kernel frames are
    /// named only when it is the running one).
    pub fn new(positions: Positions, creator: &[u8], os_release: Option<&str>) -> Self {
        Self::with_symbols(positions, creator, os_release, Symbols::default())
    }

    /// [`SampledStacks::new`] with object files and kernel symbols read
    /// ahead of time.
    pub fn with_symbols(
        positions: Positions,
        creator: &[u8],
        os_release: Option<&str>,
        symbols: Symbols,
    ) -> Self {
        SampledStacks {
            sym: Symbolizer {
                space: AddressSpace::with_opener({
                    let symbols = symbols.clone();
                    Arc::new(move |path: &[u8]| symbols.object(path))
                }),
                preloaded: symbols,
                release: os_release.map(str::to_string),
                frames: FxHashMap::default(),
                kernel_frames: FxHashMap::default(),
                functions: FxHashMap::default(),
            },
            b: StackProfile::new(positions, creator),
            samples: Vec::new(),
            leaf_first: Vec::new(),
            threads: Vec::new(),
            thread_index: FxHashMap::default(),
            comms: FxHashMap::default(),
        }
    }

    /// Sets the command the profile is of (the part's `cmd:`).
    pub fn set_cmd(&mut self, cmd: Vec<u8>) {
        self.b.set_cmd(cmd);
    }

    /// `path` mapped at `start..start + len` of process `pid`, from
    /// `offset` in the file; it replaces whatever it overlaps.
    pub fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        self.sym.space.add_mmap(pid, start, len, offset, path);
    }

    /// Process `pid` forked from `ppid`: it starts with its parent's
    /// mappings (a new thread, `pid == ppid`, shares them already).
    pub fn fork(&mut self, pid: i32, ppid: i32) {
        self.sym.space.fork(pid, ppid);
    }

    /// Process `pid` called `exec`: its mappings are gone.
    pub fn exec(&mut self, pid: i32) {
        self.sym.space.exec(pid);
    }

    /// Thread `tid` is named `name` (a `comm` record: at `exec`, or
    /// renamed); the last name of a thread is its name in the timeline.
    pub fn comm(&mut self, tid: i32, name: &[u8]) {
        self.comms.insert(tid, name.to_vec());
    }

    /// [`SampledStacks::sample`] of thread `tid` at `time` (nanoseconds):
    /// the sample also goes to the profile's timeline.
    #[allow(clippy::too_many_arguments)]
    pub fn sample_at(
        &mut self,
        pid: i32,
        tid: i32,
        time: u64,
        kernel: bool,
        chain: &[u64],
        event: usize,
        period: u64,
    ) -> Result<(), Error> {
        let before = self.samples.len();
        self.sample(pid, kernel, chain, event, period)?;
        if let Some(last) = self.samples.get_mut(before) {
            let next = self.threads.len() as u32;
            let thread = *self.thread_index.entry((pid, tid)).or_insert(next);
            if thread == next {
                self.threads.push((pid, tid));
            }
            last.3 = Some((time, thread));
        }
        Ok(())
    }

    /// A sample of process `pid` for event `event` (an index in the names
    /// given to [`SampledStacks::finish`]) weighing `period`: `chain` is
    /// its call chain, leaf first, with perf's context markers (values
    /// from `PERF_CONTEXT_MAX` up) saying whether the addresses after them
    /// are kernel or user ones; `kernel` whether the first ones are. A
    /// chain without addresses is no sample.
    pub fn sample(
        &mut self,
        pid: i32,
        kernel: bool,
        chain: &[u64],
        event: usize,
        period: u64,
    ) -> Result<(), Error> {
        let mut kernel = kernel;
        let mut first = true;
        self.leaf_first.clear();
        for &addr in chain {
            if addr >= CONTEXT_MAX {
                kernel = addr == CONTEXT_KERNEL;
                continue;
            }
            let frame = if kernel {
                self.sym.kernel(&mut self.b, addr)
            } else {
                self.sym.user(&mut self.b, pid, addr, first)
            }
            .ok_or(Error::StacksFull)?;
            first = false;
            self.leaf_first.push(frame);
        }
        if self.leaf_first.is_empty() {
            return Ok(());
        }
        let mut frames = self.leaf_first.clone();
        frames.reverse();
        self.samples.push((frames, event, period, None));
        Ok(())
    }

    /// The number of samples kept so far.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether no sample was kept.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The profile of events `names` (a sample of an event past the last
    /// counts for the last; no names: one event, `samples`).
    pub fn finish(self, names: Vec<String>) -> Result<Profile<u64>, Error> {
        let SampledStacks {
            mut b,
            samples,
            threads,
            comms,
            ..
        } = self;
        let n = names.len().max(1);
        // Events named twice (`-e cycles -e cycles`) are told apart by number.
        let mut unique: Vec<String> = Vec::with_capacity(n);
        for (i, name) in names.into_iter().enumerate() {
            let name = if unique.contains(&name) {
                format!("{name}#{i}")
            } else {
                name
            };
            unique.push(name);
        }
        let names = if unique.is_empty() {
            vec!["samples".to_string()]
        } else {
            unique
        };
        let events = Events::new(names).map_err(|e| Error::StacksEvents(e.to_string()))?;
        let mut costs = vec![0u64; n];
        for (frames, e, period, at) in &samples {
            costs.iter_mut().for_each(|c| *c = 0);
            costs[(*e).min(n - 1)] = *period;
            match at {
                Some((time, thread)) => b.stacks_mut().add_timed(frames, &costs, *time, *thread),
                None => b.add(frames, &costs),
            }
            .ok_or(Error::StacksOverflow)?;
        }
        if let Some(t) = b.stacks_mut().timeline.as_mut() {
            t.sort();
            t.threads = threads
                .into_iter()
                .map(|(pid, tid)| Thread {
                    pid,
                    tid,
                    name: comms
                        .get(&tid)
                        .or_else(|| comms.get(&pid))
                        .cloned()
                        .unwrap_or_default(),
                })
                .collect();
        }
        b.finish(events).ok_or(Error::StacksOverflow)
    }
}
