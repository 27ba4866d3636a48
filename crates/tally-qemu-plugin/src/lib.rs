//! A QEMU user-mode TCG plugin (plugin API version 1, QEMU 7.2 and later)
//! that streams what the guest executes to `tally sim`: every executed
//! instruction and every memory access, in the binary trace format that
//! `tally_sim::trace` documents and reads.
//!
//! Arguments (`-plugin libtally_qemu_plugin.so,fd=N` or `,out=PATH`): where
//! the stream goes; `mem=off` leaves memory accesses out (for runs that
//! count executions only); `d1=SIZE:ASSOC:LINE` (and `d1policy=`, as
//! `tally sim --policy` takes it: LRU by default) simulates the
//! first-level data cache here (`tally_sim::filter`): a hit is written as
//! two bytes, only a miss with its address, so that tally, simulating the
//! rest in another process while the program runs, has a tenth of the
//! accesses to decode and none to look up in D1. (Built with the
//! `inprocess` feature, `inprocess=on` simulates everything inside QEMU
//! instead and prints the totals: see `inprocess`.)
//!
//! The filter simulates the accesses of vCPU 0. When a second vCPU starts
//! (in QEMU 7.2 its init callback runs in the thread that creates it,
//! before it runs), the filter writes D1's state into the stream and stops;
//! every access is then written whole again, for tally to simulate. (A
//! QEMU that initializes the new vCPU in its own thread makes the handover
//! wait for vCPU 0's next callback; accesses of the new thread before it
//! are simulated by tally on the D1 it had.)
//!
//! Each run of a block is one record (its first instruction id and length:
//! the ids of a block are consecutive), and each memory access one record
//! naming its instruction's index in the block; blocks over 255
//! instructions get a record per instruction instead.
//!
//! Records are buffered per vCPU and written in whole buffers; a buffer
//! from a different vCPU than the last one is preceded by a thread record.
//! With `shm=FD` (a file tally made) the buffers of the first vCPUs live in
//! that file, each behind a length that is updated after every record, so
//! when QEMU dies without running the exit callback (the guest crashed or
//! was killed by a signal) tally still finds the records not yet written.
//! Instruction declarations (address, size, bytes) are written as soon as a
//! block is translated, before any execution of it can be written. When a
//! block lies outside every mapping already reported, the plugin reads the
//! host's `/proc/self/maps` and reports the file mapping that holds it, in
//! guest addresses (`guest = host - guest_base`, where `guest_base` is the
//! difference between an instruction's host and guest addresses).

#[cfg(feature = "inprocess")]
mod inprocess;

use qemu_plugin_sys::*;
use std::ffi::{CStr, c_char, c_int, c_uint, c_void};
use std::fs::File;
use std::io::Write;
use std::os::fd::FromRawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use tally_sim::Policy;
use tally_sim::filter::{self, D1Filter, Filtered, LAST_EXECUTED, Step};

/// Stream tags; kept equal to `tally_sim::trace`.
const MAGIC: &[u8; 8] = b"TALLYTR1";
const T_DECL: u8 = 1;
const T_EXEC: u8 = 2;
const T_LOAD: u8 = 3;
const T_STORE: u8 = 4;
const T_MAP: u8 = 5;
const T_END: u8 = 6;
const T_THREAD: u8 = 7;
const T_BLOCK: u8 = 8;
const T_LOAD_AT: u8 = 9;
const T_STORE_AT: u8 = 10;
const T_SLOT: u8 = 11;
const T_READ_HIT: u8 = 12;
const T_WRITE_HIT: u8 = 13;
const T_READ_MISS: u8 = 14;
const T_WRITE_MISS: u8 = 15;
const T_SHORT_HIT: u8 = 128;
const T_BLOCK_AFTER: u8 = 18;
const T_PROGRESS: u8 = 19;
/// Longest block written as one block record; longer ones (rare) get a
/// record per instruction.
const MAX_BLOCK: usize = 255;

/// Bytes a vCPU buffers before writing.
const FLUSH_AT: usize = 1 << 18;
/// vCPUs with their own buffer; later ones share a locked slow path.
const MAX_VCPUS: usize = 1024;
/// Room in a buffer: a flush starts at `FLUSH_AT`; no record is longer.
const BUF_CAP: usize = FLUSH_AT + 64;
/// Layout of the `shm=` file, shared with `tally sim`: this magic, the
/// number of slots (u32) and each slot's size (u32), then the slots, each
/// a little-endian u64 count of pending bytes followed by the bytes.
const SHM_MAGIC: &[u8; 8] = b"TALLYSH1";
const SHM_HEADER: usize = 16;

#[unsafe(no_mangle)]
pub static qemu_plugin_version: c_int = QEMU_PLUGIN_VERSION as c_int;

/// The shared state behind the output: the stream, the last vCPU written,
/// the next instruction id, and the guest ranges already reported.
struct Out {
    file: File,
    last_vcpu: u32,
    next_id: u32,
    known: Vec<(u64, u64)>,
    failed: bool,
    #[cfg(feature = "inprocess")]
    sim: Option<inprocess::Sim>,
}

impl Out {
    /// Writes `bytes` to the stream (or, in process, simulates them);
    /// `false` if that failed.
    fn put(&mut self, bytes: &[u8]) -> bool {
        #[cfg(feature = "inprocess")]
        if let Some(sim) = self.sim.as_mut() {
            if let Err(e) = sim.put(bytes) {
                say(&format!("in-process simulation: {e}"));
                return false;
            }
            return true;
        }
        self.file.write_all(bytes).is_ok()
    }
}

