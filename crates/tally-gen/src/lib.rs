//! Deterministic generator of large, realistic Callgrind profiles.
//!
//! Real profiles of the size that matters for benchmarks (hundreds of
//! megabytes) cannot be shipped in a repository, and small real ones do not
//! exercise the reader's hot paths the way large ones do. [`generate`]
//! writes what Valgrind 3.19 writes with `--dump-instr=yes
//! --collect-jumps=yes` (optionally `--cache-sim=yes` and
//! `--branch-sim=yes`) for a large C++ program, or in the [`Shape`] of
//! another kind of program (cc1's, CPython's): the same header, name
//! compression, relative positions, inlined code (`fi=`/`fe=`), calls
//! between objects and files, conditional and unconditional jumps, and the
//! same quirks (trailing spaces after positions, line 0 for code without
//! debug information). The same [`Config`] always gives the same bytes.
//!
//! How it is built, module by module:
//!
//! - `model`: the synthetic program (objects, source files, functions,
//!   their code layout and the order their blocks are written in), derived
//!   from the seed before anything is written;
//! - `body`: one function block (a segment of a function: cost, call and
//!   jump lines), its code from a stream seeded by the function and
//!   segment, its counts from one seeded by the block's index, so that
//!   threads can write blocks in chunks and still give the same bytes;
//! - `emit`: where text goes. The header's `summary:` is the sum of the
//!   body, so [`generate`] runs twice over the same streams, first only
//!   counting, then writing, through one generic code path;
//! - `rng`: a small generator of our own, so that the bytes never change
//!   with a dependency's release.
//!
//! ```
//! let config = tally_gen::Config { size: 64 << 10, ..Default::default() };
//! let mut out = Vec::new();
//! let stats = tally_gen::generate(&config, &mut out).unwrap();
//! assert_eq!(stats.bytes, out.len() as u64);
//! assert!(out.starts_with(b"# callgrind format\n"));
//! ```

#![deny(missing_docs)]

mod body;
mod emit;
pub mod measure;
mod model;
mod rng;

use body::{Body, Counts};
use emit::{BufOut, Counter, Emit};
use model::Model;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;

/// Which events the profile records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EventSet {
    /// `Ir` only: Callgrind's default.
    #[default]
    Ir,
    /// `--cache-sim=yes`: `Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw`.
    Cache,
    /// `--cache-sim=yes --branch-sim=yes`: the nine of `Cache`, then
    /// `Bc Bcm Bi Bim` (conditional and indirect branches, and their
    /// mispredictions), as Cachegrind records by default.
    Branch,
}

impl EventSet {
    /// The event names, in the order of the `events:` line.
    pub fn names(self) -> &'static [&'static str] {
        match self {
            EventSet::Ir => &["Ir"],
            EventSet::Cache => &[
                "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw",
            ],
            EventSet::Branch => &[
                "Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw", "Bc", "Bcm",
                "Bi", "Bim",
            ],
        }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Seed of all random choices: equal configs give equal bytes.
    pub seed: u64,
    /// Target size of the output in bytes. Generation stops after the
    /// function block that reaches it, so the output is a little larger
    /// (by less than one block, typically a few kilobytes). The program's size (objects, files,
    /// functions) is scaled from this and `events`.
    pub size: u64,
    /// Recorded events.
    pub events: EventSet,
    /// Name compression and relative positions, as Valgrind writes by
    /// default; `false` is `--compress-strings=no --compress-pos=no`.
    pub compress: bool,
    /// Write exactly this many function blocks instead of stopping at
    /// `size` (which then only scales the program). With equal `seed`,
    /// `size`, `events` and `blocks`, compressed and uncompressed outputs
    /// describe the same profile.
    pub blocks: Option<u64>,
    /// What kind of program and run the profile is of.
    pub shape: Shape,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            seed: 1,
            size: 1 << 20,
            events: EventSet::Ir,
            compress: true,
            blocks: None,
            shape: Shape::default(),
        }
    }
}

