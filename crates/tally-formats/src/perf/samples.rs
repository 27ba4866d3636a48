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
//! `[kernel.kallsyms]`.
//!
//! An address no symbol covers (stripped code: Debian's libraries keep
//! only their exported `.dynsym` functions) is named by its 4 KiB page
//! of the object, `[0x16000] lzma_mf_is_supported+0x690`: the page's
//! ELF address (its file offset where the file cannot be read), then the
//! nearest function before the page, if any. perf
//! shows each such address on its own row; a page keeps a hot loop's
//! instructions in one row and different hot places apart, and its
//! frames keep their exact addresses. A code label (as perf takes them)
//! names such an address first.
//!
//! Code a JIT compiled (in anonymous memory, or in no mapping the
//! recording saw) is named from the process's perf map and jitdump files
//! ([`super::jit`]), read when the profile is finished, so that code
//! compiled after its first sample is still named: perf maps are
//! `/tmp/perf-PID.map` ([`SampledStacks::set_perf_map_dir`]), jitdump
//! files are found by the mappings the JIT makes of them. Their functions
//! belong to the object `[JIT] tid PID`, as `perf report` names it; an
//! address neither names stays `[unknown]`. A bad line or record of
//! these files is skipped, with a `Warning` line in the profile's
//! description naming the file and the line or byte offset.
//!
//! Samples given with their time and thread ([`SampledStacks::sample_at`])
//! also make the profile's [`tally_model::Timeline`]; a thread is named
//! by the last `comm` record of its thread id, or else of its process.

use super::jit::JitSymbols;
use crate::Error;
use crate::stacked::StackProfile;
use rustc_hash::{FxBuildHasher, FxHashMap};
use std::hash::BuildHasher;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};
use tally_model::{Events, FrameId, FunctionId, LabelSetId, Positions, Profile, Thread, Timeline};
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
/// The size of the pages that code without symbols is named by.
const PAGE: u64 = 4096;
/// Where JIT compilers write perf map files.
const PERF_MAP_DIR: &str = "/tmp";

/// Whether a mapping's path is anonymous memory, where JIT compilers put
/// their code (the names perf treats as anonymous).
fn is_anonymous(path: &[u8]) -> bool {
    path.is_empty()
        || [
            &b"//anon"[..],
            b"[anon",
            b"/anon_hugepage",
            b"/dev/zero",
            b"/memfd:",
            b"[heap]",
        ]
        .iter()
        .any(|p| path.starts_with(p))
}

/// The pid of a jitdump file's path (`…/jit-PID.dump`), if it is one.
pub(crate) fn jitdump_pid(path: &[u8]) -> Option<i32> {
    let name = path.rsplit(|&b| b == b'/').next()?;
    let pid = name.strip_prefix(b"jit-")?.strip_suffix(b".dump")?;
    std::str::from_utf8(pid).ok()?.parse().ok()
}

/// The running kernel's function symbols, by address (`/proc/kallsyms`).
/// Reading them costs tens of milliseconds of kernel time, so they are
/// read only when a kernel address needs a name, or ahead of time by a
/// caller with a core to spare ([`Symbols::load_kernel`]).
pub struct KernelSymbols {
    /// (start, name's offset in `names`, name's length), by start. A
    /// kernel has a hundred thousand functions: one string of all the
    /// names and 16 bytes each keep them to a few megabytes.
    syms: Vec<(u64, u32, u32)>,
    names: String,
}

impl KernelSymbols {
    /// `/proc/kallsyms`, if `release` is the running kernel's and the
    /// addresses are shown.
    pub fn load(release: Option<&str>) -> Option<KernelSymbols> {
        use std::io::BufRead;
        let running = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        if release? != running.trim() {
            return None;
        }
        let mut file = std::io::BufReader::new(std::fs::File::open("/proc/kallsyms").ok()?);
        let (mut syms, mut names) = (Vec::new(), String::new());
        let mut line = Vec::new();
        loop {
            line.clear();
            match file.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let mut w = line
                .split(|&b| matches!(b, b' ' | b'\t' | b'\n'))
                .filter(|w| !w.is_empty());
            let (Some(addr), Some(kind), Some(name)) = (w.next(), w.next(), w.next()) else {
                continue;
            };
            let Some(addr) = std::str::from_utf8(addr)
                .ok()
                .and_then(|a| u64::from_str_radix(a, 16).ok())
            else {
                continue;
            };
            if addr == 0 || !matches!(kind, b"t" | b"T" | b"w" | b"W") {
                continue;
            }
            let at = names.len();
            names.push_str(&String::from_utf8_lossy(name));
            let (Ok(at), Ok(len)) = (u32::try_from(at), u32::try_from(names.len() - at)) else {
                break;
            };
            syms.push((addr, at, len));
        }
        if syms.is_empty() {
            return None;
        }
        // Of names at one address (`memcpy`, `__memcpy`, `__pi_memcpy`),
        // perf shows the last in the file: a stable sort keeps that last.
        syms.sort_by_key(|s| s.0);
        syms.shrink_to_fit();
        names.shrink_to_fit();
        Some(KernelSymbols { syms, names })
    }

