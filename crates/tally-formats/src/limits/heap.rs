//! The ceiling over all of tally's memory, not only what a reader keeps:
//! [`Allocator`] counts the bytes every allocation holds, readers ask
//! [`over_ceiling`] between chunks and stop with an error at their line,
//! and an allocation no reader asks about (an analysis, a writer, a
//! server's reply) ends tally itself once it takes the count a quarter
//! past the ceiling (at least 4 MiB past it), or when the system refuses
//! it (`ulimit -v`), where Rust would abort.
//!
//! Ending from inside an allocation cannot unwind, so it does what an
//! error would and no more: it removes the temporary files of writes in
//! progress ([`crate::output::try_abandon_writes`]), prints one line naming
//! the input being read and its line (each reading thread keeps its place
//! in a thread-local, [`reading`]), or else the input read last, and
//! exits with the command's error status. That path allocates nothing it
//! cannot do without: a reserve taken at [`enforce`] is given back first,
//! and the line is formatted on the stack.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};

/// tally's global allocator (`#[global_allocator]` in the binary): the
/// system's, with the bytes held counted for the ceiling.
pub struct Allocator;

/// The bytes held, alone on its cache line: every allocation of every
/// thread updates it, and nothing else should move with it.
#[repr(align(64))]
struct Live(AtomicUsize);

static LIVE: Live = Live(AtomicUsize::new(0));
/// The ceiling readers stop at ([`over_ceiling`]); `usize::MAX`: none,
/// or not enforced.
static CEILING: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Where an allocation ends tally.
static HARD: AtomicUsize = AtomicUsize::new(usize::MAX);
/// The exit status of an error of the command being run.
static STATUS: AtomicI32 = AtomicI32::new(1);
/// Set by the first call of [`enforce`].
static ENFORCED: AtomicBool = AtomicBool::new(false);
/// Set by the thread that ends tally; others then wait for the exit.
static ENDING: AtomicBool = AtomicBool::new(false);
/// Memory held back for the way out, given back as it starts.
static RESERVE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
const RESERVE_LAYOUT: Layout = match Layout::from_size_align(1 << 20, 16) {
    Ok(l) => l,
    Err(_) => panic!("a valid layout"),
};

/// How far past the ceiling an allocation may take tally before it ends
/// it: room for the reader that crossed the ceiling to reach its next
/// check (a chunk of at most 1 MiB of input later) and stop with its line.
fn hard_limit(ceiling: usize) -> usize {
    ceiling.saturating_add((ceiling / 4).max(4 << 20))
}

/// Turns the ceiling ([`super::memory_limit`]) on for this process, whose
/// errors exit with `status`; call it once tally's options are known,
/// before any input is read. Without it nothing is limited (the count
/// goes on). A ceiling that is no size is left to the command to report.
/// Only the first call counts.
pub fn enforce(status: i32) {
    if ENFORCED.swap(true, Ordering::SeqCst) {
        return;
    }
    STATUS.store(status, Ordering::Relaxed);
    // SAFETY: the layout has a non-zero size.
    let reserve = unsafe { System.alloc(RESERVE_LAYOUT) };
    RESERVE.store(reserve, Ordering::Relaxed);
    if super::process_limit("Max address space").is_some() {
        one_arena();
    }
    end_when_threads_are_refused();
    if let Ok(Some(limit)) = super::memory_limit() {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        CEILING.store(limit, Ordering::Relaxed);
        HARD.store(hard_limit(limit), Ordering::Relaxed);
    }
}

/// Under an address-space limit (`ulimit -v`), glibc's malloc keeps to
/// one arena: each further one (one per thread that allocates) reserves
/// 64 MiB of address space, which would count against the limit without
/// holding anything, and leave the ceiling (half of what the limit
/// leaves) no room.
fn one_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        /// glibc's `M_ARENA_MAX`.
        const M_ARENA_MAX: i32 = -8;
        // SAFETY: glibc's `mallopt` takes any parameter and value.
        unsafe { mallopt(M_ARENA_MAX, 1) };
    }
}

