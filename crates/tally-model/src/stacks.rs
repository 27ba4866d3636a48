//! Whole call stacks, as a sampling profiler records them.
//!
//! Callgrind and gmon keep only caller→callee arcs, from which a stack can
//! only be estimated. perf, pprof and folded stacks keep whole stacks; a
//! profile read from them carries them here, beside the self costs and arcs
//! derived from them, so pictures draw them as recorded and inclusive costs
//! count a recursion once per sample.

use crate::{Cost, FunctionId};
use rustc_hash::FxHashMap;

/// A frame: a function and, where known, the line and address in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Frame {
    /// The function (its object, file and name are in the profile's names).
    pub function: FunctionId,
    /// The source line; 0 when unknown.
    pub line: u32,
    /// The instruction address; 0 when unknown.
    pub address: u64,
}

/// Index of a frame in [`Stacks::frames`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FrameId(pub u32);

impl FrameId {
    /// The index of this id in [`Stacks::frames`].
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One distinct stack with the summed costs of its samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample<C> {
    /// The frames, root (outermost caller) first, leaf last, as folded
    /// stacks write them.
    pub frames: Vec<FrameId>,
    /// One cost per recorded event of the profile, in its order.
    pub costs: Vec<C>,
}

/// The stacks of a profile: distinct frames and distinct stacks.
#[derive(Clone, Debug)]
pub struct Stacks<C = u64> {
    /// Distinct frames.
    pub frames: Vec<Frame>,
    /// Distinct stacks, in first-seen order.
    pub samples: Vec<Sample<C>>,
    frame_index: FxHashMap<Frame, FrameId>,
    stack_index: FxHashMap<Vec<FrameId>, usize>,
}

impl<C> Default for Stacks<C> {
    fn default() -> Self {
        Stacks {
            frames: Vec::new(),
            samples: Vec::new(),
            frame_index: FxHashMap::default(),
            stack_index: FxHashMap::default(),
        }
    }
}

// The indexes are derived from the vectors; comparing those is enough.
impl<C: PartialEq> PartialEq for Stacks<C> {
    fn eq(&self, other: &Self) -> bool {
        self.frames == other.frames && self.samples == other.samples
    }
}
impl<C: Eq> Eq for Stacks<C> {}

impl<C: Cost> Stacks<C> {
    /// The id of `frame`, added if new.
    pub fn frame(&mut self, frame: Frame) -> FrameId {
        if let Some(&id) = self.frame_index.get(&frame) {
            return id;
        }
        let id = FrameId(self.frames.len() as u32);
        self.frames.push(frame);
        self.frame_index.insert(frame, id);
        id
    }

    /// Adds `costs` to the stack `frames` (root first), creating it if new.
    /// `None` if a sum overflows; the stack is then unchanged.
    pub fn add(&mut self, frames: &[FrameId], costs: &[C]) -> Option<()> {
        if let Some(&i) = self.stack_index.get(frames) {
            let s = &mut self.samples[i];
            let sums: Option<Vec<C>> = s
                .costs
                .iter()
                .zip(costs)
                .map(|(a, b)| a.checked_add(*b))
                .collect();
            s.costs = sums?;
        } else {
            self.stack_index.insert(frames.to_vec(), self.samples.len());
            self.samples.push(Sample {
                frames: frames.to_vec(),
                costs: costs.to_vec(),
            });
        }
        Some(())
    }

    /// Whether no stack is held.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The sum of every stack's costs; `None` on overflow.
    pub fn totals(&self, events: usize) -> Option<Vec<C>> {
        let mut t = vec![C::ZERO; events];
        for s in &self.samples {
            for (a, b) in t.iter_mut().zip(&s.costs) {
                *a = a.checked_add(*b)?;
            }
        }
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_stacks_are_interned() {
        let mut s = Stacks::<u64>::default();
        let f = |n| Frame {
            function: FunctionId(n),
            line: 0,
            address: 0,
        };
        let a = s.frame(f(1));
        let b = s.frame(f(2));
        assert_eq!(s.frame(f(1)), a);
        s.add(&[a, b], &[3, 1]).unwrap();
        s.add(&[a], &[1, 0]).unwrap();
        s.add(&[a, b], &[2, 2]).unwrap();
        assert_eq!(s.samples.len(), 2);
        assert_eq!(s.samples[0].costs, [5, 3]);
        assert_eq!(s.totals(2).unwrap(), [6, 3]);
        assert!(s.add(&[a], &[u64::MAX, 0]).is_none());
        assert_eq!(s.samples[1].costs, [1, 0]);
    }
}
