//! The gprof report as text: the flat profile, the call graph and its
//! index, as the options choose. One walk lays out every report; what a
//! report's columns are (seconds in GNU gprof's fixed widths for gmon
//! samples, event counts in computed widths with the measured inclusive
//! cost for Callgrind profiles, and the texts around them) is data, the
//! `Columns` made by `gnu` or `counts`. Lines are put together
//! in a byte buffer and written in large pieces: reports of Callgrind
//! profiles can have millions of lines.

mod columns;
mod counts;
mod gnu;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::io::{self, Write};

use tally_analysis::gprof::{CallGraph, Options, Report};

use self::columns::{Columns, Cost, fixed, number, spaces};

/// Writes the report: flat profile, call graph and index, as chosen.
pub fn write_to(report: &Report, opts: &Options, out: &mut impl io::Write) -> io::Result<()> {
    let Some(c) = Columns::of(report, opts) else {
        return Ok(());
    };
    let mut s = Sink {
        buf: Vec::with_capacity(1 << 17),
        out,
    };
    let graph = report.graph.as_ref().filter(|_| opts.graph);
    let index = |g: &CallGraph| {
        let names = (report.index_entries(opts).into_iter())
            .map(|node| (node, c.index_name(report, node, opts)));
        let mut out = Vec::new();
        index_layout(g, names, opts.width, &mut out);
        out
    };
    std::thread::scope(|scope| {
        // The index (a sort of the names shown) depends on nothing the
        // tables print: for a large graph it is made on the second thread
        // while the flat profile is written.
        let early = graph
            .filter(|g| g.routines >= 2 * ENTRIES)
            .map(|g| scope.spawn(move || index(g)));
        if opts.flat {
            flat(report, &c, opts, &mut s)?;
        }
        if let Some(g) = graph {
            if opts.flat {
                s.buf.extend_from_slice(b"\x0c\n");
            }
            call_graph(report, &c, g, opts, &mut s, ENTRIES)?;
            let index = match early {
                Some(made) => made.join().expect("the index's thread panicked"),
                None => index(g),
            };
            s.buf.extend_from_slice(&index);
        }
        s.out.write_all(&s.buf)
    })
}

