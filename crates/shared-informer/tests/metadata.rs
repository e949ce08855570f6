//! Metadata-only informers (D14) against the simulated API server: they cache names, labels,
//! owner references and resource versions without the objects' spec, follow the watch like any
//! informer, receive a fraction of a full informer's bytes, still work against a server that does
//! not know the metadata representation, and a representation no server knows is a clear 406.
//! They speak protobuf by default, and cache on it what they cache on JSON.
//!
//! Waiting is event-driven: the cache sync signal, and handler notifications on a channel read
//! with a deadline; nothing sleeps to synchronise. The informer tests run on every queue; the
//! last test asks the client alone, so no queue is involved.

#[macro_use]
mod common;

use std::sync::Arc;
use std::time::Duration;

use common::queues;
use serde_json::{json, Value};
use shared_informer::reflector::store_index::{
    DynamicObject, Object, ObjectOrTombstone, PartialObjectMetadata, Selector,
};
use shared_informer::reflector::{
    ClientError, ClusterConfig, Encoding, ReflectorOptions, Representation, Resource,
    DEFAULT_MAX_BODY_BYTES,
};
use shared_informer::{
    CancellationToken, EventHandlerFns, InformerQueue, SharedIndexInformer, SharedInformerFactory,
};
use sim_apiserver::SimServer;
use tokio::sync::mpsc;

const PODS_SEEDED: usize = 300;

fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

/// A pod whose spec is most of its bytes, as real pods' specs and statuses are.
fn big_pod(name: &str, i: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"app": if i % 2 == 0 { "web" } else { "db" }},
            "annotations": {"team": "payments"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("rs-{}", i % 10), "uid": format!("uid-{}", i % 10), "controller": true}],
        },
        "spec": {
            "containers": [{"name": "app", "image": "registry.example.com/app:v1", "args": ["-x".repeat(1000)],
                            "env": (0..20).map(|e| json!({"name": format!("VAR_{e}"), "value": "a value that takes some room"})).collect::<Vec<_>>()}],
            "nodeName": format!("node-{}", i % 7),
        },
    })
}

/// A simulator holding `PODS_SEEDED` big pods in namespaces `ns-0` … `ns-3`.
async fn seeded(server: sim_apiserver::SimServerBuilder) -> SimServer {
    let sim = server.start().await.unwrap();
    for i in 0..PODS_SEEDED {
        let ns = format!("ns-{}", i % 4);
        sim.create("pods", Some(&ns), big_pod(&format!("p{i}"), i))
            .unwrap();
    }
    sim
}

/// The fields a cached object serializes to: only type meta and metadata, never `spec`.
fn fields(o: &PartialObjectMetadata) -> Vec<String> {
    match serde_json::to_value(o).unwrap() {
        Value::Object(m) => m.keys().cloned().collect(),
        other => panic!("not an object: {other}"),
    }
}

/// What a handler heard: the event type, the key and the resource version.
type Heard = (&'static str, String, String);

/// Registers a handler sending every notification (after the initial list) to a channel.
fn listen(informer: &SharedIndexInformer<PartialObjectMetadata>) -> mpsc::UnboundedReceiver<Heard> {
    let (tx, rx) = mpsc::unbounded_channel();
    let key = |o: &PartialObjectMetadata| format!("{}/{}", o.namespace().unwrap_or(""), o.name());
    let (add, update, delete) = (tx.clone(), tx.clone(), tx);
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<PartialObjectMetadata>, initial| {
                    if !initial {
                        let rv = o.resource_version().unwrap_or("").to_string();
                        let _ = add.send(("add", key(o), rv));
                    }
                })
                .on_update(move |_, o: &Arc<PartialObjectMetadata>| {
                    let rv = o.resource_version().unwrap_or("").to_string();
                    let _ = update.send(("update", key(o), rv));
                })
                .on_delete(move |o: &ObjectOrTombstone<PartialObjectMetadata>| {
                    let key = o.key().map(|k| k.to_string()).unwrap_or_default();
                    let _ = delete.send(("delete", key, String::new()));
                }),
        )
        .unwrap();
    rx
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Heard>) -> Heard {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a notification within 30 s")
        .expect("the handler is registered")
}

