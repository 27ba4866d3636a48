//! Merge and diff of Cachegrind files as Valgrind writes them, straight
//! from their bytes: what tally-analysis's combiner and the Cachegrind
//! writer ([`super::write`]) make of them, byte for byte, without building
//! a profile (`tally merge` and `tally diff` take this way when they can).
//!
//! A merge of large Cachegrind files spends most of its time making
//! records of lines that it then writes back unchanged: a (file, function)
//! block that only one input has, its lines in increasing order and
//! written as Cachegrind writes numbers, is copied as it is. Only blocks
//! that several inputs share (or whose lines repeat) are parsed again and
//! summed line by line. A diff per function needs each block's sums only,
//! which the scan of each input makes.
//!
//! The scan takes only the plain form Valgrind writes (`desc:`, `cmd:` and
//! `events:` headers, `fl=` and `fn=` lines with plain names, count lines
//! of every event, a closing `summary:` that agrees with the counts) and
//! declines anything else ([`FlatInput::scan`] gives `None`); the caller
//! then takes the general way, which has the warnings and errors for it.
//! So does a plan whose sums would not fit ([`merge_plan`], [`diff_plan`]).

use rustc_hash::FxHashMap;
use std::hash::Hasher;
use std::io::{self, Write};
use tally_model::Cost;

/// A byte range of the input.
type Span = (usize, usize);

/// The hash of a block's (file, function) names, made once by the thread
/// that scans its input: the blocks are then matched by it without
/// reading their names again, which lie all over the inputs.
fn names_hash((file, function): (&[u8], &[u8])) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(file);
    h.write_u8(0xff);
    h.write(function);
    h.finish()
}

/// Blocks by the hash of their names.
#[derive(Default)]
struct Index(FxHashMap<u64, usize>);

impl Index {
    /// The block of `hash`, if `same` says it has these names; `None` for
    /// another block of the same hash, which the general way then takes.
    fn find(&self, hash: u64, same: impl FnOnce(usize) -> bool) -> Option<Option<usize>> {
        match self.0.get(&hash) {
            Some(&b) if same(b) => Some(Some(b)),
            Some(_) => None,
            None => Some(None),
        }
    }

    fn insert(&mut self, hash: u64, b: usize) {
        self.0.insert(hash, b);
    }
}

/// One (file, function) block of an input, in the order its first line
/// came.
struct Block {
    /// The hash of its names ([`names_hash`]).
    hash: u64,
    file: Span,
    function: Span,
    /// The first run of its count lines (whole lines, each ending in a
    /// line break); a block met again has more in [`FlatInput::more`],
    /// from `next` on.
    first: Span,
    /// The block's next run in [`FlatInput::more`], or [`NONE`].
    next: u32,
    /// Its last run in [`FlatInput::more`] (where the next one is linked),
    /// or [`NONE`].
    last: u32,
    /// One run of lines, their line numbers strictly increasing.
    sorted: bool,
    /// Every line written as Cachegrind writes it: a sorted block's
    /// output is its bytes.
    canonical: bool,
}

/// No link: the end of a list.
const NONE: u32 = u32::MAX;

/// A Cachegrind file read into memory and scanned (see the module
/// documentation).
pub struct FlatInput {
    bytes: Vec<u8>,
    /// Each `desc:` line's value (after `desc: `).
    desc: Vec<Span>,
    /// The `cmd:` line's value as the reader keeps it (one space dropped).
    cmd: Span,
    events: Vec<Span>,
    blocks: Vec<Block>,
    /// The runs of lines after a block's first, each with the next of its
    /// block (rare: only a block met again has them).
    more: Vec<(Span, u32)>,
    /// Each block's sums, `events` per block.
    sums: Vec<u64>,
    totals: Vec<u64>,
}

/// The name on a `fl=` or `fn=` line, if the general reader reads it back
/// as these same bytes and the writer writes it so.
fn plain_name(name: &[u8]) -> bool {
    match (name.first(), name.last()) {
        (None, _) => false,
        (Some(b' ' | b'\t'), _) | (_, Some(b' ' | b'\t')) => false,
        // Compressed names `(id) name`: the general way tells them apart.
        (Some(b'('), _) if name.get(1).is_some_and(u8::is_ascii_digit) => false,
        _ => name.iter().all(|&b| b >= 0x20 && b != 0x7f),
    }
}

