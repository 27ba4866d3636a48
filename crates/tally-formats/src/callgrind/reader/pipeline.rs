//! Reading on two cores: a second thread reads the input and turns the
//! numbers of its cost lines into values (the part of the work that needs
//! no context), while the parser applies them in file order. Names, calls,
//! jumps and every check stay on the parser's thread, so the records, the
//! interning order, the warnings and the errors are those of the
//! single-thread read.
//!
//! A decoded line is only a proposal: the parser takes it where the fast
//! path would have taken the line (its positions and counts in the forms
//! [`super::fast::scan_cost_line`] reads, applied to the current context)
//! and otherwise reads the text as before.

use super::Parser;
use super::fast::number;
use crate::error::Error;
use crate::input::{Lines, PAD};
use std::path::Path;
use std::sync::mpsc;
use tally_model::{Cost, Sink};

/// A subposition written absolute (`n`), relative (`+n`, `-n`) or as the
/// last one again (`*`).
const ABS: u8 = 0;
const PLUS: u8 = 1;
const MINUS: u8 = 2;
const STAR: u8 = 3;

/// The numbers of one cost line, as written.
#[derive(Clone, Copy)]
struct Line {
    /// Where the line starts in the chunk.
    start: usize,
    /// Its `\n` (or the chunk's end).
    end: usize,
    /// Its first value in [`Chunk::values`].
    first: usize,
    /// Numbers on the line.
    count: usize,
    /// The kinds of the first three numbers, two bits each.
    kinds: u8,
    /// Numbers from this index on are all plain (`n` or `0xn`).
    plain_from: usize,
}

/// A run of whole lines (as [`Lines::next_chunk`] gives them, padded) and
/// its decoded cost lines, in order.
#[derive(Default)]
pub(super) struct Chunk {
    data: Vec<u8>,
    len: usize,
    lines: Vec<Line>,
    values: Vec<u64>,
}

impl Chunk {
    fn fill(&mut self, data: &[u8], len: usize) {
        self.data.clear();
        self.data.extend_from_slice(&data[..len + PAD]);
        self.len = len;
        self.lines.clear();
        self.values.clear();
        let (data, mut p) = (&self.data[..], 0);
        while p < len {
            if matches!(data[p], b'0'..=b'9' | b'+' | b'-' | b'*')
                && let Some(line) = decode(data, p, len, &mut self.values)
            {
                self.lines.push(line);
                p = line.end + 1;
                continue;
            }
            p = memchr::memchr(b'\n', &data[p..len]).map_or(len, |k| p + k + 1);
        }
    }
}

/// The numbers of the cost line at `data[p..]`, separated by single spaces
/// (one more may end the line), each as [`super::fast::subposition_at`]
/// reads it; `None` (and `values` as before) for anything else.
#[inline(always)]
fn decode(data: &[u8], p: usize, len: usize, values: &mut Vec<u64>) -> Option<Line> {
    let first = values.len();
    let mut i = p;
    let mut kinds = 0u8;
    let mut plain_from = 0;
    let mut count = 0;
    let ok = loop {
        let (kind, r) = match data[i] {
            b'*' => (STAR, Some((0, i + 1))),
            b'+' => (PLUS, number(data, i + 1)),
            b'-' => (MINUS, number(data, i + 1)),
            _ => (ABS, number(data, i)),
        };
        let Some((v, j)) = r else { break false };
        if kind != ABS {
            plain_from = count + 1;
        }
        if count < 3 {
            kinds |= kind << (2 * count);
        }
        values.push(v);
        count += 1;
        i = j;
        if data[i] != b' ' {
            break true;
        }
        i += 1;
        if data[i] == b'\n' {
            break true;
        }
    };
    if !ok || (i < len && data[i] != b'\n') {
        values.truncate(first);
        return None;
    }
    Some(Line {
        start: p,
        end: i,
        first,
        count,
        kinds,
        plain_from,
    })
}

/// The chunks, from the reading thread.
pub(super) struct Piped<'a> {
    pub(super) path: &'a Path,
    rx: mpsc::Receiver<Result<Chunk, Error>>,
    back: mpsc::Sender<Chunk>,
    current: Option<Chunk>,
    consumed: u64,
}

impl Piped<'_> {
    fn next(&mut self) -> Result<Option<&Chunk>, Error> {
        if let Some(old) = self.current.take() {
            // The reader may have stopped; the buffer is then dropped.
            let _ = self.back.send(old);
        }
        match self.rx.recv() {
            Ok(Ok(chunk)) => {
                self.consumed += chunk.len as u64;
                Ok(Some(self.current.insert(chunk)))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Ok(None),
        }
    }
}

