//! A small pseudo-random generator of our own.
//!
//! The generator's output must stay byte-identical for a given seed across
//! releases and platforms, so it cannot depend on an external crate whose
//! algorithms may change. SplitMix64 is tiny, fast (one add, two multiplies)
//! and statistically good enough for synthetic data.

/// SplitMix64.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The SplitMix64 finaliser: a good 64-bit mixing function on its own, used
/// to derive independent seeds from tuples of numbers.
#[inline]
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Derives a seed from two numbers, so that streams for different
/// (function, segment) pairs are independent of each other and of the order
/// in which they are used.
#[inline]
pub(crate) fn hash2(a: u64, b: u64) -> u64 {
    mix(a ^ mix(b.wrapping_add(GAMMA)))
}

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(mix(seed))
    }

    #[inline]
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// Uniform in `0..n` (0 if `n` is 0), by multiply-shift: no division and
    /// a bias far below anything visible in generated data.
    #[inline]
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    #[inline]
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `per_mille / 1000`.
    #[inline]
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Roughly log-uniform in `lo..=hi` (`lo` at least 1): a uniform power
    /// of two, then uniform within it. Heavy-tailed counts (loop trip
    /// counts, function sizes) look like this in real profiles. Integer
    /// only, so that no platform's floating-point library can change the
    /// output.
    pub(crate) fn log_range(&mut self, lo: u64, hi: u64) -> u64 {
        let lo = lo.max(1);
        let x = self.next_u64();
        let (a, b) = (lo.ilog2(), hi.max(lo).ilog2());
        let e = a + (((x & 0xffff) * u64::from(b - a + 1)) >> 16) as u32;
        let base = 1u64 << e;
        (base + ((x >> 16) & (base - 1))).clamp(lo, hi.max(lo))
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }

    pub(crate) fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(1);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let v = r.below(7) as usize;
            seen[v] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn log_range_is_bounded() {
        let mut r = Rng::new(2);
        for _ in 0..1000 {
            let v = r.log_range(10, 5000);
            assert!((10..=5000).contains(&v));
        }
    }

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Rng::new(9), Rng::new(9));
        for _ in 0..10 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }
}
