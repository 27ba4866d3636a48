//! Whole stacks estimated from caller→callee arcs.
//!
//! Callgrind and gmon keep only arcs, so where a function's cost sat on the
//! stack can only be estimated. The estimate here is the usual one (gprof's
//! propagation, speedscope's Callgrind import): a function's self cost is
//! split across its callers in proportion to what each call arc cost (its
//! inclusive cost, per event), and each caller's share again across that
//! caller's callers, up to a root. A root is a function nobody calls (a
//! thread's first function, `(below main)`); a function that is called but
//! costs more than all calls to it (it was also entered without a call)
//! keeps the rest as a stack of its own beginning there.
//!
//! Recursion is collapsed, never unrolled: the walk runs on the call
//! graph's components ([`crate::Inclusive`]), so a self call adds no frame
//! and a cycle of mutually recursive functions shows as at most two
//! frames: the member it was entered by and, above it, the member whose
//! cost it is (or that made the call being followed). The calls inside a
//! cycle carry no cost of their own, so nothing is counted twice and the
//! walk always ends.
//!
//! Callgrind's `--separate-callers=N` contexts (`f'g'h`) are functions of
//! their own with arcs between contexts, so the walk follows the stack the
//! file knows for those N levels and estimates only above them; the frames
//! keep the context names (a picture shows the part before the first `'`).
//!
//! Integer costs are split by largest remainder, so the estimated stacks
//! sum to the profile's totals exactly, event by event. Where every
//! function has a single caller the estimate is the true stack.

use crate::{Aggregate, Inclusive};
use rustc_hash::FxHashMap;
use tally_model::{Frame, FunctionId, Profile, Stacks};

/// Why stacks could not be estimated.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    /// A stack's summed cost does not fit 64 bits.
    #[error("the estimated stacks' costs overflow 64 bits")]
    Overflow,
}

/// How finely to split.
#[derive(Clone, Copy, Debug, Default)]
pub struct EstimateOptions {
    /// A share of a stack smaller than this fraction of the total (in every
    /// event) is no longer split across callers but follows the caller
    /// whose arc costs most. 0 splits everything; a picture that cannot
    /// show less than a pixel uses a small fraction, which bounds the
    /// number of stacks without changing any total.
    pub min_share: f64,
}

/// One way into a component: a call arc from another component, or the
/// component's own entry as a root.
#[derive(Clone, Debug)]
struct Way {
    /// `(caller, callee)`; `None` for the entry as a root.
    arc: Option<(FunctionId, FunctionId)>,
    weights: Vec<u64>,
    count: u64,
}

/// Estimates the stacks of `profile` (all parts, every recorded event),
/// splitting everything: see the module documentation.
pub fn estimate_stacks(profile: &Profile<u64>) -> Result<Stacks<u64>, EstimateError> {
    estimate_stacks_with(profile, EstimateOptions::default())
}

