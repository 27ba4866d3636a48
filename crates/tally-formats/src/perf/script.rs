//! The text `perf script` prints by default for samples with call chains:
//! a header line per sample, then one indented line per frame, leaf first,
//! and a blank line.
//!
//! ```text
//! prog  4786 35246.145148:     250000 cpu-clock:
//!                 1152 leaf+0x19 (/tmp/prog)
//!                 122f main+0x1c (/tmp/prog)
//! ```
//!
//! The header's last word ending in `:` that is not a time is the event
//! (`cycles:u:` is the event `cycles:u`), and the number before it the
//! sample's period, its cost as `perf report` counts it (1 when perf
//! script was told not to print it). A frame is an address, a symbol with
//! its offset (`+0x19`, dropped) and the object in parentheses. A sample
//! without frame lines takes its frame from the end of its header line
//! (`perf script -F ...,ip,sym,dso`), or is left out when it has none.
//! Every event seen is a recorded event of the profile, in order of first
//! appearance. The words before the time, the command and `tid` or
//! `pid/tid` (with an optional `[cpu]`), make each sample's thread: the
//! samples, with their times, are the profile's timeline.

use crate::error::{Error, ParseErrorKind};
use crate::stacked::StackProfile;
use rustc_hash::FxHashMap;
use std::path::Path;
use tally_model::{Events, FrameId, Positions, Profile, Thread};

/// One sample: frames root first, event index, period, and its time and
/// thread (an index into the threads read) when its header gives them.
type Taken = (Vec<FrameId>, usize, u64, Option<(u64, u32)>);

/// The sample being read: event index, period, and its time and thread.
type Current = Option<(usize, u64, Option<(u64, u32)>)>;

/// One frame as a line shows it.
struct Parsed<'a> {
    address: u64,
    symbol: &'a [u8],
    object: &'a [u8],
}

/// Parses `addr sym+off (dso)`; `None` if the line does not have that shape.
fn frame(text: &[u8]) -> Option<Parsed<'_>> {
    let text = text.trim_ascii();
    let end = text.iter().position(|c| c.is_ascii_whitespace())?;
    let address = u64::from_str_radix(std::str::from_utf8(&text[..end]).ok()?, 16).ok()?;
    let rest = text[end..].trim_ascii();
    let (symbol, object) = if rest.ends_with(b")") {
        let open = rest.iter().rposition(|&c| c == b'(')?;
        (rest[..open].trim_ascii(), &rest[open + 1..rest.len() - 1])
    } else {
        (rest, &b""[..])
    };
    let symbol = match symbol.windows(3).rposition(|w| w == b"+0x") {
        Some(i) if symbol[i + 3..].iter().all(u8::is_ascii_hexdigit) => &symbol[..i],
        _ => symbol,
    };
    let symbol = if symbol.is_empty() {
        &b"[unknown]"[..]
    } else {
        symbol
    };
    Some(Parsed {
        address,
        symbol,
        object,
    })
}

