//! Inclusive costs that stay right under recursion.
//!
//! An arc's recorded cost includes every call nested inside it, so adding up
//! arcs along a recursion counts the same work again at every level: that is
//! how callgrind_annotate reaches several hundred percent. Here, as in gprof,
//! mutually recursive functions form a cycle (a strongly connected component
//! of the call graph). A function outside any cycle costs its self cost plus
//! its arcs to other functions, which for a function that is called equals
//! the sum of the calls to it from other functions (that sum is used, as it
//! is what the callers see, unless the function was also entered without a
//! call, as a thread's first function is, and its own cost plus its calls
//! are more); a self call adds nothing, since that work is already inside
//! the function. A cycle costs its members' self costs plus
//! the arcs that leave it. A member's own inclusive cost is not in the
//! file, since an arc into it may run inside another of its activations;
//! it gets a derived one ([`Inclusive::shown`]): what the calls into it
//! from other functions cost (or, if more, its self cost plus its calls to
//! others, as for a function entered without a call), at most its cycle's
//! inclusive cost, which holds every one of its outermost activations
//! (they never overlap). Nested calls only make the sums larger, so the
//! bound is what decides for a member that recursion runs through, such as
//! an interpreter's loop; a member seldom re-entered gets close to its
//! true cost. Views mark the number as derived.
//! Arcs leaving a cycle can never nest inside one another (the callee would
//! otherwise call back into the cycle and belong to it), so no work is
//! counted twice.
//!
//! The same rule gives every view one cost of a call arc
//! ([`Inclusive::call_cost`]): an arc between two components is exact, for
//! the same reason; an arc whose ends are in one component (a self call, or
//! a call between members of a cycle) runs inside an activation that is
//! already counted, so it has a count but no cost of its own. What the file
//! does measure for a cycle member is the cost of its entries from outside
//! the cycle, which are outermost activations and so exact
//! ([`Inclusive::entered`]). Callgrind's recursion levels (`f'2`, from
//! `--separate-recs`) are functions of their own here: `f` calling `f'2` is
//! exact, `f'2` calling itself is recursive.

use crate::aggregate::{Aggregate, CostTable, add_into};
use crate::scc::{Graph, strongly_connected};
use tally_model::{Cost, FunctionId, Names, Stacks};

/// A cycle of mutually recursive functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cycle<C> {
    /// 1-based number, in order of decreasing inclusive cost of the first
    /// event.
    pub number: u32,
    /// The member functions, by decreasing self cost of the first event.
    pub members: Vec<FunctionId>,
    /// Sum of the members' self costs.
    pub self_cost: Vec<C>,
    /// Self costs plus the arcs that leave the cycle.
    pub inclusive: Vec<C>,
    /// Calls into the cycle from outside.
    pub calls_in: C,
    /// Calls between members (including members' self calls).
    pub calls_within: C,
}

/// Where a call arc stands with respect to recursion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CallKind {
    /// Caller and callee are in different components: the recorded
    /// inclusive cost is exact.
    Exact,
    /// A function calling itself: its cost is inside the caller's.
    Recursive,
    /// A call between members of cycle `n`: its cost is inside the cycle's.
    WithinCycle(u32),
}

impl CallKind {
    /// Whether the recorded cost of the arc counts again work that an outer
    /// activation already counts.
    pub fn is_inside(self) -> bool {
        self != CallKind::Exact
    }
}

/// Inclusive cost of every function, and the cycles.
#[derive(Clone, Debug)]
pub struct Inclusive<C> {
    /// Inclusive cost per `FunctionId`: exact where `cycle_of` is `None`,
    /// derived for cycle members (see the module documentation).
    pub function: CostTable<C>,
    /// The cycle number of each function, if it is in one.
    pub cycle_of: Vec<Option<u32>>,
    /// The cycles, numbered 1.. in this order.
    pub cycles: Vec<Cycle<C>>,
    /// Per `FunctionId`, for cycle members: the cost of the calls into the
    /// member from outside its cycle (zeros for other functions).
    pub entered_cost: CostTable<C>,
    /// Per `FunctionId`, for cycle members: the number of those calls.
    pub entered_calls: Vec<C>,
}

impl<C: Cost> Inclusive<C> {
    /// Computes inclusive costs from aggregated self costs and arcs.
    pub fn new(agg: &Aggregate<C>) -> Self {
        Self::with_calls(agg, std::iter::empty())
    }

