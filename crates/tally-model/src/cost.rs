//! The cost value type.
//!
//! Profiles as recorded hold unsigned 64-bit counters, but a difference of two
//! profiles needs signed values. Everything in the model is generic over
//! [`Cost`] so that `Profile<i64>` works with the same code as `Profile<u64>`.

use std::fmt::{Debug, Display};

/// Why a number could not be read as a cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NumberError {
    /// Not a number at all.
    Invalid,
    /// A number too large (or too small) for the cost type.
    Overflow,
    /// A negative number where only unsigned values are allowed.
    Negative,
}

/// A counter value: `u64` for measured profiles, `i64` for differences.
pub trait Cost:
    Copy + Default + Eq + Ord + Debug + Display + Send + Sync + std::hash::Hash + 'static
{
    /// Zero.
    const ZERO: Self;
    /// True for signed types (diff profiles).
    const SIGNED: bool;
    /// The largest magnitude a sum may reach: when the magnitudes of a set
    /// of values sum to at most this, every sum of any of them fits.
    const MAX_MAGNITUDE: u64;

    /// Addition that reports overflow instead of wrapping.
    fn checked_add(self, other: Self) -> Option<Self>;
    /// Subtraction that reports overflow instead of wrapping.
    fn checked_sub(self, other: Self) -> Option<Self>;
    /// Addition that saturates; for totals that must not fail.
    fn saturating_add(self, other: Self) -> Self;
    /// Wrapping addition and whether it overflowed (branch-free sums).
    fn overflowing_add(self, other: Self) -> (Self, bool);
    /// The absolute value, as `u64`.
    fn magnitude(self) -> u64;
    /// Lossy conversion for percentages and ratios.
    fn to_f64(self) -> f64;
    /// Conversion into the widest signed type, for formula evaluation.
    fn to_i128(self) -> i128;
    /// Conversion back from `i128`; `None` if out of range.
    fn from_i128(v: i128) -> Option<Self>;
    /// Conversion from `u64`; `None` if out of range.
    fn from_u64(v: u64) -> Option<Self>;
    /// Parses a decimal or `0x` hexadecimal number, with a leading `-` for
    /// signed types.
    fn parse(bytes: &[u8]) -> Result<Self, NumberError>;
    /// Appends the decimal form to `out`.
    fn write_to(self, out: &mut Vec<u8>);
    /// Maps the value onto `u64` so that small magnitudes stay small
    /// (zigzag for signed types); used by the compact cost arenas.
    fn to_zigzag(self) -> u64;
    /// Inverse of [`Cost::to_zigzag`].
    fn from_zigzag(v: u64) -> Self;

    /// True when the value is zero.
    #[inline]
    fn is_zero(self) -> bool {
        self == Self::ZERO
    }
}

/// Parses an unsigned decimal or `0x` hexadecimal number.
#[inline]
pub fn parse_u64(bytes: &[u8]) -> Result<u64, NumberError> {
    if bytes.is_empty() {
        return Err(NumberError::Invalid);
    }
    if bytes.len() > 2 && bytes[0] == b'0' && (bytes[1] == b'x' || bytes[1] == b'X') {
        let mut v: u64 = 0;
        for &b in &bytes[2..] {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => return Err(NumberError::Invalid),
            };
            if v >> 60 != 0 {
                return Err(NumberError::Overflow);
            }
            v = (v << 4) | u64::from(d);
        }
        return Ok(v);
    }
    // Up to 19 digits cannot overflow; check only past that.
    if bytes.len() <= 19 {
        let mut v: u64 = 0;
        for &b in bytes {
            let d = b.wrapping_sub(b'0');
            if d > 9 {
                return Err(NumberError::Invalid);
            }
            v = v * 10 + u64::from(d);
        }
        return Ok(v);
    }
    let mut v: u64 = 0;
    for &b in bytes {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            return Err(NumberError::Invalid);
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(d)))
            .ok_or(NumberError::Overflow)?;
    }
    Ok(v)
}

/// The methods that `u64` and `i64` implement alike.
macro_rules! common_cost_methods {
    ($t:ty) => {
        #[inline]
        fn checked_add(self, other: Self) -> Option<Self> {
            <$t>::checked_add(self, other)
        }
        #[inline]
        fn checked_sub(self, other: Self) -> Option<Self> {
            <$t>::checked_sub(self, other)
        }
        #[inline]
        fn saturating_add(self, other: Self) -> Self {
            <$t>::saturating_add(self, other)
        }
        #[inline(always)]
        fn overflowing_add(self, other: Self) -> (Self, bool) {
            <$t>::overflowing_add(self, other)
        }
        #[inline]
        fn to_f64(self) -> f64 {
            self as f64
        }
        #[inline]
        fn to_i128(self) -> i128 {
            i128::from(self)
        }
        #[inline]
        fn from_i128(v: i128) -> Option<Self> {
            <$t>::try_from(v).ok()
        }
    };
}

impl Cost for u64 {
    const ZERO: Self = 0;
    const SIGNED: bool = false;
    const MAX_MAGNITUDE: u64 = u64::MAX;

    #[inline(always)]
    fn magnitude(self) -> u64 {
        self
    }

