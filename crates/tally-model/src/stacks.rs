//! Whole call stacks, as a sampling profiler records them.
//!
//! Callgrind and gmon keep only caller→callee arcs, from which a stack can
//! only be estimated. perf, pprof and folded stacks keep whole stacks; a
//! profile read from them carries them here, beside the self costs and arcs
//! derived from them, so pictures draw them as recorded and inclusive costs
//! count a recursion once per sample.
//!
//! A recorder that timed its samples also keeps a [`Timeline`]: every
//! sample in time order, with its thread and its own costs, for the views
//! that draw time (a track per thread, a stack chart, a range selection).

use crate::{CallInfo, Cost, FunctionId, Names, Part, Positions};
use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap, FxHashSet};
use std::hash::BuildHasher;

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

/// A sample label, as pprof keeps them (a thread's name, Go's
/// `pprof.Labels`): a key with a text or a number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: LabelValue,
}

/// The value of a [`Label`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LabelValue {
    /// A text value.
    Text(Vec<u8>),
    /// A number and its unit (empty when none is given).
    Number(i64, Vec<u8>),
}

/// Index of a set of labels in a [`Stacks`]; [`LabelSetId::NONE`] is the
/// empty set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LabelSetId(pub u32);

impl LabelSetId {
    /// No labels.
    pub const NONE: LabelSetId = LabelSetId(0);
}

/// A thread of a [`Timeline`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Thread {
    /// Its process id.
    pub pid: i32,
    /// Its thread id.
    pub tid: i32,
    /// Its name (the last `comm` the kernel gave it); empty when unknown.
    pub name: Vec<u8>,
}

/// Every timed sample of a profile, in time order: its time, its thread,
/// its stack (an index into [`Stacks::samples`]) and its own costs.
///
/// Held as columns, so that a sample takes 16 bytes and its costs (a
/// profile of millions of samples stays within tens of megabytes), and
/// apart from the distinct stacks, whose summed costs every other view
/// reads: stacks and timeline agree when every sample was timed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline<C = u64> {
    /// The threads the samples ran on.
    pub threads: Vec<Thread>,
    /// Each sample's time, in nanoseconds of the recorder's clock.
    pub times: Vec<u64>,
    /// Each sample's thread, an index into `threads`.
    pub thread: Vec<u32>,
    /// Each sample's stack, an index into [`Stacks::samples`].
    pub stack: Vec<u32>,
    /// Each sample's costs, `events` per sample, one after the other.
    pub costs: Vec<C>,
    /// The number of costs of each sample.
    pub events: usize,
    /// The time that time ranges count from: the recording's first
    /// sample's, kept when a transform drops samples; `None`: the first
    /// sample's.
    pub start: Option<u64>,
}

impl<C: Cost> Timeline<C> {
    /// An empty timeline of samples with `events` costs each.
    pub fn new(events: usize) -> Self {
        Timeline {
            threads: Vec::new(),
            times: Vec::new(),
            thread: Vec::new(),
            stack: Vec::new(),
            costs: Vec::new(),
            events,
            start: None,
        }
    }

    /// The number of samples.
    pub fn len(&self) -> usize {
        self.times.len()
    }

    /// Whether it holds no sample.
    pub fn is_empty(&self) -> bool {
        self.times.is_empty()
    }

    /// The costs of sample `i`.
    pub fn costs_of(&self, i: usize) -> &[C] {
        &self.costs[i * self.events..(i + 1) * self.events]
    }

    /// Appends a sample; [`Timeline::sort`] puts it in place.
    pub fn push(&mut self, time: u64, thread: u32, stack: u32, costs: &[C]) {
        self.times.push(time);
        self.thread.push(thread);
        self.stack.push(stack);
        // Costs past `events` are dropped and missing ones are zero, so
        // that the columns stay aligned.
        let row = &costs[..self.events.min(costs.len())];
        self.costs.extend_from_slice(row);
        self.costs
            .extend(std::iter::repeat_n(C::ZERO, self.events - row.len()));
    }

    /// The time that time ranges count from ([`Timeline::start`]).
    pub fn origin(&self) -> u64 {
        self.start
            .or_else(|| self.times.first().copied())
            .unwrap_or(0)
    }

    /// The first and last times, `None` when empty.
    pub fn span(&self) -> Option<(u64, u64)> {
        Some((*self.times.first()?, *self.times.last()?))
    }

