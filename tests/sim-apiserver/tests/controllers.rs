//! What controller tests (leader election, event recorders) need from the simulator: write
//! conflicts and throttling on demand, several users with their own network faults, and the
//! history of an object's versions.

mod common;

use std::time::Duration;

use common::Client;
use http::{Method, StatusCode};
use serde_json::{json, Value};
use sim_apiserver::{apply_fault_spec, ApiError, RequestKind, SimServer};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
const EVENTS: &str = "/api/v1/namespaces/default/events";

fn lease(holder: &str) -> Value {
    json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}})
}

#[tokio::test]
async fn conflict_next_writes_answers_the_update_conflict_and_leaves_reads_alone() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let created = c.post(LEASES, lease("a")).await.body;
    sim.faults().conflict_next_writes(2);
    let before = sim.revision();
    assert_eq!(
        c.get(&format!("{LEASES}/leader")).await.status,
        StatusCode::OK
    );
    for _ in 0..2 {
        let mut l = created.clone();
        l["spec"]["holderIdentity"] = json!("b");
        let r = c
            .send(
                Method::PUT,
                &format!("{LEASES}/leader"),
                Some(("application/json", l)),
            )
            .await;
        assert_eq!(r.status, StatusCode::CONFLICT);
        assert_eq!(r.body["reason"], "Conflict");
        assert_eq!(
            r.body["message"],
            "Operation cannot be fulfilled on leases.coordination.k8s.io \"leader\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert_eq!(
            r.body["details"],
            json!({"name": "leader", "group": "coordination.k8s.io", "kind": "leases"})
        );
    }
    assert_eq!(sim.revision(), before, "nothing was written");
    let mut l = created.clone();
    l["spec"]["holderIdentity"] = json!("b");
    let r = c
        .send(
            Method::PUT,
            &format!("{LEASES}/leader"),
            Some(("application/json", l)),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);

    // The constructor for fail_next_with, and the fault spec, do the same.
    sim.faults().fail_next_with(
        RequestKind::Write,
        ApiError::update_conflict("leases", "coordination.k8s.io", "leader"),
        1,
    );
    let r = c
        .send(
            Method::PATCH,
            &format!("{LEASES}/leader"),
            Some(("application/merge-patch+json", json!({}))),
        )
        .await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(
        apply_fault_spec(sim.faults(), "conflict-writes:1").unwrap(),
        "conflict-writes (next request)"
    );
    let r = c.post(EVENTS, json!({"metadata": {"name": "e"}})).await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert!(r.body["message"].as_str().unwrap().contains("events \"e\""));
    assert_eq!(
        c.post(EVENTS, json!({"metadata": {"name": "e"}}))
            .await
            .status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn writes_can_be_throttled_with_retry_after() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    sim.faults().throttle_next_writes(7, 1);
    let r = c
        .raw(Method::POST, LEASES, Some(("application/json", lease("a"))))
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "7");
    let (resp, _) = Client::read(r).await;
    assert_eq!(resp.body["reason"], "TooManyRequests");
    assert_eq!(resp.body["details"]["retryAfterSeconds"], 7);
    assert_eq!(c.get(LEASES).await.status, StatusCode::OK, "reads pass");
    assert_eq!(c.post(LEASES, lease("a")).await.status, StatusCode::CREATED);

    apply_fault_spec(sim.faults(), "throttle-writes=2:1").unwrap();
    let r = c
        .raw(Method::DELETE, &format!("{LEASES}/leader"), None)
        .await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "2");
    assert!(apply_fault_spec(sim.faults(), "throttle-writes").is_err());
}

fn replicas(sim: &SimServer) -> [Client; 3] {
    ["a", "b", "c"].map(|u| Client::with(sim, false, Some(format!("token-{u}")), false))
}

