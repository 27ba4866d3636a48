//! The data side of a simulation run where the accesses happen: the D1
//! cache simulated by the tracer itself (tally's QEMU plugin, in QEMU's
//! thread), so that the stream carries only D1 misses instead of every
//! access.
//!
//! Why: accesses are most of a trace (gzip: 210 M of 373 M records) and
//! nearly all hit D1. Simulated where they happen, a hit costs the tracer
//! about what writing its record did, and tally, on the other core, is
//! left the instruction side (I1, branch predictors), the misses (the
//! levels below D1) and attribution. Counts are the same as when tally
//! simulates every access: the accesses are merged as [`crate::engine`]
//! merges QEMU's (split halves, read-modify-write), D1 sees them in the
//! same order, and the misses reach the lower levels in the same order
//! relative to instruction fetches (see [`DataThread`]).
//!
//! Reads and writes are counted per stream id in a shared file of
//! [`COUNTS_IDS`] pairs of u64 (`[reads, writes]`), which tally adds to
//! the instructions' costs at the end; the file survives QEMU dying of a
//! signal, as the plugin's buffer file does.

use crate::engine::{Held, Merge};
use crate::flow::classify_x86_64;
use crate::trace::Record;
use crate::{Cache, CacheConfig, Policy, SimError};

pub use crate::trace::NO_INDEX;

/// Stream ids the shared count file has room for (a sparse file: only the
/// pages of ids used take memory). Ids past it are counted in its last
/// pair, which tally then reports.
pub const COUNTS_IDS: u64 = 1 << 27;

/// Bytes of the shared count file.
pub const COUNTS_SIZE: u64 = COUNTS_IDS * 16;

/// What the data side tells the stream and the count file.
pub trait Sink {
    /// Instruction `id` made one (merged) read or write.
    fn count(&mut self, id: u32, store: bool);
    /// It missed D1: a [`crate::trace::Record::Miss`].
    fn miss(&mut self, index: u8, store: bool, addr: u64, size: u32);
    /// A [`crate::trace::Record::Accessed`].
    fn accessed(&mut self, index: u8);
}

/// The D1 cache: one per simulated machine, shared by all threads.
#[derive(Clone, Debug)]
pub struct DataCache {
    d1: Cache,
}

impl DataCache {
    /// A D1 in its initial state.
    pub fn new(config: CacheConfig, policy: Policy) -> Result<DataCache, SimError> {
        config.check("D1")?;
        Ok(DataCache {
            d1: Cache::new(config, policy)?,
        })
    }
}

/// An access held until it is known whether the next one continues it.
#[derive(Clone, Copy, Debug)]
struct HeldBy {
    h: Held,
    id: u32,
    index: u8,
}

/// One thread's data side: the access held back and what the stream has
/// not been told about the current block.
///
/// The engine simulates a held access when the next run of instructions
/// starts, before that run's fetches; the misses this sends come before
/// the next block or execution record, naming the instruction by its
/// index, so tally reaches the lower levels in the same order.
#[derive(Clone, Debug)]
pub struct DataThread {
    held: Option<HeldBy>,
    /// The last index of the current block that accessed memory.
    last: u8,
    /// The last instruction executed alone accessed memory.
    touched: bool,
}

impl Default for DataThread {
    fn default() -> Self {
        DataThread {
            held: None,
            last: NO_INDEX,
            touched: false,
        }
    }
}

impl DataThread {
    /// Simulates the held access, if any.
    #[inline(always)]
    fn release(&mut self, d: &mut DataCache, sink: &mut impl Sink) {
        if let Some(HeldBy { h, id, index }) = self.held.take() {
            Self::simulate(d, sink, id, index, h.store, h.addr, h.size);
        }
    }

    #[inline(always)]
    fn simulate(
        d: &mut DataCache,
        sink: &mut impl Sink,
        id: u32,
        index: u8,
        store: bool,
        addr: u64,
        size: u64,
    ) {
        sink.count(id, store);
        if d.d1.access(addr, size) {
            sink.miss(index, store, addr, u32::try_from(size).unwrap_or(u32::MAX));
        }
    }

    /// A block starts: returns the `last` of its
    /// [`crate::trace::Record::BlockAfter`], to be written after whatever
    /// this sends.
    #[inline(always)]
    pub fn block(&mut self, d: &mut DataCache, sink: &mut impl Sink) -> u8 {
        self.release(d, sink);
        if std::mem::take(&mut self.touched) {
            sink.accessed(NO_INDEX);
        }
        std::mem::replace(&mut self.last, NO_INDEX)
    }

    /// An instruction executes alone (an execution record follows).
    #[inline(always)]
    pub fn exec(&mut self, d: &mut DataCache, sink: &mut impl Sink) {
        self.release(d, sink);
        if std::mem::take(&mut self.touched) {
            sink.accessed(NO_INDEX);
        }
        let last = std::mem::replace(&mut self.last, NO_INDEX);
        if last != NO_INDEX {
            sink.accessed(last);
        }
    }

