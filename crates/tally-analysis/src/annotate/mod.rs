//! The analysis of `tally annotate`: which parts are summed, which events
//! are shown and sort, the rows above the threshold in their order, the
//! inclusive costs with cycles, and the calls of each row. [`Analysis`]
//! computes it once; [`Analysis::view`] hands the report's writers
//! everything they show as plain values ([`view`]), so that they lay it
//! out without asking back.

pub mod view;

use crate::Error;
use crate::{Aggregate, AggregateBuilder, CallKind, Inclusive, RowKey};
use std::path::PathBuf;
use tally_model::{Cost, EventColumns, Format, FunctionId, Profile, program_total};

/// Which call trees to print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tree {
    /// None.
    #[default]
    None,
    /// Callers of each function.
    Caller,
    /// Functions each function calls.
    Calling,
    /// Both.
    Both,
}

impl Tree {
    /// Callers are shown.
    pub fn callers(self) -> bool {
        matches!(self, Tree::Caller | Tree::Both)
    }
    /// Callees are shown.
    pub fn callees(self) -> bool {
        matches!(self, Tree::Calling | Tree::Both)
    }
}

/// Which parts of a profile to sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum PartFilter {
    /// All parts.
    #[default]
    All,
    /// Parts with these numbers (`part:`, else their 1-based position).
    Parts(Vec<u64>),
    /// Parts of these threads (`thread:`).
    Threads(Vec<u64>),
}

/// How many functions the tables show.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Threshold {
    /// The default of the tool the input comes from: 0.1 (cg_annotate's
    /// per-function minimum) for Cachegrind input, 99 (callgrind_annotate's
    /// cumulative share) for Callgrind input.
    #[default]
    Default,
    /// A percentage, read as the input's tool reads it: for Cachegrind, a
    /// function is shown while it has at least this share of the primary
    /// sort event; for Callgrind, functions are shown until together they
    /// cover this share (100 shows all).
    Percent(f64),
    /// Every function, whatever the input.
    All,
}

/// Which function tables the text report prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Grouping {
    /// `file:function` rows, the one table callgrind_annotate and
    /// cg_annotate print.
    #[default]
    File,
    /// `function:file` rows: each function once, its self cost summed over
    /// the files it has code in.
    Function,
    /// Both tables, `file:function` first.
    Both,
}

impl Grouping {
    /// The `file:function` table is printed.
    pub fn files(self) -> bool {
        matches!(self, Grouping::File | Grouping::Both)
    }
    /// The `function:file` table is printed.
    pub fn functions(self) -> bool {
        matches!(self, Grouping::Function | Grouping::Both)
    }
}

/// What the user asked for.
#[derive(Clone, Debug)]
pub struct Options {
    /// The input files, for the header and source age checks.
    pub inputs: Vec<PathBuf>,
    /// Events to show (names); empty for all.
    pub show: Vec<String>,
    /// Sort events with optional per-event thresholds; empty for the shown
    /// order.
    pub sort: Vec<(String, Option<f64>)>,
    /// Which functions to show; its meaning follows the input's tool.
    pub threshold: Threshold,
    /// Which function tables to print (text only; JSON has both).
    pub grouping: Grouping,
    /// Show and sort by inclusive costs.
    pub inclusive: bool,
    /// Call trees.
    pub tree: Tree,
    /// Annotate the source files of every function above the threshold.
    pub auto: bool,
    /// Source files to annotate whatever their cost.
    pub files: Vec<PathBuf>,
    /// Lines of context around annotated lines.
    pub context: usize,
    /// Directories to look for sources in.
    pub include: Vec<PathBuf>,
    /// Annotate disassembly.
    pub asm: bool,
    /// Print this many hottest jumps.
    pub jumps: Option<usize>,
    /// Percentages after the counts.
    pub show_percs: bool,
    /// ANSI colour.
    pub color: bool,
    /// Which parts to sum.
    pub parts: PartFilter,
    /// JSON instead of text.
    pub json: bool,
    /// Rank rows by the size of their values, sign aside, and apply the
    /// threshold to the sum of those sizes: for differences, where a large
    /// decrease matters as much as a large increase.
    pub magnitude: bool,
    /// The transforms applied before (as `kind=pattern`), for the reader
    /// of the output to know what the numbers leave out.
    pub transforms: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            inputs: Vec::new(),
            show: Vec::new(),
            sort: Vec::new(),
            threshold: Threshold::Default,
            grouping: Grouping::File,
            inclusive: false,
            tree: Tree::None,
            auto: true,
            files: Vec::new(),
            context: 8,
            include: Vec::new(),
            asm: false,
            jumps: None,
            show_percs: true,
            color: false,
            parts: PartFilter::All,
            json: false,
            magnitude: false,
            transforms: Vec::new(),
        }
    }
}

