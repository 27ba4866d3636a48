//! The first-level data cache simulated where the accesses happen: in the
//! QEMU plugin, while the program runs.
//!
//! Nine accesses in ten hit D1 and touch nothing below it, yet each costs
//! tally a record of 11 bytes to decode, merge and look up. With a
//! [`D1Filter`] the plugin puts QEMU's pieces of an access back together
//! (the rules of the engine: [`crate::engine`]), looks the access up in its
//! own D1 and writes a hit as 2 bytes (which instruction, read or write)
//! and only a miss with its address, for tally to take to the lower levels
//! in stream order. The two halves of the simulation run on two cores, and
//! what tally does per access shrinks to counting it.
//!
//! The results are the same as with every access in the stream: D1 sees
//! the same references in the same order (one thread's), and the levels
//! below see the misses in the same order relative to the instruction
//! fetches, which the blocks in the stream still carry. Tests feed a
//! stream both ways and compare every count.

use crate::cache::{Cache, CacheConfig, Policy};
use crate::trace;

/// The index of an access record that names no instruction of a block:
/// the access is by the last instruction executed (blocks recorded an
/// instruction at a time).
pub const LAST_EXECUTED: u8 = u8::MAX;

/// The largest access a miss record holds: pieces that would make a
/// larger one are taken as two accesses (none is near it: the largest,
/// `xsave`'s, is a few KiB).
const MAX_SIZE: u64 = u16::MAX as u64;

/// What a [`D1Filter`] has decided about one whole access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filtered {
    /// It hit D1 (and so changed nothing below it).
    Hit { index: u8, store: bool },
    /// It missed D1: the levels below must see it.
    Miss {
        index: u8,
        store: bool,
        addr: u64,
        size: u16,
    },
}

