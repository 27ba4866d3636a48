//! Mutations of a seed: what a damaged disk, a wrong tool or a hostile
//! user makes of a profile.

use crate::rng::Rng;

/// Numbers at the edges of the counters' types.
const HUGE: [&str; 8] = [
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "-1",
    "-9223372036854775808",
    "-9223372036854775809",
    "340282366920938463463374607431768211456",
];

/// The mutations, by name (as printed with a failure).
pub const NAMES: [&str; 14] = [
    "flip",
    "cut-line",
    "cut-any",
    "dup-line",
    "del-lines",
    "swap-lines",
    "huge-number",
    "long-name",
    "nul",
    "crlf",
    "splice",
    "comment-prefix",
    "huge-field",
    "copy-line",
];

fn lines(b: &[u8]) -> Vec<&[u8]> {
    b.split_inclusive(|&c| c == b'\n').collect()
}

/// Applies one to three mutations to `input`; returns the result and the
/// names of the mutations. `splices` are lines of other formats.
pub fn mutate(
    rng: &mut Rng,
    input: &[u8],
    binary: bool,
    splices: &[Vec<u8>],
) -> (Vec<u8>, Vec<&'static str>) {
    let mut data = input.to_vec();
    let mut done = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let m = rng.below(NAMES.len());
        data = apply(rng, m, &data, binary, splices);
        done.push(NAMES[m]);
    }
    (data, done)
}

/// One mutation.
fn apply(rng: &mut Rng, m: usize, data: &[u8], binary: bool, splices: &[Vec<u8>]) -> Vec<u8> {
    let ls = lines(data);
    let n = ls.len();
    let join = |v: Vec<&[u8]>| v.concat();
    match NAMES[m] {
        "flip" => {
            let mut d = data.to_vec();
            for _ in 0..1 + rng.below(8) {
                if d.is_empty() {
                    break;
                }
                let i = rng.below(d.len());
                d[i] = if rng.one_in(2) {
                    d[i] ^ (1 << rng.below(8))
                } else {
                    rng.next_u64() as u8
                };
            }
            d
        }
        "cut-line" if n > 0 => join(ls[..rng.below(n)].to_vec()),
        "cut-any" | "cut-line" => data[..rng.below(data.len() + 1)].to_vec(),
        "dup-line" if n > 0 => {
            let i = rng.below(n);
            let mut v = ls.clone();
            v.insert(i, ls[i]);
            join(v)
        }
        "del-lines" if n > 0 => {
            let i = rng.below(n);
            let k = 1 + rng.below(4.min(n - i));
            let mut v = ls.clone();
            v.drain(i..i + k);
            join(v)
        }
        "swap-lines" if n > 1 => {
            let mut v = ls.clone();
            let (i, j) = (rng.below(n), rng.below(n));
            v.swap(i, j);
            join(v)
        }
        "copy-line" if n > 1 => {
            let mut v = ls.clone();
            let line = ls[rng.below(n)];
            v.insert(rng.below(n + 1), line);
            join(v)
        }
        "huge-number" => huge_number(rng, data),
        "long-name" => long_name(rng, data, binary),
        "nul" => {
            let mut d = data.to_vec();
            let at = rng.below(d.len() + 1);
            let k = 1 + rng.below(4);
            d.splice(at..at, std::iter::repeat_n(0u8, k));
            d
        }
        "crlf" => {
            let all = rng.one_in(2);
            let mut d = Vec::with_capacity(data.len() + n);
            for &b in data {
                if b == b'\n' && (all || rng.one_in(4)) {
                    d.push(b'\r');
                }
                d.push(b);
            }
            d
        }
        "splice" if !splices.is_empty() => {
            let mut v = ls.clone();
            let line = rng.pick(splices);
            v.insert(rng.below(n + 1), line);
            join(v)
        }
        "comment-prefix" => {
            // More than 512 bytes of comment lines before the profile.
            let mut d = Vec::new();
            let target = 513 + rng.below(4096);
            while d.len() < target {
                d.extend_from_slice(b"# a comment line before the profile, as some writers put\n");
            }
            d.extend_from_slice(data);
            d
        }
        "huge-field" => {
            // A binary field overwritten with an extreme value.
            let mut d = data.to_vec();
            if d.len() >= 8 {
                let at = rng.below(d.len() - 7) & !3;
                let v: u64 = *rng.pick(&[u64::MAX, 1 << 63, 1 << 31, u64::from(u32::MAX), 0]);
                let k = if rng.one_in(2) { 4 } else { 8 };
                d[at..at + k].copy_from_slice(&v.to_le_bytes()[..k]);
            }
            d
        }
        _ => data.to_vec(),
    }
}