/// Whether a report needs the profile's lines (source or assembly
/// annotation); otherwise sums made while reading are enough.
pub fn needs_lines(opts: &Options) -> bool {
    opts.auto || !opts.files.is_empty() || opts.asm
}

/// Everything a report shows, computed once.
pub struct Analysis<'p, C> {
    /// The profile.
    pub profile: &'p Profile<C>,
    /// The options.
    pub opts: &'p Options,
    /// Parts summed.
    pub chosen: Vec<bool>,
    /// All events: recorded, then derived.
    pub events: EventColumns,
    /// Events shown, as indices into `events`.
    pub shown: Vec<usize>,
    /// Sort events (indices) with their thresholds.
    pub sort: Vec<(usize, f64)>,
    /// No threshold: every row is shown.
    pub show_all: bool,
    /// Thresholds are per-function minimums, as cg_annotate reads them
    /// (Cachegrind input), rather than cumulative shares.
    pub per_function: bool,
    /// Self costs and arcs.
    pub agg: Aggregate<C>,
    /// Inclusive costs, when `--inclusive` or a tree asks for them.
    pub incl: Option<Inclusive<C>>,
    /// The same analysis when only the calls of source or assembly lines
    /// need it (cycles are then not shown in the tables).
    recursion: Option<Inclusive<C>>,
    /// Inclusive cost per `file:function` row.
    pub row_incl: crate::RowCosts<C>,
    /// `file:function` rows above the threshold, sorted.
    pub rows: Vec<usize>,
    /// Functions above the threshold, sorted (function:file grouping; empty
    /// when no function:file table is printed).
    pub functions: Vec<FunctionId>,
    /// Program totals over the chosen parts.
    pub totals: Vec<C>,
    /// Notes for the user (printed on stderr by the CLI).
    pub warnings: Vec<String>,
    callers_of: Adjacency,
    callees_of: Adjacency,
}

/// Arc indices grouped by a dense id (a function's or a row's): the
/// arcs of id `i` are `arcs[start[i]..start[i + 1]]`.
#[derive(Default)]
struct Adjacency {
    start: Vec<u32>,
    arcs: Vec<u32>,
}

impl Adjacency {
    /// Groups arc `k` under `ids[k]` (none where `None`), keeping the
    /// arcs' order within each group.
    fn new(n: usize, ids: impl Iterator<Item = Option<usize>> + Clone) -> Self {
        let mut start = vec![0u32; n + 1];
        for i in ids.clone().flatten() {
            start[i + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let mut arcs = vec![0u32; start[n] as usize];
        for (k, i) in ids.enumerate() {
            if let Some(i) = i {
                arcs[next[i] as usize] = k as u32;
                next[i] += 1;
            }
        }
        Adjacency { start, arcs }
    }

    /// The arcs of id `i` (none for an id out of range).
    fn of(&self, i: usize) -> &[u32] {
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.arcs[a as usize..b as usize],
            _ => &[],
        }
    }
}

impl<'p, C: Cost> Analysis<'p, C> {
    /// Runs the analyses the options need.
    pub fn new(profile: &'p Profile<C>, opts: &'p Options) -> Result<Self, Error> {
        Self::build(profile, opts, None, Vec::new())
    }

    /// The same for a difference of two profiles: `calls` are the calls
    /// `(caller, callee)` of both inputs, in `profile`'s ids, since the
    /// calls that did not change are missing from the difference and still
    /// make recursion.
    pub fn for_difference(
        profile: &'p Profile<C>,
        opts: &'p Options,
        calls: Vec<(FunctionId, FunctionId)>,
    ) -> Result<Self, Error> {
        Self::build(profile, opts, None, calls)
    }

    /// The same, from sums made while reading (`profile` then has no lines).
    pub fn from_sums(
        profile: &'p Profile<C>,
        opts: &'p Options,
        sums: AggregateBuilder<C>,
    ) -> Result<Self, Error> {
        Self::build(profile, opts, Some(sums), Vec::new())
    }

