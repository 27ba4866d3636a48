//! The annotate report as JSON: the same rows as the text, with every event
//! (recorded and derived) as `event → count` maps, names exactly as in the
//! profile. The schema is in docs/json.md.

use super::{Analysis, source};
use serde_json::{Map, Value, json};
use std::io::{self, Write};
use tally_analysis::{CallKind, RowKey};
use tally_model::{Cost, FunctionId};

fn costs<C: Cost>(a: &Analysis<'_, C>, v: &[C]) -> Value {
    let mut m = Map::new();
    for (e, name) in a.events.names().iter().enumerate() {
        if a.events.is_ratio(e) {
            // A ratio is a number with decimals, or null where unknown.
            m.insert(name.clone(), json!(a.events.ratio(v, e)));
            continue;
        }
        let x = a.value(v, e);
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

fn text(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn function_ref<C: Cost>(
    a: &Analysis<'_, C>,
    f: FunctionId,
    file: tally_model::FileId,
) -> Map<String, Value> {
    let n = &a.profile.names;
    let mut m = Map::new();
    m.insert("file".into(), text(n.file_name(file)));
    m.insert("function".into(), text(n.function_name(f)));
    m.insert("object".into(), text(n.function_object(f)));
    if a.incl.is_some() {
        m.insert("cycle".into(), json!(a.cycle_of(f)));
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
fn call_fields<C: Cost>(
    a: &Analysis<'_, C>,
    m: &mut Map<String, Value>,
    caller: FunctionId,
    callee: FunctionId,
    n: C,
    recorded: &[C],
) {
    m.insert("count".into(), count(n));
    m.insert(
        "inclusive".into(),
        a.call_cost(caller, callee, recorded)
            .map_or(Value::Null, |v| costs(a, v)),
    );
    m.insert("recursion".into(), recursion(a.call_kind(caller, callee)));
}

/// For a cycle member: the cost of its calls from outside the cycle and
/// their number.
fn entered_fields<C: Cost>(a: &Analysis<'_, C>, m: &mut Map<String, Value>, f: FunctionId) {
    if let Some((v, n)) = a.graph().and_then(|g| g.entered(f)) {
        m.insert("entered_from_outside".into(), costs(a, v));
        m.insert("calls_from_outside".into(), count(n));
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
    a: &Analysis<'_, C>,
    out: &mut dyn Write,
    warnings: &mut Vec<String>,
) -> io::Result<()> {
    let p = a.profile;
    let mut root = Map::new();
    root.insert(
        "inputs".into(),
        json!(
            a.opts
                .inputs
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
        ),
    );
    root.insert(
        "creator".into(),
        p.creator.as_deref().map(text).unwrap_or(Value::Null),
    );
    let cmds: Vec<Value> = p
        .parts
        .iter()
        .enumerate()
        .filter(|(i, _)| a.chosen[*i])
        .filter_map(|(_, part)| part.info.cmd.as_deref().map(text))
        .collect();
    root.insert("commands".into(), Value::Array(cmds));
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
    root.insert("inclusive".into(), json!(a.opts.inclusive));
    let parts: Vec<Value> = p
        .parts
        .iter()
        .enumerate()
        .filter(|(i, _)| a.chosen[*i])
        .map(|(i, part)| {
            json!({
                "number": part.info.number.unwrap_or(i as u64 + 1),
                "thread": part.info.thread,
                "pid": part.info.pid,
            })
        })
        .collect();
    root.insert("parts".into(), Value::Array(parts));
    root.insert("totals".into(), costs(a, &a.totals));

    let tree = a.opts.tree;
    let mut rows = Vec::with_capacity(a.rows.len());
    for &r in &a.rows {
        let key = a.agg.rows[r];
        let mut m = function_ref(a, key.function, key.file);
        m.insert("self".into(), costs(a, a.agg.row_self.get(r)));
        if a.opts.inclusive
            && let Some(v) = a.row_incl.get(r)
        {
            m.insert("inclusive".into(), costs(a, v));
        }
        if tree.callers() {
            let callers: Vec<Value> = if a.callee_row(key.function) == key {
                a.callers(key.function)
                    .into_iter()
                    .map(|arc| {
                        let mut c = function_ref(a, arc.caller, arc.site_file);
                        call_fields(a, &mut c, arc.caller, arc.callee, arc.count, &arc.inclusive);
                        Value::Object(c)
                    })
                    .collect()
            } else {
                Vec::new()
            };
            m.insert("callers".into(), Value::Array(callers));
        }
        if tree.callees() {
            let callees: Vec<Value> = a
                .callees(key)
                .into_iter()
                .map(|arc| {
                    let RowKey { function, file } = a.callee_row(arc.callee);
                    let mut c = function_ref(a, function, file);
                    call_fields(a, &mut c, arc.caller, arc.callee, arc.count, &arc.inclusive);
                    Value::Object(c)
                })
                .collect();
            m.insert("callees".into(), Value::Array(callees));
        }
        rows.push(Value::Object(m));
    }
    root.insert("functions".into(), Value::Array(rows));

    let by_fn: Vec<Value> = a
        .functions
        .iter()
        .map(|&f| {
            let mut m = function_ref(a, f, p.names.key(f).file);
            m.insert("self".into(), costs(a, a.agg.function_self.get(f.index())));
            if a.opts.inclusive
                && let Some(v) = a.incl.as_ref().and_then(|i| i.of(f))
            {
                m.insert("inclusive".into(), costs(a, v));
            }
            if a.opts.inclusive {
                entered_fields(a, &mut m, f);
            }
            Value::Object(m)
        })
        .collect();
    root.insert("functions_by_name".into(), Value::Array(by_fn));

    if let Some(incl) = &a.incl {
        let cycles: Vec<Value> = incl
            .cycles
            .iter()
            .map(|cy| {
                let members: Vec<Value> = cy
                    .members
                    .iter()
                    .map(|&f| {
                        let mut m = function_ref(a, f, p.names.key(f).file);
                        m.insert("self".into(), costs(a, a.agg.function_self.get(f.index())));
                        entered_fields(a, &mut m, f);
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

    if let Some(n) = a.opts.jumps {
        let jumps: Vec<Value> = a
            .hot_jumps(n)
            .into_iter()
            .map(|j| {
                json!({
                    "function": text(p.names.function_name(j.function)),
                    "file": text(p.names.file_name(j.file)),
                    "source": j.source,
                    "target_function": text(p.names.function_name(j.target_function)),
                    "target_file": text(p.names.file_name(j.target_file)),
                    "target": j.target,
                    "conditional": j.conditional,
                    "executed": count(j.executed),
                    "taken": count(j.taken),
                })
            })
            .collect();
        root.insert("jumps".into(), Value::Array(jumps));
    }

    if (a.opts.auto || !a.opts.files.is_empty()) && p.positions.line().is_some() {
        let plan = source::plan(a, warnings);
        let files: Vec<Value> = plan
            .files
            .iter()
            .map(|f| {
                let lines: Vec<Value> = f
                    .costs
                    .costs
                    .iter()
                    .map(|(&l, c)| {
                        let calls: Vec<Value> = f
                            .costs
                            .calls
                            .get(&l)
                            .map(|cs| {
                                cs.iter()
                                    .map(|c| {
                                        let RowKey { function, file } = a.callee_row(c.callee);
                                        let mut m = function_ref(a, function, file);
                                        m.insert(
                                            "caller".into(),
                                            text(p.names.function_name(c.caller)),
                                        );
                                        m.insert(
                                            "caller_object".into(),
                                            text(p.names.function_object(c.caller)),
                                        );
                                        call_fields(
                                            a,
                                            &mut m,
                                            c.caller,
                                            c.callee,
                                            c.count,
                                            &c.inclusive,
                                        );
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
    if a.opts.asm {
        let asm = super::asm::json(a, warnings, |v| costs(a, v));
        root.insert("asm".into(), asm);
    }
    root.insert("warnings".into(), json!(warnings));
    serde_json::to_writer_pretty(&mut *out, &Value::Object(root)).map_err(io::Error::other)?;
    writeln!(out)
}
