//! Reading on two cores: a second thread reads the input straight into
//! the chunk it hands over and does the part of the work that needs no
//! context: it turns the numbers of the cost lines into values and hashes
//! the names of first definitions (`fn=(id) name`, ...). The parser applies
//! them in file order; interning, calls, jumps and every check stay on its
//! thread, so the records, the interning order, the warnings and the
//! errors are those of the single-thread read.
//!
//! What is decoded is only a proposal: the parser takes a decoded line
//! where the fast path would have taken the line (its positions and
//! counts in the forms [`super::fast::scan_cost_line`] reads, applied to
//! the current context), a hash where the keyed fast path defines a name,
//! and otherwise reads the text as before. The decoded lines are kept
//! small (eight bytes a line, four a number), as they cross from one core
//! to the other.

use super::Parser;
use super::fast::number;
use super::keyed::{Key, key, name_def};
use crate::error::Error;
use crate::input::Lines;
use std::path::Path;
use std::sync::mpsc;
use tally_model::{Cost, Interner, Sink};

/// A subposition written absolute (`n`), relative (`+n`, `-n`) or as the
/// last one again (`*`).
const ABS: u8 = 0;
const PLUS: u8 = 1;
const MINUS: u8 = 2;
const STAR: u8 = 3;

/// The numbers of one cost line, as written, in eight bytes: the decoded
/// lines of a chunk are several times its text, and they cross from one
/// core to the other, so their size is what the hand-over costs.
#[derive(Clone, Copy)]
struct Line {
    /// Where the line starts in the chunk.
    start: u32,
    /// Its length (up to its `\n` or the chunk's end).
    len: u16,
    /// Numbers on the line; its values follow those of the lines before
    /// it in [`Chunk::values`].
    count: u8,
    /// The kinds of the first three numbers, two bits each; every number
    /// after them is plain (`n` or `0xn`), or the line is not decoded.
    kinds: u8,
}

/// A run of whole lines (as [`Lines::next_chunk_into`] gives them, padded)
/// and its decoded cost lines, in order.
#[derive(Default)]
pub(super) struct Chunk {
    data: Vec<u8>,
    len: usize,
    lines: Vec<Line>,
    /// The numbers of the decoded lines; a line with a number past
    /// `u32::MAX` (rare: 64-bit addresses, huge counts) is left to the
    /// parser's own scan, so that the common numbers take four bytes.
    values: Vec<u32>,
    /// The first name definitions (`fn=(id) name`, …) and their hashes:
    /// context names of a few hundred bytes make hashing them a good part
    /// of interning.
    defs: Vec<NameDef>,
}

/// A name definition line and the hash of its name.
#[derive(Clone, Copy)]
struct NameDef {
    /// Where the line starts in the chunk.
    start: u32,
    /// Where its name ends (its `\n`).
    end: u32,
    /// [`Interner::hash`] of the name.
    hash: u64,
}

impl Chunk {
    /// Decodes the cost lines of `data[..len]`.
    fn decode(&mut self) {
        let len = self.len;
        self.lines.clear();
        self.values.clear();
        self.defs.clear();
        if u32::try_from(len).is_err() {
            return;
        }
        // Every number takes two bytes at least (a digit and a space or
        // newline), so the values never reallocate.
        self.values.reserve(len / 2 + 2);
        let (data, mut p) = (&self.data[..], 0);
        while p < len {
            if matches!(data[p], b'0'..=b'9' | b'+' | b'-' | b'*')
                && let Some(line) = decode(data, p, len, &mut self.values)
            {
                p += usize::from(line.len) + 1;
                self.lines.push(line);
                continue;
            }
            if let Some((Key::Name(_), v)) = key(data, p)
                && let Some((_, s, end)) = name_def(data, v, len)
            {
                self.defs.push(NameDef {
                    start: p as u32,
                    end: end as u32,
                    hash: Interner::hash(&data[s..end]),
                });
                p = end + 1;
                continue;
            }
            p = memchr::memchr(b'\n', &data[p..len]).map_or(len, |k| p + k + 1);
        }
    }
}