/// A vCPU's buffer: `BUF_CAP` bytes at `data`, in the shared file (then
/// `published` is its pending-byte count there) or on the heap.
struct Buf {
    data: *mut u8,
    len: usize,
    published: *const AtomicU64,
    /// The pool slot it is (`NO_SLOT`: a slot of its own, or the heap).
    slot: u32,
}

const NO_SLOT: u32 = u32::MAX;

static OUT: Mutex<Option<Out>> = Mutex::new(None);
static BUFS: [AtomicPtr<Buf>; MAX_VCPUS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_VCPUS];
/// The shared file's mapping: start (0 if none), size, slot count.
static SHM_BASE: AtomicUsize = AtomicUsize::new(0);
static SHM_SIZE: AtomicUsize = AtomicUsize::new(0);
static SHM_SLOTS: AtomicUsize = AtomicUsize::new(0);
/// `mem=off`: no access records (tally simulates no cache and no branch,
/// so only executions count), which spares QEMU a callback per access.
static NO_MEM: AtomicBool = AtomicBool::new(false);
/// The guest is x86-64 (the filter needs to know its locked instructions).
static X86_64: AtomicBool = AtomicBool::new(false);
/// Set in a forked child: it records nothing (the stream is the parent's).
static SILENT: AtomicBool = AtomicBool::new(false);
/// The pipe tally hands free slots back through (`free=`): with it the
/// shared file's slots are a pool (see `tally_sim::trace::shared`).
static FREE: Mutex<Option<File>> = Mutex::new(None);
/// Set once at start when there is a pool (the pipe may close later).
static POOLED: AtomicBool = AtomicBool::new(false);
static OVERFLOW: Mutex<Vec<u8>> = Mutex::new(Vec::new());
/// The D1 filter (`d1=`), used by vCPU 0 only, while `FILTER_MODE` is
/// `FILTERING`; null without one.
static FILTER: AtomicPtr<Filter> = AtomicPtr::new(std::ptr::null_mut());

/// The filter and where its last access record is in vCPU 0's buffer
/// (which is flushed only before an access record is appended, or after a
/// block or instruction record, so that the last one can be amended).
struct Filter {
    d1: D1Filter,
    last_at: usize,
    /// `hits=on`: hits by block instructions are counted in the shared
    /// file (`HITS`), not written.
    count: bool,
    /// The running block's first id, and one more than the index of its
    /// last access (how far the block ran, for tally).
    first: u32,
    progress: u8,
    /// The count of the hit decided last, while a piece may turn it into a
    /// miss (null: none).
    counted: *mut u64,
    /// `HITS` and `HIT_IDS`, as they were at install.
    hits: *mut u64,
    hit_ids: usize,
}

/// The hit counts in the shared file (`hits=on`): two per stream id,
/// reads then writes, for `HIT_IDS` ids; null without them.
static HITS: AtomicPtr<u64> = AtomicPtr::new(std::ptr::null_mut());
static HIT_IDS: AtomicUsize = AtomicUsize::new(0);

impl Filter {
    /// A block or instruction record follows: the last access is whole.
    #[inline(always)]
    fn boundary(&mut self) {
        self.d1.boundary();
        self.counted = std::ptr::null_mut();
    }

    /// A block starts (`v`: its `on_block` udata) while hits are counted:
    /// its record (tag, first id, length, how far the last block ran; 7
    /// bytes), and the filter's state for it.
    #[inline(always)]
    fn block_after(&mut self, v: u64) -> u64 {
        self.boundary();
        let a = u64::from(T_BLOCK_AFTER) | v | u64::from(self.progress) << 48;
        self.first = (v >> 8) as u32;
        self.progress = 0;
        a
    }

    /// Writes how far the running block ran, if its hits were counted and
    /// tally cannot tell from the stream.
    #[cold]
    fn write_progress(&mut self) {
        if self.count && self.progress != 0 {
            let a = u64::from(T_PROGRESS) | u64::from(self.progress) << 8;
            record_words(FILTER_VCPU, 2, a, 0);
            self.progress = 0;
        }
    }
}
static FILTER_MODE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(NOT_FILTERING);
const NOT_FILTERING: u8 = 0;
const FILTERING: u8 = 1;
/// Another vCPU has started: vCPU 0 hands D1 over at its next callback.
const HANDING_OVER: u8 = 2;
/// The vCPU whose accesses the filter simulates.
const FILTER_VCPU: c_uint = 0;

/// The host thread that runs vCPU 0 (`pthread_self`, 0 until its first
/// block): a thread-local would cost a call per block in a loaded library.
static VCPU0_THREAD: AtomicU64 = AtomicU64::new(0);

/// The filter, for vCPU `vcpu`'s callbacks: `None` unless it is vCPU 0 and
/// the filter is on. A handover asked for is done here.
#[inline(always)]
fn filter(vcpu: c_uint) -> Option<&'static mut Filter> {
    let mode = FILTER_MODE.load(Ordering::Relaxed);
    if mode == NOT_FILTERING {
        return None;
    }
    if vcpu != FILTER_VCPU {
        // A vCPU initialized where the handover could not be done.
        ask_handover();
        return None;
    }
    if mode == HANDING_OVER {
        hand_over();
        return None;
    }
    // SAFETY: set once at install, never freed; only vCPU 0's thread uses
    // it (and the exit path, after the guest has stopped).
    unsafe { FILTER.load(Ordering::Relaxed).as_mut() }
}

