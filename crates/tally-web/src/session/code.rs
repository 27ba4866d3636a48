//! The source and assembly views as tables of numbers: per line (or
//! instruction) its cost in every event, the calls made there and, for
//! assembly, the jumps. The page draws them (heat, links to the callees,
//! jump arrows); `tally report --html` embeds the same replies. Sources
//! are read only from under the session's source directories, and object
//! files as `tally annotate --asm` reads them for a report.

use std::io::Read;
use std::path::Path;

use serde_json::{Value, json};
use std::collections::HashMap;
use tally_analysis::CallKind;
use tally_analysis::annotate::view::{Call, Func, Positions};
use tally_analysis::annotate::{Analysis, Options, PartFilter, Threshold};

use tally_input::Program;
use tally_model::{EventColumns, FileId, FunctionId, Profile};
use tally_report::annotate::Located;

use super::{Input, Session};
use crate::Error;

/// Lines of context shown before and after a function's lines.
pub const CONTEXT: u64 = 5;
/// The most lines a function's window shows.
pub const WINDOW: u64 = 1000;
/// Lines without a cost of the function that end one run of its lines:
/// code inlined from helpers defined elsewhere in the same file forms
/// runs of its own.
const GAP: u64 = 40;
/// The largest source file read.
const MAX_SOURCE: u64 = 16 << 20;

/// The analysis options of the views: every event, the chosen part.
fn options(inp: &Input, part: Option<usize>) -> Options {
    let mut opts = Options {
        inputs: inp.files.clone(),
        threshold: Threshold::Default,
        auto: false,
        ..Default::default()
    };
    if let Some(p) = part {
        opts.parts = PartFilter::Parts(vec![p as u64 + 1]);
    }
    opts
}

/// A cost vector (recorded events) as one number per event of the page.
fn costs(columns: &EventColumns, v: &[u64]) -> Value {
    Value::Array(
        (0..columns.len())
            .map(|e| {
                if columns.is_ratio(e) {
                    json!(columns.ratio(v, e))
                } else {
                    json!(columns.value(v, e) as f64)
                }
            })
            .collect(),
    )
}

/// What a call without a cost of its own is inside of.
fn inside(kind: CallKind) -> Value {
    match kind {
        CallKind::Exact => Value::Null,
        CallKind::Recursive => json!("recursion"),
        CallKind::WithinCycle(n) => json!(format!("cycle {n}")),
    }
}

/// A call as a row of the views: the callee (which the page selects on a
/// click), the count and the inclusive cost where it has one.
fn call(columns: &EventColumns, c: &Call<u64>) -> Value {
    json!({
        "name": c.callee.function,
        "file": c.callee.file,
        "count": c.count as f64,
        "costs": c.cost.as_deref().map(|v| costs(columns, v)),
        "inside": inside(c.kind),
    })
}

/// Every function's window of source: its lines in its own file split
/// into runs where [`GAP`] lines pass without a cost of it, and from the
/// costliest run (the function's own body; runs before it are helpers of
/// the same file inlined into it) to its last line, at most [`WINDOW`]
/// lines, with [`CONTEXT`] lines around. One scan of the cost lines.
pub fn windows(inp: &Profile<u64>) -> HashMap<FunctionId, (u64, u64)> {
    let mut by: HashMap<FunctionId, Vec<(u64, u64)>> = HashMap::new();
    let Some(at) = inp.positions.line() else {
        return HashMap::new();
    };
    let names = &inp.names;
    for p in &inp.parts {
        p.lines.for_each(|l| {
            if let Some(&n) = l.positions.get(at)
                && n > 0
                && names.key(l.function).file == l.file
            {
                let c = l.costs.first().copied().unwrap_or(0);
                by.entry(l.function).or_default().push((n, c));
            }
        });
    }
    by.into_iter()
        .filter_map(|(f, mut lines)| {
            lines.sort_unstable();
            window_of(&lines).map(|w| (f, w))
        })
        .collect()
}

