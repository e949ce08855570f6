//! The metadata representation: lists, watches and gets asked for `PartialObjectMetadata` through
//! the `Accept` header, the fallback to whole objects, and 406 for what cannot be served.

mod common;

use common::{name, rv, Client};
use http::StatusCode;
use serde_json::{json, Value};
use sim_apiserver::SimServer;

const PODS: &str = "/api/v1/namespaces/default/pods";
const LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const OBJECT: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

/// A pod with a large spec, as real pods' specs and statuses are most of their bytes.
fn big_pod(name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-1", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "busybox", "args": ["x".repeat(2000)]}]},
    })
}

/// Asserts `o` is `stored` in the metadata representation.
fn assert_partial_of(o: &Value, stored: &Value) {
    assert_eq!(o["kind"], "PartialObjectMetadata", "{o}");
    assert_eq!(o["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(o["metadata"], stored["metadata"]);
    let fields: Vec<&str> = o.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        fields.len(),
        3,
        "only kind, apiVersion, metadata: {fields:?}"
    );
}

#[tokio::test]
async fn a_list_asked_for_metadata_is_a_partial_object_metadata_list_a_fraction_of_the_size() {
    let sim = SimServer::builder()
        .watch_cache(false)
        .start()
        .await
        .unwrap();
    for i in 0..5 {
        sim.create("pods", None, big_pod(&format!("p{i}"))).unwrap();
    }
    let c = Client::new(&sim);
    let (full, full_len) = c.get_accepting(PODS, "application/json").await;
    let (meta, meta_len) = c.get_accepting(PODS, LIST).await;
    assert_eq!(meta.status, StatusCode::OK);
    assert_eq!(meta.headers["content-type"], "application/json");
    let body = &meta.body;
    assert_eq!(body["kind"], "PartialObjectMetadataList");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(body["metadata"], full.body["metadata"]);
    let items = body["items"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    for (item, stored) in items.iter().zip(sim.list("pods", Some("default")).unwrap()) {
        assert_partial_of(item, &stored);
    }
    assert!(
        meta_len * 5 < full_len,
        "metadata list {meta_len} bytes, full list {full_len}"
    );
    // Pagination is the same in either representation: same pages, same continue tokens.
    let (page, _) = c.get_accepting(&format!("{PODS}?limit=2"), LIST).await;
    let (full_page, _) = c
        .get_accepting(&format!("{PODS}?limit=2"), "application/json")
        .await;
    assert_eq!(page.body["metadata"], full_page.body["metadata"]);
    let token = page.body["metadata"]["continue"].as_str().unwrap();
    let (next, _) = c
        .get_accepting(&format!("{PODS}?limit=2&continue={token}"), LIST)
        .await;
    assert_eq!(next.body["kind"], "PartialObjectMetadataList");
    let names: Vec<&str> = next.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(name)
        .collect();
    assert_eq!(names, ["p2", "p3"]);
}

#[tokio::test]
async fn a_watch_asked_for_metadata_carries_partial_objects_and_converted_bookmarks() {
    let sim = SimServer::start().await.unwrap();
    let a = sim.create("pods", None, big_pod("a")).unwrap();
    let c = Client::new(&sim);
    let q = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let mut w = c.watch_accepting(&format!("{PODS}?{q}"), OBJECT).await;
    assert_eq!(w.status, StatusCode::OK);
    assert_partial_of(&w.expect("ADDED").await, &a);
    // Bookmarks are converted like any object: kube-apiserver sends them through the same
    // encoder.
    let b = w.expect("BOOKMARK").await;
    assert_eq!(
        (&b["kind"], &b["apiVersion"]),
        (&json!("PartialObjectMetadata"), &json!("meta.k8s.io/v1"))
    );
    assert_eq!(
        b["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv(&b), sim.revision());
    let b2 = sim.create("pods", None, big_pod("b")).unwrap();
    assert_partial_of(&w.expect("ADDED").await, &b2);
    let a2 = sim
        .patch(
            "pods",
            None,
            "a",
            &json!({"metadata": {"labels": {"app": "db"}}}),
        )
        .unwrap();
    let modified = w.expect("MODIFIED").await;
    assert_partial_of(&modified, &a2);
    assert_eq!(modified["metadata"]["labels"]["app"], "db");
    let gone = sim.delete("pods", None, "b").unwrap();
    assert_partial_of(&w.expect("DELETED").await, &gone);
    // A plain watch on the same server still gets whole objects.
    let mut plain = c
        .watch(&format!("{PODS}?watch=true&resourceVersion=0"))
        .await;
    let o = plain.expect("ADDED").await;
    assert_eq!(o["kind"], "Pod");
    assert!(o.get("spec").is_some());
}

#[tokio::test]
async fn error_events_keep_their_status_in_the_metadata_representation() {
    let sim = SimServer::start().await.unwrap();
    sim.create("pods", None, big_pod("a")).unwrap();
    sim.create("pods", None, big_pod("b")).unwrap();
    sim.compact_to(sim.revision());
    let mut w = Client::new(&sim)
        .watch_accepting(&format!("{PODS}?watch=true&resourceVersion=1"), OBJECT)
        .await;
    let e = w.expect("ERROR").await;
    assert_eq!((&e["kind"], &e["code"]), (&json!("Status"), &json!(410)));
}

#[tokio::test]
async fn a_get_asked_for_metadata_is_one_partial_object() {
    let sim = SimServer::start().await.unwrap();
    let a = sim.create("pods", None, big_pod("a")).unwrap();
    let c = Client::new(&sim);
    let (r, _) = c.get_accepting(&format!("{PODS}/a"), OBJECT).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_partial_of(&r.body, &a);
}

#[tokio::test]
async fn what_cannot_be_served_is_406_and_a_fallback_is_honoured() {
    let sim = SimServer::start().await.unwrap();
    sim.create("pods", None, big_pod("a")).unwrap();
    let c = Client::new(&sim);
    let watch = format!("{PODS}?watch=true");
    for (path, accept, message) in [
        (
            PODS,
            "application/json;as=Table;g=meta.k8s.io;v=v2",
            "only the following media types are accepted: application/json",
        ),
        (
            PODS,
            "application/json;as=Surprise;g=meta.k8s.io;v=v1",
            "only the following media types",
        ),
        (PODS, "application/yaml", "only the following media types"),
        (
            PODS,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            "you requested PartialObjectMetadata, but the requested object is a list",
        ),
        (
            watch.as_str(),
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            "but the requested object is not a list",
        ),
    ] {
        let (r, _) = c.get_accepting(path, accept).await;
        assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE, "{accept}");
        assert_eq!(r.body["kind"], "Status");
        assert_eq!(r.body["reason"], "NotAcceptable");
        assert_eq!(r.body["code"], 406);
        assert!(
            r.body["message"].as_str().unwrap().contains(message),
            "{accept}: {}",
            r.body
        );
    }
    // A representation the server does not know, with plain JSON after it: whole objects.
    let (r, _) = c
        .get_accepting(
            PODS,
            "application/json;as=Table;g=meta.k8s.io;v=v2,application/json",
        )
        .await;
    assert_eq!(
        (r.status, &r.body["kind"]),
        (StatusCode::OK, &json!("PodList"))
    );
}

#[tokio::test]
async fn a_server_without_the_metadata_representation_answers_with_whole_objects() {
    let sim = SimServer::builder()
        .partial_object_metadata(false)
        .start()
        .await
        .unwrap();
    sim.create("pods", None, big_pod("a")).unwrap();
    let c = Client::new(&sim);
    let (r, _) = c.get_accepting(PODS, LIST).await;
    assert_eq!(r.body["kind"], "PodList");
    assert!(r.body["items"][0].get("spec").is_some());
    let mut w = c
        .watch_accepting(&format!("{PODS}?watch=true&resourceVersion=0"), OBJECT)
        .await;
    assert_eq!(w.expect("ADDED").await["kind"], "Pod");
    // Without the fallback there is nothing it can answer with.
    let (r, _) = c
        .get_accepting(
            PODS,
            "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_ACCEPTABLE);
}
