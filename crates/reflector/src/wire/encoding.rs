//! [`Encoding`]: which wire encoding a list, watch or get asks for, chosen per resource.
//!
//! kube-apiserver writes built-in kinds in JSON or in its protobuf encoding, custom resources in
//! JSON only. The client says what it prefers in `Accept`, always listing JSON after protobuf,
//! and decodes each answer by its `Content-Type`: the server, not the request, decides, so a
//! server (or aggregated API, or proxy) that answers JSON to a protobuf `Accept` still works.
//!
//! The choice is made inside [`HttpListerWatcher`](crate::HttpListerWatcher) and
//! [`Api`](crate::Api) from the object type ([`Decode::PROTOBUF`]) and the resource
//! ([`Decode::protobuf_by_default`]): the default, [`Encoding::Auto`], needs nothing from the user,
//! and a lister-watcher wrapping an `HttpListerWatcher` gets it without forwarding anything.

use crate::wire::object::Decode;
use crate::wire::representation::Representation;
use crate::wire::resource::Resource;

/// Which encoding lists, watches and gets ask for.
///
/// ```
/// use reflector::{Encoding, Resource};
/// use reflector::store_index::{CompactObject, DynamicObject, PartialObjectMetadata};
/// use reflector::Representation;
/// let pods = Resource::namespaced("", "v1", "pods");
/// let widgets = Resource::namespaced("example.com", "v1", "widgets");
/// // CompactObject decodes both; it asks for protobuf when told to (its `decode` reads JSON).
/// assert!(!Encoding::Auto.protobuf_for::<CompactObject>(&pods));
/// assert!(Encoding::Protobuf.protobuf_for::<CompactObject>(&pods));
/// // Asking costs nothing where the server has no protobuf: it answers JSON, read as JSON.
/// assert!(Encoding::Protobuf.protobuf_for::<CompactObject>(&widgets));
/// assert!(!Encoding::Json.protobuf_for::<CompactObject>(&pods));
/// // DynamicObject decodes JSON only: never protobuf.
/// assert!(!Encoding::Protobuf.protobuf_for::<DynamicObject>(&pods));
/// assert_eq!(
///     Encoding::Protobuf.list_accept::<CompactObject>(&pods, Default::default()),
///     "application/vnd.kubernetes.protobuf, application/json"
/// );
/// // Metadata-only objects: protobuf by default, custom resources too, as client-go asks.
/// assert!(Encoding::Auto.protobuf_for::<PartialObjectMetadata>(&widgets));
/// assert!(Encoding::Auto
///     .watch_accept::<PartialObjectMetadata>(&pods, Representation::PartialObjectMetadata)
///     .starts_with("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Encoding {
    /// JSON only.
    Json,
    /// Protobuf whenever the object type can decode it ([`Decode::PROTOBUF`]), whatever the
    /// resource (for an aggregated API known to write protobuf); JSON listed after it.
    Protobuf,
    /// Protobuf where the type and the resource call for it
    /// ([`Decode::protobuf_by_default`]: typed protobuf objects and `PartialObjectMetadata`
    /// always; `CompactObject`, whose on-demand `decode` reads JSON, never), JSON otherwise.
    #[default]
    Auto,
}

impl Encoding {
    /// Whether requests for objects `K` of `resource` ask for protobuf, in whichever
    /// representation `K` asks for (whole objects, or the metadata representation).
    pub fn protobuf_for<K: Decode>(self, resource: &Resource) -> bool {
        if !K::PROTOBUF {
            return false;
        }
        match self {
            Encoding::Json => false,
            Encoding::Protobuf => true,
            Encoding::Auto => K::protobuf_by_default(resource),
        }
    }

    /// `protobuf` if requests for objects `K` of `resource` ask for protobuf, else `json`.
    fn either<K: Decode>(
        self,
        resource: &Resource,
        protobuf: &'static str,
        json: &'static str,
    ) -> &'static str {
        if self.protobuf_for::<K>(resource) {
            protobuf
        } else {
            json
        }
    }

    /// The `Accept` header of a list (or a get) of objects `K` of `resource` in `representation`.
    pub fn list_accept<K: Decode>(
        self,
        resource: &Resource,
        representation: Representation,
    ) -> &'static str {
        self.either::<K>(
            resource,
            representation.protobuf_list_accept(),
            representation.list_accept(),
        )
    }

    /// The `Accept` header of a get of one object `K` of `resource` in `representation`.
    pub fn object_accept<K: Decode>(
        self,
        resource: &Resource,
        representation: Representation,
    ) -> &'static str {
        self.either::<K>(
            resource,
            representation.protobuf_object_accept(),
            representation.object_accept(),
        )
    }

    /// The `Accept` header of a watch of objects `K` of `resource` in `representation`.
    pub fn watch_accept<K: Decode>(
        self,
        resource: &Resource,
        representation: Representation,
    ) -> &'static str {
        self.either::<K>(
            resource,
            representation.protobuf_watch_accept(),
            representation.object_accept(),
        )
    }
}

/// The `Accept` parameter asking a server not to send `metadata.managedFields` (KEP-5958: the
/// `ManagedFieldsOptOut` feature gate of kube-apiserver, alpha; a server without it ignores the
/// parameter and sends them).
pub const DROP_MANAGED_FIELDS: &str = "drop=metadata.managedFields";

/// `accept` with [`DROP_MANAGED_FIELDS`] on each of its media ranges.
///
/// ```
/// use reflector::accept_dropping_managed_fields;
/// assert_eq!(
///     accept_dropping_managed_fields("application/vnd.kubernetes.protobuf, application/json"),
///     "application/vnd.kubernetes.protobuf;drop=metadata.managedFields, application/json;drop=metadata.managedFields",
/// );
/// ```
pub fn accept_dropping_managed_fields(accept: &str) -> String {
    accept
        .split(',')
        .map(|range| {
            let trimmed = range.trim_end();
            format!("{trimmed};{DROP_MANAGED_FIELDS}{}", &range[trimmed.len()..])
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::protobuf::MEDIA_TYPE;

    #[test]
    fn the_accept_headers_name_the_codec_media_type_first_and_json_last() {
        for representation in [
            Representation::Object,
            Representation::PartialObjectMetadata,
        ] {
            for accept in [
                representation.protobuf_list_accept(),
                representation.protobuf_object_accept(),
                representation.protobuf_watch_accept(),
            ] {
                assert!(accept.starts_with(MEDIA_TYPE), "{accept}");
                assert!(
                    accept.ends_with(",application/json") || accept.ends_with(", application/json"),
                    "{accept}"
                );
                // Each range asks for the same representation, in protobuf, then in JSON.
                if let Some((_, kind)) = representation.object_type() {
                    assert_eq!(accept.matches(&format!("as={kind}")).count(), 2, "{accept}");
                }
            }
        }
    }
}
