//! One part of a profile: its header facts, self-cost lines, call arcs and
//! jumps.
//!
//! Cost lines are the bulk of every profile, so they are stored in a compact
//! arena: lines are grouped in blocks that share function and source file, and
//! each line is a delta-coded, LEB128-encoded record of positions and costs
//! (trailing zero costs dropped). A typical instruction-level line takes 4–6
//! bytes, less than its text. Lines are read with a cursor (`for_each`,
//! `for_each_in_block`) that decodes into one reused buffer, so reading
//! allocates nothing per line. Calls and jumps are far fewer and are stored
//! plainly, with flat arrays for their positions and costs; each carries
//! `seq`, its place among the part's records, so that `Part::visit` replays
//! lines, calls and jumps in file order and a writer reproduces the input's
//! order (`read(write(p)) == p`).

use crate::cost::{get_varint, put_varint, unzigzag_delta, zigzag_delta};
use crate::names::{FileId, FunctionId};
use crate::{Cost, Positions};

/// Header facts of one part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartInfo<C> {
    /// `part:` number.
    pub number: Option<u64>,
    /// `pid:` of the profiled process.
    pub pid: Option<u64>,
    /// `thread:` number.
    pub thread: Option<u64>,
    /// `cmd:` command line, exactly as written.
    pub cmd: Option<Vec<u8>>,
    /// `desc: type: value` lines in order, as (type, value).
    pub desc: Vec<(Vec<u8>, Vec<u8>)>,
    /// Header lines of unknown keys, verbatim and in order.
    pub other: Vec<Vec<u8>>,
    /// `summary:` as given (header position), one value per event.
    pub summary: Option<Vec<C>>,
    /// `totals:` as given (end of part), or Cachegrind's trailing `summary:`.
    pub totals: Option<Vec<C>>,
}

/// A run of cost lines with the same function and source file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// The function (`fn=`) the lines belong to.
    pub function: FunctionId,
    /// The source file of the lines: the function's file, or the file set by
    /// `fi=`/`fe=` for inlined code.
    pub file: FileId,
    /// Index of the first line of the block.
    pub first_line: u64,
    byte_start: u64,
}

/// Self-cost lines of a part, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostLines<C> {
    positions: usize,
    events: usize,
    blocks: Vec<Block>,
    data: Vec<u8>,
    len: u64,
    last: [u64; 3],
    _cost: std::marker::PhantomData<C>,
}

/// One cost line, borrowed from a [`LineCursor`].
#[derive(Clone, Copy, Debug)]
pub struct LineRef<'a, C> {
    /// The function.
    pub function: FunctionId,
    /// The source file of this line.
    pub file: FileId,
    /// Positions in the order of the profile's `positions:`.
    pub positions: &'a [u64],
    /// One cost per recorded event (zeros filled in).
    pub costs: &'a [C],
}

impl<C: Cost> CostLines<C> {
    /// An empty arena for the given number of positions and events.
    pub fn new(positions: Positions, events: usize) -> Self {
        CostLines {
            positions: positions.len(),
            events,
            blocks: Vec::new(),
            data: Vec::new(),
            len: 0,
            last: [0; 3],
            _cost: std::marker::PhantomData,
        }
    }

    /// Number of lines.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Number of recorded events each line has costs for.
    pub fn events(&self) -> usize {
        self.events
    }

    /// True when there are no lines.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The blocks, in file order.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Bytes used by the encoded lines (for memory accounting).
    pub fn encoded_bytes(&self) -> usize {
        self.data.len() + self.blocks.len() * std::mem::size_of::<Block>()
    }

