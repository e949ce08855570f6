//! Watch rules: framing, start semantics, 410 as an ERROR event, bookmarks, timeouts,
//! sendInitialEvents, selectors, slow watchers.

mod common;

use std::time::Duration;

use common::{name, pod, rv, Client};
use http::StatusCode;
use serde_json::json;
use sim_apiserver::SimServer;

const PODS: &str = "/api/v1/namespaces/default/pods";

#[tokio::test]
async fn watch_is_chunked_json_one_event_per_line() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let mut w = c.watch(&format!("{PODS}?watch=1")).await;
    assert_eq!(w.status, StatusCode::OK);
    assert_eq!(w.headers["transfer-encoding"], "chunked");
    assert_eq!(w.headers["content-type"], "application/json");
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    let o = w.expect("ADDED").await;
    assert_eq!(name(&o), "a");
    assert_eq!(w.chunks, [w.chunks[0]], "one chunk per event");
}

#[tokio::test]
async fn watch_without_resource_version_starts_with_synthetic_added_events() {
    let sim = SimServer::start().await.unwrap();
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    let c = Client::new(&sim);
    for q in ["watch=true", "watch=true&resourceVersion=0"] {
        let mut w = c.watch(&format!("{PODS}?{q}")).await;
        assert_eq!(name(&w.expect("ADDED").await), "a");
        assert_eq!(name(&w.expect("ADDED").await), "b");
        let mut m = sim.get("pods", None, "a").unwrap();
        m["metadata"]["labels"] = json!({"n": q.len().to_string()});
        sim.update("pods", None, m).unwrap();
        assert_eq!(name(&w.expect("MODIFIED").await), "a");
    }
}

#[tokio::test]
async fn watch_from_an_exact_resource_version_replays_later_changes_in_order() {
    let sim = SimServer::start().await.unwrap();
    let a = sim.create("pods", None, pod("a", json!({}))).unwrap();
    let from = rv(&a);
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    sim.delete("pods", None, "a").unwrap();
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&resourceVersion={from}"))
        .await;
    let b = w.expect("ADDED").await;
    assert_eq!(name(&b), "b");
    let d = w.expect("DELETED").await;
    assert_eq!(name(&d), "a");
    assert!(rv(&d) > rv(&b));
    assert_eq!(rv(&d), sim.revision());
}

#[tokio::test]
async fn watch_from_a_compacted_resource_version_yields_a_410_error_event() {
    let sim = SimServer::start().await.unwrap();
    let a = sim.create("pods", None, pod("a", json!({}))).unwrap();
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    sim.faults().compact();
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&resourceVersion={}", rv(&a)))
        .await;
    assert_eq!(w.status, StatusCode::OK);
    let s = w.expect("ERROR").await;
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["code"], 410);
    assert_eq!(s["reason"], "Expired");
    assert!(s["message"]
        .as_str()
        .unwrap()
        .starts_with("too old resource version"));
    assert!(w.next().await.is_none());
}

#[tokio::test]
async fn compaction_by_count_expires_old_versions() {
    let sim = SimServer::builder()
        .max_log_events(3)
        .start()
        .await
        .unwrap();
    let a = sim.create("pods", None, pod("a", json!({}))).unwrap();
    for i in 0..5 {
        sim.create("pods", None, pod(&format!("x{i}"), json!({})))
            .unwrap();
    }
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&resourceVersion={}", rv(&a)))
        .await;
    assert_eq!(w.expect("ERROR").await["code"], 410);
}

#[tokio::test]
async fn deleted_events_carry_the_final_state() {
    let sim = SimServer::start().await.unwrap();
    let mut w = Client::new(&sim).watch(&format!("{PODS}?watch=true")).await;
    sim.create("pods", None, pod("a", json!({"final": "yes"})))
        .unwrap();
    w.expect("ADDED").await;
    sim.delete("pods", None, "a").unwrap();
    let d = w.expect("DELETED").await;
    assert_eq!(d["metadata"]["labels"]["final"], "yes");
    assert_eq!(rv(&d), sim.revision());
}

