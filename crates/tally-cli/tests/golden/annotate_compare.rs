//! `tally annotate` against callgrind_annotate and cg_annotate (Valgrind
//! 3.19) on every Valgrind fixture: program totals, every row of the
//! function table, inclusive costs (outside cycles and self calls), and the
//! call trees' counts and costs.
//!
//! The reference tool runs live when it is installed (in CI it must be);
//! otherwise its committed report next to the fixture is used. Differences
//! that are the reference tool's known errors are corrected for, by rules
//! computed from the profile, never by exceptions per file:
//! - callgrind_annotate counts a `calls=0` call (a call still active at a
//!   dump) as self cost of the caller and leaves it out of its trees;
//! - on multi-part files it takes the last part's summary as the total;
//! - its inclusive cost of a function also entered without a call (`clone`,
//!   where a thread starts) is only the calls into it, less than the calls
//!   it makes;
//! - its inclusive cost of a recursive function counts the recursion again,
//!   and so do its costs of calls inside a recursion or cycle: tally shows
//!   those calls with their count and no cost, so they are compared by
//!   count (calls between different components stay exact).

use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tally_model::{Cost, Profile};
use tally_testutil::data_dir;

fn fixtures(dir: &str, report: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(data_dir().join(dir))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    v.retain(|p| {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        !n.contains(".annotate") && !n.ends_with(".cg_annotate") && {
            let mut r = p.as_os_str().to_owned();
            r.push(report);
            Path::new(&r).is_file()
        }
    });
    v.sort();
    v
}

