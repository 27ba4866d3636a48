//! Two profiles' stacks merged into one tree, matched by the path of
//! function keys (name, file and object) from the root: the comparison's
//! call trees (top-down and inverted, each node with A's and B's costs)
//! and its differential flame graph come from it.
//!
//! The flame graph takes B's widths: every width is then a cost the
//! program has now, and a frame's children never overflow it (with the
//! larger of A and B per frame, a cost that moved between two siblings
//! would make them wider than their parent). Frames are coloured by the
//! change of their inclusive cost as a share of A's total: red grew, blue
//! shrank, grey within the noise threshold. Stacks only in A have no
//! width in B: they are listed under the graph, heaviest first.

use rustc_hash::FxHashMap;
use tally_analysis::StackTree;
use tally_model::{EventValue, FunctionId, Profile, Stacks};

use super::Tree;

/// How many stacks only in A the flame graph lists.
pub const ONLY_IN_A_LISTED: usize = 12;

/// One profile's stacks, recorded or estimated from its call arcs.
#[derive(Clone, Copy, Debug)]
pub enum SideStacks<'a> {
    /// Recorded samples.
    Recorded(&'a Stacks<u64>),
    /// Stacks estimated from call arcs.
    Estimated(&'a StackTree),
}

/// One side of the comparison: a profile, its stacks and the event
/// measured (negative values of a derived event count 0).
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    /// The profile the stacks' functions belong to.
    pub profile: &'a Profile<u64>,
    /// Its stacks.
    pub stacks: SideStacks<'a>,
    /// The event.
    pub event: &'a EventValue,
}

/// A function as both profiles name it. Callgrind's caller contexts and
/// recursion levels (`'2`) are cut from the name, so that an estimate's
/// levels of one function are one frame.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// Function name.
    pub name: String,
    /// Source file.
    pub file: String,
    /// Object.
    pub object: String,
}

/// A node of the merged tree: one stack, with each side's costs.
#[derive(Clone, Debug)]
pub struct DiffNode {
    /// Index into [`DiffTree::keys`] (meaningless for the root).
    pub key: u32,
    /// The parent node (the root's is itself).
    pub parent: u32,
    /// Children, in the order first seen.
    pub children: Vec<u32>,
    /// The cost of the stacks through it, in A and in B.
    pub total: [u64; 2],
    /// The cost of the stacks ending at it, in A and in B.
    pub self_cost: [u64; 2],
}

/// A child of an inverted tree's node ([`DiffTree::inverted_children`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvertedChild {
    /// The caller (or, below the root, the function with self cost).
    pub key: u32,
    /// The costs of the stacks it holds, in A and in B.
    pub total: [u64; 2],
    /// Their cost where the stack ends in it (first level only).
    pub self_cost: [u64; 2],
    /// Whether it has callers of its own.
    pub has_children: bool,
}

/// The stacks of A and B merged by key path; node 0 is the root (the
/// empty stack, whose totals are the profiles').
#[derive(Clone, Debug)]
pub struct DiffTree {
    /// The functions, by id.
    pub keys: Vec<Key>,
    /// The nodes; a parent comes before its children.
    pub nodes: Vec<DiffNode>,
    key_index: FxHashMap<Key, u32>,
    child_index: FxHashMap<(u32, u32), u32>,
}

impl DiffTree {
    /// The merged tree of `a` and `b`.
    pub fn new(a: &Side, b: &Side) -> DiffTree {
        let mut t = DiffTree {
            keys: Vec::new(),
            nodes: vec![DiffNode {
                key: 0,
                parent: 0,
                children: Vec::new(),
                total: [0; 2],
                self_cost: [0; 2],
            }],
            key_index: FxHashMap::default(),
            child_index: FxHashMap::default(),
        };
        for (side, s) in [a, b].into_iter().enumerate() {
            match s.stacks {
                SideStacks::Recorded(st) => t.add_recorded(side, s.profile, st, s.event),
                SideStacks::Estimated(st) => t.add_estimated(side, s.profile, st, s.event),
            }
        }
        t
    }

