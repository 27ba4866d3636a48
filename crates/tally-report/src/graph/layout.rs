//! A layered layout that tally computes itself, for the graphs on which
//! Graphviz's `dot` runs past its bound: rows by call depth, an order in
//! each row that shortens edges, and straight edges. Its work is linear
//! in the nodes and edges per sweep, so any pruned graph is drawn in
//! moments; the picture is plainer than `dot`'s (edges may cross boxes),
//! with the same boxes, colours and labels, and the same `<title>`s, so
//! that the web UI's clicks work on it.

use std::fmt::Write as _;

use super::dot::{colour, edge_label, node_label, tooltip};
use super::{Graph, Kept};

/// Horizontal space between boxes of a row, in pixels.
const GAP_X: f64 = 24.0;
/// Vertical space between rows (edges and their labels run there).
const GAP_Y: f64 = 56.0;
/// Height of one text line at the font size used.
const LINE: f64 = 12.0;
/// Width of a character: a little over Arial's average at 10 px, so
/// labels fit their boxes.
const CHAR: f64 = 6.0;
/// Margin around the picture, and the room of the title.
const MARGIN: f64 = 16.0;
const TITLE: f64 = 24.0;
/// Barycentre sweeps (down then up), enough to untangle most call trees.
const SWEEPS: usize = 4;

/// One box placed.
struct Place {
    node: usize,
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    lines: Vec<String>,
}

/// The SVG of the kept part of `g` laid out by tally, with `title` above
/// it (the graph's title and why this layout was used).
pub fn svg(g: &Graph, kept: &Kept, title: &str) -> Vec<u8> {
    let ids: Vec<usize> = (0..g.nodes.len()).filter(|&i| kept.nodes[i]).collect();
    let mut local = vec![usize::MAX; g.nodes.len()];
    for (k, &i) in ids.iter().enumerate() {
        local[i] = k;
    }
    let n = ids.len();
    let edges: Vec<(usize, usize, usize)> = g
        .edges
        .iter()
        .enumerate()
        .filter(|&(k, e)| kept.edges[k] && e.from != e.to)
        .map(|(k, e)| (local[e.from], local[e.to], k))
        .filter(|&(a, b, _)| a != usize::MAX && b != usize::MAX)
        .collect();
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut into: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(a, b, _) in &edges {
        out[a].push(b);
        into[b].push(a);
    }
    let weight = |k: usize| g.node_weight(ids[k]);
    let (order, back) = depth_first(n, &out, &into, weight);
    let layer = layers(n, &order, &out, &back);
    let rows = arrange(n, &layer, &order, &out, &into);

    let mut places: Vec<Option<Place>> = (0..n).map(|_| None).collect();
    let mut y = MARGIN + TITLE;
    let mut width: f64 = 0.0;
    let mut row_boxes = Vec::with_capacity(rows.len());
    for row in &rows {
        let mut boxes = Vec::with_capacity(row.len());
        let mut x = 0.0;
        let mut h: f64 = 0.0;
        for &k in row {
            let lines: Vec<String> = node_label(g, ids[k]).lines().map(str::to_owned).collect();
            let w = lines.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64 * CHAR + 12.0;
            let bh = lines.len() as f64 * LINE + 8.0;
            boxes.push((k, x, w, bh, lines));
            x += w + GAP_X;
            h = h.max(bh);
        }
        width = width.max(x - GAP_X);
        row_boxes.push((boxes, y, x - GAP_X));
        y += h + GAP_Y;
    }
    let height = y - GAP_Y + MARGIN;
    let width = width.max(title.chars().count() as f64 * 7.0) + 2.0 * MARGIN;
    for (boxes, y, row_width) in row_boxes {
        let shift = (width - row_width) / 2.0;
        for (k, x, w, h, lines) in boxes {
            places[k] = Some(Place {
                node: ids[k],
                x: x + shift,
                y,
                w,
                h,
                lines,
            });
        }
    }
    let places: Vec<Place> = places
        .into_iter()
        .map(|p| p.expect("every node is in a row"))
        .collect();
    draw(g, &places, &edges, &local, title, width, height)
}

