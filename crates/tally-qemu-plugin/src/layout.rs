//! Data addresses as Cachegrind sees them (`layout=valgrind`, the
//! default): the guest's `mmap`, `munmap` and `mremap` calls are followed
//! in a `tally_sim::layout::Layout`, and every access is moved by it
//! ([`place`]) before the D1 filter or the stream sees it.
//!
//! Valgrind also bounds the program's `brk` heap: its data segment is at
//! most 8 MiB (less under a lower `RLIMIT_DATA`, at least 1 MiB), one page
//! of it kept back, and glibc's `malloc` takes `mmap`ed memory once `brk`
//! fails, so the heap's blocks lie elsewhere and at other page offsets.
//! QEMU grows `brk` only into free pages, so a page reserved on the host
//! at that bound ([`on_return`], at the first `brk(0)`) makes the program
//! meet the same failure at the same break. Valgrind's first mapping
//! lies just above that segment, and the model space starts there too
//! (modulo 4 GiB, `Layout::start_at`).
//!
//! The layout changes only at those system calls; accesses read it
//! through a per-vCPU copy of the range they fell in last, checked
//! against a generation number that every change raises, so the common
//! access costs two loads and two comparisons more.

use std::ffi::c_uint;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tally_sim::layout::Layout;

/// The guest's mappings; `None` until [`start`] (`layout=qemu`, or a
/// target whose system calls are not known here).
static LAYOUT: Mutex<Option<Layout>> = Mutex::new(None);
/// Raised (under the lock) at every change of [`LAYOUT`]; 0 while nothing
/// has been moved, when [`place`] returns every address as it is.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The vCPUs that get a copy of their last range; others take the lock.
const CACHED_VCPUS: usize = 64;

/// A vCPU's last range: generation, start, end, distance. Written and
/// read by that vCPU's thread only.
struct Last([AtomicU64; 4]);

#[allow(clippy::declare_interior_mutable_const)]
const NO_RANGE: Last = Last([const { AtomicU64::new(u64::MAX) }; 4]);
static LAST: [Last; CACHED_VCPUS] = [NO_RANGE; CACHED_VCPUS];

/// The system calls followed, by number: mmap, munmap, mremap, brk.
static NUMBERS: [AtomicU64; 4] = [const { AtomicU64::new(u64::MAX) }; 4];

/// Set once the end of Valgrind's data segment has been reserved (or
/// found taken).
static BRK_BOUNDED: AtomicBool = AtomicBool::new(false);

/// A system call of a vCPU, from its entry to its return.
#[derive(Clone, Copy)]
struct Pending {
    num: u64,
    args: [u64; 5],
}

/// The calls in progress, by vCPU.
static PENDING: Mutex<Vec<Option<Pending>>> = Mutex::new(Vec::new());

/// Follows the guest's mappings of a target whose numbers are known here
/// (the 64-bit Linux ABIs); `false` for others.
pub(crate) fn start(target: &[u8]) -> bool {
    let nrs: [u64; 4] = match target {
        b"x86_64" => [9, 11, 25, 12],
        b"aarch64" | b"riscv64" | b"loongarch64" => [222, 215, 216, 214],
        _ => return false,
    };
    for (slot, n) in NUMBERS.iter().zip(nrs) {
        slot.store(n, Ordering::Relaxed);
    }
    *LAYOUT.lock().unwrap_or_else(|e| e.into_inner()) = Some(Layout::new());
    true
}

/// Where the access at `vaddr` by `vcpu` is simulated.
#[inline(always)]
pub(crate) fn place(vcpu: c_uint, vaddr: u64) -> u64 {
    let generation = GENERATION.load(Ordering::Relaxed);
    if generation == 0 {
        return vaddr;
    }
    if let Some(Last(l)) = LAST.get(vcpu as usize)
        && l[0].load(Ordering::Relaxed) == generation
        && l[1].load(Ordering::Relaxed) <= vaddr
        && vaddr < l[2].load(Ordering::Relaxed)
    {
        return vaddr.wrapping_add(l[3].load(Ordering::Relaxed));
    }
    place_looked_up(vcpu, vaddr)
}

