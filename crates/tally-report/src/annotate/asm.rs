//! Assembly annotation: the disassembly of each function shown, read from
//! the object file the profile names, with costs, calls and jump counts per
//! instruction.

use super::table::{Page, RULE, Table, cells, shown_labels};
use super::view::{Func, Positions, View};
use crate::format::thousands;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use tally_analysis::annotate::Analysis;
use tally_model::Cost;
use tally_symbols::{InstrKind, Instruction, ObjectFile};

/// One function's annotated disassembly.
pub(super) struct AsmFunction<C> {
    pub function: Func,
    /// The symbol disassembled: name, start, end.
    pub symbol: Option<(String, u64, u64)>,
    pub instructions: Vec<Instruction>,
    pub costs: Positions<C>,
    /// Why there is no disassembly.
    pub problem: Option<String>,
}

/// Asks the analysis for the costs per instruction of the functions of
/// the rows shown, and disassembles each from the object file the profile
/// names (with `dirs`, a report to publish: only a regular file, never
/// under `/proc`, `/sys` or `/dev`).
pub(super) fn plan<C: Cost>(
    a: &Analysis<'_, C>,
    instrs: bool,
    dirs: Option<&super::SourceDirs>,
    warnings: &mut Vec<String>,
) -> Vec<AsmFunction<C>> {
    if !instrs {
        warnings.push(
            "--asm: the profile has no instruction addresses (Callgrind writes them with --dump-instr=yes)"
                .into(),
        );
        return Vec::new();
    }
    let mut objects: BTreeMap<String, Result<ObjectFile, String>> = BTreeMap::new();
    let mut out = Vec::new();
    for (function, costs) in a.instructions(&a.row_functions()) {
        let object = function.object.clone();
        let mut item = AsmFunction {
            function,
            symbol: None,
            instructions: Vec::new(),
            costs,
            problem: None,
        };
        let addrs: Vec<u64> = item
            .costs
            .costs
            .keys()
            .chain(item.costs.calls.keys())
            .chain(item.costs.jumps.keys())
            .copied()
            .collect();
        let (Some(&lo), Some(&hi)) = (addrs.iter().min(), addrs.iter().max()) else {
            continue;
        };
        if object.is_empty() {
            item.problem = Some("the profile names no object file".into());
            out.push(item);
            continue;
        }
        let obj = objects.entry(object.clone()).or_insert_with(|| {
            let path = Path::new(&object);
            match dirs.map(|d| d.admit_object(path)) {
                Some(Err(e)) => Err(e),
                _ => ObjectFile::open(path).map_err(|e| e.to_string()),
            }
        });
        let obj = match obj {
            Ok(o) => o,
            Err(e) => {
                item.problem = Some(format!("object file not available: {e}"));
                out.push(item);
                continue;
            }
        };
        if !obj.is_x86_64() {
            item.problem = Some(format!(
                "{object}: not an x86-64 object ({})",
                obj.machine()
            ));
            out.push(item);
            continue;
        }
        let result = match obj.symbol_at(lo) {
            Some(s) if s.contains(hi) => {
                item.symbol = Some((s.display_name().to_string(), s.address, s.end));
                obj.disassemble_function(s)
            }
            _ => {
                // No symbol covers the addresses (stripped object, or code
                // split over symbols): decode just the range the profile has.
                obj.disassemble(lo, hi.saturating_add(16))
            }
        };
        match result {
            Ok(ins) => item.instructions = ins,
            Err(e) => item.problem = Some(e.to_string()),
        }
        out.push(item);
    }
    let missing: Vec<&str> = objects
        .iter()
        .filter(|(_, o)| o.is_err())
        .map(|(n, _)| n.as_str())
        .collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "--asm: object files not available, their functions have no assembly: {}",
            missing.join(", ")
        ));
    }
    out
}

