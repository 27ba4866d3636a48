//! The control-flow graph of one function's basic blocks, as KCachegrind
//! draws it beside the assembly: blocks split at jump targets and after
//! jumps, edges labelled with the counts of Callgrind's `jump=` and
//! `jcnd=` records, each block with its address range and its cost.
//!
//! The graph is built from the assembly table the page already has
//! ([`super::code::asm`]), so its instructions, costs and jumps are the
//! same numbers the table shows; Graphviz lays it out, bounded in time as
//! for the call graph, and a function with more than [`MAX_BLOCKS`]
//! blocks is described, not drawn.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use serde_json::{Value, json};

use super::Session;
use crate::Error;

/// The most blocks drawn: `dot` on a few thousand boxes takes long and
/// gives a picture nobody can read.
pub const MAX_BLOCKS: usize = 400;

/// One jump record of an instruction (records of the same target and
/// kind summed).
#[derive(Clone, Debug, PartialEq)]
pub struct Jump {
    /// The target address.
    pub target: u64,
    /// A conditional jump (`jcnd=`): `executed` counts it, `taken` the
    /// times it jumped.
    pub conditional: bool,
    /// Times the instruction ran (conditional jumps).
    pub executed: f64,
    /// Times it jumped.
    pub taken: f64,
    /// The function jumped into, when it is not this one.
    pub function: Option<String>,
}

/// One instruction as the graph needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instruction {
    /// Its address.
    pub address: u64,
    /// Its disassembly (empty when the object file gave none).
    pub text: String,
    /// Its cost in the event shown.
    pub cost: f64,
    /// How many times it ran, where the profile counts instructions
    /// (`Ir`): the count of a fall-through edge that no record gives.
    pub runs: Option<f64>,
    /// The jumps recorded at it.
    pub jumps: Vec<Jump>,
}

/// A basic block: instructions `first..=last` of the function.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Index of its first instruction.
    pub first: usize,
    /// Index of its last instruction.
    pub last: usize,
    /// The summed cost of its instructions.
    pub cost: f64,
}

/// Where an edge goes.
#[derive(Clone, Debug, PartialEq)]
pub enum To {
    /// A block of the function.
    Block(usize),
    /// Out of the function: into another one (a tail call), or to an
    /// address no instruction of the table starts at.
    Outside(String),
}

/// What an edge stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An unconditional jump (`jump=`), its count taken.
    Jump,
    /// A conditional jump taken (`jcnd=`): taken of executed.
    Taken,
    /// A conditional jump not taken: executed − taken.
    NotTaken,
    /// The next block, reached by running on: counted by the last
    /// instruction's runs where known.
    FallThrough,
}

/// An edge between blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Edge {
    /// The block it leaves.
    pub from: usize,
    /// Where it goes.
    pub to: To,
    /// Its kind.
    pub kind: Kind,
    /// Times it was followed, when known.
    pub count: Option<f64>,
    /// Times the conditional jump ran (`Taken` and `NotTaken`).
    pub executed: Option<f64>,
}

/// The blocks and edges of a function.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cfg {
    /// The blocks, in address order.
    pub blocks: Vec<Block>,
    /// The edges, by block.
    pub edges: Vec<Edge>,
}

/// The instruction's mnemonic, past prefixes such as `bnd` or `rep`.
fn mnemonic(text: &str) -> &str {
    const PREFIXES: [&str; 8] = [
        "bnd", "notrack", "rep", "repe", "repz", "repne", "repnz", "lock",
    ];
    text.split_whitespace()
        .find(|w| !PREFIXES.contains(w))
        .unwrap_or("")
}

/// Whether control never runs on past the instruction: an unconditional
/// jump or a return.
fn never_falls_through(text: &str) -> bool {
    let m = mnemonic(text);
    m.starts_with("jmp") || m.starts_with("ret") || m == "ud2" || m == "hlt"
}

/// Whether the instruction is a branch by its text: a jump of any kind,
/// a `loop`, a return.
fn branches(text: &str) -> bool {
    let m = mnemonic(text);
    m.starts_with('j') || m.starts_with("loop") || never_falls_through(text)
}

