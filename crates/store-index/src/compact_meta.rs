//! [`CompactMeta`]: the metadata a [`CompactObject`](crate::CompactObject) answers from, kept as
//! spans of the object's own JSON and one table instead of a string per field and a map node per
//! label.
//!
//! Decoding a Pod's metadata into `ObjectMeta` makes some thirty allocations (each name, label key
//! and value, annotation and owner-reference field is a `String`, each map has its nodes), and an
//! informer frees them all again when the object is replaced, usually on another thread. A busy
//! watch spends more time in the allocator than in parsing. `CompactMeta` keeps the strings the
//! machinery reads (`apiVersion`, `kind`, name, namespace, uid, resourceVersion,
//! deletionTimestamp, every label and annotation) as [`Span`]s: byte ranges of the JSON the object
//! was decoded from, which the object keeps anyway, or, for the rare string the JSON wrote with
//! escapes, of a small buffer of unescaped copies. Labels and annotations are a table of key/value
//! spans sorted by key. That is one allocation for a typical object (the table), none when it has
//! neither labels nor annotations. The other metadata fields (owner references, finalizers,
//! generateName, …) are checked for their types, so that malformed metadata is refused when the
//! object is decoded, and otherwise left in the raw JSON.
//!
//! Every accessor takes the JSON the metadata was parsed from: the same bytes, or it answers
//! nonsense (never a panic: out-of-range spans read as empty strings).
//!
//! Invariants (checked by `proptest_compact_meta` below):
//! - **CM1** every span lies inside its buffer (the JSON, or `unescaped` when flagged
//!   [`UNESCAPED`]), and the bytes it covers are valid UTF-8;
//! - **CM2** each pair range lies inside `pairs`, its keys strictly increasing: one entry per key,
//!   the value the last one the JSON gave for that key (as a `BTreeMap` decoded from it keeps);
//! - **CM3** whatever [`CompactMeta::parse`] accepts, decoding the whole `ObjectMeta` from the same
//!   bytes also accepts, and every accessor answers what that full decode holds.

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The flag on [`Span::start`] of a span of [`CompactMeta::unescaped`]; without it a span is of
/// the JSON. Spans therefore address at most 2 GiB of either.
const UNESCAPED: u32 = 1 << 31;

/// A string of the metadata: a byte range of the JSON, or of [`CompactMeta::unescaped`] when
/// `start` carries [`UNESCAPED`] (invariant CM1). `end` never carries the flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    end: u32,
}

impl Span {
    /// A span of the object's own bytes (JSON text, or a protobuf message's string fields).
    pub(crate) fn of_raw(start: usize, end: usize) -> Option<Self> {
        let (start, end) = (u32::try_from(start).ok()?, u32::try_from(end).ok()?);
        (start & UNESCAPED == 0 && end & UNESCAPED == 0 && start <= end)
            .then_some(Span { start, end })
    }

    /// A span of [`CompactMeta::unescaped`] (strings the raw bytes do not hold as text).
    pub(crate) fn of_unescaped(start: usize, end: usize) -> Option<Self> {
        Self::of_raw(start, end).map(|s| Span {
            start: s.start | UNESCAPED,
            end: s.end,
        })
    }

    /// The bytes this span covers, empty when it lies outside its buffer.
    fn bytes<'a>(self, json: &'a [u8], unescaped: &'a str) -> &'a [u8] {
        let (buffer, start) = if self.start & UNESCAPED != 0 {
            (unescaped.as_bytes(), self.start & !UNESCAPED)
        } else {
            (json, self.start)
        };
        buffer
            .get(start as usize..self.end as usize)
            .unwrap_or_default()
    }

    /// The text this span covers (CM1 makes it UTF-8; empty if it is not).
    fn text<'a>(self, json: &'a [u8], unescaped: &'a str) -> &'a str {
        std::str::from_utf8(self.bytes(json, unescaped)).unwrap_or_default()
    }
}

/// A range of [`CompactMeta::pairs`]: one map's entries (invariant CM2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PairRange {
    start: u32,
    end: u32,
}

