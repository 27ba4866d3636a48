//! The DOT text of a pruned graph, in gprof2dot's look: boxes filled on a
//! scale from dark blue (cold) to red (hot) by their total's share, edges
//! coloured and thickened the same way by the share they pass on.
//!
//! A node's label: name, place (file or object), total as a share and a
//! value, self cost in parentheses, calls with `×`. An edge's label: the
//! share it passes (and its value), then its calls. Cycles are clusters
//! labelled with their total.

use std::io::{self, Write};

use super::{Cycle, Edge, Graph, Kept, Node, Unit};

/// Longest name written: Graphviz refuses quoted strings of 16 KiB and
/// more.
const MAX_NAME: usize = 4096;

/// Writes the DOT text of the kept part of `g`.
pub fn write(g: &Graph, kept: &Kept, out: &mut dyn Write) -> io::Result<()> {
    let mut title = format!("{} — {}", truncate(&g.title), unit_name(&g.unit));
    if !g.has_arcs {
        title.push_str(" — the profile records no calls: functions only");
    }
    writeln!(out, "digraph tally {{")?;
    writeln!(
        out,
        "\tgraph [fontname=\"Arial\", nodesep=0.125, ranksep=0.25, label={}, labelloc=t, tooltip=\" \"];",
        quote(&title)
    )?;
    writeln!(
        out,
        "\tnode [fontname=\"Arial\", shape=box, style=filled, fontcolor=\"#ffffff\", fontsize=10, width=0, height=0];"
    )?;
    writeln!(out, "\tedge [fontname=\"Arial\", fontsize=10];")?;

    for (k, c) in g.cycles.iter().enumerate() {
        let members: Vec<usize> = c
            .members
            .iter()
            .copied()
            .filter(|&m| kept.nodes[m])
            .collect();
        if members.is_empty() {
            continue;
        }
        writeln!(out, "\tsubgraph cluster_cycle{} {{", k + 1)?;
        let label = cycle_label(g, c);
        writeln!(
            out,
            "\t\tlabel={}; style=dashed; color=\"{}\"; fontname=\"Arial\"; fontsize=10;",
            quote(&label),
            colour(g.ratio(c.total))
        )?;
        for m in members {
            writeln!(out, "\t\tf{m};")?;
        }
        writeln!(out, "\t}}")?;
    }

    for (i, n) in g.nodes.iter().enumerate() {
        if !kept.nodes[i] {
            continue;
        }
        writeln!(
            out,
            "\tf{i} [label={}, color=\"{}\", tooltip={}];",
            quote(&node_label(g, i)),
            colour(g.node_weight(i)),
            quote(&tooltip(n))
        )?;
    }

    for (k, e) in g.edges.iter().enumerate() {
        if !kept.edges[k] {
            continue;
        }
        let w = g.edge_weight(e);
        let label = edge_label(g, e);
        let pen = (w * 4.0).max(0.5);
        writeln!(
            out,
            "\tf{} -> f{} [label={}, color=\"{c}\", fontcolor=\"{c}\", penwidth={pen:.2}, arrowsize={:.2}];",
            e.from,
            e.to,
            quote(&label),
            0.5 * pen.sqrt(),
            c = colour(w),
        )?;
    }
    writeln!(out, "}}")
}

/// A node's label: name, place, total, self cost, calls, one per line.
pub fn node_label(g: &Graph, i: usize) -> String {
    let n = &g.nodes[i];
    let mut label = truncate(&n.name);
    if let Some(p) = &n.place {
        label.push('\n');
        label.push_str(&truncate(p));
    }
    label.push_str(&format!(
        "\n{} · {}\n({}) · {}\n{}×",
        percent(g.node_weight(i)),
        value(&g.unit, n.total),
        percent(g.ratio(n.self_cost)),
        value(&g.unit, n.self_cost),
        n.calls
    ));
    label
}

/// A node's tooltip: its name and place.
pub fn tooltip(n: &Node) -> String {
    match &n.place {
        Some(p) => format!("{} ({})", truncate(&n.name), truncate(p)),
        None => truncate(&n.name),
    }
}

/// An edge's label: the share and value it passes, then its calls.
pub fn edge_label(g: &Graph, e: &Edge) -> String {
    match e.cost {
        Some(c) => format!(
            "{} · {}\n{}×",
            percent(g.ratio(c)),
            value(&g.unit, c),
            e.calls
        ),
        None => format!("{}×", e.calls),
    }
}

/// A cycle's label: its number and total.
pub fn cycle_label(g: &Graph, c: &Cycle) -> String {
    format!(
        "cycle {}: {} · {}",
        c.number,
        percent(g.ratio(c.total)),
        value(&g.unit, c.total)
    )
}