/// The numbers of the cost line at `data[p..]`, separated by single spaces
/// (one more may end the line), each as [`super::fast::subposition_at`]
/// reads it; `None` (and `values` as before) for anything else, and for
/// lines that do not fit a [`Line`].
#[inline(always)]
fn decode(data: &[u8], p: usize, len: usize, values: &mut Vec<u32>) -> Option<Line> {
    let first = values.len();
    let mut i = p;
    let mut kinds = 0u8;
    let mut count = 0usize;
    let ok = loop {
        let (kind, r) = match data[i] {
            b'*' => (STAR, Some((0, i + 1))),
            b'+' => (PLUS, number(data, i + 1)),
            b'-' => (MINUS, number(data, i + 1)),
            _ => (ABS, number(data, i)),
        };
        let Some((v, j)) = r else { break false };
        let Ok(v) = u32::try_from(v) else { break false };
        if count < 3 {
            kinds |= kind << (2 * count);
        } else if kind != ABS {
            // No line has more than three positions: the fast path
            // declines a signed count.
            break false;
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
    let fits = count <= usize::from(u8::MAX) && i - p <= usize::from(u16::MAX);
    if !ok || !fits || (i < len && data[i] != b'\n') {
        values.truncate(first);
        return None;
    }
    Some(Line {
        start: p as u32,
        len: (i - p) as u16,
        count: count as u8,
        kinds,
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
                value: 0,
                defs: &c.defs,
                def: 0,
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
    values: &'c [u32],
    /// The next line that may be asked for.
    cursor: usize,
    /// Where its values start.
    value: usize,
    defs: &'c [NameDef],
    /// The next name definition that may be asked for.
    def: usize,
}

impl Decoded<'_> {
    /// The decoded line starting at `p`, if any, and its values.
    #[inline(always)]
    fn at(&mut self, p: usize) -> Option<(Line, &[u32])> {
        while let Some(&line) = self.lines.get(self.cursor) {
            let start = line.start as usize;
            if start >= p {
                if start != p {
                    return None;
                }
                let v = &self.values[self.value..self.value + usize::from(line.count)];
                return Some((line, v));
            }
            self.value += usize::from(line.count);
            self.cursor += 1;
        }
        None
    }

    /// The hash of the name defined on the line at `p`, whose name ends at
    /// `end`, if the reading thread hashed it.
    #[inline]
    pub(super) fn name_hash(&mut self, p: usize, end: usize) -> Option<u64> {
        while let Some(d) = self.defs.get(self.def) {
            let start = d.start as usize;
            if start >= p {
                return (start == p && d.end as usize == end).then_some(d.hash);
            }
            self.def += 1;
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
            let item = match lines.next_chunk_into(&mut chunk.data) {
                Ok(Some(len)) => {
                    chunk.len = len;
                    chunk.decode();
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
            let (line, values) = dec.at(p)?;
            let (pos, n) = apply(line, values, np, last, costs)?;
            Some((pos, n, p + usize::from(line.len)))
        })
    }
}

/// The positions (from `last`) and the number of counts (into `costs`) of
/// a decoded line with `np` positions and values `v`; `None` where
/// [`super::fast::scan_cost_line`] would decline the line.
#[inline(always)]
fn apply<C: Cost>(
    line: Line,
    v: &[u32],
    np: usize,
    last: [u64; 3],
    costs: &mut [C],
) -> Option<([u64; 3], usize)> {
    let count = v.len();
    // A relative or repeated number after the positions is not a count.
    if count < np || line.kinds >> (2 * np) != 0 || count - np > costs.len() {
        return None;
    }
    let mut pos = last;
    for (k, slot) in pos.iter_mut().enumerate().take(np) {
        let x = u64::from(v[k]);
        *slot = match (line.kinds >> (2 * k)) & 3 {
            ABS => x,
            PLUS => slot.checked_add(x)?,
            MINUS => slot.checked_sub(x)?,
            _ => *slot,
        };
    }
    for (slot, &x) in costs.iter_mut().zip(&v[np..]) {
        *slot = C::from_u64(u64::from(x))?;
    }
    Some((pos, count - np))
}
