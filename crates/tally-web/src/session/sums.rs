//! What the functions table shows while gprof's analysis runs, summed in
//! one pass over the cost lines: each function's self costs and whether
//! another function calls it. The analysis first sums rows and arcs
//! (`Aggregate`), which takes several times longer on a large profile;
//! this pass runs beside it, so the first table does not wait for it.

use tally_model::Profile;

/// The self costs and callers of the functions of some parts.
pub struct SelfSums {
    /// Recorded events per function.
    pub events: usize,
    /// Self costs, `events` per function, summed saturating as the
    /// analysis sums them.
    function_self: Vec<u64>,
    /// Per function: whether another function calls it (a call counted
    /// at least once).
    pub called: Vec<bool>,
    /// Each part's sum of its cost lines (`None` on overflow), when every
    /// part was summed.
    pub part_sums: Option<Vec<Option<Vec<u64>>>>,
}

impl SelfSums {
    /// Sums the parts `chosen` selects.
    pub fn new(profile: &Profile<u64>, chosen: impl Fn(usize) -> bool) -> SelfSums {
        let events = profile.events.len();
        let n = profile.names.function_count();
        let mut function_self = vec![0u64; n * events];
        let mut called = vec![false; n];
        let mut part_sums = Some(Vec::with_capacity(profile.parts.len()));
        let mut block_sum = vec![0u64; events];
        for (pi, part) in profile.parts.iter().enumerate() {
            if !chosen(pi) {
                part_sums = None;
                continue;
            }
            // The part's sum, exact (u128 cannot overflow over 2^64
            // blocks), to tell an overflowing part as its own sum does: a
            // block that overflows makes the part overflow.
            let mut total = vec![0u128; events];
            let mut overflow = false;
            for (bi, block) in part.lines.blocks().iter().enumerate() {
                block_sum.iter_mut().for_each(|c| *c = 0);
                part.lines.for_each_in_block(bi, |l| {
                    for (a, &c) in block_sum.iter_mut().zip(l.costs) {
                        *a = a.checked_add(c).unwrap_or_else(|| {
                            overflow = true;
                            u64::MAX
                        });
                    }
                });
                for (t, &c) in total.iter_mut().zip(&block_sum) {
                    *t += u128::from(c);
                }
                let f = block.function.index();
                if f < n {
                    let row = &mut function_self[f * events..(f + 1) * events];
                    for (a, &c) in row.iter_mut().zip(&block_sum) {
                        *a = a.saturating_add(c);
                    }
                }
            }
            for c in part.calls.iter() {
                let (p, k) = (c.info.caller.index(), c.info.callee.index());
                if p != k && k < n && c.info.count != 0 {
                    called[k] = true;
                }
            }
            if let Some(sums) = part_sums.as_mut() {
                let exact: Option<Vec<u64>> =
                    total.iter().map(|&t| u64::try_from(t).ok()).collect();
                sums.push(exact.filter(|_| !overflow));
            }
        }
        SelfSums {
            events,
            function_self,
            called,
            part_sums,
        }
    }

    /// The self costs of function `f` (by index), one per recorded event.
    pub fn get(&self, f: usize) -> &[u64] {
        &self.function_self[f * self.events..(f + 1) * self.events]
    }
}
