//! The timeline of a recording whose samples have times: each thread's
//! activity over time, the stack chart of a time range, and every other
//! view cut to a time range.
//!
//! - `timeline?event=E&buckets=N`: the threads, each with the cost of `E`
//!   of its samples in `N` equal buckets (1,000 by default) over the whole
//!   recording; times are nanoseconds from the first sample.
//! - `stackchart?thread=I&from=A&to=B`: thread `I`'s samples between `A`
//!   and `B` in time order, consecutive samples with the same frames down
//!   to a depth merged into one box per depth (Firefox Profiler's stack
//!   chart).
//! - any other request with `range=A-B`: answered for the samples in that
//!   range alone, through the `range` transform
//!   ([`tally_analysis::transform`]); each range's session is made once.

use std::sync::Arc;

use serde_json::{Value, json};
use tally_analysis::transform::{Transform, apply_stacks};
use tally_model::{Part, Profile, Stacks, Timeline};

use crate::Error;
use crate::api::{Query, Reply};
use crate::session::{Session, WholeStacks};

/// Buckets per thread unless asked otherwise.
const BUCKETS: usize = 1000;
/// The most buckets a request may ask for.
const MAX_BUCKETS: usize = 10_000;
/// The most boxes a stack chart holds; a longer range says it was cut.
const MAX_BOXES: usize = 50_000;
/// Ranges' sessions kept; past that the oldest are dropped.
const RANGES_KEPT: usize = 16;

/// How the API answers a request: the reply and whether it may be kept.
type Answer = Result<(Reply, bool), Error>;

/// The answer to `path` if it is the timeline's, or asks for a time range
/// (`range`): `None` for the other requests, which `answer` answers.
pub(crate) fn route(
    s: &Session,
    path: &str,
    q: &Query,
    answer: fn(&Session, &str, &Query) -> Answer,
) -> Option<Answer> {
    match path {
        "timeline" => Some(threads(s, q).map(|v| (Reply::json(&v), true))),
        "stackchart" => Some(stack_chart(s, q).map(|v| (Reply::json(&v), true))),
        _ => {
            let range = q.get("range").filter(|r| !r.is_empty())?;
            let mut rest = q.clone();
            rest.remove("range");
            Some(ranged(s, range).and_then(|sub| answer(&sub, path, &rest)))
        }
    }
}

/// The main input's recorded stacks and their timeline, or why there is
/// none.
fn timed(s: &Session) -> Result<(&Stacks<u64>, &Timeline<u64>), String> {
    if s.diff {
        return Err("a comparison has no timeline: serve one recording".into());
    }
    let inp = &s.inputs[s.main()];
    match inp.stacks() {
        Ok(WholeStacks::Recorded(st)) => match &st.timeline {
            Some(t) if !t.is_empty() => Ok((st, &**t)),
            _ => Err("the samples of this profile have no times (record with `tally record`, or read a perf.data or `perf script` file, for a timeline)".into()),
        },
        _ => Err("this profile has no recorded samples, so no times: only a recording has a timeline".into()),
    }
}

/// The index of the recorded event `q` names (`event`; the first when
/// none), for the timeline's costs.
pub(crate) fn event_of(s: &Session, q: &Query) -> Result<usize, Error> {
    let events = s.inputs[s.main()].profile.events.recorded();
    match q.get("event").filter(|e| !e.is_empty()) {
        None => Ok(0),
        Some(e) => events.iter().position(|x| x.name == *e).ok_or_else(|| {
            Error::NotFound(format!(
                "no recorded event `{e}` (timelines and call trees have costs of recorded events only)"
            ))
        }),
    }
}

fn number(q: &Query, k: &str) -> Result<Option<u64>, Error> {
    q.get(k)
        .filter(|v| !v.is_empty())
        .map(|v| {
            v.parse()
                .map_err(|_| Error::BadRequest(format!("{k}: `{v}` is not a number")))
        })
        .transpose()
}

/// The threads and their activity in buckets.
pub fn threads(s: &Session, q: &Query) -> Result<Value, Error> {
    let (_, t) = match timed(s) {
        Ok(x) => x,
        Err(note) => return Ok(json!({"timed": false, "note": note})),
    };
    let event = event_of(s, q)?;
    let n = number(q, "buckets")?
        .map_or(BUCKETS, |b| b as usize)
        .clamp(1, MAX_BUCKETS);
    let first = t.origin();
    let last = t.span().map_or(first, |s| s.1).max(first);
    let span = last - first + 1;
    let width = span.div_ceil(n as u64).max(1);
    let mut rows: Vec<(Vec<u64>, u64, u64)> = vec![(vec![0; n], 0, 0); t.threads.len()];
    for i in 0..t.len() {
        let cost = t.costs_of(i).get(event).copied().unwrap_or(0);
        let row = &mut rows[t.thread[i] as usize];
        let b = (((t.times[i] - first) / width) as usize).min(n - 1);
        row.0[b] = row.0[b].saturating_add(cost);
        row.1 += 1;
        row.2 = row.2.saturating_add(cost);
    }
    let threads: Vec<Value> = t
        .threads
        .iter()
        .zip(rows)
        .enumerate()
        .map(|(i, (th, (buckets, samples, total)))| {
            json!({
                "index": i,
                "pid": th.pid,
                "tid": th.tid,
                "name": String::from_utf8_lossy(&th.name),
                "samples": samples,
                "total": total,
                "buckets": buckets,
            })
        })
        .collect();
    let events: Vec<&str> = s.inputs[s.main()]
        .profile
        .events
        .recorded()
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    Ok(json!({
        "timed": true,
        "event": events.get(event),
        "events": events,
        "origin": first,
        "end": span,
        "bucket": width,
        "samples": t.len(),
        "threads": threads,
    }))
}

