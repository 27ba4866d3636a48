//! The comparison of `serve --diff A B`: four lists, each function in at
//! most one — regressed, improved, only in B, only in A — by self or by
//! inclusive cost, with a noise threshold, as no other viewer gives them.
//!
//! A function is matched by name, file and object, so the numbers are
//! those of `tally diff --json` for the same two files. A function counts
//! as present in a profile when it has a cost or a call there; one present
//! in both is regressed or improved only if its change passes the noise
//! threshold, a share of A's total.
//!
//! The same route gives the comparison's call trees
//! (`compare?view=tree&node=N`, `compare?view=inverted&path=K,…`), and
//! [`flame_svg`] its differential flame graph: both from the stacks of
//! each side (recorded or estimated) merged by function key path
//! ([`tally_report::flame::diff`]), each node with A's total, B's and
//! their difference.

use std::collections::HashMap;

use serde_json::{Value, json};
use tally_model::{EventColumns, EventValue};
use tally_report::flame::diff::{DiffTree, Side, SideStacks};
use tally_report::flame::{FlameOptions, write_svg};

use crate::api::Reply;
use crate::session::{Input, Session, WholeStacks};
use crate::view::{Row, View};
use crate::{Error, api};

/// Which cost the lists are ranked by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Self cost.
    SelfCost,
    /// Inclusive cost (for a cycle member, the derived one).
    Inclusive,
}

/// One function in the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Name, file and object.
    pub name: String,
    /// Source file.
    pub file: String,
    /// Object.
    pub object: String,
    /// Self cost in A and B (0 where absent).
    pub self_cost: [f64; 2],
    /// Inclusive cost in A and B, where known.
    pub inclusive: [Option<f64>; 2],
    /// Whether it is present in A and in B.
    pub present: [bool; 2],
}

impl Entry {
    fn value(&self, m: Measure, side: usize) -> f64 {
        match m {
            Measure::SelfCost => self.self_cost[side],
            Measure::Inclusive => self.inclusive[side].unwrap_or(self.self_cost[side]),
        }
    }

    fn delta(&self, m: Measure) -> f64 {
        self.value(m, 1) - self.value(m, 0)
    }
}

/// The four lists, each by decreasing size of change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lists {
    /// Present in both, grown by more than the noise.
    pub regressed: Vec<Entry>,
    /// Present in both, shrunk by more than the noise.
    pub improved: Vec<Entry>,
    /// Present in B only.
    pub only_b: Vec<Entry>,
    /// Present in A only.
    pub only_a: Vec<Entry>,
}

fn present(r: &Row) -> bool {
    r.self_cost != 0.0 || r.inclusive.is_some_and(|i| i != 0.0) || r.calls != 0
}

/// The functions of views `a` and `b` (cycles left out: their members
/// are compared), matched by name, file and object.
pub fn entries(a: &View, b: &View) -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    let mut at: HashMap<(String, String, String), usize> = HashMap::new();
    for (side, v) in [a, b].into_iter().enumerate() {
        for r in v.rows.iter().filter(|r| !r.is_cycle && present(r)) {
            let key = (r.name.clone(), r.file.to_string(), r.object.to_string());
            let i = *at.entry(key).or_insert_with(|| {
                out.push(Entry {
                    name: r.name.clone(),
                    file: r.file.to_string(),
                    object: r.object.to_string(),
                    self_cost: [0.0; 2],
                    inclusive: [None; 2],
                    present: [false; 2],
                });
                out.len() - 1
            });
            let e = &mut out[i];
            e.self_cost[side] += r.self_cost;
            e.inclusive[side] = Some(e.inclusive[side].unwrap_or(0.0) + r.inclusive.unwrap_or(0.0));
            e.present[side] = true;
        }
    }
    out
}