/// The window of one function's lines (sorted, repeats allowed), as
/// [`windows`] chooses it.
fn window_of(lines: &[(u64, u64)]) -> Option<(u64, u64)> {
    let (&(first, _), &(last, _)) = (lines.first()?, lines.last()?);
    let mut best = (first, 0u64);
    let (mut start, mut weight, mut prev) = (first, 0u64, first);
    for &(n, c) in lines {
        if n > prev + GAP {
            if weight > best.1 {
                best = (start, weight);
            }
            (start, weight) = (n, 0);
        }
        weight = weight.saturating_add(c);
        prev = n;
    }
    if weight > best.1 {
        best = (start, weight);
    }
    let lo = best.0;
    let hi = last.max(lo).min(lo + WINDOW);
    Some((lo.saturating_sub(CONTEXT).max(1), hi + CONTEXT))
}

/// The text of a source file found under the source directories: one
/// regular file, opened once and then checked (a device swapped in would
/// never end), read up to [`MAX_SOURCE`] bytes.
fn read_source(path: &Path) -> Result<Vec<String>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    f.take(MAX_SOURCE)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::to_owned)
        .collect())
}

/// The source table of the function `node` (`whole`: its whole file):
/// `events`, `rows` of `line`, `text`, `costs` (one per event, `null`
/// without a cost) and `calls`, the window's `first` and `last` line and
/// the first line of the function's body (`focus`); `note` says why there
/// are no rows (file not found, outside the source directories).
pub fn source(
    s: &Session,
    input: usize,
    node: usize,
    part: Option<usize>,
    whole: bool,
) -> Result<Value, Error> {
    let inp = &s.inputs[input];
    let names = &inp.profile.names;
    let id = u32::try_from(node)
        .ok()
        .map(FunctionId)
        .filter(|f| f.index() < names.function_count())
        .ok_or_else(|| Error::NotFound(format!("no function {node}")))?;
    let file_id = names.key(id).file;
    let file = String::from_utf8_lossy(names.file_name(file_id)).into_owned();
    let function = String::from_utf8_lossy(names.function_name(id)).into_owned();
    let columns = EventColumns::new(&inp.profile.events);
    let mut out = json!({
        "function": function,
        "file": file,
        "events": columns.names(),
        "rows": [],
    });
    let found = s.sources.find(&file, &s.sources.search(), &inp.files);
    let (path, read) = match found {
        Located::Found { path, read } => (path, read),
        Located::LeftOut(p) => {
            out["left_out"] = json!(true);
            out["note"] = json!(format!(
                "{file}: left out: {} is outside the directories sources are read from \
                 (by default the profile's and the current one; --source-dir DIR names them)",
                p.display()
            ));
            return Ok(out);
        }
        Located::Missing => {
            out["note"] = json!(format!(
                "{file}: source file not found (tally serve --source-dir DIR names where to look)"
            ));
            return Ok(out);
        }
    };
    let text = read_source(&read).map_err(Error::Input)?;
    let key = format!("source:{input}:{}:{part:?}", file_id.0);
    let lines = s.code(key, || file_lines(inp, file_id, part, &columns))?;
    let window = if whole { None } else { inp.window(id) };
    let focus = window.map(|(lo, _)| (lo + CONTEXT).min(text.len() as u64));
    let (lo, hi) = window.unwrap_or((1, text.len() as u64));
    let hi = hi.min(text.len() as u64);
    let empty = Value::Null;
    let rows: Vec<Value> = (lo..=hi)
        .map(|n| {
            let l = lines.get(n.to_string()).unwrap_or(&empty);
            json!({
                "line": n,
                "text": text.get(n as usize - 1).map_or("", String::as_str),
                "costs": l.get("costs").unwrap_or(&empty),
                "calls": l.get("calls").cloned().unwrap_or_else(|| json!([])),
            })
        })
        .collect();
    out["path"] = json!(path.display().to_string());
    out["lines_in_file"] = json!(text.len());
    out["first"] = json!(lo);
    out["last"] = json!(hi);
    out["focus"] = json!(focus);
    out["whole"] = json!(window.is_none());
    out["rows"] = Value::Array(rows);
    Ok(out)
}

