//! A transform that changes the object's type: an informer of `PodSummary` fed by a lister-watcher
//! of `DynamicObject` through `TransformingListerWatcher`.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{pod, queues, until, FakeLw};
use parking_lot::Mutex;
use shared_informer::reflector::store_index::{
    BoxError, DynamicObject, Indexers, KeyError, KeyFn, Object, ObjectKey, ObjectMeta,
};
use shared_informer::reflector::{
    ListOptions, ListerWatcher, ObjectList, ReflectorError, Representation, WatchEvent,
    WatchOptions, WatchStream,
};
use shared_informer::{
    EventHandlerFns, InformerOptions, InformerQueue, SharedIndexInformer, TransformingListerWatcher,
};
use tokio_util::sync::CancellationToken;

/// What is cached of a pod: its metadata and its phase, nothing else.
#[derive(Debug)]
struct PodSummary {
    metadata: ObjectMeta,
    phase: Option<String>,
}

impl Object for PodSummary {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        Some(&self.metadata)
    }
}

/// Refuses pods labelled `bad`.
fn summarise(pod: DynamicObject) -> Result<PodSummary, BoxError> {
    if pod.labels().is_some_and(|l| l.contains_key("bad")) {
        return Err(format!("pod {} cannot be summarised", pod.name()).into());
    }
    Ok(PodSummary {
        phase: pod
            .data
            .get("status")
            .and_then(|s| s["phase"].as_str())
            .map(String::from),
        metadata: pod.metadata,
    })
}

fn running(name: &str, rv: u64) -> DynamicObject {
    pod(name, rv).with_field("status", serde_json::json!({ "phase": "Running" }))
}

