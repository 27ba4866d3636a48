//! Signals while the program runs: Ctrl-C reaches the program (the
//! terminal sends it to the whole process group) and tally stays to write
//! what was simulated; a SIGTERM to tally is passed on to the program, so
//! that killing tally ends the run the same way.

use std::sync::atomic::{AtomicI32, Ordering};

/// The program being traced, for [`forward_term`].
static CHILD: AtomicI32 = AtomicI32::new(0);

/// From now on, SIGINT is ignored and SIGTERM goes to process `pid`.
pub fn forward_to(pid: u32) {
    CHILD.store(pid as i32, Ordering::SeqCst);
    // SAFETY: installing handlers; the SIGTERM handler only reads an
    // atomic and calls kill(2), both async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(
            libc::SIGTERM,
            forward_term as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
}

extern "C" fn forward_term(_: libc::c_int) {
    let pid = CHILD.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
}
