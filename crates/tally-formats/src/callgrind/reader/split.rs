//! Reading one large file on two cores by regions: this thread parses the
//! first region, a second thread the rest, each with the one-thread fast
//! paths, and the second region's result is then taken into the first
//! parser as if it had read those lines itself.
//!
//! The cut is put at a `fn=` line whose next line gives every position
//! in full (no `+n`, `-n` or `*`): from there, a parse depends on the
//! state before it only through the header, the compressed names `(id)`
//! defined before and the current object and file. The second thread
//! reads the header, then its region with stand-ins for the rest: the
//! object and file current at the cut, and each id it meets undefined,
//! are names of their own (a newline, which no real name holds, and the
//! id). It stops at the first header line it meets, which may begin a
//! new part.
//!
//! When the first region is read, the stand-ins are replaced by the
//! first parser's names, and the second region is taken if that parser
//! defines every id the region took from before it, defines none of
//! those the region defines (a redefinition warns), and every sum still
//! fits; otherwise, or if the second region failed, the first parser
//! reads on from the cut itself. The records, the interning order, the
//! warnings and the errors are always those of one parser reading the
//! whole file.

use super::{IdMap, Parser, Pending, SMALL_CHUNK, Space, Sums};
use crate::error::{Error, Warnings};
use crate::input::{Input, Lines};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use tally_model::{
    Cost, FileId, FunctionKey, Interner, Names, ObjectId, Renumbering, Sink, SymbolId,
};

/// The input size from which a read is split by default: below it
/// starting the second thread costs more than it saves.
pub const SPLIT_FROM: u64 = 16 << 20;

/// Where the cut is looked for, as a share of the input: a little past the
/// middle, as the second thread starts later (its thread, the header).
const CUT_SHARE: f64 = 0.52;

/// How far past the wanted offset a cut is looked for, and how much is
/// read at a time.
const CUT_WINDOW: u64 = 8 << 20;
const CUT_STEP: u64 = 64 << 10;

/// The stand-in for the object or file current at the cut.
const CURRENT: &[u8] = b"\n";

/// Reads `input` (a regular uncompressed file) in two regions cut at
/// `cut` (from [`find_cut`]), with `second` as the sink of the second;
/// returns the bytes read and whether the second region was taken.
pub(super) fn read<C: Cost, S: Sink<C> + Send>(
    p: &mut Parser<'_, '_, C, S>,
    input: Input,
    second: S,
    cut: u64,
) -> Result<(u64, bool), Error> {
    let path = input.path.clone();
    let size = input.size.unwrap_or(0);
    let cancel = AtomicBool::new(false);
    let (first, region) = std::thread::scope(|scope| {
        let job = scope.spawn(|| read_second::<C, S>(&path, cut, size, second, &cancel));
        let mut lines = input.limited(cut).into_lines_sized(SMALL_CHUNK);
        let first = p.read_lines(&mut lines, 0);
        if first.is_err() {
            cancel.store(true, Ordering::Relaxed);
        }
        let region = match job.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        (first, region)
    });
    first?;
    let taken = region.and_then(|r| p.absorb(r));
    let from = match taken {
        Some(Some(at)) => at,
        Some(None) => size,
        // The first parser reads on from the cut (see the module's notes).
        None => cut,
    };
    let mut bytes = from;
    if from < size {
        let mut lines = Input::open_range(&path, from, size)?.into_lines_sized(SMALL_CHUNK);
        p.read_lines(&mut lines, from)?;
        bytes += lines.consumed();
    }
    p.end(&path)?;
    Ok((bytes, taken.is_some()))
}

/// A `fn=` line at or after `target` (by default near the middle of the
/// `size` bytes) whose next line is a cost line with every number in
/// full; `None` if there is none within [`CUT_WINDOW`].
pub(super) fn find_cut(path: &Path, target: Option<u64>, size: u64) -> Result<Option<u64>, Error> {
    let target = target.unwrap_or((size as f64 * CUT_SHARE) as u64);
    if target == 0 || target >= size {
        return Ok(None);
    }
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let finder = memchr::memmem::Finder::new(b"\nfn=");
    let mut buf = Vec::with_capacity(CUT_STEP as usize);
    let mut at = target;
    // Steps of a few pages: a cut is mostly found in the first.
    while at < size.min(target + CUT_WINDOW) {
        buf.clear();
        file.seek(SeekFrom::Start(at))
            .and_then(|_| (&mut file).take(CUT_STEP).read_to_end(&mut buf))
            .map_err(|e| Error::io(path, e))?;
        for hit in finder.find_iter(&buf) {
            let start = hit + 1;
            let Some(k) = memchr::memchr(b'\n', &buf[start..]) else {
                break;
            };
            let next = start + k + 1;
            let Some(k) = memchr::memchr(b'\n', &buf[next..]) else {
                break;
            };
            let line = &buf[next..next + k];
            let full = line.first().is_some_and(u8::is_ascii_digit)
                && !line.iter().any(|b| matches!(b, b'+' | b'-' | b'*' | b'\r'));
            if full {
                return Ok(Some(at + start as u64));
            }
        }
        // The next step starts at the last line begun in this one, so
        // that no candidate is lost at the boundary.
        let Some(last) = memchr::memrchr(b'\n', &buf[..buf.len().saturating_sub(1)]) else {
            break;
        };
        if last == 0 {
            break;
        }
        at += last as u64;
    }
    Ok(None)
}

