//! [`PartialObjectMetadata`]: an object's metadata and nothing else, the representation
//! kube-apiserver serves to metadata-only clients (client-go's `metadatainformer`, kube-rs's
//! `metadata_watcher`).
//!
//! A controller that reads only names, labels, owner references and resource versions has no use
//! for a Pod's spec and status, which are most of its bytes. Asked for it (through the `Accept`
//! header, see the reflector's `Representation`), the server writes each object as
//! `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{…}}`, so neither the
//! network nor the cache carries the rest. A server that does not know that representation sends
//! the whole objects instead; decoding one keeps its type meta and metadata only, every other
//! field being skipped as it is parsed, never built.
//!
//! Decoding visits the object's fields once (with the field matching and duplicate checks of
//! `compact_meta.rs`), and accepts and refuses what a decode of `apiVersion`,
//! `kind` and a full [`ObjectMeta`] would (invariant **PM1**, checked by `proptest_partial` below):
//! - **PM1** whatever JSON object [`DynamicObject`](crate::DynamicObject) decodes,
//!   `PartialObjectMetadata` decodes too, to the same `apiVersion`, `kind` and metadata; and it
//!   refuses what that decode refuses.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::compact_meta::{first_time, FieldSeed, TOP_FIELDS};
use crate::object::{Object, ObjectMeta};

/// An object's type meta and metadata, without its spec, status or any other field: what a
/// metadata-only informer caches.
///
/// Decodes from the `PartialObjectMetadata` representation and from a whole object alike (only the
/// metadata is kept); [`is_metadata_representation`](Self::is_metadata_representation) tells which
/// one the server sent. The well-known type meta (`meta.k8s.io/v1`, `PartialObjectMetadata`) is
/// shared, not allocated per object. Every metadata field is kept, `managedFields` included: an
/// informer transform that clears them is a cheap way to shrink the cache further.
///
/// ```
/// use store_index::{Object, PartialObjectMetadata};
///
/// let partial: PartialObjectMetadata = serde_json::from_str(
///     r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"p","namespace":"ns","resourceVersion":"7"}}"#,
/// ).unwrap();
/// assert_eq!((partial.namespace(), partial.name()), (Some("ns"), "p"));
/// assert!(partial.is_metadata_representation());
///
/// // A server that ignored the request for metadata sent the whole Pod: its spec is skipped.
/// let whole: PartialObjectMetadata = serde_json::from_str(
///     r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","labels":{"app":"web"}},"spec":{"nodeName":"n1"}}"#,
/// ).unwrap();
/// assert_eq!((whole.kind(), whole.label("app")), (Some("Pod"), Some("web")));
/// assert!(!serde_json::to_string(&whole).unwrap().contains("spec"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObjectMetadata {
    #[serde(skip_serializing_if = "Option::is_none")]
    api_version: Option<Cow<'static, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<Cow<'static, str>>,
    /// The object's metadata, every field of it.
    pub metadata: ObjectMeta,
}

impl PartialObjectMetadata {
    /// The `apiVersion` of the metadata representation.
    pub const API_VERSION: &'static str = "meta.k8s.io/v1";
    /// The `kind` of the metadata representation of one object.
    pub const KIND: &'static str = "PartialObjectMetadata";
    /// The `kind` of the metadata representation of a list.
    pub const LIST_KIND: &'static str = "PartialObjectMetadataList";

    /// `metadata` in the metadata representation (`meta.k8s.io/v1`, `PartialObjectMetadata`).
    pub fn new(metadata: ObjectMeta) -> Self {
        PartialObjectMetadata {
            api_version: Some(Cow::Borrowed(Self::API_VERSION)),
            kind: Some(Cow::Borrowed(Self::KIND)),
            metadata,
        }
    }

    /// With another type meta: the object's own, as a server that sends whole objects writes it.
    pub fn with_type(mut self, api_version: impl Into<String>, kind: impl Into<String>) -> Self {
        self.api_version = Some(interned(api_version.into()));
        self.kind = Some(interned(kind.into()));
        self
    }