    /// Puts the samples in time order (samples of one time keep their
    /// order).
    pub fn sort(&mut self) {
        if self.times.is_sorted() {
            return;
        }
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_by_key(|&i| self.times[i as usize]);
        self.keep(order.into_iter().map(|i| (i as usize, None)));
    }

    /// The samples `picked` yields (an index and, where it changes, the
    /// sample's new stack), in that order; the others are dropped.
    pub fn keep(&mut self, picked: impl Iterator<Item = (usize, Option<u32>)>) {
        let mut out = Timeline::new(self.events);
        for (i, stack) in picked {
            out.times.push(self.times[i]);
            out.thread.push(self.thread[i]);
            out.stack.push(stack.unwrap_or(self.stack[i]));
            out.costs.extend_from_slice(self.costs_of(i));
        }
        out.threads = std::mem::take(&mut self.threads);
        out.start = self.start;
        *self = out;
    }
}

/// The stacks of a profile: distinct frames and distinct stacks.
///
/// A stack is distinct by its frames and its labels: samples of one stack
/// under two label sets (two Go `pprof.Do` workers) stay apart, as pprof
/// keeps them, so that the labels can be written back.
///
/// The [`Timeline`], where there is one, is beside the stacks: equality
/// and the derived part look at the stacks only.
#[derive(Clone, Debug)]
pub struct Stacks<C = u64> {
    /// Distinct frames.
    pub frames: Vec<Frame>,
    /// Distinct stacks, in first-seen order.
    pub samples: Vec<Sample<C>>,
    /// Every sample in time order, when the samples were timed (boxed:
    /// most stacks have none).
    pub timeline: Option<Box<Timeline<C>>>,
    frame_index: FxHashMap<Frame, FrameId>,
    /// Stacks without labels, by their frames: indexes into `samples`,
    /// hashed by the frames kept there, so that a stack's frames are held
    /// once.
    stack_index: HashTable<usize>,
    /// Stacks under labels, by frames and label set (apart, so that a
    /// stack without any is found by its frames alone).
    labelled_index: HashTable<usize>,
    /// Label sets, sorted, distinct; the first is the empty set.
    label_sets: Vec<Vec<Label>>,
    label_index: FxHashMap<Vec<Label>, LabelSetId>,
    /// The label set of each sample, where it has one (by index in
    /// `samples`; samples past its end have none).
    sample_labels: Vec<LabelSetId>,
}

impl<C> Default for Stacks<C> {
    fn default() -> Self {
        Stacks {
            frames: Vec::new(),
            samples: Vec::new(),
            timeline: None,
            frame_index: FxHashMap::default(),
            stack_index: HashTable::new(),
            labelled_index: HashTable::new(),
            label_sets: vec![Vec::new()],
            label_index: FxHashMap::default(),
            sample_labels: Vec::new(),
        }
    }
}

// The indexes are derived from the vectors; comparing those is enough.
impl<C: PartialEq> PartialEq for Stacks<C> {
    fn eq(&self, other: &Self) -> bool {
        self.frames == other.frames
            && self.samples == other.samples
            && (0..self.samples.len()).all(|i| self.labels_of(i) == other.labels_of(i))
    }
}
impl<C: Eq> Eq for Stacks<C> {}

impl<C> Stacks<C> {
    /// The labels of a set, sorted.
    pub fn labels(&self, id: LabelSetId) -> &[Label] {
        self.label_sets
            .get(id.0 as usize)
            .map_or(&[], Vec::as_slice)
    }

    /// The label set of sample `i` (of [`Stacks::samples`]).
    pub fn sample_label_set(&self, i: usize) -> LabelSetId {
        self.sample_labels.get(i).copied().unwrap_or_default()
    }

    /// The labels of sample `i` (of [`Stacks::samples`]), sorted.
    pub fn labels_of(&self, i: usize) -> &[Label] {
        self.labels(self.sample_label_set(i))
    }

