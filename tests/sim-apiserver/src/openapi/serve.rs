//! `/openapi/v2` answered in the encoding the request asks for.

use serde_json::Value;

use crate::body::SimBody;
use crate::response::{json_response, value_response};
use crate::shared::Shared;

/// `/openapi/v2`, in the form `accept` asks for: protobuf (what client-go asks for), JSON, or
/// a bare 406 as kube-apiserver's OpenAPI handler answers any other media type.
pub(crate) fn v2_response(
    shared: &Shared,
    accept: Option<&str>,
    doc: &Value,
) -> http::Response<SimBody> {
    let wants = |t: &str| {
        accept.is_some_and(|a| {
            a.split(',')
                .any(|c| c.split(';').next().unwrap_or("").trim() == t)
        })
    };
    if wants(super::V2_PROTOBUF) || wants(super::V2_PROTOBUF_LEGACY) {
        let mut r = json_response(
            shared,
            http::StatusCode::OK,
            bytes::Bytes::from(super::swagger_protobuf(doc)),
        );
        // The spelling without `@`: Go's media-type parser, which client-go runs on every
        // response's Content-Type, refuses the one it asks with.
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(super::V2_PROTOBUF_LEGACY),
        );
        return r;
    }
    if accept.is_none_or(str::is_empty)
        || ["application/json", "application/*", "*/*"]
            .iter()
            .any(|t| wants(t))
    {
        return value_response(shared, http::StatusCode::OK, doc);
    }
    let mut r = json_response(
        shared,
        http::StatusCode::NOT_ACCEPTABLE,
        bytes::Bytes::new(),
    );
    r.headers_mut().remove(http::header::CONTENT_TYPE);
    r
}