    fn key(&mut self, profile: &Profile<u64>, f: FunctionId) -> u32 {
        let n = &profile.names;
        let raw = n.function_name(f);
        let raw = raw.split(|&b| b == b'\'').next().unwrap_or(raw);
        let l = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let k = Key {
            name: l(raw),
            file: l(n.function_file(f)),
            object: l(n.function_object(f)),
        };
        if let Some(&i) = self.key_index.get(&k) {
            return i;
        }
        let i = self.keys.len() as u32;
        self.keys.push(k.clone());
        self.key_index.insert(k, i);
        i
    }

    fn child(&mut self, at: u32, key: u32) -> u32 {
        let next = self.nodes.len() as u32;
        let c = *self.child_index.entry((at, key)).or_insert(next);
        if c == next {
            self.nodes.push(DiffNode {
                key,
                parent: at,
                children: Vec::new(),
                total: [0; 2],
                self_cost: [0; 2],
            });
            self.nodes[at as usize].children.push(c);
        }
        c
    }

    fn add_recorded(
        &mut self,
        side: usize,
        profile: &Profile<u64>,
        st: &Stacks<u64>,
        event: &EventValue,
    ) {
        let mut key_of: Vec<Option<u32>> = vec![None; st.frames.len()];
        for s in &st.samples {
            let v = clipped(event.of(&s.costs));
            if v == 0 {
                continue;
            }
            let mut at = 0u32;
            add(&mut self.nodes[0].total[side], v);
            for f in &s.frames {
                let k = match key_of[f.index()] {
                    Some(k) => k,
                    None => {
                        let k = self.key(profile, st.frames[f.index()].function);
                        key_of[f.index()] = Some(k);
                        k
                    }
                };
                at = self.child(at, k);
                add(&mut self.nodes[at as usize].total[side], v);
            }
            add(&mut self.nodes[at as usize].self_cost[side], v);
        }
    }

    fn add_estimated(
        &mut self,
        side: usize,
        profile: &Profile<u64>,
        st: &StackTree,
        event: &EventValue,
    ) {
        let n = st.nodes.len();
        let mut own = vec![0u64; n];
        for &end in &st.ends {
            own[end as usize] = clipped(event.of(st.cost(end)));
        }
        // A parent comes before its children: one pass from the end sums
        // every subtree.
        let mut value = own.clone();
        for i in (1..n).rev() {
            let p = st.nodes[i].0 as usize;
            value[p] = value[p].saturating_add(value[i]);
        }
        let mut key_of: Vec<Option<u32>> = vec![None; st.functions];
        let mut at = vec![u32::MAX; n];
        at[0] = 0;
        add(&mut self.nodes[0].total[side], value[0]);
        add(&mut self.nodes[0].self_cost[side], own[0]);
        for i in 1..n {
            let (parent, function) = st.nodes[i];
            let from = at[parent as usize];
            if value[i] == 0 || from == u32::MAX {
                continue;
            }
            let k = match key_of.get(function.index()).copied().flatten() {
                Some(k) => k,
                None => {
                    let k = self.key(profile, function);
                    if let Some(slot) = key_of.get_mut(function.index()) {
                        *slot = Some(k);
                    }
                    k
                }
            };
            let to = self.child(from, k);
            at[i] = to;
            let node = &mut self.nodes[to as usize];
            add(&mut node.total[side], value[i]);
            add(&mut node.self_cost[side], own[i]);
        }
    }

    /// The key of `node`.
    pub fn key_of(&self, node: u32) -> &Key {
        &self.keys[self.nodes[node as usize].key as usize]
    }

    /// The children of `node`, by decreasing larger total of A and B
    /// (then by name, so the order is stable).
    pub fn children(&self, node: u32) -> Vec<u32> {
        let mut c = self.nodes[node as usize].children.clone();
        let big = |n: u32| {
            let t = self.nodes[n as usize].total;
            t[0].max(t[1])
        };
        c.sort_by(|&x, &y| {
            big(y)
                .cmp(&big(x))
                .then_with(|| self.key_of(x).cmp(self.key_of(y)))
        });
        c
    }

    /// The functions from the root to `node`, root first.
    pub fn path(&self, node: u32) -> Vec<u32> {
        let mut out = Vec::new();
        let mut at = node;
        while at != 0 {
            out.push(self.nodes[at as usize].key);
            at = self.nodes[at as usize].parent;
        }
        out.reverse();
        out
    }

