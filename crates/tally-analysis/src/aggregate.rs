//! Self costs and call arcs summed over the chosen parts of a profile.
//!
//! Two groupings of self cost are kept because inlining splits a function
//! over several source files: per (function, source file), which is what
//! callgrind_annotate shows as `file:function`, and per function, which is
//! the function's whole cost whatever file its lines came from.

use rustc_hash::FxHashMap;
use tally_model::{
    CallInfo, Cost, FileId, FunctionId, JumpInfo, Jumps, Positions, Profile, Renumbering, Sink,
};

/// A flat table of cost vectors, all of one length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CostTable<C> {
    width: usize,
    data: Vec<C>,
}

impl<C: Cost> CostTable<C> {
    /// An empty table of vectors of `width` events.
    pub fn new(width: usize) -> Self {
        CostTable {
            width,
            data: Vec::new(),
        }
    }

    /// A table of `rows` zero vectors.
    pub fn zeroed(width: usize, rows: usize) -> Self {
        CostTable {
            width,
            data: vec![C::ZERO; width * rows],
        }
    }

    /// Number of events per vector.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }

    /// True when there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Appends a zero vector and returns its index.
    pub fn push_zero(&mut self) -> usize {
        let i = self.len();
        self.data.resize(self.data.len() + self.width, C::ZERO);
        i
    }

    /// Vector `i`.
    #[inline]
    pub fn get(&self, i: usize) -> &[C] {
        &self.data[i * self.width..(i + 1) * self.width]
    }

    /// Vector `i`, mutably.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> &mut [C] {
        &mut self.data[i * self.width..(i + 1) * self.width]
    }

    /// Adds `costs` to vector `i`, saturating.
    #[inline]
    pub fn add(&mut self, i: usize, costs: &[C]) {
        add_into(self.get_mut(i), costs);
    }
}

/// `acc += costs`, saturating: sums shown in a report must not fail.
#[inline]
pub fn add_into<C: Cost>(acc: &mut [C], costs: &[C]) {
    for (a, &c) in acc.iter_mut().zip(costs) {
        *a = a.saturating_add(c);
    }
}

/// A `file:function` row: a function's lines from one source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RowKey {
    /// The function.
    pub function: FunctionId,
    /// The source file the lines came from (`fl=`, or `fi=`/`fe=`).
    pub file: FileId,
}

/// Row indices by key. Most functions have lines in one source file only,
/// so the row of each function's first file is found in a flat array by
/// function id; only the rows of its other files (inlined code) are
/// hashed.
#[derive(Clone, Debug, Default)]
struct RowIndex {
    /// Per function id: its first row's file and index (`u32::MAX`: none).
    first: Vec<(FileId, u32)>,
    /// The other rows.
    others: FxHashMap<RowKey, u32>,
}

impl RowIndex {
    #[inline]
    fn get(&self, key: RowKey) -> Option<u32> {
        match self.first.get(key.function.index()) {
            Some(&(file, r)) if r != u32::MAX => {
                if file == key.file {
                    Some(r)
                } else {
                    self.others.get(&key).copied()
                }
            }
            _ => None,
        }
    }

    /// Adds a key that has no row yet.
    fn insert(&mut self, key: RowKey, r: u32) {
        let i = key.function.index();
        if i >= self.first.len() {
            self.first.resize(i + 1, (FileId::NONE, u32::MAX));
        }
        if self.first[i].1 == u32::MAX {
            self.first[i] = (key.file, r);
        } else {
            self.others.insert(key, r);
        }
    }
}

/// A call arc summed over parts, keyed by caller, call-site file and callee.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arc<C> {
    /// The calling function.
    pub caller: FunctionId,
    /// Source file of the call sites (the caller's row).
    pub site_file: FileId,
    /// The called function.
    pub callee: FunctionId,
    /// Number of calls.
    pub count: C,
    /// Inclusive cost of the calls.
    pub inclusive: ArcCosts<C>,
}

/// The cost vector of an arc, read as a slice: held inline for profiles of
/// up to two events (Callgrind's default records one), on the heap for
/// more. A large profile has hundreds of thousands of arcs, and an
/// allocation each, made on the reader's busiest thread and freed at the
/// end, is a visible part of reading it.
pub type ArcCosts<C> = smallvec::SmallVec<[C; 2]>;