/// A run of whole lines as `(data, len, decoded)`: `data[..len]` are
/// the lines, `data` is padded (see [`Lines::next_chunk`]), and `decoded`
/// holds their decoded cost lines when a reading thread made them.
pub(super) type ChunkView<'a> = (&'a [u8], usize, Option<Decoded<'a>>);

/// Where the parser's lines come from.
pub(super) trait Source {
    /// The next run of whole lines (see [`Lines::next_chunk`]) and its
    /// decoded cost lines, if decoded.
    fn chunk(&mut self) -> Result<Option<ChunkView<'_>>, Error>;
    /// Bytes consumed so far.
    fn consumed(&self) -> u64;
    /// The input's name in messages.
    fn path(&self) -> &Path;
}

impl Source for Lines {
    #[inline]
    fn chunk(&mut self) -> Result<Option<ChunkView<'_>>, Error> {
        Ok(self.next_chunk()?.map(|(d, l)| (d, l, None)))
    }
    fn consumed(&self) -> u64 {
        Lines::consumed(self)
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

impl Source for Piped<'_> {
    #[inline]
    fn chunk(&mut self) -> Result<Option<ChunkView<'_>>, Error> {
        Ok(self.next()?.map(|c| {
            let decoded = Decoded {
                lines: &c.lines,
                values: &c.values,
                cursor: 0,
            };
            (&c.data[..], c.len, Some(decoded))
        }))
    }
    fn consumed(&self) -> u64 {
        self.consumed
    }
    fn path(&self) -> &Path {
        self.path
    }
}

/// The decoded cost lines of a chunk and how far the parser has got.
pub(super) struct Decoded<'c> {
    lines: &'c [Line],
    values: &'c [u64],
    cursor: usize,
}

impl Decoded<'_> {
    /// The decoded line starting at `p`, if any.
    #[inline(always)]
    fn at(&mut self, p: usize) -> Option<Line> {
        while let Some(line) = self.lines.get(self.cursor) {
            if line.start >= p {
                return (line.start == p).then_some(*line);
            }
            self.cursor += 1;
        }
        None
    }
}

/// Starts the reading thread in `scope` and returns the parser's end of it.
pub(super) fn start<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    mut lines: Lines,
    path: &'env Path,
) -> Piped<'env> {
    // Two chunks in flight: one being parsed, one being decoded.
    let (tx, rx) = mpsc::sync_channel::<Result<Chunk, Error>>(1);
    let (back, spare) = mpsc::channel::<Chunk>();
    scope.spawn(move || {
        loop {
            let mut chunk = spare.try_recv().unwrap_or_default();
            let item = match lines.next_chunk() {
                Ok(Some((data, len))) => {
                    chunk.fill(data, len);
                    Ok(chunk)
                }
                Ok(None) => return,
                Err(e) => Err(e),
            };
            let failed = item.is_err();
            if tx.send(item).is_err() || failed {
                return;
            }
        }
    });
    Piped {
        path,
        rx,
        back,
        current: None,
        consumed: 0,
    }
}

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// [`Parser::fast_run`] on decoded lines: the same checks and records,
    /// without reading the numbers again.
    #[inline(never)]
    pub(super) fn decoded_run(&mut self, dec: &mut Decoded<'_>, p: usize, len: usize) -> usize {
        let np = self.np;
        self.cost_run(p, len, |p, last, costs| {
            let line = dec.at(p)?;
            let (pos, n) = apply(&line, dec.values, np, last, costs)?;
            Some((pos, n, line.end))
        })
    }
}

/// The positions (from `last`) and the number of counts (into `costs`) of
/// a decoded line with `np` positions; `None` where
/// [`super::fast::scan_cost_line`] would decline the line.
#[inline(always)]
fn apply<C: Cost>(
    line: &Line,
    values: &[u64],
    np: usize,
    last: [u64; 3],
    costs: &mut [C],
) -> Option<([u64; 3], usize)> {
    if line.count < np || line.plain_from > np || line.count - np > costs.len() {
        return None;
    }
    let v = &values[line.first..line.first + line.count];
    let mut pos = last;
    for (k, slot) in pos.iter_mut().enumerate().take(np) {
        *slot = match (line.kinds >> (2 * k)) & 3 {
            ABS => v[k],
            PLUS => slot.checked_add(v[k])?,
            MINUS => slot.checked_sub(v[k])?,
            _ => *slot,
        };
    }
    for (slot, &x) in costs.iter_mut().zip(&v[np..]) {
        *slot = C::from_u64(x)?;
    }
    Some((pos, line.count - np))
}
