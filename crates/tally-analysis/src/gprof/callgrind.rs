//! gprof's call-graph analysis on a Callgrind profile: one routine per
//! function, its self cost in one event as gprof's "time", Callgrind's call
//! arcs as gprof's arcs, then gprof's propagation (cycles collapsed, each
//! callee's cost shared among its callers by their calls).
//!
//! Callgrind also records what gprof has to estimate: the inclusive cost of
//! every arc. The report shows it beside gprof's estimate, as `measured`:
//!
//! - for an arc, the arc's inclusive cost as recorded (summed over call
//!   sites and parts);
//! - for a function outside cycles, its inclusive cost computed
//!   cycle-correctly by [`Inclusive`] (what `tally annotate --inclusive=yes`
//!   shows); cycle members have none of their own;
//! - for a cycle, the cycle's inclusive cost (members' self costs plus the
//!   arcs that leave it).
//!
//! Arcs recorded with `calls=0` (calls still active when a dump was
//! written) are kept, as `tally annotate` keeps them: they become arcs with
//! count 0, like gprof's static arcs (`-c`). They take part in finding
//! cycles (so the cycles are exactly [`Inclusive`]'s), are listed with
//! their measured cost, and propagate nothing, since gprof shares a
//! callee's cost by counts.

use rustc_hash::FxHashMap;
use tally_model::{
    Cost, EventColumns, FunctionId, FunctionKey, Interner, Names, Profile, program_total,
};

use super::{
    AssembleOptions, Costs, Error, EventCounts, Graph, Measured, Notice, Options, Report, Routine,
    SymbolTable, arc_filter, assemble, selection,
};
use crate::{Aggregate, Inclusive};

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `b` as text, and whether it was UTF-8 (printed as it is).
fn text(b: &[u8]) -> (String, bool) {
    match String::from_utf8_lossy(b) {
        std::borrow::Cow::Borrowed(s) => (s.to_owned(), true),
        std::borrow::Cow::Owned(s) => (s, false),
    }
}

/// The arcs from which the analysis's independent steps run on two
/// threads: below, a thread costs more than it saves.
const TWO_THREADS_FROM_ARCS: usize = 4096;

/// Builds the report from a whole profile (all parts summed).
pub fn analyse_profile<C: Cost>(
    profile: &Profile<C>,
    event: Option<&str>,
    opts: &Options,
    source: &str,
) -> Result<Report, Error> {
    let agg = Aggregate::new(profile, |_| true);
    let sums: Vec<Vec<C>> = profile
        .parts
        .iter()
        .map(|p| {
            p.lines
                .totals()
                .unwrap_or_else(|| vec![C::ZERO; agg.events])
        })
        .collect();
    analyse(profile, &agg, &sums, event, opts, source)
}

