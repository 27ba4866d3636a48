//! Decoding profile.proto and building the model from it.

use super::desc;
use super::wire::{Fields, Slice, WireError, expect_bytes, expect_varint, push_numbers};
use crate::error::{Error, ParseErrorKind};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::path::Path;
use tally_model::{
    AnyCost, AnyProfile, Cost, Events, Format, Frame, FrameId, FunctionKey, Label, LabelSetId,
    LabelValue, ObjectId, Part, Positions, Profile, Stacks, Thread,
};

#[derive(Default)]
struct Raw<'a> {
    sample_types: Vec<(u64, u64, usize)>,
    samples: Vec<RawSample>,
    /// The samples' location ids and values, one after the other (a
    /// sample holds ranges of it, so that decoding it allocates nothing).
    numbers: Vec<u64>,
    /// The samples' labels, one after the other.
    labels: Vec<RawLabel>,
    mappings: Vec<RawMapping>,
    locations: Vec<RawLocation>,
    functions: Vec<RawFunction>,
    strings: Vec<&'a [u8]>,
    time_nanos: u64,
    duration_nanos: u64,
    period_type: Option<(u64, u64, usize)>,
    period: u64,
    comments: Vec<u64>,
    default_sample_type: u64,
    /// Offset of the string table's first entry, for messages.
    strings_at: usize,
}

/// A sample: its location ids and values (ranges of [`Raw::numbers`]) and
/// labels (a range of [`Raw::labels`]).
struct RawSample {
    locations: std::ops::Range<usize>,
    values: std::ops::Range<usize>,
    labels: std::ops::Range<usize>,
    at: usize,
}

/// A sample's `Label`: string indexes of its key, text and unit.
#[derive(Default)]
struct RawLabel {
    key: u64,
    text: u64,
    number: Option<i64>,
    unit: u64,
    at: usize,
}

#[derive(Default)]
struct RawMapping {
    id: u64,
    filename: u64,
    at: usize,
}

#[derive(Default)]
struct RawLocation {
    id: u64,
    mapping: u64,
    address: u64,
    /// (function id, line), innermost first.
    lines: Vec<(u64, u64, usize)>,
    at: usize,
}

#[derive(Default)]
struct RawFunction {
    id: u64,
    name: u64,
    system_name: u64,
    filename: u64,
    at: usize,
}

fn fail<T>(at: usize, message: impl Into<String>) -> Result<T, WireError> {
    Err(WireError {
        offset: at as u64,
        message: message.into(),
    })
}

/// A `ValueType` message: (type, unit) string indexes.
fn value_type(s: Slice<'_>) -> Result<(u64, u64), WireError> {
    let (mut t, mut u) = (0, 0);
    let mut f = Fields::new(s);
    while let Some((n, v, at)) = f.next_field()? {
        match n {
            1 => t = expect_varint(v, at, "a value type's name")?,
            2 => u = expect_varint(v, at, "a value type's unit")?,
            _ => {}
        }
    }
    Ok((t, u))
}

