//! One part of a profile: its header facts, self-cost lines, call arcs and
//! jumps.
//!
//! Cost lines are the bulk of every profile, so a reader stores them in a
//! compact arena: lines are grouped in blocks that share function and source
//! file, and each line is a delta-coded, LEB128-encoded record of positions
//! and costs (trailing zero costs dropped). A typical instruction-level line
//! takes 4–6 bytes, less than its text. A sum or difference already holds
//! its lines as plain rows of positions and costs; it hands them over as
//! they are, with the order of the lines, rather than coding them only for
//! a writer to decode them again. Lines are read with a cursor (`for_each`,
//! `for_each_in_block`) that decodes into one reused buffer or borrows the
//! rows, so reading allocates nothing per line. Calls and jumps are far
//! fewer and are stored plainly, with flat arrays for their positions and
//! costs; each carries `seq`, its place among the part's records, so that
//! `Part::visit` replays lines, calls and jumps in file order and a writer
//! reproduces the input's order (`read(write(p)) == p`).

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
#[derive(Clone, Copy, Debug)]
pub struct Block {
    /// The function (`fn=`) the lines belong to.
    pub function: FunctionId,
    /// The source file of the lines: the function's file, or the file set by
    /// `fi=`/`fe=` for inlined code.
    pub file: FileId,
    /// Index of the first line of the block.
    pub first_line: u64,
    /// Where the block's first line is coded (coded lines only).
    byte_start: u64,
}

/// Blocks are equal when they hold the same lines, however these are stored.
impl PartialEq for Block {
    fn eq(&self, o: &Self) -> bool {
        (self.function, self.file, self.first_line) == (o.function, o.file, o.first_line)
    }
}

impl Eq for Block {}

/// Self-cost lines of a part, in file order.
#[derive(Clone, Debug)]
pub struct CostLines<C> {
    positions: usize,
    events: usize,
    blocks: Vec<Block>,
    store: Store<C>,
    len: u64,
}

/// How the lines are held.
#[derive(Clone, Debug)]
enum Store<C> {
    /// Delta-coded LEB128 records, as readers build them.
    Coded {
        data: Vec<u8>,
        /// The previous line's positions (the base of the next delta).
        last: [u64; 3],
    },
    /// Plain rows, `positions` numbers and `events` costs each; line `i` is
    /// row `order[i]`. Rows no line names are allowed (a difference drops
    /// the lines that did not change).
    Rows {
        pos: Vec<u64>,
        costs: Vec<C>,
        order: Vec<u32>,
    },
}

/// The number of rows of plain arrays.
fn row_count<C>(pos: &[u64], costs: &[C], positions: usize, events: usize) -> usize {
    costs
        .len()
        .checked_div(events)
        .unwrap_or(pos.len() / positions.max(1))
}