/// Self costs and arcs of the chosen parts.
#[derive(Clone, Debug)]
pub struct Aggregate<C> {
    /// Number of recorded events.
    pub events: usize,
    /// Sum of all self costs.
    pub totals: Vec<C>,
    /// The `file:function` rows, in order of first appearance.
    pub rows: Vec<RowKey>,
    /// Self cost of every row.
    pub row_self: CostTable<C>,
    /// Self cost of every function, indexed by `FunctionId`.
    pub function_self: CostTable<C>,
    /// Whether the function has any line, call or jump in the chosen parts.
    pub function_present: Vec<bool>,
    /// Call arcs.
    pub arcs: Vec<Arc<C>>,
    row_index: RowIndex,
}

impl<C: Cost> Aggregate<C> {
    /// Sums the parts for which `chosen(index)` is true.
    pub fn new(profile: &Profile<C>, chosen: impl Fn(usize) -> bool) -> Self {
        let events = profile.events.len();
        let mut b = AggregateBuilder::new(events);
        let mut sum = vec![C::ZERO; events];
        for (pi, part) in profile.parts.iter().enumerate() {
            b.start_part();
            if !chosen(pi) {
                continue;
            }
            for (bi, block) in part.lines.blocks().iter().enumerate() {
                sum.iter_mut().for_each(|c| *c = C::ZERO);
                part.lines
                    .for_each_in_block(bi, |l| add_into(&mut sum, l.costs));
                b.line(block.function, block.file, &sum);
            }
            for call in part.calls.iter() {
                b.call(&call.info, call.inclusive);
            }
            for j in part.jumps.iter() {
                b.jump(j.info.function);
            }
        }
        b.finish(profile.names.function_count(), chosen)
    }

    /// Index of a row, if the chosen parts have it.
    pub fn row_of(&self, key: RowKey) -> Option<usize> {
        self.row_index.get(key).map(|r| r as usize)
    }
}

/// Sums of one part, built while the part is read.
struct PartSums<C> {
    rows: RowIndex,
    keys: Vec<RowKey>,
    sums: CostTable<C>,
    arcs: FxHashMap<(FunctionId, FileId, FunctionId), u32>,
    arc_list: Vec<Arc<C>>,
    /// Functions with a jump, indexed by id: a flag each rather than an
    /// entry per jump, so that memory does not grow with the jumps.
    present: Vec<bool>,
    last: Option<(RowKey, u32)>,
    /// Calls not yet summed into `arcs` (see [`AggregateBuilder::call`]).
    pending: Vec<PendingCall<C>>,
}

/// A call arc's record, waiting to be summed with its batch.
struct PendingCall<C> {
    key: (FunctionId, FileId, FunctionId),
    count: C,
    inclusive: ArcCosts<C>,
}

/// Calls summed at a time.
const CALL_BATCH: usize = 32;

impl<C: Cost> PartSums<C> {
    /// Sums the pending calls into the arcs, in order. Their arcs are
    /// looked up first, all of them, then summed: the lookups do not wait
    /// for each other, so their cache misses overlap (a large profile's
    /// arc table is far larger than the cache, and most probes miss).
    fn sum_pending(&mut self, events: usize) {
        let mut found = [None; CALL_BATCH];
        for (f, c) in found.iter_mut().zip(&self.pending) {
            *f = self.arcs.get(&c.key).copied();
        }
        let mut found = found.into_iter();
        for c in self.pending.drain(..) {
            // Not found by the batch's lookups: a new arc, or one that an
            // earlier call of this batch made; looked up again.
            let idx = match found.next().flatten() {
                Some(i) => i as usize,
                None => match self.arcs.entry(c.key) {
                    std::collections::hash_map::Entry::Occupied(o) => *o.get() as usize,
                    std::collections::hash_map::Entry::Vacant(v) => {
                        let i = self.arc_list.len();
                        v.insert(i as u32);
                        let (caller, site_file, callee) = c.key;
                        self.arc_list.push(Arc {
                            caller,
                            site_file,
                            callee,
                            count: C::ZERO,
                            inclusive: ArcCosts::from_elem(C::ZERO, events),
                        });
                        i
                    }
                },
            };
            let arc = &mut self.arc_list[idx];
            arc.count = arc.count.saturating_add(c.count);
            add_into(&mut arc.inclusive, &c.inclusive);
        }
    }
}

/// Builds an [`Aggregate`] record by record, so that a profile can be
/// summed while it is read, without keeping its lines: a report that shows
/// no source or assembly needs nothing else.
///
/// It is a reader's [`Sink`]: given to the reader, it sums as the records
/// come (the number of events is taken from the reader), and keeps the
/// jumps too when asked ([`AggregateBuilder::keeping_jumps`]), for a jump
/// listing.
pub struct AggregateBuilder<C> {
    events: usize,
    parts: Vec<PartSums<C>>,
    jumps: Option<Vec<Jumps<C>>>,
}

