//! [`PbView`]: a built-in object kept as its protobuf message and read through a typed view
//! (feature `k8s-pb`): the metadata decoded once, every other field read in place when asked for.

use std::marker::PhantomData;

use bytes::Bytes;
use serde::de::Error as _;
use serde::{Deserialize as _, Deserializer};

use crate::store_index::k8s_pb;
use crate::store_index::{CompactObject, Object, ObjectMeta, OwnerReference};
use crate::wire::k8s_pb::{message_from_json, refuse_another_kind};
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::protobuf::view::{self, Fields, HasView, View};
use crate::wire::protobuf::ProtobufError;

/// A built-in object of the `k8s_pb` type `T`, kept as the protobuf message it came in and read
/// through `T`'s typed view ([`view`](PbView::view)): `pod.view().spec()` reads the spec off the
/// message, with nothing decoded before it is asked for and nothing allocated to read it.
///
/// What it costs and what it gives, against the two other ways to hold a built-in object:
/// - [`Pb<T>`](crate::store_index::Pb) decodes the whole message into prost's owned structs on
///   arrival (an allocation per string and per list): fields are plain struct fields, and every
///   event pays for the whole object;
/// - [`CompactObject`] decodes the metadata and keeps the message: reading a field means
///   decoding the whole object (`decode_pb`);
/// - `PbView<T>` decodes the metadata and keeps the message as a `CompactObject` does, and
///   checks all of it once against `T`'s layout (see [`view`](crate::protobuf::view)), so that
///   its typed accessors read fields in place and cannot fail. It holds the memory of a
///   `CompactObject`.
///
/// It is an [`Object`] (keys, indexes, listers, selectors, handlers, transforms) and a
/// [`Decode`] type that asks for protobuf by default, like `Pb<T>`; a JSON answer is transcoded
/// into the message ([`transcode`](crate::protobuf::transcode)), so both encodings give the same
/// object. An owned `T` is one [`to_message`](PbView::to_message) away, and that is what a write
/// sends ([`Api::replace_pb`](crate::client::Api::replace_pb)).
///
/// ```
/// use bytes::Bytes;
/// use prost::Message as _;
/// use reflector::protobuf::PbView;
/// use reflector::store_index::k8s_pb::api::core::v1 as pb;
/// use reflector::store_index::k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use reflector::store_index::Object as _;
///
/// let pod = pb::Pod {
///     metadata: Some(ObjectMeta {
///         name: Some("web-0".into()),
///         namespace: Some("prod".into()),
///         labels: [("app".to_string(), "web".to_string())].into(),
///         ..Default::default()
///     }),
///     spec: Some(pb::PodSpec {
///         node_name: Some("node-7".into()),
///         containers: vec![pb::Container { image: Some("nginx:1.27".into()), ..Default::default() }],
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let object = PbView::<pb::Pod>::from_message(Bytes::from(pod.encode_to_vec())).unwrap();
/// assert_eq!((object.namespace(), object.name()), (Some("prod"), "web-0"));
/// assert_eq!(object.label("app"), Some("web"));
///
/// let spec = object.view().spec().unwrap();
/// assert_eq!(spec.node_name(), Some("node-7"));
/// assert_eq!(spec.containers().next().and_then(|c| c.image()), Some("nginx:1.27"));
/// assert_eq!(object.to_message().unwrap(), pod);
/// ```
pub struct PbView<T> {
    /// The message (validated against `T`'s layout) and its decoded metadata.
    object: CompactObject,
    _type: PhantomData<fn() -> T>,
}

impl<T> Clone for PbView<T> {
    fn clone(&self) -> Self {
        PbView {
            object: self.object.clone(),
            _type: PhantomData,
        }
    }
}

/// The kind's address, as `T`'s: `Resource::of_pb::<PbView<Pod>>()` works as for `Pb<Pod>`.
impl<T: k8s_pb::Resource> k8s_pb::Resource for PbView<T> {
    const API_VERSION: &'static str = T::API_VERSION;
    const GROUP: &'static str = T::GROUP;
    const KIND: &'static str = T::KIND;
    const VERSION: &'static str = T::VERSION;
    const URL_PATH_SEGMENT: &'static str = T::URL_PATH_SEGMENT;
    type Scope = T::Scope;
}

/// The kind's address, as `T`'s: `Api::namespaced` and `Resource::of` work as for `Pb<Pod>`.
impl<T> crate::store_index::ApiResource for PbView<T>
where
    T: k8s_pb::Resource,
    T::Scope: crate::store_index::ResourceScope,
{
    const GROUP: &'static str = T::GROUP;
    const VERSION: &'static str = T::VERSION;
    const KIND: &'static str = T::KIND;
    const PLURAL: &'static str = T::URL_PATH_SEGMENT;
    const NAMESPACED: bool = <T::Scope as crate::store_index::ResourceScope>::NAMESPACED;
}

