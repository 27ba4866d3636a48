//! A sink that keeps each distinct record once: repeated records are
//! summed into the first, so that a full load's memory grows with the
//! distinct functions, positions, arcs and jumps, not with the number of
//! lines (a file that repeats its records costs no more than one copy).
//!
//! Records are keyed as `tally merge` sums them: a cost line by (function,
//! file, positions), a call by (caller, call-site file, callee, site and
//! target positions), a jump by (function, file, target function and file,
//! kind, source and target positions). They keep the order in which they
//! were first seen, so a profile without repeated records comes out
//! exactly as read, and any profile comes out as `tally merge` of it alone
//! would order it.

use crate::callgrind::ReadOutcome;
use crate::error::{Error, Warnings};
use rustc_hash::FxHashMap;
use tally_model::{
    CallInfo, Calls, Cost, CostLines, FileId, FunctionId, JumpInfo, Jumps, Positions, Profile, Sink,
};

type Pos = [u64; 3];

fn pos(p: &[u64]) -> Pos {
    let mut a = [0; 3];
    a[..p.len()].copy_from_slice(p);
    a
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct LineKey {
    function: FunctionId,
    file: FileId,
    at: Pos,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct CallKey {
    caller: FunctionId,
    site_file: FileId,
    callee: FunctionId,
    site: Pos,
    target: Pos,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct JumpKey {
    function: FunctionId,
    file: FileId,
    target_function: FunctionId,
    target_file: FileId,
    conditional: bool,
    source: Pos,
    target: Pos,
}

/// The distinct records of one part, each in first-seen order within its
/// kind; calls and jumps carry their place among all distinct records.
struct FoldPart<C> {
    positions: Positions,
    events: usize,
    /// Distinct records so far: the `seq` of the next new one.
    distinct: u64,
    line_index: FxHashMap<LineKey, u32>,
    lines: Vec<LineKey>,
    /// The index of the line met last.
    last_line: usize,
    line_costs: Vec<C>,
    call_index: FxHashMap<CallKey, u32>,
    calls: Vec<(CallKey, C, u64)>,
    call_costs: Vec<C>,
    jump_index: FxHashMap<JumpKey, u32>,
    jumps: Vec<(JumpKey, C, C, u64)>,
}

/// Adds `src` (zeros past its end) to `dst`; false on overflow.
#[inline]
fn add_all<C: Cost>(dst: &mut [C], src: &[C]) -> bool {
    let mut ok = true;
    for (d, &s) in dst.iter_mut().zip(src) {
        ok &= add(d, s);
    }
    ok
}

#[inline]
fn add<C: Cost>(d: &mut C, s: C) -> bool {
    match C::from_i128(d.to_i128() + s.to_i128()) {
        Some(v) => {
            *d = v;
            true
        }
        None => false,
    }
}

/// Bytes a hash map of `n` slots holds (entries and control bytes).
fn map_bytes<K, V>(m: &FxHashMap<K, V>) -> usize {
    m.capacity() * (std::mem::size_of::<(K, V)>() + 1)
}

fn vec_bytes<T>(v: &Vec<T>) -> usize {
    v.capacity() * std::mem::size_of::<T>()
}

/// See the module documentation.
#[derive(Default)]
pub struct FoldSink<C: Cost> {
    parts: Vec<FoldPart<C>>,
    /// The function of the first sum that did not fit the cost type.
    overflow: Option<FunctionId>,
}

impl<C: Cost> FoldSink<C> {
    /// The whole profile: the read's header facts with the distinct
    /// records kept here, and the read's warnings. An error if a sum of
    /// repeated records does not fit the cost type (the reader's running
    /// sums make that impossible for costs and call counts; jump counts
    /// are checked here).
    pub fn into_profile(
        self,
        read: ReadOutcome<C>,
        path: &std::path::Path,
    ) -> Result<(Profile<C>, Warnings), Error> {
        let mut profile = read.profile;
        if let Some(f) = self.overflow {
            return Err(Error::Incompatible(format!(
                "{}: in function `{}`: a sum of repeated records does not fit in 64 bits",
                path.display(),
                String::from_utf8_lossy(profile.names.function_name(f))
            )));
        }
        for (part, fold) in profile.parts.iter_mut().zip(self.parts) {
            let ne = fold.events;
            let mut lines = CostLines::new(fold.positions, ne);
            let np = fold.positions.len();
            for (k, costs) in fold
                .lines
                .iter()
                .zip(fold.line_costs.chunks_exact(ne.max(1)))
            {
                lines.push(k.function, k.file, &k.at[..np], &costs[..ne]);
            }
            let mut calls = Calls::new(fold.positions, ne);
            for ((k, count, seq), costs) in fold
                .calls
                .iter()
                .zip(fold.call_costs.chunks_exact(ne.max(1)))
            {
                let info = CallInfo {
                    caller: k.caller,
                    site_file: k.site_file,
                    callee: k.callee,
                    count: *count,
                    seq: *seq,
                };
                calls.push(info, &k.site[..np], &k.target[..np], &costs[..ne]);
            }
            let mut jumps = Jumps::new(fold.positions);
            for (k, executed, taken, seq) in &fold.jumps {
                let info = JumpInfo {
                    function: k.function,
                    file: k.file,
                    target_function: k.target_function,
                    target_file: k.target_file,
                    conditional: k.conditional,
                    executed: *executed,
                    taken: *taken,
                    seq: *seq,
                };
                jumps.push(info, &k.source[..np], &k.target[..np]);
            }
            part.lines = lines;
            part.calls = calls;
            part.jumps = jumps;
        }
        Ok((profile, read.warnings))
    }

    fn part(&mut self) -> &mut FoldPart<C> {
        self.parts.last_mut().expect("part started")
    }
}

impl<C: Cost> Sink<C> for FoldSink<C> {
    fn start_part(&mut self, positions: Positions, events: usize) {
        self.parts.push(FoldPart {
            positions,
            events,
            distinct: 0,
            line_index: FxHashMap::default(),
            lines: Vec::new(),
            last_line: 0,
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
        let p = self.part();
        let ne = p.events;
        let key = LineKey {
            function,
            file,
            at: pos(positions),
        };
        // A repeated stretch of lines repeats them in the same order: try
        // the line after the last one met, then that one, before hashing.
        let next = p.last_line + 1;
        let i = if p.lines.get(next) == Some(&key) {
            next
        } else if p.lines.get(p.last_line) == Some(&key) {
            p.last_line
        } else {
            let n = p.lines.len() as u32;
            let i = *p.line_index.entry(key).or_insert(n) as usize;
            if i == n as usize {
                p.lines.push(key);
                p.line_costs.extend(std::iter::repeat_n(C::ZERO, ne));
                p.distinct += 1;
            }
            i
        };
        p.last_line = i;
        if !add_all(&mut p.line_costs[i * ne..(i + 1) * ne], costs) {
            self.overflow.get_or_insert(function);
        }
    }

    fn call(&mut self, info: CallInfo<C>, site: &[u64], target: &[u64], inclusive: &[C]) {
        let p = self.part();
        let ne = p.events;
        let key = CallKey {
            caller: info.caller,
            site_file: info.site_file,
            callee: info.callee,
            site: pos(site),
            target: pos(target),
        };
        let n = p.calls.len() as u32;
        let i = *p.call_index.entry(key).or_insert(n) as usize;
        if i == n as usize {
            p.calls.push((key, C::ZERO, p.distinct));
            p.call_costs.extend(std::iter::repeat_n(C::ZERO, ne));
            p.distinct += 1;
        }
        let ok = add(&mut p.calls[i].1, info.count)
            & add_all(&mut p.call_costs[i * ne..(i + 1) * ne], inclusive);
        if !ok {
            self.overflow.get_or_insert(info.caller);
        }
    }

    fn jump(&mut self, info: JumpInfo<C>, source: &[u64], target: &[u64]) {
        let p = self.part();
        let key = JumpKey {
            function: info.function,
            file: info.file,
            target_function: info.target_function,
            target_file: info.target_file,
            conditional: info.conditional,
            source: pos(source),
            target: pos(target),
        };
        let n = p.jumps.len() as u32;
        let i = *p.jump_index.entry(key).or_insert(n) as usize;
        if i == n as usize {
            p.jumps.push((key, C::ZERO, C::ZERO, p.distinct));
            p.distinct += 1;
        }
        let j = &mut p.jumps[i];
        let ok = add(&mut j.1, info.executed) & add(&mut j.2, info.taken);
        if !ok {
            self.overflow.get_or_insert(info.function);
        }
    }

    fn held_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| {
                map_bytes(&p.line_index)
                    + vec_bytes(&p.lines)
                    + vec_bytes(&p.line_costs)
                    + map_bytes(&p.call_index)
                    + vec_bytes(&p.calls)
                    + vec_bytes(&p.call_costs)
                    + map_bytes(&p.jump_index)
                    + vec_bytes(&p.jumps)
            })
            .sum()
    }
}