fn decode(bytes: &[u8]) -> Result<Raw<'_>, WireError> {
    let mut raw = Raw::default();
    let mut values = Vec::new();
    let mut top = Fields::new(Slice { bytes, offset: 0 });
    while let Some((n, v, at)) = top.next_field()? {
        match n {
            1 => {
                let (t, u) = value_type(expect_bytes(v, at, "a sample type")?)?;
                raw.sample_types.push((t, u, at));
            }
            2 => {
                let labels_from = raw.labels.len();
                // Locations and values may come in any order and in
                // several runs each: values are gathered apart, then put
                // after the locations.
                let from = raw.numbers.len();
                values.clear();
                let mut f = Fields::new(expect_bytes(v, at, "a sample")?);
                while let Some((n, v, at)) = f.next_field()? {
                    match n {
                        1 => push_numbers(v, at, "a sample's locations", &mut raw.numbers)?,
                        2 => push_numbers(v, at, "a sample's values", &mut values)?,
                        3 => {
                            let mut l = RawLabel {
                                at,
                                ..Default::default()
                            };
                            let mut g = Fields::new(expect_bytes(v, at, "a sample's label")?);
                            while let Some((n, v, at)) = g.next_field()? {
                                match n {
                                    1 => l.key = expect_varint(v, at, "a label's key")?,
                                    2 => l.text = expect_varint(v, at, "a label's text")?,
                                    3 => {
                                        l.number =
                                            Some(expect_varint(v, at, "a label's number")? as i64)
                                    }
                                    4 => l.unit = expect_varint(v, at, "a label's unit")?,
                                    _ => {}
                                }
                            }
                            raw.labels.push(l);
                        }
                        _ => {}
                    }
                }
                let middle = raw.numbers.len();
                raw.numbers.extend_from_slice(&values);
                raw.samples.push(RawSample {
                    locations: from..middle,
                    values: middle..raw.numbers.len(),
                    labels: labels_from..raw.labels.len(),
                    at,
                });
            }
            3 => {
                let mut m = RawMapping {
                    at,
                    ..Default::default()
                };
                let mut f = Fields::new(expect_bytes(v, at, "a mapping")?);
                while let Some((n, v, at)) = f.next_field()? {
                    match n {
                        1 => m.id = expect_varint(v, at, "a mapping's id")?,
                        5 => m.filename = expect_varint(v, at, "a mapping's file name")?,
                        _ => {}
                    }
                }
                raw.mappings.push(m);
            }
            4 => {
                let mut l = RawLocation {
                    at,
                    ..Default::default()
                };
                let mut f = Fields::new(expect_bytes(v, at, "a location")?);
                while let Some((n, v, at)) = f.next_field()? {
                    match n {
                        1 => l.id = expect_varint(v, at, "a location's id")?,
                        2 => l.mapping = expect_varint(v, at, "a location's mapping")?,
                        3 => l.address = expect_varint(v, at, "a location's address")?,
                        4 => {
                            let (mut func, mut line) = (0, 0);
                            let mut g = Fields::new(expect_bytes(v, at, "a location's line")?);
                            while let Some((n, v, at)) = g.next_field()? {
                                match n {
                                    1 => func = expect_varint(v, at, "a line's function")?,
                                    2 => line = expect_varint(v, at, "a line number")?,
                                    _ => {}
                                }
                            }
                            l.lines.push((func, line, at));
                        }
                        _ => {}
                    }
                }
                raw.locations.push(l);
            }
            5 => {
                let mut fun = RawFunction {
                    at,
                    ..Default::default()
                };
                let mut f = Fields::new(expect_bytes(v, at, "a function")?);
                while let Some((n, v, at)) = f.next_field()? {
                    match n {
                        1 => fun.id = expect_varint(v, at, "a function's id")?,
                        2 => fun.name = expect_varint(v, at, "a function's name")?,
                        3 => fun.system_name = expect_varint(v, at, "a function's system name")?,
                        4 => fun.filename = expect_varint(v, at, "a function's file name")?,
                        _ => {}
                    }
                }
                raw.functions.push(fun);
            }
            6 => {
                if raw.strings.is_empty() {
                    raw.strings_at = at;
                }
                raw.strings.push(expect_bytes(v, at, "a string")?.bytes);
            }
            9 => raw.time_nanos = expect_varint(v, at, "the time")?,
            10 => raw.duration_nanos = expect_varint(v, at, "the duration")?,
            11 => {
                let (t, u) = value_type(expect_bytes(v, at, "the period type")?)?;
                raw.period_type = Some((t, u, at));
            }
            12 => raw.period = expect_varint(v, at, "the period")?,
            13 => push_numbers(v, at, "the comments", &mut raw.comments)?,
            14 => raw.default_sample_type = expect_varint(v, at, "the default sample type")?,
            _ => {}
        }
    }
    Ok(raw)
}

