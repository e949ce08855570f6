//! The object model: what the machinery needs to know about a Kubernetes object.
//!
//! Everything below the informer reads objects only through the [`Object`] trait, so the same code
//! serves users' own serde structs, [`DynamicObject`](crate::DynamicObject) for custom resources,
//! [`CompactObject`](crate::CompactObject) for big caches,
//! [`PartialObjectMetadata`](crate::PartialObjectMetadata) for metadata-only caches and, behind the
//! `k8s-openapi` feature, every `k8s_openapi` resource type.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Standard Kubernetes object metadata (`metadata` in every object).
///
/// Every field of the API's `ObjectMeta` is modelled, so an object decoded into it and encoded again
/// loses nothing. Timestamps are kept as the RFC 3339 strings the server sends: this layer never
/// computes with them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Unique name within the namespace (or cluster, for cluster-scoped objects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Prefix the server uses to generate a name when `name` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate_name: Option<String>,
    /// Namespace; absent or empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Deprecated self link, kept only for round-tripping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
    /// Unique id of this incarnation of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Opaque version string; compared for equality only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// Sequence number of the desired state (spec) generation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Creation time, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<String>,
    /// Set when deletion has been requested (graceful deletion or finalizers pending), RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<String>,
    /// Seconds allowed for graceful termination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    /// Labels, used by selectors and indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Owners of this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_references: Option<Vec<OwnerReference>>,
    /// Finalizers that must be removed before the object is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizers: Option<Vec<String>>,
    /// Server-side apply field ownership, kept as raw JSON (often the largest part of the
    /// metadata; a transform that drops it is a cheap way to save memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<Vec<serde_json::Value>>,
}

/// A reference from an object to its owner.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// API version of the owner.
    pub api_version: String,
    /// Kind of the owner.
    pub kind: String,
    /// Name of the owner.
    pub name: String,
    /// UID of the owner.
    pub uid: String,
    /// Whether the owner is the managing controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner cannot be deleted before this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// A Kubernetes object as the informer machinery sees it: metadata accessors and, where known, the
/// object's `apiVersion` and `kind`.
///
/// Implement it for your own serde type by returning its metadata; every accessor then has a
/// default:
///
/// ```
/// use store_index::{Object, ObjectMeta};
///
/// #[derive(serde::Deserialize)]
/// struct Widget {
///     metadata: ObjectMeta,
///     spec: serde_json::Value,
/// }
///
/// impl Object for Widget {
///     fn object_meta(&self) -> Option<&ObjectMeta> {
///         Some(&self.metadata)
///     }
/// }
///
/// let w: Widget = serde_json::from_str(
///     r#"{"metadata":{"name":"w1","namespace":"ns","resourceVersion":"7"},"spec":{}}"#,
/// ).unwrap();
/// assert_eq!(w.name(), "w1");
/// assert_eq!(w.namespace(), Some("ns"));
/// assert_eq!(w.resource_version(), Some("7"));
/// ```
///
/// Types whose metadata is stored differently (the `k8s_openapi` types) override the accessors
/// instead and return `None` from [`object_meta`](Object::object_meta); the machinery only ever
/// calls the accessors.
pub trait Object: Send + Sync + 'static {
    /// This crate's metadata struct, when the type stores one.
    fn object_meta(&self) -> Option<&ObjectMeta> {
        None
    }

    /// Whether the object has metadata at all. Key functions refuse objects without it
    /// (`object has no meta`).
    fn has_meta(&self) -> bool {
        self.object_meta().is_some()
    }

    /// The name, or `""` when unset.
    fn name(&self) -> &str {
        self.object_meta()
            .and_then(|m| m.name.as_deref())
            .unwrap_or("")
    }

    /// The namespace; `None` (or `Some("")`) for cluster-scoped objects.
    fn namespace(&self) -> Option<&str> {
        self.object_meta().and_then(|m| m.namespace.as_deref())
    }

    /// The UID.
    fn uid(&self) -> Option<&str> {
        self.object_meta().and_then(|m| m.uid.as_deref())
    }

    /// The resource version.
    fn resource_version(&self) -> Option<&str> {
        self.object_meta()
            .and_then(|m| m.resource_version.as_deref())
    }

    /// The generation.
    fn generation(&self) -> Option<i64> {
        self.object_meta().and_then(|m| m.generation)
    }

    /// The labels.
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        self.object_meta().and_then(|m| m.labels.as_ref())
    }

    /// The annotations.
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        self.object_meta().and_then(|m| m.annotations.as_ref())
    }

    /// The deletion timestamp, RFC 3339, when deletion has been requested.
    fn deletion_timestamp(&self) -> Option<String> {
        self.object_meta()
            .and_then(|m| m.deletion_timestamp.clone())
    }

    /// The finalizers that must be removed before the object goes (empty when none).
    fn finalizers(&self) -> &[String] {
        self.object_meta()
            .and_then(|m| m.finalizers.as_deref())
            .unwrap_or(&[])
    }

    /// The `apiVersion` (`group/version`, or `version` for the core group), when known.
    fn api_version(&self) -> Option<&str> {
        None
    }

    /// The `kind`, when known.
    fn kind(&self) -> Option<&str> {
        None
    }

    /// One label's value.
    fn label(&self, key: &str) -> Option<&str> {
        self.labels().and_then(|l| l.get(key)).map(String::as_str)
    }

    /// One annotation's value.
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// Removes `metadata.managedFields` (server-side apply's record of which manager owns which
    /// field), leaving everything else as it is; returns whether the object holds none
    /// afterwards. An informer's handlers rarely read them, and they are often the largest part
    /// of an object's metadata: `drop_managed_fields` options call this on every object before
    /// it is cached (see `HttpListerWatcher::drop_managed_fields` in the reflector).
    ///
    /// Implemented by every type of this crate that can hold them (`DynamicObject`,
    /// `PartialObjectMetadata`, `CompactObject` in JSON or protobuf, `k8s_openapi` and `Pb<T>` types); the
    /// default, for a type that does not say how, leaves the object as it is and returns
    /// `false`. Implement it for your own type by clearing its field:
    ///
    /// ```
    /// use store_index::{Object, ObjectMeta};
    ///
    /// struct Widget {
    ///     metadata: ObjectMeta,
    /// }
    ///
    /// impl Object for Widget {
    ///     fn object_meta(&self) -> Option<&ObjectMeta> {
    ///         Some(&self.metadata)
    ///     }
    ///     fn drop_managed_fields(&mut self) -> bool {
    ///         self.metadata.managed_fields = None;
    ///         true
    ///     }
    /// }
    /// ```
    fn drop_managed_fields(&mut self) -> bool {
        false
    }
}

