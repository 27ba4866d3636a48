//! The Cachegrind format.
//!
//! Cachegrind files are a subset of the Callgrind format (line positions,
//! `fl=`/`fn=` and count lines, a trailing `summary:`, `.` for zero), so they
//! are read by the Callgrind reader, which tells them apart (see
//! [`tally_model::Format`]). This module writes them: self costs per file,
//! function and line, from any profile.

pub mod flat;

use crate::callgrind::writer::{push_one_line, refusal, unwritable};
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use tally_model::{Cost, FileId, Positions, Profile, SymbolId};

/// Appends a space and `c`. Most counts of a Cachegrind file are one digit
/// (three in four are 0): those take one two-byte append.
#[inline]
fn push_spaced<C: Cost>(buf: &mut Vec<u8>, c: C) {
    if c >= C::ZERO && c.magnitude() < 10 {
        buf.extend_from_slice(&[b' ', b'0' + c.magnitude() as u8]);
    } else {
        buf.push(b' ');
        c.write_to(buf);
    }
}

/// The error of [`write()`] when a count summed per file, function and
/// line (or a total) does not fit:
/// [`crate::Error::CachegrindSumOverflow`] inside an [`io::Error`].
fn sum_overflow() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        crate::Error::CachegrindSumOverflow,
    )
}

/// Writes a profile as a Cachegrind file.
///
/// A single-part, line-level profile is written line for line in its own
/// order, so Cachegrind files round-trip exactly. Anything else (instruction
/// positions, several parts) is summed per file, function and line and
/// written sorted by file, function and line, as Cachegrind sorts. Call arcs
/// and jumps have no place in the format and are left out. Every count line
/// carries all counts, as cg_merge requires.
///
/// A count summed per file, function and line (or a total) that does not
/// fit is an [`io::Error`] whose inner error is
/// [`crate::Error::CachegrindSumOverflow`]: the profile's fault, not the
/// output's, so that callers can name the inputs.
///
/// Names are written as Valgrind writes them, `???` for an unknown (empty)
/// one. A name that starts like a compressed one (`(` and a digit), which
/// tally's reader would take for one, is written in Callgrind's compressed
/// form `(id) name`; a name no reader would read back (a line break, a
/// space or tab at its start, a carriage return at its end) is refused:
/// [`crate::Error::NameNotWritable`] inside an [`io::Error`].
pub fn write<C: Cost>(profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let ne = profile.events.len();
    if let Some(first) = profile.parts.first() {
        for (t, v) in &first.info.desc {
            buf.extend_from_slice(b"desc: ");
            push_one_line(&mut buf, t);
            buf.push(b':');
            push_one_line(&mut buf, v);
            buf.push(b'\n');
        }
    }
    let cmd = profile.parts.iter().find_map(|p| p.info.cmd.as_deref());
    buf.extend_from_slice(b"cmd: ");
    push_one_line(&mut buf, cmd.unwrap_or(b""));
    buf.push(b'\n');
    buf.extend_from_slice(b"events:");
    for e in profile.events.recorded() {
        buf.push(b' ');
        buf.extend_from_slice(e.name.as_bytes());
    }
    buf.push(b'\n');
    // Header lines of no known kind, kept by the reader: after `events:`,
    // where cg_annotate skips them (before it, it stops), so that the file
    // reads back with them.
    if let Some(first) = profile.parts.first() {
        for line in &first.info.other {
            buf.extend_from_slice(line);
            buf.push(b'\n');
        }
    }

    let names = &profile.names;
    let mut cur: Option<(FileId, SymbolId)> = None;
    let mut ids = Compressed::default();
    let mut refused: Option<io::Error> = None;
    let mut emit = |buf: &mut Vec<u8>, file: FileId, sym: SymbolId, line: u64, costs: &[C]| {
        if refused.is_some() {
            return;
        }
        if cur.map(|c| c.0) != Some(file) {
            let name = name_or_unknown(names.files.get(file.0));
            if let Err(why) = ids.push(buf, b"fl=", 0, name) {
                refused = Some(refusal("Cachegrind", "file", name, why));
                return;
            }
        }
        if cur != Some((file, sym)) {
            let name = name_or_unknown(names.symbols.get(sym.0));
            if let Err(why) = ids.push(buf, b"fn=", 1, name) {
                refused = Some(refusal("Cachegrind", "function", name, why));
                return;
            }
        }
        cur = Some((file, sym));
        // Room for the whole line at once: the pushes below then never
        // grow the buffer.
        buf.reserve(21 * (ne + 1) + 1);
        line.write_to(buf);
        let given = costs.len().min(ne);
        for &c in &costs[..given] {
            push_spaced(buf, c);
        }
        for _ in given..ne {
            buf.extend_from_slice(b" 0");
        }
        buf.push(b'\n');
    };

    let line_index = profile.positions.line();
    let stream = profile.positions == Positions::LINE && profile.parts.len() == 1;
    let mut error = None;
    if stream {
        profile.parts[0].lines.for_each(|l| {
            let sym = names.key(l.function).name;
            emit(&mut buf, l.file, sym, l.positions[0], l.costs);
            if buf.len() >= 1 << 16 && error.is_none() {
                error = out.write_all(&buf).err();
                buf.clear();
            }
        });
    } else {
        let mut index: FxHashMap<(FileId, SymbolId, u64), usize> = FxHashMap::default();
        let mut keys: Vec<(FileId, SymbolId, u64)> = Vec::new();
        let mut costs: Vec<C> = Vec::new();
        let mut overflow = false;
        for part in &profile.parts {
            part.lines.for_each(|l| {
                let line = line_index.map_or(0, |i| l.positions[i]);
                let key = (l.file, names.key(l.function).name, line);
                let i = *index.entry(key).or_insert_with(|| {
                    keys.push(key);
                    costs.extend(std::iter::repeat_n(C::ZERO, ne));
                    keys.len() - 1
                });
                for (a, &b) in costs[i * ne..(i + 1) * ne].iter_mut().zip(l.costs) {
                    match a.checked_add(b) {
                        Some(v) => *a = v,
                        None => overflow = true,
                    }
                }
            });
        }
        if overflow {
            return Err(sum_overflow());
        }
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| {
            let (fa, sa, la) = keys[a];
            let (fb, sb, lb) = keys[b];
            (names.files.get(fa.0), names.symbols.get(sa.0), la).cmp(&(
                names.files.get(fb.0),
                names.symbols.get(sb.0),
                lb,
            ))
        });
        for i in order {
            let (f, s, l) = keys[i];
            emit(&mut buf, f, s, l, &costs[i * ne..(i + 1) * ne]);
            if buf.len() >= 1 << 16 {
                out.write_all(&buf)?;
                buf.clear();
            }
        }
    }
    if let Some(e) = refused.or(error) {
        return Err(e);
    }

    let totals = match (&profile.parts[..], stream) {
        ([p], true) if p.info.totals.is_some() => p.info.totals.clone().unwrap_or_default(),
        _ => profile.totals().ok_or_else(sum_overflow)?,
    };
    buf.extend_from_slice(b"summary:");
    for i in 0..ne {
        buf.push(b' ');
        totals.get(i).copied().unwrap_or(C::ZERO).write_to(&mut buf);
    }
    buf.push(b'\n');
    out.write_all(&buf)?;
    out.flush()
}