impl<'a> Raw<'a> {
    fn locations(&self, s: &RawSample) -> &[u64] {
        &self.numbers[s.locations.clone()]
    }

    fn values(&self, s: &RawSample) -> &[u64] {
        &self.numbers[s.values.clone()]
    }

    fn string(&self, index: u64, at: usize) -> Result<&'a [u8], WireError> {
        match self.strings.get(index as usize) {
            Some(s) => Ok(s),
            None if index == 0 => Ok(b""),
            None => fail(
                at,
                format!(
                    "string {index} is past the end of the string table ({} strings)",
                    self.strings.len()
                ),
            ),
        }
    }

    fn text(&self, index: u64, at: usize) -> Result<String, WireError> {
        Ok(String::from_utf8_lossy(self.string(index, at)?).into_owned())
    }
}

/// An event name for a sample type: no white space (the Callgrind
/// `events:` line splits on it), never empty, never repeated.
fn event_name(raw: &str, i: usize, taken: &[String]) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .collect();
    if name.is_empty() {
        name = format!("value{}", i + 1);
    }
    let base = name.clone();
    let mut k = 2;
    while taken.contains(&name) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// Reads a pprof profile from its (decompressed) bytes; `path` names it in
/// errors. Signed when a sample value is negative (a pprof difference).
pub fn read(path: &Path, bytes: &[u8]) -> Result<AnyProfile, Error> {
    let wire = |e: WireError| Error::Binary {
        path: path.to_path_buf(),
        offset: e.offset,
        message: format!(
            "{} (offsets count in the decompressed protocol buffer)",
            e.message
        ),
    };
    let raw = decode(bytes).map_err(wire)?;
    let signed = raw
        .samples
        .iter()
        .any(|s| raw.values(s).iter().any(|&v| (v as i64) < 0));
    if signed {
        build::<i64>(&raw).map(AnyCost::Signed).map_err(wire)
    } else {
        build::<u64>(&raw).map(AnyCost::Unsigned).map_err(wire)
    }
}

/// Reads a pprof profile with counts of type `C`. Asked for unsigned
/// counts, a negative value is [`ParseErrorKind::Negative`], so that a
/// caller reading several files can start again as signed.
pub fn read_as<C: Cost>(path: &Path, bytes: &[u8]) -> Result<Profile<C>, Error> {
    let wire = |e: WireError| Error::Binary {
        path: path.to_path_buf(),
        offset: e.offset,
        message: format!(
            "{} (offsets count in the decompressed protocol buffer)",
            e.message
        ),
    };
    let raw = decode(bytes).map_err(wire)?;
    if !C::SIGNED
        && let Some(v) = raw
            .samples
            .iter()
            .flat_map(|s| raw.values(s))
            .find(|&&v| (v as i64) < 0)
    {
        return Err(Error::Parse {
            path: path.to_path_buf(),
            line: 0,
            kind: ParseErrorKind::Negative((*v as i64).to_string()),
        });
    }
    build::<C>(&raw).map_err(wire)
}

