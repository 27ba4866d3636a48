//! Strongly connected components (Tarjan), iteratively, so that call chains
//! thousands of functions deep cannot overflow the stack.

/// A directed graph in compressed sparse row form: the successors of node
/// `n` are `targets[offsets[n]..offsets[n + 1]]`.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Graph {
    /// Builds the graph of `nodes` nodes from `(from, to)` edges, which may
    /// come in any order and repeat.
    pub fn from_edges(nodes: usize, edges: impl IntoIterator<Item = (u32, u32)>) -> Graph {
        let edges: Vec<(u32, u32)> = edges.into_iter().collect();
        let mut offsets = vec![0u32; nodes + 1];
        for &(a, _) in &edges {
            offsets[a as usize + 1] += 1;
        }
        for i in 0..nodes {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; edges.len()];
        for &(a, b) in &edges {
            targets[fill[a as usize] as usize] = b;
            fill[a as usize] += 1;
        }
        Graph { offsets, targets }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    /// True for a graph without nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Successors of `n`.
    pub fn successors(&self, n: u32) -> &[u32] {
        let n = n as usize;
        &self.targets[self.offsets[n] as usize..self.offsets[n + 1] as usize]
    }
}

/// The components of a graph: `component[n]` numbers the component of node
/// `n`. Components are numbered in reverse topological order (a component's
/// successors have smaller numbers), as Tarjan's algorithm finds them.
#[derive(Clone, Debug)]
pub struct Components {
    /// Component of every node.
    pub component: Vec<u32>,
    /// Number of nodes in every component.
    pub sizes: Vec<u32>,
}

const UNSEEN: u32 = u32::MAX;

/// Tarjan's algorithm with an explicit stack of (node, next successor).
pub fn strongly_connected(g: &Graph) -> Components {
    let n = g.len();
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut component = vec![UNSEEN; n];
    let mut sizes = Vec::new();
    let mut next_index = 0u32;
    let mut work: Vec<(u32, u32)> = Vec::new();

    for root in 0..n as u32 {
        if index[root as usize] != UNSEEN {
            continue;
        }
        work.push((root, 0));
        while let Some(&mut (v, ref mut pos)) = work.last_mut() {
            let vi = v as usize;
            if *pos == 0 && index[vi] == UNSEEN {
                index[vi] = next_index;
                low[vi] = next_index;
                next_index += 1;
                stack.push(v);
                on_stack[vi] = true;
            }
            let succ = g.successors(v);
            if let Some(&w) = succ.get(*pos as usize) {
                *pos += 1;
                let wi = w as usize;
                if index[wi] == UNSEEN {
                    work.push((w, 0));
                } else if on_stack[wi] {
                    low[vi] = low[vi].min(index[wi]);
                }
                continue;
            }
            // All successors done: close v.
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                let p = parent as usize;
                low[p] = low[p].min(low[vi]);
            }
            if low[vi] == index[vi] {
                let c = sizes.len() as u32;
                let mut size = 0;
                loop {
                    let w = stack.pop().expect("v is on the stack");
                    on_stack[w as usize] = false;
                    component[w as usize] = c;
                    size += 1;
                    if w == v {
                        break;
                    }
                }
                sizes.push(size);
            }
        }
    }
    Components { component, sizes }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comps(n: usize, e: &[(u32, u32)]) -> Vec<u32> {
        strongly_connected(&Graph::from_edges(n, e.iter().copied())).component
    }

    #[test]
    fn cycle_and_tail() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3
        let c = comps(4, &[(0, 1), (1, 2), (2, 0), (2, 3)]);
        assert_eq!(c[0], c[1]);
        assert_eq!(c[1], c[2]);
        assert_ne!(c[2], c[3]);
        // reverse topological: the tail is found first
        assert!(c[3] < c[0]);
    }

    #[test]
    fn self_loop_is_its_own_component() {
        let c = comps(2, &[(0, 0), (0, 1)]);
        assert_ne!(c[0], c[1]);
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let n = 1_000_000u32;
        let edges: Vec<_> = (0..n - 1).map(|i| (i, i + 1)).chain([(n - 1, 0)]).collect();
        let g = Graph::from_edges(n as usize, edges);
        let c = strongly_connected(&g);
        assert_eq!(c.sizes, vec![n]);
    }
}
