//! Flame graphs (`tally flame`): stacks merged into a tree and drawn as an
//! interactive SVG with the conventions of flamegraph.pl and inferno.
//!
//! - Stacks with the same frames from the root merge; children are sorted
//!   by name, so the x axis is alphabetical, not time. The root frame `all`
//!   spans the whole width; a frame's width is its inclusive cost.
//! - Bottom-up (roots at the bottom), or top-down with `icicle`.
//! - Frames narrower than `min_width` pixels are left out with everything
//!   above them (flamegraph.pl's `--minwidth`, 0.1 by default).
//! - Colours: the "hot" palette, the shade chosen by a hash of the name, so
//!   a function has the same colour in every graph.
//! - Differential graphs ([`diff`]) take the shape of the second profile
//!   (B); a frame is red where its inclusive cost grew against the first
//!   (A) by more than the noise threshold (a share of A's total), blue
//!   where it shrank, grey within the noise, the shade scaled by the
//!   largest change. Stacks only in A have no width in B: the heaviest are
//!   listed under the graph.
//!
//! The SVG is one file: its script (`flame.js`) is embedded, so hovering
//! shows a frame's name, cost and share, a click zooms into it, "Search"
//! (or Ctrl-F) highlights frames matching a regular expression and says
//! how many matched, and "Reset Zoom" goes back. The URL parameter `s`
//! searches on load (`graph.svg?s=regex`).

pub mod diff;
mod svg;

use rustc_hash::FxHashMap;
use tally_analysis::StackTree;
use tally_model::{EventValue, Profile, Stacks};

pub use svg::write_svg;

/// The noise threshold of differential graphs, a share of A's total
/// (0.1 %, the comparison view's default).
pub const DEFAULT_NOISE: f64 = 0.001;

/// One frame of the merged tree.
#[derive(Clone, Debug)]
pub struct Node {
    /// Index into [`Tree::names`].
    pub name: u32,
    /// Inclusive cost (B's for a differential graph).
    pub value: u64,
    /// A's inclusive cost along the same path (differential graphs).
    pub base: u64,
    /// Child nodes, sorted by name once the tree is finished.
    pub children: Vec<u32>,
}

/// Stacks merged by frame names from the root; node 0 is `all`.
#[derive(Clone, Debug)]
pub struct Tree {
    /// Display names, by id.
    pub names: Vec<String>,
    /// The nodes; 0 is the root.
    pub nodes: Vec<Node>,
    /// Whether A's costs were added ([`Tree::add_base`]).
    pub differential: bool,
    /// Differential graphs: changes of inclusive cost up to this share of
    /// A's total are drawn grey.
    pub noise: f64,
    /// Differential graphs: stacks only in A (names joined by `;`) and
    /// their cost, listed under the graph.
    pub only_in_a: Vec<(String, u64)>,
    name_index: FxHashMap<String, u32>,
    child_index: FxHashMap<(u32, u32), u32>,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

impl Tree {
    /// A tree holding only the root `all`.
    pub fn new() -> Tree {
        let mut t = Tree {
            names: Vec::new(),
            nodes: Vec::new(),
            differential: false,
            noise: DEFAULT_NOISE,
            only_in_a: Vec::new(),
            name_index: FxHashMap::default(),
            child_index: FxHashMap::default(),
        };
        let all = t.name("all");
        t.nodes.push(Node {
            name: all,
            value: 0,
            base: 0,
            children: Vec::new(),
        });
        t
    }

    /// The id of a display name.
    pub fn name(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.name_index.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.to_owned());
        self.name_index.insert(s.to_owned(), i);
        i
    }

    /// Adds `value` along the stack `names` (root first).
    pub fn add(&mut self, names: &[u32], value: u64) {
        if value == 0 {
            return;
        }
        let mut at = 0u32;
        self.nodes[0].value = self.nodes[0].value.saturating_add(value);
        for &n in names {
            at = self.child(at, n);
            let node = &mut self.nodes[at as usize];
            node.value = node.value.saturating_add(value);
        }
    }

