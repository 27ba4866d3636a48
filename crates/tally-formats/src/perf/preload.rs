//! Reading the object files and kernel symbols that symbolising will need
//! on another thread, ahead of the samples that need them.
//!
//! Opening an object file, decompressing and indexing its DWARF line
//! tables and reading `/proc/kallsyms` take tens to hundreds of
//! milliseconds, as long as symbolising a hundred megabytes of samples;
//! done by the thread that decodes and symbolises, they add up, while the
//! second core waits. The thread reads files in the order they are
//! queued, and the kernel's symbols when no file is waiting.

use super::samples::Symbols;
use rustc_hash::FxHashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Sender, TryRecvError, channel};
use std::thread::JoinHandle;

/// The reading thread's queue, and what it has read.
pub struct Preloader {
    paths: Option<Sender<Vec<u8>>>,
    queued: FxHashSet<Vec<u8>>,
    symbols: Symbols,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Preloader {
    /// Starts the thread; `kernel_release` when kernel frames may be
    /// named (the release the samples were taken on), so that it reads the
    /// kernel's symbols too. Without a thread (none could be started),
    /// nothing is read ahead and symbolising reads what it needs itself.
    pub fn start(kernel_release: Option<String>) -> Preloader {
        let (tx, rx) = channel::<Vec<u8>>();
        let symbols = Symbols::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (shared, stopped) = (symbols.clone(), stop.clone());
        let thread = std::thread::Builder::new()
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
            .ok();
        Preloader {
            paths: thread.is_some().then_some(tx),
            queued: FxHashSet::default(),
            symbols,
            stop,
            thread,
        }
    }

    /// The files and symbols read or being read, for
    /// [`super::samples::SampledStacks::with_symbols`].
    pub fn symbols(&self) -> Symbols {
        self.symbols.clone()
    }

    /// Queues the object file at `path` (a mapping's path), once; a
    /// jitdump file holds no code and is not queued.
    pub fn object(&mut self, path: &[u8]) {
        if let Some(tx) = &self.paths
            && path.starts_with(b"/")
            && super::samples::jitdump_pid(path).is_none()
            && !self.queued.contains(path)
        {
            self.queued.insert(path.to_vec());
            let _ = tx.send(path.to_vec());
        }
    }
}

impl Drop for Preloader {
    /// Stops the thread after the file it is reading, and waits for it:
    /// nothing a read started outlives it (its memory and CPU belong to
    /// the read, not to whatever runs next). What symbolising still needs,
    /// it opens itself.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.paths = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
