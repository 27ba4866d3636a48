//! The JSON form of a profile (schema in `docs/json.md`).
//!
//! Written by hand, streaming, so that a large profile needs no second copy
//! in memory; strings are escaped by serde_json. Names are written as UTF-8,
//! with invalid bytes replaced. Recorded stacks and their timeline are
//! written too. Every command reads the form back ([`read_as`]): from the
//! stacks where it holds them, else from its parts' records.

use crate::error::{Error, ParseErrorKind};
use serde_json::Value;
use std::io::{self, Write};
use std::path::Path;
use tally_model::{
    Cost, Format, Frame, FrameId, FunctionId, Label, LabelValue, Profile, Stacks, Thread, Timeline,
};

/// Version of the schema, written as `"tally_json"`.
pub const SCHEMA_VERSION: u32 = 1;

struct J<'a> {
    out: &'a mut dyn Write,
}

impl J<'_> {
    fn raw(&mut self, s: &str) -> io::Result<()> {
        self.out.write_all(s.as_bytes())
    }
    fn string(&mut self, bytes: &[u8]) -> io::Result<()> {
        serde_json::to_writer(&mut *self.out, &String::from_utf8_lossy(bytes))
            .map_err(io::Error::other)
    }
    fn opt_string(&mut self, bytes: Option<&[u8]>) -> io::Result<()> {
        match bytes {
            Some(b) => self.string(b),
            None => self.raw("null"),
        }
    }
    fn num<T: itoa::Integer>(&mut self, v: T) -> io::Result<()> {
        self.raw(itoa::Buffer::new().format(v))
    }
    fn opt_num(&mut self, v: Option<u64>) -> io::Result<()> {
        match v {
            Some(v) => self.num(v),
            None => self.raw("null"),
        }
    }
    fn costs<C: Cost>(&mut self, v: &[C]) -> io::Result<()> {
        self.raw("[")?;
        let mut b = Vec::new();
        for (i, c) in v.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            c.write_to(&mut b);
        }
        self.out.write_all(&b)?;
        self.raw("]")
    }
    fn cost<C: Cost>(&mut self, c: C) -> io::Result<()> {
        let mut b = Vec::new();
        c.write_to(&mut b);
        self.out.write_all(&b)
    }
    fn positions(&mut self, v: &[u64]) -> io::Result<()> {
        self.raw("[")?;
        for (i, p) in v.iter().enumerate() {
            if i > 0 {
                self.raw(",")?;
            }
            self.num(*p)?;
        }
        self.raw("]")
    }
    fn numbers<T: itoa::Integer>(&mut self, v: impl Iterator<Item = T>) -> io::Result<()> {
        let mut b = Vec::new();
        let mut buf = itoa::Buffer::new();
        b.push(b'[');
        for (i, n) in v.enumerate() {
            if i > 0 {
                b.push(b',');
            }
            b.extend_from_slice(buf.format(n).as_bytes());
            if b.len() >= 1 << 16 {
                self.out.write_all(&b)?;
                b.clear();
            }
        }
        b.push(b']');
        self.out.write_all(&b)
    }
    fn opt_costs<C: Cost>(&mut self, v: Option<&[C]>) -> io::Result<()> {
        match v {
            Some(v) => self.costs(v),
            None => self.raw("null"),
        }
    }
}

