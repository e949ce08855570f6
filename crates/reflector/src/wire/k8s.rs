//! Typed `k8s_openapi` objects (feature `k8s-openapi`): addressing from the types' own metadata,
//! and [`Decode`](crate::Decode) for the commonly used resource types, each object kept compact
//! (every list and string allocated at exactly its length: see
//! [`decode_with_serde_compacted!`](crate::decode_with_serde_compacted)).
//!
//! `Decode` cannot be implemented for every `k8s_openapi` type at once (it would overlap with the
//! implementations for `DynamicObject` and `CompactObject`), so it is implemented for the list
//! below; another type can be watched as a `DynamicObject` or `CompactObject` and decoded on
//! demand, or wrapped in a newtype of your own with `decode_with_serde!`.

use std::any::TypeId;

use crate::wire::resource::Resource;

impl Resource {
    /// The address of a `k8s_openapi` resource type: group, version, plural and scope from the
    /// type's own metadata.
    ///
    /// ```
    /// use k8s_openapi::api::apps::v1::Deployment;
    /// use k8s_openapi::api::core::v1::Node;
    /// use reflector::Resource;
    ///
    /// assert_eq!(Resource::of_k8s::<Deployment>().path(Some("ns")), "/apis/apps/v1/namespaces/ns/deployments");
    /// assert_eq!(Resource::of_k8s::<Node>().path(None), "/api/v1/nodes");
    /// ```
    pub fn of_k8s<T: k8s_openapi::Resource>() -> Self
    where
        T::Scope: 'static,
    {
        let namespaced =
            TypeId::of::<T::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
        if namespaced {
            Resource::namespaced(T::GROUP, T::VERSION, T::URL_PATH_SEGMENT)
        } else {
            Resource::cluster(T::GROUP, T::VERSION, T::URL_PATH_SEGMENT)
        }
    }
}

/// `Decode` for `k8s_openapi` types of `k8s.io/api` kinds. From JSON, compacted as
/// [`decode_with_serde_compacted!`](crate::decode_with_serde_compacted) does: a typed object holds
/// many lists, each decoded with up to half its capacity unused, and the cache keeps a copy
/// allocated at exactly their lengths (about a fifth less memory for a Pod). From protobuf (feature
/// `protobuf-json`), the message read straight into the type through Kubernetes' descriptors
/// (`convert::decode_message_into`, invariant WS1: the object its JSON gives), every list
/// allocated once at its length, counted on the wire; a message that names another kind is
/// refused. Protobuf is used when asked for (`Encoding::Protobuf`), never by default: the
/// message costs more to read into the type than its JSON (about 1.8× in the `protobuf_decode`
/// bench), for half the bytes on the wire.
macro_rules! decode_k8s_openapi {
    ($($t:ty),+ $(,)?) => {$(
        impl crate::Decode for $t {
            #[cfg(feature = "protobuf-json")]
            const PROTOBUF: bool = true;

            /// JSON unless asked: reading a message into the type costs more than serde's JSON
            /// decode (docs/protobuf.md has the figures); protobuf halves the bytes.
            #[cfg(feature = "protobuf-json")]
            fn protobuf_by_default(resource: &Resource) -> bool {
                let _ = resource;
                false
            }

            #[cfg(feature = "protobuf-json")]
            fn decode_protobuf(
                message: &bytes::Bytes,
                source: &crate::ProtobufSource<'_>,
            ) -> Result<Self, crate::protobuf::ProtobufError> {
                use k8s_openapi::Resource as _;
                decode_protobuf_as(
                    <$t>::API_VERSION,
                    <$t>::KIND,
                    message,
                    source,
                )
            }

            fn decode<'de, D: serde::Deserializer<'de>>(
                deserializer: D,
                _frame: &crate::DecodeSource<'de>,
            ) -> Result<Self, D::Error> {
                <$t as serde::Deserialize<'de>>::deserialize(deserializer)
                    .map(|decoded| decoded.clone())
            }

            fn decode_exact<'de>(
                text: &'de str,
                _frame: &crate::DecodeSource<'de>,
            ) -> Result<Self, serde_json::Error> {
                crate::__exact::from_str_exact::<$t>(text)
            }
        }
    )+};
}