    /// Whether the server sent the metadata representation (`PartialObjectMetadata` of
    /// `meta.k8s.io`), rather than the whole object (then the type meta is the object's own, or
    /// absent, as on the items of kube-apiserver's lists of built-in resources).
    pub fn is_metadata_representation(&self) -> bool {
        self.kind.as_deref() == Some(Self::KIND)
            && self
                .api_version
                .as_deref()
                .is_some_and(|av| av.starts_with("meta.k8s.io/"))
    }

    /// The metadata, giving up the type meta.
    pub fn into_metadata(self) -> ObjectMeta {
        self.metadata
    }
}

/// `s`, shared with the constant when it is the representation's own type meta.
fn interned(s: String) -> Cow<'static, str> {
    match s.as_str() {
        PartialObjectMetadata::API_VERSION => Cow::Borrowed(PartialObjectMetadata::API_VERSION),
        PartialObjectMetadata::KIND => Cow::Borrowed(PartialObjectMetadata::KIND),
        _ => Cow::Owned(s),
    }
}

impl Object for PartialObjectMetadata {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
    fn drop_managed_fields(&mut self) -> bool {
        self.metadata.managed_fields = None;
        true
    }
    fn api_version(&self) -> Option<&str> {
        self.api_version.as_deref()
    }
    fn kind(&self) -> Option<&str> {
        self.kind.as_deref()
    }
}

/// A type-meta string, interned as it is decoded (no allocation for the representation's own).
struct TypeName(Cow<'static, str>);

impl<'de> Deserialize<'de> for TypeName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TypeNameVisitor;
        impl Visitor<'_> for TypeNameVisitor {
            type Value = TypeName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TypeName, E> {
                Ok(TypeName(match v {
                    PartialObjectMetadata::API_VERSION => {
                        Cow::Borrowed(PartialObjectMetadata::API_VERSION)
                    }
                    PartialObjectMetadata::KIND => Cow::Borrowed(PartialObjectMetadata::KIND),
                    _ => Cow::Owned(v.to_string()),
                }))
            }
        }
        d.deserialize_str(TypeNameVisitor)
    }
}

/// One pass over the object: `apiVersion`, `kind` and `metadata` decoded, every other field
/// skipped without being built (`IgnoredAny`), a field given twice refused.
impl<'de> Deserialize<'de> for PartialObjectMetadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PartialVisitor;
        impl<'de> Visitor<'de> for PartialVisitor {
            type Value = PartialObjectMetadata;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes object or its PartialObjectMetadata")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<PartialObjectMetadata, A::Error> {
                let mut obj = PartialObjectMetadata::default();
                let mut seen = 0;
                while let Some(field) = map.next_key_seed(FieldSeed(TOP_FIELDS))? {
                    let Some(i) = field else {
                        map.next_value::<IgnoredAny>()?;
                        continue;
                    };
                    first_time(&mut seen, i, TOP_FIELDS)?;
                    match i {
                        0 => obj.api_version = map.next_value::<Option<TypeName>>()?.map(|t| t.0),
                        1 => obj.kind = map.next_value::<Option<TypeName>>()?.map(|t| t.0),
                        _ => {
                            obj.metadata =
                                map.next_value::<Option<ObjectMeta>>()?.unwrap_or_default()
                        }
                    }
                }
                Ok(obj)
            }
        }
        deserializer.deserialize_map(PartialVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn the_metadata_representation_decodes_with_its_type_meta_shared_not_allocated() {
        let json = r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","resourceVersion":"3","ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u","controller":true}]}}"#;
        let p: PartialObjectMetadata = serde_json::from_str(json).unwrap();
        assert!(p.is_metadata_representation());
        assert!(matches!(p.kind, Some(Cow::Borrowed(_))));
        assert!(matches!(p.api_version, Some(Cow::Borrowed(_))));
        assert_eq!(p.resource_version(), Some("3"));
        let owners = p.metadata.owner_references.as_deref().unwrap_or_default();
        assert_eq!(owners[0].name, "rs");
        // Serialized back, it is the same JSON.
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::from_str::<serde_json::Value>(json).unwrap()
        );
        assert_eq!(
            PartialObjectMetadata::new(p.metadata.clone()),
            p,
            "new() gives the representation's type meta"
        );
    }

    #[test]
    fn a_whole_object_keeps_only_its_type_meta_and_metadata() {
        let json = sim_apiserver::fixtures::realistic_pod_json(3);
        let p: PartialObjectMetadata = serde_json::from_str(&json).unwrap();
        let full: DynamicObject = serde_json::from_str(&json).unwrap();
        assert!(!p.is_metadata_representation());
        assert_eq!((p.api_version(), p.kind()), (Some("v1"), Some("Pod")));
        assert_eq!(p.metadata, full.metadata);
        let back = serde_json::to_value(&p).unwrap();
        let fields: Vec<&str> = back
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(fields, ["apiVersion", "kind", "metadata"]);
        // An item of a built-in list carries no type meta at all.
        let item: PartialObjectMetadata =
            serde_json::from_str(r#"{"metadata":{"name":"x"},"spec":{"a":[1,{"b":null}]}}"#)
                .unwrap();
        assert_eq!(
            (item.kind(), item.api_version(), item.name()),
            (None, None, "x")
        );
        assert!(item
            .with_type("meta.k8s.io/v1", "PartialObjectMetadata")
            .is_metadata_representation());
    }

    #[test]
    fn malformed_objects_are_refused_not_truncated() {
        for bad in [
            r#"{"metadata":{"name":1}}"#,
            r#"{"metadata":{"labels":{"a":null}}}"#,
            r#"{"kind":"A","kind":"B"}"#,
            r#"{"metadata":{},"metadata":{}}"#,
            r#"{"kind":7}"#,
            r#"{"spec":{"x":}}"#,
            r#"["v1","Pod"]"#,
            r#"42"#,
        ] {
            assert!(
                serde_json::from_str::<PartialObjectMetadata>(bad).is_err(),
                "{bad}"
            );
        }
    }
}

