//! The recorder end to end: recorder → queue → correlator → retries → [`MemorySink`], under
//! tokio's paused clock.

use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::*;

fn pod(name: &str) -> ObjectReference {
    ObjectReference::new("v1", "Pod", "default", name).with_uid(format!("uid-{name}"))
}

struct Writer {
    handle: JoinHandle<()>,
    stats: EventStatsHandle,
}

fn start(config: BroadcasterConfig) -> (EventRecorder, MemorySink, Writer) {
    let broadcaster = EventBroadcaster::new(config);
    let recorder =
        broadcaster.new_recorder(EventSource::new("test-controller").with_host("node-1"));
    let sink = MemorySink::new();
    let stats = broadcaster.stats_handle();
    let handle = broadcaster.start(sink.clone(), CancellationToken::new());
    (recorder, sink, Writer { handle, stats })
}

/// Drops the last recorder and waits for the writer to drain the queue.
async fn finish(recorder: EventRecorder, writer: Writer) -> EventStats {
    drop(recorder);
    writer.handle.await.unwrap();
    writer.stats.get()
}

/// Lets the writer task run until `condition` holds (it never sleeps: under the paused clock a
/// yield does not move time).
async fn until(mut condition: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if condition() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("condition not reached");
}

#[tokio::test(start_paused = true)]
async fn an_event_is_created_with_source_name_namespace_and_timestamps() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    recorder.event(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 1,
            ..EventStats::default()
        }
    );
    let [event] = &sink.events()[..] else {
        panic!("{:?}", sink.events())
    };
    assert!(
        event.metadata.name.starts_with("web-0."),
        "{}",
        event.metadata.name
    );
    assert!(u64::from_str_radix(&event.metadata.name["web-0.".len()..], 16).is_ok());
    assert_eq!(event.metadata.namespace, "default");
    assert_eq!(event.metadata.resource_version, "1", "the server's copy");
    assert_eq!(event.involved_object, pod("web-0"));
    assert_eq!(
        (event.type_, &*event.reason, &*event.message),
        (EventType::Warning, "BackOff", "restarting")
    );
    assert_eq!(
        event.source,
        EventSource::new("test-controller").with_host("node-1")
    );
    assert_eq!(
        (&*event.reporting_component, &*event.reporting_instance),
        ("test-controller", "node-1")
    );
    assert_eq!(event.count, 1);
    assert!(event.first_timestamp.is_some());
    assert_eq!(event.first_timestamp, event.last_timestamp);
    assert_eq!(event.event_time, None);
}

#[tokio::test(start_paused = true)]
async fn a_cluster_scoped_objects_events_go_to_the_default_namespace() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    let node = ObjectReference::new("v1", "Node", "", "node-1");
    recorder.event(&node, EventType::Normal, "Ready", "node is ready");
    finish(recorder, writer).await;
    assert_eq!(sink.events()[0].metadata.namespace, "default");
}

#[tokio::test(start_paused = true)]
async fn an_identical_event_patches_the_count_and_last_timestamp() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "image pulled");
    tokio::time::advance(Duration::from_secs(5)).await;
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "image pulled");
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 1,
            patched: 1,
            ..EventStats::default()
        }
    );
    let calls = sink.calls();
    let [SinkCall::Create(created), SinkCall::Patch(patched, patch)] = &calls[..] else {
        panic!("{calls:?}")
    };
    let first = created.first_timestamp.unwrap();
    let later = Timestamp::from_unix_seconds(first.unix_seconds() + 5);
    assert_eq!(
        patched.metadata.name, created.metadata.name,
        "the same Event"
    );
    assert_eq!(
        patched.metadata.resource_version, "1",
        "the version the create returned"
    );
    assert_eq!(
        *patch,
        json!({"count": 2, "lastTimestamp": later, "message": "image pulled"})
    );
    let [stored] = &sink.events()[..] else {
        panic!()
    };
    assert_eq!(stored.count, 2);
    assert_eq!(stored.first_timestamp, Some(first), "first occurrence kept");
    assert_eq!(stored.last_timestamp, Some(later));
}