/// The graph of `ins` (in address order): a block starts at the first
/// instruction, at every jump target inside the function and after every
/// instruction that jumps (by its records or its mnemonic).
pub fn build(ins: &[Instruction]) -> Cfg {
    let at: HashMap<u64, usize> = ins
        .iter()
        .enumerate()
        .map(|(i, x)| (x.address, i))
        .collect();
    let inside = |j: &Jump| {
        j.function
            .is_none()
            .then(|| at.get(&j.target).copied())
            .flatten()
    };
    let mut starts = BTreeSet::new();
    if !ins.is_empty() {
        starts.insert(0);
    }
    for (i, x) in ins.iter().enumerate() {
        for j in &x.jumps {
            if let Some(t) = inside(j) {
                starts.insert(t);
            }
        }
        if (!x.jumps.is_empty() || branches(&x.text)) && i + 1 < ins.len() {
            starts.insert(i + 1);
        }
    }
    let starts: Vec<usize> = starts.into_iter().collect();
    let mut block_of = vec![0; ins.len()];
    let blocks: Vec<Block> = starts
        .iter()
        .enumerate()
        .map(|(b, &first)| {
            let last = starts.get(b + 1).map_or(ins.len(), |&n| n) - 1;
            block_of[first..=last].fill(b);
            Block {
                first,
                last,
                cost: ins[first..=last].iter().map(|x| x.cost).sum(),
            }
        })
        .collect();
    let mut edges = Vec::new();
    for (b, block) in blocks.iter().enumerate() {
        let end = &ins[block.last];
        let next = (b + 1 < blocks.len()).then_some(b + 1);
        let mut executed = 0.0;
        let mut taken = 0.0;
        let mut conditional = false;
        for j in &end.jumps {
            let to = match inside(j) {
                Some(t) => To::Block(block_of[t]),
                None => To::Outside(
                    j.function
                        .clone()
                        .unwrap_or_else(|| format!("{:#x}", j.target)),
                ),
            };
            edges.push(Edge {
                from: b,
                to,
                kind: if j.conditional {
                    Kind::Taken
                } else {
                    Kind::Jump
                },
                count: Some(j.taken),
                executed: j.conditional.then_some(j.executed),
            });
            if j.conditional {
                conditional = true;
                executed += j.executed;
                taken += j.taken;
            }
        }
        let Some(next) = next else { continue };
        if conditional {
            edges.push(Edge {
                from: b,
                to: To::Block(next),
                kind: Kind::NotTaken,
                count: Some((executed - taken).max(0.0)),
                executed: Some(executed),
            });
        } else if end.jumps.is_empty() && !never_falls_through(&end.text) {
            edges.push(Edge {
                from: b,
                to: To::Block(next),
                kind: Kind::FallThrough,
                count: end.runs,
                executed: None,
            });
        }
    }
    Cfg { blocks, edges }
}

/// Sums the records of one instruction that share a target and a kind:
/// Callgrind writes one per basic block of its own that holds the jump.
fn summed(jumps: Vec<Jump>) -> Vec<Jump> {
    let mut out: Vec<Jump> = Vec::new();
    for j in jumps {
        match out
            .iter_mut()
            .find(|o| o.target == j.target && o.conditional == j.conditional)
        {
            Some(o) => {
                o.executed += j.executed;
                o.taken += j.taken;
            }
            None => out.push(j),
        }
    }
    out
}