fn build<C: Cost>(raw: &Raw<'_>) -> Result<Profile<C>, WireError> {
    if !raw.strings.is_empty() && !raw.strings[0].is_empty() {
        return fail(
            raw.strings_at,
            "the string table's first entry is not empty",
        );
    }
    if raw.sample_types.is_empty() {
        return fail(
            0,
            "no sample type: this is not a pprof profile, or it is damaged",
        );
    }
    let mut names: Vec<String> = Vec::new();
    let mut units = Vec::new();
    for (i, &(t, u, at)) in raw.sample_types.iter().enumerate() {
        let name = event_name(&raw.text(t, at)?, i, &names);
        names.push(name);
        units.push(raw.text(u, at)?);
    }
    let mut events = Events::new(names.clone()).expect("names are distinct");
    for (name, unit) in names.iter().zip(&units) {
        if !unit.is_empty() {
            events.set_long_name(name, format!("{name} ({unit})"));
        }
    }
    let has_addresses = raw.locations.iter().any(|l| l.address != 0);
    let positions = if has_addresses {
        Positions::INSTR_LINE
    } else {
        Positions::LINE
    };
    let mut profile = Profile::<C>::new(Format::Callgrind, events, positions);
    profile.creator = Some(b"pprof (read by tally)".to_vec());

    let mappings: FxHashMap<u64, &RawMapping> = raw.mappings.iter().map(|m| (m.id, m)).collect();
    let functions: FxHashMap<u64, &RawFunction> = raw.functions.iter().map(|f| (f.id, f)).collect();
    let mut stacks = Stacks::<C>::default();
    // Each location's frames, root first, by its place in `raw.locations`;
    // each (object, function) once.
    let mut location_frames = LocationFrames::new(&raw.locations);
    let mut function_ids = FxHashMap::default();
    for l in &raw.locations {
        if l.id == 0 {
            return fail(l.at, "a location with id 0");
        }
        let object = match l.mapping {
            0 => ObjectId::NONE,
            m => {
                let Some(m) = mappings.get(&m) else {
                    return fail(
                        l.at,
                        format!(
                            "location {} names mapping {m}, which is not in the profile",
                            l.id
                        ),
                    );
                };
                profile.names.object(raw.string(m.filename, m.at)?)
            }
        };
        let frames = &mut location_frames.frames;
        let line_of = |line: u64| u32::try_from(line as i64).unwrap_or(0);
        if l.lines.is_empty() {
            let name = format!("0x{:x}", l.address);
            let key = FunctionKey {
                object,
                file: tally_model::FileId::NONE,
                name: profile.names.symbol(name.as_bytes()),
            };
            let function = profile.names.function(key);
            frames.push(stacks.frame(Frame {
                function,
                line: 0,
                address: l.address,
            }));
        }
        for &(fid, line, at) in l.lines.iter().rev() {
            let function = match function_ids.get(&(object, fid)) {
                Some(&f) => f,
                None => {
                    let Some(f) = functions.get(&fid) else {
                        return fail(
                            at,
                            format!(
                                "location {} names function {fid}, which is not in the profile",
                                l.id
                            ),
                        );
                    };
                    let mut name = raw.string(f.name, f.at)?;
                    if name.is_empty() {
                        name = raw.string(f.system_name, f.at)?;
                    }
                    let key = FunctionKey {
                        object,
                        file: profile.names.file(raw.string(f.filename, f.at)?),
                        name: profile.names.symbol(name),
                    };
                    let id = profile.names.function(key);
                    function_ids.insert((object, fid), id);
                    id
                }
            };
            frames.push(stacks.frame(Frame {
                function,
                line: line_of(line),
                address: l.address,
            }));
        }
        if !location_frames.end(l.id) {
            return fail(l.at, format!("location id {} is used twice", l.id));
        }
    }

    let n = raw.sample_types.len();
    let mut frames = Vec::new();
    let mut costs = Vec::with_capacity(n);
    for s in &raw.samples {
        let values = raw.values(s);
        if values.len() != n {
            return fail(
                s.at,
                format!("a sample has {} values for {n} sample types", values.len()),
            );
        }
        frames.clear();
        for id in raw.locations(s).iter().rev() {
            let Some(f) = location_frames.get(*id) else {
                return fail(
                    s.at,
                    format!("a sample names location {id}, which is not in the profile"),
                );
            };
            frames.extend_from_slice(f);
        }
        if frames.is_empty() {
            let key = FunctionKey {
                object: ObjectId::NONE,
                file: tally_model::FileId::NONE,
                name: profile.names.symbol(b"(no location)"),
            };
            let function = profile.names.function(key);
            frames.push(stacks.frame(Frame {
                function,
                line: 0,
                address: 0,
            }));
        }
        costs.clear();
        for &v in values {
            let Some(c) = C::from_i128(i128::from(v as i64)) else {
                return fail(s.at, format!("sample value {} does not fit", v as i64));
            };
            costs.push(c);
        }
        // A sample tally wrote from a timeline: its thread and time back
        // in the timeline, not in the stack's labels.
        let (labels, timed) = match timed_raw(raw, &raw.labels[s.labels.clone()])? {
            Some(timed) => (LabelSetId::NONE, Some(timed)),
            None => {
                let mut labels = sample_labels(raw, &raw.labels[s.labels.clone()])?;
                let timed = crate::pprof::write::timed_sample(&mut labels)
                    .map(|(time, t)| (time, t.pid, t.tid, Cow::Owned(t.name)));
                (stacks.label_set(labels), timed)
            }
        };
        let Some(i) = stacks.add_labelled_at(&frames, labels, &costs) else {
            return fail(s.at, "the samples of one stack add up past 64 bits");
        };
        if let Some((time, pid, tid, name)) = timed {
            let t = stacks
                .timeline
                .get_or_insert_with(|| Box::new(tally_model::Timeline::new(costs.len())));
            t.start = Some(0);
            let at = match t
                .threads
                .iter()
                .position(|x| x.pid == pid && x.tid == tid && x.name == *name)
            {
                Some(k) => k,
                None => {
                    t.threads.push(Thread {
                        pid,
                        tid,
                        name: name.into_owned(),
                    });
                    t.threads.len() - 1
                }
            };
            t.push(time, at as u32, i as u32, &costs);
        }
    }
    if let Some(t) = stacks.timeline.as_mut() {
        t.sort();
    }

    let mut part = Part::new(profile.positions, profile.events.len());
    part.info.cmd = raw
        .mappings
        .first()
        .map(|m| raw.string(m.filename, m.at))
        .transpose()?
        .filter(|c| !c.is_empty())
        .map(<[u8]>::to_vec);
    let mut facts: Vec<(&[u8], Vec<u8>)> = Vec::new();
    if let Some((t, u, at)) = raw.period_type {
        let text = format!(
            "{} {}/{}",
            raw.period as i64,
            raw.text(t, at)?,
            raw.text(u, at)?
        );
        facts.push((desc::PERIOD, text.into_bytes()));
    }
    if raw.duration_nanos != 0 {
        facts.push((
            desc::DURATION,
            (raw.duration_nanos as i64).to_string().into_bytes(),
        ));
    }
    if raw.time_nanos != 0 {
        facts.push((desc::TIME, (raw.time_nanos as i64).to_string().into_bytes()));
    }
    for &c in &raw.comments {
        let text = raw.string(c, 0)?;
        // A `desc:` line holds one line of text.
        let line: Vec<u8> = text
            .iter()
            .map(|&b| if b == b'\n' { b' ' } else { b })
            .collect();
        facts.push((desc::COMMENT, line));
    }
    if raw.default_sample_type != 0 {
        facts.push((
            desc::DEFAULT_TYPE,
            raw.string(raw.default_sample_type, 0)?.to_vec(),
        ));
    }
    part.info.desc = facts.into_iter().map(|(k, v)| (k.to_vec(), v)).collect();
    if stacks
        .derive_part(&profile.names, profile.positions, &mut part)
        .is_none()
    {
        return fail(0, "the costs of one function add up past 64 bits");
    }
    profile.parts.push(part);
    profile.stacks = Some(stacks);
    Ok(profile)
}

