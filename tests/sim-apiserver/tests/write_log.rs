//! The write log tells, from the server's side, which user's request stored each change: the
//! record a test of a leader-elected or sharded controller checks (no object written by one
//! replica while another held it).

mod common;

use common::Client;
use http::Method;
use serde_json::json;
use sim_apiserver::storage::EventType;
use sim_apiserver::{SimServer, TEST_API_USER};

#[tokio::test]
async fn each_stored_change_names_the_user_whose_request_made_it() {
    let sim = SimServer::builder()
        .token("admin-token")
        .user_token("alice-token", "alice")
        .user_token("bob-token", "bob")
        .start()
        .await
        .unwrap();
    let before = sim.write_log().len();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "seed"}}),
    )
    .unwrap();
    let alice = Client::with(&sim, false, Some("alice-token".into()), false);
    let bob = Client::with(&sim, false, Some("bob-token".into()), false);
    let created = alice
        .send(
            Method::POST,
            "/api/v1/namespaces/default/configmaps",
            Some(("application/json", json!({"metadata": {"name": "a"}}))),
        )
        .await;
    assert_eq!(created.status, 201);
    let patched = bob
        .send(
            Method::PATCH,
            "/api/v1/namespaces/default/configmaps/a",
            Some((
                "application/merge-patch+json",
                json!({"data": {"owner": "bob"}}),
            )),
        )
        .await;
    assert_eq!(patched.status, 200);
    // A dry run and a refused write store nothing, so they are not in the log.
    let dry = alice
        .send(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps/a?dryRun=All",
            None,
        )
        .await;
    assert_eq!(dry.status, 200);
    let stale = alice
        .send(
            Method::PUT,
            "/api/v1/namespaces/default/configmaps/a",
            Some((
                "application/json",
                json!({"metadata": {"name": "a", "resourceVersion": "1"}}),
            )),
        )
        .await;
    assert_eq!(stale.status, 409);
    let deleted = alice
        .send(
            Method::DELETE,
            "/api/v1/namespaces/default/configmaps/a",
            None,
        )
        .await;
    assert_eq!(deleted.status, 200);

    let log = &sim.write_log()[before..];
    let seen: Vec<(&str, &str, EventType)> = log
        .iter()
        .map(|r| (r.name.as_str(), r.user.as_str(), r.event))
        .collect();
    assert_eq!(
        seen,
        [
            ("seed", TEST_API_USER, EventType::Added),
            ("a", "alice", EventType::Added),
            ("a", "bob", EventType::Modified),
            ("a", "alice", EventType::Deleted),
        ]
    );
    assert!(log.windows(2).all(|w| w[0].revision < w[1].revision));
    assert!(log
        .iter()
        .all(|r| r.resource == "configmaps" && r.namespace == "default"));
    assert_eq!(log[2].revision, common::rv(&patched.body));
    assert_eq!(sim.write_log_dropped(), 0);
}

#[tokio::test]
async fn the_log_keeps_its_bound_and_counts_what_it_dropped() {
    let sim = SimServer::builder()
        .write_log_limit(3)
        .start()
        .await
        .unwrap();
    for i in 0..5 {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": format!("c{i}")}}),
        )
        .unwrap();
    }
    let names: Vec<String> = sim.write_log().into_iter().map(|r| r.name).collect();
    assert_eq!(names, ["c2", "c3", "c4"]);
    // The three namespaces made at start and the first two configmaps went.
    assert_eq!(sim.write_log_dropped(), 5);
}