impl<C: Cost> AggregateBuilder<C> {
    /// A builder for `events` recorded events.
    pub fn new(events: usize) -> Self {
        AggregateBuilder {
            events,
            parts: Vec::new(),
            jumps: None,
        }
    }

    /// A builder for a reader to fill, keeping each part's jumps when
    /// `keep_jumps` (see [`AggregateBuilder::take_jumps`]).
    pub fn keeping_jumps(keep_jumps: bool) -> Self {
        AggregateBuilder {
            events: 0,
            parts: Vec::new(),
            jumps: keep_jumps.then(Vec::new),
        }
    }

    /// Sets the number of events if no part has begun (a profile whose
    /// header the reader gave no part for).
    pub fn set_events(&mut self, events: usize) {
        if self.parts.is_empty() {
            self.events = events;
        }
    }

    /// The jumps of each part, in order, if they were kept.
    pub fn take_jumps(&mut self) -> Vec<Jumps<C>> {
        self.jumps.take().unwrap_or_default()
    }

    /// The next part begins.
    pub fn start_part(&mut self) {
        self.parts.push(PartSums {
            rows: RowIndex::default(),
            keys: Vec::new(),
            sums: CostTable::new(self.events),
            arcs: FxHashMap::default(),
            arc_list: Vec::new(),
            present: Vec::new(),
            last: None,
            pending: Vec::with_capacity(CALL_BATCH),
        });
    }

    fn part(&mut self) -> &mut PartSums<C> {
        if self.parts.is_empty() {
            self.start_part();
        }
        self.parts.last_mut().expect("a part")
    }

    fn row(p: &mut PartSums<C>, key: RowKey) -> usize {
        if let Some((k, r)) = p.last
            && k == key
        {
            return r as usize;
        }
        let r = match p.rows.get(key) {
            Some(r) => r,
            None => {
                let r = p.keys.len() as u32;
                p.keys.push(key);
                p.sums.push_zero();
                p.rows.insert(key, r);
                r
            }
        };
        p.last = Some((key, r));
        r as usize
    }

    /// Self cost of a line (or of a run of lines) of `function` in `file`.
    ///
    /// Called for every line of a profile on the reader's parser thread:
    /// lines come in runs of one function and file, so the row of the
    /// previous line is checked here, inlined into the reader's loop, and
    /// only a change of row goes to the index.
    #[inline(always)]
    pub fn line(&mut self, function: FunctionId, file: FileId, costs: &[C]) {
        let key = RowKey { function, file };
        if let Some(p) = self.parts.last_mut()
            && let Some((k, r)) = p.last
            && k == key
        {
            p.sums.add(r as usize, costs);
            return;
        }
        self.line_in_new_row(key, costs);
    }

    /// [`AggregateBuilder::line`] when the row changes.
    #[inline(never)]
    fn line_in_new_row(&mut self, key: RowKey, costs: &[C]) {
        let p = self.part();
        let r = Self::row(p, key);
        p.sums.add(r, costs);
    }

    /// A call arc. Calls are summed into their arcs in batches (see
    /// `PartSums::sum_pending`), in order, so the arcs are those, in the
    /// order, that summing each at once gives.
    pub fn call(&mut self, info: &CallInfo<C>, inclusive: &[C]) {
        let events = self.events;
        let p = self.part();
        p.pending.push(PendingCall {
            key: (info.caller, info.site_file, info.callee),
            count: info.count,
            inclusive: ArcCosts::from_slice(inclusive),
        });
        if p.pending.len() == CALL_BATCH {
            p.sum_pending(events);
        }
        // A caller's site row exists even without self cost there.
        Self::row(
            p,
            RowKey {
                function: info.caller,
                file: info.site_file,
            },
        );
    }

    /// A jump in `function` (it makes the function present).
    pub fn jump(&mut self, function: FunctionId) {
        let present = &mut self.part().present;
        let i = function.index();
        if i >= present.len() {
            present.resize(i + 1, false);
        }
        present[i] = true;
    }

    /// The self-cost sum of each part, in order.
    pub fn part_totals(&self) -> Vec<Vec<C>> {
        self.parts
            .iter()
            .map(|p| {
                let mut t = vec![C::ZERO; self.events];
                for r in 0..p.keys.len() {
                    add_into(&mut t, p.sums.get(r));
                }
                t
            })
            .collect()
    }

