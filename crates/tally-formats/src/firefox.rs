//! Firefox Profiler's processed profile format (JSON, as
//! profiler.firefox.com opens it), written by the `fxprof-processed-profile`
//! crate, the writer samply uses.
//!
//! Firefox Profiler shows one weight per sample table, so one recorded
//! event is written (the first unless asked otherwise): a sample's weight
//! is its cost in that event. Weights are 32-bit
//! in the format: a larger cost is written as several samples of the same
//! stack that add up to it.
//!
//! Times: a profile whose stacks have a timeline (timed samples, each with
//! its thread) is written sample by sample at its time, one thread of the
//! output per thread of the timeline. Otherwise each distinct stack is one
//! sample, and the samples of a thread get consecutive times one interval
//! (1 ms) apart, which lets the profile open; the timeline then shows the
//! order of the stacks, not when they ran, and the threads are the ones
//! the samples' labels name (pprof labels `pid`, `tid` or `thread id`,
//! `thread name`, or `thread`) or the profile's parts (stacks estimated per
//! part, [`stacks_per_part`], or self costs per part); otherwise one.
//!
//! A profile without stacks is written as one-frame samples of its self
//! costs; estimated stacks are written as given. Either way the product
//! name, which the viewer shows at the top, says so. A difference profile
//! gives negative weights, which Firefox Profiler shows as a difference.

use fxprof_processed_profile as fx;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::io::{self, Write};
use tally_model::{Cost, Frame, FunctionId, Label, LabelValue, Profile, Stacks};

/// Label keys that give a sample's thread id (any case; `thread` when a
/// number).
const TID_KEYS: &[&[u8]] = &[b"tid", b"thread id", b"thread_id", b"thread"];

/// Label keys that give a sample's thread name (`thread` when a text).
const NAME_KEYS: &[&[u8]] = &[b"thread name", b"thread_name", b"thread"];

/// The label key that names a sample's process.
const PID_KEY: &[u8] = b"pid";

/// Past this many samples added to split weights, the costs are too large
/// for the format's 32-bit weights to be worth writing (over 3 × 10^16).
const MAX_SPLIT: u64 = 1 << 24;

/// The largest weight of one sample.
const MAX_WEIGHT: i128 = i32::MAX as i128;