/// Whether a word is a time stamp, `35246.145148:`.
fn is_time(word: &[u8]) -> bool {
    let Some(w) = word.strip_suffix(b":") else {
        return false;
    };
    let mut parts = w.split(|&c| c == b'.');
    let (Some(a), Some(b), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    !a.is_empty() && !b.is_empty() && a.iter().chain(b).all(u8::is_ascii_digit)
}

/// A sample's time in nanoseconds, from its header's `35246.145148:`.
fn time_ns(word: &[u8]) -> Option<u64> {
    let w = word.strip_suffix(b":")?;
    let dot = w.iter().position(|&c| c == b'.')?;
    let (secs, frac) = (&w[..dot], &w[dot + 1..]);
    let secs = tally_model::parse_u64(secs).ok()?;
    let mut ns = 0u64;
    for i in 0..9 {
        let d = frac.get(i).map_or(0, |c| u64::from(c - b'0'));
        ns = ns * 10 + d;
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// The thread a header names, its command and its time: `comm tid
/// [cpu] time:` or `comm pid/tid [cpu] time:` (perf script's default
/// fields); the command may hold spaces. `None` if the words before the
/// time are not of that shape.
fn thread_and_time(line: &[u8]) -> Option<(&[u8], Option<i32>, i32, u64)> {
    let mut words: Vec<(usize, &[u8])> = Vec::new();
    let mut at = 0;
    for w in line.split(|c| c.is_ascii_whitespace()) {
        if !w.is_empty() {
            words.push((at, w));
        }
        at += w.len() + 1;
    }
    let time = words.iter().position(|(_, w)| is_time(w))?;
    let mut i = time.checked_sub(1)?;
    while words[i].1.starts_with(b"[") && words[i].1.ends_with(b"]") {
        i = i.checked_sub(1)?;
    }
    let (start, id) = words[i];
    let number = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<i32>().ok();
    let (pid, tid) = match id.iter().position(|&c| c == b'/') {
        Some(slash) => (Some(number(&id[..slash])?), number(&id[slash + 1..])?),
        None => (None, number(id)?),
    };
    Some((
        line[..start].trim_ascii(),
        pid,
        tid,
        time_ns(words[time].1)?,
    ))
}

/// The header's event, the period before it and where the event word
/// ends; `None` if the line names no event.
fn header(line: &[u8]) -> Option<(&[u8], Option<u64>, usize)> {
    let words: Vec<(usize, &[u8])> = line
        .split(|c| c.is_ascii_whitespace())
        .scan(0usize, |pos, w| {
            let start = *pos;
            *pos += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    let time = words.iter().position(|(_, w)| is_time(w))?;
    let (i, (start, word)) = words
        .iter()
        .enumerate()
        .skip(time + 1)
        .find(|(_, (_, w))| w.ends_with(b":"))?;
    let event = &word[..word.len() - 1];
    let period = (i > time + 1)
        .then(|| tally_model::parse_u64(words[i - 1].1).ok())
        .flatten();
    Some((event, period, start + word.len()))
}

/// Whether the head of a file looks like `perf script` output: its first
/// line that is not blank or a `#` comment is a sample header with a time
/// stamp, followed by a frame line or nothing.
pub fn looks_like(head: &[u8]) -> bool {
    let mut lines = head
        .split(|&c| c == b'\n')
        .filter(|l| !l.trim_ascii().is_empty() && !l.starts_with(b"#"));
    let Some(first) = lines.next() else {
        return false;
    };
    if first.first().is_none_or(u8::is_ascii_whitespace) || header(first).is_none() {
        return false;
    }
    match lines.next() {
        Some(l) if l.first().is_some_and(u8::is_ascii_whitespace) => frame(l).is_some(),
        _ => true,
    }
}

/// Reads `perf script` text.
pub fn read(path: &Path, bytes: &[u8]) -> Result<Profile<u64>, Error> {
    let err = |line: u64, msg: String| Error::Parse {
        path: path.to_path_buf(),
        line,
        kind: ParseErrorKind::Malformed(msg),
    };
    let mut b = StackProfile::new(
        Positions::new(true, false, false).expect("instr"),
        b"perf script",
    );
    let mut events: Vec<Vec<u8>> = Vec::new();
    // Stacks as read (root first), with their event, period, and time and
    // thread where the header gives them.
    let mut samples: Vec<Taken> = Vec::new();
    let mut current: Current = None;
    // Threads by (pid, tid), each with its last command.
    let mut threads: Vec<Thread> = Vec::new();
    let mut thread_index: FxHashMap<(i32, i32), u32> = FxHashMap::default();
    let mut leaf_first: Vec<FrameId> = Vec::new();
    let mut cmd: Option<Vec<u8>> = None;
    let mut flush = |current: &mut Current, leaf_first: &mut Vec<FrameId>| {
        if let Some((event, period, at)) = current.take()
            && !leaf_first.is_empty()
        {
            let mut frames = std::mem::take(leaf_first);
            frames.reverse();
            samples.push((frames, event, period, at));
        }
        leaf_first.clear();
    };
    for (i, raw) in bytes.split(|&c| c == b'\n').enumerate() {
        let n = i as u64 + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.trim_ascii().is_empty() {
            flush(&mut current, &mut leaf_first);
            continue;
        }
        if line.starts_with(b"#") && current.is_none() {
            continue;
        }
        if line[0].is_ascii_whitespace() {
            if current.is_none() {
                return Err(err(n, "a frame line before any sample header".into()));
            }
            let f = frame(line).ok_or_else(|| {
                err(
                    n,
                    format!(
                        "expected a frame `address symbol+offset (object)`, found `{}`",
                        String::from_utf8_lossy(line.trim_ascii())
                    ),
                )
            })?;
            let id = b
                .function(f.object, b"", f.symbol)
                .ok_or_else(|| err(n, ParseErrorKind::TooManyNames.to_string()))?;
            leaf_first.push(b.frame(id, 0, f.address));
            continue;
        }
        flush(&mut current, &mut leaf_first);
        let (event, period, end) = header(line).ok_or_else(|| {
            err(
                n,
                format!(
                    "expected a sample header `command pid time: period event:`, found `{}`",
                    String::from_utf8_lossy(line)
                ),
            )
        })?;
        if cmd.is_none()
            && let Some(c) = line.split(|c| c.is_ascii_whitespace()).next()
        {
            cmd = Some(c.to_vec());
        }
        let e = match events.iter().position(|x| x == event) {
            Some(e) => e,
            None => {
                events.push(event.to_vec());
                events.len() - 1
            }
        };
        let at = thread_and_time(line).map(|(comm, pid, tid, time)| {
            let pid = pid.unwrap_or(-1);
            let next = threads.len() as u32;
            let thread = *thread_index.entry((pid, tid)).or_insert(next);
            if thread == next {
                threads.push(Thread {
                    pid,
                    tid,
                    name: Vec::new(),
                });
            }
            threads[thread as usize].name = comm.to_vec();
            (time, thread)
        });
        current = Some((e, period.unwrap_or(1), at));
        // A sample printed on one line (no call chain) ends with its frame.
        if let Some(f) = frame(&line[end..]) {
            let id = b
                .function(f.object, b"", f.symbol)
                .ok_or_else(|| err(n, ParseErrorKind::TooManyNames.to_string()))?;
            leaf_first.push(b.frame(id, 0, f.address));
        }
    }
    flush(&mut current, &mut leaf_first);
    if samples.is_empty() {
        return Err(err(1, "no sample with a frame in the file".into()));
    }
    let names: Vec<String> = events
        .iter()
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect();
    let events = Events::new(names).map_err(|e| err(1, e.to_string()))?;
    let mut costs = vec![0u64; events.len()];
    for (frames, e, period, at) in &samples {
        costs.iter_mut().for_each(|c| *c = 0);
        costs[*e] = *period;
        match at {
            Some((time, thread)) => b.stacks_mut().add_timed(frames, &costs, *time, *thread),
            None => b.add(frames, &costs),
        }
        .ok_or_else(|| err(1, "the periods sum to more than 64 bits hold".into()))?;
    }
    if let Some(t) = b.stacks_mut().timeline.as_mut() {
        t.sort();
        t.threads = threads;
    }
    if let Some(c) = cmd {
        b.set_cmd(c);
    }
    b.finish(events)
        .ok_or_else(|| err(1, "the periods sum to more than 64 bits hold".into()))
}

/// `perf script` text, as a reader of the one shape
/// ([`crate::ReadProfile`]).
pub struct PerfScript;

impl crate::shape::ReadProfile for PerfScript {
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<tally_model::AnyProfile, Error> {
        crate::shape::unsigned(read(path, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"prog  4786 35246.145148:     250000 cpu-clock: \n\
\t            1152 leaf+0x19 (/tmp/g5/prog)\n\
\t            1189 rec+0x23 (/tmp/g5/prog)\n\
\t            1189 rec+0x23 (/tmp/g5/prog)\n\
\t            122f main+0x1c (/tmp/g5/prog)\n\
\n\
prog  4786 35246.145398:     250000 cpu-clock: \n\
\t            1152 leaf+0x19 (/tmp/g5/prog)\n\
\t            122f main+0x1c (/tmp/g5/prog)\n\
\n\
prog  4786 35246.145399:     10 page-faults:u: \n\
\tffffffff8160fade mprotect_fixup+0x6e ([kernel.kallsyms])\n\
\t    7f0000001000 [unknown] ([unknown])\n";

    #[test]
    fn samples_events_and_frames() {
        assert!(looks_like(TEXT));
        let p = read(Path::new("t.perf"), TEXT).unwrap();
        let ev: Vec<_> = p.events.recorded().iter().map(|e| e.name.clone()).collect();
        assert_eq!(ev, ["cpu-clock", "page-faults:u"]);
        assert_eq!(p.totals().unwrap(), [500000, 10]);
        let s = p.stacks.as_ref().unwrap();
        assert_eq!(s.samples.len(), 3);
        let root = s.frames[s.samples[0].frames[0].index()];
        assert_eq!(p.names.function_name(root.function), b"main");
        assert_eq!(p.names.function_object(root.function), b"/tmp/g5/prog");
        assert_eq!(root.address, 0x122f);
        assert_eq!(s.samples[0].frames.len(), 4);
        let t = s.timeline.as_ref().unwrap();
        assert_eq!(t.times, [35246145148000, 35246145398000, 35246145399000]);
        assert_eq!(t.stack, [0, 1, 2]);
        assert_eq!(t.threads.len(), 1);
        assert_eq!(
            (t.threads[0].tid, &t.threads[0].name[..]),
            (4786, &b"prog"[..])
        );
        assert_eq!(
            thread_and_time(b"my prog 12/13 [003] 7.5: 1 ev:"),
            Some((&b"my prog"[..], Some(12), 13, 7_500_000_000))
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = |t: &[u8]| read(Path::new("t.perf"), t).unwrap_err().to_string();
        assert!(e(b"\tx y\n").starts_with("t.perf:1: a frame line before"));
        assert!(e(b"p 1 2.5: 3 ev:\n\tzz leaf (a)\n").starts_with("t.perf:2: expected a frame"));
        assert!(
            e(b"p 1 2.5: 3 ev:\n\t1 a (b)\nnonsense\n")
                .starts_with("t.perf:3: expected a sample header")
        );
        assert!(!looks_like(b"main;a 1\n"));
    }
}
