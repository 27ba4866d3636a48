//! Encoding a profile as profile.proto.

use super::desc;
use super::stacks::stacks_to_write;
use super::wire::Writer;
use rustc_hash::FxHashMap;
use std::io::{self, Write};
use tally_model::{
    Cost, FrameId, FunctionId, LabelValue, ObjectId, Profile, Stacks, Thread, Timeline,
};

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

/// A label as written: key, text (or a number's unit), number.
type RawLabel = (u64, u64, Option<i64>);

/// Writes `profile` as an uncompressed profile.proto message (the caller
/// compresses it): every recorded event a sample type (unit from the long
/// name the reader gave it, else `count`), the stacks as samples, and the
/// pprof facts kept in `desc:` lines. Timed samples are written one by
/// one with their thread and time as labels.
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
    // Each stack's location ids, leaf first as pprof lists them, and its
    // labels.
    let mut locations_of: Vec<Vec<u64>> = Vec::with_capacity(stacks.samples.len());
    let mut labels_of: Vec<Vec<RawLabel>> = Vec::with_capacity(stacks.samples.len());
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
        let labels: Vec<RawLabel> = stacks
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
        locations_of.push(ids.iter().rev().copied().collect());
        labels_of.push(labels);
    }
    match stacks.timeline.as_deref() {
        Some(t) => write_timed(
            t,
            &stacks,
            profile,
            &locations_of,
            &labels_of,
            &mut strings,
            &mut samples,
        )?,
        None => {
            for (si, s) in stacks.samples.iter().enumerate() {
                let values = values_of(&s.costs, profile)?;
                sample(&mut samples, &locations_of[si], values, &labels_of[si]);
            }
        }
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

/// Label keys of a timed sample: what `pprof -tags` lists and
/// `-tagfocus` selects by.
pub(crate) const THREAD: &[u8] = b"thread";
pub(crate) const TID: &[u8] = b"tid";
pub(crate) const PID: &[u8] = b"pid";
pub(crate) const TIME: &[u8] = b"time";

/// The timed samples, each a pprof sample of its stack with the stack's
/// labels and its thread's name (`thread`), `tid` and `pid`, and its time
/// (`time`, in nanoseconds since the recording's start, so that
/// `-tagfocus time=100ms:300ms` picks a range), as pprof has no field for them; what the timeline leaves of a stack's cost (samples not
/// timed) follows as one sample without them, so that totals stay whole.
fn write_timed<C: Cost>(
    t: &Timeline<C>,
    stacks: &Stacks<C>,
    profile: &Profile<C>,
    locations_of: &[Vec<u64>],
    labels_of: &[Vec<RawLabel>],
    strings: &mut Strings,
    samples: &mut Writer,
) -> io::Result<()> {
    let (thread, tid, pid, time_key) = (
        strings.get(THREAD),
        strings.get(TID),
        strings.get(PID),
        strings.get(TIME),
    );
    let nanoseconds = strings.get(b"nanoseconds");
    let threads: Vec<Vec<RawLabel>> = t
        .threads
        .iter()
        .map(|th| {
            let mut l = vec![
                (tid, 0, Some(i64::from(th.tid))),
                (pid, 0, Some(i64::from(th.pid))),
            ];
            if !th.name.is_empty() {
                l.push((thread, strings.get(&th.name), None));
            }
            l
        })
        .collect();
    let origin = t.origin();
    let mut left: Vec<Vec<C>> = stacks.samples.iter().map(|s| s.costs.clone()).collect();
    let mut labels = Vec::new();
    for i in 0..t.len() {
        let stack = t.stack[i] as usize;
        let (Some(locations), Some(rest)) = (locations_of.get(stack), left.get_mut(stack)) else {
            return Err(io::Error::other(format!("timed sample {i} names no stack")));
        };
        let costs = t.costs_of(i);
        for (r, c) in rest.iter_mut().zip(costs) {
            *r = r.checked_sub(*c).unwrap_or(C::ZERO);
        }
        labels.clear();
        labels.extend_from_slice(&labels_of[stack]);
        if let Some(th) = threads.get(t.thread[i] as usize) {
            labels.extend_from_slice(th);
        }
        let time = i64::try_from(t.times[i].saturating_sub(origin)).unwrap_or(i64::MAX);
        labels.push((time_key, nanoseconds, Some(time)));
        sample(samples, locations, values_of(costs, profile)?, &labels);
    }
    for (si, rest) in left.iter().enumerate() {
        if rest.iter().any(|c| *c != C::ZERO) {
            sample(
                samples,
                &locations_of[si],
                values_of(rest, profile)?,
                &labels_of[si],
            );
        }
    }
    Ok(())
}

/// Costs as pprof's values (64-bit signed).
fn values_of<C: Cost>(costs: &[C], profile: &Profile<C>) -> io::Result<Vec<u64>> {
    costs
        .iter()
        .zip(profile.events.recorded())
        .map(|(c, e)| {
            i64::try_from(c.to_i128()).map(|v| v as u64).map_err(|_| {
                io::Error::other(format!(
                    "a cost of event `{}` does not fit pprof's 64-bit signed values",
                    e.name
                ))
            })
        })
        .collect()
}

/// One pprof sample: its locations (leaf first), values and labels.
fn sample(out: &mut Writer, locations: &[u64], values: Vec<u64>, labels: &[RawLabel]) {
    out.message(2, |m| {
        m.packed(1, locations.iter().copied());
        m.packed(2, values);
        for &(key, text_or_unit, number) in labels {
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

/// Takes the labels [`write_timed`] gives a timed sample out of `labels`:
/// its time and its thread, when all of `time` (in nanoseconds), `tid` and
/// `pid` are there, so that the pprof reader puts the sample back in a
/// timeline.
pub(crate) fn timed_sample(labels: &mut Vec<tally_model::Label>) -> Option<(u64, Thread)> {
    let number = |key: &[u8], unit: &[u8]| {
        labels.iter().find_map(|l| match &l.value {
            LabelValue::Number(n, u) if l.key == key && u == unit => Some(*n),
            _ => None,
        })
    };
    let time = u64::try_from(number(TIME, b"nanoseconds")?).ok()?;
    let tid = i32::try_from(number(TID, b"")?).ok()?;
    let pid = i32::try_from(number(PID, b"")?).ok()?;
    let name = labels.iter().find_map(|l| match &l.value {
        LabelValue::Text(t) if l.key == THREAD => Some(t.clone()),
        _ => None,
    });
    labels.retain(|l| ![TIME, TID, PID, THREAD].contains(&l.key.as_slice()));
    Some((
        time,
        Thread {
            pid,
            tid,
            name: name.unwrap_or_default(),
        },
    ))
}