/// The program and the run, beyond its size: what sets the line mix. The
/// default is a C++ program built with debug information, profiled with
/// Callgrind's defaults. A release build profiled with
/// `--separate-callers=3`, such as GCC's `cc1`, is
/// `Shape { separate_callers: 3, no_debug_info: true, .. }`: its names are
/// long context names, a quarter of a file's bytes, and it switches files
/// almost never. CPython built with debug information is
/// `Shape { c_program: true, .. }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Callgrind's `--separate-callers=N`: every function is split by its
    /// last `N` callers into contexts named `f'caller'caller's caller…`
    /// (some a caller's address, where it had no symbol), a few contexts
    /// for most functions and thousands for a few; 0 for none.
    pub separate_callers: u32,
    /// The program's own code has no debug information: its functions are
    /// in file `???` at line 0, and nothing is inlined from headers.
    pub no_debug_info: bool,
    /// The program is written in C, as an interpreter such as CPython is:
    /// short C names and no libstdc++, small functions, static inline code
    /// from headers in most of them (so `fi=`/`fe=` every few lines), a
    /// call in twice as many basic blocks, and the second level of
    /// recursive functions named `f'2` (Callgrind's `--separate-recs=2`).
    pub c_program: bool,
}

impl Shape {
    /// GCC's `cc1` as `bench/corpus.sh` profiles it: a release build under
    /// `--separate-callers=3`.
    pub const CC1: Shape = Shape {
        separate_callers: 3,
        no_debug_info: true,
        c_program: false,
    };
    /// CPython as `bench/corpus.sh` profiles it: a C interpreter with debug
    /// information, under Callgrind's defaults.
    pub const PYTHON: Shape = Shape {
        separate_callers: 0,
        no_debug_info: false,
        c_program: true,
    };
}

/// What was generated: the profile's totals and record counts, as a reader
/// should find them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Event names, as in `events:`.
    pub events: Vec<&'static str>,
    /// Sum of all self costs per event (= `summary:` = `totals:`).
    pub totals: Vec<u64>,
    /// Self-cost lines.
    pub lines: u64,
    /// Call arcs (`calls=` lines).
    pub calls: u64,
    /// Jumps (`jump=` and `jcnd=` lines).
    pub jumps: u64,
    /// Distinct functions named by `fn=`, `cfn=` or `jfn=`: a function is
    /// (object, file, name), as readers key them.
    pub functions: u64,
    /// Function blocks (`fn=` lines).
    pub blocks: u64,
    /// Distinct object names written.
    pub objects: u64,
    /// Distinct file names written.
    pub files: u64,
    /// Bytes written.
    pub bytes: u64,
}

/// Compressed bytes per cost line, calls and jumps included: scales the
/// program so that most functions appear about once. Measured on generated
/// output; only the program's size depends on it, never correctness.
fn bytes_per_line(events: EventSet) -> u64 {
    match events {
        EventSet::Ir => 12,
        EventSet::Cache => 15,
        EventSet::Branch => 16,
    }
}

/// Function blocks per piece of work of a thread (about 0.5 MB of text).
const CHUNK_BLOCKS: u64 = 256;

/// Generates a Callgrind profile into `out`.
///
/// The body is generated twice: once only measuring (the header's
/// `summary:` must equal the sum of the cost lines, and the size decides
/// where to stop), then for real. Both passes split the blocks into chunks
/// that threads (as many as there are processors, up to 4) handle
/// independently, in order; the result does not depend on the number of
/// threads. Memory stays small (the program's names and layout, a few
/// chunks) whatever the size.
pub fn generate(config: &Config, out: &mut dyn Write) -> io::Result<Stats> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    generate_with(config, out, threads.min(4))
}

/// [`generate`] with a given number of threads.
fn generate_with(config: &Config, out: &mut dyn Write, threads: usize) -> io::Result<Stats> {
    let lines = config.size / bytes_per_line(config.events) + 1;
    let model = Model::build(config.seed, lines, config.shape);
    let plan = first_pass(&model, config, threads);
    let job = Job {
        model: &model,
        compress: config.compress,
        events: config.events,
        blocks: plan.counts.blocks,
        first_uses: &plan.first_uses,
        marks: &plan.marks,
        threads,
    };
    let mut w = BufOut::new(out);
    header(&mut w, config, &plan.counts);
    let mut w = job.write(w);
    trailer(&mut w, &plan.counts);
    let bytes = w.finish()?;
    // The first pass measured every block exactly.
    debug_assert_eq!(
        {
            let mut ends = Counter::default();
            header(&mut ends, config, &plan.counts);
            trailer(&mut ends, &plan.counts);
            ends.len() + plan.body_bytes
        },
        bytes
    );
    let counts = plan.counts;
    Ok(Stats {
        events: config.events.names().to_vec(),
        totals: counts.totals,
        lines: counts.lines,
        calls: counts.calls,
        jumps: counts.jumps,
        functions: counts.functions,
        blocks: counts.blocks,
        objects: counts.objects,
        files: counts.files,
        bytes,
    })
}

