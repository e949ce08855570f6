//! [`Decode`]: how an object type is built from the JSON the server sends.
//!
//! Serde types decode in one pass straight from the frame's text. [`CompactObject`] instead
//! decodes only its metadata and keeps the object's bytes, sliced out of the frame (watch) or
//! copied once (list pages, so that a page's buffer is freed as soon as the page is decoded).
//! [`PartialObjectMetadata`] asks the server for the metadata representation
//! ([`Decode::REPRESENTATION`]), so that the rest of each object is never sent at all.

use bytes::Bytes;
use delta_fifo::store_index::{CompactObject, DynamicObject, Object, PartialObjectMetadata};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::wire::protobuf::ProtobufError;
use crate::wire::representation::Representation;
use crate::wire::resource::Resource;

/// The text an object is being decoded from (a watch event's line, or a list page), and the
/// buffer that holds it, so that an object keeping its raw bytes can slice them rather than copy.
#[derive(Debug, Clone, Copy)]
pub struct DecodeSource<'a> {
    text: &'a str,
    bytes: &'a Bytes,
    share: bool,
}

impl<'a> DecodeSource<'a> {
    /// A source over `bytes`, whose UTF-8 text is `text` (the same memory). With `share`, objects
    /// that keep raw bytes slice them out of `bytes` (no copy); otherwise they copy them.
    pub fn new(text: &'a str, bytes: &'a Bytes, share: bool) -> Self {
        DecodeSource { text, bytes, share }
    }

    /// The bytes of `sub`, which must be a sub-slice of this source's text: a slice of the source's
    /// buffer when sharing, else a copy.
    pub fn bytes_of(&self, sub: &str) -> Bytes {
        let start = (sub.as_ptr() as usize).wrapping_sub(self.text.as_ptr() as usize);
        let inside = start <= self.text.len() && sub.len() <= self.text.len() - start;
        if self.share && inside && self.bytes.len() == self.text.len() {
            self.bytes.slice(start..start + sub.len())
        } else {
            Bytes::copy_from_slice(sub.as_bytes())
        }
    }
}

/// Where an object in protobuf comes from: its `apiVersion` and `kind` (a protobuf message does
/// not carry them: they are its envelope's, or for a list item its list's without `List`), and
/// whether the object may keep slices of the buffer its message is in.
#[derive(Debug, Clone, Copy)]
pub struct ProtobufSource<'a> {
    api_version: &'a str,
    kind: &'a str,
    share: bool,
}

impl<'a> ProtobufSource<'a> {
    /// A source of objects of `api_version`/`kind`. With `share`, objects that keep raw bytes
    /// slice them out of the message's buffer (it is a buffer of the object's own, such as a
    /// get's body); otherwise they copy them (a list page, freed once decoded, or a watch frame,
    /// which may be a slice of the HTTP client's read buffer).
    pub fn new(api_version: &'a str, kind: &'a str, share: bool) -> Self {
        ProtobufSource {
            api_version,
            kind,
            share,
        }
    }

    /// The objects' `apiVersion`.
    pub fn api_version(&self) -> &'a str {
        self.api_version
    }

    /// The objects' `kind`.
    pub fn kind(&self) -> &'a str {
        self.kind
    }

    /// `message` to keep: itself (a slice of the shared buffer) when sharing, else a copy.
    pub fn keep(&self, message: &Bytes) -> Bytes {
        if self.share {
            message.clone()
        } else {
            Bytes::copy_from_slice(message)
        }
    }
}

/// An object type the reflector can decode from list pages and watch events.
///
/// Implemented for [`DynamicObject`], [`CompactObject`] and [`PartialObjectMetadata`]; implement it
/// for your own serde types with [`decode_with_serde!`](crate::decode_with_serde), or
/// [`decode_with_serde_compacted!`](crate::decode_with_serde_compacted) for typed structs with
/// lists, which a cache then holds in less memory.
pub trait Decode: Object + Sized {
    /// How the server is asked to write the objects of this type:
    /// [`HttpListerWatcher`](crate::HttpListerWatcher) sends this representation's `Accept`
    /// header with every list and watch. Default: the objects as they are. A type asking for
    /// another representation must still decode the whole objects a server that does not know
    /// it sends instead.
    const REPRESENTATION: Representation = Representation::Object;

