//! The event recorder's writes as the server stores them, on the simulator by `cargo test` and
//! on a real kube-apiserver and etcd by `REAL_APISERVER=1 cargo test` (CI's real-server step):
//! a repeated event is one Event whose `count` grows (a patch, not a new object), and in a run of
//! similar events the tenth distinct message and every one after it is aggregated into one
//! `(combined from similar events): ...` Event, as client-go's correlator does (it counts the
//! new message among the ten before it compares).

use std::collections::BTreeMap;

use controller::events::{
    ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSource, EventType, ObjectReference,
};
use serde_json::Value;
use sim_apiserver::TestServer;
use workqueue::shared_informer::reflector::{Client, ClusterConfig};
use workqueue::CancellationToken;

const COMBINED: &str = "(combined from similar events): ";

fn client_of(server: &TestServer) -> Client {
    let config =
        ClusterConfig::from_kubeconfig_files(&[server.kubeconfig_path().to_path_buf()], None)
            .unwrap();
    Client::new(&config).unwrap()
}

/// The server's Events about `pod` in `default`, by message.
fn stored(server: &TestServer, pod: &str) -> BTreeMap<String, Value> {
    server
        .list("events", Some("default"))
        .unwrap()
        .into_iter()
        .filter(|e| e["involvedObject"]["name"] == pod)
        .map(|e| (e["message"].as_str().unwrap_or_default().to_string(), e))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_and_similar_events_are_one_counted_and_one_combined_event_on_either_server() {
    let server = TestServer::start().await.expect("a test server");
    println!("on {server:?}");
    let sink = ApiEventSink::new(client_of(&server));
    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let stats = broadcaster.stats_handle();
    let recorder = broadcaster.new_recorder(EventSource::new("web-controller"));
    let writer = broadcaster.start(sink, CancellationToken::new());

    // One event three times: one Event, counted.
    let repeated = ObjectReference::new("v1", "Pod", "default", "repeated-0").with_uid("u-1");
    for _ in 0..3 {
        recorder.event(&repeated, EventType::Warning, "BackOff", "restarting");
    }
    // Twelve similar events (same object, type and reason), each its own message: the first
    // nine are Events of their own, the tenth to the twelfth one combined Event.
    let similar = ObjectReference::new("v1", "Pod", "default", "similar-0").with_uid("u-2");
    for i in 0..12 {
        recorder.event(&similar, EventType::Normal, "Pulled", &format!("image {i}"));
    }
    drop(recorder);
    writer.await.unwrap();

    let on = if server.is_real() {
        "the real kube-apiserver"
    } else {
        "the simulator"
    };
    let repeats = stored(&server, "repeated-0");
    let [(message, event)] = &repeats.iter().collect::<Vec<_>>()[..] else {
        panic!("on {on}, one Event for the repeated event: {repeats:#?}")
    };
    assert_eq!(
        (message.as_str(), &event["count"]),
        ("restarting", &Value::from(3)),
        "on {on}"
    );
    assert_eq!(event["source"]["component"], "web-controller", "on {on}");
    // RFC 3339 in seconds, UTC: ordered as strings. The first occurrence's time is kept.
    let (first, last) = (
        event["firstTimestamp"].as_str().unwrap_or_default(),
        event["lastTimestamp"].as_str().unwrap_or_default(),
    );
    assert!(
        !first.is_empty() && first <= last,
        "on {on}: first {first:?}, last {last:?}"
    );

    let similars = stored(&server, "similar-0");
    let own: Vec<&String> = similars
        .keys()
        .filter(|m| !m.starts_with(COMBINED))
        .collect();
    assert_eq!(own.len(), 9, "on {on}, nine Events of their own: {own:?}");
    let combined = &similars[&format!("{COMBINED}image 11")];
    assert_eq!(
        combined["count"], 3,
        "on {on}, the tenth to the twelfth in one Event: {combined:#}"
    );
    assert_eq!(similars.len(), 10, "on {on}: {:?}", similars.keys());
    let stats = stats.get();
    assert_eq!(
        (stats.created, stats.patched),
        (11, 4),
        "on {on}: {stats:?}"
    );
    server.stop().await.unwrap();
}