    /// Sums the chosen parts; `functions` is the profile's function count.
    pub fn finish(mut self, functions: usize, chosen: impl Fn(usize) -> bool) -> Aggregate<C> {
        let events = self.events;
        for p in &mut self.parts {
            p.sum_pending(events);
        }
        let mut a = Aggregate {
            events,
            totals: vec![C::ZERO; events],
            rows: Vec::new(),
            row_self: CostTable::new(events),
            function_self: CostTable::zeroed(events, functions),
            function_present: vec![false; functions],
            arcs: Vec::new(),
            row_index: RowIndex::default(),
        };
        let mut arc_index: FxHashMap<(FunctionId, FileId, FunctionId), u32> = FxHashMap::default();
        let single = self
            .parts
            .iter()
            .enumerate()
            .filter(|(i, _)| chosen(*i))
            .count()
            == 1;
        for (pi, p) in self.parts.into_iter().enumerate() {
            if !chosen(pi) {
                continue;
            }
            if single {
                // The one part's rows are the aggregate's, in the same
                // order: taken as they are rather than indexed again.
                for (r, key) in p.keys.iter().enumerate() {
                    let costs = p.sums.get(r);
                    a.function_self.add(key.function.index(), costs);
                    a.function_present[key.function.index()] = true;
                    add_into(&mut a.totals, costs);
                }
                a.rows = p.keys;
                a.row_self = p.sums;
                a.row_index = p.rows;
            } else {
                for (r, key) in p.keys.iter().enumerate() {
                    let costs = p.sums.get(r);
                    let row = match a.row_index.get(*key) {
                        Some(x) => x as usize,
                        None => {
                            let x = a.rows.len();
                            a.rows.push(*key);
                            a.row_self.push_zero();
                            a.row_index.insert(*key, x as u32);
                            x
                        }
                    };
                    a.row_self.add(row, costs);
                    a.function_self.add(key.function.index(), costs);
                    a.function_present[key.function.index()] = true;
                    add_into(&mut a.totals, costs);
                }
            }
            for (f, &jumped) in p.present.iter().enumerate() {
                a.function_present[f] |= jumped;
            }
            if single {
                for arc in &p.arc_list {
                    a.function_present[arc.caller.index()] = true;
                    a.function_present[arc.callee.index()] = true;
                }
                a.arcs = p.arc_list;
                continue;
            }
            for arc in p.arc_list {
                a.function_present[arc.caller.index()] = true;
                a.function_present[arc.callee.index()] = true;
                let k = (arc.caller, arc.site_file, arc.callee);
                match arc_index.get(&k) {
                    Some(&i) => {
                        let x = &mut a.arcs[i as usize];
                        x.count = x.count.saturating_add(arc.count);
                        add_into(&mut x.inclusive, &arc.inclusive);
                    }
                    None => {
                        arc_index.insert(k, a.arcs.len() as u32);
                        a.arcs.push(arc);
                    }
                }
            }
        }
        a
    }
}

