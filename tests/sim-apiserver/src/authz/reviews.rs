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
        decode_protobuf(&bytes, &def.kind)?
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
        "selfsubjectreviews" => {
            let mut user = json!({"username": u.name, "groups": u.groups});
            if let Some(uid) = &u.uid {
                user["uid"] = json!(uid);
            }
            json!({"userInfo": user})
        }
        "selfsubjectaccessreviews" => access_review(policy, u, &review)?,
        _ => {
            let status = rules_review(policy, u, &review);
            // kube-apiserver answers the spec without the namespace it asked about.
            if let Some(spec) = review.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("namespace");
            }
            status
        }
    };
    review["kind"] = json!(def.kind);
    review["apiVersion"] = json!(def.api_version());
    if !review["metadata"].is_object() {
        review["metadata"] = json!({});
    }
    if def.plural == "selfsubjectreviews" {
        // A SelfSubjectReview is stamped with the time it was made; the access reviews are not.
        review["metadata"]["creationTimestamp"] = json!(crate::time::rfc3339_now());
    }
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
            if u.is_master() || policy.allows(u, &a) {
                return Ok(json!({"allowed": true}));
            }
            if self_review_allowed(&a) {
                return Ok(json!({"allowed": true, "reason": default_binding_reason("system:basic-user")}));
            }
            Ok(json!({"allowed": false}))
        }
        (None, Some(nra)) => {
            if u.is_master() {
                return Ok(json!({"allowed": true}));
            }
            let (verb, path) = (s(nra, "verb"), s(nra, "path"));
            let role = [
                ("system:discovery", DISCOVERY_PATHS),
                ("system:public-info-viewer", PUBLIC_INFO_PATHS),
            ]
            .into_iter()
            .find(|(_, paths)| verb == "get" && matches_path(paths, &path));
            Ok(match role {
                Some((role, _)) => json!({"allowed": true, "reason": default_binding_reason(role)}),
                None => json!({"allowed": false}),
            })
        }
        // kube-apiserver's validation names no kind here.
        _ => Err(ApiError::invalid(
            "",
            AUTHORIZATION,
            "",
            "spec.resourceAttributes",
            "FieldValueInvalid",
            "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
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

/// RBAC's reason for what a default ClusterRole bound to `system:authenticated` allows.
fn default_binding_reason(role: &str) -> String {
    format!("RBAC: allowed by ClusterRoleBinding {role:?} of ClusterRole {role:?} to Group \"system:authenticated\"")
}

/// The non-resource paths kube's `system:public-info-viewer` lets everyone get.
const PUBLIC_INFO_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// The non-resource paths kube's `system:discovery` lets every authenticated user get.
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

fn matches_path(paths: &[&str], p: &str) -> bool {
    paths.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => p.starts_with(prefix),
        None => p == *d,
    })
}

fn rules_review(policy: &Policy, u: &UserInfo, review: &Value) -> Value {
    let ns = review
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Every authenticated user's default roles (system:basic-user, system:discovery,
    // system:public-info-viewer), then what it is granted; system:masters everything besides.
    let mut rules = vec![
        json!({"verbs": ["create"], "apiGroups": [AUTHORIZATION], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
        json!({"verbs": ["create"], "apiGroups": [AUTHENTICATION], "resources": ["selfsubjectreviews"]}),
    ];
    let mut non_resource = vec![
        json!({"verbs": ["get"], "nonResourceURLs": DISCOVERY_PATHS}),
        json!({"verbs": ["get"], "nonResourceURLs": PUBLIC_INFO_PATHS}),
    ];
    if u.is_master() {
        rules.insert(
            0,
            json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}),
        );
        non_resource.insert(0, json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    for r in policy.rules_in(u, ns) {
        let mut v = json!({"verbs": r.verbs, "apiGroups": r.api_groups, "resources": r.resources});
        if !r.resource_names.is_empty() {
            v["resourceNames"] = json!(r.resource_names);
        }
        rules.push(v);
    }
    json!({
        "resourceRules": rules,
        "nonResourceRules": non_resource,
        "incomplete": false,
    })
}

/// A protobuf review body (envelope included) as JSON, by the simulator's protobuf codec.
fn decode_protobuf(body: &bytes::Bytes, kind: &str) -> Result<Value, ApiError> {
    crate::protobuf::decode_object(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {kind}): {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::protobuf::encode_object;

    /// kubectl's protobuf review is read by the simulator's protobuf codec, as any other body.
    #[test]
    fn a_protobuf_access_review_reads_as_its_json() {
        let review = json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}
        });
        let body = bytes::Bytes::from(encode_object(&review).unwrap());
        let v = super::decode_protobuf(&body, "SelfSubjectAccessReview").unwrap();
        assert_eq!(
            v["spec"]["resourceAttributes"],
            json!({"namespace": "default", "verb": "list", "resource": "pods"})
        );
        let cut = body.slice(..body.len() - 3);
        assert!(super::decode_protobuf(&cut, "SelfSubjectAccessReview").is_err());
        assert!(super::decode_protobuf(
            &bytes::Bytes::from_static(b"{}"),
            "SelfSubjectAccessReview"
        )
        .is_err());
    }
}