/// The number at `bytes[*i..]`, `*i` moved past it; `canonical` cleared
/// for a leading zero. Eight bytes are looked at once (SWAR): a count
/// line is mostly short numbers, and a byte at a time costs a branch each.
#[inline(always)]
fn field(bytes: &[u8], i: &mut usize, canonical: &mut bool) -> Option<u64> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    if let Some(w) = bytes.get(*i..).and_then(|r| r.first_chunk::<8>()) {
        // Digits become 0..=9; every other byte is 10 or more, and sets
        // its top bit in `x | x + 0x76`.
        let x = u64::from_le_bytes(*w) ^ (ONES * 0x30);
        let stops = (x | x.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
        let len = (stops.trailing_zeros() / 8) as usize;
        match len {
            0 => return None,
            // Three counts in four are one digit.
            1 => {
                *i += 1;
                return Some(x & 0xff);
            }
            2..=7 => {
                if x & 0xff == 0 {
                    *canonical = false;
                }
                // The digits moved to the top bytes, zeros before them,
                // then combined in pairs, fours and eights.
                let v = x << (64 - 8 * len);
                let v = v.wrapping_mul(10 * 256 + 1) >> 8;
                let v = (v & 0x00ff_00ff_00ff_00ff).wrapping_mul(100 * 65536 + 1) >> 16;
                let v = (v & 0x0000_ffff_0000_ffff).wrapping_mul(10000 * (1 << 32) + 1) >> 32;
                *i += len;
                return Some(v);
            }
            _ => {}
        }
    }
    long_field(bytes, i, canonical)
}

/// [`field`] a byte at a time: numbers of eight digits or more, and the
/// last bytes of the input.
#[cold]
fn long_field(bytes: &[u8], i: &mut usize, canonical: &mut bool) -> Option<u64> {
    let start = *i;
    let mut v: u64 = 0;
    while let Some(&b) = bytes.get(*i) {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(u64::from(d));
        *i += 1;
    }
    let digits = &bytes[start..*i];
    match digits.len() {
        0 => return None,
        1 => return Some(v),
        // Up to 19 digits always fit; 20 may not.
        20.. => v = tally_model::parse_u64(digits).ok()?,
        _ => {}
    }
    if digits[0] == b'0' {
        *canonical = false;
    }
    Some(v)
}

/// Parses a count line `LINE C1 … Cn` of `costs.len()` counts into
/// `costs`: its line number and whether it is written as Cachegrind
/// writes it (no leading zeros). `None` for anything else.
#[inline]
fn count_line(line: &[u8], costs: &mut [u64]) -> Option<(u64, bool)> {
    let mut i = 0;
    let mut canonical = true;
    let number = field(line, &mut i, &mut canonical)?;
    for c in costs.iter_mut() {
        if line.get(i) != Some(&b' ') {
            return None;
        }
        i += 1;
        *c = field(line, &mut i, &mut canonical)?;
    }
    (i == line.len()).then_some((number, canonical))
}

/// [`count_line`] for the scan: the line at `bytes[at..]`, its counts
/// added to `sums` (`None` if one would not fit), its line break's offset
/// returned with its number and form. Reading from the whole buffer spares
/// a search for each line's end.
#[inline(always)]
fn add_count_line(bytes: &[u8], at: usize, sums: &mut [u64]) -> Option<(u64, bool, usize)> {
    let mut i = at;
    let mut canonical = true;
    let number = field(bytes, &mut i, &mut canonical)?;
    let mut k = 0;
    while k < sums.len() {
        if let Some(four) = sums.get_mut(k..k + 4)
            && let Some(d) = four_digits(bytes, i)
        {
            for (s, d) in four.iter_mut().zip(d) {
                *s = s.checked_add(d)?;
            }
            i += 8;
            k += 4;
            continue;
        }
        let s = &mut sums[k];
        if bytes.get(i) != Some(&b' ') {
            return None;
        }
        i += 1;
        *s = s.checked_add(field(bytes, &mut i, &mut canonical)?)?;
        k += 1;
    }
    (bytes.get(i) == Some(&b'\n')).then_some((number, canonical, i))
}

