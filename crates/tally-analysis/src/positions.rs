//! Costs per source line and per instruction address, for annotating
//! source files and disassembly. Built only for the files or functions a
//! report shows, since a profile has far more lines than rows.

use crate::aggregate::add_into;
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use tally_model::{Cost, FileId, FunctionId, Profile};

/// Calls made from one place (a source line or an instruction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite<C> {
    /// The calling function (several may share a line: inlining, or
    /// Callgrind's separate recursion levels such as `f'2`).
    pub caller: FunctionId,
    /// The called function.
    pub callee: FunctionId,
    /// Number of calls.
    pub count: C,
    /// Inclusive cost of the calls.
    pub inclusive: Vec<C>,
}

/// Jumps from one place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JumpSite<C> {
    /// The target: an address with `positions: instr`, else a line.
    pub target: u64,
    /// The function jumped into.
    pub target_function: FunctionId,
    /// The file jumped into.
    pub target_file: FileId,
    /// `jcnd=` rather than `jump=`.
    pub conditional: bool,
    /// Times executed.
    pub executed: C,
    /// Times taken.
    pub taken: C,
}

/// Costs, calls and jumps at the positions of one file or function.
#[derive(Clone, Debug)]
pub struct PositionCosts<C> {
    /// Self cost per position.
    pub costs: BTreeMap<u64, Vec<C>>,
    /// Calls per position (merged by callee).
    pub calls: BTreeMap<u64, Vec<CallSite<C>>>,
    /// Jumps per position (merged by target).
    pub jumps: BTreeMap<u64, Vec<JumpSite<C>>>,
    /// Where each (position, caller, callee) is in `calls`: one place may
    /// have thousands of call sites (every call of a file without line
    /// numbers is on line 0), so they are not searched one by one.
    call_index: FxHashMap<(u64, FunctionId, FunctionId), u32>,
    /// The same for jumps, by (position, target, function, conditional).
    jump_index: FxHashMap<(u64, u64, FunctionId, bool), u32>,
}

impl<C> Default for PositionCosts<C> {
    fn default() -> Self {
        PositionCosts {
            costs: BTreeMap::new(),
            calls: BTreeMap::new(),
            jumps: BTreeMap::new(),
            call_index: FxHashMap::default(),
            jump_index: FxHashMap::default(),
        }
    }
}

impl<C: Cost> PositionCosts<C> {
    fn add_cost(&mut self, at: u64, costs: &[C]) {
        let v = self
            .costs
            .entry(at)
            .or_insert_with(|| vec![C::ZERO; costs.len()]);
        add_into(v, costs);
    }

    fn add_call(
        &mut self,
        at: u64,
        caller: FunctionId,
        callee: FunctionId,
        count: C,
        inclusive: &[C],
    ) {
        let v = self.calls.entry(at).or_default();
        let next = v.len() as u32;
        let i = *self.call_index.entry((at, caller, callee)).or_insert(next);
        match v.get_mut(i as usize) {
            Some(c) => {
                c.count = c.count.saturating_add(count);
                add_into(&mut c.inclusive, inclusive);
            }
            None => v.push(CallSite {
                caller,
                callee,
                count,
                inclusive: inclusive.to_vec(),
            }),
        }
    }

    fn add_jump(&mut self, at: u64, j: JumpSite<C>) {
        let v = self.jumps.entry(at).or_default();
        let next = v.len() as u32;
        let key = (at, j.target, j.target_function, j.conditional);
        let i = *self.jump_index.entry(key).or_insert(next);
        match v.get_mut(i as usize) {
            Some(x) => {
                x.executed = x.executed.saturating_add(j.executed);
                x.taken = x.taken.saturating_add(j.taken);
            }
            None => v.push(j),
        }
    }
}

/// Costs per source line of the files `want` accepts, over the chosen parts.
/// Empty when the profile has no line positions.
pub fn by_line<C: Cost>(
    profile: &Profile<C>,
    chosen: impl Fn(usize) -> bool,
    want: impl Fn(FileId) -> bool,
) -> FxHashMap<FileId, PositionCosts<C>> {
    let Some(li) = profile.positions.line() else {
        return FxHashMap::default();
    };
    collect(profile, chosen, |_, file| want(file).then_some(file.0), li)
        .into_iter()
        .map(|(k, v)| (FileId(k), v))
        .collect()
}

/// Costs per instruction address of the functions `want` accepts. Empty
/// when the profile has no instruction positions.
pub fn by_instr<C: Cost>(
    profile: &Profile<C>,
    chosen: impl Fn(usize) -> bool,
    want: impl Fn(FunctionId) -> bool,
) -> FxHashMap<FunctionId, PositionCosts<C>> {
    let Some(ii) = profile.positions.instr() else {
        return FxHashMap::default();
    };
    collect(profile, chosen, |f, _| want(f).then_some(f.0), ii)
        .into_iter()
        .map(|(k, v)| (FunctionId(k), v))
        .collect()
}

fn collect<C: Cost>(
    profile: &Profile<C>,
    chosen: impl Fn(usize) -> bool,
    key: impl Fn(FunctionId, FileId) -> Option<u32>,
    pos: usize,
) -> FxHashMap<u32, PositionCosts<C>> {
    let mut out: FxHashMap<u32, PositionCosts<C>> = FxHashMap::default();
    for (pi, part) in profile.parts.iter().enumerate() {
        if !chosen(pi) {
            continue;
        }
        for (b, block) in part.lines.blocks().iter().enumerate() {
            let Some(k) = key(block.function, block.file) else {
                continue;
            };
            let pc = out.entry(k).or_default();
            part.lines
                .for_each_in_block(b, |l| pc.add_cost(l.positions[pos], l.costs));
        }
        for call in part.calls.iter() {
            let i = call.info;
            if let Some(k) = key(i.caller, i.site_file) {
                out.entry(k).or_default().add_call(
                    call.site[pos],
                    i.caller,
                    i.callee,
                    i.count,
                    call.inclusive,
                );
            }
        }
        for j in part.jumps.iter() {
            let i = j.info;
            if let Some(k) = key(i.function, i.file) {
                out.entry(k).or_default().add_jump(
                    j.source[pos],
                    JumpSite {
                        target: j.target[pos],
                        target_function: i.target_function,
                        target_file: i.target_file,
                        conditional: i.conditional,
                        executed: i.executed,
                        taken: i.taken,
                    },
                );
            }
        }
    }
    out
}
