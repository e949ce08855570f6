//! [`CompactObject`]: metadata decoded, everything else kept as the raw JSON bytes.

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::dynamic::DynamicObject;
use crate::object::{Object, ObjectMeta};

/// An object for big caches: `apiVersion`, `kind` and `metadata` decoded eagerly (keys, indexes,
/// selectors and resource-version checks need nothing else), the whole object kept as its raw JSON
/// bytes and decoded on demand into any serde type.
///
/// A typed Pod costs several times its JSON size in memory; a `CompactObject` costs about the JSON
/// size plus its metadata (see `docs/benchmarks.md` for measured figures). `managedFields` are not
/// kept in the decoded metadata (they remain in the raw bytes).
///
/// ```
/// use store_index::{CompactObject, Object};
/// let obj = CompactObject::from_json(bytes::Bytes::from_static(
///     br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","labels":{"app":"web"}},"spec":{"nodeName":"n1"}}"#,
/// )).unwrap();
/// assert_eq!(obj.label("app"), Some("web"));
///
/// #[derive(serde::Deserialize)]
/// struct PodSpecOnly { spec: serde_json::Value }
/// let typed: PodSpecOnly = obj.decode().unwrap();
/// assert_eq!(typed.spec["nodeName"], "n1");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct CompactObject {
    api_version: Option<String>,
    kind: Option<String>,
    metadata: ObjectMeta,
    raw: Bytes,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Head {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
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
    labels: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    annotations: Option<std::collections::BTreeMap<String, String>>,
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

impl CompactObject {
    /// Decodes the metadata of one JSON object and keeps `raw` as the object's bytes. `raw` must be
    /// exactly one JSON object (surrounding whitespace allowed).
    pub fn from_json(raw: Bytes) -> Result<Self, serde_json::Error> {
        let head: Head = serde_json::from_slice(&raw)?;
        let metadata = head.metadata.map(ObjectMeta::from).unwrap_or_default();
        Ok(CompactObject {
            api_version: head.api_version,
            kind: head.kind,
            metadata,
            raw,
        })
    }

    /// The raw JSON of the whole object.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The decoded metadata (without `managedFields`).
    pub fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    /// Decodes the whole object into `T`.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.raw)
    }

    /// Decodes the whole object as a [`DynamicObject`].
    pub fn to_dynamic(&self) -> Result<DynamicObject, serde_json::Error> {
        self.decode()
    }

    /// Bytes of memory this object holds on the heap, beyond its own struct: the raw JSON plus the
    /// decoded metadata strings (an estimate that ignores allocator overhead).
    pub fn heap_size(&self) -> usize {
        let s = |o: &Option<String>| o.as_ref().map_or(0, String::capacity);
        let map = |m: &Option<std::collections::BTreeMap<String, String>>| {
            m.as_ref().map_or(0, |m| {
                m.iter()
                    .map(|(k, v)| k.capacity() + v.capacity() + 16)
                    .sum()
            })
        };
        let meta = &self.metadata;
        self.raw.len()
            + s(&self.api_version)
            + s(&self.kind)
            + s(&meta.name)
            + s(&meta.namespace)
            + s(&meta.uid)
            + s(&meta.resource_version)
            + s(&meta.creation_timestamp)
            + map(&meta.labels)
            + map(&meta.annotations)
    }
}

impl Object for CompactObject {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
    fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }
    fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

impl Serialize for CompactObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
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
    fn malformed_json_is_an_error() {
        assert!(CompactObject::from_json(Bytes::from_static(b"{\"metadata\":")).is_err());
        assert!(CompactObject::from_json(Bytes::from_static(b"42")).is_err());
    }
}
