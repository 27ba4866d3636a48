//! The JSON summary of `tally diff --json`: totals of both sides and the
//! functions and call arcs that changed most.
//!
//! Functions and arcs are matched across the two sides by name (object,
//! file, function), since the sides were read separately. Self costs are
//! per function; arcs are per (caller, callee) with counts and inclusive
//! costs, summed over call sites. A call inside a recursion or cycle on
//! either side has no inclusive cost (its recorded one counts work that
//! an outer activation counts too) and ranks by its count change, after
//! the calls with costs.

use crate::ReportError;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Value, json};
use tally_analysis::{Aggregate, Inclusive};
use tally_model::{
    Cost, EventColumns, FileId, FunctionId, FunctionKey, Names, ObjectId, Profile, SymbolId,
    program_total,
};

/// What to summarise.
#[derive(Clone, Debug, Default)]
pub struct SummaryOptions {
    /// How A is named in the output.
    pub a: String,
    /// How B is named.
    pub b: String,
    /// The event that ranks functions and calls (default: the first).
    pub sort: Option<String>,
    /// Entries per list.
    pub top: usize,
}

type Name = (Vec<u8>, Vec<u8>, Vec<u8>);

fn name_of(p: &Profile<i64>, f: FunctionId) -> Name {
    (
        p.names.function_object(f).to_vec(),
        p.names.function_file(f).to_vec(),
        p.names.function_name(f).to_vec(),
    )
}

fn text(b: &[u8]) -> String {
    if b.is_empty() {
        "???".into()
    } else {
        String::from_utf8_lossy(b).into_owned()
    }
}

/// The summary of B − A. Both profiles must have the same events.
pub fn summary(
    a: &Profile<i64>,
    b: &Profile<i64>,
    o: &SummaryOptions,
) -> Result<Value, ReportError> {
    let events: Vec<String> = b.events.recorded().iter().map(|e| e.name.clone()).collect();
    let ne = events.len();
    // Any event ranks, derived ones too; the cost vectors hold the
    // recorded ones.
    let columns = EventColumns::new(&b.events);
    let sort = match &o.sort {
        None => 0,
        Some(s) => columns.find(s)?,
    };
    let rank = |v: &[i64]| columns.value(v, sort);
    let ga = Aggregate::new(a, |_| true);
    let gb = Aggregate::new(b, |_| true);

    // Self costs per function name: [a, b].
    let mut funcs: FxHashMap<Name, [Vec<i64>; 2]> = FxHashMap::default();
    let mut order: Vec<Name> = Vec::new();
    for (side, (p, g)) in [(a, &ga), (b, &gb)].into_iter().enumerate() {
        for (f, _) in p.names.functions() {
            if !g.function_present.get(f.index()).copied().unwrap_or(false) {
                continue;
            }
            let n = name_of(p, f);
            let e = funcs.entry(n.clone()).or_insert_with(|| {
                order.push(n);
                [vec![0; ne], vec![0; ne]]
            });
            for (x, &v) in e[side].iter_mut().zip(g.function_self.get(f.index())) {
                *x = x.saturating_add(v);
            }
        }
    }
    let only = |side: usize| {
        funcs
            .values()
            .filter(|v| v[side].iter().any(|&x| x != 0) && v[1 - side].iter().all(|&x| x == 0))
            .count()
    };
    let (only_a, only_b) = (only(0), only(1));
    let delta = |v: &[Vec<i64>; 2]| -> Vec<i64> {
        v[1].iter()
            .zip(&v[0])
            .map(|(b, a)| b.saturating_sub(*a))
            .collect()
    };
    let mut ranked: Vec<&Name> = order
        .iter()
        .filter(|n| delta(&funcs[*n]).iter().any(|&d| d != 0))
        .collect();
    ranked.sort_by(|x, y| {
        let (dx, dy) = (delta(&funcs[*x]), delta(&funcs[*y]));
        rank(&dy)
            .unsigned_abs()
            .cmp(&rank(&dx).unsigned_abs())
            .then_with(|| x.cmp(y))
    });
    let functions: Vec<Value> = ranked
        .iter()
        .take(o.top)
        .map(|n| {
            let v = &funcs[*n];
            let d = delta(v);
            json!({
                "function": text(&n.2),
                "file": text(&n.1),
                "object": if n.0.is_empty() { Value::Null } else { Value::String(text(&n.0)) },
                "a": v[0],
                "b": v[1],
                "delta": d,
                "change_percent": percent(rank(&v[0]), rank(&d)),
            })
        })
        .collect();

    // Arcs per (caller, callee): [count a, count b], [incl a, incl b],
    // inside a recursion on either side.
    type ArcName = (Name, Name);
    type ArcSides = ([i64; 2], [Vec<i64>; 2], bool);
    let mut arcs: FxHashMap<ArcName, ArcSides> = FxHashMap::default();
    let mut arc_order: Vec<ArcName> = Vec::new();
    for (side, (p, g)) in [(a, &ga), (b, &gb)].into_iter().enumerate() {
        let graph = Inclusive::new(g);
        for arc in &g.arcs {
            let k = (name_of(p, arc.caller), name_of(p, arc.callee));
            let e = arcs.entry(k.clone()).or_insert_with(|| {
                arc_order.push(k);
                ([0; 2], [vec![0; ne], vec![0; ne]], false)
            });
            e.2 |= graph.call_kind(arc.caller, arc.callee).is_inside();
            e.0[side] = e.0[side].saturating_add(arc.count);
            for (x, &v) in e.1[side].iter_mut().zip(&arc.inclusive) {
                *x = x.saturating_add(v);
            }
        }
    }
    let mut arc_ranked: Vec<&ArcName> = arc_order
        .iter()
        .filter(|k| {
            let e = &arcs[*k];
            e.0[0] != e.0[1] || e.1[0] != e.1[1]
        })
        .collect();
    let key = |k: &ArcName| {
        let e = &arcs[k];
        (
            !e.2,
            if e.2 {
                0
            } else {
                rank(&e.1[1]).saturating_sub(rank(&e.1[0])).unsigned_abs()
            },
            e.0[1].saturating_sub(e.0[0]).unsigned_abs(),
        )
    };
    arc_ranked.sort_by(|x, y| key(y).cmp(&key(x)).then_with(|| x.cmp(y)));
    let calls: Vec<Value> = arc_ranked
        .iter()
        .take(o.top)
        .map(|k| {
            let e = &arcs[*k];
            let di: Vec<i64> = e.1[1]
                .iter()
                .zip(&e.1[0])
                .map(|(b, a)| b.saturating_sub(*a))
                .collect();
            let cost = |v: Value| if e.2 { Value::Null } else { v };
            json!({
                "caller": text(&k.0.2),
                "caller_file": text(&k.0.1),
                "callee": text(&k.1.2),
                "callee_file": text(&k.1.1),
                "count_a": e.0[0],
                "count_b": e.0[1],
                "count_delta": e.0[1].saturating_sub(e.0[0]),
                "inclusive_a": cost(json!(e.1[0])),
                "inclusive_b": cost(json!(e.1[1])),
                "inclusive_delta": cost(json!(di)),
                "recursive": e.2,
            })
        })
        .collect();

    let total =
        |p: &Profile<i64>| program_total(&p.parts, ne, |_| true, |i| p.parts[i].lines.totals());
    let (ta, tb) = (total(a), total(b));
    let td: Vec<i64> = tb
        .iter()
        .zip(&ta)
        .map(|(b, a)| b.saturating_sub(*a))
        .collect();
    Ok(json!({
        "a": o.a,
        "b": o.b,
        "events": events,
        "sort": columns.names().get(sort),
        "totals": {
            "a": ta,
            "b": tb,
            "delta": td,
            "change_percent": percent(rank(&ta), rank(&td)),
        },
        "functions_changed": ranked.len(),
        "functions_only_in_a": only_a,
        "functions_only_in_b": only_b,
        "functions": functions,
        "calls_changed": arc_ranked.len(),
        "calls": calls,
    }))
}