/// Builds the report from the sums of all parts of `profile` (`agg`, made
/// with every part chosen) and the sums of each part's self costs
/// (`part_sums`, for parts that state no total). `event` defaults to the
/// first recorded event.
pub fn analyse<C: Cost>(
    profile: &Profile<C>,
    agg: &Aggregate<C>,
    part_sums: &[Vec<C>],
    event: Option<&str>,
    opts: &Options,
    source: &str,
) -> Result<Report, Error> {
    let columns = EventColumns::new(&profile.events);
    let e = match event {
        None if profile.events.is_empty() => {
            return Err(Error::Input(format!("{source}: the profile has no events")));
        }
        None => 0,
        Some(name) => columns.find(name)?,
    };
    let value = |costs: &[C]| columns.value(costs, e);
    let event_name = columns.names()[e].clone();
    let event_long = columns.long_name(e).map(str::to_owned);
    let events = columns.names().to_vec();

    let names = &profile.names;
    let n = names.function_count();
    let mut notices = Vec::new();

    // The routine table (every name made text) and gprof's graph of the
    // arcs need nothing of each other unless arcs are chosen by name (`-k`,
    // `-q FROM/TO`): on a large profile they are made on two threads.
    let specs = &opts.specs;
    let named_arcs = !specs.arcs_include.is_empty() || !specs.arcs_exclude.is_empty();
    let (routines, arcs) = if named_arcs {
        let r = routines(names);
        let arcs = {
            let (filtering, keep_arc) = arc_filter(&r.table, specs);
            arc_graph(agg, n, &value, filtering.then_some(&keep_arc))
        };
        (r, arcs)
    } else if agg.arcs.len() < TWO_THREADS_FROM_ARCS {
        (
            routines(names),
            arc_graph(agg, n, &value, None::<&fn(usize, usize) -> bool>),
        )
    } else {
        std::thread::scope(|scope| {
            let r = scope.spawn(|| routines(names));
            let arcs = arc_graph(agg, n, &value, None::<&fn(usize, usize) -> bool>);
            (r.join().expect("the routine table's thread panicked"), arcs)
        })
    };
    let Routines {
        table,
        objects,
        object_of,
        qualifier,
    } = routines;
    let ArcGraph {
        graph,
        measured: arc_measured,
        mut negative,
        kept: kept_arcs,
    } = arcs;

    let flat_selection = selection(&table, &specs.flat_include, &specs.flat_exclude);
    let graph_selection = selection(&table, &specs.graph_include, &specs.graph_exclude);
    let time_selection = selection(&table, &specs.time_include, &specs.time_exclude);

    let mut self_cost = vec![0i128; n];
    let mut flat_total = 0i128;
    for (f, c) in self_cost.iter_mut().enumerate() {
        if f >= agg.function_self.len() || !flat_selection.selects(f) {
            continue;
        }
        *c = value(agg.function_self.get(f));
        negative |= *c < 0;
        flat_total += *c;
    }
    if negative {
        notices.push(Notice(format!(
            "the profile has negative {event_name} costs or call counts (a difference of profiles?): negative counts are taken as 0, and gprof's shares assume costs that are not negative"
        )));
    }

    // Measured inclusive costs over the same arcs as gprof's graph, so that
    // both find the same cycles.
    let incl_agg;
    let incl_src = match kept_arcs {
        Some(kept) => {
            let mut a = agg.clone();
            a.arcs = kept;
            incl_agg = a;
            &incl_agg
        }
        None => agg,
    };
    let time: Vec<f64> = self_cost.iter().map(|&c| c as f64).collect();
    let raw_names: Vec<&str> = table.routines.iter().map(|r| r.name.as_str()).collect();
    let propagate = || {
        assemble(
            graph,
            &time,
            &raw_names,
            &AssembleOptions {
                graph: graph_selection,
                time: time_selection,
                static_arcs: Vec::new(),
            },
        )
    };
    // gprof's propagation and the measured costs need nothing of each
    // other: on a large profile they run on two threads.
    let (cg, incl) = if incl_src.arcs.len() < TWO_THREADS_FROM_ARCS {
        (propagate(), Inclusive::new(incl_src))
    } else {
        std::thread::scope(|scope| {
            let incl = scope.spawn(|| Inclusive::new(incl_src));
            let cg = propagate();
            (
                cg,
                incl.join().expect("the inclusive costs' thread panicked"),
            )
        })
    };

    let mut measured: Vec<Option<i128>> = (0..n)
        .map(|f| {
            incl.of(FunctionId(f as u32))
                .filter(|v| !v.is_empty())
                .map(&value)
        })
        .collect();
    for c in &cg.cycles {
        let number = incl.cycle_of[c.members[0]];
        let same = number.is_some_and(|k| {
            let ic = &incl.cycles[k as usize - 1];
            ic.members.len() == c.members.len()
                && c.members.iter().all(|&m| incl.cycle_of[m] == Some(k))
        });
        if !same {
            notices.push(Notice(format!(
                "cycle {} of gprof's analysis differs from the strongly connected components (a bug): no measured cost for it",
                c.number
            )));
        }
        measured.push(
            number
                .filter(|_| same)
                .map(|k| value(&incl.cycles[k as usize - 1].inclusive)),
        );
    }

    let program_total = value(&program_total(
        &profile.parts,
        agg.events,
        |_| true,
        |i| part_sums.get(i).cloned(),
    ));

    let mut commands: Vec<String> = Vec::new();
    for p in &profile.parts {
        if let Some(c) = &p.info.cmd {
            let c = lossy(c).trim().to_owned();
            if !commands.contains(&c) {
                commands.push(c);
            }
        }
    }
    if agg.arcs.is_empty() {
        notices.push(Notice(
            "the profile records no calls (Cachegrind profiles never do): every function is <spontaneous>".to_owned(),
        ));
    }

    drop(raw_names);
    Ok(Report {
        ncalls: cg.ncalls[..n].to_vec(),
        table,
        display_names: None,
        graph: Some(cg),
        flat_selection,
        source_files: Vec::new(),
        notices,
        costs: Costs::Events(EventCounts {
            source: source.to_owned(),
            creator: profile.creator.as_deref().map(lossy),
            commands,
            parts: profile.parts.len(),
            event: event_name,
            event_long,
            events,
            program_total,
            objects,
            object_of,
            qualifier,
            self_cost,
            flat_total,
        }),
        measured: Some(Measured {
            nodes: measured,
            arcs: arc_measured,
        }),
    })
}