    fn build(
        profile: &'p Profile<C>,
        opts: &'p Options,
        sums: Option<AggregateBuilder<C>>,
        more_calls: Vec<(FunctionId, FunctionId)>,
    ) -> Result<Self, Error> {
        let chosen = choose_parts(profile, &opts.parts)?;
        let events = EventColumns::new(&profile.events);
        let find = |name: &str| events.find(name).map_err(Error::from);
        let shown: Vec<usize> = if opts.show.is_empty() {
            (0..events.len()).collect()
        } else {
            opts.show
                .iter()
                .map(|n| find(n))
                .collect::<Result<_, _>>()?
        };
        // Each input follows its own tool. Without --sort, all recorded
        // events in file order sort; the single threshold applies to the
        // first sort event. callgrind_annotate gives the others 0 (nothing
        // more to cover); cg_annotate gives them 100 (a function is shown
        // for them only with all of the event). Per-event thresholds in
        // --sort replace the single one, and the events without one get 0.
        let per_function = profile.format == Format::Cachegrind;
        let (single, show_all) = match opts.threshold {
            Threshold::All => (if per_function { 0.0 } else { 100.0 }, true),
            Threshold::Default => (if per_function { 0.1 } else { 99.0 }, false),
            Threshold::Percent(t) => (t, false),
        };
        let rest = if per_function { 100.0 } else { 0.0 };
        let any_own = opts.sort.iter().any(|(_, t)| t.is_some());
        let sort: Vec<(usize, f64)> = if opts.sort.is_empty() {
            (0..profile.events.recorded().len().max(1).min(events.len()))
                .map(|e| (e, if e == 0 { single } else { rest }))
                .collect()
        } else {
            opts.sort
                .iter()
                .enumerate()
                .map(|(i, (n, t))| {
                    let th = match (any_own, t) {
                        (_, Some(t)) => *t,
                        (true, None) => 0.0,
                        (false, None) if i == 0 => single,
                        (false, None) => rest,
                    };
                    find(n).map(|e| (e, th))
                })
                .collect::<Result<_, _>>()?
        };
        let show_all = show_all || (!per_function && !any_own && single >= 100.0);
        if let Some(&(e, _)) = sort.iter().find(|&&(e, _)| events.is_ratio(e)) {
            return Err(Error::Input(format!(
                "--sort: `{}` is a ratio, which is not summed, so it cannot rank functions or cover a threshold; sort by its parts",
                events.names()[e]
            )));
        }

        let (agg, part_sums) = match sums {
            Some(b) => {
                let t = b.part_totals();
                (
                    b.finish(profile.names.function_count(), |i| chosen[i]),
                    Some(t),
                )
            }
            None => (Aggregate::new(profile, |i| chosen[i]), None),
        };
        let mut warnings = Vec::new();
        let need_incl = opts.inclusive || opts.tree != Tree::None;
        // Whole stacks give every function its exact cumulative cost.
        let stacks = profile
            .stacks
            .as_ref()
            .filter(|_| more_calls.is_empty() && chosen.iter().all(|&c| c));
        // Source and assembly views ask it only where calls are: a profile
        // without any (Cachegrind's) needs it for inclusive costs alone.
        let calls = !agg.arcs.is_empty() || !more_calls.is_empty();
        let mut graph = (need_incl || (needs_lines(opts) && calls)).then(|| {
            stacks
                .and_then(|s| Inclusive::from_stacks(&agg, s))
                .unwrap_or_else(|| Inclusive::with_calls(&agg, more_calls.iter().copied()))
        });
        let (incl, recursion) = if need_incl {
            (graph.take(), None)
        } else {
            (None, graph)
        };
        let row_incl = match &incl {
            Some(i) => i.rows(&agg, &profile.names),
            None => Default::default(),
        };
        if opts.tree != Tree::None && agg.arcs.is_empty() {
            warnings.push(
                "the profile has no calls (Cachegrind files never do; Callgrind records them): no call trees to show".to_string(),
            );
        }
        // A multi-part file is not reduced to its last part.
        let totals = program_total(
            &profile.parts,
            agg.events,
            |i| chosen[i],
            |i| match &part_sums {
                Some(s) => s.get(i).cloned(),
                None => profile.parts[i].lines.totals(),
            },
        );
        let mut a = Analysis {
            profile,
            opts,
            chosen,
            events,
            shown,
            sort,
            show_all,
            per_function,
            agg,
            incl,
            recursion,
            row_incl,
            rows: Vec::new(),
            functions: Vec::new(),
            totals,
            warnings,
            callers_of: Default::default(),
            callees_of: Default::default(),
        };
        if opts.tree != Tree::None {
            a.index_arcs();
        }
        a.rows = a.select_rows();
        // Only the function:file table (text or JSON) shows them.
        if opts.json || opts.grouping.functions() {
            a.functions = a.select_functions();
        }
        Ok(a)
    }