/// What the first pass found.
struct Plan {
    /// Totals and counts of the blocks to write (`blocks` of them).
    counts: Counts,
    /// Names in the order of their first use, and where each chunk's
    /// first uses start in that list (one more entry than chunks).
    first_uses: Vec<(u8, u32)>,
    marks: Vec<usize>,
    /// Bytes of the blocks.
    body_bytes: u64,
}

/// One chunk of blocks, measured as if all names were already defined.
struct Measured {
    counts: Counts,
    /// Bytes of each block.
    block_bytes: Vec<u64>,
    /// Names and functions the chunk refers to, each with the offset of
    /// the first block that does.
    names: Vec<(u8, u32, u32)>,
    functions: Vec<(u32, u32)>,
}

/// Measures blocks `start..end` (within one chunk).
fn measure(body: &mut Body<'_, Counter>, start: u64, end: u64) -> Measured {
    body.new_chunk();
    body.start_at(start);
    let mut block_bytes = Vec::with_capacity((end - start) as usize);
    for (off, i) in (start..end).enumerate() {
        body.block_off = off as u32;
        let before = body.e.len();
        body.block(i);
        block_bytes.push(body.e.len() - before);
    }
    Measured {
        counts: std::mem::take(&mut body.counts),
        block_bytes,
        names: std::mem::take(&mut body.refs),
        functions: std::mem::take(&mut body.fn_refs),
    }
}

