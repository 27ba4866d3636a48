//! The system calls of sampling: `perf_event_open` and its ring buffer.
//! The only module of the crate with `unsafe`. Starting the program held
//! before `exec`, and passing signals on to it, are tally-process's.
//!
//! The ring buffer is the kernel's: a metadata page whose `data_head` the
//! kernel advances as it writes records and whose `data_tail` the reader
//! advances as it consumes them, then `2^n` pages of records, which wrap.
//! Records are copied out whole (a record can straddle the wrap), then the
//! tail is released, so the kernel never overwrites one being read.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER5` (112 bytes); the
/// flag bits are in `flags`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct Attr {
    /// `PERF_TYPE_*`.
    pub kind: u32,
    /// The size of this struct.
    pub size: u32,
    /// The event within its type.
    pub config: u64,
    /// The period, or the frequency with [`flag::FREQ`].
    pub sample_period_or_freq: u64,
    /// `PERF_SAMPLE_*` bits.
    pub sample_type: u64,
    /// `PERF_FORMAT_*` bits.
    pub read_format: u64,
    /// The bit fields ([`flag`]).
    pub flags: u64,
    /// Wake the reader every this many events (or bytes with watermark).
    pub wakeup: u32,
    /// Breakpoint type (unused).
    pub bp_type: u32,
    /// `config1`.
    pub config1: u64,
    /// `config2`.
    pub config2: u64,
    /// `PERF_SAMPLE_BRANCH_*` bits.
    pub branch_sample_type: u64,
    /// Registers sampled with `PERF_SAMPLE_REGS_USER`.
    pub sample_regs_user: u64,
    /// Bytes of user stack copied with `PERF_SAMPLE_STACK_USER`.
    pub sample_stack_user: u32,
    /// Clock of the time stamps with `use_clockid`.
    pub clockid: i32,
    /// Registers sampled at interrupts.
    pub sample_regs_intr: u64,
    /// AUX watermark.
    pub aux_watermark: u32,
    /// Deepest call chain recorded (0: the system's).
    pub sample_max_stack: u16,
    /// Reserved.
    pub reserved: u16,
}

/// Bits of [`Attr::flags`], as `<linux/perf_event.h>` numbers them.
pub mod flag {
    /// Start disabled.
    pub const DISABLED: u64 = 1 << 0;
    /// Children (threads and forks) inherit the event.
    pub const INHERIT: u64 = 1 << 1;
    /// Do not count the kernel.
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    /// Do not count the hypervisor.
    pub const EXCLUDE_HV: u64 = 1 << 6;
    /// Record executable mappings.
    pub const MMAP: u64 = 1 << 8;
    /// Record `comm` changes.
    pub const COMM: u64 = 1 << 9;
    /// `sample_period_or_freq` is a frequency.
    pub const FREQ: u64 = 1 << 10;
    /// Enable on the next `exec`.
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    /// Record forks and exits.
    pub const TASK: u64 = 1 << 13;
    /// Every record carries the sample id fields (tid, time).
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    /// The call chain leaves out kernel frames.
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    /// The call chain leaves out user frames (unwound from the stack copy).
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    /// Mappings as `MMAP2` records.
    pub const MMAP2: u64 = 1 << 23;
    /// Only threads inherit the event, not forked processes (Linux 5.13).
    pub const INHERIT_THREAD: u64 = 1 << 35;
    /// Mark the `comm` records of `exec`.
    pub const COMM_EXEC: u64 = 1 << 24;
    /// Time stamps from the clock `clockid` names.
    pub const USE_CLOCKID: u64 = 1 << 25;
    /// Record each switch of the thread in and out (`PERF_RECORD_SWITCH`).
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
}

/// `PERF_FLAG_FD_CLOEXEC`: the descriptor is closed on `exec`.
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// `PERF_EVENT_IOC_ENABLE`.
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `PERF_EVENT_IOC_DISABLE`.
const IOC_DISABLE: libc::c_ulong = 0x2401;
/// Offset of `data_head` in the metadata page.
const DATA_HEAD: usize = 1024;
/// Offset of `data_tail` in the metadata page.
const DATA_TAIL: usize = 1032;

