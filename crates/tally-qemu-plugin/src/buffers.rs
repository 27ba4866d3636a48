//! Where records go: a buffer per vCPU, written to the stream in whole
//! buffers, and the stream itself.
//!
//! A vCPU's buffer is one of three kinds. With `shm=FD` and `free=FD`, the
//! shared file's slots are a pool (see `tally_sim::trace::shared`): the
//! first half as many vCPUs as there are slots take a slot from the pool,
//! hand it over full with a slot record in the stream, and take another
//! that tally handed back through the `free=` pipe. With `shm=` alone, the
//! first vCPUs each own a slot, written to the stream when full. The rest
//! are on the heap. A slot's pending-byte count is updated after every
//! record, so that tally finds the records not yet handed over when QEMU
//! dies without running the exit callback.
//!
//! vCPUs past [`MAX_VCPUS`] share one locked buffer ([`Overflow`]). A
//! buffer from a different vCPU than the last one written is preceded by a
//! thread record in the stream.

use crate::records;
use std::ffi::c_uint;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use tally_sim::trace::T_END;
use tally_sim::trace::shared::{self, HEADER as SHM_HEADER, MAGIC as SHM_MAGIC};

/// Bytes a vCPU buffers before writing (a slot's, see `shared`).
pub(crate) const FLUSH_AT: usize = shared::FLUSH_AT;
/// Room in a buffer: a flush starts at `FLUSH_AT`; no record is longer
/// than the rest. A slot of the shared file holds as much.
pub(crate) const BUF_CAP: usize = shared::CAPACITY;
// The records written as words take 12 bytes.
const _: () = assert!(BUF_CAP >= FLUSH_AT + 12);
/// vCPUs with their own buffer; later ones share a locked slow path.
pub(crate) const MAX_VCPUS: usize = 1024;
/// [`Buf::slot`] of a buffer that is not a slot of the pool.
const NO_SLOT: u32 = u32::MAX;

/// The shared state behind the output: the stream, the last vCPU written,
/// the next instruction id, and the guest ranges already reported.
pub(crate) struct Out {
    /// The stream (a pipe to tally, or a file).
    pub file: File,
    /// The vCPU whose records the stream holds last.
    pub last_vcpu: u32,
    /// The id of the next instruction declared.
    pub next_id: u32,
    /// Guest ranges whose mapping the stream has.
    pub known: Vec<(u64, u64)>,
    /// Writing failed (tally is gone): nothing more is written.
    pub failed: bool,
    /// The in-process simulation the records go to instead (`inprocess=on`).
    #[cfg(feature = "inprocess")]
    pub sim: Option<crate::inprocess::Sim>,
}

impl Out {
    /// The output into `file`, nothing written yet.
    pub(crate) fn new(file: File) -> Out {
        Out {
            file,
            last_vcpu: 0,
            next_id: 0,
            known: Vec::new(),
            failed: false,
            #[cfg(feature = "inprocess")]
            sim: None,
        }
    }

    /// Writes `bytes` to the stream (or, in process, simulates them);
    /// `false` if that failed.
    pub(crate) fn put(&mut self, bytes: &[u8]) -> bool {
        #[cfg(feature = "inprocess")]
        if let Some(sim) = self.sim.as_mut() {
            if let Err(e) = sim.put(bytes) {
                crate::say(&format!("in-process simulation: {e}"));
                return false;
            }
            return true;
        }
        self.file.write_all(bytes).is_ok()
    }
}

/// The output, once installed.
pub(crate) static OUT: Mutex<Option<Out>> = Mutex::new(None);

/// Writes vCPU `vcpu`'s `bytes` to the stream, behind a thread record if
/// the last bytes written were another vCPU's.
pub(crate) fn write_out(out: &mut Out, vcpu: u32, bytes: &[u8]) {
    if out.failed || bytes.is_empty() {
        return;
    }
    let mut ok = true;
    if vcpu != out.last_vcpu {
        ok = out.put(&records::thread(vcpu));
        out.last_vcpu = vcpu;
    }
    if !ok || !out.put(bytes) {
        // The reader is gone (tally stopped): keep the program running,
        // stop recording.
        out.failed = true;
    }
}

/// Set in a forked child: it records nothing (the stream is the parent's).
pub(crate) static SILENT: AtomicBool = AtomicBool::new(false);
/// The stream's and the free-slot pipe's descriptors (-1: none), which a
/// forked child closes: a child that outlives the program must not keep
/// tally waiting for the stream's end.
pub(crate) static STREAM_FD: AtomicI32 = AtomicI32::new(-1);
pub(crate) static FREE_FD: AtomicI32 = AtomicI32::new(-1);

