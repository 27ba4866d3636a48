//! The first-level data cache simulated where the accesses happen: in the
//! QEMU plugin, while the program runs.
//!
//! Nine accesses in ten hit D1 and touch nothing below it, yet each costs
//! tally a record of 11 bytes to decode, merge and look up. With a
//! [`D1Filter`] the plugin puts QEMU's pieces of an access back together
//! (the rules of the engine: [`crate::Engine`]), looks the access up in its
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

use crate::cache::{Cache, CacheConfig, Front, Policy};
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
    Hit {
        /// The instruction's index in its block ([`LAST_EXECUTED`]: the
        /// last instruction executed).
        index: u8,
        /// A store; a load if false.
        store: bool,
    },
    /// It missed D1: the levels below must see it.
    Miss {
        /// The instruction's index in its block ([`LAST_EXECUTED`]: the
        /// last instruction executed).
        index: u8,
        /// A store; a load if false.
        store: bool,
        /// The first byte accessed.
        addr: u64,
        /// Bytes accessed, QEMU's pieces merged.
        size: u16,
    },
}

/// The stream record that carries a decision (the filter decides, the
/// stream carries).
impl From<Filtered> for trace::Record<'_> {
    fn from(f: Filtered) -> Self {
        match f {
            Filtered::Hit { index, store } => trace::Record::Hit { index, store },
            Filtered::Miss {
                index,
                store,
                addr,
                size,
            } => trace::Record::Miss {
                index,
                store,
                addr,
                size,
            },
        }
    }
}

/// The access last decided, while a piece of the same instruction may
/// still continue it.
#[derive(Clone, Copy, Debug)]
struct Last {
    index: u8,
    store: bool,
    miss: bool,
    addr: u64,
    size: u64,
}

/// What the stream must do for an access ([`D1Filter::access`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: the access is part of the last one, whose record stands.
    Nothing,
    /// Append this record.
    Emit(Filtered),
    /// The last record written becomes this one (the access it stands for
    /// grew and now misses, or its size changed).
    Replace(Filtered),
}

/// What [`D1Filter::quick_hit`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quick {
    /// A hit, decided and kept.
    Hit,
    /// Nothing yet: a reference within this line, which
    /// [`D1Filter::quick_hit_deeper`] may find deeper in its set.
    Deeper(u64),
    /// Nothing: only [`D1Filter::access`] decides it.
    General,
}

/// D1, and the access last decided.
///
/// An access is looked up as soon as it comes, not held back until the
/// next record shows whether it is whole: a piece that continues it (QEMU
/// splits a 32-byte access in halves) is looked up when it comes, and the
/// last record amended if the whole misses where the first part hit, or
/// its size changed. That is the same: the piece's first line, if shared,
/// is the line D1 referenced last, and referencing that again changes
/// nothing under any policy. The store half of a modify is dropped. A
/// block or instruction record ends what can be amended
/// ([`D1Filter::boundary`]).
#[derive(Clone, Debug)]
pub struct D1Filter {
    d1: Cache,
    policy: Policy,
    last: Option<Last>,
}