impl<C: Cost> Sink<C> for AggregateBuilder<C> {
    // A row's sum is all it keeps of its lines.
    const EACH_LINE: bool = false;
    fn start_part(&mut self, positions: Positions, events: usize) {
        // The number of events is known once the first header is read.
        self.set_events(events);
        AggregateBuilder::start_part(self);
        if let Some(j) = &mut self.jumps {
            j.push(Jumps::new(positions));
        }
    }
    #[inline(always)]
    fn line(&mut self, function: FunctionId, file: FileId, _: &[u64], costs: &[C]) {
        AggregateBuilder::line(self, function, file, costs);
    }
    fn call(&mut self, info: CallInfo<C>, _: &[u64], _: &[u64], inclusive: &[C]) {
        AggregateBuilder::call(self, &info, inclusive);
    }
    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        AggregateBuilder::jump(self, info.function);
        if let Some(j) = self.jumps.as_mut().and_then(|j| j.last_mut()) {
            j.push(info, source, target);
        }
    }
    fn split(&self) -> Option<Self> {
        // Jumps kept for a listing would be renumbered one by one; such a
        // read is not split.
        if self.jumps.is_some() {
            return None;
        }
        Some(AggregateBuilder::new(self.events))
    }
    fn absorb(&mut self, later: Self, ids: &Renumbering) {
        let mut parts = later.parts.into_iter();
        let Some(mut l) = parts.next() else {
            return;
        };
        debug_assert!(parts.next().is_none(), "a region lies in one part");
        let events = self.events;
        l.sum_pending(events);
        let p = self.part();
        p.sum_pending(events);
        let function = |f: FunctionId| ids.functions[f.index()];
        let file = |f: FileId| ids.files[f.index()];
        // Rows, then arcs, each in the order the region met them: new
        // ones come after this part's, as they would have come.
        for (r, key) in l.keys.iter().enumerate() {
            let key = RowKey {
                function: function(key.function),
                file: file(key.file),
            };
            let row = Self::row(p, key);
            p.sums.add(row, l.sums.get(r));
        }
        // The region's arcs are summed as its calls would have been, in
        // batches whose lookups overlap, into a table grown once.
        p.arcs.reserve(l.arc_list.len());
        p.arc_list.reserve(l.arc_list.len());
        for a in l.arc_list {
            p.pending.push(PendingCall {
                key: (function(a.caller), file(a.site_file), function(a.callee)),
                count: a.count,
                inclusive: a.inclusive,
            });
            if p.pending.len() == CALL_BATCH {
                p.sum_pending(events);
            }
        }
        p.sum_pending(events);
        for (f, _) in l.present.iter().enumerate().filter(|(_, k)| **k) {
            let i = function(FunctionId(f as u32)).index();
            if i >= p.present.len() {
                p.present.resize(i + 1, false);
            }
            p.present[i] = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A region taken back brings its rows, arcs and functions with jumps
    /// under the ids the renumbering gives them, after the part's own.
    #[test]
    fn a_region_is_renumbered_into_the_part() {
        let mut a = AggregateBuilder::<u64>::keeping_jumps(false);
        Sink::start_part(&mut a, Positions::LINE, 1);
        a.line(FunctionId(0), FileId(1), &[5]);
        let mut b = a.split().expect("splits");
        Sink::start_part(&mut b, Positions::LINE, 1);
        b.line(FunctionId(1), FileId(1), &[7]);
        b.line(FunctionId(0), FileId(0), &[2]);
        b.jump(FunctionId(2));
        let info = CallInfo {
            caller: FunctionId(1),
            site_file: FileId(1),
            callee: FunctionId(0),
            count: 3,
            seq: 0,
        };
        b.call(&info, &[4]);
        let ids = Renumbering {
            files: vec![FileId(0), FileId(2)],
            functions: vec![FunctionId(0), FunctionId(3), FunctionId(4)],
            seq: 1,
        };
        a.absorb(b, &ids);
        let agg = a.finish(5, |_| true);
        let rows: Vec<(u32, u32, u64)> = (0..agg.rows.len())
            .map(|r| {
                (
                    agg.rows[r].function.0,
                    agg.rows[r].file.0,
                    agg.row_self.get(r)[0],
                )
            })
            .collect();
        assert_eq!(rows, [(0, 1, 5), (3, 2, 7), (0, 0, 2)]);
        assert_eq!(agg.function_present, [true, false, false, true, true]);
        let arc = &agg.arcs[0];
        assert_eq!((arc.caller.0, arc.site_file.0, arc.callee.0), (3, 2, 0));
        assert_eq!((arc.count, arc.inclusive[0]), (3, 4));
    }

    /// An arc's caller, file and callee ids, count and two costs.
    type Summed = ((u32, u32, u32), u64, [u64; 2]);

    /// Calls summed in batches give the arcs, in the order and with the
    /// sums, that summing each call as it comes gives: across batches,
    /// with one arc several times in a batch, and over two parts.
    #[test]
    fn batched_calls_sum_as_each_call_would() {
        let mut b = AggregateBuilder::<u64>::new(2);
        let mut want: Vec<Summed> = Vec::new();
        let mut seed = 7u64;
        for part in 0..2 {
            b.start_part();
            for i in 0..(3 * CALL_BATCH as u64 + 5) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let (caller, file, callee) = ((seed >> 40) % 5, (seed >> 50) % 2, (seed >> 20) % 7);
                let key = (caller as u32, file as u32, callee as u32);
                let info = CallInfo {
                    caller: FunctionId(key.0),
                    site_file: FileId(key.1),
                    callee: FunctionId(key.2),
                    count: i + 1,
                    seq: i,
                };
                b.call(&info, &[i, 2 * i]);
                if part == 0 {
                    match want.iter_mut().find(|w| w.0 == key) {
                        Some(w) => {
                            w.1 += i + 1;
                            w.2[0] += i;
                            w.2[1] += 2 * i;
                        }
                        None => want.push((key, i + 1, [i, 2 * i])),
                    }
                }
            }
        }
        let agg = b.finish(7, |p| p == 0);
        let got: Vec<Summed> = (agg.arcs.iter())
            .map(|a| {
                let key = (a.caller.0, a.site_file.0, a.callee.0);
                (key, a.count, [a.inclusive[0], a.inclusive[1]])
            })
            .collect();
        assert_eq!(got, want);
    }
}
