//! What an annotate report shows, as plain values: the view model the
//! analysis hands to the writers. Names are resolved, rows are chosen and
//! ordered, calls are sorted and say whether they have a cost of their own;
//! a writer only lays these values out, and never asks the analysis again.
//!
//! Costs stay vectors over every event (recorded, then derived, as
//! [`EventColumns`] numbers them): the text shows the chosen events, the
//! JSON all of them.

use super::{Analysis, Options};
use crate::{CallKind, CallSite, JumpSite, PositionCosts, add_into};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use tally_model::{Cost, EventColumns, FileId, FunctionId};

/// A function as a report names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Func {
    /// Its id: what tells two functions of the same name apart, and orders
    /// ties.
    pub id: FunctionId,
    /// Its name.
    pub function: String,
    /// The file it is shown with: its own, or a call site's.
    pub file: String,
    /// Its object, empty when the profile names none.
    pub object: String,
    /// Its cycle, when cycles were found.
    pub cycle: Option<u32>,
}

impl Func {
    /// `file:function`, the name of a row.
    pub fn file_function(&self) -> String {
        format!("{}:{}", self.file, self.function)
    }

    /// `function:file`, the name in the by-function table.
    pub fn function_file(&self) -> String {
        format!("{}:{}", self.function, self.file)
    }
}

/// A call, with both of its ends.
#[derive(Clone, Debug)]
pub struct Call<C> {
    /// The caller, with the file of the call site.
    pub caller: Func,
    /// The callee, with its own file.
    pub callee: Func,
    /// Number of calls.
    pub count: C,
    /// Where the call stands with respect to recursion.
    pub kind: CallKind,
    /// Its inclusive cost; `None` inside a recursion or cycle, where the
    /// outer activation already counts it.
    pub cost: Option<Vec<C>>,
}

/// A row of a function table.
#[derive(Clone, Debug)]
pub struct Row<C> {
    /// The function, with the row's file.
    pub func: Func,
    /// Its self cost.
    pub self_cost: Vec<C>,
    /// Its inclusive cost (when shown; `None` for a member in a cycle's
    /// own list, which shows what its entries from outside cost).
    pub inclusive: Option<Vec<C>>,
    /// Whether `inclusive` is derived, a cycle member's estimate bounded
    /// by its cycle's cost, rather than exact ([`crate::Inclusive::shown`]).
    pub derived: bool,
    /// A cycle member's calls from outside its cycle: their cost and
    /// number (by-function rows and cycle members, with inclusive costs).
    pub entered: Option<(Vec<C>, C)>,
    /// The calls into it, costliest first (when a tree asks for callers;
    /// only the row of the function's own file has them).
    pub callers: Option<Vec<Call<C>>>,
    /// The calls made from it, costliest first (when a tree asks).
    pub callees: Option<Vec<Call<C>>>,
    /// Cycles (indices into [`View::cycles`]) whose entry the text table
    /// shows just before this row, where their inclusive cost sorts them.
    pub cycles_before: Vec<usize>,
}

/// A cycle of the call graph.
#[derive(Clone, Debug)]
pub struct CycleView<C> {
    /// Its 1-based number.
    pub number: u32,
    /// The members' self costs summed.
    pub self_cost: Vec<C>,
    /// Its inclusive cost.
    pub inclusive: Vec<C>,
    /// Calls into it from outside.
    pub calls_in: C,
    /// Calls between its members.
    pub calls_within: C,
    /// Its members (each with its own file), by decreasing self cost.
    pub members: Vec<Row<C>>,
    /// The members called from outside (indices into `members`), by
    /// decreasing cost of those calls.
    pub by_entered: Vec<usize>,
}

/// A chosen part.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartRef {
    /// Its number (`part:`, else its 1-based position).
    pub number: u64,
    /// Its thread.
    pub thread: Option<u64>,
    /// Its process.
    pub pid: Option<u64>,
}

/// What the profile says of itself.
#[derive(Clone, Debug, Default)]
pub struct Header {
    /// `creator:`.
    pub creator: Option<String>,
    /// The commands of the chosen parts, one per part that has one.
    pub commands: Vec<String>,
    /// The descriptions of the chosen parts, in order, repeats included.
    pub descriptions: Vec<(String, String)>,
    /// The chosen parts.
    pub parts: Vec<PartRef>,
    /// How many parts the profile has.
    pub part_count: usize,
    /// The recorded events.
    pub recorded: Vec<String>,
    /// The derived events: name and formula.
    pub derived: Vec<(String, String)>,
    /// Whether positions have lines (source annotation) and instruction
    /// addresses (assembly).
    pub lines: bool,
    /// See `lines`.
    pub instrs: bool,
}