/// What the values are, for the title.
pub fn unit_name(u: &Unit) -> String {
    match u {
        Unit::Samples { .. } => "time (s)".to_owned(),
        Unit::Event(e) => format!("event {e}"),
    }
}

/// A share as gprof2dot prints it.
fn percent(r: f64) -> String {
    format!("{:.2}%", r * 100.0)
}

/// A cost: seconds for samples, a count with thousands separators for
/// events.
fn value(u: &Unit, v: f64) -> String {
    match u {
        Unit::Samples { hz } if *hz > 0.0 => format!("{:.2} s", v / hz),
        Unit::Samples { .. } => format!("{v:.0} samples"),
        Unit::Event(e) => {
            let digits = format!("{:.0}", v.abs());
            let mut s = String::with_capacity(digits.len() + digits.len() / 3 + e.len() + 2);
            if v < 0.0 {
                s.push('-');
            }
            for (i, c) in digits.chars().enumerate() {
                if i > 0 && (digits.len() - i).is_multiple_of(3) {
                    s.push(',');
                }
                s.push(c);
            }
            s.push(' ');
            s.push_str(e);
            s
        }
    }
}

/// A name cut to what Graphviz accepts.
fn truncate(s: &str) -> String {
    if s.len() < MAX_NAME {
        return s.to_owned();
    }
    let mut end = MAX_NAME - 1;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// A DOT quoted string. Backslashes are doubled (so `\N`, `\G` in a name
/// stay text), quotes escaped, newlines become DOT's `\n` (centred line
/// breaks), and other control characters are shown as `?`.
pub fn quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('"');
    for c in s.chars() {
        match c {
            '\\' => q.push_str("\\\\"),
            '"' => q.push_str("\\\""),
            '\n' => q.push_str("\\n"),
            c if c.is_control() => q.push('?'),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The colour of a weight: gprof2dot's default map, a straight line in
/// hue, saturation and lightness from dark blue (hsl 240°, 80 %, 25 %) at 0
/// to saturated red (hsl 0°, 100 %, 50 %) at 1.
pub fn colour(weight: f64) -> String {
    let w = weight.clamp(0.0, 1.0);
    let (h0, s0, l0) = (2.0 / 3.0, 0.8, 0.25);
    let (h1, s1, l1) = (0.0, 1.0, 0.5);
    let (r, g, b) = hsl(h0 + w * (h1 - h0), s0 + w * (s1 - s0), l0 + w * (l1 - l0));
    let byte = |x: f64| (x.clamp(0.0, 1.0) * 255.0 + 0.5) as u8;
    format!("#{:02x}{:02x}{:02x}", byte(r), byte(g), byte(b))
}

/// HSL to RGB (CSS Color 3's definition).
fn hsl(h: f64, s: f64, l: f64) -> (f64, f64, f64) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = h.rem_euclid(1.0) * 6.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    (r + m, g + m, b + m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_run_from_dark_blue_to_red() {
        // gprof2dot's end points: hsl(240°, 80 %, 25 %) and pure red.
        assert_eq!(colour(0.0), "#0d0d73");
        assert_eq!(colour(1.0), "#ff0000");
        assert_eq!(colour(2.0), "#ff0000");
    }

    #[test]
    fn quoting_keeps_names_as_text() {
        assert_eq!(quote(r#"a"b\N<c>"#), r#""a\"b\\N<c>""#);
        assert_eq!(quote("x\ny\u{1}"), r#""x\ny?""#);
    }

    /// Graphviz refuses a quoted string of 16 KiB: a long name or file
    /// is cut in the label and in the tooltip alike.
    #[test]
    fn long_names_and_places_stay_under_graphviz_limit() {
        let long = "a".repeat(30_000);
        let g = Graph {
            nodes: vec![Node {
                name: long.clone(),
                place: Some(format!("dir/{long}.c")),
                self_cost: 1.0,
                total: 1.0,
                calls: 1,
                cycle: None,
            }],
            edges: Vec::new(),
            cycles: Vec::new(),
            total: 1.0,
            unit: Unit::Event("Ir".into()),
            title: long,
            has_arcs: true,
        };
        let kept = Kept {
            nodes: vec![true],
            edges: Vec::new(),
        };
        let mut out = Vec::new();
        write(&g, &kept, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        for (i, piece) in text.split('"').enumerate() {
            assert!(i % 2 == 0 || piece.len() < 16_384, "{} bytes", piece.len());
        }
    }

    #[test]
    fn values_have_separators() {
        assert_eq!(value(&Unit::Event("Ir".into()), 1234567.0), "1,234,567 Ir");
        assert_eq!(value(&Unit::Event("Ir".into()), 12.0), "12 Ir");
        assert_eq!(value(&Unit::Samples { hz: 100.0 }, 150.0), "1.50 s");
    }
}