impl Filtered {
    /// Its record in the stream: the bytes and how many of them count.
    #[inline(always)]
    pub fn encode(self) -> ([u8; 12], usize) {
        let mut r = [0u8; 12];
        match self {
            Filtered::Hit { index, store } if index < 64 => {
                r[0] = trace::T_SHORT_HIT | u8::from(store) << 6 | index;
                (r, 1)
            }
            Filtered::Hit { index, store } => {
                r[0] = if store {
                    trace::T_WRITE_HIT
                } else {
                    trace::T_READ_HIT
                };
                r[1] = index;
                (r, 2)
            }
            Filtered::Miss {
                index,
                store,
                addr,
                size,
            } => {
                r[0] = if store {
                    trace::T_WRITE_MISS
                } else {
                    trace::T_READ_MISS
                };
                r[1] = index;
                r[2..10].copy_from_slice(&addr.to_le_bytes());
                r[10..12].copy_from_slice(&size.to_le_bytes());
                (r, 12)
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    index: u8,
    store: bool,
    addr: u64,
    size: u64,
}

/// D1 and the access it holds back until the next record shows whether
/// that access is whole.
#[derive(Clone, Debug)]
pub struct D1Filter {
    d1: Cache,
    policy: Policy,
    held: Option<Piece>,
}

impl D1Filter {
    /// A filter with a fresh D1 of this geometry and policy.
    pub fn new(config: CacheConfig, policy: Policy) -> Result<D1Filter, crate::SimError> {
        Ok(D1Filter {
            d1: Cache::new(config, policy).map_err(|e| match e {
                crate::SimError::Geometry { message, .. } => crate::SimError::Geometry {
                    cache: "D1".into(),
                    message,
                },
            })?,
            policy,
            held: None,
        })
    }

    /// The D1 geometry.
    pub fn config(&self) -> CacheConfig {
        self.d1.config()
    }

    /// The D1 replacement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// An access (one of QEMU's pieces) by instruction `index` of the
    /// running block, or [`LAST_EXECUTED`]. `atomic`: the instruction is
    /// a locked read-modify-write, whose store is counted as a read.
    /// Returns the whole accesses this decides, in order: the one held
    /// before, and this one if it cannot be held.
    #[inline(always)]
    pub fn access(
        &mut self,
        index: u8,
        store: bool,
        atomic: bool,
        addr: u64,
        size: u64,
    ) -> (Option<Filtered>, Option<Filtered>) {
        if let Some(h) = &mut self.held
            && h.index == index
        {
            // The engine's `Held::merge`.
            if store && !h.store && h.addr == addr && h.size == size {
                // The store half of a modify: the load stands for both.
                return (self.release(), None);
            }
            if h.store == store && h.addr.wrapping_add(h.size) == addr && h.size + size <= MAX_SIZE
            {
                h.size += size;
                return (None, None);
            }
        }
        let before = self.release();
        if store && atomic {
            (before, Some(self.look_up(index, false, addr, size)))
        } else {
            self.held = Some(Piece {
                index,
                store,
                addr,
                size,
            });
            (before, None)
        }
    }

    /// Decides the held access, if any: before a block starts, an
    /// instruction is executed, or the stream is handed on.
    #[inline(always)]
    pub fn release(&mut self) -> Option<Filtered> {
        let h = self.held.take()?;
        Some(self.look_up(h.index, h.store, h.addr, h.size))
    }

    #[inline(always)]
    fn look_up(&mut self, index: u8, store: bool, addr: u64, size: u64) -> Filtered {
        if self.d1.access(addr, size) {
            Filtered::Miss {
                index,
                store,
                addr,
                size: size.min(MAX_SIZE) as u16,
            }
        } else {
            Filtered::Hit { index, store }
        }
    }

    /// D1's state, for tally to go on from when the filter stops (a second
    /// thread starts): see [`crate::cache::Cache::save`].
    pub fn save(&self) -> Vec<u8> {
        self.d1.save()
    }
}

/// A policy as the filter record carries it: a code and a seed.
pub fn policy_code(p: Policy) -> (u8, u64) {
    match p {
        Policy::Lru => (0, 0),
        Policy::Fifo => (1, 0),
        Policy::TreePlru => (2, 0),
        Policy::Random(seed) => (3, seed),
    }
}

/// The policy of a filter record; `None` for an unknown code.
pub fn policy_from_code(code: u8, seed: u64) -> Option<Policy> {
    Some(match code {
        0 => Policy::Lru,
        1 => Policy::Fifo,
        2 => Policy::TreePlru,
        3 => Policy::Random(seed),
        _ => return None,
    })
}

/// The record that opens a filtered stream (17): D1's geometry and policy.
pub fn filter_record(config: CacheConfig, policy: Policy) -> Vec<u8> {
    let (code, seed) = policy_code(policy);
    let mut r = vec![trace::T_D1_FILTER];
    r.extend_from_slice(&config.size.to_le_bytes());
    r.extend_from_slice(&config.assoc.to_le_bytes());
    r.extend_from_slice(&config.line_size.to_le_bytes());
    r.push(code);
    r.extend_from_slice(&seed.to_le_bytes());
    r
}

/// The record (16) that ends the filter's part of a stream with D1's state.
pub fn state_record(state: &[u8]) -> Vec<u8> {
    let mut r = vec![trace::T_D1_STATE];
    r.extend_from_slice(&(state.len() as u32).to_le_bytes());
    r.extend_from_slice(state);
    r
}

/// Filters a saved stream as the plugin does while the program runs (for
/// streams recorded with `out=` alone, and for tests): the same records
/// with D1 simulated and accesses as hit and miss records. The accesses of
/// thread 0 (the stream's first) are filtered; when another thread's
/// records start, D1's state is handed on and the rest passes unchanged.
pub fn filter_stream<R: std::io::Read, W: std::io::Write>(
    input: R,
    out: W,
    config: CacheConfig,
    policy: Policy,
) -> Result<W, trace::StreamError> {
    use trace::{Record, StreamError, TraceReader, TraceWriter};
    let mut r = TraceReader::new(input)?;
    let failed = |offset: u64| move |source| StreamError::Io { offset, source };
    let mut w = TraceWriter::new(out).map_err(failed(0))?;
    let mut filter = Some(D1Filter::new(config, policy).map_err(|e| StreamError::Io {
        offset: 0,
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
    })?);
    w.write_raw(&filter_record(config, policy))
        .map_err(failed(8))?;
    // Locked read-modify-writes by stream id.
    let mut atomic: Vec<bool> = Vec::new();
    let (mut first, mut cur) = (0u32, 0u32);
    let mut pending: Vec<Filtered> = Vec::new();
    loop {
        let at = r.offset();
        let Some(rec) = r.next_record()? else { break };
        let mut put = |f: (Option<Filtered>, Option<Filtered>)| {
            pending.extend([f.0, f.1].into_iter().flatten())
        };
        let is_atomic = |id: u32| atomic.get(id as usize).copied().unwrap_or(false);
        let mut pass = true;
        match (&mut filter, &rec) {
            (_, Record::Declare { id, addr, code }) => {
                let id = *id as usize;
                if atomic.len() <= id {
                    atomic.resize(id + 1, false);
                }
                atomic[id] = crate::flow::classify_x86_64(code, *addr).atomic_rmw;
            }
            (Some(f), Record::Block { first: b, .. }) => {
                put((f.release(), None));
                first = *b;
            }
            (Some(f), Record::Exec { id }) => {
                put((f.release(), None));
                cur = *id;
            }
            (Some(f), Record::LoadAt { index, addr, size })
            | (Some(f), Record::StoreAt { index, addr, size }) => {
                let store = matches!(rec, Record::StoreAt { .. });
                let id = first.wrapping_add(u32::from(*index));
                put(f.access(*index, store, is_atomic(id), *addr, u64::from(*size)));
                pass = false;
            }
            (Some(f), Record::Load { addr, size }) | (Some(f), Record::Store { addr, size }) => {
                let store = matches!(rec, Record::Store { .. });
                put(f.access(
                    LAST_EXECUTED,
                    store,
                    is_atomic(cur),
                    *addr,
                    u64::from(*size),
                ));
                pass = false;
            }
            (Some(f), Record::Thread(t)) if *t != 0 => put((f.release(), None)),
            (Some(f), Record::End) => put((f.release(), None)),
            _ => {}
        }
        let handover = matches!(rec, Record::Thread(t) if t != 0);
        for f in pending.drain(..) {
            let x = match f {
                Filtered::Hit { index, store } => Record::Hit { index, store },
                Filtered::Miss {
                    index,
                    store,
                    addr,
                    size,
                } => Record::Miss {
                    index,
                    store,
                    addr,
                    size,
                },
            };
            w.write(&x).map_err(failed(at))?;
        }
        if handover && let Some(f) = filter.take() {
            w.write_raw(&state_record(&f.save())).map_err(failed(at))?;
        }
        if pass {
            w.write(&rec).map_err(failed(at))?;
        }
    }
    // A stream without an end record (the program was killed): the last
    // access is decided all the same.
    if let Some(x) = filter.as_mut().and_then(D1Filter::release) {
        let at = r.offset();
        let rec = match x {
            Filtered::Hit { index, store } => Record::Hit { index, store },
            Filtered::Miss {
                index,
                store,
                addr,
                size,
            } => Record::Miss {
                index,
                store,
                addr,
                size,
            },
        };
        w.write(&rec).map_err(failed(at))?;
    }
    w.finish().map_err(failed(r.offset()))
}