/// A jump, summed over the chosen parts.
#[derive(Clone, Debug)]
pub struct Jump<C> {
    /// The function it is in.
    pub function: String,
    /// Its file.
    pub file: String,
    /// Its position (in `positions:` order).
    pub source: Vec<u64>,
    /// Its position as text: `0xADDR`, `file:line` or both.
    pub from: String,
    /// The function jumped to.
    pub target_function: String,
    /// Whether that is another function.
    pub leaves: bool,
    /// The file jumped to.
    pub target_file: String,
    /// The position jumped to.
    pub target: Vec<u64>,
    /// It as text.
    pub to: String,
    /// `jcnd=` rather than `jump=`.
    pub conditional: bool,
    /// Times executed.
    pub executed: C,
    /// Times taken.
    pub taken: C,
}

/// Everything the function tables, trees, cycles and jumps show.
pub struct View<C> {
    /// What the user asked for (the writers' layout follows it).
    pub options: Options,
    /// The profile's own facts.
    pub header: Header,
    /// All events, recorded then derived: names, formulas, ratios.
    pub events: EventColumns,
    /// Events shown (indices into `events`).
    pub shown: Vec<usize>,
    /// Sort events with their thresholds.
    pub sort: Vec<(usize, f64)>,
    /// Program totals over the chosen parts.
    pub totals: Vec<C>,
    /// Whether cycles were looked for (rows then say which they are in).
    pub cycles_found: bool,
    /// `file:function` rows above the threshold, in order.
    pub rows: Vec<Row<C>>,
    /// Cycles the text table lists after the last row (every row shown).
    pub cycles_after: Vec<usize>,
    /// `function:file` rows (for the by-function table and JSON).
    pub functions: Vec<Row<C>>,
    /// The cycles, by number.
    pub cycles: Vec<CycleView<C>>,
    /// The hottest jumps, when asked for.
    pub jumps: Option<Vec<Jump<C>>>,
    /// Notes for the user.
    pub warnings: Vec<String>,
}

/// A file of the profile that source annotation may show.
#[derive(Clone, Debug)]
pub struct FileCost<C> {
    /// Its id.
    pub id: FileId,
    /// Its name as the profile gives it.
    pub name: String,
    /// Its self cost over all rows.
    pub cost: Vec<C>,
}

/// The files source annotation chooses from.
#[derive(Clone, Debug)]
pub struct SourceFiles<C> {
    /// Every file with costs (in no particular order).
    pub files: Vec<FileCost<C>>,
    /// The files of the rows above the threshold, in the rows' order,
    /// each once.
    pub of_rows: Vec<FileId>,
    /// How many file ids the profile has (ids are below it).
    pub ids: usize,
    /// How many events a cost vector has.
    pub events: usize,
}

/// One file's or function's costs at each position, with the calls made
/// there resolved.
#[derive(Clone, Debug, Default)]
pub struct Positions<C> {
    /// Self cost per position.
    pub costs: BTreeMap<u64, Vec<C>>,
    /// Calls per position, one per caller and callee.
    pub calls: BTreeMap<u64, Vec<Call<C>>>,
    /// Jumps per position.
    pub jumps: BTreeMap<u64, Vec<JumpAt<C>>>,
}