/// The instructions of an assembly table ([`super::code::asm`]), their
/// cost in event `ev` and their runs in event `runs`.
fn instructions(rows: &[Value], ev: usize, runs: Option<usize>) -> Vec<Instruction> {
    let at = |r: &Value, e: usize| r["costs"].get(e).and_then(Value::as_f64);
    rows.iter()
        .filter_map(|r| {
            let jumps = r["jumps"]
                .as_array()
                .map(|js| {
                    js.iter()
                        .filter_map(|j| {
                            Some(Jump {
                                target: j["target"].as_u64()?,
                                conditional: j["conditional"].as_bool().unwrap_or(false),
                                executed: j["executed"].as_f64().unwrap_or(0.0),
                                taken: j["taken"].as_f64().unwrap_or(0.0),
                                function: j["function"].as_str().map(str::to_owned),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some(Instruction {
                address: r["address"].as_u64()?,
                text: r["text"].as_str().unwrap_or("").to_owned(),
                cost: at(r, ev).unwrap_or(0.0),
                runs: runs.map(|e| at(r, e).unwrap_or(0.0)),
                jumps: summed(jumps),
            })
        })
        .collect()
}

/// A count as the page writes it: `1,234,567`.
fn grouped(x: f64) -> String {
    let n = x.round() as i128;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// Text for a DOT label between double quotes, lines ended by `\l`.
fn label_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The fill of a block with `share` of the costliest block's cost: the
/// assembly table's heat, on white.
fn heat(share: f64) -> String {
    let a = if share > 0.0 {
        0.08 + 0.6 * share.min(1.0)
    } else {
        0.0
    };
    let mix = |c: f64| (255.0 + (c - 255.0) * a).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(232.0), mix(131.0), mix(58.0))
}

/// The DOT text of `g` over `ins`: nodes `b<block>` (the page finds a
/// block's instructions by them), outside targets `x<k>`.
pub fn dot(g: &Cfg, ins: &[Instruction], event: &str) -> String {
    let max = g.blocks.iter().map(|b| b.cost).fold(0.0, f64::max);
    let total: f64 = g.blocks.iter().map(|b| b.cost).sum();
    let mut out = String::from(
        "digraph cfg {\n  graph [fontname=\"sans-serif\", nodesep=0.25, ranksep=0.35];\n  \
         node [shape=box, style=\"filled,rounded\", fontname=\"monospace\", fontsize=10, color=\"#888888\"];\n  \
         edge [fontname=\"sans-serif\", fontsize=9, arrowsize=0.7];\n",
    );
    for (b, block) in g.blocks.iter().enumerate() {
        let (first, last) = (&ins[block.first], &ins[block.last]);
        let n = block.last - block.first + 1;
        let share = if total > 0.0 {
            format!(" ({:.1}%)", 100.0 * block.cost / total)
        } else {
            String::new()
        };
        let range = if n == 1 {
            format!("{:#x}", first.address)
        } else {
            format!("{:#x} – {:#x}", first.address, last.address)
        };
        let mut label = format!(
            "{range}\\l{n} instruction{} · {event} {}{share}\\l",
            if n == 1 { "" } else { "s" },
            grouped(block.cost)
        );
        if branches(&last.text) {
            let text: Vec<&str> = last.text.split_whitespace().collect();
            label.push_str(&label_text(&text.join(" ")));
            label.push_str("\\l");
        }
        let _ = writeln!(
            out,
            "  b{b} [label=\"{label}\", fillcolor=\"{}\", tooltip=\"{:#x}\"];",
            heat(if max > 0.0 { block.cost / max } else { 0.0 }),
            first.address
        );
    }
    let mut outside: BTreeMap<&str, usize> = BTreeMap::new();
    for e in &g.edges {
        if let To::Outside(name) = &e.to {
            let k = outside.len();
            if let std::collections::btree_map::Entry::Vacant(v) = outside.entry(name) {
                v.insert(k);
                let _ = writeln!(
                    out,
                    "  x{k} [label=\"→ {}\", shape=plaintext, style=\"\"];",
                    label_text(name)
                );
            }
        }
    }
    for e in &g.edges {
        let to = match &e.to {
            To::Block(t) => format!("b{t}"),
            To::Outside(name) => format!("x{}", outside[name.as_str()]),
        };
        let count = e.count.map(grouped);
        let back = matches!(e.to, To::Block(t) if t <= e.from);
        let colour = match e.kind {
            Kind::FallThrough | Kind::NotTaken => "#888888",
            _ if back => "#c0392b",
            _ => "#2d6cdf",
        };
        let label = match (e.kind, count) {
            (Kind::Taken, Some(c)) => {
                format!("{c} of {}", grouped(e.executed.unwrap_or(0.0)))
            }
            (Kind::NotTaken, Some(c)) => format!("{c} not taken"),
            (_, Some(c)) => format!("{c}×"),
            (_, None) => String::new(),
        };
        let style = match e.kind {
            Kind::Taken | Kind::NotTaken => ", style=dashed",
            _ => "",
        };
        let _ = writeln!(
            out,
            "  b{} -> {to} [label=\"{label}\", color=\"{colour}\", fontcolor=\"{colour}\"{style}];",
            e.from
        );
    }
    out.push_str("}\n");
    out
}

/// The graph as JSON: `blocks` (`start`, `end` addresses, `instructions`,
/// `cost`), `edges` (`from`, `to` a block or `outside` a name, `kind`,
/// `count`, `executed`).
fn graph_json(g: &Cfg, ins: &[Instruction]) -> (Value, Value) {
    let blocks = g
        .blocks
        .iter()
        .map(|b| {
            json!({
                "start": ins[b.first].address,
                "end": ins[b.last].address,
                "instructions": b.last - b.first + 1,
                "cost": b.cost,
            })
        })
        .collect();
    let edges = g
        .edges
        .iter()
        .map(|e| {
            let mut j = json!({
                "from": e.from,
                "kind": match e.kind {
                    Kind::Jump => "jump",
                    Kind::Taken => "taken",
                    Kind::NotTaken => "not-taken",
                    Kind::FallThrough => "fall-through",
                },
                "count": e.count,
                "executed": e.executed,
            });
            match &e.to {
                To::Block(t) => j["to"] = json!(t),
                To::Outside(n) => j["outside"] = json!(n),
            }
            j
        })
        .collect();
    (Value::Array(blocks), Value::Array(edges))
}

/// Why `g` is not drawn, if it has more than [`MAX_BLOCKS`] blocks.
fn too_many(g: &Cfg) -> Option<String> {
    (g.blocks.len() > MAX_BLOCKS).then(|| {
        format!(
            "{} basic blocks: more than {MAX_BLOCKS}, too many to draw; the instruction table's \
             arrows show the jumps.",
            g.blocks.len()
        )
    })
}

/// The reply of `/api/cfg`: the graph of the function whose assembly
/// table is `asm` in `event` (the first when `None`), with its SVG, or a
/// `note` saying why there is none (no instructions, no jumps recorded in
/// the profile, too many blocks, Graphviz missing or too slow).
pub fn reply(s: &Session, asm: &Value, event: Option<&str>) -> Result<Value, Error> {
    let events: Vec<&str> = asm["events"]
        .as_array()
        .map(|e| e.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let ev = event
        .and_then(|e| events.iter().position(|x| *x == e))
        .unwrap_or(0);
    let name = events.get(ev).copied().unwrap_or("");
    let rows = asm["rows"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut out = json!({
        "function": asm["function"],
        "event": name,
        "blocks": [],
        "edges": [],
        "svg": null,
    });
    if rows.is_empty() {
        out["note"] = json!(format!(
            "No control-flow graph: no instructions ({}).",
            asm["note"].as_str().unwrap_or("none listed")
        ));
        return Ok(out);
    }
    let inp = &s.inputs[s.main()];
    if inp.profile.parts.iter().all(|p| p.jumps.is_empty()) {
        out["note"] = json!(
            "No control-flow graph: the profile records no jumps \
             (Callgrind records them with --collect-jumps=yes)."
        );
        return Ok(out);
    }
    let ins = instructions(rows, ev, events.iter().position(|e| *e == "Ir"));
    let g = build(&ins);
    let (blocks, edges) = graph_json(&g, &ins);
    out["blocks"] = blocks;
    out["edges"] = edges;
    if !ins.iter().any(|i| !i.jumps.is_empty()) {
        out["note"] =
            json!("No jump of this function was recorded: blocks split by mnemonics only.");
    }
    if let Some(note) = too_many(&g) {
        out["note"] = json!(note);
        return Ok(out);
    }
    match tally_report::graph::svg::render(dot(&g, &ins, name).as_bytes()) {
        Ok(r) => out["svg"] = json!(String::from_utf8_lossy(&r.svg)),
        Err(e) => out["note"] = json!(format!("No control-flow graph: {e}")),
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ins(address: u64, text: &str, runs: f64, jumps: Vec<Jump>) -> Instruction {
        Instruction {
            address,
            text: text.to_owned(),
            cost: runs,
            runs: Some(runs),
            jumps,
        }
    }

    fn jump(target: u64, taken: f64) -> Jump {
        Jump {
            target,
            conditional: false,
            executed: taken,
            taken,
            function: None,
        }
    }

    fn jcnd(target: u64, taken: f64, executed: f64) -> Jump {
        Jump {
            target,
            conditional: true,
            executed,
            taken,
            function: None,
        }
    }

    /// `for (i = 0; i < 1000; i++) if (i % 3 == 0) even += i; else odd += i;`
    /// as gcc -O0 compiles it, with the records Callgrind writes (the loop's
    /// `jle` in three records, one per superblock holding it).
    fn the_loop() -> Vec<Instruction> {
        let jle = summed(vec![
            jcnd(0x1136, 666.0, 666.0),
            jcnd(0x1136, 333.0, 334.0),
            jcnd(0x1136, 1.0, 1.0),
        ]);
        vec![
            ins(0x1129, "push rbp", 1.0, vec![]),
            ins(0x112d, "mov dword ptr [rbp-4],0", 1.0, vec![]),
            ins(0x1134, "jmp 0x1193", 1.0, vec![jump(0x1193, 1.0)]),
            ins(0x1136, "mov ecx,[rbp-4]", 1000.0, vec![]),
            ins(0x115b, "test edx,edx", 1000.0, vec![]),
            ins(
                0x115d,
                "jne 0x1178",
                1000.0,
                vec![jcnd(0x1178, 666.0, 1000.0)],
            ),
            ins(0x115f, "mov eax,[rbp-4]", 334.0, vec![]),
            ins(0x1176, "jmp 0x118f", 334.0, vec![jump(0x118f, 334.0)]),
            ins(0x1178, "mov eax,[rbp-4]", 666.0, vec![]),
            ins(0x1188, "mov [rip+0x2e89],rax", 666.0, vec![]),
            ins(0x118f, "add dword ptr [rbp-4],1", 1000.0, vec![]),
            ins(0x1193, "cmp dword ptr [rbp-4],0x3e7", 1001.0, vec![]),
            ins(0x119a, "jle 0x1136", 1001.0, jle),
            ins(0x119c, "mov eax,0", 1.0, vec![]),
            ins(0x11a2, "ret", 1.0, vec![]),
        ]
    }

    fn edge(g: &Cfg, from: usize, to: usize) -> &Edge {
        g.edges
            .iter()
            .find(|e| e.from == from && e.to == To::Block(to))
            .unwrap_or_else(|| panic!("no edge {from} -> {to}: {:?}", g.edges))
    }

    #[test]
    fn blocks_split_at_targets_and_after_jumps() {
        let code = the_loop();
        let g = build(&code);
        let starts: Vec<u64> = g.blocks.iter().map(|b| code[b.first].address).collect();
        assert_eq!(
            starts,
            [0x1129, 0x1136, 0x115f, 0x1178, 0x118f, 0x1193, 0x119c]
        );
        assert_eq!(g.blocks[1].cost, 3000.0);
        assert_eq!(g.blocks[6].last, code.len() - 1);
    }

    #[test]
    fn edges_carry_the_records_counts() {
        let g = build(&the_loop());
        let e = edge(&g, 0, 5);
        assert_eq!((e.kind, e.count), (Kind::Jump, Some(1.0)));
        let e = edge(&g, 1, 3);
        assert_eq!(
            (e.kind, e.count, e.executed),
            (Kind::Taken, Some(666.0), Some(1000.0))
        );
        let e = edge(&g, 1, 2);
        assert_eq!((e.kind, e.count), (Kind::NotTaken, Some(334.0)));
        assert_eq!(edge(&g, 2, 4).count, Some(334.0));
        // No record: the last instruction's runs.
        let e = edge(&g, 3, 4);
        assert_eq!((e.kind, e.count), (Kind::FallThrough, Some(666.0)));
        assert_eq!(edge(&g, 4, 5).count, Some(1000.0));
        // The loop's back edge: the three records summed.
        let e = edge(&g, 5, 1);
        assert_eq!((e.count, e.executed), (Some(1000.0), Some(1001.0)));
        assert_eq!(edge(&g, 5, 6).count, Some(1.0));
        // Nothing runs on past a `jmp` or leaves by `ret`.
        assert!(!g.edges.iter().any(|e| e.from == 0 && e.to == To::Block(1)));
        assert!(!g.edges.iter().any(|e| e.from == 2 && e.to == To::Block(3)));
        assert!(!g.edges.iter().any(|e| e.from == 6));
        assert_eq!(g.edges.len(), 8);
    }

    #[test]
    fn jumps_out_and_branches_without_records() {
        let mut tail = jump(0x9000, 5.0);
        tail.function = Some("other".into());
        let code = vec![
            ins(0x10, "cmp eax,1", 5.0, vec![]),
            // Never taken, never recorded: still ends its block.
            ins(0x12, "je 0x20", 5.0, vec![]),
            ins(0x14, "bnd jmp 0x9000", 5.0, vec![tail]),
            ins(0x20, "ret", 0.0, vec![]),
            ins(0x21, "nop", 0.0, vec![]),
        ];
        let g = build(&code);
        let starts: Vec<usize> = g.blocks.iter().map(|b| b.first).collect();
        assert_eq!(starts, [0, 2, 3, 4]);
        assert_eq!(g.edges[0].kind, Kind::FallThrough);
        assert_eq!(g.edges[0].to, To::Block(1));
        assert_eq!(g.edges[1].to, To::Outside("other".into()));
        assert_eq!(g.edges.len(), 2, "{:?}", g.edges);
        let text = dot(&g, &code, "Ir");
        assert!(text.contains("x0 [label=\"→ other\""), "{text}");
        assert!(text.contains("b1 -> x0 [label=\"5×\""), "{text}");
    }

    #[test]
    fn the_dot_text_labels_blocks_and_edges() {
        let code = the_loop();
        let text = dot(&build(&code), &code, "Ir");
        assert!(
            text.contains("0x1136 – 0x115d\\l3 instructions · Ir 3,000"),
            "{text}"
        );
        assert!(
            text.contains("label=\"0x118f\\l1 instruction · Ir 1,000"),
            "{text}"
        );
        assert!(text.contains("\\ljle 0x1136\\l"), "{text}");
        assert!(
            text.contains("b5 -> b1 [label=\"1,000 of 1,001\", color=\"#c0392b\""),
            "{text}"
        );
        assert!(text.contains("b1 -> b2 [label=\"334 not taken\""), "{text}");
        assert_eq!(heat(0.0), "#ffffff");
        assert_eq!(heat(1.0), "#efab79");
        assert_eq!(grouped(1234567.0), "1,234,567");
    }

    /// A function of thousands of blocks is described, not laid out.
    #[test]
    fn thousands_of_blocks_are_not_drawn() {
        let code: Vec<Instruction> = (0..3000u64)
            .map(|i| ins(0x1000 + 2 * i, "je 0x1000", 1.0, vec![]))
            .collect();
        let g = build(&code);
        assert_eq!(g.blocks.len(), 3000);
        let note = too_many(&g).expect("a note");
        assert!(
            note.starts_with("3000 basic blocks: more than 400"),
            "{note}"
        );
        assert_eq!(too_many(&build(&the_loop())), None);
    }

    #[test]
    fn an_empty_function_has_no_blocks() {
        assert_eq!(build(&[]), Cfg::default());
    }
}
