//! `SharedInformerFactory::drop_managed_fields` against the simulated API server, with and
//! without its stand-in for KEP-5958's `ManagedFieldsOptOut` gate: either way no handler and no
//! cached object ever holds `metadata.managedFields`, and everything else is the server's object
//! as it is (adds, updates, resyncs, deletes and relist tombstones); only the bytes received tell
//! whether the server or the client dropped them.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::{json, Value};
use shared_informer::reflector::store_index::{
    CompactObject, DynamicObject, Object, ObjectOrTombstone, RawEncoding,
};
use shared_informer::reflector::{ClusterConfig, Encoding, ReflectorOptions, Resource};
use shared_informer::{EventHandlerFns, SharedInformerFactory};
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

/// The manager of the configmaps' managedFields entry.
const MANAGER: &[u8] = b"mf-test-manager";

/// A configmap carrying a managedFields entry, as a server writes one after an update.
fn configmap(name: &str, value: &str) -> Value {
    json!({
        "metadata": {
            "name": name,
            "labels": {"app": "x"},
            "managedFields": [{
                "manager": "mf-test-manager", "operation": "Update", "apiVersion": "v1",
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}
            }]
        },
        "data": {"k": value}
    })
}

/// The server's object as the cache must hold it.
fn without_managed_fields(mut object: Value) -> Value {
    object["metadata"]
        .as_object_mut()
        .expect("metadata")
        .remove("managedFields");
    object
}