#[tokio::test(start_paused = true)]
async fn ten_similar_events_with_different_messages_are_combined_into_one_event() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    for i in 0..12 {
        recorder.event(
            &pod("web-0"),
            EventType::Warning,
            "FailedMount",
            &format!("volume v{i} not ready"),
        );
    }
    let stats = finish(recorder, writer).await;

    // Nine on their own; the tenth distinct message starts the combined Event, which the
    // eleventh and twelfth patch.
    assert_eq!(
        stats,
        EventStats {
            created: 10,
            patched: 2,
            aggregated: 3,
            ..EventStats::default()
        }
    );
    let combined: Vec<Event> = sink
        .events()
        .into_iter()
        .filter(|e| e.message.starts_with("(combined from similar events): "))
        .collect();
    let [combined] = &combined[..] else {
        panic!("{combined:?}")
    };
    assert_eq!(
        combined.message,
        "(combined from similar events): volume v11 not ready"
    );
    assert_eq!(combined.count, 3);
    assert_eq!(combined.reason, "FailedMount");
    assert_eq!(combined.involved_object, pod("web-0"));
}

#[tokio::test(start_paused = true)]
async fn similar_events_on_another_object_or_with_another_reason_are_not_combined() {
    let (recorder, _sink, writer) = start(BroadcasterConfig::default());
    for i in 0..9 {
        recorder.event(
            &pod("web-0"),
            EventType::Warning,
            "FailedMount",
            &format!("m{i}"),
        );
        recorder.event(
            &pod("web-1"),
            EventType::Warning,
            "FailedMount",
            &format!("m{i}"),
        );
        recorder.event(
            &pod("web-0"),
            EventType::Warning,
            "FailedAttach",
            &format!("m{i}"),
        );
    }
    let stats = finish(recorder, writer).await;
    assert_eq!(
        stats,
        EventStats {
            created: 27,
            ..EventStats::default()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_spam_filter_drops_beyond_a_burst_of_25_per_object_only() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    for _ in 0..30 {
        recorder.event(&pod("noisy"), EventType::Normal, "Sync", "synced");
    }
    recorder.event(&pod("quiet"), EventType::Normal, "Sync", "synced");
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 2,
            patched: 24,
            filtered: 5,
            ..EventStats::default()
        }
    );
    let counts: Vec<(String, i32)> = sink
        .events()
        .into_iter()
        .map(|e| (e.involved_object.name, e.count))
        .collect();
    assert!(counts.contains(&("noisy".into(), 25)), "{counts:?}");
    assert!(counts.contains(&("quiet".into(), 1)), "{counts:?}");
}

/// EV2: the bucket is per event type too, so a burst of routine Normal events cannot silence the
/// first Warning about the same object (client-go's spam key has included the type since 2024).
#[tokio::test(start_paused = true)]
async fn a_warning_after_25_normal_events_about_the_same_object_is_still_written() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    for i in 0..25 {
        recorder.event(
            &pod("web-0"),
            EventType::Normal,
            "Sync",
            &format!("synced {i}"),
        );
    }
    recorder.event(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    recorder.event(
        &pod("web-0"),
        EventType::Normal,
        "Sync",
        "one Normal too many",
    );
    let stats = finish(recorder, writer).await;

    assert_eq!(stats.filtered, 1, "only the 26th Normal event: {stats:?}");
    let warnings: Vec<Event> = sink
        .events()
        .into_iter()
        .filter(|e| e.type_ == EventType::Warning)
        .collect();
    let [warning] = &warnings[..] else {
        panic!("{warnings:?}")
    };
    assert_eq!(
        (&*warning.reason, &*warning.message),
        ("BackOff", "restarting")
    );
}

fn correlating(correlator: CorrelatorConfig) -> BroadcasterConfig {
    BroadcasterConfig {
        correlator,
        ..BroadcasterConfig::default()
    }
}

/// EV2: a custom spam key that leaves the type out puts Normal and Warning events about an object
/// in one bucket again, as the key says.
#[tokio::test(start_paused = true)]
async fn a_custom_spam_key_groups_the_events_it_gives_one_key() {
    let by_object = CorrelatorConfig::default().with_spam_key(|e| e.involved_object.name.clone());
    let (recorder, sink, writer) = start(correlating(by_object));
    for i in 0..25 {
        recorder.event(
            &pod("web-0"),
            EventType::Normal,
            "Sync",
            &format!("synced {i}"),
        );
    }
    recorder.event(&pod("web-0"), EventType::Warning, "BackOff", "restarting");
    recorder.event(&pod("web-1"), EventType::Warning, "BackOff", "restarting");
    let stats = finish(recorder, writer).await;

    assert_eq!(stats.filtered, 1, "{stats:?}");
    let warned: Vec<String> = sink
        .events()
        .into_iter()
        .filter(|e| e.type_ == EventType::Warning)
        .map(|e| e.involved_object.name)
        .collect();
    assert_eq!(warned, ["web-1"], "web-0's bucket was empty");
}

