//! One input of a merge or diff, folded as it is read: a [`Sink`] that
//! keeps each distinct record once, grouped as the [`Combiner`] groups
//! them, so that [`Combiner::add_folded`] takes it block by block without
//! a profile model in between (no coded cost lines written and decoded
//! again per input).
//!
//! Lines are kept per (function, file) block in `BlockLines`, calls per
//! (caller, call-site file) and jumps per (function, file) alike
//! (`BlockKeys`), which finds a record without hashing in the two common
//! cases: the next record of the block in the order met before (the second
//! run of one program lists its records in the first run's order), and a
//! record past the block's last one while the block's keys only grew (a
//! file lists a function's lines, call sites and jump sources in
//! increasing order). A block builds its hash index the first time
//! neither holds. No table is keyed by a whole call or jump (64 and 72
//! bytes), whose hashing was most of folding a profile with jumps.
//!
//! [`Combiner`]: crate::combine::Combiner
//! [`Combiner::add_folded`]: crate::combine::Combiner::add_folded

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};
use smallvec::SmallVec;
use std::hash::BuildHasher;
use tally_model::{CallInfo, Cost, FileId, FunctionId, JumpInfo, Positions, Sink};

/// Positions of a record, zero past the profile's kinds.
pub(crate) type Pos = [u64; 3];

/// `p` padded with zeros.
#[inline]
pub(crate) fn pos(p: &[u64]) -> Pos {
    let mut a = [0; 3];
    let n = p.len().min(3);
    a[..n].copy_from_slice(&p[..n]);
    a
}

/// The positions of a part's lines, each as many numbers as the profile's
/// positions (one for `line`, two for `instr line`) rather than a whole
/// [`Pos`]: a line-level file's lines then take a third of the room.
pub(crate) struct PosList {
    np: usize,
    flat: Vec<u64>,
    /// Lines held (not `flat.len() / np`: a division per line).
    len: usize,
}

impl PosList {
    /// Room for positions of `kinds` numbers (at most three are kept).
    pub(crate) fn new(kinds: usize) -> Self {
        PosList {
            np: kinds.clamp(1, 3),
            flat: Vec::new(),
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.flat.is_empty()
    }

    /// The position of line `i`, padded with zeros.
    #[inline]
    pub(crate) fn get(&self, i: usize) -> Pos {
        let f = &self.flat;
        match self.np {
            1 => [f[i], 0, 0],
            2 => [f[2 * i], f[2 * i + 1], 0],
            _ => [f[3 * i], f[3 * i + 1], f[3 * i + 2]],
        }
    }

    /// Adds a position; numbers past the list's kinds must be zero.
    #[inline]
    pub(crate) fn push(&mut self, p: Pos) {
        debug_assert!(p[self.np..].iter().all(|&v| v == 0));
        match self.np {
            1 => self.flat.push(p[0]),
            2 => self.flat.extend_from_slice(&[p[0], p[1]]),
            _ => self.flat.extend_from_slice(&p),
        }
        self.len += 1;
    }

    pub(crate) fn reserve(&mut self, lines: usize) {
        self.flat.reserve(lines * self.np);
    }

    /// The numbers of every line, `kinds()` per line.
    pub(crate) fn into_flat(self) -> Vec<u64> {
        self.flat
    }

    /// The number of kinds kept.
    pub(crate) fn kinds(&self) -> usize {
        self.np
    }

    /// Bytes held.
    pub(crate) fn held_bytes(&self) -> usize {
        self.flat.capacity() * 8
    }
}

/// The records of one kind of one block: indices into its owner's arrays
/// of that kind, in the order first met, found by key. See the module
/// documentation.
pub(crate) struct BlockKeys<K> {
    /// Inline up to four: a block of a per-function folding holds one
    /// record, and most blocks of a line-level one a few, so most need no
    /// allocation of their own.
    pub(crate) items: SmallVec<[u32; 4]>,
    /// Whether the keys of `items` strictly increase.
    sorted: bool,
    /// Places in `items` by the hash of their keys, built when first
    /// needed. The keys are not copied into it: four bytes a record
    /// rather than the key's 24 to 72 (most blocks of a Callgrind file
    /// list their instructions out of order and need one).
    index: Option<Box<HashTable<u32>>>,
    _key: std::marker::PhantomData<K>,
    /// The place in `items` expected next.
    cursor: usize,
}

/// The lines of one block.
pub(crate) type BlockLines = BlockKeys<Pos>;

/// The bytes of a block's index of `capacity` places.
fn index_size(capacity: usize) -> usize {
    capacity * (std::mem::size_of::<u32>() + 1)
}

impl<K: Copy + Ord + std::hash::Hash> BlockKeys<K> {
    pub(crate) fn new() -> Self {
        BlockKeys {
            items: SmallVec::new(),
            sorted: true,
            index: None,
            cursor: 0,
            _key: std::marker::PhantomData,
        }
    }

