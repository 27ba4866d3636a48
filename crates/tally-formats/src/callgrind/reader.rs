//! The reader of the Callgrind format, and of Cachegrind's subset of it.
//!
//! One streaming parser serves both formats: it keeps only the current
//! context (object, file, function, call target, last position) and the
//! name-compression tables, and hands every resolved record to a [`Sink`].
//! [`ProfileSink`] builds a full [`Profile`]; other sinks (statistics for
//! `tally check`) keep nothing per line, so their memory does not grow with
//! the file.
//!
//! Lines are read in runs from a reused buffer (`Lines::next_chunk`), which
//! is zero-padded so that numbers can be read eight bytes at a time. Two
//! paths read them: the fast path (`fast`: `fast_run`, `scan_cost_line`) takes runs
//! of plain cost lines and call-site and jump-source lines in the forms
//! Valgrind writes (single spaces, decimal or `0x` numbers, `+n`/`-n`/`*`),
//! with the context in locals and no error reporting, and the keyed lines
//! between them that name an id already defined, `calls=`, `jump=` and
//! `jcnd=` (`keyed`); anything it declines
//! (tabs, `.`, signs, overflow, too many counts, `\r`, other line kinds)
//! goes to the careful path, which reads the line again and reports errors
//! and warnings with their line numbers. Both give the same records.
//!
//! Semantics where the specification is silent follow what Valgrind 3.19
//! writes and KCachegrind reads (see `docs/formats.md`):
//! relative subpositions are relative to the last plain cost line: call
//! targets, call-site lines, jump targets and jump-source lines are written
//! relative to it but do not become the new base (Valgrind's `dump.c`
//! rule); `cob=` defaults to the current object and `cfi=` to the current
//! (possibly inlined) file, both for one call only; `jfi=`/`jfn=` hold for
//! one jump; `jcnd=` is `followed/executed`. A comment that starts with
//! `# tally: ` holds a line that only tally reads: the calls and jumps of a
//! difference that Valgrind's readers cannot take (see the writer).

/// The end-of-file checks: stated totals against the cost lines, and
/// truncation.
mod checks;
/// The fast path for cost lines and the number scanners.
mod fast;
/// The fast path for the common keyed lines (names by id, calls, jumps).
mod keyed;
/// Reading on two threads.
mod pipeline;
/// Reading one file on two cores by regions.
mod split;
pub use split::SPLIT_FROM;
/// The running sums that bound every later sum, and their overflow errors.
mod sums;
use fast::{add_totals, fast_decimal};
pub use sums::Sums;
use sums::add_magnitudes;

use crate::error::{Error, ParseErrorKind, WarningKind, Warnings, excerpt};
use crate::input::Input;
pub use tally_model::Sink;
use tally_model::{
    CallInfo, Cost, Events, FileId, Format, FunctionId, FunctionKey, Interner, JumpInfo,
    NumberError, ObjectId, Part, PartInfo, Positions, Profile, SymbolId, parse_formula,
};

/// Whether a line ends a region read for another parser ([`split`]): a
/// header line (the key ends at `:`), which may begin a part, or a line
/// only tally reads, which may hold one.
fn stops_region(line: &[u8]) -> bool {
    if line.starts_with(super::writer::HIDDEN) {
        return true;
    }
    if matches!(
        line.first(),
        None | Some(b'0'..=b'9' | b'+' | b'-' | b'*' | b'#')
    ) {
        return false;
    }
    line.iter().find(|&&b| b == b'=' || b == b':') == Some(&b':')
}

/// Why an input is empty: plain [`ParseErrorKind::Empty`], or, when
/// `PATH-01`, `PATH-02`, … exist next to it, the per-thread files that
/// Callgrind wrote instead (it creates `PATH` empty at its start).
fn empty_kind(path: &std::path::Path) -> ParseErrorKind {
    let thread = |n: usize| {
        let mut name = path.as_os_str().to_owned();
        name.push(format!("-{n:02}"));
        std::path::PathBuf::from(name)
    };
    let count = (1..).take_while(|&n| thread(n).is_file()).count();
    if count == 0 {
        return ParseErrorKind::Empty;
    }
    ParseErrorKind::EmptyThreads {
        first: thread(1).display().to_string(),
        last: thread(count).display().to_string(),
        count,
    }
}

/// The sink that keeps every record.
mod records;
pub use records::ProfileSink;

/// Counts of what a read saw, per part; computed by every read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartStats<C> {
    /// Sum of the self costs.
    pub totals: Vec<C>,
    /// Cost lines.
    pub lines: u64,
    /// Call arcs.
    pub calls: u64,
    /// Jumps.
    pub jumps: u64,
    /// Line of the `summary:` line, 0 if none.
    pub summary_line: u64,
    /// Line of the `totals:` line (or Cachegrind's trailing `summary:`).
    pub totals_line: u64,
    /// Line of the first record (cost line, call or jump), 0 if none.
    pub first_body_line: u64,
}

/// The result of a read besides the records.
#[derive(Debug)]
pub struct ReadOutcome<C: Cost> {
    /// The profile without records (header facts, events, names, parts'
    /// infos); a [`ProfileSink`] supplies the records.
    pub profile: Profile<C>,
    /// Per-part counts and totals.
    pub stats: Vec<PartStats<C>>,
    /// Leniencies, each kind once.
    pub warnings: Warnings,
    /// Bytes of (decompressed) text read.
    pub bytes: u64,
    /// The running sums at the end ([`ReadOptions::carried`] for a next file).
    pub sums: Sums,
    /// Where the input was cut, when a second core read the rest and its
    /// records were taken ([`ReadOptions::split`]).
    pub split_at: Option<u64>,
}