/// What the second thread read: its sink, and its parser's state.
pub(super) struct Region<C: Cost, S> {
    sink: S,
    st: State<C>,
}

/// The second parser's state at the end of its region, in its own ids.
struct State<C: Cost> {
    names: Names,
    ids: [IdMap; 3],
    events: tally_model::Events,
    positions: tally_model::Positions,
    np: usize,
    ne: usize,
    parts: usize,
    /// The part's counts in the region, if it had records.
    stats: Option<super::PartStats<C>>,
    warnings: Warnings,
    sums: Sums,
    line_no: u64,
    seq: u64,
    last: [u64; 3],
    in_body: bool,
    callgrind_evidence: bool,
    ob: ObjectId,
    fl: FileId,
    fi: FileId,
    symbol: Option<SymbolId>,
    cob: Option<ObjectId>,
    cfi: Option<FileId>,
    cfn: Option<SymbolId>,
    jfi: Option<FileId>,
    jfn: Option<SymbolId>,
    /// The offset of the header line it stopped before, if any.
    halted_at: Option<u64>,
}

/// The second thread: the header, then the lines of `[cut, size)` up to
/// the first header line. `None` when that region cannot be read apart
/// (an error, an unusual file): the first parser then reads it.
fn read_second<C: Cost, S: Sink<C>>(
    path: &Path,
    cut: u64,
    size: u64,
    mut sink: S,
    cancel: &AtomicBool,
) -> Option<Region<C, S>> {
    let st = {
        let mut p = Parser::new(&mut sink);
        p.read_header(path, cut)?;
        if p.started {
            return None;
        }
        p.ob = ObjectId(p.profile.names.objects.try_intern(CURRENT)?);
        p.fl = FileId(p.profile.names.files.try_intern(CURRENT)?);
        p.fi = p.fl;
        p.line_no = 0;
        p.warnings = Warnings::default();
        p.halt_at_header = true;
        let mut lines = Cancellable {
            lines: Input::open_range(path, cut, size)
                .ok()?
                .into_lines_sized(SMALL_CHUNK),
            cancel,
        };
        p.read_lines(&mut lines, cut).ok()?;
        if cancel.load(Ordering::Relaxed) || !matches!(p.pending, Pending::None) {
            return None;
        }
        State {
            names: std::mem::take(&mut p.profile.names),
            ids: std::mem::take(&mut p.ids),
            events: p.profile.events.clone(),
            positions: p.profile.positions,
            np: p.np,
            ne: p.ne,
            parts: p.profile.parts.len(),
            stats: if p.started {
                p.stats.last().cloned()
            } else {
                None
            },
            warnings: std::mem::take(&mut p.warnings),
            sums: std::mem::take(&mut p.sums),
            line_no: p.line_no,
            seq: p.seq,
            last: p.last,
            in_body: p.in_body,
            callgrind_evidence: p.callgrind_evidence,
            ob: p.ob,
            fl: p.fl,
            fi: p.fi,
            symbol: p.symbol,
            cob: p.cob,
            cfi: p.cfi,
            cfn: p.cfn,
            jfi: p.jfi,
            jfn: p.jfn,
            halted_at: p.halted_at.map(|at| cut + at),
        }
    };
    Some(Region { sink, st })
}

/// The lines of a region, ending early when the first parser failed.
struct Cancellable<'a> {
    lines: Lines,
    cancel: &'a AtomicBool,
}

impl super::pipeline::Source for Cancellable<'_> {
    fn chunk(&mut self) -> Result<Option<super::pipeline::ChunkView<'_>>, Error> {
        if self.cancel.load(Ordering::Relaxed) {
            return Ok(None);
        }
        Ok(self.lines.next_chunk()?.map(|(d, l)| (d, l, None)))
    }
    fn consumed(&self) -> u64 {
        self.lines.consumed()
    }
    fn path(&self) -> &Path {
        &self.lines.path
    }
}

/// What a name of the second region stands for.
enum Stand {
    /// A name of its own.
    Name,
    /// The object or file current at the cut.
    Current,
    /// The name with this id, defined before the cut.
    Id(u64),
}