/// Writes a profile as JSON.
pub fn write<C: Cost>(profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
    let names = &profile.names;
    let mut j = J { out };
    j.raw("{\"tally_json\":")?;
    j.num(SCHEMA_VERSION)?;
    j.raw(",\"format\":")?;
    j.raw(match profile.format {
        Format::Callgrind => "\"callgrind\"",
        Format::Cachegrind => "\"cachegrind\"",
    })?;
    j.raw(",\"version\":")?;
    j.opt_num(profile.version)?;
    j.raw(",\"creator\":")?;
    j.opt_string(profile.creator.as_deref())?;
    j.raw(",\"positions\":[")?;
    for (i, n) in profile.positions.names().iter().enumerate() {
        if i > 0 {
            j.raw(",")?;
        }
        j.string(n.as_bytes())?;
    }
    j.raw("],\"events\":[")?;
    for (i, e) in profile.events.recorded().iter().enumerate() {
        if i > 0 {
            j.raw(",")?;
        }
        j.raw("{\"name\":")?;
        j.string(e.name.as_bytes())?;
        j.raw(",\"long_name\":")?;
        j.opt_string(e.long_name.as_deref().map(str::as_bytes))?;
        j.raw("}")?;
    }
    j.raw("],\"derived_events\":[")?;
    for (i, d) in profile.events.derived().iter().enumerate() {
        if i > 0 {
            j.raw(",")?;
        }
        j.raw("{\"name\":")?;
        j.string(d.name.as_bytes())?;
        j.raw(",\"long_name\":")?;
        j.opt_string(d.long_name.as_deref().map(str::as_bytes))?;
        j.raw(",\"formula\":")?;
        j.string(d.formula().as_bytes())?;
        j.raw("}")?;
    }
    j.raw("],\"functions\":[")?;
    for (id, key) in names.functions() {
        if id.0 > 0 {
            j.raw(",")?;
        }
        j.raw("{\"id\":")?;
        j.num(id.0)?;
        j.raw(",\"name\":")?;
        j.string(names.symbols.get(key.name.0))?;
        j.raw(",\"file\":")?;
        j.string(names.files.get(key.file.0))?;
        j.raw(",\"object\":")?;
        j.string(names.objects.get(key.object.0))?;
        j.raw("}")?;
    }
    j.raw("],\"parts\":[")?;
    let ne = profile.events.len();
    for (pi, part) in profile.parts.iter().enumerate() {
        let info = &part.info;
        if pi > 0 {
            j.raw(",")?;
        }
        j.raw("\n{\"number\":")?;
        j.opt_num(info.number)?;
        j.raw(",\"pid\":")?;
        j.opt_num(info.pid)?;
        j.raw(",\"thread\":")?;
        j.opt_num(info.thread)?;
        j.raw(",\"cmd\":")?;
        j.opt_string(info.cmd.as_deref())?;
        j.raw(",\"desc\":[")?;
        for (i, (t, v)) in info.desc.iter().enumerate() {
            if i > 0 {
                j.raw(",")?;
            }
            j.raw("{\"type\":")?;
            j.string(t)?;
            j.raw(",\"value\":")?;
            j.string(v)?;
            j.raw("}")?;
        }
        j.raw("],\"other_header_lines\":[")?;
        for (i, o) in info.other.iter().enumerate() {
            if i > 0 {
                j.raw(",")?;
            }
            j.string(o)?;
        }
        j.raw("],\"summary\":")?;
        j.opt_costs(info.summary.as_deref())?;
        j.raw(",\"totals\":")?;
        j.opt_costs(info.totals.as_deref())?;

        // Functions with self costs, in order of first appearance, each
        // with its lines (blocks of one function are gathered).
        let mut order: Vec<FunctionId> = Vec::new();
        let mut blocks_of: Vec<Vec<usize>> = vec![Vec::new(); names.function_count()];
        for (bi, b) in part.lines.blocks().iter().enumerate() {
            let list = &mut blocks_of[b.function.index()];
            if list.is_empty() {
                order.push(b.function);
            }
            list.push(bi);
        }
        j.raw(",\"functions\":[")?;
        let mut self_cost = vec![C::ZERO; ne];
        // Summed on the way, so the lines are decoded once; `None` on
        // overflow (written as null).
        let mut self_totals = Some(vec![C::ZERO; ne]);
        let mut text: Vec<u8> = Vec::new();
        for (fi, f) in order.iter().enumerate() {
            if fi > 0 {
                j.raw(",")?;
            }
            self_cost.iter_mut().for_each(|c| *c = C::ZERO);
            text.clear();
            let mut first = true;
            for &bi in &blocks_of[f.index()] {
                part.lines.for_each_in_block(bi, |l| {
                    for (a, &b) in self_cost.iter_mut().zip(l.costs) {
                        *a = a.saturating_add(b);
                    }
                    if !first {
                        text.push(b',');
                    }
                    first = false;
                    text.extend_from_slice(b"{\"file\":");
                    serde_json::to_writer(
                        &mut text,
                        &String::from_utf8_lossy(names.files.get(l.file.0)),
                    )
                    .expect("write to Vec");
                    text.extend_from_slice(b",\"positions\":[");
                    for (i, p) in l.positions.iter().enumerate() {
                        if i > 0 {
                            text.push(b',');
                        }
                        p.write_to(&mut text);
                    }
                    text.extend_from_slice(b"],\"costs\":[");
                    for (i, c) in l.costs.iter().enumerate() {
                        if i > 0 {
                            text.push(b',');
                        }
                        c.write_to(&mut text);
                    }
                    text.extend_from_slice(b"]}");
                });
            }
            if let Some(t) = self_totals.as_mut() {
                for (a, &b) in t.iter_mut().zip(&self_cost) {
                    match a.checked_add(b) {
                        Some(v) => *a = v,
                        None => {
                            self_totals = None;
                            break;
                        }
                    }
                }
            }
            j.raw("\n{\"function\":")?;
            j.num(f.0)?;
            j.raw(",\"self\":")?;
            j.costs(&self_cost)?;
            j.raw(",\"lines\":[")?;
            j.out.write_all(&text)?;
            j.raw("]}")?;
        }
        j.raw("],\"self_totals\":")?;
        j.opt_costs(self_totals.as_deref())?;
        j.raw(",\"calls\":[")?;
        for (i, c) in part.calls.iter().enumerate() {
            if i > 0 {
                j.raw(",")?;
            }
            j.raw("\n{\"caller\":")?;
            j.num(c.info.caller.0)?;
            j.raw(",\"callee\":")?;
            j.num(c.info.callee.0)?;
            j.raw(",\"site_file\":")?;
            j.string(names.files.get(c.info.site_file.0))?;
            j.raw(",\"site\":")?;
            j.positions(c.site)?;
            j.raw(",\"target\":")?;
            j.positions(c.target)?;
            j.raw(",\"count\":")?;
            j.cost(c.info.count)?;
            j.raw(",\"inclusive\":")?;
            j.costs(c.inclusive)?;
            j.raw("}")?;
        }
        j.raw("],\"jumps\":[")?;
        for (i, jp) in part.jumps.iter().enumerate() {
            if i > 0 {
                j.raw(",")?;
            }
            let x = jp.info;
            j.raw("\n{\"function\":")?;
            j.num(x.function.0)?;
            j.raw(",\"file\":")?;
            j.string(names.files.get(x.file.0))?;
            j.raw(",\"target_function\":")?;
            j.num(x.target_function.0)?;
            j.raw(",\"target_file\":")?;
            j.string(names.files.get(x.target_file.0))?;
            j.raw(",\"conditional\":")?;
            j.raw(if x.conditional { "true" } else { "false" })?;
            j.raw(",\"executed\":")?;
            j.cost(x.executed)?;
            j.raw(",\"taken\":")?;
            j.cost(x.taken)?;
            j.raw(",\"source\":")?;
            j.positions(jp.source)?;
            j.raw(",\"target\":")?;
            j.positions(jp.target)?;
            j.raw("}")?;
        }
        j.raw("]}")?;
    }
    j.raw("],\"stacks\":")?;
    match &profile.stacks {
        Some(stacks) => write_stacks(&mut j, stacks)?,
        None => j.raw("null")?,
    }
    j.raw("}\n")?;
    j.out.flush()
}