/// Options of a read.
#[derive(Default)]
pub struct ReadOptions<'a> {
    /// Called now and then with the number of bytes consumed.
    pub progress: Option<&'a mut dyn FnMut(u64)>,
    /// The most memory the sink may hold for the records
    /// ([`Sink::held_bytes`]); past it, or past the ceiling of the whole
    /// process ([`crate::limits::over_ceiling`]), the read fails with
    /// [`ParseErrorKind::MemoryLimit`] at the line reached. `None`: no
    /// ceiling for the sink.
    pub memory_limit: Option<u64>,
    /// The running sums of the files read before this one into the same
    /// profile ([`ReadOutcome::sums`]), so that the bound holds for them all.
    pub carried: Option<Sums>,
    /// Read on two threads (one reads the input and decodes the numbers of
    /// the cost lines, the other parses); the result is the same. `None`:
    /// for uncompressed inputs of known size from
    /// [`TWO_THREADS_FROM`] bytes when there are two cores.
    pub two_threads: Option<bool>,
    /// Bytes read at a time (1 MiB if `None`); tests make it small so that
    /// chunk boundaries fall everywhere.
    pub chunk_size: Option<usize>,
    /// Read a regular file in two regions, one per core, when the sink can
    /// be split ([`Sink::split`]); the result is the same. `None`: for
    /// uncompressed files from [`SPLIT_FROM`] bytes when there are two
    /// cores. It takes the place of [`ReadOptions::two_threads`].
    pub split: Option<bool>,
    /// Where the second region is looked for (the first `fn=` line from
    /// this offset that can start one), instead of near the middle: tests
    /// cut everywhere.
    pub split_at: Option<u64>,
}

/// The input size from which a read uses two threads by default: below it
/// starting the thread costs more than it saves.
pub const TWO_THREADS_FROM: u64 = 4 << 20;

/// The read size of a one-thread read: under glibc's 128 KiB threshold,
/// so the buffer comes from the heap rather than from fresh pages that
/// fault in as the first read fills them (a fault costs more than the
/// extra read calls), and over `Input`'s 64 KiB buffer, so reads bypass
/// it rather than copy through it.
const SMALL_CHUNK: usize = (128 << 10) - 4096;

/// Reads a whole profile into memory.
pub fn read<C: Cost>(input: Input) -> Result<(Profile<C>, Warnings), Error> {
    read_with(input, ReadOptions::default())
}

/// Reads a whole profile into memory, with options.
pub fn read_with<C: Cost>(
    input: Input,
    options: ReadOptions<'_>,
) -> Result<(Profile<C>, Warnings), Error> {
    let mut sink = ProfileSink::default();
    let out = parse(input, &mut sink, options)?;
    Ok(sink.into_profile(out))
}

/// Parses an input, feeding records to `sink`.
pub fn parse<C: Cost, S: Sink<C> + Send>(
    input: Input,
    sink: &mut S,
    options: ReadOptions<'_>,
) -> Result<ReadOutcome<C>, Error> {
    let cores = || std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    let splittable = !input.gzip && input.regular;
    let split = match options.split {
        Some(on) => on && splittable,
        None => splittable && input.size.is_some_and(|n| n >= SPLIT_FROM) && cores(),
    };
    // A file with no place to cut is read in one pass below; the cut is
    // looked for before anything is read.
    let cut = match split.then(|| sink.split()).flatten() {
        Some(second) => split::find_cut(&input.path, options.split_at, input.size.unwrap_or(0))?
            .map(|cut| (cut, second)),
        None => None,
    };
    if let Some((cut, second)) = cut {
        let mut p = Parser::new(sink);
        p.progress = options.progress;
        p.sums = options.carried.unwrap_or_default();
        p.memory_limit = options.memory_limit;
        let (bytes, taken) = split::read(&mut p, input, second, cut)?;
        return Ok(ReadOutcome {
            profile: p.profile,
            stats: p.stats,
            warnings: p.warnings,
            bytes,
            sums: p.sums,
            split_at: taken.then_some(cut),
        });
    }
    let two_threads = match options.two_threads {
        Some(on) => on,
        None => {
            !input.gzip
                && input.size.is_some_and(|n| n >= TWO_THREADS_FROM)
                && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
        }
    };
    let lines = match options.chunk_size {
        Some(n) => input.into_lines_sized(n),
        None if two_threads => input.into_lines(),
        None => input.into_lines_sized(SMALL_CHUNK),
    };
    let mut p = Parser::new(sink);
    p.progress = options.progress;
    p.sums = options.carried.unwrap_or_default();
    p.memory_limit = options.memory_limit;
    let bytes = if two_threads {
        let path = lines.path.clone();
        std::thread::scope(|scope| {
            let mut piped = pipeline::start(scope, lines, &path);
            p.run(&mut piped)?;
            Ok::<_, Error>(pipeline::Source::consumed(&piped))
        })?
    } else {
        let mut lines = lines;
        p.run(&mut lines)?;
        lines.consumed()
    };
    Ok(ReadOutcome {
        profile: p.profile,
        stats: p.stats,
        warnings: p.warnings,
        bytes,
        sums: p.sums,
        split_at: None,
    })
}

/// Maps compressed ids `(n)` of one kind to interned indices.
#[derive(Default)]
struct IdMap {
    dense: Vec<u32>,
    sparse: rustc_hash::FxHashMap<u64, u32>,
}

impl IdMap {
    const DENSE_LIMIT: u64 = 1 << 22;
    const UNSET: u32 = u32::MAX;

    #[inline(always)]
    fn get(&self, id: u64) -> Option<u32> {
        if id < Self::DENSE_LIMIT {
            self.dense
                .get(id as usize)
                .copied()
                .filter(|&v| v != Self::UNSET)
        } else {
            self.sparse.get(&id).copied()
        }
    }

    /// Every mapping, as `(id, index)`.
    fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        let dense = self.dense.iter().enumerate();
        dense
            .filter(|&(_, &v)| v != Self::UNSET)
            .map(|(i, &v)| (i as u64, v))
            .chain(self.sparse.iter().map(|(&k, &v)| (k, v)))
    }

    /// Sets a mapping; returns the previous value if it differs.
    fn set(&mut self, id: u64, value: u32) -> Option<u32> {
        let old = if id < Self::DENSE_LIMIT {
            let i = id as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, Self::UNSET);
            }
            std::mem::replace(&mut self.dense[i], value)
        } else {
            self.sparse.insert(id, value).unwrap_or(Self::UNSET)
        };
        (old != Self::UNSET && old != value).then_some(old)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    Object,
    File,
    Symbol,
}