/// Sorts `entries` into the four lists by `measure`; a change counts when
/// its size is above `noise` (a fraction) of `total_a`.
pub fn lists(entries: Vec<Entry>, measure: Measure, noise: f64, total_a: f64) -> Lists {
    let floor = noise * total_a.abs();
    let mut l = Lists::default();
    for e in entries {
        let d = e.delta(measure);
        match e.present {
            [true, true] if d > floor && d != 0.0 => l.regressed.push(e),
            [true, true] if -d > floor && d != 0.0 => l.improved.push(e),
            [false, true] => l.only_b.push(e),
            [true, false] => l.only_a.push(e),
            _ => {}
        }
    }
    let by_size = |x: &Entry, y: &Entry| {
        y.delta(measure)
            .abs()
            .total_cmp(&x.delta(measure).abs())
            .then_with(|| x.name.cmp(&y.name))
    };
    for list in [
        &mut l.regressed,
        &mut l.improved,
        &mut l.only_b,
        &mut l.only_a,
    ] {
        list.sort_by(by_size);
    }
    l
}

fn entry_json(e: &Entry) -> Value {
    let change = |a: f64, b: f64| (a != 0.0).then(|| (b - a) * 100.0 / a);
    let (ia, ib) = (e.inclusive[0], e.inclusive[1]);
    json!({
        "function": e.name,
        "file": e.file,
        "object": e.object,
        "self": {
            "a": e.self_cost[0], "b": e.self_cost[1],
            "delta": e.self_cost[1] - e.self_cost[0],
            "change_percent": change(e.self_cost[0], e.self_cost[1]),
        },
        "inclusive": {
            "a": ia, "b": ib,
            "delta": ib.unwrap_or(0.0) - ia.unwrap_or(0.0),
            "change_percent": ia.and_then(|a| change(a, ib.unwrap_or(0.0))),
        },
    })
}

/// `compare?event=&part=&by=self|inclusive&noise=PERCENT`: the four lists
/// of a `--diff` session, at most `top` entries each (default 100);
/// with `view=tree` or `view=inverted`, a level of a call tree
/// ([`tree_level`]).
pub fn compare(s: &Session, q: &HashMap<String, String>) -> Result<Value, Error> {
    if !s.diff {
        return Err(Error::BadRequest(
            "compare: serve two profiles with --diff".into(),
        ));
    }
    match q.get("view").map(String::as_str) {
        None | Some("" | "lists") => {}
        Some(kind @ ("tree" | "inverted")) => return tree_level(s, q, kind),
        Some(o) => {
            return Err(Error::BadRequest(format!(
                "view: `{o}` is not lists, tree or inverted"
            )));
        }
    }
    let part = match q.get("part") {
        Some(p) => Some(
            p.parse()
                .map_err(|_| Error::BadRequest(format!("part: `{p}` is not a number")))?,
        ),
        None => None,
    };
    let event = q.get("event").map(String::as_str);
    let measure = match q.get("by").map(String::as_str) {
        None | Some("self") => Measure::SelfCost,
        Some("inclusive") => Measure::Inclusive,
        Some(o) => {
            return Err(Error::BadRequest(format!(
                "by: `{o}` is not self or inclusive"
            )));
        }
    };
    let number = |k: &str, d: f64| -> Result<f64, Error> {
        match q.get(k) {
            None => Ok(d),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| Error::BadRequest(format!("{k}: `{v}` is not a number"))),
        }
    };
    let noise = noise(q)?;
    let top = number("top", 100.0)? as usize;
    let a = s.view(0, event, part)?;
    let b = s.view(1, event, part)?;
    let total_a = a.total();
    let l = lists(entries(&a, &b), measure, noise, total_a);
    let list = |v: &[Entry]| -> Value {
        json!({
            "count": v.len(),
            "entries": v.iter().take(top).map(entry_json).collect::<Vec<_>>(),
        })
    };
    Ok(json!({
        "event": a.event,
        "by": if measure == Measure::SelfCost { "self" } else { "inclusive" },
        "noise_percent": noise * 100.0,
        "totals": {"a": total_a, "b": b.total()},
        "regressed": list(&l.regressed),
        "improved": list(&l.improved),
        "only_in_b": list(&l.only_b),
        "only_in_a": list(&l.only_a),
    }))
}

