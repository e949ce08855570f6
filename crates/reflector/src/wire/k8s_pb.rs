//! Typed `k8s_pb` objects (feature `k8s-pb`, `Pb<T>`): the prost messages of Kubernetes' built-in kinds,
//! decoded from the protobuf encoding, with addressing from the types' own metadata.
//!
//! Their [`Decode::PROTOBUF`](crate::Decode::PROTOBUF) makes every list, watch and get of them
//! ask for protobuf under the default [`Encoding::Auto`](crate::Encoding::Auto); kube-apiserver
//! writes protobuf for every built-in kind, and that is the fast path.
//!
//! These types have no serde implementation. A JSON answer (a proxy that rewrites bodies, an
//! aggregated server without protobuf, or [`Encoding::Json`](crate::Encoding::Json) chosen) is
//! still read: each object goes through the descriptor-driven
//! [`transcode`](crate::protobuf::transcode) (JSON tree, then its message, then the prost type),
//! several times slower than a protobuf answer but the same object. Kinds outside `k8s.io/api`
//! (`CustomResourceDefinition`, `APIService`) have no descriptor compiled in: their JSON is a
//! typed decode error ([`ProtobufError::UnknownKind`]), never a silent success.
//!
//! `Decode` is implemented for every `k8s_pb` resource type wrapped in
//! [`Pb`](crate::store_index::Pb) (see there why a wrapper).

use std::any::TypeId;

use bytes::Bytes;
use serde::de::Error as _;
use serde::{Deserialize as _, Deserializer};

use crate::store_index::k8s_pb;
use crate::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta as PbMeta;
use crate::store_index::Pb;
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::protobuf::{transcode, ProtobufError};
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

/// Every `k8s_pb` resource type, wrapped in [`Pb`], decodes from protobuf, and from JSON through
/// the transcoder. An object whose envelope, list or JSON names another kind is refused
/// ([`ProtobufError::UnknownKind`](crate::protobuf::ProtobufError::UnknownKind)).
impl<T> Decode for Pb<T>
where
    T: prost::Message + Default + k8s_pb::Metadata<Ty = PbMeta> + Send + Sync + 'static,
{
    const PROTOBUF: bool = true;

    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        refuse_another_kind::<T>(source.api_version(), source.kind())?;
        message_of(message.clone())
    }

    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        _frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        let object = serde_json::Value::deserialize(deserializer)?;
        from_json::<T>(&object).map_err(D::Error::custom)
    }
}

/// `Pb<T>` from a JSON object of `T`'s kind: transcoded to `T`'s message with Kubernetes'
/// descriptors, then decoded by prost, so both encodings give the same object.
fn from_json<T>(object: &serde_json::Value) -> Result<Pb<T>, ProtobufError>
where
    T: prost::Message + Default + k8s_pb::Resource,
{
    message_of(message_from_json::<T>(object)?)
}

/// `T`'s protobuf message from a JSON object: refused if the object names another kind (as
/// [`refuse_another_kind`]), else transcoded with Kubernetes' descriptors. Every typed protobuf
/// object that accepts a JSON answer goes through here.
pub(crate) fn message_from_json<T: k8s_pb::Resource>(
    object: &serde_json::Value,
) -> Result<Bytes, ProtobufError> {
    let named = |field: &str| object.get(field).and_then(serde_json::Value::as_str);
    refuse_another_kind::<T>(
        named("apiVersion").unwrap_or(""),
        named("kind").unwrap_or(""),
    )?;
    let message = transcode::encode_message_as(T::API_VERSION, T::KIND, object)?;
    Ok(Bytes::from(message))
}

/// An object that names a kind (in its envelope, its list or its JSON) must name `T`'s; an
/// object that names none is taken as `T`'s (list items, bare watch messages).
pub(crate) fn refuse_another_kind<T: k8s_pb::Resource>(
    api_version: &str,
    kind: &str,
) -> Result<(), ProtobufError> {
    let named = |s: &str, want: &str| s.is_empty() || s == want;
    if named(kind, T::KIND) && named(api_version, T::API_VERSION) {
        Ok(())
    } else {
        Err(ProtobufError::UnknownKind {
            api_version: api_version.to_string(),
            kind: kind.to_string(),
        })
    }
}

fn message_of<T: prost::Message + Default + k8s_pb::Resource>(
    message: Bytes,
) -> Result<Pb<T>, ProtobufError> {
    T::decode(message)
        .map(Pb)
        .map_err(|e| ProtobufError::Message {
            path: T::KIND.to_string(),
            why: e.to_string(),
        })
}