    /// An access by stream id `id`, instruction `index` of its block
    /// ([`NO_INDEX`]: executed alone); `rmw`: a locked read-modify-write
    /// (see [`crate::flow::Flow::atomic_rmw`]).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn access(
        &mut self,
        d: &mut DataCache,
        sink: &mut impl Sink,
        id: u32,
        index: u8,
        store: bool,
        addr: u64,
        size: u64,
        rmw: bool,
    ) {
        if index == NO_INDEX {
            self.touched = true;
        } else {
            self.last = index;
        }
        // Accesses of one execution of one instruction may merge; another
        // instruction's start a run, which releases the held one.
        let merged = match &mut self.held {
            Some(hb) if hb.id == id => Held::merge_into(&mut hb.h, store, addr, size),
            Some(_) => Merge::Apart,
            None => {
                self.start(d, sink, id, index, store, addr, size, rmw);
                return;
            }
        };
        match merged {
            Merge::Into => {}
            Merge::Modify => self.release(d, sink),
            Merge::Apart => {
                self.release(d, sink);
                self.start(d, sink, id, index, store, addr, size, rmw);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn start(
        &mut self,
        d: &mut DataCache,
        sink: &mut impl Sink,
        id: u32,
        index: u8,
        store: bool,
        addr: u64,
        size: u64,
        rmw: bool,
    ) {
        if store && rmw {
            // A locked read-modify-write is reported once, as a read.
            Self::simulate(d, sink, id, index, false, addr, size);
        } else {
            self.held = Some(HeldBy {
                h: Held { store, addr, size },
                id,
                index,
            });
        }
    }

    /// The thread ends: the held access is simulated.
    pub fn finish(&mut self, d: &mut DataCache, sink: &mut impl Sink) {
        self.release(d, sink);
    }
}

/// What a tracer simulating D1 would have written for `records`, a
/// stream of one that does not: the records (blocks as
/// [`Record::BlockAfter`], accesses replaced by misses) and the counts per
/// stream id. What the plugin does as the program runs, applied to a saved
/// stream: for tests and measurements. `x86`: classify instructions as
/// x86-64 (locked read-modify-writes).
pub fn split<'a>(
    records: &[Record<'a>],
    d: &mut DataCache,
    x86: bool,
) -> (Vec<Record<'a>>, Vec<[u64; 2]>) {
    struct Out<'a> {
        records: Vec<Record<'a>>,
        counts: Vec<[u64; 2]>,
    }
    impl Sink for Out<'_> {
        fn count(&mut self, id: u32, store: bool) {
            let id = id as usize;
            if self.counts.len() <= id {
                self.counts.resize(id + 1, [0; 2]);
            }
            self.counts[id][usize::from(store)] += 1;
        }
        fn miss(&mut self, index: u8, store: bool, addr: u64, size: u32) {
            self.records.push(Record::Miss {
                store,
                index,
                addr,
                size,
            });
        }
        fn accessed(&mut self, index: u8) {
            self.records.push(Record::Accessed { index });
        }
    }
    /// A thread's data side, its block's first id and its last executed id.
    #[derive(Default)]
    struct T {
        data: DataThread,
        first: u32,
        exec: u32,
    }
    let mut out = Out {
        records: Vec::new(),
        counts: Vec::new(),
    };
    let mut rmw: Vec<bool> = Vec::new();
    let mut threads: std::collections::HashMap<u32, T> = Default::default();
    let mut cur = 0u32;
    threads.insert(cur, T::default());
    for r in records {
        let t = threads.entry(cur).or_default();
        match *r {
            Record::Declare { id, addr, code } => {
                let id = id as usize;
                if rmw.len() <= id {
                    rmw.resize(id + 1, false);
                }
                rmw[id] = x86 && classify_x86_64(code, addr).atomic_rmw;
                out.records.push(r.clone());
            }
            Record::Block { first, count } => {
                let last = t.data.block(d, &mut out);
                t.first = first;
                out.records.push(Record::BlockAfter { first, count, last });
            }
            Record::Exec { id } => {
                t.data.exec(d, &mut out);
                t.exec = id;
                out.records.push(r.clone());
            }
            Record::LoadAt { index, addr, size } | Record::StoreAt { index, addr, size } => {
                let id = t.first.wrapping_add(u32::from(index));
                let store = matches!(r, Record::StoreAt { .. });
                let locked = rmw.get(id as usize).copied().unwrap_or(false);
                let size = u64::from(size);
                t.data
                    .access(d, &mut out, id, index, store, addr, size, locked);
            }
            Record::Load { addr, size } | Record::Store { addr, size } => {
                let id = t.exec;
                let store = matches!(r, Record::Store { .. });
                let locked = rmw.get(id as usize).copied().unwrap_or(false);
                let size = u64::from(size);
                t.data
                    .access(d, &mut out, id, NO_INDEX, store, addr, size, locked);
            }
            Record::Thread(n) => {
                cur = n;
                out.records.push(r.clone());
            }
            Record::End => {
                let mut ids: Vec<u32> = threads.keys().copied().collect();
                ids.sort_unstable();
                for n in ids {
                    if let Some(t) = threads.get_mut(&n) {
                        out.records.push(Record::Thread(n));
                        t.data.finish(d, &mut out);
                    }
                }
                out.records.push(Record::Thread(cur));
                out.records.push(Record::End);
            }
            _ => out.records.push(r.clone()),
        }
    }
    (out.records, out.counts)
}
