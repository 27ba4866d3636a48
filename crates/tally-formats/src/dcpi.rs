//! DCPI profile files, format version 0.07 (`dcpiformat(4)`).
//!
//! A file is an ASCII header (lines of `key value`, ended by a line
//! `samples`) followed by binary chunks of little-endian `u32`s: each chunk
//! is `offset number count*number`, the counts of `number` consecutive
//! instruction addresses starting at `text_start + offset`; a footer of two
//! `u32`s gives the number of sampled addresses and the sum of the counts.
//!
//! The model keeps the header lines verbatim and in order (so unknown lines
//! survive a rewrite) and the samples as a map from address offset to count
//! (zero counts are not kept), so that `read(write(p)) == p`. Chunk layout
//! is not part of the model: the writer rebuilds chunks from the counts.
//!
//! Where the specification is silent or contradicts itself (see
//! docs/dcpi-format.md):
//! - **address step**: the i-th count of a chunk belongs to `offset +
//!   i * step`, with `step` 4 when the `platform` line names Alpha (fixed
//!   4-byte instructions, DCPI's platform) and 1 otherwise (byte
//!   addresses, for variable-length instruction sets);
//! - **`period`** is listed as both required and optional: it is read as
//!   required, exactly once;
//! - **`tstart`** (the text start the chunk offsets are relative to) is
//!   named by the text but not by the grammar: it is an optional hex line;
//! - **the footer** is the last 8 bytes: the chunk list has no length, so
//!   chunks are read up to the footer;
//! - **a chunk of zero counts** breaks `<count>+` and is an error.

use crate::error::Error;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// The header of a DCPI profile: its lines, verbatim, in file order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Every header line without its newline and without the `samples`
    /// terminator, exactly as read (trailing padding spaces of the last
    /// line excluded).
    pub lines: Vec<Vec<u8>>,
}

/// A DCPI profile: the header and the sample count of every sampled
/// address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DcpiProfile {
    /// Header lines.
    pub header: Header,
    /// Sample counts per address offset from the image's text start (in
    /// bytes), only non-zero counts, in increasing order.
    pub samples: BTreeMap<u64, u32>,
}

/// Keys every header must have once.
pub const REQUIRED: [&str; 7] = [
    "image", "epoch", "platform", "event", "period", "tsize", "cpuspeed",
];

/// Keys a header may have once.
pub const OPTIONAL: [&str; 5] = ["cpuamask", "cpuimplv", "cpucount", "path", "tstart"];

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// Splits a header line into its key and value (`None` without a value).
fn split_line(line: &[u8]) -> (&[u8], Option<&[u8]>) {
    let end = line.iter().position(|&b| is_space(b)).unwrap_or(line.len());
    let key = &line[..end];
    let rest = &line[end..];
    let start = rest.iter().position(|&b| !is_space(b));
    (key, start.map(|s| &rest[s..]))
}

fn parse_hex(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii_end();
    let v = v
        .strip_prefix(b"0x")
        .or_else(|| v.strip_prefix(b"0X"))
        .unwrap_or(v);
    if v.is_empty() || !v.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(v).ok()?, 16).ok()
}

