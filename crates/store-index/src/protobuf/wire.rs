//! The few protobuf wire primitives the envelope, the watch framing, list pages, `Status` and
//! object metadata need, written out so that those layers work on raw bytes without generated
//! types or a descriptor. Every read is checked against the bytes left: a length never allocates.

use super::ProtobufError;

/// Wire type of a varint field.
pub const VARINT: u8 = 0;
/// Wire type of a length-delimited field (bytes, strings, messages).
pub const LEN: u8 = 2;

/// Appends `v` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends field `number` as a length-delimited field holding `data`.
pub fn put_bytes(out: &mut Vec<u8>, number: u32, data: &[u8]) {
    put_varint(out, (u64::from(number) << 3) | u64::from(LEN));
    put_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A field read from a message: its number and, for length-delimited fields, its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Field<'a> {
    /// A length-delimited field (bytes, string, message, packed repeated): number and bytes.
    Bytes(u32, &'a [u8]),
    /// A varint field (integers, booleans, enums): number and value.
    Varint(u32, u64),
    /// A fixed32 or fixed64 field: skipped by the layers here.
    Other,
}

/// Reads the fields of one message, in order.
#[derive(Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    /// The message being read, for errors.
    what: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader of the message `buf`; `what` names it in errors.
    pub fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, what }
    }

    #[inline]
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some((&b, rest)) = self.buf.split_first() else {
                return Err(ProtobufError::Truncated { what: self.what });
            };
            self.buf = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                // The tenth byte holds the 64th bit alone: more would be dropped.
                if i == 9 && b > 1 {
                    return Err(ProtobufError::Malformed {
                        what: self.what,
                        why: "a varint beyond 64 bits",
                    });
                }
                return Ok(v);
            }
        }
        Err(ProtobufError::Malformed {
            what: self.what,
            why: "a varint longer than 10 bytes",
        })
    }

    #[inline]
    fn take(&mut self, n: u64) -> Result<&'a [u8], ProtobufError> {
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.buf.len())
            .ok_or(ProtobufError::Truncated { what: self.what })?;
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// The bytes not read yet: after [`next_field`](Self::next_field), where the next field
    /// starts, so a caller can copy a field's exact bytes.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// The next field, `None` at the end of the message.
    #[inline]
    pub fn next_field(&mut self) -> Result<Option<Field<'a>>, ProtobufError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number =
            u32::try_from(key >> 3)
                .ok()
                .filter(|&n| n > 0)
                .ok_or(ProtobufError::Malformed {
                    what: self.what,
                    why: "a field number out of range",
                })?;
        Ok(Some(match (key & 7) as u8 {
            VARINT => Field::Varint(number, self.varint()?),
            LEN => {
                let n = self.varint()?;
                Field::Bytes(number, self.take(n)?)
            }
            1 => {
                self.take(8)?;
                Field::Other
            }
            5 => {
                self.take(4)?;
                Field::Other
            }
            _ => {
                return Err(ProtobufError::Malformed {
                    what: self.what,
                    why: "a wire type this message never uses (groups or unknown)",
                })
            }
        }))
    }
}

/// `bytes` as UTF-8, or the error naming `what`.
pub fn utf8<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a str, ProtobufError> {
    std::str::from_utf8(bytes).map_err(|_| ProtobufError::Malformed {
        what,
        why: "a string that is not UTF-8",
    })
}
