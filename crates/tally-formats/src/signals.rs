//! Ending on SIGINT, SIGTERM and SIGHUP without leaving anything behind:
//! [`install`] starts a thread that waits for them (signal-hook's
//! iterator: the handler itself only wakes the thread), removes the
//! temporary files of writes in progress ([`crate::output::abandon_writes`]),
//! lets the caller say why it stops and exits with status 128 + signal.
//! Outputs are then each complete or as they were.
//!
//! Code that needs the signals for a while (`tally sim` passes them to the
//! program it runs) installs its own handlers and restores the previous
//! ones afterwards, which brings this one back. Nothing runs on SIGKILL or
//! when the kernel kills tally for lack of memory: a temporary file of an
//! unfinished write can remain there, named `.tally-*.tmp` next to its
//! output.

use std::path::PathBuf;

/// Why tally is stopping: the signal, and the outputs whose writes it cut
/// short (left as they were).
#[derive(Debug)]
#[non_exhaustive]
pub struct Stop {
    /// The signal number.
    pub signal: i32,
    /// Outputs being written when the signal came, left as they were.
    pub abandoned: Vec<PathBuf>,
}

impl Stop {
    /// The signal's name (`SIGINT`, `SIGTERM`, `SIGHUP`).
    pub fn name(&self) -> &'static str {
        signal_name(self.signal)
    }

    /// The exit status a shell gives a program ended by the signal:
    /// 128 + its number.
    pub fn exit_code(&self) -> i32 {
        128 + self.signal
    }
}

/// The name of the signals [`install`] handles.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => "SIGHUP",
        2 => "SIGINT",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

/// From now on SIGINT, SIGTERM and SIGHUP, sent to the process or its
/// group, remove the temporary files of writes in progress, call
/// `on_stop` (to say why tally stops, on one line) and exit with
/// [`Stop::exit_code`]. Writes that have not started yet do not start, and
/// one being renamed into place completes first. Only the first call
/// installs anything; later ones return `Ok` and drop their `on_stop`.
#[cfg(unix)]
pub fn install(on_stop: impl FnOnce(&Stop) + Send + 'static) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    use std::sync::Mutex;

    static INSTALLED: Mutex<bool> = Mutex::new(false);
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    let received = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM, SIGHUP] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&received))?;
    }
    let _ = RECEIVED.set(received);
    std::thread::Builder::new()
        .name("tally-signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                // Held until the process ends: no write starts or
                // completes past this point.
                let held = crate::output::abandon_writes();
                let stop = Stop {
                    signal,
                    abandoned: held.outputs().to_vec(),
                };
                on_stop(&stop);
                std::process::exit(stop.exit_code());
            }
        })?;
    *installed = true;
    Ok(())
}

/// Set by the handler itself, as the signal comes: see [`await_stop`].
#[cfg(unix)]
static RECEIVED: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// Called as tally is about to end by itself. A signal that came while
/// the work was finishing has run its handler, but the thread that stops
/// tally may not have run yet: the main thread's return would then win,
/// and the exit status would be the work's instead of 128 + signal. So
/// this waits for that thread to end the process (after a second without
/// it, it returns).
#[cfg(unix)]
pub fn await_stop() {
    use std::sync::atomic::Ordering;
    if RECEIVED
        .get()
        .is_some_and(|received| received.load(Ordering::SeqCst))
    {
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
}

/// Elsewhere there are no such signals: nothing to wait for.
#[cfg(not(unix))]
pub fn await_stop() {}

/// Elsewhere there are no such signals: nothing to install.
#[cfg(not(unix))]
pub fn install(on_stop: impl FnOnce(&Stop) + Send + 'static) -> std::io::Result<()> {
    drop(on_stop);
    Ok(())
}
