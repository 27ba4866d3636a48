//! Folded (collapsed) stacks, as Brendan Gregg's `stackcollapse-*.pl`
//! write them and `flamegraph.pl` and inferno read them: one line per
//! stack, frames root first separated by `;`, then a space and a count.
//!
//! ```text
//! main;parse;read_token 120
//! ```
//!
//! A frame is a function name only (no object, file or line), and a file
//! holds one event, whose name the format does not carry: the reader calls
//! it `samples`. A count is the last space-separated word, so frame names
//! may hold spaces (C++ signatures); the writer replaces a `;` inside a
//! name by `:`, and a line break by a space, so that each frame stays one.

use crate::error::{Error, ParseErrorKind};
use crate::stacked::StackProfile;
use std::io::{self, Write};
use std::path::Path;
use tally_model::{Cost, Events, FrameId, Names, Positions, Profile, Stacks};

/// The event name of a folded file read, which does not name its own.
pub const EVENT: &str = "samples";

/// Reads folded stacks. Blank lines are skipped; any other line must be
/// `frames count` with a non-empty frame between every `;`.
pub fn read(path: &Path, bytes: &[u8]) -> Result<Profile<u64>, Error> {
    let mut b = StackProfile::new(Positions::LINE, b"folded stacks");
    let err = |line: u64, msg: String| Error::Parse {
        path: path.to_path_buf(),
        line,
        kind: ParseErrorKind::Malformed(msg),
    };
    let mut frames: Vec<FrameId> = Vec::new();
    // A frame is its name alone: one lookup per frame, not three interned
    // names, a function and a frame.
    let mut by_name: rustc_hash::FxHashMap<&[u8], FrameId> = Default::default();
    let mut any = false;
    for (i, raw) in bytes.split(|&c| c == b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.trim_ascii().is_empty() {
            continue;
        }
        let line = line.trim_ascii_end();
        let Some(space) = line.iter().rposition(|c| c.is_ascii_whitespace()) else {
            return Err(err(
                line_no,
                format!(
                    "expected `frame;frame;... count`, found `{}`",
                    String::from_utf8_lossy(line)
                ),
            ));
        };
        let (stack, count) = (line[..space].trim_ascii_end(), &line[space + 1..]);
        let count = tally_model::parse_u64(count).map_err(|_| {
            err(
                line_no,
                format!(
                    "the count `{}` is not a whole number of samples",
                    String::from_utf8_lossy(count)
                ),
            )
        })?;
        frames.clear();
        for name in stack.split(|&c| c == b';') {
            if name.is_empty() {
                return Err(err(
                    line_no,
                    "an empty frame (`;;`, or `;` at an end)".into(),
                ));
            }
            let frame = match by_name.get(name) {
                Some(&frame) => frame,
                None => {
                    let f = b
                        .function(b"", b"", name)
                        .ok_or_else(|| err(line_no, ParseErrorKind::TooManyNames.to_string()))?;
                    let frame = b.frame(f, 0, 0);
                    by_name.insert(name, frame);
                    frame
                }
            };
            frames.push(frame);
        }
        b.add(&frames, &[count]).ok_or_else(|| {
            err(
                line_no,
                "the counts of one stack sum to more than 64 bits hold".into(),
            )
        })?;
        any = true;
    }
    if !any {
        return Err(err(1, "no stack in the file".into()));
    }
    b.finish(Events::new([EVENT]).expect("one event"))
        .ok_or_else(|| err(1, "the counts sum to more than 64 bits hold".into()))
}

/// Writes `stacks` as folded lines of the recorded event `event`: frames
/// by function name, stacks whose names agree summed, stacks of zero cost
/// left out, lines sorted (as stackcollapse writes them).
pub fn write<C: Cost>(
    names: &Names,
    stacks: &Stacks<C>,
    event: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut lines: std::collections::BTreeMap<Vec<u8>, C> = Default::default();
    let mut key = Vec::new();
    for s in &stacks.samples {
        let Some(&cost) = s.costs.get(event) else {
            continue;
        };
        if cost.is_zero() {
            continue;
        }
        key.clear();
        for (i, f) in s.frames.iter().enumerate() {
            if i > 0 {
                key.push(b';');
            }
            let name = names.function_name(stacks.frames[f.index()].function);
            key.extend(name.iter().map(|&c| match c {
                b';' => b':',
                b'\n' | b'\r' => b' ',
                c => c,
            }));
        }
        if key.is_empty() {
            continue;
        }
        let sum = lines.entry(key.clone()).or_insert(C::ZERO);
        *sum = sum.saturating_add(cost);
    }
    let mut buf = Vec::with_capacity(1 << 16);
    for (stack, cost) in lines {
        buf.extend_from_slice(&stack);
        buf.push(b' ');
        cost.write_to(&mut buf);
        buf.push(b'\n');
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)
}

/// Whether the head of a file looks like folded stacks: every complete
/// line (the last may be cut by the head) is blank or ends in a space and
/// a number, and at least one is not blank.
pub fn looks_folded(head: &[u8]) -> bool {
    let mut lines: Vec<&[u8]> = head.split(|&c| c == b'\n').collect();
    if lines.len() > 1 {
        // The last piece is cut by the head or empty after a final newline.
        lines.pop();
    }
    let mut any = false;
    for l in lines {
        let l = l.trim_ascii();
        if l.is_empty() {
            continue;
        }
        let Some(space) = l.iter().rposition(|c| c.is_ascii_whitespace()) else {
            return false;
        };
        let count = &l[space + 1..];
        if count.is_empty() || !count.iter().all(u8::is_ascii_digit) {
            return false;
        }
        if l[..space].trim_ascii().is_empty() || l.contains(&0) {
            return false;
        }
        any = true;
    }
    any
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_round_trip() {
        let text = b"main;a;b 3\nmain 1\n\nmain;a 2\nmain;a;b 4\nstd::vector<int>::push_back(int const&);x 5\n";
        let p = read(Path::new("t.folded"), text).unwrap();
        let s = p.stacks.as_ref().unwrap();
        assert_eq!(s.samples.len(), 4);
        assert_eq!(p.totals().unwrap(), [15]);
        let mut out = Vec::new();
        write(&p.names, s, 0, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "main 1\nmain;a 2\nmain;a;b 7\nstd::vector<int>::push_back(int const&);x 5\n"
        );
    }

    #[test]
    fn malformed_lines_are_named() {
        let e = |t: &[u8]| read(Path::new("t.folded"), t).unwrap_err().to_string();
        assert!(e(b"main 1\nmain;a x\n").starts_with("t.folded:2: the count `x`"));
        assert!(e(b"main;;a 1\n").starts_with("t.folded:1: an empty frame"));
        assert!(e(b"main\n").starts_with("t.folded:1: expected"));
        assert!(e(b"a 18446744073709551615\na 1\n").contains("64 bits"));
        assert!(e(b"\n").contains("no stack"));
    }

    #[test]
    fn detection() {
        assert!(looks_folded(b"main;a 12\nmain 3\n"));
        assert!(looks_folded(b"main;a 12\nmain 3\nmain;b;c 1"));
        assert!(looks_folded(b"main;a 12\nmain 3\nmain;b;c"));
        assert!(!looks_folded(b"int main(void) { return 0; }\n"));
        assert!(!looks_folded(b"events: Ir\nfl=a\n"));
        assert!(!looks_folded(b""));
    }
}