    /// Value of event `e` (recorded or derived) for a cost vector.
    pub fn value(&self, costs: &[C], e: usize) -> i128 {
        self.events.value(costs, e)
    }

    /// Cost of a row used for sorting and thresholds: inclusive when asked
    /// (a cycle member's derived).
    fn row_rank(&self, r: usize) -> &[C] {
        if self.opts.inclusive
            && let Some(v) = self.row_incl.get(r)
        {
            return v;
        }
        self.agg.row_self.get(r)
    }

    fn function_rank(&self, f: FunctionId) -> &[C] {
        if self.opts.inclusive
            && let Some(i) = &self.incl
        {
            return i.shown(f).0;
        }
        self.agg.function_self.get(f.index())
    }

    /// `file:function` as shown.
    pub fn row_name(&self, key: RowKey) -> String {
        let n = &self.profile.names;
        format!(
            "{}:{}",
            String::from_utf8_lossy(n.file_name(key.file)),
            String::from_utf8_lossy(n.function_name(key.function))
        )
    }

    /// The object of a function, if it has one.
    pub fn object(&self, f: FunctionId) -> Option<String> {
        let o = self.profile.names.function_object(f);
        (!o.is_empty()).then(|| String::from_utf8_lossy(o).into_owned())
    }

    /// Sorts `keys` by their sort-event values (then by name) and keeps
    /// those above the threshold. Which rows pass depends on the values
    /// only, so the keys are sorted by value first and names are compared
    /// only within runs of equal values that reach the rows shown, from the
    /// interned bytes (see [`cmp_names`]): no name is read for the many
    /// rows the threshold leaves out.
    fn select<'k, K: Copy>(
        &'k self,
        keys: Vec<K>,
        rank: impl Fn(K) -> &'k [C],
        name: impl Fn(K) -> [&'k [u8]; 2],
    ) -> Vec<K> {
        let sort_ev: Vec<usize> = self.sort.iter().map(|s| s.0).collect();
        let width = sort_ev.len();
        // cg_annotate ranks by size, sign aside (cg_diff's output).
        let abs = self.opts.magnitude || self.per_function;
        let mut vals: Vec<i128> = Vec::with_capacity(keys.len() * width);
        for &k in &keys {
            let r = rank(k);
            vals.extend(sort_ev.iter().map(|&e| {
                let v = self.value(r, e);
                if abs { v.abs() } else { v }
            }));
        }
        let vals_of = |i: usize| &vals[i * width..(i + 1) * width];
        // By decreasing values, then the keys' own order (as a stable sort
        // would leave equal names).
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        let by_value = |&x: &u32, &y: &u32| {
            if width == 1 {
                vals[y as usize].cmp(&vals[x as usize]).then(x.cmp(&y))
            } else {
                vals_of(y as usize).cmp(vals_of(x as usize)).then(x.cmp(&y))
            }
        };
        // The threshold usually shows few of many keys: only a prefix of
        // the order is sorted, grown until it holds the rows shown and the
        // whole run of values equal to the last one shown (which is then
        // ordered by name). The order is total, so the prefix is the one a
        // full sort gives.
        let n = keys.len();
        let mut sorted = if self.show_all { n } else { n.min(1024) };
        let shown = loop {
            if sorted < n {
                order.select_nth_unstable_by(sorted - 1, by_value);
                order[..sorted].sort_unstable_by(by_value);
            } else {
                order.sort_unstable_by(by_value);
            }
            let shown = self.shown_count(&order[..sorted], width, &vals, n);
            let closed = sorted == n
                || (shown < sorted
                    && (shown == 0
                        || vals_of(order[shown - 1] as usize)
                            != vals_of(order[sorted - 1] as usize)));
            if closed {
                break shown;
            }
            sorted = n.min(sorted.saturating_mul(8));
        };
        let order = &mut order[..sorted];
        // Equal values in name order, for the runs the rows shown reach
        // (each name once, with whether it is UTF-8).
        let mut start = 0;
        while start < shown {
            let v = vals_of(order[start] as usize);
            let end = start
                + order[start..]
                    .iter()
                    .take_while(|&&o| vals_of(o as usize) == v)
                    .count();
            if end - start > 1 {
                let mut run: Vec<(NameBytes<'_>, u32)> = order[start..end]
                    .iter()
                    .map(|&o| {
                        let n = name(keys[o as usize]);
                        ((n, utf8(n)), o)
                    })
                    .collect();
                run.sort_unstable_by(|((a, a_ok), x), ((b, b_ok), y)| {
                    cmp_names(*a, *a_ok && *b_ok, *b).then(x.cmp(y))
                });
                for (slot, (_, o)) in order[start..end].iter_mut().zip(run) {
                    *slot = o;
                }
            }
            start = end;
        }
        order[..shown].iter().map(|&o| keys[o as usize]).collect()
    }

    /// How many of the keys in `order` (sorted by decreasing values) the
    /// threshold shows; it depends on the values only, not on how equal
    /// values are ordered.
    fn shown_count(&self, order: &[u32], width: usize, vals: &[i128], n: usize) -> usize {
        let vals_of = |i: usize| &vals[i * width..(i + 1) * width];
        let sort_ev: Vec<usize> = self.sort.iter().map(|s| s.0).collect();
        let all = self.show_all;
        let totals: Vec<i128> = if self.opts.magnitude {
            (0..width)
                .map(|i| (0..n).map(|k| vals_of(k)[i]).sum())
                .collect()
        } else {
            sort_ev
                .iter()
                .map(|&e| self.value(&self.totals, e))
                .collect()
        };
        let mut cum = vec![0i128; width];
        let mut shown = 0;
        for &o in order {
            let vals = vals_of(o as usize);
            if !all && self.per_function {
                // cg_annotate: stop at the first function that has its
                // event's threshold share of no sort event.
                let above = self.sort.iter().enumerate().any(|(i, s)| {
                    let t = totals[i].abs();
                    let prop = if t == 0 {
                        0.0
                    } else {
                        vals[i] as f64 * 100.0 / t as f64
                    };
                    prop >= s.1
                });
                if !above {
                    break;
                }
            } else if !all {
                let reached = self.sort.iter().enumerate().all(|(i, s)| {
                    let prop = if totals[i] > 0 {
                        cum[i] as f64 * 100.0 / totals[i] as f64
                    } else {
                        cum[i] as f64 * 100.0
                    };
                    prop >= s.1
                });
                if reached {
                    break;
                }
            }
            for i in 0..cum.len() {
                // Inclusive costs overlap, so what counts is how much of the
                // total the last row shown leaves out.
                if self.opts.inclusive && !self.opts.magnitude {
                    cum[i] = totals[i] - vals[i];
                } else {
                    cum[i] += vals[i];
                }
            }
            shown += 1;
        }
        shown
    }

    fn select_rows(&self) -> Vec<usize> {
        let keys: Vec<usize> = (0..self.agg.rows.len()).collect();
        let n = &self.profile.names;
        self.select(
            keys,
            |r| self.row_rank(r),
            |r| {
                let k = self.agg.rows[r];
                [n.file_name(k.file), n.function_name(k.function)]
            },
        )
    }

    fn select_functions(&self) -> Vec<FunctionId> {
        let keys: Vec<FunctionId> = (0..self.agg.function_present.len())
            .filter(|&f| self.agg.function_present[f])
            .map(|f| FunctionId(f as u32))
            .collect();
        let n = &self.profile.names;
        self.select(
            keys,
            |f| self.function_rank(f),
            |f| [n.function_name(f), n.function_file(f)],
        )
    }

    /// `function:file` as shown in the by-function table.
    pub fn function_name(&self, f: FunctionId) -> String {
        let n = &self.profile.names;
        format!(
            "{}:{}",
            String::from_utf8_lossy(n.function_name(f)),
            String::from_utf8_lossy(n.function_file(f))
        )
    }

    /// The row that stands for a function as a callee: the one of its own
    /// file.
    pub fn callee_row(&self, f: FunctionId) -> RowKey {
        RowKey {
            function: f,
            file: self.profile.names.key(f).file,
        }
    }

    /// Lists the arcs into each function and out of each row, as flat
    /// arrays indexed by the dense function and row ids, arcs in their
    /// order within each list.
    fn index_arcs(&mut self) {
        let arcs = &self.agg.arcs;
        let callers = Adjacency::new(
            self.agg.function_present.len(),
            arcs.iter().map(|arc| Some(arc.callee.index())),
        );
        let callees = Adjacency::new(
            self.agg.rows.len(),
            arcs.iter().map(|arc| {
                self.agg.row_of(RowKey {
                    function: arc.caller,
                    file: arc.site_file,
                })
            }),
        );
        self.callers_of = callers;
        self.callees_of = callees;
    }

    /// Arcs into `f`, costliest first (needs a tree to be asked for).
    pub fn callers(&self, f: FunctionId) -> Vec<&crate::Arc<C>> {
        self.sorted_arcs(self.callers_of.of(f.index()), |arc| {
            self.row_name(RowKey {
                function: arc.caller,
                file: arc.site_file,
            })
        })
    }

    /// Arcs made from the row `key`, costliest first.
    pub fn callees(&self, key: RowKey) -> Vec<&crate::Arc<C>> {
        let arcs = self
            .agg
            .row_of(key)
            .map_or(&[][..], |r| self.callees_of.of(r));
        self.sorted_arcs(arcs, |arc| self.row_name(self.callee_row(arc.callee)))
    }

    /// Arcs by decreasing cost of the sort events, then by name; sorted when
    /// asked, since only the rows shown need it.
    fn sorted_arcs(
        &self,
        arcs: &[u32],
        name: impl Fn(&crate::Arc<C>) -> String,
    ) -> Vec<&crate::Arc<C>> {
        let mut v: Vec<(CallRank, &crate::Arc<C>)> = arcs
            .iter()
            .map(|&i| {
                let arc = &self.agg.arcs[i as usize];
                (
                    self.call_rank(arc.caller, arc.callee, arc.count, &arc.inclusive),
                    arc,
                )
            })
            .collect();
        v.sort_by(|x, y| y.0.cmp(&x.0).then_with(|| name(x.1).cmp(&name(y.1))));
        v.into_iter().map(|x| x.1).collect()
    }

    /// Sort key of a call: calls with a cost of their own by that cost,
    /// then calls inside a recursion by their count.
    pub(crate) fn call_rank(
        &self,
        caller: FunctionId,
        callee: FunctionId,
        count: C,
        recorded: &[C],
    ) -> CallRank {
        match self.call_cost(caller, callee, recorded) {
            Some(v) => (
                true,
                self.sort.iter().map(|&(e, _)| self.value(v, e)).collect(),
                count.to_i128(),
            ),
            None => (false, Vec::new(), count.to_i128()),
        }
    }

    /// The cycle of a function, if any.
    pub fn cycle_of(&self, f: FunctionId) -> Option<u32> {
        self.incl.as_ref().and_then(|i| i.cycle_of[f.index()])
    }

    /// The call graph's analysis, when computed (for inclusive costs,
    /// trees, source or assembly).
    pub fn graph(&self) -> Option<&Inclusive<C>> {
        self.incl.as_ref().or(self.recursion.as_ref())
    }

    /// Where a call stands with respect to recursion.
    pub fn call_kind(&self, caller: FunctionId, callee: FunctionId) -> CallKind {
        match self.graph() {
            Some(g) => g.call_kind(caller, callee),
            None if caller == callee => CallKind::Recursive,
            None => CallKind::Exact,
        }
    }

    /// The cost every view shows for a call: its recorded inclusive cost
    /// when exact, `None` inside a recursion or cycle (see
    /// [`Inclusive::call_cost`]).
    pub fn call_cost<'x>(
        &self,
        caller: FunctionId,
        callee: FunctionId,
        recorded: &'x [C],
    ) -> Option<&'x [C]> {
        (!self.call_kind(caller, callee).is_inside()).then_some(recorded)
    }
}