/// Opens an event for `pid` (-1: every process) on `cpu` (-1: any).
pub fn perf_event_open(attr: &Attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    let mut attr = *attr;
    attr.size = std::mem::size_of::<Attr>() as u32;
    // SAFETY: the attribute is a valid, fully initialised struct of the
    // size it states; the kernel only reads it (and may write its size).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &mut attr as *mut Attr,
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor, owned by no one.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Enables (`true`) or disables an event.
pub fn set_enabled(fd: &OwnedFd, on: bool) -> io::Result<()> {
    let request = if on { IOC_ENABLE } else { IOC_DISABLE };
    // SAFETY: a perf ioctl without argument on a perf descriptor.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The ring buffer of one event.
pub struct Ring {
    base: *mut u8,
    len: usize,
    data_size: usize,
    page: usize,
}

// SAFETY: the mapping belongs to this value alone; the kernel's side is
// synchronised through the head and tail words.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring buffer of `fd`: one metadata page and `pages` (a
    /// power of two) data pages.
    pub fn map(fd: &OwnedFd, pages: usize) -> io::Result<Ring> {
        let page = page_size();
        let len = (pages + 1) * page;
        // SAFETY: a new shared mapping of the event's buffer, checked below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            base: base.cast(),
            len,
            data_size: pages * page,
            page,
        })
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is 8-aligned inside the metadata page, which lives
        // as long as `self`; the kernel accesses it atomically too.
        unsafe { &*(self.base.add(at) as *const AtomicU64) }
    }

    /// Appends every record written since the last call to `out` (whole
    /// records, each `header + body`), and frees their space.
    pub fn drain(&mut self, out: &mut Vec<u8>) {
        let head = self.word(DATA_HEAD).load(Ordering::Acquire);
        let tail = self.word(DATA_TAIL).load(Ordering::Relaxed);
        if head == tail {
            return;
        }
        let size = self.data_size as u64;
        // The kernel never runs more than a buffer ahead of the tail.
        let n = (head.wrapping_sub(tail)).min(size) as usize;
        let start = (tail % size) as usize;
        let first = n.min(self.data_size - start);
        // SAFETY: both ranges lie in the data pages, which the kernel does
        // not write between tail and head until the tail moves.
        unsafe {
            let data = self.base.add(self.page);
            out.extend_from_slice(std::slice::from_raw_parts(data.add(start), first));
            out.extend_from_slice(std::slice::from_raw_parts(data, n - first));
        }
        self.word(DATA_TAIL).store(head, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping made in `map`, used by no one now.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The system's page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// The online CPUs' numbers.
pub fn online_cpus() -> Vec<i32> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut cpus = Vec::new();
    for range in text.trim().split(',').filter(|r| !r.is_empty()) {
        let mut ends = range.splitn(2, '-').map(|n| n.trim().parse::<i32>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => cpus.push(a),
            (Some(Ok(a)), Some(Ok(b))) => cpus.extend(a..=b),
            _ => {}
        }
    }
    if cpus.is_empty() {
        // SAFETY: sysconf has no preconditions.
        let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1);
        cpus.extend(0..n as i32);
    }
    cpus
}

/// Waits up to `timeout_ms` for any of `fds` to be readable.
pub fn poll(fds: &[OwnedFd], timeout_ms: i32) {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of pollfd of the length given.
    unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of the time stamps
/// of events opened with [`flag::USE_CLOCKID`] and it.
pub fn monotonic_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Whether process `pid` exists (signal 0).
pub fn alive(pid: i32) -> io::Result<()> {
    // SAFETY: kill with signal 0 only checks.
    if unsafe { libc::kill(pid, 0) } < 0 {
        let e = io::Error::last_os_error();
        // EPERM: it exists, owned by someone else.
        if e.raw_os_error() != Some(libc::EPERM) {
            return Err(e);
        }
    }
    Ok(())
}

/// `PERF_EVENT_IOC_SET_OUTPUT`.
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;

/// Sends the records of `fd` to the ring buffer of `to` (same CPU).
pub fn set_output(fd: &OwnedFd, to: &OwnedFd) -> io::Result<()> {
    // SAFETY: a perf ioctl whose argument is another perf descriptor.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT as _, to.as_raw_fd()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
