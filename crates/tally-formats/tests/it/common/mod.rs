//! Helpers shared by the integration tests.

/// The same profile in forms the reader's fast paths decline, so that the
/// careful path reads every record: tabs instead of spaces in every line
/// that starts like a cost line, and a space after the `=` of the keyed
/// lines the fast path takes (`fn=`, `cfn=`, `calls=`, `jump=`, …), which
/// the careful path skips.
pub fn tabbed(bytes: &[u8]) -> Vec<u8> {
    const KEYS: &[&[u8]] = &[
        b"fn=", b"fl=", b"fi=", b"fe=", b"ob=", b"cfn=", b"cfi=", b"cfl=", b"cob=", b"jfi=",
        b"jfn=", b"calls=", b"jump=", b"jcnd=",
    ];
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if matches!(line.first(), Some(b'0'..=b'9' | b'+' | b'-' | b'*')) {
            out.extend(line.iter().map(|&b| if b == b' ' { b'\t' } else { b }));
        } else if let Some(key) = KEYS.iter().find(|k| line.starts_with(k)) {
            out.extend_from_slice(key);
            out.push(b' ');
            out.extend_from_slice(&line[key.len()..]);
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}
