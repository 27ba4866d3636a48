//! Call trees, as Firefox Profiler, pprof and perf report open on: top-down
//! (from the roots, each node a stack, its total the samples through it)
//! and inverted (bottom-up: functions by self cost, each expanded into the
//! callers of that cost).
//!
//! Both are views of one [`StackTree`] (recorded stacks become one through
//! [`crate::transform::tree_of_stacks`]), so a node's total is exact for
//! recorded stacks: the sum of the stacks through it, each counted once.
//! The inverted tree is built on demand, one level per expansion, so that
//! opening it costs the number of distinct leaves, not the whole inverted
//! tree.

use rustc_hash::FxHashMap;
use tally_model::FunctionId;

use crate::StackTree;

/// A top-down call tree: node 0 is the root (the empty stack, whose total
/// is the profile's).
#[derive(Clone, Debug)]
pub struct CallTree {
    tree: StackTree,
    /// Children of each node, by node id: `child_list[first[n]..first[n+1]]`.
    first: Vec<u32>,
    child_list: Vec<u32>,
    /// Each node's total, `events` values per node.
    total: Vec<u64>,
}

impl CallTree {
    /// The call tree of `tree`.
    pub fn new(tree: StackTree) -> CallTree {
        let (n, ev) = (tree.nodes.len(), tree.events);
        let mut total = tree.costs.clone();
        for i in (1..n).rev() {
            let p = tree.nodes[i].0 as usize;
            for e in 0..ev {
                // Sums of a stack tree's costs fit: its totals did.
                total[p * ev + e] = total[p * ev + e].saturating_add(total[i * ev + e]);
            }
        }
        let mut first = vec![0u32; n + 1];
        for &(p, _) in tree.nodes.iter().skip(1) {
            first[p as usize + 1] += 1;
        }
        for i in 0..n {
            first[i + 1] += first[i];
        }
        let mut fill = first.clone();
        let mut child_list = vec![0u32; n.saturating_sub(1)];
        for (i, &(p, _)) in tree.nodes.iter().enumerate().skip(1) {
            child_list[fill[p as usize] as usize] = i as u32;
            fill[p as usize] += 1;
        }
        CallTree {
            tree,
            first,
            child_list,
            total,
        }
    }

    /// The stack tree it shows.
    pub fn stack_tree(&self) -> &StackTree {
        &self.tree
    }

    /// Costs per node.
    pub fn events(&self) -> usize {
        self.tree.events
    }

    /// Number of nodes, the root included.
    pub fn len(&self) -> usize {
        self.tree.nodes.len()
    }

    /// Whether only the root is there (no stack).
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }

    /// The function of `node` (meaningless for the root).
    pub fn function(&self, node: u32) -> FunctionId {
        self.tree.nodes[node as usize].1
    }

    /// The parent of `node`; `None` for the root.
    pub fn parent(&self, node: u32) -> Option<u32> {
        (node != 0).then(|| self.tree.nodes[node as usize].0)
    }

    /// The costs of the stacks through `node`.
    pub fn total(&self, node: u32) -> &[u64] {
        let ev = self.tree.events;
        &self.total[node as usize * ev..(node as usize + 1) * ev]
    }

    /// The costs of the stacks that end at `node`.
    pub fn self_cost(&self, node: u32) -> &[u64] {
        self.tree.cost(node)
    }

    /// The children of `node`, by decreasing total of `event` (then by
    /// node id, so the order is stable).
    pub fn children(&self, node: u32, event: usize) -> Vec<u32> {
        let (a, b) = (self.first[node as usize], self.first[node as usize + 1]);
        let mut c = self.child_list[a as usize..b as usize].to_vec();
        c.sort_by(|&x, &y| {
            self.total(y)[event]
                .cmp(&self.total(x)[event])
                .then(x.cmp(&y))
        });
        c
    }

    /// The functions on the way from the root to `node`, root first.
    pub fn path(&self, node: u32) -> Vec<FunctionId> {
        let mut out = Vec::new();
        let mut at = node;
        while at != 0 {
            out.push(self.function(at));
            at = self.tree.nodes[at as usize].0;
        }
        out.reverse();
        out
    }
}