#[cold]
fn note_vcpu0_thread() {
    // SAFETY: pthread_self has no preconditions.
    VCPU0_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::Relaxed);
}

/// Writes what the filter decided about an access by vCPU 0: a record
/// appended, or the last one amended.
#[inline(always)]
fn take(f: &mut Filter, step: Step) {
    let (x, mut amend) = match step {
        Step::Nothing => return,
        Step::Emit(x) => (x, false),
        Step::Replace(x) => (x, true),
    };
    let c = std::mem::replace(&mut f.counted, std::ptr::null_mut());
    if !c.is_null() && amend {
        // The hit counted is part of this access (a miss): its record,
        // which there was none of, is appended.
        // SAFETY: a count of `HITS`, only vCPU 0 writes them.
        unsafe { *c -= 1 };
        amend = false;
    }
    if let Filtered::Hit { index, store } = x
        && f.count
        && index != LAST_EXECUTED
    {
        let id = f.first.wrapping_add(u32::from(index)) as usize;
        if id < f.hit_ids {
            count_hit(f, id, index, store);
            return;
        }
    }
    let Some(buf) = buffer(FILTER_VCPU) else {
        return;
    };
    if amend {
        buf.len = f.last_at;
    } else if buf.len >= FLUSH_AT {
        // Every record before this one is final.
        flush(FILTER_VCPU, buf, true);
    }
    let (n, a, b) = match x {
        Filtered::Hit { index, store } if index < 64 => {
            (1, u64::from(T_SHORT_HIT | u8::from(store) << 6 | index), 0)
        }
        Filtered::Hit { index, store } => {
            let tag = if store { T_WRITE_HIT } else { T_READ_HIT };
            (2, u64::from(tag) | u64::from(index) << 8, 0)
        }
        Filtered::Miss {
            index,
            store,
            addr,
            size,
        } => {
            // Tag, index, address (8 bytes), size (2 bytes): 12 bytes.
            let tag = if store { T_WRITE_MISS } else { T_READ_MISS };
            let a = u64::from(tag) | u64::from(index) << 8 | addr << 16;
            (12, a, (addr >> 48) as u32 | u32::from(size) << 16)
        }
    };
    f.last_at = buf.len;
    // SAFETY: `len < FLUSH_AT + 12` here (a flush leaves it 0, and the
    // record amended started below `FLUSH_AT`), and `BUF_CAP - FLUSH_AT`
    // leaves room for the 12 bytes written.
    unsafe {
        let at = buf.data.add(buf.len);
        std::ptr::write_unaligned(at as *mut u64, a.to_le());
        std::ptr::write_unaligned(at.add(8) as *mut u32, b.to_le());
    }
    buf.set_len(buf.len + n);
}

/// Stops the filter, from vCPU 0's thread: its records into the stream,
/// then D1's state, which tally goes on from.
#[cold]
fn hand_over() {
    FAST.store(std::ptr::null_mut(), Ordering::Relaxed);
    FILTER_MODE.store(NOT_FILTERING, Ordering::Relaxed);
    // SAFETY: see `filter`; the mode is off, so this is the last use.
    let Some(f) = (unsafe { FILTER.load(Ordering::Relaxed).as_mut() }) else {
        return;
    };
    f.write_progress();
    if let Some(buf) = buffer(FILTER_VCPU) {
        flush(FILTER_VCPU, buf, true);
    }
    let state = tally_sim::filter::state_record(&f.d1.save());
    if let Ok(mut g) = OUT.lock()
        && let Some(out) = g.as_mut()
    {
        write_out(out, FILTER_VCPU, &state);
    }
}

/// A vCPU starts. In QEMU 7.2 a new one is initialized by the thread that
/// creates it, so if that is vCPU 0's, D1 is handed over at once.
unsafe extern "C" fn on_vcpu_init(_id: qemu_plugin_id_t, vcpu: c_uint) {
    if vcpu == FILTER_VCPU || FILTER_MODE.load(Ordering::Relaxed) == NOT_FILTERING {
        return;
    }
    // SAFETY: pthread_self has no preconditions.
    let me = unsafe { libc::pthread_self() } as u64;
    if VCPU0_THREAD.load(Ordering::Relaxed) == me {
        hand_over();
    } else {
        ask_handover();
    }
}
static OVERFLOW_VCPU: AtomicU32 = AtomicU32::new(u32::MAX);

fn write_out(out: &mut Out, vcpu: u32, bytes: &[u8]) {
    if out.failed || bytes.is_empty() {
        return;
    }
    let mut ok = true;
    if vcpu != out.last_vcpu {
        let mut t = [T_THREAD, 0, 0, 0, 0];
        t[1..].copy_from_slice(&vcpu.to_le_bytes());
        ok = out.put(&t);
        out.last_vcpu = vcpu;
    }
    if !ok || !out.put(bytes) {
        // The reader is gone (tally stopped): keep the program running,
        // stop recording.
        out.failed = true;
    }
}

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

fn heap_buffer() -> Buf {
    Buf {
        data: Box::leak(vec![0u8; BUF_CAP].into_boxed_slice()).as_mut_ptr(),
        len: 0,
        published: std::ptr::null(),
        slot: NO_SLOT,
    }
}