/// What the line after the current one must be.
enum Pending<C> {
    None,
    /// After `calls=`: the call-site cost line.
    Call {
        line: u64,
        count: C,
        callee: FunctionId,
        target: [u64; 3],
    },
    /// After `jump=`/`jcnd=`: the jump's source position.
    Jump {
        line: u64,
        kind: &'static str,
        info: JumpInfo<C>,
        target: [u64; 3],
    },
}

struct Parser<'s, 'o, C: Cost, S> {
    sink: &'s mut S,
    progress: Option<&'o mut dyn FnMut(u64)>,
    profile: Profile<C>,
    stats: Vec<PartStats<C>>,
    warnings: Warnings,
    /// Line number of the line being parsed (lines read so far).
    line_no: u64,

    ids: [IdMap; 3],
    events_seen: bool,
    positions_seen: bool,
    /// The current part has a header or body open (a part exists for it).
    open: bool,
    /// The sink was told about the current part.
    started: bool,
    /// The current part has records; a header line now begins a new part.
    in_body: bool,
    callgrind_evidence: bool,

    np: usize,
    ne: usize,
    ob: ObjectId,
    fl: FileId,
    fi: FileId,
    symbol: Option<SymbolId>,
    function: Option<FunctionId>,
    cob: Option<ObjectId>,
    cfi: Option<FileId>,
    cfn: Option<SymbolId>,
    jfi: Option<FileId>,
    jfn: Option<SymbolId>,
    last: [u64; 3],
    costs: Vec<C>,
    pending: Pending<C>,
    seq: u64,
    sums: Sums,
    memory_limit: Option<u64>,
    /// The line of a `calls=` the file ended after, before its cost line.
    dangling_call: Option<u64>,
    /// The function last resolved for each symbol id: a `calls=`, a jump
    /// or a function block mostly names the same (object, file, name) as
    /// the last time, so the hash lookup of the key is skipped.
    recent: Vec<Option<(FunctionKey, FunctionId)>>,
    /// Reading a later region of the input for another parser
    /// ([`split`]): stop before the first header line instead of reading
    /// it, as it may begin a part, and take a name id not defined yet for
    /// one defined before the region.
    halt_at_header: bool,
    /// Where it stopped: the offset of that line in the bytes read.
    halted_at: Option<u64>,
}

impl<'s, 'o, C: Cost, S: Sink<C>> Parser<'s, 'o, C, S> {
    fn new(sink: &'s mut S) -> Self {
        Parser {
            sink,
            progress: None,
            profile: Profile::new(Format::Cachegrind, Events::default(), Positions::LINE),
            stats: Vec::new(),
            warnings: Warnings::default(),
            line_no: 0,
            ids: Default::default(),
            events_seen: false,
            positions_seen: false,
            open: false,
            started: false,
            in_body: false,
            callgrind_evidence: false,
            np: 1,
            ne: 0,
            ob: ObjectId::NONE,
            fl: FileId::NONE,
            fi: FileId::NONE,
            symbol: None,
            function: None,
            cob: None,
            cfi: None,
            cfn: None,
            jfi: None,
            jfn: None,
            last: [0; 3],
            costs: Vec::new(),
            pending: Pending::None,
            seq: 0,
            sums: Sums::default(),
            memory_limit: None,
            dangling_call: None,
            recent: Vec::new(),
            halt_at_header: false,
            halted_at: None,
        }
    }

    /// The function of `key`, interned if new; `None` past the id limit.
    #[inline]
    fn function_of(&mut self, key: FunctionKey) -> Option<FunctionId> {
        let i = key.name.0 as usize;
        if let Some(Some((k, f))) = self.recent.get(i)
            && *k == key
        {
            return Some(*f);
        }
        let f = self.profile.names.try_function(key)?;
        if i >= self.recent.len() {
            self.recent.resize(i + 1, None);
        }
        self.recent[i] = Some((key, f));
        Some(f)
    }

    fn run<L: pipeline::Source>(&mut self, lines: &mut L) -> Result<(), Error> {
        self.read_lines(lines, 0)?;
        self.end(lines.path())
    }

    /// The end of the input: every check that needs the whole of it.
    fn end(&mut self, path: &std::path::Path) -> Result<(), Error> {
        if self.line_no == 0 {
            return Err(self.error(path, 1, empty_kind(path)));
        }
        self.finish()
            .map_err(|kind| self.error(path, self.line_no, kind))
    }

