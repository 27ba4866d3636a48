//! `\xHH` escapes for names in formats that have no escape of their own.
//!
//! Folded stacks cannot hold a `;`, a line break or a NUL inside a frame,
//! nor a space at either end of one; speedscope's JSON cannot hold bytes
//! that are not UTF-8. Their writers write such a byte as `\x` and two
//! lowercase hex digits, which flamegraph.pl, inferno and speedscope show
//! as text and tally's folded reader turns back into the byte.
//!
//! Only the bytes a writer may need to escape ([`decodable`]) are ever
//! decoded, so that names written by other programs read as they are (a
//! Windows path's `\x64` stays four characters); a backslash that would
//! start such an escape is itself written `\x5c`.

use std::borrow::Cow;

/// Whether `\xHH` stands for byte `b` when read: control bytes, space,
/// DEL, bytes that are not ASCII, the backslash, and the separators and
/// first bytes of other formats' first lines (`#`, `:`, `;`, `=`, `[`,
/// `{`).
pub fn decodable(b: u8) -> bool {
    b <= b' ' || b >= 0x7f || matches!(b, b'#' | b':' | b';' | b'=' | b'[' | b'\\' | b'{')
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// The byte an escape at the start of `s` stands for, if it is one.
fn escape_at(s: &[u8]) -> Option<u8> {
    match s {
        [b'\\', b'x', h, l, ..] => {
            let b = (hex(*h)? << 4) | hex(*l)?;
            decodable(b).then_some(b)
        }
        _ => None,
    }
}

/// Appends the escape of `b` (which must be [`decodable`]).
pub(crate) fn push_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    debug_assert!(decodable(b));
    out.extend_from_slice(&[
        b'\\',
        b'x',
        HEX[usize::from(b >> 4)],
        HEX[usize::from(b & 15)],
    ]);
}

/// Appends `name`, escaping each byte for which `must(byte, index)` holds
/// (it must hold only for [`decodable`] bytes), every byte that is not
/// part of valid UTF-8, and every backslash that would read as an escape.
/// The result reads back as `name` through [`unescape`], and is UTF-8.
pub(crate) fn push_escaped(out: &mut Vec<u8>, name: &[u8], must: impl Fn(u8, usize) -> bool) {
    let mut at = 0;
    for chunk in name.utf8_chunks() {
        for (i, &b) in chunk.valid().as_bytes().iter().enumerate() {
            let i = at + i;
            if must(b, i) || (b == b'\\' && escape_at(&name[i..]).is_some()) {
                push_escape(out, b);
            } else {
                out.push(b);
            }
        }
        at += chunk.valid().len();
        for &b in chunk.invalid() {
            push_escape(out, b);
        }
        at += chunk.invalid().len();
    }
}

/// `name` as text: bytes that are not UTF-8 escaped, and the backslashes
/// that would read as an escape (a name that is UTF-8 and has no
/// backslash is borrowed as it is).
pub(crate) fn text(name: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(name) {
        Ok(s) if !s.contains('\\') => Cow::Borrowed(s),
        _ => {
            let mut out = Vec::with_capacity(name.len() + 8);
            push_escaped(&mut out, name, |_, _| false);
            Cow::Owned(String::from_utf8_lossy(&out).into_owned())
        }
    }
}

/// The bytes `escaped` stands for: every `\xHH` of a [`decodable`] byte
/// decoded, everything else as it is.
pub fn unescape(escaped: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr(b'\\', escaped).is_none() {
        return Cow::Borrowed(escaped);
    }
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        match escape_at(&escaped[i..]) {
            Some(b) => {
                out.push(b);
                i += 4;
            }
            None => {
                out.push(escaped[i]);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// A name as an error message shows it: control bytes and bytes that are
/// not UTF-8 escaped, and a long name cut, with its length.
pub fn shown(name: &[u8]) -> String {
    const MAX: usize = 80;
    let mut out = Vec::new();
    push_escaped(&mut out, &name[..name.len().min(MAX)], |b, _| {
        b < b' ' || b == 0x7f
    });
    let mut s = String::from_utf8_lossy(&out).into_owned();
    if name.len() > MAX {
        s.push_str(&format!("… ({} bytes)", name.len()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(name: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        push_escaped(&mut out, name, |b, _| b == b';' || b < b' ');
        out
    }

    #[test]
    fn escapes_read_back_and_leave_other_backslashes() {
        for name in [
            &b"a;b"[..],
            b"\\x3b",
            b"\\x3",
            b"\\\\x3b",
            b"\\",
            b"C:\\x64\\lib",
            b"\0\n\r",
            b"\xff\xfe caf\xc3\xa9",
            b"\\x5c",
            b"",
        ] {
            let e = escaped(name);
            assert!(std::str::from_utf8(&e).is_ok(), "{e:?}");
            assert_eq!(&*unescape(&e), name, "{:?}", String::from_utf8_lossy(&e));
        }
        assert_eq!(escaped(b"a;b\\x3b"), b"a\\x3bb\\x5cx3b");
        assert_eq!(escaped(b"C:\\x64\\lib"), b"C:\\x64\\lib");
        assert_eq!(&*unescape(b"C:\\x64 \\X3B \\x3B"), b"C:\\x64 \\X3B \\x3B");
    }

    #[test]
    fn shown_names_are_one_short_line() {
        assert_eq!(shown(b"a\nb\0"), "a\\x0ab\\x00");
        let long = shown(&[b'x'; 70_000]);
        assert!(
            long.ends_with("… (70000 bytes)") && long.len() < 120,
            "{long}"
        );
    }
}