/// Every line of `file` with a cost or a call, by line number: its
/// `costs` and its `calls` summed per callee, costliest first.
fn file_lines(
    inp: &Input,
    file: FileId,
    part: Option<usize>,
    columns: &EventColumns,
) -> Result<Value, Error> {
    let opts = options(inp, part);
    let a = Analysis::new(&inp.profile, &opts)?;
    let mut by = a.lines(|f| f == file);
    let p: Positions<u64> = by.remove(&file).unwrap_or_default();
    let mut out = serde_json::Map::new();
    let lines: std::collections::BTreeSet<u64> =
        p.costs.keys().chain(p.calls.keys()).copied().collect();
    for n in lines {
        let calls: Vec<Value> = p
            .calls_by_callee(n, |v| v.first().map_or(0, |&x| i128::from(x)))
            .iter()
            .map(|c| call(columns, c))
            .collect();
        out.insert(
            n.to_string(),
            json!({
                "costs": p.costs.get(&n).map(|v| costs(columns, v)),
                "calls": calls,
            }),
        );
    }
    Ok(Value::Object(out))
}

/// The assembly table of the function `node`: `rows` of `address`,
/// `text`, `costs`, `calls` and `jumps` (`target`, `conditional`,
/// `executed`, `taken`, `function` when it leaves the function), from the
/// object file the profile names; `note` says why there are none.
pub fn asm(s: &Session, input: usize, node: usize, part: Option<usize>) -> Result<Value, Error> {
    let inp = &s.inputs[input];
    let names = &inp.profile.names;
    let id = u32::try_from(node)
        .ok()
        .map(FunctionId)
        .filter(|f| f.index() < names.function_count())
        .ok_or_else(|| Error::NotFound(format!("no function {node}")))?;
    let key = format!("asm:{input}:{node}:{part:?}");
    let v = s.code(key, || {
        instructions(s, inp, &[id], part)?
            .pop()
            .ok_or_else(|| Error::NotFound(format!("no function {node}")))
    })?;
    Ok((*v).clone())
}

/// The assembly tables of `ids`, as [`asm`] gives each: one analysis,
/// each object file opened once.
pub fn instructions(
    s: &Session,
    inp: &Input,
    ids: &[FunctionId],
    part: Option<usize>,
) -> Result<Vec<Value>, Error> {
    let columns = EventColumns::new(&inp.profile.events);
    let opts = options(inp, part);
    let a = Analysis::new(&inp.profile, &opts)?;
    let mut objects: HashMap<String, Result<Program, String>> = HashMap::new();
    Ok(a.instructions(ids)
        .into_iter()
        .zip(ids)
        .map(|((func, p), &id)| disassembled(s, inp, &columns, &mut objects, id, func, p))
        .collect())
}

