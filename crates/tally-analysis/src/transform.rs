//! Transforms of a profile's stacks, as pprof and Firefox Profiler give
//! them: keep the stacks through a function, drop them, take frames out,
//! root every stack at a function, fold recursion, fold a library.
//!
//! A transform works on whole stacks, so it is one pass over them, applied
//! after loading and before any analysis: every report, picture and export
//! then sees the transformed profile. Recorded stacks ([`Stacks`]) are
//! transformed sample by sample, keeping lines, addresses and labels;
//! stacks estimated from call arcs ([`StackTree`]) node by node, so a deep
//! tree costs no more than its nodes.
//!
//! Patterns are the `regex` crate's, unanchored, and match as pprof's do:
//! a function matches when its name, its file or its object does. The
//! sample filters (focus, ignore) look at the frames as they are when the
//! transform runs; a stack left without frames (everything hidden) is
//! dropped, as pprof drops it.

use std::fmt;

use regex::bytes::Regex;
use rustc_hash::FxHashMap;
use tally_model::{FileId, Frame, FrameId, FunctionId, FunctionKey, Names, Stacks};

use crate::{Error, StackTree};

/// What a transform does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Keep only the stacks through a matching function (pprof `-focus`).
    Focus,
    /// Drop the stacks through a matching function (pprof `-ignore`).
    Ignore,
    /// Take matching frames out, their cost going to their caller (pprof
    /// `-hide`, Firefox Profiler's "merge function").
    Hide,
    /// Keep only matching frames (pprof `-show`).
    Show,
    /// Root every stack at its first matching function, dropping the
    /// stacks without one (Firefox Profiler's "focus on function").
    FocusSubtree,
    /// Fold a recursion, direct or through other functions, into the
    /// outermost frame of the function (every function when the pattern is
    /// empty): `a b a c` becomes `a c`.
    CollapseRecursion,
    /// Replace each run of frames in a matching object (a library) by one
    /// frame named after the object.
    CollapseObject,
    /// Keep only the timed samples in `START-END`, nanoseconds from the
    /// timeline's first sample (start included, end excluded); the stacks'
    /// costs become the sums of those samples (Firefox Profiler's range
    /// selection). Stacks without a timeline cannot be cut in time.
    Range,
}

impl Kind {
    /// Every kind, in the order the command-line flags apply them: the
    /// time range first, then the sample filters, on the frames as loaded
    /// (as pprof applies them), then the frame edits.
    pub const ALL: [Kind; 8] = [
        Kind::Range,
        Kind::Ignore,
        Kind::Focus,
        Kind::Hide,
        Kind::Show,
        Kind::CollapseObject,
        Kind::CollapseRecursion,
        Kind::FocusSubtree,
    ];

    /// The name in flags (`--focus-subtree`), URL fragments and JSON.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Focus => "focus",
            Kind::Ignore => "ignore",
            Kind::Hide => "hide",
            Kind::Show => "show",
            Kind::FocusSubtree => "focus-subtree",
            Kind::CollapseRecursion => "collapse-recursion",
            Kind::CollapseObject => "collapse-object",
            Kind::Range => "range",
        }
    }

    /// The kind named `key`.
    pub fn from_key(key: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.key() == key)
    }
}

/// One transform: a kind and its pattern.
#[derive(Clone, Debug)]
pub struct Transform {
    kind: Kind,
    pattern: String,
    regex: Option<Regex>,
    /// A range's start and end.
    range: (u64, u64),
}

impl PartialEq for Transform {
    fn eq(&self, o: &Self) -> bool {
        self.kind == o.kind && self.pattern == o.pattern
    }
}
impl Eq for Transform {}