    /// Bytes of memory held (allocated, not only used), for a memory
    /// ceiling.
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() + self.blocks.capacity() * std::mem::size_of::<Block>()
    }

    /// Appends a line. `positions` must have one value per position kind and
    /// `costs` at most one value per event (missing ones are zero).
    pub fn push(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]) {
        debug_assert_eq!(positions.len(), self.positions);
        debug_assert!(costs.len() <= self.events);
        let new_block = match self.blocks.last() {
            Some(b) => b.function != function || b.file != file,
            None => true,
        };
        if new_block {
            self.blocks.push(Block {
                function,
                file,
                first_line: self.len,
                byte_start: self.data.len() as u64,
            });
            self.last = [0; 3];
        }
        for (i, &p) in positions.iter().enumerate() {
            put_varint(&mut self.data, zigzag_delta(p.wrapping_sub(self.last[i])));
            self.last[i] = p;
        }
        let n = costs
            .iter()
            .rposition(|c| !c.is_zero())
            .map_or(0, |i| i + 1);
        put_varint(&mut self.data, n as u64);
        for &c in &costs[..n] {
            put_varint(&mut self.data, c.to_zigzag());
        }
        self.len += 1;
    }

    /// A cursor over all lines.
    pub fn cursor(&self) -> LineCursor<'_, C> {
        LineCursor {
            lines: self,
            block: 0,
            pos: 0,
            index: 0,
            positions: [0; 3],
            costs: vec![C::ZERO; self.events],
        }
    }

    /// Calls `f` for every line, in order.
    pub fn for_each(&self, mut f: impl FnMut(LineRef<'_, C>)) {
        let mut c = self.cursor();
        while let Some(l) = c.next_line() {
            f(l);
        }
    }

    /// Calls `f` for every line of block `b` (an index into [`Self::blocks`]).
    pub fn for_each_in_block(&self, b: usize, mut f: impl FnMut(LineRef<'_, C>)) {
        let block = self.blocks[b];
        let end = self.blocks.get(b + 1).map_or(self.len, |n| n.first_line);
        let mut c = LineCursor {
            lines: self,
            block: b,
            pos: block.byte_start as usize,
            index: block.first_line,
            positions: [0; 3],
            costs: vec![C::ZERO; self.events],
        };
        for _ in block.first_line..end {
            match c.decode() {
                Some(l) => f(l),
                None => break,
            }
        }
    }

    /// Adds up all self costs, one value per event; `None` on overflow.
    pub fn totals(&self) -> Option<Vec<C>> {
        let mut t = vec![C::ZERO; self.events];
        let mut ok = true;
        self.for_each(|l| {
            for (a, &b) in t.iter_mut().zip(l.costs) {
                match a.checked_add(b) {
                    Some(v) => *a = v,
                    None => ok = false,
                }
            }
        });
        ok.then_some(t)
    }
}

/// Decodes lines one after the other without allocating per line.
pub struct LineCursor<'a, C> {
    lines: &'a CostLines<C>,
    block: usize,
    pos: usize,
    index: u64,
    positions: [u64; 3],
    costs: Vec<C>,
}

impl<C: Cost> LineCursor<'_, C> {
    /// The next line, or `None` at the end.
    pub fn next_line(&mut self) -> Option<LineRef<'_, C>> {
        let lines = self.lines;
        if self.index >= lines.len {
            return None;
        }
        let next = self.block + 1;
        if self.index == 0 {
            self.positions = [0; 3];
        } else if next < lines.blocks.len() && lines.blocks[next].first_line == self.index {
            self.block = next;
            self.positions = [0; 3];
        }
        self.decode()
    }

    /// Decodes the line at the cursor within the current block.
    fn decode(&mut self) -> Option<LineRef<'_, C>> {
        let lines = self.lines;
        if self.index >= lines.len {
            return None;
        }
        let b = lines.blocks[self.block];
        let data = &lines.data;
        for p in &mut self.positions[..lines.positions] {
            *p = p.wrapping_add(unzigzag_delta(get_varint(data, &mut self.pos)));
        }
        let n = get_varint(data, &mut self.pos) as usize;
        for c in &mut self.costs[..n] {
            *c = C::from_zigzag(get_varint(data, &mut self.pos));
        }
        for c in &mut self.costs[n..] {
            *c = C::ZERO;
        }
        self.index += 1;
        Some(LineRef {
            function: b.function,
            file: b.file,
            positions: &self.positions[..lines.positions],
            costs: &self.costs,
        })
    }
}

/// The facts of a call arc, without its positions and costs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallInfo<C> {
    /// The calling function.
    pub caller: FunctionId,
    /// The source file of the call site (`fi=`/`fe=` aware).
    pub site_file: FileId,
    /// The called function (`cob=`, `cfi=`, `cfn=`).
    pub callee: FunctionId,
    /// How many times the call was made (`calls=`).
    pub count: C,
    /// Place of this record among the part's lines, calls and jumps.
    pub seq: u64,
}

