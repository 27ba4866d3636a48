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
//! may hold spaces (C++ signatures). The format has no escape of its own:
//! the writer writes what a frame cannot hold (a `;`, a control byte such
//! as a line break or NUL, a space at either end, bytes that are not
//! UTF-8) as `\xHH` ([`crate::escape`]) and an empty name as
//! `\(empty)`, and the reader decodes them, so that every name reads back
//! as it was.

use crate::error::{Error, ParseErrorKind};
use crate::escape;
use crate::input::Input;
use crate::stacked::StackProfile;
use std::borrow::Cow;
use std::io::{self, Write};
use std::path::Path;
use tally_model::{Cost, Events, FrameId, FunctionId, Names, Positions, Profile, Stacks};

/// The event name of a folded file read, which does not name its own.
pub const EVENT: &str = "samples";

/// The frame written for a function with an empty name: a frame cannot be
/// empty, as `;;` and a `;` at either end are no frames.
pub const EMPTY_NAME: &[u8] = b"\\(empty)";

/// The function name a frame of a folded file stands for: its escapes
/// decoded ([`crate::escape::unescape`]), [`EMPTY_NAME`] for the empty
/// name.
pub fn frame_name(frame: &[u8]) -> Cow<'_, [u8]> {
    if frame == EMPTY_NAME {
        Cow::Borrowed(b"")
    } else {
        escape::unescape(frame)
    }
}

/// Appends `name` as a frame that reads back as it: see the module doc.
fn push_frame(out: &mut Vec<u8>, name: &[u8]) {
    if name.is_empty() {
        out.extend_from_slice(EMPTY_NAME);
        return;
    }
    let last = name.len() - 1;
    escape::push_escaped(out, name, |b, i| {
        b < b' '
            || b == 0x7f
            || b == b';'
            || (b == b' ' && (i == 0 || i == last))
            || (i == 0 && name == EMPTY_NAME)
    });
}

/// Keeps a first line that detection sees cut (longer than
/// [`crate::HEAD_LEN`], so that its count is past the head) from starting
/// like another format's first line: a `#`, `{` or `[` that starts it, or
/// the `:` or `=` that ends a Callgrind key it starts with, is escaped.
fn disguise_first(line: &mut Vec<u8>) {
    if line.len() + 24 < crate::HEAD_LEN {
        return;
    }
    let at = match line.first() {
        Some(b'#' | b'{' | b'[') => 0,
        _ => match crate::detect::profile_key(line) {
            Some(key) => key.len() - 1,
            None => return,
        },
    };
    let mut escaped = Vec::with_capacity(4);
    escape::push_escape(&mut escaped, line[at]);
    line.splice(at..=at, escaped);
}

/// One line: `Ok(None)` if blank, else its stack (frames joined by `;`,
/// root first, every frame non-empty) and count, or what is wrong with it.
fn parse_line(raw: &[u8]) -> Result<Option<(&[u8], u64)>, String> {
    let line = raw.strip_suffix(b"\r").unwrap_or(raw);
    if line.trim_ascii().is_empty() {
        return Ok(None);
    }
    let line = line.trim_ascii_end();
    let Some(space) = line.iter().rposition(|c| c.is_ascii_whitespace()) else {
        return Err(format!(
            "expected `frame;frame;... count`, found `{}`",
            String::from_utf8_lossy(line)
        ));
    };
    let (stack, count) = (line[..space].trim_ascii_end(), &line[space + 1..]);
    let count = tally_model::parse_u64(count).map_err(|_| {
        format!(
            "the count `{}` is not a whole number of samples",
            String::from_utf8_lossy(count)
        )
    })?;
    if stack.is_empty() || stack[0] == b';' || stack[stack.len() - 1] == b';' || {
        let mut last = None;
        memchr::memchr_iter(b';', stack).any(|i| {
            let empty = last == Some(i.wrapping_sub(1));
            last = Some(i);
            empty
        })
    } {
        return Err("an empty frame (`;;`, or `;` at an end)".into());
    }
    Ok(Some((stack, count)))
}