/// A timed sample's time, pid, tid and thread name.
type Timed<'a> = (u64, i32, i32, Cow<'a, [u8]>);

/// A sample's labels, as pprof reads them: a text, else a number (with
/// its unit), else nothing.
fn sample_labels(raw: &Raw<'_>, labels: &[RawLabel]) -> Result<Vec<Label>, WireError> {
    let mut out = Vec::with_capacity(labels.len());
    for l in labels {
        let key = raw.string(l.key, l.at)?.to_vec();
        let value = if l.text != 0 {
            LabelValue::Text(raw.string(l.text, l.at)?.to_vec())
        } else if l.number.is_some() || l.unit != 0 {
            LabelValue::Number(l.number.unwrap_or(0), raw.string(l.unit, l.at)?.to_vec())
        } else {
            continue;
        };
        out.push(Label { key, value });
    }
    Ok(out)
}

/// The time, pid, tid and thread name of a sample whose labels are all
/// those tally writes for a timed sample (`time`, `pid`, `tid`,
/// `thread`), as [`sample_labels`] and `timed_sample` give them, read in
/// place: the samples of a timeline are each one sample, and making their
/// labels only to drop them would cost more than the rest of the sample.
/// `None` when the sample has other labels, or lacks one of them.
fn timed_raw<'a>(raw: &Raw<'a>, labels: &[RawLabel]) -> Result<Option<Timed<'a>>, WireError> {
    use crate::pprof::write::{PID, THREAD, TID, TIME};
    if labels.is_empty() {
        return Ok(None);
    }
    let (mut time, mut tid, mut pid, mut name) = (None, None, None, None);
    for l in labels {
        let key = raw.string(l.key, l.at)?;
        if ![TIME, TID, PID, THREAD].contains(&key) {
            return Ok(None);
        }
        if l.text != 0 {
            let text = raw.string(l.text, l.at)?;
            if key == THREAD && name.is_none() {
                name = Some(text);
            }
        } else if l.number.is_some() || l.unit != 0 {
            let unit = raw.string(l.unit, l.at)?;
            let n = l.number.unwrap_or(0);
            let slot = match key {
                k if k == TIME && unit == b"nanoseconds" => &mut time,
                k if k == TID && unit.is_empty() => &mut tid,
                k if k == PID && unit.is_empty() => &mut pid,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(n);
            }
        }
    }
    let (Some(time), Some(tid), Some(pid)) = (time, tid, pid) else {
        return Ok(None);
    };
    let (Ok(time), Ok(tid), Ok(pid)) =
        (u64::try_from(time), i32::try_from(tid), i32::try_from(pid))
    else {
        return Ok(None);
    };
    Ok(Some((time, pid, tid, Cow::Borrowed(name.unwrap_or(b"")))))
}