    /// The same, with more calls `(caller, callee)` to find cycles by,
    /// beyond `agg`'s arcs: a difference of two profiles lacks the calls
    /// that did not change, and they still make recursion.
    pub fn with_calls(
        agg: &Aggregate<C>,
        more: impl IntoIterator<Item = (FunctionId, FunctionId)>,
    ) -> Self {
        let nf = agg.function_self.len();
        let ev = agg.events;
        let edges: Vec<(u32, u32)> = agg
            .arcs
            .iter()
            .map(|a| (a.caller, a.callee))
            .chain(more)
            .filter(|(a, b)| a != b && a.index() < nf && b.index() < nf)
            .map(|(a, b)| (a.0, b.0))
            .collect();
        // The components take a second core while the sums that do not
        // depend on them are made: what the calls to each function cost
        // (the sum of its incoming arcs from other functions), which is
        // what its callers see, and each function's self cost plus its
        // calls to others (what it costs outside cycles when nobody calls
        // it: a root, a thread's entry; cycle members' are cleared below).
        let (comps, (mut function, incoming, called)) = std::thread::scope(|s| {
            let comps = s.spawn(move || strongly_connected(&Graph::from_edges(nf, edges)));
            let mut function = agg.function_self.clone();
            let mut incoming = CostTable::zeroed(ev, nf);
            let mut called = vec![false; nf];
            for arc in &agg.arcs {
                if arc.caller == arc.callee {
                    continue;
                }
                incoming.add(arc.callee.index(), &arc.inclusive);
                called[arc.callee.index()] = true;
                function.add(arc.caller.index(), &arc.inclusive);
            }
            let comps = comps.join().expect("the components' thread does not panic");
            (comps, (function, incoming, called))
        });

        // Cycles: components with more than one member.
        let mut cycle_slot: Vec<Option<usize>> = vec![None; comps.sizes.len()];
        let mut raw: Vec<Cycle<C>> = Vec::new();
        for f in 0..nf {
            let c = comps.component[f] as usize;
            if comps.sizes[c] < 2 {
                continue;
            }
            let slot = *cycle_slot[c].get_or_insert_with(|| {
                raw.push(Cycle {
                    number: 0,
                    members: Vec::new(),
                    self_cost: vec![C::ZERO; ev],
                    inclusive: vec![C::ZERO; ev],
                    calls_in: C::ZERO,
                    calls_within: C::ZERO,
                });
                raw.len() - 1
            });
            let cy = &mut raw[slot];
            cy.members.push(FunctionId(f as u32));
            add_into(&mut cy.self_cost, agg.function_self.get(f));
            add_into(&mut cy.inclusive, agg.function_self.get(f));
        }
        let slot_of = |f: FunctionId| cycle_slot[comps.component[f.index()] as usize];

        // A cycle costs its members' self costs plus the arcs that leave
        // it; calls into a member from outside are its entries, calls
        // between members (and their self calls) are within it.
        let mut entered_cost = CostTable::zeroed(ev, nf);
        let mut entered_calls = vec![C::ZERO; nf];
        let cycle_arcs = if raw.is_empty() {
            &[][..]
        } else {
            &agg.arcs[..]
        };
        for arc in cycle_arcs {
            let from = slot_of(arc.caller);
            if arc.caller == arc.callee {
                if let Some(a) = from {
                    raw[a].calls_within = raw[a].calls_within.saturating_add(arc.count);
                }
                continue;
            }
            match (from, slot_of(arc.callee)) {
                (None, None) => {}
                (Some(a), Some(b)) if a == b => {
                    raw[a].calls_within = raw[a].calls_within.saturating_add(arc.count);
                }
                (from, to) => {
                    if let Some(a) = from {
                        add_into(&mut raw[a].inclusive, &arc.inclusive);
                    }
                    if let Some(b) = to {
                        raw[b].calls_in = raw[b].calls_in.saturating_add(arc.count);
                        let m = arc.callee.index();
                        entered_cost.add(m, &arc.inclusive);
                        entered_calls[m] = entered_calls[m].saturating_add(arc.count);
                    }
                }
            }
        }
        // A function also entered without a call (a thread's first
        // function, such as `clone`, runs the thread under it) costs at
        // least its self cost plus its calls, so that no call it makes
        // shows more than it costs. Differences keep the calls into it.
        for (f, &was_called) in called.iter().enumerate() {
            if was_called && slot_of(FunctionId(f as u32)).is_none() {
                let into = incoming.get(f);
                for (v, &i) in function.get_mut(f).iter_mut().zip(into) {
                    *v = if C::SIGNED { i } else { (*v).max(i) };
                }
            }
        }

        // Number cycles by decreasing inclusive cost (first event), ties by
        // their first member, so that numbers do not depend on hash order.
        for cy in &mut raw {
            cy.members.sort_by(|&a, &b| {
                let (x, y) = (
                    agg.function_self.get(a.index()),
                    agg.function_self.get(b.index()),
                );
                y.first().cmp(&x.first()).then(a.cmp(&b))
            });
        }
        let mut order: Vec<usize> = (0..raw.len()).collect();
        order.sort_by(|&a, &b| {
            raw[b]
                .inclusive
                .first()
                .cmp(&raw[a].inclusive.first())
                .then(raw[a].members[0].cmp(&raw[b].members[0]))
        });
        let mut cycles = Vec::with_capacity(raw.len());
        let mut number_of_slot = vec![0u32; raw.len()];
        for (n, &slot) in order.iter().enumerate() {
            number_of_slot[slot] = n as u32 + 1;
        }
        let mut raw: Vec<Option<Cycle<C>>> = raw.into_iter().map(Some).collect();
        for &slot in &order {
            let mut cy = raw[slot].take().expect("each slot once");
            cy.number = number_of_slot[slot];
            cycles.push(cy);
        }
        // A member's derived cost: the larger of the calls into it and its
        // self cost plus its calls (which `function` holds), bounded by its
        // cycle's cost. A difference (a sum below zero) keeps the calls
        // into it, unbounded, as outside cycles; a profile held as signed
        // (`tally gate`'s sides) is bounded as any.
        let mut cycle_of = vec![None; nf];
        for (f, c) in cycle_of.iter_mut().enumerate() {
            *c = cycle_slot[comps.component[f] as usize].map(|s| number_of_slot[s]);
            if let Some(n) = *c {
                let bound = &cycles[n as usize - 1].inclusive;
                let into = incoming.get(f);
                for ((v, &i), &b) in function.get_mut(f).iter_mut().zip(into).zip(bound) {
                    *v = if [*v, i, b].iter().any(|&x| x < C::ZERO) {
                        i
                    } else {
                        (*v).max(i).min(b)
                    };
                }
            }
        }
        Inclusive {
            function,
            cycle_of,
            cycles,
            entered_cost,
            entered_calls,
        }
    }

