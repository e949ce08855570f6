//! Typed `k8s_pb` objects (feature `k8s-pb`): the prost messages of Kubernetes' built-in kinds,
//! decoded from the protobuf encoding, with addressing from the types' own metadata.
//!
//! These types have no serde implementation: they decode from protobuf only. Their
//! [`Decode::PROTOBUF`](crate::Decode::PROTOBUF) makes every list, watch and get of them ask for
//! protobuf under the default [`Encoding::Auto`](crate::Encoding::Auto); kube-apiserver writes
//! protobuf for every built-in kind. A JSON answer (a proxy that rewrites bodies, an aggregated
//! server without protobuf) is a typed decode error, never a silent success: watch such a resource
//! as a `CompactObject` or a `k8s_openapi` type instead.
//!
//! `Decode` is implemented for the common resource types (the list `store_index` implements
//! `Object` for); [`decode_with_prost!`](crate::decode_with_prost) adds others.

use std::any::TypeId;

use crate::store_index::k8s_pb;
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

/// Implements [`Decode`](crate::Decode) for `k8s_pb` types (prost messages that implement
/// `k8s_pb::Resource` and `Object`, see `store_index::object_for_k8s_pb!`): protobuf only.
///
/// An object whose envelope or list names another kind is refused
/// ([`ProtobufError::UnknownKind`](crate::protobuf::ProtobufError::UnknownKind)), and so is JSON.
#[macro_export]
macro_rules! decode_with_prost {
    ($($t:ty),+ $(,)?) => {$(
        impl $crate::Decode for $t {
            const PROTOBUF: bool = true;

            fn decode_protobuf(
                message: &$crate::__bytes::Bytes,
                source: &$crate::ProtobufSource<'_>,
            ) -> ::std::result::Result<Self, $crate::protobuf::ProtobufError> {
                $crate::__prost::decode_message::<$t>(
                    message,
                    source,
                    <$t as $crate::store_index::k8s_pb::Resource>::API_VERSION,
                    <$t as $crate::store_index::k8s_pb::Resource>::KIND,
                )
            }

            fn decode<'de, D: $crate::__serde::Deserializer<'de>>(
                _deserializer: D,
                _frame: &$crate::DecodeSource<'de>,
            ) -> ::std::result::Result<Self, D::Error> {
                ::std::result::Result::Err(<D::Error as $crate::__serde::de::Error>::custom(
                    $crate::__prost::JSON_REFUSED,
                ))
            }
        }
    )+};
}

/// What `decode_with_prost!` expands to. Not public API.
#[doc(hidden)]
pub mod __prost {
    use bytes::Bytes;

    use crate::wire::object::ProtobufSource;
    use crate::wire::protobuf::ProtobufError;

    /// Why a JSON answer is refused for a `k8s_pb` type.
    pub const JSON_REFUSED: &str =
        "k8s_pb types decode only from protobuf, and the server answered JSON";

    /// `message` as a `T` of `api_version`/`kind`.
    pub fn decode_message<T: prost::Message + Default>(
        message: &Bytes,
        source: &ProtobufSource<'_>,
        api_version: &str,
        kind: &str,
    ) -> Result<T, ProtobufError> {
        let named = |s: &str, want: &str| s.is_empty() || s == want;
        if !named(source.kind(), kind) || !named(source.api_version(), api_version) {
            return Err(ProtobufError::UnknownKind {
                api_version: source.api_version().to_string(),
                kind: source.kind().to_string(),
            });
        }
        T::decode(message.clone()).map_err(|e| ProtobufError::Message {
            path: kind.to_string(),
            why: e.to_string(),
        })
    }
}

delta_fifo::store_index::__with_common_k8s_pb_types!(crate::decode_with_prost);