    /// A new run of the block begins: expect its first record.
    #[inline]
    pub(crate) fn rewind(&mut self) {
        self.cursor = 0;
    }

    /// The item whose key (`key_of`) is `key`, and false; or, when there
    /// is none, `next` added to the block with that key, and true. What
    /// the block's hash index grows by is added to `index_bytes`, so that
    /// the owner's [`Sink::held_bytes`] need not visit every block.
    #[inline]
    pub(crate) fn find_or_insert(
        &mut self,
        key: K,
        key_of: impl Fn(u32) -> K,
        next: u32,
        index_bytes: &mut usize,
    ) -> (u32, bool) {
        if let Some(&i) = self.items.get(self.cursor)
            && key_of(i) == key
        {
            self.cursor += 1;
            return (i, false);
        }
        // The record met last, again: every line of a function when a
        // diff keeps one per function.
        if let Some(&i) = self.cursor.checked_sub(1).and_then(|c| self.items.get(c))
            && key_of(i) == key
        {
            return (i, false);
        }
        let past_last = self.items.last().is_none_or(|&l| key_of(l) < key);
        // Sorted blocks (most, in line-level files) never hash.
        let h = || FxBuildHasher.hash_one(key);
        if !(self.sorted && past_last) {
            let items = &self.items;
            let hash_at = |&at: &u32| FxBuildHasher.hash_one(key_of(items[at as usize]));
            let index = self.index.get_or_insert_with(|| {
                let mut index = HashTable::with_capacity(items.len());
                for at in 0..items.len() as u32 {
                    index.insert_unique(hash_at(&at), at, hash_at);
                }
                *index_bytes += index_size(index.capacity());
                Box::new(index)
            });
            if let Some(&at) = index.find(h(), |&at| key_of(items[at as usize]) == key) {
                self.cursor = at as usize + 1;
                return (self.items[at as usize], false);
            }
            self.sorted &= past_last;
        }
        let at = self.items.len();
        self.items.push(next);
        if let Some(index) = &mut self.index {
            let before = index.capacity();
            let items = &self.items;
            index.insert_unique(h(), at as u32, |&at| {
                FxBuildHasher.hash_one(key_of(items[at as usize]))
            });
            *index_bytes += index_size(index.capacity()) - index_size(before);
        }
        self.cursor = at + 1;
        (next, true)
    }
}

impl BlockKeys<Pos> {
    /// The line at `key` (an index into `line_pos`), added to `line_pos`
    /// and the block when new; the flag says whether it is new.
    #[inline]
    pub(crate) fn find_or_add(
        &mut self,
        key: Pos,
        line_pos: &mut PosList,
        index_bytes: &mut usize,
    ) -> (usize, bool) {
        let next = line_pos.len() as u32;
        let (i, new) = self.find_or_insert(key, |i| line_pos.get(i as usize), next, index_bytes);
        if new {
            line_pos.push(key);
        }
        (i as usize, new)
    }
}

/// A block's ids: function and file (for calls, caller and call-site
/// file).
pub(crate) type BlockId = (FunctionId, FileId);

/// The blocks of one kind of record (lines and jumps by function and
/// file, calls by caller and call-site file), in the order first met, for
/// finding a record without hashing its whole key: the block by its two
/// ids (the last one met is kept), then the record in its block as
/// [`BlockKeys`] does.
pub(crate) struct KeyedBlocks<K> {
    pub(crate) index: FxHashMap<BlockId, u32>,
    /// The blocks, with their ids, in the order first met.
    pub(crate) blocks: Vec<(BlockId, BlockKeys<K>)>,
    current: usize,
}

impl<K: Copy + Ord + std::hash::Hash> KeyedBlocks<K> {
    pub(crate) fn new() -> Self {
        KeyedBlocks {
            index: FxHashMap::default(),
            blocks: Vec::new(),
            current: usize::MAX,
        }
    }

