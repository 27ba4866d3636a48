//! Mutations that know a binary format's fields: pprof's varints and
//! length prefixes, perf.data's header sizes and offsets, its attributes
//! and its record headers. A flipped byte rarely lands on the one field
//! that a reader trusts to size or place the rest; these aim at them.

use crate::rng::Rng;

/// The mutations, by name (as printed with a failure).
pub const NAMES: [&str; 6] = [
    "pb-varint",
    "pb-length",
    "pb-dup-field",
    "perf-header",
    "perf-attr",
    "perf-record",
];

/// Values a size, count or offset is set to: the edges of the integer
/// types, and small ones.
const EXTREME: [u64; 9] = [
    0,
    1,
    7,
    0xffff,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    1 << 63,
    u64::MAX,
];

/// Applies one to three field mutations for `pprof` (a decompressed
/// profile.proto) or perf.data; returns the result and their names.
pub fn mutate(rng: &mut Rng, input: &[u8], pprof: bool) -> (Vec<u8>, Vec<&'static str>) {
    let mut data = input.to_vec();
    let mut done = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let m = if pprof {
            rng.below(3)
        } else {
            3 + rng.below(3)
        };
        data = match m {
            0 => pb_varint(rng, &data),
            1 => pb_length(rng, &data),
            2 => pb_dup(rng, &data),
            3 => perf_header(rng, &data),
            4 => perf_attr(rng, &data),
            _ => perf_record(rng, &data),
        };
        done.push(NAMES[m]);
    }
    (data, done)
}

/// A field of a protocol buffer message, by byte ranges.
#[derive(Clone, Copy, Debug)]
struct Field {
    /// Where the tag starts.
    start: usize,
    /// Where the value starts (a varint, or a length prefix).
    value: usize,
    /// Where the value ends (after the bytes, for length-delimited ones).
    end: usize,
    /// Length-delimited: where its content starts.
    content: Option<usize>,
}

fn varint(b: &[u8], mut at: usize) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for shift in (0..70).step_by(7) {
        let c = *b.get(at)?;
        at += 1;
        if shift < 64 {
            v |= u64::from(c & 0x7f) << shift;
        }
        if c & 0x80 == 0 {
            return Some((v, at));
        }
    }
    None
}

fn encode(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let c = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(c);
            return out;
        }
        out.push(c | 0x80);
    }
}

/// The fields of the message in `b[from..to]` and, recursively, of every
/// length-delimited field whose content parses as a message (pprof's
/// samples, locations, lines, functions, mappings), up to 4096 fields.
fn fields(b: &[u8], from: usize, to: usize, depth: u32, out: &mut Vec<Field>) {
    let mut at = from;
    while at < to && out.len() < 4096 {
        let Some((tag, v)) = varint(b, at) else {
            return;
        };
        let field = match tag & 7 {
            0 => {
                let Some((_, end)) = varint(b, v) else { return };
                Field {
                    start: at,
                    value: v,
                    end,
                    content: None,
                }
            }
            2 => {
                let Some((len, c)) = varint(b, v) else { return };
                let Some(end) = usize::try_from(len).ok().and_then(|l| c.checked_add(l)) else {
                    return;
                };
                if end > to {
                    return;
                }
                Field {
                    start: at,
                    value: v,
                    end,
                    content: Some(c),
                }
            }
            1 => Field {
                start: at,
                value: v,
                end: v + 8,
                content: None,
            },
            5 => Field {
                start: at,
                value: v,
                end: v + 4,
                content: None,
            },
            _ => return,
        };
        if field.end > to {
            return;
        }
        out.push(field);
        if let Some(c) = field.content
            && depth < 3
        {
            // Sub-messages and packed numbers alike: a packed run parses
            // as varint fields only by chance, and then its bytes are as
            // good a target as any.
            let mut sub = Vec::new();
            fields(b, c, field.end, depth + 1, &mut sub);
            if sub.last().is_some_and(|f| f.end == field.end) {
                out.extend(sub);
            }
        }
        at = field.end;
    }
}

fn all_fields(b: &[u8]) -> Vec<Field> {
    let mut v = Vec::new();
    fields(b, 0, b.len(), 0, &mut v);
    v
}

fn extreme(rng: &mut Rng, old: u64, len: usize) -> u64 {
    match rng.below(4) {
        0 => old.wrapping_add(1 + rng.below(3) as u64),
        1 => old.wrapping_sub(1 + rng.below(3) as u64),
        2 => len as u64 + rng.below(16) as u64,
        _ => *rng.pick(&EXTREME),
    }
}

/// A varint (a number, an index into a table, a tag) set to an extreme
/// value, re-encoded in place: the lengths around it are left as they
/// were, so a longer encoding also misframes the enclosing message.
fn pb_varint(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let fs: Vec<Field> = all_fields(b);
    if fs.is_empty() {
        return b.to_vec();
    }
    let f = *rng.pick(&fs);
    // The tag or the value.
    let (at, end) = if f.content.is_none() && !rng.one_in(4) {
        (f.value, f.end)
    } else {
        (f.start, f.value)
    };
    let old = varint(b, at).map_or(0, |v| v.0);
    let new = if at == f.start {
        // Another field number or wire type.
        if rng.one_in(2) {
            (old & !7) | rng.below(8) as u64
        } else {
            (extreme(rng, old >> 3, 16) << 3) | (old & 7)
        }
    } else {
        extreme(rng, old, b.len())
    };
    [&b[..at], &encode(new)[..], &b[end..]].concat()
}