    /// Inclusive costs from whole stacks (perf, pprof, folded input), whose
    /// parts were derived from them ([`Stacks::derive_part`]): a function's
    /// cost is the sum of the stacks containing it, a recursion counted
    /// once, exactly as profilers show "cumulative" or "children" cost, for
    /// every function, recursive or not. Every derived arc counts a stack
    /// once too, so no arc repeats an outer activation and there are no
    /// cycles to set apart; only a self call is recursive. `None` when the
    /// stacks do not hold the aggregate's costs (some parts not chosen, or
    /// parts from a stackless input), where [`Inclusive::new`] applies.
    pub fn from_stacks(agg: &Aggregate<C>, stacks: &Stacks<C>) -> Option<Self> {
        let (nf, ev) = (agg.function_self.len(), agg.events);
        if stacks.is_empty() || stacks.totals(ev)? != agg.totals {
            return None;
        }
        let cumulative = stacks.cumulative(nf, ev)?;
        let mut function = CostTable::zeroed(ev, nf);
        for f in 0..nf {
            function
                .get_mut(f)
                .copy_from_slice(&cumulative[f * ev..(f + 1) * ev]);
        }
        Some(Inclusive {
            function,
            cycle_of: vec![None; nf],
            cycles: Vec::new(),
            entered_cost: CostTable::zeroed(ev, nf),
            entered_calls: vec![C::ZERO; nf],
        })
    }

    /// Where the arc `caller → callee` stands with respect to recursion.
    pub fn call_kind(&self, caller: FunctionId, callee: FunctionId) -> CallKind {
        if caller == callee {
            return CallKind::Recursive;
        }
        let cycle = |f: FunctionId| self.cycle_of.get(f.index()).copied().flatten();
        match (cycle(caller), cycle(callee)) {
            (Some(a), Some(b)) if a == b => CallKind::WithinCycle(a),
            _ => CallKind::Exact,
        }
    }