fn stand(name: &[u8]) -> Stand {
    match name.split_first() {
        Some((b'\n', [])) => Stand::Current,
        Some((b'\n', id)) => tally_model::parse_u64(id).map_or(Stand::Name, Stand::Id),
        _ => Stand::Name,
    }
}

impl<C: Cost, S: Sink<C>> Parser<'_, '_, C, S> {
    /// Reads the header lines (and blank and comment lines) at the start
    /// of `[0, cut)`, up to the first body line; `None` if they fail or
    /// fill the region.
    fn read_header(&mut self, path: &Path, cut: u64) -> Option<()> {
        let mut lines = Input::open_range(path, 0, cut)
            .ok()?
            .into_lines_sized(SMALL_CHUNK);
        while let Some((data, len)) = lines.next_chunk().ok()? {
            let mut p = 0;
            while p < len {
                let end = memchr::memchr(b'\n', &data[p..len]).map_or(len, |k| p + k);
                let line = &data[p..end];
                let header = line.is_empty()
                    || line[0] == b'#'
                    || line.iter().find(|&&b| b == b'=' || b == b':') == Some(&b':');
                if !header {
                    return Some(());
                }
                self.line_no += 1;
                self.line(line).ok()?;
                p = end + 1;
            }
        }
        None
    }

    /// The stand-in for the name with compressed `id` in `space`, defined
    /// before the region this parser reads (see the module's notes).
    pub(super) fn inherited(&mut self, space: Space, id: u64) -> Option<u32> {
        let name = format!("\n{id}");
        let names = &mut self.profile.names;
        let table = match space {
            Space::Object => &mut names.objects,
            Space::File => &mut names.files,
            Space::Symbol => &mut names.symbols,
        };
        let index = table.try_intern(name.as_bytes())?;
        self.ids[space as usize].set(id, index);
        Some(index)
    }