/// Slot `k` of the shared file mapped at `base`, as a buffer.
fn slot_buffer(base: usize, k: usize) -> Buf {
    let slot = base + SHM_HEADER + k * (8 + BUF_CAP);
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
    use std::os::fd::AsRawFd;
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

#[inline]
fn buffer(vcpu: c_uint) -> Option<&'static mut Buf> {
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

impl Buf {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `data` holds `BUF_CAP >= len` bytes, `len` of them written.
        unsafe { std::slice::from_raw_parts(self.data, self.len) }
    }

    fn set_len(&mut self, len: usize) {
        self.len = len;
        if !self.published.is_null() {
            // SAFETY: an aligned u64 in the shared mapping, live for the run.
            unsafe { (*self.published).store(len as u64, Ordering::Release) };
        }
    }
}

/// Hands the buffer's records on: a pool slot is announced in the stream
/// and, if `refill`, replaced by a free one; other buffers are written.
fn flush(vcpu: u32, buf: &mut Buf, refill: bool) {
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
    let mut r = [T_SLOT, 0, 0, 0, 0, 0, 0, 0, 0];
    r[1..5].copy_from_slice(&buf.slot.to_le_bytes());
    r[5..].copy_from_slice(&(buf.len as u32).to_le_bytes());
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

#[inline(always)]
fn record<const N: usize>(vcpu: c_uint, bytes: &[u8; N]) {
    match buffer(vcpu) {
        Some(buf) => {
            // SAFETY: `len < FLUSH_AT` before a record, and no record is
            // longer than `BUF_CAP - FLUSH_AT`.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf.data.add(buf.len), N);
            }
            buf.set_len(buf.len + N);
            if buf.len >= FLUSH_AT {
                flush(vcpu, buf, true);
            }
        }
        None => record_overflow(vcpu, bytes),
    }
}