/// How calls are ranked: those with a cost of their own first, by that
/// cost of the sort events, then by count.
pub(crate) type CallRank = (bool, Vec<i128>, i128);

/// [`cmp_names`] for any two names.
#[cfg(test)]
fn cmp_shown(a: [&[u8]; 2], b: [&[u8]; 2]) -> std::cmp::Ordering {
    cmp_names(a, utf8(a) && utf8(b), b)
}

/// A name's two parts as interned, and whether both are UTF-8.
type NameBytes<'a> = ([&'a [u8]; 2], bool);

/// Whether both parts of a name are UTF-8.
fn utf8(p: [&[u8]; 2]) -> bool {
    p.iter().all(|s| std::str::from_utf8(s).is_ok())
}

/// Orders two names as their shown text (`a[0]:a[1]`, each part as
/// `String::from_utf8_lossy` shows it) orders: byte by byte when all four
/// parts are UTF-8 (`all_utf8`), as the text is then the bytes; through
/// the text otherwise.
fn cmp_names(a: [&[u8]; 2], all_utf8: bool, b: [&[u8]; 2]) -> std::cmp::Ordering {
    if all_utf8 {
        fn bytes<'a>(p: [&'a [u8]; 2]) -> impl Iterator<Item = u8> + 'a {
            p[0].iter()
                .chain(std::iter::once(&b':'))
                .chain(p[1].iter())
                .copied()
        }
        bytes(a).cmp(bytes(b))
    } else {
        let text = |p: [&[u8]; 2]| {
            format!(
                "{}:{}",
                String::from_utf8_lossy(p[0]),
                String::from_utf8_lossy(p[1])
            )
        };
        text(a).cmp(&text(b))
    }
}

