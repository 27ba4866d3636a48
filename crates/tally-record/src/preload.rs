//! Reading the symbols a recording will need while the program runs.
//!
//! Symbolising a recording opens every mapped object file, decompresses
//! and indexes its DWARF line tables and, for kernel frames, reads
//! `/proc/kallsyms`: tens to hundreds of milliseconds that would otherwise
//! all come after the program ends, as wall time the user waits. A thread
//! does that reading as the mappings are reported, on a core the sampled
//! program is usually not using.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, TryRecvError, channel};
use tally_formats::perf::samples::Symbols;

/// The reading thread's queue, and what it has read.
pub(crate) struct Preloader {
    paths: Option<Sender<Vec<u8>>>,
    symbols: Symbols,
    stop: Arc<AtomicBool>,
}

impl Preloader {
    /// Starts the thread; `kernel_release` (the running kernel's release)
    /// when kernel frames may be sampled, so that it reads the kernel's
    /// symbols too, when no object file is waiting.
    pub(crate) fn start(kernel_release: Option<String>) -> Preloader {
        let (tx, rx) = channel::<Vec<u8>>();
        let symbols = Symbols::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopped) = (symbols.clone(), stop.clone());
        let started = std::thread::Builder::new()
            .name("tally-symbols".into())
            .spawn(move || {
                let mut kernel = kernel_release;
                while !stopped.load(Ordering::Relaxed) {
                    let path = match rx.try_recv() {
                        Ok(p) => p,
                        Err(TryRecvError::Empty) => match kernel.take() {
                            Some(release) => {
                                shared.load_kernel(Some(&release));
                                continue;
                            }
                            None => match rx.recv() {
                                Ok(p) => p,
                                Err(_) => break,
                            },
                        },
                        Err(TryRecvError::Disconnected) => break,
                    };
                    shared.load_object(&path);
                }
            })
            .is_ok();
        Preloader {
            paths: started.then_some(tx),
            symbols,
            stop,
        }
    }

    /// Queues the object file at `path` (a mapping's path).
    pub(crate) fn object(&self, path: &[u8]) {
        if let Some(tx) = &self.paths {
            let _ = tx.send(path.to_vec());
        }
    }

    /// What has been read, and stops the thread after the file it is
    /// reading: symbolising opens what it still needs itself (or waits for
    /// the file the thread is opening), so nothing it does not need is
    /// waited for.
    pub(crate) fn finish(self) -> Symbols {
        self.stop.store(true, Ordering::Relaxed);
        self.symbols
    }
}
