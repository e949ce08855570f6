//! `Object` for the `k8s_pb` resource types (feature `k8s-pb`): the prost messages of Kubernetes'
//! built-in kinds, which the reflector decodes from protobuf.
//!
//! A blanket implementation over `k8s_pb::Metadata` would overlap with the one over
//! `k8s_openapi::Metadata` (coherence cannot tell the two traits apart), so `Object` is
//! implemented for the list of common types below by [`object_for_k8s_pb!`](crate::object_for_k8s_pb),
//! which also serves any other `k8s_pb` type a user needs.
//!
//! `ObjectMeta`'s strings are `Option<String>` and its maps are `BTreeMap`s in `k8s_pb`, as in this
//! crate's own [`ObjectMeta`](crate::ObjectMeta), so every accessor lends the message's own fields:
//! no copy. An empty map reads as absent, as the server's JSON omits it.

use std::collections::BTreeMap;

use crate::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta as PbMeta;

/// The accessors `object_for_k8s_pb!` expands to. Not public API.
#[doc(hidden)]
pub mod __pb {
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
    pub fn deletion_timestamp<T: crate::k8s_pb::Metadata<Ty = PbMeta>>(o: &T) -> Option<String> {
        let t = meta(o)?.deletion_timestamp.as_ref()?;
        Some(crate::time::format_rfc3339(t.seconds.unwrap_or(0), 0, 0))
    }
}

/// Implements [`Object`](crate::Object) for `k8s_pb` resource types (feature `k8s-pb`): the
/// common ones already are; name any other here.
///
/// ```
/// # #[cfg(feature = "k8s-pb")] {
/// use store_index::{k8s_pb::api::core::v1::Pod, Object};
/// let pod = Pod { metadata: Some(Default::default()), ..Default::default() };
/// assert_eq!((pod.name(), pod.kind()), ("", Some("Pod")));
/// # }
/// ```
#[macro_export]
macro_rules! object_for_k8s_pb {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Object for $t {
            fn has_meta(&self) -> bool { $crate::__pb::has_meta(self) }
            fn name(&self) -> &str { $crate::__pb::name(self) }
            fn namespace(&self) -> Option<&str> { $crate::__pb::namespace(self) }
            fn uid(&self) -> Option<&str> { $crate::__pb::uid(self) }
            fn resource_version(&self) -> Option<&str> { $crate::__pb::resource_version(self) }
            fn generation(&self) -> Option<i64> { $crate::__pb::generation(self) }
            fn labels(&self) -> Option<&::std::collections::BTreeMap<String, String>> {
                $crate::__pb::labels(self)
            }
            fn annotations(&self) -> Option<&::std::collections::BTreeMap<String, String>> {
                $crate::__pb::annotations(self)
            }
            fn deletion_timestamp(&self) -> Option<String> { $crate::__pb::deletion_timestamp(self) }
            fn api_version(&self) -> Option<&str> {
                Some(<$t as $crate::k8s_pb::Resource>::API_VERSION)
            }
            fn kind(&self) -> Option<&str> { Some(<$t as $crate::k8s_pb::Resource>::KIND) }
        }
    )+};
}

/// Applies `$m!` to the list of common `k8s_pb` resource types (the same list the reflector
/// decodes from protobuf). Not public API.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_common_k8s_pb_types {
    ($m:path) => {
        $m!(
            $crate::k8s_pb::api::core::v1::Pod,
            $crate::k8s_pb::api::core::v1::ConfigMap,
            $crate::k8s_pb::api::core::v1::Secret,
            $crate::k8s_pb::api::core::v1::Service,
            $crate::k8s_pb::api::core::v1::Namespace,
            $crate::k8s_pb::api::core::v1::Node,
            $crate::k8s_pb::api::core::v1::Endpoints,
            $crate::k8s_pb::api::core::v1::Event,
            $crate::k8s_pb::api::core::v1::PersistentVolume,
            $crate::k8s_pb::api::core::v1::PersistentVolumeClaim,
            $crate::k8s_pb::api::core::v1::ServiceAccount,
            $crate::k8s_pb::api::core::v1::ReplicationController,
            $crate::k8s_pb::api::core::v1::LimitRange,
            $crate::k8s_pb::api::core::v1::ResourceQuota,
            $crate::k8s_pb::api::apps::v1::Deployment,
            $crate::k8s_pb::api::apps::v1::ReplicaSet,
            $crate::k8s_pb::api::apps::v1::StatefulSet,
            $crate::k8s_pb::api::apps::v1::DaemonSet,
            $crate::k8s_pb::api::apps::v1::ControllerRevision,
            $crate::k8s_pb::api::batch::v1::Job,
            $crate::k8s_pb::api::batch::v1::CronJob,
            $crate::k8s_pb::api::networking::v1::Ingress,
            $crate::k8s_pb::api::networking::v1::IngressClass,
            $crate::k8s_pb::api::networking::v1::NetworkPolicy,
            $crate::k8s_pb::api::discovery::v1::EndpointSlice,
            $crate::k8s_pb::api::coordination::v1::Lease,
            $crate::k8s_pb::api::rbac::v1::Role,
            $crate::k8s_pb::api::rbac::v1::RoleBinding,
            $crate::k8s_pb::api::rbac::v1::ClusterRole,
            $crate::k8s_pb::api::rbac::v1::ClusterRoleBinding,
            $crate::k8s_pb::api::policy::v1::PodDisruptionBudget,
            $crate::k8s_pb::api::storage::v1::StorageClass,
            $crate::k8s_pb::api::storage::v1::CSIDriver,
            $crate::k8s_pb::api::storage::v1::CSINode,
            $crate::k8s_pb::api::storage::v1::VolumeAttachment,
            $crate::k8s_pb::api::autoscaling::v2::HorizontalPodAutoscaler,
            $crate::k8s_pb::api::scheduling::v1::PriorityClass,
            $crate::k8s_pb::api::events::v1::Event,
            $crate::k8s_pb::api::admissionregistration::v1::MutatingWebhookConfiguration,
            $crate::k8s_pb::api::admissionregistration::v1::ValidatingWebhookConfiguration,
            $crate::k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        );
    };
}

__with_common_k8s_pb_types!(crate::object_for_k8s_pb);

#[cfg(test)]
mod tests {
    use crate::k8s_pb::api::core::v1::Pod;
    use crate::k8s_pb::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;
    use crate::{meta_namespace_key, Indexer, Lister, Object, Selector, NAMESPACE_INDEX};

    fn pod(ns: &str, name: &str, app: &str) -> Pod {
        Pod {
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
        }
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
        assert!(!Pod::default().has_meta());
        assert!(meta_namespace_key(&Pod::default()).is_err());
    }

    #[test]
    fn k8s_pb_objects_work_with_indexes_listers_and_selectors() {
        let indexer = Indexer::<Pod>::new(crate::Indexers::new().with_namespace_index());
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