/// Writes `profile` as a Firefox Profiler profile with the weights of the
/// recorded event `event`; `title` is the profile's product name.
pub fn write<C: Cost>(
    profile: &Profile<C>,
    title: &str,
    event: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let recorded = profile.events.recorded();
    let Some(ev) = recorded.get(event) else {
        return Err(io::Error::other(format!(
            "event {event} is not one of the profile's {} recorded events",
            recorded.len()
        )));
    };
    let stacks = match &profile.stacks {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(self_costs_per_part(profile)?),
    };
    let product = match () {
        () if profile.stacks.is_none() => {
            format!("{title} (self costs only: the input holds no call stacks)")
        }
        () if crate::pprof::stacks_estimated(profile) => {
            format!("{title} (stacks estimated from call arcs)")
        }
        () => title.to_string(),
    };
    let mut fxp = fx::Profile::new(
        &format!("{product}, {}", ev.long_name.as_deref().unwrap_or(&ev.name)),
        fx::ReferenceTimestamp::from_millis_since_unix_epoch(0.0),
        fx::SamplingInterval::from_millis(1),
    );
    let process_name = profile
        .parts
        .first()
        .and_then(|p| p.info.cmd.as_deref())
        .map_or_else(
            || title.to_string(),
            |c| crate::escape::text(c.trim_ascii()).into_owned(),
        );
    let labels = FrameLabels::new(profile, &stacks);
    let mut processes: FxHashMap<Option<u32>, fx::ProcessHandle> = FxHashMap::default();
    let mut strings: FxHashMap<FunctionId, fx::StringHandle> = FxHashMap::default();
    let mut split: u64 = 0;
    let zero = fx::Timestamp::from_millis_since_reference(0.0);
    let groups = timed_threads(&stacks, event).unwrap_or_else(|| threads(&stacks, event));
    for group in groups {
        // Firefox Profiler names a main thread after its process: the
        // first thread of a process is its main one unless its id says not.
        let is_main =
            !processes.contains_key(&group.pid) && (group.tid.is_none() || group.tid == group.pid);
        let process = *processes.entry(group.pid).or_insert_with(|| {
            let name = match group.pid {
                Some(pid) => format!("{process_name} ({pid})"),
                None => process_name.clone(),
            };
            fxp.add_process(&name, group.pid.unwrap_or(0), zero)
        });
        let tid = group.tid.or(group.pid).unwrap_or(0);
        let thread = fxp.add_thread(process, tid, zero, is_main);
        fxp.set_thread_name(thread, group.name.as_deref().unwrap_or(&process_name));
        let mut interned: FxHashMap<usize, Option<fx::StackHandle>> = FxHashMap::default();
        let mut time = 0.0;
        for (n, row) in group.rows.iter().enumerate() {
            let mut rest = row.cost;
            if rest == 0 {
                continue;
            }
            let stack = *interned.entry(row.stack).or_insert_with(|| {
                let sample = &stacks.samples[row.stack];
                let mut frames: Vec<fx::FrameInfo> = sample
                    .frames
                    .iter()
                    .map(|f| labels.frame(&mut fxp, &mut strings, Some(stacks.frames[f.index()])))
                    .collect();
                if frames.is_empty() {
                    frames.push(labels.frame(&mut fxp, &mut strings, None));
                }
                fxp.intern_stack_frames(thread, frames.into_iter())
            });
            // Milliseconds: from the first timed sample, else consecutive.
            time = row.time.map_or(n as f64, |ns| ns as f64 / 1e6);
            let at = fx::Timestamp::from_millis_since_reference(time);
            while rest != 0 {
                let w = rest.clamp(-MAX_WEIGHT, MAX_WEIGHT);
                fxp.add_sample(thread, at, stack, fx::CpuDelta::ZERO, w as i32);
                rest -= w;
                if rest != 0 {
                    split += 1;
                }
            }
            if split > MAX_SPLIT {
                return Err(io::Error::other(format!(
                    "event `{}`: the costs are too large for Firefox Profiler's 32-bit sample \
                     weights (more than {MAX_SPLIT} extra samples to hold them)",
                    ev.name
                )));
            }
        }
        fxp.set_thread_end_time(thread, fx::Timestamp::from_millis_since_reference(time));
    }
    serde_json::to_writer(&mut *out, &fxp).map_err(io::Error::other)?;
    out.write_all(b"\n")
}

/// The samples of one thread of the output, and what names it.
struct Thread {
    pid: Option<u32>,
    tid: Option<u32>,
    name: Option<String>,
    rows: Vec<Row>,
}

/// A sample of the output: a stack (index in [`Stacks::samples`]), its
/// cost in the event written and, for a timed sample, its time in
/// nanoseconds from the first.
struct Row {
    stack: usize,
    cost: i128,
    time: Option<u64>,
}

/// The threads of the profile's timeline with their samples in time
/// order, when it has one that holds every stack's cost of `event` (a
/// timeline of only some samples would give other totals than the stacks).
fn timed_threads<C: Cost>(stacks: &Stacks<C>, event: usize) -> Option<Vec<Thread>> {
    let t = stacks.timeline.as_ref().filter(|t| !t.is_empty())?;
    let first = t.span()?.0;
    let mut out: Vec<Thread> = t
        .threads
        .iter()
        .map(|th| Thread {
            pid: u32::try_from(th.pid).ok(),
            tid: u32::try_from(th.tid).ok(),
            name: (!th.name.is_empty()).then(|| crate::escape::text(&th.name).into_owned()),
            rows: Vec::new(),
        })
        .collect();
    let mut timed: i128 = 0;
    for i in 0..t.len() {
        let stack = t.stack[i] as usize;
        let cost = t.costs_of(i).get(event)?.to_i128();
        stacks.samples.get(stack)?;
        timed += cost;
        out.get_mut(t.thread[i] as usize)?.rows.push(Row {
            stack,
            cost,
            time: Some(t.times[i].checked_sub(first)?),
        });
    }
    let total: i128 = stacks
        .samples
        .iter()
        .map(|s| s.costs.get(event).map_or(0, |c| c.to_i128()))
        .sum();
    out.retain(|th| !th.rows.is_empty());
    (timed == total).then_some(out)
}

