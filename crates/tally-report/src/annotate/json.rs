//! The annotate report as JSON: the same rows as the text, with every event
//! (recorded and derived) as `event → count` maps, names exactly as in the
//! profile. The schema is in docs/json.md.

use super::view::{Call, Func, Row, View};
use super::{asm, source};
use serde_json::{Map, Value, json};
use std::io::{self, Write};
use tally_analysis::CallKind;
use tally_model::Cost;

fn costs<C: Cost>(a: &View<C>, v: &[C]) -> Value {
    let mut m = Map::new();
    for (e, name) in a.events.names().iter().enumerate() {
        if a.events.is_ratio(e) {
            // A ratio is a number with decimals, or null where unknown.
            m.insert(name.clone(), json!(a.events.ratio(v, e)));
            continue;
        }
        let x = a.events.value(v, e);
        let n = if let Ok(u) = u64::try_from(x) {
            Value::from(u)
        } else if let Ok(i) = i64::try_from(x) {
            Value::from(i)
        } else {
            Value::from(x as f64)
        };
        m.insert(name.clone(), n);
    }
    Value::Object(m)
}

fn function_ref<C>(a: &View<C>, f: &Func) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("file".into(), json!(f.file));
    m.insert("function".into(), json!(f.function));
    m.insert("object".into(), json!(f.object));
    if a.cycles_found {
        m.insert("cycle".into(), json!(f.cycle));
    }
    m
}

/// How a call stands with respect to recursion: `null` when its cost is
/// exact, else `"recursive"` (a self call) or `"within_cycle"`; such calls
/// have `"inclusive": null`.
pub(super) fn recursion(kind: CallKind) -> Value {
    match kind {
        CallKind::Exact => Value::Null,
        CallKind::Recursive => json!("recursive"),
        CallKind::WithinCycle(_) => json!("within_cycle"),
    }
}

/// The `count`, `inclusive` and `recursion` fields of a call.
fn call_fields<C: Cost>(a: &View<C>, m: &mut Map<String, Value>, c: &Call<C>) {
    m.insert("count".into(), count(c.count));
    m.insert(
        "inclusive".into(),
        c.cost.as_deref().map_or(Value::Null, |v| costs(a, v)),
    );
    m.insert("recursion".into(), recursion(c.kind));
}

/// A row's callers or callees, each named by its `end` of the call.
fn calls<C: Cost>(a: &View<C>, calls: &[Call<C>], end: impl Fn(&Call<C>) -> &Func) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|call| {
                let mut c = function_ref(a, end(call));
                call_fields(a, &mut c, call);
                Value::Object(c)
            })
            .collect(),
    )
}

/// For a cycle member: the cost of its calls from outside the cycle and
/// their number.
/// A row's `inclusive` and, for a cycle member's derived cost,
/// `"inclusive_derived": true` (exact costs have no such field).
fn inclusive_fields<C: Cost>(a: &View<C>, m: &mut Map<String, Value>, row: &Row<C>) {
    if let Some(v) = &row.inclusive {
        m.insert("inclusive".into(), costs(a, v));
        if row.derived {
            m.insert("inclusive_derived".into(), Value::Bool(true));
        }
    }
}

fn entered_fields<C: Cost>(a: &View<C>, m: &mut Map<String, Value>, row: &Row<C>) {
    if let Some((v, n)) = &row.entered {
        m.insert("entered_from_outside".into(), costs(a, v));
        m.insert("calls_from_outside".into(), count(*n));
    }
}

fn count<C: Cost>(c: C) -> Value {
    let x = c.to_i128();
    match i64::try_from(x) {
        Ok(i) => Value::from(i),
        Err(_) => Value::from(x as f64),
    }
}