    common_cost_methods!(u64);
    #[inline(always)]
    fn from_u64(v: u64) -> Option<Self> {
        Some(v)
    }
    #[inline]
    fn parse(bytes: &[u8]) -> Result<Self, NumberError> {
        if bytes.first() == Some(&b'-') {
            return Err(NumberError::Negative);
        }
        parse_u64(bytes)
    }
    #[inline]
    fn write_to(self, out: &mut Vec<u8>) {
        // Most counts written are one digit (three in four of a Cachegrind
        // file's are 0): one push, no formatting and no copy.
        if self < 10 {
            out.push(b'0' + self as u8);
        } else {
            out.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
        }
    }
    #[inline]
    fn to_zigzag(self) -> u64 {
        self
    }
    #[inline]
    fn from_zigzag(v: u64) -> Self {
        v
    }
}

impl Cost for i64 {
    const ZERO: Self = 0;
    const SIGNED: bool = true;
    const MAX_MAGNITUDE: u64 = i64::MAX as u64;

    #[inline(always)]
    fn magnitude(self) -> u64 {
        self.unsigned_abs()
    }

    common_cost_methods!(i64);
    #[inline(always)]
    fn from_u64(v: u64) -> Option<Self> {
        i64::try_from(v).ok()
    }
    #[inline]
    fn parse(bytes: &[u8]) -> Result<Self, NumberError> {
        let (neg, digits) = match bytes.first() {
            Some(b'-') => (true, &bytes[1..]),
            _ => (false, bytes),
        };
        let v = parse_u64(digits)?;
        if neg {
            if v > i64::MAX as u64 + 1 {
                return Err(NumberError::Overflow);
            }
            Ok((v as i64).wrapping_neg())
        } else {
            i64::try_from(v).map_err(|_| NumberError::Overflow)
        }
    }
    #[inline]
    fn write_to(self, out: &mut Vec<u8>) {
        if (0..10).contains(&self) {
            out.push(b'0' + self as u8);
        } else {
            out.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
        }
    }
    #[inline]
    fn to_zigzag(self) -> u64 {
        ((self << 1) ^ (self >> 63)) as u64
    }
    #[inline]
    fn from_zigzag(v: u64) -> Self {
        ((v >> 1) as i64) ^ -((v & 1) as i64)
    }
}

/// Appends `v` as an LEB128 varint.
#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads an LEB128 varint at `*pos`. The arena only holds what
/// [`put_varint`] wrote, so the data is trusted.
#[inline]
pub(crate) fn get_varint(data: &[u8], pos: &mut usize) -> u64 {
    let mut v: u64 = 0;
    let mut shift = 0;
    loop {
        let b = data[*pos];
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// Zigzag mapping of a wrapping `u64` delta, so that small negative
/// position steps stay small.
#[inline]
pub(crate) fn zigzag_delta(delta: u64) -> u64 {
    let d = delta as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// Inverse of [`zigzag_delta`].
#[inline]
pub(crate) fn unzigzag_delta(v: u64) -> u64 {
    (((v >> 1) as i64) ^ -((v & 1) as i64)) as u64
}

/// A count with thousands separators (`-1234567` → `-1,234,567`), as
/// Valgrind's tools print counts; shared by every report and summary.
pub fn thousands(v: impl Into<i128>) -> String {
    let v: i128 = v.into();
    let digits = v.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0 {
        out.push('-');
    }
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_numbers() {
        assert_eq!(u64::parse(b"0"), Ok(0));
        assert_eq!(u64::parse(b"18446744073709551615"), Ok(u64::MAX));
        assert_eq!(
            u64::parse(b"18446744073709551616"),
            Err(NumberError::Overflow)
        );
        assert_eq!(u64::parse(b"0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(
            u64::parse(b"0x1ffffffffffffffff"),
            Err(NumberError::Overflow)
        );
        assert_eq!(u64::parse(b"0x"), Err(NumberError::Invalid));
        assert_eq!(u64::parse(b"12a"), Err(NumberError::Invalid));
        assert_eq!(u64::parse(b"-1"), Err(NumberError::Negative));
        assert_eq!(i64::parse(b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(
            i64::parse(b"-9223372036854775809"),
            Err(NumberError::Overflow)
        );
        assert_eq!(
            i64::parse(b"9223372036854775808"),
            Err(NumberError::Overflow)
        );
        assert_eq!(i64::parse(b"-0x10"), Ok(-16));
    }

    #[test]
    fn zigzag_round_trips() {
        for v in [0i64, 1, -1, 63, -64, i64::MAX, i64::MIN] {
            assert_eq!(i64::from_zigzag(v.to_zigzag()), v);
        }
        for d in [0u64, 1, u64::MAX, 5u64.wrapping_neg(), 1 << 63] {
            assert_eq!(unzigzag_delta(zigzag_delta(d)), d);
        }
        let mut buf = Vec::new();
        for v in [0u64, 127, 128, 300, u64::MAX] {
            buf.clear();
            put_varint(&mut buf, v);
            let mut p = 0;
            assert_eq!(get_varint(&buf, &mut p), v);
            assert_eq!(p, buf.len());
        }
    }
}
