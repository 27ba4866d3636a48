//! Reading on two cores: a second thread reads the input straight into
//! the chunk it hands over and does the part of the work that needs no
//! context: it turns the numbers of the cost lines into values, reads the
//! keyed lines the fast path takes (the id of `cfn=(12)`, the counts and
//! target of `calls=`, `jump=` and `jcnd=`) and hashes the names of first
//! definitions (`fn=(id) name`, ...); when the parser is the one
//! waiting, it decodes some chunks itself (see [`start`]). The parser
//! applies them in file order; interning, id lookups, calls, jumps and
//! every check stay on its thread, so the records, the interning order,
//! the warnings and the errors are those of the single-thread read.
//!
//! What is decoded is only a proposal: the parser takes a decoded line
//! where the fast path would have taken the line (its positions and
//! counts in the forms [`super::fast::scan_cost_line`] reads, a keyed
//! line in the forms `keyed` reads, applied to the current context), a
//! hash where the keyed fast path defines a name, and otherwise reads the
//! text as before. The decoded lines are kept small (eight bytes a cost
//! line, four a number, 32 a keyed line), as they cross from one core to
//! the other.

use super::Parser;
use super::fast::number;
use super::keyed::{Key, NameKey, digits, key, name_def};
use crate::error::Error;
use crate::input::Lines;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
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
    /// How many of `values` the decoded lines use: the vector keeps its
    /// length from chunk to chunk and is written by index, so that a value
    /// costs one store rather than a push's length and capacity reloads.
    nvalues: usize,
    /// The first name definitions (`fn=(id) name`, …) and their hashes:
    /// context names of a few hundred bytes make hashing them a good part
    /// of interning.
    defs: Vec<NameDef>,
    /// The keyed lines in the fast forms, read.
    keyed: Vec<Keyed>,
    /// Whether `lines`, `values`, `defs` and `keyed` are this chunk's: the
    /// reading thread leaves a chunk to the parser to decode when the
    /// parser has been waiting (see [`start`]).
    decoded: bool,
}

/// A keyed line in a form the keyed fast path reads, with its numbers: a
/// name by its id alone (`cfn=(12)`), `calls=COUNT TARGET`,
/// `jump=COUNT TARGET` or `jcnd=FOLLOWED/EXECUTED TARGET`, the target's
/// subpositions each after one space, then at most one space. Numbers
/// past `u32::MAX` leave the line to the parser's own reading.
#[derive(Clone, Copy)]
pub(super) struct Keyed {
    /// Where the line starts in the chunk.
    start: u32,
    /// Where it ends (its `\n`).
    pub(super) end: u32,
    pub(super) key: Key,
    /// The id of a name, the count of `calls=` or `jump=`, the followed
    /// count of `jcnd=`.
    pub(super) a: u32,
    /// The executed count of `jcnd=`.
    pub(super) b: u32,
    /// The target's subpositions: how many, their kinds (two bits each)
    /// and their numbers.
    n: u8,
    kinds: u8,
    target: [u32; 3],
}

impl Keyed {
    /// The target position against `last`, if the line has `np`
    /// subpositions and they apply (as [`super::fast::subposition_at`]).
    #[inline(always)]
    pub(super) fn target(&self, np: usize, last: [u64; 3]) -> Option<[u64; 3]> {
        if usize::from(self.n) != np {
            return None;
        }
        step(self.kinds, &self.target, np, last)
    }
}

/// A name definition line and the hash of its name.
#[derive(Clone, Copy)]
pub(super) struct NameDef {
    /// Where the line starts in the chunk.
    start: u32,
    /// Where its name ends (its `\n`).
    end: u32,
    /// [`Interner::hash`] of the name.
    pub(super) hash: u64,
    /// Its key and id, for the parser to touch their entry early.
    pub(super) key: NameKey,
    pub(super) id: u64,
}