/// The recorded stacks and their timeline (docs/json.md), as columns of
/// numbers where a profile holds millions of them.
fn write_stacks<C: Cost>(j: &mut J<'_>, stacks: &Stacks<C>) -> io::Result<()> {
    j.raw("{\"frames\":[")?;
    for (i, f) in stacks.frames.iter().enumerate() {
        j.raw(if i > 0 { ",[" } else { "[" })?;
        j.num(f.function.0)?;
        j.raw(",")?;
        j.num(f.line)?;
        j.raw(",")?;
        j.num(f.address)?;
        j.raw("]")?;
    }
    j.raw("],\"samples\":[")?;
    for (i, s) in stacks.samples.iter().enumerate() {
        j.raw(if i > 0 {
            ",\n{\"frames\":"
        } else {
            "\n{\"frames\":"
        })?;
        j.numbers(s.frames.iter().map(|f| f.0))?;
        j.raw(",\"costs\":")?;
        j.costs(&s.costs)?;
        let labels = stacks.labels_of(i);
        if !labels.is_empty() {
            j.raw(",\"labels\":[")?;
            for (k, l) in labels.iter().enumerate() {
                j.raw(if k > 0 { ",{\"key\":" } else { "{\"key\":" })?;
                j.string(&l.key)?;
                match &l.value {
                    LabelValue::Text(t) => {
                        j.raw(",\"text\":")?;
                        j.string(t)?;
                    }
                    LabelValue::Number(n, unit) => {
                        j.raw(",\"number\":")?;
                        j.num(*n)?;
                        j.raw(",\"unit\":")?;
                        j.string(unit)?;
                    }
                }
                j.raw("}")?;
            }
            j.raw("]")?;
        }
        j.raw("}")?;
    }
    j.raw("],\"timeline\":")?;
    let Some(t) = &stacks.timeline else {
        return j.raw("null}");
    };
    j.raw("{\"threads\":[")?;
    for (i, th) in t.threads.iter().enumerate() {
        j.raw(if i > 0 { ",{\"pid\":" } else { "{\"pid\":" })?;
        j.num(th.pid)?;
        j.raw(",\"tid\":")?;
        j.num(th.tid)?;
        j.raw(",\"name\":")?;
        j.string(&th.name)?;
        j.raw("}")?;
    }
    j.raw("],\"start\":")?;
    j.opt_num(t.start)?;
    j.raw(",\n\"time\":")?;
    j.numbers(t.times.iter().copied())?;
    j.raw(",\n\"thread\":")?;
    j.numbers(t.thread.iter().copied())?;
    j.raw(",\n\"stack\":")?;
    j.numbers(t.stack.iter().copied())?;
    j.raw(",\n\"costs\":")?;
    j.costs(&t.costs)?;
    j.raw("}}")
}

/// One step of the way from the document's root to a value, so that an
/// error can name the value and find its line.
#[derive(Clone, Copy, Debug)]
enum Step<'s> {
    Key(&'s str),
    Index(usize),
}
use Step::{Index as I, Key as K};

/// The document being read: its name and bytes, for errors that name the
/// file and the line of the value at fault.
struct Doc<'a> {
    path: &'a Path,
    bytes: &'a [u8],
}

