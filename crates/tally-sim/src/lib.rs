//! Cache and branch-predictor simulation, as Cachegrind does it (section
//! 5.8 of its manual; `cg_sim.c`, `cg_branchpred.c`), plus what Cachegrind
//! cannot: other replacement policies and any number of cache levels.
//!
//! [`Hierarchy`] is Cachegrind's machine: I1 and D1 backed by a shared
//! last-level cache that is looked up only on a first-level miss (and
//! never invalidates first-level lines, as Cachegrind's does not), plus
//! optional levels between. Costs are Cachegrind's events: `Ir I1mr ILmr
//! Dr D1mr DLmr Dw D1mw DLmw`, and `Bc Bcm Bi Bim` for branches.
//!
//! The crate root holds the simulation: the machines users describe
//! ([`machines`]), the [`Engine`] that runs instructions through them, and
//! the [`Simulation`] that feeds it a trace stream; with the `session`
//! feature, also a run of `tally sim` from start to end (`native`,
//! `trace_file`, `lackey_trace`) and the profile made of it
//! (`to_profile`). Three modules are namespaces of their own: [`trace`],
//! the binary stream the QEMU plugin writes; [`filter`], the plugin's D1
//! filter and its records; [`lackey`], Valgrind Lackey's memory traces.
//!
//! # Example: simulate a Lackey trace
//!
//! ```
//! use tally_sim::lackey::LackeyReader;
//! use tally_sim::{CacheConfig, Counts, Hierarchy, HierarchyConfig, Policy};
//!
//! // `valgrind --tool=lackey --trace-mem=yes` output: two instructions
//! // in one line, a load, and a store to the line the load brought in.
//! let trace = "I  04001000,3\n L 1ffefff000,8\nI  04001003,4\n S 1ffefff008,8\n";
//! let machine = HierarchyConfig {
//!     i1: CacheConfig { size: 32768, assoc: 8, line_size: 64 },
//!     d1: CacheConfig { size: 32768, assoc: 8, line_size: 64 },
//!     middle: Vec::new(),
//!     ll: CacheConfig { size: 8 << 20, assoc: 16, line_size: 64 },
//!     policy: Policy::Lru,
//!     iaddr_zero_bits: 0,
//! };
//! let mut h = Hierarchy::new(&machine)?;
//! let mut counts = Counts::default();
//! let mut reader = LackeyReader::new(trace.as_bytes());
//! while let Some(access) = reader.next_access()? {
//!     h.lackey(access, &mut counts);
//! }
//! // Cold caches: the first fetch and the load miss every level; the
//! // second fetch and the store hit.
//! assert_eq!((counts.ir, counts.i1mr, counts.ilmr), (2, 1, 1));
//! assert_eq!((counts.dr, counts.d1mr, counts.dlmr), (1, 1, 1));
//! assert_eq!((counts.dw, counts.d1mw), (1, 0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

#[cfg(feature = "session")]
mod attrib;
mod branch;
mod cache;
mod engine;
mod error;
mod feed;
pub mod filter;
mod flow;
pub mod lackey;
pub mod layout;
mod machine;
#[cfg(feature = "session")]
mod session;
pub mod trace;

#[cfg(feature = "session")]
pub use attrib::{AddressSpace, ProfileSpec, to_profile};
pub use branch::{CondPredictor, IndirectPredictor};
pub use cache::{Cache, CacheConfig, Front, Policy};
pub use engine::{Arc, Engine, EngineOptions, Feeder, Instr, NO_FETCH, Output, Slot};
pub use error::Error;
pub use feed::{Ending as StreamEnding, Host, Simulation, SlotProblem};
pub use flow::{Flow, Kind as FlowKind, classify_x86_64};
#[cfg(feature = "session")]
pub use machine::summary;
pub use machine::{
    Machine, MachineOptions, describe, event_indices, host_caches, host_ll_note, machines,
};
#[cfg(feature = "session")]
pub use session::{
    Ending, Family, Native, Run, Unfollowed, check_output, find_plugin, install_plugin,
    lackey_trace, native, native_children, out_path, plugin_data_dir, plugin_places, trace_file,
};

/// The most levels a [`Hierarchy`] can have between its first and last
/// level: each adds three events to every instruction's [`Counts`].
pub const MAX_MIDDLE: usize = 2;

