//! Sums and differences of profiles: `tally merge` and `tally diff`.
//!
//! A [`Combiner`] folds profiles, each with a sign, into one: self-cost
//! lines are summed per (function, source file, positions), call arcs per
//! (caller, call-site file, callee, site and target positions) with their
//! counts and inclusive costs, jumps per (source and target function, file
//! and position, kind) with their counts. Names are re-interned (after the
//! optional renames of `--mod-filename`/`--mod-funcname`), events are
//! matched by name, and each input part goes to the output part of the same
//! index, or to one part when parts are combined.
//!
//! Records keep the order in which they were first seen, grouped by
//! (function, file) block, so merging one profile gives back its own order.
//! Arithmetic is checked: an overflow is an error, never a wrap.
//!
//! Whole stacks ([`Profile::stacks`], from perf, folded or pprof input)
//! are combined too when every input has them: frames are matched by
//! function (object, file and name, after the renames) and line, not by
//! id or address (two builds place code differently), and equal stacks
//! summed with their sign; so a merge or diff of stack profiles still
//! draws and exports real stacks. One input without stacks drops them.

use crate::Error;
use crate::folding::{
    BlockKeys, BlockLines, CallKey, FoldPart, Folding, JumpKey, KeyedBlocks, Pos, PosList, pos,
};
use crate::subst::Subst;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::borrow::Cow;
use tally_model::{
    CallInfo, Cost, CostLines, Events, FileId, Format, Frame, FrameId, FunctionId, FunctionKey,
    JumpInfo, Names, ObjectId, Part, PartInfo, Positions, Profile, Stacks, SymbolId, stated_total,
};

/// Which events the output has.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum EventChoice {
    /// Every input must have the first input's events (any order).
    #[default]
    Same,
    /// These events, which every input must have; others are dropped.
    Only(Vec<String>),
}

/// How to combine.
#[derive(Clone, Debug, Default)]
pub struct CombineOptions {
    /// The output's events.
    pub events: EventChoice,
    /// Sum all parts into one part (otherwise part `i` of every input goes
    /// to part `i` of the output).
    pub combine_parts: bool,
    /// One cost line per function at line 0, as cg_diff compares.
    pub per_function: bool,
    /// Keep records whose costs and counts are all zero (a merge keeps what
    /// its inputs had; a diff drops what did not change).
    pub keep_zero: bool,
    /// Applied to every file name (`--mod-filename`).
    pub rename_file: Option<Subst>,
    /// Applied to every function name (`--mod-funcname`).
    pub rename_function: Option<Subst>,
}

/// Add or subtract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sign {
    /// Add the profile.
    Plus,
    /// Subtract the profile.
    Minus,
}

const NP: usize = 3;

#[derive(Clone, Copy)]
enum Rec {
    Line(u32),
    Call(u32),
    Jump(u32),
}

/// The records of one (function, file) of an output part.
struct BlockAcc {
    function: FunctionId,
    file: FileId,
    /// Lines, calls and jumps in first-seen order (inline up to two: a
    /// block of a diff per function holds one).
    recs: SmallVec<[Rec; 2]>,
    /// The block's lines (indices into the part's line arrays), found
    /// without hashing when they come in the order seen before or in
    /// increasing positions; a per-block index otherwise, small enough to
    /// stay in cache while the block is folded.
    lines: BlockLines,
    /// The block's calls and jumps (indices into the part's), found alike.
    calls: BlockKeys<CallKey>,
    jumps: BlockKeys<JumpKey>,
}

/// One output part being built.
struct PartAcc<C> {
    info: Option<PartInfo<u64>>,
    blocks: Vec<BlockAcc>,
    block_index: FxHashMap<(FunctionId, FileId), u32>,
    line_pos: PosList,
    line_costs: Vec<C>,
    calls: Vec<(CallKey, C)>,
    call_costs: Vec<C>,
    jumps: Vec<(JumpKey, C, C)>,
    /// The blocks of the call and of the jump added last: a new run of a
    /// block starts its search at its first record.
    call_block: usize,
    jump_block: usize,
    /// Sum of the inputs' stated totals, while every input states them.
    stated: Option<Vec<i128>>,
}

impl<C: Cost> PartAcc<C> {
    /// A part of `events` events and positions of `kinds` numbers.
    fn new(events: usize, kinds: usize) -> Self {
        PartAcc {
            info: None,
            blocks: Vec::new(),
            block_index: FxHashMap::default(),
            line_pos: PosList::new(kinds),
            line_costs: Vec::new(),
            calls: Vec::new(),
            call_costs: Vec::new(),
            jumps: Vec::new(),
            call_block: usize::MAX,
            jump_block: usize::MAX,
            stated: Some(vec![0; events]),
        }
    }

    fn block(&mut self, function: FunctionId, file: FileId) -> usize {
        let n = self.blocks.len() as u32;
        let b = *self.block_index.entry((function, file)).or_insert(n);
        if b == n {
            self.blocks.push(BlockAcc {
                function,
                file,
                recs: SmallVec::new(),
                lines: BlockLines::new(),
                calls: BlockKeys::new(),
                jumps: BlockKeys::new(),
            });
        }
        b as usize
    }
}

/// An input's names and events in the output's terms.
struct Mapping {
    /// For each output event, its index in the input.
    events: Vec<usize>,
    functions: Vec<FunctionId>,
    files: Vec<FileId>,
}

impl Mapping {
    #[inline]
    fn function(&self, f: FunctionId) -> FunctionId {
        self.functions[f.index()]
    }

    #[inline]
    fn file(&self, f: FileId) -> FileId {
        self.files[f.index()]
    }

    fn call_key<I: Cost>(
        &self,
        c: &CallInfo<I>,
        site: &[u64],
        target: &[u64],
        per_function: bool,
    ) -> CallKey {
        CallKey {
            caller: self.function(c.caller),
            site_file: self.file(c.site_file),
            callee: self.function(c.callee),
            site: key_pos(site, per_function),
            target: key_pos(target, per_function),
        }
    }