/// The stack chart of one thread between `from` and `to`.
pub fn stack_chart(s: &Session, q: &Query) -> Result<Value, Error> {
    let (st, t) = timed(s).map_err(Error::NotFound)?;
    let thread = number(q, "thread")?.unwrap_or(0);
    if thread as usize >= t.threads.len() {
        return Err(Error::NotFound(format!("no thread {thread}")));
    }
    let first = t.origin();
    let last = t.span().map_or(first, |s| s.1).max(first);
    let from = number(q, "from")?.unwrap_or(0);
    let to = number(q, "to")?.unwrap_or(last - first + 1);
    let (lo, hi) = (
        t.times.partition_point(|&x| x < first.saturating_add(from)),
        t.times.partition_point(|&x| x < first.saturating_add(to)),
    );
    let mine: Vec<usize> = (lo..hi)
        .filter(|&i| u64::from(t.thread[i]) == thread)
        .collect();
    // A sample lasts until the thread's next one, or for the usual gap
    // between its samples when it then went idle (no sample for over
    // twice that).
    let mut gaps: Vec<u64> = mine
        .windows(2)
        .map(|w| t.times[w[1]] - t.times[w[0]])
        .collect();
    gaps.sort_unstable();
    let usual = gaps.get(gaps.len() / 2).copied().unwrap_or(1).max(1);
    let names = &s.inputs[s.main()].profile.names;
    let mut boxes: Vec<Value> = Vec::new();
    // The boxes open, one per depth: function, start.
    let mut open: Vec<(tally_model::FunctionId, u64)> = Vec::new();
    let mut cut = false;
    let mut close = |open: &mut Vec<(tally_model::FunctionId, u64)>, depth: usize, end: u64| {
        while open.len() > depth {
            let Some((f, start)) = open.pop() else { break };
            if boxes.len() >= MAX_BOXES {
                cut = true;
                continue;
            }
            boxes.push(json!({
                "start": start - first,
                "end": end - first,
                "depth": open.len(),
                "name": String::from_utf8_lossy(names.function_name(f)),
            }));
        }
    };
    let mut end_of_last = 0u64;
    for (k, &i) in mine.iter().enumerate() {
        let at = t.times[i];
        if at > end_of_last {
            close(&mut open, 0, end_of_last);
        }
        let frames = &st.samples[t.stack[i] as usize].frames;
        let same = open
            .iter()
            .zip(frames)
            .take_while(|((f, _), id)| st.frames[id.index()].function == *f)
            .count();
        close(&mut open, same, at);
        for id in &frames[same..] {
            open.push((st.frames[id.index()].function, at));
        }
        // Sampling jitters: a gap up to twice the usual one is no idle time.
        let next = mine.get(k + 1).map_or(u64::MAX, |&j| t.times[j]);
        end_of_last = if next - at <= usual.saturating_mul(2) {
            next
        } else {
            at.saturating_add(usual)
        };
    }
    close(&mut open, 0, end_of_last);
    Ok(json!({
        "thread": thread,
        "from": from,
        "to": to,
        "samples": mine.len(),
        "boxes": boxes,
        "cut": cut,
    }))
}

/// The session of the samples in `range` (`START-END`, nanoseconds from
/// the first sample), made once.
fn ranged(s: &Session, range: &str) -> Result<Arc<Session>, Error> {
    if let Some(sub) = s.ranges.lock().map_err(|_| Error::Poisoned)?.get(range) {
        return Ok(sub.clone());
    }
    let transform =
        Transform::parse("range", range).map_err(|e| Error::BadRequest(e.to_string()))?;
    let (stacks, _) =
        timed(s).map_err(|note| Error::BadRequest(format!("range={range}: {note}")))?;
    let inp = &s.inputs[s.main()];
    let mut names = inp.profile.names.clone();
    let cut = apply_stacks(&mut names, stacks, &[transform])
        .map_err(|e| Error::BadRequest(e.to_string()))?;
    let p = &inp.profile;
    let mut profile = Profile::new(p.format, p.events.clone(), p.positions);
    profile.version = p.version;
    profile.creator = p.creator.clone();
    profile.names = names;
    let mut part = Part::new(profile.positions, profile.events.len());
    if let Some(p) = inp.profile.parts.first() {
        part.info = p.info.clone();
        part.info.summary = None;
        part.info.totals = None;
    }
    cut.derive_part(&profile.names, profile.positions, &mut part)
        .ok_or_else(|| Error::Input(format!("range={range}: the costs overflow")))?;
    profile.parts.push(part);
    let sub = Arc::new(s.with_recorded(profile, cut));
    let mut ranges = s.ranges.lock().map_err(|_| Error::Poisoned)?;
    if ranges.len() >= RANGES_KEPT {
        ranges.clear();
    }
    ranges.insert(range.to_owned(), sub.clone());
    Ok(sub)
}