impl Doc<'_> {
    /// "malformed `parts[0].calls[3].callee`: …" at the value's line.
    fn bad(&self, at: &[Step<'_>], what: impl std::fmt::Display) -> Error {
        self.bad_named(at, at, what)
    }

    /// An error naming the value at `name` and lying at `at`'s line.
    fn bad_named(&self, name: &[Step<'_>], at: &[Step<'_>], what: impl std::fmt::Display) -> Error {
        let mut shown = String::new();
        for s in name {
            match s {
                K(k) if shown.is_empty() => shown.push_str(k),
                K(k) => {
                    shown.push('.');
                    shown.push_str(k);
                }
                I(i) => shown.push_str(&format!("[{i}]")),
            }
        }
        Error::Parse {
            path: self.path.to_path_buf(),
            line: line_of(self.bytes, at),
            kind: ParseErrorKind::Malformed(format!("malformed `{shown}`: {what}")),
        }
    }

    /// A negative count where the profile is read as measured: the load
    /// reads the file again as a difference.
    fn negative(&self, at: &[Step<'_>], n: &Value) -> Error {
        Error::Parse {
            path: self.path.to_path_buf(),
            line: line_of(self.bytes, at),
            kind: ParseErrorKind::Negative(n.to_string()),
        }
    }
}

/// The line (1-based) where the value at `path` starts, found by skipping
/// over the other values: errors are rare, so the document is not kept
/// with positions. A path that leads nowhere gives the line reached.
fn line_of(bytes: &[u8], path: &[Step<'_>]) -> u64 {
    let at = locate(bytes, path);
    bytes[..at.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count() as u64
        + 1
}

fn locate(b: &[u8], path: &[Step<'_>]) -> usize {
    let ws = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut at = ws(0);
    for step in path {
        match (step, b.get(at)) {
            (K(key), Some(b'{')) => {
                at = ws(at + 1);
                loop {
                    if b.get(at) != Some(&b'"') {
                        return at;
                    }
                    let end = skip_value(b, at);
                    let name = b.get(at + 1..end.saturating_sub(1)).unwrap_or_default();
                    at = ws(end);
                    if b.get(at) != Some(&b':') {
                        return at;
                    }
                    at = ws(at + 1);
                    if name == key.as_bytes() {
                        break;
                    }
                    at = ws(skip_value(b, at));
                    if b.get(at) != Some(&b',') {
                        return at;
                    }
                    at = ws(at + 1);
                }
            }
            (I(n), Some(b'[')) => {
                at = ws(at + 1);
                for _ in 0..*n {
                    at = ws(skip_value(b, at));
                    if b.get(at) != Some(&b',') {
                        return at;
                    }
                    at = ws(at + 1);
                }
            }
            _ => return at,
        }
    }
    at
}

/// The index just past the value that starts at `at`.
fn skip_value(b: &[u8], mut at: usize) -> usize {
    let mut depth = 0usize;
    let mut in_string = false;
    while let Some(&c) = b.get(at) {
        at += 1;
        if in_string {
            match c {
                b'\\' => at += 1,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return at;
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth <= 1 => return at,
            b'}' | b']' => depth -= 1,
            b',' | b':' if depth == 0 => return at - 1,
            c if depth == 0 && c.is_ascii_whitespace() => return at - 1,
            _ => {}
        }
    }
    at
}

/// A count of `C` from a JSON number.
fn cost_of<C: Cost>(doc: &Doc<'_>, v: &Value, at: &[Step<'_>]) -> Result<C, Error> {
    if let Some(n) = v.as_u64() {
        return C::from_u64(n)
            .ok_or_else(|| doc.bad(at, format!("{n} does not fit a signed 64-bit count")));
    }
    match v.as_i64() {
        Some(_) if !C::SIGNED => Err(doc.negative(at, v)),
        Some(n) => Ok(C::from_i128(i128::from(n)).expect("an i64 fits")),
        None => Err(doc.bad(at, format!("`{v}` is not a whole number"))),
    }
}

/// The array at `key` of `v` (`None` when absent or null).
fn opt_array<'v>(
    doc: &Doc<'_>,
    v: &'v Value,
    key: &str,
    at: &[Step<'_>],
) -> Result<Option<&'v [Value]>, Error> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(a)) => Ok(Some(a)),
        Some(_) => Err(doc.bad(&[at, &[K(key)]].concat(), "not an array")),
    }
}

/// The array at `key` of `v`, which must be there.
fn array<'v>(
    doc: &Doc<'_>,
    v: &'v Value,
    key: &str,
    at: &[Step<'_>],
) -> Result<&'v [Value], Error> {
    opt_array(doc, v, key, at)?.ok_or_else(|| doc.bad(at, format!("no array `{key}`")))
}

/// The array of counts at `key` of `v`.
fn costs_at<C: Cost>(
    doc: &Doc<'_>,
    v: &Value,
    key: &str,
    at: &[Step<'_>],
) -> Result<Vec<C>, Error> {
    let list = array(doc, v, key, at)?;
    list.iter()
        .enumerate()
        .map(|(i, n)| cost_of(doc, n, &[at, &[K(key), I(i)]].concat()))
        .collect()
}

/// The unsigned number at `key` of `v` (`None` when absent or null).
fn opt_u64(doc: &Doc<'_>, v: &Value, key: &str, at: &[Step<'_>]) -> Result<Option<u64>, Error> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(n) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| doc.bad(&[at, &[K(key)]].concat(), format!("`{n}` is not a count"))),
    }
}

/// The string at `key` of `v` as bytes (`None` when absent or null).
fn opt_text(
    doc: &Doc<'_>,
    v: &Value,
    key: &str,
    at: &[Step<'_>],
) -> Result<Option<Vec<u8>>, Error> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_bytes().to_vec())),
        Some(n) => Err(doc.bad(&[at, &[K(key)]].concat(), format!("`{n}` is not a string"))),
    }
}

