//! Content negotiation of the `Accept` header: the objects as they are, or each object reduced to
//! its metadata, `PartialObjectMetadata` of `meta.k8s.io`, as kube-apiserver serves client-go's
//! metadata client.
//!
//! As kube-apiserver does, the media ranges of the header are tried in order and the first one the
//! server can produce wins: `application/json` (or `application/*`, `*/*`) without `as=` gives the
//! objects; with `as=PartialObjectMetadata` or `as=PartialObjectMetadataList`, `g=meta.k8s.io`
//! and `v=v1` or `v=v1beta1`, the metadata representation. A range asking for anything else
//! (`as=Table`, an unknown `as=`, another media type) is passed over, so a client that lists plain
//! `application/json` after it gets the objects; when no range is left, the answer is
//! `406 NotAcceptable`. The winning range's list-ness must then fit the request, else 406 too
//! (`as=PartialObjectMetadata` on a list, `as=PartialObjectMetadataList` on a watch or a get).
//! Parameters other than `as`, `g` and `v` (`q`, `charset`, …) are ignored: the order of the
//! ranges alone decides.

use bytes::Bytes;
use serde_json::Value;

use crate::status::ApiError;

/// The `kind` of one object's metadata representation.
pub const PARTIAL_OBJECT_METADATA: &str = "PartialObjectMetadata";
/// The `kind` of a list's metadata representation.
pub const PARTIAL_OBJECT_METADATA_LIST: &str = "PartialObjectMetadataList";

