//! The D1 filter (`d1=`): the first-level data cache simulated here, for
//! vCPU 0's accesses, so that a hit is written as one or two bytes (or,
//! with `hits=on`, only counted in the shared file) and only a miss with
//! its address.
//!
//! When a second vCPU starts, the filter hands over: vCPU 0's records go
//! into the stream, then D1's state, which tally goes on from, and every
//! access is written whole again. The handover is done by vCPU 0's thread,
//! at once if it initializes the new vCPU, else at vCPU 0's next callback
//! (`FILTER_MODE` is then `HANDING_OVER`).
//!
//! [`FAST`] tells vCPU 0's callbacks whether they may take their fast
//! paths: one load and test per callback.

use crate::buffers::{self, FLUSH_AT, OUT, SILENT, buffer, flush, record_words, write_out};
use crate::callbacks::MEMINFO_CHECKED;
use crate::records;
use std::ffi::c_uint;
use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, Ordering};
use tally_sim::filter::{D1Filter, Filtered, LAST_EXECUTED, Step};

/// The filter and where its last access record is in vCPU 0's buffer
/// (which is flushed only before an access record is appended, or after a
/// block or instruction record, so that the last one can be amended).
pub(crate) struct Filter {
    /// D1, as tally would simulate it.
    pub d1: D1Filter,
    /// Where the last access record starts in vCPU 0's buffer.
    last_at: usize,
    /// `hits=on`: hits by block instructions are counted in the shared
    /// file (`HITS`), not written.
    pub count: bool,
    /// The running block's first id, and one more than the index of its
    /// last access (how far the block ran, for tally).
    pub first: u32,
    /// See `first`.
    pub progress: u8,
    /// The count of the hit decided last, while a piece may turn it into a
    /// miss (null: none).
    counted: *mut u64,
    /// `HITS` and `HIT_IDS`, as they were at install.
    hits: *mut u64,
    /// See `hits`.
    pub hit_ids: usize,
}

/// The D1 filter (`d1=`), used by vCPU 0 only, while `FILTER_MODE` is
/// `FILTERING`; null without one.
pub(crate) static FILTER: AtomicPtr<Filter> = AtomicPtr::new(std::ptr::null_mut());
/// Whether the filter is on: `NOT_FILTERING`, `FILTERING` or
/// `HANDING_OVER`.
pub(crate) static FILTER_MODE: AtomicU8 = AtomicU8::new(NOT_FILTERING);
/// No filter, or it has handed over.
pub(crate) const NOT_FILTERING: u8 = 0;
/// vCPU 0's accesses go through the filter.
pub(crate) const FILTERING: u8 = 1;
/// Another vCPU has started: vCPU 0 hands D1 over at its next callback.
const HANDING_OVER: u8 = 2;
/// The vCPU whose accesses the filter simulates.
pub(crate) const FILTER_VCPU: c_uint = 0;

/// The host thread that runs vCPU 0 (`pthread_self`, 0 until its first
/// block): a thread-local would cost a call per block in a loaded library.
pub(crate) static VCPU0_THREAD: AtomicU64 = AtomicU64::new(0);

/// Whether vCPU 0's callbacks may take the fast paths: the filter is on
/// and counts hits, QEMU's access descriptions are known to decode here,
/// vCPU 0's thread is known and its buffer made. Set by the general block
/// callback once all that holds ([`allow_fast`]); cleared with every
/// change of `FILTER_MODE`, so that vCPU 0's next callback goes the
/// general way and hands D1 over. It holds `FILTER` while they may, else
/// null: one load and test per callback.
pub(crate) static FAST: AtomicPtr<Filter> = AtomicPtr::new(std::ptr::null_mut());

impl Filter {
    /// The filter for `d1`; `count`: hits are counted (`hits=on` and the
    /// shared file has room for them).
    pub(crate) fn new(d1: D1Filter, count: bool) -> Filter {
        Filter {
            d1,
            last_at: 0,
            count,
            first: 0,
            progress: 0,
            counted: std::ptr::null_mut(),
            hits: buffers::HITS.load(Ordering::Relaxed),
            hit_ids: buffers::HIT_IDS.load(Ordering::Relaxed),
        }
    }