/// One function's assembly table.
fn disassembled(
    s: &Session,
    inp: &Input,
    columns: &EventColumns,
    objects: &mut HashMap<String, Result<Program, String>>,
    id: FunctionId,
    func: Func,
    p: Positions<u64>,
) -> Value {
    let columns = columns.clone();
    let mut out = json!({
        "function": func.function,
        "object": func.object,
        "events": columns.names(),
        "rows": [],
    });
    if inp.profile.positions.instr().is_none() {
        out["note"] = json!(
            "the profile has no instruction addresses (Callgrind writes them with --dump-instr=yes)"
        );
        return out;
    }
    let addrs: std::collections::BTreeSet<u64> = p
        .costs
        .keys()
        .chain(p.calls.keys())
        .chain(p.jumps.keys())
        .copied()
        .collect();
    let (Some(&lo), Some(&hi)) = (addrs.first(), addrs.last()) else {
        out["note"] = json!("the function has no cost at any instruction");
        return out;
    };
    let decoded = if func.object.is_empty() {
        Err("the profile names no object file".to_owned())
    } else {
        let obj = objects.entry(func.object.clone()).or_insert_with(|| {
            let path = Path::new(&func.object);
            s.sources
                .admit_object(path)
                .and_then(|()| Program::open(path).map_err(|e| e.to_string()))
        });
        match obj.as_ref().map(Program::object) {
            Err(e) => Err(e.clone()),
            Ok(obj) if !obj.is_x86_64() => Err(format!(
                "{}: not an x86-64 object ({})",
                func.object,
                obj.machine()
            )),
            Ok(obj) => match obj.symbol_at(lo) {
                Some(sym) if sym.contains(hi) => {
                    out["symbol"] = json!(sym.display_name());
                    obj.disassemble_function(sym)
                }
                _ => obj.disassemble(lo, hi.saturating_add(16)),
            }
            .map_err(|e| e.to_string()),
        }
    };
    let mut listed: Vec<(u64, String)> = match decoded {
        Ok(ins) => ins.into_iter().map(|i| (i.address, i.text)).collect(),
        Err(e) => {
            out["note"] = json!(format!("no disassembly: {e}"));
            Vec::new()
        }
    };
    // Costs at addresses no decoded instruction starts at keep a row.
    let starts: std::collections::HashSet<u64> = listed.iter().map(|l| l.0).collect();
    listed.extend(
        addrs
            .iter()
            .filter(|x| !starts.contains(x))
            .map(|&x| (x, String::new())),
    );
    listed.sort_by_key(|l| l.0);
    let rows: Vec<Value> = listed
        .into_iter()
        .map(|(at, text)| {
            let calls: Vec<Value> = p
                .calls
                .get(&at)
                .map(|cs| cs.iter().map(|c| call(&columns, c)).collect())
                .unwrap_or_default();
            let jumps: Vec<Value> = p
                .jumps
                .get(&at)
                .map(|js| {
                    js.iter()
                        .map(|j| {
                            json!({
                                "target": j.target,
                                "conditional": j.conditional,
                                "executed": j.executed as f64,
                                "taken": j.taken as f64,
                                "function": (j.target_function.id != id)
                                    .then(|| j.target_function.function.clone()),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "address": at,
                "text": text,
                "costs": p.costs.get(&at).map(|v| costs(&columns, v)),
                "calls": calls,
                "jumps": jumps,
            })
        })
        .collect();
    out["rows"] = Value::Array(rows);
    out
}

#[cfg(test)]
mod tests {
    use super::{CONTEXT, WINDOW, window_of};

    /// A helper of the same file inlined from far above: the window
    /// starts at the body, the costliest run, and runs to the last line.
    #[test]
    fn the_window_starts_at_the_costliest_run() {
        let mut lines: Vec<(u64, u64)> = (3..=5).map(|n| (n, 10)).collect();
        lines.extend((70..=90).map(|n| (n, 100)));
        lines.push((95, 1));
        assert_eq!(window_of(&lines), Some((70 - CONTEXT, 95 + CONTEXT)));
        // Lighter runs after the body stay in it; a heavier helper wins.
        let heavy: Vec<(u64, u64)> = vec![(3, 5000), (70, 100), (71, 100)];
        assert_eq!(window_of(&heavy), Some((1, 71 + CONTEXT)));
        // At most WINDOW lines from the start.
        let long: Vec<(u64, u64)> = vec![(10, 1), (30, 1), (5000, 0)];
        assert_eq!(
            window_of(&long),
            Some((10 - CONTEXT, 10 + WINDOW + CONTEXT))
        );
        assert_eq!(window_of(&[]), None);
    }
}