pub(super) fn write<C: Cost>(
    a: &View<C>,
    sources: Option<&source::Plan<C>>,
    assembly: Option<&[asm::AsmFunction<C>]>,
    out: &mut dyn Write,
    warnings: &[String],
) -> io::Result<()> {
    let h = &a.header;
    let mut root = Map::new();
    root.insert(
        "inputs".into(),
        json!(
            a.options
                .inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        ),
    );
    root.insert("creator".into(), json!(h.creator));
    root.insert("commands".into(), json!(h.commands));
    root.insert("events".into(), json!(a.events.names()));
    root.insert(
        "shown".into(),
        json!(
            a.shown
                .iter()
                .map(|&e| &a.events.names()[e])
                .collect::<Vec<_>>()
        ),
    );
    root.insert(
        "sort".into(),
        json!(
            a.sort
                .iter()
                .map(|&(e, t)| json!({"event": a.events.names()[e], "threshold": t}))
                .collect::<Vec<_>>()
        ),
    );
    root.insert("inclusive".into(), json!(a.options.inclusive));
    root.insert("transforms".into(), json!(a.options.transforms));
    let parts: Vec<Value> = h
        .parts
        .iter()
        .map(|p| json!({"number": p.number, "thread": p.thread, "pid": p.pid}))
        .collect();
    root.insert("parts".into(), Value::Array(parts));
    root.insert("totals".into(), costs(a, &a.totals));

    let mut rows = Vec::with_capacity(a.rows.len());
    for row in &a.rows {
        let mut m = function_ref(a, &row.func);
        m.insert("self".into(), costs(a, &row.self_cost));
        inclusive_fields(a, &mut m, row);
        if let Some(callers) = &row.callers {
            m.insert("callers".into(), calls(a, callers, |c| &c.caller));
        }
        if let Some(callees) = &row.callees {
            m.insert("callees".into(), calls(a, callees, |c| &c.callee));
        }
        rows.push(Value::Object(m));
    }
    root.insert("functions".into(), Value::Array(rows));

    let by_fn: Vec<Value> = a
        .functions
        .iter()
        .map(|row| {
            let mut m = function_ref(a, &row.func);
            m.insert("self".into(), costs(a, &row.self_cost));
            inclusive_fields(a, &mut m, row);
            entered_fields(a, &mut m, row);
            Value::Object(m)
        })
        .collect();
    root.insert("functions_by_name".into(), Value::Array(by_fn));

    if a.cycles_found {
        let cycles: Vec<Value> = a
            .cycles
            .iter()
            .map(|cy| {
                let members: Vec<Value> = cy
                    .members
                    .iter()
                    .map(|row| {
                        let mut m = function_ref(a, &row.func);
                        m.insert("self".into(), costs(a, &row.self_cost));
                        entered_fields(a, &mut m, row);
                        Value::Object(m)
                    })
                    .collect();
                json!({
                    "number": cy.number,
                    "members": members,
                    "self": costs(a, &cy.self_cost),
                    "inclusive": costs(a, &cy.inclusive),
                    "calls_in": count(cy.calls_in),
                    "calls_within": count(cy.calls_within),
                })
            })
            .collect();
        root.insert("cycles".into(), Value::Array(cycles));
    }

    if let Some(jumps) = &a.jumps {
        let jumps: Vec<Value> = jumps
            .iter()
            .map(|j| {
                json!({
                    "function": j.function,
                    "file": j.file,
                    "source": j.source,
                    "target_function": j.target_function,
                    "target_file": j.target_file,
                    "target": j.target,
                    "conditional": j.conditional,
                    "executed": count(j.executed),
                    "taken": count(j.taken),
                })
            })
            .collect();
        root.insert("jumps".into(), Value::Array(jumps));
    }

    if let Some(plan) = sources {
        let files: Vec<Value> = plan
            .files
            .iter()
            .map(|f| {
                let lines: Vec<Value> = f
                    .costs
                    .costs
                    .iter()
                    .map(|(l, c)| {
                        let calls: Vec<Value> = f
                            .costs
                            .calls
                            .get(l)
                            .map(|cs| {
                                cs.iter()
                                    .map(|c| {
                                        let mut m = function_ref(a, &c.callee);
                                        m.insert("caller".into(), json!(c.caller.function));
                                        m.insert("caller_object".into(), json!(c.caller.object));
                                        call_fields(a, &mut m, c);
                                        Value::Object(m)
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        json!({"line": l, "self": costs(a, c), "calls": calls})
                    })
                    .collect();
                json!({
                    "file": f.name,
                    "path": f.path.as_ref().map(|p| p.display().to_string()),
                    "lines_in_file": f.text.len(),
                    "newer_than_profile": f.newer_than_profile,
                    "lines": lines,
                })
            })
            .collect();
        let not_found: Vec<Value> = plan
            .not_found
            .iter()
            .map(|(n, c)| json!({"file": n, "self": costs(a, c)}))
            .collect();
        root.insert(
            "source".into(),
            json!({
                "files": files,
                "not_found": not_found,
                "annotated": costs(a, &plan.annotated),
                "unknown": costs(a, &plan.unknown),
                "below_threshold": costs(a, &plan.below_threshold),
            }),
        );
    }
    if let Some(functions) = assembly {
        root.insert("asm".into(), asm::json(functions, |v| costs(a, v)));
    }
    root.insert("warnings".into(), json!(warnings));
    serde_json::to_writer_pretty(&mut *out, &Value::Object(root)).map_err(io::Error::other)?;
    writeln!(out)
}