/// An index below `len` at `at`; `what` names what it indexes.
fn index_of(
    doc: &Doc<'_>,
    v: &Value,
    len: usize,
    what: &str,
    at: &[Step<'_>],
) -> Result<u32, Error> {
    let n = v
        .as_u64()
        .ok_or_else(|| doc.bad(at, format!("`{v}` is not a {what} index")))?;
    u32::try_from(n)
        .ok()
        .filter(|&i| (i as usize) < len)
        .ok_or_else(|| doc.bad(at, format!("{what} {n} is out of range (there are {len})")))
}

/// Positions (`[instr, line]`…), as many as the profile declares.
fn positions_at(
    doc: &Doc<'_>,
    v: &Value,
    key: &str,
    n: usize,
    at: &[Step<'_>],
) -> Result<Vec<u64>, Error> {
    let list = array(doc, v, key, at)?;
    if list.len() != n {
        return Err(doc.bad(
            &[at, &[K(key)]].concat(),
            format!("{} positions where the profile has {n}", list.len()),
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, p)| {
            p.as_u64().ok_or_else(|| {
                doc.bad(
                    &[at, &[K(key), I(i)]].concat(),
                    format!("`{p}` is not a position"),
                )
            })
        })
        .collect()
}

/// Reads tally's JSON form of a profile (docs/json.md) with counts of type
/// `C`. Where the file holds recorded stacks, the profile's one part is
/// derived from them, as the reader of the recording derived it, with the
/// header facts of the file's first part; otherwise the parts are rebuilt
/// from their lines, calls and jumps. A negative count read as `u64` is
/// [`ParseErrorKind::Negative`], so that the load reads the file again as
/// a difference.
pub fn read_as<C: Cost>(path: &Path, bytes: &[u8]) -> Result<Profile<C>, Error> {
    let doc = Doc { path, bytes };
    let root: Value = serde_json::from_slice(bytes).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        line: e.line() as u64,
        kind: ParseErrorKind::Malformed(format!(
            "not tally's JSON form (column {}): {e}",
            e.column()
        )),
    })?;
    match root.get("tally_json").and_then(Value::as_u64) {
        Some(v) if v == u64::from(SCHEMA_VERSION) => {}
        Some(v) => {
            return Err(doc.bad(
                &[K("tally_json")],
                format!("schema version {v}; this tally reads version {SCHEMA_VERSION}"),
            ));
        }
        None => return Err(doc.bad(&[], "no `tally_json` version: not tally's JSON form")),
    }
    let format = match root.get("format").and_then(Value::as_str) {
        None | Some("callgrind") => Format::Callgrind,
        Some("cachegrind") => Format::Cachegrind,
        Some(f) => return Err(doc.bad(&[K("format")], format!("unknown format `{f}`"))),
    };
    let names: Vec<&str> = array(&doc, &root, "positions", &[])?
        .iter()
        .map(Value::as_str)
        .collect::<Option<_>>()
        .ok_or_else(|| doc.bad(&[K("positions")], "not a list of names"))?;
    let positions = tally_model::Positions::parse(names.join(" ").as_bytes()).ok_or_else(|| {
        doc.bad(
            &[K("positions")],
            "not one or more of `instr`, `bb`, `line` in that order",
        )
    })?;
    let mut events = read_events(&doc, &root)?;
    events
        .resolve()
        .map_err(|e| doc.bad(&[K("derived_events")], e))?;
    let mut profile = Profile::<C>::new(format, events, positions);
    profile.version = opt_u64(&doc, &root, "version", &[])?;
    profile.creator = opt_text(&doc, &root, "creator", &[])?;
    let functions = read_functions(&doc, &root, &mut profile)?;
    let np = positions.len();
    let ne = profile.events.len();
    let mut parts = Vec::new();
    let mut sums = vec![0u64; ne + 1];
    for (pi, v) in array(&doc, &root, "parts", &[])?.iter().enumerate() {
        let at = [K("parts"), I(pi)];
        parts.push(read_part(
            &doc,
            v,
            &at,
            &mut profile,
            functions,
            np,
            ne,
            &mut sums,
        )?);
    }
    let stacks = stacks_from::<C>(&doc, &root, functions)?;
    if let Some(s) = stacks.as_ref().filter(|s| !s.is_empty()) {
        if let Some(k) = s.samples.iter().position(|x| x.costs.len() != ne) {
            return Err(doc.bad(
                &[K("stacks"), K("samples"), I(k), K("costs")],
                format!(
                    "{} costs where the profile has {ne} events",
                    s.samples[k].costs.len()
                ),
            ));
        }
        let mut part = tally_model::Part::new(positions, ne);
        if let Some(first) = parts.first() {
            part.info = first.info.clone();
        }
        s.derive_part(&profile.names, positions, &mut part)
            .ok_or_else(|| doc.bad(&[K("stacks")], "the costs sum to more than 64 bits hold"))?;
        parts = vec![part];
    }
    profile.parts = parts;
    profile.stacks = stacks;
    Ok(profile)
}

/// The recorded and derived events, with their long names.
fn read_events(doc: &Doc<'_>, root: &Value) -> Result<tally_model::Events, Error> {
    let list = array(doc, root, "events", &[])?;
    let mut names = Vec::new();
    let mut long = Vec::new();
    for (i, e) in list.iter().enumerate() {
        let at = [K("events"), I(i)];
        let name =
            opt_text(doc, e, "name", &at)?.ok_or_else(|| doc.bad(&at, "an event has no name"))?;
        let name = String::from_utf8(name).expect("from a JSON string");
        if let Some(l) = opt_text(doc, e, "long_name", &at)? {
            long.push((
                name.clone(),
                String::from_utf8(l).expect("from a JSON string"),
            ));
        }
        names.push(name);
    }
    let mut events = tally_model::Events::new(names).map_err(|e| doc.bad(&[K("events")], e))?;
    for (n, l) in long {
        events.set_long_name(&n, l);
    }
    for (i, d) in opt_array(doc, root, "derived_events", &[])?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = [K("derived_events"), I(i)];
        let text =
            |k: &str| -> Result<Option<String>, Error> {
                Ok(opt_text(doc, d, k, &at)?
                    .map(|b| String::from_utf8(b).expect("from a JSON string")))
            };
        let name = text("name")?.ok_or_else(|| doc.bad(&at, "a derived event has no name"))?;
        let formula =
            text("formula")?.ok_or_else(|| doc.bad(&at, "a derived event has no formula"))?;
        let formula = tally_model::parse_expression(&formula)
            .map_err(|e| doc.bad(&[K("derived_events"), I(i), K("formula")], e))?;
        events.add_formula(name, text("long_name")?, formula);
    }
    Ok(events)
}