on_every_queue!(
    an_informer_caches_the_transformed_type_and_drops_a_watch_event_that_fails,
    start_paused = true
);
async fn an_informer_caches_the_transformed_type_and_drops_a_watch_event_that_fails(
    queue: InformerQueue,
) {
    let lw = FakeLw::new(vec![running("p0", 1), running("p1", 2)], "2");
    let informer: SharedIndexInformer<PodSummary, _> = SharedIndexInformer::new(
        TransformingListerWatcher::new(lw.clone(), summarise),
        InformerOptions {
            name: "pods".into(),
            queue,
            ..Default::default()
        },
    );
    // The same-type transform still applies, after the type-changing one.
    informer
        .set_transform(|summary: Arc<PodSummary>| {
            let mut metadata = summary.metadata.clone();
            metadata.managed_fields = None;
            Ok(Arc::new(PodSummary {
                metadata,
                phase: summary.phase.clone(),
            }))
        })
        .unwrap();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    informer
        .add_event_handler(EventHandlerFns::new().on_add({
            let seen = seen.clone();
            move |s: &Arc<PodSummary>, _| {
                seen.lock().push(format!(
                    "{} {}",
                    s.name(),
                    s.phase.as_deref().unwrap_or("-")
                ))
            }
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    assert!(informer.wait_for_sync().await);
    let cached = informer.indexer().get_by_key("ns/p0").unwrap();
    assert_eq!(cached.phase.as_deref(), Some("Running"));

    until(|| lw.send(WatchEvent::Added(pod("bad", 3).with_label("bad", "yes")))).await;
    assert!(lw.send(WatchEvent::Added(running("p2", 4))));
    until(|| informer.indexer().len() == 3).await;
    assert!(
        informer.indexer().get_by_key("ns/bad").is_none(),
        "the event whose transform failed is dropped"
    );
    assert_eq!(informer.last_sync_resource_version().as_str(), "4");
    until(|| seen.lock().len() == 3).await;
    assert_eq!(*seen.lock(), ["p0 Running", "p1 Running", "p2 Running"]);
    cancel.cancel();
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_failing_event_keeps_its_resource_version_as_a_bookmark() {
    let lw = FakeLw::new(vec![], "1");
    let transforming = TransformingListerWatcher::new(lw.clone(), summarise);
    let mut watch = transforming.watch(WatchOptions::default()).await.unwrap();
    assert!(lw.send(WatchEvent::Modified(pod("bad", 7).with_label("bad", "yes"))));
    let mut unversioned = pod("bad", 0).with_label("bad", "yes");
    unversioned.metadata.resource_version = None;
    assert!(lw.send(WatchEvent::Deleted(unversioned)));
    assert!(lw.send(WatchEvent::Deleted(running("p0", 8))));
    use futures::StreamExt;
    match watch.next().await {
        Some(Ok(WatchEvent::Bookmark(b))) => {
            assert_eq!(b.resource_version.as_str(), "7");
            assert!(!b.initial_events_end);
        }
        other => panic!("{other:?}"),
    }
    // Without a resource version there is nothing to keep: the event is skipped.
    match watch.next().await {
        Some(Ok(WatchEvent::Deleted(s))) => assert_eq!(s.name(), "p0"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_list_page_with_an_object_that_fails_fails_whole() {
    let lw = FakeLw::new(
        vec![running("p0", 1), pod("bad", 2).with_label("bad", "yes")],
        "2",
    );
    let transforming = TransformingListerWatcher::new(lw, summarise);
    let err = transforming.list(ListOptions::default()).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "unable to sync list result: transforming: pod bad cannot be summarised"
    );
}

/// An inner lister-watcher whose settings differ from the defaults.
struct Metadata;

impl ListerWatcher<DynamicObject> for Metadata {
    async fn list(&self, _: ListOptions) -> Result<ObjectList<DynamicObject>, ReflectorError> {
        Ok(ObjectList::new(vec![], "1"))
    }
    async fn watch(&self, _: WatchOptions) -> Result<WatchStream<DynamicObject>, ReflectorError> {
        std::future::pending().await
    }
    fn supports_watch_list(&self) -> bool {
        false
    }
    fn representation(&self) -> Representation {
        Representation::PartialObjectMetadata
    }
}

#[test]
fn the_wrapper_forwards_what_the_inner_lister_watcher_says_of_itself() {
    let transforming = TransformingListerWatcher::new(Metadata, summarise);
    assert!(!ListerWatcher::<PodSummary>::supports_watch_list(
        &transforming
    ));
    assert_eq!(
        ListerWatcher::<PodSummary>::representation(&transforming),
        Representation::PartialObjectMetadata
    );
}

// A reflector writing straight into a cache, no queue between: the store-level transformer
// (`TransformingStore`) transforms the list and each watch event as they enter the cache.
#[tokio::test(start_paused = true)]
async fn a_cache_fed_directly_by_a_reflector_gets_the_transform() {
    use shared_informer::reflector::delta_fifo::TransformingStore;
    use shared_informer::reflector::store_index::Indexer;
    use shared_informer::reflector::{Reflector, ReflectorOptions};

    let lw = FakeLw::new(vec![running("p0", 1)], "1");
    let cache: Indexer<DynamicObject> = Indexer::default();
    let store = TransformingStore::new(cache.clone(), |pod: Arc<DynamicObject>| {
        let mut pod = (*pod).clone();
        pod.data.remove("status");
        Ok(Arc::new(pod))
    });
    let reflector = Arc::new(Reflector::new(
        lw.clone(),
        store,
        ReflectorOptions::default(),
    ));
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let reflector = reflector.clone();
        let cancel = cancel.clone();
        async move { reflector.run(cancel).await }
    });
    until(|| cache.len() == 1).await;
    until(|| lw.send(WatchEvent::Added(running("p1", 2)))).await;
    until(|| cache.len() == 2).await;
    for obj in cache.list() {
        assert!(
            !obj.data.contains_key("status"),
            "{} kept its status",
            obj.name()
        );
    }
    assert_eq!(cache.resource_version().as_str(), "2");
    cancel.cancel();
    task.await.unwrap();
}

/// What is cached of a pod by a transform that keeps no metadata: a value of its own, keyed by a
/// key function (client-go's store tests cache such values under a custom key).
#[derive(Debug)]
struct Phase {
    pod: String,
    phase: Option<String>,
}

impl Object for Phase {}

fn phase_of(pod: DynamicObject) -> Result<Phase, BoxError> {
    Ok(Phase {
        phase: pod
            .data
            .get("status")
            .and_then(|s| s["phase"].as_str())
            .map(String::from),
        pod: pod.name().to_string(),
    })
}

fn by_pod() -> KeyFn<Phase> {
    Arc::new(|p: &Phase| Ok(ObjectKey::from(p.pod.as_str())))
}

fn phased(name: &str, rv: u64, phase: &str) -> DynamicObject {
    pod(name, rv).with_field("status", serde_json::json!({ "phase": phase }))
}

on_every_queue!(
    an_informer_with_a_key_function_caches_values_without_metadata,
    start_paused = true
);
async fn an_informer_with_a_key_function_caches_values_without_metadata(queue: InformerQueue) {
    let lw = FakeLw::new(vec![running("p0", 1), running("p1", 2)], "2");
    let informer: SharedIndexInformer<Phase, _> = SharedIndexInformer::new(
        TransformingListerWatcher::new(lw.clone(), phase_of),
        InformerOptions {
            key_fn: by_pod(),
            indexers: Indexers::new(),
            queue,
            ..Default::default()
        },
    );
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = |what: &'static str, seen: &Arc<Mutex<Vec<String>>>| {
        let seen = seen.clone();
        move |p: &Phase| {
            seen.lock().push(format!(
                "{what} {} {}",
                p.pod,
                p.phase.as_deref().unwrap_or("-")
            ))
        }
    };
    let (on_add, on_update, on_delete) = (
        record("add", &seen),
        record("update", &seen),
        record("delete", &seen),
    );
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |p: &Arc<Phase>, _| on_add(p))
                .on_update(move |_, p: &Arc<Phase>| on_update(p))
                .on_delete(move |p| on_delete(p.object().expect("not a tombstone"))),
        )
        .unwrap();
    let errors: Arc<Mutex<Vec<String>>> = Arc::default();
    informer
        .set_watch_error_handler(Arc::new({
            let errors = errors.clone();
            move |e: &ReflectorError| errors.lock().push(e.to_string())
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    let synced = tokio::time::timeout(Duration::from_secs(600), informer.wait_for_sync()).await;
    assert_eq!(synced, Ok(true), "errors: {:?}", errors.lock());
    assert_eq!(
        informer
            .indexer()
            .get_by_key("p0")
            .unwrap()
            .phase
            .as_deref(),
        Some("Running")
    );

    until(|| lw.send(WatchEvent::Modified(phased("p0", 3, "Succeeded")))).await;
    assert!(lw.send(WatchEvent::Deleted(running("p1", 4))));
    assert!(lw.send(WatchEvent::Added(phased("p2", 5, "Pending"))));
    until(|| seen.lock().len() == 5).await;
    assert_eq!(
        *seen.lock(),
        [
            "add p0 Running",
            "add p1 Running",
            "update p0 Succeeded",
            "delete p1 Running",
            "add p2 Pending"
        ]
    );
    let mut keys = informer.indexer().list_keys();
    keys.sort();
    assert_eq!(keys, ["p0", "p2"]);
    // The values carry no resource version; the watch's reached the reflector all the same.
    assert_eq!(informer.last_sync_resource_version().as_str(), "5");
    assert!(errors.lock().is_empty(), "{:?}", errors.lock());
    cancel.cancel();
    task.await.unwrap();
}

on_every_queue!(
    without_a_key_function_values_without_metadata_are_a_key_error_retried_after_backoff,
    start_paused = true
);
async fn without_a_key_function_values_without_metadata_are_a_key_error_retried_after_backoff(
    queue: InformerQueue,
) {
    let lw = FakeLw::new(vec![running("p0", 1)], "1");
    let informer: SharedIndexInformer<Phase, _> = SharedIndexInformer::new(
        TransformingListerWatcher::new(lw.clone(), phase_of),
        InformerOptions {
            queue,
            ..Default::default()
        },
    );
    let key_errors: Arc<Mutex<Vec<Option<KeyError>>>> = Arc::default();
    informer
        .set_watch_error_handler(Arc::new({
            let key_errors = key_errors.clone();
            move |e: &ReflectorError| key_errors.lock().push(e.key_error().cloned())
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    // Five minutes of the reflector's backoff (800 ms doubling to 30 s, jitter up to twice, back
    // to 800 ms every two minutes) allow about 12 to 25 lists, each refused with a key error the
    // handler hears of; a loop without a delay would list thousands of times.
    let synced = tokio::time::timeout(Duration::from_secs(300), informer.wait_for_sync()).await;
    assert!(synced.is_err(), "nothing can be cached without a key");
    let key_errors = key_errors.lock().clone();
    assert!(
        (3..=30).contains(&lw.lists()),
        "{} lists in five minutes",
        lw.lists()
    );
    assert_eq!(key_errors.len(), lw.lists());
    assert!(key_errors.iter().all(|e| e == &Some(KeyError::NoMeta)));
    cancel.cancel();
    task.await.unwrap();
}

/// What a watch error handler heard: the error's text and its key error, if any.
type Heard = (String, Option<KeyError>);

/// A pod's metadata, except for pods labelled `anonymous`, whose value has none.
#[derive(Debug)]
struct MaybeMeta(Option<ObjectMeta>);

impl Object for MaybeMeta {
    fn object_meta(&self) -> Option<&ObjectMeta> {
        self.0.as_ref()
    }
}

on_every_queue!(
    a_watch_event_whose_value_cannot_be_keyed_reaches_the_error_handler_and_the_watch_goes_on,
    start_paused = true
);
async fn a_watch_event_whose_value_cannot_be_keyed_reaches_the_error_handler_and_the_watch_goes_on(
    queue: InformerQueue,
) {
    let lw = FakeLw::new(vec![running("p0", 1)], "1");
    let informer: SharedIndexInformer<MaybeMeta, _> = SharedIndexInformer::new(
        TransformingListerWatcher::new(lw.clone(), |pod: DynamicObject| {
            let anonymous = pod.labels().is_some_and(|l| l.contains_key("anonymous"));
            Ok::<_, BoxError>(MaybeMeta((!anonymous).then_some(pod.metadata)))
        }),
        InformerOptions {
            queue,
            ..Default::default()
        },
    );
    let errors: Arc<Mutex<Vec<Heard>>> = Arc::default();
    informer
        .set_watch_error_handler(Arc::new({
            let errors = errors.clone();
            move |e: &ReflectorError| errors.lock().push((e.to_string(), e.key_error().cloned()))
        }))
        .unwrap();
    let cancel = CancellationToken::new();
    let task = tokio::spawn({
        let informer = informer.clone();
        let cancel = cancel.clone();
        async move { informer.run(cancel).await }
    });
    assert!(informer.wait_for_sync().await);
    until(|| {
        lw.send(WatchEvent::Added(
            running("who", 2).with_label("anonymous", "yes"),
        ))
    })
    .await;
    assert!(lw.send(WatchEvent::Added(running("p1", 3))));
    until(|| informer.indexer().len() == 2).await;
    let errors = errors.lock().clone();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].1, Some(KeyError::NoMeta));
    assert!(
        errors[0]
            .0
            .starts_with("unable to apply a watch ADDED event to the store"),
        "{}",
        errors[0].0
    );
    assert_eq!(informer.last_sync_resource_version().as_str(), "3");
    assert_eq!(lw.lists(), 1, "a refused event costs no relist");
    cancel.cancel();
    task.await.unwrap();
}
