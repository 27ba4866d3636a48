//! The protocol-buffer wire format, as far as profile.proto uses it:
//! varints, length-delimited fields (messages, strings, packed numbers)
//! and skipped fixed-width fields.
//!
//! Written here rather than generated so that every decoding error carries
//! the byte offset where the data stops making sense, which a truncated or
//! damaged profile needs to be told.

/// A decoding failure: the offset in the decoded buffer and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Offset of the field or value at fault.
    pub offset: u64,
    /// What is wrong.
    pub message: String,
}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, WireError> {
    Err(WireError {
        offset: offset as u64,
        message: message.into(),
    })
}

/// The value of one field.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    /// A varint (wire type 0).
    Varint(u64),
    /// Length-delimited bytes (wire type 2), with their offset.
    Bytes(Slice<'a>),
    /// A fixed 32- or 64-bit value (wire types 5 and 1), not used by
    /// profile.proto and skipped.
    Fixed,
}

/// Bytes of the buffer with the offset of their first byte.
#[derive(Debug, Clone, Copy)]
pub struct Slice<'a> {
    /// The bytes.
    pub bytes: &'a [u8],
    /// Offset of `bytes[0]` in the whole buffer.
    pub offset: usize,
}

/// Reads the fields of one message in order.
pub struct Fields<'a> {
    data: Slice<'a>,
    pos: usize,
}

impl<'a> Fields<'a> {
    /// The fields of the message held by `data`.
    pub fn new(data: Slice<'a>) -> Self {
        Fields { data, pos: 0 }
    }

    /// Offset of the next byte in the whole buffer.
    pub fn offset(&self) -> usize {
        self.data.offset + self.pos
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let start = self.offset();
        let mut v = 0u64;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.data.bytes.get(self.pos) else {
                return err(
                    start,
                    "the data ends inside a number: the profile is cut short",
                );
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return err(start, "a number does not fit in 64 bits");
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        err(start, "a number runs over 10 bytes")
    }

    /// The next field (number, value and the offset of its key), or `None`
    /// at the end of the message.
    pub fn next_field(&mut self) -> Result<Option<(u64, Value<'a>, usize)>, WireError> {
        if self.pos >= self.data.bytes.len() {
            return Ok(None);
        }
        let at = self.offset();
        let key = self.varint()?;
        let number = key >> 3;
        if number == 0 {
            return err(
                at,
                "field number 0 (this is not a pprof profile, or it is damaged)",
            );
        }
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            2 => {
                let len = self.varint()?;
                let left = self.data.bytes.len() - self.pos;
                if len > left as u64 {
                    return err(
                        at,
                        format!(
                            "field {number} claims {len} bytes but only {left} follow: \
                             the profile is cut short"
                        ),
                    );
                }
                let s = Slice {
                    bytes: &self.data.bytes[self.pos..self.pos + len as usize],
                    offset: self.offset(),
                };
                self.pos += len as usize;
                Value::Bytes(s)
            }
            1 | 5 => {
                let n = if key & 7 == 1 { 8 } else { 4 };
                if self.data.bytes.len() - self.pos < n {
                    return err(at, "the data ends inside a field: the profile is cut short");
                }
                self.pos += n;
                Value::Fixed
            }
            t => {
                return err(
                    at,
                    format!("field {number} has wire type {t}, which pprof never writes"),
                );
            }
        };
        Ok(Some((number, value, at)))
    }
}

/// A varint field's value; an error naming the field if it is not one.
pub fn expect_varint(v: Value<'_>, at: usize, what: &str) -> Result<u64, WireError> {
    match v {
        Value::Varint(x) => Ok(x),
        _ => err(at, format!("{what} is not a number")),
    }
}

/// A length-delimited field's bytes; an error naming the field if not.
pub fn expect_bytes<'a>(v: Value<'a>, at: usize, what: &str) -> Result<Slice<'a>, WireError> {
    match v {
        Value::Bytes(s) => Ok(s),
        _ => err(at, format!("{what} is not a message or string")),
    }
}

/// Appends the numbers of a repeated number field: one varint, or a packed
/// run of them.
pub fn push_numbers(
    v: Value<'_>,
    at: usize,
    what: &str,
    out: &mut Vec<u64>,
) -> Result<(), WireError> {
    match v {
        Value::Varint(x) => out.push(x),
        Value::Bytes(s) => {
            let mut f = Fields::new(s);
            while f.pos < s.bytes.len() {
                out.push(f.varint()?);
            }
        }
        Value::Fixed => return err(at, format!("{what} are not numbers")),
    }
    Ok(())
}

/// Writes protocol-buffer fields into a byte vector.
#[derive(Default)]
pub struct Writer {
    /// The encoded bytes so far.
    pub bytes: Vec<u8>,
}

impl Writer {
    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.bytes.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.bytes.push(v as u8);
    }

    /// A varint field; zero is the default and not written.
    pub fn varint(&mut self, field: u64, v: u64) {
        if v != 0 {
            self.raw_varint(field << 3);
            self.raw_varint(v);
        }
    }

    /// An `int64` field (two's complement as a varint); zero not written.
    pub fn int64(&mut self, field: u64, v: i64) {
        self.varint(field, v as u64);
    }

    /// A length-delimited field holding `bytes` (written even when empty,
    /// as a repeated string's element must be).
    pub fn bytes(&mut self, field: u64, bytes: &[u8]) {
        self.raw_varint((field << 3) | 2);
        self.raw_varint(bytes.len() as u64);
        self.bytes.extend_from_slice(bytes);
    }

    /// A packed repeated number field; nothing when empty.
    pub fn packed(&mut self, field: u64, values: impl IntoIterator<Item = u64>) {
        let mut inner = Writer::default();
        for v in values {
            inner.raw_varint(v);
        }
        if !inner.bytes.is_empty() {
            self.bytes(field, &inner.bytes);
        }
    }

    /// A nested message field.
    pub fn message(&mut self, field: u64, f: impl FnOnce(&mut Writer)) {
        let mut inner = Writer::default();
        f(&mut inner);
        self.bytes(field, &inner.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_truncation_has_an_offset() {
        let mut w = Writer::default();
        w.varint(1, 300);
        w.message(2, |m| {
            m.packed(1, [1, 2, u64::MAX]);
            m.int64(2, -1);
        });
        let all = Slice {
            bytes: &w.bytes,
            offset: 0,
        };
        let mut f = Fields::new(all);
        let (n, v, _) = f.next_field().unwrap().unwrap();
        assert_eq!((n, expect_varint(v, 0, "x").unwrap()), (1, 300));
        let (n, v, at) = f.next_field().unwrap().unwrap();
        assert_eq!((n, at), (2, 3));
        let mut inner = Fields::new(expect_bytes(v, at, "x").unwrap());
        let (_, v, at) = inner.next_field().unwrap().unwrap();
        let mut nums = Vec::new();
        push_numbers(v, at, "x", &mut nums).unwrap();
        assert_eq!(nums, [1, 2, u64::MAX]);
        let (_, v, _) = inner.next_field().unwrap().unwrap();
        assert_eq!(expect_varint(v, 0, "x").unwrap() as i64, -1);
        assert!(f.next_field().unwrap().is_none());

        let cut = &w.bytes[..w.bytes.len() - 2];
        let mut f = Fields::new(Slice {
            bytes: cut,
            offset: 0,
        });
        f.next_field().unwrap();
        let e = f.next_field().unwrap_err();
        assert_eq!(e.offset, 3);
        assert!(e.message.contains("cut short"), "{}", e.message);
    }
}
