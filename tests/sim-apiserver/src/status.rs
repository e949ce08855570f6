//! `Status` error objects with the codes, reasons and shapes kube-apiserver uses.

use serde_json::{json, Map, Value};

/// An API error, rendered as a `meta.k8s.io/v1` `Status` object.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code (also the `code` field).
    pub code: u16,
    /// The `reason` field (`NotFound`, `Expired`, ...).
    pub reason: &'static str,
    /// The human-readable `message`.
    pub message: String,
    /// The `details` object, if any.
    pub details: Option<Value>,
    /// Seconds for the `Retry-After` header, if any.
    pub retry_after: Option<u64>,
    /// `metadata.continue` of the Status (set on an expired continue token).
    pub continue_token: Option<String>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden, as the authorizer phrases it.
    pub fn forbidden(
        user: &str,
        verb: &str,
        resource: &str,
        group: &str,
        namespace: Option<&str>,
    ) -> Self {
        let scope = match namespace {
            Some(ns) => format!(" in the namespace \"{ns}\""),
            None => " at the cluster scope".to_string(),
        };
        Self::new(
            403,
            "Forbidden",
            format!(
                "{resource} is forbidden: User \"{user}\" cannot {verb} resource \"{resource}\" in API group \"{group}\"{scope}"
            ),
        )
        .with_details(json!({"kind": resource}))
    }

    /// 404 NotFound for a named object.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        let qualified = qualified(resource, group);
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(details(name, group, resource))
    }

    /// 404 NotFound for an unknown path.
    pub fn path_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(_method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .with_details(json!({}))
    }

    /// 406 NotAcceptable: the `Accept` header asks for no representation the server can produce
    /// (kube-apiserver's content negotiation error, without details).
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 409 AlreadyExists on create.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        let qualified = qualified(resource, group);
        Self::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(resource: &str, group: &str, name: &str) -> Self {
        let qualified = qualified(resource, group);
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {qualified} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
            ),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 Conflict on `resource` `name` for another reason than a stale resourceVersion
    /// (`Operation cannot be fulfilled on pods "p": <why>`).
    pub fn conflict_because(resource: &str, group: &str, name: &str, why: &str) -> Self {
        let qualified = qualified(resource, group);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(details(name, group, resource))
    }

    /// The 409 Conflict kube-apiserver answers an update with a stale resourceVersion
    /// ("Operation cannot be fulfilled on leases.coordination.k8s.io \"l\": the object has
    /// been modified; ..."), to inject with [`crate::Faults::fail_next_with`]. Same as
    /// [`ApiError::conflict`].
    pub fn update_conflict(resource: &str, group: &str, name: &str) -> Self {
        Self::conflict(resource, group, name)
    }

    /// 422 Invalid for request options (`CreateOptions`, `PatchOptions`, `DeleteOptions`
    /// of `meta.k8s.io`), as kube-apiserver validates query parameters and DeleteOptions:
    /// `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: ...`.
    pub fn invalid_options(kind: &str, field: &str, cause_reason: &str, detail: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind}.meta.k8s.io \"\" is invalid: {field}: {detail}"),
        )
        .with_details(json!({
            "group": "meta.k8s.io", "kind": kind,
            "causes": [{"reason": cause_reason, "message": detail, "field": field}],
        }))
    }

    /// 422 Invalid with several causes, each `(reason, field, message)`.
    pub fn invalid_causes(
        kind: &str,
        group: &str,
        name: &str,
        causes: &[(&str, String, String)],
    ) -> Self {
        let qualified = qualified(kind, group);
        let list: Vec<String> = causes.iter().map(|(_, f, m)| format!("{f}: {m}")).collect();
        let message = if list.len() == 1 {
            format!("{qualified} \"{name}\" is invalid: {}", list[0])
        } else {
            format!("{qualified} \"{name}\" is invalid: [{}]", list.join(", "))
        };
        let causes: Vec<Value> = causes
            .iter()
            .map(|(r, f, m)| json!({"reason": r, "message": m, "field": f}))
            .collect();
        Self::new(422, "Invalid", message).with_details(json!({
            "name": name, "group": group, "kind": kind, "causes": causes,
        }))
    }

    /// 409 Conflict of a server-side apply: `conflicts` are `(manager, field path)` pairs,
    /// with kube-apiserver's message (`Apply failed with 1 conflict: conflict with "m":
    /// .spec.replicas`) and one `FieldManagerConflict` cause each.
    pub fn apply_conflict(conflicts: &[(String, String)]) -> Self {
        let message = match conflicts {
            [(m, f)] => format!("Apply failed with 1 conflict: conflict with \"{m}\": {f}"),
            _ => {
                let mut s = format!("Apply failed with {} conflicts:", conflicts.len());
                let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
                managers.dedup();
                for m in managers {
                    s.push_str(&format!(" conflicts with \"{m}\":"));
                    for (_, f) in conflicts.iter().filter(|(x, _)| x == m) {
                        s.push_str(&format!("\n- {f}"));
                    }
                }
                s
            }
        };
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(m, f)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{m}\""), "field": f}))
            .collect();
        Self::new(409, "Conflict", message).with_details(json!({"causes": causes}))
    }

    /// 410 Expired for a list at a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json; got {content_type}"),
        )
        .with_details(json!({}))
    }

    /// 415 for a create or update body in a media type the server does not decode (`accepted`
    /// lists those it does).
    pub fn unsupported_media_type_of(accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {accepted}"),
        )
    }

    /// 415 for a PATCH whose `Content-Type` is no patch type, in kube-apiserver's words.
    pub fn unsupported_patch_media_type() -> Self {
        Self::new(415, "UnsupportedMediaType", "415: Unsupported Media Type")
            .with_details(json!({}))
    }

    /// 422 Invalid with one field cause.
    pub fn invalid(
        kind: &str,
        group: &str,
        name: &str,
        field: &str,
        cause_reason: &str,
        detail: &str,
    ) -> Self {
        let qualified = qualified(kind, group);
        Self::new(
            422,
            "Invalid",
            format!("{qualified} \"{name}\" is invalid: {field}: {detail}"),
        )
        .with_details(json!({
            "name": name, "group": group, "kind": kind,
            "causes": [{"reason": cause_reason, "message": detail, "field": field}],
        }))
    }

    /// 500 without a reason: what kube-apiserver answers for an error it did not classify
    /// (a strategic merge patch directive it does not know, a get at a malformed
    /// resourceVersion).
    pub fn unclassified(message: impl Into<String>) -> Self {
        Self::new(500, "", message)
    }

    /// 422 Invalid for a request that cannot be carried out on this object, e.g. a JSON patch
    /// whose `test` fails or whose path does not exist: kube-apiserver's generic 422 answer,
    /// which says no more than `the server rejected our request due to an error in our
    /// request` (with empty `details`); `why` is only logged, at debug level.
    pub fn unprocessable(why: impl Into<String>) -> Self {
        tracing::debug!(why = %why.into(), "request rejected with a generic 422");
        Self::new(
            422,
            "Invalid",
            "the server rejected our request due to an error in our request",
        )
        .with_details(json!({}))
    }

    /// 429 TooManyRequests with `retryAfterSeconds` and a `Retry-After` header.
    pub fn too_many_requests(retry_after: u64) -> Self {
        let mut e = Self::new(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        )
        .with_details(json!({"retryAfterSeconds": retry_after}));
        e.retry_after = Some(retry_after);
        e
    }

    /// 500 InternalError.
    pub fn internal(message: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {message}"),
        )
        .with_details(json!({"causes": [{"message": message}]}))
    }

    /// 503 ServiceUnavailable.
    pub fn service_unavailable(message: &str) -> Self {
        let mut e = Self::new(503, "ServiceUnavailable", message);
        e.retry_after = Some(1);
        e
    }

    /// 504 Timeout for a resourceVersion from the future (`NewTooLargeResourceVersionError`).
    pub fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut e = Self::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        e.retry_after = Some(1);
        e
    }

    /// A generic error for an injected status code (used by fault injection).
    pub fn for_code(code: u16) -> Self {
        match code {
            400 => Self::bad_request("injected fault"),
            401 => Self::unauthorized(),
            403 => Self::forbidden("system:anonymous", "list", "pods", "", None),
            404 => Self::path_not_found(),
            409 => Self::conflict("pods", "", "injected"),
            410 => Self::expired("The resourceVersion for the provided list is too old."),
            429 => Self::too_many_requests(1),
            500 => Self::internal("injected fault"),
            503 => Self::service_unavailable(
                "injected fault: the server is currently unable to handle the request",
            ),
            504 => {
                let mut e = Self::new(
                    504,
                    "Timeout",
                    "Timeout: request did not complete within the allowed duration",
                )
                .with_details(json!({"retryAfterSeconds": 1}));
                e.retry_after = Some(1);
                e
            }
            c => Self::new(c, "InternalError", format!("injected fault {c}")),
        }
    }

    /// The `Status` object as JSON.
    pub fn to_value(&self) -> Value {
        let mut metadata = Map::new();
        if let Some(c) = &self.continue_token {
            metadata.insert("continue".into(), Value::String(c.clone()));
        }
        let mut m = Map::new();
        m.insert("kind".into(), "Status".into());
        m.insert("apiVersion".into(), "v1".into());
        m.insert("metadata".into(), Value::Object(metadata));
        m.insert("status".into(), "Failure".into());
        m.insert("message".into(), Value::String(self.message.clone()));
        if !self.reason.is_empty() {
            m.insert("reason".into(), self.reason.into());
        }
        if let Some(d) = &self.details {
            m.insert("details".into(), omit_empty(d));
        }
        m.insert("code".into(), self.code.into());
        Value::Object(m)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

/// `details` as Go writes `StatusDetails`: its empty strings, zero numbers and empty lists are
/// left out (`omitempty`).
fn omit_empty(details: &Value) -> Value {
    let Value::Object(fields) = details else {
        return details.clone();
    };
    let kept = fields
        .iter()
        .filter(|(_, v)| match v {
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => n.as_f64() != Some(0.0),
            Value::Array(a) => !a.is_empty(),
            Value::Null => false,
            _ => true,
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Value::Object(kept)
}

fn details(name: &str, group: &str, resource: &str) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), name.into());
    if !group.is_empty() {
        m.insert("group".into(), group.into());
    }
    m.insert("kind".into(), resource.into());
    Value::Object(m)
}

/// The `Status` object for a successful delete of a collection-less resource (unused by pods).
pub fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
}
