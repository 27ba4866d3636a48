//! Signals while a program runs. SIGINT, SIGTERM and SIGHUP sent to tally
//! are passed on to the program (for `tally sim`, QEMU's process, and with
//! `--trace-children=yes` every traced process it started, added with
//! [`Forwarding::also`]), and tally stays to write what was recorded or
//! simulated once the program has ended; a second one, for a program
//! that ignores or handles the first, kills it (SIGKILL). A terminal's
//! Ctrl-C reaches the whole process group, the program included, so it is
//! not sent again (the kernel's signals say so in `si_code`). With no
//! program to pass them to (`tally record --pid`, the system-wide
//! recording), the signals are only noted, and the caller ends at its
//! next look ([`Forwarding::received`]).
//!
//! [`Forwarding`] restores the dispositions it replaced when dropped (the
//! handlers of `tally_formats::signals`, which stop tally), which the
//! callers do as soon as the program has ended, so that the profile is
//! written under the caller's handlers.
//!
//! The handler needs `sigaction(2)` and `kill(2)`, hence `unsafe` here;
//! tally-formats, whose handlers these replace for a while, allows none.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicI32, Ordering};

/// The signals passed on by [`forward_to`].
pub const FORWARDED: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// The program (0: none).
static CHILD: AtomicI32 = AtomicI32::new(0);
/// Other processes the program started (0: a free place), traced with
/// `--trace-children=yes`.
static OTHERS: [AtomicI32; 256] = [const { AtomicI32::new(0) }; 256];
/// The first signal received (0: none yet).
static FIRST: AtomicI32 = AtomicI32::new(0);
/// Signals received.
static COUNT: AtomicI32 = AtomicI32::new(0);

/// Signals passed on to a program (or only noted) while this lives.
/// Forwarding is process-wide: one at a time.
pub struct Forwarding {
    previous: Vec<(libc::c_int, libc::sigaction)>,
}

/// From now on SIGINT, SIGTERM and SIGHUP ([`FORWARDED`]) go to process
/// `pid` (0: to no one, they are only noted), until the result is
/// dropped.
pub fn forward_to(pid: u32) -> Forwarding {
    forward_signals(pid, &FORWARDED)
}

/// From now on the signals `signals` go to process `pid` (0: to no one,
/// they are only noted), until the result is dropped.
pub fn forward_signals(pid: u32, signals: &[libc::c_int]) -> Forwarding {
    CHILD.store(pid as i32, Ordering::SeqCst);
    for p in &OTHERS {
        p.store(0, Ordering::SeqCst);
    }
    FIRST.store(0, Ordering::SeqCst);
    COUNT.store(0, Ordering::SeqCst);
    let mut previous = Vec::new();
    for &sig in signals {
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
    /// Signals go to process `pid` too (a traced child; if all 256 places
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

    /// Process `pid`, given to [`Forwarding::also`], has ended: no more
    /// signals for it.
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
            // SAFETY: putting back the action `forward_signals` replaced.
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::sync::Mutex;

    /// The forwarding is process-wide, and the launcher's tests wait for
    /// children: one test at a time.
    pub(crate) static ONE: Mutex<()> = Mutex::new(());

    fn raise(sig: libc::c_int) {
        // SAFETY: raise(3) sends a signal to this thread; every signal
        // raised here has the forwarding's handler installed.
        assert_eq!(unsafe { libc::raise(sig) }, 0);
    }

    /// The handler installed for `sig` now.
    fn handler(sig: libc::c_int) -> libc::sighandler_t {
        // SAFETY: querying the action (no new one) into a zeroed struct.
        unsafe {
            let mut now: libc::sigaction = std::mem::zeroed();
            assert_eq!(libc::sigaction(sig, std::ptr::null(), &mut now), 0);
            now.sa_sigaction
        }
    }

    /// Waits until process `pid` ignores `sig` (its `/proc` status says
    /// so), for at most ten seconds.
    fn ignoring(pid: u32, sig: libc::c_int) {
        for _ in 0..1000 {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let ignored = status
                .lines()
                .find_map(|l| l.strip_prefix("SigIgn:"))
                .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
                .unwrap_or(0);
            if ignored & (1 << (sig - 1)) != 0 {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("process {pid} does not ignore signal {sig}");
    }

    fn sleeper() -> std::process::Child {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep")
    }

    #[test]
    fn a_signal_is_passed_on_to_the_program() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut child = sleeper();
        let forwarding = forward_to(child.id());
        raise(libc::SIGTERM);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
        assert_eq!(forwarding.received(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_second_signal_kills_the_program() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        // A program that ignores SIGHUP.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "trap '' HUP; exec sleep 30"])
            .spawn()
            .expect("sh");
        ignoring(child.id(), libc::SIGHUP);
        let forwarding = forward_to(child.id());
        raise(libc::SIGHUP);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(child.try_wait().unwrap().is_none(), "SIGHUP is ignored");
        raise(libc::SIGINT);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        // The first one is the one reported.
        assert_eq!(forwarding.received(), Some(libc::SIGHUP));
    }

    #[test]
    fn without_a_program_signals_are_noted_and_the_old_handlers_come_back() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let before = handler(libc::SIGINT);
        let forwarding = forward_to(0);
        assert_eq!(forwarding.received(), None);
        assert_ne!(handler(libc::SIGINT), before);
        raise(libc::SIGINT);
        assert_eq!(forwarding.received(), Some(libc::SIGINT));
        drop(forwarding);
        assert_eq!(handler(libc::SIGINT), before);
        assert_eq!(CHILD.load(Ordering::SeqCst), 0);
        // A new forwarding starts with nothing received.
        let again = forward_to(0);
        assert_eq!(again.received(), None);
    }

    #[test]
    fn other_processes_get_the_signals_until_forgotten() {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut first = sleeper();
        let mut other = sleeper();
        let mut gone = sleeper();
        let forwarding = forward_to(first.id());
        forwarding.also(other.id());
        forwarding.also(other.id());
        forwarding.also(gone.id());
        forwarding.forget(gone.id());
        raise(libc::SIGTERM);
        assert_eq!(first.wait().unwrap().signal(), Some(libc::SIGTERM));
        assert_eq!(other.wait().unwrap().signal(), Some(libc::SIGTERM));
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(gone.try_wait().unwrap().is_none(), "forgotten");
        drop(forwarding);
        let _ = gone.kill();
        let _ = gone.wait();
    }
}