impl PairRange {
    /// Entries `start..end` of the table.
    pub(crate) fn new(start: usize, end: usize) -> Option<Self> {
        Some(PairRange {
            start: u32::try_from(start).ok()?,
            end: u32::try_from(end).ok()?,
        })
    }
}

/// The metadata of one object, as spans of its JSON (see the module documentation).
#[derive(Debug, Clone, Default)]
pub(crate) struct CompactMeta {
    /// The strings the JSON wrote with escapes, unescaped, back to back; usually empty.
    unescaped: Box<str>,
    /// Label entries, then annotation entries (or the other way round, as the JSON had them):
    /// (key, value) spans.
    pairs: Box<[(Span, Span)]>,
    pub(crate) api_version: Option<Span>,
    pub(crate) kind: Option<Span>,
    pub(crate) name: Option<Span>,
    pub(crate) namespace: Option<Span>,
    pub(crate) uid: Option<Span>,
    pub(crate) resource_version: Option<Span>,
    pub(crate) deletion_timestamp: Option<Span>,
    pub(crate) generation: Option<i64>,
    /// `None` when the JSON has no `labels` (or `null`); `Some` of an empty range for `{}`.
    pub(crate) labels: Option<PairRange>,
    /// As `labels`, for `annotations`.
    pub(crate) annotations: Option<PairRange>,
}

impl CompactMeta {
    /// Decodes the metadata of one JSON object (the whole object, not its `metadata` field).
    /// Refuses what a full decode of `apiVersion`, `kind` and `ObjectMeta` would refuse, and also
    /// an object or `metadata` written as a JSON array (serde's positional form of a struct).
    /// The result's spans are of `json`: pass the same bytes to its accessors.
    pub(crate) fn parse(json: &[u8]) -> Result<Self, serde_json::Error> {
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => Self::parse_with(json, &mut scratch),
            // Only a decode nested inside another on this thread (none exists) finds it taken.
            Err(_) => Self::parse_with(json, &mut Scratch::default()),
        })
    }

    /// Decodes with `scratch`'s buffers, then copies the unescaped strings (if any) and the table
    /// out at their exact sizes: no regrowth (with glibc each `realloc` of a shrinking buffer also
    /// takes the arena lock the informer's other thread is freeing into).
    fn parse_with(json: &[u8], scratch: &mut Scratch) -> Result<Self, serde_json::Error> {
        let mut builder = Builder {
            json,
            unescaped: std::mem::take(&mut scratch.unescaped),
            pairs: std::mem::take(&mut scratch.pairs),
        };
        builder.unescaped.clear();
        builder.pairs.clear();
        let mut de = serde_json::Deserializer::from_slice(json);
        let decoded = TopSeed(&mut builder)
            .deserialize(&mut de)
            .and_then(|meta| de.end().map(|()| meta));
        let result = decoded.map(|mut meta| {
            meta.unescaped = Box::from(builder.unescaped.as_str());
            meta.pairs = Box::from(&builder.pairs[..]);
            meta
        });
        // One huge object must not leave its buffers behind for the thread's lifetime.
        if builder.unescaped.capacity() <= SCRATCH_KEEP {
            scratch.unescaped = builder.unescaped;
        }
        if builder.pairs.capacity() * std::mem::size_of::<(Span, Span)>() <= SCRATCH_KEEP {
            scratch.pairs = builder.pairs;
        }
        result
    }

    /// Metadata whose spans were gathered elsewhere (a protobuf message's): `pairs` holds the
    /// entries `labels` and `annotations` range over, each range sorted by key with one entry per
    /// key (CM2), and `unescaped` the strings flagged spans cover (CM1).
    pub(crate) fn with_tables(mut self, unescaped: String, pairs: Vec<(Span, Span)>) -> Self {
        self.unescaped = unescaped.into_boxed_str();
        self.pairs = pairs.into_boxed_slice();
        self
    }

    /// The text of a span of `json`, the bytes this metadata was parsed from.
    pub(crate) fn str<'a>(&'a self, json: &'a [u8], span: Option<Span>) -> Option<&'a str> {
        span.map(|s| s.text(json, &self.unescaped))
    }

    fn entries(&self, range: Option<PairRange>) -> &[(Span, Span)] {
        range.map_or(&[], |r| {
            self.pairs
                .get(r.start as usize..r.end as usize)
                .unwrap_or_default()
        })
    }

    /// One value of a map, by binary search over its sorted keys (invariant CM2).
    pub(crate) fn lookup<'a>(
        &'a self,
        json: &'a [u8],
        range: Option<PairRange>,
        key: &str,
    ) -> Option<&'a str> {
        let entries = self.entries(range);
        let i = entries
            .binary_search_by(|(k, _)| k.bytes(json, &self.unescaped).cmp(key.as_bytes()))
            .ok()?;
        self.str(json, Some(entries[i].1))
    }

    /// A map's entries, in key order.
    pub(crate) fn iter<'a>(
        &'a self,
        json: &'a [u8],
        range: Option<PairRange>,
    ) -> impl ExactSizeIterator<Item = (&'a str, &'a str)> + 'a {
        self.entries(range)
            .iter()
            .map(move |&(k, v)| (k.text(json, &self.unescaped), v.text(json, &self.unescaped)))
    }

    /// Heap bytes held (the unescaped strings and the table).
    pub(crate) fn heap_size(&self) -> usize {
        self.unescaped.len() + std::mem::size_of_val(&*self.pairs)
    }
}