/// A thread whose stacks the system refuses makes std panic (`failed to
/// spawn thread`, or in the new thread `failed to allocate an alternative
/// stack`), which ends tally as a refused allocation does, rather than as
/// a bug.
fn end_when_threads_are_refused() {
    const REFUSED: [&str; 2] = [
        "failed to spawn thread",
        "failed to allocate an alternative stack",
    ];
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info
            .payload_as_str()
            .is_some_and(|m| REFUSED.iter().any(|r| m.starts_with(r)))
        {
            end(Why::Thread);
        }
        previous(info);
    }));
}

/// The ceiling in bytes when the memory in use has passed it: readers ask
/// this between chunks and stop with an error naming their line.
pub fn over_ceiling() -> Option<u64> {
    let ceiling = CEILING.load(Ordering::Relaxed);
    (LIVE.0.load(Ordering::Relaxed) > ceiling).then_some(ceiling as u64)
}

/// Counts `size` more bytes, and ends tally if that takes it past the
/// hard limit.
#[inline]
fn take(size: usize) {
    let live = LIVE.0.fetch_add(size, Ordering::Relaxed) + size;
    if live > HARD.load(Ordering::Relaxed) {
        over();
    }
}

#[cold]
fn over() {
    // The ending thread's own allocations, and other threads' while it
    // ends (one may hold a lock it needs), go on.
    if ending_here() || ENDING.load(Ordering::SeqCst) {
        return;
    }
    end(Why::Ceiling);
}

/// The system refused `size` bytes (already uncounted): ends tally, or,
/// on the thread that is ending it, gives up.
#[cold]
fn refused(size: usize) -> *mut u8 {
    if ending_here() {
        return std::ptr::null_mut();
    }
    end(Why::Refused {
        size,
        live: LIVE.0.load(Ordering::Relaxed),
    })
}

// SAFETY: every call goes to the system allocator with the caller's
// arguments; only the count and the way out are added.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: the caller's layout, as `GlobalAlloc::alloc` requires.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            LIVE.0.fetch_sub(layout.size(), Ordering::Relaxed);
            return refused(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        take(layout.size());
        // SAFETY: as in `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            LIVE.0.fetch_sub(layout.size(), Ordering::Relaxed);
            return refused(layout.size());
        }
        p
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is the system's,
        // with this layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.0.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        let grow = new_size.saturating_sub(old);
        take(grow);
        // SAFETY: the caller's arguments, as `GlobalAlloc::realloc`
        // requires.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            LIVE.0.fetch_sub(grow, Ordering::Relaxed);
            return refused(new_size);
        }
        LIVE.0
            .fetch_sub(old.saturating_sub(new_size), Ordering::Relaxed);
        p
    }
}

/// The longest name kept for a place; a longer one keeps its end.
const NAME_MAX: usize = 480;

/// An input and the line reached in it (0: none to tell).
#[derive(Clone, Copy)]
struct Place {
    name: [u8; NAME_MAX],
    len: usize,
    line: u64,
}

impl Place {
    const NONE: Place = Place {
        name: [0; NAME_MAX],
        len: 0,
        line: 0,
    };

    fn of(name: &Path) -> Place {
        let bytes = name.as_os_str().as_encoded_bytes();
        let tail = &bytes[bytes.len().saturating_sub(NAME_MAX)..];
        let mut place = Place::NONE;
        place.name[..tail.len()].copy_from_slice(tail);
        place.len = tail.len();
        place
    }

    /// The name as text (bytes that are no UTF-8 as U+FFFD), without
    /// the broken start of a character a long name was cut in.
    fn write_name(&self, out: &mut impl std::fmt::Write) {
        let mut bytes = &self.name[..self.len];
        while let [b, rest @ ..] = bytes
            && b & 0xc0 == 0x80
        {
            bytes = rest;
        }
        for chunk in bytes.utf8_chunks() {
            let _ = out.write_str(chunk.valid());
            if !chunk.invalid().is_empty() {
                let _ = out.write_char(char::REPLACEMENT_CHARACTER);
            }
        }
    }
}

