//! Typed `k8s_pb` objects (feature `k8s-pb`, `Pb<T>`): the prost messages of Kubernetes' built-in kinds,
//! decoded from the protobuf encoding, with addressing from the types' own metadata.
//!
//! These types have no serde implementation: they decode from protobuf only. Their
//! [`Decode::PROTOBUF`](crate::Decode::PROTOBUF) makes every list, watch and get of them ask for
//! protobuf under the default [`Encoding::Auto`](crate::Encoding::Auto); kube-apiserver writes
//! protobuf for every built-in kind. A JSON answer (a proxy that rewrites bodies, an aggregated
//! server without protobuf) is a typed decode error, never a silent success: watch such a resource
//! as a `CompactObject` or a `k8s_openapi` type instead.
//!
//! `Decode` is implemented for every `k8s_pb` resource type wrapped in
//! [`Pb`](crate::store_index::Pb) (see there why a wrapper).

use std::any::TypeId;

use bytes::Bytes;
use serde::de::Error as _;
use serde::Deserializer;

use crate::store_index::k8s_pb;
use crate::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta as PbMeta;
use crate::store_index::Pb;
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::protobuf::ProtobufError;
use crate::wire::resource::Resource;

impl Resource {
    /// The address of a `k8s_pb` resource type: group, version, plural and scope from the type's
    /// own metadata.
    ///
    /// ```
    /// use reflector::Resource;
    /// use reflector::store_index::k8s_pb::api::{apps::v1::Deployment, core::v1::Node};
    ///
    /// assert_eq!(Resource::of_pb::<Deployment>().path(Some("ns")), "/apis/apps/v1/namespaces/ns/deployments");
    /// assert_eq!(Resource::of_pb::<Node>().path(None), "/api/v1/nodes");
    /// ```
    pub fn of_pb<T: k8s_pb::Resource>() -> Self
    where
        T::Scope: 'static,
    {
        let namespaced = TypeId::of::<T::Scope>() == TypeId::of::<k8s_pb::NamespaceResourceScope>();
        if namespaced {
            Resource::namespaced(T::GROUP, T::VERSION, T::URL_PATH_SEGMENT)
        } else {
            Resource::cluster(T::GROUP, T::VERSION, T::URL_PATH_SEGMENT)
        }
    }
}

/// Every `k8s_pb` resource type, wrapped in [`Pb`], decodes from protobuf only. An object whose
/// envelope or list names another kind is refused
/// ([`ProtobufError::UnknownKind`](crate::protobuf::ProtobufError::UnknownKind)), and so is JSON.
impl<T> Decode for Pb<T>
where
    T: prost::Message + Default + k8s_pb::Metadata<Ty = PbMeta> + Send + Sync + 'static,
{
    const PROTOBUF: bool = true;

    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        let named = |s: &str, want: &str| s.is_empty() || s == want;
        if !named(source.kind(), T::KIND) || !named(source.api_version(), T::API_VERSION) {
            return Err(ProtobufError::UnknownKind {
                api_version: source.api_version().to_string(),
                kind: source.kind().to_string(),
            });
        }
        T::decode(message.clone())
            .map(Pb)
            .map_err(|e| ProtobufError::Message {
                path: T::KIND.to_string(),
                why: e.to_string(),
            })
    }

    fn decode<'de, D: Deserializer<'de>>(
        _deserializer: D,
        _frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        Err(D::Error::custom(
            "k8s_pb types decode only from protobuf, and the server answered JSON",
        ))
    }
}
