//! The Kubernetes `Status` object: what the API server sends with every failed request and in
//! watch `ERROR` events.

use serde::{Deserialize, Serialize};

use crate::store_index::protobuf::wire::{utf8, Field, Reader};
use crate::store_index::protobuf::ProtobufError;

/// A `meta.k8s.io/v1` `Status` (only the fields the machinery reads).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// `Success` or `Failure`.
    #[serde(default)]
    pub status: Option<String>,
    /// Human-readable description.
    #[serde(default)]
    pub message: String,
    /// Machine-readable reason (`Expired`, `Gone`, `TooManyRequests`, `InternalError`, …).
    #[serde(default)]
    pub reason: String,
    /// HTTP status code.
    #[serde(default)]
    pub code: u16,
    /// Extra details.
    #[serde(default)]
    pub details: Option<StatusDetails>,
}

/// `Status.details`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// Name of the resource concerned.
    #[serde(default)]
    pub name: String,
    /// Kind of the resource concerned.
    #[serde(default)]
    pub kind: String,
    /// Individual causes.
    #[serde(default)]
    pub causes: Vec<StatusCause>,
    /// Seconds the client should wait before retrying.
    #[serde(default)]
    pub retry_after_seconds: Option<u32>,
}

/// One cause in `Status.details.causes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// The cause type (`ResourceVersionTooLarge`, `FieldValueInvalid`, …).
    #[serde(default, rename = "reason")]
    pub cause_type: String,
    /// Description.
    #[serde(default)]
    pub message: String,
    /// Field concerned.
    #[serde(default)]
    pub field: String,
}

const TOO_LARGE_RV: &str = "Too large resource version";

impl Status {
    /// A failure status with the given code, reason and message.
    pub fn failure(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Status {
            status: Some("Failure".into()),
            message: message.into(),
            reason: reason.into(),
            code,
            details: None,
        }
    }

    /// 410: the requested resourceVersion is too old (reason `Expired` or `Gone`, or code 410).
    pub fn is_expired(&self) -> bool {
        self.reason == "Expired" || self.reason == "Gone" || self.code == 410
    }

    /// The requested resourceVersion is newer than the server's (contract C6.2): a cause of type
    /// `ResourceVersionTooLarge`, or (old servers) a Timeout status mentioning `Too large resource
    /// version` in a cause or in its message.
    pub fn is_too_large_resource_version(&self) -> bool {
        let causes = self.details.iter().flat_map(|d| d.causes.iter());
        if causes
            .clone()
            .any(|c| c.cause_type == "ResourceVersionTooLarge")
        {
            return true;
        }
        let timeout = self.reason == "Timeout" || self.code == 504;
        timeout
            && (self.message.contains(TOO_LARGE_RV)
                || causes.clone().any(|c| c.message.contains(TOO_LARGE_RV)))
    }

    /// 429 Too Many Requests.
    pub fn is_too_many_requests(&self) -> bool {
        self.code == 429 || self.reason == "TooManyRequests"
    }

    /// 500 Internal Error.
    pub fn is_internal_error(&self) -> bool {
        self.code == 500 || self.reason == "InternalError"
    }

    /// 406 Not Acceptable (no media type or representation the request accepts).
    pub fn is_not_acceptable(&self) -> bool {
        self.code == 406 || self.reason == "NotAcceptable"
    }

    /// Parses a response body as a `Status`; falls back to a status built from the HTTP code and
    /// the body's start when the body is not one, its JSON string values redacted: an object
    /// sent back where a Status belongs may be a Secret.
    pub fn from_response(code: u16, body: &[u8]) -> Self {
        // kube-apiserver writes errors in protobuf too when protobuf was asked for.
        let decoded = if body.starts_with(&crate::wire::protobuf::MAGIC) {
            crate::wire::protobuf::Unknown::decode(&bytes::Bytes::copy_from_slice(body))
                .ok()
                .filter(|u| u.kind == "Status")
                .and_then(|u| status_as_written(&u.raw).ok())
                .ok_or(())
        } else {
            serde_json::from_slice::<Status>(body).map_err(|_| ())
        };
        match decoded {
            Ok(mut s) if !s.message.is_empty() || !s.reason.is_empty() => {
                if s.code == 0 {
                    s.code = code;
                }
                s
            }
            // Not quoted back: its strings are not marked as JSON's are, and may be a Secret's.
            _ if body.starts_with(&crate::wire::protobuf::MAGIC) => Status::failure(
                code,
                reason_for_code(code),
                "a protobuf body that is not a Status",
            ),
            _ => {
                let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
                let message = super::snippet::body_snippet(text.trim(), 1024);
                Status::failure(code, reason_for_code(code), message)
            }
        }
    }
}

