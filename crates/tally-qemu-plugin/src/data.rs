//! `d1=S/A/L`: the D1 cache simulated here, in QEMU's thread, with
//! `tally_sim::data`; the stream carries D1 misses instead of accesses,
//! and the reads and writes per instruction go to the count file tally
//! gave (`counts=FD`). Accesses are nearly all D1 hits: simulating a hit
//! costs this thread about what writing its record did, and spares tally
//! reading and simulating it on the other core.
//!
//! The D1 is one for all threads. While the guest has one thread it is
//! used without a lock. QEMU 7.2 initialises a new vCPU in the thread that
//! creates it, before the new thread runs, so `on_vcpu_init` can switch
//! every thread to the locked path at a moment when no other one is
//! inside the D1.

use crate::{MAX_VCPUS, T_ACCESSED, T_MISS_LOAD, T_MISS_STORE, record};
use std::ffi::c_uint;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use tally_sim::data::{COUNTS_IDS, DataCache, DataThread, Sink};

/// The D1 (null: not in this mode).
static D1: AtomicPtr<DataCache> = AtomicPtr::new(std::ptr::null_mut());
/// The count file's mapping: `COUNTS_IDS` pairs `[reads, writes]`.
static COUNTS: AtomicPtr<[u64; 2]> = AtomicPtr::new(std::ptr::null_mut());
/// Once set, every thread takes `LOCK` around the D1 and the counts.
static MULTI: AtomicBool = AtomicBool::new(false);
static LOCK: AtomicBool = AtomicBool::new(false);
/// Each vCPU's data side; vCPUs past `MAX_VCPUS` share the last.
static THREADS: [AtomicPtr<DataThread>; MAX_VCPUS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_VCPUS];

/// Whether the D1 is simulated here.
#[inline(always)]
pub fn on() -> bool {
    !D1.load(Ordering::Relaxed).is_null()
}

/// Sets the mode up: the D1 and the mapped count file (`size` bytes).
pub fn start(d1: DataCache, counts: *mut u8, size: usize) -> Result<(), String> {
    if (size as u64) < COUNTS_IDS * 16 {
        return Err("the count file is too small".into());
    }
    COUNTS.store(counts as *mut [u64; 2], Ordering::Release);
    D1.store(Box::into_raw(Box::new(d1)), Ordering::Release);
    Ok(())
}

/// The count file's mapping and size, for a forked child to replace.
pub fn counts_mapping() -> (*mut u8, usize) {
    (
        COUNTS.load(Ordering::Acquire) as *mut u8,
        (COUNTS_IDS * 16) as usize,
    )
}

/// A vCPU starts: with a second one, the D1 needs the lock from now on.
pub unsafe extern "C" fn on_vcpu_init(_id: qemu_plugin_sys::qemu_plugin_id_t, vcpu: c_uint) {
    if vcpu > 0 {
        MULTI.store(true, Ordering::SeqCst);
    }
}

pub struct Out {
    vcpu: c_uint,
}

impl Sink for Out {
    #[inline(always)]
    fn count(&mut self, id: u32, store: bool) {
        let i = u64::from(id).min(COUNTS_IDS - 1) as usize;
        // SAFETY: the mapping holds COUNTS_IDS pairs; only the thread
        // holding the D1 (alone, or under LOCK) writes them.
        unsafe {
            let c = COUNTS.load(Ordering::Relaxed).add(i);
            (*c)[usize::from(store)] += 1;
        }
    }

    #[cold]
    fn miss(&mut self, index: u8, store: bool, addr: u64, size: u32) {
        let mut r = [0u8; 14];
        r[0] = if store { T_MISS_STORE } else { T_MISS_LOAD };
        r[1] = index;
        r[2..10].copy_from_slice(&addr.to_le_bytes());
        r[10..].copy_from_slice(&size.to_le_bytes());
        record(self.vcpu, &r);
    }

    #[cold]
    fn accessed(&mut self, index: u8) {
        record(self.vcpu, &[T_ACCESSED, index]);
    }
}

#[cold]
fn new_thread(slot: &AtomicPtr<DataThread>) -> *mut DataThread {
    let p = Box::into_raw(Box::default());
    slot.store(p, Ordering::Release);
    p
}

/// Runs `f` on the D1 and `vcpu`'s data side.
#[inline(always)]
pub fn with<R>(vcpu: c_uint, f: impl FnOnce(&mut DataCache, &mut DataThread, &mut Out) -> R) -> R {
    let slot = &THREADS[(vcpu as usize).min(MAX_VCPUS - 1)];
    let mut t = slot.load(Ordering::Acquire);
    if t.is_null() {
        t = new_thread(slot);
    }
    let d = D1.load(Ordering::Relaxed);
    let mut out = Out { vcpu };
    let alone = vcpu == 0 && !MULTI.load(Ordering::Relaxed);
    if !alone {
        MULTI.store(true, Ordering::Relaxed);
        lock();
    }
    // SAFETY: `d` and `t` live for the run; one thread at a time uses the
    // D1 (alone, or under LOCK) and a vCPU's data side is its thread's
    // (the shared last one is used under LOCK too).
    let r = unsafe { f(&mut *d, &mut *t, &mut out) };
    if !alone {
        LOCK.store(false, Ordering::Release);
    }
    r
}

#[cold]
fn lock() {
    while LOCK
        .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::hint::spin_loop();
    }
}

/// At exit: every vCPU's held access is simulated, into its buffer.
pub fn finish() {
    for (vcpu, slot) in THREADS.iter().enumerate() {
        if !slot.load(Ordering::Acquire).is_null() {
            with(vcpu as c_uint, |d, t, out| t.finish(d, out));
        }
    }
}

/// Bytes of a long block's udata: stream id, index, locked flag.
#[inline(always)]
pub fn pack(id: u32, index: u8, rmw: bool) -> usize {
    (u64::from(id) | u64::from(index) << 32 | u64::from(rmw) << 40) as usize
}