/// A `k8s_openapi` object of `api_version`/`kind` from its message; a message whose envelope or
/// list names another kind is refused (one that names none, a list item or a bare watch
/// message, is taken as this kind's).
#[cfg(feature = "protobuf-json")]
fn decode_protobuf_as<T: serde::de::DeserializeOwned>(
    api_version: &str,
    kind: &str,
    message: &bytes::Bytes,
    source: &crate::ProtobufSource<'_>,
) -> Result<T, crate::protobuf::ProtobufError> {
    let named = |given: &str, want: &str| given.is_empty() || given == want;
    if !named(source.kind(), kind) || !named(source.api_version(), api_version) {
        return Err(crate::protobuf::ProtobufError::UnknownKind {
            api_version: source.api_version().to_string(),
            kind: source.kind().to_string(),
        });
    }
    crate::wire::protobuf::convert::decode_message_into(api_version, kind, message)
}

decode_k8s_openapi!(
    k8s_openapi::api::core::v1::Pod,
    k8s_openapi::api::core::v1::ConfigMap,
    k8s_openapi::api::core::v1::Secret,
    k8s_openapi::api::core::v1::Service,
    k8s_openapi::api::core::v1::Namespace,
    k8s_openapi::api::core::v1::Node,
    k8s_openapi::api::core::v1::Endpoints,
    k8s_openapi::api::core::v1::Event,
    k8s_openapi::api::core::v1::PersistentVolume,
    k8s_openapi::api::core::v1::PersistentVolumeClaim,
    k8s_openapi::api::core::v1::ServiceAccount,
    k8s_openapi::api::core::v1::ReplicationController,
    k8s_openapi::api::core::v1::LimitRange,
    k8s_openapi::api::core::v1::ResourceQuota,
    k8s_openapi::api::apps::v1::Deployment,
    k8s_openapi::api::apps::v1::ReplicaSet,
    k8s_openapi::api::apps::v1::StatefulSet,
    k8s_openapi::api::apps::v1::DaemonSet,
    k8s_openapi::api::apps::v1::ControllerRevision,
    k8s_openapi::api::batch::v1::Job,
    k8s_openapi::api::batch::v1::CronJob,
    k8s_openapi::api::networking::v1::Ingress,
    k8s_openapi::api::networking::v1::IngressClass,
    k8s_openapi::api::networking::v1::NetworkPolicy,
    k8s_openapi::api::discovery::v1::EndpointSlice,
    k8s_openapi::api::coordination::v1::Lease,
    k8s_openapi::api::rbac::v1::Role,
    k8s_openapi::api::rbac::v1::RoleBinding,
    k8s_openapi::api::rbac::v1::ClusterRole,
    k8s_openapi::api::rbac::v1::ClusterRoleBinding,
    k8s_openapi::api::policy::v1::PodDisruptionBudget,
    k8s_openapi::api::storage::v1::StorageClass,
    k8s_openapi::api::storage::v1::CSIDriver,
    k8s_openapi::api::storage::v1::CSINode,
    k8s_openapi::api::storage::v1::VolumeAttachment,
    k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler,
    k8s_openapi::api::scheduling::v1::PriorityClass,
    k8s_openapi::api::events::v1::Event,
    k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
);