/// Depth-first order from the callers nobody calls, heaviest first (then
/// from whatever is left, as cycles have no such caller): the order of
/// first visits, and per edge whether it goes back up the search (a
/// call closing a cycle), which the layering turns round.
fn depth_first(
    n: usize,
    out: &[Vec<usize>],
    into: &[Vec<usize>],
    weight: impl Fn(usize) -> f64,
) -> (Vec<usize>, Vec<Vec<bool>>) {
    let mut starts: Vec<usize> = (0..n).collect();
    starts.sort_by(|&a, &b| {
        (into[a].is_empty().cmp(&into[b].is_empty()))
            .reverse()
            .then(weight(b).total_cmp(&weight(a)))
            .then(a.cmp(&b))
    });
    // 0 unseen, 1 on the search's path, 2 done.
    let mut state = vec![0u8; n];
    let mut back: Vec<Vec<bool>> = out.iter().map(|o| vec![false; o.len()]).collect();
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for s in starts {
        if state[s] != 0 {
            continue;
        }
        state[s] = 1;
        order.push(s);
        stack.push((s, 0));
        while let Some(top) = stack.last_mut() {
            let (v, i) = *top;
            if i == out[v].len() {
                state[v] = 2;
                stack.pop();
                continue;
            }
            top.1 += 1;
            let w = out[v][i];
            match state[w] {
                0 => {
                    state[w] = 1;
                    order.push(w);
                    stack.push((w, 0));
                }
                1 => back[v][i] = true,
                _ => {}
            }
        }
    }
    (order, back)
}

/// Each node's row: one below its deepest caller along the edges that
/// do not close a cycle (longest path from the top), found by relaxing
/// the edges in a topological order of that acyclic graph.
fn layers(n: usize, order: &[usize], out: &[Vec<usize>], back: &[Vec<bool>]) -> Vec<usize> {
    let mut indegree = vec![0usize; n];
    for (v, o) in out.iter().enumerate() {
        for (i, &w) in o.iter().enumerate() {
            if !back[v][i] {
                indegree[w] += 1;
            }
        }
    }
    let mut layer = vec![0usize; n];
    // Kahn's order, seeded in the search's order so rows stay stable.
    let mut ready: Vec<usize> = order
        .iter()
        .rev()
        .copied()
        .filter(|&v| indegree[v] == 0)
        .collect();
    while let Some(v) = ready.pop() {
        for (i, &w) in out[v].iter().enumerate() {
            if back[v][i] {
                continue;
            }
            layer[w] = layer[w].max(layer[v] + 1);
            indegree[w] -= 1;
            if indegree[w] == 0 {
                ready.push(w);
            }
        }
    }
    layer
}

/// The rows, each ordered so that a node sits near its callers and
/// callees: first in the search's order, then a few sweeps placing each
/// node at the mean position of its neighbours in the row above (going
/// down) or below (going up).
fn arrange(
    n: usize,
    layer: &[usize],
    order: &[usize],
    out: &[Vec<usize>],
    into: &[Vec<usize>],
) -> Vec<Vec<usize>> {
    let depth = layer.iter().max().map_or(0, |&d| d + 1);
    let mut rows: Vec<Vec<usize>> = vec![Vec::new(); depth];
    for &v in order {
        rows[layer[v]].push(v);
    }
    let mut pos = vec![0.0f64; n];
    let index = |rows: &[Vec<usize>], pos: &mut [f64]| {
        for row in rows {
            for (i, &v) in row.iter().enumerate() {
                pos[v] = i as f64 / row.len().max(1) as f64;
            }
        }
    };
    index(&rows, &mut pos);
    for sweep in 0..SWEEPS {
        let down = sweep % 2 == 0;
        let range: Vec<usize> = if down {
            (1..depth).collect()
        } else {
            (0..depth.saturating_sub(1)).rev().collect()
        };
        for r in range {
            let near = if down { into } else { out };
            let key = |v: usize| {
                let ns = &near[v];
                if ns.is_empty() {
                    pos[v]
                } else {
                    ns.iter().map(|&u| pos[u]).sum::<f64>() / ns.len() as f64
                }
            };
            let mut keyed: Vec<(f64, usize)> = rows[r].iter().map(|&v| (key(v), v)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0));
            rows[r] = keyed.into_iter().map(|(_, v)| v).collect();
            let len = rows[r].len().max(1) as f64;
            for (i, &v) in rows[r].iter().enumerate() {
                pos[v] = i as f64 / len;
            }
        }
    }
    rows
}