/// A vCPU's buffer: `BUF_CAP` bytes at `data`, in the shared file (then
/// `published` is its pending-byte count there) or on the heap.
pub(crate) struct Buf {
    data: *mut u8,
    /// Bytes of records in it; below `FLUSH_AT` between records.
    pub len: usize,
    published: *const AtomicU64,
    /// The pool slot it is (`NO_SLOT`: a slot of its own, or the heap).
    slot: u32,
}

static BUFS: [AtomicPtr<Buf>; MAX_VCPUS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_VCPUS];
/// The shared file's mapping: start (0 if none), size, slot count.
pub(crate) static SHM_BASE: AtomicUsize = AtomicUsize::new(0);
pub(crate) static SHM_SIZE: AtomicUsize = AtomicUsize::new(0);
/// The shared file's descriptor (-1: none), kept for a forked child to
/// copy the file from.
pub(crate) static SHM_FD: AtomicI32 = AtomicI32::new(-1);
static SHM_SLOTS: AtomicUsize = AtomicUsize::new(0);
/// The hit counts in the shared file (`hits=on`): two per stream id,
/// reads then writes, for `HIT_IDS` ids; null without them.
pub(crate) static HITS: AtomicPtr<u64> = AtomicPtr::new(std::ptr::null_mut());
pub(crate) static HIT_IDS: AtomicUsize = AtomicUsize::new(0);
/// The pipe tally hands free slots back through (`free=`): with it the
/// shared file's slots are a pool (see `tally_sim::trace::shared`).
static FREE: Mutex<Option<File>> = Mutex::new(None);
/// Set once at start when there is a pool (the pipe may close later).
static POOLED: AtomicBool = AtomicBool::new(false);

/// The buffer vCPUs past `MAX_VCPUS` share, and whose records it holds.
pub(crate) struct Overflow {
    bytes: Vec<u8>,
    vcpu: u32,
}

static OVERFLOW: Mutex<Overflow> = Mutex::new(Overflow {
    bytes: Vec::new(),
    vcpu: u32::MAX,
});

/// The buffer of `vcpu`, created on first use: a slot of the pool (for
/// the first half as many vCPUs as there are slots, so that slots always
/// come back), else its own slot of the shared file if it has one, else
/// on the heap.
#[cold]
fn new_buffer(vcpu: usize) -> *mut Buf {
    let base = SHM_BASE.load(Ordering::Acquire);
    let slots = SHM_SLOTS.load(Ordering::Acquire);
    let pooled = vcpu < slots / 2 && !SILENT.load(Ordering::Relaxed);
    let buf = match if pooled { take_slot(false) } else { None } {
        Some(b) => b,
        None if base != 0 && vcpu < slots && !POOLED.load(Ordering::Relaxed) => Buf {
            slot: NO_SLOT,
            ..slot_buffer(base, vcpu)
        },
        None => heap_buffer(),
    };
    Box::into_raw(Box::new(buf))
}

/// A buffer on the heap (never freed: buffers live as long as QEMU).
pub(crate) fn heap_buffer() -> Buf {
    Buf {
        data: Box::leak(vec![0u8; BUF_CAP].into_boxed_slice()).as_mut_ptr(),
        len: 0,
        published: std::ptr::null(),
        slot: NO_SLOT,
    }
}

/// Slot `k` of the shared file mapped at `base`, as a buffer.
fn slot_buffer(base: usize, k: usize) -> Buf {
    let slot = base + SHM_HEADER + k * shared::SLOT;
    Buf {
        data: (slot + 8) as *mut u8,
        len: 0,
        published: slot as *const AtomicU64,
        slot: k as u32,
    }
}

/// A free slot of the pool; `None` without a pool, once tally is gone,
/// or, unless `wait`, if none is free now. Waiting is only for a thread
/// that has just handed a slot over: it gets one back when tally has read
/// it, whatever other threads hold.
fn take_slot(wait: bool) -> Option<Buf> {
    use std::io::Read;
    let base = SHM_BASE.load(Ordering::Acquire);
    let slots = SHM_SLOTS.load(Ordering::Acquire);
    let mut g = FREE.lock().unwrap_or_else(|e| e.into_inner());
    let f = g.as_mut()?;
    let mut n = [0u8; 4];
    let k = loop {
        match f.read(&mut n) {
            Ok(4) => break u32::from_le_bytes(n),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if !wait {
                    return None;
                }
                let mut p = libc::pollfd {
                    fd: f.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                unsafe { libc::poll(&mut p, 1, -1) };
            }
            // The end (tally is gone) or a broken pipe.
            _ => {
                *g = None;
                return None;
            }
        }
    };
    if base == 0 || k as usize >= slots {
        *g = None;
        return None;
    }
    Some(slot_buffer(base, k as usize))
}