    /// [`BlockKeys::find_or_insert`] in the block of `block`.
    #[inline]
    pub(crate) fn find_or_insert(
        &mut self,
        block: (FunctionId, FileId),
        key: K,
        key_of: impl Fn(u32) -> K,
        next: u32,
        index_bytes: &mut usize,
    ) -> (u32, bool) {
        let b = match self.blocks.get(self.current) {
            Some((k, _)) if *k == block => self.current,
            _ => {
                let n = self.blocks.len() as u32;
                let b = *self.index.entry(block).or_insert(n) as usize;
                if b == n as usize {
                    self.blocks.push((block, BlockKeys::new()));
                }
                self.blocks[b].1.rewind();
                self.current = b;
                b
            }
        };
        self.blocks[b]
            .1
            .find_or_insert(key, key_of, next, index_bytes)
    }

    /// Bytes held, for [`Sink::held_bytes`], but for the blocks' records
    /// and indices.
    fn held_bytes(&self) -> usize {
        self.index.capacity() * (std::mem::size_of::<((FunctionId, FileId), u32)>() + 1)
            + self.blocks.capacity() * std::mem::size_of::<((FunctionId, FileId), BlockKeys<K>)>()
    }

    /// How many blocks.
    fn len(&self) -> usize {
        self.blocks.len()
    }
}

/// A call arc's key: caller, call-site file, callee, site and target.
/// Ordered by site first, the order a block lists its calls in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct CallKey {
    pub(crate) site: Pos,
    pub(crate) target: Pos,
    pub(crate) callee: FunctionId,
    pub(crate) caller: FunctionId,
    pub(crate) site_file: FileId,
}

/// A jump's key: both ends and the kind. Ordered by source first, the
/// order a block lists its jumps in.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct JumpKey {
    pub(crate) source: Pos,
    pub(crate) target: Pos,
    pub(crate) target_function: FunctionId,
    pub(crate) target_file: FileId,
    pub(crate) conditional: bool,
    pub(crate) function: FunctionId,
    pub(crate) file: FileId,
}

/// The distinct records of one part of an input.
pub(crate) struct FoldPart<C> {
    pub(crate) events: usize,
    /// The lines by function and file.
    pub(crate) line_blocks: KeyedBlocks<Pos>,
    /// The bytes of the blocks' hash indices (see [`BlockKeys`]).
    index_bytes: usize,
    pub(crate) line_pos: PosList,
    pub(crate) line_costs: Vec<C>,
    /// The block, key and index of the line met last: the line found again
    /// without a lookup when the next one repeats it (every line of a
    /// function when a diff keeps one per function).
    last_line: Option<(BlockId, Pos, usize)>,
    /// The calls by caller and call-site file.
    pub(crate) call_blocks: KeyedBlocks<CallKey>,
    /// Calls in first-seen order, with their counts.
    pub(crate) calls: Vec<(CallKey, C)>,
    pub(crate) call_costs: Vec<C>,
    /// The jumps by function and file.
    pub(crate) jump_blocks: KeyedBlocks<JumpKey>,
    /// Jumps in first-seen order, with executed and taken counts.
    pub(crate) jumps: Vec<(JumpKey, C, C)>,
}

