//! Helpers shared by the integration tests.

/// Tabs instead of spaces in every line that starts like a cost line: the
/// reader's fast path declines such lines, so the careful path reads them.
pub fn tabbed(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    for line in bytes.split_inclusive(|&b| b == b'\n') {
        if matches!(line.first(), Some(b'0'..=b'9' | b'+' | b'-' | b'*')) {
            out.extend(line.iter().map(|&b| if b == b' ' { b'\t' } else { b }));
        } else {
            out.extend_from_slice(line);
        }
    }
    out
}