/// The reference report: live if the tool is there, else the committed one.
fn reference(
    tool: &str,
    args: &[&str],
    file: &Path,
    suffix: &str,
    live: bool,
) -> Result<String, Failed> {
    if !live {
        let mut r = file.as_os_str().to_owned();
        r.push(suffix);
        return std::fs::read_to_string(&r)
            .map_err(|e| format!("{}: {e}", Path::new(&r).display()).into());
    }
    let rel = file.strip_prefix(data_dir()).unwrap_or(file);
    let out = Command::new(tool)
        .args(args)
        .arg(rel)
        .env("PERL_HASH_SEED", "0")
        .env("PERL_PERTURB_KEYS", "0")
        .current_dir(data_dir())
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if !out.status.success() {
        return Err(format!("{tool} failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ours(file: &Path, args: &[&str]) -> Result<Value, Failed> {
    let out = tally_testutil::tally!()
        .command()
        .arg("annotate")
        .arg("--json")
        .arg("--threshold=all")
        .args((!args.iter().any(|a| a.starts_with("--auto"))).then_some("--auto=no"))
        .args(args)
        .arg(file)
        .output()
        .map_err(|e| format!("tally: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tally annotate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("tally's JSON: {e}").into())
}

/// One line of a reference report: counts (None for `.`) and the text.
struct Line {
    counts: Vec<Option<i128>>,
    text: String,
}

/// Splits `n` counts (each maybe followed by a `(12.34%)`) off a line.
fn split_counts(line: &str, n: usize) -> Option<Line> {
    let mut rest = line;
    let mut counts = Vec::with_capacity(n);
    for _ in 0..n {
        rest = rest.trim_start();
        let end = rest.find(' ').unwrap_or(rest.len());
        let tok = &rest[..end];
        let v = if tok == "." {
            None
        } else {
            Some(tok.replace(',', "").parse::<i128>().ok()?)
        };
        counts.push(v);
        rest = &rest[end..];
        let t = rest.trim_start();
        if t.starts_with('(')
            && let Some(close) = t.find(")")
            && t[..close].ends_with('%')
        {
            rest = &t[close + 1..];
        }
    }
    Some(Line {
        counts,
        text: rest.trim().to_string(),
    })
}

/// Name, call count and object of `name (12x) [object]`.
fn split_name(text: &str) -> (String, Option<i128>, Option<String>) {
    let mut t = text.to_string();
    let mut obj = None;
    if t.ends_with(']')
        && let Some(i) = t.rfind(" [")
    {
        obj = Some(t[i + 2..t.len() - 1].to_string());
        t.truncate(i);
    }
    let mut count = None;
    if t.ends_with("x)")
        && let Some(i) = t.rfind(" (")
        && let Ok(c) = t[i + 2..t.len() - 2].replace(',', "").parse::<i128>()
    {
        count = Some(c);
        t.truncate(i);
    }
    (t, count, obj)
}

/// A parsed callgrind_annotate / cg_annotate report.
#[derive(Default)]
struct Report {
    events: Vec<String>,
    totals: Vec<i128>,
    rows: BTreeMap<String, Vec<i128>>,
    /// For trees: row → (callers, callees), each name → (count, costs).
    trees: BTreeMap<String, (Arcs, Arcs)>,
}

type Arcs = BTreeMap<String, (i128, Vec<i128>)>;

fn parse_report(text: &str) -> Result<Report, Failed> {
    let mut r = Report::default();
    let lines: Vec<&str> = text.lines().collect();
    let shown = lines
        .iter()
        .find_map(|l| l.strip_prefix("Events shown:"))
        .ok_or("no `Events shown:` line")?;
    r.events = shown.split_whitespace().map(str::to_string).collect();
    let n = r.events.len();
    let mut in_table = false;
    let mut current: Option<String> = None;
    let mut callers = Arcs::new();
    for l in &lines {
        if l.ends_with("PROGRAM TOTALS") || l.ends_with("PROGRAM TOTALS (calculated)") {
            let p = split_counts(l, n).ok_or("bad totals line")?;
            r.totals = p.counts.iter().map(|c| c.unwrap_or(0)).collect();
            continue;
        }
        if l.trim_end().ends_with("file:function") && !l.starts_with("--") {
            in_table = true;
            continue;
        }
        if !in_table || l.starts_with("----") {
            continue;
        }
        if l.trim().is_empty() {
            callers = Arcs::new();
            current = None;
            continue;
        }
        if l.starts_with("-- ") {
            break;
        }
        let Some(p) = split_counts(l, n) else {
            // Source annotation or other text after the table.
            if current.is_none() && !r.rows.is_empty() {
                break;
            }
            continue;
        };
        let counts: Vec<i128> = p.counts.iter().map(|c| c.unwrap_or(0)).collect();
        if let Some(t) = p.text.strip_prefix("< ") {
            let (name, count, _) = split_name(t.trim());
            add_arc(&mut callers, name, count.unwrap_or(0), &counts);
        } else if let Some(t) = p.text.strip_prefix("> ") {
            let (name, count, _) = split_name(t.trim());
            let key = current.clone().ok_or("callee before its function")?;
            let e = r.trees.entry(key).or_default();
            add_arc(&mut e.1, name, count.unwrap_or(0), &counts);
        } else {
            let t = p.text.strip_prefix("* ").unwrap_or(&p.text).trim();
            let (name, _, _) = split_name(t);
            let e = r.rows.entry(name.clone()).or_insert_with(|| vec![0; n]);
            for (a, b) in e.iter_mut().zip(&counts) {
                *a += b;
            }
            r.trees.entry(name.clone()).or_default().0 = std::mem::take(&mut callers);
            current = Some(name);
        }
    }
    if r.totals.is_empty() {
        return Err("no PROGRAM TOTALS line".into());
    }
    Ok(r)
}

fn add_arc(arcs: &mut Arcs, name: String, count: i128, costs: &[i128]) {
    let e = arcs
        .entry(name)
        .or_insert_with(|| (0, vec![0; costs.len()]));
    e.0 += count;
    for (a, b) in e.1.iter_mut().zip(costs) {
        *a += b;
    }
}

fn num(v: &Value) -> i128 {
    v.as_i64()
        .map(i128::from)
        .or_else(|| v.as_u64().map(i128::from))
        .unwrap_or(0)
}

fn costs_of(v: &Value, events: &[String]) -> Vec<i128> {
    events.iter().map(|e| num(&v[e])).collect()
}

fn key(v: &Value) -> String {
    format!(
        "{}:{}",
        v["file"].as_str().unwrap_or(""),
        v["function"].as_str().unwrap_or("")
    )
}

fn load<C: Cost>(path: &Path) -> Result<Profile<C>, Failed> {
    tally_formats::read_file::<C>(path, None)
        .map(|(p, _)| p)
        .map_err(|e| format!("{e}").into())
}

/// The `calls=0` costs callgrind_annotate books as self cost, per
/// `site_file:caller`, and per (caller row, callee row) arc.
fn zero_count_calls(
    path: &Path,
    events: &[String],
) -> Result<(BTreeMap<String, Vec<i128>>, Arcs), Failed> {
    let p = load::<u64>(path)?;
    let idx: Vec<usize> = events
        .iter()
        .map(|e| {
            p.events
                .recorded()
                .iter()
                .position(|r| &r.name == e)
                .ok_or_else(|| format!("event {e} not recorded"))
        })
        .collect::<Result<_, _>>()?;
    let mut selfs = BTreeMap::new();
    let mut arcs = Arcs::new();
    let n = &p.names;
    for part in &p.parts {
        for c in part.calls.iter() {
            if c.info.count != 0 {
                continue;
            }
            let caller = format!(
                "{}:{}",
                String::from_utf8_lossy(n.file_name(c.info.site_file)),
                String::from_utf8_lossy(n.function_name(c.info.caller))
            );
            let callee = format!(
                "{}:{}",
                String::from_utf8_lossy(n.function_file(c.info.callee)),
                String::from_utf8_lossy(n.function_name(c.info.callee))
            );
            let costs: Vec<i128> = idx.iter().map(|&i| c.inclusive[i] as i128).collect();
            let e = selfs
                .entry(caller.clone())
                .or_insert_with(|| vec![0; idx.len()]);
            for (a, b) in e.iter_mut().zip(&costs) {
                *a += b;
            }
            add_arc(&mut arcs, format!("{caller} -> {callee}"), 0, &costs);
        }
    }
    Ok((selfs, arcs))
}

fn parts_of(path: &Path) -> Result<usize, Failed> {
    if is_signed(path) {
        Ok(load::<i64>(path)?.parts.len())
    } else {
        Ok(load::<u64>(path)?.parts.len())
    }
}

fn is_signed(path: &Path) -> bool {
    path.to_string_lossy().contains(".diff.")
}

/// Our rows, grouped by `file:function` as the reference tools key them
/// (they do not tell objects apart).
fn our_rows(j: &Value, events: &[String], field: &str) -> BTreeMap<String, Option<Vec<i128>>> {
    let mut m: BTreeMap<String, Option<Vec<i128>>> = BTreeMap::new();
    for f in j["functions"].as_array().into_iter().flatten() {
        let k = key(f);
        let v = f.get(field).map(|v| costs_of(v, events));
        match (m.get_mut(&k), v) {
            (None, v) => {
                m.insert(k, v);
            }
            (Some(Some(a)), Some(b)) => a.iter_mut().zip(&b).for_each(|(x, y)| *x += y),
            (Some(slot), _) => *slot = None,
        }
    }
    m
}

fn check_totals(r: &Report, j: &Value, path: &Path) -> Result<(), Failed> {
    let ours = costs_of(&j["totals"], &r.events);
    if parts_of(path)? > 1 {
        // The reference shows the last part's summary; ours is the sum.
        return Ok(());
    }
    if ours != r.totals {
        return Err(format!("totals: ours {ours:?}, reference {:?}", r.totals).into());
    }
    Ok(())
}

fn compare_self(
    path: &Path,
    tool: &str,
    suffix: &str,
    args: &[&str],
    live: bool,
) -> Result<(), Failed> {
    let text = reference(tool, args, path, suffix, live)?;
    let r = parse_report(&text)?;
    let j = ours(path, &[])?;
    check_totals(&r, &j, path)?;
    let mut mine = our_rows(&j, &r.events, "self");
    if tool == "callgrind_annotate" {
        let (selfs, _) = zero_count_calls(path, &r.events)?;
        for (k, v) in selfs {
            let e = mine
                .entry(k)
                .or_insert_with(|| Some(vec![0; v.len()]))
                .get_or_insert_with(|| vec![0; v.len()]);
            e.iter_mut().zip(&v).for_each(|(a, b)| *a += b);
        }
    }
    let mut errors = Vec::new();
    let zero = vec![0; r.events.len()];
    for (k, v) in &r.rows {
        let m = mine
            .get(k)
            .and_then(|m| m.clone())
            .unwrap_or_else(|| zero.clone());
        if &m != v {
            errors.push(format!("{k}: ours {m:?}, reference {v:?}"));
        }
    }
    for (k, v) in &mine {
        let v = v.clone().unwrap_or_else(|| zero.clone());
        if !r.rows.contains_key(k) && v != zero {
            errors.push(format!("{k}: ours {v:?}, missing from the reference"));
        }
    }
    if r.rows.is_empty() {
        errors.push("the reference report has no rows".into());
    }
    report(errors)
}

fn report(errors: Vec<String>) -> Result<(), Failed> {
    if errors.is_empty() {
        return Ok(());
    }
    let n = errors.len();
    let mut msg: Vec<String> = errors.into_iter().take(8).collect();
    if n > 8 {
        msg.push(format!("... and {} more", n - 8));
    }
    Err(msg.join("\n").into())
}

fn compare_inclusive(path: &Path, live: bool) -> Result<(), Failed> {
    let text = reference(
        "callgrind_annotate",
        &["--auto=no", "--threshold=100", "--inclusive=yes"],
        path,
        ".annotate-inclusive",
        live,
    )?;
    let r = parse_report(&text)?;
    let j = ours(path, &["--inclusive=yes"])?;
    check_totals(&r, &j, path)?;
    let events = &r.events;
    let total = costs_of(&j["totals"], events);
    // Rows whose function is in a cycle or calls itself are where the
    // reference is wrong; the function must exist in ours all the same.
    let mut recursive: BTreeMap<String, bool> = BTreeMap::new();
    for f in j["functions"].as_array().into_iter().flatten() {
        let rec = !f["cycle"].is_null()
            || f["callees"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| key(c) == key(f)));
        *recursive.entry(key(f)).or_default() |= rec;
    }
    let self_calls = self_calling(path)?;
    let unentered = entered_without_call(path)?;
    // The reference leaves `calls=0` arcs out of a callee's inclusive cost.
    let (_, zero_arcs) = zero_count_calls(path, events)?;
    let zero_callees: Vec<&str> = zero_arcs
        .keys()
        .filter_map(|k| k.split_once(" -> ").map(|x| x.1))
        .collect();
    let mine = our_rows(&j, events, "inclusive");
    let mut errors = Vec::new();
    let mut compared = 0;
    for (k, v) in &r.rows {
        if recursive.get(k).copied().unwrap_or(false)
            || self_calls.contains(k)
            || unentered.contains(k)
            || zero_callees.contains(&k.as_str())
        {
            continue;
        }
        match mine.get(k) {
            Some(Some(m)) => {
                compared += 1;
                if m != v {
                    errors.push(format!("{k}: ours {m:?}, reference {v:?}"));
                }
            }
            Some(None) => errors.push(format!("{k}: no inclusive cost in ours")),
            None => {
                if v.iter().any(|&x| x != 0) {
                    errors.push(format!("{k}: missing from ours (reference {v:?})"));
                }
            }
        }
    }
    // No row of ours, and no cycle, may exceed the total.
    for (k, v) in mine.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k, v))) {
        if v.iter().zip(&total).any(|(a, b)| a > b) && !is_signed(path) {
            errors.push(format!("{k}: inclusive {v:?} exceeds the total {total:?}"));
        }
    }
    for c in j["cycles"].as_array().into_iter().flatten() {
        let v = costs_of(&c["inclusive"], events);
        if v.iter().zip(&total).any(|(a, b)| a > b) && !is_signed(path) {
            errors.push(format!(
                "cycle {}: inclusive {v:?} exceeds the total",
                c["number"]
            ));
        }
    }
    if compared == 0 {
        errors.push("no row compared".into());
    }
    report(errors)
}

/// `file:function` keys of functions with a direct self call.
fn self_calling(path: &Path) -> Result<Vec<String>, Failed> {
    let p = load::<u64>(path)?;
    let n = &p.names;
    let mut out = Vec::new();
    for part in &p.parts {
        for c in part.calls.iter() {
            if c.info.caller == c.info.callee {
                out.push(format!(
                    "{}:{}",
                    String::from_utf8_lossy(n.function_file(c.info.caller)),
                    String::from_utf8_lossy(n.function_name(c.info.caller))
                ));
            }
        }
    }
    Ok(out)
}

/// `file:function` keys of functions whose self cost plus calls to others
/// exceed the calls into them (first event): entered without a call too.
fn entered_without_call(path: &Path) -> Result<Vec<String>, Failed> {
    let p = load::<u64>(path)?;
    let agg = tally_analysis::Aggregate::new(&p, |_| true);
    let n = agg.function_self.len();
    let mut own: Vec<u64> = (0..n).map(|f| agg.function_self.get(f)[0]).collect();
    let mut into = vec![0u64; n];
    for a in agg.arcs.iter().filter(|a| a.caller != a.callee) {
        own[a.caller.index()] += a.inclusive[0];
        into[a.callee.index()] += a.inclusive[0];
    }
    Ok((0..n)
        .filter(|&f| into[f] > 0 && own[f] > into[f])
        .map(|f| {
            let f = tally_model::FunctionId(f as u32);
            format!(
                "{}:{}",
                String::from_utf8_lossy(p.names.function_file(f)),
                String::from_utf8_lossy(p.names.function_name(f))
            )
        })
        .collect())
}

fn compare_tree(path: &Path, live: bool) -> Result<(), Failed> {
    let text = reference(
        "callgrind_annotate",
        &["--auto=no", "--threshold=100", "--tree=both"],
        path,
        ".annotate-tree",
        live,
    )?;
    let r = parse_report(&text)?;
    let j = ours(path, &["--tree=both"])?;
    let events = &r.events;
    let (_, zero_arcs) = zero_count_calls(path, events)?;
    // Arcs (function, other end) inside a recursion or cycle, per direction.
    let mut inside: std::collections::BTreeSet<(bool, String, String)> = Default::default();
    for f in j["functions"].as_array().into_iter().flatten() {
        let k = key(f);
        for (to_is_key, list) in [(true, "callers"), (false, "callees")] {
            for c in f[list].as_array().into_iter().flatten() {
                if !c["recursion"].is_null() {
                    if !c["inclusive"].is_null() {
                        return Err(format!("{k}: a call inside a recursion has a cost").into());
                    }
                    inside.insert((to_is_key, k.clone(), key(c)));
                }
            }
        }
    }
    let strip = |arcs: &mut Arcs, from: &str, to_is_key: bool| {
        // Remove what `calls=0` added: the reference leaves those out.
        for (k, (_, c)) in &zero_arcs {
            let (caller, callee) = k.split_once(" -> ").unwrap();
            let (this, other) = if to_is_key {
                (callee, caller)
            } else {
                (caller, callee)
            };
            if this != from || inside.contains(&(to_is_key, this.to_string(), other.to_string())) {
                continue;
            }
            if let Some(e) = arcs.get_mut(other) {
                e.1.iter_mut().zip(c).for_each(|(a, b)| *a -= b);
            }
        }
        arcs.retain(|_, v| v.0 != 0 || v.1.iter().any(|&x| x != 0));
    };
    let mut mine: BTreeMap<String, (Arcs, Arcs)> = BTreeMap::new();
    for f in j["functions"].as_array().into_iter().flatten() {
        let k = key(f);
        let e = mine.entry(k.clone()).or_default();
        for c in f["callers"].as_array().into_iter().flatten() {
            add_arc(
                &mut e.0,
                key(c),
                num(&c["count"]),
                &costs_of(&c["inclusive"], events),
            );
        }
        for c in f["callees"].as_array().into_iter().flatten() {
            add_arc(
                &mut e.1,
                key(c),
                num(&c["count"]),
                &costs_of(&c["inclusive"], events),
            );
        }
    }
    for (k, (callers, callees)) in mine.iter_mut() {
        strip(callers, k, true);
        strip(callees, k, false);
    }
    let mut trees = r.trees.clone();
    for (k, (callers, callees)) in trees.iter_mut() {
        for (to_is_key, arcs) in [(true, callers), (false, callees)] {
            for (other, v) in arcs.iter_mut() {
                if inside.contains(&(to_is_key, k.clone(), other.clone())) {
                    v.1.iter_mut().for_each(|x| *x = 0);
                }
            }
        }
    }
    let mut errors = Vec::new();
    let mut arcs = 0;
    for (k, (callers, callees)) in &trees {
        let empty = (Arcs::new(), Arcs::new());
        let m = mine.get(k).unwrap_or(&empty);
        arcs += callers.len() + callees.len();
        if &m.0 != callers {
            errors.push(format!(
                "{k}: callers differ\n  ours {:?}\n  reference {callers:?}",
                m.0
            ));
        }
        if &m.1 != callees {
            errors.push(format!(
                "{k}: callees differ\n  ours {:?}\n  reference {callees:?}",
                m.1
            ));
        }
    }
    for (k, (a, b)) in &mine {
        if !trees.contains_key(k) && (!a.is_empty() || !b.is_empty()) {
            errors.push(format!("{k}: has arcs in ours, missing from the reference"));
        }
    }
    if arcs == 0 {
        errors.push("the reference tree has no arcs".into());
    }
    report(errors)
}

/// Per source file: line → (self costs, calls `name (Nx)` → costs).
type SourceLines = BTreeMap<String, BTreeMap<u64, (Vec<i128>, BTreeMap<String, Vec<i128>>)>>;

fn parse_source(text: &str, n: usize) -> SourceLines {
    let mut out = SourceLines::new();
    let mut file: Option<String> = None;
    let mut line = 0u64;
    let mut header = 0;
    for l in text.lines() {
        if let Some(f) = l.strip_prefix("-- Auto-annotated source: ") {
            file = Some(f.trim().to_string());
            line = 0;
            header = 3; // rule, events, blank
            continue;
        }
        let Some(f) = file.clone() else { continue };
        if header > 0 {
            header -= 1;
            continue;
        }
        if l.starts_with("----") {
            file = None;
            continue;
        }
        if let Some(rest) = l.strip_prefix("-- line ") {
            line = rest
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(1)
                - 1;
            continue;
        }
        let Some(p) = split_counts(l, n) else {
            continue;
        };
        let counts: Vec<i128> = p.counts.iter().map(|c| c.unwrap_or(0)).collect();
        if let Some(call) = p.text.strip_prefix("=> ") {
            let e = out.entry(f).or_default().entry(line).or_default();
            let (name, count, _) = split_name(call.trim());
            let call = format!("{name} ({}x)", count.unwrap_or(0));
            let slot = e.1.entry(call).or_insert_with(|| vec![0; n]);
            slot.iter_mut().zip(&counts).for_each(|(a, b)| *a += b);
            continue;
        }
        line += 1;
        if counts.iter().any(|&c| c != 0) {
            let e = out.entry(f).or_default().entry(line).or_default();
            e.0 = counts;
        }
    }
    out
}

/// Source annotation: every line's self cost and calls equal
/// callgrind_annotate's `--auto=yes` (live only: no reports are committed).
fn compare_source(path: &Path) -> Result<(), Failed> {
    let text = reference(
        "callgrind_annotate",
        &["--auto=yes", "--threshold=100", "--context=1000000"],
        path,
        "",
        true,
    )?;
    let r = parse_report(&text)?;
    let events = &r.events;
    let want = parse_source(&text, events.len());
    let inc = data_dir();
    let j = ours(path, &["--auto=yes", "-I", inc.to_str().unwrap_or(".")])?;
    let mut want = want;
    let mut got = SourceLines::new();
    for f in j["source"]["files"].as_array().into_iter().flatten() {
        let name = f["file"].as_str().unwrap_or("").to_string();
        let m = got.entry(name.clone()).or_default();
        for l in f["lines"].as_array().into_iter().flatten() {
            let e = m.entry(num(&l["line"]) as u64).or_default();
            let c = costs_of(&l["self"], events);
            if c.iter().any(|&x| x != 0) {
                e.0 = c;
            }
            // callgrind_annotate shows the calls of only one function per
            // line (the first it met there); compare where there is one.
            let calls = l["calls"].as_array().cloned().unwrap_or_default();
            let callers: std::collections::BTreeSet<&str> =
                calls.iter().filter_map(|c| c["caller"].as_str()).collect();
            if callers.len() > 1 {
                e.1.insert("(several callers)".into(), vec![]);
                continue;
            }
            for c in &calls {
                let call = format!("{} ({}x)", key(c), num(&c["count"]));
                if !c["recursion"].is_null() {
                    // Inside a recursion: compared by count, no cost.
                    if let Some(w) = want
                        .get_mut(&name)
                        .and_then(|m| m.get_mut(&(num(&l["line"]) as u64)))
                        .and_then(|w| w.1.get_mut(&call))
                    {
                        w.iter_mut().for_each(|x| *x = 0);
                    }
                }
                e.1.insert(call, costs_of(&c["inclusive"], events));
            }
        }
        m.retain(|_, v| !v.0.is_empty() || !v.1.is_empty());
    }
    let mut errors = Vec::new();
    let mut lines = 0;
    for (f, w) in &want {
        let Some(g) = got.get(f) else {
            errors.push(format!("{f}: annotated by the reference, not by ours"));
            continue;
        };
        for (l, wv) in w {
            lines += 1;
            match g.get(l) {
                Some(gv) if gv == wv => {}
                Some(gv) if gv.0 == wv.0 && gv.1.contains_key("(several callers)") => {}
                gv => errors.push(format!("{f}:{l}: ours {gv:?}, reference {wv:?}")),
            }
        }
        for l in g.keys() {
            if !w.contains_key(l) {
                errors.push(format!("{f}:{l}: ours {:?}, reference nothing", g[l]));
            }
        }
    }
    let got_lines: usize = got.values().map(|m| m.len()).sum();
    if lines == 0 && got_lines > 0 {
        errors.push("the reference annotated nothing, ours did".into());
    }
    report(errors)
}

/// Runs `tool` on `file` and returns its warnings (standard error) with
/// line numbers taken out, so that two files' warnings compare.
fn tool_warnings(tool: &str, file: &Path) -> Result<Vec<String>, Failed> {
    let threshold = if tool == "cg_annotate" { "0" } else { "100" };
    let out = Command::new(tool)
        .arg("--auto=no")
        .arg(format!("--threshold={threshold}"))
        .arg(file)
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{tool} failed on {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split_whitespace()
                .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect())
}

/// A file tally wrote is read by the reference tool with no warning that
/// `original` (the file it came from, if any) does not give too, and with
/// the same numbers as ours: self costs, and call trees for Callgrind.
fn written_reads(written: &Path, original: Option<&Path>, tool: &str) -> Result<(), Failed> {
    let mut warnings = tool_warnings(tool, written)?;
    if let Some(o) = original {
        let known = tool_warnings(tool, o)?;
        warnings.retain(|w| !known.contains(w));
    }
    if !warnings.is_empty() {
        return Err(format!("{tool} warns: {}", warnings.join("\n")).into());
    }
    if tool == "cg_annotate" {
        return compare_self(written, tool, "", &["--auto=no", "--threshold=0"], true);
    }
    compare_self(written, tool, "", &["--auto=no", "--threshold=100"], true)?;
    compare_tree(written, true)
}

/// `tally ARGS… -o OUT` in `dir`; OUT's path.
fn tally_writes(dir: &Path, out: &str, args: &[&str]) -> Result<PathBuf, Failed> {
    let path = dir.join(out);
    let o = tally_testutil::tally!()
        .command()
        .args(args)
        .arg("-o")
        .arg(&path)
        .output()
        .map_err(|e| format!("tally: {e}"))?;
    if !o.status.success() {
        return Err(format!("tally {args:?}: {}", String::from_utf8_lossy(&o.stderr)).into());
    }
    Ok(path)
}

/// A fixture converted to `to` (default options) reads in the reference
/// tool as the fixture does.
fn converted_reads(fixture: &Path, to: &str, tool: &str) -> Result<(), Failed> {
    let dir = tally_testutil::temp_dir();
    let f = tally_testutil::path_str(fixture);
    // The fixture's name: the comparison tells difference profiles by it.
    let name = fixture
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("out");
    let out = tally_writes(dir.path(), name, &["convert", f, "--to", to])?;
    written_reads(&out, Some(fixture), tool)
}

/// Compiles `tests/data/src/workload.c` and profiles it with Callgrind at
/// the instruction level with jumps, for `n` elements.
fn profile_workload(dir: &Path, n: &str) -> Result<PathBuf, Failed> {
    let bin = dir.join("workload");
    if !bin.is_file() {
        let src = data_dir().join("src/workload.c");
        let ok = Command::new("gcc")
            .args(["-g", "-O1", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            return Err("gcc failed".into());
        }
    }
    let out = dir.join(format!("callgrind.out.{n}"));
    let ok = Command::new("valgrind")
        .args([
            "-q",
            "--tool=callgrind",
            "--dump-instr=yes",
            "--collect-jumps=yes",
        ])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&bin)
        .arg(n)
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return Err("valgrind failed".into());
    }
    Ok(out)
}