/// EV2: a custom spam key that adds the reason gives each reason its own bucket.
#[tokio::test(start_paused = true)]
async fn a_custom_spam_key_splits_the_events_it_gives_different_keys() {
    let by_reason = CorrelatorConfig {
        spam_burst: 2,
        ..CorrelatorConfig::default()
    }
    .with_spam_key(|e| format!("{}/{}", e.involved_object.name, e.reason));
    let (recorder, sink, writer) = start(correlating(by_reason));
    for reason in ["Sync", "Sync", "Sync", "Pulled", "Pulled", "Pulled"] {
        recorder.event(&pod("web-0"), EventType::Normal, reason, reason);
    }
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 2,
            patched: 2,
            filtered: 2,
            ..EventStats::default()
        }
    );
    let counts: Vec<(String, i32)> = sink
        .events()
        .into_iter()
        .map(|e| (e.reason, e.count))
        .collect();
    assert!(counts.contains(&("Sync".into(), 2)), "{counts:?}");
    assert!(counts.contains(&("Pulled".into(), 2)), "{counts:?}");
}

/// EV3: a custom aggregation key and message combine what the key calls similar (here one
/// reason across objects, told apart by object) and say what the message function says.
#[tokio::test(start_paused = true)]
async fn a_custom_aggregation_key_and_message_combine_the_events_they_name() {
    let across_pods = CorrelatorConfig::default()
        .with_aggregate_key(|e| (e.reason.clone(), e.involved_object.name.clone()))
        .with_aggregate_message(|e| format!("{} (and on other pods)", e.message));
    let (recorder, sink, writer) = start(correlating(across_pods));
    for i in 0..11 {
        recorder.event(
            &pod(&format!("web-{i}")),
            EventType::Warning,
            "FailedMount",
            "volume not ready",
        );
    }
    // Different messages about one pod: one local key, never combined under this key.
    for i in 0..12 {
        recorder.event(
            &pod("db-0"),
            EventType::Warning,
            "Unhealthy",
            &format!("probe {i} failed"),
        );
    }
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 9 + 1 + 12,
            patched: 1,
            aggregated: 2,
            ..EventStats::default()
        }
    );
    let combined: Vec<Event> = sink
        .events()
        .into_iter()
        .filter(|e| e.message.ends_with("(and on other pods)"))
        .collect();
    let [combined] = &combined[..] else {
        panic!("{combined:?}")
    };
    assert_eq!(combined.message, "volume not ready (and on other pods)");
    assert_eq!(
        combined.count, 2,
        "the 10th pod's event, patched by the 11th's"
    );
    assert_eq!(
        combined.involved_object,
        pod("web-9"),
        "the event that started it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_drops_events_without_blocking_the_caller() {
    let config = BroadcasterConfig {
        queue_capacity: 2,
        ..BroadcasterConfig::default()
    };
    let (recorder, sink, writer) = start(config);
    sink.hang(true);
    recorder.event(&pod("web-0"), EventType::Normal, "Step", "0");
    until(|| sink.hanging_calls() == 1).await; // the writer holds event 0, stalled

    // Synchronous calls on a single-threaded runtime: had one blocked, the test would hang.
    for i in 1..=5 {
        recorder.event(&pod("web-0"), EventType::Normal, "Step", &i.to_string());
    }
    assert_eq!(recorder.stats().dropped, 3, "two fit in the queue");

    sink.hang(false);
    let stats = finish(recorder, writer).await;
    assert_eq!(
        stats,
        EventStats {
            created: 3,
            dropped: 3,
            ..EventStats::default()
        }
    );
    let messages: Vec<String> = sink
        .calls()
        .iter()
        .map(|c| c.event().message.clone())
        .collect();
    assert_eq!(messages, ["0", "1", "2"], "written in order");
}