impl<C: Cost> Positions<C> {
    /// The calls at `at` summed per callee (and recursion kind), costliest
    /// first, then those inside a recursion by count: one line per callee
    /// under a source line, whatever function made the call.
    pub fn calls_by_callee(&self, at: u64, primary: impl Fn(&[C]) -> i128) -> Vec<Call<C>> {
        let Some(calls) = self.calls.get(&at) else {
            return Vec::new();
        };
        let mut merged: Vec<(Call<C>, Vec<C>)> = Vec::new();
        // A line may have thousands of callees (line 0 of a file without
        // line numbers): each is found by a map.
        let mut index: FxHashMap<(FunctionId, CallKind), usize> = FxHashMap::default();
        for c in calls {
            let next = merged.len();
            let i = *index.entry((c.callee.id, c.kind)).or_insert(next);
            let recorded = c.cost.clone().unwrap_or_default();
            match merged.get_mut(i) {
                Some((m, sum)) => {
                    m.count = m.count.saturating_add(c.count);
                    add_into(sum, &recorded);
                }
                None => merged.push((c.clone(), recorded)),
            }
        }
        let rank = |m: &(Call<C>, Vec<C>)| match m.0.kind {
            CallKind::Exact => (true, primary(&m.1)),
            _ => (false, m.0.count.to_i128()),
        };
        merged.sort_by(|x, y| {
            rank(y)
                .cmp(&rank(x))
                .then(x.0.callee.id.cmp(&y.0.callee.id))
                .then(x.0.kind.cmp(&y.0.kind))
        });
        merged
            .into_iter()
            .map(|(mut c, sum)| {
                c.cost = (!c.kind.is_inside()).then_some(sum);
                c
            })
            .collect()
    }
}

/// A jump from one instruction.
#[derive(Clone, Debug)]
pub struct JumpAt<C> {
    /// Its target address.
    pub target: u64,
    /// The function jumped into.
    pub target_function: Func,
    /// `jcnd=` rather than `jump=`.
    pub conditional: bool,
    /// Times executed.
    pub executed: C,
    /// Times taken.
    pub taken: C,
}