/// [`place`] when the vCPU's last range does not hold `vaddr`.
#[inline(never)]
fn place_looked_up(vcpu: c_uint, vaddr: u64) -> u64 {
    let g = LAYOUT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(layout) = g.as_ref() else {
        return vaddr;
    };
    let r = layout.range(vaddr);
    if let Some(Last(l)) = LAST.get(vcpu as usize) {
        l[0].store(GENERATION.load(Ordering::Relaxed), Ordering::Relaxed);
        l[1].store(r.start, Ordering::Relaxed);
        l[2].store(r.end, Ordering::Relaxed);
        l[3].store(r.delta, Ordering::Relaxed);
    }
    vaddr.wrapping_add(r.delta)
}

/// A system call starts: one that maps keeps its arguments for its
/// return.
pub(crate) fn on_entry(vcpu: c_uint, num: i64, args: [u64; 5]) {
    let num = num as u64;
    if !NUMBERS.iter().any(|n| n.load(Ordering::Relaxed) == num) {
        return;
    }
    let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    let i = vcpu as usize;
    if p.len() <= i {
        p.resize(i + 1, None);
    }
    p[i] = Some(Pending { num, args });
}

/// A system call returned `ret`: a successful mapping call changes the
/// layout; the first `brk(0)` gives the break that Valgrind's data
/// segment starts at.
pub(crate) fn on_return(vcpu: c_uint, num: i64, ret: i64) {
    let num = num as u64;
    let [mmap, munmap, mremap, brk] = [0, 1, 2, 3].map(|k| NUMBERS[k].load(Ordering::Relaxed));
    if num != mmap && num != munmap && num != mremap && num != brk {
        return;
    }
    let call = {
        let mut p = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        p.get_mut(vcpu as usize).and_then(Option::take)
    };
    let Some(Pending { num: n, args: a }) = call else {
        return;
    };
    if n != num || (-4095..0).contains(&ret) {
        return;
    }
    let ret = ret as u64;
    let mut g = LAYOUT.lock().unwrap_or_else(|e| e.into_inner());
    let Some(layout) = g.as_mut() else { return };
    if num == brk {
        if a[0] == 0 && !BRK_BOUNDED.swap(true, Ordering::Relaxed) {
            bound_brk(layout, ret);
        }
        return;
    }
    if num == mmap {
        // MAP_FIXED, MAP_FIXED_NOREPLACE: the program chose the address;
        // so it did with a hint QEMU kept.
        let chosen = a[3] & (0x10 | 0x10_0000) != 0 || (a[0] != 0 && a[0] == ret);
        layout.mapped(ret, a[1], !chosen);
    } else if num == munmap {
        layout.unmapped(a[0], a[1]);
    } else {
        layout.remapped(a[0], a[1], ret, a[2]);
    }
    GENERATION.fetch_add(1, Ordering::Relaxed);
}

/// The size of Valgrind's data segment: `RLIMIT_DATA` held between 1 and
/// 8 MiB, in pages. The break can grow to one page below its end.
fn valgrind_brk_segment() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    let cur = if unsafe { libc::getrlimit(libc::RLIMIT_DATA, &mut r) } == 0 {
        r.rlim_cur
    } else {
        libc::RLIM_INFINITY
    };
    cur.clamp(1 << 20, 8 << 20).div_ceil(PAGE) * PAGE
}

/// Pages, as both emulators map them.
const PAGE: u64 = 4096;

/// For a break that starts at guest address `start`: reserves, in QEMU's
/// own address space, the last page of Valgrind's data segment, so QEMU's
/// `brk` cannot grow over it, and starts the model space where Valgrind
/// puts the first mapping, just above that segment. Nothing is reserved
/// before the guest's base is known or where the page is taken already
/// (the break could not pass it either).
fn bound_brk(layout: &mut Layout, start: u64) {
    use crate::children::{BASE_KNOWN, GUEST_BASE};
    let segment = valgrind_brk_segment();
    layout.start_at(start.wrapping_add(segment));
    if !BASE_KNOWN.load(Ordering::Relaxed) {
        return;
    }
    let host = start
        .wrapping_add(segment - PAGE)
        .wrapping_add(GUEST_BASE.load(Ordering::Relaxed));
    // SAFETY: a new mapping of one page at an address nothing holds
    // (MAP_FIXED_NOREPLACE); a kernel that takes the address as a hint
    // only and puts it elsewhere gets it unmapped again.
    unsafe {
        let p = libc::mmap(
            host as *mut libc::c_void,
            PAGE as usize,
            libc::PROT_NONE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        );
        if p != libc::MAP_FAILED && p as u64 != host {
            libc::munmap(p, PAGE as usize);
        }
    }
}
