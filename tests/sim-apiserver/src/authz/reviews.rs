//! The self reviews: `authorization.k8s.io/v1` `SelfSubjectAccessReview` (`kubectl auth
//! can-i`) and `SelfSubjectRulesReview` (`kubectl auth can-i --list`), and
//! `authentication.k8s.io/v1` `SelfSubjectReview` (`kubectl auth whoami`). Each is a POST
//! answered 201 with the review and its `status`; nothing is stored.

use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};

use super::{Attributes, Policy};
use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::users::UserInfo;

/// The biggest review body read (reviews are a few hundred bytes).
const MAX_REVIEW_BYTES: usize = 64 * 1024;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

/// The review resources, for the registry.
pub(crate) fn defs() -> Vec<ResourceDef> {
    vec![
        ResourceDef::new(
            AUTHENTICATION,
            "v1",
            "SelfSubjectReview",
            "selfsubjectreviews",
            false,
        ),
        ResourceDef::new(
            AUTHORIZATION,
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
        ),
        ResourceDef::new(
            AUTHORIZATION,
            "v1",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            false,
        ),
    ]
}

/// Whether `def` is one of the reviews (served here, not by the store).
pub(crate) fn is_review(def: &ResourceDef) -> bool {
    (def.group == AUTHORIZATION || def.group == AUTHENTICATION)
        && def.version == "v1"
        && def.plural.starts_with("selfsubject")
}

/// Answers a request on a review resource: only a POST of the collection is served.
pub(crate) async fn handle(
    policy: &Policy,
    u: &UserInfo,
    method: &http::Method,
    def: &ResourceDef,
    name: Option<&str>,
    content_type: Option<&str>,
    body: Incoming,
) -> Result<(StatusCode, Value), ApiError> {
    // kubectl's typed clients send built-in kinds as protobuf (and accept JSON back).
    let protobuf = content_type.is_some_and(|c| c.starts_with(PROTOBUF));
    if method != http::Method::POST || name.is_some() {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    let bytes = http_body_util::Limited::new(body, MAX_REVIEW_BYTES)
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?
        .to_bytes();
    let mut review: Value = if protobuf {
        proto::review(&bytes, &def.plural).ok_or_else(|| {
            ApiError::bad_request(format!(
                "the object provided is unrecognized (must be of type {})",
                def.kind
            ))
        })?
    } else {
        serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::bad_request(format!("the object provided is unrecognized: {e}"))
        })?
    };
    if !review.is_object() {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {})",
            def.kind
        )));
    }
    let status = match def.plural.as_str() {
        "selfsubjectreviews" => json!({"userInfo": {"username": u.name, "groups": u.groups}}),
        "selfsubjectaccessreviews" => access_review(policy, u, &review)?,
        _ => rules_review(policy, u, &review),
    };
    review["kind"] = json!(def.kind);
    review["apiVersion"] = json!(def.api_version());
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    review["metadata"]["creationTimestamp"] = Value::Null;
    review["status"] = status;
    Ok((StatusCode::CREATED, review))
}

fn access_review(policy: &Policy, u: &UserInfo, review: &Value) -> Result<Value, ApiError> {
    let spec = &review["spec"];
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes").filter(|v| v.is_object()),
        spec.get("nonResourceAttributes").filter(|v| v.is_object()),
    ) {
        (Some(ra), None) => {
            let a = Attributes {
                verb: s(ra, "verb"),
                group: s(ra, "group"),
                resource: s(ra, "resource"),
                subresource: s(ra, "subresource"),
                namespace: s(ra, "namespace"),
                name: s(ra, "name"),
            };
            let allowed = policy.allows(u, &a) || self_review_allowed(&a);
            Ok(json!({"allowed": allowed}))
        }
        (None, Some(nra)) => {
            let allowed = u.is_master()
                || (s(nra, "verb") == "get" && discovery_path(&s(nra, "path")));
            Ok(json!({"allowed": allowed}))
        }
        _ => Err(ApiError::invalid(
            "SelfSubjectAccessReview",
            AUTHORIZATION,
            "",
            "spec.resourceAttributes",
            "FieldValueInvalid",
            "Invalid value: \"null\": exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )),
    }
}

/// Every authenticated user may create the self reviews (kube's `system:basic-user`).
fn self_review_allowed(a: &Attributes) -> bool {
    a.verb == "create"
        && a.subresource.is_empty()
        && ((a.group == AUTHORIZATION
            && matches!(
                a.resource.as_str(),
                "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
            ))
            || (a.group == AUTHENTICATION && a.resource == "selfsubjectreviews"))
}

/// The non-resource paths every authenticated user may get (kube's `system:discovery`,
/// `system:public-info-viewer`).
const DISCOVERY_PATHS: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

fn discovery_path(p: &str) -> bool {
    DISCOVERY_PATHS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => p.starts_with(prefix),
        None => p == *d,
    })
}