    /// The children of the inverted tree's node at `path` (the function
    /// with self cost first, then its callers up; empty for the root), by
    /// decreasing larger total of A and B: the stacks ending in that
    /// sequence, grouped by the next caller up.
    pub fn inverted_children(&self, path: &[u32]) -> Vec<InvertedChild> {
        let nodes = &self.nodes;
        let ends = (1..nodes.len() as u32).filter(|&n| {
            let s = nodes[n as usize].self_cost;
            s[0] > 0 || s[1] > 0
        });
        let mut members: Vec<(u32, u32)> = match path.first() {
            None => ends.map(|e| (e, e)).collect(),
            Some(&k) => ends
                .filter(|&e| nodes[e as usize].key == k)
                .map(|e| (e, e))
                .collect(),
        };
        for &k in path.iter().skip(1) {
            members.retain_mut(|(at, _)| {
                let p = nodes[*at as usize].parent;
                *at = p;
                p != 0 && nodes[p as usize].key == k
            });
        }
        let mut groups: FxHashMap<u32, usize> = FxHashMap::default();
        let mut out: Vec<InvertedChild> = Vec::new();
        for &(at, end) in &members {
            let next = if path.is_empty() {
                at
            } else {
                match nodes[at as usize].parent {
                    0 => continue,
                    p => p,
                }
            };
            let k = nodes[next as usize].key;
            let i = *groups.entry(k).or_insert_with(|| {
                out.push(InvertedChild {
                    key: k,
                    total: [0; 2],
                    self_cost: [0; 2],
                    has_children: false,
                });
                out.len() - 1
            });
            let own = nodes[end as usize].self_cost;
            let c = &mut out[i];
            for (side, &v) in own.iter().enumerate() {
                add(&mut c.total[side], v);
                if path.is_empty() {
                    add(&mut c.self_cost[side], v);
                }
            }
            c.has_children |= nodes[next as usize].parent != 0;
        }
        out.sort_by(|x, y| {
            y.total[0]
                .max(y.total[1])
                .cmp(&x.total[0].max(x.total[1]))
                .then_with(|| self.keys[x.key as usize].cmp(&self.keys[y.key as usize]))
        });
        out
    }

    /// The heaviest stacks only in A (no cost in B, their caller some),
    /// as `(node, A's cost)`, heaviest first.
    pub fn only_in_a(&self) -> Vec<(u32, u64)> {
        let mut out: Vec<(u32, u64)> = (1..self.nodes.len() as u32)
            .filter(|&n| {
                let node = &self.nodes[n as usize];
                node.total[1] == 0
                    && node.total[0] > 0
                    && (node.parent == 0 || self.nodes[node.parent as usize].total[1] > 0)
            })
            .map(|n| (n, self.nodes[n as usize].total[0]))
            .collect();
        out.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        out
    }

    /// Display names by key: the name, with the file (or object) where
    /// functions of one name differ, so that each frame is one function.
    pub fn display_names(&self) -> Vec<String> {
        let mut count: FxHashMap<&str, usize> = FxHashMap::default();
        for k in &self.keys {
            *count.entry(k.name.as_str()).or_default() += 1;
        }
        self.keys
            .iter()
            .map(|k| {
                if count[k.name.as_str()] > 1 {
                    let at = if k.file.is_empty() {
                        &k.object
                    } else {
                        &k.file
                    };
                    format!("{} ({at})", k.name)
                } else {
                    k.name.clone()
                }
            })
            .collect()
    }

    /// The differential flame graph's tree: B's shape, A's costs on the
    /// same stacks, changes within `noise` (a share of A's total) grey,
    /// the heaviest stacks only in A above the noise listed.
    pub fn flame(&self, noise: f64) -> Tree {
        let names = self.display_names();
        let mut tree = Tree::new();
        tree.differential = true;
        tree.noise = noise;
        tree.nodes[0].value = self.nodes[0].total[1];
        tree.nodes[0].base = self.nodes[0].total[0];
        let mut at = vec![u32::MAX; self.nodes.len()];
        at[0] = 0;
        for (i, n) in self.nodes.iter().enumerate().skip(1) {
            let from = at[n.parent as usize];
            if n.total[1] == 0 || from == u32::MAX {
                continue;
            }
            let name = tree.name(&names[n.key as usize]);
            let to = tree.child(from, name);
            at[i] = to;
            let node = &mut tree.nodes[to as usize];
            node.value = node.value.saturating_add(n.total[1]);
            node.base = node.base.saturating_add(n.total[0]);
        }
        let floor = noise * self.nodes[0].total[0] as f64;
        tree.only_in_a = self
            .only_in_a()
            .into_iter()
            .filter(|&(_, cost)| cost as f64 > floor)
            .take(ONLY_IN_A_LISTED)
            .map(|(n, cost)| {
                let path: Vec<&str> = self
                    .path(n)
                    .iter()
                    .map(|&k| names[k as usize].as_str())
                    .collect();
                (path.join(";"), cost)
            })
            .collect();
        tree.finish();
        tree
    }
}

