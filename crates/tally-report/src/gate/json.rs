//! The JSON verdict (schema `tally-gate/1`, described in docs/gate.md).

use super::GateReport;
use serde_json::{Value, json};
use tally_analysis::gate::{BudgetSource, Change, FunctionVerdict};

/// The verdict as a JSON value.
pub fn json(r: &GateReport) -> Value {
    let v = r.verdict;
    let o = r.options;
    json!({
        "schema": "tally-gate/1",
        "event": v.event,
        "passed": v.passed(),
        "base": r.base,
        "new": r.new,
        "budgets": {
            "max_increase": o.max_increase.to_string(),
            "max_function_increase": o.max_function_increase.to_string(),
            "min_cost": o.min_cost.to_string(),
            "noise_floor": o.noise_floor.to_string(),
            "ignore": o.ignore.iter().map(|r| r.as_str()).collect::<Vec<_>>(),
            "baseline_file": (!o.baseline.path.is_empty()).then_some(&o.baseline.path),
        },
        "total": change(&v.total),
        "summary": {
            "judged": v.functions.len(),
            "over": v.functions_over(),
            "below_min_cost": v.below_min_cost,
            "ignored": v.ignored,
            "noise_floor": clamp(v.noise_floor),
        },
        "functions": v.functions.iter().map(function).collect::<Vec<_>>(),
        "unused_baseline": v.unused_baseline.iter().map(|e| json!({
            "line": e.line,
            "function": String::from_utf8_lossy(&e.function),
        })).collect::<Vec<_>>(),
    })
}

fn function(f: &FunctionVerdict) -> Value {
    let n = &f.function;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (budget_line, budget) = match &f.budget {
        BudgetSource::Default(l) => (None, l.to_string()),
        BudgetSource::Baseline { budget, line } => (Some(*line), budget.to_string()),
    };
    json!({
        "function": text(&n.name),
        "file": text(&n.file),
        "object": (!n.object.is_empty()).then(|| text(&n.object)),
        "over": f.over(),
        "budget": budget,
        "baseline_line": budget_line,
        "self": change(&f.self_cost),
        "inclusive": change(&f.inclusive),
        "inclusive_derived": f.inclusive_derived,
    })
}

fn change(c: &Change) -> Value {
    json!({
        "base": c.base.map(clamp),
        "new": c.new.map(clamp),
        "delta": clamp(c.delta),
        "percent": c.percent.map(|p| (p * 100.0).round() / 100.0),
        "allowed": c.allowed.map(clamp),
        "judged": c.checked,
        "over": c.over,
    })
}

/// Costs come from 64-bit counts, so their sums and differences fit
/// `i64` unless a baseline count is absurd; JSON numbers are `i64` here.
fn clamp(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}