/// One node of an inverted tree: a function and the callers above it,
/// leaf first; its stacks are those ending in that sequence.
#[derive(Clone, Debug)]
struct InvNode {
    function: FunctionId,
    parent: u32,
    /// `(node at this level, the node where its stack ends)` in the
    /// top-down tree, for every stack it holds.
    members: Vec<(u32, u32)>,
    total: Vec<u64>,
    self_cost: Vec<u64>,
    children: Option<Vec<u32>>,
}

/// An inverted call tree over a [`CallTree`]: node 0 is the root, its
/// children the functions with self cost; a node's children are the
/// callers of the cost it holds. Expanded on demand ([`Inverted::expand`]).
#[derive(Clone, Debug)]
pub struct Inverted {
    nodes: Vec<InvNode>,
    events: usize,
}

impl Inverted {
    /// The inverted tree of `top`, with its first level.
    pub fn new(top: &CallTree) -> Inverted {
        let ev = top.events();
        let root = InvNode {
            function: FunctionId(0),
            parent: 0,
            members: top.tree.ends.iter().map(|&e| (e, e)).collect(),
            total: top.total(0).to_vec(),
            self_cost: vec![0; ev],
            children: None,
        };
        Inverted {
            nodes: vec![root],
            events: ev,
        }
    }

    /// Number of nodes made so far.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node but the root has been made.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// The function of `node`.
    pub fn function(&self, node: u32) -> FunctionId {
        self.nodes[node as usize].function
    }

    /// The parent of `node`; `None` for the root.
    pub fn parent(&self, node: u32) -> Option<u32> {
        (node != 0).then(|| self.nodes[node as usize].parent)
    }

    /// The costs of the stacks `node` holds.
    pub fn total(&self, node: u32) -> &[u64] {
        &self.nodes[node as usize].total
    }

    /// The costs of the stacks that end in `node`'s function (its self
    /// cost for a first-level node, 0 below).
    pub fn self_cost(&self, node: u32) -> &[u64] {
        &self.nodes[node as usize].self_cost
    }

    /// The children of `node`, made on first call, by decreasing total of
    /// `event`: for the root the functions with self cost, below it the
    /// callers of what `node` holds.
    pub fn expand(&mut self, top: &CallTree, node: u32, event: usize) -> Vec<u32> {
        if self.nodes[node as usize].children.is_none() {
            let made = self.make_children(top, node);
            self.nodes[node as usize].children = Some(made);
        }
        let mut c = self.nodes[node as usize]
            .children
            .clone()
            .unwrap_or_default();
        c.sort_by(|&x, &y| {
            self.total(y)[event]
                .cmp(&self.total(x)[event])
                .then(x.cmp(&y))
        });
        c
    }

    fn make_children(&mut self, top: &CallTree, node: u32) -> Vec<u32> {
        let ev = self.events;
        let mut groups: FxHashMap<FunctionId, usize> = FxHashMap::default();
        let mut made: Vec<InvNode> = Vec::new();
        for &(at, end) in &self.nodes[node as usize].members {
            let (next, f) = if node == 0 {
                (at, top.function(at))
            } else {
                let p = top.tree.nodes[at as usize].0;
                if p == 0 {
                    continue;
                }
                (p, top.function(p))
            };
            let i = *groups.entry(f).or_insert_with(|| {
                made.push(InvNode {
                    function: f,
                    parent: node,
                    members: Vec::new(),
                    total: vec![0; ev],
                    self_cost: vec![0; ev],
                    children: None,
                });
                made.len() - 1
            });
            let n = &mut made[i];
            n.members.push((next, end));
            for (a, &b) in n.total.iter_mut().zip(top.self_cost(end)) {
                *a = a.saturating_add(b);
            }
            if node == 0 {
                for (a, &b) in n.self_cost.iter_mut().zip(top.self_cost(end)) {
                    *a = a.saturating_add(b);
                }
            }
        }
        let base = self.nodes.len() as u32;
        self.nodes.extend(made);
        (base..self.nodes.len() as u32).collect()
    }
}

/// Which tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeKind {
    /// From the roots down.
    TopDown,
    /// From the functions with self cost up through their callers.
    Inverted,
}