/// Adds `src` to `dst` (zeros past `src`'s end); false on overflow.
#[inline]
fn add_all<C: Cost>(dst: &mut [C], src: &[C]) -> bool {
    let mut ok = true;
    for (d, &s) in dst.iter_mut().zip(src) {
        match d.checked_add(s) {
            Some(v) => *d = v,
            None => ok = false,
        }
    }
    ok
}

/// See the module documentation. Read into it with any reader (it is a
/// [`Sink`]), then give it to [`crate::combine::Combiner::add_folded`]
/// with the read's header and names.
pub struct Folding<C> {
    pub(crate) parts: Vec<FoldPart<C>>,
    overflow: Option<FunctionId>,
    /// Every record is kept at position 0 (see [`Folding::per_function`]).
    per_function: bool,
}

impl<C> Default for Folding<C> {
    fn default() -> Self {
        Folding {
            parts: Vec::new(),
            overflow: None,
            per_function: false,
        }
    }
}

impl<C: Cost> Folding<C> {
    /// A folding that keeps one line per (function, file) block, at
    /// position 0, and calls and jumps at position 0: what a combiner with
    /// [`CombineOptions::per_function`](crate::combine::CombineOptions::per_function)
    /// makes of the input, so that a per-function diff holds a few
    /// thousand records per input rather than every line.
    pub fn per_function() -> Self {
        Folding {
            per_function: true,
            ..Folding::default()
        }
    }

    /// Whether records are kept per function (see [`Folding::per_function`]).
    pub fn is_per_function(&self) -> bool {
        self.per_function
    }

    /// The positions a record is kept at.
    #[inline]
    fn at(&self, p: &[u64]) -> Pos {
        if self.per_function { [0; 3] } else { pos(p) }
    }

    /// The function of the first sum of repeated records that did not fit
    /// the cost type (the readers' running sums rule it out for costs and
    /// call counts; jump counts can still pass it).
    pub fn overflow(&self) -> Option<FunctionId> {
        self.overflow
    }

    fn part(&mut self) -> &mut FoldPart<C> {
        if self.parts.is_empty() {
            // A reader starts a part before its first record; should one
            // not, its records still have a home.
            self.start_part(Positions::LINE, 0);
        }
        let last = self.parts.len() - 1;
        &mut self.parts[last]
    }
}

impl<C: Cost> Sink<C> for Folding<C> {
    fn start_part(&mut self, positions: Positions, events: usize) {
        self.parts.push(FoldPart {
            events,
            line_blocks: KeyedBlocks::new(),
            index_bytes: 0,
            line_pos: PosList::new(positions.len()),
            line_costs: Vec::new(),
            last_line: None,
            call_blocks: KeyedBlocks::new(),
            calls: Vec::new(),
            call_costs: Vec::new(),
            jump_blocks: KeyedBlocks::new(),
            jumps: Vec::new(),
        });
    }