thread_local! {
    /// This thread's reader's place.
    static AT: RefCell<Place> = const { RefCell::new(Place::NONE) };
    /// This thread is ending tally.
    static ENDING_HERE: Cell<bool> = const { Cell::new(false) };
}

/// The input whose reading started last, on any thread.
static LAST: Mutex<Place> = Mutex::new(Place::NONE);

fn ending_here() -> bool {
    ENDING_HERE.try_with(Cell::get).unwrap_or(false)
}

/// A reader's place on its thread, for the line tally ends with: set by
/// [`reading`], moved on by [`Reading::at`], taken back when dropped.
pub(crate) struct Reading {
    before: Box<Place>,
}

/// Names `name` as the input read last, for a lack of memory before its
/// reader starts.
pub(crate) fn opened(name: &Path) {
    if let Ok(mut last) = LAST.lock() {
        *last = Place::of(name);
    }
}

/// Marks the current thread as reading `name` until the result is
/// dropped.
pub(crate) fn reading(name: &Path) -> Reading {
    opened(name);
    let place = Place::of(name);
    let mut before = Box::new(place);
    AT.with(|at| std::mem::swap(&mut *at.borrow_mut(), &mut before));
    Reading { before }
}

impl Reading {
    /// The reader has read `line` lines.
    pub(crate) fn at(&self, line: u64) {
        AT.with(|at| at.borrow_mut().line = line);
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        AT.with(|at| *at.borrow_mut() = *self.before);
    }
}

/// Why tally ends.
enum Why {
    /// An allocation took the count past the hard limit.
    Ceiling,
    /// The system refused `size` bytes.
    Refused { size: usize, live: usize },
    /// The system refused a new thread.
    Thread,
}

/// Ends tally from inside an allocation: see the module's docs.
fn end(why: Why) -> ! {
    if ENDING.swap(true, Ordering::SeqCst) {
        // Another thread is ending tally.
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    let _ = ENDING_HERE.try_with(|e| e.set(true));
    let reserve = RESERVE.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if !reserve.is_null() {
        // SAFETY: allocated in `enforce` with this layout, given back once.
        unsafe { System.dealloc(reserve, RESERVE_LAYOUT) };
    }
    let mut line = Line::default();
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        // After a progress bar, on a line of its own.
        line.push("\r\x1b[K");
    }
    let here = AT
        .try_with(|at| at.try_borrow().map(|p| *p).ok())
        .ok()
        .flatten();
    let place = match here {
        Some(p) if p.len > 0 => p,
        _ => LAST.try_lock().map(|p| *p).unwrap_or(Place::NONE),
    };
    if place.len == 0 {
        line.push("tally: ");
    } else {
        place.write_name(&mut line);
        if place.line > 0 {
            let _ = write!(line, ":{}", place.line);
        }
        line.push(": ");
    }
    let ceiling = CEILING.load(Ordering::Relaxed);
    match why {
        Why::Ceiling if place.line > 0 => {
            let kind = crate::error::ParseErrorKind::MemoryLimit {
                limit: ceiling as u64,
            };
            let _ = write!(line, "{kind}");
        }
        Why::Ceiling => {
            let _ = write!(
                line,
                "more memory needed than the ceiling of {} MiB \
                 (set it with --memory-limit or TALLY_MAX_MEMORY, e.g. --memory-limit 16G)",
                ceiling >> 20
            );
        }
        Why::Refused { size, live } => {
            let _ = write!(
                line,
                "out of memory: the system refused {size} bytes more with {} in use \
                 (a limit such as ulimit -v, or the machine's memory); ",
                Size(live)
            );
            lower(&mut line, ceiling);
        }
        Why::Thread => {
            let _ = write!(
                line,
                "out of memory: the system refused a new thread with {} in use \
                 (a limit such as ulimit -v or ulimit -u, or the machine's memory); ",
                Size(LIVE.0.load(Ordering::Relaxed))
            );
            lower(&mut line, ceiling);
        }
    }
    // Held until the exit: no write starts or completes past this point.
    let held = crate::output::try_abandon_writes();
    for out in held.iter().flat_map(|h| h.outputs()) {
        let _ = write!(line, "; {} left as it was", out.display());
    }
    line.push("\n");
    leave(line.text(), STATUS.load(Ordering::Relaxed))
}

