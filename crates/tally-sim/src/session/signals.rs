//! Signals while the program runs. SIGINT, SIGTERM and SIGHUP sent to
//! tally are passed on to the program (QEMU's process, and every traced
//! process it started with `--trace-children=yes`), and tally stays to
//! write what was simulated once the program has ended; a second one, for
//! a program that ignores or handles the first, kills it (SIGKILL). A
//! terminal's Ctrl-C reaches the whole process group, the program
//! included, so it is not sent again (the kernel's signals say so in
//! `si_code`). [`Forwarding`] restores the dispositions it replaced when
//! dropped, which the session does as soon as the program has ended, so
//! that the profile is written under the caller's handlers.
//!
//! `tally record` forwards signals the same way (`tally_record::sys::signals`,
//! without the traced children). The handler needs `sigaction(2)` and
//! `kill(2)`, so each crate keeps it in its one module that allows
//! `unsafe`; tally-formats, which both use, allows none.

use std::sync::atomic::{AtomicI32, Ordering};

/// The signals passed on.
const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The program being traced (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Other traced processes the program started (0: a free place), with
/// `--trace-children=yes`.
static OTHERS: [AtomicI32; 256] = [const { AtomicI32::new(0) }; 256];
/// The first signal received (0: none yet).
static FIRST: AtomicI32 = AtomicI32::new(0);
/// Signals received.
static COUNT: AtomicI32 = AtomicI32::new(0);

/// SIGINT, SIGTERM and SIGHUP passed on to a program while this lives.
pub struct Forwarding {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

/// From now on SIGINT, SIGTERM and SIGHUP go to process `pid`, until the
/// result is dropped.
pub fn forward_to(pid: u32) -> Forwarding {
    CHILD.store(pid as i32, Ordering::SeqCst);
    FIRST.store(0, Ordering::SeqCst);
    COUNT.store(0, Ordering::SeqCst);
    let mut previous = Vec::new();
    for sig in FORWARDED {
        // SAFETY: installing a handler that only touches atomics and calls
        // kill(2), all async-signal-safe; the old action is kept to be
        // restored. Zeroed sigaction structs are valid.
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = forward
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as libc::sighandler_t;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&mut new.sa_mask);
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, &new, &mut old) == 0 {
                previous.push((sig, old));
            }
        }
    }
    Forwarding { previous }
}

impl Forwarding {
    /// Signals go to process `pid` too (a traced child; if all places
    /// are taken it is not signalled).
    pub fn also(&self, pid: u32) {
        for p in &OTHERS {
            if p.load(Ordering::SeqCst) == pid as i32 {
                return;
            }
        }
        for p in &OTHERS {
            if p.compare_exchange(0, pid as i32, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Process `pid` has ended: no more signals for it.
    pub fn forget(&self, pid: u32) {
        for p in &OTHERS {
            let _ = p.compare_exchange(pid as i32, 0, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    /// The first signal tally received while forwarding, if any.
    pub fn received(&self) -> Option<i32> {
        Some(FIRST.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        for (sig, old) in &self.previous {
            // SAFETY: putting back the action `forward_to` replaced.
            unsafe { libc::sigaction(*sig, old, std::ptr::null_mut()) };
        }
        CHILD.store(0, Ordering::SeqCst);
        for p in &OTHERS {
            p.store(0, Ordering::SeqCst);
        }
    }
}

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    let _ = FIRST.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    let n = COUNT.fetch_add(1, Ordering::SeqCst) + 1;
    // SAFETY: `info` is the kernel's siginfo for this signal (SA_SIGINFO).
    let from_kernel = !info.is_null() && unsafe { (*info).si_code } == libc::SI_KERNEL;
    for pid in std::iter::once(&CHILD).chain(OTHERS.iter()) {
        let pid = pid.load(Ordering::SeqCst);
        if pid <= 0 {
            continue;
        }
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            if n >= 2 {
                libc::kill(pid, libc::SIGKILL);
            } else if !from_kernel {
                // A terminal's signal went to the whole group, the program
                // included; any other is passed on.
                libc::kill(pid, sig);
            }
        }
    }
}