fn rv_of(v: &Value) -> String {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Starts `factory`, waits for its caches to sync, and answers what `read` makes of them (before
/// the factory shuts down) and the bytes the simulator sent meanwhile.
async fn synced_bytes<T>(
    sim: &SimServer,
    factory: SharedInformerFactory,
    read: impl FnOnce() -> T,
) -> (T, u64) {
    let before = sim.counters().bytes;
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert!(report.all_synced(), "{report}");
    let bytes = sim.counters().bytes - before;
    let read = read();
    cancel.cancel();
    factory.shutdown().await;
    (read, bytes)
}

on_every_queue!(
    a_metadata_informer_caches_metadata_only_and_follows_adds_updates_and_deletes,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_metadata_informer_caches_metadata_only_and_follows_adds_updates_and_deletes(
    queue: InformerQueue,
) {
    // Without the watch cache the first list is paginated: three pages of a hundred.
    let sim = seeded(SimServer::builder().watch_cache(false)).await;
    // With an expected kind set, pages of PartialObjectMetadataList and PartialObjectMetadata
    // events pass for pods.
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .queue(queue)
        .reflector_options(ReflectorOptions {
            expected_gvk: Some(("v1".into(), "Pod".into())),
            page_size: 100,
            ..list_then_watch()
        });
    let informer = factory.metadata_informer(pods()).unwrap();
    assert_eq!(informer.queue(), queue);
    let same = factory.metadata_informer(pods()).unwrap();
    assert!(std::ptr::eq(informer.indexer(), same.indexer()));
    let mut heard = listen(&informer);
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert!(report.all_synced(), "{report}");

    assert_eq!(informer.indexer().len(), PODS_SEEDED);
    let lister = informer.lister();
    let p7 = lister.namespaced("ns-3").get("p7").expect("p7 cached");
    assert!(p7.is_metadata_representation());
    assert_eq!(fields(&p7), ["apiVersion", "kind", "metadata"]);
    assert_eq!(p7.label("app"), Some("db"));
    assert_eq!(p7.annotation("team"), Some("payments"));
    let owner = &p7.metadata.owner_references.as_deref().unwrap_or_default()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("ReplicaSet", "rs-7")
    );
    let web: Selector = "app=web".parse().unwrap();
    assert_eq!(lister.list(&web).len(), PODS_SEEDED / 2);
    assert_eq!(lister.namespaced("ns-0").list(&web).len(), PODS_SEEDED / 4);

    let created = sim
        .create("pods", Some("ns-1"), big_pod("late", 1))
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        ("add", "ns-1/late".into(), rv_of(&created))
    );
    let patched = sim
        .patch(
            "pods",
            Some("ns-3"),
            "p7",
            &json!({"metadata": {"labels": {"app": "web"}}}),
        )
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        ("update", "ns-3/p7".into(), rv_of(&patched))
    );
    let p7 = lister.namespaced("ns-3").get("p7").unwrap();
    assert_eq!(p7.label("app"), Some("web"));
    assert_eq!(p7.resource_version(), Some(rv_of(&patched).as_str()));
    sim.delete("pods", Some("ns-0"), "p0").unwrap();
    assert_eq!(
        next(&mut heard).await,
        ("delete", "ns-0/p0".into(), String::new())
    );
    assert!(lister.namespaced("ns-0").get("p0").is_none());
    assert_eq!(informer.indexer().len(), PODS_SEEDED);
    assert!(informer
        .indexer()
        .list()
        .iter()
        .all(|o| fields(o) == ["apiVersion", "kind", "metadata"]));

    let counters = sim.counters();
    assert_eq!((counters.lists, counters.watches), (3, 1), "{counters:?}");
    cancel.cancel();
    factory.shutdown().await;
}