    /// The cost of an arc that every view shows: its recorded inclusive
    /// cost when exact, `None` for a call inside a recursion or cycle,
    /// whose recorded cost repeats what an outer activation counts.
    pub fn call_cost<'a>(
        &self,
        caller: FunctionId,
        callee: FunctionId,
        recorded: &'a [C],
    ) -> Option<&'a [C]> {
        (!self.call_kind(caller, callee).is_inside()).then_some(recorded)
    }

    /// For a cycle member: the cost of its calls from outside the cycle
    /// (outermost activations, so exact) and their number; `None` for a
    /// function outside cycles, whose [`Inclusive::of`] is exact already.
    pub fn entered(&self, f: FunctionId) -> Option<(&[C], C)> {
        self.cycle_of.get(f.index()).copied().flatten()?;
        Some((
            self.entered_cost.get(f.index()),
            self.entered_calls[f.index()],
        ))
    }

    /// Inclusive cost of `f` as every view shows it, and whether it is
    /// derived (a cycle member's, see the module documentation) rather
    /// than exact.
    pub fn shown(&self, f: FunctionId) -> (&[C], bool) {
        (
            self.function.get(f.index()),
            self.cycle_of[f.index()].is_some(),
        )
    }

    /// Whether `f`'s inclusive cost is derived: it is a cycle member.
    pub fn is_derived(&self, f: FunctionId) -> bool {
        self.cycle_of.get(f.index()).copied().flatten().is_some()
    }

    /// Exact inclusive cost of `f`, or `None` for a cycle member.
    pub fn of(&self, f: FunctionId) -> Option<&[C]> {
        match self.cycle_of[f.index()] {
            None => Some(self.function.get(f.index())),
            Some(_) => None,
        }
    }

    /// Inclusive cost of every `file:function` row of `agg`: the row of the
    /// function's own file gets the whole function's inclusive cost (what a
    /// caller sees); a row of inlined code gets its self cost plus the calls
    /// made from it. A cycle member's rows are derived
    /// ([`Inclusive::shown`]); one of inlined code is bounded by the
    /// member's.
    pub fn rows(&self, agg: &Aggregate<C>, names: &Names) -> RowCosts<C> {
        let ev = agg.events;
        // One flat table rather than a vector per row: a large profile has
        // hundreds of thousands of rows.
        let mut costs = CostTable::zeroed(ev, agg.rows.len());
        let mut inlined_member = Vec::new();
        for (r, key) in agg.rows.iter().enumerate() {
            let own_file = names.key(key.function).file == key.file;
            if !own_file && self.cycle_of[key.function.index()].is_some() {
                inlined_member.push(r);
            }
            let v = if own_file {
                self.function.get(key.function.index())
            } else {
                agg.row_self.get(r)
            };
            costs.get_mut(r).copy_from_slice(v);
        }
        for arc in &agg.arcs {
            if arc.caller == arc.callee {
                continue;
            }
            if names.key(arc.caller).file == arc.site_file {
                continue;
            }
            let key = crate::aggregate::RowKey {
                function: arc.caller,
                file: arc.site_file,
            };
            if let Some(r) = agg.row_of(key) {
                costs.add(r, &arc.inclusive);
            }
        }
        for r in inlined_member {
            let whole = self.function.get(agg.rows[r].function.index());
            for (v, &w) in costs.get_mut(r).iter_mut().zip(whole) {
                if *v >= C::ZERO && w >= C::ZERO {
                    *v = (*v).min(w);
                }
            }
        }
        RowCosts {
            costs,
            rows: agg.rows.len(),
        }
    }
}

/// Inclusive costs of the `file:function` rows ([`Inclusive::rows`]).
#[derive(Clone, Debug, Default)]
pub struct RowCosts<C> {
    costs: CostTable<C>,
    /// Number of rows.
    rows: usize,
}

impl<C: Cost> RowCosts<C> {
    /// Inclusive cost of row `r` (derived for a cycle member's row); `None`
    /// for a row out of range.
    pub fn get(&self, r: usize) -> Option<&[C]> {
        (r < self.rows).then(|| self.costs.get(r))
    }
}
