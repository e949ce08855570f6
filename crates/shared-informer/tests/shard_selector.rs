//! Informers of one shard against the simulated API server, with and without its stand-in for
//! the `ShardedListAndWatch` gate: either way the cache holds exactly the shard's objects (judged
//! by the simulator's own implementation of the server's hash, written apart from the client's),
//! through paginated lists and through watch-list streaming, under creates and deletes; only the
//! counters tell whether the server or the client did the filtering.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};
use shared_informer::reflector::store_index::{
    CompactObject, DynamicObject, Object, ShardField, ShardRange, ShardSelector,
};
use shared_informer::reflector::{ClusterConfig, ReflectorOptions, Resource};
use shared_informer::SharedInformerFactory;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;

fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

/// The keys the simulator's reading of `selector` picks among its configmaps.
fn expected(sim: &SimServer, selector: &ShardSelector) -> BTreeSet<String> {
    let judge = sim_apiserver::shard_selector::ShardSelector::parse(&selector.to_string())
        .expect("the simulator reads the client's rendering");
    sim.list("configmaps", None)
        .unwrap()
        .iter()
        .filter(|o| judge.matches(o))
        .map(key_of)
        .collect()
}

fn key_of(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap(),
        o["metadata"]["name"].as_str().unwrap()
    )
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

async fn one_shard(gate: bool, watch_list: bool) {
    let sim = SimServer::builder()
        .sharded_list_and_watch(gate)
        .start()
        .await
        .unwrap();
    for i in 0..150 {
        let ns = if i % 2 == 0 { "a" } else { "b" };
        sim.create(
            "configmaps",
            Some(ns),
            json!({"metadata": {"name": format!("cm{i}")}}),
        )
        .unwrap();
    }
    // The second of three shards: neither end of the space.
    let selector =
        ShardSelector::new(ShardField::Uid, [ShardRange::equal_part(1, 3).unwrap()]).unwrap();
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .shard_selector(selector.clone())
        .reflector_options(ReflectorOptions {
            watch_list,
            page_size: 20,
            ..ReflectorOptions::default()
        });
    let informer = factory.informer::<DynamicObject>(configmaps()).unwrap();
    // Asks for protobuf: the echo is read from the protobuf list's metadata.
    let compact = factory.informer::<CompactObject>(configmaps()).unwrap();
    let cache = || -> BTreeSet<String> {
        informer
            .indexer()
            .list()
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap(), o.name()))
            .collect()
    };
    let compact_cache = || -> BTreeSet<String> {
        compact
            .indexer()
            .list()
            .iter()
            .map(|o| format!("{}/{}", o.namespace().unwrap(), o.name()))
            .collect()
    };
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let want = expected(&sim, &selector);
    assert!(
        (30..=70).contains(&want.len()),
        "about a third of 150: {}",
        want.len()
    );
    assert_eq!(cache(), want, "synced: exactly the shard");
    assert_eq!(
        compact_cache(),
        want,
        "synced from protobuf: exactly the shard"
    );

    // Live: new objects in and out of the shard, and deletions of both.
    for i in 150..250 {
        sim.create(
            "configmaps",
            Some("a"),
            json!({"metadata": {"name": format!("cm{i}")}}),
        )
        .unwrap();
    }
    for i in (0..150).step_by(3) {
        let ns = if i % 2 == 0 { "a" } else { "b" };
        sim.delete("configmaps", Some(ns), &format!("cm{i}"))
            .unwrap();
    }
    let want = expected(&sim, &selector);
    eventually("the caches to follow the shard", || {
        cache() == want && compact_cache() == want
    })
    .await;

    for stats in [informer.stats().reflector, compact.stats().reflector] {
        if gate {
            assert_eq!(
                (stats.shard_filtered, stats.shard_unapplied),
                (0, 0),
                "the server sharded everything: {stats:?}"
            );
        } else {
            assert!(
                stats.shard_filtered > 100,
                "the client dropped what the server sent outside the shard: {stats:?}"
            );
            // Only list pages can say the selector was not applied; a watch-list has none.
            assert_eq!(stats.shard_unapplied > 0, !watch_list, "{stats:?}");
        }
    }
    cancel.cancel();
    factory.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharding_server_sends_only_the_shard_in_pages_and_watch() {
    one_shard(true, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharding_server_streams_only_the_shard_in_a_watch_list() {
    one_shard(true, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_the_client_keeps_only_the_shard_of_pages_and_watch() {
    one_shard(false, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_gate_the_client_keeps_only_the_shard_of_a_watch_list() {
    one_shard(false, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_shard_holds_whole_namespaces() {
    let sim = SimServer::start().await.unwrap();
    for ns in ["team-a", "team-b", "team-c", "team-d"] {
        for i in 0..5 {
            sim.create(
                "configmaps",
                Some(ns),
                json!({"metadata": {"name": format!("cm{i}")}}),
            )
            .unwrap();
        }
    }
    // FNV-1a 64 of team-a..d, computed apart: 0xde90a371…, 0xde90a271…, 0xde90a171…,
    // 0xde90a871…: this range holds team-b and team-c.
    let range = ShardRange::new(0xde90a10000000000, 0xde90a30000000000).unwrap();
    let selector = ShardSelector::new(ShardField::Namespace, [range]).unwrap();
    let factory = SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap())
        .shard_selector(selector.clone());
    let informer = factory.metadata_informer(configmaps()).unwrap();
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    assert!(factory
        .wait_for_cache_sync(Duration::from_secs(30))
        .await
        .all_synced());
    let namespaces: BTreeSet<String> = informer
        .indexer()
        .list()
        .iter()
        .map(|o| o.namespace().unwrap().to_string())
        .collect();
    let want: BTreeSet<String> = ["team-b", "team-c"].map(str::to_string).into();
    assert_eq!(namespaces, want);
    assert_eq!(informer.indexer().len(), 10);
    // Sent without the echo (as kube-apiserver sends metadata-only lists), but sharded.
    let stats = informer.stats().reflector;
    assert_eq!(
        (stats.shard_filtered, stats.shard_unapplied),
        (0, 0),
        "{stats:?}"
    );
    cancel.cancel();
    factory.shutdown().await;
}