/// Writes each function's annotated disassembly.
pub(super) fn write_text<C: Cost>(
    a: &View<C>,
    plan: &[AsmFunction<C>],
    page: &mut Page<'_>,
) -> io::Result<()> {
    let (out, style) = (&mut *page.out, page.style);
    let labels = shown_labels(a);
    let zero = vec![C::ZERO; a.totals.len()];
    for f in plan {
        let fname = &f.function.function;
        writeln!(out, "{RULE}")?;
        let sym = match &f.symbol {
            Some((s, lo, hi)) => format!(" (symbol {s}, 0x{lo:x}-0x{hi:x})"),
            None => String::new(),
        };
        writeln!(
            out,
            "{}",
            style.bold(&format!(
                "-- Assembly: {fname} [{}]{sym}",
                f.function.object
            ))
        )?;
        let mut t = Table::new(labels.clone());
        if let Some(p) = &f.problem {
            t.text(style.hot(&format!("  no disassembly: {p}")));
        }
        let mut shown = std::collections::BTreeSet::new();
        for ins in &f.instructions {
            shown.insert(ins.address);
            let c = f.costs.costs.get(&ins.address);
            t.row(
                cells(a, Some(c.map(|v| v.as_slice()).unwrap_or(&zero)), true),
                format!("0x{:x}:  {}", ins.address, ins.text),
            );
            extras(a, &mut t, f, ins.address, Some(ins));
        }
        // Costs at addresses no decoded instruction starts at.
        let stray: Vec<u64> = f
            .costs
            .costs
            .keys()
            .chain(f.costs.calls.keys())
            .chain(f.costs.jumps.keys())
            .copied()
            .filter(|x| !shown.contains(x))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        if !stray.is_empty() && f.problem.is_none() {
            t.text(style.hot("@@ costs at addresses outside the disassembly:"));
        }
        for x in stray {
            let c = f.costs.costs.get(&x);
            t.row(
                cells(a, Some(c.map(|v| v.as_slice()).unwrap_or(&zero)), true),
                format!("0x{x:x}"),
            );
            extras(a, &mut t, f, x, None);
        }
        t.print(out, "", style)?;
        writeln!(out)?;
    }
    Ok(())
}

/// Call and jump lines under an instruction.
fn extras<C: Cost>(
    a: &View<C>,
    t: &mut Table,
    f: &AsmFunction<C>,
    at: u64,
    ins: Option<&Instruction>,
) {
    if let Some(calls) = f.costs.calls.get(&at) {
        for c in calls {
            t.row(
                cells(a, c.cost.as_deref(), true),
                format!(
                    "  => {} ({}x){}",
                    c.callee.file_function(),
                    thousands(c.count.to_i128()),
                    super::inside_mark(c.kind)
                ),
            );
        }
    }
    if let Some(jumps) = f.costs.jumps.get(&at) {
        let empty: Vec<String> = a.shown.iter().map(|_| String::new()).collect();
        for j in jumps {
            let target = if j.target_function.id != f.function.id {
                format!("0x{:x} in {}", j.target, j.target_function.function)
            } else {
                format!("0x{:x}", j.target)
            };
            let what = if j.conditional {
                let fall = ins
                    .map(|i| i.kind == InstrKind::ConditionalJump)
                    .unwrap_or(true);
                format!(
                    "  jcnd: executed {}, taken {} to {target}{}",
                    thousands(j.executed.to_i128()),
                    thousands(j.taken.to_i128()),
                    if fall {
                        ""
                    } else {
                        " (not a conditional jump here?)"
                    }
                )
            } else {
                format!("  jump: {} to {target}", thousands(j.taken.to_i128()))
            };
            t.row(empty.clone(), what);
        }
    }
}

/// The plan as JSON.
pub(super) fn json<C: Cost>(
    plan: &[AsmFunction<C>],
    costs: impl Fn(&[C]) -> serde_json::Value,
) -> serde_json::Value {
    let v: Vec<serde_json::Value> = plan
        .iter()
        .map(|f| {
            let ins: Vec<serde_json::Value> = f
                .instructions
                .iter()
                .map(|i| {
                    let mut m = serde_json::json!({
                        "address": i.address,
                        "text": i.text,
                    });
                    if let Some(c) = f.costs.costs.get(&i.address) {
                        m["self"] = costs(c);
                    }
                    if let Some(calls) = f.costs.calls.get(&i.address) {
                        m["calls"] = calls
                            .iter()
                            .map(|c| {
                                serde_json::json!({
                                    "function": c.callee.function,
                                    "caller": c.caller.function,
                                    "count": c.count.to_i128() as i64,
                                    "inclusive": c.cost.as_deref().map(&costs),
                                    "recursion": super::json::recursion(c.kind),
                                })
                            })
                            .collect();
                    }
                    if let Some(jumps) = f.costs.jumps.get(&i.address) {
                        m["jumps"] = jumps
                            .iter()
                            .map(|j| {
                                serde_json::json!({
                                    "target": j.target,
                                    "target_function": j.target_function.function,
                                    "conditional": j.conditional,
                                    "executed": j.executed.to_i128() as i64,
                                    "taken": j.taken.to_i128() as i64,
                                })
                            })
                            .collect();
                    }
                    m
                })
                .collect();
            serde_json::json!({
                "function": f.function.function,
                "object": f.function.object,
                "symbol": f.symbol.as_ref().map(|s| s.0.clone()),
                "problem": f.problem,
                "instructions": ins,
            })
        })
        .collect();
    serde_json::Value::Array(v)
}
