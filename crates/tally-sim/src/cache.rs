//! One set-associative cache, as Cachegrind simulates it (`cg_sim.c`), with
//! other replacement policies besides its LRU.
//!
//! Cachegrind's rules, kept exactly:
//! - the set is chosen by bit selection: `(address / line size) mod sets`;
//! - the whole line number is the tag;
//! - write-allocate: reads and writes are both just references;
//! - a reference that straddles two lines is one access, which misses if
//!   either line misses (both lines are looked up, as both change state);
//! - LRU keeps each set ordered most recently used first;
//! - a fresh cache holds line 0 in every way (Cachegrind's tags start at
//!   zero), so a first reference to line 0 hits.
//!
//! References spanning more than two lines (Cachegrind stops with an
//! error) are taken as one access to every line they touch.

use crate::Error;

/// Size, associativity and line size of a cache, as `--I1=32768,8,64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Bytes.
    pub size: u64,
    /// Ways per set.
    pub assoc: u64,
    /// Bytes per line.
    pub line_size: u64,
}

impl CacheConfig {
    /// Parses `SIZE,ASSOC,LINE_SIZE` and checks the geometry.
    pub fn parse(name: &str, text: &str) -> Result<CacheConfig, Error> {
        let bad = |m: String| Error::Geometry {
            cache: name.to_string(),
            message: m,
        };
        let v: Vec<&str> = text.split(',').map(str::trim).collect();
        let [size, assoc, line] = v.as_slice() else {
            return Err(bad(format!(
                "`{text}`: expected SIZE,ASSOC,LINE_SIZE (e.g. 32768,8,64)"
            )));
        };
        let num = |s: &str, what: &str| {
            s.parse::<u64>()
                .map_err(|_| bad(format!("`{text}`: the {what} `{s}` is not a number")))
        };
        let c = CacheConfig {
            size: num(size, "size")?,
            assoc: num(assoc, "associativity")?,
            line_size: num(line, "line size")?,
        };
        c.check(name)?;
        Ok(c)
    }

    /// Checks the geometry: positive values, a power-of-two line size, a
    /// size that is a whole number of sets, a power-of-two number of sets.
    pub fn check(&self, name: &str) -> Result<(), Error> {
        let bad = |m: String| {
            Err(Error::Geometry {
                cache: name.to_string(),
                message: m,
            })
        };
        if self.size == 0 || self.assoc == 0 || self.line_size == 0 {
            return bad("size, associativity and line size must be positive".into());
        }
        if !self.line_size.is_power_of_two() {
            return bad(format!(
                "the line size {} is not a power of two",
                self.line_size
            ));
        }
        let way = self.assoc * self.line_size;
        if !self.size.is_multiple_of(way) {
            return bad(format!(
                "the size {} is not a multiple of associativity × line size ({way})",
                self.size
            ));
        }
        let sets = self.size / way;
        if !sets.is_power_of_two() {
            return bad(format!(
                "{} B / ({} × {} B) = {sets} sets, not a power of two",
                self.size, self.assoc, self.line_size
            ));
        }
        Ok(())
    }

    /// Number of sets.
    pub fn sets(&self) -> u64 {
        self.size / (self.assoc * self.line_size)
    }

    /// As Cachegrind describes a cache: `32768 B, 64 B, 8-way associative`.
    pub fn describe(&self) -> String {
        if self.assoc == 1 {
            format!("{} B, {} B, direct-mapped", self.size, self.line_size)
        } else {
            format!(
                "{} B, {} B, {}-way associative",
                self.size, self.line_size, self.assoc
            )
        }
    }
}

/// Which line of a full set a miss replaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Least recently used (Cachegrind's).
    Lru,
    /// First in, first out: hits do not change the order.
    Fifo,
    /// Tree pseudo-LRU (associativity must be a power of two).
    TreePlru,
    /// A victim chosen at random, from a seeded generator.
    Random(u64),
}

/// What [`Cache::front_hit`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Front {
    /// A hit, decided.
    Hit,
    /// Within this one line, not the recent one nor the front of its set.
    Deeper(u64),
    /// A reference that straddles two lines.
    Straddle,
}

/// LRU's move to the front, in one pass: each way shifts down until
/// `line` is found, which then goes in front (`None`). A miss leaves the
/// ways shifted down one with the front unchanged, and returns the line
/// that fell off the end, for the caller to insert `line` or undo.
#[inline(always)]
fn lru_to_front(ways: &mut [u64], line: u64) -> Option<u64> {
    let mut prev = *ways.first()?;
    if prev == line {
        return None;
    }
    for w in &mut ways[1..] {
        let t = *w;
        *w = prev;
        if t == line {
            ways[0] = line;
            return None;
        }
        prev = t;
    }
    Some(prev)
}

