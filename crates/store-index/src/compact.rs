//! [`CompactObject`]: metadata decoded, everything else kept as the raw bytes the server sent
//! (JSON, or a protobuf message: [`RawEncoding`]).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::compact_meta::CompactMeta;
use crate::dynamic::DynamicObject;
use crate::object::{Object, ObjectMeta};
use crate::protobuf::ProtobufError;

/// An object for big caches: `apiVersion`, `kind` and the metadata the machinery reads decoded
/// eagerly (keys, indexes, selectors and resource-version checks need nothing else), the whole
/// object kept as its raw JSON bytes and decoded on demand into any serde type.
///
/// A typed Pod costs several times its JSON size in memory; a `CompactObject` costs about the JSON
/// size plus a small table (see `docs/benchmarks.md` for measured figures). The decoded strings
/// (name, namespace, uid, resourceVersion, deletionTimestamp, labels, annotations) are kept as
/// ranges of the raw bytes (a string the JSON wrote with escapes is copied out, unescaped), the
/// labels and annotations as one table sorted by key: besides the raw bytes, one allocation per
/// object however many labels it has, which a busy watch, allocating each new object and freeing
/// the one it replaces, feels directly. The other metadata fields are checked when the object is
/// decoded and read from the raw bytes only when asked for.
///
/// [`label`](Object::label), [`annotation`](Object::annotation), [`label_pairs`](Self::label_pairs)
/// and the scalar accessors answer from that table. [`metadata`](Self::metadata) (also
/// [`Object::object_meta`], [`Object::labels`] and [`Object::annotations`], which lend out
/// `ObjectMeta`'s maps) decodes the full `ObjectMeta` from the raw bytes on first use and keeps it
/// with the object, so prefer the former on hot paths. `managedFields` are never decoded into it
/// (they remain in the raw bytes).
///
/// ```
/// use store_index::{CompactObject, Object};
/// let obj = CompactObject::from_json(bytes::Bytes::from_static(
///     br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"app":"web"}},"spec":{"nodeName":"n1"}}"#,
/// )).unwrap();
/// assert_eq!(obj.label("app"), Some("web"));
/// assert_eq!(obj.label_pairs().collect::<Vec<_>>(), [("app", "web")]);
///
/// #[derive(serde::Deserialize)]
/// struct PodSpecOnly { spec: serde_json::Value }
/// let typed: PodSpecOnly = obj.decode().unwrap();
/// assert_eq!(typed.spec["nodeName"], "n1");
/// ```
///
/// # Encodings
///
/// A `CompactObject` holds its object in the encoding it came in, [`encoding`](Self::encoding):
/// the JSON text of the object ([`from_json`](Self::from_json)), or its protobuf message, the
/// `raw` of its `runtime.Unknown` envelope without the envelope
/// ([`from_protobuf`](Self::from_protobuf): what the reflector makes of a protobuf list or watch).
/// Keys, indexes, selectors and every [`Object`] accessor answer the same for both. The whole
/// object is decoded on demand from JSON with [`decode`](Self::decode) into any serde type, from
/// protobuf with `decode_pb` into a `k8s_pb` type (feature `k8s-pb`); `decode` of a protobuf
/// object is an error that says so. The reflector's `protobuf::convert::decode_compact` decodes
/// either into any serde type, transcoding a protobuf message with Kubernetes' descriptors (this
/// crate has none). The reflector asks for JSON unless told otherwise (its
/// `Encoding::Protobuf`), so that `decode` keeps working.
#[derive(Clone)]
pub struct CompactObject {
    meta: CompactMeta,
    /// The full metadata, decoded from `raw` the first time it is asked for.
    full_meta: OnceLock<Box<ObjectMeta>>,
    raw: Bytes,
    encoding: RawEncoding,
}

/// The encoding of a [`CompactObject`]'s raw bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RawEncoding {
    /// The object's JSON text.
    Json,
    /// The object's protobuf message (no `k8s\0` magic, no envelope: its type is held apart).
    Protobuf,
}

#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    metadata: Option<HeadMeta>,
}