impl<C: Cost> Analysis<'_, C> {
    /// A function as shown with `file`.
    fn func(&self, f: FunctionId, file: FileId) -> Func {
        let n = &self.profile.names;
        Func {
            id: f,
            function: text(n.function_name(f)),
            file: text(n.file_name(file)),
            object: text(n.function_object(f)),
            cycle: self.cycle_of(f),
        }
    }

    /// A function with its own file.
    fn own(&self, f: FunctionId) -> Func {
        self.func(f, self.profile.names.key(f).file)
    }

    /// A call, with its cost where it has one of its own.
    fn call(
        &self,
        caller: FunctionId,
        site_file: FileId,
        callee: FunctionId,
        count: C,
        inclusive: &[C],
    ) -> Call<C> {
        Call {
            caller: self.func(caller, site_file),
            callee: self.own(callee),
            count,
            kind: self.call_kind(caller, callee),
            cost: self.call_cost(caller, callee, inclusive).map(<[C]>::to_vec),
        }
    }

    fn arc_call(&self, arc: &crate::Arc<C>) -> Call<C> {
        self.call(
            arc.caller,
            arc.site_file,
            arc.callee,
            arc.count,
            &arc.inclusive,
        )
    }

    /// A cycle member's calls from outside its cycle: their cost and
    /// number; `None` for other functions, or when no cycles were found.
    fn entered(&self, f: FunctionId) -> Option<(Vec<C>, C)> {
        self.graph()
            .and_then(|g| g.entered(f))
            .map(|(v, n)| (v.to_vec(), n))
    }

    fn header(&self) -> Header {
        let p = self.profile;
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let chosen = || p.parts.iter().enumerate().filter(|(i, _)| self.chosen[*i]);
        Header {
            creator: p.creator.as_deref().map(lossy),
            commands: chosen()
                .filter_map(|(_, part)| part.info.cmd.as_deref().map(lossy))
                .collect(),
            descriptions: chosen()
                .flat_map(|(_, part)| part.info.desc.iter().map(|(k, v)| (lossy(k), lossy(v))))
                .collect(),
            parts: chosen()
                .map(|(i, part)| PartRef {
                    number: part.info.number.unwrap_or(i as u64 + 1),
                    thread: part.info.thread,
                    pid: part.info.pid,
                })
                .collect(),
            part_count: p.parts.len(),
            recorded: p.events.recorded().iter().map(|e| e.name.clone()).collect(),
            derived: p
                .events
                .derived()
                .iter()
                .map(|d| (d.name.clone(), d.formula()))
                .collect(),
            lines: p.positions.line().is_some(),
            instrs: p.positions.instr().is_some(),
        }
    }

    /// The view of the tables, trees, cycles and jumps.
    pub fn view(&self) -> View<C> {
        let opts = self.opts;
        let tree = opts.tree;
        let inclusive = opts.inclusive;
        let primary = self.sort.first().map(|s| s.0).unwrap_or(0);
        let cycle_costs: Vec<&[C]> = match (&self.incl, inclusive) {
            (Some(i), true) => i.cycles.iter().map(|c| c.inclusive.as_slice()).collect(),
            _ => Vec::new(),
        };
        let mut cycles_done = vec![false; cycle_costs.len()];
        let mut rows = Vec::with_capacity(self.rows.len());
        for &r in &self.rows {
            let key = self.agg.rows[r];
            let own = self.row_incl.get(r);
            let self_cost = self.agg.row_self.get(r);
            let rank = if inclusive {
                own.unwrap_or(self_cost)
            } else {
                self_cost
            };
            // Cycle entries stand where their inclusive cost sorts them.
            let mut cycles_before = Vec::new();
            for (i, c) in cycle_costs.iter().enumerate() {
                if !cycles_done[i] && self.value(c, primary) >= self.value(rank, primary) {
                    cycles_done[i] = true;
                    cycles_before.push(i);
                }
            }
            let callers = tree.callers().then(|| {
                if self.callee_row(key.function) == key {
                    self.callers(key.function)
                        .into_iter()
                        .map(|arc| self.arc_call(arc))
                        .collect()
                } else {
                    Vec::new()
                }
            });
            let callees = tree.callees().then(|| {
                self.callees(key)
                    .into_iter()
                    .map(|arc| self.arc_call(arc))
                    .collect()
            });
            rows.push(Row {
                func: self.func(key.function, key.file),
                self_cost: self_cost.to_vec(),
                inclusive: own.filter(|_| inclusive).map(<[C]>::to_vec),
                derived: inclusive && self.cycle_of(key.function).is_some(),
                entered: None,
                callers,
                callees,
                cycles_before,
            });
        }
        // With every row shown, cycles cheaper than the last row come last.
        let cycles_after = if self.show_all {
            (0..cycles_done.len())
                .filter(|&i| !cycles_done[i])
                .collect()
        } else {
            Vec::new()
        };
        let functions = self
            .functions
            .iter()
            .map(|&f| Row {
                func: self.own(f),
                self_cost: self.agg.function_self.get(f.index()).to_vec(),
                inclusive: self
                    .incl
                    .as_ref()
                    .map(|i| i.shown(f).0)
                    .filter(|_| inclusive)
                    .map(<[C]>::to_vec),
                derived: inclusive && self.cycle_of(f).is_some(),
                entered: self.entered(f).filter(|_| inclusive),
                callers: None,
                callees: None,
                cycles_before: Vec::new(),
            })
            .collect();
        let cycles = self.incl.as_ref().map_or_else(Vec::new, |incl| {
            incl.cycles
                .iter()
                .map(|cy| {
                    let members: Vec<Row<C>> = cy
                        .members
                        .iter()
                        .map(|&f| Row {
                            func: self.own(f),
                            self_cost: self.agg.function_self.get(f.index()).to_vec(),
                            inclusive: None,
                            derived: false,
                            entered: self.entered(f),
                            callers: None,
                            callees: None,
                            cycles_before: Vec::new(),
                        })
                        .collect();
                    let mut by_entered: Vec<usize> = (0..members.len())
                        .filter(|&i| members[i].entered.is_some())
                        .collect();
                    let entered = |i: usize| members[i].entered.as_ref().expect("filtered");
                    by_entered.sort_by(|&x, &y| {
                        let (ex, nx) = entered(x);
                        let (ey, ny) = entered(y);
                        self.value(ey, primary)
                            .cmp(&self.value(ex, primary))
                            .then(ny.cmp(nx))
                            .then(members[x].func.id.cmp(&members[y].func.id))
                    });
                    CycleView {
                        number: cy.number,
                        self_cost: cy.self_cost.clone(),
                        inclusive: cy.inclusive.clone(),
                        calls_in: cy.calls_in,
                        calls_within: cy.calls_within,
                        members,
                        by_entered,
                    }
                })
                .collect()
        });
        let jumps = opts.jumps.map(|n| self.jumps(n));
        View {
            options: opts.clone(),
            header: self.header(),
            events: self.events.clone(),
            shown: self.shown.clone(),
            sort: self.sort.clone(),
            totals: self.totals.clone(),
            cycles_found: self.incl.is_some(),
            rows,
            cycles_after,
            functions,
            cycles,
            jumps,
            warnings: self.warnings.clone(),
        }
    }

    fn jumps(&self, n: usize) -> Vec<Jump<C>> {
        let names = &self.profile.names;
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        self.hot_jumps(n)
            .into_iter()
            .map(|j| Jump {
                function: lossy(names.function_name(j.function)),
                file: lossy(names.file_name(j.file)),
                from: self.position_text(j.file, &j.source),
                to: self.position_text(j.target_file, &j.target),
                source: j.source,
                target_function: lossy(names.function_name(j.target_function)),
                leaves: j.target_function != j.function,
                target_file: lossy(names.file_name(j.target_file)),
                target: j.target,
                conditional: j.conditional,
                executed: j.executed,
                taken: j.taken,
            })
            .collect()
    }

    /// The files source annotation chooses from.
    pub fn source_files(&self) -> SourceFiles<C> {
        let names = &self.profile.names;
        let events = self.agg.events;
        let mut index: FxHashMap<FileId, usize> = FxHashMap::default();
        let mut files: Vec<FileCost<C>> = Vec::new();
        for (r, key) in self.agg.rows.iter().enumerate() {
            let i = *index.entry(key.file).or_insert_with(|| {
                files.push(FileCost {
                    id: key.file,
                    name: String::from_utf8_lossy(names.file_name(key.file)).into_owned(),
                    cost: vec![C::ZERO; events],
                });
                files.len() - 1
            });
            add_into(&mut files[i].cost, self.agg.row_self.get(r));
        }
        let mut of_rows: Vec<FileId> = Vec::new();
        for &r in &self.rows {
            let f = self.agg.rows[r].file;
            if !of_rows.contains(&f) {
                of_rows.push(f);
            }
        }
        SourceFiles {
            files,
            of_rows,
            ids: names.files.len(),
            events,
        }
    }

    /// Costs and calls per line of the files `wanted` says, over the chosen
    /// parts.
    pub fn lines(&self, wanted: impl Fn(FileId) -> bool) -> FxHashMap<FileId, Positions<C>> {
        crate::by_line(self.profile, |i| self.chosen[i], wanted)
            .into_iter()
            .map(|(f, p)| (f, self.positions(p, f)))
            .collect()
    }

    /// The functions of the rows above the threshold, each once, in the
    /// rows' order: those assembly annotation shows.
    pub fn row_functions(&self) -> Vec<FunctionId> {
        let mut functions: Vec<FunctionId> = Vec::new();
        for &r in &self.rows {
            let f = self.agg.rows[r].function;
            if !functions.contains(&f) {
                functions.push(f);
            }
        }
        functions
    }

    /// Costs, calls and jumps per instruction of `functions`, over the
    /// chosen parts, each function with its name.
    pub fn instructions(&self, functions: &[FunctionId]) -> Vec<(Func, Positions<C>)> {
        let mut by = crate::by_instr(self.profile, |i| self.chosen[i], |f| functions.contains(&f));
        functions
            .iter()
            .map(|&f| {
                let p = by.remove(&f).unwrap_or_default();
                let file = self.profile.names.key(f).file;
                (self.own(f), self.positions(p, file))
            })
            .collect()
    }

    /// Position costs with their calls and jumps resolved.
    fn positions(&self, p: PositionCosts<C>, file: FileId) -> Positions<C> {
        let call = |c: &CallSite<C>| self.call(c.caller, file, c.callee, c.count, &c.inclusive);
        let jump = |j: &JumpSite<C>| JumpAt {
            target: j.target,
            target_function: self.own(j.target_function),
            conditional: j.conditional,
            executed: j.executed,
            taken: j.taken,
        };
        Positions {
            calls: p
                .calls
                .iter()
                .map(|(&at, cs)| (at, cs.iter().map(call).collect()))
                .collect(),
            jumps: p
                .jumps
                .iter()
                .map(|(&at, js)| (at, js.iter().map(jump).collect()))
                .collect(),
            costs: p.costs,
        }
    }
}

impl<C> View<C> {
    /// The first sort event: what orders the lists a writer sorts.
    pub fn primary(&self) -> usize {
        self.sort.first().map(|s| s.0).unwrap_or(0)
    }
}

/// A name as shown (`String::from_utf8_lossy`): names are checked as
/// UTF-8 first, which reads ASCII a word at a time, since a report of a
/// large profile makes tens of thousands of them.
fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}