/// A length prefix set to an extreme value, or one off, the content kept.
fn pb_length(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let fs: Vec<Field> = all_fields(b)
        .into_iter()
        .filter(|f| f.content.is_some())
        .collect();
    if fs.is_empty() {
        return b.to_vec();
    }
    let f = *rng.pick(&fs);
    let c = f.content.unwrap_or(f.end);
    let old = (f.end - c) as u64;
    let new = extreme(rng, old, b.len() - c);
    [&b[..f.value], &encode(new)[..], &b[c..]].concat()
}

/// A field copied, or removed: a repeated sample or location, a table
/// entry defined twice, an id nothing defines.
fn pb_dup(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let fs: Vec<Field> = all_fields(b);
    if fs.is_empty() {
        return b.to_vec();
    }
    let f = *rng.pick(&fs);
    if rng.one_in(3) {
        [&b[..f.start], &b[f.end..]].concat()
    } else {
        [&b[..f.end], &b[f.start..]].concat()
    }
}

fn word(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

fn put(b: &mut [u8], at: usize, v: u64, width: usize) {
    if let Some(dst) = b.get_mut(at..at + width) {
        dst.copy_from_slice(&v.to_le_bytes()[..width]);
    }
}

/// One of the header's words set to an extreme value or moved a little:
/// the header's own size, the attribute size, the attribute, data and
/// event-type sections' offsets and sizes, the feature bits.
fn perf_header(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let mut d = b.to_vec();
    if d.len() < 104 {
        return d;
    }
    if rng.one_in(5) {
        // A feature bit set or cleared: the feature sections after the
        // data are then read at the wrong places.
        let bit = rng.below(256);
        d[72 + bit / 8] ^= 1 << (bit % 8);
        return d;
    }
    let at = 8 * (1 + rng.below(8));
    let old = word(&d, at).unwrap_or(0);
    let new = match rng.below(3) {
        0 => old.wrapping_add(8 * (1 + rng.below(4)) as u64),
        1 => old.wrapping_sub(8 * (1 + rng.below(4)) as u64),
        _ => extreme(rng, old, d.len()),
    };
    put(&mut d, at, new, 8);
    d
}

/// A field of an attribute (`perf_event_attr`): its type, size, sample
/// period, sample type or read format bits, or its ids section.
fn perf_attr(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let mut d = b.to_vec();
    let (Some(off), Some(size), Some(attr_size)) = (word(b, 24), word(b, 32), word(b, 16)) else {
        return d;
    };
    if attr_size == 0 || size < attr_size || off.saturating_add(size) > b.len() as u64 {
        return perf_header(rng, b);
    }
    let n = (size / attr_size) as usize;
    let at = off as usize + rng.below(n.max(1)) * attr_size as usize;
    match rng.below(6) {
        // type, size (u32 each)
        0 => put(&mut d, at, *rng.pick(&EXTREME), 4),
        1 => put(
            &mut d,
            at + 4,
            *rng.pick(&[0, 8, 64, 112, 128, 0xffff_ffff]),
            4,
        ),
        // sample_period, sample_type, read_format: bits flipped
        2..=4 => {
            let f = at + 8 * (rng.below(3) + 2);
            let old = word(&d, f).unwrap_or(0);
            put(&mut d, f, old ^ (1 << rng.below(24)), 8);
        }
        // the ids section after the attribute itself
        _ => {
            let f = at + attr_size as usize - 16 + 8 * rng.below(2);
            let old = word(&d, f).unwrap_or(0);
            let new = extreme(rng, old, d.len());
            put(&mut d, f, new, 8);
        }
    }
    d
}

/// A record header of the data section (type u32, misc u16, size u16):
/// the size set to 0, under the header, odd or past the end; the type or
/// the misc bits changed.
fn perf_record(rng: &mut Rng, b: &[u8]) -> Vec<u8> {
    let mut d = b.to_vec();
    let (Some(off), Some(size)) = (word(b, 40), word(b, 48)) else {
        return d;
    };
    let end = off.saturating_add(size).min(b.len() as u64) as usize;
    let mut at = off as usize;
    let mut heads = Vec::new();
    while at + 8 <= end && heads.len() < 4096 {
        heads.push(at);
        let s = u16::from_le_bytes([b[at + 6], b[at + 7]]) as usize;
        if s < 8 {
            break;
        }
        at += s;
    }
    if heads.is_empty() {
        return perf_header(rng, b);
    }
    let h = *rng.pick(&heads);
    match rng.below(4) {
        0 | 1 => {
            let old = u16::from_le_bytes([d[h + 6], d[h + 7]]) as u64;
            let new = *rng.pick(&[0, 4, 7, 8, 9, 0xffff, old + 8, old.saturating_sub(8)]);
            put(&mut d, h + 6, new, 2);
        }
        2 => put(
            &mut d,
            h,
            *rng.pick(&[0, 1, 2, 3, 4, 7, 9, 10, 11, 67, 68, 80, 0xffff]),
            4,
        ),
        _ => {
            let old = u16::from_le_bytes([d[h + 4], d[h + 5]]);
            put(&mut d, h + 4, u64::from(old ^ (1 << rng.below(16))), 2);
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(varint(&encode(v), 0), Some((v, encode(v).len())));
        }
    }

    #[test]
    fn nested_fields_are_found() {
        // Field 2 (a message) holding field 1 = 150.
        let msg = [0x12, 0x03, 0x08, 0x96, 0x01];
        let fs = all_fields(&msg);
        assert_eq!(fs.len(), 2);
        assert_eq!(fs[1].value, 3);
    }
}