/// The frames of every location, root first, in one array, found by
/// location id: by a table indexed by id where the ids are dense (as every
/// writer numbers them, from 1), else by a hash map.
struct LocationFrames {
    frames: Vec<FrameId>,
    /// Where each location's frames start in `frames` (by order read),
    /// then where the last one ends.
    starts: Vec<usize>,
    /// Id → order read + 1 (0: no such location), for dense ids.
    dense: Vec<u32>,
    sparse: FxHashMap<u64, u32>,
}

impl LocationFrames {
    fn new(locations: &[RawLocation]) -> Self {
        let max = locations.iter().map(|l| l.id).max().unwrap_or(0);
        let dense_len = if max <= 2 * locations.len() as u64 + 16 {
            max as usize + 1
        } else {
            0
        };
        LocationFrames {
            frames: Vec::new(),
            starts: vec![0],
            dense: vec![0; dense_len],
            sparse: FxHashMap::default(),
        }
    }

    /// Ends the frames of location `id` (those pushed since the last
    /// end); false if the id was already given.
    fn end(&mut self, id: u64) -> bool {
        let order = self.starts.len() as u32;
        self.starts.push(self.frames.len());
        match self.dense.get_mut(id as usize) {
            Some(slot) => {
                if *slot != 0 {
                    return false;
                }
                *slot = order;
                true
            }
            None => self.sparse.insert(id, order).is_none(),
        }
    }

    fn get(&self, id: u64) -> Option<&[FrameId]> {
        let order = if self.dense.is_empty() {
            *self.sparse.get(&id)?
        } else {
            *self.dense.get(id as usize).filter(|&&o| o != 0)?
        } as usize;
        Some(&self.frames[self.starts[order - 1]..self.starts[order]])
    }
}
