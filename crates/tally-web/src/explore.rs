//! Transforms and call trees in the web UI.
//!
//! - any request with `tf=PAIRS` (`focus=RE&hide=RE…`, each value
//!   percent-encoded, the whole percent-encoded again as one parameter) is
//!   answered for the main input with those transforms applied, in order,
//!   by the same step every command runs (`WithStacks::transformed`); each
//!   list's session is made once;
//! - `tree?node=N&event=E`: the children of node `N` (0, the root) of the
//!   top-down call tree;
//! - `inverted?path=F,G…&event=E`: the children of the inverted tree's
//!   node at that path of function ids (empty: the functions with self
//!   cost).

use std::sync::Arc;

use serde_json::{Value, json};
use tally_analysis::calltree::{CallTree, inverted_children};
use tally_analysis::transform::{Transform, tree_of_stacks};
use tally_input::{StackSource, WithStacks};
use tally_model::FunctionId;

use crate::Error;
use crate::api::{Query, Reply};
use crate::session::{Session, WholeStacks};

/// Transform lists' sessions kept; past that the oldest is dropped.
const KEPT: usize = 8;

type Answer = Result<(Reply, bool), Error>;

/// The answer to `path` if it is a tree's, or asks for transforms
/// (`tf`): `None` for the other requests.
pub(crate) fn route(
    s: &Session,
    path: &str,
    q: &Query,
    answer: fn(&Session, &str, &Query) -> Answer,
) -> Option<Answer> {
    if let Some(tf) = q.get("tf").filter(|t| !t.is_empty()) {
        let mut rest = q.clone();
        rest.remove("tf");
        return Some(transformed(s, tf).and_then(|sub| answer(&sub, path, &rest)));
    }
    match path {
        "tree" => Some(top_down(s, q).map(|v| (Reply::json(&v), true))),
        "inverted" => Some(inverted(s, q).map(|v| (Reply::json(&v), true))),
        _ => None,
    }
}

/// The transforms of a `tf` parameter, in order.
pub fn parse(tf: &str) -> Result<Vec<Transform>, Error> {
    tf.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = decode(v)
                .ok_or_else(|| Error::BadRequest(format!("tf: `{v}` is not percent-encoded")))?;
            Transform::parse(k, &v).map_err(|e| Error::BadRequest(format!("tf: {e}")))
        })
        .collect()
}

