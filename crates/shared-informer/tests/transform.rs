//! A transform that changes the object's type: an informer of `PodSummary` fed by a lister-watcher
//! of `DynamicObject` through `TransformingListerWatcher`.

#[macro_use]
mod common;

use std::sync::Arc;

use common::{pod, queues, until, FakeLw};
use parking_lot::Mutex;
use shared_informer::reflector::store_index::{BoxError, DynamicObject, Object, ObjectMeta};
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
