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
//! appearance.

use crate::error::{Error, ParseErrorKind};
use crate::stacked::StackProfile;
use std::path::Path;
use tally_model::{Events, FrameId, Positions, Profile};

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
    // Stacks as read (root first), with their event and period.
    let mut samples: Vec<(Vec<FrameId>, usize, u64)> = Vec::new();
    let mut current: Option<(usize, u64, u64)> = None;
    let mut leaf_first: Vec<FrameId> = Vec::new();
    let mut cmd: Option<Vec<u8>> = None;
    let mut flush = |current: &mut Option<(usize, u64, u64)>, leaf_first: &mut Vec<FrameId>| {
        if let Some((event, period, _)) = current.take()
            && !leaf_first.is_empty()
        {
            let mut frames = std::mem::take(leaf_first);
            frames.reverse();
            samples.push((frames, event, period));
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
        current = Some((e, period.unwrap_or(1), n));
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
    for (frames, e, period) in &samples {
        costs.iter_mut().for_each(|c| *c = 0);
        costs[*e] = *period;
        b.add(frames, &costs)
            .ok_or_else(|| err(1, "the periods sum to more than 64 bits hold".into()))?;
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
