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

fn broadcaster(config: BroadcasterConfig) -> (EventBroadcaster, EventRecorder) {
    let broadcaster = EventBroadcaster::new(config);
    let recorder = broadcaster.new_recorder(EventSource::new("test-controller"));
    (broadcaster, recorder)
}

fn reasons(sink: &MemorySink) -> Vec<String> {
    sink.calls()
        .iter()
        .map(|c| c.event().reason.clone())
        .collect()
}

/// EV7: every event reaches every watcher: two sinks, a function and the log.
#[tokio::test(start_paused = true)]
async fn two_sinks_a_function_and_the_log_each_receive_every_event() {
    let log = crate::log_capture::LogCapture::start();
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let (a, b) = (MemorySink::new(), MemorySink::new());
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let watchers = [
        broadcaster.start_recording_to_sink(a.clone()),
        broadcaster.start_recording_to_sink(b.clone()),
        broadcaster.start_event_watcher({
            let seen = seen.clone();
            move |event: &Event| seen.lock().push(event.reason.clone())
        }),
        broadcaster.start_logging(tracing::Level::INFO),
    ];
    for reason in ["First", "Second", "Third"] {
        recorder.event(&pod("web-0"), EventType::Warning, reason, "m");
    }
    drop((broadcaster, recorder)); // every queue closes; each watcher drains it and ends
    for watcher in watchers {
        watcher.join().await.unwrap();
    }

    let all = ["First", "Second", "Third"];
    assert_eq!(reasons(&a), all);
    assert_eq!(reasons(&b), all);
    assert_eq!(*seen.lock(), all);
    let logged = log.with_message("event recorded");
    assert_eq!(logged.len(), 3, "{logged:?}");
    for (event, reason) in logged.iter().zip(all) {
        assert_eq!(event.level, tracing::Level::INFO);
        for (field, value) in [
            ("object", "default/web-0"),
            ("kind", "Pod"),
            ("type_", "Warning"),
            ("reason", reason),
            ("event_message", "m"),
        ] {
            assert_eq!(event.values(field), [value], "{field} in {event:?}");
        }
    }
}

/// EV7: the logged event's message is a field of its own, `event_message`: a second field named
/// `message` beside the log line's text is lost to a subscriber that reads the first.
#[tokio::test(start_paused = true)]
async fn the_log_gives_the_events_message_a_field_of_its_own() {
    let log = crate::log_capture::LogCapture::start();
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let logging = broadcaster.start_logging(tracing::Level::WARN);
    recorder.event(
        &pod("web-0"),
        EventType::Warning,
        "BackOff",
        "restarting failed container",
    );
    drop((broadcaster, recorder));
    logging.join().await.unwrap();

    let logged = log.events();
    let event = logged
        .iter()
        .find(|e| e.values("reason") == ["BackOff"])
        .expect("the event is logged");
    assert_eq!(event.level, tracing::Level::WARN);
    assert_eq!(event.values("message"), ["event recorded"], "{event:?}");
    assert_eq!(
        event.values("event_message"),
        ["restarting failed container"]
    );
}

/// EV7: each sink writes through a correlator of its own and counts in its own stats; the
/// broadcaster's stats sum them.
#[tokio::test(start_paused = true)]
async fn each_sink_correlates_on_its_own_and_the_broadcaster_sums_their_counts() {
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let (a, b) = (MemorySink::new(), MemorySink::new());
    let to_a = broadcaster.start_recording_to_sink(a.clone());
    let to_b = broadcaster.start_recording_to_sink(b.clone());
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    recorder.event(&pod("web-0"), EventType::Normal, "Pulled", "pulled");
    until(|| a.calls().len() == 2 && b.calls().len() == 2).await;

    let one_sink = EventStats {
        created: 1,
        patched: 1,
        ..EventStats::default()
    };
    assert_eq!((to_a.stats(), to_b.stats()), (one_sink, one_sink));
    assert_eq!(
        broadcaster.stats(),
        EventStats {
            created: 2,
            patched: 2,
            ..EventStats::default()
        }
    );
    for sink in [&a, &b] {
        assert_eq!(
            sink.events()[0].count,
            2,
            "each sink's own Event is patched"
        );
    }
}

/// EV7: stopping one watcher stops it alone, at once; the others keep receiving, and what the
/// stopped one no longer gets is not counted as dropped.
#[tokio::test(start_paused = true)]
async fn stopping_one_watcher_leaves_the_others_running() {
    let log = crate::log_capture::LogCapture::start();
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let (a, b) = (MemorySink::new(), MemorySink::new());
    let to_a = broadcaster.start_recording_to_sink(a.clone());
    let to_b = broadcaster.start_recording_to_sink(b.clone());
    let logging = broadcaster.start_logging(tracing::Level::INFO);
    recorder.event(&pod("web-0"), EventType::Normal, "Before", "m");
    until(|| a.calls().len() == 1 && b.calls().len() == 1).await;

    to_a.stop();
    to_a.stop(); // again: nothing more
    recorder.event(&pod("web-0"), EventType::Normal, "After", "m");
    assert_eq!(
        broadcaster.stats().dropped,
        0,
        "a stopped sink misses nothing"
    );
    to_a.join().await.unwrap();
    drop((broadcaster, recorder));
    to_b.join().await.unwrap();
    logging.join().await.unwrap();

    assert_eq!(reasons(&a), ["Before"]);
    assert_eq!(reasons(&b), ["Before", "After"]);
    assert_eq!(log.with_message("event recorded").len(), 2);
}