/// Writes `text` to standard error and ends the process with `status`, at
/// once: past std's lock of standard error and its flush of standard
/// output, which a thread stopped inside an allocation may hold.
#[cfg(unix)]
fn leave(text: &[u8], status: i32) -> ! {
    use std::os::fd::FromRawFd;
    unsafe extern "C" {
        fn _exit(status: i32) -> !;
    }
    // SAFETY: descriptor 2 stays open: the `File` is never dropped.
    let stderr = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
    let _ = (&*stderr).write_all(text);
    // SAFETY: `_exit` takes any status and returns to nothing.
    unsafe { _exit(status) }
}

#[cfg(not(unix))]
fn leave(text: &[u8], status: i32) -> ! {
    let _ = std::io::stderr().write_all(text);
    std::process::exit(status)
}

/// What to do about an allocation the system refused under `ceiling`.
fn lower(line: &mut Line, ceiling: usize) {
    if ceiling == usize::MAX {
        line.push("no ceiling is set: set one with --memory-limit or TALLY_MAX_MEMORY");
    } else {
        let _ = write!(
            line,
            "the ceiling is {} MiB: set a lower one with --memory-limit or TALLY_MAX_MEMORY",
            ceiling >> 20
        );
    }
}

/// Bytes in MiB, or KiB below one MiB.
struct Size(usize);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            b if b < 1 << 20 => write!(f, "{} KiB", b >> 10),
            b => write!(f, "{} MiB", b >> 20),
        }
    }
}

/// One line of text on the stack; what does not fit is left out.
struct Line {
    bytes: [u8; 2048],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Line {
            bytes: [0; 2048],
            len: 0,
        }
    }
}

impl Line {
    fn push(&mut self, s: &str) {
        let _ = self.write_str(s);
    }

    fn text(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl std::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hard_limit_leaves_room_past_the_ceiling() {
        assert_eq!(hard_limit(1 << 20), 5 << 20);
        assert_eq!(hard_limit(1 << 30), (1 << 30) + (256 << 20));
        assert_eq!(hard_limit(usize::MAX), usize::MAX);
    }

    fn name(p: &Place) -> String {
        let mut s = String::new();
        p.write_name(&mut s);
        s
    }

    #[test]
    fn places_keep_the_end_of_long_names() {
        assert_eq!(name(&Place::of(Path::new("a/b.out"))), "a/b.out");
        // The cut falls inside a character, whose broken start is left out.
        let long = format!("/{}/cg.out", "é".repeat(400));
        let cut = name(&Place::of(Path::new(&long)));
        assert!(
            cut.starts_with('é') && long.ends_with(&cut) && cut.len() < NAME_MAX,
            "{cut}"
        );
        assert_eq!(name(&Place::NONE), "");
    }

    #[test]
    fn a_reading_thread_names_its_input_and_line_until_done() {
        let place = || AT.with(|at| *at.borrow());
        {
            let r = reading(Path::new("x.out"));
            r.at(42);
            assert_eq!((name(&place()), place().line), ("x.out".into(), 42));
            {
                let inner = reading(Path::new("y.out"));
                inner.at(7);
                assert_eq!(name(&place()), "y.out");
            }
            assert_eq!((name(&place()), place().line), ("x.out".into(), 42));
        }
        assert_eq!(name(&place()), "");
    }

    #[test]
    fn sizes_read_in_mib_or_kib() {
        assert_eq!(Size(3 << 20).to_string(), "3 MiB");
        assert_eq!(Size(5000).to_string(), "4 KiB");
    }

    #[test]
    fn lines_drop_what_does_not_fit() {
        let mut l = Line::default();
        for _ in 0..300 {
            let _ = write!(l, "{}", 12345678u64);
        }
        assert_eq!(l.text().len(), 2048);
    }
}