impl Transform {
    /// A transform of `kind` with `pattern`; only collapse-recursion takes
    /// an empty pattern (every function).
    pub fn new(kind: Kind, pattern: &str) -> Result<Transform, Error> {
        let bad = |message: String| Error::Pattern {
            pattern: format!("{}={pattern}", kind.key()),
            message,
        };
        if kind == Kind::Range {
            let range = pattern
                .split_once('-')
                .and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)))
                .filter(|(a, b)| a < b)
                .ok_or_else(|| {
                    bad("expected START-END, nanoseconds from the first sample, START < END".into())
                })?;
            return Ok(Transform {
                kind,
                pattern: pattern.to_owned(),
                regex: None,
                range,
            });
        }
        let regex = if pattern.is_empty() {
            if kind != Kind::CollapseRecursion {
                return Err(bad("needs a pattern".into()));
            }
            None
        } else {
            Some(Regex::new(pattern).map_err(|e| bad(e.to_string()))?)
        };
        Ok(Transform {
            kind,
            pattern: pattern.to_owned(),
            regex,
            range: (0, 0),
        })
    }

    /// The transform written `key=value`, as a URL fragment pair or a JSON
    /// `transforms` entry carries it.
    pub fn parse(key: &str, value: &str) -> Result<Transform, Error> {
        let kind = Kind::from_key(key).ok_or_else(|| Error::Pattern {
            pattern: format!("{key}={value}"),
            message: format!(
                "no transform `{key}` (there are: {})",
                Kind::ALL.map(Kind::key).join(", ")
            ),
        })?;
        Transform::new(kind, value)
    }

    /// What it does.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// Its pattern, as given.
    pub fn pattern(&self) -> &str {
        &self.pattern
    }

    /// Which of the functions of `names` it matches, by function id.
    fn matches(&self, names: &Names) -> Vec<bool> {
        let Some(re) = &self.regex else {
            return vec![true; names.function_count()];
        };
        let mut objects: FxHashMap<u32, bool> = FxHashMap::default();
        names
            .functions()
            .map(|(f, key)| {
                let object = *objects
                    .entry(key.object.0)
                    .or_insert_with(|| re.is_match(names.function_object(f)));
                if self.kind == Kind::CollapseObject {
                    return object;
                }
                object || re.is_match(names.function_name(f)) || re.is_match(names.function_file(f))
            })
            .collect()
    }
}

/// `key=value`, as parsed.
impl fmt::Display for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.kind.key(), self.pattern)
    }
}

/// The one frame a collapsed object's run becomes, per function: the
/// function named after the object (its last path component), added to
/// `names` on first use.
fn object_frames(names: &mut Names, matches: &[bool]) -> Result<Vec<Option<FunctionId>>, Error> {
    let mut by_object: FxHashMap<u32, FunctionId> = FxHashMap::default();
    let mut out = vec![None; matches.len()];
    for (i, &m) in matches.iter().enumerate() {
        if !m {
            continue;
        }
        let key = names.key(FunctionId(i as u32));
        let g = match by_object.get(&key.object.0) {
            Some(&g) => g,
            None => {
                let path = names.function_object(FunctionId(i as u32)).to_vec();
                let base = path.rsplit(|&b| b == b'/').next().unwrap_or(&path).to_vec();
                let name = names.symbol(if base.is_empty() { &path } else { &base });
                let g = names
                    .try_function(FunctionKey {
                        object: key.object,
                        file: FileId::NONE,
                        name,
                    })
                    .ok_or(Error::TooManyNames)?;
                by_object.insert(key.object.0, g);
                g
            }
        };
        out[i] = Some(g);
    }
    Ok(out)
}

/// Applies `list`, in order, to recorded stacks whose functions are in
/// `names` (collapse-object adds its functions there).
pub fn apply_stacks(
    names: &mut Names,
    stacks: &Stacks<u64>,
    list: &[Transform],
) -> Result<Stacks<u64>, Error> {
    let mut current = stacks.clone();
    for t in list {
        current = stacks_pass(names, &current, t)?;
    }
    Ok(current)
}

/// The timed samples of `stacks` in `t`'s range, each added to a new
/// profile of stacks with its own costs.
fn range_pass(stacks: &Stacks<u64>, t: &Transform) -> Result<Stacks<u64>, Error> {
    let timeline = stacks.timeline.as_ref().ok_or_else(|| Error::Pattern {
        pattern: t.to_string(),
        message: "the profile's samples have no times (only a recording with times, \
                  from `tally record`, perf.data or `perf script`, has a timeline)"
            .into(),
    })?;
    let first = timeline.origin();
    let (from, to) = (
        first.saturating_add(t.range.0),
        first.saturating_add(t.range.1),
    );
    let (lo, hi) = (
        timeline.times.partition_point(|&x| x < from),
        timeline.times.partition_point(|&x| x < to),
    );
    let mut out = Stacks::<u64>::default();
    let mut map: Vec<Option<u32>> = vec![None; stacks.samples.len()];
    let mut kept = tally_model::Timeline::new(timeline.events);
    kept.threads = timeline.threads.clone();
    kept.start = Some(first);
    for i in lo..hi {
        let s = timeline.stack[i] as usize;
        let costs = timeline.costs_of(i);
        let at = match map[s] {
            Some(at) => {
                let sample = &mut out.samples[at as usize];
                for (a, &b) in sample.costs.iter_mut().zip(costs) {
                    *a = a.checked_add(b).ok_or(Error::StacksOverflow)?;
                }
                at
            }
            None => {
                let ids: Vec<FrameId> = stacks.samples[s]
                    .frames
                    .iter()
                    .map(|id| out.frame(stacks.frames[id.index()]))
                    .collect();
                let labels = out.label_set(stacks.labels_of(s).to_vec());
                let at = out
                    .add_labelled_at(&ids, labels, costs)
                    .ok_or(Error::StacksOverflow)? as u32;
                map[s] = Some(at);
                at
            }
        };
        kept.push(timeline.times[i], timeline.thread[i], at, costs);
    }
    out.timeline = Some(Box::new(kept));
    Ok(out)
}