/// A call arc with its positions and inclusive cost.
#[derive(Clone, Copy, Debug)]
pub struct CallRef<'a, C> {
    /// Caller, callee, count.
    pub info: CallInfo<C>,
    /// Position of the call site.
    pub site: &'a [u64],
    /// Position of the call target, as written on the `calls=` line.
    pub target: &'a [u64],
    /// Inclusive cost of the calls, one value per event.
    pub inclusive: &'a [C],
}

/// All call arcs of a part, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Calls<C> {
    positions: usize,
    events: usize,
    info: Vec<CallInfo<C>>,
    pos: Vec<u64>,
    costs: Vec<C>,
}

impl<C: Cost> Calls<C> {
    /// Bytes of memory held, for a memory ceiling.
    pub fn heap_bytes(&self) -> usize {
        self.info.capacity() * std::mem::size_of::<CallInfo<C>>()
            + self.pos.capacity() * 8
            + self.costs.capacity() * std::mem::size_of::<C>()
    }

    /// No calls yet.
    pub fn new(positions: Positions, events: usize) -> Self {
        Calls {
            positions: positions.len(),
            events,
            info: Vec::new(),
            pos: Vec::new(),
            costs: Vec::new(),
        }
    }

    /// Appends a call; missing costs are zero.
    pub fn push(&mut self, info: CallInfo<C>, site: &[u64], target: &[u64], inclusive: &[C]) {
        debug_assert_eq!(site.len(), self.positions);
        debug_assert_eq!(target.len(), self.positions);
        self.info.push(info);
        self.pos.extend_from_slice(site);
        self.pos.extend_from_slice(target);
        self.costs.extend_from_slice(inclusive);
        self.costs
            .extend(std::iter::repeat_n(C::ZERO, self.events - inclusive.len()));
    }

    /// Number of calls.
    pub fn len(&self) -> usize {
        self.info.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }

    /// The call at `i`.
    pub fn get(&self, i: usize) -> CallRef<'_, C> {
        let np = self.positions;
        let p = &self.pos[2 * np * i..2 * np * (i + 1)];
        CallRef {
            info: self.info[i],
            site: &p[..np],
            target: &p[np..],
            inclusive: &self.costs[self.events * i..self.events * (i + 1)],
        }
    }

    /// All calls in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = CallRef<'_, C>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// The facts of a jump edge, without positions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JumpInfo<C> {
    /// The function the jump starts in.
    pub function: FunctionId,
    /// The source file of the jump instruction.
    pub file: FileId,
    /// The function jumped to (`jfn=`, else the same function).
    pub target_function: FunctionId,
    /// The file jumped to (`jfi=`, else the current file).
    pub target_file: FileId,
    /// `jcnd=` (conditional) rather than `jump=`.
    pub conditional: bool,
    /// Times the jump instruction was executed (`jcnd=`), or times the
    /// unconditional jump was taken (`jump=`).
    pub executed: C,
    /// Times the jump was taken; equal to `executed` for `jump=`.
    pub taken: C,
    /// Place of this record among the part's lines, calls and jumps.
    pub seq: u64,
}

/// A jump with its source and target positions.
#[derive(Clone, Copy, Debug)]
pub struct JumpRef<'a, C> {
    /// Functions, files and counts.
    pub info: JumpInfo<C>,
    /// Position of the jump instruction.
    pub source: &'a [u64],
    /// Position jumped to.
    pub target: &'a [u64],
}

/// All jumps of a part, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jumps<C> {
    positions: usize,
    info: Vec<JumpInfo<C>>,
    pos: Vec<u64>,
}

impl<C: Cost> Jumps<C> {
    /// Bytes of memory held, for a memory ceiling.
    pub fn heap_bytes(&self) -> usize {
        self.info.capacity() * std::mem::size_of::<JumpInfo<C>>() + self.pos.capacity() * 8
    }

    /// No jumps yet.
    pub fn new(positions: Positions) -> Self {
        Jumps {
            positions: positions.len(),
            info: Vec::new(),
            pos: Vec::new(),
        }
    }

    /// Appends a jump.
    pub fn push(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        debug_assert_eq!(source.len(), self.positions);
        self.info.push(info);
        self.pos.extend_from_slice(source);
        self.pos.extend_from_slice(target);
    }