fn parse_dec(v: &[u8]) -> Option<u64> {
    let v = v.trim_ascii_end();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

impl Header {
    /// The value of the first line with this key: the bytes after the key
    /// and the spaces or tabs that follow it.
    pub fn get(&self, key: &str) -> Option<&[u8]> {
        self.lines.iter().find_map(|l| match split_line(l) {
            (k, v) if k == key.as_bytes() => Some(v.unwrap_or_default()),
            _ => None,
        })
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.get(key)
            .and_then(|v| std::str::from_utf8(v.trim_ascii_end()).ok())
    }

    /// `image`: the image identifier (hex).
    pub fn image(&self) -> Option<u64> {
        self.get("image").and_then(parse_hex)
    }
    /// `epoch`, as written (`YYMMDDHHMM` or `YYYYMMDDHHMMSS`, UTC).
    pub fn epoch(&self) -> Option<&str> {
        self.text("epoch")
    }
    /// `platform`, as written.
    pub fn platform(&self) -> Option<&str> {
        self.text("platform")
    }
    /// `event`: what was sampled (e.g. `cycles`).
    pub fn event(&self) -> Option<&str> {
        self.text("event")
    }
    /// `path` of the image, if recorded.
    pub fn path(&self) -> Option<&str> {
        self.text("path")
    }
    /// `period`: events per sample.
    pub fn period(&self) -> Option<u64> {
        self.get("period").and_then(parse_dec)
    }
    /// `tsize`: size of the image's text.
    pub fn tsize(&self) -> Option<u64> {
        self.get("tsize").and_then(parse_dec)
    }
    /// `cpuspeed` in MHz.
    pub fn cpuspeed(&self) -> Option<u64> {
        self.get("cpuspeed").and_then(parse_dec)
    }
    /// `cpucount`.
    pub fn cpucount(&self) -> Option<u64> {
        self.get("cpucount").and_then(parse_dec)
    }
    /// `cpuimplv`.
    pub fn cpuimplv(&self) -> Option<u64> {
        self.get("cpuimplv").and_then(parse_dec)
    }
    /// `cpuamask` (hex).
    pub fn cpuamask(&self) -> Option<u64> {
        self.get("cpuamask").and_then(parse_hex)
    }
    /// `tstart`: the address chunk offsets are relative to (hex).
    pub fn tstart(&self) -> Option<u64> {
        self.get("tstart").and_then(parse_hex)
    }

    /// Bytes between consecutive counts of a chunk: 4 on Alpha, else 1.
    pub fn address_step(&self) -> u64 {
        match self.platform() {
            Some(p) if p.to_ascii_lowercase().contains("alpha") => 4,
            _ => 1,
        }
    }

    /// Sets a line: replaces the first line with this key, or appends one.
    pub fn set(&mut self, key: &str, value: &[u8]) {
        let mut line = key.as_bytes().to_vec();
        line.push(b' ');
        line.extend_from_slice(value);
        match self
            .lines
            .iter_mut()
            .find(|l| split_line(l).0 == key.as_bytes())
        {
            Some(l) => *l = line,
            None => self.lines.push(line),
        }
    }
}

impl DcpiProfile {
    /// The sum of all counts.
    pub fn total(&self) -> u64 {
        self.samples.values().map(|&c| u64::from(c)).sum()
    }
}

/// Whether the bytes look like a DCPI profile: the first line starts with a
/// header key and a `samples` line ends the header within the first 64 KB.
pub fn is_dcpi(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
    let (key, value) = split_line(first);
    let known = REQUIRED
        .iter()
        .chain(OPTIONAL.iter())
        .any(|k| k.as_bytes() == key);
    if !known || value.is_none() {
        return false;
    }
    let head = &bytes[..bytes.len().min(1 << 16)];
    head.split(|&b| b == b'\n')
        .any(|l| l.starts_with(b"samples") && l[7..].iter().all(|&b| is_space(b)))
}

/// Reads a DCPI profile file.
pub fn read_file(path: &Path) -> Result<DcpiProfile, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    parse(&bytes, path)
}

fn err(path: &Path, offset: usize, message: String) -> Error {
    Error::Binary {
        path: path.to_path_buf(),
        offset: offset as u64,
        message,
    }
}

/// Checks one header line's value against the grammar.
fn check_value(key: &str, v: &[u8]) -> Result<(), String> {
    let bad = |what: &str| {
        Err(format!(
            "`{key}` must be {what}, found `{}`",
            String::from_utf8_lossy(v)
        ))
    };
    let t = v.trim_ascii_end();
    match key {
        "image" | "cpuamask" | "tstart" => {
            if t.is_empty() || !t.iter().all(u8::is_ascii_hexdigit) {
                return bad("hexadecimal digits");
            }
            if t.len() > 16 {
                return bad("at most 16 hexadecimal digits");
            }
        }
        "period" | "tsize" | "cpuspeed" | "cpuimplv" | "cpucount" if parse_dec(t).is_none() => {
            return bad("decimal digits (a 64-bit number)");
        }
        "epoch" if !(t.len() == 10 || t.len() == 14) || !t.iter().all(u8::is_ascii_digit) => {
            return bad("a UTC time YYMMDDHHMM or YYYYMMDDHHMMSS");
        }
        _ => {}
    }
    Ok(())
}