/// Writes a record of `n` bytes as the words `a` (8 bytes at 0) and `b`
/// (4 bytes at 8, written only if `n > 8`), of which the record's bytes
/// are the first `n` little-endian ones (the rest is overwritten by the
/// next record). The hot callbacks record through this rather than
/// [`record`]: a record assembled byte by byte on the stack and copied
/// reads back words just written in pieces, which stalls the store
/// buffer, and that stall was most of the plugin's time.
#[inline(always)]
fn record_words(vcpu: c_uint, n: usize, a: u64, b: u32) {
    match buffer(vcpu) {
        Some(buf) => {
            // (The length in a local: the stores below could alias it.)
            let len = buf.len;
            // SAFETY: `len < FLUSH_AT` before a record, and `BUF_CAP -
            // FLUSH_AT` leaves room for the 12 bytes written; a record of
            // at most 8 bytes needs only the first word.
            unsafe {
                let at = buf.data.add(len);
                std::ptr::write_unaligned(at as *mut u64, a.to_le());
                if n > 8 {
                    std::ptr::write_unaligned(at.add(8) as *mut u32, b.to_le());
                }
            }
            buf.set_len(len + n);
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
    let prev = OVERFLOW_VCPU.swap(vcpu, Ordering::Relaxed);
    if prev != vcpu {
        let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = g.as_mut() {
            write_out(out, prev, &o);
        }
        o.clear();
    }
    o.extend_from_slice(bytes);
    if o.len() >= FLUSH_AT {
        let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(out) = g.as_mut() {
            write_out(out, vcpu, &o);
        }
        o.clear();
    }
}

unsafe extern "C" fn on_exec(vcpu: c_uint, udata: *mut c_void) {
    if let Some(f) = filter(vcpu) {
        f.boundary();
        f.write_progress();
    }
    let id = udata as usize as u32;
    let mut r = [T_EXEC, 0, 0, 0, 0];
    r[1..].copy_from_slice(&id.to_le_bytes());
    record(vcpu, &r);
}

/// Whether vCPU 0's callbacks may take the fast paths: the filter is on
/// and counts hits, QEMU's access descriptions are known to decode here,
/// vCPU 0's thread is known and its buffer made. Set by the general block
/// callback once all that holds ([`allow_fast`]); cleared with every
/// change of `FILTER_MODE`, so that vCPU 0's next callback goes the
/// general way and hands D1 over. It holds `FILTER` while they may, else
/// null: one load and test per callback.
static FAST: AtomicPtr<Filter> = AtomicPtr::new(std::ptr::null_mut());

#[inline(always)]
fn fast_filter(vcpu: c_uint) -> Option<&'static mut Filter> {
    if vcpu != FILTER_VCPU {
        return None;
    }
    // SAFETY: see `filter`.
    unsafe { FAST.load(Ordering::Relaxed).as_mut() }
}

/// Sets `FAST` if vCPU 0's fast paths may be taken (see there).
#[cold]
fn allow_fast(f: &Filter) {
    let ok = f.count
        && FILTER_MODE.load(Ordering::Relaxed) == FILTERING
        && MEMINFO_CHECKED.load(Ordering::Relaxed) == 3
        && VCPU0_THREAD.load(Ordering::Relaxed) != 0
        && !BUFS[0].load(Ordering::Acquire).is_null()
        && !SILENT.load(Ordering::Relaxed);
    let p = if ok {
        FILTER.load(Ordering::Relaxed)
    } else {
        std::ptr::null_mut()
    };
    FAST.store(p, Ordering::Relaxed);
}

/// Changes `FILTER_MODE` from filtering to handing over, leaving the fast
/// paths.
fn ask_handover() {
    FAST.store(std::ptr::null_mut(), Ordering::Relaxed);
    let _ = FILTER_MODE.compare_exchange(
        FILTERING,
        HANDING_OVER,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
}

/// A block starts: `udata` holds its first instruction id (bits 8..40)
/// and its length (bits 40..48), where its record has them. The common
/// case is kept small, so that the callback saves few registers; the rest
/// is [`on_block_general`].
unsafe extern "C" fn on_block(vcpu: c_uint, udata: *mut c_void) {
    let v = udata as usize as u64;
    if let Some(f) = fast_filter(vcpu) {
        let a = f.block_after(v);
        record_words(FILTER_VCPU, 7, a, 0);
        return;
    }
    // SAFETY: the same callback.
    unsafe { on_block_general(vcpu, udata) }
}

#[inline(never)]
unsafe fn on_block_general(vcpu: c_uint, udata: *mut c_void) {
    let v = udata as usize as u64;
    if let Some(f) = filter(vcpu) {
        if VCPU0_THREAD.load(Ordering::Relaxed) == 0 {
            note_vcpu0_thread();
        }
        if f.count {
            allow_fast(f);
            let a = f.block_after(v);
            record_words(vcpu, 7, a, 0);
            return;
        }
        f.boundary();
    }
    // Tag, first id (4 bytes), length: 6 bytes.
    let a = u64::from(T_BLOCK) | v;
    record_words(vcpu, 6, a, 0);
}

/// Whether QEMU's access descriptions are decoded here rather than by
/// asking QEMU: bit 0 set once a load decoded here agreed with QEMU, bit 1
/// once a store did, 4 if one disagreed.
static MEMINFO_CHECKED: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// An access's size (log2) and direction. QEMU 7.2 builds the description
/// as `(memop << 4 | mmu index) | rw << 16`, the size in the memop's low
/// three bits and `rw` 1 for loads, 2 for stores; decoding it here saves
/// two calls into QEMU per access. Until a load and a store have been
/// decoded both ways and agreed, QEMU is asked too, and a QEMU that builds
/// the description otherwise is asked every time.
#[inline(always)]
fn meminfo(info: qemu_plugin_meminfo_t) -> (u32, bool) {
    let ours = ((info >> 4) & 7, (info >> 16) & 2 != 0);
    let state = MEMINFO_CHECKED.load(Ordering::Relaxed);
    if state == 3 {
        return ours;
    }
    // SAFETY: plain queries of the access description QEMU passed in.
    let theirs = unsafe {
        (
            qemu_plugin_mem_size_shift(info),
            qemu_plugin_mem_is_store(info),
        )
    };
    if state < 4 {
        let bit = if theirs != ours {
            4
        } else if theirs.1 {
            2
        } else {
            1
        };
        MEMINFO_CHECKED.fetch_or(bit, Ordering::Relaxed);
    }
    theirs
}

/// In a memory callback's `udata`, beside the instruction's index: it is
/// a locked read-modify-write (the filter counts its store as a read).
const ATOMIC: usize = 1 << 8;

/// An access by instruction `udata` of its block. The common case (vCPU
/// 0 filtering, a hit on D1's recent line or the front of a set, counted)
/// is kept small, so that the callback saves few registers; other hits go
/// to [`on_mem_at_set`], the rest to [`on_mem_at_general`].
unsafe extern "C" fn on_mem_at(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    match quick_access(vcpu, info, vaddr, udata) {
        Quick::Done => {}
        // SAFETY: the same callback.
        Quick::Deeper(f, id, line) => unsafe { on_mem_at_set(f, id, line, info, vaddr, udata) },
        // SAFETY: the same callback.
        Quick::General => unsafe { on_mem_at_general(vcpu, info, vaddr, udata) },
    }
}

/// What [`quick_access`] did.
enum Quick {
    /// The access is recorded.
    Done,
    /// Nothing, but it is vCPU 0's, may take the fast path, and may hit
    /// below the front of its set: the filter, the instruction's id, the
    /// line.
    Deeper(&'static mut Filter, usize, u64),
    /// Nothing: it needs the general path.
    General,
}

/// The fast path of an access by instruction `udata` of its block: a hit
/// by vCPU 0 on D1's recent line or the front of a set, with the filter
/// counting hits (`D1Filter::quick_hit`).
#[inline(always)]
fn quick_access(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) -> Quick {
    let Some(f) = fast_filter(vcpu) else {
        return Quick::General;
    };
    let ud = udata as usize;
    let index = ud as u8;
    let (store, size) = decode(info);
    let id = f.first.wrapping_add(u32::from(index)) as usize;
    if ud & ATOMIC != 0 || id >= f.hit_ids {
        return Quick::General;
    }
    match f.d1.quick_hit(index, store, vaddr, size) {
        filter::Quick::Hit => {
            count_hit(f, id, index, store);
            Quick::Done
        }
        filter::Quick::Deeper(line) => Quick::Deeper(f, id, line),
        filter::Quick::General => Quick::General,
    }
}

/// An access's direction and size from QEMU's description, as `meminfo`
/// decodes it (checked to agree with QEMU before `FAST` is set).
#[inline(always)]
fn decode(info: qemu_plugin_meminfo_t) -> (bool, u64) {
    ((info >> 17) & 1 != 0, 1u64 << ((info >> 4) & 7))
}

/// A hit by instruction `index` (stream id `id < f.hit_ids`) of the
/// running block, counted.
#[inline(always)]
fn count_hit(f: &mut Filter, id: usize, index: u8, store: bool) {
    f.progress = index.wrapping_add(1);
    // SAFETY: `hits` holds `2 * hit_ids` counts in the mapping, which
    // lives as long as the process; only vCPU 0 writes them.
    unsafe {
        let c = f.hits.add(2 * id + usize::from(store));
        *c += 1;
        f.counted = c;
    }
}

/// [`on_mem_at`] for an access that [`quick_access`] found may hit below
/// the front of its set.
#[inline(never)]
unsafe fn on_mem_at_set(
    f: &'static mut Filter,
    id: usize,
    line: u64,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    let index = udata as usize as u8;
    let (store, size) = decode(info);
    if f.d1.quick_hit_deeper(index, store, vaddr, size, line) {
        count_hit(f, id, index, store);
        return;
    }
    // SAFETY: the same callback, vCPU 0's.
    unsafe { on_mem_at_general(FILTER_VCPU, info, vaddr, udata) }
}

#[inline(never)]
unsafe fn on_mem_at_general(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    let (shift, store) = meminfo(info);
    let index = udata as usize as u8;
    if let Some(f) = filter(vcpu) {
        let atomic = udata as usize & ATOMIC != 0;
        f.progress = index.wrapping_add(1);
        let step = f.d1.access(index, store, atomic, vaddr, 1 << shift);
        take(f, step);
        return;
    }
    // Tag, index, address (8 bytes), size: 11 bytes.
    let tag = if store { T_STORE_AT } else { T_LOAD_AT };
    let a = u64::from(tag) | u64::from(index) << 8 | vaddr << 16;
    let b = (vaddr >> 48) as u32 | 1 << (16 + shift);
    record_words(vcpu, 11, a, b);
}

unsafe extern "C" fn on_mem(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    let (shift, store) = meminfo(info);
    if let Some(f) = filter(vcpu) {
        let atomic = udata as usize & ATOMIC != 0;
        let step = f.d1.access(LAST_EXECUTED, store, atomic, vaddr, 1 << shift);
        take(f, step);
        return;
    }
    let mut r = [0u8; 10];
    r[0] = if store { T_STORE } else { T_LOAD };
    r[1..9].copy_from_slice(&vaddr.to_le_bytes());
    r[9] = 1u8 << shift;
    record(vcpu, &r);
}

/// Reports the host file mapping holding host address `host` at guest
/// addresses, unless already reported.
fn report_mapping(out: &mut Out, guest: u64, host: u64, records: &mut Vec<u8>) {
    if out.known.iter().any(|&(s, e)| s <= guest && guest < e) {
        return;
    }
    let base = host.wrapping_sub(guest);
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(_perms), Some(off)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let (_dev, _inode) = (f.next(), f.next());
        let path: String = f.collect::<Vec<_>>().join(" ");
        let Some((s, e)) = range.split_once('-') else {
            continue;
        };
        let (Ok(s), Ok(e), Ok(off)) = (
            u64::from_str_radix(s, 16),
            u64::from_str_radix(e, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        if s <= host && host < e {
            let (gs, ge) = (s.wrapping_sub(base), e.wrapping_sub(base));
            let path = if path.starts_with('/') {
                path.as_bytes()
            } else {
                b""
            };
            let len = path.len().min(u16::MAX as usize);
            records.push(T_MAP);
            records.extend_from_slice(&gs.to_le_bytes());
            records.extend_from_slice(&ge.to_le_bytes());
            records.extend_from_slice(&off.to_le_bytes());
            records.extend_from_slice(&(len as u16).to_le_bytes());
            records.extend_from_slice(&path[..len]);
            out.known.push((gs, ge));
            return;
        }
    }
    // Not in any mapping (cannot happen for code QEMU translated): report
    // the page, unnamed, so it is asked about once.
    let page = guest & !0xfff;
    records.push(T_MAP);
    records.extend_from_slice(&page.to_le_bytes());
    records.extend_from_slice(&(page + 0x1000).to_le_bytes());
    records.extend_from_slice(&0u64.to_le_bytes());
    records.extend_from_slice(&0u16.to_le_bytes());
    out.known.push((page, page + 0x1000));
}

unsafe extern "C" fn on_translate(_id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(out) = g.as_mut() else { return };
    // SAFETY: `tb` and its instructions are valid during this callback, as
    // the plugin API guarantees; the data pointers cover `size` bytes.
    unsafe {
        let n = qemu_plugin_tb_n_insns(tb);
        let whole = n <= MAX_BLOCK;
        let mut records = Vec::with_capacity(n * 32);
        for i in 0..n {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let vaddr = qemu_plugin_insn_vaddr(insn);
            let size = qemu_plugin_insn_size(insn).min(255);
            let data = std::slice::from_raw_parts(qemu_plugin_insn_data(insn) as *const u8, size);
            if i == 0 {
                let host = qemu_plugin_insn_haddr(insn) as u64;
                report_mapping(out, vaddr, host, &mut records);
            }
            let id = out.next_id;
            out.next_id = out.next_id.wrapping_add(1);
            records.push(T_DECL);
            records.extend_from_slice(&id.to_le_bytes());
            records.extend_from_slice(&vaddr.to_le_bytes());
            records.push(size as u8);
            records.extend_from_slice(data);
            if i == 0 && whole {
                // One record per run of the block; its instructions have
                // consecutive ids from this one.
                qemu_plugin_register_vcpu_tb_exec_cb(
                    tb,
                    Some(on_block),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    (u64::from(id) << 8 | (n as u64) << 40) as usize as *mut c_void,
                );
            }
            let mem = !NO_MEM.load(Ordering::Relaxed);
            // What the filter must know of the instruction.
            let atomic =
                if X86_64.load(Ordering::Relaxed) && !FILTER.load(Ordering::Relaxed).is_null() {
                    ATOMIC * usize::from(tally_sim::flow::classify_x86_64(data, vaddr).atomic_rmw)
                } else {
                    0
                };
            if whole {
                if !mem {
                    continue;
                }
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    Some(on_mem_at),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                    (i | atomic) as *mut c_void,
                );
            } else {
                qemu_plugin_register_vcpu_insn_exec_cb(
                    insn,
                    Some(on_exec),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    id as usize as *mut c_void,
                );
                if !mem {
                    continue;
                }
                qemu_plugin_register_vcpu_mem_cb(
                    insn,
                    Some(on_mem),
                    qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS,
                    qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW,
                    atomic as *mut c_void,
                );
            }
        }
        // Declarations carry no vCPU: written at once, ahead of any
        // execution record that names them.
        if !out.failed && !out.put(&records) {
            out.failed = true;
        }
    }
}

unsafe extern "C" fn on_exit(_id: qemu_plugin_id_t, _: *mut c_void) {
    if SILENT.load(Ordering::Relaxed) {
        return;
    }
    if FILTER_MODE.load(Ordering::Relaxed) == FILTERING {
        // SAFETY: see `filter`; the guest has stopped.
        if let Some(f) = unsafe { FILTER.load(Ordering::Relaxed).as_mut() } {
            f.write_progress();
        }
    }
    for (vcpu, slot) in BUFS.iter().enumerate() {
        let p = slot.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: see `buffer`; the guest has stopped.
            flush(vcpu as u32, unsafe { &mut *p }, false);
        }
    }
    // Locks in the order `record` takes them.
    let o = OVERFLOW.lock().unwrap_or_else(|e| e.into_inner());
    let mut g = OUT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(out) = g.as_mut() {
        write_out(out, OVERFLOW_VCPU.load(Ordering::Relaxed), &o);
        if !out.failed {
            let _ = out.put(&[T_END]);
            let _ = out.file.flush();
        }
    }
}

/// Moves a descriptor to a high number, closed on exec: the guest shares
/// QEMU's descriptor table, and expects 3 and up to be free, and programs
/// it runs must not hold the stream open.
fn keep_out_of_the_guests_way(file: File) -> std::io::Result<File> {
    use std::os::fd::{AsRawFd, FromRawFd};
    // SAFETY: duplicating a descriptor we own.
    let fd = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 1000) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    drop(file);
    // SAFETY: `fd` is a new descriptor, owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Maps the shared buffer file tally made and checks its header.
fn map_shared(fd: i32) -> Result<(), String> {
    use std::os::fd::{AsRawFd, FromRawFd};
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
    if &head[..8] != SHM_MAGIC || slot != 8 + BUF_CAP || SHM_HEADER + slots * slot > size {
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
    Ok(())
}

/// In a child the guest forked: stop recording, and put private memory
/// where the shared buffers were, so the child cannot touch the parent's.
extern "C" fn in_forked_child() {
    SILENT.store(true, Ordering::Relaxed);
    FAST.store(std::ptr::null_mut(), Ordering::Relaxed);
    let base = SHM_BASE.load(Ordering::Acquire);
    if base != 0 {
        // SAFETY: replacing our own mapping with anonymous memory.
        unsafe {
            libc::mmap(
                base as *mut c_void,
                SHM_SIZE.load(Ordering::Acquire),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            );
        }
    }
}

/// Refuses to install: the reason goes to standard error, where the user
/// of `tally sim` sees it (QEMU itself only says that installing failed).
fn refuse(msg: &str) -> c_int {
    let _ = writeln!(std::io::stderr(), "tally-qemu-plugin: {msg}");
    -1
}

/// A message in QEMU's log (`-d plugin`).
#[cfg(feature = "inprocess")]
fn say(msg: &str) {
    if let Ok(s) = std::ffi::CString::new(format!("tally-qemu-plugin: {msg}\n")) {
        // SAFETY: a valid NUL-terminated string.
        unsafe { qemu_plugin_outs(s.as_ptr()) };
    }
}

/// Entry point QEMU calls after loading the plugin.
///
/// # Safety
/// Called by QEMU with `argc` valid C strings in `argv`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn qemu_plugin_install(
    id: qemu_plugin_id_t,
    info: *const qemu_info_t,
    argc: c_int,
    argv: *mut *mut c_char,
) -> c_int {
    // SAFETY: QEMU passes a valid info block and argument vector.
    let (system, args) = unsafe {
        let system = (*info).system_emulation;
        let target = CStr::from_ptr((*info).target_name).to_bytes();
        X86_64.store(target == b"x86_64", Ordering::Relaxed);
        let args: Vec<String> = (0..argc.max(0) as usize)
            .map(|i| CStr::from_ptr(*argv.add(i)).to_string_lossy().into_owned())
            .collect();
        (system, args)
    };
    if system {
        return refuse("user-mode emulation only (qemu-<arch>, not qemu-system-<arch>)");
    }
    let mut file = None;
    #[cfg(feature = "inprocess")]
    let mut in_process = false;
    let mut shm = None;
    let mut free = None;
    let mut d1 = None;
    let mut d1_policy = "lru";
    let mut count_hits = false;
    for a in &args {
        if let Some(v) = a.strip_prefix("d1=") {
            d1 = Some(v);
            continue;
        }
        if let Some(v) = a.strip_prefix("d1policy=") {
            d1_policy = v;
            continue;
        }
        if a == "hits=on" {
            count_hits = true;
            continue;
        }
        let fd_arg = a
            .strip_prefix("shm=")
            .map(|v| (&mut shm, v))
            .or_else(|| a.strip_prefix("free=").map(|v| (&mut free, v)));
        if let Some((slot, v)) = fd_arg {
            *slot = v.parse::<i32>().ok().filter(|&fd| fd >= 0);
            if slot.is_none() {
                return refuse(&format!("bad argument `{a}`"));
            }
            continue;
        }
        #[cfg(feature = "inprocess")]
        if a == "inprocess=on" {
            in_process = true;
            file = File::create("/dev/null").ok();
            continue;
        }
        if let Some(v) = a.strip_prefix("mem=") {
            match v {
                "on" => NO_MEM.store(false, Ordering::Relaxed),
                "off" => NO_MEM.store(true, Ordering::Relaxed),
                _ => return refuse(&format!("bad argument `{a}` (mem=on or mem=off)")),
            }
            continue;
        }
        if let Some(fd) = a.strip_prefix("fd=") {
            match fd.parse::<i32>() {
                // SAFETY: the caller handed this descriptor to the plugin.
                Ok(fd) if fd >= 0 => file = Some(unsafe { File::from_raw_fd(fd) }),
                _ => {
                    return refuse(&format!("bad argument `{a}`"));
                }
            }
        } else if let Some(path) = a.strip_prefix("out=") {
            match File::create(path) {
                Ok(f) => file = Some(f),
                Err(e) => {
                    return refuse(&format!("cannot create {path}: {e}"));
                }
            }
        } else {
            return refuse(&format!(
                "unknown argument `{a}` (fd=N or out=PATH, shm=N, free=N, mem=off, d1=SIZE:ASSOC:LINE, d1policy=P, hits=on)"
            ));
        }
    }
    let Some(file) = file else {
        return refuse("no output: give fd=N or out=PATH");
    };
    let mut file = match keep_out_of_the_guests_way(file) {
        Ok(f) => f,
        Err(e) => {
            return refuse(&format!("cannot move the trace descriptor: {e}"));
        }
    };
    if let Some(fd) = shm
        && let Err(e) = map_shared(fd)
    {
        return refuse(&format!("shm={fd}: {e}"));
    }
    if let Some(fd) = free {
        if shm.is_none() {
            return refuse("free= needs shm=");
        }
        // SAFETY: the caller handed this descriptor to the plugin.
        match keep_out_of_the_guests_way(unsafe { File::from_raw_fd(fd) }) {
            Ok(f) => {
                use std::os::fd::AsRawFd;
                // SAFETY: fcntl on a descriptor we own.
                unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
                *FREE.lock().unwrap_or_else(|e| e.into_inner()) = Some(f);
                POOLED.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                return refuse(&format!("free={fd}: {e}"));
            }
        }
    }
    // SAFETY: registering a fork handler that only makes async-signal-safe
    // calls.
    unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
    if file.write_all(MAGIC).is_err() {
        return refuse("cannot write the trace");
    }
    let d1 = match d1.map(|v| parse_d1(v, d1_policy)).transpose() {
        Ok(d1) => d1,
        Err(e) => return refuse(&format!("d1: {e}")),
    };
    if let Some(f) = d1
        && !NO_MEM.load(Ordering::Relaxed)
    {
        let r = tally_sim::filter::filter_record(f.config(), f.policy());
        if file.write_all(&r).is_err() {
            return refuse("cannot write the trace");
        }
        let count = count_hits && !HITS.load(Ordering::Relaxed).is_null();
        let f = Filter {
            d1: f,
            last_at: 0,
            count,
            first: 0,
            progress: 0,
            counted: std::ptr::null_mut(),
            hits: HITS.load(Ordering::Relaxed),
            hit_ids: HIT_IDS.load(Ordering::Relaxed),
        };
        FILTER.store(Box::into_raw(Box::new(f)), Ordering::Relaxed);
        FILTER_MODE.store(FILTERING, Ordering::Relaxed);
    }
    *OUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Out {
        file,
        last_vcpu: 0,
        next_id: 0,
        known: Vec::new(),
        failed: false,
        #[cfg(feature = "inprocess")]
        sim: match in_process {
            true => match inprocess::Sim::new() {
                Ok(s) => Some(s),
                Err(e) => {
                    return refuse(&format!("in-process simulation: {e}"));
                }
            },
            false => None,
        },
    });
    // SAFETY: registering callbacks with the id QEMU gave.
    unsafe {
        qemu_plugin_register_vcpu_tb_trans_cb(id, Some(on_translate));
        qemu_plugin_register_atexit_cb(id, Some(on_exit), std::ptr::null_mut());
        qemu_plugin_register_vcpu_init_cb(id, Some(on_vcpu_init));
    }
    0
}

/// `SIZE:ASSOC:LINE` (QEMU splits plugin arguments at commas) and the
/// policy as `tally sim --policy` takes it.
fn parse_d1(v: &str, policy: &str) -> Result<D1Filter, String> {
    let config =
        tally_sim::CacheConfig::parse("D1", &v.replace(':', ",")).map_err(|e| e.to_string())?;
    let policy = Policy::parse(policy).map_err(|e| e.to_string())?;
    D1Filter::new(config, policy).map_err(|e| e.to_string())
}