    /// Whether objects of this type can be decoded from Kubernetes' protobuf encoding
    /// ([`decode_protobuf`](Decode::decode_protobuf)). Default: no (JSON only).
    const PROTOBUF: bool = false;

    /// Whether the objects of `resource` are asked for in protobuf under
    /// [`Encoding::Auto`](crate::Encoding::Auto), the default: with the JSON media type listed
    /// after it, so a server that cannot write protobuf for them answers JSON, which is decoded by
    /// the answer's `Content-Type`. Default: [`PROTOBUF`](Decode::PROTOBUF).
    fn protobuf_by_default(resource: &Resource) -> bool {
        let _ = resource;
        Self::PROTOBUF
    }

    /// Decodes one object from its protobuf message (a list item, or the `raw` of a watch
    /// event's or a get's envelope). The default, for types that are not
    /// [`PROTOBUF`](Decode::PROTOBUF), is a typed error: it runs only when a server answers
    /// protobuf to a request that did not ask for it.
    ///
    /// `message` may be a slice of a larger buffer (a list page, or the HTTP client's read buffer
    /// under a watch): an object that keeps bytes of it keeps [`ProtobufSource::keep`]'s, which
    /// copies them unless the buffer is the object's own.
    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        let _ = (message, source);
        Err(ProtobufError::Unsupported {
            type_name: std::any::type_name::<Self>(),
        })
    }

    /// Decodes one object. `frame` holds the text the deserializer reads from.
    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error>;

    /// Decodes one object whose JSON is exactly `text` (a sub-slice of `frame`'s text), nothing
    /// but whitespace after it. The watch decoder calls this when it can see where an event's
    /// object starts and ends without parsing the envelope, so a type that keeps its raw bytes
    /// can skip the pass that finds them. The default runs [`decode`](Decode::decode) on `text`.
    fn decode_exact<'de>(
        text: &'de str,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(text);
        let object = Self::decode(&mut de, frame)?;
        de.end()?;
        Ok(object)
    }
}

/// Implements [`Decode`] for types that implement `serde::Deserialize` (one pass, no copy).
///
/// ```
/// use reflector::decode_with_serde;
/// use reflector::store_index::{Object, ObjectMeta};
///
/// #[derive(serde::Deserialize)]
/// struct Widget { metadata: ObjectMeta }
/// impl Object for Widget {
///     fn object_meta(&self) -> Option<&ObjectMeta> { Some(&self.metadata) }
/// }
/// decode_with_serde!(Widget);
/// ```
#[macro_export]
macro_rules! decode_with_serde {
    ($($t:ty),+ $(,)?) => {$(
        $crate::__decode_with_serde!($t, |decoded: $t| decoded);
    )+};
}

/// The one implementation behind `decode_with_serde!` and `decode_with_serde_compacted!`:
/// serde's decode, then `$finish` applied to the object.
#[doc(hidden)]
#[macro_export]
macro_rules! __decode_with_serde {
    ($t:ty, $finish:expr $(, $exact:ident)?) => {
        impl $crate::Decode for $t {
            fn decode<'de, D: $crate::__serde::Deserializer<'de>>(
                deserializer: D,
                _frame: &$crate::DecodeSource<'de>,
            ) -> ::std::result::Result<Self, D::Error> {
                <$t as $crate::__serde::Deserialize<'de>>::deserialize(deserializer).map($finish)
            }
            $(
                fn decode_exact<'de>(
                    text: &'de str,
                    _frame: &$crate::DecodeSource<'de>,
                ) -> ::std::result::Result<Self, $crate::__exact::Error> {
                    $crate::__exact::$exact::<$t>(text)
                }
            )?
        }
    };
}