/// The first pass. Threads measure chunks of blocks independently (which
/// names a chunk defines depends on all chunks before it, so they only
/// list the names they use); this thread takes the chunks in order, works
/// out which names each defines and what that adds to its size, and stops
/// at the block that reaches the target size.
fn first_pass(model: &Model, config: &Config, threads: usize) -> Plan {
    let new_body = || {
        let mut b = Body::new(model, Counter::default(), config.compress, config.events);
        b.defer = true;
        b
    };
    let max_chunks = config
        .blocks
        .map_or(u64::MAX, |n| n.max(1).div_ceil(CHUNK_BLOCKS));
    let chunk_end = |k: u64| match config.blocks {
        Some(n) => ((k + 1) * CHUNK_BLOCKS).min(n.max(1)),
        None => (k + 1) * CHUNK_BLOCKS,
    };
    let mut merge = Merge::new(model, config);
    if threads <= 1 {
        let mut body = new_body();
        for k in 0..max_chunks {
            let m = measure(&mut body, k * CHUNK_BLOCKS, chunk_end(k));
            if merge.take(k, m, &mut body) {
                break;
            }
        }
        return merge.plan;
    }
    let next = AtomicU64::new(0);
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel::<(u64, Measured)>();
        for _ in 0..threads {
            let tx = tx.clone();
            let (next, done) = (&next, &done);
            scope.spawn(move || {
                let mut body = new_body();
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= max_chunks || done.load(Ordering::Relaxed) {
                        return;
                    }
                    let m = measure(&mut body, k * CHUNK_BLOCKS, chunk_end(k));
                    if tx.send((k, m)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        // Chunks arrive in any order; they are merged in order.
        let mut waiting = std::collections::BTreeMap::new();
        let mut body = new_body();
        let mut k = 0;
        for (i, m) in rx.iter() {
            waiting.insert(i, m);
            while let Some(m) = waiting.remove(&k) {
                if merge.take(k, m, &mut body) {
                    done.store(true, Ordering::Relaxed);
                    return;
                }
                k += 1;
            }
        }
    });
    merge.plan
}

/// The first pass's state while it takes chunks in order.
struct Merge<'a> {
    model: &'a Model,
    config: &'a Config,
    plan: Plan,
    seen: [Vec<bool>; 3],
    fn_seen: Vec<bool>,
}

impl<'a> Merge<'a> {
    fn new(model: &'a Model, config: &'a Config) -> Self {
        Merge {
            model,
            config,
            plan: Plan {
                counts: Counts {
                    totals: vec![0; config.events.names().len()],
                    ..Counts::default()
                },
                first_uses: Vec::new(),
                marks: vec![0],
                body_bytes: 0,
            },
            seen: [
                vec![false; model.objects.names.len()],
                vec![false; model.files.names.len()],
                vec![false; model.symbols.names.len()],
            ],
            fn_seen: vec![false; model.funcs.len()],
        }
    }

    /// Adds chunk `k`; returns true when the file is complete (possibly
    /// within this chunk: its blocks up to the last one needed are
    /// measured again with `body`).
    fn take(&mut self, k: u64, m: Measured, body: &mut Body<'_, Counter>) -> bool {
        let n = m.block_bytes.len();
        // Names first used here add their text (`(id) name`, not `(id)`).
        let mut extra = vec![0u64; n];
        let mut new_names = Vec::new();
        for &(space, index, off) in &m.names {
            if !self.seen[space as usize][index as usize] {
                new_names.push((space, index, off));
                if self.config.compress {
                    let table = match space {
                        0 => &self.model.objects,
                        1 => &self.model.files,
                        _ => &self.model.symbols,
                    };
                    extra[off as usize] += 1 + table.get(index).len() as u64;
                }
            }
        }
        // The header and trailer as long as they are at least.
        let mut fixed = Counter::default();
        header(&mut fixed, self.config, &self.plan.counts);
        trailer(&mut fixed, &self.plan.counts);
        let mut complete = None;
        let before = self.plan.counts.blocks;
        for (b, (bytes, extra)) in m.block_bytes.iter().zip(&extra).enumerate() {
            self.plan.body_bytes += bytes + extra;
            let blocks = before + b as u64 + 1;
            let enough = match self.config.blocks {
                Some(want) => blocks >= want.max(1),
                None => fixed.len() + self.plan.body_bytes >= self.config.size,
            };
            if enough {
                complete = Some(b + 1);
                break;
            }
        }
        let used = complete.unwrap_or(n);
        for &(space, index, off) in &new_names {
            if (off as usize) < used {
                self.seen[space as usize][index as usize] = true;
                self.plan.first_uses.push((space, index));
                match space {
                    0 => self.plan.counts.objects += 1,
                    1 => self.plan.counts.files += 1,
                    _ => {}
                }
            }
        }
        for &(f, off) in &m.functions {
            if (off as usize) < used && !self.fn_seen[f as usize] {
                self.fn_seen[f as usize] = true;
                self.plan.counts.functions += 1;
            }
        }
        self.plan.marks.push(self.plan.first_uses.len());
        if used == n {
            self.plan.counts.add(&m.counts);
        } else {
            let start = k * CHUNK_BLOCKS;
            let part = measure(body, start, start + used as u64);
            self.plan.counts.add(&part.counts);
        }
        complete.is_some()
    }
}

/// The second pass: what to write, as the first pass found it.
struct Job<'a> {
    model: &'a Model,
    compress: bool,
    events: EventSet,
    blocks: u64,
    /// Names in the order of their first use, and where each chunk's
    /// first uses start in that list.
    first_uses: &'a [(u8, u32)],
    marks: &'a [usize],
    threads: usize,
}

impl Job<'_> {
    /// Writes the blocks after the header in `w`, in chunks: worker `t` of
    /// `n` writes chunks `t`, `t + n`, … into memory, and this thread
    /// passes them on in order. A worker knows which names earlier chunks
    /// defined from the first pass, so its output is the same as if one
    /// thread had written everything.
    fn write<'o>(&self, w: BufOut<&'o mut dyn Write>) -> BufOut<&'o mut dyn Write> {
        let chunks = self.blocks.div_ceil(CHUNK_BLOCKS) as usize;
        let workers = self.threads.min(chunks);
        if workers <= 1 {
            let mut body = Body::new(self.model, w, self.compress, self.events);
            for i in 0..self.blocks {
                body.block(i);
                if body.e.failed() {
                    break;
                }
            }
            return body.e;
        }
        let mut w = w;
        std::thread::scope(|scope| {
            let mut inbox = Vec::new();
            for t in 0..workers {
                let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(2);
                inbox.push(rx);
                scope.spawn(move || self.worker(t, workers, chunks, &tx));
            }
            for k in 0..chunks {
                match inbox[k % workers].recv() {
                    Ok(data) => w.bytes(&data),
                    // A worker stopped: it panicked, which the scope
                    // reports.
                    Err(_) => break,
                }
                if w.failed() {
                    break;
                }
            }
            // Unblocks workers waiting to send after a write error.
            drop(inbox);
        });
        w
    }

    fn worker(&self, t: usize, workers: usize, chunks: usize, tx: &SyncSender<Vec<u8>>) {
        let mut body = Body::new(
            self.model,
            BufOut::new(Vec::new()),
            self.compress,
            self.events,
        );
        let mut known = 0;
        for k in (t..chunks).step_by(workers) {
            for j in known..k {
                body.mark_seen(&self.first_uses[self.marks[j]..self.marks[j + 1]]);
            }
            let start = k as u64 * CHUNK_BLOCKS;
            body.start_at(start);
            for i in start..(start + CHUNK_BLOCKS).min(self.blocks) {
                body.block(i);
            }
            if tx.send(body.e.take()).is_err() {
                return;
            }
            known = k + 1;
        }
    }
}

