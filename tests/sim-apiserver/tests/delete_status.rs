//! DELETE answers what kube-apiserver answers: a success Status naming what went, the object
//! for pods and namespaces, and the object marked for deletion while finalizers are pending.

mod common;

use common::Client;
use http::{Method, StatusCode};
use serde_json::json;
use sim_apiserver::SimServer;

#[tokio::test]
async fn deleting_most_resources_answers_a_success_status_with_details() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let cm = sim
        .create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": "c"}}),
        )
        .unwrap();
    let r = c
        .send(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps/c",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        r.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
               "details": {"name": "c", "kind": "configmaps", "uid": cm["metadata"]["uid"]}})
    );
    let d = sim
        .create(
            "deployments.apps",
            Some("default"),
            json!({"metadata": {"name": "d"}, "spec": {"replicas": 1}}),
        )
        .unwrap();
    let r = c
        .send(
            Method::DELETE,
            "/apis/apps/v1/namespaces/default/deployments/d",
            None,
        )
        .await;
    assert_eq!(
        r.body["details"],
        json!({"name": "d", "group": "apps", "kind": "deployments", "uid": d["metadata"]["uid"]})
    );
    assert!(sim.get("deployments.apps", Some("default"), "d").is_err());
}

#[tokio::test]
async fn pods_and_namespaces_answer_the_object() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    sim.create("pods", Some("default"), common::pod("p", json!({})))
        .unwrap();
    let r = c
        .send(Method::DELETE, "/api/v1/namespaces/default/pods/p", None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["kind"], "Pod");
    assert_eq!(r.body["metadata"]["name"], "p");
    sim.create("namespaces", None, json!({"metadata": {"name": "gone"}}))
        .unwrap();
    let r = c
        .send(Method::DELETE, "/api/v1/namespaces/gone", None)
        .await;
    assert_eq!(r.body["kind"], "Namespace");
}

#[tokio::test]
async fn an_object_with_finalizers_stays_marked_until_the_last_one_is_removed() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "f", "finalizers": ["example.com/hold"]}}),
    )
    .unwrap();
    let path = "/api/v1/namespaces/default/configmaps/f";
    let mut w = c
        .watch("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0")
        .await;
    w.expect("ADDED").await;
    let r = c.send(Method::DELETE, path, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["kind"], "ConfigMap", "{}", r.body);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(r.body["metadata"]["deletionGracePeriodSeconds"], 0);
    let rv = r.body["metadata"]["resourceVersion"].clone();
    let marked = w.expect("MODIFIED").await;
    assert_eq!(
        marked["metadata"]["resourceVersion"],
        r.body["metadata"]["resourceVersion"]
    );
    // Still there; a second delete changes nothing.
    assert_eq!(c.get(path).await.status, StatusCode::OK);
    let again = c.send(Method::DELETE, path, None).await;
    assert_eq!(again.body["metadata"]["resourceVersion"], rv);
    // Removing the finalizer deletes it.
    let r = c
        .send(
            Method::PATCH,
            path,
            Some((
                "application/merge-patch+json",
                json!({"metadata": {"finalizers": null}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let gone = w.expect("DELETED").await;
    assert!(gone["metadata"].get("finalizers").is_none());
    assert_eq!(c.get(path).await.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn delete_collection_still_answers_the_list_of_deleted_objects() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    for n in ["a", "b"] {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": n}}),
        )
        .unwrap();
    }
    let r = c
        .send(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps",
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["kind"], "ConfigMapList");
    assert_eq!(r.body["items"].as_array().unwrap().len(), 2);
}