fn stacks_pass(
    names: &mut Names,
    stacks: &Stacks<u64>,
    t: &Transform,
) -> Result<Stacks<u64>, Error> {
    if t.kind == Kind::Range {
        return range_pass(stacks, t);
    }
    let matches = t.matches(names);
    let objects = if t.kind == Kind::CollapseObject {
        object_frames(names, &matches)?
    } else {
        Vec::new()
    };
    let hit = |f: FunctionId| matches.get(f.index()).copied().unwrap_or(false);
    let mut out = Stacks::<u64>::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut at: FxHashMap<FunctionId, usize> = FxHashMap::default();
    // Where each stack went, for its timed samples.
    let mut moved: Vec<Option<u32>> = vec![None; stacks.samples.len()];
    for (i, s) in stacks.samples.iter().enumerate() {
        frames.clear();
        let all = s.frames.iter().map(|id| stacks.frames[id.index()]);
        match t.kind {
            Kind::Focus | Kind::Ignore => {
                let any = all.clone().any(|f| hit(f.function));
                if any == (t.kind == Kind::Ignore) {
                    continue;
                }
                frames.extend(all);
            }
            Kind::Hide => frames.extend(all.filter(|f| !hit(f.function))),
            Kind::Show => frames.extend(all.filter(|f| hit(f.function))),
            Kind::FocusSubtree => frames.extend(all.skip_while(|f| !hit(f.function))),
            Kind::CollapseRecursion => {
                at.clear();
                for f in all {
                    if let Some(&j) = at.get(&f.function).filter(|_| hit(f.function)) {
                        for g in frames.drain(j..) {
                            at.remove(&g.function);
                        }
                    }
                    at.insert(f.function, frames.len());
                    frames.push(f);
                }
            }
            Kind::CollapseObject => {
                for f in all {
                    match objects.get(f.function.index()).copied().flatten() {
                        Some(g) if frames.last().is_some_and(|l| l.function == g) => {}
                        Some(g) => frames.push(Frame {
                            function: g,
                            line: 0,
                            address: 0,
                        }),
                        None => frames.push(f),
                    }
                }
            }
            // Cut by `range_pass`; the frames stay as they are.
            Kind::Range => frames.extend(all),
        }
        if frames.is_empty() {
            continue;
        }
        let ids: Vec<FrameId> = frames.iter().map(|&f| out.frame(f)).collect();
        let labels = out.label_set(stacks.labels_of(i).to_vec());
        let to = out
            .add_labelled_at(&ids, labels, &s.costs)
            .ok_or(Error::StacksOverflow)?;
        moved[i] = Some(to as u32);
    }
    if let Some(timeline) = &stacks.timeline {
        let mut kept = tally_model::Timeline::new(timeline.events);
        kept.threads = timeline.threads.clone();
        kept.start = Some(timeline.origin());
        for i in 0..timeline.len() {
            if let Some(to) = moved[timeline.stack[i] as usize] {
                kept.push(
                    timeline.times[i],
                    timeline.thread[i],
                    to,
                    timeline.costs_of(i),
                );
            }
        }
        out.timeline = Some(Box::new(kept));
    }
    Ok(out)
}

/// Applies `list`, in order, to stacks estimated from call arcs, whose
/// functions are in `names` (collapse-object adds its functions there).
/// The result holds only nodes on the way to a stack that ends.
pub fn apply_tree(
    names: &mut Names,
    tree: &StackTree,
    list: &[Transform],
) -> Result<StackTree, Error> {
    let mut current = tree.clone();
    for t in list {
        current = tree_pass(names, &current, t)?;
    }
    compact(&current)
}