/// Implements [`Decode`] for types that implement `serde::Deserialize` and `Clone`, keeping a
/// compact copy of each decoded object: for typed structs with many lists (the `k8s_openapi`
/// types), the memory a cache holds for each object drops by about a fifth.
///
/// Why: serde grows each `Vec` it decodes by doubling (JSON does not say how long an array is), so
/// a decoded object keeps up to half of each list's capacity unused: an `env` of 3 entries holds
/// room for 4, a `conditions` of 5 room for 8. How:
/// - a watch event's object, whose text the watch decoder has found, is decoded in one pass with
///   each array's length counted beforehand and given to serde as its size hint, so every list is
///   allocated once, at its length (invariants S1–S2 in `src/exact.rs`);
/// - an object decoded from inside a larger text (a list page) is cloned right after its decode:
///   a clone allocates every `Vec` and `String` at exactly its length, and the slack original is
///   dropped at once, on the thread that decoded it.
///
/// Measured in docs/benchmarks-archive.md (*Latest: compact typed objects*).
///
/// ```
/// use reflector::decode_with_serde_compacted;
/// use reflector::store_index::{Object, ObjectMeta};
///
/// #[derive(Clone, serde::Deserialize)]
/// struct Widget { metadata: ObjectMeta, parts: Vec<String> }
/// impl Object for Widget {
///     fn object_meta(&self) -> Option<&ObjectMeta> { Some(&self.metadata) }
/// }
/// decode_with_serde_compacted!(Widget);
/// ```
#[macro_export]
macro_rules! decode_with_serde_compacted {
    ($($t:ty),+ $(,)?) => {$(
        // Every list and string at exactly its length (see the macro's docs): decoded with each
        // list's length known when the object's text is (watch events), else cloned.
        $crate::__decode_with_serde!(
            $t,
            |decoded: $t| ::std::clone::Clone::clone(&decoded),
            from_str_exact
        );
    )+};
}

decode_with_serde!(DynamicObject);

/// JSON and protobuf. Under [`Encoding::Auto`](crate::Encoding::Auto), the default, JSON: what a
/// `CompactObject` promises is its object decoded on demand into serde types
/// ([`CompactObject::decode`]), k8s-openapi's included, and protobuf bytes cannot be, so asking
/// for protobuf by default would turn every such call into an error. Ask for it with
/// [`Encoding::Protobuf`](crate::Encoding::Protobuf) (on the lister-watcher, the `Api` or the
/// informer factory) when the code reads only metadata or decodes with `decode_pb`: the server
/// then writes protobuf for built-in kinds and JSON for custom resources, and each answer is read
/// by its `Content-Type`.
impl Decode for CompactObject {
    const PROTOBUF: bool = true;

    fn protobuf_by_default(resource: &Resource) -> bool {
        let _ = resource;
        false
    }

    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        CompactObject::from_protobuf(source.keep(message), source.api_version(), source.kind())
    }

    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        CompactObject::from_json(frame.bytes_of(raw.get())).map_err(D::Error::custom)
    }

    /// One pass: the object's extent is already known, so no `RawValue` pass is needed to find it.
    fn decode_exact<'de>(
        text: &'de str,
        frame: &DecodeSource<'de>,
    ) -> Result<Self, serde_json::Error> {
        CompactObject::from_json(frame.bytes_of(text))
    }
}

/// Asks for the metadata representation; decodes it, or the whole object a server that does not
/// know it sends, in one pass that skips everything but `apiVersion`, `kind` and `metadata`.
///
/// In protobuf by default, for every resource, as client-go's metadata client asks: the
/// representation is a type of `meta.k8s.io` that kube-apiserver writes in protobuf for custom
/// resources too, and JSON is listed after it. A protobuf message, of the representation or of a
/// whole object, has its metadata in field 1: it alone is read, the rest skipped unparsed.
impl Decode for PartialObjectMetadata {
    const REPRESENTATION: Representation = Representation::PartialObjectMetadata;
    const PROTOBUF: bool = true;