/// The counts of one instruction, in Cachegrind's event order, and the
/// misses of the levels between the first and the last.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Instructions executed (`Ir`).
    pub ir: u64,
    /// I1 misses (`I1mr`).
    pub i1mr: u64,
    /// Last-level instruction misses (`ILmr`).
    pub ilmr: u64,
    /// Data reads (`Dr`).
    pub dr: u64,
    /// D1 read misses (`D1mr`).
    pub d1mr: u64,
    /// Last-level read misses (`DLmr`).
    pub dlmr: u64,
    /// Data writes (`Dw`).
    pub dw: u64,
    /// D1 write misses (`D1mw`).
    pub d1mw: u64,
    /// Last-level write misses (`DLmw`).
    pub dlmw: u64,
    /// Conditional branches executed (`Bc`).
    pub bc: u64,
    /// Conditional branches mispredicted (`Bcm`).
    pub bcm: u64,
    /// Indirect branches executed (`Bi`).
    pub bi: u64,
    /// Indirect branches mispredicted (`Bim`).
    pub bim: u64,
    /// Misses of middle level `l` (L`l+2`): instruction fetches, data
    /// reads and data writes (`I2mr D2mr D2mw` for L2).
    pub mid: [[u64; 3]; MAX_MIDDLE],
}

impl Counts {
    /// The names of Cachegrind's events, the first thirteen of
    /// [`Counts::values`]; the middle levels' are [`Counts::event_name`]'s.
    pub const EVENTS: [&'static str; 13] = [
        "Ir", "I1mr", "ILmr", "Dr", "D1mr", "DLmr", "Dw", "D1mw", "DLmw", "Bc", "Bcm", "Bi", "Bim",
    ];

    /// The number of values: Cachegrind's thirteen, then three per middle
    /// level.
    pub const N: usize = 13 + 3 * MAX_MIDDLE;

    /// The index in [`Counts::values`] of middle level `level`'s (0 for
    /// L2) instruction (`kind` 0), read (1) or write (2) misses.
    pub const fn mid_index(level: usize, kind: usize) -> usize {
        13 + 3 * level + kind
    }

    /// The name of value `i`: Cachegrind's, and for a middle level the
    /// name Cachegrind's first-level events have with the level's number
    /// (`I2mr`, `D2mr`, `D2mw` for L2).
    pub fn event_name(i: usize) -> String {
        match Self::EVENTS.get(i) {
            Some(n) => (*n).to_string(),
            None => {
                let (l, k) = ((i - 13) / 3 + 2, (i - 13) % 3);
                match k {
                    0 => format!("I{l}mr"),
                    1 => format!("D{l}mr"),
                    _ => format!("D{l}mw"),
                }
            }
        }
    }

    /// The counts in event order, the middle levels' last.
    pub fn values(&self) -> [u64; Counts::N] {
        let mut v = [0; Counts::N];
        v[..13].copy_from_slice(&[
            self.ir, self.i1mr, self.ilmr, self.dr, self.d1mr, self.dlmr, self.dw, self.d1mw,
            self.dlmw, self.bc, self.bcm, self.bi, self.bim,
        ]);
        for (d, m) in v[13..].chunks_exact_mut(3).zip(&self.mid) {
            d.copy_from_slice(m);
        }
        v
    }

    /// Adds another instruction's counts.
    pub fn add(&mut self, o: &Counts) {
        let v = o.values();
        let mut s = self.values();
        for (a, b) in s.iter_mut().zip(v) {
            *a += b;
        }
        *self = Counts::from_values(s);
    }

    fn from_values(v: [u64; Counts::N]) -> Counts {
        let mut mid = [[0; 3]; MAX_MIDDLE];
        for (m, d) in mid.iter_mut().zip(v[13..].chunks_exact(3)) {
            m.copy_from_slice(d);
        }
        Counts {
            ir: v[0],
            i1mr: v[1],
            ilmr: v[2],
            dr: v[3],
            d1mr: v[4],
            dlmr: v[5],
            dw: v[6],
            d1mw: v[7],
            dlmw: v[8],
            bc: v[9],
            bcm: v[10],
            bi: v[11],
            bim: v[12],
            mid,
        }
    }
}