/// The pieces of `bytes` between the `sep` bytes, as `split` gives them
/// (the separators found with `memchr`, many bytes at a time).
fn pieces(bytes: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    let mut ends = memchr::memchr_iter(sep, bytes);
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        let end = ends.next().unwrap_or_else(|| {
            done = true;
            bytes.len()
        });
        let piece = &bytes[start..end];
        start = end + 1;
        Some(piece)
    })
}

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
    for (i, raw) in pieces(bytes, b'\n').enumerate() {
        let line_no = i as u64 + 1;
        let Some((stack, count)) = parse_line(raw).map_err(|m| err(line_no, m))? else {
            continue;
        };
        frames.clear();
        for name in pieces(stack, b';') {
            let frame = match by_name.get(name) {
                Some(&frame) => frame,
                None => {
                    let f = b
                        .function(b"", b"", &frame_name(name))
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

/// Reads folded stacks from `input` as they stream in, with no profile
/// built: each stack (its frames joined by `;`, root first, none empty)
/// and its count go to `stack`, which may refuse one with a message. The
/// lines are checked as [`read`] checks them, and an error names the line.
/// This is how a picture that needs nothing but the stacks (`tally flame`
/// of one folded file) reads them, at the cost of one pass.
pub fn for_each_stack(
    input: Input,
    mut stack: impl FnMut(&[u8], u64) -> Result<(), String>,
) -> Result<(), Error> {
    let mut lines = input.into_lines();
    let path = lines.path.clone();
    let err = |line: u64, msg: String| Error::Parse {
        path: path.clone(),
        line,
        kind: ParseErrorKind::Malformed(msg),
    };
    let mut line_no = 0u64;
    let mut any = false;
    while let Some((data, len)) = lines.next_chunk()? {
        let data = &data[..len];
        let data = data.strip_suffix(b"\n").unwrap_or(data);
        for raw in data.split(|&c| c == b'\n') {
            line_no += 1;
            let Some((frames, count)) = parse_line(raw).map_err(|m| err(line_no, m))? else {
                continue;
            };
            stack(frames, count).map_err(|m| err(line_no, m))?;
            any = true;
        }
    }
    if !any {
        return Err(err(1, "no stack in the file".into()));
    }
    Ok(())
}

/// Writes `stacks` as folded lines of the recorded event `event`: frames
/// by function name, escaped where the format cannot hold a name (see the
/// module doc), stacks whose names agree summed, stacks of zero cost or
/// no frame left out, lines sorted (as stackcollapse writes them). A sum
/// of one line that does not fit is an error (only differences, whose
/// total does not bound their parts, can have one).
pub fn write<C: Cost>(
    names: &Names,
    stacks: &Stacks<C>,
    event: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut lines: std::collections::BTreeMap<Vec<u8>, C> = Default::default();
    // Each function's frame, escaped once.
    let mut frames: rustc_hash::FxHashMap<FunctionId, Vec<u8>> = Default::default();
    let mut key = Vec::new();
    for s in &stacks.samples {
        let Some(&cost) = s.costs.get(event) else {
            continue;
        };
        if cost.is_zero() || s.frames.is_empty() {
            continue;
        }
        key.clear();
        for (i, f) in s.frames.iter().enumerate() {
            if i > 0 {
                key.push(b';');
            }
            let function = stacks.frames[f.index()].function;
            let frame = frames.entry(function).or_insert_with(|| {
                let mut frame = Vec::new();
                push_frame(&mut frame, names.function_name(function));
                frame
            });
            key.extend_from_slice(frame);
        }
        let sum = lines.entry(key.clone()).or_insert(C::ZERO);
        *sum = sum.checked_add(cost).ok_or_else(|| {
            io::Error::other(format!(
                "the counts of the folded stack `{}` sum to more than 64 bits hold",
                escape::shown(&key)
            ))
        })?;
    }
    let mut buf = Vec::with_capacity(1 << 16);
    for (n, (mut stack, cost)) in lines.into_iter().enumerate() {
        if n == 0 {
            disguise_first(&mut stack);
        }
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
/// a number, and at least one is not blank. A head that is one line cut
/// (a first line longer than [`crate::HEAD_LEN`]) shows no count: it is
/// taken for folded stacks if it is text that starts like no other
/// format's first line, and the reader then decides. The writer keeps the
/// first lines it writes from starting like another format's.
pub fn looks_folded(head: &[u8]) -> bool {
    head_looks_folded(head, head.len() >= crate::HEAD_LEN)
}

/// [`looks_folded`] of a head that may end before its content does
/// (`cut`): the head of gzip'd content can be cut short of
/// [`crate::HEAD_LEN`].
pub(crate) fn head_looks_folded(head: &[u8], cut: bool) -> bool {
    if cut && memchr::memchr(b'\n', head).is_none() {
        let text = head.trim_ascii_start();
        return !text.is_empty()
            && head.iter().all(|&b| (b >= b' ' && b != 0x7f) || b == b'\t')
            && !matches!(text.first(), Some(b'#' | b'{' | b'['))
            && crate::detect::profile_key(text).is_none();
    }
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

/// Folded stacks, as a reader and a writer of the one shape
/// ([`crate::ReadProfile`], [`crate::WriteProfile`]).
pub struct Folded {
    /// The recorded event written (a folded file holds one).
    pub event: usize,
}

impl crate::shape::ReadProfile for Folded {
    fn read(&self, path: &Path, bytes: &[u8]) -> Result<tally_model::AnyProfile, Error> {
        crate::shape::unsigned(read(path, bytes))
    }
}

/// A profile without whole stacks writes nothing: the output path refuses
/// it first, with the reason.
impl<C: Cost> crate::shape::WriteProfile<C> for Folded {
    fn write(&self, profile: &tally_model::Profile<C>, out: &mut dyn Write) -> std::io::Result<()> {
        match &profile.stacks {
            Some(s) => write(&profile.names, s, self.event, out),
            None => Ok(()),
        }
    }
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
    fn streamed_lines_are_checked_as_read_checks_them() {
        let streamed = |t: &[u8]| {
            let input = Input::from_bytes("t.folded", t.to_vec()).unwrap();
            let mut seen = Vec::new();
            for_each_stack(input, |s, c| {
                seen.push((String::from_utf8_lossy(s).into_owned(), c));
                Ok(())
            })
            .map(|()| seen)
            .map_err(|e| e.to_string())
        };
        for bad in [
            &b"main 1\nmain;a x\n"[..],
            b"main;;a 1\n",
            b";a 1\n",
            b"a; 1\n",
            b" 1\n",
            b"main\n",
            b"\n",
            b"",
        ] {
            let e = read(Path::new("t.folded"), bad).unwrap_err().to_string();
            assert_eq!(streamed(bad).unwrap_err(), e);
        }
        assert_eq!(
            streamed(b"main;a 2\r\n\n  \nf(a b) 3").unwrap(),
            [("main;a".to_string(), 2), ("f(a b)".to_string(), 3)]
        );
    }

    #[test]
    fn detection() {
        assert!(looks_folded(b"main;a 12\nmain 3\n"));
        assert!(looks_folded(b"main;a 12\nmain 3\nmain;b;c 1"));
        assert!(looks_folded(b"main;a 12\nmain 3\nmain;b;c"));
        assert!(!looks_folded(b"int main(void) { return 0; }\n"));
        assert!(!looks_folded(b"events: Ir\nfl=a\n"));
        assert!(!looks_folded(b""));
        // A head cut inside its first line: text that starts like no
        // other format.
        let cut = |start: &[u8], fill: u8| {
            let mut head = start.to_vec();
            head.resize(crate::HEAD_LEN, fill);
            looks_folded(&head)
        };
        assert!(cut(b"main;", b'x'));
        assert!(cut(b"caf\xc3\xa9", b'y'));
        for other in [&b"cmd: "[..], b"fn=", b"# c", b"{\"a\"", b"[1,"] {
            assert!(!cut(other, b'x'), "{:?}", String::from_utf8_lossy(other));
        }
        assert!(!cut(b"main", 0));
    }

    #[test]
    fn names_a_frame_cannot_hold_are_escaped() {
        let frame = |name: &[u8]| {
            let mut out = Vec::new();
            push_frame(&mut out, name);
            assert_eq!(&*frame_name(&out), name);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(frame(b"a;b"), "a\\x3bb");
        assert_eq!(frame(b"   "), "\\x20 \\x20");
        assert_eq!(frame(b"a\0\nb\r"), "a\\x00\\x0ab\\x0d");
        assert_eq!(frame(b""), "\\(empty)");
        assert_eq!(frame(b"\\(empty)"), "\\x5c(empty)");
        assert_eq!(frame(b"f(int, char) const"), "f(int, char) const");
        assert_eq!(frame(b"[unknown]"), "[unknown]");
        assert_eq!(frame(b"\xff"), "\\xff");
    }

    #[test]
    fn a_long_first_line_does_not_start_like_another_format() {
        let long = |start: &[u8]| {
            let mut line = start.to_vec();
            line.resize(crate::HEAD_LEN, b'x');
            disguise_first(&mut line);
            assert_eq!(&*frame_name(&line), {
                let mut l = start.to_vec();
                l.resize(crate::HEAD_LEN, b'x');
                l
            });
            String::from_utf8_lossy(&line[..12]).into_owned()
        };
        assert_eq!(long(b"events: x"), "events\\x3a x");
        assert_eq!(long(b"fn=main"), "fn\\x3dmainxx");
        assert_eq!(long(b"[unknown]"), "\\x5bunknown]");
        assert_eq!(long(b"main"), "mainxxxxxxxx");
        let mut short = b"events: x".to_vec();
        disguise_first(&mut short);
        assert_eq!(short, b"events: x");
    }
}