/// The functions, each at its id; returns how many there are.
fn read_functions<C: Cost>(
    doc: &Doc<'_>,
    root: &Value,
    profile: &mut Profile<C>,
) -> Result<usize, Error> {
    let list = array(doc, root, "functions", &[])?;
    for (i, f) in list.iter().enumerate() {
        let at = [K("functions"), I(i)];
        match opt_u64(doc, f, "id", &at)? {
            Some(id) if id == i as u64 => {}
            _ => return Err(doc.bad(&at, format!("function {i} does not have `\"id\": {i}`"))),
        }
        let text = |k| opt_text(doc, f, k, &at).map(Option::unwrap_or_default);
        let (name, file, object) = (text("name")?, text("file")?, text("object")?);
        let n = &mut profile.names;
        let key = tally_model::FunctionKey {
            object: tally_model::ObjectId(
                n.objects
                    .try_intern(&object)
                    .ok_or_else(|| doc.bad(&at, "too many names"))?,
            ),
            file: tally_model::FileId(
                n.files
                    .try_intern(&file)
                    .ok_or_else(|| doc.bad(&at, "too many names"))?,
            ),
            name: tally_model::SymbolId(
                n.symbols
                    .try_intern(&name)
                    .ok_or_else(|| doc.bad(&at, "too many names"))?,
            ),
        };
        let id = n
            .try_function(key)
            .ok_or_else(|| doc.bad(&at, "too many functions"))?;
        if id.index() != i {
            return Err(doc.bad(&at, format!("function {i} repeats function {}", id.0)));
        }
    }
    Ok(list.len())
}