/// The buffer of `vcpu` (`None` past `MAX_VCPUS`), made on first use.
#[inline]
pub(crate) fn buffer(vcpu: c_uint) -> Option<&'static mut Buf> {
    let slot = BUFS.get(vcpu as usize)?;
    let mut p = slot.load(Ordering::Acquire);
    if p.is_null() {
        p = new_buffer(vcpu as usize);
        slot.store(p, Ordering::Release);
    }
    // SAFETY: in user mode a vCPU is one guest thread, run by one host
    // thread at a time, so only that thread touches its buffer (and the
    // exit path, after the guest has stopped).
    Some(unsafe { &mut *p })
}

/// Whether vCPU `vcpu`'s buffer is made.
pub(crate) fn has_buffer(vcpu: usize) -> bool {
    !BUFS[vcpu].load(Ordering::Acquire).is_null()
}

impl Buf {
    /// The records in the buffer.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `data` holds `BUF_CAP >= len` bytes, `len` of them written.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    /// Sets the length, and publishes it in the shared file.
    pub(crate) fn set_len(&mut self, len: usize) {
        self.len = len;
        if !self.published.is_null() {
            // SAFETY: an aligned u64 in the shared mapping, live for the run.
            unsafe { (*self.published).store(len as u64, Ordering::Release) };
        }
    }

    /// Appends `bytes`.
    ///
    /// # Safety
    /// `self.len < FLUSH_AT` (and `N <= BUF_CAP - FLUSH_AT`, checked when
    /// compiled).
    #[inline(always)]
    pub(crate) unsafe fn push<const N: usize>(&mut self, bytes: &[u8; N]) {
        const { assert!(N <= BUF_CAP - FLUSH_AT) };
        // SAFETY: the caller's promise leaves `N` bytes of room at `len`.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.data.add(self.len), N);
        }
        self.set_len(self.len + N);
    }

    /// Appends a record of `n` bytes given as the words `a` (8 bytes at 0)
    /// and `b` (4 bytes at 8, stored only if `n > 8`), of which the
    /// record's bytes are the first `n` little-endian ones (the rest is
    /// overwritten by the next record). See [`records`].
    ///
    /// # Safety
    /// `self.len < FLUSH_AT` and `n <= 12`.
    #[inline(always)]
    pub(crate) unsafe fn push_words(&mut self, n: usize, a: u64, b: u32) {
        // (The length in a local: the stores below could alias it.)
        let len = self.len;
        // SAFETY: `BUF_CAP - FLUSH_AT` leaves room for the 12 bytes written
        // at `len < FLUSH_AT`; a record of at most 8 bytes needs only the
        // first word.
        unsafe {
            let at = self.data.add(len);
            std::ptr::write_unaligned(at as *mut u64, a.to_le());
            if n > 8 {
                std::ptr::write_unaligned(at.add(8) as *mut u32, b.to_le());
            }
        }
        self.set_len(len + n);
    }
}

/// Hands the buffer's records on: a pool slot is announced in the stream
/// and, if `refill`, replaced by a free one; other buffers are written.
pub(crate) fn flush(vcpu: u32, buf: &mut Buf, refill: bool) {
    if SILENT.load(Ordering::Relaxed) {
        buf.len = 0;
        return;
    }
    if buf.slot == NO_SLOT {
        if let Ok(mut g) = OUT.lock()
            && let Some(out) = g.as_mut()
        {
            write_out(out, vcpu, buf.bytes());
        }
        buf.set_len(0);
        return;
    }
    if buf.len == 0 {
        return;
    }
    // Zeroed first: a count left in the file means records not yet in the
    // stream.
    let r = records::slot(buf.slot, buf.len as u32);
    buf.set_len(0);
    if let Ok(mut g) = OUT.lock()
        && let Some(out) = g.as_mut()
    {
        write_out(out, vcpu, &r);
    }
    if refill {
        *buf = take_slot(true).unwrap_or_else(heap_buffer);
    }
}