/// gprof's graph of a profile's arcs.
struct ArcGraph<C> {
    graph: Graph,
    /// Each graph arc's measured inclusive cost.
    measured: Vec<i128>,
    /// Whether a call count was negative.
    negative: bool,
    /// The profile's arcs kept, when some were left out by name.
    kept: Option<Vec<crate::Arc<C>>>,
}

/// Callgrind's arcs as gprof's: summed over call-site files, in order of
/// first appearance, with their call counts and measured costs; only those
/// `keep` keeps, when given (`-k`, `-q FROM/TO`).
fn arc_graph<C: Cost, K: Fn(usize, usize) -> bool>(
    agg: &Aggregate<C>,
    n: usize,
    value: &impl Fn(&[C]) -> i128,
    keep: Option<&K>,
) -> ArcGraph<C> {
    let mut negative = false;
    let mut records = Vec::with_capacity(agg.arcs.len());
    let mut record_measured = Vec::with_capacity(agg.arcs.len());
    let mut kept = keep.map(|_| Vec::new());
    for arc in &agg.arcs {
        let (p, c) = (arc.caller.index(), arc.callee.index());
        if keep.is_some_and(|k| !k(p, c)) {
            continue;
        }
        let count = arc.count.to_i128();
        negative |= count < 0;
        records.push((p, c, u64::try_from(count.max(0)).unwrap_or(u64::MAX)));
        record_measured.push(value(&arc.inclusive));
        if let Some(kept) = kept.as_mut() {
            kept.push(arc.clone());
        }
    }
    let (mut graph, arc_of) = Graph::from_arcs(n, &records);
    let mut measured: Vec<i128> = vec![0; graph.arcs.len()];
    for ((&(_, c, count), &a), m) in records.iter().zip(&arc_of).zip(record_measured) {
        graph.ncalls[c] = graph.ncalls[c].saturating_add(count);
        measured[a] = measured[a].saturating_add(m);
    }
    ArcGraph {
        graph,
        measured,
        negative,
        kept,
    }
}

/// The routine table of a profile's functions, and what the report
/// needs of their objects.
struct Routines {
    table: SymbolTable,
    /// Object names by id.
    objects: Vec<String>,
    /// Each function's object id.
    object_of: Vec<u32>,
    /// See [`qualifiers`].
    qualifier: Vec<Option<String>>,
}

/// One routine per function, in id order (the id is the address). A
/// routine's name is the only text made per function (and it is printed
/// as it is): files are shared, and objects are kept once, by id.
fn routines(names: &Names) -> Routines {
    let n = names.function_count();
    let mut files_utf8 = true;
    let files: Vec<Option<std::sync::Arc<str>>> = (names.files.iter())
        .map(|f| {
            let (file, utf8) = text(f);
            files_utf8 &= utf8;
            (!file.is_empty()).then(|| std::sync::Arc::from(file))
        })
        .collect();
    let objects: Vec<String> = names.objects.iter().map(lossy).collect();
    let mut routines = Vec::with_capacity(n);
    let mut object_of = Vec::with_capacity(n);
    let mut keys = Vec::with_capacity(n);
    let mut names_utf8 = true;
    for f in 0..n {
        let id = FunctionId(f as u32);
        let key = names.key(id);
        let (name, utf8) = text(names.function_name(id));
        names_utf8 &= utf8;
        routines.push(Routine {
            display: String::new(),
            name,
            addr: f as u64,
            end_addr: f as u64,
            is_static: false,
            is_func: true,
            file: files[key.file.index()].clone(),
            line: 0,
        });
        object_of.push(key.object.0);
        keys.push(key);
    }
    let table = SymbolTable { routines };
    let printed = (
        printed_ids(&names.symbols, names_utf8),
        printed_ids(&names.files, files_utf8),
    );
    let qualifier = qualifiers(&table, &keys, printed, &objects);
    Routines {
        table,
        objects,
        object_of,
        qualifier,
    }
}