/// How the objects of a response are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Representation {
    /// The objects as they are.
    #[default]
    Object,
    /// Each object as `{"kind":"PartialObjectMetadata","apiVersion":..,"metadata":..}`, lists as
    /// `PartialObjectMetadataList`.
    PartialObjectMetadata {
        /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`, as asked.
        api_version: &'static str,
    },
}

/// What a request is, for the list-ness check of the chosen representation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A list (a collection `GET` without `watch`).
    List,
    /// A watch, whose events carry one object each, or a get of one object.
    Object,
}

/// The representation `accept` asks for on a request of `target`, or the 406 kube-apiserver
/// answers. Without `partial_supported` the server knows no `as=` at all (as servers older than
/// the metadata representation), so the ranges asking for it are passed over.
pub fn negotiate(
    accept: Option<&str>,
    target: Target,
    partial_supported: bool,
) -> Result<Representation, ApiError> {
    let accept = accept.map(str::trim).unwrap_or("");
    if accept.is_empty() {
        return Ok(Representation::Object);
    }
    for range in json_ranges(accept) {
        let Some(chosen) = servable(range, partial_supported) else {
            continue;
        };
        return match (chosen, target) {
            (Chosen::Object, _) => Ok(Representation::Object),
            (Chosen::Partial { list, api_version }, target) => {
                match (list, target) {
                    (true, Target::List) | (false, Target::Object) => {
                        Ok(Representation::PartialObjectMetadata { api_version })
                    }
                    (false, Target::List) => Err(ApiError::not_acceptable(
                        "you requested PartialObjectMetadata, but the requested object is a list",
                    )),
                    (true, Target::Object) => Err(ApiError::not_acceptable(
                        "you requested PartialObjectMetadataList, but the requested object is not a list",
                    )),
                }
            }
        };
    }
    Err(ApiError::not_acceptable(
        "only the following media types are accepted: application/json",
    ))
}

/// What one media range asks for, when the server can produce it.
enum Chosen {
    Object,
    Partial {
        list: bool,
        api_version: &'static str,
    },
}

/// One media range of an `Accept` header as the JSON negotiations read it (this module's, the
/// Table's, aggregated discovery's): whether it can be answered in JSON (`application/json`,
/// `application/*`, `*/json`, `*/*`), and its `as=`, `g=` and `v=` parameters, unquoted. A range
/// with no `/` in its media type is `None`.
pub(crate) struct JsonRange<'a> {
    pub(crate) json: bool,
    pub(crate) as_kind: Option<&'a str>,
    pub(crate) group: Option<&'a str>,
    pub(crate) version: Option<&'a str>,
}

/// The media ranges of `accept`, in order.
pub(crate) fn json_ranges(accept: &str) -> impl Iterator<Item = Option<JsonRange<'_>>> {
    accept.split(',').map(|range| {
        let mut parts = range.split(';').map(str::trim);
        let (ty, subtype) = parts.next()?.split_once('/')?;
        let mut r = JsonRange {
            json: matches!(ty, "application" | "*") && matches!(subtype, "json" | "*"),
            as_kind: None,
            group: None,
            version: None,
        };
        for param in parts {
            let Some((name, value)) = param.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"');
            match name.trim() {
                "as" => r.as_kind = Some(value),
                "g" => r.group = Some(value),
                "v" => r.version = Some(value),
                _ => {}
            }
        }
        Some(r)
    })
}

fn servable(range: Option<JsonRange<'_>>, partial_supported: bool) -> Option<Chosen> {
    let JsonRange {
        json: true,
        as_kind,
        group,
        version,
    } = range?
    else {
        return None;
    };
    let Some(as_kind) = as_kind.filter(|k| !k.is_empty()) else {
        return Some(Chosen::Object);
    };
    let list = match as_kind {
        PARTIAL_OBJECT_METADATA => false,
        PARTIAL_OBJECT_METADATA_LIST => true,
        _ => return None,
    };
    let api_version = match (group, version) {
        (Some("meta.k8s.io"), Some("v1")) => "meta.k8s.io/v1",
        (Some("meta.k8s.io"), Some("v1beta1")) => "meta.k8s.io/v1beta1",
        _ => return None,
    };
    partial_supported.then_some(Chosen::Partial { list, api_version })
}

/// `{"kind":"PartialObjectMetadata","apiVersion":api_version,"metadata":…}` of `object` (its
/// `metadata` as stored, `{}` if it has none).
pub fn partial_object_metadata(object: &Value, api_version: &str) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(
        format!("{{\"kind\":\"{PARTIAL_OBJECT_METADATA}\",\"apiVersion\":\"{api_version}\",\"metadata\":")
            .as_bytes(),
    );
    match object.get("metadata") {
        Some(meta) => serde_json::to_writer(&mut buf, meta).expect("a Value serializes"),
        None => buf.extend_from_slice(b"{}"),
    }
    buf.push(b'}');
    Bytes::from(buf)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const LIST: &str =
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
    const OBJECT: &str =
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

    fn partial(api_version: &'static str) -> Representation {
        Representation::PartialObjectMetadata { api_version }
    }

    #[test]
    fn the_first_range_the_server_can_produce_wins() {
        use Target::{List, Object};
        for (accept, target, want) in [
            (None, List, Representation::Object),
            (Some(""), Object, Representation::Object),
            (Some("application/json"), List, Representation::Object),
            (Some("*/*"), Object, Representation::Object),
            (Some(LIST), List, partial("meta.k8s.io/v1")),
            (Some(OBJECT), Object, partial("meta.k8s.io/v1")),
            (
                Some("application/json; as=PartialObjectMetadataList; g=meta.k8s.io; v=v1beta1"),
                List,
                partial("meta.k8s.io/v1beta1"),
            ),
            // Protobuf is not served: the JSON range after it is.
            (
                Some("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"),
                List,
                partial("meta.k8s.io/v1"),
            ),
            // Unknown representations, groups and versions are passed over for the fallback.
            (
                Some("application/json;as=Table;g=meta.k8s.io;v=v1,application/json"),
                List,
                Representation::Object,
            ),
            (
                Some("application/json;as=PartialObjectMetadataList;g=example.com;v=v1,application/json"),
                List,
                Representation::Object,
            ),
        ] {
            assert_eq!(negotiate(accept, target, true).unwrap(), want, "{accept:?}");
        }
    }

    #[test]
    fn nothing_servable_or_the_wrong_list_ness_is_406() {
        for (accept, target, message) in [
            (
                "application/json;as=Table;g=meta.k8s.io;v=v1",
                Target::List,
                "only the following media types are accepted",
            ),
            (
                "application/yaml",
                Target::Object,
                "only the following media types are accepted",
            ),
            (
                "application/json;as=Surprise;g=meta.k8s.io;v=v1",
                Target::Object,
                "only the following",
            ),
            (
                OBJECT,
                Target::List,
                "you requested PartialObjectMetadata, but the requested object is a list",
            ),
            (
                LIST,
                Target::Object,
                "you requested PartialObjectMetadataList, but the requested object is not a list",
            ),
        ] {
            let e = negotiate(Some(accept), target, true).unwrap_err();
            assert_eq!((e.code, e.reason), (406, "NotAcceptable"), "{accept}");
            assert!(e.message.contains(message), "{accept}: {e}");
        }
    }

    #[test]
    fn a_server_without_the_metadata_representation_falls_back_or_refuses() {
        assert_eq!(
            negotiate(Some(LIST), Target::List, false).unwrap(),
            Representation::Object
        );
        let only = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
        assert_eq!(
            negotiate(Some(only), Target::Object, false)
                .unwrap_err()
                .code,
            406
        );
    }

    #[test]
    fn the_metadata_representation_is_the_metadata_as_stored() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"x": 1}});
        let b = partial_object_metadata(&pod, "meta.k8s.io/v1");
        // In kube-apiserver's field order.
        assert!(b.starts_with(
            br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"#
        ));
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(
            v,
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": pod["metadata"]})
        );
        let bare = partial_object_metadata(&json!({}), "meta.k8s.io/v1beta1");
        let v: Value = serde_json::from_slice(&bare).unwrap();
        assert_eq!(v["metadata"], json!({}));
    }
}