/// `%XX` decoded (`+` stays: the page encodes spaces as `%20`).
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URL fragment of `list` (`focus=%5Emain%24&hide=…`), as the page
/// writes it: what `tally serve` with transform flags opens on.
pub fn fragment(list: &[Transform]) -> String {
    let encode = |v: &str| -> String {
        v.bytes()
            .map(|b| match b {
                b'A'..=b'Z'
                | b'a'..=b'z'
                | b'0'..=b'9'
                | b'-'
                | b'_'
                | b'.'
                | b'!'
                | b'~'
                | b'*'
                | b'\''
                | b'('
                | b')' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    list.iter()
        .map(|t| format!("{}={}", t.kind().key(), encode(t.pattern())))
        .collect::<Vec<_>>()
        .join("&")
}

/// The session of the main input with `tf`'s transforms applied.
fn transformed(s: &Session, tf: &str) -> Result<Arc<Session>, Error> {
    with_transforms(s, &parse(tf)?)
}

/// The session of `s`'s main input with `list` applied, in order, made
/// once per list: what the page shows with transforms, and what `report
/// --html` and `serve` start from when given transform flags.
pub fn with_transforms(s: &Session, list: &[Transform]) -> Result<Arc<Session>, Error> {
    let key = list
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    if let Some(done) = s.transformed.lock().map_err(|_| Error::Poisoned)?.get(&key) {
        return Ok(done.clone());
    }
    if s.diff {
        return Err(Error::BadRequest(
            "transforms apply to one profile: serve it without --diff".into(),
        ));
    }
    let inp = &s.inputs[s.main()];
    let list = list.to_vec();
    let stacks = match inp.stacks()? {
        WholeStacks::Recorded(st) => StackSource::Recorded(st.clone()),
        WholeStacks::Estimated(t) => StackSource::Estimated(t.clone()),
    };
    let with = WithStacks {
        profile: inp.profile.clone(),
        stacks,
        warnings: Vec::new(),
        notices: Vec::new(),
    };
    let done = with
        .transformed(&list)
        .map_err(|e| Error::Input(format!("{}: {e}", inp.name)))?;
    let stacks = match done.stacks {
        StackSource::Recorded(st) => WholeStacks::Recorded(st),
        StackSource::Estimated(t) => WholeStacks::Estimated(t),
    };
    let sub = Arc::new(s.with_stacks(done.profile, stacks));
    let mut kept = s.transformed.lock().map_err(|_| Error::Poisoned)?;
    if kept.len() >= KEPT
        && let Some(k) = kept.keys().next().cloned()
    {
        kept.remove(&k);
    }
    kept.insert(key, sub.clone());
    Ok(sub)
}

/// The main input's call tree, made once.
fn call_tree(s: &Session) -> Result<Arc<CallTree>, Error> {
    s.call_tree
        .get_or_init(|| {
            let inp = &s.inputs[s.main()];
            let p = &inp.profile;
            let tree = match inp.stacks().map_err(|e| e.to_string())? {
                WholeStacks::Recorded(st) => {
                    tree_of_stacks(st, p.events.len(), p.names.function_count())
                        .map_err(|e| e.to_string())?
                }
                WholeStacks::Estimated(t) => t.clone(),
            };
            Ok(Arc::new(CallTree::new(tree)))
        })
        .clone()
        .map_err(Error::Input)
}

fn names(s: &Session, f: FunctionId) -> (String, String, String) {
    let n = &s.inputs[s.main()].profile.names;
    let l = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        l(n.function_name(f)),
        l(n.function_file(f)),
        l(n.function_object(f)),
    )
}

fn node_json(s: &Session, f: FunctionId, total: u64, self_cost: u64, more: bool) -> Value {
    let (name, file, object) = names(s, f);
    json!({
        "id": f.0,
        "function": name,
        "file": file,
        "object": object,
        "total": total,
        "self": self_cost,
        "more": more,
    })
}

fn header(s: &Session, top: &CallTree, e: usize) -> Value {
    let inp = &s.inputs[s.main()];
    json!({
        "event": inp.profile.events.recorded().get(e).map(|x| x.name.clone()),
        "grand_total": top.total(0).get(e).copied().unwrap_or(0),
        "estimated": inp.estimated,
    })
}

/// One level of the top-down tree.
pub fn top_down(s: &Session, q: &Query) -> Result<Value, Error> {
    let top = call_tree(s)?;
    let e = crate::timeline::event_of(s, q)?;
    let node: u32 = match q.get("node").filter(|n| !n.is_empty()) {
        None => 0,
        Some(n) => n
            .parse()
            .ok()
            .filter(|&n: &u32| (n as usize) < top.len())
            .ok_or_else(|| Error::NotFound(format!("no tree node {n}")))?,
    };
    let children: Vec<Value> = top
        .children(node, e)
        .into_iter()
        .map(|c| {
            let mut v = node_json(
                s,
                top.function(c),
                top.total(c)[e],
                top.self_cost(c)[e],
                !top.children(c, e).is_empty(),
            );
            v["node"] = json!(c);
            v
        })
        .collect();
    let mut v = header(s, &top, e);
    v["children"] = json!(children);
    Ok(v)
}

/// One level of the inverted tree.
pub fn inverted(s: &Session, q: &Query) -> Result<Value, Error> {
    let top = call_tree(s)?;
    let e = crate::timeline::event_of(s, q)?;
    let nf = s.inputs[s.main()].profile.names.function_count();
    let path: Vec<FunctionId> = q
        .get("path")
        .map(String::as_str)
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<u32>()
                .ok()
                .filter(|&f| (f as usize) < nf)
                .map(FunctionId)
                .ok_or_else(|| Error::BadRequest(format!("path: `{p}` is not a function")))
        })
        .collect::<Result<_, _>>()?;
    let children: Vec<Value> = inverted_children(&top, &path, e)
        .into_iter()
        .map(|c| node_json(s, c.function, c.total[e], c.self_cost[e], c.has_children))
        .collect();
    let mut v = header(s, &top, e);
    v["children"] = json!(children);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transform_lists_are_read_in_order() {
        let l = parse("focus=a%26b&hide=%5Ex%24&collapse-recursion=").unwrap();
        let t: Vec<String> = l.iter().map(ToString::to_string).collect();
        assert_eq!(t, ["focus=a&b", "hide=^x$", "collapse-recursion="]);
        assert!(parse("nope=1").is_err());
        assert!(parse("focus=%zz").is_err());
    }
}