/// Four counts of one digit each at `bytes[at..]`, ` d d d d` and then a
/// space or a line break, read as one word: most counts are one digit
/// (most are zero), and this takes four of them with one test.
#[inline(always)]
fn four_digits(bytes: &[u8], at: usize) -> Option<[u64; 4]> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    let w = bytes.get(at..)?.first_chunk::<9>()?;
    if !matches!(w[8], b' ' | b'\n') {
        return None;
    }
    // Spaces become 0 and digits 0..=9; any other byte is 10 or more, and
    // sets its top bit in `x | x + 0x76`.
    let x = u64::from_le_bytes(*w.first_chunk::<8>()?) ^ u64::from_le_bytes(*b" 0 0 0 0");
    let wide = (x | x.wrapping_add(ONES * 0x76)) & (ONES * 0x80);
    if wide != 0 || x & 0x00ff_00ff_00ff_00ff != 0 {
        return None;
    }
    Some([x >> 8 & 0xff, x >> 24 & 0xff, x >> 40 & 0xff, x >> 56])
}

impl FlatInput {
    /// The runs of whole lines of a block, in their order.
    fn runs<'s>(&'s self, block: &Block) -> impl Iterator<Item = Span> + 's {
        let mut next = block.next;
        std::iter::once(block.first).chain(std::iter::from_fn(move || {
            let &(span, after) = self.more.get(next as usize)?;
            next = after;
            Some(span)
        }))
    }

    /// The count lines of a block, without their line breaks.
    fn lines<'s>(&'s self, block: &Block) -> impl Iterator<Item = &'s [u8]> + 's {
        self.runs(block)
            .flat_map(|(s, e)| self.bytes[s..e - 1].split(|&c| c == b'\n'))
    }

    /// Scans a Cachegrind file's bytes; `None` if it is not in the plain
    /// form this way takes.
    pub fn scan(bytes: Vec<u8>) -> Option<FlatInput> {
        let mut input = FlatInput {
            bytes,
            desc: Vec::new(),
            cmd: (0, 0),
            events: Vec::new(),
            blocks: Vec::new(),
            more: Vec::new(),
            sums: Vec::new(),
            totals: Vec::new(),
        };
        input.scan_bytes()?;
        Some(input)
    }

    fn scan_bytes(&mut self) -> Option<()> {
        let bytes = &self.bytes;
        let mut at = 0;
        let mut cmd = None;
        let line_of = |at: &mut usize| -> Option<Span> {
            let end = *at + memchr::memchr(b'\n', &bytes[*at..])?;
            let span = (*at, end);
            *at = end + 1;
            Some(span)
        };
        // The header: `desc:` lines, one `cmd:`, then `events:`.
        loop {
            let (s, e) = line_of(&mut at)?;
            let line = &bytes[s..e];
            if !line.iter().all(|&b| b >= 0x20 && b != 0x7f) {
                return None;
            }
            if let Some(v) = line.strip_prefix(b"desc: ") {
                // Kept as `TYPE:VALUE` from its first non-space byte.
                if v.first().is_none_or(|b| b.is_ascii_whitespace()) || !v.contains(&b':') {
                    return None;
                }
                self.desc.push((s + 6, e));
            } else if let Some(v) = line.strip_prefix(b"cmd:") {
                if cmd.is_some() {
                    return None;
                }
                let skip = usize::from(v.first() == Some(&b' '));
                cmd = Some((s + 4 + skip, e));
            } else if let Some(v) = line.strip_prefix(b"events:") {
                let mut p = s + 7;
                for name in v.split(|&b| b == b' ') {
                    if !name.is_empty() {
                        if !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
                            return None;
                        }
                        self.events.push((p, p + name.len()));
                    }
                    p += name.len() + 1;
                }
                break;
            } else {
                return None;
            }
        }
        self.cmd = cmd?;
        let ne = self.events.len();
        let names: Vec<&[u8]> = self.events.iter().map(|&(s, e)| &bytes[s..e]).collect();
        if ne == 0 || (1..ne).any(|i| names[..i].contains(&names[i])) {
            return None;
        }
        let mut index = Index::default();
        // The current names, whether a `fn=` has followed the last `fl=`,
        // and the run of count lines in progress: its block (found at its
        // first line), whether that block is new, and where it started.
        let mut file: Option<Span> = None;
        let mut function: Option<Span> = None;
        let mut current: Option<(usize, bool, usize)> = None;
        let mut last_line: Option<u64> = None;
        let mut summary = None;
        // Ends the run in progress at `end`.
        let end_run = |blocks: &mut Vec<Block>, more: &mut Vec<(Span, u32)>, run, end| {
            let Some((b, new, start)) = run else { return };
            let block: &mut Block = &mut blocks[b];
            if new {
                block.first.1 = end;
                return;
            }
            let k = more.len() as u32;
            more.push(((start, end), NONE));
            match block.last {
                NONE => block.next = k,
                l => more[l as usize].1 = k,
            }
            block.last = k;
        };
        while at < bytes.len() {
            if bytes[at].is_ascii_digit() {
                let b = match current {
                    Some((b, _, _)) => b,
                    None => {
                        let (f, g) = (file?, function?);
                        let key = (&bytes[f.0..f.1], &bytes[g.0..g.1]);
                        let hash = names_hash(key);
                        let blocks = &mut self.blocks;
                        let same = |b: usize| {
                            let o = &blocks[b];
                            (
                                &bytes[o.file.0..o.file.1],
                                &bytes[o.function.0..o.function.1],
                            ) == key
                        };
                        let (b, new) = match index.find(hash, same)? {
                            Some(b) => {
                                blocks[b].sorted = false;
                                (b, false)
                            }
                            None => {
                                index.insert(hash, blocks.len());
                                blocks.push(Block {
                                    hash,
                                    file: f,
                                    function: g,
                                    first: (at, at),
                                    next: NONE,
                                    last: NONE,
                                    sorted: true,
                                    canonical: true,
                                });
                                self.sums.extend(std::iter::repeat_n(0, ne));
                                (blocks.len() - 1, true)
                            }
                        };
                        last_line = None;
                        current = Some((b, new, at));
                        b
                    }
                };
                let sums = &mut self.sums[b * ne..(b + 1) * ne];
                let (number, canonical, end) = add_count_line(bytes, at, sums)?;
                at = end + 1;
                let block = &mut self.blocks[b];
                block.canonical &= canonical;
                if last_line.is_some_and(|l| l >= number) {
                    block.sorted = false;
                }
                last_line = Some(number);
                continue;
            }
            end_run(&mut self.blocks, &mut self.more, current.take(), at);
            let (s, e) = line_of(&mut at)?;
            let line = &bytes[s..e];
            if let Some(name) = line.strip_prefix(b"fl=") {
                if !plain_name(name) || file.is_some() && function.is_none() {
                    return None;
                }
                file = Some((s + 3, e));
                function = None;
            } else if let Some(name) = line.strip_prefix(b"fn=") {
                if !plain_name(name) || file.is_none() {
                    return None;
                }
                function = Some((s + 3, e));
            } else if let Some(v) = line.strip_prefix(b"summary: ") {
                let mut stated = vec![0u64; ne - 1];
                let (first, _) = count_line(v, &mut stated)?;
                stated.insert(0, first);
                summary = Some(stated);
                if at != bytes.len() {
                    return None;
                }
            } else {
                return None;
            }
        }
        end_run(&mut self.blocks, &mut self.more, current.take(), at);
        // A `fl=` with no `fn=` after it, an empty body or a summary that
        // does not state the counts' totals: the general way says so.
        if file.is_some() && function.is_none() || self.blocks.is_empty() {
            return None;
        }
        let mut totals = vec![0u64; ne];
        for sums in self.sums.chunks_exact(ne) {
            for (t, &v) in totals.iter_mut().zip(sums) {
                *t = t.checked_add(v)?;
            }
        }
        self.totals = totals;
        (summary? == self.totals).then_some(())
    }

    fn span(&self, s: Span) -> &[u8] {
        &self.bytes[s.0..s.1]
    }

    fn event_names(&self) -> Vec<&[u8]> {
        self.events.iter().map(|&s| self.span(s)).collect()
    }

    fn key(&self, b: usize) -> (&[u8], &[u8]) {
        let block = &self.blocks[b];
        (self.span(block.file), self.span(block.function))
    }
}

