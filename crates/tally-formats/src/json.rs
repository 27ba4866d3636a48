//! The JSON form of a profile (schema in `docs/json.md`).
//!
//! Written by hand, streaming, so that a large profile needs no second copy
//! in memory; strings are escaped by serde_json. Names are written as UTF-8,
//! with invalid bytes replaced. Recorded stacks and their timeline are
//! written too, and read back by [`read_stacks`].

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

/// Reads back the `stacks` member of tally's JSON form (`None` when it is
/// `null` or absent): the recorded stacks, their labels and their
/// timeline, as [`write()`] wrote them. Functions are ids into the file's
/// `functions`; a frame, stack or thread index out of range is an error
/// naming it.
pub fn read_stacks(path: &Path, bytes: &[u8]) -> Result<Option<Stacks<u64>>, Error> {
    let malformed = |line: u64, msg: String| Error::Parse {
        path: path.to_path_buf(),
        line,
        kind: ParseErrorKind::Malformed(msg),
    };
    let doc: Value = serde_json::from_slice(bytes).map_err(|e| {
        malformed(
            e.line() as u64,
            format!("not tally's JSON form (column {}): {e}", e.column()),
        )
    })?;
    let bad = |what: &str| malformed(1, format!("malformed `stacks`: {what}"));
    let functions = doc
        .get("functions")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let stacks = match doc.get("stacks") {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let array = |v: &Value, what: &str| -> Result<Vec<Value>, Error> {
        match v.get(what) {
            Some(Value::Array(a)) => Ok(a.clone()),
            _ => Err(bad(&format!("no array `{what}`"))),
        }
    };
    let numbers = |v: &Value, what: &str| -> Result<Vec<u64>, Error> {
        array(v, what)?
            .iter()
            .map(|n| {
                n.as_u64()
                    .ok_or_else(|| bad(&format!("a value of `{what}` is not a count")))
            })
            .collect()
    };
    let index = |n: u64, len: usize, what: &str| -> Result<u32, Error> {
        u32::try_from(n)
            .ok()
            .filter(|&i| (i as usize) < len)
            .ok_or_else(|| bad(&format!("{what} {n} is out of range (there are {len})")))
    };
    let mut out = Stacks::<u64>::default();
    for f in array(stacks, "frames")? {
        let f = f
            .as_array()
            .filter(|a| a.len() == 3)
            .and_then(|a| Some((a[0].as_u64()?, a[1].as_u64()?, a[2].as_u64()?)))
            .ok_or_else(|| bad("a frame is not [function, line, address]"))?;
        let line = u32::try_from(f.1).map_err(|_| bad("a frame's line is over 2^32"))?;
        let n = out.frames.len();
        let id = out.frame(Frame {
            function: FunctionId(index(f.0, functions, "function")?),
            line,
            address: f.2,
        });
        if id.index() != n {
            return Err(bad(&format!("frame {n} repeats frame {}", id.0)));
        }
    }
    let frames = out.frames.len();
    for s in array(stacks, "samples")? {
        let ids = numbers(&s, "frames")?
            .into_iter()
            .map(|n| index(n, frames, "frame").map(FrameId))
            .collect::<Result<Vec<_>, _>>()?;
        let costs = numbers(&s, "costs")?;
        let mut labels = Vec::new();
        if let Some(list) = s.get("labels") {
            for l in list
                .as_array()
                .ok_or_else(|| bad("`labels` is not an array"))?
            {
                let text = |k: &str| {
                    l.get(k)
                        .and_then(Value::as_str)
                        .map(|t| t.as_bytes().to_vec())
                };
                let key = text("key").ok_or_else(|| bad("a label has no key"))?;
                let value = match (text("text"), l.get("number").and_then(Value::as_i64)) {
                    (Some(t), _) => LabelValue::Text(t),
                    (None, Some(n)) => LabelValue::Number(n, text("unit").unwrap_or_default()),
                    _ => return Err(bad("a label has neither text nor number")),
                };
                labels.push(Label { key, value });
            }
        }
        let set = out.label_set(labels);
        let before = out.samples.len();
        let at = out
            .add_labelled_at(&ids, set, &costs)
            .ok_or_else(|| bad("the costs sum to more than 64 bits hold"))?;
        if at != before {
            return Err(bad(&format!("stack {before} repeats stack {at}")));
        }
    }
    let timeline = match stacks.get("timeline") {
        None | Some(Value::Null) => return Ok(Some(out)),
        Some(t) => t,
    };
    let events = out.samples.first().map_or(0, |s| s.costs.len());
    let mut t = Timeline::new(events);
    for th in array(timeline, "threads")? {
        let int = |k: &str| {
            th.get(k)
                .and_then(Value::as_i64)
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| bad(&format!("a thread has no `{k}`")))
        };
        t.threads.push(Thread {
            pid: int("pid")?,
            tid: int("tid")?,
            name: th
                .get("name")
                .and_then(Value::as_str)
                .map(|n| n.as_bytes().to_vec())
                .unwrap_or_default(),
        });
    }
    t.start = match timeline.get("start") {
        None | Some(Value::Null) => None,
        Some(v) => Some(v.as_u64().ok_or_else(|| bad("`start` is not a time"))?),
    };
    t.times = numbers(timeline, "time")?;
    let n = t.times.len();
    t.thread = numbers(timeline, "thread")?
        .into_iter()
        .map(|i| index(i, t.threads.len(), "thread"))
        .collect::<Result<_, _>>()?;
    t.stack = numbers(timeline, "stack")?
        .into_iter()
        .map(|i| index(i, out.samples.len(), "stack"))
        .collect::<Result<_, _>>()?;
    t.costs = numbers(timeline, "costs")?;
    if t.thread.len() != n || t.stack.len() != n || t.costs.len() != n * events {
        return Err(bad(&format!(
            "the timeline's columns differ in length ({n} times, {} threads, {} stacks, {} costs of {events} events)",
            t.thread.len(),
            t.stack.len(),
            t.costs.len()
        )));
    }
    if !t.times.is_sorted() {
        return Err(bad("the timeline's times are not in order"));
    }
    if t.start.zip(t.times.first()).is_some_and(|(s, &f)| s > f) {
        return Err(bad("the timeline's `start` is after its first sample"));
    }
    out.timeline = Some(Box::new(t));
    Ok(Some(out))
}

/// tally's JSON profile, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Json;

impl<C: Cost> crate::shape::WriteProfile<C> for Json {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, out)
    }
}
