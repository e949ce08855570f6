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
    pub fn method_not_allowed(method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource: {method}"),
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

    /// 410 Expired for a list at a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/json, application/merge-patch+json; got {content_type}"),
        )
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
        m.insert("reason".into(), self.reason.into());
        if let Some(d) = &self.details {
            m.insert("details".into(), d.clone());
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