/// A node whose stacks are dropped.
const DROPPED: u32 = u32::MAX;

fn tree_pass(names: &mut Names, tree: &StackTree, t: &Transform) -> Result<StackTree, Error> {
    if t.kind == Kind::Range {
        return Err(Error::Pattern {
            pattern: t.to_string(),
            message: "the profile has no sample times: its stacks are estimated from call arcs"
                .into(),
        });
    }
    let matches = t.matches(names);
    let objects = if t.kind == Kind::CollapseObject {
        object_frames(names, &matches)?
    } else {
        Vec::new()
    };
    let hit = |f: FunctionId| matches.get(f.index()).copied().unwrap_or(false);
    let mut out = StackTree::new(tree.events, names.function_count());
    // Where each node's stacks go in `out`, and whether they pass the
    // sample filters.
    let mut map = vec![0u32; tree.nodes.len()];
    let mut pass = vec![t.kind != Kind::Focus; tree.nodes.len()];
    for (n, &(parent, f)) in tree.nodes.iter().enumerate().skip(1) {
        let up = map[parent as usize];
        if up == DROPPED {
            map[n] = DROPPED;
            continue;
        }
        let m = hit(f);
        map[n] = match t.kind {
            Kind::Focus | Kind::Ignore => {
                pass[n] = if m {
                    t.kind == Kind::Focus
                } else {
                    pass[parent as usize]
                };
                out.child_of(up, f)
            }
            Kind::Hide if m => up,
            Kind::Show if !m => up,
            Kind::Hide | Kind::Show => out.child_of(up, f),
            Kind::FocusSubtree => {
                let rooted = parent != 0 && pass[parent as usize];
                pass[n] = rooted || m;
                match (rooted, m) {
                    (true, _) => out.child_of(up, f),
                    (false, true) => out.child_of(0, f),
                    (false, false) => 0,
                }
            }
            Kind::CollapseRecursion => {
                let mut a = if m { up } else { 0 };
                while a != 0 && out.nodes[a as usize].1 != f {
                    a = out.nodes[a as usize].0;
                }
                if a != 0 { a } else { out.child_of(up, f) }
            }
            Kind::CollapseObject => match objects.get(f.index()).copied().flatten() {
                Some(g) if up != 0 && out.nodes[up as usize].1 == g => up,
                Some(g) => out.child_of(up, g),
                None => out.child_of(up, f),
            },
            // Refused above; the node stays as it is.
            Kind::Range => out.child_of(up, f),
        };
    }
    for &end in &tree.ends {
        let (m, e) = (map[end as usize], end as usize);
        let kept = match t.kind {
            Kind::Focus | Kind::Ignore | Kind::FocusSubtree => pass[e],
            _ => true,
        };
        if kept && m != DROPPED && m != 0 {
            out.add_at(m, tree.cost(end))?;
        }
    }
    Ok(out)
}

/// The tree without the nodes that lead to no stack's end.
fn compact(tree: &StackTree) -> Result<StackTree, Error> {
    let mut used = vec![false; tree.nodes.len()];
    used[0] = true;
    for &end in &tree.ends {
        let mut at = end as usize;
        while !used[at] {
            used[at] = true;
            at = tree.nodes[at].0 as usize;
        }
    }
    let mut out = StackTree::new(tree.events, tree.functions);
    let mut map = vec![0u32; tree.nodes.len()];
    for (n, &(parent, f)) in tree.nodes.iter().enumerate().skip(1) {
        if used[n] {
            map[n] = out.child_of(map[parent as usize], f);
        }
    }
    for &end in &tree.ends {
        out.add_at(map[end as usize], tree.cost(end))?;
    }
    Ok(out)
}

/// A function-level tree of recorded stacks (lines and addresses dropped,
/// labels merged): the shape call trees and flame graphs draw, shared with
/// estimated stacks.
pub fn tree_of_stacks(
    stacks: &Stacks<u64>,
    events: usize,
    functions: usize,
) -> Result<StackTree, Error> {
    let mut out = StackTree::new(events, functions);
    for s in &stacks.samples {
        let mut at = 0;
        for id in &s.frames {
            at = out.child_of(at, stacks.frames[id.index()].function);
        }
        if at != 0 {
            out.add_at(at, &s.costs)?;
        }
    }
    Ok(out)
}