/// Cachegrind writes `???` for unknown files and functions.
fn name_or_unknown(n: &[u8]) -> &[u8] {
    if n.is_empty() { b"???" } else { n }
}

/// The ids of the names written compressed, files and functions apart.
#[derive(Default)]
struct Compressed {
    ids: [FxHashMap<Vec<u8>, usize>; 2],
}

impl Compressed {
    /// Writes `key` and `name` (files are `space` 0, functions 1) as one
    /// line, or says why the name cannot be written.
    fn push(
        &mut self,
        buf: &mut Vec<u8>,
        key: &[u8],
        space: usize,
        name: &[u8],
    ) -> Result<(), &'static str> {
        if let Some(why) = unwritable(name) {
            return Err(why);
        }
        buf.extend_from_slice(key);
        if name.len() >= 2 && name[0] == b'(' && name[1].is_ascii_digit() {
            let ids = &mut self.ids[space];
            let next = ids.len() + 1;
            let id = *ids.entry(name.to_vec()).or_insert(next);
            buf.push(b'(');
            (id as u64).write_to(buf);
            buf.push(b')');
            if id != next {
                buf.push(b'\n');
                return Ok(());
            }
            buf.push(b' ');
        }
        buf.extend_from_slice(name);
        buf.push(b'\n');
        Ok(())
    }
}

/// The Cachegrind format, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Cachegrind;

impl<C: Cost> crate::shape::WriteProfile<C> for Cachegrind {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, out)
    }
}
