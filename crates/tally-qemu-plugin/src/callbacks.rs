//! The callbacks QEMU makes as the guest runs: a block starts
//! ([`on_block`]), an instruction of a long block runs ([`on_exec`]), a
//! memory access ([`on_mem_at`] for blocks, [`on_mem`] for long blocks).
//!
//! They run billions of times, so the common cases are kept small, with
//! the rest in `#[inline(never)]` functions, so that the callback saves
//! few registers: for vCPU 0 with the D1 filter counting hits, a block
//! start is one 7-byte record and a hit on D1's recent line or the front
//! of a set only a count.

use crate::buffers::{record, record_words};
use crate::filter::{FILTER_VCPU, Filter, VCPU0_THREAD};
use crate::filter::{allow_fast, count_hit, fast_filter, filter, note_vcpu0_thread, take};
use crate::records;
use qemu_plugin_sys::*;
use std::ffi::{c_uint, c_void};
use std::sync::atomic::{AtomicU8, Ordering};
use tally_sim::filter::LAST_EXECUTED;

/// In a memory callback's `udata`, beside the instruction's index: it is
/// a locked read-modify-write (the filter counts its store as a read).
pub(crate) const ATOMIC: usize = 1 << 8;

/// Whether QEMU's access descriptions are decoded here rather than by
/// asking QEMU: bit 0 set once a load decoded here agreed with QEMU, bit 1
/// once a store did, 4 if one disagreed.
pub(crate) static MEMINFO_CHECKED: AtomicU8 = AtomicU8::new(0);

/// An instruction of a block over `MAX_BLOCK` instructions runs: `udata`
/// is its id.
pub(crate) unsafe extern "C" fn on_exec(vcpu: c_uint, udata: *mut c_void) {
    if let Some(f) = filter(vcpu) {
        f.boundary();
        f.write_progress();
    }
    record(vcpu, &records::exec(udata as usize as u32));
}

/// A block starts: `udata` holds its first instruction id (bits 8..40)
/// and its length (bits 40..48), where its record has them
/// ([`records::block_udata`]). The common case is kept small, so that
/// the callback saves few registers; the rest is [`on_block_general`].
pub(crate) unsafe extern "C" fn on_block(vcpu: c_uint, udata: *mut c_void) {
    let v = udata as usize as u64;
    if let Some(f) = fast_filter(vcpu) {
        let a = f.block_after(v);
        record_words(FILTER_VCPU, 7, a, 0);
        return;
    }
    // SAFETY: the same callback.
    unsafe { on_block_general(vcpu, udata) }
}

/// [`on_block`] off its fast path.
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
    record_words(vcpu, 6, records::block(v), 0);
}

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

/// An access by instruction `udata` of its block. The common case (vCPU
/// 0 filtering, a hit on D1's recent line or the front of a set, counted)
/// is kept small, so that the callback saves few registers; other hits go
/// to [`on_mem_at_set`], the rest to [`on_mem_at_general`].
pub(crate) unsafe extern "C" fn on_mem_at(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    let vaddr = crate::layout::place(vcpu, vaddr);
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
        tally_sim::filter::Quick::Hit => {
            count_hit(f, id, index, store);
            Quick::Done
        }
        tally_sim::filter::Quick::Deeper(line) => Quick::Deeper(f, id, line),
        tally_sim::filter::Quick::General => Quick::General,
    }
}

/// An access's direction and size from QEMU's description, as `meminfo`
/// decodes it (checked to agree with QEMU before `FAST` is set).
#[inline(always)]
fn decode(info: qemu_plugin_meminfo_t) -> (bool, u64) {
    ((info >> 17) & 1 != 0, 1u64 << ((info >> 4) & 7))
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

/// [`on_mem_at`] off its fast paths.
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
    let (a, b) = records::access_at(store, index, vaddr, shift);
    record_words(vcpu, 11, a, b);
}

/// An access by the instruction executed last (blocks over `MAX_BLOCK`
/// instructions); `udata` is [`ATOMIC`] or 0.
pub(crate) unsafe extern "C" fn on_mem(
    vcpu: c_uint,
    info: qemu_plugin_meminfo_t,
    vaddr: u64,
    udata: *mut c_void,
) {
    let vaddr = crate::layout::place(vcpu, vaddr);
    let (shift, store) = meminfo(info);
    if let Some(f) = filter(vcpu) {
        let atomic = udata as usize & ATOMIC != 0;
        let step = f.d1.access(LAST_EXECUTED, store, atomic, vaddr, 1 << shift);
        take(f, step);
        return;
    }
    record(vcpu, &records::access(store, vaddr, shift));
}