/// Text for SVG: `&`, `<`, `>` and quotes escaped, control characters
/// shown as `?`.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            c if c.is_control() => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

/// Writes the picture: title, cycles as dashed frames around their
/// members, edges below the boxes, then the boxes.
fn draw(
    g: &Graph,
    places: &[Place],
    edges: &[(usize, usize, usize)],
    local: &[usize],
    title: &str,
    width: f64,
    height: f64,
) -> Vec<u8> {
    let mut s = String::new();
    let _ = write!(
        s,
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}pt\" height=\"{height:.0}pt\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"Arial\" font-size=\"10\">\n\
         <g class=\"graph\"><title>tally</title>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"14\">{}</text>\n",
        width / 2.0,
        MARGIN + 10.0,
        esc(title)
    );
    for (k, c) in g.cycles.iter().enumerate() {
        let members: Vec<&Place> = c
            .members
            .iter()
            .filter_map(|&m| local.get(m).copied().filter(|&l| l != usize::MAX))
            .map(|l| &places[l])
            .collect();
        if members.is_empty() {
            continue;
        }
        let x0 = members.iter().map(|p| p.x).fold(f64::INFINITY, f64::min) - 6.0;
        let y0 = members.iter().map(|p| p.y).fold(f64::INFINITY, f64::min) - 16.0;
        let x1 = members.iter().map(|p| p.x + p.w).fold(0.0, f64::max) + 6.0;
        let y1 = members.iter().map(|p| p.y + p.h).fold(0.0, f64::max) + 6.0;
        let colour = colour(g.ratio(c.total));
        let _ = writeln!(
            s,
            "<g class=\"cluster\"><title>cluster_cycle{}</title>\
             <rect x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" \
             stroke=\"{colour}\" stroke-dasharray=\"5,2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text></g>",
            k + 1,
            x1 - x0,
            y1 - y0,
            x0 + 4.0,
            y0 + 11.0,
            esc(&super::dot::cycle_label(g, c))
        );
    }
    for &(a, b, k) in edges {
        let e = &g.edges[k];
        let (pa, pb) = (&places[a], &places[b]);
        let w = g.edge_weight(e);
        let colour = colour(w);
        let pen = (w * 4.0).max(0.5);
        // Down from the caller's bottom to the callee's top; a call back
        // up (closing a cycle) from the caller's top.
        let (x1, y1) = if pb.y > pa.y {
            (pa.x + pa.w / 2.0, pa.y + pa.h)
        } else {
            (pa.x + pa.w / 2.0, pa.y)
        };
        let (x2, y2) = if pb.y > pa.y {
            (pb.x + pb.w / 2.0, pb.y)
        } else {
            (pb.x + pb.w / 2.0, pb.y + pb.h)
        };
        let (dx, dy) = (x2 - x1, y2 - y1);
        let len = (dx * dx + dy * dy).sqrt().max(1.0);
        let (ux, uy) = (dx / len, dy / len);
        let size = 4.0 + 2.0 * pen.sqrt();
        let (bx, by) = (x2 - ux * size, y2 - uy * size);
        let (px, py) = (-uy * size / 2.0, ux * size / 2.0);
        let label = edge_label(g, e);
        // Near the caller, in the gap below it, where long edges' labels
        // do not pile up in the middle of the picture.
        let t = (GAP_Y * 0.4 / dy.abs().max(1.0)).min(0.5);
        let (lx, ly) = (x1 + dx * t + 4.0, y1 + dy * t);
        let _ = write!(
            s,
            "<g class=\"edge\"><title>f{}&#45;&gt;f{}</title>\
             <path d=\"M{x1:.1},{y1:.1}L{bx:.1},{by:.1}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{pen:.2}\"/>\
             <polygon points=\"{x2:.1},{y2:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{colour}\" stroke=\"{colour}\"/>",
            e.from,
            e.to,
            bx + px,
            by + py,
            bx - px,
            by - py,
        );
        for (i, l) in label.lines().enumerate() {
            let _ = write!(
                s,
                "<text x=\"{lx:.1}\" y=\"{:.1}\" fill=\"{colour}\">{}</text>",
                ly + i as f64 * LINE,
                esc(l)
            );
        }
        s.push_str("</g>\n");
    }
    for p in places {
        let node = &g.nodes[p.node];
        let loops = g
            .edges
            .iter()
            .filter(|e| e.from == p.node && e.to == p.node)
            .map(|e| e.calls)
            .sum::<u64>();
        let _ = write!(
            s,
            "<g class=\"node\"><title>f{}</title><g><title>{}</title>\
             <rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" stroke=\"{}\"/>",
            p.node,
            esc(&tooltip(node)),
            p.x,
            p.y,
            p.w,
            p.h,
            colour(g.node_weight(p.node)),
            colour(g.node_weight(p.node)),
        );
        for (i, l) in p.lines.iter().enumerate() {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#ffffff\">{}</text>",
                p.x + p.w / 2.0,
                p.y + 4.0 + LINE * (i as f64 + 0.8),
                esc(l)
            );
        }
        if loops > 0 {
            let _ = write!(
                s,
                "<text x=\"{:.1}\" y=\"{:.1}\">↻ {loops}×</text>",
                p.x + p.w + 3.0,
                p.y + LINE
            );
        }
        s.push_str("</g></g>\n");
    }
    s.push_str("</g>\n</svg>\n");
    s.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Edge, Node, Unit};

    fn graph(n: usize, arcs: &[(usize, usize)]) -> Graph {
        Graph {
            nodes: (0..n)
                .map(|i| Node {
                    name: format!("f{i}<&>"),
                    place: None,
                    self_cost: 1.0,
                    total: (n - i) as f64,
                    calls: 1,
                    cycle: None,
                })
                .collect(),
            edges: arcs
                .iter()
                .map(|&(from, to)| Edge {
                    from,
                    to,
                    calls: 1,
                    cost: Some(1.0),
                })
                .collect(),
            cycles: Vec::new(),
            total: n as f64,
            unit: Unit::Event("Ir".into()),
            title: "t".into(),
            has_arcs: true,
        }
    }

    #[test]
    fn rows_follow_call_depth_and_cycles_are_turned_round() {
        // 0 calls 1 and 2, 1 calls 2, 2 calls 0 back (a cycle).
        let g = graph(3, &[(0, 1), (0, 2), (1, 2), (2, 0)]);
        let kept = Kept {
            nodes: vec![true; 3],
            edges: vec![true; 4],
        };
        let out: Vec<Vec<usize>> = vec![vec![1, 2], vec![2], vec![0]];
        let into: Vec<Vec<usize>> = vec![vec![2], vec![0], vec![0, 1]];
        let (order, back) = depth_first(3, &out, &into, |k| g.node_weight(k));
        assert_eq!(order, vec![0, 1, 2]);
        assert_eq!(back[2], vec![true]);
        assert_eq!(layers(3, &order, &out, &back), vec![0, 1, 2]);
        let svg = String::from_utf8(svg(&g, &kept, "title")).unwrap();
        assert_eq!(svg.matches("<g class=\"node\">").count(), 3);
        assert_eq!(svg.matches("<g class=\"edge\">").count(), 4);
        assert!(svg.contains("<title>f2</title>") && svg.contains("f0&lt;&amp;&gt;"));
    }

    #[test]
    fn a_deep_chain_is_laid_out_whole() {
        let n = 30_000;
        let arcs: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
        let g = graph(n, &arcs);
        let kept = Kept {
            nodes: vec![true; n],
            edges: vec![true; n - 1],
        };
        let svg = svg(&g, &kept, "chain");
        let text = String::from_utf8(svg).unwrap();
        assert_eq!(text.matches("<g class=\"node\">").count(), n);
    }
}