/// Adds the magnitudes of `costs` to the running `sums` (one per event,
/// the last for call counts): as the text readers check, what a profile
/// holds together must fit its sums.
fn bounded<C: Cost>(
    doc: &Doc<'_>,
    sums: &mut [u64],
    costs: &[C],
    offset: usize,
    at: &[Step<'_>],
) -> Result<(), Error> {
    for (s, c) in sums[offset..].iter_mut().zip(costs) {
        match s.checked_add(c.magnitude()) {
            Some(v) if v <= C::MAX_MAGNITUDE => *s = v,
            _ => return Err(doc.bad(at, "the counts sum to more than 64 bits hold")),
        }
    }
    Ok(())
}

/// One part: its header facts and records.
#[allow(clippy::too_many_arguments)]
fn read_part<C: Cost>(
    doc: &Doc<'_>,
    v: &Value,
    at: &[Step<'_>],
    profile: &mut Profile<C>,
    functions: usize,
    np: usize,
    ne: usize,
    sums: &mut [u64],
) -> Result<tally_model::Part<C>, Error> {
    let mut part = tally_model::Part::new(profile.positions, ne);
    let info = &mut part.info;
    info.number = opt_u64(doc, v, "number", at)?;
    info.pid = opt_u64(doc, v, "pid", at)?;
    info.thread = opt_u64(doc, v, "thread", at)?;
    info.cmd = opt_text(doc, v, "cmd", at)?;
    for (i, d) in opt_array(doc, v, "desc", at)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = [at, &[K("desc"), I(i)]].concat();
        let t = opt_text(doc, d, "type", &at)?.unwrap_or_default();
        info.desc
            .push((t, opt_text(doc, d, "value", &at)?.unwrap_or_default()));
    }
    for (i, o) in opt_array(doc, v, "other_header_lines", at)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let text = o.as_str().ok_or_else(|| {
            doc.bad(
                &[at, &[K("other_header_lines"), I(i)]].concat(),
                "not a string",
            )
        })?;
        info.other.push(text.as_bytes().to_vec());
    }
    for key in ["summary", "totals"] {
        let c = match v.get(key) {
            None | Some(Value::Null) => None,
            Some(_) => Some(costs_at::<C>(doc, v, key, at)?),
        };
        if key == "summary" {
            part.info.summary = c;
        } else {
            part.info.totals = c;
        }
    }
    let names = &mut profile.names;
    let mut file = |name: Option<Vec<u8>>, at: &[Step<'_>]| {
        names
            .files
            .try_intern(&name.unwrap_or_default())
            .map(tally_model::FileId)
            .ok_or_else(|| doc.bad(at, "too many names"))
    };
    let counts = |v: &Value, key: &str, at: &[Step<'_>]| -> Result<Vec<C>, Error> {
        let c = costs_at::<C>(doc, v, key, at)?;
        if c.len() > ne {
            return Err(doc.bad(
                &[at, &[K(key)]].concat(),
                format!("{} counts where the profile has {ne} events", c.len()),
            ));
        }
        Ok(c)
    };
    for (fi, f) in opt_array(doc, v, "functions", at)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = [at, &[K("functions"), I(fi)]].concat();
        let id = f.get("function").unwrap_or(&Value::Null);
        let function = FunctionId(index_of(
            doc,
            id,
            functions,
            "function",
            &[&at[..], &[K("function")]].concat(),
        )?);
        for (li, l) in array(doc, f, "lines", &at)?.iter().enumerate() {
            let at = [&at[..], &[K("lines"), I(li)]].concat();
            let fl = file(opt_text(doc, l, "file", &at)?, &at)?;
            let pos = positions_at(doc, l, "positions", np, &at)?;
            let costs = counts(l, "costs", &at)?;
            bounded(doc, sums, &costs, 0, &at)?;
            part.lines.push(function, fl, &pos, &costs);
        }
    }
    for (ci, c) in opt_array(doc, v, "calls", at)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = [at, &[K("calls"), I(ci)]].concat();
        let id = |k: &'static str| {
            index_of(
                doc,
                c.get(k).unwrap_or(&Value::Null),
                functions,
                "function",
                &[&at[..], &[K(k)]].concat(),
            )
            .map(FunctionId)
        };
        let (caller, callee) = (id("caller")?, id("callee")?);
        let site_file = file(opt_text(doc, c, "site_file", &at)?, &at)?;
        let count = cost_of::<C>(
            doc,
            c.get("count").unwrap_or(&Value::Null),
            &[&at[..], &[K("count")]].concat(),
        )?;
        let inclusive = counts(c, "inclusive", &at)?;
        bounded(doc, sums, &[count], ne, &at)?;
        bounded(doc, sums, &inclusive, 0, &at)?;
        let info = tally_model::CallInfo {
            caller,
            site_file,
            callee,
            count,
            seq: part.next_seq(),
        };
        let (site, target) = (
            positions_at(doc, c, "site", np, &at)?,
            positions_at(doc, c, "target", np, &at)?,
        );
        part.calls.push(info, &site, &target, &inclusive);
    }
    for (ji, j) in opt_array(doc, v, "jumps", at)?
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let at = [at, &[K("jumps"), I(ji)]].concat();
        let id = |k: &'static str| {
            index_of(
                doc,
                j.get(k).unwrap_or(&Value::Null),
                functions,
                "function",
                &[&at[..], &[K(k)]].concat(),
            )
            .map(FunctionId)
        };
        let count = |k: &'static str| {
            cost_of::<C>(
                doc,
                j.get(k).unwrap_or(&Value::Null),
                &[&at[..], &[K(k)]].concat(),
            )
        };
        let info = tally_model::JumpInfo {
            function: id("function")?,
            file: file(opt_text(doc, j, "file", &at)?, &at)?,
            target_function: id("target_function")?,
            target_file: file(opt_text(doc, j, "target_file", &at)?, &at)?,
            conditional: j
                .get("conditional")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            executed: count("executed")?,
            taken: count("taken")?,
            seq: part.next_seq(),
        };
        let (source, target) = (
            positions_at(doc, j, "source", np, &at)?,
            positions_at(doc, j, "target", np, &at)?,
        );
        part.jumps.push(info, &source, &target);
    }
    Ok(part)
}