/// Records `bytes` for vCPU `vcpu`.
#[inline(always)]
pub(crate) fn record<const N: usize>(vcpu: c_uint, bytes: &[u8; N]) {
    match buffer(vcpu) {
        Some(buf) => {
            // SAFETY: `len < FLUSH_AT` before a record, and no record is
            // longer than `BUF_CAP - FLUSH_AT`.
            unsafe { buf.push(bytes) };
            if buf.len >= FLUSH_AT {
                flush(vcpu, buf, true);
            }
        }
        None => record_overflow(vcpu, bytes),
    }
}

/// Records a record of `n` bytes given as words (see
/// [`Buf::push_words`]) for vCPU `vcpu`. The hot callbacks record through
/// this rather than [`record`]: a record assembled byte by byte on the
/// stack and copied reads back words just written in pieces, which stalls
/// the store buffer, and that stall was most of the plugin's time.
#[inline(always)]
pub(crate) fn record_words(vcpu: c_uint, n: usize, a: u64, b: u32) {
    match buffer(vcpu) {
        Some(buf) => {
            let len = buf.len;
            // SAFETY: `len < FLUSH_AT` before a record (a flush follows
            // any that ends at or past it), and no record is over 12 bytes.
            unsafe { buf.push_words(n, a, b) };
            if len + n >= FLUSH_AT {
                flush(vcpu, buf, true);
            }
        }
        None => {
            let mut r = [0u8; 12];
            r[..8].copy_from_slice(&a.to_le_bytes());
            r[8..].copy_from_slice(&b.to_le_bytes());
            record_overflow(vcpu, &r[..n]);
        }
    }
}

/// vCPUs past MAX_VCPUS share one buffer, written whenever another of
/// them records.
#[cold]
fn record_overflow(vcpu: c_uint, bytes: &[u8]) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    let mut o = OVERFLOW.lock().unwrap_or_else(|e| e.into_inner());
    let prev = std::mem::replace(&mut o.vcpu, vcpu);
    if prev != vcpu {
        let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = g.as_mut() {
            write_out(out, prev, &o.bytes);
        }
        o.bytes.clear();
    }
    o.bytes.extend_from_slice(bytes);
    if o.bytes.len() >= FLUSH_AT {
        let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = g.as_mut() {
            write_out(out, vcpu, &o.bytes);
        }
        o.bytes.clear();
    }
}

/// The guest has stopped: every buffer is handed on, then the end record
/// written.
pub(crate) fn flush_all() {
    for (vcpu, slot) in BUFS.iter().enumerate() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: see `buffer`; the guest has stopped.
            flush(vcpu as u32, unsafe { &mut *p }, false);
        }
    }
    // Locks in the order `record_overflow` takes them.
    let o = OVERFLOW.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = g.as_mut() {
        write_out(out, o.vcpu, &o.bytes);
        if !out.failed {
            let _ = out.put(&[T_END]);
            let _ = out.file.flush();
        }
    }
}

/// The process is about to fork: every buffer is handed on (pool slots
/// replaced by free ones), so that what the stream holds is all that ran
/// before the fork, and what follows is the parent's alone; then `mark`
/// (the fork record) is written.
pub(crate) fn flush_for_fork(mark: &[u8]) {
    for (vcpu, slot) in BUFS.iter().enumerate() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: see `buffer`; QEMU has stopped every other vCPU for
            // the fork.
            flush(vcpu as u32, unsafe { &mut *p }, true);
        }
    }
    let mut o = OVERFLOW.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = g.as_mut() {
        write_out(out, o.vcpu, &o.bytes);
        o.bytes.clear();
        if !out.failed && !out.put(mark) {
            out.failed = true;
        }
    }
}

/// Hands vCPU `vcpu`'s buffer on, then writes `mark` (the execve record).
pub(crate) fn flush_one(vcpu: c_uint, mark: &[u8]) {
    if let Some(buf) = buffer(vcpu) {
        flush(vcpu, buf, false);
    }
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = g.as_mut()
        && !out.failed
    {
        let _ = out.put(mark);
    }
}

/// The pool slots the vCPUs' buffers are.
pub(crate) fn held_slots() -> Vec<u32> {
    BUFS.iter()
        .filter_map(|b| {
            // SAFETY: see `buffer`; only read in a forked child, where no
            // other thread runs.
            let b = unsafe { b.load(Ordering::Acquire).as_ref() }?;
            (b.slot != NO_SLOT).then_some(b.slot)
        })
        .collect()
}