fn choose_parts<C: Cost>(profile: &Profile<C>, filter: &PartFilter) -> Result<Vec<bool>, Error> {
    let parts = &profile.parts;
    let chosen: Vec<bool> = match filter {
        PartFilter::All => vec![true; parts.len()],
        PartFilter::Parts(ns) => {
            for &n in ns {
                let found = parts
                    .iter()
                    .enumerate()
                    .any(|(i, p)| p.info.number.unwrap_or(i as u64 + 1) == n);
                if !found {
                    let have: Vec<String> = parts
                        .iter()
                        .enumerate()
                        .map(|(i, p)| p.info.number.unwrap_or(i as u64 + 1).to_string())
                        .collect();
                    return Err(Error::NoSuchPart(format!(
                        "no part {n} (the input has parts {})",
                        have.join(", ")
                    )));
                }
            }
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| ns.contains(&p.info.number.unwrap_or(i as u64 + 1)))
                .collect()
        }
        PartFilter::Threads(ts) => {
            for &t in ts {
                if !parts.iter().any(|p| p.info.thread.unwrap_or(1) == t) {
                    let mut have: Vec<u64> =
                        parts.iter().map(|p| p.info.thread.unwrap_or(1)).collect();
                    have.sort_unstable();
                    have.dedup();
                    let have: Vec<String> = have.iter().map(|t| t.to_string()).collect();
                    return Err(Error::NoSuchPart(format!(
                        "no thread {t} (the input has threads {})",
                        have.join(", ")
                    )));
                }
            }
            parts
                .iter()
                .map(|p| ts.contains(&p.info.thread.unwrap_or(1)))
                .collect()
        }
    };
    Ok(chosen)
}