/// [`estimate_stacks`] with options.
pub fn estimate_stacks_with(
    profile: &Profile<u64>,
    options: EstimateOptions,
) -> Result<Stacks<u64>, EstimateError> {
    let agg = Aggregate::new(profile, |_| true);
    let inc = Inclusive::new(&agg);
    let ev = agg.events;
    let nf = agg.function_self.len();
    // Component of a function: itself, or `nf + cycle number`.
    let node = |f: FunctionId| match inc.cycle_of.get(f.index()).copied().flatten() {
        Some(c) => nf + c as usize,
        None => f.index(),
    };
    let nodes = nf + inc.cycles.len() + 1; // cycles are numbered from 1
    let mut ways: Vec<Vec<Way>> = vec![Vec::new(); nodes];
    let mut own = vec![0u64; nodes * ev];
    for f in 0..nf {
        let n = node(FunctionId(f as u32));
        for (o, &s) in own[n * ev..(n + 1) * ev]
            .iter_mut()
            .zip(agg.function_self.get(f))
        {
            *o = o.saturating_add(s);
        }
    }
    // Arcs between components, summed over call-site files.
    let mut arc_index: FxHashMap<(FunctionId, FunctionId), (usize, usize)> = FxHashMap::default();
    for arc in &agg.arcs {
        let (from, to) = (node(arc.caller), node(arc.callee));
        if from == to || arc.caller.index() >= nf || arc.callee.index() >= nf {
            continue;
        }
        for (o, &s) in own[from * ev..(from + 1) * ev]
            .iter_mut()
            .zip(&arc.inclusive)
        {
            *o = o.saturating_add(s);
        }
        let key = (arc.caller, arc.callee);
        let (n, i) = *arc_index.entry(key).or_insert_with(|| {
            ways[to].push(Way {
                arc: Some(key),
                weights: vec![0; ev],
                count: 0,
            });
            (to, ways[to].len() - 1)
        });
        let w = &mut ways[n][i];
        w.count = w.count.saturating_add(arc.count);
        for (a, &b) in w.weights.iter_mut().zip(&arc.inclusive) {
            *a = a.saturating_add(b);
        }
    }
    // Entry as a root: whatever a component costs beyond the calls to it.
    for (n, list) in ways.iter_mut().enumerate() {
        let own = &own[n * ev..(n + 1) * ev];
        let mut rest = own.to_vec();
        for w in list.iter() {
            for (r, &x) in rest.iter_mut().zip(&w.weights) {
                *r = r.saturating_sub(x);
            }
        }
        if list.is_empty() || rest.iter().any(|&r| r > 0) {
            list.push(Way {
                arc: None,
                weights: rest,
                count: 0,
            });
        }
    }

    let totals: Vec<f64> = agg.totals.iter().map(|&t| t as f64).collect();
    let small = |amount: &[u64]| {
        options.min_share > 0.0
            && amount
                .iter()
                .zip(&totals)
                .all(|(&a, &t)| (a as f64) < options.min_share * t)
    };

    let mut stacks = Stacks::<u64>::default();
    let frame_of: Vec<_> = (0..nf)
        .map(|f| {
            stacks.frame(Frame {
                function: FunctionId(f as u32),
                line: 0,
                address: 0,
            })
        })
        .collect();
    // Work: (top function, frames leaf first, amount).
    let mut work: Vec<(FunctionId, Vec<FunctionId>, Vec<u64>)> = Vec::new();
    let mut root_first = Vec::new();
    let mut parts: Vec<Vec<u64>> = Vec::new();
    for f in 0..nf {
        let amount = agg.function_self.get(f);
        if amount.iter().all(|&a| a == 0) {
            continue;
        }
        let f = FunctionId(f as u32);
        work.push((f, vec![f], amount.to_vec()));
        while let Some((top, suffix, amount)) = work.pop() {
            let list = &ways[node(top)];
            split(&amount, list, small(&amount), &mut parts);
            for (way, part) in list.iter().zip(parts.drain(..)) {
                if part.iter().all(|&a| a == 0) {
                    continue;
                }
                match way.arc {
                    None => {
                        root_first.clear();
                        root_first.extend(suffix.iter().rev().map(|f| frame_of[f.index()]));
                        stacks
                            .add(&root_first, &part)
                            .ok_or(EstimateError::Overflow)?;
                    }
                    Some((caller, callee)) => {
                        let mut s = suffix.clone();
                        if callee != top {
                            s.push(callee);
                        }
                        s.push(caller);
                        work.push((caller, s, part));
                    }
                }
            }
        }
    }
    Ok(stacks)
}

/// Splits `amount` across `ways` in proportion to their weights, event by
/// event, by largest remainder; into `out`, one vector per way. When the
/// weights of an event are all zero, the calls' counts decide, and failing
/// those the first way takes it. With `whole`, the heaviest way takes
/// everything.
fn split(amount: &[u64], ways: &[Way], whole: bool, out: &mut Vec<Vec<u64>>) {
    let ev = amount.len();
    out.clear();
    out.extend(ways.iter().map(|_| vec![0u64; ev]));
    if ways.len() == 1 {
        out[0].copy_from_slice(amount);
        return;
    }
    if whole {
        let heaviest = (0..ways.len())
            .max_by(|&a, &b| {
                let (x, y) = (&ways[a], &ways[b]);
                x.weights
                    .cmp(&y.weights)
                    .then(x.count.cmp(&y.count))
                    .then(b.cmp(&a))
            })
            .unwrap_or(0);
        out[heaviest].copy_from_slice(amount);
        return;
    }
    let mut rem: Vec<(u128, usize)> = Vec::with_capacity(ways.len());
    for e in 0..ev {
        let a = amount[e] as u128;
        if a == 0 {
            continue;
        }
        let mut weight: Vec<u128> = ways.iter().map(|w| w.weights[e] as u128).collect();
        if weight.iter().all(|&w| w == 0) {
            weight = ways.iter().map(|w| w.count as u128).collect();
        }
        let sum: u128 = weight.iter().sum();
        if sum == 0 {
            out[0][e] = amount[e];
            continue;
        }
        rem.clear();
        let mut given = 0u128;
        for (i, &w) in weight.iter().enumerate() {
            let p = a * w;
            let q = p / sum;
            out[i][e] = q as u64;
            given += q;
            rem.push((p % sum, i));
        }
        // Largest remainders first; ties to the earlier way.
        rem.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        for &(_, i) in rem.iter().take((a - given) as usize) {
            out[i][e] += 1;
        }
    }
}