/// The `noise` parameter (a percentage, default 0.1) as a fraction.
fn noise(q: &HashMap<String, String>) -> Result<f64, Error> {
    match q.get("noise").filter(|v| !v.is_empty()) {
        None => Ok(0.001),
        Some(v) => v
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .map(|x| x / 100.0)
            .ok_or_else(|| Error::BadRequest(format!("noise: `{v}` is not a number"))),
    }
}

/// The event `name` of an input as a width: a count, not a ratio. A gmon
/// input's one event is the histogram's ("time" on the page).
fn event_value(inp: &Input, name: &str) -> Result<EventValue, Error> {
    let columns = EventColumns::new(&inp.profile.events);
    let own = match &inp.gmon {
        Some(_) => inp
            .profile
            .events
            .recorded()
            .first()
            .map(|e| e.name.clone())
            .unwrap_or_default(),
        None => name.to_owned(),
    };
    let e = columns.find(&own).map_err(|e| {
        Error::NotFound(format!("{}: {}", inp.name, tally_analysis::Error::from(e)))
    })?;
    if columns.is_ratio(e) {
        return Err(Error::BadRequest(format!(
            "event {name}: a ratio cannot be a width; choose a count"
        )));
    }
    columns
        .column(e)
        .cloned()
        .ok_or_else(|| Error::NotFound(format!("no event {name}")))
}

/// The event asked for (default: the first) and the merged tree of A's
/// and B's stacks in it.
pub(crate) fn diff_tree(
    s: &Session,
    q: &HashMap<String, String>,
) -> Result<(String, DiffTree), Error> {
    let name = match q.get("event").filter(|e| !e.is_empty()) {
        Some(e) => e.clone(),
        None => s
            .events(s.main())
            .first()
            .cloned()
            .ok_or_else(|| Error::Input("no event".into()))?,
    };
    let (ia, ib) = (&s.inputs[0], &s.inputs[s.main()]);
    let (ea, eb) = (event_value(ia, &name)?, event_value(ib, &name)?);
    let a = Side {
        profile: &ia.profile,
        stacks: stacks_of(ia)?,
        event: &ea,
    };
    let b = Side {
        profile: &ib.profile,
        stacks: stacks_of(ib)?,
        event: &eb,
    };
    Ok((name, DiffTree::new(&a, &b)))
}

fn stacks_of(inp: &Input) -> Result<SideStacks<'_>, Error> {
    Ok(match inp.stacks()? {
        WholeStacks::Recorded(st) => SideStacks::Recorded(st),
        WholeStacks::Estimated(t) => SideStacks::Estimated(t),
    })
}

/// Which way a node's total moved: past `floor` (the noise in cost
/// units) up or down, or the same.
fn change(a: u64, b: u64, floor: f64) -> &'static str {
    let d = b as f64 - a as f64;
    if d.abs() <= floor || d == 0.0 {
        "same"
    } else if d > 0.0 {
        "regressed"
    } else {
        "improved"
    }
}

/// One level of the comparison's top-down (`node=N`, 0 the root) or
/// inverted (`path=K,…`, function keys from the one with self cost up)
/// call tree: each child with A's and B's totals and self costs, their
/// difference and which way it moved past the noise. `total` and `self`
/// are B's, as in a single profile's tree.
pub fn tree_level(s: &Session, q: &HashMap<String, String>, kind: &str) -> Result<Value, Error> {
    let (event, t) = diff_tree(s, q)?;
    level_of(s, &event, &t, q, kind)
}