/// The samples grouped by the process and thread their labels name, in
/// first-seen order; all samples in one thread when no label names one.
fn threads<C: Cost>(stacks: &Stacks<C>, event: usize) -> Vec<Thread> {
    type Key<'a> = [Option<&'a LabelValue>; 3];
    let mut order: Vec<Thread> = Vec::new();
    let mut index: FxHashMap<Key<'_>, usize> = FxHashMap::default();
    for i in 0..stacks.samples.len() {
        let labels = stacks.labels_of(i);
        let find = |keys: &[&[u8]], number: bool| {
            labels
                .iter()
                .filter(|l| matches!(l.value, LabelValue::Number(..)) == number)
                .find(|l| keys.iter().any(|k| l.key.eq_ignore_ascii_case(k)))
                .map(|l: &Label| &l.value)
        };
        let key = [
            find(&[PID_KEY], true),
            find(TID_KEYS, true),
            find(NAME_KEYS, false),
        ];
        let at = *index.entry(key).or_insert_with(|| {
            let number = |v: Option<&LabelValue>| match v? {
                LabelValue::Number(n, _) => u32::try_from(*n).ok(),
                LabelValue::Text(_) => None,
            };
            let name = match key {
                [_, _, Some(LabelValue::Text(t))] => Some(crate::escape::text(t).into_owned()),
                [_, Some(LabelValue::Number(n, _)), _] => Some(format!("thread {n}")),
                _ => None,
            };
            order.push(Thread {
                pid: number(key[0]),
                tid: number(key[1]),
                name,
                rows: Vec::new(),
            });
            order.len() - 1
        });
        order[at].rows.push(Row {
            stack: i,
            cost: stacks.samples[i]
                .costs
                .get(event)
                .map_or(0, |c| c.to_i128()),
            time: None,
        });
    }
    order
}

/// The label of each function's frames: its name, and where two functions
/// share a name, its file or object as well, so that Firefox Profiler
/// (which tells functions apart by their label) keeps them apart.
struct FrameLabels<'a, C> {
    profile: &'a Profile<C>,
    shared: rustc_hash::FxHashSet<&'a [u8]>,
}

impl<'a, C> FrameLabels<'a, C> {
    fn new(profile: &'a Profile<C>, stacks: &Stacks<C>) -> Self {
        let names = &profile.names;
        let mut seen: FxHashMap<&'a [u8], FunctionId> = FxHashMap::default();
        let mut shared = rustc_hash::FxHashSet::default();
        for f in &stacks.frames {
            let name = names.function_name(f.function);
            if *seen.entry(name).or_insert(f.function) != f.function {
                shared.insert(name);
            }
        }
        FrameLabels { profile, shared }
    }

    /// The frame of `frame`'s function (`None`: a sample without frames).
    fn frame(
        &self,
        fxp: &mut fx::Profile,
        strings: &mut FxHashMap<FunctionId, fx::StringHandle>,
        frame: Option<Frame>,
    ) -> fx::FrameInfo {
        let handle = match frame {
            None => fxp.intern_string("[no frames]"),
            Some(f) => *strings.entry(f.function).or_insert_with(|| {
                let names = &self.profile.names;
                let name = names.function_name(f.function);
                let mut label = crate::escape::text(name).into_owned();
                if self.shared.contains(name) {
                    let file = names.function_file(f.function);
                    let place = if file.is_empty() {
                        names.function_object(f.function)
                    } else {
                        file
                    };
                    if !place.is_empty() {
                        label = format!("{label} [{}]", crate::escape::text(place));
                    }
                }
                fxp.intern_string(&label)
            }),
        };
        fx::FrameInfo {
            frame: fx::Frame::Label(handle),
            category_pair: fx::CategoryHandle::OTHER.into(),
            flags: fx::FrameFlags::empty(),
        }
    }
}