    /// Reads the lines of `lines`, which start `base` bytes into the input
    /// (for progress), up to its end or, with `halt_at_header`, up to the
    /// first header line.
    fn read_lines<L: pipeline::Source>(&mut self, lines: &mut L, base: u64) -> Result<(), Error> {
        let path = lines.path().to_path_buf();
        // Named if memory runs out on this thread (`limits`).
        let place = crate::limits::reading(&path);
        let mut next_progress = 1u64 << 24;
        loop {
            let (data, len, mut decoded) = match lines.chunk() {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break,
                Err(Error::Io { path, source }) => {
                    return Err(Error::Read {
                        path,
                        line: self.line_no + 1,
                        source,
                    });
                }
                Err(e) => return Err(e),
            };
            let mut p = 0;
            while p < len {
                // A run of cost lines cannot start while a call or jump
                // waits for its line.
                if matches!(self.pending, Pending::None)
                    && matches!(data[p], b'0'..=b'9' | b'+' | b'-' | b'*')
                {
                    if let Some(d) = decoded.as_mut() {
                        p = self.decoded_run(d, p, len);
                    }
                    // The text's fast path, for a cost line the decoded
                    // run declined (it declines every other line at once).
                    if p < len && matches!(data[p], b'0'..=b'9' | b'+' | b'-' | b'*') {
                        p = self.fast_run(data, p, len);
                    }
                    if p >= len {
                        break;
                    }
                }
                if let Some(next) = self.fast_pending_line(data, p, len, decoded.as_mut()) {
                    p = next;
                    continue;
                }
                if let Some(next) = self.fast_keyed(data, p, len, decoded.as_mut()) {
                    p = next;
                    continue;
                }
                let end = memchr::memchr(b'\n', &data[p..len]).map_or(len, |k| p + k);
                if self.halt_at_header && stops_region(&data[p..end]) {
                    // The line is left unread, for the parser this
                    // region's records go to.
                    self.halted_at = Some(lines.consumed() - len as u64 + p as u64);
                    return Ok(());
                }
                self.line_no += 1;
                if let Err(kind) = self.line(&data[p..end]) {
                    // Only the input's last line can end without a newline.
                    let kind = if end == len && data[len - 1] != b'\n' {
                        ParseErrorKind::CutShort(Box::new(kind))
                    } else {
                        kind
                    };
                    return Err(self.error(&path, self.line_no, kind));
                }
                p = end + 1;
            }
            // A later region counts its lines from its start: its
            // place names the input alone.
            if !self.halt_at_header {
                place.at(self.line_no);
            }
            let kept = self
                .memory_limit
                .filter(|&limit| self.sink.held_bytes() as u64 > limit);
            if let Some(limit) = kept.or_else(crate::limits::over_ceiling) {
                let kind = ParseErrorKind::MemoryLimit { limit };
                return Err(self.error(&path, self.line_no, kind));
            }
            if lines.consumed() >= next_progress {
                next_progress = lines.consumed() + (1 << 24);
                if let Some(p) = self.progress.as_mut() {
                    p(base + lines.consumed());
                }
            }
        }
        Ok(())
    }

    fn error(&self, path: &std::path::Path, line: u64, kind: ParseErrorKind) -> Error {
        Error::Parse {
            path: path.to_path_buf(),
            line,
            kind,
        }
    }

    fn finish(&mut self) -> R<()> {
        // A file cut right after a `calls=` line: the call is dropped and
        // the file called truncated, as at any other place of the cut.
        if let Pending::Call { line, .. } = self.pending {
            self.pending = Pending::None;
            self.dangling_call = Some(line);
        }
        self.blank()?;
        if !self.events_seen {
            return Err(ParseErrorKind::MissingEvents);
        }
        self.body_part();
        // Cachegrind files have one part: header lines after records start
        // another, as in Callgrind's concatenated dumps, so such a file is
        // Callgrind (a Cachegrind file could not hold its parts).
        self.profile.format = if self.callgrind_evidence || self.profile.parts.len() > 1 {
            Format::Callgrind
        } else {
            Format::Cachegrind
        };
        self.profile
            .events
            .resolve()
            .map_err(|e| ParseErrorKind::BadEventDef(e.to_string()))?;
        // Summary and totals lines may give fewer values than events.
        for part in &mut self.profile.parts {
            for v in [&mut part.info.summary, &mut part.info.totals]
                .into_iter()
                .flatten()
            {
                v.resize(self.ne, C::ZERO);
            }
        }
        self.check_totals();
        if !self.check_truncation()
            && let Some(line) = self.dangling_call
        {
            return Err(ParseErrorKind::CallWithoutCost(line));
        }
        Ok(())
    }

    /// The part that header facts go to: the open one, or a new one when
    /// the current part already has records.
    fn header_part(&mut self) -> &mut PartInfo<C> {
        if self.in_body {
            self.in_body = false;
            self.open = false;
            self.ob = ObjectId::NONE;
            self.fl = FileId::NONE;
            self.fi = FileId::NONE;
            self.symbol = None;
            self.function = None;
            self.cob = None;
            self.cfi = None;
            self.cfn = None;
            self.jfi = None;
            self.jfn = None;
        }
        if !self.open {
            self.open_part();
        }
        &mut self.profile.parts.last_mut().expect("open part").info
    }

    fn open_part(&mut self) {
        self.profile
            .parts
            .push(Part::new(self.profile.positions, self.ne));
        self.stats.push(PartStats::default());
        self.open = true;
        self.started = false;
    }

    /// Makes sure the sink knows the current part before a record.
    #[inline]
    fn body_part(&mut self) {
        if !self.started {
            if !self.open {
                self.open_part();
            }
            self.started = true;
            self.sink.start_part(self.profile.positions, self.ne);
            let stats = self.stats.last_mut().expect("part");
            stats.totals = vec![C::ZERO; self.ne];
            stats.first_body_line = self.line_no;
            if self.sums.costs.len() < self.ne {
                self.sums.costs.resize(self.ne, 0);
            }
            self.seq = 0;
            self.last = [0; 3];
        }
    }

    fn line(&mut self, line: &[u8]) -> R<()> {
        // Every carriage return at the end goes (`\r\r\n` too): a value
        // read never ends in one, so that writing it back with `\n` reads
        // the same.
        let line = match line.last() {
            Some(b'\r') => {
                self.warnings
                    .add(WarningKind::CarriageReturn, self.line_no, || {
                        "line ends in a carriage return (CRLF line endings)".into()
                    });
                let end = line.iter().rposition(|&b| b != b'\r').map_or(0, |i| i + 1);
                &line[..end]
            }
            _ => line,
        };
        // Empty lines and comments may stand anywhere, even between
        // `calls=` and its cost line, as KCachegrind and callgrind_annotate
        // skip them.
        let Some(&first) = line.first() else {
            return Ok(());
        };
        match first {
            b'0'..=b'9' | b'+' | b'-' | b'*' => self.cost_line(line),
            b'#' => self.comment(line),
            _ => self.keyed(line),
        }
    }