fn rules_review(policy: &Policy, u: &UserInfo, review: &Value) -> Value {
    let ns = review
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if u.is_master() {
        return json!({
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": false,
        });
    }
    let mut rules = vec![
        json!({"verbs": ["create"], "apiGroups": [AUTHORIZATION], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
        json!({"verbs": ["create"], "apiGroups": [AUTHENTICATION], "resources": ["selfsubjectreviews"]}),
    ];
    for r in policy.rules_in(u, ns) {
        let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
        if !r.resource_names.is_empty() {
            v["resourceNames"] = json!(r.resource_names);
        }
        rules.push(v);
    }
    json!({
        "resourceRules": rules,
        "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": DISCOVERY_PATHS}],
        "incomplete": false,
    })
}

/// Just enough of Kubernetes' protobuf encoding to read a review's spec: the `k8s\0`
/// envelope (a `runtime.Unknown` holding the object's bytes) and the spec's string fields.
mod proto {
    use serde_json::{json, Map, Value};

    /// A field's value: a number (ignored) or bytes.
    enum Field<'a> {
        Number,
        Bytes(&'a [u8]),
    }

    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&x, rest) = b.split_first()?;
            *b = rest;
            v |= u64::from(x & 0x7f) << shift;
            if x < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// The fields of a message by number, or `None` when it is not well formed.
    fn fields(mut b: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b)?;
            let f = match key & 7 {
                0 => {
                    varint(&mut b)?;
                    Field::Number
                }
                1 => {
                    b = b.get(8..)?;
                    Field::Number
                }
                2 => {
                    let n = usize::try_from(varint(&mut b)?).ok()?;
                    if n > b.len() {
                        return None;
                    }
                    let (v, rest) = b.split_at(n);
                    b = rest;
                    Field::Bytes(v)
                }
                5 => {
                    b = b.get(4..)?;
                    Field::Number
                }
                _ => return None,
            };
            out.push((key >> 3, f));
        }
        Some(out)
    }

    /// Field `n` of a message (empty when absent), or `None` when it is not well formed.
    fn field(b: &[u8], n: u64) -> Option<Option<&[u8]>> {
        Some(fields(b)?.into_iter().find_map(|(k, f)| match f {
            Field::Bytes(v) if k == n => Some(v),
            _ => None,
        }))
    }

    /// A message of string fields as a JSON object, by field number.
    fn strings(b: &[u8], names: &[(u64, &str)]) -> Option<Value> {
        let mut m = Map::new();
        for (k, f) in fields(b)? {
            if let (Field::Bytes(v), Some((_, name))) = (f, names.iter().find(|(n, _)| *n == k)) {
                m.insert(name.to_string(), json!(std::str::from_utf8(v).ok()?));
            }
        }
        Some(Value::Object(m))
    }

    /// The review in `body` (envelope included) as JSON with its spec.
    pub(super) fn review(body: &[u8], plural: &str) -> Option<Value> {
        let unknown = body.strip_prefix(b"k8s\0")?;
        let raw = field(unknown, 2)?.unwrap_or_default();
        let spec = field(raw, 2)?.unwrap_or_default();
        let spec = match plural {
            "selfsubjectaccessreviews" => {
                let mut s = Map::new();
                if let Some(ra) = field(spec, 1)? {
                    let names = [
                        (1, "namespace"),
                        (2, "verb"),
                        (3, "group"),
                        (4, "version"),
                        (5, "resource"),
                        (6, "subresource"),
                        (7, "name"),
                    ];
                    s.insert("resourceAttributes".into(), strings(ra, &names)?);
                }
                if let Some(nra) = field(spec, 2)? {
                    let names = [(1, "path"), (2, "verb")];
                    s.insert("nonResourceAttributes".into(), strings(nra, &names)?);
                }
                Value::Object(s)
            }
            "selfsubjectrulesreviews" => strings(spec, &[(1, "namespace")])?,
            _ => json!({}),
        };
        Some(json!({"metadata": {}, "spec": spec}))
    }

    #[cfg(test)]
    mod tests {
        /// A length-delimited field.
        fn ld(n: u8, v: &[u8]) -> Vec<u8> {
            let mut out = vec![(n << 3) | 2, v.len() as u8];
            out.extend_from_slice(v);
            out
        }

        #[test]
        fn a_protobuf_access_review_reads_as_its_json() {
            let ra = [ld(1, b"default"), ld(2, b"list"), ld(5, b"pods")].concat();
            let raw = ld(2, &ld(1, &ra));
            let unknown = [ld(1, &ld(2, b"SelfSubjectAccessReview")), ld(2, &raw)].concat();
            let body = [b"k8s\0".as_slice(), &unknown].concat();
            let v = super::review(&body, "selfsubjectaccessreviews").unwrap();
            assert_eq!(
                v["spec"]["resourceAttributes"],
                serde_json::json!({"namespace": "default", "verb": "list", "resource": "pods"})
            );
            assert!(super::review(&body[..body.len() - 3], "selfsubjectaccessreviews").is_none());
            assert!(super::review(b"{}", "selfsubjectaccessreviews").is_none());
        }
    }
}