/// In a forked child: the stream goes to `stream` (its magic bytes written
/// first) and free slots come from `free`, the parent's are closed.
pub(crate) fn switch_streams(stream: File, free: File) -> std::io::Result<()> {
    let mut stream = keep_out_of_the_guests_way(stream)?;
    let free = keep_out_of_the_guests_way(free)?;
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(free.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    stream.write_all(tally_sim::trace::MAGIC)?;
    STREAM_FD.store(stream.as_raw_fd(), Ordering::Relaxed);
    FREE_FD.store(free.as_raw_fd(), Ordering::Relaxed);
    *FREE.lock().unwrap_or_else(|e| e.into_inner()) = Some(free);
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = g.as_mut() {
        out.file = stream;
    }
    Ok(())
}

/// Moves a descriptor to a high number, closed on exec: the guest shares
/// QEMU's descriptor table, and expects 3 and up to be free; programs it
/// runs must not hold the stream open; and daemons close every descriptor
/// below their limit (`for (fd = 3; fd < 1024; fd++) close(fd)`). So the
/// descriptor goes near the hard limit (at most [`HIGH_FD`]): the soft
/// limit is raised to make room and put back at once, which leaves
/// descriptors above it open. Without room above the soft limit it goes
/// just below it.
pub(crate) fn keep_out_of_the_guests_way(file: File) -> std::io::Result<File> {
    // SAFETY: getrlimit/setrlimit on our own process with a valid struct;
    // duplicating a descriptor we own.
    let fd = unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        let got = libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0;
        let top = if got { lim.rlim_max.min(HIGH_FD) } else { 1024 };
        let raised = got
            && top > lim.rlim_cur
            && libc::setrlimit(
                libc::RLIMIT_NOFILE,
                &libc::rlimit {
                    rlim_cur: top,
                    rlim_max: lim.rlim_max,
                },
            ) == 0;
        let limit = if raised || !got {
            top
        } else {
            lim.rlim_cur.min(top)
        };
        let fd = libc::fcntl(
            file.as_raw_fd(),
            libc::F_DUPFD_CLOEXEC,
            limit.saturating_sub(HIGH_FDS).max(3) as libc::c_int,
        );
        let err = std::io::Error::last_os_error();
        if raised {
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        if fd < 0 {
            return Err(err);
        }
        fd
    };
    drop(file);
    // SAFETY: `fd` is a new descriptor, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// The highest descriptor number the plugin's are put near: a descriptor
/// table that large costs QEMU's process half a megabyte.
const HIGH_FD: libc::rlim_t = 65536;
/// Room below the top for the plugin's descriptors.
const HIGH_FDS: libc::rlim_t = 16;

/// Maps the shared buffer file tally made (descriptor `fd`, handed to the
/// plugin) and checks its header.
pub(crate) fn map_shared(fd: i32) -> Result<(), String> {
    // SAFETY: the caller handed this descriptor to the plugin.
    let f =
        keep_out_of_the_guests_way(unsafe { File::from_raw_fd(fd) }).map_err(|e| e.to_string())?;
    let size = f.metadata().map_err(|e| e.to_string())?.len() as usize;
    if size < SHM_HEADER {
        return Err("too small".into());
    }
    // SAFETY: mapping a file we own, shared, for the life of the process.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: `size >= SHM_HEADER` bytes are mapped at `base`.
    let head = unsafe { std::slice::from_raw_parts(base as *const u8, SHM_HEADER) };
    let slots = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let slot = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
    if &head[..8] != SHM_MAGIC || slot != shared::SLOT || SHM_HEADER + slots * slot > size {
        return Err("not a tally buffer file of this version".into());
    }
    SHM_SIZE.store(size, Ordering::Release);
    SHM_SLOTS.store(slots.min(MAX_VCPUS), Ordering::Release);
    // The hit counts, after the slots (`hits=on`).
    let hits = SHM_HEADER + slots * slot;
    if size >= hits + 16 {
        HIT_IDS.store((size - hits) / 16, Ordering::Relaxed);
        HITS.store((base as usize + hits) as *mut u64, Ordering::Relaxed);
    }
    SHM_BASE.store(base as usize, Ordering::Release);
    SHM_FD.store(std::os::fd::IntoRawFd::into_raw_fd(f), Ordering::Relaxed);
    Ok(())
}

/// Makes the shared file's slots a pool, with tally handing free slots
/// back through the pipe `fd` (handed to the plugin).
pub(crate) fn use_pool(fd: i32) -> std::io::Result<()> {
    // SAFETY: the caller handed this descriptor to the plugin.
    let f = keep_out_of_the_guests_way(unsafe { File::from_raw_fd(fd) })?;
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
    FREE_FD.store(f.as_raw_fd(), Ordering::Relaxed);
    *FREE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
    POOLED.store(true, Ordering::Relaxed);
    Ok(())
}