    fn jump_key<I: Cost>(
        &self,
        j: &JumpInfo<I>,
        source: &[u64],
        target: &[u64],
        per_function: bool,
    ) -> JumpKey {
        JumpKey {
            function: self.function(j.function),
            file: self.file(j.file),
            target_function: self.function(j.target_function),
            target_file: self.file(j.target_file),
            conditional: j.conditional,
            source: key_pos(source, per_function),
            target: key_pos(target, per_function),
        }
    }
}

/// The positions a record is summed at: line 0 per function when asked.
#[inline]
fn key_pos(p: &[u64], per_function: bool) -> Pos {
    if per_function { [0; NP] } else { pos(p) }
}

/// Folds the lines of one input block into an output block.
struct LineFold<'a, C> {
    block: &'a mut BlockAcc,
    line_pos: &'a mut PosList,
    line_costs: &'a mut Vec<C>,
    ne: usize,
    per_function: bool,
    events: &'a [usize],
    sign: Sign,
}

impl<'a, C: Cost> LineFold<'a, C> {
    fn new(
        acc: &'a mut PartAcc<C>,
        b: usize,
        per_function: bool,
        events: &'a [usize],
        sign: Sign,
    ) -> Self {
        let block = &mut acc.blocks[b];
        block.lines.rewind();
        LineFold {
            block,
            line_pos: &mut acc.line_pos,
            line_costs: &mut acc.line_costs,
            ne: events.len(),
            per_function,
            events,
            sign,
        }
    }

