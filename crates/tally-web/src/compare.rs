//! The comparison of `serve --diff A B`: four lists, each function in at
//! most one — regressed, improved, only in B, only in A — by self or by
//! inclusive cost, with a noise threshold, as no other viewer gives them.
//!
//! A function is matched by name, file and object, so the numbers are
//! those of `tally diff --json` for the same two files. A function counts
//! as present in a profile when it has a cost or a call there; one present
//! in both is regressed or improved only if its change passes the noise
//! threshold, a share of A's total.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::Error;
use crate::session::Session;
use crate::view::{Row, View};

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
            let key = (r.name.clone(), r.file.clone(), r.object.clone());
            let i = *at.entry(key).or_insert_with(|| {
                out.push(Entry {
                    name: r.name.clone(),
                    file: r.file.clone(),
                    object: r.object.clone(),
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
/// of a `--diff` session, at most `top` entries each (default 100).
pub fn compare(s: &Session, q: &HashMap<String, String>) -> Result<Value, Error> {
    if !s.diff {
        return Err(Error::BadRequest(
            "compare: serve two profiles with --diff".into(),
        ));
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
    let noise = number("noise", 0.1)? / 100.0;
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