#[cfg(feature = "k8s-openapi")]
mod k8s {
    //! `Object` for every `k8s_openapi` resource type.
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;

    use super::Object;

    impl<T> Object for T
    where
        T: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = K8sMeta> + Send + Sync + 'static,
    {
        fn has_meta(&self) -> bool {
            true
        }
        fn name(&self) -> &str {
            self.metadata().name.as_deref().unwrap_or("")
        }
        fn namespace(&self) -> Option<&str> {
            self.metadata().namespace.as_deref()
        }
        fn uid(&self) -> Option<&str> {
            self.metadata().uid.as_deref()
        }
        fn resource_version(&self) -> Option<&str> {
            self.metadata().resource_version.as_deref()
        }
        fn generation(&self) -> Option<i64> {
            self.metadata().generation
        }
        fn labels(&self) -> Option<&BTreeMap<String, String>> {
            self.metadata().labels.as_ref()
        }
        fn annotations(&self) -> Option<&BTreeMap<String, String>> {
            self.metadata().annotations.as_ref()
        }
        fn deletion_timestamp(&self) -> Option<String> {
            let time = self.metadata().deletion_timestamp.as_ref()?;
            serde_json::to_value(time)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
        }
        fn finalizers(&self) -> &[String] {
            self.metadata().finalizers.as_deref().unwrap_or(&[])
        }
        fn api_version(&self) -> Option<&str> {
            Some(T::API_VERSION)
        }
        fn kind(&self) -> Option<&str> {
            Some(T::KIND)
        }
        fn drop_managed_fields(&mut self) -> bool {
            self.metadata_mut().managed_fields = None;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoMeta;
    impl Object for NoMeta {}

    #[test]
    fn a_type_without_metadata_reports_empty_accessors() {
        assert!(!NoMeta.has_meta());
        assert_eq!(NoMeta.name(), "");
        assert_eq!(NoMeta.namespace(), None);
        assert_eq!(NoMeta.resource_version(), None);
    }

    #[test]
    fn object_meta_round_trips_every_field() {
        let json = r#"{"name":"a","generateName":"a-","namespace":"ns","selfLink":"/x","uid":"u",
            "resourceVersion":"5","generation":2,"creationTimestamp":"2024-01-01T00:00:00Z",
            "deletionTimestamp":"2024-01-02T00:00:00Z","deletionGracePeriodSeconds":30,
            "labels":{"app":"web"},"annotations":{"note":"x"},
            "ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"n","uid":"nu","controller":true}],
            "finalizers":["f"],"managedFields":[{"manager":"kubectl"}]}"#;
        let meta: ObjectMeta = serde_json::from_str(json).unwrap();
        let back: serde_json::Value = serde_json::to_value(&meta).unwrap();
        let original: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(back, original);
    }
}