/// A large text seed cut down to its header (the lines before the first
/// `fn=`) and a window of `n` lines from a random place: a real profile's
/// lines, at the cost of a small one.
pub fn window(rng: &mut Rng, data: &[u8], n: usize) -> Vec<u8> {
    let ls = lines(data);
    let head = ls
        .iter()
        .position(|l| l.starts_with(b"fn="))
        .unwrap_or(0)
        .min(n);
    let start = head + rng.below(ls.len().saturating_sub(head + n) + 1);
    let end = (start + n).min(ls.len());
    [ls[..head].concat(), ls[start..end].concat()].concat()
}

/// Replaces one number of a random line (or inserts one) with a number at
/// the edge of 64 bits.
fn huge_number(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let huge = rng.pick(&HUGE).as_bytes();
    // Positions of the digit runs.
    let mut runs = Vec::new();
    let mut i = 0;
    while i < data.len() {
        if data[i].is_ascii_digit() {
            let s = i;
            while i < data.len() && data[i].is_ascii_digit() {
                i += 1;
            }
            runs.push((s, i));
            if runs.len() >= 4096 {
                break;
            }
        } else {
            i += 1;
        }
    }
    let (s, e) = if runs.is_empty() {
        let at = rng.below(data.len() + 1);
        (at, at)
    } else {
        *rng.pick(&runs)
    };
    [&data[..s], huge, &data[e..]].concat()
}

/// Makes a name of 65,536 bytes or more: after a `fn=`/`fl=`/`cfn=`/`ob=`
/// (or any `=`), in the `events:` line, or anywhere in binary data.
fn long_name(rng: &mut Rng, data: &[u8], binary: bool) -> Vec<u8> {
    let len = 65_536 + rng.below(4096);
    let fill = *rng.pick(&[b'a', b'x', b'_', 0xc3]);
    let name = vec![fill; len];
    let ls = lines(data);
    if binary || ls.is_empty() {
        let at = rng.below(data.len() + 1);
        return [&data[..at], &name[..], &data[at..]].concat();
    }
    let candidates: Vec<usize> = ls
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(&b'=') || l.starts_with(b"events:"))
        .map(|(i, _)| i)
        .collect();
    let i = if candidates.is_empty() {
        rng.below(ls.len())
    } else {
        *rng.pick(&candidates)
    };
    let line = ls[i];
    let body_end = line.len() - usize::from(line.ends_with(b"\n"));
    let mut l = line[..body_end].to_vec();
    if line.starts_with(b"events:") {
        l.push(b' ');
    }
    l.extend_from_slice(&name);
    l.extend_from_slice(&line[body_end..]);
    let mut v = ls.clone();
    v[i] = &l;
    v.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_mutation() {
        let seed = b"events: Ir\nfn=main\n1 2\n";
        let a = mutate(&mut Rng::new(5), seed, false, &[]);
        let b = mutate(&mut Rng::new(5), seed, false, &[]);
        assert_eq!(a, b);
    }

    #[test]
    fn long_names_are_long() {
        let out = long_name(&mut Rng::new(1), b"events: Ir\nfn=main\n1 2\n", false);
        let longest = out.split(|&b| b == b'\n').map(<[u8]>::len).max();
        assert!(longest.unwrap() >= 65_536);
    }
}