    /// Takes the second thread's region as if this parser had read its
    /// lines, when its stand-ins hold (see the module's notes); `None`
    /// (nothing changed) otherwise. On success, where reading goes on:
    /// the header line the region stopped before, or `None` at the end of
    /// the input.
    fn absorb(&mut self, region: Region<C, S>) -> Option<Option<u64>> {
        let Region { sink, st: r } = region;
        // The part the cut is in has begun, under the header the region
        // was read with (a later part's header repeats the first's events
        // and positions, or the comparison fails).
        let plain = r.parts == 1
            && self.profile.events == r.events
            && self.profile.positions == r.positions
            && self.started
            && matches!(self.pending, Pending::None)
            && self.cob.is_none()
            && self.cfi.is_none()
            && self.jfi.is_none()
            && self.jfn.is_none()
            && self.np == r.np
            && self.ne == r.ne;
        if !plain {
            return None;
        }
        // The region's names in this parser's ids, where they have one
        // already; whether each is a stand-in. Symbols, the bulk, are
        // looked up as they are interned below (which finds a name this
        // parser has): one probe of the table each instead of two.
        let spaces = [Space::Object, Space::File, Space::Symbol];
        let mut maps: [Vec<Option<u32>>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        let mut stands: [Vec<bool>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for s in spaces {
            let (mine, theirs) = (self.names_of(s), r.names_of(s));
            let current = match s {
                Space::Object => Some(self.ob.0),
                Space::File => Some(self.fl.0),
                Space::Symbol => None,
            };
            let n = theirs.len() as u32;
            let mut map = Vec::with_capacity(n as usize);
            let mut stand_in = Vec::with_capacity(n as usize);
            for start in (0..n).step_by(16) {
                // The table's misses of a batch overlap (see
                // `Interner::touch`).
                let batch = start..(start + 16).min(n);
                if s != Space::Symbol {
                    for local in batch.clone() {
                        mine.touch(theirs.hash_at(local));
                    }
                }
                for local in batch {
                    let name = theirs.get(local);
                    let st = stand(name);
                    stand_in.push(!matches!(st, Stand::Name));
                    map.push(match st {
                        Stand::Name if s == Space::Symbol => None,
                        Stand::Name => mine.lookup_hashed(name, theirs.hash_at(local)),
                        Stand::Current => Some(current?),
                        Stand::Id(id) => Some(self.ids[s as usize].get(id)?),
                    });
                }
            }
            // An id the region defines that this parser has defined too:
            // the single read would have compared the names.
            for (id, local) in r.ids[s as usize].entries() {
                if !stand_in[local as usize] && self.ids[s as usize].get(id).is_some() {
                    return None;
                }
            }
            maps[s as usize] = map;
            stands[s as usize] = stand_in;
        }
        // The sums, which bound every later sum, and the counts.
        let max = C::MAX_MAGNITUDE;
        let fits = |a: u64, b: u64| a.checked_add(b).filter(|&v| v <= max);
        let n = self.sums.costs.len().max(r.sums.costs.len());
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let costs: Option<Vec<u64>> = (0..n)
            .map(|i| fits(at(&self.sums.costs, i), at(&r.sums.costs, i)))
            .collect();
        let calls = fits(self.sums.calls, r.sums.calls);
        let stats = self.stats.last().expect("part");
        let totals: Option<Vec<C>> = match &r.stats {
            Some(s) => stats
                .totals
                .iter()
                .zip(&s.totals)
                .map(|(a, b)| a.checked_add(*b))
                .collect(),
            None => Some(stats.totals.clone()),
        };
        let (Some(costs), Some(calls), Some(totals)) = (costs, calls, totals) else {
            return None;
        };

        // The region is taken. Names new here are interned in the order
        // the region met them, as this parser would have (a symbol it has
        // already is found, not added; touched a batch ahead, as above,
        // so that the table's misses overlap): should a limit
        // stop that, it would have stopped the single read the same way
        // (which then reads the region itself and reports it).
        for s in spaces {
            let theirs = r.names_of(s);
            let (count, bytes) = (0..theirs.len() as u32)
                .filter(|&i| maps[s as usize][i as usize].is_none())
                .fold((0, 0), |(n, b), i| (n + 1, b + theirs.get(i).len()));
            match s {
                Space::Object => self.profile.names.objects.reserve(count, bytes),
                Space::File => self.profile.names.files.reserve(count, bytes),
                Space::Symbol => self.profile.names.symbols.reserve(count, bytes),
            }
            let n = r.names_of(s).len() as u32;
            for start in (0..n).step_by(16) {
                let batch = start..(start + 16).min(n);
                let map = &mut maps[s as usize];
                for local in batch.clone().filter(|&i| map[i as usize].is_none()) {
                    self.names_of(s).touch(r.names_of(s).hash_at(local));
                }
                for local in batch {
                    if map[local as usize].is_none() {
                        let name = r.names_of(s).get(local);
                        let global = self.intern(s, name, r.names_of(s).hash_at(local))?;
                        map[local as usize] = Some(global);
                    }
                }
            }
        }
        let id = |s: Space, i: u32| maps[s as usize][i as usize].expect("mapped");
        let mut renumbering = Renumbering {
            files: (0..r.names_of(Space::File).len() as u32)
                .map(|i| FileId(id(Space::File, i)))
                .collect(),
            functions: Vec::with_capacity(r.names.function_count()),
            seq: self.seq,
        };
        self.profile
            .names
            .reserve_functions(r.names.function_count());
        for (_, key) in r.names.functions() {
            let key = FunctionKey {
                object: ObjectId(id(Space::Object, key.object.0)),
                file: FileId(id(Space::File, key.file.0)),
                name: SymbolId(id(Space::Symbol, key.name.0)),
            };
            renumbering
                .functions
                .push(self.profile.names.try_function(key)?);
        }
        for s in spaces {
            for (cid, local) in r.ids[s as usize].entries() {
                if !stands[s as usize][local as usize] {
                    self.ids[s as usize].set(cid, id(s, local));
                }
            }
        }
        self.sink.absorb(sink, &renumbering);

        self.sums.costs = costs;
        self.sums.calls = calls;
        let stats = self.stats.last_mut().expect("part");
        stats.totals = totals;
        if let Some(s) = &r.stats {
            stats.lines += s.lines;
            stats.calls += s.calls;
            stats.jumps += s.jumps;
            self.last = r.last;
            self.seq += r.seq;
        }
        self.warnings.absorb(r.warnings, self.line_no);
        self.line_no += r.line_no;
        self.in_body |= r.in_body;
        self.callgrind_evidence |= r.callgrind_evidence;
        self.ob = ObjectId(id(Space::Object, r.ob.0));
        self.fl = FileId(id(Space::File, r.fl.0));
        self.fi = FileId(id(Space::File, r.fi.0));
        self.symbol = r.symbol.map(|x| SymbolId(id(Space::Symbol, x.0)));
        self.function = None;
        self.cob = r.cob.map(|x| ObjectId(id(Space::Object, x.0)));
        self.cfi = r.cfi.map(|x| FileId(id(Space::File, x.0)));
        self.jfi = r.jfi.map(|x| FileId(id(Space::File, x.0)));
        self.jfn = r.jfn.map(|x| SymbolId(id(Space::Symbol, x.0)));
        if let Some(x) = r.cfn {
            self.cfn = Some(SymbolId(id(Space::Symbol, x.0)));
        }
        Some(r.halted_at)
    }
}

impl<C: Cost> State<C> {
    fn names_of(&self, space: Space) -> &Interner {
        match space {
            Space::Object => &self.names.objects,
            Space::File => &self.names.files,
            Space::Symbol => &self.names.symbols,
        }
    }
}
