//! The opt-out of `metadata.managedFields` in responses (KEP-5958, kube-apiserver's
//! `ManagedFieldsOptOut` feature gate, alpha): a client adds `drop=metadata.managedFields` to the
//! media range it accepts (`Accept: application/json;drop=metadata.managedFields`), and every
//! object of the answer (a get, each item of a list, each object of a watch, in JSON or protobuf)
//! comes without its `managedFields`. The parameter takes a `+`-separated set of fields; fields
//! other than `metadata.managedFields` are ignored, as the KEP says a server ignores drop targets
//! it does not know. The range that decides is the first one the server can write (JSON,
//! protobuf or a wildcard), as content negotiation picks it.
//!
//! [`managed_fields_opt_out`](crate::SimServerBuilder::managed_fields_opt_out) stands for the
//! gate: off, the parameter is ignored and objects keep their managed fields, as on a server
//! without the feature (Kubernetes 1.36 and older).
//!
//! The stripping is a layer over the JSON answer, under the protobuf one (`server.rs`), so the
//! protobuf encoding of an answer is the encoding of its stripped JSON.

use bytes::Bytes;
use http::{header, HeaderMap, Response};
use serde_json::Value;

use crate::body::{map_watch_lines, SimBody};

/// The field this server knows how to drop.
const MANAGED_FIELDS: &str = "metadata.managedFields";

/// Whether `headers`' `Accept` asks for objects without `metadata.managedFields`.
pub(crate) fn requested(headers: &HeaderMap) -> bool {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok()) else {
        return false;
    };
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let servable = matches!(
            media.as_str(),
            "application/json"
                | "application/vnd.kubernetes.protobuf"
                | "application/yaml"
                | "application/*"
                | "*/*"
        );
        if !servable {
            continue;
        }
        return parts.any(|p| {
            p.split_once('=').is_some_and(|(name, value)| {
                name.trim() == "drop"
                    && value
                        .trim()
                        .trim_matches('"')
                        .split('+')
                        .any(|field| field == MANAGED_FIELDS)
            })
        });
    }
    false
}

/// `resp` with no `metadata.managedFields` in its objects: a JSON body (an object, or a list's
/// items) or a JSON watch stream (each event's object). Anything else is left as it is.
pub(crate) fn strip(resp: Response<SimBody>) -> Response<SimBody> {
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"application/json"));
    if !json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let body = match body.whole() {
        Some(whole) => match stripped_body(whole) {
            Some(cut) => body.with_whole(cut),
            None => body,
        },
        None => body.map_stream(|rx| map_watch_lines(rx, stripped_line)),
    };
    Response::from_parts(parts, body)
}

/// `object` without `metadata.managedFields`; whether it had some.
fn strip_object(object: &mut Value) -> bool {
    object
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .is_some_and(|m| m.remove("managedFields").is_some())
}

/// A whole JSON body without managed fields, or `None` when it has none to drop.
fn stripped_body(whole: &[u8]) -> Option<Bytes> {
    if !contains_managed_fields(whole) {
        return None;
    }
    let mut value: Value = serde_json::from_slice(whole).ok()?;
    let dropped = match value.get_mut("items").and_then(Value::as_array_mut) {
        Some(items) => items.iter_mut().fold(false, |d, i| strip_object(i) | d),
        None => strip_object(&mut value),
    };
    dropped.then(|| json_line(&value))
}

/// One watch event line without its object's managed fields (the line itself when it has none).
fn stripped_line(line: &[u8]) -> Bytes {
    if !contains_managed_fields(line) {
        return Bytes::copy_from_slice(line);
    }
    let Ok(mut event) = serde_json::from_slice::<Value>(line) else {
        return Bytes::copy_from_slice(line);
    };
    let dropped = event.get_mut("object").is_some_and(strip_object);
    if dropped {
        json_line(&event)
    } else {
        Bytes::copy_from_slice(line)
    }
}

fn contains_managed_fields(bytes: &[u8]) -> bool {
    const KEY: &[u8] = b"\"managedFields\"";
    bytes.windows(KEY.len()).any(|w| w == KEY)
}

/// `value` as one line of JSON, as the server writes bodies and events.
fn json_line(value: &Value) -> Bytes {
    let mut out = serde_json::to_vec(value).expect("a Value serializes");
    out.push(b'\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn the_first_range_the_server_can_write_decides() {
        for (value, wanted) in [
            ("application/json;drop=metadata.managedFields", true),
            ("application/json; drop=\"metadata.managedFields\"", true),
            ("application/json;drop=spec.x+metadata.managedFields", true),
            ("application/json;drop=metadata.annotations", false),
            ("application/json", false),
            (
                "application/vnd.kubernetes.protobuf;drop=metadata.managedFields, application/json",
                true,
            ),
            (
                "application/vnd.kubernetes.protobuf, application/json;drop=metadata.managedFields",
                false,
            ),
            (
                "text/plain;drop=metadata.managedFields, application/json;drop=metadata.managedFields",
                true,
            ),
            ("*/*;drop=metadata.managedFields", true),
        ] {
            assert_eq!(requested(&accept(value)), wanted, "{value}");
        }
        assert!(!requested(&HeaderMap::new()));
    }

    #[test]
    fn objects_items_and_events_lose_their_managed_fields_and_nothing_else() {
        let pod = json!({"metadata": {"name": "p", "managedFields": [{"manager": "m"}]}, "spec": {"x": 1}});
        let bare = json!({"metadata": {"name": "p"}, "spec": {"x": 1}});
        let body = stripped_body(&serde_json::to_vec(&pod).unwrap()).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), bare);
        let list =
            json!({"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod, bare]});
        let body = stripped_body(&serde_json::to_vec(&list).unwrap()).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap(),
            json!({"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [bare, bare]})
        );
        let line = json!({"type": "MODIFIED", "object": pod}).to_string() + "\n";
        let cut = stripped_line(line.as_bytes());
        assert!(cut.ends_with(b"\n"));
        assert_eq!(
            serde_json::from_slice::<Value>(&cut).unwrap(),
            json!({"type": "MODIFIED", "object": bare})
        );
        let plain = json!({"type": "ADDED", "object": bare}).to_string() + "\n";
        assert_eq!(stripped_line(plain.as_bytes()), plain.as_bytes());
        assert_eq!(stripped_body(&serde_json::to_vec(&bare).unwrap()), None);
    }
}