/// Each name's id as printed: the first id of the interner whose name
/// prints the same. Names are interned as bytes, and only names that are
/// not UTF-8 can print alike (lossily): when the names in use are all
/// UTF-8 (`all_utf8`, known from making them text), every id is its own.
fn printed_ids(names: &Interner, all_utf8: bool) -> Vec<u32> {
    if all_utf8 {
        return (0..names.len() as u32).collect();
    }
    let mut first: FxHashMap<String, u32> = FxHashMap::default();
    (names.iter().enumerate())
        .map(|(i, b)| *first.entry(lossy(b)).or_insert(i as u32))
        .collect()
}

/// For names shared by several functions: the file, or the object and
/// the file when the file does not tell them apart. Names and files are
/// compared by their ids as printed ([`printed_ids`]), so no name is
/// hashed or copied.
fn qualifiers(
    table: &SymbolTable,
    keys: &[FunctionKey],
    (symbol, file_id): (Vec<u32>, Vec<u32>),
    objects: &[String],
) -> Vec<Option<String>> {
    let name_of = |i: usize| symbol[keys[i].name.index()];
    let file_of = |i: usize| file_id[keys[i].file.index()];
    // Counts, not groups: nearly every name is unique, and a vector per
    // name would be an allocation per function.
    let mut count = vec![0u32; symbol.len()];
    for i in 0..keys.len() {
        count[name_of(i) as usize] += 1;
    }
    let shared = |i: usize| count[name_of(i) as usize] > 1;
    // A function of a shared name needs the object too when another of
    // its name has its file.
    let mut by_name_file: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    for i in (0..keys.len()).filter(|&i| shared(i)) {
        *by_name_file.entry((name_of(i), file_of(i))).or_default() += 1;
    }
    let file = |i: usize| table.routines[i].file.as_deref().unwrap_or("");
    (0..keys.len())
        .map(|i| {
            shared(i).then(|| {
                if by_name_file[&(name_of(i), file_of(i))] > 1 {
                    format!("{}, {}", objects[keys[i].object.index()], file(i))
                } else {
                    file(i).to_owned()
                }
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The qualifiers of functions (object, file, name), in order.
    fn qualified(functions: &[(&[u8], &[u8], &[u8])]) -> Vec<Option<String>> {
        let mut names = Names::default();
        for &(o, f, s) in functions {
            let key = FunctionKey {
                object: names.object(o),
                file: names.file(f),
                name: names.symbol(s),
            };
            names.function(key);
        }
        routines(&names).qualifier
    }

    /// A unique name has no qualifier; a shared one has its file, and its
    /// object too where another of its name has the same file.
    #[test]
    fn qualifiers_tell_functions_of_one_name_apart() {
        let got = qualified(&[
            (b"o1", b"f1", b"a"),
            (b"o2", b"f1", b"b"),
            (b"o3", b"f1", b"a"),
            (b"o4", b"f2", b"a"),
            (b"o5", b"", b"c"),
            (b"o6", b"", b"c"),
        ]);
        let want = [
            Some("o1, f1"),
            None,
            Some("o3, f1"),
            Some("f2"),
            Some("o5, "),
            Some("o6, "),
        ];
        assert_eq!(got, want.map(|q| q.map(String::from)));
    }

    /// Names that are not UTF-8 are told apart as they print: two names
    /// that differ only in bytes printed alike are one name there.
    #[test]
    fn names_that_print_alike_are_qualified() {
        let got = qualified(&[
            (b"o1", b"f1", b"x\xff"),
            (b"o2", b"f2", b"x\xfe"),
            (b"o3", b"f1", b"y"),
        ]);
        assert_eq!(got, [Some("f1".to_owned()), Some("f2".to_owned()), None]);
    }
}