    #[inline]
    fn line(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]) {
        let key = self.at(positions);
        let p = self.part();
        let ne = p.events;
        let block = (function, file);
        // The line met last, again: what the block's lookup would find
        // (its cursor stays after that line, see `BlockKeys`).
        let i = match p.last_line {
            Some((b, k, i)) if b == block && k == key => i,
            _ => {
                let line_pos = &p.line_pos;
                let (i, new) = p.line_blocks.find_or_insert(
                    block,
                    key,
                    |i| line_pos.get(i as usize),
                    line_pos.len() as u32,
                    &mut p.index_bytes,
                );
                let i = i as usize;
                p.last_line = Some((block, key, i));
                if new {
                    // A new line's costs are its own: copied, not added
                    // to zeros.
                    p.line_pos.push(key);
                    let n = costs.len().min(ne);
                    p.line_costs.extend_from_slice(&costs[..n]);
                    p.line_costs.extend(std::iter::repeat_n(C::ZERO, ne - n));
                    return;
                }
                i
            }
        };
        if !add_all(&mut p.line_costs[i * ne..(i + 1) * ne], costs) {
            self.overflow.get_or_insert(function);
        }
    }

    fn call(&mut self, info: CallInfo<C>, site: &[u64], target: &[u64], inclusive: &[C]) {
        let (site, target) = (self.at(site), self.at(target));
        let p = self.part();
        let ne = p.events;
        let key = CallKey {
            caller: info.caller,
            site_file: info.site_file,
            callee: info.callee,
            site,
            target,
        };
        let calls = &p.calls;
        let (i, new) = p.call_blocks.find_or_insert(
            (key.caller, key.site_file),
            key,
            |i| calls[i as usize].0,
            calls.len() as u32,
            &mut p.index_bytes,
        );
        let i = i as usize;
        if new {
            p.calls.push((key, C::ZERO));
            p.call_costs.extend(std::iter::repeat_n(C::ZERO, ne));
        }
        let count = p.calls[i].1.checked_add(info.count);
        let ok = count.is_some() & add_all(&mut p.call_costs[i * ne..(i + 1) * ne], inclusive);
        if let Some(c) = count {
            p.calls[i].1 = c;
        }
        if !ok {
            self.overflow.get_or_insert(info.caller);
        }
    }

    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        let (source, target) = (self.at(source), self.at(target));
        let p = self.part();
        let key = JumpKey {
            function: info.function,
            file: info.file,
            target_function: info.target_function,
            target_file: info.target_file,
            conditional: info.conditional,
            source,
            target,
        };
        let jumps = &p.jumps;
        let (i, new) = p.jump_blocks.find_or_insert(
            (key.function, key.file),
            key,
            |i| jumps[i as usize].0,
            jumps.len() as u32,
            &mut p.index_bytes,
        );
        if new {
            p.jumps.push((key, C::ZERO, C::ZERO));
        }
        let j = &mut p.jumps[i as usize];
        match (j.1.checked_add(info.executed), j.2.checked_add(info.taken)) {
            (Some(e), Some(t)) => {
                j.1 = e;
                j.2 = t;
            }
            _ => {
                self.overflow.get_or_insert(info.function);
            }
        }
    }

    /// Counted without visiting the blocks (the reader asks after every
    /// chunk): a block's record list is taken as its records' indices,
    /// twice over for the room a growing vector keeps, and at least the
    /// four a first push allocates.
    fn held_bytes(&self) -> usize {
        fn v<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        self.parts
            .iter()
            .map(|p| {
                let records = p.line_pos.len() + p.calls.len() + p.jumps.len();
                let blocks = p.line_blocks.len() + p.call_blocks.len() + p.jump_blocks.len();
                p.line_blocks.held_bytes()
                    + p.line_pos.held_bytes()
                    + v(&p.line_costs)
                    + p.call_blocks.held_bytes()
                    + v(&p.calls)
                    + v(&p.call_costs)
                    + p.jump_blocks.held_bytes()
                    + v(&p.jumps)
                    + 8 * records
                    + 16 * blocks
                    + p.index_bytes
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A block finds every key it was given, at the item it was first
        /// given with, and adds each new key once, whatever the order
        /// (sorted runs, repeats in the order met, any other) and wherever
        /// a new run of the block begins.
        #[test]
        fn a_block_finds_each_key_once(
            steps in prop::collection::vec((0u8..24, any::<bool>()), 0..200)
        ) {
            let mut block = BlockKeys::<u8>::new();
            let mut keys: Vec<u8> = Vec::new();
            let mut model = std::collections::HashMap::new();
            let mut index_bytes = 0;
            for (key, rewind) in steps {
                if rewind {
                    block.rewind();
                }
                let next = keys.len() as u32;
                let (i, new) = block.find_or_insert(key, |i| keys[i as usize], next, &mut index_bytes);
                match model.get(&key) {
                    Some(&at) => prop_assert_eq!((i, new), (at, false)),
                    None => {
                        prop_assert_eq!((i, new), (next, true));
                        model.insert(key, next);
                        keys.push(key);
                    }
                }
            }
            prop_assert_eq!(block.items.len(), model.len());
            prop_assert_eq!(index_bytes > 0, block.index.is_some());
        }
    }
}