/// A jump edge summed over the chosen parts.
#[derive(Clone, Debug)]
pub struct JumpRow<C> {
    /// Function the jump is in.
    pub function: FunctionId,
    /// Source file of the jump.
    pub file: tally_model::FileId,
    /// Position of the jump (in `positions:` order).
    pub source: Vec<u64>,
    /// Function jumped to.
    pub target_function: FunctionId,
    /// File jumped to.
    pub target_file: tally_model::FileId,
    /// Position jumped to.
    pub target: Vec<u64>,
    /// `jcnd=` rather than `jump=`.
    pub conditional: bool,
    /// Times executed.
    pub executed: C,
    /// Times taken.
    pub taken: C,
}

impl<C: Cost> Analysis<'_, C> {
    /// The `n` hottest jumps, by executed count, then taken count.
    pub fn hot_jumps(&self, n: usize) -> Vec<JumpRow<C>> {
        type Key = (FunctionId, Vec<u64>, FunctionId, Vec<u64>, bool);
        let mut index: rustc_hash::FxHashMap<Key, usize> = Default::default();
        let mut rows: Vec<JumpRow<C>> = Vec::new();
        for (pi, part) in self.profile.parts.iter().enumerate() {
            if !self.chosen[pi] {
                continue;
            }
            for j in part.jumps.iter() {
                let i = j.info;
                let key = (
                    i.function,
                    j.source.to_vec(),
                    i.target_function,
                    j.target.to_vec(),
                    i.conditional,
                );
                let idx = *index.entry(key).or_insert_with(|| {
                    rows.push(JumpRow {
                        function: i.function,
                        file: i.file,
                        source: j.source.to_vec(),
                        target_function: i.target_function,
                        target_file: i.target_file,
                        target: j.target.to_vec(),
                        conditional: i.conditional,
                        executed: C::ZERO,
                        taken: C::ZERO,
                    });
                    rows.len() - 1
                });
                let r = &mut rows[idx];
                r.executed = r.executed.saturating_add(i.executed);
                r.taken = r.taken.saturating_add(i.taken);
            }
        }
        rows.sort_by(|a, b| {
            b.executed
                .cmp(&a.executed)
                .then(b.taken.cmp(&a.taken))
                .then(a.function.cmp(&b.function))
                .then(a.source.cmp(&b.source))
        });
        rows.truncate(n);
        rows
    }

    /// A position as text: `0xADDR`, `file:line` or both.
    pub fn position_text(&self, file: tally_model::FileId, pos: &[u64]) -> String {
        let p = self.profile.positions;
        let file = String::from_utf8_lossy(self.profile.names.file_name(file));
        match (p.instr(), p.line()) {
            (Some(i), Some(l)) => format!("0x{:x} ({file}:{})", pos[i], pos[l]),
            (Some(i), None) => format!("0x{:x}", pos[i]),
            (None, Some(l)) => format!("{file}:{}", pos[l]),
            (None, None) => file.into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::cmp_shown;

    /// The rows shown, and their order, are those of a full sort by value
    /// then name, cut where the threshold says, whatever the threshold and
    /// its reading (Callgrind's covered share, Cachegrind's share of each
    /// function): also when the rows shown or their last run of equal
    /// values reach past the prefix of the order that is sorted first.
    #[test]
    fn partial_ranking_equals_a_full_sort() {
        // 5,000 functions; costs with long runs of ties.
        let n = 5000u64;
        let name = |i: u64| format!("f{:05}", (i * 7919) % n);
        let mut all: Vec<(u64, String)> = (0..n)
            .map(|i| (i % 3 + 1, format!("a.c:{}", name(i))))
            .collect();
        all.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let total: u64 = all.iter().map(|r| r.0).sum();
        let share = |v: u64| v as f64 * 100.0 / total as f64;
        for callgrind in [true, false] {
            let mut text = String::new();
            if callgrind {
                text.push_str("# callgrind format\n");
            }
            text.push_str("events: Ir\nfl=(1) a.c\n");
            for i in 0..n {
                text.push_str(&format!("fn=({}) {}\n1 {}\n", i + 1, name(i), i % 3 + 1));
            }
            let input = tally_formats::Input::from_bytes("t.out", text.into_bytes()).unwrap();
            let (profile, _) = tally_formats::callgrind::read::<u64>(input).unwrap();
            for t in [
                0.0, 0.01, 0.03, 1.0, 10.0, 33.0, 34.0, 60.0, 66.7, 90.0, 99.0, 99.99,
            ] {
                let opts = super::Options {
                    threshold: super::Threshold::Percent(t),
                    auto: false,
                    ..Default::default()
                };
                let a = super::Analysis::new(&profile, &opts).unwrap();
                let got: Vec<String> = a.rows.iter().map(|&r| a.row_name(a.agg.rows[r])).collect();
                let mut cum = 0u64;
                let want: Vec<String> = all
                    .iter()
                    .take_while(|r| {
                        if !callgrind {
                            return share(r.0) >= t;
                        }
                        let covered = share(cum) >= t;
                        cum += r.0;
                        !covered
                    })
                    .map(|r| r.1.clone())
                    .collect();
                assert_eq!(got, want, "callgrind {callgrind}, threshold {t}");
            }
        }
    }

    /// Names are sorted by the text shown, whatever their bytes: the
    /// byte-wise comparison must agree with comparing the lossy text,
    /// including where a part is not UTF-8 (U+FFFD sorts above ASCII) or
    /// where one name is a prefix of another across the `:`.
    #[test]
    fn names_compare_as_their_shown_text() {
        let parts: [&[u8]; 8] = [
            b"",
            b"a",
            b"a:b",
            b"ab",
            b"\xff",
            b"a\xffb",
            "é".as_bytes(),
            b"z",
        ];
        let shown = |p: [&[u8]; 2]| {
            format!(
                "{}:{}",
                String::from_utf8_lossy(p[0]),
                String::from_utf8_lossy(p[1])
            )
        };
        for &a0 in &parts {
            for &a1 in &parts {
                for &b0 in &parts {
                    for &b1 in &parts {
                        let (a, b) = ([a0, a1], [b0, b1]);
                        assert_eq!(cmp_shown(a, b), shown(a).cmp(&shown(b)), "{a:?} {b:?}");
                    }
                }
            }
        }
    }
}