/// What a merge writes: every block of the output, in first-seen order,
/// with the inputs' blocks that go into it.
pub struct MergePlan<'a> {
    inputs: &'a [FlatInput],
    /// Each output block's first part and last part (in `parts`).
    blocks: Vec<(u32, u32)>,
    /// The inputs' blocks: (input, block, the next part of the same output
    /// block or [`NONE`]); one list, as most output blocks have one part.
    parts: Vec<(u32, u32, u32)>,
    totals: Vec<u64>,
}

/// Plans the merge of `inputs` in the order given: `None` unless they all
/// record the same events in the same order and their sums fit.
pub fn merge_plan(inputs: &[FlatInput]) -> Option<MergePlan<'_>> {
    let first = inputs.first()?;
    let names = first.event_names();
    let mut totals = vec![0u64; names.len()];
    let count: usize = inputs.iter().map(|i| i.blocks.len()).sum();
    let mut index = Index::default();
    index.0.reserve(count);
    let mut blocks: Vec<(u32, u32)> = Vec::with_capacity(count);
    let mut parts: Vec<(u32, u32, u32)> = Vec::with_capacity(count);
    for (i, input) in inputs.iter().enumerate() {
        if input.event_names() != names {
            return None;
        }
        for (t, &v) in totals.iter_mut().zip(&input.totals) {
            *t = t.checked_add(v)?;
        }
        for b in 0..input.blocks.len() {
            let key = input.key(b);
            let same = |o: usize| {
                let (j, c, _) = parts[blocks[o].0 as usize];
                inputs[j as usize].key(c as usize) == key
            };
            let found = index.find(input.blocks[b].hash, same)?;
            let p = parts.len() as u32;
            parts.push((i as u32, b as u32, NONE));
            match found {
                Some(o) => {
                    let last = blocks[o].1;
                    parts[last as usize].2 = p;
                    blocks[o].1 = p;
                }
                None => {
                    index.insert(input.blocks[b].hash, blocks.len());
                    blocks.push((p, p));
                }
            }
        }
    }
    Some(MergePlan {
        inputs,
        blocks,
        parts,
        totals,
    })
}

