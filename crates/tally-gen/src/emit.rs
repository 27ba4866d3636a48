//! Where generated text goes: a buffered writer, or a counter of bytes.
//!
//! The header's `summary:` must equal the sum of all cost lines, which is
//! known only after the body is generated. Rather than keep the body in
//! memory (hundreds of megabytes) the generator runs twice over the same
//! random streams: first into a [`Counter`] that only adds up lengths (to
//! learn the totals and where to stop), then into a [`BufOut`]. Both passes
//! share one code path, generic over [`Emit`], so they cannot disagree.

use std::io::{self, Write};

/// A sink for generated text.
pub(crate) trait Emit {
    fn bytes(&mut self, b: &[u8]);
    fn byte(&mut self, b: u8);
    /// The first `len` (at most 4) bytes of `s`: short tokens from tables,
    /// copied without a variable-length `memcpy`.
    fn short(&mut self, s: [u8; 4], len: usize);
    /// The first `len` bytes of `s`: a number rendered once by [`Num`]
    /// and written on many lines.
    fn num(&mut self, n: &Num);
    /// A decimal number.
    fn dec(&mut self, v: u64);
    /// A number as `0x` and lower-case hex digits, as Valgrind's `%#lx`.
    fn hex(&mut self, v: u64);
    /// Bytes emitted so far.
    fn len(&self) -> u64;
    /// Called between function blocks: a chance to hand data on.
    fn block_done(&mut self) {}
}

/// A decimal number rendered once, for repeated use: every instruction of
/// a basic block has the same execution count.
pub(crate) struct Num {
    text: [u8; 24],
    len: usize,
}

impl Num {
    #[inline]
    pub(crate) fn new(mut v: u64) -> Num {
        let mut text = [0u8; 24];
        if v < 10 {
            text[0] = b'0' + v as u8;
            return Num { text, len: 1 };
        }
        let len = dec_len(v);
        for d in text[..len].iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        Num { text, len }
    }
}

/// Counts bytes without producing them.
#[derive(Default)]
pub(crate) struct Counter {
    n: u64,
}

/// Decimal digits of `v`: log10 estimated from log2, then corrected; no
/// loop and one predictable comparison.
#[inline]
fn dec_len(v: u64) -> usize {
    let l2 = 63 - (v | 1).leading_zeros();
    let t = ((l2 * 1233) >> 12) as usize;
    t + 1 + usize::from(v >= POW10[t + 1])
}

const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut i = 1;
    while i < 20 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// "00" to "99".
const PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

#[inline]
fn hex_len(v: u64) -> usize {
    (v.checked_ilog2().unwrap_or(0) / 4 + 1) as usize
}

impl Emit for Counter {
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        self.n += b.len() as u64;
    }
    #[inline(always)]
    fn byte(&mut self, _: u8) {
        self.n += 1;
    }
    #[inline(always)]
    fn short(&mut self, _: [u8; 4], len: usize) {
        self.n += len as u64;
    }
    #[inline(always)]
    fn num(&mut self, n: &Num) {
        self.n += n.len as u64;
    }
    #[inline(always)]
    fn dec(&mut self, v: u64) {
        self.n += dec_len(v) as u64;
    }
    #[inline(always)]
    fn hex(&mut self, v: u64) {
        self.n += 2 + hex_len(v) as u64;
    }
    fn len(&self) -> u64 {
        self.n
    }
}

/// Buffers text and writes it out in large chunks; the first write error is
/// kept and returned by [`BufOut::finish`].
///
/// The buffer is a fixed slice with an index rather than a `Vec`: numbers
/// and short tokens are stored in place, which is most of the generator's
/// time otherwise.
pub(crate) struct BufOut<W: Write> {
    out: W,
    buf: Box<[u8]>,
    n: usize,
    written: u64,
    error: Option<io::Error>,
}

const CHUNK: usize = 1 << 20;
/// Room beyond `CHUNK`, so that a block in progress rarely forces a flush.
const SLACK: usize = 1 << 16;

impl<W: Write> BufOut<W> {
    pub(crate) fn new(out: W) -> Self {
        BufOut {
            out,
            buf: vec![0; CHUNK + SLACK].into_boxed_slice(),
            n: 0,
            written: 0,
            error: None,
        }
    }

    #[cold]
    fn flush_buf(&mut self) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(&self.buf[..self.n])
        {
            self.error = Some(e);
        }
        self.written += self.n as u64;
        self.n = 0;
    }

    /// Makes room for `k` more bytes (`k` at most the buffer's size).
    #[inline(always)]
    fn room(&mut self, k: usize) {
        if self.n + k > self.buf.len() {
            self.flush_buf();
        }
    }

    /// Writes what is left and flushes the writer.
    pub(crate) fn finish(mut self) -> io::Result<u64> {
        self.flush_buf();
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.written)
    }

    /// True once a write failed: generation can stop early.
    pub(crate) fn failed(&self) -> bool {
        self.error.is_some()
    }
}