    /// Number of jumps.
    pub fn len(&self) -> usize {
        self.info.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.info.is_empty()
    }

    /// The jump at `i`.
    pub fn get(&self, i: usize) -> JumpRef<'_, C> {
        let np = self.positions;
        let p = &self.pos[2 * np * i..2 * np * (i + 1)];
        JumpRef {
            info: self.info[i],
            source: &p[..np],
            target: &p[np..],
        }
    }

    /// All jumps in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = JumpRef<'_, C>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// One part of a profile (a dump, a thread, or one input file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part<C> {
    /// Header facts.
    pub info: PartInfo<C>,
    /// Self-cost lines.
    pub lines: CostLines<C>,
    /// Call arcs.
    pub calls: Calls<C>,
    /// Jumps.
    pub jumps: Jumps<C>,
}

impl<C: Cost> Part<C> {
    /// An empty part.
    pub fn new(positions: Positions, events: usize) -> Self {
        Part {
            info: PartInfo {
                number: None,
                pid: None,
                thread: None,
                cmd: None,
                desc: Vec::new(),
                other: Vec::new(),
                summary: None,
                totals: None,
            },
            lines: CostLines::new(positions, events),
            calls: Calls::new(positions, events),
            jumps: Jumps::new(positions),
        }
    }

    /// The number of records (lines, calls, jumps); the next record's `seq`.
    pub fn next_seq(&self) -> u64 {
        self.lines.len() + self.calls.len() as u64 + self.jumps.len() as u64
    }

    /// Visits lines, calls and jumps in their original order.
    pub fn visit(&self, v: &mut impl PartVisitor<C>) {
        let mut lines = self.lines.cursor();
        let (mut ci, mut ji) = (0, 0);
        let total = self.next_seq();
        for seq in 0..total {
            if ci < self.calls.len() && self.calls.info[ci].seq == seq {
                v.call(self.calls.get(ci));
                ci += 1;
            } else if ji < self.jumps.len() && self.jumps.info[ji].seq == seq {
                v.jump(self.jumps.get(ji));
                ji += 1;
            } else if let Some(l) = lines.next_line() {
                v.line(l);
            }
        }
    }
}

/// Receives the records of a part in order (see [`Part::visit`]).
pub trait PartVisitor<C> {
    /// A self-cost line.
    fn line(&mut self, line: LineRef<'_, C>);
    /// A call arc.
    fn call(&mut self, call: CallRef<'_, C>);
    /// A jump.
    fn jump(&mut self, jump: JumpRef<'_, C>);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_through_the_arena() {
        let pos = Positions::INSTR_LINE;
        let mut l = CostLines::<i64>::new(pos, 3);
        let input: Vec<(u32, u32, [u64; 2], Vec<i64>)> = vec![
            (1, 1, [0x4000_1234, 90], vec![1]),
            (1, 1, [0x4000_1237, 90], vec![5, 0, 0]),
            (1, 2, [0x4000_1238, 12], vec![6, -7, 0]),
            (2, 2, [u64::MAX, 0], vec![i64::MIN, i64::MAX, 1]),
            (2, 2, [0, 0], vec![]),
        ];
        for (f, fl, p, c) in &input {
            l.push(FunctionId(*f), FileId(*fl), p, c);
        }
        assert_eq!(l.len(), 5);
        assert_eq!(l.blocks().len(), 3);
        let mut out = Vec::new();
        l.for_each(|r| {
            out.push((
                r.function.0,
                r.file.0,
                [r.positions[0], r.positions[1]],
                r.costs.to_vec(),
            ))
        });
        for (a, b) in input.iter().zip(&out) {
            assert_eq!((a.0, a.1, a.2), (b.0, b.1, b.2));
            let mut want = a.3.clone();
            want.resize(3, 0);
            assert_eq!(want, b.3);
        }
        assert_eq!(l.totals(), Some(vec![i64::MIN + 12, i64::MAX - 7, 1]));
        let mut o = CostLines::<u64>::new(Positions::LINE, 1);
        o.push(FunctionId(0), FileId(0), &[1], &[u64::MAX]);
        o.push(FunctionId(0), FileId(0), &[2], &[1]);
        assert_eq!(o.totals(), None);
    }
}
