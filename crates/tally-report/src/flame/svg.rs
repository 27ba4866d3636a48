//! The SVG: frames laid out from the tree, with the embedded script.

use super::{FlameOptions, Tree};
use std::fmt::Write as _;
use std::io::{self, Write};

const FRAME_HEIGHT: f64 = 16.0;
const FONT_SIZE: f64 = 12.0;
/// Average glyph width of the font as a share of its size (flamegraph.pl's).
const FONT_WIDTH: f64 = 0.59;
const XPAD: f64 = 10.0;
const SCRIPT: &str = include_str!("flame.js");

/// A frame to draw: node, depth (root 0) and start in cost units.
struct Placed {
    node: u32,
    depth: u32,
    start: u64,
}

/// Frames at least `min_width` pixels wide, root first, depth-first.
fn layout(tree: &Tree, scale: f64, min_width: f64) -> Vec<Placed> {
    let mut out = Vec::new();
    let mut work = vec![(0u32, 0u32, 0u64)];
    while let Some((node, depth, start)) = work.pop() {
        let n = &tree.nodes[node as usize];
        if node != 0 && (n.value as f64) * scale < min_width {
            continue;
        }
        out.push(Placed { node, depth, start });
        let mut x = start;
        let mut kids = Vec::with_capacity(n.children.len());
        for &c in &n.children {
            kids.push((c, depth + 1, x));
            x = x.saturating_add(tree.nodes[c as usize].value);
        }
        work.extend(kids.into_iter().rev());
    }
    out
}

/// `1234567` as `1,234,567`.
fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

fn signed_thousands(v: i128) -> String {
    let mag = thousands(u64::try_from(v.unsigned_abs()).unwrap_or(u64::MAX));
    if v < 0 {
        format!("-{mag}")
    } else {
        format!("+{mag}")
    }
}

/// Escapes text for an XML text node or attribute value.
fn escape(s: &str, out: &mut String) {
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            // Characters XML 1.0 does not allow.
            c if (c as u32) < 0x20 && c != '\t' && c != '\n' && c != '\r' => out.push('?'),
            c => out.push(c),
        }
    }
}

fn escaped(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    escape(s, &mut out);
    out
}

/// FNV-1a, so a name has the same colour in every graph and on every
/// machine.
fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The "hot" palette: red to yellow, the shade from the name's hash.
fn hot(name: &str) -> String {
    let h = name_hash(name);
    let v = |shift: u32| ((h >> shift) & 0xffff) as f64 / 65535.0;
    let r = 205 + (50.0 * v(0)) as u32;
    let g = (230.0 * v(16)) as u32;
    let b = (55.0 * v(32)) as u32;
    format!("rgb({r},{g},{b})")
}

/// Red for growth, blue for shrinkage, grey within the noise: `change`
/// is a share of A's total, the shade scaled by the largest one drawn.
fn diff_colour(change: f64, max: f64, noise: f64) -> String {
    if change.abs() <= noise || max == 0.0 {
        return "rgb(245,245,245)".into();
    }
    let fade = (200.0 * (1.0 - change.abs() / max)).clamp(0.0, 200.0) as u32;
    if change > 0.0 {
        format!("rgb(255,{fade},{fade})")
    } else {
        format!("rgb({fade},{fade},255)")
    }
}

/// Height of one line of the list of stacks only in A.
const LIST_LINE: f64 = FONT_SIZE + 4.0;

/// The name cut to what fits `width` pixels, as the script does on zoom.
fn fit(name: &str, width: f64) -> String {
    let chars = ((width - 6.0) / (FONT_SIZE * FONT_WIDTH)).floor();
    if chars < 3.0 {
        return String::new();
    }
    let chars = chars as usize;
    if name.chars().count() <= chars {
        return name.to_owned();
    }
    let mut s: String = name.chars().take(chars - 2).collect();
    s.push_str("..");
    s
}

