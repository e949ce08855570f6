//! core/v1 and events.k8s.io/v1 Events are one store: what is written through one API is
//! read, listed and watched through the other, converted, at the same resourceVersion.

mod common;

use common::Client;
use http::{Method, StatusCode};
use serde_json::json;
use sim_apiserver::SimServer;

const CORE: &str = "/api/v1/namespaces/default/events";
const NEW: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

#[tokio::test]
async fn an_event_written_through_one_api_is_read_listed_and_watched_through_the_other() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut new_watch = c
        .watch(&format!("{NEW}?watch=true&resourceVersion=0"))
        .await;
    let mut core_watch = c
        .watch(&format!("{CORE}?watch=true&resourceVersion=0"))
        .await;
    // Written through core/v1.
    let r = c
        .post(
            CORE,
            json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p"},
                   "reason": "Started", "message": "started", "count": 1, "type": "Normal",
                   "source": {"component": "kubelet"}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let rv = r.body["metadata"]["resourceVersion"].clone();
    let got = c.get(&format!("{NEW}/e1")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body["apiVersion"], "events.k8s.io/v1");
    assert_eq!(got.body["note"], "started");
    assert_eq!(got.body["regarding"], json!({"kind": "Pod", "name": "p"}));
    assert_eq!(got.body["deprecatedCount"], 1);
    assert_eq!(
        got.body["deprecatedSource"],
        json!({"component": "kubelet"})
    );
    assert!(got.body.get("message").is_none());
    assert_eq!(got.body["metadata"]["resourceVersion"], rv);
    assert_eq!(got.body["metadata"]["uid"], r.body["metadata"]["uid"]);
    let added = new_watch.expect("ADDED").await;
    assert_eq!(
        (
            added["note"].clone(),
            added["metadata"]["resourceVersion"].clone()
        ),
        (json!("started"), rv.clone())
    );
    core_watch.expect("ADDED").await;
    // Written through events.k8s.io/v1.
    let r = c
        .post(
            NEW,
            json!({"metadata": {"name": "e2"}, "regarding": {"kind": "Pod", "name": "q"},
                   "reason": "Pulled", "note": "pulled", "type": "Normal",
                   "eventTime": "2024-01-01T00:00:00.000000Z", "action": "Pull",
                   "reportingController": "kubelet", "reportingInstance": "node-1"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let core_list = c.get(CORE).await.body;
    let new_list = c.get(NEW).await.body;
    assert_eq!(
        core_list["metadata"]["resourceVersion"],
        new_list["metadata"]["resourceVersion"]
    );
    let e2 = core_list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["metadata"]["name"] == "e2")
        .cloned()
        .expect("e2 listed through core/v1");
    assert_eq!(e2["message"], "pulled");
    assert_eq!(e2["involvedObject"], json!({"kind": "Pod", "name": "q"}));
    assert_eq!(e2["reportingComponent"], "kubelet");
    assert_eq!(
        e2["metadata"]["resourceVersion"],
        r.body["metadata"]["resourceVersion"]
    );
    assert_eq!(core_watch.expect("ADDED").await["message"], "pulled");
    new_watch.expect("ADDED").await;
    // An update through one, with the resourceVersion read through the other.
    let mut e1 = c.get(&format!("{NEW}/e1")).await.body;
    e1["note"] = json!("started again");
    let r = c
        .send(
            Method::PUT,
            &format!("{NEW}/e1"),
            Some(("application/json", e1)),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let core_e1 = c.get(&format!("{CORE}/e1")).await.body;
    assert_eq!(core_e1["message"], "started again");
    assert_eq!(
        core_e1["metadata"]["resourceVersion"],
        r.body["metadata"]["resourceVersion"]
    );
    assert_eq!(
        core_watch.expect("MODIFIED").await["message"],
        "started again"
    );
    new_watch.expect("MODIFIED").await;
    // A stale resourceVersion is a conflict through either.
    let mut stale = core_e1.clone();
    stale["metadata"]["resourceVersion"] = rv;
    let r = c
        .send(
            Method::PUT,
            &format!("{CORE}/e1"),
            Some(("application/json", stale)),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    // Deleted through core/v1: gone from both, DELETED on both watches.
    let r = c.send(Method::DELETE, &format!("{CORE}/e1"), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        c.get(&format!("{NEW}/e1")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(new_watch.expect("DELETED").await["note"], "started again");
    core_watch.expect("DELETED").await;
    // A name taken in one is taken in the other.
    let r = c
        .post(NEW, json!({"metadata": {"name": "e2"}, "note": "again"}))
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.body["reason"], "AlreadyExists");
}

#[tokio::test]
async fn a_watch_from_a_resource_version_replays_the_other_apis_writes_and_lists_roll_back() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let start = sim.revision();
    sim.create(
        "events",
        Some("default"),
        json!({"metadata": {"name": "a"}, "message": "one"}),
    )
    .unwrap();
    let mut w = c
        .watch(&format!("{NEW}?watch=true&resourceVersion={start}"))
        .await;
    assert_eq!(w.expect("ADDED").await["note"], "one");
    let r = c
        .get(&format!(
            "{NEW}?resourceVersion={start}&resourceVersionMatch=Exact"
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["items"], json!([]));
}
