//! Read your own writes against the simulated API server: the informer's watch is held back
//! (the simulator stalls every watch stream) right after the controller wrote an object. The
//! cache then still shows the object as it was before the write, so a reconcile that trusts it
//! would act on a state it has already replaced; the consistency store tells it to wait until
//! the cache has applied the write.

use std::time::Duration;

use controller::consistency::{ConsistencyStore, Readiness};
use reflector::store_index::{DynamicObject, Object};
use reflector::{Api, Client, ClusterConfig, Patch, PatchOptions, Resource};
use serde_json::json;
use shared_informer::SharedInformerFactory;
use sim_apiserver::SimServer;
use workqueue::shared_informer::{self, reflector};

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

fn count(object: &DynamicObject) -> &str {
    object.data["data"]["count"].as_str().unwrap_or("")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconcile_waits_for_the_cache_to_show_its_own_write() {
    let sim = SimServer::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "w"}, "data": {"count": "0"}}),
    )
    .unwrap();
    let config = ClusterConfig::new(&sim.url()).unwrap();
    let api: Api<DynamicObject> =
        Api::namespaced_with(Client::new(&config).unwrap(), configmaps(), "default");
    let factory = SharedInformerFactory::new(config);
    let informer = factory.informer::<DynamicObject>(configmaps()).unwrap();
    let cancel = controller::CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let store = ConsistencyStore::new();
    let ready = |store: &ConsistencyStore| {
        let cached = informer.indexer().get_by_key("default/w").unwrap();
        store.ensure_ready(
            "default/w",
            informer.last_store_sync_resource_version().as_str(),
            cached.resource_version(),
        )
    };
    assert_eq!(ready(&store), Readiness::Ready, "nothing written yet");

    // The watch is held back; the controller's first reconcile writes count 1.
    sim.faults().stall();
    let seen = informer.indexer().get_by_key("default/w").unwrap();
    let next = count(&seen).parse::<u32>().unwrap() + 1;
    let written = api
        .patch(
            "w",
            &PatchOptions::default(),
            &Patch::Merge(
                json!({"metadata": {"resourceVersion": seen.resource_version()},
                                 "data": {"count": next.to_string()}}),
            ),
        )
        .await
        .unwrap();
    store.record(&written);

    // The next reconcile of the key: the cache still shows count 0, the state before our own
    // write. Acting on it would compute 1 again from a state that is gone.
    let cached = informer.indexer().get_by_key("default/w").unwrap();
    assert_eq!(count(&cached), "0", "the cache is stale");
    assert_eq!(count(&written), "1");
    assert!(
        matches!(ready(&store), Readiness::Stale { .. }),
        "with the store, the reconcile requeues instead"
    );
    assert_eq!(store.stale_sync_skips(), 1);

    // The watch is released: once the cache has applied the write, the key is ready and the
    // cache shows what was written.
    sim.faults().unstall();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while ready(&store) != Readiness::Ready {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never caught up"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let cached = informer.indexer().get_by_key("default/w").unwrap();
    assert_eq!(count(&cached), "1");
    assert!(store.is_empty(), "the record is cleared once seen");
    cancel.cancel();
    factory.shutdown().await;
}