/// The output: formatted lines gathered in a buffer written out in large
/// blocks, and runs of input bytes written as they are, from the input,
/// runs that follow each other in the input joined into one write.
struct Out<'w, 'a> {
    buf: Vec<u8>,
    out: &'w mut dyn Write,
    /// The run of input bytes not yet written: the input's bytes and the
    /// range.
    pending: Option<(&'a [u8], Span)>,
    /// The (file, function) of the last line written.
    file: Vec<u8>,
    function: Vec<u8>,
}

const CHUNK: usize = 1 << 20;

/// Runs of input at least this long are written from the input; shorter
/// ones are copied into the buffer.
const DIRECT: usize = 1 << 16;

impl<'w, 'a> Out<'w, 'a> {
    fn new(out: &'w mut dyn Write) -> Self {
        Out {
            buf: Vec::with_capacity(CHUNK + (1 << 12)),
            out,
            pending: None,
            file: Vec::new(),
            function: Vec::new(),
        }
    }

    /// Puts the pending run of input in its place, before anything else is
    /// added to the buffer.
    #[inline]
    fn settle(&mut self) -> io::Result<()> {
        let Some((bytes, (s, e))) = self.pending.take() else {
            return Ok(());
        };
        if e - s < DIRECT {
            self.buf.extend_from_slice(&bytes[s..e]);
            self.spill()
        } else {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
            self.out.write_all(&bytes[s..e])
        }
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// `bytes[s..e]` of an input, written as they are.
    fn input(&mut self, bytes: &'a [u8], (s, e): Span) -> io::Result<()> {
        if let Some((b, run)) = &mut self.pending
            && std::ptr::eq(*b, bytes)
            && run.1 == s
        {
            run.1 = e;
            return Ok(());
        }
        self.settle()?;
        self.pending = Some((bytes, (s, e)));
        Ok(())
    }

    /// The `fl=` and `fn=` lines the writer puts before a block's lines.
    fn names(&mut self, file: &[u8], function: &[u8]) -> io::Result<()> {
        self.settle()?;
        let new_file = self.file != file;
        if new_file {
            self.buf.extend_from_slice(b"fl=");
            self.buf.extend_from_slice(file);
            self.buf.push(b'\n');
            self.file = file.to_vec();
        }
        if new_file || self.function != function {
            self.buf.extend_from_slice(b"fn=");
            self.buf.extend_from_slice(function);
            self.buf.push(b'\n');
            self.function = function.to_vec();
        }
        Ok(())
    }

    /// [`Out::names`] for a block of `input`: its `fl=` and `fn=` lines are
    /// input bytes (a plain name is written as read).
    fn input_names(&mut self, input: &'a FlatInput, block: &Block) -> io::Result<()> {
        let (file, function) = (input.span(block.file), input.span(block.function));
        let new_file = self.file != file;
        if new_file {
            self.input(&input.bytes, (block.file.0 - 3, block.file.1 + 1))?;
            self.file.clear();
            self.file.extend_from_slice(file);
        }
        if new_file || self.function != function {
            self.input(&input.bytes, (block.function.0 - 3, block.function.1 + 1))?;
            self.function.clear();
            self.function.extend_from_slice(function);
        }
        Ok(())
    }

    fn count_line<C: Cost>(&mut self, line: u64, costs: &[C]) -> io::Result<()> {
        self.settle()?;
        self.buf.reserve(21 * (costs.len() + 1) + 1);
        line.write_to(&mut self.buf);
        for &c in costs {
            self.buf.push(b' ');
            c.write_to(&mut self.buf);
        }
        self.buf.push(b'\n');
        self.spill()
    }

    fn summary<C: Cost>(mut self, totals: &[C]) -> io::Result<()> {
        self.settle()?;
        self.buf.extend_from_slice(b"summary:");
        for &t in totals {
            self.buf.push(b' ');
            t.write_to(&mut self.buf);
        }
        self.buf.push(b'\n');
        self.out.write_all(&self.buf)?;
        self.out.flush()
    }
}

/// The header lines: `desc` values, the command, the events.
fn header(out: &mut Out<'_, '_>, desc: &[&[u8]], cmd: &[u8], events: &[&[u8]]) {
    for d in desc {
        out.buf.extend_from_slice(b"desc: ");
        out.buf.extend_from_slice(d);
        out.buf.push(b'\n');
    }
    out.buf.extend_from_slice(b"cmd: ");
    out.buf.extend_from_slice(cmd);
    out.buf.push(b'\n');
    out.buf.extend_from_slice(b"events:");
    for e in events {
        out.buf.push(b' ');
        out.buf.extend_from_slice(e);
    }
    out.buf.push(b'\n');
}

impl<'a> MergePlan<'a> {
    /// The lines of a block two inputs share, each in increasing order:
    /// the first's lines with the second's added where they meet, then the
    /// second's others, in their order, without an index.
    fn join<'s>(
        &self,
        out: &mut Out<'_, '_>,
        first: impl Iterator<Item = &'s [u8]>,
        second: impl Iterator<Item = &'s [u8]>,
        costs: &mut [u64],
    ) -> io::Result<()> {
        let ne = costs.len();
        let mut numbers = Vec::new();
        let mut rows = Vec::new();
        for line in second {
            // Scanned before: every line parses.
            if let Some((n, _)) = count_line(line, costs) {
                numbers.push(n);
                rows.extend_from_slice(costs);
            }
        }
        let mut met = vec![false; numbers.len()];
        let mut j = 0;
        for line in first {
            let Some((n, _)) = count_line(line, costs) else {
                continue;
            };
            while j < numbers.len() && numbers[j] < n {
                j += 1;
            }
            if numbers.get(j) == Some(&n) {
                met[j] = true;
                // The totals fit, so every partial sum does.
                for (c, &v) in costs.iter_mut().zip(&rows[j * ne..(j + 1) * ne]) {
                    *c += v;
                }
            }
            out.count_line(n, costs)?;
        }
        for (k, &n) in numbers.iter().enumerate() {
            if !met[k] {
                out.count_line(n, &rows[k * ne..(k + 1) * ne])?;
            }
        }
        Ok(())
    }