/// Writes `tree` as an interactive SVG.
pub fn write_svg(tree: &Tree, o: &FlameOptions, out: &mut impl Write) -> io::Result<()> {
    let total = tree.nodes[0].value;
    let width = o.width.max(100) as f64;
    let avail = width - 2.0 * XPAD;
    let scale = if total == 0 {
        0.0
    } else {
        avail / total as f64
    };
    let placed = layout(tree, scale, o.min_width);
    let depth = placed.iter().map(|p| p.depth).max().unwrap_or(0) as f64 + 1.0;
    let ypad1 = FONT_SIZE * 3.0
        + if o.subtitle.is_some() {
            FONT_SIZE * 2.0
        } else {
            0.0
        };
    let ypad2 = FONT_SIZE * 2.0
        + 10.0
        + if o.legend.is_some() {
            FONT_SIZE + 6.0
        } else {
            0.0
        };
    let height = (ypad1 + depth * FRAME_HEIGHT + ypad2).ceil();
    // A differential frame's change of inclusive cost, as a share of A's
    // total (of B's when A has none).
    let base_total = match tree.nodes[0].base {
        0 => total.max(1),
        b => b,
    } as f64;
    let change = |node: u32| {
        let n = &tree.nodes[node as usize];
        (n.value as f64 - n.base as f64) / base_total
    };
    let max_change = if tree.differential {
        placed
            .iter()
            .map(|p| change(p.node).abs())
            .fold(0.0, f64::max)
    } else {
        0.0
    };
    let listed = if tree.differential {
        tree.only_in_a.len()
    } else {
        0
    };
    let list_height = if listed > 0 {
        (listed + 1) as f64 * LIST_LINE
    } else {
        0.0
    };
    let ypad2 = ypad2 + list_height;
    let height = height + list_height;

    let mut s = String::with_capacity(placed.len() * 200 + SCRIPT.len() + 4096);
    let _ = write!(
        s,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg" onload="init(evt)" data-total="{total}" data-xpad="{XPAD}" data-fontsize="{FONT_SIZE}" data-fontwidth="{FONT_WIDTH}" data-event="{ev}">
<defs><linearGradient id="background" y1="0" y2="1" x1="0" x2="0"><stop stop-color="#eeeeee" offset="5%"/><stop stop-color="{bg2}" offset="95%"/></linearGradient><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="rgb(235,235,255)"/><line x1="0" y1="0" x2="0" y2="6" stroke="rgb(70,70,200)" stroke-width="2"/></pattern></defs>
<style type="text/css">
text {{ font-family: monospace; font-size: {FONT_SIZE}px; fill: rgb(0,0,0); }}
#title {{ text-anchor: middle; font-size: 17px; }}
#subtitle {{ text-anchor: middle; fill: rgb(160,160,160); }}
#search, #unzoom, #matched {{ cursor: pointer; }}
#search {{ text-anchor: end; opacity: 0.1; }}
#search:hover, #search.show {{ opacity: 1; }}
#matched {{ text-anchor: end; }}
#unzoom.hide {{ display: none; }}
#frames > g:hover > rect {{ stroke: black; stroke-width: 0.5; cursor: pointer; }}
#frames > g.hide {{ display: none; }}
#frames > g.parent {{ opacity: 0.5; }}
</style>
<script type="text/ecmascript"><![CDATA[
{script}]]></script>
<rect x="0" y="0" width="{w}" height="{h}" fill="url(#background)"/>
"##,
        w = width,
        h = height,
        ev = escaped(&o.event),
        bg2 = if tree.differential {
            "#e0e0ff"
        } else {
            "#eeeeb0"
        },
        script = SCRIPT.replace("]]>", "]]]]><![CDATA[>"),
    );
    let _ = writeln!(
        s,
        r#"<text id="title" x="{}" y="{}">{}</text>"#,
        width / 2.0,
        FONT_SIZE * 2.0,
        escaped(&o.title)
    );
    if let Some(sub) = &o.subtitle {
        let _ = writeln!(
            s,
            r#"<text id="subtitle" x="{}" y="{}">{}</text>"#,
            width / 2.0,
            FONT_SIZE * 4.0,
            escaped(sub)
        );
    }
    let details_y = height - ypad2 + FONT_SIZE * 1.5 + 2.0;
    let _ = writeln!(
        s,
        r#"<text id="details" x="{XPAD}" y="{details_y}"> </text>"#
    );
    if let Some(legend) = &o.legend {
        let _ = writeln!(
            s,
            r#"<text id="legend" x="{XPAD}" y="{}">{}</text>"#,
            height - 6.0,
            escaped(legend)
        );
    }
    let _ = writeln!(
        s,
        r#"<text id="unzoom" class="hide" x="{XPAD}" y="{}">Reset Zoom</text>"#,
        FONT_SIZE * 2.0
    );
    let _ = writeln!(
        s,
        r#"<text id="search" x="{}" y="{}">Search</text>"#,
        width - XPAD,
        FONT_SIZE * 2.0
    );
    let _ = writeln!(
        s,
        r#"<text id="matched" x="{}" y="{details_y}"> </text>"#,
        width - XPAD
    );
    s.push_str("<g id=\"frames\">\n");
    for p in &placed {
        let n = &tree.nodes[p.node as usize];
        let name = &tree.names[n.name as usize];
        let x = XPAD + p.start as f64 * scale;
        let w = n.value as f64 * scale;
        let y = if o.icicle {
            ypad1 + p.depth as f64 * FRAME_HEIGHT
        } else {
            height - ypad2 - (p.depth as f64 + 1.0) * FRAME_HEIGHT
        };
        let share = if total == 0 {
            0.0
        } else {
            100.0 * n.value as f64 / total as f64
        };
        let mut tip = format!("{name} ({} {}, {share:.2}%", thousands(n.value), o.event);
        let mut marks = String::new();
        let fill = if tree.differential {
            let delta = n.value as i128 - n.base as i128;
            let c = change(p.node);
            let _ = write!(
                tip,
                "; A {}; {} = {:+.2}% of A's total",
                thousands(n.base),
                signed_thousands(delta),
                100.0 * c
            );
            let way = if c.abs() <= tree.noise {
                "same"
            } else if c > 0.0 {
                "up"
            } else {
                "down"
            };
            let _ = write!(marks, " data-a=\"{}\" data-change=\"{way}\"", n.base);
            diff_colour(c, max_change, tree.noise)
        } else if p.node == 0 {
            "rgb(230,230,230)".to_string()
        } else {
            hot(name)
        };
        tip.push(')');
        s.push_str("<g data-v=\"");
        let _ = write!(
            s,
            "{}\" data-w=\"{}\" data-d=\"{}\"{marks} data-n=\"",
            p.start, n.value, p.depth
        );
        escape(name, &mut s);
        s.push_str("\"><title>");
        escape(&tip, &mut s);
        let _ = write!(
            s,
            "</title><rect x=\"{x:.2}\" y=\"{y:.1}\" width=\"{w:.2}\" height=\"{:.1}\" fill=\"{fill}\" rx=\"2\" ry=\"2\"/><text x=\"{:.2}\" y=\"{:.1}\">",
            FRAME_HEIGHT - 1.0,
            x + 3.0,
            y + FRAME_HEIGHT - 5.0
        );
        escape(&fit(name, w), &mut s);
        s.push_str("</text></g>\n");
        if s.len() > 1 << 20 {
            out.write_all(s.as_bytes())?;
            s.clear();
        }
    }
    s.push_str("</g>\n");
    if listed > 0 {
        only_in_a(tree, o, details_y + LIST_LINE, base_total, &mut s);
    }
    s.push_str("</svg>\n");
    out.write_all(s.as_bytes())
}