/// The largest scratch buffer a thread keeps between objects.
pub(crate) const SCRATCH_KEEP: usize = 64 << 10;

thread_local! {
    /// Each thread's buffers for the object it is decoding, reused from one object to the next.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// A thread's buffers, kept between objects.
#[derive(Default)]
struct Scratch {
    unescaped: String,
    pairs: Vec<(Span, Span)>,
}

/// Where the spans of one object's strings and map entries are gathered while it is decoded.
struct Builder<'j> {
    /// The JSON being decoded: strings serde hands out borrowed lie inside it.
    json: &'j [u8],
    unescaped: String,
    pairs: Vec<(Span, Span)>,
}

impl Builder<'_> {
    /// The span of `s`: where it lies in the JSON when serde lent it from there (it had no
    /// escapes), else a copy in `unescaped`.
    fn span<E: de::Error>(&mut self, s: &str) -> Result<Span, E> {
        let offset = (s.as_ptr() as usize).wrapping_sub(self.json.as_ptr() as usize);
        let inside = offset <= self.json.len() && s.len() <= self.json.len() - offset;
        let (start, flag) = if inside {
            (offset, 0)
        } else {
            self.unescaped.push_str(s);
            (self.unescaped.len() - s.len(), UNESCAPED)
        };
        match (u32::try_from(start), u32::try_from(start + s.len())) {
            (Ok(start), Ok(end)) if end < UNESCAPED => Ok(Span {
                start: start | flag,
                end,
            }),
            _ => Err(E::custom("object larger than 2 GiB")),
        }
    }

    /// Sorts the entries pushed since `start` by key and keeps the last value of each key.
    fn finish_map<E: de::Error>(&mut self, start: usize) -> Result<PairRange, E> {
        let (json, unescaped) = (self.json, self.unescaped.as_str());
        let key = |pair: &(Span, Span)| pair.0.bytes(json, unescaped);
        let entries = &mut self.pairs[start..];
        // kube-apiserver writes map keys sorted, so this is usually a single pass.
        if !entries.windows(2).all(|w| key(&w[0]) < key(&w[1])) {
            // Stable: among equal keys the JSON's order survives, and the loop below keeps the
            // last value of each run.
            entries.sort_by(|a, b| key(a).cmp(key(b)));
        }
        let mut unique = 0;
        for i in 0..entries.len() {
            if unique > 0 && key(&entries[unique - 1]) == key(&entries[i]) {
                entries[unique - 1].1 = entries[i].1;
            } else {
                entries[unique] = entries[i];
                unique += 1;
            }
        }
        let kept = start + unique;
        self.pairs.truncate(kept);
        let (Ok(start), Ok(end)) = (u32::try_from(start), u32::try_from(kept)) else {
            return Err(E::custom("object metadata larger than 4 GiB"));
        };
        Ok(PairRange { start, end })
    }
}

