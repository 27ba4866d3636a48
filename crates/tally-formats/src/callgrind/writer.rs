//! The writer of the Callgrind format.
//!
//! By default names are compressed (`(id) name` on first use, `(id)` after)
//! and positions are written relative to the previous cost line, as Valgrind
//! does; [`WriteOptions::compress`] turns both off. The writer mirrors the
//! reader's context rules exactly, so `read(write(p)) == p`.
//!
//! Readers disagree on the base of a relative subposition: tally and
//! Valgrind take the last plain cost line, KCachegrind and
//! callgrind_annotate the last line that starts with a position (a call's
//! cost line and a jump's source line too), and callgrind_annotate resolves
//! a relative *address* against the previous *line number*, so a line
//! column that goes below zero there breaks its parsing ("too many event
//! counts"). The writer therefore writes a subposition relative only when
//! both bases hold the same value, and absolutely after any change of
//! function or file (as Valgrind does), so that every reader decodes the
//! same positions.
//!
//! KCachegrind's loader also forgets name ids at every new part and takes
//! a function id for one function (object, file and name), so ids are
//! given per function and every name is defined again on its first use in
//! each part, as Valgrind does when it combines dumps.
//!
//! Records that Valgrind's readers cannot take, calls whose count is zero
//! or negative and jumps with a negative count (in differences), are
//! written as lines that start with [`HIDDEN`]: a comment for
//! callgrind_annotate and KCachegrind, a record for tally's reader. The
//! other readers thus see the profile without those records instead of
//! misreading them (callgrind_annotate books the cost line after `calls=0`
//! as self cost and rejects `calls=-1`; KCachegrind rejects negative
//! counts), and `read(write(p)) == p` still holds.
//!
//! A name the format cannot hold (`unwritable`: a line break, a space or
//! tab at its start, a carriage return at its end) is refused with
//! [`crate::Error::NameNotWritable`]; a name that starts like a compressed
//! one (`(` and a digit) is written compressed, so that it reads back as
//! the name.

use std::io::{self, Write};

/// The start of a line that only tally reads: other readers skip it as a
/// comment; tally reads the rest as a line of its own.
pub const HIDDEN: &[u8] = b"# tally: ";
use tally_model::{
    CallRef, Cost, FileId, FunctionId, JumpRef, LineRef, Names, ObjectId, PartVisitor, Positions,
    Profile,
};

/// Appends a header value as part of one line: a line feed inside it
/// (possible in values read from pprof or perf input) is written as a
/// space, since the format has no escape for it and the rest of the value
/// would be read as a line of its own. A carriage return inside a line
/// reads back as it is, so it is kept. Names are not written so: see
/// [`unwritable`].
pub(crate) fn push_one_line(buf: &mut Vec<u8>, value: &[u8]) {
    if memchr::memchr(b'\n', value).is_none() {
        buf.extend_from_slice(value);
    } else {
        buf.extend(value.iter().map(|&b| if b == b'\n' { b' ' } else { b }));
    }
}

/// Why a name written after `key=` would read back as another name, if
/// it would: a line break ends the line, readers skip the spaces and tabs
/// after the `=` and drop the carriage returns that end a line. Neither
/// the format nor Valgrind's tools have an escape for these (names any
/// other bytes, NUL too, read back as written), so the writers refuse
/// such a name ([`refusal`]) rather than write another.
pub(crate) fn unwritable(name: &[u8]) -> Option<&'static str> {
    if memchr::memchr(b'\n', name).is_some() {
        Some("a line break in it would end the line")
    } else if matches!(name.first(), Some(b' ' | b'\t')) {
        Some("readers skip the spaces and tabs that start a name")
    } else if name.last() == Some(&b'\r') {
        Some("readers drop a carriage return that ends a line")
    } else {
        None
    }
}