    fn protobuf_by_default(resource: &Resource) -> bool {
        let _ = resource;
        true
    }

    fn decode_protobuf(
        message: &Bytes,
        source: &ProtobufSource<'_>,
    ) -> Result<Self, ProtobufError> {
        let metadata = crate::wire::protobuf::meta::object_meta_of(message)?;
        let partial = PartialObjectMetadata::new(metadata);
        let (api_version, kind) = (source.api_version(), source.kind());
        let own = (
            PartialObjectMetadata::API_VERSION,
            PartialObjectMetadata::KIND,
        );
        if (api_version, kind) == own || kind.is_empty() {
            return Ok(partial);
        }
        // A whole object, from a server that does not know the representation: its own type.
        Ok(partial.with_type(api_version, kind))
    }

    fn decode<'de, D: Deserializer<'de>>(
        deserializer: D,
        _frame: &DecodeSource<'de>,
    ) -> Result<Self, D::Error> {
        PartialObjectMetadata::deserialize(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_object_slices_its_bytes_out_of_a_shared_frame() {
        let bytes = Bytes::from_static(br#"{"object":{"metadata":{"name":"a"}}}"#);
        let text = std::str::from_utf8(&bytes).unwrap();
        let frame = DecodeSource::new(text, &bytes, true);
        let sub = &text[10..text.len() - 1];
        let b = frame.bytes_of(sub);
        assert_eq!(b.as_ref(), sub.as_bytes());
        assert_eq!(b.as_ptr(), bytes[10..].as_ptr());
        let copied = DecodeSource::new(text, &bytes, false).bytes_of(sub);
        assert_ne!(copied.as_ptr(), bytes[10..].as_ptr());
        assert_eq!(frame.bytes_of("elsewhere").as_ref(), b"elsewhere");
    }

    #[test]
    fn partial_object_metadata_decodes_its_representation_and_whole_objects_alike() {
        use crate::{ObjectList, WatchDecoder, WatchEvent};

        assert_eq!(
            <PartialObjectMetadata as Decode>::REPRESENTATION,
            Representation::PartialObjectMetadata
        );
        assert_eq!(
            <DynamicObject as Decode>::REPRESENTATION,
            Representation::Object
        );
        let meta_page = Bytes::from_static(
            br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"9"},"items":[{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","labels":{"app":"web"}}}]}"#,
        );
        let page = ObjectList::<PartialObjectMetadata>::from_json(&meta_page).unwrap();
        assert_eq!(page.resource_version, "9");
        assert!(page.items[0].is_metadata_representation());
        assert_eq!(page.items[0].label("app"), Some("web"));
        // What a server that does not know the representation sends: whole objects, no type meta
        // on the items of a built-in list. Only the metadata is kept.
        let pod_page = Bytes::from_static(
            br#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a","namespace":"ns"},"spec":{"containers":[{"name":"c"}]},"status":{}}]}"#,
        );
        let page = ObjectList::<PartialObjectMetadata>::from_json(&pod_page).unwrap();
        assert_eq!((page.items[0].name(), page.items[0].kind()), ("a", None));
        assert!(!serde_json::to_string(&page.items[0])
            .unwrap()
            .contains("containers"));
        let mut decoder = WatchDecoder::<PartialObjectMetadata>::default();
        let mut events = Vec::new();
        decoder
            .decode(
                Bytes::from_static(
                    b"{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/v1\",\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n\
                      {\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"b\"},\"spec\":{}}}\n",
                ),
                &mut events,
            )
            .unwrap();
        match &events[..] {
            [WatchEvent::Modified(a), WatchEvent::Deleted(b)] => {
                assert_eq!((a.name(), a.resource_version()), ("a", Some("10")));
                assert_eq!((b.name(), b.kind()), ("b", Some("Pod")));
            }
            other => panic!("{other:?}"),
        }
    }
}