/// Which of `names` a map key is, if any.
pub(crate) struct FieldSeed(pub(crate) &'static [&'static str]);

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|n| *n == v))
    }
}

/// Marks field `i` seen; a second occurrence is an error, as for a derived struct.
pub(crate) fn first_time<E: de::Error>(
    seen: &mut u32,
    i: usize,
    names: &[&'static str],
) -> Result<(), E> {
    if *seen & (1 << i) != 0 {
        return Err(E::duplicate_field(names[i]));
    }
    *seen |= 1 << i;
    Ok(())
}

/// `null`, or what the seed `S` decodes: serde's `Option`, for seeds.
struct OrNull<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for OrNull<S> {
    type Value = Option<S::Value>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for OrNull<S> {
    type Value = Option<S::Value>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value or null")
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(d).map(Some)
    }
}

/// A string, its span recorded by the builder.
struct StrSeed<'b, 'j>(&'b mut Builder<'j>);

impl<'de> DeserializeSeed<'de> for StrSeed<'_, '_> {
    type Value = Span;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for StrSeed<'_, '_> {
    type Value = Span;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    // serde lends a string without escapes straight out of the JSON (through the default
    // `visit_borrowed_str`); `span` recognises it there.
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.0.span(v)
    }
}

/// A string that is only checked, never kept (serde_json unescapes into its scratch buffer).
struct AnyStr;

impl<'de> Deserialize<'de> for AnyStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(AnyStrVisitor)
    }
}

struct AnyStrVisitor;

impl Visitor<'_> for AnyStrVisitor {
    type Value = AnyStr;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
        Ok(AnyStr)
    }
}

/// A sequence whose elements are checked as `T` and dropped.
struct CheckSeq<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for CheckSeq<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(CheckSeqVisitor(std::marker::PhantomData::<T>))
    }
}

struct CheckSeqVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for CheckSeqVisitor<T> {
    type Value = CheckSeq<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<T>()?.is_some() {}
        Ok(CheckSeq(std::marker::PhantomData))
    }
}

/// An owner reference, checked field by field as `OwnerReference` would decode it, nothing kept.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Read only for their types.
struct OwnerReferenceShape {
    api_version: AnyStr,
    kind: AnyStr,
    name: AnyStr,
    uid: AnyStr,
    #[serde(default)]
    controller: Option<bool>,
    #[serde(default)]
    block_owner_deletion: Option<bool>,
}

/// A map of strings to strings, its entries recorded by the builder.
struct PairsSeed<'b, 'j>(&'b mut Builder<'j>);

impl<'de> DeserializeSeed<'de> for PairsSeed<'_, '_> {
    type Value = PairRange;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for PairsSeed<'_, '_> {
    type Value = PairRange;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let builder = self.0;
        let start = builder.pairs.len();
        while let Some(key) = map.next_key_seed(StrSeed(builder))? {
            let value = map.next_value_seed(StrSeed(builder))?;
            builder.pairs.push((key, value));
        }
        builder.finish_map(start)
    }
}

/// The fields of an object its metadata is read from, in the order [`FieldSeed`] numbers them.
pub(crate) const TOP_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// The whole object: `apiVersion`, `kind` and `metadata` decoded, every other field skipped.
struct TopSeed<'b, 'j>(&'b mut Builder<'j>);

impl<'de> DeserializeSeed<'de> for TopSeed<'_, '_> {
    type Value = CompactMeta;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, '_> {
    type Value = CompactMeta;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let builder = self.0;
        let mut meta = CompactMeta::default();
        let mut seen = 0;
        while let Some(field) = map.next_key_seed(FieldSeed(TOP_FIELDS))? {
            let Some(i) = field else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            first_time(&mut seen, i, TOP_FIELDS)?;
            match i {
                0 => meta.api_version = map.next_value_seed(OrNull(StrSeed(builder)))?,
                1 => meta.kind = map.next_value_seed(OrNull(StrSeed(builder)))?,
                _ => {
                    map.next_value_seed(OrNull(MetaSeed {
                        builder,
                        meta: &mut meta,
                    }))?;
                }
            }
        }
        Ok(meta)
    }
}

