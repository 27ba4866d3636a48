//! Cachegrind's branch predictors (`cg_branchpred.c`), exactly.
//!
//! Conditional branches: 16384 two-bit saturating counters, indexed by 7
//! bits of global history (the outcomes of the last branches, newest in
//! the lowest bit) above 7 bits of the branch address; a counter of 2 or 3
//! predicts taken. Indirect branches: 512 entries indexed by 9 bits of the
//! address, each predicting the target the branch (or one aliasing it)
//! went to last. Addresses are first shifted right by the number of low
//! bits every instruction address has clear: 0 on x86, 1 on ARM (Thumb),
//! s390x and RISC-V, 2 on AArch64, PowerPC and MIPS.

const HIST_BITS: u32 = 7;
const ADDR_BITS: u32 = 7;
const BTAC_BITS: u32 = 9;

/// A two-bit counter's next value, by `counter << 1 | taken`: up to 3 on
/// taken, down to 0 on not taken.
const NEXT: [u8; 8] = [0, 1, 0, 2, 1, 3, 2, 3];

/// The conditional-branch predictor.
#[derive(Clone, Debug)]
pub struct CondPredictor {
    history: u64,
    /// A fixed-size table, so that an index masked to its size needs no
    /// bounds check.
    counters: Box<[u8; 1 << (HIST_BITS + ADDR_BITS)]>,
    shift: u32,
}

impl CondPredictor {
    /// A fresh predictor (all counters 0, strongly not taken) for
    /// instruction addresses with `zero_bits` low bits always clear.
    pub fn new(zero_bits: u32) -> Self {
        CondPredictor {
            history: 0,
            counters: Box::new([0; 1 << (HIST_BITS + ADDR_BITS)]),
            shift: zero_bits,
        }
    }

    /// Predicts the branch at `addr`, learns that it was `taken`; `true`
    /// for a mispredict.
    #[inline(always)]
    pub fn predict(&mut self, addr: u64, taken: bool) -> bool {
        let hist = self.history & ((1 << HIST_BITS) - 1);
        let low = (addr >> self.shift) & ((1 << ADDR_BITS) - 1);
        let i = ((hist << ADDR_BITS) | low) as usize & ((1 << (HIST_BITS + ADDR_BITS)) - 1);
        let c = &mut self.counters[i];
        let mispredict = (*c >= 2) != taken;
        self.history = (self.history << 1) | u64::from(taken);
        // The counter's next value by table rather than by a branch on
        // the outcome, which the host would mispredict as often as the
        // program's own branches go either way.
        *c = NEXT[usize::from(*c & 3) << 1 | usize::from(taken)];
        mispredict
    }
}

/// The indirect-branch target predictor.
#[derive(Clone, Debug)]
pub struct IndirectPredictor {
    targets: Vec<u64>,
    shift: u32,
}

impl IndirectPredictor {
    /// A fresh predictor (every entry predicting address 0).
    pub fn new(zero_bits: u32) -> Self {
        IndirectPredictor {
            targets: vec![0; 1 << BTAC_BITS],
            shift: zero_bits,
        }
    }

    /// Predicts the target of the branch at `addr`, learns `target`;
    /// `true` for a mispredict.
    #[inline(always)]
    pub fn predict(&mut self, addr: u64, target: u64) -> bool {
        let i = ((addr >> self.shift) & ((1 << BTAC_BITS) - 1)) as usize;
        let miss = self.targets[i] != target;
        self.targets[i] = target;
        miss
    }
}