/// The error of a writer of `format` refusing the `what` (function, file,
/// object) `name` for the reason `why`:
/// [`crate::Error::NameNotWritable`] inside an [`io::Error`].
pub(crate) fn refusal(
    format: &'static str,
    what: &'static str,
    name: &[u8],
    why: &'static str,
) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        crate::Error::NameNotWritable {
            format,
            what,
            name: crate::escape::shown(name),
            why,
        },
    )
}

/// How to write.
#[derive(Clone, Copy, Debug)]
pub struct WriteOptions {
    /// Compress names and positions (the default); `false` writes plain
    /// names and absolute positions.
    pub compress: bool,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions { compress: true }
    }
}

/// Writes a profile in the Callgrind format.
pub fn write<C: Cost>(
    profile: &Profile<C>,
    out: &mut dyn Write,
    options: WriteOptions,
) -> io::Result<()> {
    let mut w = Writer {
        out,
        buf: Vec::with_capacity(1 << 17),
        names: &profile.names,
        positions: profile.positions,
        compress: options.compress,
        ids: [Vec::new(), Vec::new(), Vec::new()],
        public: [Vec::new(), Vec::new(), Vec::new()],
        next_id: [1, 1, 1],
        hidden: false,
        ctx: Context::start(),
        last: [0; 3],
        seen: [None; 3],
        error: None,
    };
    w.header(profile)?;
    for (i, part) in profile.parts.iter().enumerate() {
        w.part_header(profile, i)?;
        w.ctx = Context::start();
        w.last = [0; 3];
        w.seen = [None; 3];
        // KCachegrind forgets every id at a new part.
        w.public.iter_mut().for_each(Vec::clear);
        part.visit(&mut w);
        if let Some(e) = w.error.take() {
            return Err(e);
        }
        if let Some(t) = &part.info.totals {
            w.buf.extend_from_slice(b"\ntotals:");
            for &c in t {
                w.buf.push(b' ');
                c.write_to(&mut w.buf);
            }
            w.buf.push(b'\n');
        }
        w.flush_if_full()?;
    }
    w.flush()?;
    w.out.flush()
}

/// The reader's context, mirrored.
#[derive(Default, Clone, Copy)]
struct Context {
    ob: Option<ObjectId>,
    fl: Option<FileId>,
    fi: Option<FileId>,
    function: Option<FunctionId>,
}

impl Context {
    /// Before any `ob=`/`fl=` the reader's object and file are "none".
    fn start() -> Self {
        Context {
            ob: Some(ObjectId::NONE),
            fl: Some(FileId::NONE),
            fi: Some(FileId::NONE),
            function: None,
        }
    }
}

/// What a line's positions are, for the bases of relative subpositions.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PosKind {
    /// A plain cost line: the base for every reader.
    Plain,
    /// A call's cost line or a jump's source line: the base for
    /// KCachegrind and callgrind_annotate only.
    Source,
    /// The target on a `calls=`/`jump=`/`jcnd=` line: no reader's base.
    Target,
    /// A position on a [`HIDDEN`] line: absolute, and no reader's base.
    Hidden,
}

/// Id spaces of compressed names. Function ids are given per function
/// (object, file and name): KCachegrind takes an id for the function first
/// defined with it, whatever `ob=`/`fl=` say at a later use.
#[derive(Clone, Copy)]
enum Space {
    Object = 0,
    File = 1,
    Function = 2,
}

struct Writer<'a> {
    out: &'a mut dyn Write,
    buf: Vec<u8>,
    names: &'a Names,
    positions: Positions,
    compress: bool,
    /// Assigned compressed id per interned index (0 = none yet).
    ids: [Vec<u32>; 3],
    /// Whether an id has been defined in the current part on a line every
    /// reader reads (a definition on a [`HIDDEN`] line is tally's only).
    public: [Vec<bool>; 3],
    next_id: [u32; 3],
    /// Lines are being written as [`HIDDEN`] lines.
    hidden: bool,
    ctx: Context,
    /// The last plain cost line's positions: the base of relative
    /// subpositions for tally's reader and Valgrind.
    last: [u64; 3],
    /// The last position of any line that starts with one (plain cost
    /// line, call cost line, jump source line): the base for KCachegrind
    /// and callgrind_annotate; `None` where no base is safe to use.
    seen: [Option<u64>; 3],
    error: Option<io::Error>,
}