async fn three_users() -> SimServer {
    SimServer::builder()
        .token("admin-token")
        .user_token("token-a", "replica-a")
        .user_token("token-b", "replica-b")
        .user_token("token-c", "replica-c")
        .start()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_partitioned_user_gets_no_answer_until_healed_while_others_are_served() {
    let sim = three_users().await;
    let [a, b, c] = replicas(&sim);
    assert_eq!(a.post(LEASES, lease("a")).await.status, StatusCode::CREATED);
    let start = sim.revision();
    let mut b_watch = b
        .watch(&format!("{LEASES}?watch=1&resourceVersion={start}"))
        .await;
    sim.faults().partition_user("replica-b");
    let held = tokio::spawn({
        let b = b.clone();
        async move { b.get(&format!("{LEASES}/leader")).await }
    });
    // Other users are served meanwhile, writes included.
    assert_eq!(
        c.get(&format!("{LEASES}/leader")).await.status,
        StatusCode::OK
    );
    let r = a
        .send(
            Method::PATCH,
            &format!("{LEASES}/leader"),
            Some((
                "application/merge-patch+json",
                json!({"spec": {"holderIdentity": "a2"}}),
            )),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    // b's request got no answer, and b's open watch delivers nothing (both would have been
    // served long before those two requests were).
    assert!(
        tokio::time::timeout(Duration::from_millis(200), async {
            while !held.is_finished() {
                tokio::task::yield_now().await;
            }
        })
        .await
        .is_err(),
        "the partitioned user's request was answered"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(50), b_watch.next())
            .await
            .is_err(),
        "the partitioned user's watch delivered an event"
    );
    sim.faults().heal_user("replica-b");
    // Healed: the held request is handled late, the watch resumes, new requests pass.
    let late = held.await.unwrap();
    assert_eq!(late.status, StatusCode::OK);
    assert_eq!(late.body["spec"]["holderIdentity"], "a2");
    assert_eq!(
        b_watch.expect("MODIFIED").await["spec"]["holderIdentity"],
        "a2"
    );
    assert_eq!(
        b.get(&format!("{LEASES}/leader")).await.status,
        StatusCode::OK
    );
    // Tokens authenticate their own users; a wrong token is still 401.
    let bad = Client::with(&sim, false, Some("nope".into()), false);
    assert_eq!(bad.get(LEASES).await.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_slow_user_gets_each_answer_late() {
    let sim = three_users().await;
    let [a, b, _] = replicas(&sim);
    let delay = Duration::from_millis(300);
    sim.faults().slow_user("replica-a", delay);
    let t = std::time::Instant::now();
    assert_eq!(a.get(LEASES).await.status, StatusCode::OK);
    assert!(t.elapsed() >= delay);
    let t = std::time::Instant::now();
    assert_eq!(b.get(LEASES).await.status, StatusCode::OK);
    assert!(t.elapsed() < delay, "other users are not slowed");
    sim.faults().heal_user("replica-a");
    let t = std::time::Instant::now();
    a.get(LEASES).await;
    assert!(t.elapsed() < delay);
}

#[tokio::test]
async fn history_keeps_the_last_versions_of_each_object_in_order() {
    let sim = SimServer::builder().history_limit(3).start().await.unwrap();
    let c = Client::new(&sim);
    let mut l = c.post(LEASES, lease("a")).await.body;
    for holder in ["b", "c", "a"] {
        l["spec"]["holderIdentity"] = json!(holder);
        l = c
            .send(
                Method::PUT,
                &format!("{LEASES}/leader"),
                Some(("application/json", l.clone())),
            )
            .await
            .body;
    }
    // An event bumped with a strategic merge patch, as an event recorder does.
    c.post(
        EVENTS,
        json!({"metadata": {"name": "e"}, "count": 1, "reason": "Elected"}),
    )
    .await;
    c.send(
        Method::PATCH,
        &format!("{EVENTS}/e"),
        Some((
            "application/strategic-merge-patch+json",
            json!({"count": 2, "lastTimestamp": "2024-01-01T00:00:01Z"}),
        )),
    )
    .await;
    let h = sim.history("leases.coordination.k8s.io", Some("default"), "leader");
    let holders: Vec<&str> = h
        .iter()
        .map(|v| v["spec"]["holderIdentity"].as_str().unwrap())
        .collect();
    assert_eq!(holders, ["b", "c", "a"], "the oldest version is dropped");
    let rvs: Vec<u64> = h.iter().map(common::rv).collect();
    assert!(rvs.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(*rvs.last().unwrap(), common::rv(&l));
    let counts: Vec<i64> = sim
        .history("events", Some("default"), "e")
        .iter()
        .map(|v| v["count"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2]);
    sim.delete("leases.coordination.k8s.io", Some("default"), "leader")
        .unwrap();
    assert!(sim
        .history("leases.coordination.k8s.io", Some("default"), "leader")
        .is_empty());
    assert!(sim.history("nope", None, "x").is_empty());
}

#[tokio::test]
async fn history_is_bounded_over_all_objects_and_free_for_objects_never_updated() {
    let sim = SimServer::builder()
        .history_limit(10)
        .history_max_versions(4)
        .start()
        .await
        .unwrap();
    for n in ["a", "b"] {
        sim.create(
            "configmaps",
            None,
            json!({"metadata": {"name": n}, "data": {"v": "0"}}),
        )
        .unwrap();
    }
    // Never updated: the live object.
    assert_eq!(sim.history("configmaps", None, "a").len(), 1);
    for v in 1..=2 {
        sim.patch(
            "configmaps",
            None,
            "a",
            &json!({"data": {"v": v.to_string()}}),
        )
        .unwrap();
    }
    assert_eq!(sim.history("configmaps", None, "a").len(), 3);
    sim.patch("configmaps", None, "b", &json!({"data": {"v": "1"}}))
        .unwrap();
    // 5 versions recorded, 4 kept: a's oldest went.
    let a: Vec<Value> = sim
        .history("configmaps", None, "a")
        .iter()
        .map(|o| o["data"]["v"].clone())
        .collect();
    assert_eq!(a, [json!("1"), json!("2")]);
    assert_eq!(sim.history("configmaps", None, "b").len(), 2);
}