/// `ObjectMeta` as a compact object decodes it: every field but `managedFields`, which serde then
/// skips without building it (it stays in the raw bytes). Building it only to drop it showed up in
/// watch-path profiles.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeadMeta {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    generate_name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    self_link: Option<String>,
    #[serde(default)]
    uid: Option<String>,
    #[serde(default)]
    resource_version: Option<String>,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    creation_timestamp: Option<String>,
    #[serde(default)]
    deletion_timestamp: Option<String>,
    #[serde(default)]
    deletion_grace_period_seconds: Option<i64>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
    #[serde(default)]
    owner_references: Option<Vec<crate::object::OwnerReference>>,
    #[serde(default)]
    finalizers: Option<Vec<String>>,
}

impl From<HeadMeta> for ObjectMeta {
    fn from(m: HeadMeta) -> Self {
        ObjectMeta {
            name: m.name,
            generate_name: m.generate_name,
            namespace: m.namespace,
            self_link: m.self_link,
            uid: m.uid,
            resource_version: m.resource_version,
            generation: m.generation,
            creation_timestamp: m.creation_timestamp,
            deletion_timestamp: m.deletion_timestamp,
            deletion_grace_period_seconds: m.deletion_grace_period_seconds,
            labels: m.labels,
            annotations: m.annotations,
            owner_references: m.owner_references,
            finalizers: m.finalizers,
            managed_fields: None,
        }
    }
}

/// The metadata of one JSON object as a full `ObjectMeta` (without `managedFields`): what
/// [`CompactObject::metadata`] decodes on first use.
pub(crate) fn decode_full_meta(raw: &[u8]) -> Result<ObjectMeta, serde_json::Error> {
    serde_json::from_slice::<Head>(raw)
        .map(|head| head.metadata.map(ObjectMeta::from).unwrap_or_default())
}

impl CompactObject {
    /// Decodes the metadata of one JSON object and keeps `raw` as the object's bytes. `raw` must be
    /// exactly one JSON object (surrounding whitespace allowed); malformed metadata (a label that
    /// is not a string, an owner reference without a uid, a field given twice, …) is an error.
    pub fn from_json(raw: Bytes) -> Result<Self, serde_json::Error> {
        let meta = CompactMeta::parse(&raw)?;
        Ok(CompactObject {
            meta,
            full_meta: OnceLock::new(),
            raw,
            encoding: RawEncoding::Json,
        })
    }

    /// Reads the metadata (field 1) of one object's protobuf `message`, of `api_version`/`kind`
    /// (which the message does not carry), and keeps `message` as the object's bytes: the
    /// metadata's strings are read in place, never copied. Malformed metadata (a string that is
    /// not UTF-8, a cut field) is an error.
    ///
    /// ```
    /// use store_index::{CompactObject, Object, RawEncoding};
    /// // metadata { name: "p", labels { "app": "web" } }
    /// let message = bytes::Bytes::from_static(b"\x0a\x0f\x0a\x01p\x5a\x0a\x0a\x03app\x12\x03web");
    /// let obj = CompactObject::from_protobuf(message, "v1", "Pod").unwrap();
    /// assert_eq!((obj.name(), obj.kind(), obj.label("app")), ("p", Some("Pod"), Some("web")));
    /// assert_eq!(obj.encoding(), RawEncoding::Protobuf);
    /// assert!(obj.decode::<serde_json::Value>().is_err());
    /// ```
    pub fn from_protobuf(
        message: Bytes,
        api_version: &str,
        kind: &str,
    ) -> Result<Self, ProtobufError> {
        let meta = crate::protobuf::compact::compact_meta(&message, api_version, kind)?;
        Ok(CompactObject {
            meta,
            full_meta: OnceLock::new(),
            raw: message,
            encoding: RawEncoding::Protobuf,
        })
    }

    /// The raw bytes of the whole object, in [`encoding`](Self::encoding).
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The encoding of [`raw`](Self::raw).
    pub fn encoding(&self) -> RawEncoding {
        self.encoding
    }