/// A level of `t`, the merged tree of `event` ([`diff_tree`]), as
/// [`tree_level`] gives it: a caller asking for many levels merges the
/// stacks once.
pub(crate) fn level_of(
    s: &Session,
    event: &str,
    t: &DiffTree,
    q: &HashMap<String, String>,
    kind: &str,
) -> Result<Value, Error> {
    let noise = noise(q)?;
    let root = t.nodes[0].total;
    let floor = noise * root[0] as f64;
    let names = t.display_names();
    let entry = |key: u32, total: [u64; 2], self_cost: [u64; 2], more: bool| {
        let k = &t.keys[key as usize];
        json!({
            "id": key,
            "function": names[key as usize],
            "file": k.file,
            "object": k.object,
            "a": total[0],
            "b": total[1],
            "delta": total[1] as i128 - total[0] as i128,
            "self_a": self_cost[0],
            "self_b": self_cost[1],
            "total": total[1],
            "self": self_cost[1],
            "change": change(total[0], total[1], floor),
            "more": more,
        })
    };
    let children: Vec<Value> = if kind == "tree" {
        let node: u32 = match q.get("node").filter(|n| !n.is_empty()) {
            None => 0,
            Some(n) => n
                .parse()
                .ok()
                .filter(|&n: &u32| (n as usize) < t.nodes.len())
                .ok_or_else(|| Error::NotFound(format!("no tree node {n}")))?,
        };
        t.children(node)
            .into_iter()
            .map(|c| {
                let n = &t.nodes[c as usize];
                let mut v = entry(n.key, n.total, n.self_cost, !n.children.is_empty());
                v["node"] = json!(c);
                v
            })
            .collect()
    } else {
        let path: Vec<u32> = q
            .get("path")
            .map(String::as_str)
            .unwrap_or("")
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.parse::<u32>()
                    .ok()
                    .filter(|&k| (k as usize) < t.keys.len())
                    .ok_or_else(|| Error::BadRequest(format!("path: `{p}` is not a function")))
            })
            .collect::<Result<_, _>>()?;
        t.inverted_children(&path)
            .into_iter()
            .map(|c| entry(c.key, c.total, c.self_cost, c.has_children))
            .collect()
    };
    Ok(json!({
        "event": event,
        "grand_total": root[1],
        "totals": {"a": root[0], "b": root[1], "delta": root[1] as i128 - root[0] as i128},
        "noise_percent": noise * 100.0,
        "estimated": s.inputs.iter().any(|i| i.estimated),
        "children": children,
    }))
}

/// The differential flame graph of a `--diff` session in `event`: B's
/// widths, colours by the change of each frame's inclusive cost past the
/// noise (`noise`, a percentage of A's total), the stacks only in A
/// listed; frames narrower than `min_width` pixels left out.
pub fn flame_svg(s: &Session, q: &HashMap<String, String>, min_width: f64) -> Result<Reply, Error> {
    let (event, t) = diff_tree(s, q)?;
    let noise = noise(q)?;
    let tree = t.flame(noise);
    let mut title = "Differential Flame Graph".to_string();
    if s.inputs.iter().any(|i| i.estimated) {
        title.push_str(" (stacks estimated from call arcs)");
    }
    let opts = FlameOptions {
        title,
        subtitle: Some(format!(
            "{event}: {} against {}",
            s.inputs[s.main()].name,
            s.inputs[0].name
        )),
        legend: Some(tally_report::flame::diff::legend(noise)),
        event,
        width: api::flame_width(q)?,
        min_width,
        icicle: false,
    };
    let mut out = Vec::new();
    write_svg(&tree, &opts, &mut out).map_err(|e| Error::Input(e.to_string()))?;
    Ok(Reply {
        content_type: "image/svg+xml",
        body: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(name: &str, a: Option<f64>, b: Option<f64>) -> Entry {
        Entry {
            name: name.into(),
            file: String::new(),
            object: String::new(),
            self_cost: [a.unwrap_or(0.0), b.unwrap_or(0.0)],
            inclusive: [a, b],
            present: [a.is_some(), b.is_some()],
        }
    }

    #[test]
    fn each_function_lands_in_one_list_past_the_noise() {
        let l = lists(
            vec![
                e("up", Some(100.0), Some(300.0)),
                e("bit", Some(100.0), Some(100.5)),
                e("down", Some(500.0), Some(100.0)),
                e("new", None, Some(7.0)),
                e("gone", Some(9.0), None),
                e("up2", Some(0.0), Some(50.0)),
            ],
            Measure::SelfCost,
            0.001,
            1000.0,
        );
        let names = |v: &[Entry]| v.iter().map(|e| e.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&l.regressed), ["up", "up2"]);
        assert_eq!(names(&l.improved), ["down"]);
        assert_eq!(names(&l.only_b), ["new"]);
        assert_eq!(names(&l.only_a), ["gone"]);
    }
}