/// The calls `(caller, callee)` of `sides`, as ids of `target`'s functions
/// with the same names (calls whose functions `target` lacks are left
/// out): what a difference needs to find recursion, since the calls that
/// did not change are missing from it.
pub fn calls_by_name<C: Cost>(
    target: &Names,
    sides: &[&Profile<C>],
) -> Vec<(FunctionId, FunctionId)> {
    let mut out: FxHashSet<(FunctionId, FunctionId)> = FxHashSet::default();
    for p in sides {
        let mut map: Vec<Option<Option<FunctionId>>> = vec![None; p.names.function_count()];
        let mut find = |f: FunctionId| -> Option<FunctionId> {
            *map[f.index()].get_or_insert_with(|| {
                let n = &p.names;
                let key = FunctionKey {
                    object: ObjectId(target.objects.lookup(n.function_object(f))?),
                    file: FileId(target.files.lookup(n.function_file(f))?),
                    name: SymbolId(target.symbols.lookup(n.function_name(f))?),
                };
                target.find_function(key)
            })
        };
        for part in &p.parts {
            for call in part.calls.iter() {
                if let (Some(a), Some(b)) = (find(call.info.caller), find(call.info.callee)) {
                    out.insert((a, b));
                }
            }
        }
    }
    let mut v: Vec<_> = out.into_iter().collect();
    v.sort_unstable();
    v
}

/// `delta` as a percentage of `a`; `None` when A had none.
fn percent(a: i128, delta: i128) -> Option<f64> {
    (a != 0).then(|| (delta as f64 / a as f64 * 10000.0).round() / 100.0)
}