    /// The full metadata (without `managedFields`), decoded from the raw bytes on the first call
    /// and kept with the object after it. The accessors of [`Object`] other than `labels`,
    /// `annotations` and `object_meta` do not need it.
    pub fn metadata(&self) -> &ObjectMeta {
        self.full_meta.get_or_init(|| {
            if self.encoding == RawEncoding::Protobuf {
                let decoded = crate::protobuf::object_meta_of(&self.raw).map(|mut m| {
                    m.managed_fields = None;
                    m
                });
                return Box::new(decoded.unwrap_or_else(|_| self.meta_from_table()));
            }
            let decoded = decode_full_meta(&self.raw);
            // `from_json` accepted these bytes, and it accepts nothing this decode refuses
            // (invariant M3 in `compact_meta.rs`), so the fallback is never expected to run.
            Box::new(decoded.unwrap_or_else(|_| self.meta_from_table()))
        })
    }

    /// The metadata the table holds, as an `ObjectMeta`.
    fn meta_from_table(&self) -> ObjectMeta {
        let m = &self.meta;
        let raw = &self.raw[..];
        let owned = |span| m.str(raw, span).map(str::to_string);
        let map = |range: Option<_>| {
            range.map(|_| {
                m.iter(raw, range)
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()
            })
        };
        ObjectMeta {
            name: owned(m.name),
            namespace: owned(m.namespace),
            uid: owned(m.uid),
            resource_version: owned(m.resource_version),
            deletion_timestamp: owned(m.deletion_timestamp),
            generation: m.generation,
            labels: map(m.labels),
            annotations: map(m.annotations),
            ..ObjectMeta::default()
        }
    }

    /// The labels, in key order, without building a map.
    pub fn label_pairs(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.meta.iter(&self.raw, self.meta.labels)
    }

    /// The annotations, in key order, without building a map.
    pub fn annotation_pairs(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.meta.iter(&self.raw, self.meta.annotations)
    }

    /// Decodes the whole object into `T` from its JSON; an object held in protobuf is an error
    /// (see [Encodings](Self#encodings)).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        if self.encoding == RawEncoding::Protobuf {
            return Err(serde::de::Error::custom(
                "this CompactObject holds protobuf, not JSON: decode it with decode_pb (feature k8s-pb) or reflector::protobuf::convert::decode_compact, or list and watch without Encoding::Protobuf",
            ));
        }
        serde_json::from_slice(&self.raw)
    }

    /// Decodes the whole object held in protobuf into the `k8s_pb` type `T`; an object held in
    /// JSON, or of another kind, is an error.
    #[cfg(feature = "k8s-pb")]
    pub fn decode_pb<T>(&self) -> Result<T, ProtobufError>
    where
        T: prost::Message + Default + crate::k8s_pb::Resource,
    {
        if self.encoding != RawEncoding::Protobuf {
            return Err(ProtobufError::Malformed {
                what: "CompactObject",
                why: "it holds JSON, not protobuf",
            });
        }
        if self.kind().is_some_and(|k| k != T::KIND) {
            return Err(ProtobufError::UnknownKind {
                api_version: self.api_version().unwrap_or("").to_string(),
                kind: self.kind().unwrap_or("").to_string(),
            });
        }
        T::decode(self.raw.clone()).map_err(|e| ProtobufError::Message {
            path: T::KIND.to_string(),
            why: e.to_string(),
        })
    }

    /// Decodes the whole object as a [`DynamicObject`].
    pub fn to_dynamic(&self) -> Result<DynamicObject, serde_json::Error> {
        self.decode()
    }

    /// Bytes of memory this object holds on the heap, beyond its own struct: the raw JSON, the
    /// metadata text and table, and the full metadata if it has been asked for (an estimate that
    /// ignores allocator overhead).
    pub fn heap_size(&self) -> usize {
        let full = self.full_meta.get().map_or(0, |meta| {
            let s = |o: &Option<String>| o.as_ref().map_or(0, String::capacity);
            let map = |m: &Option<BTreeMap<String, String>>| {
                m.as_ref().map_or(0, |m| {
                    m.iter()
                        .map(|(k, v)| k.capacity() + v.capacity() + 16)
                        .sum()
                })
            };
            std::mem::size_of::<ObjectMeta>()
                + s(&meta.name)
                + s(&meta.generate_name)
                + s(&meta.namespace)
                + s(&meta.uid)
                + s(&meta.resource_version)
                + s(&meta.creation_timestamp)
                + map(&meta.labels)
                + map(&meta.annotations)
        });
        self.raw.len() + self.meta.heap_size() + full
    }
}