    /// Writes the merge as a Cachegrind file.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let first = &self.inputs[0];
        let ne = first.events.len();
        let mut out = Out::new(out);
        let desc: Vec<&[u8]> = first.desc.iter().map(|&s| first.span(s)).collect();
        header(&mut out, &desc, first.span(first.cmd), &first.event_names());
        // The lines of a block summed from several inputs (or repeated):
        // first-seen order, by line number.
        let mut numbers: Vec<u64> = Vec::new();
        let mut rows: Vec<u64> = Vec::new();
        let mut at: FxHashMap<u64, usize> = FxHashMap::default();
        let mut costs = vec![0u64; ne];
        let mut parts: Vec<(u32, u32)> = Vec::new();
        for &(head, _) in &self.blocks {
            let (i, b, next) = self.parts[head as usize];
            let input: &'a FlatInput = &self.inputs[i as usize];
            let block = &input.blocks[b as usize];
            if next == NONE && block.sorted && block.canonical {
                out.input_names(input, block)?;
                out.input(&input.bytes, block.first)?;
                continue;
            }
            let (file, function) = input.key(b as usize);
            out.names(file, function)?;
            parts.clear();
            let mut p = head;
            while p != NONE {
                let (i, b, next) = self.parts[p as usize];
                parts.push((i, b));
                p = next;
            }
            if let [(i, b), (j, c)] = parts[..] {
                let x = &self.inputs[i as usize];
                let y = &self.inputs[j as usize];
                let (xb, yb) = (&x.blocks[b as usize], &y.blocks[c as usize]);
                if xb.sorted && yb.sorted {
                    self.join(&mut out, x.lines(xb), y.lines(yb), &mut costs)?;
                    continue;
                }
            }
            numbers.clear();
            rows.clear();
            at.clear();
            for &(i, b) in &parts {
                let input = &self.inputs[i as usize];
                for line in input.lines(&input.blocks[b as usize]) {
                    // Scanned before: every line parses.
                    let Some((n, _)) = count_line(line, &mut costs) else {
                        continue;
                    };
                    let r = *at.entry(n).or_insert_with(|| {
                        numbers.push(n);
                        rows.extend(std::iter::repeat_n(0, ne));
                        numbers.len() - 1
                    });
                    // The totals fit, so every partial sum does.
                    for (a, &c) in rows[r * ne..(r + 1) * ne].iter_mut().zip(&costs) {
                        *a += c;
                    }
                }
            }
            for (r, &n) in numbers.iter().enumerate() {
                out.count_line(n, &rows[r * ne..(r + 1) * ne])?;
            }
        }
        out.summary(&self.totals)
    }
}