    /// A block or instruction record follows: the last access is whole.
    #[inline(always)]
    pub(crate) fn boundary(&mut self) {
        self.d1.boundary();
        self.counted = std::ptr::null_mut();
    }

    /// A block starts (`v`: its `on_block` udata) while hits are counted:
    /// its record (tag, first id, length, how far the last block ran; 7
    /// bytes), and the filter's state for it.
    #[inline(always)]
    pub(crate) fn block_after(&mut self, v: u64) -> u64 {
        self.boundary();
        let a = records::block_after(v, self.progress);
        self.first = (v >> 8) as u32;
        self.progress = 0;
        a
    }

    /// Writes how far the running block ran, if its hits were counted and
    /// tally cannot tell from the stream.
    #[cold]
    pub(crate) fn write_progress(&mut self) {
        if self.count && self.progress != 0 {
            record_words(FILTER_VCPU, 2, records::progress(self.progress), 0);
            self.progress = 0;
        }
    }
}

/// The filter, for vCPU `vcpu`'s callbacks: `None` unless it is vCPU 0 and
/// the filter is on. A handover asked for is done here.
#[inline(always)]
pub(crate) fn filter(vcpu: c_uint) -> Option<&'static mut Filter> {
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

/// The filter, if vCPU `vcpu`'s callback may take its fast path.
#[inline(always)]
pub(crate) fn fast_filter(vcpu: c_uint) -> Option<&'static mut Filter> {
    if vcpu != FILTER_VCPU {
        return None;
    }
    // SAFETY: see `filter`.
    unsafe { FAST.load(Ordering::Relaxed).as_mut() }
}

/// Notes the calling thread as vCPU 0's.
#[cold]
pub(crate) fn note_vcpu0_thread() {
    // SAFETY: pthread_self has no preconditions.
    VCPU0_THREAD.store(unsafe { libc::pthread_self() } as u64, Ordering::Relaxed);
}

/// Sets `FAST` if vCPU 0's fast paths may be taken (see there).
#[cold]
pub(crate) fn allow_fast(f: &Filter) {
    let ok = f.count
        && FILTER_MODE.load(Ordering::Relaxed) == FILTERING
        && MEMINFO_CHECKED.load(Ordering::Relaxed) == 3
        && VCPU0_THREAD.load(Ordering::Relaxed) != 0
        && buffers::has_buffer(0)
        && !SILENT.load(Ordering::Relaxed);
    let p = if ok {
        FILTER.load(Ordering::Relaxed)
    } else {
        std::ptr::null_mut()
    };
    FAST.store(p, Ordering::Relaxed);
}

/// Writes what the filter decided about an access by vCPU 0: a record
/// appended, or the last one amended.
#[inline(always)]
pub(crate) fn take(f: &mut Filter, step: Step) {
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
    let (n, a, b) = records::filtered(x);
    f.last_at = buf.len;
    // SAFETY: `len < FLUSH_AT` here (a flush leaves it 0, and the record
    // amended started below `FLUSH_AT`), and no record is over 12 bytes.
    unsafe { buf.push_words(n, a, b) };
}

/// A hit by instruction `index` (stream id `id < f.hit_ids`) of the
/// running block, counted.
#[inline(always)]
pub(crate) fn count_hit(f: &mut Filter, id: usize, index: u8, store: bool) {
    f.progress = index.wrapping_add(1);
    // SAFETY: `hits` holds `2 * hit_ids` counts in the mapping, which
    // lives as long as the process; only vCPU 0 writes them.
    unsafe {
        let c = f.hits.add(2 * id + usize::from(store));
        *c += 1;
        f.counted = c;
    }
}

/// Stops the filter, from vCPU 0's thread: its records into the stream,
/// then D1's state, which tally goes on from.
#[cold]
pub(crate) fn hand_over() {
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

/// Changes `FILTER_MODE` from filtering to handing over, leaving the fast
/// paths.
pub(crate) fn ask_handover() {
    FAST.store(std::ptr::null_mut(), Ordering::Relaxed);
    let _ = FILTER_MODE.compare_exchange(
        FILTERING,
        HANDING_OVER,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
}