    /// The child of `at` named `name`, added if new.
    fn child(&mut self, at: u32, name: u32) -> u32 {
        // One probe whether the child is new or not.
        let next = self.nodes.len() as u32;
        let c = *self.child_index.entry((at, name)).or_insert(next);
        if c == next {
            self.nodes.push(Node {
                name,
                value: 0,
                base: 0,
                children: Vec::new(),
            });
            self.nodes[at as usize].children.push(c);
        }
        c
    }

    /// Adds A's `value` along the part of the stack `names` that B has, for
    /// a differential graph.
    pub fn add_base(&mut self, names: &[u32], value: u64) {
        self.differential = true;
        let mut at = 0u32;
        self.nodes[0].base = self.nodes[0].base.saturating_add(value);
        for &n in names {
            match self.child_index.get(&(at, n)) {
                Some(&c) => at = c,
                None => return,
            }
            let node = &mut self.nodes[at as usize];
            node.base = node.base.saturating_add(value);
        }
    }

    /// Sorts every node's children by name (flamegraph.pl's order).
    pub fn finish(&mut self) {
        // Names are distinct, so ranking them once lets the children be
        // sorted by a number instead of comparing strings node by node.
        let names = &self.names;
        let mut order: Vec<u32> = (0..names.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut rank = vec![0u32; names.len()];
        for (r, &n) in order.iter().enumerate() {
            rank[n as usize] = r as u32;
        }
        let keys: Vec<u32> = self.nodes.iter().map(|n| rank[n.name as usize]).collect();
        for node in &mut self.nodes {
            node.children.sort_unstable_by_key(|&c| keys[c as usize]);
        }
    }

    /// The self cost of node `i` in B and in A.
    pub fn self_costs(&self, i: usize) -> (u64, u64) {
        let n = &self.nodes[i];
        let (mut v, mut b) = (n.value, n.base);
        for &c in &n.children {
            let c = &self.nodes[c as usize];
            v = v.saturating_sub(c.value);
            b = b.saturating_sub(c.base);
        }
        (v, b)
    }

    /// Adds every stack of `stacks` (its names from `profile`) in the event
    /// `event`, to B or, with `base`, to A. Negative values of a derived
    /// event count 0. With `strip_contexts`, a name ends at its first `'`
    /// (Callgrind's caller contexts and recursion levels).
    pub fn add_stacks(
        &mut self,
        profile: &Profile<u64>,
        stacks: &Stacks<u64>,
        event: &EventValue,
        strip_contexts: bool,
        base: bool,
    ) {
        let mut frame_names: Vec<Option<u32>> = vec![None; stacks.frames.len()];
        let mut path = Vec::new();
        for s in &stacks.samples {
            let v = event.of(&s.costs);
            if v <= 0 {
                continue;
            }
            let v = u64::try_from(v).unwrap_or(u64::MAX);
            path.clear();
            for f in &s.frames {
                let id = match frame_names[f.index()] {
                    Some(id) => id,
                    None => {
                        let raw = profile
                            .names
                            .function_name(stacks.frames[f.index()].function);
                        let raw = if strip_contexts {
                            raw.split(|&b| b == b'\'').next().unwrap_or(raw)
                        } else {
                            raw
                        };
                        let id = self.name(&String::from_utf8_lossy(raw));
                        frame_names[f.index()] = Some(id);
                        id
                    }
                };
                path.push(id);
            }
            if base {
                self.add_base(&path, v);
            } else {
                self.add(&path, v);
            }
        }
    }

    /// Adds the stacks of an estimate ([`StackTree`], its names from
    /// `profile`) as [`Tree::add_stacks`] adds a list of them, with the same
    /// result: each estimated node is mapped to the node of its name under
    /// its parent's, and its inclusive value (the stacks ending in its
    /// subtree, each clipped at 0 as there) added once.
    pub fn add_stack_tree(
        &mut self,
        profile: &Profile<u64>,
        stacks: &StackTree,
        event: &EventValue,
        strip_contexts: bool,
        base: bool,
    ) {
        let n = stacks.nodes.len();
        // Inclusive values: a parent comes before its children, so one pass
        // from the end sums every subtree.
        let mut value = vec![0u64; n];
        for &end in &stacks.ends {
            let v = event.of(stacks.cost(end));
            if v > 0 {
                value[end as usize] = u64::try_from(v).unwrap_or(u64::MAX);
            }
        }
        for i in (1..n).rev() {
            let parent = stacks.nodes[i].0 as usize;
            value[parent] = value[parent].saturating_add(value[i]);
        }
        if base {
            if value[0] > 0 {
                self.differential = true;
            }
            self.nodes[0].base = self.nodes[0].base.saturating_add(value[0]);
        } else {
            self.nodes[0].value = self.nodes[0].value.saturating_add(value[0]);
        }
        let mut name_of: Vec<Option<u32>> = vec![None; stacks.functions];
        // The tree node of each estimated node; `u32::MAX`: not drawn.
        let mut at = vec![u32::MAX; n];
        at[0] = 0;
        for i in 1..n {
            let (parent, function) = stacks.nodes[i];
            let from = at[parent as usize];
            if value[i] == 0 || from == u32::MAX {
                continue;
            }
            let name = match name_of.get(function.index()).copied().flatten() {
                Some(id) => id,
                None => {
                    let raw = profile.names.function_name(function);
                    let raw = if strip_contexts {
                        raw.split(|&b| b == b'\'').next().unwrap_or(raw)
                    } else {
                        raw
                    };
                    let id = self.name(&String::from_utf8_lossy(raw));
                    if let Some(slot) = name_of.get_mut(function.index()) {
                        *slot = Some(id);
                    }
                    id
                }
            };
            let to = if base {
                match self.child_index.get(&(from, name)) {
                    Some(&c) => c,
                    None => continue,
                }
            } else {
                self.child(from, name)
            };
            at[i] = to;
            let node = &mut self.nodes[to as usize];
            if base {
                node.base = node.base.saturating_add(value[i]);
            } else {
                node.value = node.value.saturating_add(value[i]);
            }
        }
    }
}

/// Folded stacks read straight into a tree, with no profile built (see
/// [`tally_formats::folded::for_each_stack`]): the tree
/// [`Tree::add_stacks`] makes of the same file read as a profile, as
/// `tally flame` of one folded file needs nothing else. Folded files are
/// usually sorted (stackcollapse sorts them), so a line shares its first
/// frames with the line before: those are found by comparing bytes, and
/// only the frames after them are looked up by name.
pub fn read_folded(input: tally_formats::Input) -> Result<Tree, tally_formats::Error> {
    let mut tree = Tree::new();
    // The previous stack, where each of its frames ends in it, and the
    // node of each.
    let mut prev: Vec<u8> = Vec::new();
    let mut ends: Vec<usize> = Vec::new();
    let mut path: Vec<u32> = Vec::new();
    let mut names: FxHashMap<Box<[u8]>, u32> = FxHashMap::default();
    tally_formats::folded::for_each_stack(input, |stack, count| {
        if count == 0 {
            return Ok(());
        }
        tree.nodes[0].value = tree.nodes[0]
            .value
            .checked_add(count)
            .ok_or("the counts sum to more than 64 bits hold")?;
        let (mut kept, mut start) = (0, 0);
        while let Some(&end) = ends.get(kept) {
            let same = stack.len() >= end
                && stack[start..end] == prev[start..end]
                && stack.get(end).is_none_or(|&c| c == b';');
            if !same {
                break;
            }
            start = end + 1;
            kept += 1;
        }
        ends.truncate(kept);
        path.truncate(kept);
        let mut at = path.last().copied().unwrap_or(0);
        if start < stack.len() {
            for name in stack[start..].split(|&c| c == b';') {
                let id = match names.get(name) {
                    Some(&id) => id,
                    None => {
                        let id = tree.name(&String::from_utf8_lossy(
                            &tally_formats::folded::frame_name(name),
                        ));
                        names.insert(name.into(), id);
                        id
                    }
                };
                at = tree.child(at, id);
                path.push(at);
                start += name.len();
                ends.push(start);
                start += 1;
            }
        }
        prev.clear();
        prev.extend_from_slice(stack);
        // No node's value exceeds the root's, which did not overflow.
        for &n in &path {
            tree.nodes[n as usize].value += count;
        }
        Ok(())
    })?;
    Ok(tree)
}

/// How the SVG looks.
#[derive(Clone, Debug)]
pub struct FlameOptions {
    /// The title line.
    pub title: String,
    /// A second line under the title, if any.
    pub subtitle: Option<String>,
    /// A legend line at the bottom left (what the colours or the stacks
    /// mean), if any.
    pub legend: Option<String>,
    /// The event's short name, shown with costs.
    pub event: String,
    /// Image width in pixels.
    pub width: u32,
    /// Frames narrower than this many pixels are left out.
    pub min_width: f64,
    /// Top-down (an icicle graph) instead of bottom-up.
    pub icicle: bool,
}

impl Default for FlameOptions {
    fn default() -> Self {
        FlameOptions {
            title: "Flame Graph".into(),
            subtitle: None,
            legend: None,
            event: "samples".into(),
            width: 1200,
            min_width: 0.1,
            icicle: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tally_formats::{Input, folded};
    use tally_model::EventColumns;

    fn svg(tree: &Tree) -> Vec<u8> {
        let options = FlameOptions {
            min_width: 0.0,
            ..FlameOptions::default()
        };
        let mut out = Vec::new();
        write_svg(tree, &options, &mut out).unwrap();
        out
    }

    /// The tree of `text` read as a profile, as `tally flame` draws it.
    fn through_profile(text: &[u8]) -> Tree {
        let p = folded::read(Path::new("t.folded"), text).unwrap();
        let columns = EventColumns::new(&p.events);
        let event = columns.column(columns.find(folded::EVENT).unwrap());
        let mut tree = Tree::new();
        tree.add_stacks(&p, p.stacks.as_ref().unwrap(), event.unwrap(), false, false);
        tree.finish();
        tree
    }

    fn straight(text: &[u8]) -> Tree {
        let mut tree = read_folded(Input::from_bytes("t.folded", text.to_vec()).unwrap()).unwrap();
        tree.finish();
        tree
    }

    /// Folded stacks of real programs (the stacks estimated from Callgrind
    /// fixtures, as `tally convert --to folded` writes them: sorted), the
    /// same lines in reverse (few shared beginnings) and lines whose
    /// frames are prefixes of each other's: the same SVG either way.
    #[test]
    fn folded_read_straight_draws_as_through_the_profile() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/callgrind");
        let mut texts = Vec::new();
        for fixture in ["workload.combo.out", "mutual.callers2.out"] {
            let input = Input::open(&dir.join(fixture)).unwrap();
            let (p, _) = tally_formats::callgrind::read::<u64>(input).unwrap();
            let stacks = tally_analysis::estimate_stacks(&p).unwrap();
            let mut text = Vec::new();
            folded::write(&p.names, &stacks, 0, &mut text).unwrap();
            assert!(text.split(|&c| c == b'\n').count() > 20, "{fixture}");
            let mut reversed: Vec<&[u8]> = text.split(|&c| c == b'\n').collect();
            reversed.reverse();
            let reversed = reversed.join(&b'\n');
            texts.push(text);
            texts.push(reversed);
        }
        texts.push(
            b"a;bc 1\na;b 2\na;b;c 3\nab;c 4\na;b;c 5\na;b 0\nz 0\na;b\xff;c 1\na;b\xfe;c 2\nall;x 3\r\n\n".to_vec(),
        );
        for text in &texts {
            let (direct, model) = (straight(text), through_profile(text));
            assert_eq!(direct.nodes[0].value, model.nodes[0].value);
            assert_eq!(direct.nodes.len(), model.nodes.len());
            assert!(svg(&direct) == svg(&model));
        }
    }

    #[test]
    fn folded_counts_that_overflow_are_an_error_with_the_line() {
        let e = read_folded(
            Input::from_bytes("t.folded", b"a 18446744073709551615\nb 1\n".to_vec()).unwrap(),
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "t.folded:2: the counts sum to more than 64 bits hold"
        );
    }
}