impl BufOut<Vec<u8>> {
    /// Everything written so far, as one piece (for a worker thread's chunk
    /// of blocks); the buffer is kept for the next chunk.
    pub(crate) fn take(&mut self) -> Vec<u8> {
        self.flush_buf();
        let next = Vec::with_capacity(self.out.len());
        std::mem::replace(&mut self.out, next)
    }
}

impl<W: Write> Emit for BufOut<W> {
    #[inline(always)]
    fn bytes(&mut self, b: &[u8]) {
        if b.len() > SLACK {
            self.flush_buf();
            if self.error.is_none()
                && let Err(e) = self.out.write_all(b)
            {
                self.error = Some(e);
            }
            self.written += b.len() as u64;
            return;
        }
        self.room(b.len());
        self.buf[self.n..self.n + b.len()].copy_from_slice(b);
        self.n += b.len();
    }
    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.room(1);
        self.buf[self.n] = b;
        self.n += 1;
    }
    #[inline(always)]
    fn short(&mut self, s: [u8; 4], len: usize) {
        self.room(4);
        self.buf[self.n..self.n + 4].copy_from_slice(&s);
        self.n += len.min(4);
    }
    #[inline(always)]
    fn num(&mut self, n: &Num) {
        self.room(24);
        self.buf[self.n..self.n + 24].copy_from_slice(&n.text);
        self.n += n.len;
    }
    #[inline(always)]
    fn dec(&mut self, mut v: u64) {
        self.room(20);
        if v < 10 {
            self.buf[self.n] = b'0' + v as u8;
            self.n += 1;
            return;
        }
        let len = dec_len(v);
        let out = &mut self.buf[self.n..self.n + len];
        let mut i = len;
        while v >= 100 {
            let r = (v % 100) as usize;
            v /= 100;
            i -= 2;
            out[i..i + 2].copy_from_slice(&PAIRS[2 * r..2 * r + 2]);
        }
        if v >= 10 {
            out[..2].copy_from_slice(&PAIRS[2 * v as usize..2 * v as usize + 2]);
        } else {
            out[0] = b'0' + v as u8;
        }
        self.n += len;
    }
    #[inline(always)]
    fn hex(&mut self, v: u64) {
        self.room(18);
        let len = hex_len(v);
        let out = &mut self.buf[self.n..self.n + 2 + len];
        out[0] = b'0';
        out[1] = b'x';
        for (i, d) in out[2..].iter_mut().enumerate() {
            *d = b"0123456789abcdef"[((v >> (4 * (len - 1 - i))) & 0xf) as usize];
        }
        self.n += 2 + len;
    }
    fn len(&self) -> u64 {
        self.written + self.n as u64
    }
    #[inline(always)]
    fn block_done(&mut self) {
        if self.n >= CHUNK {
            self.flush_buf();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counter must agree with the writer byte for byte, or the size
    /// target and the header estimate drift.
    #[test]
    fn digits_are_counted_and_written_exactly() {
        let mut v = Vec::new();
        let mut w = BufOut::new(&mut v);
        let mut expect = String::new();
        for p in POW10 {
            for x in [p - 1, p, p + 1, p.saturating_mul(7).saturating_add(3)] {
                assert_eq!(dec_len(x), x.to_string().len(), "{x}");
                w.dec(x);
                w.byte(b' ');
                expect.push_str(&format!("{x} "));
            }
        }
        w.finish().unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), expect);
    }

    #[test]
    fn counter_matches_writer() {
        let mut v = Vec::new();
        let mut w = BufOut::new(&mut v);
        let mut c = Counter::default();
        for x in [
            0u64,
            1,
            9,
            10,
            15,
            16,
            99,
            100,
            255,
            256,
            4095,
            4096,
            u64::MAX,
        ] {
            w.dec(x);
            w.hex(x);
            c.dec(x);
            c.hex(x);
        }
        w.short(*b"+12 ", 4);
        c.short(*b"+12 ", 4);
        w.short(*b"* xx", 2);
        c.short(*b"* xx", 2);
        w.bytes(&vec![b'n'; SLACK + 1]);
        c.bytes(&vec![b'n'; SLACK + 1]);
        for v in [0, 7, 12345, u64::MAX] {
            w.num(&Num::new(v));
            c.num(&Num::new(v));
        }
        assert_eq!(w.len(), c.len());
        let n = w.finish().unwrap();
        assert_eq!(n as usize, v.len());
        let text = String::from_utf8(v).unwrap();
        assert!(text.starts_with("00x0" /* 0, then 0x0 */));
        assert!(text.contains("2550xff"));
        assert!(text.contains("18446744073709551615"));
        assert!(text.contains("0xffffffffffffffff+12 * nnn"));
        assert!(text.ends_with("nnn071234518446744073709551615"));
    }
}
