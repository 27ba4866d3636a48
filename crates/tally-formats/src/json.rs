//! The JSON form of a profile (schema in `docs/json.md`).
//!
//! Written by hand, streaming, so that a large profile needs no second copy
//! in memory; strings are escaped by serde_json. Names are written as UTF-8,
//! with invalid bytes replaced.

use std::io::{self, Write};
use tally_model::{Cost, Format, FunctionId, Profile};

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
    j.raw("]}\n")?;
    j.out.flush()
}

/// tally's JSON profile, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Json;

impl<C: Cost> crate::shape::WriteProfile<C> for Json {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, out)
    }
}