/// A row of a call tree listed in depth-first order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRow {
    /// 0 for the first level.
    pub depth: u32,
    /// The node's function.
    pub function: FunctionId,
    /// The costs of the stacks through the node.
    pub total: Vec<u64>,
    /// The costs of the stacks ending there.
    pub self_cost: Vec<u64>,
    /// Children left out by the depth or the minimum share.
    pub hidden_children: u32,
}

/// How much of a tree to list.
#[derive(Clone, Copy, Debug)]
pub struct ListOptions {
    /// The event nodes are ordered and cut by.
    pub event: usize,
    /// Levels to list (1 lists the first level only).
    pub depth: u32,
    /// A node whose total of `event` is below this fraction of the
    /// profile's total is left out, with its subtree.
    pub min_share: f64,
}

/// The tree listed depth first, heaviest child first, as text and JSON
/// reports print it.
pub fn list(top: &CallTree, kind: TreeKind, o: ListOptions) -> Vec<TreeRow> {
    let grand = top.total(0).get(o.event).copied().unwrap_or(0);
    let floor = (grand as f64 * o.min_share).ceil() as u64;
    let keep = |t: &[u64]| t.get(o.event).copied().unwrap_or(0) >= floor.max(1);
    let mut rows = Vec::new();
    match kind {
        TreeKind::TopDown => {
            let mut stack: Vec<(u32, u32)> = top
                .children(0, o.event)
                .into_iter()
                .rev()
                .map(|c| (c, 0))
                .collect();
            while let Some((n, d)) = stack.pop() {
                if !keep(top.total(n)) {
                    continue;
                }
                let children = top.children(n, o.event);
                let shown: Vec<u32> = if d + 1 < o.depth {
                    children
                        .iter()
                        .copied()
                        .filter(|&c| keep(top.total(c)))
                        .collect()
                } else {
                    Vec::new()
                };
                rows.push(TreeRow {
                    depth: d,
                    function: top.function(n),
                    total: top.total(n).to_vec(),
                    self_cost: top.self_cost(n).to_vec(),
                    hidden_children: (children.len() - shown.len()) as u32,
                });
                stack.extend(shown.into_iter().rev().map(|c| (c, d + 1)));
            }
        }
        TreeKind::Inverted => {
            let mut inv = Inverted::new(top);
            let mut stack: Vec<(u32, u32)> = inv
                .expand(top, 0, o.event)
                .into_iter()
                .rev()
                .map(|c| (c, 0))
                .collect();
            while let Some((n, d)) = stack.pop() {
                if !keep(inv.total(n)) {
                    continue;
                }
                let children = inv.expand(top, n, o.event);
                let shown: Vec<u32> = if d + 1 < o.depth {
                    children
                        .iter()
                        .copied()
                        .filter(|&c| keep(inv.total(c)))
                        .collect()
                } else {
                    Vec::new()
                };
                rows.push(TreeRow {
                    depth: d,
                    function: inv.function(n),
                    total: inv.total(n).to_vec(),
                    self_cost: inv.self_cost(n).to_vec(),
                    hidden_children: (children.len() - shown.len()) as u32,
                });
                stack.extend(shown.into_iter().rev().map(|c| (c, d + 1)));
            }
        }
    }
    rows
}

/// A child in an inverted tree, found by [`inverted_children`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvertedChild {
    /// The caller (or, below the root, the function with self cost).
    pub function: FunctionId,
    /// The costs of the stacks it holds.
    pub total: Vec<u64>,
    /// Their cost where the stack ends in it (first level only).
    pub self_cost: Vec<u64>,
    /// Whether it has callers of its own.
    pub has_children: bool,
}