const META_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "deletionTimestamp",
    "generation",
    "labels",
    "annotations",
    "generateName",
    "selfLink",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
];

/// The `metadata` field, decoded into `meta`.
struct MetaSeed<'b, 'j> {
    builder: &'b mut Builder<'j>,
    meta: &'b mut CompactMeta,
}

impl<'de> DeserializeSeed<'de> for MetaSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetaSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("object metadata")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let MetaSeed { builder, meta } = self;
        let mut seen = 0;
        while let Some(field) = map.next_key_seed(FieldSeed(META_FIELDS))? {
            let Some(i) = field else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            first_time(&mut seen, i, META_FIELDS)?;
            match i {
                0 => meta.name = map.next_value_seed(OrNull(StrSeed(builder)))?,
                1 => meta.namespace = map.next_value_seed(OrNull(StrSeed(builder)))?,
                2 => meta.uid = map.next_value_seed(OrNull(StrSeed(builder)))?,
                3 => meta.resource_version = map.next_value_seed(OrNull(StrSeed(builder)))?,
                4 => meta.deletion_timestamp = map.next_value_seed(OrNull(StrSeed(builder)))?,
                5 => meta.generation = map.next_value()?,
                6 => meta.labels = map.next_value_seed(OrNull(PairsSeed(builder)))?,
                7 => meta.annotations = map.next_value_seed(OrNull(PairsSeed(builder)))?,
                8..=10 => {
                    map.next_value::<Option<AnyStr>>()?;
                }
                11 => {
                    map.next_value::<Option<i64>>()?;
                }
                12 => {
                    map.next_value::<Option<CheckSeq<OwnerReferenceShape>>>()?;
                }
                _ => {
                    map.next_value::<Option<CheckSeq<AnyStr>>>()?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_spans_of_the_json_and_maps_are_sorted_with_the_last_duplicate_kept() {
        let json = br#"{"kind":"Pod","metadata":{"name":"a\"b","labels":{"z":"1","a":"2","z":"3"},"annotations":{}}}"#;
        let m = CompactMeta::parse(json).unwrap();
        assert_eq!(m.str(json, m.kind), Some("Pod"));
        assert_eq!(m.str(json, m.name), Some("a\"b"));
        assert_eq!(m.str(json, m.namespace), None);
        assert_eq!(m.lookup(json, m.labels, "z"), Some("3"));
        assert_eq!(m.lookup(json, m.labels, "a"), Some("2"));
        assert_eq!(m.lookup(json, m.labels, "b"), None);
        assert_eq!(
            m.iter(json, m.labels).collect::<Vec<_>>(),
            [("a", "2"), ("z", "3")]
        );
        assert_eq!(m.annotations.map(|r| r.end - r.start), Some(0));
        // Only the escaped name is copied; the rest are ranges of the JSON itself.
        assert_eq!(&*m.unescaped, "a\"b");
        assert_eq!(m.kind, Some(Span { start: 9, end: 12 }));
        assert_eq!(m.name.map(|s| s.start & UNESCAPED), Some(UNESCAPED));
    }

    #[test]
    fn spans_outside_their_buffer_read_as_empty_not_a_panic() {
        let json = br#"{"kind":"Pod"}"#;
        let m = CompactMeta::parse(json).unwrap();
        // Another object's (shorter) bytes: nonsense, but no panic.
        assert_eq!(m.str(b"{}", m.kind), Some(""));
        let wild = Span {
            start: UNESCAPED | 5,
            end: 9,
        };
        assert_eq!(wild.text(json, ""), "");
    }

    #[test]
    fn malformed_metadata_is_refused() {
        for bad in [
            &br#"{"metadata":{"name":1}}"#[..],
            br#"{"metadata":{"labels":{"a":null}}}"#,
            br#"{"metadata":{"labels":[]}}"#,
            br#"{"metadata":{"name":"a","name":"b"}}"#,
            br#"{"kind":"A","kind":"B"}"#,
            br#"{"metadata":{"ownerReferences":[{"kind":"K"}]}}"#,
            br#"{"metadata":{"finalizers":[1]}}"#,
            br#"{"metadata":{"generation":"1"}}"#,
            br#"{"metadata":{"generateName":false}}"#,
            br#"{"metadata":["a"]}"#,
            br#"["v1"]"#,
            br#"{"metadata":{}} x"#,
            b"",
        ] {
            assert!(
                CompactMeta::parse(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn nulls_and_unknown_fields_are_accepted() {
        let m = CompactMeta::parse(
            br#"{"spec":{"x":[1,{"y":null}]},"metadata":{"name":null,"labels":null,"managedFields":[{"m":1}],"finalizers":null,"extra":{"a":1}},"apiVersion":null}"#,
        )
        .unwrap();
        assert_eq!(m.name, None);
        assert_eq!(m.labels, None);
        assert_eq!(m.api_version, None);
        assert!(m.unescaped.is_empty());
    }
}

#[cfg(test)]
mod proptest_compact_meta {
    //! Invariants CM1–CM3 against the full decode, over generated metadata, including escapes,
    //! duplicate and unsorted keys, nulls, wrong types and unknown fields.
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::compact::decode_full_meta;

    /// `apiVersion` and `kind` as a derived struct decodes them; the metadata comes from
    /// [`decode_full_meta`], the decode `CompactObject::metadata` runs.
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Full {
        #[serde(default)]
        api_version: Option<String>,
        #[serde(default)]
        kind: Option<String>,
    }

    fn text() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z]{0,3}", "[a-zé\"\\\\/\n]{0,4}", Just(String::new()),]
    }

    /// A field value: usually of the right type, sometimes not.
    fn string_or_wrong() -> impl Strategy<Value = Value> {
        prop_oneof![
            6 => text().prop_map(Value::String),
            1 => Just(Value::Null),
            1 => Just(json!(7)),
        ]
    }

    /// A map written as JSON text, so that duplicate keys survive.
    fn map_text() -> impl Strategy<Value = String> {
        prop_oneof![
            8 => prop::collection::vec((text(), text()), 0..6).prop_map(|entries| {
                let body: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), Value::String(v.clone())))
                    .collect();
                format!("{{{}}}", body.join(","))
            }),
            1 => Just("null".to_string()),
            1 => Just(r#"{"a":1}"#.to_string()),
            1 => Just("[]".to_string()),
        ]
    }

    fn meta_text() -> impl Strategy<Value = String> {
        let scalar = prop::collection::vec(
            (
                prop::sample::select(vec![
                    "name",
                    "namespace",
                    "uid",
                    "resourceVersion",
                    "deletionTimestamp",
                    "generateName",
                    "selfLink",
                    "creationTimestamp",
                    "unknown",
                ]),
                string_or_wrong(),
            ),
            0..5,
        );
        let extra = prop::collection::vec(
            prop_oneof![
                Just(r#""generation":3"#),
                Just(r#""generation":"3""#),
                Just(r#""deletionGracePeriodSeconds":30"#),
                Just(
                    r#""ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n","uid":"u","controller":true}]"#
                ),
                Just(r#""ownerReferences":[{"apiVersion":"v1","kind":"K","name":"n"}]"#),
                Just(r#""finalizers":["f"]"#),
                Just(r#""finalizers":[1]"#),
                Just(r#""managedFields":[{"manager":"m"}]"#),
            ],
            0..3,
        );
        (
            scalar,
            prop::option::of(map_text()),
            prop::option::of(map_text()),
            extra,
        )
            .prop_map(|(scalars, labels, annotations, extra)| {
                let mut fields: Vec<String> = scalars
                    .into_iter()
                    .map(|(k, v)| format!("{}:{v}", Value::String(k.to_string())))
                    .collect();
                if let Some(l) = labels {
                    fields.push(format!(r#""labels":{l}"#));
                }
                if let Some(a) = annotations {
                    fields.push(format!(r#""annotations":{a}"#));
                }
                fields.extend(extra.into_iter().map(str::to_string));
                format!("{{{}}}", fields.join(","))
            })
    }

    fn object_text() -> impl Strategy<Value = String> {
        (
            prop::option::of(string_or_wrong()),
            prop::option::of(prop_oneof![8 => meta_text(), 1 => Just("null".to_string())]),
        )
            .prop_map(|(kind, meta)| {
                let mut fields: Vec<String> = vec![r#""spec":{"a":[1,"b"]}"#.to_string()];
                if let Some(k) = kind {
                    fields.push(format!(r#""kind":{k}"#));
                }
                if let Some(m) = meta {
                    fields.push(format!(r#""metadata":{m}"#));
                }
                format!("{{{}}}", fields.join(","))
            })
    }

    fn pairs(
        m: &CompactMeta,
        json: &[u8],
        range: Option<PairRange>,
    ) -> Option<BTreeMap<String, String>> {
        range.map(|_| {
            m.iter(json, range)
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn compact_meta_invariants(json in object_text()) {
            let compact = CompactMeta::parse(json.as_bytes());
            let bytes = json.as_bytes();
            let full = serde_json::from_str::<Full>(&json)
                .and_then(|full| Ok((full, decode_full_meta(json.as_bytes())?)));
            // CM3, and its converse for the objects generated here (never written as arrays):
            // both decodes accept the same inputs.
            prop_assert_eq!(compact.is_ok(), full.is_ok(), "{}", json);
            let (Ok(m), Ok((full, meta))) = (compact, full) else {
                return Ok(());
            };
            prop_assert_eq!(m.str(bytes, m.api_version), full.api_version.as_deref());
            prop_assert_eq!(m.str(bytes, m.kind), full.kind.as_deref());
            prop_assert_eq!(m.str(bytes, m.name), meta.name.as_deref());
            prop_assert_eq!(m.str(bytes, m.namespace), meta.namespace.as_deref());
            prop_assert_eq!(m.str(bytes, m.uid), meta.uid.as_deref());
            prop_assert_eq!(m.str(bytes, m.resource_version), meta.resource_version.as_deref());
            prop_assert_eq!(m.str(bytes, m.deletion_timestamp), meta.deletion_timestamp.as_deref());
            prop_assert_eq!(m.generation, meta.generation);
            prop_assert_eq!(pairs(&m, bytes, m.labels), meta.labels.clone());
            prop_assert_eq!(pairs(&m, bytes, m.annotations), meta.annotations.clone());
            for (k, v) in meta.labels.iter().flatten() {
                prop_assert_eq!(m.lookup(bytes, m.labels, k), Some(v.as_str()));
            }
            prop_assert_eq!(m.lookup(bytes, m.labels, "not-a-generated-key"), None);
            // CM1: spans inside their buffers, covering UTF-8.
            for span in [m.api_version, m.kind, m.name, m.namespace, m.uid, m.resource_version, m.deletion_timestamp]
                .into_iter()
                .flatten()
                .chain(m.pairs.iter().flat_map(|(k, v)| [*k, *v]))
            {
                let (buffer, start) = if span.start & UNESCAPED != 0 {
                    (m.unescaped.as_bytes(), span.start & !UNESCAPED)
                } else {
                    (bytes, span.start)
                };
                let covered = buffer.get(start as usize..span.end as usize);
                prop_assert!(covered.is_some_and(|b| std::str::from_utf8(b).is_ok()));
            }
            // CM2: ranges inside the table, keys strictly increasing.
            for range in [m.labels, m.annotations].into_iter().flatten() {
                prop_assert!(range.start <= range.end && range.end as usize <= m.pairs.len());
                let keys: Vec<&str> = m.iter(bytes, Some(range)).map(|(k, _)| k).collect();
                prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "{:?}", keys);
            }
        }
    }
}