/// What a diff per function writes: B − A of each block's sums, in the
/// order of A's blocks and then B's new ones, unchanged blocks left out.
pub struct DiffPlan<'a> {
    sides: [&'a FlatInput; 2],
    /// The output's lines: (input, block) naming it, and its differences.
    lines: Vec<(u8, u32)>,
    diffs: Vec<i64>,
    totals: Vec<i64>,
    desc: Vec<u8>,
    cmd: Vec<u8>,
}

/// Plans B − A per function (`diff` of Cachegrind files), with the
/// `desc: Files compared:` line naming `labels` as `tally diff` does;
/// `None` unless both record the same events in the same order and every
/// sum fits in `i64`.
pub fn diff_plan<'a>(
    a: &'a FlatInput,
    b: &'a FlatInput,
    labels: [&str; 2],
) -> Option<DiffPlan<'a>> {
    let names = a.event_names();
    if b.event_names() != names {
        return None;
    }
    let ne = names.len();
    // Each record's magnitude, and the sum of all of them, is at most
    // A's total and B's together.
    for (&x, &y) in a.totals.iter().zip(&b.totals) {
        if x.checked_add(y)? > i64::MAX as u64 {
            return None;
        }
    }
    let nonzero = |f: &FlatInput, i: usize| f.sums[i * ne..(i + 1) * ne].iter().any(|&v| v != 0);
    let mut index = Index::default();
    let mut lines: Vec<(u8, u32)> = Vec::new();
    let mut diffs: Vec<i64> = Vec::new();
    for (side, input) in [a, b].into_iter().enumerate() {
        for i in 0..input.blocks.len() {
            if !nonzero(input, i) {
                continue;
            }
            let key = input.key(i);
            let sides = [a, b];
            let same = |o: usize| {
                let (s, c): (u8, u32) = lines[o];
                sides[s as usize].key(c as usize) == key
            };
            let o = match index.find(input.blocks[i].hash, same)? {
                Some(o) => o,
                None => {
                    index.insert(input.blocks[i].hash, lines.len());
                    lines.push((side as u8, i as u32));
                    diffs.extend(std::iter::repeat_n(0, ne));
                    lines.len() - 1
                }
            };
            let sums = &input.sums[i * ne..(i + 1) * ne];
            for (d, &v) in diffs[o * ne..(o + 1) * ne].iter_mut().zip(sums) {
                if side == 0 {
                    *d -= v as i64;
                } else {
                    *d += v as i64;
                }
            }
        }
    }
    let totals = a
        .totals
        .iter()
        .zip(&b.totals)
        .map(|(&x, &y)| y as i64 - x as i64)
        .collect();
    let trim = |f: &FlatInput| f.span(f.cmd).trim_ascii().to_vec();
    let mut cmd = trim(a);
    cmd.extend_from_slice(b"; ");
    cmd.extend_from_slice(&trim(b));
    let label = |l: &str| l.replace('\n', " ");
    Some(DiffPlan {
        sides: [a, b],
        lines,
        diffs,
        totals,
        desc: format!(
            "Files compared:   {}; {}",
            label(labels[0]),
            label(labels[1])
        )
        .into_bytes(),
        cmd,
    })
}