/// The children of the inverted tree's node at `path` (the function with
/// self cost first, then its callers up; empty for the root), by
/// decreasing total of `event`, made without keeping any state: a server
/// asks for one level at a time by path, and each answer costs a pass over
/// the stacks that end in `path[0]`.
pub fn inverted_children(top: &CallTree, path: &[FunctionId], event: usize) -> Vec<InvertedChild> {
    let ev = top.events();
    let nodes = &top.tree.nodes;
    // (node at the path's last level, end node) of the stacks at `path`.
    let mut members: Vec<(u32, u32)> = match path.first() {
        None => top.tree.ends.iter().map(|&e| (e, e)).collect(),
        Some(&f) => top
            .tree
            .ends
            .iter()
            .filter(|&&e| nodes[e as usize].1 == f)
            .map(|&e| (e, e))
            .collect(),
    };
    for &f in path.iter().skip(1) {
        members.retain_mut(|(at, _)| {
            let p = nodes[*at as usize].0;
            *at = p;
            p != 0 && nodes[p as usize].1 == f
        });
    }
    let mut groups: FxHashMap<FunctionId, usize> = FxHashMap::default();
    let mut out: Vec<InvertedChild> = Vec::new();
    for &(at, end) in &members {
        let next = if path.is_empty() {
            at
        } else {
            match nodes[at as usize].0 {
                0 => continue,
                p => p,
            }
        };
        let f = nodes[next as usize].1;
        let i = *groups.entry(f).or_insert_with(|| {
            out.push(InvertedChild {
                function: f,
                total: vec![0; ev],
                self_cost: vec![0; ev],
                has_children: false,
            });
            out.len() - 1
        });
        let c = &mut out[i];
        for (a, &b) in c.total.iter_mut().zip(top.self_cost(end)) {
            *a = a.saturating_add(b);
        }
        if path.is_empty() {
            for (a, &b) in c.self_cost.iter_mut().zip(top.self_cost(end)) {
                *a = a.saturating_add(b);
            }
        }
        c.has_children |= nodes[next as usize].0 != 0;
    }
    out.sort_by(|x, y| {
        y.total[event]
            .cmp(&x.total[event])
            .then(x.function.cmp(&y.function))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tally_model::{Frame, Stacks};

    /// main;a;b 5, main;a 2, main;c;b 3: b's callers are a (5) and c (3).
    fn top() -> CallTree {
        let mut s = Stacks::<u64>::default();
        let f = |s: &mut Stacks<u64>, n| {
            s.frame(Frame {
                function: FunctionId(n),
                line: 0,
                address: 0,
            })
        };
        let (m, a, b, c) = (f(&mut s, 0), f(&mut s, 1), f(&mut s, 2), f(&mut s, 3));
        s.add(&[m, a, b], &[5]).unwrap();
        s.add(&[m, a], &[2]).unwrap();
        s.add(&[m, c, b], &[3]).unwrap();
        CallTree::new(crate::transform::tree_of_stacks(&s, 1, 4).unwrap())
    }

    #[test]
    fn inverted_levels_by_path_match_the_expanded_tree() {
        let top = top();
        let roots = inverted_children(&top, &[], 0);
        let got: Vec<(u32, u64, bool)> = roots
            .iter()
            .map(|c| (c.function.0, c.total[0], c.has_children))
            .collect();
        assert_eq!(got, [(2, 8, true), (1, 2, true)]);
        let callers = inverted_children(&top, &[FunctionId(2)], 0);
        let got: Vec<(u32, u64)> = callers.iter().map(|c| (c.function.0, c.total[0])).collect();
        assert_eq!(got, [(1, 5), (3, 3)]);
        let up = inverted_children(&top, &[FunctionId(2), FunctionId(3)], 0);
        assert_eq!(up.len(), 1);
        assert_eq!(
            (up[0].function, up[0].total[0], up[0].has_children),
            (FunctionId(0), 3, false)
        );
        // The same as the stateful tree, level by level.
        let mut inv = Inverted::new(&top);
        let first = inv.expand(&top, 0, 0);
        let totals: Vec<u64> = first.iter().map(|&n| inv.total(n)[0]).collect();
        assert_eq!(totals, [8, 2]);
        let second = inv.expand(&top, first[0], 0);
        let totals: Vec<u64> = second.iter().map(|&n| inv.total(n)[0]).collect();
        assert_eq!(totals, [5, 3]);
        // Top-down: main 10, a 7 (self 2), c 3.
        assert_eq!(top.total(0), &[10]);
        let kids = top.children(0, 0);
        assert_eq!(kids.len(), 1);
        let under = top.children(kids[0], 0);
        let t: Vec<(u64, u64)> = under
            .iter()
            .map(|&n| (top.total(n)[0], top.self_cost(n)[0]))
            .collect();
        assert_eq!(t, [(7, 2), (3, 0)]);
    }
}