on_every_queue!(
    a_metadata_informer_receives_a_fraction_of_the_bytes_of_a_full_informer,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_metadata_informer_receives_a_fraction_of_the_bytes_of_a_full_informer(
    queue: InformerQueue,
) {
    let sim = seeded(SimServer::builder()).await;
    let config = ClusterConfig::new(&sim.url()).unwrap();

    let full_factory = SharedInformerFactory::new(config.clone()).queue(queue);
    let full = full_factory.informer::<DynamicObject>(pods()).unwrap();
    let ((), full_bytes) = synced_bytes(&sim, full_factory, || ()).await;
    let meta_factory = SharedInformerFactory::new(config).queue(queue);
    let meta = meta_factory.metadata_informer(pods()).unwrap();
    let ((), meta_bytes) = synced_bytes(&sim, meta_factory, || ()).await;

    assert_eq!(
        (full.indexer().len(), meta.indexer().len()),
        (PODS_SEEDED, PODS_SEEDED)
    );
    assert!(
        meta_bytes * 5 < full_bytes,
        "the metadata informer received {meta_bytes} bytes, the full one {full_bytes}"
    );
    // The same comparison on one list body each, through the factory's client.
    let client = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .client()
        .unwrap();
    let path = "/api/v1/pods";
    let full_list = client.get_bytes(path).await.unwrap();
    let meta_list = client
        .get_bytes_accepting(
            path,
            Representation::PartialObjectMetadata.list_accept(),
            DEFAULT_MAX_BODY_BYTES,
        )
        .await
        .unwrap();
    assert!(
        meta_list.len() * 5 < full_list.len(),
        "{} vs {}",
        meta_list.len(),
        full_list.len()
    );
}

on_every_queue!(
    a_server_that_does_not_know_the_metadata_representation_still_fills_the_cache,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn a_server_that_does_not_know_the_metadata_representation_still_fills_the_cache(
    queue: InformerQueue,
) {
    let sim = seeded(SimServer::builder().partial_object_metadata(false)).await;
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .queue(queue)
        .reflector_options(ReflectorOptions {
            expected_gvk: Some(("v1".into(), "Pod".into())),
            ..list_then_watch()
        });
    let informer = factory.metadata_informer(pods()).unwrap();
    assert_eq!(informer.queue(), queue);
    let mut heard = listen(&informer);
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(30)).await;
    assert!(report.all_synced(), "{report}");
    assert_eq!(informer.indexer().len(), PODS_SEEDED);
    // Whole pods came; only their metadata was kept (items of a built-in list carry no type
    // meta).
    let p3 = informer.lister().namespaced("ns-3").get("p3").unwrap();
    assert!(!p3.is_metadata_representation());
    assert_eq!((p3.kind(), p3.label("app")), (None, Some("db")));
    assert_eq!(fields(&p3), ["metadata"]);
    let created = sim
        .create("pods", Some("ns-2"), big_pod("late", 2))
        .unwrap();
    assert_eq!(
        next(&mut heard).await,
        ("add", "ns-2/late".into(), rv_of(&created))
    );
    let late = informer.lister().namespaced("ns-2").get("late").unwrap();
    assert_eq!(late.kind(), Some("Pod"));
    assert_eq!(fields(&late), ["apiVersion", "kind", "metadata"]);
    cancel.cancel();
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_representation_the_server_does_not_know_is_a_clear_not_acceptable_error() {
    let sim = SimServer::start().await.unwrap();
    let client = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .client()
        .unwrap();
    let table = "application/json;as=Table;g=meta.k8s.io;v=v2";
    let err = client
        .get_bytes_accepting("/api/v1/pods", table, DEFAULT_MAX_BODY_BYTES)
        .await
        .unwrap_err();
    assert!(err.is_not_acceptable(), "{err:?}");
    match &err {
        ClientError::NotAcceptable { accept, status } => {
            assert_eq!(accept, table);
            assert_eq!(
                (status.code, status.reason.as_str()),
                (406, "NotAcceptable")
            );
        }
        other => panic!("expected NotAcceptable, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("Accept: application/json;as=Table")
            && text.contains("only the following media types are accepted"),
        "{text}"
    );
    let err = client
        .watch(
            "/api/v1/pods?watch=true",
            "application/json;as=Surprise;g=meta.k8s.io;v=v1",
        )
        .await
        .unwrap_err();
    assert!(err.is_not_acceptable(), "{err:?}");
    assert_eq!(err.status().map(|s| s.code), Some(406));
    // The metadata representation itself, with its fallback, is of course acceptable.
    client
        .get_bytes_accepting(
            "/api/v1/pods",
            Representation::PartialObjectMetadata.list_accept(),
            DEFAULT_MAX_BODY_BYTES,
        )
        .await
        .unwrap();
}

on_every_queue!(
    a_metadata_informer_speaks_protobuf_by_default_and_caches_what_it_caches_on_json,
    flavor = "multi_thread",
    worker_threads = 2
);
/// Like client-go's metadata informers, ours ask for the metadata representation in protobuf
/// (JSON listed after it): fewer bytes, the same cache. The same informer told to speak JSON is the
/// reference, object for object.
async fn a_metadata_informer_speaks_protobuf_by_default_and_caches_what_it_caches_on_json(
    queue: InformerQueue,
) {
    let sim = seeded(SimServer::builder()).await;
    let config = ClusterConfig::new(&sim.url()).unwrap();
    let cache_and_bytes = |factory: SharedInformerFactory| {
        let informer = factory.metadata_informer(pods()).unwrap();
        let sim = sim.clone();
        async move {
            synced_bytes(&sim, factory, || {
                let mut cached: Vec<Value> = informer
                    .indexer()
                    .list()
                    .iter()
                    .map(|o| serde_json::to_value(&**o).unwrap())
                    .collect();
                cached.sort_by_key(|o| o["metadata"]["uid"].to_string());
                cached
            })
            .await
        }
    };
    let (on_protobuf, protobuf_bytes) =
        cache_and_bytes(SharedInformerFactory::new(config.clone()).queue(queue)).await;
    let (on_json, json_bytes) = cache_and_bytes(
        SharedInformerFactory::new(config)
            .queue(queue)
            .encoding(Encoding::Json),
    )
    .await;
    assert_eq!(on_protobuf.len(), PODS_SEEDED);
    assert_eq!(on_protobuf, on_json);
    assert_eq!(
        on_protobuf[0]["kind"], "PartialObjectMetadata",
        "{}",
        on_protobuf[0]
    );
    assert!(
        protobuf_bytes * 10 < json_bytes * 8,
        "protobuf {protobuf_bytes} bytes, JSON {json_bytes}"
    );
}

/// The default options but for watch-list streaming (C1.3): these tests are of a list and what
/// follows it, and ask for one.
fn list_then_watch() -> ReflectorOptions {
    ReflectorOptions {
        watch_list: false,
        ..ReflectorOptions::default()
    }
}