    /// A comment, or a line that only tally reads (see
    /// [`super::writer::HIDDEN`]): the rest is read as a line of its own.
    #[cold]
    fn comment(&mut self, line: &[u8]) -> R<()> {
        if line.starts_with(b"# callgrind format") {
            self.callgrind_evidence = true;
        }
        let Some(rest) = line.strip_prefix(super::writer::HIDDEN) else {
            return Ok(());
        };
        match rest.first() {
            Some(b'0'..=b'9' | b'+' | b'-' | b'*') => self.cost_line(rest),
            Some(b'#') | None => Ok(()),
            Some(_) => self.keyed(rest),
        }
    }

    /// Called before a line that is not a position line: fails if a
    /// `calls=` still waits for its cost line; a jump without its source line
    /// takes the last position as its source, with a warning.
    #[inline]
    fn blank(&mut self) -> R<()> {
        if matches!(self.pending, Pending::None) {
            return Ok(());
        }
        self.pending_not_met()
    }

    #[cold]
    fn pending_not_met(&mut self) -> R<()> {
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::None => Ok(()),
            Pending::Call { line, .. } => Err(ParseErrorKind::CallWithoutCost(line)),
            Pending::Jump {
                line,
                kind,
                info,
                target,
            } => {
                self.warnings.add(WarningKind::JumpWithoutSource, line, || {
                    format!(
                        "`{kind}=` is not followed by its source position line; the last position is used"
                    )
                });
                let last = self.last;
                self.emit_jump(info, &last, &target);
                Ok(())
            }
        }
    }

    /// Emits the pending call with its site position and the `n` costs in
    /// `self.costs`.
    fn emit_call(&mut self, caller: FunctionId, site: &[u64; 3], n: usize) {
        let Pending::Call {
            count,
            callee,
            target,
            ..
        } = std::mem::replace(&mut self.pending, Pending::None)
        else {
            return;
        };
        self.cob = None;
        self.cfi = None;
        let info = CallInfo {
            caller,
            site_file: self.fi,
            callee,
            count,
            seq: self.seq,
        };
        self.seq += 1;
        self.stats.last_mut().expect("part").calls += 1;
        let np = self.np;
        self.sink
            .call(info, &site[..np], &target[..np], &self.costs[..n]);
    }

    fn emit_jump(&mut self, info: JumpInfo<C>, source: &[u64; 3], target: &[u64; 3]) {
        self.jfi = None;
        self.jfn = None;
        let info = JumpInfo {
            seq: self.seq,
            ..info
        };
        self.seq += 1;
        self.stats.last_mut().expect("part").jumps += 1;
        let np = self.np;
        self.sink.jump(info, &source[..np], &target[..np]);
    }

    fn keyed(&mut self, line: &[u8]) -> R<()> {
        self.blank()?;
        // Keys are short: a plain scan beats memchr's setup.
        let Some(sep) = line.iter().position(|&b| b == b'=' || b == b':') else {
            if let Some(&b) = line.iter().find(|&&b| b < 0x20 && b != b'\t') {
                return Err(ParseErrorKind::Binary(b));
            }
            return Err(ParseErrorKind::Unrecognised(excerpt(line)));
        };
        let key = &line[..sep];
        let value = &line[sep + 1..];
        if line[sep] == b'=' {
            self.body_spec(key, value, line)
        } else {
            self.header(key, value, line)
        }
    }

    /// The names of one id space.
    #[inline(always)]
    fn names_of(&self, space: Space) -> &tally_model::Interner {
        let names = &self.profile.names;
        match space {
            Space::Object => &names.objects,
            Space::File => &names.files,
            Space::Symbol => &names.symbols,
        }
    }

    /// Interns `name` (whose [`Interner::hash`] is `h`) in one id space's
    /// table; a file name is also told to the sink, which may decide per
    /// file what it keeps. Every path that meets a name comes through here.
    /// `None`: more names than the model holds.
    #[inline]
    fn intern(&mut self, space: Space, name: &[u8], h: u64) -> Option<u32> {
        let names = &mut self.profile.names;
        let table = match space {
            Space::Object => &mut names.objects,
            Space::File => &mut names.files,
            Space::Symbol => &mut names.symbols,
        };
        let index = table.try_intern_hashed(name, h)?;
        if space == Space::File {
            self.sink.file_named(FileId(index), name);
        }
        Some(index)
    }

    /// Resolves `(id) name`, `(id)` or `name` in one id space.
    fn name(&mut self, space: Space, key: &[u8], value: &[u8]) -> R<u32> {
        let v = &value[skip_spaces(value, 0)..];
        if v.len() >= 2 && v[0] == b'(' && v[1].is_ascii_digit() {
            let close = v
                .iter()
                .position(|&b| b == b')')
                .ok_or_else(|| ParseErrorKind::BadCompressedName(excerpt(value)))?;
            let id = tally_model::parse_u64(&v[1..close])
                .map_err(|_| ParseErrorKind::BadCompressedName(excerpt(value)))?;
            let rest = &v[close + 1..];
            let map = &mut self.ids[space as usize];
            if rest.is_empty() {
                if let Some(index) = map.get(id) {
                    return Ok(index);
                }
                if self.halt_at_header {
                    // A later region: the name was defined before it.
                    return self
                        .inherited(space, id)
                        .ok_or(ParseErrorKind::TooManyNames);
                }
                return Err(ParseErrorKind::UndefinedId {
                    key: String::from_utf8_lossy(key).into_owned(),
                    id,
                });
            }
            if !is_space(rest[0]) {
                return Err(ParseErrorKind::BadCompressedName(excerpt(value)));
            }
            let name = &rest[skip_spaces(rest, 0)..];
            let index = self
                .intern(space, name, Interner::hash(name))
                .ok_or(ParseErrorKind::TooManyNames)?;
            if self.ids[space as usize].set(id, index).is_some() {
                let line = self.line_no;
                self.warnings.add(WarningKind::IdRedefined, line, || {
                    format!(
                        "`{}=({id})` defined again with another name; the new name is used from here on",
                        String::from_utf8_lossy(key)
                    )
                });
            }
            Ok(index)
        } else {
            self.intern(space, v, Interner::hash(v))
                .ok_or(ParseErrorKind::TooManyNames)
        }
    }

    fn body_spec(&mut self, key: &[u8], value: &[u8], line: &[u8]) -> R<()> {
        match key {
            b"fn" => {
                self.symbol = Some(SymbolId(self.name(Space::Symbol, key, value)?));
                self.function = None;
                self.fi = self.fl;
            }
            b"fl" => {
                self.fl = FileId(self.name(Space::File, key, value)?);
                self.fi = self.fl;
                self.function = None;
            }
            b"fi" | b"fe" => {
                self.callgrind_evidence = true;
                self.fi = FileId(self.name(Space::File, key, value)?);
            }
            b"ob" => {
                self.callgrind_evidence = true;
                self.ob = ObjectId(self.name(Space::Object, key, value)?);
                self.function = None;
            }
            b"cfn" => {
                self.callgrind_evidence = true;
                self.cfn = Some(SymbolId(self.name(Space::Symbol, key, value)?));
            }
            b"cfi" | b"cfl" => {
                self.callgrind_evidence = true;
                self.cfi = Some(FileId(self.name(Space::File, key, value)?));
            }
            b"cob" => {
                self.callgrind_evidence = true;
                self.cob = Some(ObjectId(self.name(Space::Object, key, value)?));
            }
            b"jfi" => {
                self.callgrind_evidence = true;
                self.jfi = Some(FileId(self.name(Space::File, key, value)?));
            }
            b"jfn" => {
                self.callgrind_evidence = true;
                self.jfn = Some(SymbolId(self.name(Space::Symbol, key, value)?));
            }
            b"calls" => {
                self.callgrind_evidence = true;
                return self.calls(value);
            }
            b"jump" | b"jcnd" => {
                self.callgrind_evidence = true;
                return self.jump(key == b"jcnd", value);
            }
            _ => {
                let l = self.line_no;
                self.warnings.add(WarningKind::UnknownBodyLine, l, || {
                    format!("unknown line `{}` skipped", excerpt(line))
                });
            }
        }
        Ok(())
    }

    fn current_function(&mut self) -> R<FunctionId> {
        if let Some(f) = self.function {
            return Ok(f);
        }
        let name = self.symbol.ok_or(ParseErrorKind::CostBeforeFunction)?;
        let f = self
            .function_of(FunctionKey {
                object: self.ob,
                file: self.fl,
                name,
            })
            .ok_or(ParseErrorKind::TooManyNames)?;
        self.function = Some(f);
        Ok(f)
    }

    fn need_events(&self) -> R<()> {
        if self.events_seen {
            Ok(())
        } else {
            Err(ParseErrorKind::MissingEvents)
        }
    }

    /// Parses `np` subpositions from `s` starting at `i`, relative to
    /// `self.last`; returns them and the index after them.
    #[inline]
    fn positions(&self, s: &[u8], i: usize) -> R<([u64; 3], usize)> {
        match self.quick_positions(s, i) {
            Some(r) => Ok(r),
            None => self.careful_positions(s, i),
        }
    }

    /// Positions in the forms Valgrind writes, or `None`.
    #[inline(always)]
    fn quick_positions(&self, s: &[u8], mut i: usize) -> Option<([u64; 3], usize)> {
        let mut out = self.last;
        for slot in out.iter_mut().take(self.np) {
            while i < s.len() && s[i] == b' ' {
                i += 1;
            }
            match *s.get(i)? {
                b'*' => {
                    i += 1;
                    if i < s.len() && !is_space(s[i]) {
                        return None;
                    }
                }
                b'+' => {
                    let (d, j) = fast_decimal(s, i + 1)?;
                    *slot = slot.checked_add(d)?;
                    i = j;
                }
                b'-' => {
                    let (d, j) = fast_decimal(s, i + 1)?;
                    *slot = slot.checked_sub(d)?;
                    i = j;
                }
                _ => {
                    let (v, j) = fast_decimal(s, i)?;
                    *slot = v;
                    i = j;
                }
            }
        }
        Some((out, i))
    }

    #[cold]
    fn careful_positions(&self, s: &[u8], mut i: usize) -> R<([u64; 3], usize)> {
        let mut out = [0u64; 3];
        for (k, slot) in out.iter_mut().enumerate().take(self.np) {
            i = skip_spaces(s, i);
            let base = self.last[k];
            let end = token_end(s, i);
            if end == i {
                return Err(ParseErrorKind::MissingPosition {
                    expected: self.np,
                    names: self.profile.positions.names().join(" "),
                    found: k,
                });
            }
            *slot = subposition(&s[i..end], base)?;
            i = end;
        }
        Ok((out, i))
    }

    /// Parses the counts after the positions into `self.costs`; returns how
    /// many there were.
    #[inline]
    fn counts(&mut self, s: &[u8], mut i: usize) -> R<usize> {
        let mut n = 0;
        loop {
            i = skip_spaces(s, i);
            if i >= s.len() {
                return Ok(n);
            }
            if n == self.ne {
                let extra = s[i..].split(|&b| is_space(b)).filter(|t| !t.is_empty());
                return Err(ParseErrorKind::TooManyCosts {
                    found: n + extra.count(),
                    events: self.ne,
                });
            }
            if let Some((v, j)) = fast_decimal(s, i)
                && let Some(c) = C::from_u64(v)
            {
                self.costs[n] = c;
                n += 1;
                i = j;
                continue;
            }
            let end = token_end(s, i);
            self.costs[n] = parse_cost(&s[i..end])?;
            n += 1;
            i = end;
        }
    }

    fn cost_line(&mut self, s: &[u8]) -> R<()> {
        self.need_events()?;
        self.body_part();
        self.in_body = true;
        let (pos, i) = self.positions(s, 0)?;
        let np = self.np;
        let pending = std::mem::replace(&mut self.pending, Pending::None);
        match pending {
            Pending::None => {
                let n = self.counts(s, i)?;
                let function = self.current_function()?;
                self.last = pos;
                if !add_magnitudes(&mut self.sums.costs, &self.costs[..n]) {
                    return Err(self.sum_overflow(function, n, "self costs and call costs"));
                }
                let stats = self.stats.last_mut().expect("part");
                if !add_totals(&mut stats.totals, &self.costs[..n]) {
                    return Err(self.sum_overflow(function, n, "self costs in this part"));
                }
                stats.lines += 1;
                self.sink
                    .line(function, self.fi, &pos[..np], &self.costs[..n]);
            }
            Pending::Call { count, .. } => {
                let n = self.counts(s, i)?;
                let caller = self.current_function()?;
                if !self.sums.add_call(count, &self.costs[..n]) {
                    return Err(self.call_overflow(caller, count, n));
                }
                self.pending = pending;
                self.emit_call(caller, &pos, n);
                return Ok(());
            }
            Pending::Jump { info, target, .. } => {
                if skip_spaces(s, i) < s.len() {
                    let l = self.line_no;
                    self.warnings.add(WarningKind::JumpLineCosts, l, || {
                        "costs on the source line of a jump are ignored".into()
                    });
                }
                self.emit_jump(info, &pos, &target);
                return Ok(());
            }
        }
        self.seq += 1;
        Ok(())
    }

    fn calls(&mut self, value: &[u8]) -> R<()> {
        self.need_events()?;
        self.body_part();
        let i = skip_spaces(value, 0);
        let end = token_end(value, i);
        let count: C = parse_cost(&value[i..end])?;
        let (target, rest) = self.positions(value, end)?;
        if skip_spaces(value, rest) < value.len() {
            let l = self.line_no;
            self.warnings.add(WarningKind::ExtraCallNumbers, l, || {
                "numbers after the target position of `calls=` are ignored".into()
            });
        }
        self.current_function()?;
        let name = self.cfn.ok_or(ParseErrorKind::CallWithoutCallee)?;
        let callee = self
            .function_of(FunctionKey {
                object: self.cob.unwrap_or(self.ob),
                file: self.cfi.unwrap_or(self.fi),
                name,
            })
            .ok_or(ParseErrorKind::TooManyNames)?;
        self.pending = Pending::Call {
            line: self.line_no,
            count,
            callee,
            target,
        };
        Ok(())
    }

    fn jump(&mut self, conditional: bool, value: &[u8]) -> R<()> {
        self.need_events()?;
        self.body_part();
        let kind = if conditional { "jcnd" } else { "jump" };
        let i = skip_spaces(value, 0);
        let end = token_end(value, i);
        let first = &value[i..end];
        let (executed, taken, rest): (C, C, usize) = if conditional {
            // Valgrind writes `followed/executed`; the specification's text
            // gives `executed followed` separated by a space.
            if let Some(slash) = memchr::memchr(b'/', first) {
                (
                    parse_cost(&first[slash + 1..])?,
                    parse_cost(&first[..slash])?,
                    end,
                )
            } else {
                let j = skip_spaces(value, end);
                let e2 = token_end(value, j);
                (parse_cost(first)?, parse_cost(&value[j..e2])?, e2)
            }
        } else {
            let c = parse_cost(first)?;
            (c, c, end)
        };
        let (target, _) = self.positions(value, rest)?;
        let function = self.current_function()?;
        let target_file = self.jfi.unwrap_or(self.fi);
        let target_function = match self.jfn {
            Some(name) => self
                .function_of(FunctionKey {
                    object: self.ob,
                    file: target_file,
                    name,
                })
                .ok_or(ParseErrorKind::TooManyNames)?,
            None => function,
        };
        let info = JumpInfo {
            function,
            file: self.fi,
            target_function,
            target_file,
            conditional,
            executed,
            taken,
            seq: 0,
        };
        self.pending = Pending::Jump {
            line: self.line_no,
            kind,
            info,
            target,
        };
        Ok(())
    }

    fn counts_line(&self, value: &[u8], key: &'static str) -> R<Vec<C>> {
        let mut v = Vec::new();
        for tok in value.split(|&b| is_space(b)).filter(|t| !t.is_empty()) {
            v.push(parse_cost(tok)?);
        }
        if self.events_seen && v.len() > self.ne {
            return Err(ParseErrorKind::TooManyTotals {
                key,
                found: v.len(),
                events: self.ne,
            });
        }
        Ok(v)
    }

    fn header(&mut self, key: &[u8], value: &[u8], line: &[u8]) -> R<()> {
        let v = &value[skip_spaces(value, 0)..];
        let number = |v: &[u8]| -> R<u64> {
            let t = &v[..token_end(v, 0)];
            tally_model::parse_u64(t).map_err(|e| number_error(e, t))
        };
        match key {
            b"version" => {
                self.callgrind_evidence = true;
                let n = number(v).map_err(|_| ParseErrorKind::Version(excerpt(v)))?;
                if n > 1 {
                    return Err(ParseErrorKind::Version(excerpt(v)));
                }
                self.profile.version = Some(n);
            }
            b"creator" => {
                self.callgrind_evidence = true;
                self.profile.creator = Some(one_space(value).to_vec());
            }
            b"pid" | b"thread" | b"part" => {
                self.callgrind_evidence = true;
                let n = number(v)?;
                let info = self.header_part();
                match key {
                    b"pid" => info.pid = Some(n),
                    b"thread" => info.thread = Some(n),
                    _ => info.number = Some(n),
                }
            }
            b"cmd" => self.header_part().cmd = Some(one_space(value).to_vec()),
            b"desc" => {
                // Kept exactly: `desc: TYPE:VALUE` with VALUE's spacing.
                let (t, val) = match memchr::memchr(b':', v) {
                    Some(c) => (v[..c].to_vec(), v[c + 1..].to_vec()),
                    None => (v.to_vec(), Vec::new()),
                };
                self.header_part().desc.push((t, val));
            }
            b"positions" => {
                self.callgrind_evidence = true;
                let p =
                    Positions::parse(v).ok_or_else(|| ParseErrorKind::BadPositions(excerpt(v)))?;
                self.header_part();
                if self.positions_seen || self.events_seen && self.profile.parts.len() > 1 {
                    if p != self.profile.positions {
                        return Err(ParseErrorKind::PositionsDiffer);
                    }
                } else {
                    self.profile.positions = p;
                    self.np = p.len();
                    self.positions_seen = true;
                }
            }
            b"events" => {
                let names: Vec<String> = v
                    .split(|&b| is_space(b))
                    .filter(|t| !t.is_empty())
                    .map(|t| String::from_utf8_lossy(t).into_owned())
                    .collect();
                if names.is_empty() {
                    return Err(ParseErrorKind::BadEvents("no event names".into()));
                }
                self.header_part();
                if self.events_seen {
                    let old: Vec<&str> = self
                        .profile
                        .events
                        .recorded()
                        .iter()
                        .map(|e| e.name.as_str())
                        .collect();
                    if old != names {
                        return Err(ParseErrorKind::EventsDiffer {
                            expected: old.join(" "),
                            found: names.join(" "),
                        });
                    }
                } else {
                    self.profile
                        .events
                        .set_recorded(names)
                        .map_err(|e| ParseErrorKind::BadEvents(e.to_string()))?;
                    self.ne = self.profile.events.len();
                    self.costs = vec![C::ZERO; self.ne];
                    self.events_seen = true;
                }
            }
            b"event" => {
                self.callgrind_evidence = true;
                self.event_def(v)?;
            }
            b"summary" => {
                let c = self.counts_line(v, "summary")?;
                let line = self.line_no;
                if self.in_body && !self.callgrind_evidence {
                    // Cachegrind's trailing summary is the part's total.
                    self.profile.parts.last_mut().expect("part").info.totals = Some(c);
                    self.stats.last_mut().expect("part").totals_line = line;
                } else if self.in_body {
                    // Some writers (Xdebug) put `summary:` at the end.
                    self.profile.parts.last_mut().expect("part").info.summary = Some(c);
                    self.stats.last_mut().expect("part").summary_line = line;
                } else {
                    self.callgrind_evidence = true;
                    self.header_part().summary = Some(c);
                    self.stats.last_mut().expect("part").summary_line = line;
                }
            }
            b"totals" => {
                self.callgrind_evidence = true;
                let c = self.counts_line(v, "totals")?;
                if !self.open {
                    self.open_part();
                }
                self.profile.parts.last_mut().expect("part").info.totals = Some(c);
                self.stats.last_mut().expect("part").totals_line = self.line_no;
            }
            _ => {
                if key.is_empty() || key.iter().any(|&b| is_space(b) || b < 0x20) {
                    if let Some(&b) = line.iter().find(|&&b| b < 0x20 && b != b'\t') {
                        return Err(ParseErrorKind::Binary(b));
                    }
                    return Err(ParseErrorKind::Unrecognised(excerpt(line)));
                }
                self.header_part().other.push(line.to_vec());
            }
        }
        Ok(())
    }

    /// `event: NAME [= FORMULA] [: LONG NAME]`.
    fn event_def(&mut self, v: &[u8]) -> R<()> {
        let text = String::from_utf8_lossy(v).into_owned();
        let (head, long) = match text.find(':') {
            Some(c) => (&text[..c], Some(text[c + 1..].trim().to_string())),
            None => (text.as_str(), None),
        };
        let (name, formula) = match head.find('=') {
            Some(e) => (head[..e].trim(), Some(&head[e + 1..])),
            None => (head.trim(), None),
        };
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(ParseErrorKind::BadEventDef(excerpt(v)));
        }
        match formula {
            Some(f) => {
                let terms =
                    parse_formula(f).map_err(|e| ParseErrorKind::BadEventDef(e.to_string()))?;
                self.profile
                    .events
                    .add_derived(name.to_string(), long, terms);
            }
            None => {
                if let Some(l) = long {
                    self.profile.events.set_long_name(name, l);
                }
            }
        }
        Ok(())
    }
}