/// The stacks only in A, one line each under the graph from `y`, a
/// hatched swatch before each.
fn only_in_a(tree: &Tree, o: &FlameOptions, y: f64, base_total: f64, s: &mut String) {
    let _ = writeln!(
        s,
        r#"<g id="only-a"><text x="{XPAD}" y="{y}">Only in A (no width in B):</text>"#
    );
    for (i, (path, cost)) in tree.only_in_a.iter().enumerate() {
        let y = y + (i + 1) as f64 * LIST_LINE;
        let leaf = path.rsplit(';').next().unwrap_or(path);
        let frames: Vec<&str> = path.split(';').collect();
        let shown = if frames.len() > 4 {
            format!("…;{}", frames[frames.len() - 3..].join(";"))
        } else {
            path.clone()
        };
        let costs = format!(
            "  {} {} ({:.2}% of A)",
            thousands(*cost),
            o.event,
            100.0 * *cost as f64 / base_total
        );
        let line = format!("{path}{costs}");
        s.push_str("<g class=\"only-a\" data-n=\"");
        escape(leaf, s);
        let _ = write!(s, "\" data-a=\"{cost}\"><title>");
        escape(&line, s);
        let _ = write!(
            s,
            "</title><rect x=\"{XPAD}\" y=\"{:.1}\" width=\"24\" height=\"{:.1}\" fill=\"url(#hatch)\"/><text x=\"{:.1}\" y=\"{y:.1}\">",
            y - FONT_SIZE + 1.0,
            FONT_SIZE,
            XPAD + 30.0
        );
        escape(&format!("{shown}{costs}"), s);
        s.push_str("</text></g>\n");
    }
    s.push_str("</g>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names() {
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(signed_thousands(-1000), "-1,000");
        assert_eq!(fit("abcdefghij", 1000.0), "abcdefghij");
        assert_eq!(fit("abcdefghij", 50.0), "abcd..");
        assert_eq!(fit("abcdefghij", 20.0), "");
        assert_eq!(escaped("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
        assert_eq!(hot("main"), hot("main"));
    }
}