impl Chunk {
    /// Decodes the cost lines of `data[..len]`.
    fn decode(&mut self) {
        let len = self.len;
        self.lines.clear();
        self.nvalues = 0;
        self.defs.clear();
        self.keyed.clear();
        if u32::try_from(len).is_err() {
            return;
        }
        // Every number takes two bytes at least (a digit and a space or
        // newline; the last one of the input one), so this many always do.
        if self.values.len() < len / 2 + 2 {
            self.values.resize(len / 2 + 2, 0);
        }
        let (data, values, mut p) = (&self.data[..], &mut self.values[..], 0);
        let mut nv = 0;
        // Local vectors (put back below): pushing to a field behind
        // `&mut self` reloads its length and capacity every time.
        let mut lines = std::mem::take(&mut self.lines);
        let mut defs = std::mem::take(&mut self.defs);
        let mut keyed = std::mem::take(&mut self.keyed);
        while p < len {
            let b = data[p];
            if matches!(b, b'0'..=b'9' | b'+' | b'-' | b'*') {
                if let Some(line) = decode(data, p, len, values, &mut nv) {
                    p += usize::from(line.len) + 1;
                    lines.push(line);
                    continue;
                }
            } else if let Some((k, v)) = key(data, p) {
                if let Key::Name(key) = k
                    && let Some((id, s, end)) = name_def(data, v, len)
                {
                    defs.push(NameDef {
                        start: p as u32,
                        end: end as u32,
                        hash: Interner::hash(&data[s..end]),
                        key,
                        id,
                    });
                    p = end + 1;
                    continue;
                }
                if let Some(end) = decode_keyed(data, p, k, v, len, &mut keyed) {
                    p = end + 1;
                    continue;
                }
            }
            p = memchr::memchr(b'\n', &data[p..len]).map_or(len, |k| p + k + 1);
        }
        self.nvalues = nv;
        self.lines = lines;
        self.defs = defs;
        self.keyed = keyed;
    }
}

/// The keyed line at `data[p..]` whose key is `key` and value starts at
/// `v`, in the forms [`Keyed`] holds, pushed to `out`; the index of its
/// `\n`, or `None` (nothing pushed) for anything else. The fields are
/// kept in locals and written once: filling a struct on the stack field by
/// field and then copying it stalls on store forwarding.
#[inline(always)]
fn decode_keyed(
    data: &[u8],
    p: usize,
    key: Key,
    v: usize,
    len: usize,
    out: &mut Vec<Keyed>,
) -> Option<usize> {
    let start = u32::try_from(p).ok()?;
    let (a, b, mut i) = match key {
        Key::Name(_) => {
            // `(id)` and the end of the line, as the fast path reads it.
            if data[v] != b'(' {
                return None;
            }
            let (id, j) = digits(data, v + 1)?;
            if data[j] != b')' || j + 1 >= len || data[j + 1] != b'\n' {
                return None;
            }
            out.push(Keyed {
                start,
                end: u32::try_from(j + 1).ok()?,
                key,
                a: u32::try_from(id).ok()?,
                b: 0,
                n: 0,
                kinds: 0,
                target: [0; 3],
            });
            return Some(j + 1);
        }
        Key::Calls | Key::Jump { conditional: false } => {
            let (count, j) = digits(data, v)?;
            (u32::try_from(count).ok()?, 0, j)
        }
        Key::Jump { conditional: true } => {
            let (followed, j) = digits(data, v)?;
            if data[j] != b'/' {
                return None;
            }
            let (executed, j) = digits(data, j + 1)?;
            (
                u32::try_from(followed).ok()?,
                u32::try_from(executed).ok()?,
                j,
            )
        }
    };
    // The target: subpositions each after one space, then at most one
    // space before the newline.
    let (mut n, mut kinds) = (0u8, 0u8);
    let (mut t0, mut t1, mut t2) = (0u32, 0u32, 0u32);
    loop {
        if data[i] != b' ' {
            break;
        }
        if data[i + 1] == b'\n' {
            i += 1;
            break;
        }
        let (kind, r) = match data[i + 1] {
            b'*' => (STAR, Some((0, i + 2))),
            b'+' => (PLUS, number(data, i + 2)),
            b'-' => (MINUS, number(data, i + 2)),
            _ => (ABS, number(data, i + 1)),
        };
        let (x, j) = r?;
        let x = u32::try_from(x).ok()?;
        match n {
            0 => t0 = x,
            1 => t1 = x,
            2 => t2 = x,
            _ => return None,
        }
        kinds |= kind << (2 * n);
        n += 1;
        i = j;
    }
    if i >= len || data[i] != b'\n' {
        return None;
    }
    out.push(Keyed {
        start,
        end: u32::try_from(i).ok()?,
        key,
        a,
        b,
        n,
        kinds,
        target: [t0, t1, t2],
    });
    Some(i)
}

