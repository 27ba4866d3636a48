//! The fast path for the keyed lines that fill real profiles between the
//! cost lines: names given by an id already defined (`fn=(12)`, `cfn=(7)`,
//! `cfi=(3)`, …), `calls=` and `jump=`/`jcnd=` in the forms Valgrind
//! writes. An instruction-level profile with jumps and
//! `--separate-callers` has one such line for every two or three cost
//! lines, so reading them through the careful path (key search, token
//! splitting, checked parsing) was most of the time.
//!
//! Every function here either reads the whole line and applies exactly what
//! the careful path would, or declines (`None`) before changing anything,
//! so that the careful path reads the line again and reports its errors and
//! warnings with their line numbers. First definitions (`fn=(12) name`),
//! undefined ids, extra numbers, tabs, `\r` and a pending `calls=` or jump
//! are all declined.

use super::fast::{subposition_at, swar_decimal};
use super::pipeline::{Decoded, Keyed};
use super::{Parser, Pending, Space};
use tally_model::{Cost, FileId, FunctionKey, Interner, JumpInfo, ObjectId, Sink, SymbolId};

/// Which context slot a name line sets.
#[derive(Clone, Copy)]
pub(super) enum NameKey {
    Fn,
    Fl,
    Fi,
    Ob,
    Cfn,
    Cfi,
    Cob,
    Jfi,
    Jfn,
}

impl NameKey {
    fn space(self) -> Space {
        match self {
            NameKey::Fn | NameKey::Cfn | NameKey::Jfn => Space::Symbol,
            NameKey::Ob | NameKey::Cob => Space::Object,
            _ => Space::File,
        }
    }
}

/// The keyed lines the fast path reads.
#[derive(Clone, Copy)]
pub(super) enum Key {
    Name(NameKey),
    Calls,
    Jump { conditional: bool },
}

/// The key of a line starting at `data[p]` and the index of its value
/// (after `=`), for the keys read here; dispatched on the first byte.
#[inline(always)]
pub(super) fn key(data: &[u8], p: usize) -> Option<(Key, usize)> {
    let k = |len: usize, key: Key| (data[p + len] == b'=').then_some((key, p + len + 1));
    // `data` is padded past the chunk: reading a few bytes ahead is safe,
    // and a line shorter than its key fails the `=` test.
    let at = |i: usize| data.get(p + i).copied().unwrap_or(0);
    match (at(0), at(1), at(2)) {
        (b'f', b'n', _) => k(2, Key::Name(NameKey::Fn)),
        (b'f', b'l', _) => k(2, Key::Name(NameKey::Fl)),
        (b'f', b'i' | b'e', _) => k(2, Key::Name(NameKey::Fi)),
        (b'o', b'b', _) => k(2, Key::Name(NameKey::Ob)),
        (b'c', b'f', b'n') => k(3, Key::Name(NameKey::Cfn)),
        (b'c', b'f', b'i' | b'l') => k(3, Key::Name(NameKey::Cfi)),
        (b'c', b'o', b'b') => k(3, Key::Name(NameKey::Cob)),
        (b'c', b'a', b'l') if data.get(p..p + 6) == Some(b"calls=") => Some((Key::Calls, p + 6)),
        (b'j', b'f', b'i') => k(3, Key::Name(NameKey::Jfi)),
        (b'j', b'f', b'n') => k(3, Key::Name(NameKey::Jfn)),
        (b'j', b'u', b'm') if data.get(p..p + 5) == Some(b"jump=") => {
            Some((Key::Jump { conditional: false }, p + 5))
        }
        (b'j', b'c', b'n') if data.get(p..p + 5) == Some(b"jcnd=") => {
            Some((Key::Jump { conditional: true }, p + 5))
        }
        _ => None,
    }
}

/// Up to 19 decimal digits at `data[i..]` (padded), ending anywhere.
#[inline(always)]
pub(super) fn digits(data: &[u8], i: usize) -> Option<(u64, usize)> {
    if !data.get(i)?.is_ascii_digit() {
        return None;
    }
    swar_decimal(data, i)
}

/// A first definition `(id) name` at `data[v..]` (after the key's `=`), in
/// the form Valgrind writes (one space, a name that does not start with a
/// space, no `\r`, a `\n` within the chunk): the id and the name's range,
/// the name being what the careful path would take.
#[inline(always)]
pub(super) fn name_def(data: &[u8], v: usize, len: usize) -> Option<(u64, usize, usize)> {
    if data[v] != b'(' {
        return None;
    }
    let (id, j) = digits(data, v + 1)?;
    if data[j] != b')' || data[j + 1] != b' ' {
        return None;
    }
    let s = j + 2;
    if s >= len || matches!(data[s], b' ' | b'\t' | b'\n') {
        return None;
    }
    let end = s + memchr::memchr(b'\n', &data[s..len])?;
    if data[end - 1] == b'\r' {
        return None;
    }
    Some((id, s, end))
}

