//! [`Pb`]: the `k8s_pb` resource types (feature `k8s-pb`), the prost messages of Kubernetes'
//! built-in kinds which the reflector decodes from protobuf, as informer objects.
//!
//! `ObjectMeta`'s strings are `Option<String>` and its maps are `BTreeMap`s in `k8s_pb`, as in this
//! crate's own [`ObjectMeta`](crate::ObjectMeta), so every accessor lends the message's own fields:
//! no copy. An empty map reads as absent, as the server's JSON omits it.

use std::collections::BTreeMap;

use crate::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta as PbMeta;

/// The accessors of `Pb<T>`, on the message.
mod __pb {
    use super::*;

    fn meta<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<&PbMeta> {
        o.metadata()
    }
    pub fn has_meta<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> bool {
        meta(o).is_some()
    }
    pub fn name<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> &str {
        meta(o).and_then(|m| m.name.as_deref()).unwrap_or("")
    }
    pub fn namespace<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<&str> {
        meta(o).and_then(|m| m.namespace.as_deref())
    }
    pub fn uid<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<&str> {
        meta(o).and_then(|m| m.uid.as_deref())
    }
    pub fn resource_version<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<&str> {
        meta(o).and_then(|m| m.resource_version.as_deref())
    }
    pub fn generation<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<i64> {
        meta(o).and_then(|m| m.generation)
    }
    pub fn labels<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(
        o: &T,
    ) -> Option<&BTreeMap<String, String>> {
        meta(o).map(|m| &m.labels).filter(|l| !l.is_empty())
    }
    pub fn annotations<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(
        o: &T,
    ) -> Option<&BTreeMap<String, String>> {
        meta(o).map(|m| &m.annotations).filter(|a| !a.is_empty())
    }
    pub fn finalizers<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> &[String] {
        meta(o).map(|m| m.finalizers.as_slice()).unwrap_or(&[])
    }
    pub fn deletion_timestamp<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<String> {
        let t = meta(o)?.deletion_timestamp.as_ref()?;
        Some(crate::time::format_rfc3339(t.seconds.unwrap_or(0), 0, 0))
    }
}

/// A `k8s_pb` object (feature `k8s-pb`): the prost message of a built-in kind, as an informer
/// object. `Pb<Pod>` is an [`Object`](crate::Object) (keys, indexes, listers, selectors) and the
/// reflector decodes it from protobuf; it dereferences to the message, so `pod.spec` reads as on a
/// `Pod`.
///
/// Why a wrapper: `Object` is implemented for every `k8s_openapi` type by one blanket
/// implementation, and Rust cannot tell that a `k8s_pb` type will never be a `k8s_openapi`
/// resource, so an implementation for `k8s_pb::…::Pod` itself would conflict with it whenever
/// both features are on (features must add up). On `Pb<T>` it cannot, and it covers every
/// `k8s_pb` resource type at once.
///
/// ```
/// use store_index::k8s_pb::api::core::v1::Pod;
/// use store_index::{Object, Pb};
///
/// let pod = Pb(Pod { metadata: Some(Default::default()), ..Default::default() });
/// assert_eq!((pod.name(), pod.kind()), ("", Some("Pod")));
/// assert!(pod.spec.is_none());
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pb<T>(pub T);

impl<T> Pb<T> {
    /// The message.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> From<T> for Pb<T> {
    fn from(message: T) -> Self {
        Pb(message)
    }
}

impl<T> std::ops::Deref for Pb<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Pb<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: crate::k8s_pb::Resource> crate::k8s_pb::Resource for Pb<T> {
    const API_VERSION: &'static str = T::API_VERSION;
    const GROUP: &'static str = T::GROUP;
    const KIND: &'static str = T::KIND;
    const VERSION: &'static str = T::VERSION;
    const URL_PATH_SEGMENT: &'static str = T::URL_PATH_SEGMENT;
    type Scope = T::Scope;
}