#[tokio::test(start_paused = true)]
async fn bookmarks_are_sent_only_when_allowed_at_the_configured_interval() {
    let sim = SimServer::builder()
        .bookmark_interval(Duration::from_secs(10))
        .start()
        .await
        .unwrap();
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    let c = Client::new(&sim);
    let from = sim.revision();
    let mut with = c
        .watch(&format!(
            "{PODS}?watch=true&resourceVersion={from}&allowWatchBookmarks=true&timeoutSeconds=25"
        ))
        .await;
    let mut without = c
        .watch(&format!(
            "{PODS}?watch=true&resourceVersion={from}&timeoutSeconds=25"
        ))
        .await;
    let b = with.expect("BOOKMARK").await;
    assert_eq!(b["kind"], "Pod");
    assert_eq!(b["apiVersion"], "v1");
    assert_eq!(rv(&b), sim.revision());
    assert!(b["metadata"].get("annotations").is_none());
    let start = tokio::time::Instant::now();
    with.expect("BOOKMARK").await;
    // The next one comes 2 s before the 25 s deadline rather than at 30 s.
    with.expect("BOOKMARK").await;
    assert_eq!(start.elapsed(), Duration::from_secs(13));
    assert!(with.next().await.is_none(), "timeout ends the stream");
    assert!(without.rest().await.is_empty());
}

#[tokio::test(start_paused = true)]
async fn timeout_seconds_ends_the_stream_cleanly() {
    let sim = SimServer::start().await.unwrap();
    let start = tokio::time::Instant::now();
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&timeoutSeconds=7"))
        .await;
    assert!(w.next().await.is_none());
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(7) && took < Duration::from_secs(8),
        "{took:?}"
    );
}