/// Equal when they hold the same lines in the same blocks, however these
/// are stored.
impl<C: Cost> PartialEq for CostLines<C> {
    fn eq(&self, o: &Self) -> bool {
        if (self.positions, self.events, self.len) != (o.positions, o.events, o.len)
            || self.blocks != o.blocks
        {
            return false;
        }
        if let (Store::Coded { data: a, .. }, Store::Coded { data: b, .. }) =
            (&self.store, &o.store)
        {
            // The coding is canonical: equal lines give equal bytes.
            return a == b;
        }
        let (mut a, mut b) = (self.cursor(), o.cursor());
        loop {
            match (a.next_line(), b.next_line()) {
                (None, None) => return true,
                (Some(x), Some(y)) => {
                    if x.positions != y.positions || x.costs != y.costs {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }
}

impl<C: Cost> Eq for CostLines<C> {}

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
            store: Store::Coded {
                data: Vec::new(),
                last: [0; 3],
            },
            len: 0,
        }
    }

    /// No lines yet, over rows already built: `pos` holds `positions.len()`
    /// numbers per row and `costs` `events` costs per row. Lines are then
    /// added with [`Self::push_row`] (or [`Self::push`], which adds a row).
    ///
    /// # Panics
    /// When the two arrays do not hold the same number of whole rows.
    pub fn with_rows(positions: Positions, events: usize, pos: Vec<u64>, costs: Vec<C>) -> Self {
        let np = positions.len();
        let rows = row_count(&pos, &costs, np, events);
        assert!(
            pos.len() == rows * np && costs.len() == rows * events,
            "rows of {np} positions and {events} costs"
        );
        CostLines {
            positions: np,
            events,
            blocks: Vec::new(),
            store: Store::Rows {
                pos,
                costs,
                order: Vec::new(),
            },
            len: 0,
        }
    }

    /// Appends a line whose positions and costs are row `row` of those
    /// given to [`Self::with_rows`].
    ///
    /// # Panics
    /// When the lines are coded, or there is no such row.
    pub fn push_row(&mut self, function: FunctionId, file: FileId, row: u32) {
        let Store::Rows { costs, pos, order } = &mut self.store else {
            panic!("push_row on coded lines");
        };
        let end = row as usize + 1;
        assert!(
            end * self.positions <= pos.len() && end * self.events <= costs.len(),
            "no row {row}"
        );
        order.push(row);
        self.start_block(function, file);
        self.len += 1;
    }

    /// Starts a block unless the last one has this function and file.
    #[inline]
    fn start_block(&mut self, function: FunctionId, file: FileId) -> bool {
        let new_block = match self.blocks.last() {
            Some(b) => b.function != function || b.file != file,
            None => true,
        };
        if new_block {
            let byte_start = match &self.store {
                Store::Coded { data, .. } => data.len() as u64,
                Store::Rows { .. } => 0,
            };
            self.blocks.push(Block {
                function,
                file,
                first_line: self.len,
                byte_start,
            });
        }
        new_block
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
        let lines = match &self.store {
            Store::Coded { data, .. } => data.len(),
            Store::Rows { pos, costs, order } => {
                pos.len() * 8 + std::mem::size_of_val(costs.as_slice()) + order.len() * 4
            }
        };
        lines + self.blocks.len() * std::mem::size_of::<Block>()
    }

    /// Bytes of memory held (allocated, not only used), for a memory
    /// ceiling.
    pub fn heap_bytes(&self) -> usize {
        let lines = match &self.store {
            Store::Coded { data, .. } => data.capacity(),
            Store::Rows { pos, costs, order } => {
                pos.capacity() * 8
                    + costs.capacity() * std::mem::size_of::<C>()
                    + order.capacity() * 4
            }
        };
        lines + self.blocks.capacity() * std::mem::size_of::<Block>()
    }

    /// Appends a line. `positions` must have one value per position kind and
    /// `costs` at most one value per event (missing ones are zero).
    pub fn push(&mut self, function: FunctionId, file: FileId, positions: &[u64], costs: &[C]) {
        debug_assert_eq!(positions.len(), self.positions);
        debug_assert!(costs.len() <= self.events);
        let new_block = self.start_block(function, file);
        match &mut self.store {
            Store::Coded { data, last } => {
                if new_block {
                    *last = [0; 3];
                }
                for (i, &p) in positions.iter().enumerate() {
                    put_varint(data, zigzag_delta(p.wrapping_sub(last[i])));
                    last[i] = p;
                }
                let n = costs
                    .iter()
                    .rposition(|c| !c.is_zero())
                    .map_or(0, |i| i + 1);
                put_varint(data, n as u64);
                for &c in &costs[..n] {
                    put_varint(data, c.to_zigzag());
                }
            }
            Store::Rows {
                pos,
                costs: rows,
                order,
            } => {
                let row = row_count(pos, rows, self.positions, self.events);
                order.push(u32::try_from(row).expect("fewer than 2^32 rows"));
                pos.extend_from_slice(positions);
                rows.extend_from_slice(costs);
                rows.extend(std::iter::repeat_n(C::ZERO, self.events - costs.len()));
            }
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
            costs: self.decode_buffer(),
        }
    }

    /// Where a cursor decodes costs (rows are borrowed instead).
    fn decode_buffer(&self) -> Vec<C> {
        match self.store {
            Store::Coded { .. } => vec![C::ZERO; self.events],
            Store::Rows { .. } => Vec::new(),
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
            costs: self.decode_buffer(),
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
        let data = match &lines.store {
            Store::Coded { data, .. } => data,
            Store::Rows { pos, costs, order } => {
                let (np, ne) = (lines.positions, lines.events);
                let r = order[self.index as usize] as usize;
                self.index += 1;
                return Some(LineRef {
                    function: b.function,
                    file: b.file,
                    positions: &pos[r * np..(r + 1) * np],
                    costs: &costs[r * ne..(r + 1) * ne],
                });
            }
        };
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
    info: Vec<StoredCall>,
    pos: Vec<u64>,
    costs: Vec<C>,
}

/// A 64-bit number as two 32-bit halves (low first), so that a stored
/// record has no padding.
fn halves(v: u64) -> [u32; 2] {
    [v as u32, (v >> 32) as u32]
}

/// The number [`halves`] split.
fn whole(h: [u32; 2]) -> u64 {
    u64::from(h[0]) | (u64::from(h[1]) << 32)
}

/// A [`CallInfo`] as a part keeps it: 28 bytes instead of 32 (large
/// profiles hold millions of calls): caller, site file, callee, the
/// count's bits and `seq`, as 32-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StoredCall([u32; 7]);

impl StoredCall {
    fn new<C: Cost>(i: &CallInfo<C>) -> StoredCall {
        let [c0, c1] = halves(i.count.to_zigzag());
        let [s0, s1] = halves(i.seq);
        StoredCall([i.caller.0, i.site_file.0, i.callee.0, c0, c1, s0, s1])
    }

    fn info<C: Cost>(self) -> CallInfo<C> {
        let w = self.0;
        CallInfo {
            caller: FunctionId(w[0]),
            site_file: FileId(w[1]),
            callee: FunctionId(w[2]),
            count: C::from_zigzag(whole([w[3], w[4]])),
            seq: self.seq(),
        }
    }

    fn seq(self) -> u64 {
        whole([self.0[5], self.0[6]])
    }
}

impl<C: Cost> Calls<C> {
    /// Bytes of memory held, for a memory ceiling.
    pub fn heap_bytes(&self) -> usize {
        self.info.capacity() * std::mem::size_of::<StoredCall>()
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
        self.info.push(StoredCall::new(&info));
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
            info: self.info[i].info(),
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
    info: Vec<StoredJump>,
    pos: Vec<u64>,
    cost: std::marker::PhantomData<C>,
}

/// A [`JumpInfo`] as a part keeps it: 40 bytes instead of 48 (large
/// profiles hold millions of jumps): the two functions and files, the
/// bits of the two counts, and `seq` with `conditional` as its top bit,
/// as 32-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct StoredJump([u32; 10]);

/// Where [`StoredJump`] keeps `conditional`: no part holds 2^63 records.
const CONDITIONAL: u64 = 1 << 63;

impl StoredJump {
    fn new<C: Cost>(i: &JumpInfo<C>) -> StoredJump {
        let [e0, e1] = halves(i.executed.to_zigzag());
        let [t0, t1] = halves(i.taken.to_zigzag());
        let flag = if i.conditional { CONDITIONAL } else { 0 };
        let [s0, s1] = halves(i.seq | flag);
        StoredJump([
            i.function.0,
            i.file.0,
            i.target_function.0,
            i.target_file.0,
            e0,
            e1,
            t0,
            t1,
            s0,
            s1,
        ])
    }

    fn info<C: Cost>(self) -> JumpInfo<C> {
        let w = self.0;
        JumpInfo {
            function: FunctionId(w[0]),
            file: FileId(w[1]),
            target_function: FunctionId(w[2]),
            target_file: FileId(w[3]),
            conditional: whole([w[8], w[9]]) & CONDITIONAL != 0,
            executed: C::from_zigzag(whole([w[4], w[5]])),
            taken: C::from_zigzag(whole([w[6], w[7]])),
            seq: self.seq(),
        }
    }

    fn seq(self) -> u64 {
        whole([self.0[8], self.0[9]]) & !CONDITIONAL
    }
}

impl<C: Cost> Jumps<C> {
    /// Bytes of memory held, for a memory ceiling.
    pub fn heap_bytes(&self) -> usize {
        self.info.capacity() * std::mem::size_of::<StoredJump>() + self.pos.capacity() * 8
    }

    /// No jumps yet.
    pub fn new(positions: Positions) -> Self {
        Jumps {
            positions: positions.len(),
            info: Vec::new(),
            pos: Vec::new(),
            cost: std::marker::PhantomData,
        }
    }

    /// Appends a jump.
    pub fn push(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        debug_assert_eq!(source.len(), self.positions);
        debug_assert!(info.seq < CONDITIONAL);
        self.info.push(StoredJump::new(&info));
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
            info: self.info[i].info(),
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
#[derive(Clone, Debug)]
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

/// Equal when every field is; written out because lines compare by what
/// they hold, which needs [`Cost`].
impl<C: Cost> PartialEq for Part<C> {
    fn eq(&self, o: &Self) -> bool {
        let Part {
            info,
            lines,
            calls,
            jumps,
        } = self;
        *info == o.info && *lines == o.lines && *calls == o.calls && *jumps == o.jumps
    }
}

impl<C: Cost> Eq for Part<C> {}

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
            if ci < self.calls.len() && self.calls.info[ci].seq() == seq {
                v.call(self.calls.get(ci));
                ci += 1;
            } else if ji < self.jumps.len() && self.jumps.info[ji].seq() == seq {
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

    /// Lines as (function, file, positions, costs), through both readers.
    fn lines_of(l: &CostLines<i64>) -> Vec<(u32, u32, Vec<u64>, Vec<i64>)> {
        let mut all = Vec::new();
        l.for_each(|r| {
            all.push((
                r.function.0,
                r.file.0,
                r.positions.to_vec(),
                r.costs.to_vec(),
            ))
        });
        let mut by_block = Vec::new();
        for b in 0..l.blocks().len() {
            l.for_each_in_block(b, |r| {
                by_block.push((
                    r.function.0,
                    r.file.0,
                    r.positions.to_vec(),
                    r.costs.to_vec(),
                ))
            });
        }
        assert_eq!(all, by_block);
        all
    }

    #[test]
    fn rows_hold_the_same_lines_as_the_arena() {
        let pos = Positions::INSTR_LINE;
        // Rows 0..4; row 3 is named by no line and row 1 by two.
        let rows_pos = vec![10, 1, 12, 2, 9, 3, 7, 7, 11, 4];
        let rows_costs = vec![1, 0, 2, -3, 0, 0, 99, 99, 4, 5];
        let mut rows = CostLines::with_rows(pos, 2, rows_pos.clone(), rows_costs.clone());
        let mut coded = CostLines::<i64>::new(pos, 2);
        let order = [(1, 1, 0), (1, 1, 1), (1, 2, 2), (2, 2, 4), (2, 2, 1)];
        for &(f, fl, r) in &order {
            rows.push_row(FunctionId(f), FileId(fl), r);
            let r = r as usize;
            coded.push(
                FunctionId(f),
                FileId(fl),
                &rows_pos[2 * r..2 * r + 2],
                &rows_costs[2 * r..2 * r + 2],
            );
        }
        // A line pushed with its numbers is a new row.
        rows.push(FunctionId(3), FileId(1), &[5, 6], &[7]);
        coded.push(FunctionId(3), FileId(1), &[5, 6], &[7, 0]);
        assert_eq!(rows.len(), 6);
        assert_eq!(rows.blocks().len(), 4);
        assert_eq!(lines_of(&rows), lines_of(&coded));
        assert_eq!(lines_of(&rows)[4], (2, 2, vec![12, 2], vec![2, -3]));
        assert_eq!(rows, coded);
        assert_eq!(coded, rows);
        assert_eq!(rows.totals(), coded.totals());
        // One cost apart, or one line fewer, is another set of lines.
        let mut other = CostLines::<i64>::new(pos, 2);
        for l in &lines_of(&coded)[..5] {
            other.push(FunctionId(l.0), FileId(l.1), &l.2, &l.3);
        }
        assert_ne!(rows, other);
        other.push(FunctionId(3), FileId(1), &[5, 6], &[8]);
        assert_ne!(rows, other);
    }

    #[test]
    fn calls_and_jumps_keep_every_field() {
        let pos = Positions::INSTR_LINE;
        let mut calls = Calls::<i64>::new(pos, 2);
        let mut jumps = Jumps::<i64>::new(pos);
        let mut want_calls = Vec::new();
        let mut want_jumps = Vec::new();
        for (k, &(count, seq)) in [
            (i64::MIN, 0),
            (-1, (1 << 63) - 1),
            (i64::MAX, 1 << 32),
            (7, 3),
        ]
        .iter()
        .enumerate()
        {
            let k = k as u32;
            let c = CallInfo {
                caller: FunctionId(u32::MAX - k),
                site_file: FileId(k),
                callee: FunctionId(k * 3),
                count,
                seq,
            };
            calls.push(c, &[u64::MAX, 1], &[2, 3], &[count]);
            want_calls.push(c);
            let j = JumpInfo {
                function: FunctionId(k),
                file: FileId(u32::MAX - k),
                target_function: FunctionId(k + 9),
                target_file: FileId(k + 1),
                conditional: k % 2 == 1,
                executed: count,
                taken: count.wrapping_neg(),
                seq,
            };
            jumps.push(j, &[k.into(), 5], &[u64::MAX, 6]);
            want_jumps.push(j);
        }
        let got: Vec<_> = calls.iter().map(|c| c.info).collect();
        assert_eq!(got, want_calls);
        assert_eq!(calls.get(1).inclusive, &[-1, 0]);
        assert_eq!(calls.get(0).site, &[u64::MAX, 1]);
        let got: Vec<_> = jumps.iter().map(|j| j.info).collect();
        assert_eq!(got, want_jumps);
        assert_eq!(jumps.get(2).source, &[2, 5]);
        assert_eq!(jumps.get(2).target, &[u64::MAX, 6]);
    }

    #[test]
    #[should_panic(expected = "no row 2")]
    fn a_line_of_a_missing_row_is_refused() {
        let mut rows = CostLines::with_rows(Positions::LINE, 1, vec![1, 2], vec![3u64, 4]);
        rows.push_row(FunctionId(0), FileId(0), 1);
        rows.push_row(FunctionId(0), FileId(0), 2);
    }
}