/// What a [`Hierarchy`] is made of.
#[derive(Clone, Debug)]
pub struct HierarchyConfig {
    /// First-level instruction cache.
    pub i1: CacheConfig,
    /// First-level data cache.
    pub d1: CacheConfig,
    /// Levels between the first and the last, shared, in order.
    pub middle: Vec<CacheConfig>,
    /// The last-level cache.
    pub ll: CacheConfig,
    /// Replacement policy of every cache.
    pub policy: Policy,
    /// Low address bits always clear in instruction addresses (branch
    /// predictor indexing; 0 on x86).
    pub iaddr_zero_bits: u32,
}

/// Cachegrind's machine: I1, D1, optional middle levels, LL, and the two
/// branch predictors.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    i1: Cache,
    d1: Cache,
    middle: Vec<Cache>,
    ll: Cache,
    cond: CondPredictor,
    indirect: IndirectPredictor,
}

impl Hierarchy {
    /// A machine in its initial state.
    pub fn new(c: &HierarchyConfig) -> Result<Hierarchy, Error> {
        if c.middle.len() > MAX_MIDDLE {
            return Err(Error::Geometry {
                cache: format!("L{}", MAX_MIDDLE + 2),
                message: format!(
                    "at most {MAX_MIDDLE} levels between the first level and LL are simulated"
                ),
            });
        }
        let make = |name: &str, cfg: CacheConfig| {
            cfg.check(name)?;
            Cache::new(cfg, c.policy).map_err(|e| match e {
                Error::Geometry { message, .. } => Error::Geometry {
                    cache: name.to_string(),
                    message,
                },
                e => e,
            })
        };
        Ok(Hierarchy {
            i1: make("I1", c.i1)?,
            d1: make("D1", c.d1)?,
            middle: c
                .middle
                .iter()
                .enumerate()
                .map(|(i, &m)| make(&format!("L{}", i + 2), m))
                .collect::<Result<_, _>>()?,
            ll: make("LL", c.ll)?,
            cond: CondPredictor::new(c.iaddr_zero_bits),
            indirect: IndirectPredictor::new(c.iaddr_zero_bits),
        })
    }

    /// Below a first-level miss: the middle levels in order, then LL. A
    /// level that hits ends the walk; the result is the number of levels
    /// that missed, one more than the middle levels when LL missed too.
    #[inline(always)]
    fn below(&mut self, addr: u64, size: u64) -> u8 {
        for (i, m) in self.middle.iter_mut().enumerate() {
            if !m.access(addr, size) {
                return i as u8;
            }
        }
        self.middle.len() as u8 + u8::from(self.ll.access(addr, size))
    }

    /// Counts the misses of a walk [`Hierarchy::below`] that missed
    /// `depth` levels: those of the middle levels as `kind` (0
    /// instruction, 1 read, 2 write; see [`Counts::mid`]); 1 if LL
    /// missed, for the caller to add to its own last-level event.
    #[inline(always)]
    fn count_below(&self, depth: u8, kind: usize, c: &mut Counts) -> u64 {
        let n = self.middle.len();
        for m in c.mid.iter_mut().take(usize::from(depth).min(n)) {
            m[kind] += 1;
        }
        u64::from(usize::from(depth) > n)
    }

    /// A miss walk of an access that missed its first level, counted.
    #[inline(always)]
    fn below_counted(&mut self, addr: u64, size: u64, kind: usize, c: &mut Counts) -> u64 {
        let depth = self.below(addr, size);
        self.count_below(depth, kind, c)
    }

    /// Counts what [`Hierarchy::fetch_lines`] returned, other than 0 (an
    /// I1 hit), as misses of instruction fetch.
    #[inline(always)]
    pub fn count_fetch_miss(&self, miss: u8, c: &mut Counts) {
        c.i1mr += 1;
        c.ilmr += self.count_below(miss.saturating_sub(1), 0, c);
    }

    /// An instruction fetch of `size` bytes.
    #[inline(always)]
    pub fn fetch(&mut self, addr: u64, size: u64, c: &mut Counts) {
        c.ir += 1;
        if self.i1.access(addr, size) {
            c.i1mr += 1;
            c.ilmr += self.below_counted(addr, size, 0, c);
        }
    }

    /// The number of levels between the first level and LL.
    pub fn middle_levels(&self) -> usize {
        self.middle.len()
    }

