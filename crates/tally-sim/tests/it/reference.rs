//! The caches and predictors against slow, obviously correct models on
//! random reference streams: every policy, straddling references, and the
//! start state Cachegrind has (every way holding line 0).

use proptest::prelude::*;
use tally_sim::{Cache, CacheConfig, CondPredictor, IndirectPredictor, Policy};

/// A set as a list of (line, time of last use, time of arrival).
#[derive(Clone)]
struct RefCache {
    line: u64,
    sets: Vec<Vec<(u64, i64, i64)>>,
    assoc: usize,
    policy: Policy,
    clock: i64,
    plru: Vec<Vec<bool>>,
    rng: u64,
}

impl RefCache {
    fn new(c: CacheConfig, policy: Policy) -> Self {
        let sets = (c.size / (c.assoc * c.line_size)) as usize;
        let assoc = c.assoc as usize;
        // Way i starts with line 0, as if used at time -i (way 0 most
        // recent) and arrived at time -i.
        let set: Vec<(u64, i64, i64)> = (0..assoc).map(|i| (0, -(i as i64), -(i as i64))).collect();
        RefCache {
            line: c.line_size,
            sets: vec![set; sets],
            assoc,
            policy,
            clock: 0,
            plru: vec![vec![false; assoc.saturating_sub(1)]; sets],
            rng: match policy {
                Policy::Random(s) => s | 1,
                _ => 1,
            },
        }
    }

    fn touch_plru(bits: &mut [bool], assoc: usize, way: usize) {
        // Walk from the root: at each level go toward `way` and point the
        // node the other way.
        let (mut lo, mut hi, mut node) = (0, assoc, 0);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if way < mid {
                bits[node] = true; // victim search goes right
                node = 2 * node + 1;
                hi = mid;
            } else {
                bits[node] = false;
                node = 2 * node + 2;
                lo = mid;
            }
        }
    }

    fn plru_victim(bits: &[bool], assoc: usize) -> usize {
        let (mut lo, mut hi, mut node) = (0, assoc, 0);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if bits[node] {
                node = 2 * node + 2;
                lo = mid;
            } else {
                node = 2 * node + 1;
                hi = mid;
            }
        }
        lo
    }

    fn line_miss(&mut self, line: u64) -> bool {
        self.clock += 1;
        let now = self.clock;
        let s = (line % self.sets.len() as u64) as usize;
        let assoc = self.assoc;
        let set = &mut self.sets[s];
        // The most recently used copy of the line, if present.
        let hit = set
            .iter()
            .enumerate()
            .filter(|(_, e)| e.0 == line)
            .max_by_key(|(_, e)| e.1)
            .map(|(i, _)| i);
        match (self.policy, hit) {
            (Policy::TreePlru, Some(w)) => {
                Self::touch_plru(&mut self.plru[s], assoc, w);
                false
            }
            (_, Some(w)) => {
                set[w].1 = now;
                false
            }
            (Policy::Lru, None) => {
                let v = (0..assoc).min_by_key(|&i| set[i].1).unwrap();
                set[v] = (line, now, now);
                true
            }
            (Policy::Fifo, None) => {
                let v = (0..assoc).min_by_key(|&i| set[i].2).unwrap();
                set[v] = (line, now, now);
                true
            }
            (Policy::TreePlru, None) => {
                let v = Self::plru_victim(&self.plru[s], assoc);
                set[v] = (line, now, now);
                Self::touch_plru(&mut self.plru[s], assoc, v);
                true
            }
            (Policy::Random(_), None) => {
                let mut x = self.rng;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.rng = x;
                let v = (x % assoc as u64) as usize;
                set[v] = (line, now, now);
                true
            }
        }
    }

    fn access(&mut self, addr: u64, size: u64) -> bool {
        let first = addr / self.line;
        let last = (addr + size.max(1) - 1) / self.line;
        let mut miss = false;
        for l in first..=last {
            miss |= self.line_miss(l);
        }
        miss
    }
}