/// A simulated cache.
#[derive(Clone, Debug)]
pub struct Cache {
    config: CacheConfig,
    policy: Policy,
    assoc: usize,
    line_bits: u32,
    set_mask: u64,
    /// `assoc` tags per set. LRU: most recent first. FIFO: newest first.
    /// Tree-PLRU and random: by way.
    tags: Vec<u64>,
    /// Tree-PLRU: `assoc - 1` direction bits per set (heap order).
    plru: Vec<bool>,
    rng: u64,
    /// The line the last reference ended on. Referencing it again is a hit
    /// that changes nothing under every policy (it is the most recent line
    /// of its set), so it needs no lookup: most instruction fetches are
    /// such.
    recent: u64,
}

impl Cache {
    /// A cache in its initial state (every way holding line 0).
    pub fn new(config: CacheConfig, policy: Policy) -> Result<Cache, Error> {
        config.check("cache")?;
        if policy == Policy::TreePlru && !config.assoc.is_power_of_two() {
            return Err(Error::Geometry {
                cache: "cache".into(),
                message: format!(
                    "tree pseudo-LRU needs a power-of-two associativity, not {}",
                    config.assoc
                ),
            });
        }
        let sets = config.sets();
        let assoc = config.assoc as usize;
        Ok(Cache {
            config,
            policy,
            assoc,
            line_bits: config.line_size.trailing_zeros(),
            set_mask: sets - 1,
            tags: vec![0; sets as usize * assoc],
            plru: vec![false; sets as usize * assoc.saturating_sub(1)],
            rng: match policy {
                Policy::Random(seed) => seed | 1,
                _ => 1,
            },
            recent: u64::MAX,
        })
    }

    /// The geometry.
    pub fn config(&self) -> CacheConfig {
        self.config
    }

    /// The replacement policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The whole state, as bytes ([`Cache::restore`] takes them back):
    /// the last line, the generator, every tag, the tree bits.
    pub fn save(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(16 + 8 * self.tags.len() + self.plru.len());
        b.extend_from_slice(&self.recent.to_le_bytes());
        b.extend_from_slice(&self.rng.to_le_bytes());
        for t in &self.tags {
            b.extend_from_slice(&t.to_le_bytes());
        }
        b.extend(self.plru.iter().map(|&x| u8::from(x)));
        b
    }