impl D1Filter {
    /// A filter with a fresh D1 of this geometry and policy.
    pub fn new(config: CacheConfig, policy: Policy) -> Result<D1Filter, crate::Error> {
        Ok(D1Filter {
            d1: Cache::new(config, policy).map_err(|e| match e {
                crate::Error::Geometry { message, .. } => crate::Error::Geometry {
                    cache: "D1".into(),
                    message,
                },
                e => e,
            })?,
            policy,
            last: None,
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
    /// a locked read-modify-write, whose store is counted as a read (and
    /// merges with nothing), as the engine counts it.
    #[inline(always)]
    pub fn access(&mut self, index: u8, store: bool, atomic: bool, addr: u64, size: u64) -> Step {
        if let Some(l) = &mut self.last
            && l.index == index
        {
            // The engine's `Held::merge`.
            if store && !l.store && l.addr == addr && l.size == size {
                // The store half of a modify: the load stands for both,
                // and nothing continues it.
                self.last = None;
                return Step::Nothing;
            }
            if l.store == store && l.addr.wrapping_add(l.size) == addr && l.size + size <= MAX_SIZE
            {
                let miss = self.d1.access(addr, size);
                l.size += size;
                if !(miss || l.miss) {
                    return Step::Nothing;
                }
                l.miss = true;
                return Step::Replace(Filtered::Miss {
                    index,
                    store,
                    addr: l.addr,
                    size: l.size as u16,
                });
            }
        }
        // A locked read-modify-write's store: a read, that nothing joins.
        let rmw = store && atomic;
        let store = store && !rmw;
        let miss = self.d1.access(addr, size);
        self.last = (!rmw).then_some(Last {
            index,
            store,
            miss,
            addr,
            size,
        });
        Step::Emit(if miss {
            Filtered::Miss {
                index,
                store,
                addr,
                size: size.min(MAX_SIZE) as u16,
            }
        } else {
            Filtered::Hit { index, store }
        })
    }

    /// Whether an access by instruction `index` may continue the last one
    /// (then only [`D1Filter::access`] decides it).
    #[inline(always)]
    fn continues(&self, index: u8) -> bool {
        matches!(&self.last, Some(l) if l.index == index)
    }

    /// [`D1Filter::access`] for the common case, in few instructions: an
    /// access by another instruction than the last one (so it merges with
    /// nothing), not a locked store, that hits D1's recent line or the
    /// front of a set under LRU or FIFO ([`Cache::front_hit`]).
    /// [`Quick::Hit`]: it was that, a `Step::Emit(Filtered::Hit { index,
    /// store })`, and the filter's state is as `access` would have left
    /// it. Otherwise nothing changed: [`Quick::Deeper`] for
    /// [`D1Filter::quick_hit_deeper`], else call `access`.
    #[inline(always)]
    pub fn quick_hit(&mut self, index: u8, store: bool, addr: u64, size: u64) -> Quick {
        if self.continues(index) {
            return Quick::General;
        }
        match self.d1.front_hit(addr, size) {
            Front::Hit => {
                self.hit(index, store, addr, size);
                Quick::Hit
            }
            Front::Deeper(line) => Quick::Deeper(line),
            Front::Straddle => Quick::General,
        }
    }

    /// The same access after [`Quick::Deeper`]`(line)`: `true` if it hits
    /// anywhere in its set under LRU or FIFO (as [`Quick::Hit`]), `false`
    /// (nothing changed) for [`D1Filter::access`].
    #[inline(always)]
    pub fn quick_hit_deeper(
        &mut self,
        index: u8,
        store: bool,
        addr: u64,
        size: u64,
        line: u64,
    ) -> bool {
        let hit = self.d1.set_hit(line);
        if hit {
            self.hit(index, store, addr, size);
        }
        hit
    }

    /// [`D1Filter::access`] the way the plugin takes it: the fast paths
    /// first (not for a locked instruction's accesses), then `access`.
    /// The same steps as `access` alone, which is what the fast paths
    /// promise; saved streams are filtered this way so that the tests of
    /// filtered streams run them.
    pub fn decide(&mut self, index: u8, store: bool, atomic: bool, addr: u64, size: u64) -> Step {
        let hit = !atomic
            && match self.quick_hit(index, store, addr, size) {
                Quick::Hit => true,
                Quick::Deeper(line) => self.quick_hit_deeper(index, store, addr, size, line),
                Quick::General => false,
            };
        match hit {
            true => Step::Emit(Filtered::Hit { index, store }),
            false => self.access(index, store, atomic, addr, size),
        }
    }

    #[inline(always)]
    fn hit(&mut self, index: u8, store: bool, addr: u64, size: u64) {
        self.last = Some(Last {
            index,
            store,
            miss: false,
            addr,
            size,
        });
    }

    /// A block starts or an instruction is executed: the last access is
    /// whole.
    #[inline(always)]
    pub fn boundary(&mut self) {
        self.last = None;
    }

    /// D1's state, for tally to go on from when the filter stops (a second
    /// thread starts): see [`crate::Cache::save`].
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
) -> Result<W, crate::Error> {
    filter(input, out, config, policy, None)
}

/// [`filter_stream`] as the plugin filters with `hits=on`: D1 hits by
/// block instructions counted by stream id (`[2 * id]` reads, `[2 * id +
/// 1]` writes, for [`crate::Feeder::add_hits`]) rather than
/// written, and how far blocks ran in progress records.
pub fn filter_stream_counting<R: std::io::Read, W: std::io::Write>(
    input: R,
    out: W,
    config: CacheConfig,
    policy: Policy,
) -> Result<(W, Vec<u64>), crate::Error> {
    let mut hits = Vec::new();
    let w = filter(input, out, config, policy, Some(&mut hits))?;
    Ok((w, hits))
}

fn filter<R: std::io::Read, W: std::io::Write>(
    input: R,
    out: W,
    config: CacheConfig,
    policy: Policy,
    mut hits: Option<&mut Vec<u64>>,
) -> Result<W, crate::Error> {
    use trace::{Record, TraceReader, TraceWriter};
    let mut r = TraceReader::new(input)?;
    let failed = |offset: u64| move |source| crate::Error::StreamIo { offset, source };
    let mut w = TraceWriter::new(out).map_err(failed(0))?;
    let mut filter = Some(
        D1Filter::new(config, policy).map_err(|e| crate::Error::StreamIo {
            offset: 0,
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()),
        })?,
    );
    w.write_raw(&filter_record(config, policy))
        .map_err(failed(8))?;
    // Locked read-modify-writes by stream id.
    let mut atomic: Vec<bool> = Vec::new();
    let (mut first, mut cur) = (0u32, 0u32);
    // The last access record, kept back while a piece may amend it; or
    // the hit last counted, which a piece may turn into a miss.
    let mut pending: Option<Filtered> = None;
    let mut counted: Option<usize> = None;
    // One more than the index of the current block's last access.
    let mut progress = 0u8;
    let record = Record::from;
    loop {
        let at = r.offset();
        let Some(rec) = r.next_record()? else { break };
        let is_atomic = |id: u32| atomic.get(id as usize).copied().unwrap_or(false);
        let step = match (&mut filter, &rec) {
            (_, Record::Declare { id, addr, code }) => {
                let id = *id as usize;
                if atomic.len() <= id {
                    atomic.resize(id + 1, false);
                }
                atomic[id] = crate::flow::classify_x86_64(code, *addr).atomic_rmw;
                None
            }
            (_, Record::Map { .. }) => None,
            (Some(f), Record::LoadAt { index, addr, size })
            | (Some(f), Record::StoreAt { index, addr, size }) => {
                let store = matches!(rec, Record::StoreAt { .. });
                let id = first.wrapping_add(u32::from(*index));
                progress = index + 1;
                Some(f.decide(*index, store, is_atomic(id), *addr, u64::from(*size)))
            }
            (Some(f), Record::Load { addr, size }) | (Some(f), Record::Store { addr, size }) => {
                let store = matches!(rec, Record::Store { .. });
                Some(f.access(
                    LAST_EXECUTED,
                    store,
                    is_atomic(cur),
                    *addr,
                    u64::from(*size),
                ))
            }
            (f, _) => {
                let filtering = f.is_some();
                if let Some(f) = f {
                    f.boundary();
                }
                counted = None;
                if let Some(x) = pending.take() {
                    w.write(&record(x)).map_err(failed(at))?;
                }
                // How far the block ran, when its hits are not in the
                // stream: with the next block, or before anything else.
                let handover = filtering && matches!(rec, Record::Thread(t) if t != 0);
                if hits.is_some() && filtering && progress != 0 {
                    match rec {
                        Record::Block { .. } => {}
                        Record::Exec { .. } | Record::End => {
                            w.write(&Record::Progress { progress })
                                .map_err(failed(at))?;
                        }
                        _ if handover => {
                            w.write(&Record::Progress { progress })
                                .map_err(failed(at))?;
                        }
                        _ => {}
                    }
                }
                match rec {
                    Record::Block { first: b, count } if hits.is_some() && filtering => {
                        w.write(&Record::BlockAfter {
                            first: b,
                            count,
                            progress,
                        })
                        .map_err(failed(at))?;
                        first = b;
                        progress = 0;
                        continue;
                    }
                    Record::Block { first: b, .. } => {
                        first = b;
                        progress = 0;
                    }
                    Record::Exec { id } => {
                        cur = id;
                        progress = 0;
                    }
                    _ => {}
                }
                None
            }
        };
        match step {
            Some(Step::Nothing) => {}
            Some(Step::Replace(x)) => {
                if let (Some(k), Some(h)) = (counted.take(), hits.as_deref_mut()) {
                    // The hit counted is a miss after all.
                    h[k] -= 1;
                }
                pending = Some(x);
            }
            Some(Step::Emit(x)) => {
                if let Some(p) = pending.take() {
                    w.write(&record(p)).map_err(failed(at))?;
                }
                counted = None;
                match (x, hits.as_deref_mut()) {
                    (Filtered::Hit { index, store }, Some(h)) if index != LAST_EXECUTED => {
                        let k =
                            2 * first.wrapping_add(u32::from(index)) as usize + usize::from(store);
                        if h.len() <= k {
                            h.resize((k / 2 + 1) * 2, 0);
                        }
                        h[k] += 1;
                        counted = Some(k);
                    }
                    _ => pending = Some(x),
                }
            }
            None => {
                if matches!(rec, Record::Thread(t) if t != 0)
                    && let Some(f) = filter.take()
                {
                    w.write_raw(&state_record(&f.save())).map_err(failed(at))?;
                }
                w.write(&rec).map_err(failed(at))?;
            }
        }
    }
    if let Some(x) = pending.take() {
        w.write(&record(x)).map_err(failed(r.offset()))?;
    }
    w.finish().map_err(failed(r.offset()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn policy() -> impl Strategy<Value = Policy> {
        prop_oneof![
            Just(Policy::Lru),
            Just(Policy::Fifo),
            Just(Policy::TreePlru),
            any::<u64>().prop_map(Policy::Random),
        ]
    }

    proptest! {
        /// The fast paths take only accesses `access` would call a plain
        /// hit, and leave D1 as `access` would: two filters fed the same
        /// accesses, one through the fast paths first (`decide`), decide
        /// every access alike and end in the same state.
        #[test]
        fn quick_hits_are_accesses(
            policy in policy(),
            accesses in proptest::collection::vec(
                (0u8..4, any::<bool>(), 0u64..48, 0u64..40, 0u32..4, any::<bool>(), proptest::bool::weighted(0.1)),
                1..400,
            ),
        ) {
            let config = CacheConfig { size: 1024, assoc: 4, line_size: 32 };
            let mut plain = D1Filter::new(config, policy).unwrap();
            let mut quick = D1Filter::new(config, policy).unwrap();
            for (index, store, line, offset, shift, boundary, atomic) in accesses {
                if boundary {
                    plain.boundary();
                    quick.boundary();
                }
                // Few lines, so that sets fill and lines are found deep;
                // unaligned, so that some straddle two.
                let addr = line * 32 + offset;
                let size = 1u64 << shift;
                let want = plain.access(index, store, atomic, addr, size);
                let got = quick.decide(index, store, atomic, addr, size);
                prop_assert_eq!(want, got);
            }
            prop_assert_eq!(plain.save(), quick.save());
        }
    }
}