fn config() -> impl Strategy<Value = (CacheConfig, Policy)> {
    (
        prop::sample::select(vec![1u64, 2, 4, 8]),
        prop::sample::select(vec![1u64, 2, 3, 4, 8]),
        prop::sample::select(vec![16u64, 32, 64]),
        0..4u8,
        any::<u64>(),
    )
        .prop_map(|(sets, assoc, line, p, seed)| {
            let policy = match p {
                0 => Policy::Lru,
                1 => Policy::Fifo,
                2 if assoc.is_power_of_two() => Policy::TreePlru,
                2 => Policy::Lru,
                _ => Policy::Random(seed),
            };
            (
                CacheConfig {
                    size: sets * assoc * line,
                    assoc,
                    line_size: line,
                },
                policy,
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn caches_match_the_reference(
        (cfg, policy) in config(),
        refs in prop::collection::vec((0u64..2048, 1u64..=16), 1..400),
    ) {
        let mut c = Cache::new(cfg, policy).unwrap();
        let mut r = RefCache::new(cfg, policy);
        for (i, &(a, s)) in refs.iter().enumerate() {
            prop_assert_eq!(c.access(a, s), r.access(a, s), "reference {} ({:#x}, {})", i, a, s);
        }
    }

    #[test]
    fn predictors_match_the_reference(
        branches in prop::collection::vec((0u64..1 << 20, any::<bool>(), 0u64..4), 1..500),
        zero_bits in 0u32..3,
    ) {
        let mut cond = CondPredictor::new(zero_bits);
        let mut ind = IndirectPredictor::new(zero_bits);
        // The reference: a history list and a map of counters.
        let mut history: Vec<bool> = Vec::new();
        let mut counters = std::collections::HashMap::<u64, i32>::new();
        let mut targets = std::collections::HashMap::<u64, u64>::new();
        for &(addr, taken, t) in &branches {
            let recent: u64 = (0..7)
                .map(|k| history.len().checked_sub(k + 1).map_or(0, |i| u64::from(history[i])) << k)
                .sum();
            let index = recent * 128 + (addr >> zero_bits) % 128;
            let ctr = counters.entry(index).or_insert(0);
            let want = (*ctr >= 2) != taken;
            *ctr = if taken { (*ctr + 1).min(3) } else { (*ctr - 1).max(0) };
            history.push(taken);
            prop_assert_eq!(cond.predict(addr, taken), want);
            let target = addr + t * 0x40;
            let slot = (addr >> zero_bits) % 512;
            let prev = targets.insert(slot, target).unwrap_or(0);
            prop_assert_eq!(ind.predict(addr, target), prev != target);
        }
    }
}

#[test]
fn cachegrind_details() {
    let cfg = CacheConfig::parse("D1", "256,2,64").unwrap();
    let mut c = Cache::new(cfg, Policy::Lru).unwrap();
    // A fresh cache holds line 0: Cachegrind's zeroed tags.
    assert!(!c.access(0, 8));
    assert!(c.access(64, 8));
    // A straddle of lines 1 and 2: one access, a miss (line 2 is new).
    assert!(c.access(127, 2));
    // Both now present: a hit.
    assert!(!c.access(127, 2));
    assert_eq!(cfg.describe(), "256 B, 64 B, 2-way associative");
}

#[test]
fn bad_geometries_are_clear_errors() {
    for (text, phrase) in [
        ("32768,8", "SIZE,ASSOC,LINE_SIZE"),
        ("32768,8,48", "not a power of two"),
        ("24576,8,64", "48 sets, not a power of two"),
        ("1000,8,64", "not a multiple"),
        ("0,8,64", "positive"),
        ("x,8,64", "not a number"),
    ] {
        let e = CacheConfig::parse("LL", text).unwrap_err().to_string();
        assert!(
            e.contains("invalid LL cache") && e.contains(phrase),
            "{text}: {e}"
        );
    }
    let cfg = CacheConfig::parse("D1", "384,3,64").unwrap();
    let e = Cache::new(cfg, Policy::TreePlru).unwrap_err().to_string();
    assert!(e.contains("power-of-two associativity"), "{e}");
}

#[test]
fn the_hierarchy_counts_as_cachegrind() {
    use tally_sim::{Counts, Hierarchy, HierarchyConfig};
    let cfg = HierarchyConfig {
        i1: CacheConfig::parse("I1", "1024,2,64").unwrap(),
        d1: CacheConfig::parse("D1", "1024,2,64").unwrap(),
        middle: vec![],
        ll: CacheConfig::parse("LL", "8192,4,64").unwrap(),
        policy: Policy::Lru,
        iaddr_zero_bits: 0,
    };
    let mut h = Hierarchy::new(&cfg).unwrap();
    let mut c = Counts::default();
    // Two passes over 4 KB of data: the first misses everywhere (64 lines
    // but line 0, held from the start), the second misses D1 (1 KB) but
    // hits LL (8 KB).
    for _ in 0..2 {
        for a in (0..4096).step_by(64) {
            h.read(a, 8, &mut c);
        }
    }
    assert_eq!((c.dr, c.d1mr, c.dlmr), (128, 127, 63));
    h.write(4096 + 60, 8, &mut c); // straddles two new lines: one access, one miss
    assert_eq!((c.dw, c.d1mw, c.dlmw), (1, 1, 1));
    h.fetch(0x1000, 4, &mut c);
    h.cond_branch(0x1000, true, &mut c);
    h.indirect_branch(0x1004, 0x2000, &mut c);
    assert_eq!(
        (c.ir, c.i1mr, c.ilmr, c.bc, c.bcm, c.bi, c.bim),
        (1, 1, 0, 1, 1, 1, 1)
    );
    // A bad level is named.
    let mut bad = cfg.clone();
    bad.middle.push(CacheConfig {
        size: 3000,
        assoc: 2,
        line_size: 64,
    });
    let e = Hierarchy::new(&bad).unwrap_err().to_string();
    assert!(e.contains("invalid L2 cache"), "{e}");
}