#[tokio::test(start_paused = true)]
async fn a_patch_of_an_event_that_no_longer_exists_recreates_it_with_the_count_reset() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    let event = || recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "image pulled");
    event();
    event();
    until(|| recorder.stats().patched == 1).await;
    let name = sink.events()[0].metadata.name.clone();
    sink.delete("default", &name).unwrap(); // expired on the server
    event();
    until(|| recorder.stats().created == 2).await;
    event();
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 2,
            patched: 2,
            ..EventStats::default()
        }
    );
    let kinds: Vec<(&str, i32)> = sink
        .calls()
        .iter()
        .map(|call| match call {
            SinkCall::Create(e) => ("create", e.count),
            SinkCall::Patch(e, _) => ("patch", e.count),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("create", 1),
            ("patch", 2),
            ("patch", 3),
            ("create", 1),
            ("patch", 2)
        ]
    );
    let [stored] = &sink.events()[..] else {
        panic!()
    };
    assert_eq!(
        (stored.metadata.name.as_str(), stored.count),
        (name.as_str(), 2)
    );
}

#[tokio::test(start_paused = true)]
async fn retryable_errors_are_retried_10_s_apart_and_then_succeed() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    sink.fail_next((0..3).map(|_| SinkError::Retryable("connection refused".into())));
    let started = Instant::now();
    recorder.event(&pod("web-0"), EventType::Normal, "Started", "started");
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 1,
            ..EventStats::default()
        }
    );
    assert_eq!(sink.calls().len(), 4);
    assert_eq!(sink.events().len(), 1);
    let elapsed = started.elapsed();
    // A random fraction of 10 s before the first retry, then 10 s each.
    assert!(
        elapsed >= Duration::from_secs(20) && elapsed < Duration::from_secs(30),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_event_that_keeps_failing_is_given_up_after_12_attempts() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    sink.fail_next((0..20).map(|_| SinkError::Retryable("server busy".into())));
    let started = Instant::now();
    recorder.event(&pod("web-0"), EventType::Normal, "Started", "started");
    recorder.event(&pod("web-1"), EventType::Normal, "Started", "started");
    let stats = finish(recorder, writer).await;

    assert_eq!(
        stats,
        EventStats {
            created: 1,
            failed: 1,
            ..EventStats::default()
        }
    );
    let calls = sink.calls();
    assert_eq!(
        calls.len(),
        12 + 9,
        "12 attempts, then the next event's 8 failures and success"
    );
    assert!(calls[..12]
        .iter()
        .all(|c| c.event().involved_object.name == "web-0"));
    assert_eq!(sink.events()[0].involved_object.name, "web-1");
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(100 + 70) && elapsed < Duration::from_secs(190),
        "{elapsed:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn already_exists_and_rejections_are_not_retried() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    sink.fail_next([
        SinkError::AlreadyExists,
        SinkError::Rejected("namespace terminating".into()),
    ]);
    recorder.event(&pod("web-0"), EventType::Normal, "A", "a");
    recorder.event(&pod("web-1"), EventType::Normal, "B", "b");
    let stats = finish(recorder, writer).await;
    assert_eq!(
        stats,
        EventStats {
            failed: 2,
            ..EventStats::default()
        }
    );
    assert_eq!(sink.calls().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_patch_that_fails_transiently_is_retried_as_a_patch() {
    let (recorder, sink, writer) = start(BroadcasterConfig::default());
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    until(|| recorder.stats().created == 1).await;
    sink.fail_next([SinkError::Retryable("timeout".into())]);
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    let stats = finish(recorder, writer).await;
    assert_eq!(
        stats,
        EventStats {
            created: 1,
            patched: 1,
            ..EventStats::default()
        }
    );
    assert!(matches!(
        &sink.calls()[1..],
        [SinkCall::Patch(..), SinkCall::Patch(..)]
    ));
    assert_eq!(sink.events()[0].count, 2);
}

#[tokio::test(start_paused = true)]
async fn cancellation_stops_the_writer_even_while_the_sink_hangs() {
    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let recorder = broadcaster.new_recorder(EventSource::new("test"));
    let sink = MemorySink::new();
    sink.hang(true);
    let cancel = CancellationToken::new();
    let writer = broadcaster.start(sink.clone(), cancel.clone());
    recorder.event(&pod("web-0"), EventType::Normal, "A", "a");
    until(|| sink.hanging_calls() == 1).await;
    cancel.cancel();
    writer.await.unwrap();
    assert_eq!(
        sink.hanging_calls(),
        0,
        "the abandoned call stopped waiting"
    );

    recorder.event(&pod("web-0"), EventType::Normal, "A", "a");
    assert_eq!(
        recorder.stats().dropped,
        1,
        "nothing reads the queue any more"
    );
}