/// The label that names part `i` of `parts` as a thread, or none for a
/// profile of one part.
fn part_labels<C>(parts: &[tally_model::Part<C>], i: usize) -> Vec<Label> {
    if parts.len() < 2 {
        return Vec::new();
    }
    let info = &parts[i].info;
    let number = |key: &[u8], n: u64| Label {
        key: key.to_vec(),
        value: LabelValue::Number(i64::try_from(n).unwrap_or(i64::MAX), Vec::new()),
    };
    let mut labels: Vec<Label> = info.pid.map(|p| number(PID_KEY, p)).into_iter().collect();
    labels.extend(info.thread.map(|t| number(b"tid", t)));
    let n = info.number.unwrap_or(i as u64 + 1);
    let name = match (info.thread, info.pid) {
        (Some(t), _) => format!("thread {t}, part {n}"),
        (None, Some(p)) => format!("pid {p}, part {n}"),
        (None, None) => format!("part {n}"),
    };
    labels.push(Label {
        key: b"thread name".to_vec(),
        value: LabelValue::Text(name.into_bytes()),
    });
    labels
}

/// One-frame stacks of each part's self costs, labelled with the part.
fn self_costs_per_part<C: Cost>(profile: &Profile<C>) -> io::Result<Stacks<C>> {
    let mut stacks = Stacks::default();
    let positions = profile.positions;
    for (i, part) in profile.parts.iter().enumerate() {
        let set = stacks.label_set(part_labels(&profile.parts, i));
        let mut failed = false;
        part.lines.for_each(|l| {
            let frame = stacks.frame(Frame {
                function: l.function,
                line: positions
                    .line()
                    .and_then(|i| u32::try_from(l.positions[i]).ok())
                    .unwrap_or(0),
                address: positions.instr().map_or(0, |i| l.positions[i]),
            });
            failed |= stacks.add_labelled(&[frame], set, l.costs).is_none();
        });
        if failed {
            return Err(io::Error::other(
                "a function's self cost adds up past 64 bits",
            ));
        }
    }
    Ok(stacks)
}

/// The stacks of a profile without them, each part's estimated on its own
/// by `estimate` (given a profile of that part alone) and labelled with the
/// part, so that each part (thread, process) is a thread of the output.
/// A profile of one part is estimated whole.
pub fn stacks_per_part<E>(
    profile: &Profile<u64>,
    mut estimate: impl FnMut(&Profile<u64>) -> Result<Stacks<u64>, E>,
) -> Result<Stacks<u64>, E> {
    if profile.parts.len() < 2 {
        return estimate(profile);
    }
    let mut one = Profile::new(profile.format, profile.events.clone(), profile.positions);
    one.version = profile.version;
    one.creator.clone_from(&profile.creator);
    one.names = profile.names.clone();
    let mut all = Stacks::default();
    for (i, part) in profile.parts.iter().enumerate() {
        one.parts = vec![part.clone()];
        let stacks = estimate(&one)?;
        let set = all.label_set(part_labels(&profile.parts, i));
        for s in &stacks.samples {
            let frames: Vec<_> = s
                .frames
                .iter()
                .map(|f| all.frame(stacks.frames[f.index()]))
                .collect();
            // Parts' stacks are apart by their labels: no sum to overflow.
            let _ = all.add_labelled(&frames, set, &s.costs);
        }
    }
    Ok(all)
}

/// Firefox Profiler's format, as a writer of the one shape
/// ([`crate::WriteProfile`]).
pub struct Firefox<'a> {
    /// The profile's name in the viewer.
    pub title: &'a str,
    /// The recorded event whose costs are the samples' weights.
    pub event: usize,
}

impl<C: Cost> crate::shape::WriteProfile<C> for Firefox<'_> {
    fn write(&self, profile: &Profile<C>, out: &mut dyn Write) -> io::Result<()> {
        write(profile, self.title, self.event, out)
    }
}