/// Index of the `\n` that ends the line after optional spaces at `i`, if
/// nothing else follows and it lies within the chunk.
#[inline(always)]
fn line_end(data: &[u8], mut i: usize, len: usize) -> Option<usize> {
    while i < len && data[i] == b' ' {
        i += 1;
    }
    (i < len && data[i] == b'\n').then_some(i)
}

/// How many keyed lines the parser touches the id maps for at once, that
/// many keyed lines ahead (see [`Parser::touch`]).
const BATCH: usize = 16;

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// Reads the keyed line at `data[p..]` if it is one of the common
    /// forms; returns the index after it, or `None` (nothing changed) for
    /// the careful path.
    #[inline]
    pub(super) fn fast_keyed(
        &mut self,
        data: &[u8],
        p: usize,
        len: usize,
        mut decoded: Option<&mut Decoded<'_>>,
    ) -> Option<usize> {
        if !matches!(self.pending, Pending::None) {
            return None;
        }
        if let Some(d) = decoded.as_deref_mut()
            && let Some(item) = d.keyed_at(p)
        {
            if let Some(batch) = d.keyed_batch(BATCH) {
                self.touch(batch.iter().filter_map(|k| match k.key {
                    Key::Name(n) => Some((n, u64::from(k.a))),
                    _ => None,
                }));
            }
            if let Some(next) = self.decoded_keyed(item) {
                return Some(next);
            }
        }
        let (key, v) = key(data, p)?;
        match key {
            Key::Name(k) => self.fast_name(k, data, p, v, len, decoded),
            Key::Calls => self.fast_calls(data, v, len),
            Key::Jump { conditional } => self.fast_jump(conditional, data, v, len),
        }
    }

    /// A keyed line the reading thread read, applied as the text's fast
    /// path would apply it; `None` (nothing changed) where it would
    /// decline, and the text is then read.
    #[inline(always)]
    fn decoded_keyed(&mut self, item: Keyed) -> Option<usize> {
        let end = item.end as usize;
        match item.key {
            Key::Name(k) => {
                let index = self.ids[k.space() as usize].get(u64::from(item.a))?;
                self.set_name(k, index);
                self.line_no += 1;
                Some(end + 1)
            }
            Key::Calls => {
                if !self.started {
                    return None;
                }
                let count = C::from_u64(u64::from(item.a))?;
                let target = item.target(self.np, self.last)?;
                self.start_call(count, target, end)
            }
            Key::Jump { conditional } => {
                if !self.started {
                    return None;
                }
                let (executed, taken) = if conditional {
                    (
                        C::from_u64(u64::from(item.b))?,
                        C::from_u64(u64::from(item.a))?,
                    )
                } else {
                    let c = C::from_u64(u64::from(item.a))?;
                    (c, c)
                };
                let target = item.target(self.np, self.last)?;
                self.start_jump(conditional, executed, taken, target, end)
            }
        }
    }

    /// Loads the id maps' entries for names read ahead (references and
    /// definitions, whose ids come in no order), and for
    /// function names the last function resolved for each, so that their
    /// cache misses (the tables of a profile with `--separate-callers`
    /// span megabytes) are taken early and together: the loads of a batch
    /// do not depend on each other, so their misses overlap, where one
    /// load per line stalled the parser once per line.
    #[inline(always)]
    fn touch(&self, batch: impl Iterator<Item = (NameKey, u64)>) {
        let mut seen = 0u32;
        for (k, id) in batch {
            let space = k.space();
            if let Some(i) = self.ids[space as usize].get(id) {
                seen ^= i;
                if space == Space::Symbol {
                    seen ^= u32::from(self.recent.get(i as usize).is_some_and(|r| r.is_some()));
                }
            }
        }
        std::hint::black_box(seen);
    }

    /// `KEY=(id)` with the id already defined, or `KEY=(id) name` defining
    /// it for the first time (its hash from the reading thread, if any).
    #[inline]
    fn fast_name(
        &mut self,
        k: NameKey,
        data: &[u8],
        p: usize,
        v: usize,
        len: usize,
        decoded: Option<&mut Decoded<'_>>,
    ) -> Option<usize> {
        if data[v] != b'(' {
            return None;
        }
        let (id, j) = digits(data, v + 1)?;
        if data[j] != b')' {
            return None;
        }
        let space = k.space();
        let (index, end) = if j + 1 < len && data[j + 1] == b'\n' {
            (self.ids[space as usize].get(id)?, j + 1)
        } else {
            // A name defined again goes to the careful path, which warns.
            let (id, s, end) = name_def(data, v, len)?;
            if self.ids[space as usize].get(id).is_some() {
                return None;
            }
            let name = &data[s..end];
            let h = decoded
                .and_then(|d| {
                    let h = d.name_hash(p, end);
                    if let Some(batch) = d.def_batch(BATCH) {
                        self.touch(batch.iter().map(|d| (d.key, d.id)));
                        for d in batch {
                            self.names_of(d.key.space()).touch(d.hash);
                        }
                    }
                    h
                })
                .unwrap_or_else(|| Interner::hash(name));
            let index = self.intern(space, name, h)?;
            self.ids[space as usize].set(id, index);
            (index, end)
        };
        self.set_name(k, index);
        self.line_no += 1;
        Some(end + 1)
    }

    /// Sets the context slot of `k` to the name `index`.
    #[inline(always)]
    fn set_name(&mut self, k: NameKey, index: u32) {
        match k {
            NameKey::Fn => {
                self.symbol = Some(SymbolId(index));
                self.function = None;
                self.fi = self.fl;
            }
            NameKey::Fl => {
                self.fl = FileId(index);
                self.fi = self.fl;
                self.function = None;
            }
            NameKey::Fi => {
                self.callgrind_evidence = true;
                self.fi = FileId(index);
            }
            NameKey::Ob => {
                self.callgrind_evidence = true;
                self.ob = ObjectId(index);
                self.function = None;
            }
            NameKey::Cfn => {
                self.callgrind_evidence = true;
                self.cfn = Some(SymbolId(index));
            }
            NameKey::Cfi => {
                self.callgrind_evidence = true;
                self.cfi = Some(FileId(index));
            }
            NameKey::Cob => {
                self.callgrind_evidence = true;
                self.cob = Some(ObjectId(index));
            }
            NameKey::Jfi => {
                self.callgrind_evidence = true;
                self.jfi = Some(FileId(index));
            }
            NameKey::Jfn => {
                self.callgrind_evidence = true;
                self.jfn = Some(SymbolId(index));
            }
        }
    }

    /// The target position of a `calls=` or jump line at `data[i..]` (after
    /// a space), relative to the last cost line; the index after it.
    #[inline(always)]
    fn fast_target(&self, data: &[u8], mut i: usize) -> Option<([u64; 3], usize)> {
        let mut pos = self.last;
        for slot in pos.iter_mut().take(self.np) {
            if data[i] != b' ' {
                return None;
            }
            let (v, j) = subposition_at(data, i + 1, *slot)?;
            if !matches!(data[j], b' ' | b'\n') {
                return None;
            }
            *slot = v;
            i = j;
        }
        Some((pos, i))
    }

    /// `calls=COUNT TARGET`, with the caller, callee name and events known.
    #[inline]
    fn fast_calls(&mut self, data: &[u8], v: usize, len: usize) -> Option<usize> {
        if !self.started {
            return None;
        }
        let (count, j) = digits(data, v)?;
        let count = C::from_u64(count)?;
        let (target, j) = self.fast_target(data, j)?;
        let end = line_end(data, j, len)?;
        self.start_call(count, target, end)
    }

    /// A `calls=` line read (ending at `end`): resolves the caller and the
    /// callee and waits for the call's cost line.
    #[inline(always)]
    fn start_call(&mut self, count: C, target: [u64; 3], end: usize) -> Option<usize> {
        // As the careful path: the caller first, then the callee.
        self.current_function().ok()?;
        let name = self.cfn?;
        let callee = self.function_of(FunctionKey {
            object: self.cob.unwrap_or(self.ob),
            file: self.cfi.unwrap_or(self.fi),
            name,
        })?;
        self.callgrind_evidence = true;
        self.line_no += 1;
        self.pending = Pending::Call {
            line: self.line_no,
            count,
            callee,
            target,
        };
        Some(end + 1)
    }

    /// `jump=COUNT TARGET` or `jcnd=FOLLOWED/EXECUTED TARGET`.
    #[inline]
    fn fast_jump(&mut self, conditional: bool, data: &[u8], v: usize, len: usize) -> Option<usize> {
        if !self.started {
            return None;
        }
        let (first, j) = digits(data, v)?;
        let (executed, taken, j) = if conditional {
            if data[j] != b'/' {
                return None;
            }
            let (second, k) = digits(data, j + 1)?;
            (C::from_u64(second)?, C::from_u64(first)?, k)
        } else {
            let c = C::from_u64(first)?;
            (c, c, j)
        };
        let (target, j) = self.fast_target(data, j)?;
        let end = line_end(data, j, len)?;
        self.start_jump(conditional, executed, taken, target, end)
    }

    /// A jump line read (ending at `end`): resolves its functions and waits
    /// for its source line.
    #[inline(always)]
    fn start_jump(
        &mut self,
        conditional: bool,
        executed: C,
        taken: C,
        target: [u64; 3],
        end: usize,
    ) -> Option<usize> {
        let function = self.current_function().ok()?;
        let target_file = self.jfi.unwrap_or(self.fi);
        let target_function = match self.jfn {
            Some(name) => self.function_of(FunctionKey {
                object: self.ob,
                file: target_file,
                name,
            })?,
            None => function,
        };
        self.callgrind_evidence = true;
        self.line_no += 1;
        self.pending = Pending::Jump {
            line: self.line_no,
            kind: if conditional { "jcnd" } else { "jump" },
            info: JumpInfo {
                function,
                file: self.fi,
                target_function,
                target_file,
                conditional,
                executed,
                taken,
                seq: 0,
            },
            target,
        };
        Some(end + 1)
    }
}