/// Parses a DCPI profile; errors name the byte offset (and header line).
pub fn parse(bytes: &[u8], path: &Path) -> Result<DcpiProfile, Error> {
    let mut header = Header::default();
    let mut seen: Vec<(&'static str, usize)> = Vec::new();
    let mut pos = 0usize;
    let mut line_no = 0usize;
    let body_start = loop {
        line_no += 1;
        let Some(nl) = memchr::memchr(b'\n', &bytes[pos..]) else {
            return Err(err(
                path,
                pos,
                format!(
                    "line {line_no}: no `samples` line ends the header{}",
                    if pos == bytes.len() {
                        " (end of file)"
                    } else {
                        ""
                    }
                ),
            ));
        };
        let line = &bytes[pos..pos + nl];
        if line.starts_with(b"samples") && line[7..].iter().all(|&b| is_space(b)) {
            break pos + nl + 1;
        }
        let at = |m: String| err(path, pos, format!("line {line_no}: {m}"));
        let (key, value) = split_line(line);
        if key.is_empty() {
            return Err(at(
                "a header line must start with a key (no leading space, no empty line)".into(),
            ));
        }
        if line.contains(&0) || std::str::from_utf8(key).is_err() {
            return Err(at(
                "not a text header line (binary data before the `samples` line?)".into(),
            ));
        }
        let key_s = String::from_utf8_lossy(key).into_owned();
        let Some(value) = value else {
            return Err(at(format!("`{key_s}` has no value")));
        };
        let known = REQUIRED
            .iter()
            .chain(OPTIONAL.iter())
            .find(|k| k.as_bytes() == key);
        if let Some(&k) = known {
            if let Some((_, first)) = seen.iter().find(|s| s.0 == k) {
                return Err(at(format!(
                    "`{k}` appears twice (first on line {first}); the header has one"
                )));
            }
            check_value(k, value).map_err(at)?;
            seen.push((k, line_no));
        }
        header.lines.push(line.to_vec());
        pos += nl + 1;
    };
    if let Some(missing) = REQUIRED.iter().find(|k| !seen.iter().any(|s| s.0 == **k)) {
        return Err(err(
            path,
            body_start,
            format!(
                "the header has no `{missing}` line (required: {})",
                REQUIRED.join(", ")
            ),
        ));
    }
    let step = header.address_step();
    let end = bytes.len();
    let body_len = end - body_start;
    if body_len < 8 {
        return Err(err(
            path,
            body_start,
            format!("{body_len} bytes after the header; the footer alone takes 8"),
        ));
    }
    if !body_len.is_multiple_of(4) {
        return Err(err(
            path,
            end - body_len % 4,
            format!("the binary part is {body_len} bytes, not a whole number of 32-bit values"),
        ));
    }
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let footer = end - 8;
    let mut samples = BTreeMap::new();
    let mut at = body_start;
    let mut prev: Option<(u64, u64)> = None; // (offset, end) of the last chunk
    let mut sum = 0u64;
    while at < footer {
        if footer - at < 8 {
            return Err(err(
                path,
                at,
                format!(
                    "{} bytes before the footer: too few for a chunk (offset, number, counts)",
                    footer - at
                ),
            ));
        }
        let offset = u64::from(word(at));
        let number = u64::from(word(at + 4));
        if number == 0 {
            return Err(err(
                path,
                at + 4,
                "a chunk with no counts (number 0)".into(),
            ));
        }
        let room = ((footer - at - 8) / 4) as u64;
        if number > room {
            return Err(err(
                path,
                at + 4,
                format!(
                    "the chunk at offset {offset:#x} has {number} counts but only {room} fit before the footer"
                ),
            ));
        }
        if let Some((p_off, p_end)) = prev {
            if offset <= p_off {
                return Err(err(
                    path,
                    at,
                    format!("chunk offsets must increase: {offset:#x} after {p_off:#x}"),
                ));
            }
            if offset < p_end {
                return Err(err(
                    path,
                    at,
                    format!(
                        "the chunk at offset {offset:#x} overlaps the previous one ({p_off:#x}..{p_end:#x})"
                    ),
                ));
            }
        }
        for i in 0..number {
            let c = word(at + 8 + 4 * i as usize);
            if c != 0 {
                samples.insert(offset + i * step, c);
                sum += u64::from(c);
            }
        }
        prev = Some((offset, offset + number * step));
        at += 8 + 4 * number as usize;
    }
    let (total_offsets, total_samples) = (u64::from(word(footer)), u64::from(word(footer + 4)));
    if total_offsets != samples.len() as u64 {
        return Err(err(
            path,
            footer,
            format!(
                "the footer counts {total_offsets} sampled addresses, the chunks have {}",
                samples.len()
            ),
        ));
    }
    if total_samples != sum {
        return Err(err(
            path,
            footer + 4,
            format!("the footer counts {total_samples} samples, the chunks sum to {sum}"),
        ));
    }
    Ok(DcpiProfile { header, samples })
}

/// Why a profile cannot be written in the 0.07 layout.
fn limit(message: String) -> Error {
    Error::Incompatible(message)
}

/// Encodes a profile: the header, `samples` padded so that the binary part
/// starts on a 4-byte boundary, chunks, footer.
pub fn encode(p: &DcpiProfile) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(256 + p.samples.len() * 8);
    for l in &p.header.lines {
        if l.contains(&b'\n') || l.is_empty() {
            return Err(limit(format!(
                "header line `{}` is empty or holds a newline",
                String::from_utf8_lossy(l)
            )));
        }
        out.extend_from_slice(l);
        out.push(b'\n');
    }
    out.extend_from_slice(b"samples");
    while (out.len() + 1) % 4 != 0 {
        out.push(b' ');
    }
    out.push(b'\n');
    let step = p.header.address_step();
    let total = p.total();
    let total = u32::try_from(total)
        .map_err(|_| limit(format!("{total} samples in all: the footer holds 32 bits")))?;
    let count = u32::try_from(p.samples.len()).map_err(|_| {
        limit(format!(
            "{} sampled addresses: the footer holds 32 bits",
            p.samples.len()
        ))
    })?;
    // Chunks: a gap of up to two empty slots is cheaper as zero counts
    // than as a new 8-byte chunk header.
    let mut chunk: Vec<u32> = Vec::new();
    let mut start = 0u64;
    let flush = |out: &mut Vec<u8>, start: u64, chunk: &mut Vec<u32>| -> Result<(), Error> {
        if chunk.is_empty() {
            return Ok(());
        }
        let off = u32::try_from(start).map_err(|_| {
            limit(format!(
                "offset {start:#x} does not fit the 32-bit chunk offset"
            ))
        })?;
        out.extend_from_slice(&off.to_le_bytes());
        out.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
        for c in chunk.drain(..) {
            out.extend_from_slice(&c.to_le_bytes());
        }
        Ok(())
    };
    for (&off, &c) in &p.samples {
        if c == 0 {
            continue;
        }
        let next = start + chunk.len() as u64 * step;
        let joins = !chunk.is_empty()
            && off >= next
            && (off - start).is_multiple_of(step)
            && (off - next) / step <= 2;
        if !joins {
            flush(&mut out, start, &mut chunk)?;
            start = off;
        } else {
            chunk.resize(chunk.len() + ((off - next) / step) as usize, 0);
        }
        chunk.push(c);
    }
    flush(&mut out, start, &mut chunk)?;
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    Ok(out)
}