impl Writer<'_> {
    fn flush_if_full(&mut self) -> io::Result<()> {
        if self.buf.len() >= 1 << 16 {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.write_all(&self.buf)?;
        self.buf.clear();
        Ok(())
    }

    fn header<C: Cost>(&mut self, p: &Profile<C>) -> io::Result<()> {
        self.buf.extend_from_slice(b"# callgrind format\n");
        if let Some(v) = p.version {
            self.buf.extend_from_slice(b"version: ");
            v.write_to(&mut self.buf);
            self.buf.push(b'\n');
        }
        if let Some(c) = &p.creator {
            self.line(b"creator: ", c);
        }
        Ok(())
    }

    fn line(&mut self, key: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(key);
        push_one_line(&mut self.buf, value);
        self.buf.push(b'\n');
    }

    fn part_header<C: Cost>(&mut self, p: &Profile<C>, index: usize) -> io::Result<()> {
        let info = &p.parts[index].info;
        if index > 0 {
            self.buf.push(b'\n');
        }
        let num = |w: &mut Self, key: &[u8], v: Option<u64>| {
            if let Some(v) = v {
                w.buf.extend_from_slice(key);
                v.write_to(&mut w.buf);
                w.buf.push(b'\n');
            }
        };
        num(self, b"pid: ", info.pid);
        if let Some(c) = &info.cmd {
            self.line(b"cmd: ", c);
        }
        num(self, b"part: ", info.number);
        num(self, b"thread: ", info.thread);
        for (t, v) in &info.desc {
            self.buf.extend_from_slice(b"desc: ");
            push_one_line(&mut self.buf, t);
            self.buf.push(b':');
            push_one_line(&mut self.buf, v);
            self.buf.push(b'\n');
        }
        for o in &info.other {
            self.buf.extend_from_slice(o);
            self.buf.push(b'\n');
        }
        self.buf.extend_from_slice(b"positions:");
        for n in p.positions.names() {
            self.buf.push(b' ');
            self.buf.extend_from_slice(n.as_bytes());
        }
        self.buf.push(b'\n');
        // `event:` lines go before `events:`, where Valgrind writes them:
        // callgrind_annotate rejects them after it.
        if index == 0 {
            for e in p.events.recorded() {
                if let Some(l) = &e.long_name {
                    self.line(b"event: ", format!("{} : {}", e.name, l).as_bytes());
                }
            }
            for (name, l) in p.events.extra_long_names() {
                self.line(b"event: ", format!("{name} : {l}").as_bytes());
            }
            for d in p.events.derived() {
                let mut s = format!("{} = {}", d.name, d.formula());
                if let Some(l) = &d.long_name {
                    s.push_str(" : ");
                    s.push_str(l);
                }
                self.line(b"event: ", s.as_bytes());
            }
        }
        self.buf.extend_from_slice(b"events:");
        for e in p.events.recorded() {
            self.buf.push(b' ');
            self.buf.extend_from_slice(e.name.as_bytes());
        }
        self.buf.push(b'\n');
        if let Some(s) = &info.summary {
            self.buf.extend_from_slice(b"summary:");
            for &c in s {
                self.buf.push(b' ');
                c.write_to(&mut self.buf);
            }
            self.buf.push(b'\n');
        }
        self.buf.push(b'\n');
        self.flush_if_full()
    }

    /// Starts a line: [`HIDDEN`] first when lines are hidden.
    fn start_line(&mut self) {
        if self.hidden {
            self.buf.extend_from_slice(HIDDEN);
        }
    }

    /// Writes `key=` and a name, compressed or not.
    fn name(&mut self, key: &[u8], space: Space, index: u32) {
        // After a change of function or file, start from absolute
        // positions, as Valgrind does (readers may reset their base there).
        if !key.starts_with(b"c") && !key.starts_with(b"j") {
            self.seen = [None; 3];
        }
        self.start_line();
        self.buf.extend_from_slice(key);
        self.buf.push(b'=');
        let bytes = match space {
            Space::Object => self.names.objects.get(index),
            Space::File => self.names.files.get(index),
            Space::Function => self.names.function_name(FunctionId(index)),
        };
        // A plain name that looks like `(digit` would be read as an id.
        let looks_compressed = bytes.len() >= 2 && bytes[0] == b'(' && bytes[1].is_ascii_digit();
        if self.compress || looks_compressed {
            let s = space as usize;
            let i = index as usize;
            if self.ids[s].len() <= i {
                self.ids[s].resize(i + 1, 0);
            }
            if self.public[s].len() <= i {
                self.public[s].resize(i + 1, false);
            }
            let id = self.ids[s][i];
            self.buf.push(b'(');
            // A known id is only referred to where every reader that sees
            // this line knows it: tally knows every id from any part and
            // any line; the others only ids defined publicly in this part.
            if id != 0 && (self.hidden || self.public[s][i]) {
                id.write_to_buf(&mut self.buf);
                self.buf.extend_from_slice(b")\n");
                return;
            }
            let id = if id != 0 {
                id
            } else {
                let id = self.next_id[s];
                self.next_id[s] += 1;
                self.ids[s][i] = id;
                id
            };
            self.public[s][i] = !self.hidden;
            id.write_to_buf(&mut self.buf);
            self.buf.extend_from_slice(b") ");
        }
        if let Some(why) = unwritable(bytes) {
            let what = match space {
                Space::Object => "object",
                Space::File => "file",
                Space::Function => "function",
            };
            self.error
                .get_or_insert_with(|| refusal("Callgrind", what, bytes, why));
        }
        self.buf.extend_from_slice(bytes);
        self.buf.push(b'\n');
    }

    /// Sets the context to `function` with source file `file`.
    fn context(&mut self, function: FunctionId, file: FileId) {
        if self.ctx.function != Some(function) {
            // Return to the function's file before leaving it, as Valgrind
            // does: callgrind_annotate does not reset the file on `fn=`.
            if let (Some(fi), Some(fl)) = (self.ctx.fi, self.ctx.fl)
                && fi != fl
            {
                self.name(b"fe", Space::File, fl.0);
                self.ctx.fi = Some(fl);
            }
            let key = self.names.key(function);
            if self.ctx.ob != Some(key.object) {
                self.name(b"ob", Space::Object, key.object.0);
                self.ctx.ob = Some(key.object);
            }
            if self.ctx.fl != Some(key.file) {
                self.name(b"fl", Space::File, key.file.0);
                self.ctx.fl = Some(key.file);
            }
            self.name(b"fn", Space::Function, function.0);
            self.ctx.function = Some(function);
            self.ctx.fi = Some(key.file);
        }
        if self.ctx.fi != Some(file) {
            let key = if Some(file) == self.ctx.fl {
                b"fe"
            } else {
                b"fi"
            };
            self.name(key, Space::File, file.0);
            self.ctx.fi = Some(file);
        }
    }

    /// Writes positions of a line of `kind`, relative only where every
    /// reader's base is the same (see the module doc), and moves the bases
    /// the kind moves.
    fn positions(&mut self, pos: &[u64], kind: PosKind) {
        let instr = self.positions.instr();
        for (k, &v) in pos.iter().enumerate() {
            if k > 0 {
                self.buf.push(b' ');
            }
            let hex = instr == Some(k);
            let base = self.last[k];
            let relative = self.compress && kind != PosKind::Hidden && self.seen[k] == Some(base);
            if relative && v == base {
                self.buf.push(b'*');
            } else if relative && v > base && v - base < (1 << 20) && v - base < v / 2 {
                self.buf.push(b'+');
                (v - base).write_to(&mut self.buf);
            } else if relative && v < base && base - v < (1 << 20) && base - v < v / 2 {
                self.buf.push(b'-');
                (base - v).write_to(&mut self.buf);
            } else if hex {
                write!(self.buf, "0x{v:x}").expect("write to Vec");
            } else {
                v.write_to(&mut self.buf);
            }
            match kind {
                PosKind::Plain => {
                    self.last[k] = v;
                    self.seen[k] = Some(v);
                }
                PosKind::Source => self.seen[k] = Some(v),
                PosKind::Target | PosKind::Hidden => {}
            }
        }
    }

    fn costs<C: Cost>(&mut self, costs: &[C]) {
        let n = costs
            .iter()
            .rposition(|c| !c.is_zero())
            .map_or(0, |i| i + 1);
        for &c in &costs[..n] {
            self.buf.push(b' ');
            c.write_to(&mut self.buf);
        }
        self.buf.push(b'\n');
    }
}