/// The text report as a string.
pub fn write(report: &Report, opts: &Options) -> String {
    let mut v = Vec::new();
    // Writing to memory does not fail.
    let _ = write_to(report, opts, &mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// Where the lines go: a buffer, written out when it is large.
struct Sink<'w, W: io::Write> {
    buf: Vec<u8>,
    out: &'w mut W,
}

impl<W: io::Write> Sink<'_, W> {
    /// Writes the buffer out if it is large.
    fn flush_large(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// Rows of the flat profile read at a time (see [`flat`]).
const ROWS: usize = 16;

fn flat<W: io::Write>(
    r: &Report,
    c: &Columns<'_>,
    opts: &Options,
    s: &mut Sink<'_, W>,
) -> io::Result<()> {
    s.buf.extend_from_slice(b"Flat profile:\n");
    s.buf.extend_from_slice(c.flat.intro.as_bytes());
    s.buf.extend_from_slice(c.flat.headings.as_bytes());
    let w = &c.width;
    let (kw, pw) = (w.flat_calls, w.per_call);
    let mut accum = Cost::Exact(0);
    let order = r.flat_order(opts);
    let cycle = |i: usize| match &r.graph {
        Some(g) if c.flat_cycles => g.cycle[i],
        _ => 0,
    };
    for rows in order.chunks(ROWS) {
        // A batch's rows are read before any is written: in cost order the
        // rows of a large profile are far apart in memory, and reads that
        // do not wait for each other overlap their cache misses (a row
        // written between them would wait for each).
        let mut batch = [(Cost::Exact(0), 0, None, "", 0); ROWS];
        for (b, &i) in batch.iter_mut().zip(rows) {
            *b = (
                c.self_cost(i),
                r.ncalls[i],
                c.total_cost(r, i),
                r.display(i),
                cycle(i),
            );
        }
        let first: u8 =
            (batch.iter()).fold(0, |x, b| x ^ b.3.as_bytes().first().copied().unwrap_or(0));
        std::hint::black_box(first);
        for &(cost, calls, total, name, cycle) in &batch[..rows.len()] {
            let buf = &mut s.buf;
            accum = accum.add(cost);
            fixed(buf, 100.0 * cost.as_f64() / c.flat.total, 6, 2);
            buf.push(b' ');
            c.cost(buf, accum, w.cumulative);
            buf.push(b' ');
            c.cost(buf, cost, w.flat_self);
            if calls != 0 {
                buf.push(b' ');
                number(buf, i128::from(calls), kw, false);
                buf.push(b' ');
                fixed(buf, c.per_call(cost.as_f64(), calls), pw, 2);
                match total {
                    Some(t) => {
                        buf.push(b' ');
                        fixed(buf, c.per_call(t, calls), pw, 2);
                        buf.extend_from_slice(b"  ");
                    }
                    None => spaces(buf, pw + 3),
                }
            } else {
                spaces(buf, kw + 2 * pw + 5);
            }
            buf.extend_from_slice(name.as_bytes());
            if cycle != 0 {
                writeln!(buf, " <cycle {cycle}>")?;
            } else {
                buf.push(b'\n');
            }
        }
        s.flush_large()?;
    }
    s.buf.extend_from_slice(c.flat.blurb.as_bytes());
    Ok(())
}

/// The call graph; from `2 * entries` entries on, laid out on two
/// threads in blocks of `entries`.
fn call_graph<W: io::Write>(
    r: &Report,
    c: &Columns<'_>,
    g: &CallGraph,
    opts: &Options,
    s: &mut Sink<'_, W>,
    entries: usize,
) -> io::Result<()> {
    if opts.brief {
        s.buf.extend_from_slice(b"\t\t\tCall graph\n\n");
    } else {
        s.buf
            .extend_from_slice(b"\t\t     Call graph (explanation follows)\n\n");
    }
    s.buf.extend_from_slice(c.graph.intro.as_bytes());
    s.buf.extend_from_slice(c.graph.headings.as_bytes());
    let shown: Vec<usize> = (g.order.iter().copied())
        .filter(|&node| r.graph_shows(opts, node))
        .collect();
    if shown.len() < 2 * entries {
        for &node in &shown {
            entry(r, c, g, node, &mut s.buf)?;
            s.flush_large()?;
        }
    } else {
        // A large call graph is laid out on two threads, in blocks of
        // entries taken in turn (the other thread's go through a channel
        // two deep, so that it is never far ahead) and written in order:
        // an entry's text depends on nothing written before it.
        let blocks: Vec<&[usize]> = shown.chunks(entries).collect();
        std::thread::scope(|scope| -> io::Result<()> {
            let (tx, rx) = std::sync::mpsc::sync_channel::<io::Result<Vec<u8>>>(2);
            let theirs = &blocks;
            scope.spawn(move || {
                for block in theirs.iter().skip(1).step_by(2) {
                    let mut buf = Vec::with_capacity(1 << 16);
                    let laid = block
                        .iter()
                        .try_for_each(|&node| entry(r, c, g, node, &mut buf));
                    if tx.send(laid.map(|()| buf)).is_err() {
                        return;
                    }
                }
            });
            for (k, block) in blocks.iter().enumerate().step_by(2) {
                for &node in *block {
                    entry(r, c, g, node, &mut s.buf)?;
                }
                if k + 1 < blocks.len() {
                    let theirs = rx.recv().map_err(|_| {
                        io::Error::other("the call graph's second thread ended early")
                    })??;
                    s.out.write_all(&s.buf)?;
                    s.buf.clear();
                    s.out.write_all(&theirs)?;
                }
                s.flush_large()?;
            }
            Ok(())
        })?;
    }
    s.buf.extend_from_slice(c.graph.blurb.as_bytes());
    Ok(())
}

/// Call graph entries laid out at a time by each thread (see
/// [`call_graph`]).
const ENTRIES: usize = 256;

/// One entry of the call graph: its callers, its own line (a cycle's with
/// its members), its callees and the separator.
fn entry(
    r: &Report,
    c: &Columns<'_>,
    g: &CallGraph,
    node: usize,
    buf: &mut Vec<u8>,
) -> io::Result<()> {
    let (iw, cw, kw) = (c.width.index, c.width.cost, c.width.calls);
    let cycle = g.is_cycle(node);
    if !cycle {
        let parents = g.sorted_parents(node);
        touch_print_names(r, parents.iter().map(|&a| g.graph.arcs[a].parent));
        if parents.is_empty() {
            spaces(buf, iw + 7 + c.cost_columns() * (cw + 1) + 2 * (kw + 1) + 4);
            buf.extend_from_slice(b"<spontaneous>\n");
        }
        for a in parents {
            arc_line(r, c, g, a, g.graph.arcs[a].parent, buf);
        }
    }
    // The entry's own line: `[index]` left-aligned and cut to the
    // column, then the percentage.
    let start = buf.len();
    buf.push(b'[');
    buf.extend_from_slice(itoa::Buffer::new().format(g.index[node]).as_bytes());
    buf.push(b']');
    buf.truncate(start + iw.min(buf.len() - start));
    spaces(buf, start + iw + 1 - buf.len());
    let pct = 100.0 * (g.prop_self[node] + g.prop_child[node]) / c.graph.total;
    fixed(buf, pct, 5, 1);
    buf.push(b' ');
    costs(c, g, node, buf);
    c.measured(buf, |m| m.nodes[node]);
    c.called(buf, g, node, false);
    if cycle {
        writeln!(
            buf,
            " <cycle {} as a whole> [{}]",
            g.cycle[node], g.index[node]
        )?;
        for m in g.sorted_members(node) {
            spaces(buf, iw + 7);
            costs(c, g, m, buf);
            c.measured(buf, |_| None);
            c.called(buf, g, m, true);
            buf.extend_from_slice(b"     ");
            push_print_name(r, m, buf);
            buf.push(b'\n');
        }
    } else {
        buf.push(b' ');
        push_print_name(r, node, buf);
        buf.push(b'\n');
        let children = g.sorted_children(node);
        touch_print_names(r, children.iter().map(|&a| g.graph.arcs[a].child));
        for a in children {
            arc_line(r, c, g, a, g.graph.arcs[a].child, buf);
        }
    }
    buf.extend_from_slice(c.separator.as_bytes());
    buf.push(b'\n');
    Ok(())
}

/// A node's `self` and `children` cells, each followed by a blank.
fn costs(c: &Columns<'_>, g: &CallGraph, node: usize, buf: &mut Vec<u8>) {
    c.cost(buf, Cost::Fraction(g.prop_self[node]), c.width.cost);
    buf.push(b' ');
    c.cost(buf, Cost::Fraction(g.prop_child[node]), c.width.cost);
    buf.push(b' ');
}

/// A caller's or callee's line: the arc's propagated shares (none for a
/// self call or a call within a cycle, which propagate nothing), its
/// measured cost, and its calls out of the callee's calls.
fn arc_line(r: &Report, c: &Columns<'_>, g: &CallGraph, a: usize, other: usize, buf: &mut Vec<u8>) {
    let (iw, cw, kw) = (c.width.index, c.width.cost, c.width.calls);
    let arc = &g.graph.arcs[a];
    spaces(buf, iw + 7);
    if r.within(a) {
        spaces(buf, 2 * (cw + 1));
        c.measured(buf, |m| Some(m.arcs[a]));
        number(buf, i128::from(arc.count), kw, false);
        spaces(buf, kw + 6);
    } else {
        c.cost(buf, Cost::Fraction(arc.time), cw);
        buf.push(b' ');
        c.cost(buf, Cost::Fraction(arc.child_time), cw);
        buf.push(b' ');
        c.measured(buf, |m| Some(m.arcs[a]));
        number(buf, i128::from(arc.count), kw, false);
        buf.push(b'/');
        number(buf, i128::from(g.ncalls[g.group(arc.child)]), kw, true);
        spaces(buf, 5);
    }
    push_print_name(r, other, buf);
    buf.push(b'\n');
}

/// The index by function name, in gprof's layout: three columns filled
/// down, each entry `[index] name` (or `(index)` for entries the call graph
/// does not show), the names (already sorted, with any suffix) first, then
/// the cycles. Appended as bytes: a large profile's index has hundreds of
/// thousands of entries.
fn index_layout<'n>(
    g: &tally_analysis::gprof::CallGraph,
    names: impl Iterator<Item = (usize, Cow<'n, str>)>,
    width: usize,
    out: &mut Vec<u8>,
) {
    let mut entries: Vec<(usize, Cow<'n, str>)> = names.collect();
    for c in &g.cycles {
        entries.push((
            g.cycle_node(c.number),
            format!("<cycle {}>", c.number).into(),
        ));
    }
    let column_width = (width.max(1) as i64 - 1) / 3;
    out.extend_from_slice(b"\x0c\nIndex by function name\n\n");
    let todo = entries.len();
    let rows = todo.div_ceil(3);
    let mut number = itoa::Buffer::new();
    for i in 0..rows {
        // gprof counts the index number but not the blanks around it.
        let mut col: i64 = 0;
        let mut starting_col: i64 = 0;
        let mut j = i;
        while j < todo {
            let (node, name) = &entries[j];
            let index = number.format(g.index[*node]);
            // `[index]` or `(index)`.
            col += index.len() as i64 + 2;
            while col < starting_col + 5 {
                out.push(b' ');
                col += 1;
            }
            let (open, close) = if g.print_flag[*node] {
                (b" [", b']')
            } else {
                (b" (", b')')
            };
            out.extend_from_slice(open);
            out.extend_from_slice(index.as_bytes());
            out.push(close);
            out.push(b' ');
            out.extend_from_slice(name.as_bytes());
            col += name.len() as i64;
            starting_col += column_width;
            j += rows;
        }
        out.push(b'\n');
    }
}

/// Reads what [`push_print_name`] reads of each of `nodes`,
/// before their lines are written: the callers and callees of an entry
/// are far apart in memory, and these reads, independent of each
/// other, overlap their cache misses (each line written between them
/// would wait for its own).
fn touch_print_names(r: &Report, nodes: impl Iterator<Item = usize>) {
    let Some(g) = &r.graph else {
        return;
    };
    let mut x = 0usize;
    for node in nodes {
        let name = if node < r.table.len() {
            r.display(node).as_bytes().first().copied().unwrap_or(0)
        } else {
            0
        };
        x ^= usize::from(name) ^ g.index[node] ^ g.cycle[node] as usize;
    }
    std::hint::black_box(x);
}

/// Appends the name as the call graph prints it: with its cycle and
/// index. Written as bytes, not through `fmt`: a report of a Callgrind
/// profile prints it on each of its millions of lines.
fn push_print_name(r: &Report, node: usize, buf: &mut Vec<u8>) {
    let mut n = itoa::Buffer::new();
    let Some(g) = &r.graph else {
        buf.extend_from_slice(r.display(node).as_bytes());
        return;
    };
    if g.is_cycle(node) {
        buf.extend_from_slice(b"<cycle ");
        buf.extend_from_slice(n.format(g.cycle[node]).as_bytes());
        buf.push(b'>');
    } else {
        buf.extend_from_slice(r.display(node).as_bytes());
        if g.cycle[node] != 0 {
            buf.extend_from_slice(b" <cycle ");
            buf.extend_from_slice(n.format(g.cycle[node]).as_bytes());
            buf.push(b'>');
        }
    }
    if g.index[node] != 0 {
        let (open, close) = if g.print_flag[node] {
            (b" [", b']')
        } else {
            (b" (", b')')
        };
        buf.extend_from_slice(open);
        buf.extend_from_slice(n.format(g.index[node]).as_bytes());
        buf.push(close);
    }
}