/// The header as Valgrind 3.19 writes it, blank lines included.
fn header(w: &mut impl Emit, config: &Config, counts: &Counts) {
    w.bytes(
        b"# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 4242\ncmd:  ./generated\npart: 1\n\n\n",
    );
    if config.events != EventSet::Ir {
        w.bytes(
            b"desc: I1 cache: 32768 B, 64 B, 8-way associative\n\
              desc: D1 cache: 32768 B, 64 B, 8-way associative\n\
              desc: LL cache: 8388608 B, 64 B, 16-way associative\n\n",
        );
    } else {
        w.bytes(b"desc: I1 cache: \ndesc: D1 cache: \ndesc: LL cache: \n\n");
    }
    w.bytes(b"desc: Timerange: Basic block 0 - ");
    w.dec(counts.bb_execs);
    w.bytes(b"\ndesc: Trigger: Program termination\n\npositions: instr line\nevents:");
    for e in config.events.names() {
        w.byte(b' ');
        w.bytes(e.as_bytes());
    }
    w.bytes(b"\nsummary:");
    for &t in &counts.totals {
        w.byte(b' ');
        w.dec(t);
    }
    w.bytes(b"\n\n\n");
}

/// The end of the file: `totals:`, equal to `summary:`.
fn trailer(w: &mut impl Emit, counts: &Counts) {
    w.bytes(b"totals:");
    for &t in &counts.totals {
        w.byte(b' ');
        w.dec(t);
    }
    w.byte(b'\n');
}

/// Parses a size such as `500M`, `64K`, `2G` or `1000` (binary multiples:
/// K = 1024).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1u64 << 10),
        b'm' | b'M' => (&s[..s.len() - 1], 1 << 20),
        b'g' | b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("500M"), Some(500 << 20));
        assert_eq!(parse_size("64k"), Some(64 << 10));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("1000"), Some(1000));
        assert_eq!(parse_size("M"), None);
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999G"), None);
    }

    /// Threads write chunks of blocks knowing only what the first pass
    /// told them; the result must not depend on how many there are.
    #[test]
    fn output_does_not_depend_on_threads() {
        for compress in [true, false] {
            let config = Config {
                size: 3 << 20,
                events: EventSet::Cache,
                compress,
                ..Config::default()
            };
            let mut one = Vec::new();
            let s1 = generate_with(&config, &mut one, 1).unwrap();
            for threads in [2, 3] {
                let mut many = Vec::new();
                let s = generate_with(&config, &mut many, threads).unwrap();
                assert_eq!(s, s1);
                assert!(one == many, "{threads} threads, compress {compress}");
            }
        }
    }

    #[test]
    fn output_is_close_to_the_target_size() {
        for events in [EventSet::Ir, EventSet::Cache] {
            for compress in [true, false] {
                let config = Config {
                    size: 2 << 20,
                    events,
                    compress,
                    ..Config::default()
                };
                let mut out = Vec::new();
                let s = generate(&config, &mut out).unwrap();
                assert_eq!(s.bytes, out.len() as u64);
                let ratio = s.bytes as f64 / config.size as f64;
                assert!(
                    (1.0..1.05).contains(&ratio),
                    "{events:?} {compress}: {ratio}"
                );
            }
        }
    }
}
