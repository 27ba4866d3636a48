//! Encoding a profile as profile.proto.

use super::desc;
use super::stacks::stacks_to_write;
use super::wire::Writer;
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use tally_model::{Cost, FrameId, FunctionId, LabelValue, ObjectId, Profile};

/// The string table being built: index 0 is the empty string.
struct Strings {
    list: Vec<Vec<u8>>,
    index: FxHashMap<Vec<u8>, u64>,
}

impl Strings {
    fn new() -> Self {
        let mut s = Strings {
            list: Vec::new(),
            index: FxHashMap::default(),
        };
        s.get(b"");
        s
    }

    fn get(&mut self, s: &[u8]) -> u64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_vec());
        self.index.insert(s.to_vec(), i);
        i
    }
}

/// Writes `profile` as an uncompressed profile.proto message (the caller
/// compresses it): every recorded event a sample type (unit from the long
/// name the reader gave it, else `count`), the stacks as samples, and the
/// pprof facts kept in `desc:` lines.
pub fn write<C: Cost>(profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
    let (stacks, note) = stacks_to_write(profile)?;
    let names = &profile.names;
    let mut strings = Strings::new();
    let mut w = Writer::default();

    for e in profile.events.recorded() {
        let unit = super::event_unit(&e.name, e.long_name.as_deref()).unwrap_or("count");
        let (t, u) = (strings.get(e.name.as_bytes()), strings.get(unit.as_bytes()));
        w.message(1, |m| {
            m.varint(1, t);
            m.varint(2, u);
        });
    }

    // Locations: runs of frames at one address in one object are one
    // location with inlined lines, as the reader expands them.
    let object_of = |f: FunctionId| names.key(f).object;
    let mut locations: FxHashMap<Vec<FrameId>, u64> = FxHashMap::default();
    let mut location_list: Vec<Vec<FrameId>> = Vec::new();
    let mut functions: FxHashMap<FunctionId, u64> = FxHashMap::default();
    let mut mappings: FxHashMap<ObjectId, (u64, u64, u64)> = FxHashMap::default();
    let mut samples = Writer::default();
    let mut ids = Vec::new();
    for (si, s) in stacks.samples.iter().enumerate() {
        ids.clear();
        let mut i = 0;
        while i < s.frames.len() {
            let first = stacks.frames[s.frames[i].index()];
            let mut j = i + 1;
            while first.address != 0
                && j < s.frames.len()
                && stacks.frames[s.frames[j].index()].address == first.address
                && object_of(stacks.frames[s.frames[j].index()].function)
                    == object_of(first.function)
            {
                j += 1;
            }
            let run = &s.frames[i..j];
            let id = match locations.get(run) {
                Some(&id) => id,
                None => {
                    let id = location_list.len() as u64 + 1;
                    locations.insert(run.to_vec(), id);
                    location_list.push(run.to_vec());
                    for f in run {
                        let function = stacks.frames[f.index()].function;
                        let next = functions.len() as u64 + 1;
                        functions.entry(function).or_insert(next);
                    }
                    let object = object_of(first.function);
                    if object != ObjectId::NONE {
                        let next = mappings.len() as u64 + 1;
                        let m = mappings.entry(object).or_insert((next, u64::MAX, 0));
                        if first.address != 0 {
                            m.1 = m.1.min(first.address);
                            m.2 = m.2.max(first.address.saturating_add(1));
                        }
                    }
                    id
                }
            };
            ids.push(id);
            i = j;
        }
        let mut values = Vec::with_capacity(s.costs.len());
        for (c, e) in s.costs.iter().zip(profile.events.recorded()) {
            let v = i64::try_from(c.to_i128()).map_err(|_| {
                io::Error::other(format!(
                    "a cost of event `{}` does not fit pprof's 64-bit signed values",
                    e.name
                ))
            })?;
            values.push(v as u64);
        }
        let labels: Vec<(u64, u64, Option<i64>)> = stacks
            .labels_of(si)
            .iter()
            .map(|l| {
                let key = strings.get(&l.key);
                match &l.value {
                    LabelValue::Text(t) => (key, strings.get(t), None),
                    LabelValue::Number(n, unit) => (key, strings.get(unit), Some(*n)),
                }
            })
            .collect();
        samples.message(2, |m| {
            m.packed(1, ids.iter().rev().copied());
            m.packed(2, values);
            for &(key, text_or_unit, number) in &labels {
                m.message(3, |l| {
                    l.varint(1, key);
                    match number {
                        None => l.varint(2, text_or_unit),
                        Some(n) => {
                            l.int64(3, n);
                            l.varint(4, text_or_unit);
                        }
                    }
                });
            }
        });
    }
    w.bytes.extend_from_slice(&samples.bytes);

    let mut mapping_list: Vec<(ObjectId, (u64, u64, u64))> = mappings.into_iter().collect();
    mapping_list.sort_by_key(|(_, m)| m.0);
    for (object, (id, start, limit)) in &mapping_list {
        let file = strings.get(names.objects.get(object.0));
        let start = if *start == u64::MAX { 0 } else { *start };
        w.message(3, |m| {
            m.varint(1, *id);
            m.varint(2, start);
            m.varint(3, *limit);
            m.varint(5, file);
            // Names and lines are in the profile: pprof need not look
            // for the binary.
            m.varint(7, 1);
            m.varint(8, 1);
            m.varint(9, 1);
            m.varint(10, 1);
        });
    }
    let mapping_of: FxHashMap<ObjectId, u64> =
        mapping_list.iter().map(|(o, m)| (*o, m.0)).collect();
    for (i, run) in location_list.iter().enumerate() {
        let first = stacks.frames[run[0].index()];
        let mapping = mapping_of
            .get(&object_of(first.function))
            .copied()
            .unwrap_or(0);
        w.message(4, |m| {
            m.varint(1, i as u64 + 1);
            m.varint(2, mapping);
            m.varint(3, first.address);
            for f in run.iter().rev() {
                let frame = stacks.frames[f.index()];
                m.message(4, |l| {
                    l.varint(1, functions[&frame.function]);
                    l.int64(2, i64::from(frame.line));
                });
            }
        });
    }
    let mut function_list: Vec<(FunctionId, u64)> = functions.into_iter().collect();
    function_list.sort_by_key(|&(_, id)| id);
    for (f, id) in function_list {
        let name = strings.get(names.function_name(f));
        let file = strings.get(names.function_file(f));
        w.message(5, |m| {
            m.varint(1, id);
            m.varint(2, name);
            m.varint(3, name);
            m.varint(4, file);
        });
    }

    // Facts kept from a pprof input.
    let fact = |key: &'static [u8]| super::desc_values(profile, key).next();
    let number = |key| fact(key).and_then(|v| std::str::from_utf8(v).ok()?.parse::<i64>().ok());
    let mut comments: Vec<u64> = super::desc_values(profile, desc::COMMENT)
        .map(|c| strings.get(c))
        .collect();
    if let Some(n) = note {
        comments.push(strings.get(n.as_bytes()));
    }
    if let Some(t) = number(desc::TIME) {
        w.int64(9, t);
    }
    if let Some(d) = number(desc::DURATION) {
        w.int64(10, d);
    }
    let period = fact(desc::PERIOD).and_then(|v| {
        let v = std::str::from_utf8(v).ok()?;
        let (n, tu) = v.split_once(' ')?;
        let (t, u) = tu.split_once('/')?;
        Some((n.parse::<i64>().ok()?, t.to_string(), u.to_string()))
    });
    if let Some((n, t, u)) = period {
        let (t, u) = (strings.get(t.as_bytes()), strings.get(u.as_bytes()));
        w.message(11, |m| {
            m.varint(1, t);
            m.varint(2, u);
        });
        w.int64(12, n);
    }
    w.packed(13, comments);
    if let Some(d) = fact(desc::DEFAULT_TYPE) {
        let d = strings.get(d);
        w.varint(14, d);
    }
    for s in &strings.list {
        w.bytes(6, s);
    }
    out.write_all(&w.bytes)
}