#[tokio::test]
async fn send_initial_events_streams_state_then_the_annotated_bookmark() {
    let sim = SimServer::start().await.unwrap();
    sim.create("pods", None, pod("a", json!({}))).unwrap();
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    let c = Client::new(&sim);
    let q = "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";
    let mut w = c.watch(&format!("{PODS}?{q}")).await;
    assert_eq!(name(&w.expect("ADDED").await), "a");
    assert_eq!(name(&w.expect("ADDED").await), "b");
    let b = w.expect("BOOKMARK").await;
    assert_eq!(
        b["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    assert_eq!(rv(&b), sim.revision());
    sim.create("pods", None, pod("c", json!({}))).unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "c");
    // Without bookmarks the state is streamed all the same (kube-apiserver 1.34 and later);
    // without NotOlderThan the request is invalid.
    let mut w = c
        .watch(&format!(
            "{PODS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        ))
        .await;
    assert_eq!(name(&w.expect("ADDED").await), "a");
    let r = c
        .get(&format!(
            "{PODS}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
        ))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn an_object_that_stops_matching_the_selector_is_delivered_as_deleted() {
    let sim = SimServer::start().await.unwrap();
    let mut w = Client::new(&sim)
        .watch(&format!("{PODS}?watch=true&labelSelector=app%3Dweb"))
        .await;
    sim.create("pods", None, pod("other", json!({"app": "db"})))
        .unwrap();
    let a = sim
        .create("pods", None, pod("a", json!({"app": "web"})))
        .unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "a");
    let mut m = a.clone();
    m["metadata"]["labels"]["app"] = json!("db");
    sim.update("pods", None, m).unwrap();
    // The object as it last matched, at the revision of the change.
    let d = w.expect("DELETED").await;
    assert_eq!(d["metadata"]["labels"]["app"], "web");
    assert_eq!(rv(&d), sim.revision());
    let mut back = sim.get("pods", None, "a").unwrap();
    back["metadata"]["labels"]["app"] = json!("web");
    sim.update("pods", None, back).unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "a");
}

#[tokio::test]
async fn field_selector_on_name_and_namespace_scopes_a_watch() {
    let sim = SimServer::start().await.unwrap();
    sim.create("namespaces", None, json!({"metadata": {"name": "other"}}))
        .unwrap();
    let mut w = Client::new(&sim)
        .watch("/api/v1/pods?watch=true&fieldSelector=metadata.name%3Db,metadata.namespace%3Dother")
        .await;
    sim.create("pods", None, pod("b", json!({}))).unwrap();
    sim.create("pods", Some("other"), pod("a", json!({})))
        .unwrap();
    sim.create("pods", Some("other"), pod("b", json!({})))
        .unwrap();
    let o = w.expect("ADDED").await;
    assert_eq!(
        (name(&o), o["metadata"]["namespace"].as_str()),
        ("b", Some("other"))
    );
}

#[tokio::test(flavor = "current_thread")]
async fn a_slow_watcher_is_ended_without_blocking_writers() {
    let sim = SimServer::builder().watch_buffer(4).start().await.unwrap();
    let c = Client::new(&sim);
    let mut slow = c.watch(&format!("{PODS}?watch=true")).await;
    // On this single-threaded runtime the watch task cannot run during the loop, so its
    // buffer of 4 overflows; the writes must still all complete.
    for i in 0..50 {
        sim.create("pods", None, pod(&format!("p{i}"), json!({})))
            .unwrap();
    }
    assert_eq!(sim.slow_watcher_terminations(), 1);
    let events = slow.rest().await;
    assert!(events.len() < 50, "the slow watcher was ended early");
    // A fresh watcher is fine.
    let mut w = c
        .watch(&format!(
            "{PODS}?watch=true&resourceVersion={}",
            sim.revision()
        ))
        .await;
    sim.create("pods", None, pod("late", json!({}))).unwrap();
    assert_eq!(name(&w.expect("ADDED").await), "late");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_watchers_each_receive_every_event() {
    let sim = SimServer::start().await.unwrap();
    // Two HTTP/2 connections (kube-apiserver allows 1000 streams per connection).
    let clients = [
        Client::with(&sim, true, None, false),
        Client::with(&sim, true, None, false),
    ];
    let from = sim.revision();
    let mut tasks = Vec::new();
    let n = 2000;
    for i in 0..n {
        let mut w = clients[i as usize % 2]
            .watch(&format!("{PODS}?watch=true&resourceVersion={from}"))
            .await;
        tasks.push(tokio::spawn(async move {
            let mut got = 0;
            while got < 20 {
                w.expect("ADDED").await;
                got += 1;
            }
            got
        }));
    }
    for i in 0..20 {
        sim.create("pods", None, pod(&format!("p{i}"), json!({})))
            .unwrap();
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), 20);
    }
    assert_eq!(sim.counters().watches, n);
}

#[tokio::test]
async fn a_namespaced_watch_sees_only_its_namespace_and_cluster_scoped_watches_work() {
    let sim = SimServer::start().await.unwrap();
    let c = Client::new(&sim);
    let from = sim.revision();
    let mut ns = c
        .watch(&format!(
            "/api/v1/namespaces/team/pods?watch=true&resourceVersion={from}"
        ))
        .await;
    let mut namespaces = c
        .watch(&format!(
            "/api/v1/namespaces?watch=true&resourceVersion={from}"
        ))
        .await;
    sim.create("namespaces", None, json!({"metadata": {"name": "team"}}))
        .unwrap();
    sim.create("pods", None, pod("in-default", json!({})))
        .unwrap();
    sim.create("pods", Some("team"), pod("in-team", json!({})))
        .unwrap();
    assert_eq!(name(&namespaces.expect("ADDED").await), "team");
    let o = ns.expect("ADDED").await;
    assert_eq!(name(&o), "in-team");
    assert_eq!(o["metadata"]["namespace"], "team");
}
