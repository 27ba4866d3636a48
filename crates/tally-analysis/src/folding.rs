//! One input of a merge or diff, folded as it is read: a [`Sink`] that
//! keeps each distinct record once, grouped as the [`Combiner`] groups
//! them, so that [`Combiner::add_folded`] takes it block by block without
//! a profile model in between (no coded cost lines written and decoded
//! again per input).
//!
//! Lines are kept per (function, file) block in `BlockLines`, which
//! finds a line without hashing in the two common cases: the next line of
//! the block in the order met before (the second run of one program lists
//! its lines in the first run's order), and a line past the block's last
//! one while the block's positions only grew (a line-level file lists a
//! function's lines in increasing order). A block builds its hash index
//! the first time neither holds.
//!
//! [`Combiner`]: crate::combine::Combiner
//! [`Combiner::add_folded`]: crate::combine::Combiner::add_folded

use rustc_hash::FxHashMap;
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

/// The lines of one block: indices into its owner's line arrays, in the
/// order first met. See the module documentation.
pub(crate) struct BlockLines {
    pub(crate) lines: Vec<u32>,
    /// Whether the positions of `lines` strictly increase.
    sorted: bool,
    /// Position → place in `lines`, built when first needed.
    index: Option<FxHashMap<Pos, u32>>,
    /// The place in `lines` expected next.
    cursor: usize,
}

impl BlockLines {
    pub(crate) fn new() -> Self {
        BlockLines {
            lines: Vec::new(),
            sorted: true,
            index: None,
            cursor: 0,
        }
    }

    /// A new run of the block begins: expect its first line.
    #[inline]
    pub(crate) fn rewind(&mut self) {
        self.cursor = 0;
    }

    /// The line at `key` (an index into `line_pos`), added to `line_pos`
    /// and the block when new; the flag says whether it is new.
    #[inline]
    pub(crate) fn find_or_add(&mut self, key: Pos, line_pos: &mut Vec<Pos>) -> (usize, bool) {
        if let Some(&i) = self.lines.get(self.cursor)
            && line_pos[i as usize] == key
        {
            self.cursor += 1;
            return (i as usize, false);
        }
        let past_last = self
            .lines
            .last()
            .is_none_or(|&l| line_pos[l as usize] < key);
        if !(self.sorted && past_last) {
            let lines = &self.lines;
            let index = self.index.get_or_insert_with(|| {
                lines
                    .iter()
                    .enumerate()
                    .map(|(at, &i)| (line_pos[i as usize], at as u32))
                    .collect()
            });
            if let Some(&at) = index.get(&key) {
                self.cursor = at as usize + 1;
                return (self.lines[at as usize] as usize, false);
            }
            self.sorted &= past_last;
        }
        let at = self.lines.len();
        let i = line_pos.len();
        line_pos.push(key);
        self.lines.push(i as u32);
        if let Some(index) = &mut self.index {
            index.insert(key, at as u32);
        }
        self.cursor = at + 1;
        (i, true)
    }
}

/// A call arc's key: caller, call-site file, callee, site and target.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CallKey {
    pub(crate) caller: FunctionId,
    pub(crate) site_file: FileId,
    pub(crate) callee: FunctionId,
    pub(crate) site: Pos,
    pub(crate) target: Pos,
}

/// A jump's key: both ends and the kind.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct JumpKey {
    pub(crate) function: FunctionId,
    pub(crate) file: FileId,
    pub(crate) target_function: FunctionId,
    pub(crate) target_file: FileId,
    pub(crate) conditional: bool,
    pub(crate) source: Pos,
    pub(crate) target: Pos,
}

/// One block of a folded part.
pub(crate) struct FoldBlock {
    pub(crate) function: FunctionId,
    pub(crate) file: FileId,
    pub(crate) lines: BlockLines,
}

/// The distinct records of one part of an input.
pub(crate) struct FoldPart<C> {
    pub(crate) events: usize,
    pub(crate) blocks: Vec<FoldBlock>,
    pub(crate) block_index: FxHashMap<(FunctionId, FileId), u32>,
    /// The block of the line met last.
    current: usize,
    pub(crate) line_pos: Vec<Pos>,
    pub(crate) line_costs: Vec<C>,
    pub(crate) call_index: FxHashMap<CallKey, u32>,
    /// Calls in first-seen order, with their counts.
    pub(crate) calls: Vec<(CallKey, C)>,
    pub(crate) call_costs: Vec<C>,
    pub(crate) jump_index: FxHashMap<JumpKey, u32>,
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
    fn start_part(&mut self, _positions: Positions, events: usize) {
        self.parts.push(FoldPart {
            events,
            blocks: Vec::new(),
            block_index: FxHashMap::default(),
            current: usize::MAX,
            line_pos: Vec::new(),
            line_costs: Vec::new(),
            call_index: FxHashMap::default(),
            calls: Vec::new(),
            call_costs: Vec::new(),
            jump_index: FxHashMap::default(),
            jumps: Vec::new(),
        });
    }

    #[inline]
    fn line(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]) {
        let key = self.at(positions);
        let p = self.part();
        let ne = p.events;
        let b = match p.blocks.get(p.current) {
            Some(b) if b.function == function && b.file == file => p.current,
            _ => {
                let n = p.blocks.len() as u32;
                let b = *p.block_index.entry((function, file)).or_insert(n) as usize;
                if b == n as usize {
                    p.blocks.push(FoldBlock {
                        function,
                        file,
                        lines: BlockLines::new(),
                    });
                }
                p.blocks[b].lines.rewind();
                p.current = b;
                b
            }
        };
        let (i, new) = p.blocks[b].lines.find_or_add(key, &mut p.line_pos);
        if new {
            p.line_costs.extend(std::iter::repeat_n(C::ZERO, ne));
        }
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
        let n = p.calls.len() as u32;
        let i = *p.call_index.entry(key).or_insert(n) as usize;
        if i == n as usize {
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
        let n = p.jumps.len() as u32;
        let i = *p.jump_index.entry(key).or_insert(n) as usize;
        if i == n as usize {
            p.jumps.push((key, C::ZERO, C::ZERO));
        }
        let j = &mut p.jumps[i];
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

    fn held_bytes(&self) -> usize {
        fn v<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        fn m<K, V>(m: &FxHashMap<K, V>) -> usize {
            m.capacity() * (std::mem::size_of::<(K, V)>() + 1)
        }
        self.parts
            .iter()
            .map(|p| {
                v(&p.blocks)
                    + p.blocks
                        .iter()
                        .map(|b| v(&b.lines.lines) + b.lines.index.as_ref().map_or(0, m))
                        .sum::<usize>()
                    + m(&p.block_index)
                    + v(&p.line_pos)
                    + v(&p.line_costs)
                    + m(&p.call_index)
                    + v(&p.calls)
                    + v(&p.call_costs)
                    + m(&p.jump_index)
                    + v(&p.jumps)
            })
            .sum()
    }
}