    fn name(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (_, at, len) = self.syms[i];
        self.names.get(at as usize..(at + len) as usize)
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
    /// (object, page) → function, for code without symbols.
    pages: FxHashMap<(usize, u64), FunctionId>,
}

/// A symbolised user address: its frame, and whether a JIT may have
/// written its code (it is in anonymous memory or in no known mapping),
/// so that the JIT's maps, read at the end, may name it.
type UserFrame = (FrameId, bool);

impl Symbolizer {
    /// The frame of user address `addr` in process `pid`; `leaf` for the
    /// sampled instruction itself (a caller's address is a return address,
    /// whose line is looked up one byte back, on the call).
    fn user(&mut self, b: &mut StackProfile, pid: i32, addr: u64, leaf: bool) -> Option<UserFrame> {
        let Some(loc) = self.space.lookup(pid, addr) else {
            let f = b.function(UNKNOWN, b"", UNKNOWN)?;
            return Some((b.frame(f, 0, addr), true));
        };
        let object = loc.image;
        let elf = loc.address;
        let elf_addr = elf.unwrap_or(loc.offset);
        let image = self.space.image(object);
        let anonymous = image.file.is_none() && is_anonymous(&image.path);
        if let Some(&f) = self.frames.get(&(object, elf_addr, leaf)) {
            return Some((f, anonymous));
        }
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
            None if anonymous => (b.function(&path, b"", UNKNOWN)?, 0),
            None => {
                let page = elf_addr & !(PAGE - 1);
                let f = match self.pages.get(&(object, page)) {
                    Some(&f) => f,
                    None => {
                        let before = elf.and(file.as_ref()).and_then(|o| o.symbol_before(page));
                        let name = match before {
                            Some(s) => {
                                format!("[{page:#x}] {}+{:#x}", s.perf_name(), page - s.address)
                            }
                            None => format!("[{page:#x}]"),
                        };
                        let f = b.function(&path, b"", name.as_bytes())?;
                        self.pages.insert((object, page), f);
                        f
                    }
                };
                (f, 0)
            }
        };
        let frame = b.frame(function, line, elf_addr);
        self.frames.insert((object, elf_addr, leaf), frame);
        Some((frame, anonymous))
    }