trait WriteU32 {
    fn write_to_buf(self, buf: &mut Vec<u8>);
}

impl WriteU32 for u32 {
    fn write_to_buf(self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
    }
}

impl<C: Cost> PartVisitor<C> for Writer<'_> {
    fn line(&mut self, line: LineRef<'_, C>) {
        if self.error.is_some() {
            return;
        }
        self.context(line.function, line.file);
        self.positions(line.positions, PosKind::Plain);
        self.costs(line.costs);
        if let Err(e) = self.flush_if_full() {
            self.error.get_or_insert(e);
        }
    }

    fn call(&mut self, call: CallRef<'_, C>) {
        if self.error.is_some() {
            return;
        }
        let i = call.info;
        self.context(i.caller, i.site_file);
        let caller = self.names.key(i.caller);
        let callee = self.names.key(i.callee);
        // A difference's call whose count did not grow: see the module doc.
        self.hidden = C::SIGNED && i.count <= C::ZERO;
        let (target_kind, site_kind) = if self.hidden {
            (PosKind::Hidden, PosKind::Hidden)
        } else {
            (PosKind::Target, PosKind::Source)
        };
        // `cob=` and `cfi=` hold for one call; their defaults are the
        // current object and the current (possibly inlined) file.
        if callee.object != caller.object {
            self.name(b"cob", Space::Object, callee.object.0);
        }
        if callee.file != i.site_file {
            self.name(b"cfi", Space::File, callee.file.0);
        }
        self.name(b"cfn", Space::Function, i.callee.0);
        self.start_line();
        self.buf.extend_from_slice(b"calls=");
        i.count.write_to(&mut self.buf);
        self.buf.push(b' ');
        self.positions(call.target, target_kind);
        self.buf.push(b'\n');
        self.start_line();
        self.positions(call.site, site_kind);
        self.costs(call.inclusive);
        self.hidden = false;
    }

    fn jump(&mut self, jump: JumpRef<'_, C>) {
        if self.error.is_some() {
            return;
        }
        let i = jump.info;
        self.context(i.function, i.file);
        // A difference's jump with a negative count: see the module doc.
        self.hidden = C::SIGNED && (i.taken < C::ZERO || i.executed < C::ZERO);
        let (target_kind, source_kind) = if self.hidden {
            (PosKind::Hidden, PosKind::Hidden)
        } else {
            (PosKind::Target, PosKind::Source)
        };
        if i.target_file != i.file {
            self.name(b"jfi", Space::File, i.target_file.0);
        }
        if i.target_function != i.function {
            self.name(b"jfn", Space::Function, i.target_function.0);
        }
        self.start_line();
        if i.conditional {
            self.buf.extend_from_slice(b"jcnd=");
            i.taken.write_to(&mut self.buf);
            self.buf.push(b'/');
            i.executed.write_to(&mut self.buf);
        } else {
            self.buf.extend_from_slice(b"jump=");
            i.executed.write_to(&mut self.buf);
        }
        self.buf.push(b' ');
        self.positions(jump.target, target_kind);
        self.buf.push(b'\n');
        self.start_line();
        self.positions(jump.source, source_kind);
        self.buf.push(b'\n');
        self.hidden = false;
    }
}
