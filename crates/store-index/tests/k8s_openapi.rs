//! Behind the `k8s-openapi` feature every `k8s_openapi` resource type is an `Object`.
#![cfg(feature = "k8s-openapi")]

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use store_index::{Indexer, Indexers, Object};

#[test]
fn k8s_openapi_types_work_without_glue() {
    let pod: Pod = serde_json::from_str(
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","resourceVersion":"4","labels":{"app":"web"},"deletionTimestamp":"2024-05-01T10:00:00Z"}}"#,
    )
    .unwrap();
    assert_eq!(pod.name(), "p");
    assert_eq!(pod.namespace(), Some("ns"));
    assert_eq!(pod.resource_version(), Some("4"));
    assert_eq!(pod.label("app"), Some("web"));
    assert_eq!(pod.kind(), Some("Pod"));
    assert_eq!(pod.api_version(), Some("v1"));
    assert_eq!(
        pod.deletion_timestamp().as_deref(),
        Some("2024-05-01T10:00:00Z")
    );

    let indexer = Indexer::new(Indexers::new().with_namespace_index());
    indexer.add(Arc::new(pod)).unwrap();
    assert_eq!(indexer.index_keys("namespace", "ns").unwrap(), ["ns/p"]);

    let cm = ConfigMap::default();
    assert_eq!(cm.kind(), Some("ConfigMap"));
}