    /// Adds one line; on failure the output's value and the input's.
    #[inline]
    fn add<I: Cost>(&mut self, positions: &[u64], costs: &[I]) -> Result<(), (C, I, usize)> {
        let ne = self.ne;
        let key = key_pos(positions, self.per_function);
        let (i, new) = self.block.lines.find_or_add(key, self.line_pos, &mut 0);
        if new {
            self.line_costs.extend(std::iter::repeat_n(C::ZERO, ne));
            self.block.recs.push(Rec::Line(i as u32));
        }
        let dst = &mut self.line_costs[i * ne..(i + 1) * ne];
        let mut failed = None;
        for (o, &e) in self.events.iter().enumerate() {
            let v = costs.get(e).copied().unwrap_or(I::ZERO);
            match combine(dst[o], v, self.sign) {
                Some(r) => dst[o] = r,
                None => {
                    failed.get_or_insert((dst[o], v, o));
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

impl<C: Cost> PartAcc<C> {
    /// Becomes the folded part `fp` of an input whose names, events and
    /// positions are the output's, into this empty part: its arrays are
    /// moved and each block's records listed in the order
    /// [`Combiner::add_folded`] adds them (lines, then calls, then jumps).
    fn adopt(&mut self, fp: FoldPart<C>) {
        let KeyedBlocks {
            index: block_index,
            blocks,
            ..
        } = fp.line_blocks;
        self.blocks = blocks
            .into_iter()
            .map(|((function, file), lines)| BlockAcc {
                function,
                file,
                recs: lines.items.iter().map(|&i| Rec::Line(i)).collect(),
                lines,
                calls: BlockKeys::new(),
                jumps: BlockKeys::new(),
            })
            .collect();
        self.block_index = block_index;
        self.line_pos = fp.line_pos;
        self.line_costs = fp.line_costs;
        for (i, (k, _)) in fp.calls.iter().enumerate() {
            let b = self.block(k.caller, k.site_file);
            let block = &mut self.blocks[b];
            block.recs.push(Rec::Call(i as u32));
            block
                .calls
                .find_or_insert(*k, |j| fp.calls[j as usize].0, i as u32, &mut 0);
        }
        for (i, (k, _, _)) in fp.jumps.iter().enumerate() {
            let b = self.block(k.function, k.file);
            let block = &mut self.blocks[b];
            block.recs.push(Rec::Jump(i as u32));
            block
                .jumps
                .find_or_insert(*k, |j| fp.jumps[j as usize].0, i as u32, &mut 0);
        }
        self.calls = fp.calls;
        self.call_costs = fp.call_costs;
        self.jumps = fp.jumps;
    }

    /// The block of `(function, file)` for a call (`jump` false) or jump,
    /// its search rewound when it is not the block of the last one.
    #[inline]
    fn keyed_block(&mut self, function: FunctionId, file: FileId, jump: bool) -> usize {
        let last = if jump {
            self.jump_block
        } else {
            self.call_block
        };
        if let Some(b) = self.blocks.get(last)
            && b.function == function
            && b.file == file
        {
            return last;
        }
        let b = self.block(function, file);
        if jump {
            self.blocks[b].jumps.rewind();
            self.jump_block = b;
        } else {
            self.blocks[b].calls.rewind();
            self.call_block = b;
        }
        b
    }

    /// Adds one call; on failure the output's value and the input's.
    fn add_call<I: Cost>(
        &mut self,
        key: CallKey,
        count: I,
        inclusive: &[I],
        events: &[usize],
        sign: Sign,
    ) -> Result<(), (C, I, &'static str)> {
        let ne = events.len();
        let b = self.keyed_block(key.caller, key.site_file, false);
        let calls = &self.calls;
        let (i, new) = self.blocks[b].calls.find_or_insert(
            key,
            |i| calls[i as usize].0,
            calls.len() as u32,
            &mut 0,
        );
        let i = i as usize;
        if new {
            self.calls.push((key, C::ZERO));
            self.call_costs.extend(std::iter::repeat_n(C::ZERO, ne));
            self.blocks[b].recs.push(Rec::Call(i as u32));
        }
        let c = &mut self.calls[i].1;
        *c = combine(*c, count, sign).ok_or((*c, count, "call counts"))?;
        let dst = &mut self.call_costs[i * ne..(i + 1) * ne];
        for (o, &e) in events.iter().enumerate() {
            let v = inclusive.get(e).copied().unwrap_or(I::ZERO);
            dst[o] = combine(dst[o], v, sign).ok_or((dst[o], v, "inclusive costs"))?;
        }
        Ok(())
    }

    /// Adds one jump; on failure the output's value and the input's.
    fn add_jump<I: Cost>(
        &mut self,
        key: JumpKey,
        executed: I,
        taken: I,
        sign: Sign,
    ) -> Result<(), (C, I, &'static str)> {
        let b = self.keyed_block(key.function, key.file, true);
        let jumps = &self.jumps;
        let (i, new) = self.blocks[b].jumps.find_or_insert(
            key,
            |i| jumps[i as usize].0,
            jumps.len() as u32,
            &mut 0,
        );
        if new {
            self.jumps.push((key, C::ZERO, C::ZERO));
            self.blocks[b].recs.push(Rec::Jump(i));
        }
        let r = &mut self.jumps[i as usize];
        r.1 = combine(r.1, executed, sign).ok_or((r.1, executed, "execution counts"))?;
        r.2 = combine(r.2, taken, sign).ok_or((r.2, taken, "taken counts"))?;
        Ok(())
    }
}

/// Adds `v` (of any cost type) to `acc` with a sign; `None` on overflow.
#[inline]
fn combine<C: Cost, I: Cost>(acc: C, v: I, sign: Sign) -> Option<C> {
    let v = v.to_i128();
    let r = match sign {
        Sign::Plus => acc.to_i128() + v,
        Sign::Minus => acc.to_i128() - v,
    };
    C::from_i128(r)
}

/// Why `combine` failed: a negative result in an unsigned sum, or an
/// overflow.
#[cold]
fn arith_failure<C: Cost, I: Cost>(
    acc: C,
    v: I,
    sign: Sign,
    label: &str,
    function: &[u8],
    what: impl FnOnce() -> String,
) -> Error {
    let r = match sign {
        Sign::Plus => acc.to_i128() + v.to_i128(),
        Sign::Minus => acc.to_i128() - v.to_i128(),
    };
    if r < 0 && !C::SIGNED {
        Error::Negative {
            input: label.into(),
        }
    } else {
        Error::Overflow {
            input: label.into(),
            function: String::from_utf8_lossy(function).into_owned(),
            what: what(),
            signed: C::SIGNED,
        }
    }
}

/// What overflowed in adding a cost line of `p`: its event `event`.
fn line_what<I: Cost>(p: &Profile<I>, event: usize, pos: &[u64]) -> String {
    let name = p
        .events
        .recorded()
        .get(event)
        .map_or("?", |e| e.name.as_str());
    format!("the sum of event `{name}` at {}", at(p.positions, pos))
}

/// What overflowed in adding a call to `callee` from `site`.
fn call_what(what: &str, callee: &[u8], positions: Positions, site: &[u64]) -> String {
    format!(
        "the sum of the {what} of the call to `{}` at {}",
        String::from_utf8_lossy(callee),
        at(positions, site)
    )
}

/// What overflowed in adding a jump from `source` to `target`.
fn jump_what(what: &str, positions: Positions, source: &[u64], target: &[u64]) -> String {
    format!(
        "the sum of the {what} of the jump at {} to {}",
        at(positions, source),
        at(positions, target)
    )
}

/// A record's positions as a reader of the profile names them:
/// `line 12`, `instr 0x4005d0 line 12`.
fn at(positions: Positions, pos: &[u64]) -> String {
    positions
        .names()
        .iter()
        .zip(pos)
        .map(|(name, v)| match *name {
            "line" => format!("line {v}"),
            _ => format!("{name} {v:#x}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Folds profiles into one; see the module documentation.
pub struct Combiner<C> {
    options: CombineOptions,
    format: Format,
    version: Option<u64>,
    creator: Option<Vec<u8>>,
    events: Option<Events>,
    positions: Positions,
    names: tally_model::Names,
    parts: Vec<PartAcc<C>>,
    first: String,
    /// Every input added, for the errors about the result.
    labels: Vec<String>,
    /// The stacks so far; `None` once an input had none.
    stacks: Option<Stacks<C>>,
    /// Frames of `stacks` by (function, line): the first address kept.
    frame_of: FxHashMap<(FunctionId, u32), FrameId>,
}

impl<C: Cost> Combiner<C> {
    /// A combiner with nothing added yet.
    pub fn new(options: CombineOptions) -> Self {
        Combiner {
            options,
            format: Format::Callgrind,
            version: None,
            creator: None,
            events: None,
            positions: Positions::LINE,
            names: tally_model::Names::default(),
            parts: Vec::new(),
            first: String::new(),
            labels: Vec::new(),
            stacks: Some(Stacks::default()),
            frame_of: FxHashMap::default(),
        }
    }

    /// The output's events, decided by the first profile added.
    pub fn events(&self) -> Option<&Events> {
        self.events.as_ref()
    }

    fn setup<I: Cost>(&mut self, p: &Profile<I>, label: &str) -> Result<(), Error> {
        self.format = p.format;
        self.version = p.version;
        self.creator = p.creator.clone();
        self.positions = if self.options.per_function {
            Positions::LINE
        } else {
            p.positions
        };
        self.first = label.to_string();
        let names: Vec<String> = match &self.options.events {
            EventChoice::Same => p.events.recorded().iter().map(|e| e.name.clone()).collect(),
            EventChoice::Only(v) => v.clone(),
        };
        let mut events = Events::new(names.iter().cloned()).map_err(|_| Error::Events {
            input: label.to_string(),
            found: names.join(" "),
            expected: names.join(" "),
            first: "--events".into(),
        })?;
        for e in p.events.recorded() {
            if let Some(l) = &e.long_name
                && names.contains(&e.name)
            {
                events.set_long_name(&e.name, l.clone());
            }
        }
        // Derived events survive when every term they use is kept.
        let mut derived = p.events.derived().to_vec();
        loop {
            let before = derived.len();
            let known: Vec<String> = names
                .iter()
                .cloned()
                .chain(derived.iter().map(|d| d.name.clone()))
                .collect();
            derived.retain(|d| d.terms.iter().all(|t| known.contains(&t.event)));
            if derived.len() == before {
                break;
            }
        }
        for d in derived {
            events.add_derived(d.name, d.long_name, d.terms);
        }
        let _ = events.resolve();
        self.events = Some(events);
        Ok(())
    }

    /// Adds (or subtracts) a profile. `label` names it in errors.
    pub fn add<I: Cost>(&mut self, p: &Profile<I>, sign: Sign, label: &str) -> Result<(), Error> {
        let map = self.prepare(p, label)?;
        let per_function = self.options.per_function;
        for (pi, part) in p.parts.iter().enumerate() {
            let ne = self.events.as_ref().map_or(0, Events::len);
            let acc = self.part_for(
                pi,
                ne,
                &part.info,
                stated_total(part, p.events.len()),
                &map,
                sign,
            );
            if acc.line_pos.is_empty() {
                // The first input sets the size: reserve once, not by
                // doubling (copies and page faults).
                let n = part.lines.len() as usize;
                acc.line_pos.reserve(n);
                acc.line_costs.reserve(n * ne);
            }
            let mut failed: Option<Error> = None;
            for (bi, blk) in part.lines.blocks().iter().enumerate() {
                let b = acc.block(map.function(blk.function), map.file(blk.file));
                let mut fold = LineFold::new(acc, b, per_function, &map.events, sign);
                part.lines.for_each_in_block(bi, |l| {
                    if let Err((d, v, e)) = fold.add(l.positions, l.costs)
                        && failed.is_none()
                    {
                        failed = Some(arith_failure(
                            d,
                            v,
                            sign,
                            label,
                            p.names.function_name(blk.function),
                            || line_what(p, map.events[e], l.positions),
                        ));
                    }
                });
            }
            if let Some(e) = failed {
                return Err(e);
            }
            for c in part.calls.iter() {
                let key = map.call_key(&c.info, c.site, c.target, per_function);
                acc.add_call(key, c.info.count, c.inclusive, &map.events, sign)
                    .map_err(|(d, v, what)| {
                        arith_failure(
                            d,
                            v,
                            sign,
                            label,
                            p.names.function_name(c.info.caller),
                            || {
                                call_what(
                                    what,
                                    p.names.function_name(c.info.callee),
                                    p.positions,
                                    c.site,
                                )
                            },
                        )
                    })?;
            }
            for j in part.jumps.iter() {
                let key = map.jump_key(&j.info, j.source, j.target, per_function);
                acc.add_jump(key, j.info.executed, j.info.taken, sign)
                    .map_err(|(d, v, what)| {
                        arith_failure(
                            d,
                            v,
                            sign,
                            label,
                            p.names.function_name(j.info.function),
                            || jump_what(what, p.positions, j.source, j.target),
                        )
                    })?;
            }
        }
        self.add_stacks(p, &map.functions, &map.events, sign, label)
    }

    /// Adds (or subtracts) an input folded as it was read: `p` is the
    /// read's profile without records (header facts, names, parts' facts
    /// and stated totals), `folded` the records its reader pushed. The
    /// result is what [`Combiner::add`] gives for the profile `p` with
    /// those records, without building it.
    pub fn add_folded<I: Cost>(
        &mut self,
        p: &Profile<I>,
        folded: &Folding<I>,
        sign: Sign,
        label: &str,
    ) -> Result<(), Error> {
        let map = self.prepare(p, label)?;
        let ne = self.events.as_ref().map_or(0, Events::len);
        let default_info = PartInfo::default();
        for pi in 0..p.parts.len().max(folded.parts.len()) {
            let (info, stated) = match p.parts.get(pi) {
                Some(part) => (&part.info, stated_total(part, p.events.len())),
                None => (&default_info, None),
            };
            self.part_for(pi, ne, info, stated, &map, sign);
            if let Some(fp) = folded.parts.get(pi) {
                self.fold_part(pi, fp, &map, p, sign, label)?;
            }
        }
        self.add_stacks(p, &map.functions, &map.events, sign, label)
    }

    /// [`Combiner::add_folded`], taking the folding of an input with the
    /// output's cost type: an input part that lands in an output part still
    /// empty, added with its own names, events and positions (the first
    /// input of a merge), becomes that part as it is, its arrays moved
    /// rather than folded again. The result is the same.
    pub fn add_folded_owned(
        &mut self,
        p: &Profile<C>,
        mut folded: Folding<C>,
        sign: Sign,
        label: &str,
    ) -> Result<(), Error> {
        let adopt = sign == Sign::Plus
            && self.events.is_none()
            && !self.options.per_function
            && !folded.is_per_function()
            && self.options.rename_file.is_none()
            && self.options.rename_function.is_none();
        if !adopt {
            return self.add_folded(p, &folded, sign, label);
        }
        let map = self.prepare(p, label)?;
        let ne = self.events.as_ref().map_or(0, Events::len);
        let same_names = map.events.iter().enumerate().all(|(o, &e)| o == e)
            && map.events.len() == p.events.len()
            && map
                .functions
                .iter()
                .enumerate()
                .all(|(i, f)| f.index() == i)
            && map.files.iter().enumerate().all(|(i, f)| f.index() == i);
        let default_info = PartInfo::default();
        let parts = std::mem::take(&mut folded.parts);
        let n = p.parts.len().max(parts.len());
        let mut parts = parts.into_iter();
        for pi in 0..n {
            let (info, stated) = match p.parts.get(pi) {
                Some(part) => (&part.info, stated_total(part, p.events.len())),
                None => (&default_info, None),
            };
            let acc = self.part_for(pi, ne, info, stated, &map, sign);
            let Some(fp) = parts.next() else {
                continue;
            };
            let fresh = acc.blocks.is_empty() && acc.calls.is_empty() && acc.jumps.is_empty();
            let same_kinds = fp.line_pos.kinds() == acc.line_pos.kinds();
            if same_names && fresh && same_kinds && fp.events == ne {
                acc.adopt(fp);
            } else {
                self.fold_part(pi, &fp, &map, p, sign, label)?;
            }
        }
        self.add_stacks(p, &map.functions, &map.events, sign, label)
    }

    /// Folds one input part into the output part `pi` goes to.
    fn fold_part<I: Cost>(
        &mut self,
        pi: usize,
        fp: &FoldPart<I>,
        map: &Mapping,
        p: &Profile<I>,
        sign: Sign,
        label: &str,
    ) -> Result<(), Error> {
        let per_function = self.options.per_function;
        let ne = self.events.as_ref().map_or(0, Events::len);
        let target = if self.options.combine_parts { 0 } else { pi };
        let acc = &mut self.parts[target];
        if acc.line_pos.is_empty() {
            acc.line_pos.reserve(fp.line_pos.len());
            acc.line_costs.reserve(fp.line_pos.len() * ne);
        }
        let ie = fp.events;
        // Without `keep_zero`, a record that sums to zero in its input is
        // not added, as if each input were summed alone and its zeros
        // dropped first: a diff then lists A's changed records in A's
        // order, and a block none of whose lines changed is made where
        // its first other record is.
        let keep_zero = self.options.keep_zero;
        let zero = |costs: &[I]| !keep_zero && costs.iter().all(|c| c.is_zero());
        for ((function, file), lines) in &fp.line_blocks.blocks {
            let costs = |i: u32| &fp.line_costs[i as usize * ie..(i as usize + 1) * ie];
            let Some(first) = lines.items.iter().position(|&i| !zero(costs(i))) else {
                continue;
            };
            let b = acc.block(map.function(*function), map.file(*file));
            let mut fold = LineFold::new(acc, b, per_function, &map.events, sign);
            for &i in &lines.items[first..] {
                if zero(costs(i)) {
                    continue;
                }
                let pos = fp.line_pos.get(i as usize);
                fold.add(&pos, costs(i)).map_err(|(d, v, e)| {
                    arith_failure(d, v, sign, label, p.names.function_name(*function), || {
                        line_what(p, map.events[e], &pos)
                    })
                })?;
            }
        }
        for (i, (k, count)) in fp.calls.iter().enumerate() {
            let inclusive = &fp.call_costs[i * ie..(i + 1) * ie];
            if count.is_zero() && zero(inclusive) {
                continue;
            }
            let info = CallInfo {
                caller: k.caller,
                site_file: k.site_file,
                callee: k.callee,
                count: *count,
                seq: 0,
            };
            let key = map.call_key(&info, &k.site, &k.target, per_function);
            acc.add_call(key, *count, inclusive, &map.events, sign)
                .map_err(|(d, v, what)| {
                    arith_failure(d, v, sign, label, p.names.function_name(k.caller), || {
                        call_what(what, p.names.function_name(k.callee), p.positions, &k.site)
                    })
                })?;
        }
        for (k, executed, taken) in &fp.jumps {
            if !keep_zero && executed.is_zero() && taken.is_zero() {
                continue;
            }
            let info = JumpInfo {
                function: k.function,
                file: k.file,
                target_function: k.target_function,
                target_file: k.target_file,
                conditional: k.conditional,
                executed: *executed,
                taken: *taken,
                seq: 0,
            };
            let key = map.jump_key(&info, &k.source, &k.target, per_function);
            acc.add_jump(key, *executed, *taken, sign)
                .map_err(|(d, v, what)| {
                    arith_failure(d, v, sign, label, p.names.function_name(k.function), || {
                        jump_what(what, p.positions, &k.source, &k.target)
                    })
                })?;
        }
        Ok(())
    }

    /// Checks an input against the output (format, positions, events) and
    /// maps its names and events to the output's.
    fn prepare<I: Cost>(&mut self, p: &Profile<I>, label: &str) -> Result<Mapping, Error> {
        self.labels.push(label.to_string());
        if self.events.is_none() {
            self.setup(p, label)?;
        } else if p.format != self.format {
            let name = |f| match f {
                Format::Callgrind => "Callgrind",
                Format::Cachegrind => "Cachegrind",
            };
            return Err(Error::Formats {
                input: label.into(),
                found: name(p.format),
                expected: name(self.format),
                first: self.first.clone(),
            });
        }
        if !self.options.per_function && p.positions != self.positions {
            return Err(Error::Positions {
                input: label.into(),
                found: p.positions.names().join(" "),
                expected: self.positions.names().join(" "),
                first: self.first.clone(),
            });
        }
        let events = self.event_map(p, label)?;

        if self.adopts_names(&p.names) {
            self.names = p.names.clone();
            return Ok(Mapping {
                events,
                functions: (0..p.names.function_count() as u32)
                    .map(FunctionId)
                    .collect(),
                files: (0..p.names.files.len() as u32).map(FileId).collect(),
            });
        }
        // Re-intern the input's names (renamed as asked). A name the sum
        // already holds at the input's own index is that index: the runs
        // of one program list their names in the same order, and the
        // lookups it saves were a good part of folding a second input.
        let (plain_files, plain_symbols) = (
            self.options.rename_file.is_none(),
            self.options.rename_function.is_none(),
        );
        let kept =
            |mine: &tally_model::Interner, theirs: &tally_model::Interner, unchanged: bool| {
                if !unchanged {
                    return 0;
                }
                (0..mine.len().min(theirs.len()) as u32)
                    .take_while(|&i| mine.get(i) == theirs.get(i))
                    .count() as u32
            };
        let same_files = kept(&self.names.files, &p.names.files, plain_files);
        let same_objects = kept(&self.names.objects, &p.names.objects, true);
        let same_symbols = kept(&self.names.symbols, &p.names.symbols, plain_symbols);
        let files: Vec<FileId> = p
            .names
            .files
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if (i as u32) < same_files {
                    return Some(FileId(i as u32));
                }
                let n = rename(n, self.options.rename_file.as_ref());
                self.names.files.try_intern(&n).map(FileId)
            })
            .collect::<Option<_>>()
            .ok_or(Error::TooManyNames)?;
        let mut functions = Vec::with_capacity(p.names.function_count());
        for (_, k) in p.names.functions() {
            let object = if k.object.0 < same_objects {
                k.object.0
            } else {
                self.names
                    .objects
                    .try_intern(p.names.objects.get(k.object.0))
                    .ok_or(Error::TooManyNames)?
            };
            let name = if k.name.0 < same_symbols {
                k.name.0
            } else {
                let name = rename(
                    p.names.symbols.get(k.name.0),
                    self.options.rename_function.as_ref(),
                );
                self.names
                    .symbols
                    .try_intern(&name)
                    .ok_or(Error::TooManyNames)?
            };
            let f = self
                .names
                .try_function(FunctionKey {
                    object: ObjectId(object),
                    file: files[k.file.index()],
                    name: SymbolId(name),
                })
                .ok_or(Error::TooManyNames)?;
            functions.push(f);
        }
        Ok(Mapping {
            events,
            functions,
            files,
        })
    }

    /// Whether re-interning `names` (below, in [`Combiner::prepare`]) would
    /// give a copy of them: nothing interned yet, no renaming, and every
    /// object and symbol first named by the functions in table order. The
    /// copy then costs a few `memcpy`s instead of a lookup per name.
    fn adopts_names(&self, names: &Names) -> bool {
        let fresh = |i: &tally_model::Interner| i.len() == 1;
        if !(fresh(&self.names.objects)
            && fresh(&self.names.files)
            && fresh(&self.names.symbols)
            && self.names.function_count() == 0
            && self.options.rename_file.is_none()
            && self.options.rename_function.is_none())
        {
            return false;
        }
        // Interning in the order the functions name them gives index i to
        // the i-th name first met: the input's own index if each new name
        // is the next one, and all are met.
        let (mut objects, mut symbols) = (1, 1);
        for (_, k) in names.functions() {
            for (id, next) in [(k.object.0, &mut objects), (k.name.0, &mut symbols)] {
                if id == *next {
                    *next += 1;
                } else if id > *next {
                    return false;
                }
            }
        }
        objects as usize == names.objects.len() && symbols as usize == names.symbols.len()
    }

    /// The output part input part `pi` goes to, its facts and stated
    /// totals taken in.
    fn part_for<I: Cost>(
        &mut self,
        pi: usize,
        ne: usize,
        info: &PartInfo<I>,
        stated: Option<&[I]>,
        map: &Mapping,
        sign: Sign,
    ) -> &mut PartAcc<C> {
        let target = if self.options.combine_parts { 0 } else { pi };
        while self.parts.len() <= target {
            self.parts.push(PartAcc::new(ne, self.positions.len()));
        }
        let acc = &mut self.parts[target];
        if acc.info.is_none() {
            acc.info = Some(info_u64(info));
        }
        acc.stated = match (acc.stated.take(), stated) {
            (Some(mut s), Some(t)) => {
                for (o, &i) in map.events.iter().enumerate() {
                    let v = t.get(i).map_or(0, |c| c.to_i128());
                    match sign {
                        Sign::Plus => s[o] += v,
                        Sign::Minus => s[o] -= v,
                    }
                }
                Some(s)
            }
            _ => None,
        };
        acc
    }

    /// Adds an input's stacks (see the module documentation); drops the
    /// stacks for good when it has none.
    fn add_stacks<I: Cost>(
        &mut self,
        p: &Profile<I>,
        functions: &[FunctionId],
        evmap: &[usize],
        sign: Sign,
        label: &str,
    ) -> Result<(), Error> {
        let (Some(acc), Some(from)) = (self.stacks.as_mut(), p.stacks.as_ref()) else {
            self.stacks = None;
            return Ok(());
        };
        let frames: Vec<FrameId> = from
            .frames
            .iter()
            .map(|f| {
                let function = functions[f.function.index()];
                *self.frame_of.entry((function, f.line)).or_insert_with(|| {
                    acc.frame(Frame {
                        function,
                        line: f.line,
                        address: f.address,
                    })
                })
            })
            .collect();
        let mut stack = Vec::new();
        let mut costs = Vec::with_capacity(evmap.len());
        for (si, sample) in from.samples.iter().enumerate() {
            stack.clear();
            stack.extend(sample.frames.iter().map(|f| frames[f.index()]));
            costs.clear();
            for &e in evmap {
                let v = sample.costs.get(e).copied().unwrap_or(I::ZERO);
                let leaf = sample
                    .frames
                    .last()
                    .map_or(FunctionId(0), |f| from.frames[f.index()].function);
                let c = combine(C::ZERO, v, sign).ok_or_else(|| {
                    arith_failure(C::ZERO, v, sign, label, p.names.function_name(leaf), || {
                        "a sample's cost".into()
                    })
                })?;
                costs.push(c);
            }
            let labels = acc.label_set(from.labels_of(si).to_vec());
            if acc.add_labelled(&stack, labels, &costs).is_none() {
                let leaf = sample
                    .frames
                    .last()
                    .map_or(FunctionId(0), |f| from.frames[f.index()].function);
                return Err(Error::Overflow {
                    input: label.into(),
                    function: String::from_utf8_lossy(p.names.function_name(leaf)).into_owned(),
                    what: "the sum of a stack's samples".into(),
                    signed: C::SIGNED,
                });
            }
        }
        Ok(())
    }

    /// For each output event, its index in `p`.
    fn event_map<I: Cost>(&self, p: &Profile<I>, label: &str) -> Result<Vec<usize>, Error> {
        let events = self.events.as_ref().expect("set up");
        let have: Vec<&str> = p
            .events
            .recorded()
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        let want: Vec<&str> = events.recorded().iter().map(|e| e.name.as_str()).collect();
        let mut map = Vec::with_capacity(want.len());
        for w in &want {
            match have.iter().position(|h| h == w) {
                Some(i) => map.push(i),
                None => {
                    return Err(match self.options.events {
                        EventChoice::Same => Error::Events {
                            input: label.into(),
                            found: have.join(" "),
                            expected: want.join(" "),
                            first: self.first.clone(),
                        },
                        EventChoice::Only(_) => Error::MissingEvent {
                            input: label.into(),
                            event: w.to_string(),
                            found: have.join(" "),
                        },
                    });
                }
            }
        }
        if self.options.events == EventChoice::Same && have.len() != want.len() {
            return Err(Error::Events {
                input: label.into(),
                found: have.join(" "),
                expected: want.join(" "),
                first: self.first.clone(),
            });
        }
        Ok(map)
    }

    /// Builds the output profile. The parts' `summary:`/`totals:` are the
    /// sums of the records; where the inputs stated theirs, the stated
    /// sums are returned too so that a caller can warn when they differ.
    pub fn finish(self) -> Result<Combined<C>, Error> {
        let events = self.events.ok_or(Error::Empty)?;
        let ne = events.len();
        let mut profile = Profile::new(self.format, events, self.positions);
        profile.version = self.version;
        profile.creator = self.creator;
        profile.names = self.names;
        let np = self.positions.len();
        let keep_zero = self.options.keep_zero;
        let labels = self.labels;
        profile.stacks = self.stacks.filter(|s| !s.is_empty()).map(|s| {
            if keep_zero {
                s
            } else {
                // A diff drops the stacks that did not change.
                let mut kept = Stacks::default();
                let frames: Vec<FrameId> = s.frames.iter().map(|&f| kept.frame(f)).collect();
                for (si, sample) in s.samples.iter().enumerate() {
                    if sample.costs.iter().all(|c| c.is_zero()) {
                        continue;
                    }
                    let stack: Vec<FrameId> =
                        sample.frames.iter().map(|f| frames[f.index()]).collect();
                    let labels = kept.label_set(s.labels_of(si).to_vec());
                    // Each stack is distinct and its sums were checked.
                    let _ = kept.add_labelled(&stack, labels, &sample.costs);
                }
                kept
            }
        });
        let mut bound = Bound {
            costs: vec![0; ne],
            calls: 0,
        };
        let mut stated = Vec::new();
        for mut acc in self.parts {
            let mut part: Part<C> = Part::new(self.positions, ne);
            // The lines kept, as (function, file, row): the rows are handed
            // to the part as they are, not coded (see `CostLines`).
            let mut kept: Vec<(FunctionId, FileId, u32)> = Vec::new();
            let info = acc.info.unwrap_or_default();
            let had_summary = info.summary.is_some();
            let had_totals = info.totals.is_some();
            part.info = PartInfo {
                number: info.number,
                pid: info.pid,
                thread: info.thread,
                cmd: info.cmd,
                desc: info.desc,
                other: info.other,
                summary: None,
                totals: None,
            };
            let mut seq = 0u64;
            for block in &acc.blocks {
                let (function, file) = (block.function, block.file);
                for r in &block.recs {
                    match *r {
                        Rec::Line(i) => {
                            let i = i as usize;
                            let costs = &acc.line_costs[i * ne..(i + 1) * ne];
                            if !keep_zero && costs.iter().all(|c| c.is_zero()) {
                                continue;
                            }
                            bound
                                .add(costs, None)
                                .map_err(|k| unreadable(&profile, &labels, k, function))?;
                            kept.push((function, file, i as u32));
                            seq += 1;
                        }
                        Rec::Call(i) => {
                            let i = i as usize;
                            let (k, count) = acc.calls[i];
                            let costs = &acc.call_costs[i * ne..(i + 1) * ne];
                            if !keep_zero && count.is_zero() && costs.iter().all(|c| c.is_zero()) {
                                continue;
                            }
                            bound
                                .add(costs, Some(count))
                                .map_err(|e| unreadable(&profile, &labels, e, k.caller))?;
                            part.calls.push(
                                CallInfo {
                                    caller: k.caller,
                                    site_file: k.site_file,
                                    callee: k.callee,
                                    count,
                                    seq,
                                },
                                &k.site[..np],
                                &k.target[..np],
                                costs,
                            );
                            seq += 1;
                        }
                        Rec::Jump(i) => {
                            let (k, executed, taken) = acc.jumps[i as usize];
                            if !keep_zero && executed.is_zero() && taken.is_zero() {
                                continue;
                            }
                            part.jumps.push(
                                JumpInfo {
                                    function: k.function,
                                    file: k.file,
                                    target_function: k.target_function,
                                    target_file: k.target_file,
                                    conditional: k.conditional,
                                    executed,
                                    taken,
                                    seq,
                                },
                                &k.source[..np],
                                &k.target[..np],
                            );
                            seq += 1;
                        }
                    }
                }
            }
            // The sum of every line (dropped lines are zero), without
            // decoding the lines again.
            let mut sums = vec![0i128; ne];
            for row in acc.line_costs.chunks_exact(ne.max(1)) {
                for (s, c) in sums.iter_mut().zip(row) {
                    *s += c.to_i128();
                }
            }
            let totals: Vec<C> = sums
                .into_iter()
                .map(C::from_i128)
                .collect::<Option<_>>()
                .ok_or_else(|| Error::Overflow {
                    input: format!("the total of {}", labels.join(" + ")),
                    function: String::new(),
                    what: String::new(),
                    signed: C::SIGNED,
                })?;
            // Every input has the output's positions, so the part's rows
            // hold `np` numbers each, as the lines want.
            let pos = std::mem::replace(&mut acc.line_pos, PosList::new(np)).into_flat();
            let costs = std::mem::take(&mut acc.line_costs);
            part.lines = CostLines::with_rows(self.positions, ne, pos, costs);
            for (function, file, row) in kept {
                part.lines.push_row(function, file, row);
            }
            if had_summary {
                part.info.summary = Some(totals.clone());
            }
            if had_totals || !had_summary {
                part.info.totals = Some(totals);
            }
            stated.push(acc.stated);
            profile.parts.push(part);
        }
        Ok(Combined { profile, stated })
    }
}

/// The running sums of magnitudes every reader keeps (self costs and
/// call costs per event, call counts), over the result as it is built: a
/// result past them is refused, never written unreadable.
struct Bound {
    costs: Vec<u64>,
    calls: u64,
}

impl Bound {
    /// Adds a record's magnitudes; on overflow, what overflows (the event's
    /// index, or `None` for the call counts).
    fn add<C: Cost>(&mut self, costs: &[C], count: Option<C>) -> Result<(), Option<usize>> {
        let fits = |s: u64, c: u64| s.checked_add(c).filter(|&v| v <= C::MAX_MAGNITUDE);
        if let Some(n) = count {
            self.calls = fits(self.calls, n.magnitude()).ok_or(None)?;
        }
        for (k, (s, c)) in self.costs.iter_mut().zip(costs).enumerate() {
            *s = fits(*s, c.magnitude()).ok_or(Some(k))?;
        }
        Ok(())
    }
}

/// The error of a result past its [`Bound`].
#[cold]
fn unreadable<C: Cost>(
    profile: &Profile<C>,
    labels: &[String],
    over: Option<usize>,
    function: FunctionId,
) -> Error {
    let what = match over {
        None => "call counts".to_string(),
        Some(k) => format!(
            "self costs and call costs of event `{}`",
            profile.events.recorded()[k].name
        ),
    };
    Error::Unreadable {
        inputs: labels.join(" + "),
        function: String::from_utf8_lossy(profile.names.function_name(function)).into_owned(),
        what,
        limit: if C::SIGNED { "2^63-1" } else { "2^64-1" },
    }
}

/// The result of [`Combiner::finish`].
pub struct Combined<C> {
    /// The summed profile.
    pub profile: Profile<C>,
    /// Per output part, the sum of the inputs' stated totals (`summary:` or
    /// `totals:`), when every input part stated them.
    pub stated: Vec<Option<Vec<i128>>>,
}

fn info_u64<I: Cost>(i: &PartInfo<I>) -> PartInfo<u64> {
    PartInfo {
        number: i.number,
        pid: i.pid,
        thread: i.thread,
        cmd: i.cmd.clone(),
        desc: i.desc.clone(),
        other: i.other.clone(),
        summary: i.summary.as_ref().map(|_| Vec::new()),
        totals: i.totals.as_ref().map(|_| Vec::new()),
    }
}

fn rename<'a>(name: &'a [u8], s: Option<&Subst>) -> Cow<'a, [u8]> {
    match s {
        Some(s) if !name.is_empty() => s.apply(name),
        _ => Cow::Borrowed(name),
    }
}

/// One record of a profile with its names spelled out (see [`records`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RecordKey {
    /// A self-cost line: function (object, file, name), line file,
    /// positions.
    Line([Vec<u8>; 3], Vec<u8>, Vec<u64>),
    /// A call: caller, call-site file, callee, site and target positions.
    Call([Vec<u8>; 3], Vec<u8>, [Vec<u8>; 3], Vec<u64>, Vec<u64>),
    /// A jump: function, file, target function, target file, conditional,
    /// source and target positions.
    Jump(
        [Vec<u8>; 3],
        Vec<u8>,
        [Vec<u8>; 3],
        Vec<u8>,
        bool,
        Vec<u64>,
        Vec<u64>,
    ),
}

/// Every record of a profile, summed over parts by key, with names spelled
/// out, event values in `i128` (costs; for calls the count then the
/// inclusive costs; for jumps executed and taken), and records whose values
/// are all zero dropped. Two profiles with equal records hold the same
/// numbers whatever their order, name ids or part split: this is what
/// "the same profile after parsing" means in the merge and diff tests.
pub fn records<C: Cost>(p: &Profile<C>) -> std::collections::BTreeMap<RecordKey, Vec<i128>> {
    use std::collections::BTreeMap;
    let names = &p.names;
    let func = |f: FunctionId| -> [Vec<u8>; 3] {
        [
            names.function_object(f).to_vec(),
            names.function_file(f).to_vec(),
            names.function_name(f).to_vec(),
        ]
    };
    let file = |f: FileId| names.file_name(f).to_vec();
    let mut m: BTreeMap<RecordKey, Vec<i128>> = BTreeMap::new();
    let mut add = |k: RecordKey, v: Vec<i128>| {
        let e = m.entry(k).or_insert_with(|| vec![0; v.len()]);
        for (a, b) in e.iter_mut().zip(v) {
            *a += b;
        }
    };
    let ne = p.events.len();
    for part in &p.parts {
        part.lines.for_each(|l| {
            let v = (0..ne)
                .map(|i| l.costs.get(i).map_or(0, |c| c.to_i128()))
                .collect();
            add(
                RecordKey::Line(func(l.function), file(l.file), l.positions.to_vec()),
                v,
            );
        });
        for c in part.calls.iter() {
            let mut v = vec![c.info.count.to_i128()];
            v.extend((0..ne).map(|i| c.inclusive.get(i).map_or(0, |c| c.to_i128())));
            add(
                RecordKey::Call(
                    func(c.info.caller),
                    file(c.info.site_file),
                    func(c.info.callee),
                    c.site.to_vec(),
                    c.target.to_vec(),
                ),
                v,
            );
        }
        for j in part.jumps.iter() {
            add(
                RecordKey::Jump(
                    func(j.info.function),
                    file(j.info.file),
                    func(j.info.target_function),
                    file(j.info.target_file),
                    j.info.conditional,
                    j.source.to_vec(),
                    j.target.to_vec(),
                ),
                vec![j.info.executed.to_i128(), j.info.taken.to_i128()],
            );
        }
    }
    m.retain(|_, v| v.iter().any(|&x| x != 0));
    m
}