    /// Takes back a state [`Cache::save`] gave for a cache of this
    /// geometry; `false` (and nothing changed) if `b` is not one.
    pub fn restore(&mut self, b: &[u8]) -> bool {
        if b.len() != 16 + 8 * self.tags.len() + self.plru.len() {
            return false;
        }
        let word = |k: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[k..k + 8]);
            u64::from_le_bytes(w)
        };
        self.recent = word(0);
        self.rng = word(8);
        for (k, t) in self.tags.iter_mut().enumerate() {
            *t = word(16 + 8 * k);
        }
        let bits = &b[16 + 8 * self.tags.len()..];
        for (x, &v) in self.plru.iter_mut().zip(bits) {
            *x = v != 0;
        }
        true
    }

    /// Whether `line` is the line the last reference ended on (so that
    /// referencing it again is a hit that changes nothing).
    #[inline(always)]
    pub(crate) fn is_recent(&self, line: u64) -> bool {
        line == self.recent
    }

    /// Whether referencing `line` would be a hit that changes nothing
    /// but [`Cache::recent`] (it is the most recent line of its set, under
    /// LRU or FIFO); if so, it is now the recent line.
    #[inline(always)]
    pub(crate) fn touch_unchanged(&mut self, line: u64) -> bool {
        let hit = self.first_in_set(line);
        if hit {
            self.recent = line;
        }
        hit
    }

    /// A reference of `size` bytes at `addr` if it is a hit on the recent
    /// line or on the front of a set under LRU or FIFO (a few
    /// instructions): then the cache is as [`Cache::access`] would leave
    /// it. Otherwise nothing changed, and [`Cache::set_hit`] (if within
    /// one line) or `access` must decide it. The D1 filter's fast path.
    #[inline(always)]
    pub fn front_hit(&mut self, addr: u64, size: u64) -> Front {
        let first = addr >> self.line_bits;
        let last = addr.wrapping_add(size.max(1) - 1) >> self.line_bits;
        if first != last {
            Front::Straddle
        } else if first == self.recent || self.touch_unchanged(first) {
            Front::Hit
        } else {
            Front::Deeper(first)
        }
    }

    /// A reference within `line` that [`Cache::front_hit`] left
    /// undecided, if it hits under LRU or FIFO: then the cache is as
    /// [`Cache::access`] would leave it and this is `true`. `false` (a
    /// miss, another policy): nothing changed.
    #[inline(always)]
    pub fn set_hit(&mut self, line: u64) -> bool {
        let hit = self.hit_in_set(line);
        if hit {
            self.recent = line;
        }
        hit
    }

    /// A hit on `line` in its set under LRU (moved to the front, as
    /// [`Cache::look_up`] moves it) or FIFO (nothing moves); `false`,
    /// changing nothing, for a miss or another policy.
    #[inline(always)]
    fn hit_in_set(&mut self, line: u64) -> bool {
        let a = self.assoc;
        let set = (line & self.set_mask) as usize;
        let ways = &mut self.tags[set * a..(set + 1) * a];
        match self.policy {
            Policy::Lru => match lru_to_front(ways, line) {
                None => true,
                Some(evicted) => {
                    // A miss (rare here): the ways shifted back.
                    ways.copy_within(1.., 0);
                    ways[a - 1] = evicted;
                    false
                }
            },
            Policy::Fifo => ways.contains(&line),
            _ => false,
        }
    }

    /// One reference of `size` bytes at `addr`; `true` for a miss.
    #[inline(always)]
    pub fn access(&mut self, addr: u64, size: u64) -> bool {
        let first = addr >> self.line_bits;
        let last = addr.wrapping_add(size.max(1) - 1) >> self.line_bits;
        if first == last {
            if first == self.recent {
                return false;
            }
            self.recent = first;
            return self.line_miss(first);
        }
        self.recent = last;
        // Every line is looked up: each lookup updates its set.
        let mut miss = false;
        let mut line = first;
        loop {
            miss |= self.line_miss(line);
            if line == last {
                break;
            }
            line = line.wrapping_add(1);
        }
        miss
    }

    /// Looks a line up, installs it on a miss; `true` for a miss.
    ///
    /// Most references hit the most recent line of their set; under LRU
    /// and FIFO that changes nothing, so it is checked here, inlined, and
    /// the rest is a call.
    #[inline(always)]
    fn line_miss(&mut self, line: u64) -> bool {
        if self.first_in_set(line) {
            return false;
        }
        self.look_up((line & self.set_mask) as usize, line)
    }

    /// `line` is the most recent of its set under LRU or FIFO, where
    /// referencing it again changes nothing.
    #[inline(always)]
    fn first_in_set(&self, line: u64) -> bool {
        let set = (line & self.set_mask) as usize;
        matches!(self.policy, Policy::Lru | Policy::Fifo)
            && self.tags.get(set * self.assoc) == Some(&line)
    }

    #[inline(never)]
    fn look_up(&mut self, set: usize, line: u64) -> bool {
        let a = self.assoc;
        let ways = &mut self.tags[set * a..(set + 1) * a];
        match self.policy {
            Policy::Lru => match lru_to_front(ways, line) {
                None => false,
                Some(_) => {
                    ways[0] = line;
                    true
                }
            },
            Policy::Fifo => {
                if ways.contains(&line) {
                    return false;
                }
                ways.copy_within(0..a - 1, 1);
                ways[0] = line;
                true
            }
            Policy::TreePlru => {
                let bits = &mut self.plru[set * (a - 1)..(set + 1) * (a - 1)];
                let (w, miss) = match ways.iter().position(|&t| t == line) {
                    Some(w) => (w, false),
                    None => {
                        // Follow the bits to the victim.
                        let mut node = 0;
                        while node < a - 1 {
                            node = 2 * node + 1 + usize::from(bits[node]);
                        }
                        let w = node - (a - 1);
                        ways[w] = line;
                        (w, true)
                    }
                };
                // Point every node on the path away from the way used.
                let mut node = w + (a - 1);
                while node > 0 {
                    let parent = (node - 1) / 2;
                    bits[parent] = node == 2 * parent + 1;
                    node = parent;
                }
                miss
            }
            Policy::Random(_) => {
                if ways.contains(&line) {
                    return false;
                }
                // xorshift64
                let mut x = self.rng;
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                self.rng = x;
                ways[(x % a as u64) as usize] = line;
                true
            }
        }
    }
}
