//! The table of a [`CompactObject`](crate::CompactObject) held in protobuf: its metadata's strings
//! as spans of the object's own message (protobuf strings are raw UTF-8, never escaped), so that a
//! protobuf object costs the table and its message, as a JSON one costs the table and its text.
//!
//! `apiVersion` and `kind` are not in a protobuf object's message (its envelope or its list names
//! them), nor is `deletionTimestamp` as text (a `Time` of seconds): those few are written into the
//! table's own string buffer.

use crate::compact_meta::{CompactMeta, PairRange, Span};

use super::wire::{utf8, Field, Reader};
use super::ProtobufError;

/// The offset of `sub` inside `base` (`sub` is a slice of it).
fn offset(base: &[u8], sub: &[u8]) -> usize {
    (sub.as_ptr() as usize).wrapping_sub(base.as_ptr() as usize)
}

/// A span of `base` covering `sub`, a UTF-8 string field; `None` when empty (absent, as in JSON).
fn span(base: &[u8], sub: &[u8], what: &'static str) -> Result<Option<Span>, ProtobufError> {
    utf8(sub, what)?;
    if sub.is_empty() {
        return Ok(None);
    }
    let start = offset(base, sub);
    Span::of_raw(start, start + sub.len())
        .map(Some)
        .ok_or(ProtobufError::Malformed {
            what,
            why: "an object beyond 2 GiB",
        })
}

/// Appends `text` to `buf`, its span.
fn push(buf: &mut String, text: &str) -> Option<Span> {
    let start = buf.len();
    buf.push_str(text);
    Span::of_unescaped(start, buf.len())
}

/// The table of the object whose message is `message`, of `api_version`/`kind`.
pub(crate) fn compact_meta(
    message: &[u8],
    api_version: &str,
    kind: &str,
) -> Result<CompactMeta, ProtobufError> {
    const WHAT: &str = "meta.v1.ObjectMeta";
    let mut meta = CompactMeta::default();
    let mut unescaped = String::with_capacity(api_version.len() + kind.len());
    meta.api_version = (!api_version.is_empty())
        .then(|| push(&mut unescaped, api_version))
        .flatten();
    meta.kind = (!kind.is_empty())
        .then(|| push(&mut unescaped, kind))
        .flatten();
    let mut labels = Vec::new();
    let mut annotations = Vec::new();
    if let Some(m) = super::meta::object_meta_bytes(message)? {
        let mut fields = Reader::new(m, WHAT);
        while let Some(f) = fields.next_field()? {
            match f {
                Field::Bytes(1, b) => meta.name = span(message, b, WHAT)?,
                Field::Bytes(3, b) => meta.namespace = span(message, b, WHAT)?,
                Field::Bytes(5, b) => meta.uid = span(message, b, WHAT)?,
                Field::Bytes(6, b) => meta.resource_version = span(message, b, WHAT)?,
                Field::Varint(7, v) => meta.generation = (v != 0).then_some(v as i64),
                Field::Bytes(9, b) => {
                    meta.deletion_timestamp =
                        super::meta::time(b)?.and_then(|t| push(&mut unescaped, &t));
                }
                Field::Bytes(n @ (11 | 12), b) => {
                    let (mut k, mut v) = (&b[..0], &b[..0]);
                    let mut entry = Reader::new(b, WHAT);
                    while let Some(f) = entry.next_field()? {
                        match f {
                            Field::Bytes(1, x) => k = x,
                            Field::Bytes(2, x) => v = x,
                            _ => {}
                        }
                    }
                    utf8(k, WHAT)?;
                    utf8(v, WHAT)?;
                    let to = if n == 11 {
                        &mut labels
                    } else {
                        &mut annotations
                    };
                    to.push((k, v));
                }
                // The rest is checked by a full decode when `metadata()` is asked for.
                _ => {}
            }
        }
    }
    let mut pairs = Vec::with_capacity(labels.len() + annotations.len());
    let mut table =
        |entries: &mut Vec<(&[u8], &[u8])>| -> Result<Option<PairRange>, ProtobufError> {
            if entries.is_empty() {
                return Ok(None);
            }
            // One entry per key, the last one written (as a map decoded from it keeps): CM2.
            entries.reverse();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries.dedup_by(|later, kept| later.0 == kept.0);
            let start = pairs.len();
            for (k, v) in entries.iter() {
                let at = |x: &[u8]| {
                    let s = offset(message, x);
                    Span::of_raw(s, s + x.len()).ok_or(ProtobufError::Malformed {
                        what: WHAT,
                        why: "an object beyond 2 GiB",
                    })
                };
                pairs.push((at(k)?, at(v)?));
            }
            Ok(PairRange::new(start, pairs.len()))
        };
    meta.labels = table(&mut labels)?;
    meta.annotations = table(&mut annotations)?;
    Ok(meta.with_tables(unescaped, pairs))
}