type R<T> = Result<T, ParseErrorKind>;

#[inline]
fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

#[inline]
fn skip_spaces(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    i
}

#[inline]
fn token_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && !is_space(s[i]) {
        i += 1;
    }
    i
}

fn number_error(e: NumberError, token: &[u8]) -> ParseErrorKind {
    let t = excerpt(token);
    match e {
        NumberError::Invalid => ParseErrorKind::BadNumber(t),
        NumberError::Overflow => ParseErrorKind::Overflow(t),
        NumberError::Negative => ParseErrorKind::Negative(t),
    }
}

/// Parses one subposition token relative to `base`.
#[inline]
fn subposition(tok: &[u8], base: u64) -> R<u64> {
    match tok[0] {
        b'*' if tok.len() == 1 => Ok(base),
        b'+' => {
            let d = tally_model::parse_u64(&tok[1..]).map_err(|e| number_error(e, tok))?;
            base.checked_add(d)
                .ok_or_else(|| ParseErrorKind::Overflow(excerpt(tok)))
        }
        b'-' => {
            let d = tally_model::parse_u64(&tok[1..]).map_err(|e| number_error(e, tok))?;
            base.checked_sub(d)
                .ok_or_else(|| ParseErrorKind::PositionUnderflow(excerpt(tok)))
        }
        _ => tally_model::parse_u64(tok).map_err(|e| number_error(e, tok)),
    }
}

#[inline]
fn parse_cost<C: Cost>(tok: &[u8]) -> R<C> {
    if tok == b"." {
        return Ok(C::ZERO);
    }
    C::parse(tok).map_err(|e| number_error(e, tok))
}

/// A header value without the one space that follows the colon.
fn one_space(v: &[u8]) -> &[u8] {
    v.strip_prefix(b" ").unwrap_or(v)
}