/// Reads back the `stacks` member of tally's JSON form (`None` when it is
/// `null` or absent): the recorded stacks, their labels and their
/// timeline, as [`write()`] wrote them. Functions are ids into the file's
/// `functions`; a frame, stack or thread index out of range is an error
/// naming it and its line.
pub fn read_stacks(path: &Path, bytes: &[u8]) -> Result<Option<Stacks<u64>>, Error> {
    let doc = Doc { path, bytes };
    let root: Value = serde_json::from_slice(bytes).map_err(|e| Error::Parse {
        path: path.to_path_buf(),
        line: e.line() as u64,
        kind: ParseErrorKind::Malformed(format!(
            "not tally's JSON form (column {}): {e}",
            e.column()
        )),
    })?;
    let functions = root
        .get("functions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    stacks_from(&doc, &root, functions)
}

/// The `stacks` member of `root`, with counts of type `C`.
fn stacks_from<C: Cost>(
    doc: &Doc<'_>,
    root: &Value,
    functions: usize,
) -> Result<Option<Stacks<C>>, Error> {
    let stacks = match root.get("stacks") {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let top = [K("stacks")];
    let mut out = Stacks::<C>::default();
    for (i, f) in array(doc, stacks, "frames", &top)?.iter().enumerate() {
        let at = [K("stacks"), K("frames"), I(i)];
        let f = f
            .as_array()
            .filter(|a| a.len() == 3)
            .and_then(|a| Some((&a[0], a[1].as_u64()?, a[2].as_u64()?)))
            .ok_or_else(|| doc.bad(&at, "a frame is not [function, line, address]"))?;
        let line = u32::try_from(f.1).map_err(|_| doc.bad(&at, "a frame's line is over 2^32"))?;
        let function = FunctionId(index_of(
            doc,
            f.0,
            functions,
            "function",
            &[&at[..], &[I(0)]].concat(),
        )?);
        let n = out.frames.len();
        let id = out.frame(Frame {
            function,
            line,
            address: f.2,
        });
        if id.index() != n {
            return Err(doc.bad(&at, format!("frame {n} repeats frame {}", id.0)));
        }
    }
    let frames = out.frames.len();
    for (si, s) in array(doc, stacks, "samples", &top)?.iter().enumerate() {
        let at = [K("stacks"), K("samples"), I(si)];
        let ids = array(doc, s, "frames", &at)?
            .iter()
            .enumerate()
            .map(|(k, n)| {
                index_of(
                    doc,
                    n,
                    frames,
                    "frame",
                    &[&at[..], &[K("frames"), I(k)]].concat(),
                )
                .map(FrameId)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let costs = costs_at::<C>(doc, s, "costs", &at)?;
        let mut labels = Vec::new();
        for (k, l) in opt_array(doc, s, "labels", &at)?
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let at = [&at[..], &[K("labels"), I(k)]].concat();
            let key =
                opt_text(doc, l, "key", &at)?.ok_or_else(|| doc.bad(&at, "a label has no key"))?;
            let value = match (
                opt_text(doc, l, "text", &at)?,
                l.get("number").and_then(Value::as_i64),
            ) {
                (Some(t), _) => LabelValue::Text(t),
                (None, Some(n)) => {
                    LabelValue::Number(n, opt_text(doc, l, "unit", &at)?.unwrap_or_default())
                }
                _ => return Err(doc.bad(&at, "a label has neither text nor number")),
            };
            labels.push(Label { key, value });
        }
        let set = out.label_set(labels);
        let before = out.samples.len();
        let i = out
            .add_labelled_at(&ids, set, &costs)
            .ok_or_else(|| doc.bad(&at, "the costs sum to more than 64 bits hold"))?;
        if i != before {
            return Err(doc.bad(&at, format!("stack {before} repeats stack {i}")));
        }
    }
    let timeline = match stacks.get("timeline") {
        None | Some(Value::Null) => return Ok(Some(out)),
        Some(t) => t,
    };
    let at = [K("stacks"), K("timeline")];
    let events = out.samples.first().map_or(0, |s| s.costs.len());
    let mut t = Timeline::new(events);
    for (i, th) in array(doc, timeline, "threads", &at)?.iter().enumerate() {
        let at = [&at[..], &[K("threads"), I(i)]].concat();
        let int = |k: &str| {
            th.get(k)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| doc.bad(&at, format!("a thread has no `{k}`")))
        };
        t.threads.push(Thread {
            pid: int("pid")?,
            tid: int("tid")?,
            name: opt_text(doc, th, "name", &at)?.unwrap_or_default(),
        });
    }
    t.start = opt_u64(doc, timeline, "start", &at)?;
    let column = |key: &str, len: usize, what: &str| -> Result<Vec<u32>, Error> {
        array(doc, timeline, key, &at)?
            .iter()
            .enumerate()
            .map(|(k, n)| index_of(doc, n, len, what, &[&at[..], &[K(key), I(k)]].concat()))
            .collect()
    };
    t.times = array(doc, timeline, "time", &at)?
        .iter()
        .enumerate()
        .map(|(k, n)| {
            n.as_u64().ok_or_else(|| {
                doc.bad(
                    &[&at[..], &[K("time"), I(k)]].concat(),
                    format!("`{n}` is not a time"),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let n = t.times.len();
    t.thread = column("thread", t.threads.len(), "thread")?;
    t.stack = column("stack", out.samples.len(), "stack")?;
    t.costs = costs_at::<C>(doc, timeline, "costs", &at)?;
    if t.thread.len() != n || t.stack.len() != n || t.costs.len() != n * events {
        return Err(doc.bad_named(
            &top,
            &at,
            format!(
                "the timeline's columns differ in length ({n} times, {} threads, {} stacks, {} costs of {events} events)",
                t.thread.len(),
                t.stack.len(),
                t.costs.len()
            ),
        ));
    }
    if !t.times.is_sorted() {
        return Err(doc.bad(
            &[&at[..], &[K("time")]].concat(),
            "the timeline's times are not in order",
        ));
    }
    if t.start.zip(t.times.first()).is_some_and(|(s, &f)| s > f) {
        return Err(doc.bad(
            &[&at[..], &[K("start")]].concat(),
            "the timeline's `start` is after its first sample",
        ));
    }
    out.timeline = Some(Box::new(t));
    Ok(Some(out))
}

/// tally's JSON profile, as a reader and a writer of the one shape
/// ([`crate::ReadProfile`], [`crate::WriteProfile`]).
pub struct Json;

impl crate::shape::ReadProfile for Json {
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<tally_model::AnyProfile, Error> {
        match read_as::<u64>(path, bytes) {
            Ok(p) => Ok(tally_model::AnyCost::Unsigned(p)),
            Err(Error::Parse {
                kind: ParseErrorKind::Negative(_),
                ..
            }) => read_as::<i64>(path, bytes).map(tally_model::AnyCost::Signed),
            Err(e) => Err(e),
        }
    }
}

impl<C: Cost> crate::shape::WriteProfile<C> for Json {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, out)
    }
}
