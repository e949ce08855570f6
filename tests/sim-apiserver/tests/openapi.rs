//! `/openapi/v2` and `/openapi/v3/...` over HTTP: the schemas of the built-in kinds with their
//! GVKs and strategic-merge metadata, custom resources with their own schema, and the media
//! types kubectl asks for.

mod common;

use std::collections::BTreeSet;

use common::Client;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use sim_apiserver::{ResourceDef, SimServer};

const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

async fn sim() -> SimServer {
    let gadget = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"size": {"type": "integer", "nullable": true}}}}});
    SimServer::builder()
        .resource(ResourceDef::new(
            "example.com",
            "v1",
            "Widget",
            "widgets",
            true,
        ))
        .resource(
            ResourceDef::new("example.com", "v1", "Gadget", "gadgets", true).with_schema(gadget),
        )
        .start()
        .await
        .unwrap()
}

/// Every `$ref` in `doc` names something under `prefix` in `defs`.
fn assert_refs_resolve(doc: &Value, defs: &serde_json::Map<String, Value>, prefix: &str) {
    match doc {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get("$ref") {
                let n = r.strip_prefix(prefix).unwrap_or_else(|| panic!("{r}"));
                assert!(defs.contains_key(n), "unresolved {r}");
            }
            m.values()
                .for_each(|v| assert_refs_resolve(v, defs, prefix));
        }
        Value::Array(a) => a.iter().for_each(|v| assert_refs_resolve(v, defs, prefix)),
        _ => {}
    }
}

#[tokio::test]
async fn openapi_v2_json_has_the_definitions_gvks_patch_metadata_and_paths() {
    let sim = sim().await;
    let c = Client::new(&sim);
    let (r, _) = c.get_accepting("/openapi/v2", "application/json").await;
    assert_eq!(r.status, StatusCode::OK);
    let doc = r.body;
    assert_eq!(doc["swagger"], "2.0");
    let defs = doc["definitions"].as_object().unwrap();
    assert_eq!(
        defs["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    let env = &defs["io.k8s.api.core.v1.Container"]["properties"]["env"];
    assert_eq!(env["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(env["x-kubernetes-patch-strategy"], "merge");
    let volumes = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["volumes"];
    assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
    // The custom resource's schema, made Swagger 2.0 (`nullable` is OpenAPI 3 only).
    let gadget = &defs["com.example.v1.Gadget"];
    assert_eq!(
        gadget["x-kubernetes-group-version-kind"][0]["kind"],
        "Gadget"
    );
    assert_eq!(
        gadget["properties"]["spec"]["properties"]["size"],
        json!({"type": "integer"})
    );
    assert_refs_resolve(&doc, defs, "#/definitions/");
    let patch = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"]["kind"],
        "Deployment"
    );
    assert!(patch["consumes"]
        .as_array()
        .unwrap()
        .contains(&json!("application/strategic-merge-patch+json")));
    assert!(
        doc["paths"]["/api/v1/namespaces/{namespace}/pods"]["post"]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
}

#[tokio::test]
async fn openapi_v2_answers_protobuf_to_client_go_and_406_to_what_it_cannot_encode() {
    let sim = sim().await;
    let c = Client::new(&sim);
    let r = c
        .raw_with(Method::GET, "/openapi/v2", None, &[("accept", PROTOBUF)])
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    // Go's media-type parser takes this spelling, not the one with `@`.
    assert_eq!(
        r.headers()["content-type"],
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    );
    let body = r.into_body().collect().await.unwrap().to_bytes();
    // Document.swagger (field 1) = "2.0" first, then the definitions by name.
    assert_eq!(&body[..5], b"\x0a\x032.0");
    let has = |s: &[u8]| body.windows(s.len()).any(|w| w == s);
    assert!(has(b"io.k8s.api.core.v1.Pod"));
    assert!(has(b"x-kubernetes-patch-merge-key"));
    let (r, _) = c.get_accepting("/openapi/v2", "text/html").await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
}

#[tokio::test]
async fn openapi_v3_documents_carry_components_for_built_in_and_custom_kinds() {
    let sim = sim().await;
    let c = Client::new(&sim);
    let root = c.get("/openapi/v3").await.body;
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    let doc = c.get(&url).await.body;
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let pod = &schemas["io.k8s.api.core.v1.Pod"];
    assert_eq!(
        pod["x-kubernetes-group-version-kind"],
        json!([{"group": "", "version": "v1", "kind": "Pod"}])
    );
    assert_eq!(
        pod["properties"]["spec"]["allOf"],
        json!([{"$ref": "#/components/schemas/io.k8s.api.core.v1.PodSpec"}])
    );
    let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(
        containers["items"]["$ref"],
        "#/components/schemas/io.k8s.api.core.v1.Container"
    );
    assert_refs_resolve(&doc, schemas, "#/components/schemas/");
    // Only what the core group's kinds need: no Deployment here.
    assert!(!schemas.contains_key("io.k8s.api.apps.v1.Deployment"));
    let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
    let types: BTreeSet<&str> = patch["requestBody"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(
        types.contains("application/strategic-merge-patch+json"),
        "{types:?}"
    );

    // Custom resources: no strategic merge patch; a schema where the resource has one.
    let doc = c.get("/openapi/v3/apis/example.com/v1").await.body;
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    assert_eq!(
        schemas["com.example.v1.Gadget"]["x-kubernetes-group-version-kind"][0]["kind"],
        "Gadget"
    );
    assert_eq!(
        schemas["com.example.v1.Gadget"]["properties"]["spec"]["properties"]["size"]["nullable"],
        true
    );
    assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    assert!(!schemas.keys().any(|k| k.contains("Widget")));
    for plural in ["widgets", "gadgets"] {
        let patch = &doc["paths"]
            [format!("/apis/example.com/v1/namespaces/{{namespace}}/{plural}/{{name}}")]["patch"];
        let content = patch["requestBody"]["content"].as_object().unwrap();
        assert!(
            content.contains_key("application/merge-patch+json"),
            "{plural}"
        );
        assert!(
            !content.contains_key("application/strategic-merge-patch+json"),
            "{plural}"
        );
    }
    assert_eq!(
        c.get("/openapi/v3/apis/nothing/v1").await.status,
        StatusCode::NOT_FOUND
    );
}
