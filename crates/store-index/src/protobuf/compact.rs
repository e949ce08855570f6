//! The table of a [`CompactObject`](crate::CompactObject) held in protobuf: its metadata's strings
//! as spans of the object's own message (protobuf strings are raw UTF-8, never escaped), so that a
//! protobuf object costs the table and its message, as a JSON one costs the table and its text.
//!
//! `apiVersion` and `kind` are not in a protobuf object's message (its envelope or its list names
//! them), nor is `deletionTimestamp` as text (a `Time` of seconds): those few are written into the
//! table's own string buffer.

use std::cell::RefCell;
use std::ops::Range;

use crate::compact_meta::{CompactMeta, PairRange, Span, SCRATCH_KEEP};

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

/// A label's or an annotation's key and value, as byte ranges of the message.
type Entry = (Range<usize>, Range<usize>);

thread_local! {
    /// Each thread's label and annotation entries of the object it is reading, reused from one
    /// object to the next: the table is then the only allocation they cost.
    static SCRATCH: RefCell<[Vec<Entry>; 2]> = const { RefCell::new([Vec::new(), Vec::new()]) };
}

/// The table of the object whose message is `message`, of `api_version`/`kind`.
pub(crate) fn compact_meta(
    message: &[u8],
    api_version: &str,
    kind: &str,
) -> Result<CompactMeta, ProtobufError> {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut scratch) => {
            let meta = compact_meta_with(message, api_version, kind, &mut scratch);
            // One object with a huge map must not leave its buffer behind for the thread's life.
            for entries in scratch.iter_mut() {
                if entries.capacity() * std::mem::size_of::<Entry>() > SCRATCH_KEEP {
                    *entries = Vec::new();
                }
            }
            meta
        }
        // Only a decode nested inside another on this thread (none exists) finds it taken.
        Err(_) => compact_meta_with(message, api_version, kind, &mut Default::default()),
    })
}

/// [`compact_meta`] with `scratch` for the labels' and the annotations' entries.
fn compact_meta_with(
    message: &[u8],
    api_version: &str,
    kind: &str,
    scratch: &mut [Vec<Entry>; 2],
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
    let [labels, annotations] = scratch;
    labels.clear();
    annotations.clear();
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
                    let at = |x: &[u8]| offset(message, x)..offset(message, x) + x.len();
                    let to = if n == 11 {
                        &mut *labels
                    } else {
                        &mut *annotations
                    };
                    to.push((at(k), at(v)));
                }
                // The rest is checked by a full decode when `metadata()` is asked for.
                _ => {}
            }
        }
    }
    let mut pairs = Vec::with_capacity(labels.len() + annotations.len());
    let mut table = |entries: &mut Vec<Entry>| -> Result<Option<PairRange>, ProtobufError> {
        if entries.is_empty() {
            return Ok(None);
        }
        // One entry per key, the last one written (as a map decoded from it keeps): CM2.
        entries.reverse();
        // (Every range lies inside `message`: the reader hands out slices of it.)
        let key = |e: &Entry| message.get(e.0.clone());
        entries.sort_by(|a, b| key(a).cmp(&key(b)));
        entries.dedup_by(|later, kept| key(later) == key(kept));
        let start = pairs.len();
        for (k, v) in entries.iter() {
            let at = |x: &Range<usize>| {
                Span::of_raw(x.start, x.end).ok_or(ProtobufError::Malformed {
                    what: WHAT,
                    why: "an object beyond 2 GiB",
                })
            };
            pairs.push((at(k)?, at(v)?));
        }
        Ok(PairRange::new(start, pairs.len()))
    };
    meta.labels = table(labels)?;
    meta.annotations = table(annotations)?;
    Ok(meta.with_tables(unescaped, pairs))
}