// Not of `k8s.io/api`: no descriptor is compiled in for it, and kube-apiserver serves it in JSON.
crate::decode_with_serde_compacted!(
    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
);

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use k8s_openapi::api::core::v1::Pod;

    use crate::store_index::Object;
    use crate::{Resource, WatchDecoder, WatchEvent};

    /// Decoded typed objects are compact: every list's capacity is its length (serde alone leaves
    /// `env` of 3 with room for 4, `conditions` of 5 with room for 8), in watch events and in list
    /// pages alike.
    #[test]
    fn typed_objects_are_kept_compact_every_list_at_its_length() {
        fn assert_compact(pod: &Pod) {
            let spec = pod.spec.as_ref().unwrap();
            assert_eq!(spec.containers.capacity(), spec.containers.len());
            let env = spec.containers[0].env.as_ref().unwrap();
            assert_eq!((env.len(), env.capacity()), (3, 3));
            let conditions = pod.status.as_ref().unwrap().conditions.as_ref().unwrap();
            assert_eq!((conditions.len(), conditions.capacity()), (5, 5));
        }
        let condition = |t: &str| format!(r#"{{"type":"{t}","status":"True"}}"#);
        let conditions: Vec<String> = ["A", "B", "C", "D", "E"]
            .iter()
            .map(|t| condition(t))
            .collect();
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","namespace":"ns","resourceVersion":"5"}},"spec":{{"containers":[{{"name":"c","env":[{{"name":"a"}},{{"name":"b"}},{{"name":"c"}}]}}]}},"status":{{"conditions":[{}]}}}}"#,
            conditions.join(",")
        );
        let mut decoder = WatchDecoder::<Pod>::default();
        let mut events = Vec::new();
        let line = format!("{{\"type\":\"ADDED\",\"object\":{pod}}}\n");
        decoder.decode(Bytes::from(line), &mut events).unwrap();
        match &events[0] {
            WatchEvent::Added(pod) => assert_compact(pod),
            other => panic!("{other:?}"),
        }
        let page = format!(
            r#"{{"kind":"PodList","apiVersion":"v1","metadata":{{"resourceVersion":"9"}},"items":[{pod},{pod}]}}"#
        );
        let list = crate::ObjectList::<Pod>::from_json(&Bytes::from(page)).unwrap();
        assert_eq!(list.items.len(), 2);
        list.items.iter().for_each(assert_compact);
    }

    /// A realistic pod decoded in one exact pass equals serde's decode of it, every list at its
    /// length (S1 on a real type: the counts are handed out in step through k8s-openapi's own
    /// deserializers).
    #[test]
    fn a_realistic_pod_decodes_exactly_to_what_serde_decodes() {
        use crate::{Decode, DecodeSource};
        for i in [0, 7, 42] {
            let text = sim_apiserver::fixtures::realistic_pod_json(i);
            let bytes = Bytes::from(text.clone());
            let frame = DecodeSource::new(&text, &bytes, false);
            let exact = Pod::decode_exact(&text, &frame).unwrap();
            let plain: Pod = serde_json::from_str(&text).unwrap();
            assert_eq!(exact, plain);
            let spec = exact.spec.as_ref().unwrap();
            assert_eq!(spec.containers.len(), spec.containers.capacity());
            for env in spec.containers.iter().filter_map(|c| c.env.as_ref()) {
                assert_eq!(env.len(), env.capacity(), "env at its length");
            }
        }
    }

    #[test]
    fn typed_pods_decode_from_a_watch_stream() {
        let mut decoder = WatchDecoder::<Pod>::default();
        let mut events = Vec::new();
        decoder
            .decode(
                Bytes::from_static(br#"{"type":"MODIFIED","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"5"},"spec":{"containers":[{"name":"c","image":"i"}]}}}
"#),
                &mut events,
            )
            .unwrap();
        match &events[0] {
            WatchEvent::Modified(pod) => {
                assert_eq!((pod.name(), pod.resource_version()), ("p", Some("5")));
                assert_eq!(
                    pod.spec.as_ref().unwrap().containers[0].image.as_deref(),
                    Some("i")
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Resource::of_k8s::<Pod>().path(None), "/api/v1/pods");
    }
}