    /// The frame of JIT code at `addr` of process `pid`, named by
    /// `jit`, the process's JIT functions.
    fn jit(
        b: &mut StackProfile,
        jit: &JitSymbols,
        pid: i32,
        addr: u64,
    ) -> Option<Result<FrameId, Error>> {
        let (_, name) = jit.lookup(addr)?;
        let object = format!("[JIT] tid {pid}");
        Some(
            b.function(object.as_bytes(), b"", name.as_bytes())
                .map(|f| b.frame(f, 0, addr))
                .ok_or(Error::StacksFull),
        )
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

/// One sample: its stack (an index into [`LocalStacks`]), event index,
/// period, and its time and thread (an index into
/// [`SampledStacks::threads`]; [`UNTIMED`] when it has none).
struct Taken {
    stack: u32,
    event: u32,
    thread: u32,
    period: u64,
    time: u64,
}

/// The thread of a sample given without time and thread.
const UNTIMED: u32 = u32::MAX;

/// The distinct stacks of the samples, root first, each once, in
/// first-seen order, kept in one array: a sample costs a hash of its
/// frames and no allocation, and the profile's stacks are made once per
/// distinct stack rather than once per sample.
#[derive(Default)]
struct LocalStacks {
    frames: Vec<FrameId>,
    /// Where each stack starts in `frames`; one more entry than stacks.
    starts: Vec<u32>,
    /// The stacks without frames a JIT may name, by their frames (stacks
    /// with such frames are each their own, since the names the JIT's
    /// maps give depend on the process).
    index: hashbrown::HashTable<u32>,
}

impl LocalStacks {
    fn len(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    fn get(&self, i: usize) -> &[FrameId] {
        &self.frames[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    fn get_mut(&mut self, i: usize) -> &mut [FrameId] {
        &mut self.frames[self.starts[i] as usize..self.starts[i + 1] as usize]
    }

    fn push(&mut self, frames: &[FrameId]) -> Option<u32> {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        let id = u32::try_from(self.len()).ok()?;
        self.frames.extend_from_slice(frames);
        self.starts.push(u32::try_from(self.frames.len()).ok()?);
        Some(id)
    }

    /// The id of stack `frames`, added if new; `shared` whether it may be
    /// one of the stacks of other samples.
    fn intern(&mut self, frames: &[FrameId], shared: bool) -> Option<u32> {
        if !shared {
            return self.push(frames);
        }
        let hash = FxBuildHasher.hash_one(frames);
        let LocalStacks {
            frames: all,
            starts,
            index,
        } = self;
        let of = |i: u32| &all[starts[i as usize] as usize..starts[i as usize + 1] as usize];
        if let Some(&i) = index.find(hash, |&i| of(i) == frames) {
            return Some(i);
        }
        let id = self.push(frames)?;
        let LocalStacks {
            frames: all,
            starts,
            index,
        } = self;
        index.insert_unique(hash, id, |&i| {
            FxBuildHasher
                .hash_one(&all[starts[i as usize] as usize..starts[i as usize + 1] as usize])
        });
        Some(id)
    }
}

/// User addresses a JIT may have compiled, to be named when the profile
/// is finished.
#[derive(Default)]
struct JitPending {
    /// Each distinct (pid, address) once, by index.
    keys: FxHashMap<(i32, u64), u32>,
    addresses: Vec<(i32, u64)>,
    /// (stack, frame position in it root first, address index).
    uses: Vec<(u32, u32, u32)>,
    /// The jitdump files each process mapped.
    dumps: FxHashMap<i32, Vec<PathBuf>>,
    /// Where perf map files are.
    map_dir: PathBuf,
}

/// Samples being symbolised into a profile of whole stacks.
pub struct SampledStacks {
    sym: Symbolizer,
    b: StackProfile,
    samples: Vec<Taken>,
    stacks: LocalStacks,
    /// The frames of user addresses, by process and (address, leaf):
    /// what [`Symbolizer::user`] gave until the process's mappings
    /// change.
    user_frames: FxHashMap<i32, FxHashMap<(u64, bool), UserFrame>>,
    leaf_first: Vec<FrameId>,
    root_first: Vec<FrameId>,
    /// Positions in `leaf_first` of frames a JIT may name.
    jit_first: Vec<(u32, u64)>,
    jit: JitPending,
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
                pages: FxHashMap::default(),
            },
            b: StackProfile::new(positions, creator),
            samples: Vec::new(),
            stacks: LocalStacks::default(),
            user_frames: FxHashMap::default(),
            leaf_first: Vec::new(),
            root_first: Vec::new(),
            jit_first: Vec::new(),
            jit: JitPending {
                map_dir: PathBuf::from(PERF_MAP_DIR),
                ..JitPending::default()
            },
            threads: Vec::new(),
            thread_index: FxHashMap::default(),
            comms: FxHashMap::default(),
        }
    }

    /// Sets the command the profile is of (the part's `cmd:`).
    pub fn set_cmd(&mut self, cmd: Vec<u8>) {
        self.b.set_cmd(cmd);
    }

    /// Sets the directory holding the perf map files (`perf-PID.map`)
    /// of the recorded processes: `/tmp` unless set, where JIT compilers
    /// write them; another for a recording whose maps were copied with
    /// it.
    pub fn set_perf_map_dir(&mut self, dir: impl Into<PathBuf>) {
        self.jit.map_dir = dir.into();
    }

    /// `path` mapped at `start..start + len` of process `pid`, from
    /// `offset` in the file; it replaces whatever it overlaps. A jitdump
    /// file (`…/jit-PID.dump`) holds no code: it is kept, to be read
    /// when the profile is finished.
    pub fn mmap(&mut self, pid: i32, start: u64, len: u64, offset: u64, path: &[u8]) {
        if jitdump_pid(path).is_some() {
            let path = PathBuf::from(String::from_utf8_lossy(path).into_owned());
            let dumps = self.jit.dumps.entry(pid).or_default();
            if !dumps.contains(&path) {
                dumps.push(path);
            }
            return;
        }
        self.user_frames.remove(&pid);
        self.sym.space.add_mmap(pid, start, len, offset, path);
    }

    /// Process `pid` forked from `ppid`: it starts with its parent's
    /// mappings (a new thread, `pid == ppid`, shares them already).
    pub fn fork(&mut self, pid: i32, ppid: i32) {
        if pid != ppid {
            self.user_frames.remove(&pid);
        }
        self.sym.space.fork(pid, ppid);
    }

    /// Process `pid` called `exec`: its mappings are gone.
    pub fn exec(&mut self, pid: i32) {
        self.user_frames.remove(&pid);
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
                if next == UNTIMED {
                    return Err(Error::StacksFull);
                }
                self.threads.push((pid, tid));
            }
            last.thread = thread;
            last.time = time;
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
        self.jit_first.clear();
        let cache = self.user_frames.entry(pid).or_default();
        for &addr in chain {
            if addr >= CONTEXT_MAX {
                kernel = addr == CONTEXT_KERNEL;
                continue;
            }
            let (frame, jit) = if kernel {
                self.sym.kernel(&mut self.b, addr).map(|f| (f, false))
            } else {
                match cache.get(&(addr, first)) {
                    Some(&known) => Some(known),
                    None => {
                        let found = self.sym.user(&mut self.b, pid, addr, first);
                        if let Some(f) = found {
                            cache.insert((addr, first), f);
                        }
                        found
                    }
                }
            }
            .ok_or(Error::StacksFull)?;
            if jit {
                self.jit_first.push((self.leaf_first.len() as u32, addr));
            }
            first = false;
            self.leaf_first.push(frame);
        }
        if self.leaf_first.is_empty() {
            return Ok(());
        }
        u32::try_from(self.samples.len()).map_err(|_| Error::StacksFull)?;
        self.root_first.clear();
        self.root_first.extend(self.leaf_first.iter().rev());
        let stack = self
            .stacks
            .intern(&self.root_first, self.jit_first.is_empty())
            .ok_or(Error::StacksFull)?;
        let last = self.leaf_first.len() as u32 - 1;
        for &(at, addr) in &self.jit_first {
            let next = self.jit.addresses.len() as u32;
            let key = *self.jit.keys.entry((pid, addr)).or_insert(next);
            if key == next {
                self.jit.addresses.push((pid, addr));
            }
            self.jit.uses.push((stack, last - at, key));
        }
        self.samples.push(Taken {
            stack,
            event: u32::try_from(event).unwrap_or(u32::MAX),
            thread: UNTIMED,
            period,
            time: 0,
        });
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
            mut stacks,
            threads,
            comms,
            jit,
            ..
        } = self;
        let warnings = name_jit_frames(&mut b, &mut stacks, jit)?;
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
        // Each distinct stack's costs, then the stack itself, in the order
        // the samples first had them.
        let event = |t: &Taken| (t.event as usize).min(n - 1);
        let mut sums = vec![0u64; stacks.len() * n];
        for t in &samples {
            let sum = &mut sums[t.stack as usize * n + event(t)];
            *sum = sum.checked_add(t.period).ok_or(Error::StacksOverflow)?;
        }
        let mut made = Vec::with_capacity(stacks.len());
        for i in 0..stacks.len() {
            let at = b
                .stacks_mut()
                .add_labelled_at(stacks.get(i), LabelSetId::NONE, &sums[i * n..(i + 1) * n])
                .ok_or(Error::StacksOverflow)?;
            made.push(u32::try_from(at).map_err(|_| Error::StacksOverflow)?);
        }
        drop(sums);
        let mut costs = vec![0u64; n];
        for t in samples.iter().filter(|t| t.thread != UNTIMED) {
            costs[event(t)] = t.period;
            b.stacks_mut()
                .timeline
                .get_or_insert_with(|| Box::new(Timeline::new(n)))
                .push(t.time, t.thread, made[t.stack as usize], &costs);
            costs[event(t)] = 0;
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
        let mut profile = b.finish(events).ok_or(Error::StacksOverflow)?;
        if let Some(part) = profile.parts.first_mut() {
            for w in warnings {
                part.info
                    .desc
                    .push((b"Warning".to_vec(), format!(" {w}").into_bytes()));
            }
        }
        Ok(profile)
    }
}

/// Reads the perf maps and jitdump files of the processes with frames a
/// JIT may have compiled, and puts the frames they name in `samples`;
/// returns the warnings about bad lines and records of those files.
fn name_jit_frames(
    b: &mut StackProfile,
    stacks: &mut LocalStacks,
    jit: JitPending,
) -> Result<Vec<String>, Error> {
    let mut warnings = Vec::new();
    if jit.addresses.is_empty() {
        return Ok(warnings);
    }
    let mut maps: FxHashMap<i32, JitSymbols> = FxHashMap::default();
    let mut pids: Vec<i32> = jit.addresses.iter().map(|&(pid, _)| pid).collect();
    pids.sort_unstable();
    pids.dedup();
    for pid in pids.into_iter().filter(|&p| p > 0) {
        let mut symbols = JitSymbols::new();
        let map = jit.map_dir.join(format!("perf-{pid}.map"));
        if let Ok(text) = std::fs::read(&map) {
            symbols.read_perf_map(&map, &text, &mut warnings);
        }
        // Read after the map, so that its functions win where both name
        // an address: a jitdump also follows code the JIT moves.
        for dump in jit.dumps.get(&pid).into_iter().flatten() {
            if let Ok(bytes) = std::fs::read(dump) {
                symbols.read_jitdump(dump, &bytes, &mut warnings);
            }
        }
        if !symbols.is_empty() {
            maps.insert(pid, symbols);
        }
    }
    if maps.is_empty() {
        return Ok(warnings);
    }
    let mut named: Vec<Option<FrameId>> = Vec::with_capacity(jit.addresses.len());
    for &(pid, addr) in &jit.addresses {
        let frame = match maps.get(&pid) {
            Some(symbols) => Symbolizer::jit(b, symbols, pid, addr).transpose()?,
            None => None,
        };
        named.push(frame);
    }
    for (stack, at, key) in jit.uses {
        if let Some(frame) = named[key as usize] {
            stacks.get_mut(stack as usize)[at as usize] = frame;
        }
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(p: &Profile<u64>) -> Vec<(String, String, u64)> {
        let stacks = p.stacks.as_ref().unwrap();
        let mut out: Vec<(String, String, u64)> = stacks
            .samples
            .iter()
            .map(|s| {
                let f = stacks.frames[s.frames.last().unwrap().index()].function;
                (
                    String::from_utf8_lossy(p.names.function_object(f)).into_owned(),
                    String::from_utf8_lossy(p.names.function_name(f)).into_owned(),
                    s.costs[0],
                )
            })
            .collect();
        out.sort();
        out
    }

    #[test]
    fn jit_maps_written_after_the_samples_name_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SampledStacks::new(Positions::INSTR_LINE, b"test", None);
        s.set_perf_map_dir(dir.path());
        s.mmap(4242, 0x7000_0000, 0x10_0000, 0x7000_0000, b"//anon");
        // The jitdump's own mapping holds no code: it only says where the
        // file is.
        let dump = dir.path().join("jit-4242.dump");
        s.mmap(
            4242,
            0x6000_0000,
            0x1000,
            0,
            dump.to_str().unwrap().as_bytes(),
        );
        // In anonymous memory, in no mapping at all, and in another
        // process without maps.
        s.sample(4242, false, &[0x7000_0010], 0, 5).unwrap();
        s.sample(4242, false, &[0x9000_0004, 0x7000_0010], 0, 3)
            .unwrap();
        s.sample(4242, false, &[0x7000_0100], 0, 2).unwrap();
        s.sample(77, false, &[0x7000_0010], 0, 1).unwrap();
        // Written after the samples were taken; one bad line.
        std::fs::write(
            dir.path().join("perf-4242.map"),
            "70000000 40 JS:*hot\n90000000 8 stub\nbad line\n",
        )
        .unwrap();
        // A jitdump naming 0x70000100: its header, then one load.
        let mut d = Vec::new();
        for w in [0x4A69_5444u32, 1, 40, 62, 0, 4242] {
            d.extend(w.to_le_bytes());
        }
        d.extend([0u8; 16]);
        let name = b"Lcom/X;::run\0";
        d.extend(0u32.to_le_bytes());
        d.extend(((16 + 40 + name.len()) as u32).to_le_bytes());
        d.extend([0u8; 8]);
        d.extend([0u8; 8]);
        for w in [0x7000_0100u64, 0x7000_0100, 0x20, 1] {
            d.extend(w.to_le_bytes());
        }
        d.extend(name);
        std::fs::write(&dump, d).unwrap();
        let p = s.finish(vec!["cycles".into()]).unwrap();
        let jit = "[JIT] tid 4242".to_string();
        assert_eq!(
            names(&p),
            vec![
                (jit.clone(), "JS:*hot".into(), 5),
                (jit.clone(), "Lcom/X;::run".into(), 2),
                (jit.clone(), "stub".into(), 3),
                // Process 77 wrote no map.
                ("[unknown]".into(), "[unknown]".into(), 1),
            ]
        );
        // The caller of the stub is named too.
        let stacks = p.stacks.as_ref().unwrap();
        let two = stacks.samples.iter().find(|s| s.frames.len() == 2).unwrap();
        let caller = stacks.frames[two.frames[0].index()];
        assert_eq!(p.names.function_name(caller.function), b"JS:*hot");
        assert_eq!(caller.address, 0x7000_0010);
        let desc = &p.parts[0].info.desc;
        assert_eq!(desc.len(), 1, "{desc:?}");
        let warning = String::from_utf8_lossy(&desc[0].1).into_owned();
        assert!(
            warning.contains("perf-4242.map: line 3: not `START SIZE NAME`"),
            "{warning}"
        );
    }

    #[test]
    fn a_new_mapping_renames_the_addresses_it_covers() {
        // The frames of addresses are kept per process until its mappings
        // change: a mapping over the same range, or an exec, must name
        // the same address anew, and another process keeps its own.
        let exe = std::env::current_exe().unwrap();
        let file = tally_symbols::ObjectFile::open(&exe).unwrap();
        let (start, end, offset) = file.code_ranges().max_by_key(|&(s, e, _)| e - s).unwrap();
        let addr = (start..end)
            .find(|&a| file.symbol_at(a).is_some() && file.code_label_at(a).is_none())
            .expect("a function");
        let function = file.symbol_at(addr).unwrap().perf_name().to_string();
        let at = 0x40_0000 + (addr - start);
        let path = exe.to_str().unwrap().as_bytes();
        let mut s = SampledStacks::new(Positions::INSTR_LINE, b"test", None);
        s.mmap(1, 0x40_0000, end - start, offset, path);
        s.mmap(2, 0x40_0000, end - start, offset, path);
        s.sample(1, false, &[at], 0, 1).unwrap();
        s.sample(2, false, &[at], 0, 2).unwrap();
        s.mmap(1, 0x40_0000, end - start, 0, b"//anon");
        s.sample(1, false, &[at], 0, 4).unwrap();
        s.sample(2, false, &[at], 0, 8).unwrap();
        s.exec(2);
        s.sample(2, false, &[at], 0, 16).unwrap();
        let p = s.finish(Vec::new()).unwrap();
        let object = exe.to_string_lossy().into_owned();
        assert_eq!(
            names(&p),
            vec![
                ("//anon".into(), "[unknown]".into(), 4),
                (object, function, 1 + 2 + 8),
                ("[unknown]".into(), "[unknown]".into(), 16),
            ]
        );
    }

    #[test]
    fn code_without_symbols_is_named_by_page() {
        // The test binary itself: its code ranges are real, and an
        // the padding after a function is covered by no symbol.
        let exe = std::env::current_exe().unwrap();
        let file = tally_symbols::ObjectFile::open(&exe).unwrap();
        let (start, end, offset) = file.code_ranges().max_by_key(|&(s, e, _)| e - s).unwrap();
        let addr = (start..end)
            .rev()
            .find(|&a| file.symbol_at(a).is_none() && file.code_label_at(a).is_none())
            .expect("padding after some function");
        let mut s = SampledStacks::new(Positions::INSTR_LINE, b"test", None);
        let path = exe.to_str().unwrap().as_bytes();
        s.mmap(1, 0x40_0000, end - start, offset, path);
        s.sample(1, false, &[0x40_0000 + (addr - start)], 0, 1)
            .unwrap();
        let p = s.finish(Vec::new()).unwrap();
        let page = addr & !0xfff;
        let before = file.symbol_before(page).map(|b| {
            assert!(b.address <= page);
            format!(" {}+{:#x}", b.perf_name(), page - b.address)
        });
        let (_, name, _) = &names(&p)[0];
        assert_eq!(*name, format!("[{page:#x}]{}", before.unwrap_or_default()));
    }
}