    /// Whether any sample has labels.
    pub fn has_labels(&self) -> bool {
        self.sample_labels.iter().any(|&l| l != LabelSetId::NONE)
    }
}

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
        self.add_labelled(frames, LabelSetId::NONE, costs)
    }

    /// The id of a set of labels (in any order), added if new.
    pub fn label_set(&mut self, mut labels: Vec<Label>) -> LabelSetId {
        labels.sort();
        labels.dedup();
        if labels.is_empty() {
            return LabelSetId::NONE;
        }
        if let Some(&id) = self.label_index.get(&labels) {
            return id;
        }
        let id = LabelSetId(self.label_sets.len() as u32);
        self.label_sets.push(labels.clone());
        self.label_index.insert(labels, id);
        id
    }

    /// [`Stacks::add`] for the stack `frames` under the labels `labels`
    /// (from [`Stacks::label_set`]): a stack apart from the same frames
    /// under other labels.
    pub fn add_labelled(
        &mut self,
        frames: &[FrameId],
        labels: LabelSetId,
        costs: &[C],
    ) -> Option<()> {
        self.add_labelled_at(frames, labels, costs).map(drop)
    }

    /// [`Stacks::add`] of one sample taken at `time` on `thread` (an index
    /// into the timeline's threads): its stack gets its costs and the
    /// timeline (started with `costs.len()` events if there is none) the
    /// sample.
    pub fn add_timed(
        &mut self,
        frames: &[FrameId],
        costs: &[C],
        time: u64,
        thread: u32,
    ) -> Option<()> {
        let i = self.add_labelled_at(frames, LabelSetId::NONE, costs)?;
        self.timeline
            .get_or_insert_with(|| Box::new(Timeline::new(costs.len())))
            .push(time, thread, u32::try_from(i).ok()?, costs);
        Some(())
    }

    /// [`Stacks::add_labelled`], giving the index of the stack in
    /// [`Stacks::samples`].
    pub fn add_labelled_at(
        &mut self,
        frames: &[FrameId],
        labels: LabelSetId,
        costs: &[C],
    ) -> Option<usize> {
        let hash = if labels == LabelSetId::NONE {
            FxBuildHasher.hash_one(frames)
        } else {
            FxBuildHasher.hash_one((frames, labels))
        };
        let found = if labels == LabelSetId::NONE {
            self.stack_index
                .find(hash, |&i| self.samples[i].frames == frames)
        } else {
            self.labelled_index.find(hash, |&i| {
                self.samples[i].frames == frames && self.sample_label_set(i) == labels
            })
        }
        .copied();
        if let Some(i) = found {
            let s = &mut self.samples[i];
            // Checked first, so that an overflow leaves the stack as it was.
            if s.costs
                .iter()
                .zip(costs)
                .any(|(a, b)| a.checked_add(*b).is_none())
            {
                return None;
            }
            for (a, b) in s.costs.iter_mut().zip(costs) {
                *a = a.checked_add(*b)?;
            }
            s.costs.truncate(costs.len());
            Some(i)
        } else {
            let i = self.samples.len();
            if labels != LabelSetId::NONE {
                self.sample_labels.resize(i, LabelSetId::NONE);
                self.sample_labels.push(labels);
            }
            self.samples.push(Sample {
                frames: frames.to_vec(),
                costs: costs.to_vec(),
            });
            let (samples, sample_labels) = (&self.samples, &self.sample_labels);
            if labels == LabelSetId::NONE {
                self.stack_index.insert_unique(hash, i, |&j| {
                    FxBuildHasher.hash_one(samples[j].frames.as_slice())
                });
            } else {
                self.labelled_index.insert_unique(hash, i, |&j| {
                    let l = sample_labels.get(j).copied().unwrap_or_default();
                    FxBuildHasher.hash_one((samples[j].frames.as_slice(), l))
                });
            }
            Some(i)
        }
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

impl<C: Cost> Stacks<C> {
    /// Derives a part's records from the stacks, so that every report,
    /// writer and analysis that reads parts sees the profile:
    ///
    /// - the self cost of each stack goes to its leaf frame: one cost line
    ///   per distinct leaf frame, in the function's own file, at the frame's
    ///   address and line as `positions` allows (a basic block is 0);
    /// - one call per distinct (caller frame, callee function) pair that
    ///   appears in a stack: its inclusive cost is the sum of the costs of
    ///   the stacks that contain the pair, a stack containing it twice (a
    ///   recursion) counted once, so no arc exceeds the total; its count is
    ///   the number of distinct stacks containing it. Sampled stacks carry
    ///   no call counts; pprof writes `calls=0`, which leaves the counts
    ///   meaningless to every reader, while a stack count is nonzero
    ///   wherever the arc has cost, as callgrind_annotate and KCachegrind
    ///   expect of a call. The call's target is the lowest address and line
    ///   sampled in the callee, the nearest known to its entry.
    ///
    /// Records are appended to `part` in order of function id, each
    /// function's lines before its calls. `None` if a sum overflows, or
    /// the self and call costs of all records together do.
    pub fn derive_part(
        &self,
        names: &Names,
        positions: Positions,
        part: &mut Part<C>,
    ) -> Option<()> {
        let events = part.lines.events();
        let zero = || vec![C::ZERO; events];
        let add = |acc: &mut Vec<C>, costs: &[C]| -> Option<()> {
            for (a, &b) in acc.iter_mut().zip(costs) {
                *a = a.checked_add(b)?;
            }
            Some(())
        };
        // Self cost by leaf frame.
        let mut leaf: FxHashMap<FrameId, Vec<C>> = FxHashMap::default();
        for s in &self.samples {
            if let Some(&f) = s.frames.last() {
                add(leaf.entry(f).or_insert_with(zero), &s.costs)?;
            }
        }
        // Arcs by (caller frame, callee function), each once per stack.
        let mut arcs: FxHashMap<(FrameId, FunctionId), (u64, Vec<C>)> = FxHashMap::default();
        let mut seen: FxHashSet<(FrameId, FunctionId)> = FxHashSet::default();
        for s in &self.samples {
            seen.clear();
            for w in s.frames.windows(2) {
                let key = (w[0], self.frames[w[1].index()].function);
                if !seen.insert(key) {
                    continue;
                }
                let e = arcs.entry(key).or_insert_with(|| (0, zero()));
                e.0 += 1;
                add(&mut e.1, &s.costs)?;
            }
        }
        // The lowest address and line sampled in each function.
        let mut entry: FxHashMap<FunctionId, (u64, u32)> = FxHashMap::default();
        for f in &self.frames {
            let e = entry.entry(f.function).or_insert((u64::MAX, u32::MAX));
            if f.address != 0 {
                e.0 = e.0.min(f.address);
            }
            if f.line != 0 {
                e.1 = e.1.min(f.line);
            }
        }
        let position = |address: u64, line: u32| -> Vec<u64> {
            let mut p = vec![0u64; positions.len()];
            if let Some(i) = positions.instr() {
                p[i] = if address == u64::MAX { 0 } else { address };
            }
            if let Some(i) = positions.line() {
                p[i] = if line == u32::MAX { 0 } else { u64::from(line) };
            }
            p
        };
        let frame_order = |a: &FrameId, b: &FrameId| {
            let (x, y) = (&self.frames[a.index()], &self.frames[b.index()]);
            (x.function, x.address, x.line).cmp(&(y.function, y.address, y.line))
        };
        let mut leaves: Vec<(FrameId, Vec<C>)> = leaf.into_iter().collect();
        leaves.sort_by(|a, b| frame_order(&a.0, &b.0));
        let mut calls: Vec<_> = arcs.into_iter().collect();
        calls.sort_by(|a, b| frame_order(&a.0.0, &b.0.0).then(a.0.1.cmp(&b.0.1)));
        // The magnitudes of every self and call cost must add up within
        // the cost type: a Callgrind reader keeps that sum (so that every
        // later analysis fits) and refuses a file past it, so records that
        // could not be read back are refused here.
        let mut magnitudes = vec![0u64; events];
        let bound = |m: &mut Vec<u64>, costs: &[C]| -> Option<()> {
            for (a, b) in m.iter_mut().zip(costs) {
                *a = a
                    .checked_add(b.magnitude())
                    .filter(|&v| v <= C::MAX_MAGNITUDE)?;
            }
            Some(())
        };
        let (mut li, mut ci) = (0, 0);
        while li < leaves.len() || ci < calls.len() {
            let function = match (leaves.get(li), calls.get(ci)) {
                (Some(l), Some(c)) => self.frames[l.0.index()]
                    .function
                    .min(self.frames[c.0.0.index()].function),
                (Some(l), None) => self.frames[l.0.index()].function,
                (None, Some(c)) => self.frames[c.0.0.index()].function,
                (None, None) => break,
            };
            let file = names.key(function).file;
            while let Some((f, costs)) = leaves.get(li) {
                let fr = self.frames[f.index()];
                if fr.function != function {
                    break;
                }
                bound(&mut magnitudes, costs)?;
                part.lines
                    .push(function, file, &position(fr.address, fr.line), costs);
                li += 1;
            }
            while let Some(((f, callee), (count, costs))) = calls.get(ci) {
                let fr = self.frames[f.index()];
                if fr.function != function {
                    break;
                }
                bound(&mut magnitudes, costs)?;
                let (ea, el) = entry.get(callee).copied().unwrap_or((u64::MAX, u32::MAX));
                let info = CallInfo {
                    caller: function,
                    site_file: file,
                    callee: *callee,
                    count: C::from_u64(*count)?,
                    seq: part.next_seq(),
                };
                part.calls.push(
                    info,
                    &position(fr.address, fr.line),
                    &position(ea, el),
                    costs,
                );
                ci += 1;
            }
        }
        Some(())
    }

    /// Inclusive ("cumulative") cost of every function, `functions * events`
    /// values by function id: the sum of the costs of the stacks that
    /// contain the function at least once, so a recursion counts once.
    /// `None` if a sum overflows (only signed costs can).
    pub fn cumulative(&self, functions: usize, events: usize) -> Option<Vec<C>> {
        let mut out = vec![C::ZERO; functions * events];
        let mut seen: FxHashSet<FunctionId> = FxHashSet::default();
        for s in &self.samples {
            seen.clear();
            for f in &s.frames {
                let function = self.frames[f.index()].function;
                if function.index() >= functions || !seen.insert(function) {
                    continue;
                }
                let row = &mut out[function.index() * events..(function.index() + 1) * events];
                for (a, &b) in row.iter_mut().zip(&s.costs) {
                    *a = a.checked_add(b)?;
                }
            }
        }
        Some(out)
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

    #[test]
    fn timed_samples_keep_their_order_thread_and_costs() {
        let mut s = Stacks::<u64>::default();
        let f = |n| Frame {
            function: FunctionId(n),
            line: 0,
            address: 0,
        };
        let (a, b) = (s.frame(f(1)), s.frame(f(2)));
        s.add_timed(&[a, b], &[3, 1], 200, 1).unwrap();
        s.add_timed(&[a], &[1, 0], 100, 0).unwrap();
        s.add_timed(&[a, b], &[2, 2], 150, 0).unwrap();
        assert_eq!(s.samples.len(), 2);
        assert_eq!(s.samples[0].costs, [5, 3]);
        let mut t = *s.timeline.clone().unwrap();
        assert_eq!(t.times, [200, 100, 150]);
        t.sort();
        assert_eq!(t.times, [100, 150, 200]);
        assert_eq!(t.stack, [1, 0, 0]);
        assert_eq!(t.thread, [0, 0, 1]);
        assert_eq!(t.costs_of(1), [2, 2]);
        assert_eq!(t.span(), Some((100, 200)));
        t.keep([(2, Some(7)), (0, None)].into_iter());
        assert_eq!(
            (t.times, t.stack, t.costs),
            (vec![200, 100], vec![7, 1], vec![3, 1, 1, 0])
        );
        // The timeline is no part of equality.
        let mut plain = s.clone();
        plain.timeline = None;
        assert_eq!(plain, s);
    }

    #[test]
    fn a_stack_under_two_label_sets_is_two_samples() {
        let mut s = Stacks::<u64>::default();
        let a = s.frame(Frame {
            function: FunctionId(1),
            line: 0,
            address: 0,
        });
        let label = |k: &[u8], v: &[u8]| Label {
            key: k.to_vec(),
            value: LabelValue::Text(v.to_vec()),
        };
        let small = s.label_set(vec![label(b"worker", b"small"), label(b"t", b"1")]);
        let again = s.label_set(vec![label(b"t", b"1"), label(b"worker", b"small")]);
        assert_eq!(small, again, "a set is the same in any order");
        let large = s.label_set(vec![label(b"worker", b"large")]);
        s.add_labelled(&[a], small, &[2]).unwrap();
        s.add_labelled(&[a], large, &[3]).unwrap();
        s.add(&[a], &[1]).unwrap();
        s.add_labelled(&[a], small, &[4]).unwrap();
        assert_eq!(s.samples.len(), 3);
        assert_eq!(s.samples[0].costs, [6]);
        assert_eq!(s.labels_of(0), s.labels(small));
        assert_eq!(s.labels_of(1)[0], label(b"worker", b"large"));
        assert!(s.labels_of(2).is_empty());
        assert!(s.has_labels());
    }

    #[test]
    fn stacks_are_found_again_as_the_index_grows_and_overflow_changes_nothing() {
        let mut s = Stacks::<u64>::default();
        let f: Vec<FrameId> = (0..50)
            .map(|i| {
                s.frame(Frame {
                    function: FunctionId(i),
                    line: 0,
                    address: 0,
                })
            })
            .collect();
        let label = s.label_set(vec![Label {
            key: b"k".to_vec(),
            value: LabelValue::Number(1, Vec::new()),
        }]);
        // 2,500 two-frame stacks, each unlabelled and labelled, added
        // twice: the second round finds every one.
        for round in 0..2u64 {
            for (i, &a) in f.iter().enumerate() {
                for &b in &f {
                    let at = s.add_labelled_at(&[a, b], LabelSetId::NONE, &[1]).unwrap();
                    let lat = s.add_labelled_at(&[a, b], label, &[10]).unwrap();
                    if round == 1 {
                        assert_eq!(s.samples[at].frames, [a, b]);
                        assert_eq!(s.samples[at].costs, [2]);
                        assert_eq!(s.samples[lat].costs, [20]);
                        assert_eq!(s.labels_of(lat), s.labels(label));
                        assert!(s.labels_of(at).is_empty(), "{i}");
                    }
                }
            }
        }
        assert_eq!(s.samples.len(), 2 * 50 * 50);
        let two = [f[0], f[1]];
        s.add(&[f[2]], &[u64::MAX - 1, 5]).unwrap();
        let last = s.samples.len() - 1;
        assert!(s.add(&[f[2]], &[1, 0]).is_some());
        assert!(s.add(&[f[2]], &[1, 0]).is_none(), "u64::MAX + 1");
        assert_eq!(s.samples[last].costs, [u64::MAX, 5]);
        // The labelled [f0, f1] is the fourth stack added.
        assert_eq!(s.samples[3].frames, two);
        assert!(s.add_labelled(&two, label, &[u64::MAX]).is_none());
        assert_eq!(s.samples[3].costs, [20]);
    }

    #[test]
    fn records_derived_from_stacks_count_a_recursion_once() {
        use crate::{FunctionKey, Part, Positions};
        let mut names = Names::default();
        let file = names.file(b"a.c");
        let object = names.object(b"a.out");
        let mut func = |n: &[u8]| {
            let name = names.symbol(n);
            names.function(FunctionKey { object, file, name })
        };
        let (main, f, g) = (func(b"main"), func(b"f"), func(b"g"));
        let mut s = Stacks::<u64>::default();
        let fr = |s: &mut Stacks<u64>, function, line| {
            s.frame(Frame {
                function,
                line,
                address: 0,
            })
        };
        let (m1, f5, f6, g9) = (
            fr(&mut s, main, 1),
            fr(&mut s, f, 5),
            fr(&mut s, f, 6),
            fr(&mut s, g, 9),
        );
        s.add(&[m1, f5, g9], &[3]).unwrap();
        // f recursing through the same frame: the arc f5 -> f counts once.
        s.add(&[m1, f5, f5, f6, g9], &[2]).unwrap();
        s.add(&[m1], &[1]).unwrap();
        let mut part = Part::new(Positions::LINE, 1);
        s.derive_part(&names, Positions::LINE, &mut part).unwrap();
        let mut lines = Vec::new();
        part.lines
            .for_each(|l| lines.push((l.function, l.positions[0], l.costs[0])));
        assert_eq!(lines, [(main, 1, 1), (g, 9, 5)]);
        let calls: Vec<_> = part
            .calls
            .iter()
            .map(|c| {
                (
                    c.info.caller,
                    c.site[0],
                    c.info.callee,
                    c.target[0],
                    c.info.count,
                    c.inclusive[0],
                )
            })
            .collect();
        assert_eq!(
            calls,
            [
                (main, 1, f, 5, 2, 5),
                (f, 5, f, 5, 1, 2),
                (f, 5, g, 9, 1, 3),
                (f, 6, g, 9, 1, 2),
            ]
        );
        assert_eq!(part.lines.totals().unwrap(), s.totals(1).unwrap());
        let cum = s.cumulative(names.function_count(), 1).unwrap();
        assert_eq!(
            (cum[main.index()], cum[f.index()], cum[g.index()]),
            (6, 5, 5)
        );
    }
}