impl Status {
    /// Decodes a `meta.v1.Status` message (the `raw` of an envelope of kind `Status`: a failed
    /// request's body, a list that is a `Status`, a watch `ERROR` frame's object). A code of 0 or
    /// beyond `u16` reads as 500, as client-go reads a Status that names no usable code.
    pub fn from_protobuf(message: &[u8]) -> Result<Self, ProtobufError> {
        status(message)
    }
}

/// Decodes a `meta.v1.Status` message (see [`Status::from_protobuf`]).
/// or beyond `u16` reads as 500, as client-go reads a Status that names no usable code.
fn status(bytes: &[u8]) -> Result<Status, ProtobufError> {
    let mut s = status_as_written(bytes)?;
    if s.code == 0 {
        s.code = 500;
    }
    Ok(s)
}

/// [`status`] with the code as written (0 when absent or unusable).
fn status_as_written(bytes: &[u8]) -> Result<Status, ProtobufError> {
    const WHAT: &str = "meta.v1.Status";
    let mut fields = Reader::new(bytes, WHAT);
    let mut s = Status::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(2, b) => s.status = string(b, WHAT)?,
            Field::Bytes(3, b) => s.message = utf8(b, WHAT)?.to_string(),
            Field::Bytes(4, b) => s.reason = utf8(b, WHAT)?.to_string(),
            Field::Bytes(5, b) => s.details = Some(status_details(b)?),
            Field::Varint(6, v) => s.code = u16::try_from(v as i32).unwrap_or(0),
            _ => {}
        }
    }
    Ok(s)
}

fn status_details(bytes: &[u8]) -> Result<StatusDetails, ProtobufError> {
    const WHAT: &str = "meta.v1.StatusDetails";
    let mut fields = Reader::new(bytes, WHAT);
    let mut d = StatusDetails::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => d.name = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => d.kind = utf8(b, WHAT)?.to_string(),
            Field::Bytes(4, b) => d.causes.push(status_cause(b)?),
            Field::Varint(5, v) => d.retry_after_seconds = u32::try_from(v as i32).ok(),
            _ => {}
        }
    }
    Ok(d)
}

fn status_cause(bytes: &[u8]) -> Result<StatusCause, ProtobufError> {
    const WHAT: &str = "meta.v1.StatusCause";
    let mut fields = Reader::new(bytes, WHAT);
    let mut c = StatusCause::default();
    while let Some(f) = fields.next_field()? {
        match f {
            Field::Bytes(1, b) => c.cause_type = utf8(b, WHAT)?.to_string(),
            Field::Bytes(2, b) => c.message = utf8(b, WHAT)?.to_string(),
            Field::Bytes(3, b) => c.field = utf8(b, WHAT)?.to_string(),
            _ => {}
        }
    }
    Ok(c)
}

fn string(bytes: &[u8], what: &'static str) -> Result<Option<String>, ProtobufError> {
    let s = utf8(bytes, what)?;
    Ok((!s.is_empty()).then(|| s.to_string()))
}

fn reason_for_code(code: u16) -> &'static str {
    match code {
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        410 => "Expired",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_resource_version_is_detected_in_all_three_forms() {
        let cause: Status = serde_json::from_str(
            r#"{"code":504,"reason":"Timeout","details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"x"}]}}"#,
        )
        .unwrap();
        assert!(cause.is_too_large_resource_version());
        let old_cause: Status = serde_json::from_str(
            r#"{"code":504,"reason":"Timeout","details":{"causes":[{"message":"Too large resource version: 5, current: 4"}]}}"#,
        )
        .unwrap();
        assert!(old_cause.is_too_large_resource_version());
        let msg = Status::failure(504, "Timeout", "Too large resource version: 5");
        assert!(msg.is_too_large_resource_version());
        assert!(
            !Status::failure(500, "InternalError", "Too large resource version")
                .is_too_large_resource_version()
        );
    }

    #[test]
    fn non_status_body_becomes_a_status_with_the_http_code() {
        let s = Status::from_response(410, b"gone away");
        assert!(s.is_expired());
        assert_eq!(s.message, "gone away");
        let s = Status::from_response(
            429,
            br#"{"kind":"Status","code":429,"reason":"TooManyRequests","message":"slow down"}"#,
        );
        assert!(s.is_too_many_requests());
    }
}
