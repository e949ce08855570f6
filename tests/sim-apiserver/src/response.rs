//! Whole responses: a JSON body (counted by the body), and a `Status` error with its code and
//! `Retry-After`.

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use serde_json::Value;

use crate::body::SimBody;
use crate::metrics::Counters;
use crate::shared::Shared;
use crate::status::ApiError;

/// A response of `code` whose body is the JSON `body`.
pub(crate) fn json_response(shared: &Shared, code: StatusCode, body: Bytes) -> Response<SimBody> {
    let mut r = Response::new(SimBody::full(body, shared.counters.clone()));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A response of `code` whose body is `v`.
pub(crate) fn value_response(shared: &Shared, code: StatusCode, v: &Value) -> Response<SimBody> {
    json_response(shared, code, Bytes::from(v.to_string()))
}

/// The `Status` of `e`, with its code and its `Retry-After`; counted as an error.
pub(crate) fn error_response(shared: &Shared, e: &ApiError) -> Response<SimBody> {
    Counters::inc(&shared.counters.errors);
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = value_response(shared, code, &e.to_value());
    if let Some(s) = e.retry_after {
        r.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}