impl<T> crate::Object for Pb<T>
where
    T: crate::k8s_pb::Metadata<Ty = PbMeta> + Send + Sync + 'static,
{
    fn has_meta(&self) -> bool {
        __pb::has_meta(&self.0)
    }
    fn name(&self) -> &str {
        __pb::name(&self.0)
    }
    fn namespace(&self) -> Option<&str> {
        __pb::namespace(&self.0)
    }
    fn uid(&self) -> Option<&str> {
        __pb::uid(&self.0)
    }
    fn resource_version(&self) -> Option<&str> {
        __pb::resource_version(&self.0)
    }
    fn generation(&self) -> Option<i64> {
        __pb::generation(&self.0)
    }
    fn labels(&self) -> Option<&BTreeMap<String, String>> {
        __pb::labels(&self.0)
    }
    fn annotations(&self) -> Option<&BTreeMap<String, String>> {
        __pb::annotations(&self.0)
    }
    fn deletion_timestamp(&self) -> Option<String> {
        __pb::deletion_timestamp(&self.0)
    }
    fn finalizers(&self) -> &[String] {
        __pb::finalizers(&self.0)
    }
    fn api_version(&self) -> Option<&str> {
        Some(T::API_VERSION)
    }
    fn kind(&self) -> Option<&str> {
        Some(T::KIND)
    }
    fn drop_managed_fields(&mut self) -> bool {
        if let Some(meta) = crate::k8s_pb::Metadata::metadata_mut(&mut self.0) {
            meta.managed_fields = Vec::new();
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::k8s_pb::api::core::v1::Pod;
    use crate::k8s_pb::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::{meta_namespace_key, Indexer, Lister, Object, Selector, NAMESPACE_INDEX};

    fn pod(ns: &str, name: &str, app: &str) -> Pb<Pod> {
        Pb(Pod {
            metadata: Some(PbMeta {
                name: Some(name.into()),
                namespace: Some(ns.into()),
                resource_version: Some("7".into()),
                labels: [("app".to_string(), app.to_string())].into(),
                deletion_timestamp: Some(Time {
                    seconds: Some(1_793_527_200),
                    nanos: None,
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    #[test]
    fn k8s_pb_objects_have_keys_labels_and_type_meta() {
        let p = pod("ns", "a", "web");
        assert_eq!(meta_namespace_key(&p).unwrap(), "ns/a");
        assert_eq!(
            (p.label("app"), p.resource_version()),
            (Some("web"), Some("7"))
        );
        assert_eq!((p.api_version(), p.kind()), (Some("v1"), Some("Pod")));
        assert_eq!(
            p.deletion_timestamp().as_deref(),
            Some("2026-11-01T10:00:00Z")
        );
        assert!(p.annotations().is_none());
        assert!(!Pb(Pod::default()).has_meta());
        assert!(meta_namespace_key(&Pb(Pod::default())).is_err());
    }

    #[test]
    fn k8s_pb_objects_work_with_indexes_listers_and_selectors() {
        let indexer = Indexer::<Pb<Pod>>::new(crate::Indexers::new().with_namespace_index());
        for (ns, name, app) in [("a", "1", "web"), ("a", "2", "db"), ("b", "3", "web")] {
            indexer
                .add(std::sync::Arc::new(pod(ns, name, app)))
                .unwrap();
        }
        let mut in_a = indexer.by_index(NAMESPACE_INDEX, "a").unwrap();
        in_a.sort_by(|x, y| x.name().cmp(y.name()));
        assert_eq!(
            in_a.iter().map(|p| p.name()).collect::<Vec<_>>(),
            ["1", "2"]
        );
        let web: Selector = "app=web".parse().unwrap();
        let lister = Lister::new(indexer.clone());
        let mut names: Vec<_> = lister
            .list(&web)
            .iter()
            .map(|p| p.name().to_string())
            .collect();
        names.sort();
        assert_eq!(names, ["1", "3"]);
        assert_eq!(lister.namespaced("b").list(&web).len(), 1);
    }
}