/// The numbers of the cost line at `data[p..]`, separated by single spaces
/// (one more may end the line), each as [`super::fast::subposition_at`]
/// reads it; `None` (and `values` as before) for anything else, and for
/// lines that do not fit a [`Line`].
#[inline(always)]
fn decode(data: &[u8], p: usize, len: usize, values: &mut [u32], nv: &mut usize) -> Option<Line> {
    let first = *nv;
    let mut n = first;
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
        // Never out of range (see `Chunk::decode`); a line is declined
        // rather than a panic if it were.
        let Some(slot) = values.get_mut(n) else {
            break false;
        };
        *slot = v;
        n += 1;
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
        return None;
    }
    debug_assert_eq!(n - first, count);
    *nv = n;
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
    /// How many times the parser found no chunk ready and waited.
    waits: Arc<AtomicU64>,
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
        let next = match self.rx.try_recv() {
            Ok(item) => Ok(item),
            Err(_) => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                self.rx.recv()
            }
        };
        match next {
            Ok(Ok(mut chunk)) => {
                if !chunk.decoded {
                    chunk.decode();
                }
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
                values: &c.values[..c.nvalues],
                cursor: 0,
                value: 0,
                defs: &c.defs,
                def: 0,
                keyed: &c.keyed,
                next_keyed: 0,
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
    keyed: &'c [Keyed],
    /// The next keyed line that may be asked for.
    next_keyed: usize,
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

    /// The cost line at `p` read against `last` with `np` positions, as
    /// [`super::fast::scan_cost_line`] would read its text: its positions,
    /// its number of counts (in `costs`) and its end.
    #[inline(always)]
    pub(super) fn cost_line<C: Cost>(
        &mut self,
        p: usize,
        np: usize,
        last: [u64; 3],
        costs: &mut [C],
    ) -> Option<([u64; 3], usize, usize)> {
        let (line, values) = self.at(p)?;
        let (pos, n) = apply(line, values, np, last, costs)?;
        Some((pos, n, p + usize::from(line.len)))
    }

    /// The decoded keyed line starting at `p`, if any.
    #[inline(always)]
    pub(super) fn keyed_at(&mut self, p: usize) -> Option<Keyed> {
        while let Some(&k) = self.keyed.get(self.next_keyed) {
            let start = k.start as usize;
            if start >= p {
                return (start == p).then_some(k);
            }
            self.next_keyed += 1;
        }
        None
    }

    /// At every `n`th keyed line, the `n` keyed lines after the next `n`
    /// (fewer at the chunk's end), so that the parser can touch what it
    /// will need for them early and together.
    #[inline(always)]
    pub(super) fn keyed_batch(&self, n: usize) -> Option<&[Keyed]> {
        batch(self.keyed, self.next_keyed, n)
    }

    /// At every `n`th definition, the `n` definitions after the next `n`
    /// (as [`Decoded::keyed_batch`]).
    #[inline(always)]
    pub(super) fn def_batch(&self, n: usize) -> Option<&[NameDef]> {
        batch(self.defs, self.def, n)
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

/// When `at` is a multiple of `n`, the `n` items of `items` after the
/// next `n` (fewer, or none, at its end).
#[inline(always)]
fn batch<T>(items: &[T], at: usize, n: usize) -> Option<&[T]> {
    if !at.is_multiple_of(n) {
        return None;
    }
    let start = (at + n).min(items.len());
    Some(&items[start..(start + n).min(items.len())])
}

/// Starts the reading thread in `scope` and returns the parser's end of it.
///
/// Reading and decoding a chunk takes more CPU than parsing it when the
/// sink does little (`tally check` on cc1's profile: about 58 % against
/// 42 %), so the parser would wait for every chunk. The reading thread
/// therefore hands over the next chunk undecoded whenever the parser has
/// waited since the last one it left undecoded, and the parser decodes
/// it: the share each thread decodes follows which of them is behind,
/// for any sink and any mix of lines, and a parser that never waits (a
/// sink that sums as it goes) gets every chunk decoded.
pub(super) fn start<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    mut lines: Lines,
    path: &'env Path,
) -> Piped<'env> {
    // Two chunks in flight: one being parsed, one being decoded.
    let (tx, rx) = mpsc::sync_channel::<Result<Chunk, Error>>(1);
    let (back, spare) = mpsc::channel::<Chunk>();
    let waits = Arc::new(AtomicU64::new(0));
    let parser_waits = Arc::clone(&waits);
    scope.spawn(move || {
        let mut seen = 0;
        loop {
            let mut chunk = spare.try_recv().unwrap_or_default();
            let item = match lines.next_chunk_into(&mut chunk.data) {
                Ok(Some(len)) => {
                    chunk.len = len;
                    let waited = parser_waits.load(Ordering::Relaxed);
                    chunk.decoded = waited == seen;
                    seen = waited;
                    if chunk.decoded {
                        chunk.decode();
                    }
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
        waits,
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
        if self.ne == 1 {
            match self.np {
                1 => return self.decoded_run_one::<1>(dec, p, len),
                2 => return self.decoded_run_one::<2>(dec, p, len),
                3 => return self.decoded_run_one::<3>(dec, p, len),
                _ => {}
            }
        }
        let np = self.np;
        self.cost_run(p, len, |p, last, costs| dec.cost_line(p, np, last, costs))
    }

    /// [`Parser::decoded_run`] for one event and `NP` positions (see
    /// [`Parser::one_event_run`]).
    #[inline(always)]
    fn decoded_run_one<const NP: usize>(
        &mut self,
        dec: &mut Decoded<'_>,
        p: usize,
        len: usize,
    ) -> usize {
        self.one_event_run::<NP>(p, len, |p, last| {
            let (line, v) = dec.at(p)?;
            let (pos, c) = apply_one::<NP>(line, v, last)?;
            Some((pos, c.map(u64::from), p + usize::from(line.len)))
        })
    }
}

/// The positions (from `last`) and the count, if any, of a decoded line
/// with `NP` positions and at most one count; `None` where
/// [`super::fast::scan_cost_line`] would decline the line for one event.
#[inline(always)]
fn apply_one<const NP: usize>(
    line: Line,
    v: &[u32],
    last: [u64; 3],
) -> Option<([u64; 3], Option<u32>)> {
    if v.len() > NP + 1 {
        return None;
    }
    Some((positions(line, v, NP, last)?, v.get(NP).copied()))
}

/// The first `np` values of a decoded line as positions, from `last`;
/// `None` if the line has fewer, if a value after them is relative or
/// repeated (not a count), or if a relative position leaves the range.
#[inline(always)]
fn positions(line: Line, v: &[u32], np: usize, last: [u64; 3]) -> Option<[u64; 3]> {
    if v.len() < np || line.kinds >> (2 * np) != 0 {
        return None;
    }
    step(line.kinds, v, np, last)
}

/// The first `np` of `values`, of the kinds in `kinds` (two bits each),
/// as positions from `last`; `None` if a relative one leaves the range.
#[inline(always)]
fn step(kinds: u8, values: &[u32], np: usize, last: [u64; 3]) -> Option<[u64; 3]> {
    let mut pos = last;
    for (k, slot) in pos.iter_mut().enumerate().take(np) {
        let x = u64::from(values[k]);
        *slot = match (kinds >> (2 * k)) & 3 {
            ABS => x,
            PLUS => slot.checked_add(x)?,
            MINUS => slot.checked_sub(x)?,
            _ => *slot,
        };
    }
    Some(pos)
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
    if count.saturating_sub(np) > costs.len() {
        return None;
    }
    let pos = positions(line, v, np, last)?;
    for (slot, &x) in costs.iter_mut().zip(&v[np..]) {
        *slot = C::from_u64(u64::from(x))?;
    }
    Some((pos, count - np))
}