/// Equal when the raw bytes (and their encoding) are equal; a protobuf message does not name
/// its type, so its `apiVersion` and `kind` are compared too.
impl PartialEq for CompactObject {
    fn eq(&self, other: &Self) -> bool {
        self.encoding == other.encoding
            && self.raw == other.raw
            && (self.encoding == RawEncoding::Json
                || (self.api_version() == other.api_version() && self.kind() == other.kind()))
    }
}

impl fmt::Debug for CompactObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompactObject")
            .field("api_version", &self.api_version())
            .field("kind", &self.kind())
            .field("namespace", &self.namespace())
            .field("name", &self.name())
            .field("resource_version", &self.resource_version())
            .field("encoding", &self.encoding)
            .field("raw_len", &self.raw.len())
            .finish()
    }
}

impl Object for CompactObject {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(self.metadata())
    }
    fn has_meta(&self) -> bool {
        true
    }
    fn name(&self) -> &str {
        self.meta.str(&self.raw, self.meta.name).unwrap_or("")
    }
    fn namespace(&self) -> Option<&str> {
        self.meta.str(&self.raw, self.meta.namespace)
    }
    fn uid(&self) -> Option<&str> {
        self.meta.str(&self.raw, self.meta.uid)
    }
    fn resource_version(&self) -> Option<&str> {
        self.meta.str(&self.raw, self.meta.resource_version)
    }
    fn generation(&self) -> Option<i64> {
        self.meta.generation
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata().labels.as_ref()
    }
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.metadata().annotations.as_ref()
    }
    fn deletion_timestamp(&self) -> Option<String> {
        self.meta
            .str(&self.raw, self.meta.deletion_timestamp)
            .map(str::to_string)
    }
    fn api_version(&self) -> Option<&str> {
        self.meta.str(&self.raw, self.meta.api_version)
    }
    fn kind(&self) -> Option<&str> {
        self.meta.str(&self.raw, self.meta.kind)
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.meta.lookup(&self.raw, self.meta.labels, key)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.meta.lookup(&self.raw, self.meta.annotations, key)
    }
    /// The raw bytes are cut (MF1 in `managed_fields.rs`: the member removed, the rest as the
    /// server wrote it) and the metadata read again from them; `false`, the object kept as it
    /// is, when they cannot be read again (which decoding them first would have refused).
    fn drop_managed_fields(&mut self) -> bool {
        let cut = match self.encoding {
            RawEncoding::Json => crate::managed_fields::json_without_managed_fields(&self.raw)
                .map(|cut| CompactObject::from_json(Bytes::from(cut)).ok()),
            RawEncoding::Protobuf => {
                match crate::managed_fields::protobuf_without_managed_fields(&self.raw) {
                    Ok(cut) => cut.map(|cut| {
                        let api_version = self.api_version().unwrap_or("").to_string();
                        let kind = self.kind().unwrap_or("").to_string();
                        CompactObject::from_protobuf(Bytes::from(cut), &api_version, &kind).ok()
                    }),
                    Err(_) => return false,
                }
            }
        };
        match cut {
            None => true,
            Some(Some(cut)) => {
                *self = cut;
                true
            }
            Some(None) => false,
        }
    }
}

impl Serialize for CompactObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.encoding == RawEncoding::Protobuf {
            return Err(serde::ser::Error::custom(
                "a CompactObject held in protobuf cannot be written as JSON",
            ));
        }
        let text = std::str::from_utf8(&self.raw).map_err(serde::ser::Error::custom)?;
        let raw: &RawValue = serde_json::from_str(text).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