/// Writes a profile to `out`.
pub fn write(p: &DcpiProfile, out: &mut dyn Write) -> Result<(), Error> {
    let bytes = encode(p)?;
    out.write_all(&bytes)
        .map_err(|e| Error::io(Path::new("<output>"), e))
}

/// Writes a profile to a file (temporary file and rename).
pub fn write_file(p: &DcpiProfile, path: &Path) -> Result<(), Error> {
    let bytes = encode(p)?;
    crate::output::write_file(path, |w| w.write_all(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(extra: &str) -> Vec<u8> {
        format!(
            "image 3f2a\nepoch 2611221040\nplatform x86_64 Linux\nevent cycles\nperiod 62976\ntsize 4096\ncpuspeed 2400\n{extra}"
        )
        .into_bytes()
    }

    #[test]
    fn round_trips_and_pads() {
        let mut p = DcpiProfile::default();
        p.header.lines = header("path /bin/true\nfuture stuff  here\n")
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect();
        for (o, c) in [(0u64, 3u32), (1, 1), (4, 2), (40, 7)] {
            p.samples.insert(o, c);
        }
        let bytes = encode(&p).unwrap();
        let body = bytes
            .windows(8)
            .position(|w| w == b"samples ".as_slice() || w == b"samples\n".as_slice())
            .unwrap();
        let start = body + bytes[body..].iter().position(|&b| b == b'\n').unwrap() + 1;
        assert_eq!(start % 4, 0);
        let back = parse(&bytes, Path::new("x")).unwrap();
        assert_eq!(back, p);
        assert_eq!(back.header.get("future"), Some(b"stuff  here".as_slice()));
        assert_eq!(back.header.period(), Some(62976));
        assert_eq!(back.header.image(), Some(0x3f2a));
        // Offsets 0, 1, 4 share a chunk (gap of two zeros); 40 is alone.
        let words = (bytes.len() - start) / 4;
        assert_eq!(words, (2 + 5) + (2 + 1) + 2);
    }
}