impl<T> PartialEq for PbView<T> {
    fn eq(&self, other: &Self) -> bool {
        self.object == other.object
    }
}

/// The address and the size, as a `CompactObject`'s: the fields are the view's to show
/// (`{:?}` of [`view`](PbView::view), which redacts a `Secret`'s data).
impl<T> std::fmt::Debug for PbView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PbView")
            .field("api_version", &self.object.api_version())
            .field("kind", &self.object.kind())
            .field("namespace", &self.object.namespace())
            .field("name", &self.object.name())
            .field("resource_version", &self.object.resource_version())
            .field("message_len", &self.object.raw().len())
            .finish()
    }
}

impl<T: HasView> PbView<T> {
    /// The typed view of the message: its accessors read fields in place.
    pub fn view(&self) -> T::View<'_> {
        T::View::from_fields(Fields::of_validated(self.object.raw()))
    }
}

impl<T: HasView + k8s_pb::Resource> PbView<T> {
    /// The object of one message of `T`'s type: checked whole against `T`'s layout, then its
    /// metadata decoded. Bytes that are not such a message are a typed error.
    pub fn from_message(message: Bytes) -> Result<Self, ProtobufError> {
        view::validate::<T>(&message)?;
        Ok(PbView {
            object: CompactObject::from_protobuf(message, T::API_VERSION, T::KIND)?,
            _type: PhantomData,
        })
    }

    /// The object of an owned `T`, encoded.
    pub fn from_pb(object: &T) -> Result<Self, ProtobufError>
    where
        T: prost::Message,
    {
        Self::from_message(Bytes::from(object.encode_to_vec()))
    }

    /// The whole message decoded into an owned `T` (prost).
    pub fn to_message(&self) -> Result<T, ProtobufError>
    where
        T: prost::Message + Default,
    {
        self.object.decode_pb()
    }
}

impl<T> PbView<T> {
    /// The message's bytes, as they came.
    pub fn message(&self) -> &Bytes {
        self.object.raw()
    }

    /// The object as a `CompactObject` (the same message and metadata).
    pub fn as_compact(&self) -> &CompactObject {
        &self.object
    }

    /// The object as a `CompactObject`.
    pub fn into_compact(self) -> CompactObject {
        self.object
    }

    /// Bytes of memory this object holds on the heap, beyond its own struct (as
    /// [`CompactObject::heap_size`]).
    pub fn heap_size(&self) -> usize {
        self.object.heap_size()
    }
}

impl<T: 'static> Object for PbView<T> {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        self.object.object_meta()
    }
    fn has_meta(&self) -> bool {
        self.object.has_meta()
    }
    fn name(&self) -> &str {
        self.object.name()
    }
    fn namespace(&self) -> Option<&str> {
        self.object.namespace()
    }
    fn uid(&self) -> Option<&str> {
        self.object.uid()
    }
    fn resource_version(&self) -> Option<&str> {
        self.object.resource_version()
    }
    fn generation(&self) -> Option<i64> {
        self.object.generation()
    }
    fn labels(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        self.object.labels()
    }
    fn annotations(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        self.object.annotations()
    }
    fn deletion_timestamp(&self) -> Option<String> {
        self.object.deletion_timestamp()
    }
    fn finalizers(&self) -> &[String] {
        self.object.finalizers()
    }
    fn api_version(&self) -> Option<&str> {
        self.object.api_version()
    }
    fn kind(&self) -> Option<&str> {
        self.object.kind()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.object.label(key)
    }
    fn annotation(&self, key: &str) -> Option<&str> {
        self.object.annotation(key)
    }
    /// The message loses its metadata's field 17, as a protobuf `CompactObject`'s does; what is
    /// left still has `T`'s layout (a repeated field's entries removed, the rest byte for byte).
    fn drop_managed_fields(&mut self) -> bool {
        self.object.drop_managed_fields()
    }
}

/// Owner references through the full metadata, as for a `CompactObject`.
impl<T> PbView<T> {
    /// The owner references.
    pub fn owner_references(&self) -> &[OwnerReference] {
        self.object
            .metadata()
            .owner_references
            .as_deref()
            .unwrap_or(&[])
    }
}

/// Protobuf by default for every resource, as `Pb<T>`: the view reads nothing else. A JSON
/// answer is transcoded into `T`'s message, then read as a protobuf one.
impl<T> Decode for PbView<T>
where
    T: HasView + k8s_pb::Resource + 'static,
{
    const PROTOBUF: bool = true;

    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        refuse_another_kind::<T>(source.api_version(), source.kind())?;
        view::validate::<T>(message)?;
        Ok(PbView {
            object: CompactObject::from_protobuf(source.keep(message), T::API_VERSION, T::KIND)?,
            _type: PhantomData,
        })
    }

    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        _frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        let object = serde_json::Value::deserialize(deserializer)?;
        message_from_json::<T>(&object)
            .and_then(Self::from_message)
            .map_err(D::Error::custom)
    }
}