/// `tally merge` of two instruction-level profiles with jumps (compiled
/// and profiled here) reads in callgrind_annotate with tally's numbers.
fn merged_reads() -> Result<(), Failed> {
    let dir = tally_testutil::temp_dir();
    let a = profile_workload(dir.path(), "300")?;
    let b = profile_workload(dir.path(), "500")?;
    let (a, b) = (tally_testutil::path_str(&a), tally_testutil::path_str(&b));
    for (name, args) in [("aa", ["merge", a, a]), ("ab", ["merge", a, b])] {
        let out = tally_writes(dir.path(), name, &args)?;
        written_reads(&out, None, "callgrind_annotate")
            .map_err(|e| format!("{name}: {}", e.message().unwrap_or("")))?;
    }
    Ok(())
}

/// Every comparison with callgrind_annotate and cg_annotate, named `annotate_compare/…`.
pub fn trials() -> Vec<Trial> {
    let have_cga = tally_testutil::live(&["callgrind_annotate"]);
    let have_cg = tally_testutil::live(&["cg_annotate"]);
    let mut tests = Vec::new();
    for p in fixtures("callgrind", ".annotate") {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        let q = p.clone();
        tests.push(Trial::test(
            format!("annotate_compare/self/callgrind/{n}"),
            move || {
                compare_self(
                    &q,
                    "callgrind_annotate",
                    ".annotate",
                    &["--auto=no", "--threshold=100"],
                    have_cga,
                )
            },
        ));
        let q = p.clone();
        tests.push(Trial::test(
            format!("annotate_compare/inclusive/callgrind/{n}"),
            move || compare_inclusive(&q, have_cga),
        ));
        let q = p.clone();
        tests.push(Trial::test(
            format!("annotate_compare/tree/callgrind/{n}"),
            move || compare_tree(&q, have_cga),
        ));
        // Source lines (not for files with `calls=0`, whose cost
        // callgrind_annotate books on the call's line as self cost).
        let calls0 = std::fs::read_to_string(&p).is_ok_and(|t| t.contains("\ncalls=0 "));
        if !calls0 {
            let q = p.clone();
            tests.push(tally_testutil::trial(
                format!("annotate_compare/source/callgrind/{n}"),
                &["callgrind_annotate"],
                move || compare_source(&q),
            ));
        }
    }
    for p in fixtures("callgrind", ".annotate") {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        tests.push(tally_testutil::trial(
            format!("annotate_compare/written/convert/callgrind/{n}"),
            &["callgrind_annotate"],
            move || converted_reads(&p, "callgrind", "callgrind_annotate"),
        ));
    }
    for p in fixtures("cachegrind", ".cg_annotate") {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        tests.push(tally_testutil::trial(
            format!("annotate_compare/written/convert/cachegrind/{n}"),
            &["cg_annotate"],
            move || converted_reads(&p, "cachegrind", "cg_annotate"),
        ));
    }
    tests.push(tally_testutil::trial(
        "annotate_compare/written/merge/instr-jumps",
        &["gcc", "valgrind", "callgrind_annotate"],
        merged_reads,
    ));
    for p in fixtures("cachegrind", ".cg_annotate") {
        let n = p.file_name().unwrap().to_string_lossy().to_string();
        tests.push(Trial::test(
            format!("annotate_compare/self/cachegrind/{n}"),
            move || {
                compare_self(
                    &p,
                    "cg_annotate",
                    ".cg_annotate",
                    &["--auto=no", "--threshold=0"],
                    have_cg,
                )
            },
        ));
    }
    tests
}