/// What the handler heard: every object it was given, by event.
#[derive(Default)]
struct Heard {
    objects: Vec<(&'static str, Arc<DynamicObject>)>,
    tombstones: Vec<String>,
}

impl Heard {
    fn count(&self, event: &str) -> usize {
        self.objects.iter().filter(|(e, _)| *e == event).count()
    }
}

async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The cache holds exactly the server's configmaps, each without its managed fields.
fn assert_cache_is_the_server_less_managed_fields(
    sim: &SimServer,
    informer: &shared_informer::SharedIndexInformer<DynamicObject>,
) {
    let server = sim.list("configmaps", Some("default")).unwrap();
    assert_eq!(informer.indexer().len(), server.len());
    for object in server {
        assert!(object["metadata"]["managedFields"].is_array(), "{object}");
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        let cached = informer
            .indexer()
            .get_by_key(&format!("default/{name}"))
            .expect("cached");
        let mut cached = serde_json::to_value(&*cached).unwrap();
        // The server's stored object has its type meta; a list's items leave it to the list.
        for (field, value) in [("apiVersion", "v1"), ("kind", "ConfigMap")] {
            cached[field] = json!(value);
        }
        assert_eq!(cached, without_managed_fields(object));
    }
}

async fn dropped_everywhere(gate: bool) {
    let sim = SimServer::builder()
        .managed_fields_opt_out(gate)
        .start()
        .await
        .unwrap();
    for i in 0..20 {
        sim.create(
            "configmaps",
            Some("default"),
            configmap(&format!("c{i}"), "v"),
        )
        .unwrap();
    }
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        // Resyncs hand the cached objects to the handler again.
        .default_resync(Duration::from_millis(200))
        .reflector_options(ReflectorOptions {
            page_size: 7,
            ..ReflectorOptions::default()
        })
        .drop_managed_fields();
    let informer = factory.dynamic(configmaps()).unwrap();
    let heard = Arc::new(Mutex::new(Heard::default()));
    let (add, update, delete) = (heard.clone(), heard.clone(), heard.clone());
    informer
        .add_event_handler(
            EventHandlerFns::new()
                .on_add(move |o: &Arc<DynamicObject>, _| {
                    add.lock().objects.push(("add", o.clone()))
                })
                .on_update(move |old: &Arc<DynamicObject>, new: &Arc<DynamicObject>| {
                    let mut heard = update.lock();
                    let event = if old.resource_version() == new.resource_version() {
                        "resync"
                    } else {
                        "update"
                    };
                    heard.objects.push((event, old.clone()));
                    heard.objects.push((event, new.clone()));
                })
                .on_delete(move |o: &ObjectOrTombstone<DynamicObject>| {
                    let mut heard = delete.lock();
                    match o {
                        ObjectOrTombstone::Object(o) => heard.objects.push(("delete", o.clone())),
                        ObjectOrTombstone::Tombstone(t) => {
                            heard.tombstones.push(t.key.to_string());
                            let last = t.obj.clone().expect("a tombstone of a cached object");
                            heard.objects.push(("tombstone", last));
                        }
                    }
                }),
        )
        .unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    assert_cache_is_the_server_less_managed_fields(&sim, &informer);

    // An update and a delete through the watch.
    sim.update("configmaps", Some("default"), configmap("c1", "w"))
        .unwrap();
    sim.delete("configmaps", Some("default"), "c2").unwrap();
    eventually("the update, the delete and a resync", || {
        let heard = heard.lock();
        heard.count("update") == 2 && heard.count("delete") == 1 && heard.count("resync") > 0
    })
    .await;

    // A deletion the watch misses: the relist after a compaction infers it, as a tombstone.
    eventually("the watch to open", || sim.counters().active_watches == 1).await;
    sim.faults().stall();
    sim.delete("configmaps", Some("default"), "c3").unwrap();
    sim.create("configmaps", Some("default"), configmap("c20", "v"))
        .unwrap();
    sim.faults().compact();
    sim.faults().reset_mid_chunk();
    sim.faults().unstall();
    eventually("the tombstone of c3", || {
        heard.lock().tombstones == ["default/c3"]
    })
    .await;
    eventually("the relisted cache", || informer.indexer().len() == 19).await;
    assert_cache_is_the_server_less_managed_fields(&sim, &informer);

    cancel.cancel();
    factory.shutdown().await;
    let heard = heard.lock();
    assert_eq!(heard.count("add"), 21, "20 listed, 1 created");
    for (event, object) in &heard.objects {
        assert_eq!(object.metadata.managed_fields, None, "{event}: {object:?}");
        assert_eq!(
            object.labels().unwrap()["app"],
            "x",
            "{event}: the rest stays"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_and_the_cache_see_no_managed_fields_when_the_server_drops_them() {
    dropped_everywhere(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_and_the_cache_see_no_managed_fields_when_the_server_sends_them() {
    dropped_everywhere(false).await;
}

/// The bytes of a synced list of 50 configmaps, and the cached objects' managed fields.
async fn synced_bytes(gate: bool, drop: bool) -> (u64, usize) {
    let sim = SimServer::builder()
        .managed_fields_opt_out(gate)
        .start()
        .await
        .unwrap();
    for i in 0..50 {
        sim.create(
            "configmaps",
            Some("default"),
            configmap(&format!("c{i}"), "v"),
        )
        .unwrap();
    }
    let mut factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap());
    if drop {
        factory = factory.drop_managed_fields();
    }
    let informer = factory.dynamic(configmaps()).unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let with_managed_fields = informer
        .indexer()
        .list()
        .iter()
        .filter(|o| o.metadata.managed_fields.is_some())
        .count();
    let bytes = informer.stats().reflector.bytes;
    cancel.cancel();
    factory.shutdown().await;
    (bytes, with_managed_fields)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_server_with_the_gate_sends_fewer_bytes_and_only_a_client_that_asks_gets_them() {
    let (asked_of_gated, kept) = synced_bytes(true, true).await;
    assert_eq!(kept, 0);
    let (asked_of_old, kept) = synced_bytes(false, true).await;
    assert_eq!(kept, 0, "the client drops what an old server sends");
    let (not_asked, kept) = synced_bytes(true, false).await;
    assert_eq!(kept, 50, "a client that does not ask keeps them");
    assert!(
        asked_of_gated < asked_of_old,
        "{asked_of_gated} bytes from a server dropping them, {asked_of_old} from one that does not"
    );
    assert_eq!(
        asked_of_old, not_asked,
        "an old server ignores the parameter"
    );
}

/// Whether each of the configmaps a protobuf `CompactObject` informer caches still holds its
/// managed fields (the manager's name among its message's bytes), and the bytes the informer
/// received, the server's gate `gate`.
async fn protobuf_compact(gate: bool) -> (Vec<bool>, u64) {
    let sim = SimServer::builder()
        .managed_fields_opt_out(gate)
        .start()
        .await
        .unwrap();
    for i in 0..5 {
        sim.create(
            "configmaps",
            Some("default"),
            configmap(&format!("c{i}"), "v"),
        )
        .unwrap();
    }
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .encoding(Encoding::Protobuf)
        .drop_managed_fields();
    let informer = factory.informer::<CompactObject>(configmaps()).unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let kept = informer
        .indexer()
        .list()
        .iter()
        .map(|o| {
            assert_eq!(o.encoding(), RawEncoding::Protobuf);
            assert_eq!(o.label("app"), Some("x"));
            assert_eq!(o.metadata().managed_fields, None);
            o.raw().windows(MANAGER.len()).any(|w| w == MANAGER)
        })
        .collect();
    let bytes = informer.stats().reflector.bytes;
    cancel.cancel();
    factory.shutdown().await;
    (kept, bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protobuf_cache_holds_no_managed_fields_whether_the_server_or_the_client_drops_them() {
    let (kept, dropped_by_server) = protobuf_compact(true).await;
    assert_eq!(kept, [false; 5]);
    // Sent by a server without the gate, they are cut out of each message by the client.
    let (kept, sent) = protobuf_compact(false).await;
    assert_eq!(kept, [false; 5]);
    assert!(
        dropped_by_server < sent,
        "{dropped_by_server} bytes from a server dropping them, {sent} from one sending them"
    );
}