/// What a differential flame graph's widths and colours mean, for its
/// legend line.
pub fn legend(noise: f64) -> String {
    format!(
        "Widths: B's costs. Colour: change of inclusive cost as a share of A's total; red grew, blue shrank, grey within {}%",
        noise * 100.0
    )
}

fn clipped(v: i128) -> u64 {
    if v <= 0 {
        0
    } else {
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

fn add(a: &mut u64, b: u64) {
    *a = a.saturating_add(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tally_formats::folded;
    use tally_model::EventColumns;

    fn profile(text: &str) -> Profile<u64> {
        folded::read(Path::new("t.folded"), text.as_bytes()).unwrap()
    }

    fn tree(a: &Profile<u64>, b: &Profile<u64>) -> DiffTree {
        let ca = EventColumns::new(&a.events);
        let cb = EventColumns::new(&b.events);
        let ea = ca.column(ca.find(folded::EVENT).unwrap()).unwrap().clone();
        let eb = cb.column(cb.find(folded::EVENT).unwrap()).unwrap().clone();
        DiffTree::new(
            &Side {
                profile: a,
                stacks: SideStacks::Recorded(a.stacks.as_ref().unwrap()),
                event: &ea,
            },
            &Side {
                profile: b,
                stacks: SideStacks::Recorded(b.stacks.as_ref().unwrap()),
                event: &eb,
            },
        )
    }

    fn named(t: &DiffTree, names: &[&str]) -> u32 {
        let mut at = 0;
        for n in names {
            at = *t.nodes[at as usize]
                .children
                .iter()
                .find(|&&c| t.key_of(c).name == *n)
                .unwrap_or_else(|| panic!("{n}"));
        }
        at
    }

    /// A: main;a 10, main;b;c 5, main;gone 3. B: main;a 30, main;b;c 1,
    /// main;new 2. Stacks are matched by path, each side keeps its costs,
    /// the inverted tree sums the stacks ending in a function.
    #[test]
    fn stacks_meet_by_path_with_both_costs() {
        let a = profile("main;a 10\nmain;b;c 5\nmain;gone 3\nother;c 4\n");
        let b = profile("main;a 30\nmain;b;c 1\nmain;new 2\nother;c 4\n");
        let t = tree(&a, &b);
        assert_eq!(t.nodes[0].total, [22, 37]);
        assert_eq!(t.nodes[named(&t, &["main"]) as usize].total, [18, 33]);
        assert_eq!(t.nodes[named(&t, &["main", "a"]) as usize].total, [10, 30]);
        assert_eq!(
            t.nodes[named(&t, &["main", "b", "c"]) as usize].self_cost,
            [5, 1]
        );
        let gone = named(&t, &["main", "gone"]);
        assert_eq!(t.only_in_a(), vec![(gone, 3)]);
        let roots = t.inverted_children(&[]);
        let c = t.key_of(named(&t, &["main", "b", "c"])).clone();
        let ci = roots.iter().find(|r| t.keys[r.key as usize] == c).unwrap();
        assert_eq!(ci.total, [9, 5]);
        let callers = t.inverted_children(&[ci.key]);
        let names: Vec<(&str, [u64; 2])> = callers
            .iter()
            .map(|r| (t.keys[r.key as usize].name.as_str(), r.total))
            .collect();
        assert_eq!(names, [("b", [5, 1]), ("other", [4, 4])]);
        let f = t.flame(0.001);
        assert_eq!((f.nodes[0].value, f.nodes[0].base), (37, 22));
        assert_eq!(f.only_in_a, vec![("main;gone".to_string(), 3)]);
        assert!(f.names.iter().all(|n| n != "gone"));
    }
}