/// EV7: a stalled sink fills its own queue and then misses events (counted), while the other
/// sink and the recorder carry on as if it were not there.
#[tokio::test(start_paused = true)]
async fn a_stalled_sink_does_not_block_the_others_and_drops_only_its_own_events() {
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig {
        queue_capacity: 2,
        ..BroadcasterConfig::default()
    });
    let (stalled, fast) = (MemorySink::new(), MemorySink::new());
    stalled.hang(true);
    let to_stalled = broadcaster.start_recording_to_sink(stalled.clone());
    let to_fast = broadcaster.start_recording_to_sink(fast.clone());
    for i in 0..6 {
        recorder.event(&pod("web-0"), EventType::Normal, &format!("Step{i}"), "m");
        // Each event reaches the fast sink while the stalled one still hangs on the first.
        until(|| fast.calls().len() == i + 1).await;
    }
    assert_eq!(stalled.hanging_calls(), 1);
    assert_eq!(
        to_stalled.stats().dropped,
        3,
        "one being written, two queued, three missed"
    );
    assert_eq!(to_fast.stats().dropped, 0);
    assert_eq!(broadcaster.stats().dropped, 3);

    stalled.hang(false);
    drop((broadcaster, recorder));
    to_stalled.join().await.unwrap();
    to_fast.join().await.unwrap();
    assert_eq!(reasons(&stalled), ["Step0", "Step1", "Step2"]);
    assert_eq!(fast.events().len(), 6);
}

/// EV7: the first watcher takes over the queue made with the broadcaster, so it also gets the
/// events recorded before it started; a later one gets those recorded after its start.
#[tokio::test(start_paused = true)]
async fn the_first_watcher_gets_the_events_recorded_before_it_started() {
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    recorder.event(&pod("web-0"), EventType::Normal, "Early", "m");
    let (first, later) = (MemorySink::new(), MemorySink::new());
    let to_first = broadcaster.start_recording_to_sink(first.clone());
    let to_later = broadcaster.start_recording_to_sink(later.clone());
    recorder.event(&pod("web-0"), EventType::Normal, "Late", "m");
    drop((broadcaster, recorder));
    to_first.join().await.unwrap();
    to_later.join().await.unwrap();
    assert_eq!(reasons(&first), ["Early", "Late"]);
    assert_eq!(reasons(&later), ["Late"]);
}

/// EV7: `start` (which consumes the broadcaster) adds one more sink beside the watchers already
/// started; dropping the recorders then ends them all.
#[tokio::test(start_paused = true)]
async fn start_runs_beside_watchers_started_before_it() {
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let seen = std::sync::Arc::new(parking_lot::Mutex::new(0));
    let counting = broadcaster.start_event_watcher({
        let seen = seen.clone();
        move |_: &Event| *seen.lock() += 1
    });
    let sink = MemorySink::new();
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());
    recorder.event(&pod("web-0"), EventType::Normal, "A", "m");
    drop(recorder);
    writer.await.unwrap();
    counting.join().await.unwrap();
    assert_eq!(reasons(&sink), ["A"]);
    assert_eq!(*seen.lock(), 1);
}

/// EV7: a watcher function that panics ends that watcher alone: its task reports the panic, the
/// events it can no longer take are counted as dropped, and the other watchers carry on.
#[tokio::test(start_paused = true)]
async fn a_watcher_function_that_panics_ends_only_that_watcher() {
    let (broadcaster, recorder) = broadcaster(BroadcasterConfig::default());
    let sink = MemorySink::new();
    let writing = broadcaster.start_recording_to_sink(sink.clone());
    let panicking = broadcaster.start_event_watcher(|_: &Event| panic!("a buggy watcher"));
    recorder.event(&pod("web-0"), EventType::Normal, "A", "m");
    until(|| panicking.is_finished()).await;
    recorder.event(&pod("web-0"), EventType::Normal, "B", "m");
    recorder.event(&pod("web-0"), EventType::Normal, "C", "m");
    assert_eq!(
        broadcaster.stats().dropped,
        1,
        "counted once, then it is forgotten"
    );
    assert!(panicking.join().await.unwrap_err().is_panic());
    drop((broadcaster, recorder));
    writing.join().await.unwrap();
    assert_eq!(reasons(&sink), ["A", "B", "C"]);
}

/// `Event::new` makes the event a recorder records, for the correlator's public key functions
/// and for sinks tested without a broadcaster: only the name's unique suffix and the times may
/// differ (and the resource version the sink gave the one it stored).
#[tokio::test(start_paused = true)]
async fn event_new_makes_the_event_a_recorder_records() {
    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let source = EventSource::new("test-controller").with_host("node-1");
    let recorder = broadcaster.new_recorder(source.clone());
    let sink = MemorySink::new();
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());
    let node = ObjectReference::new("v1", "Node", "", "node-1");
    recorder.event(
        &node,
        EventType::Warning,
        "NotReady",
        "kubelet stopped posting",
    );
    drop(recorder); // the last recorder: the writer drains the queue and returns
    writer.await.unwrap();

    let recorded = sink.events().remove(0);
    let made = Event::new(
        &node,
        EventType::Warning,
        "NotReady",
        "kubelet stopped posting",
    )
    .with_source(source);
    let comparable = |e: &Event| Event {
        metadata: EventMeta {
            name: e.metadata.name.split('.').next().unwrap_or("").to_owned(),
            namespace: e.metadata.namespace.clone(),
            resource_version: String::new(),
        },
        first_timestamp: None,
        last_timestamp: None,
        ..e.clone()
    };
    assert_eq!(comparable(&made), comparable(&recorded));
    assert_eq!(made.metadata.namespace, "default");
    assert_eq!(
        CorrelatorKeys::default_aggregate_key(&made),
        CorrelatorKeys::default_aggregate_key(&recorded)
    );
}