/// Works with `serde_json` only: the object's text is captured as a raw value (one copy), then its
/// metadata decoded from it.
impl<'de> Deserialize<'de> for CompactObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw: Box<RawValue> = Deserialize::deserialize(deserializer)?;
        let bytes = Bytes::from(String::from(Box::<str>::from(raw)));
        CompactObject::from_json(bytes).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"9","managedFields":[{"manager":"m"}]},"spec":{"containers":[]}}"#;

    #[test]
    fn compact_object_keeps_raw_bytes_and_decodes_metadata_only() {
        let obj = CompactObject::from_json(Bytes::from_static(POD.as_bytes())).unwrap();
        assert_eq!(obj.name(), "p");
        assert_eq!(obj.resource_version(), Some("9"));
        assert_eq!(obj.kind(), Some("Pod"));
        assert!(obj.metadata().managed_fields.is_none());
        assert_eq!(obj.raw().as_ref(), POD.as_bytes());
        let dynamic = obj.to_dynamic().unwrap();
        assert_eq!(
            dynamic.metadata.managed_fields.as_ref().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn compact_object_deserializes_inside_a_list_and_serializes_back_verbatim() {
        let list = format!(r#"{{"items":[{POD},{POD}]}}"#);
        #[derive(Deserialize)]
        struct List {
            items: Vec<CompactObject>,
        }
        let l: List = serde_json::from_str(&list).unwrap();
        assert_eq!(l.items.len(), 2);
        assert_eq!(serde_json::to_string(&l.items[0]).unwrap(), POD);
    }

    #[test]
    fn every_accessor_agrees_with_a_full_decode_of_a_realistic_pod() {
        for i in [0, 7, 12345] {
            let json = sim_apiserver::fixtures::realistic_pod_json(i);
            let obj = CompactObject::from_json(Bytes::from(json.clone())).unwrap();
            let full: DynamicObject = serde_json::from_str(&json).unwrap();
            assert_eq!(obj.name(), full.name());
            assert_eq!(obj.namespace(), full.namespace());
            assert_eq!(obj.uid(), full.uid());
            assert_eq!(obj.resource_version(), full.resource_version());
            assert_eq!(obj.generation(), full.generation());
            assert_eq!(obj.deletion_timestamp(), full.deletion_timestamp());
            assert_eq!(obj.api_version(), full.api_version());
            assert_eq!(obj.kind(), full.kind());
            assert_eq!(obj.label("app"), Some("web"));
            assert_eq!(obj.label("nope"), None);
            assert_eq!(obj.annotation("prometheus.io/port"), Some("9090"));
            let labels = full.labels().unwrap();
            assert_eq!(
                obj.label_pairs().collect::<Vec<_>>(),
                labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect::<Vec<_>>()
            );
            assert_eq!(obj.annotation_pairs().len(), 3);
            // The full metadata, built on first use, is everything but managedFields.
            let before = obj.heap_size();
            let mut want = full.metadata.clone();
            want.managed_fields = None;
            assert_eq!(obj.metadata(), &want);
            assert!(obj.heap_size() > before, "the built metadata is counted");
            assert_eq!(obj.labels(), full.labels());
            assert_eq!(obj.annotations(), full.annotations());
            assert_eq!(obj.object_meta(), Some(&want));
            // The fallback `metadata` would use, were the full decode ever to fail, holds every
            // field the table has.
            let table = obj.meta_from_table();
            let from_full = ObjectMeta {
                name: want.name.clone(),
                namespace: want.namespace.clone(),
                uid: want.uid.clone(),
                resource_version: want.resource_version.clone(),
                deletion_timestamp: want.deletion_timestamp.clone(),
                generation: want.generation,
                labels: want.labels.clone(),
                annotations: want.annotations.clone(),
                ..ObjectMeta::default()
            };
            assert_eq!(table, from_full);
        }
    }

    #[test]
    fn malformed_json_is_an_error() {
        assert!(CompactObject::from_json(Bytes::from_static(b"{\"metadata\":")).is_err());
        assert!(CompactObject::from_json(Bytes::from_static(b"42")).is_err());
        let bad_owner = br#"{"metadata":{"name":"a","ownerReferences":[{"kind":"ReplicaSet"}]}}"#;
        let err = CompactObject::from_json(Bytes::from_static(bad_owner)).unwrap_err();
        assert!(err.to_string().contains("apiVersion"), "{err}");
    }
}