impl DiffPlan<'_> {
    /// Writes the difference as a Cachegrind file.
    pub fn write(&self, out: &mut dyn Write) -> io::Result<()> {
        let ne = self.totals.len();
        let mut out = Out::new(out);
        let desc: &[u8] = &self.desc;
        header(&mut out, &[desc], &self.cmd, &self.sides[0].event_names());
        for (o, &(side, i)) in self.lines.iter().enumerate() {
            let d = &self.diffs[o * ne..(o + 1) * ne];
            if d.iter().all(|&v| v == 0) {
                continue;
            }
            let (file, function) = self.sides[side as usize].key(i as usize);
            out.names(file, function)?;
            out.count_line(0, d)?;
        }
        out.summary(&self.totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The number a byte-at-a-time reading gives: value, digits, and
    /// whether it has a leading zero.
    fn plain(bytes: &[u8]) -> Option<(u64, usize, bool)> {
        let n = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
        let digits = std::str::from_utf8(&bytes[..n]).ok()?;
        let v = digits.parse::<u64>().ok()?;
        Some((v, n, n > 1 && bytes[0] == b'0'))
    }

    /// What [`add_count_line`] gives, a field at a time: the sums, the
    /// line number, whether it is canonical and where its line break is.
    fn plain_line(bytes: &[u8], sums: &mut [u64]) -> Option<(u64, bool, usize)> {
        let end = bytes.iter().position(|&b| b == b'\n')?;
        let mut words = bytes[..end].split(|&b| b == b' ');
        let (number, _, zero) = plain(words.next()?)?;
        let mut canonical = !zero;
        for s in sums.iter_mut() {
            let w = words.next()?;
            let (v, n, zero) = plain(w)?;
            if n != w.len() {
                return None;
            }
            canonical &= !zero;
            *s = s.checked_add(v)?;
        }
        words.next().is_none().then_some((number, canonical, end))
    }

    #[test]
    fn count_lines_sum_as_read_a_field_at_a_time() {
        // Lines of one-digit counts in runs of every length (read four at
        // a time), longer ones, leading zeros, too few or too many
        // fields, stray bytes, and a line break at every place.
        let pieces: [&[u8]; 12] = [
            b"0",
            b"7",
            b"12",
            b"05",
            b"123456789",
            b"x",
            b"",
            b"0 ",
            b"9",
            b"3",
            b"0",
            b"1",
        ];
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % n) as usize
        };
        for _ in 0..20_000 {
            let ne = 1 + next(14);
            let mut line = b"42".to_vec();
            let fields = ne + next(3) - 1;
            for _ in 0..fields {
                line.push(b' ');
                line.extend_from_slice(pieces[next(pieces.len() as u64)]);
            }
            line.extend_from_slice(b"\n5 1 2 3 4 5 6 7 8\n");
            let start = vec![7u64; ne];
            let (mut got, mut want) = (start.clone(), start);
            let r = add_count_line(&line, 0, &mut got);
            let w = plain_line(&line, &mut want);
            assert_eq!(r, w, "{:?}", String::from_utf8_lossy(&line));
            if r.is_some() {
                assert_eq!(got, want, "{:?}", String::from_utf8_lossy(&line));
            }
        }
    }

    #[test]
    fn fields_read_as_numbers_at_every_length_and_position() {
        // Each number at the start of a buffer, followed by each kind of
        // stop, with and without bytes after it (the SWAR and byte ways).
        let mut numbers: Vec<String> = vec!["0".into(), "00".into(), "007".into()];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for len in 1..=20 {
            for _ in 0..50 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let s = x.to_string();
                numbers.push(s[s.len().saturating_sub(len)..].to_string());
            }
        }
        numbers.push(u64::MAX.to_string());
        numbers.push("18446744073709551616".into());
        numbers.push("99999999999999999999".into());
        for n in &numbers {
            for stop in [&b" "[..], b"\n", b"x", b"/", b":", b"\xff", b""] {
                for tail in [&b""[..], b" 1 2 3 4 5 6 7 8"] {
                    let mut bytes = n.as_bytes().to_vec();
                    bytes.extend_from_slice(stop);
                    if !stop.is_empty() {
                        bytes.extend_from_slice(tail);
                    }
                    let (mut i, mut canonical) = (0, true);
                    let got = field(&bytes, &mut i, &mut canonical);
                    let want = plain(&bytes);
                    assert_eq!(got, want.map(|w| w.0), "{n:?} then {stop:?}");
                    if let Some((_, len, zero)) = want {
                        assert_eq!(i, len, "{n:?}");
                        assert_eq!(canonical, !zero, "{n:?}");
                    }
                }
            }
        }
        let (mut i, mut canonical) = (0, true);
        assert_eq!(field(b" 1", &mut i, &mut canonical), None);
    }
}