    /// The I1 line size in bytes.
    pub fn i1_line_size(&self) -> u64 {
        self.i1.config().line_size
    }

    /// An instruction fetch whose `Ir` the caller counts: 0 for an I1
    /// hit, else one more than the number of levels below I1 that missed
    /// (without middle levels: 1 for an I1 miss that LL held, 2 for a
    /// miss of both). [`Hierarchy::count_fetch_miss`] counts it.
    #[inline(always)]
    pub fn fetch_lines(&mut self, addr: u64, size: u64) -> u8 {
        if !self.i1.access(addr, size) {
            return 0;
        }
        1 + self.below(addr, size)
    }

    /// [`Hierarchy::fetch_lines`] of an instruction whose first byte is in
    /// I1 line `line` and, if it `straddle`s, whose last is in the next.
    /// Most fetches need no lookup at all: the line is the one I1 last
    /// looked up; the rest is out of line.
    #[inline(always)]
    pub(crate) fn fetch_line(&mut self, line: u64, straddle: bool, addr: u64, size: u64) -> u8 {
        if !straddle && self.i1.is_recent(line) {
            return 0;
        }
        self.fetch_slow(line, straddle, addr, size)
    }

    /// [`Hierarchy::fetch_line`] past its first test: a jump to the most
    /// recent line of its set, or a straddle from I1's last line into the
    /// most recent line of its set, change nothing but the last line.
    #[inline(never)]
    fn fetch_slow(&mut self, line: u64, straddle: bool, addr: u64, size: u64) -> u8 {
        if (!straddle || self.i1.is_recent(line))
            && self
                .i1
                .touch_unchanged(line.wrapping_add(u64::from(straddle)))
        {
            return 0;
        }
        self.fetch_lines(addr, size)
    }

    /// A data read (a modify, read then write, counts as one read).
    #[inline(always)]
    pub fn read(&mut self, addr: u64, size: u64, c: &mut Counts) {
        c.dr += 1;
        if self.d1.access(addr, size) {
            c.d1mr += 1;
            c.dlmr += self.below_counted(addr, size, 1, c);
        }
    }

    /// A data write.
    #[inline(always)]
    pub fn write(&mut self, addr: u64, size: u64, c: &mut Counts) {
        c.dw += 1;
        if self.d1.access(addr, size) {
            c.d1mw += 1;
            c.dlmw += self.below_counted(addr, size, 2, c);
        }
    }

    /// A data access that missed D1 where D1 was simulated (the plugin's
    /// [`filter`]): counted as a D1 miss and taken to the levels below.
    #[inline(always)]
    pub fn d1_missed(&mut self, store: bool, addr: u64, size: u64, c: &mut Counts) {
        let ll = self.below_counted(addr, size, 1 + usize::from(store), c);
        if store {
            c.dw += 1;
            c.d1mw += 1;
            c.dlmw += ll;
        } else {
            c.dr += 1;
            c.d1mr += 1;
            c.dlmr += ll;
        }
    }

    /// The first-level data cache.
    pub fn d1(&self) -> &Cache {
        &self.d1
    }

    /// The first-level data cache, to restore its state
    /// ([`Cache::restore`]).
    pub fn d1_mut(&mut self) -> &mut Cache {
        &mut self.d1
    }

    /// A conditional branch at `addr` and whether it was taken.
    #[inline(always)]
    pub fn cond_branch(&mut self, addr: u64, taken: bool, c: &mut Counts) {
        c.bc += 1;
        c.bcm += u64::from(self.cond.predict(addr, taken));
    }

    /// An indirect branch at `addr` to `target`.
    #[inline(always)]
    pub fn indirect_branch(&mut self, addr: u64, target: u64, c: &mut Counts) {
        c.bi += 1;
        c.bim += u64::from(self.indirect.predict(addr, target));
    }
}

impl Hierarchy {
    /// Simulates one Lackey record; a modify counts as one read, as
    /// Cachegrind counts it.
    #[inline]
    pub fn lackey(&mut self, a: lackey::Access, c: &mut Counts) {
        match a {
            lackey::Access::Instr { addr, size } => self.fetch(addr, size, c),
            lackey::Access::Load { addr, size } | lackey::Access::Modify { addr, size } => {
                self.read(addr, size, c)
            }
            lackey::Access::Store { addr, size } => self.write(addr, size, c),
        }
    }
}