#[cfg(test)]
mod proptest_partial {
    //! Invariant PM1 against [`DynamicObject`]'s decode, over objects with generated type meta,
    //! metadata (sometimes of the wrong shape) and other fields.
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::DynamicObject;

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            6 => "[a-zA-Z0-9./\"\\\\é-]{0,8}".prop_map(Value::String),
            1 => Just(Value::Null),
            1 => any::<i64>().prop_map(Value::from),
            1 => Just(json!([1, {"a": null}])),
        ]
    }

    fn metadata() -> impl Strategy<Value = Value> {
        let field = prop::sample::select(vec![
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "generation",
            "labels",
            "annotations",
            "finalizers",
            "ownerReferences",
            "managedFields",
            "unknown",
        ]);
        let value = prop_oneof![
            4 => scalar(),
            2 => prop::collection::btree_map("[a-z]{1,3}", "[a-z]{0,3}", 0..3)
                .prop_map(|m| json!(m)),
            1 => Just(json!([{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u"}])),
            1 => Just(json!(["f"])),
        ];
        prop_oneof![
            8 => prop::collection::btree_map(field, value, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().map(|(k, v)| (k.to_string(), v)).collect())),
            1 => scalar(),
        ]
    }

    fn object() -> impl Strategy<Value = Value> {
        (
            prop::option::of(scalar()),
            prop::option::of(scalar()),
            prop::option::of(metadata()),
            prop::collection::btree_map("[a-z]{1,6}", scalar(), 0..3),
        )
            .prop_map(|(api_version, kind, metadata, rest)| {
                let mut m: serde_json::Map<String, Value> = rest.into_iter().collect();
                for (k, v) in [
                    ("apiVersion", api_version),
                    ("kind", kind),
                    ("metadata", metadata),
                ] {
                    if let Some(v) = v {
                        m.insert(k.to_string(), v);
                    }
                }
                Value::Object(m)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn p1_partial_decode_agrees_with_the_full_decode(v in object()) {
            let text = v.to_string();
            let partial = serde_json::from_str::<PartialObjectMetadata>(&text);
            let full = serde_json::from_str::<DynamicObject>(&text);
            prop_assert_eq!(partial.is_ok(), full.is_ok(), "{}", text);
            if let (Ok(p), Ok(f)) = (partial, full) {
                prop_assert_eq!(p.api_version(), f.api_version());
                prop_assert_eq!(p.kind(), f.kind());
                prop_assert_eq!(&p.metadata, &f.metadata);
            }
        }
    }
}
