//! End-to-end informer figures, each beside a same-run raw `serde_json` baseline of the same bytes:
//! - initial sync of 10k and 100k realistic Pods (≈3.8 KB each) with two indexes, from start to
//!   `has_synced`, against fetching the same list once and decoding it;
//! - watch throughput: 50k updates of a synced 10k-pod informer, delivered to a counting handler,
//!   against decoding the same objects. The events are produced first, behind a stalled watch
//!   stream, then released at once, so the figure measures the client side (HTTP, framing,
//!   decode, FIFO, indexer, dispatch) and the server's writing, not the server's production rate.
//!
//! Run with `cargo bench -p shared-informer --bench informer`. The simulated server runs in the same
//! process on the same two cores, so end-to-end figures include its own work of sending.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use shared_informer::reflector::store_index::{CompactObject, DynamicObject, Object};
use shared_informer::reflector::{Client, ClusterConfig, Decode, Resource};
use shared_informer::{EventHandlerFns, SharedInformerFactory};
use sim_apiserver::fixtures::realistic_pod_json;
use sim_apiserver::SimServer;
use tokio_util::sync::CancellationToken;

#[derive(serde::Deserialize)]
struct List<K> {
    items: Vec<K>,
}

fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

async fn seeded(n: usize) -> SimServer {
    let sim = SimServer::builder()
        .max_log_events(1_000_000)
        .start()
        .await
        .expect("sim");
    for i in 0..n {
        let mut pod: serde_json::Value =
            serde_json::from_str(&realistic_pod_json(i)).expect("fixture");
        let meta = pod["metadata"].as_object_mut().expect("metadata");
        meta.remove("resourceVersion");
        meta.remove("uid");
        let ns = meta["namespace"].as_str().expect("namespace").to_string();
        sim.create("pods", Some(&ns), pod).expect("create");
    }
    sim
}

fn decode_time<K: DeserializeOwned>(bytes: &[u8]) -> (Duration, usize) {
    let start = Instant::now();
    let list: List<K> = serde_json::from_slice(bytes).expect("decode");
    (start.elapsed(), list.items.len())
}

async fn sync_time<K: Object + Decode>(config: &ClusterConfig) -> (Duration, usize) {
    let factory = SharedInformerFactory::new(config.clone());
    let informer = factory.informer::<K>(pods()).expect("informer");
    informer
        .add_indexers(
            shared_informer::reflector::store_index::Indexers::new().with("app", |o: &K| {
                Ok(o.label("app").map(str::to_string).into_iter().collect())
            }),
        )
        .expect("indexers");
    let cancel = CancellationToken::new();
    let start = Instant::now();
    factory.start(&cancel);
    let report = factory.wait_for_cache_sync(Duration::from_secs(600)).await;
    let took = start.elapsed();
    assert!(report.values().all(|s| *s), "informer did not sync");
    let len = informer.indexer().len();
    cancel.cancel();
    factory.shutdown().await;
    (took, len)
}

async fn initial_sync(n: usize) {
    let sim = seeded(n).await;
    let config = ClusterConfig::new(&sim.url()).expect("config");
    let client = Client::new(&config).expect("client");
    let start = Instant::now();
    let bytes = client
        .get_bytes("/api/v1/pods?resourceVersion=0")
        .await
        .expect("list");
    let fetch = start.elapsed();
    let mb = bytes.len() as f64 / 1e6;
    for (label, decode, sync) in [
        (
            "CompactObject",
            decode_time::<CompactObject>(&bytes),
            sync_time::<CompactObject>(&config).await,
        ),
        (
            "DynamicObject",
            decode_time::<DynamicObject>(&bytes),
            sync_time::<DynamicObject>(&config).await,
        ),
    ] {
        assert_eq!(decode.1, n);
        assert_eq!(sync.1, n);
        let baseline = fetch + decode.0;
        println!(
            "initial sync {n:>6} pods ({mb:.0} MB) {label}: informer {:>8.1} ms | baseline fetch {:.1} ms + decode {:.1} ms = {:.1} ms | ratio {:.2}",
            sync.0.as_secs_f64() * 1e3,
            fetch.as_secs_f64() * 1e3,
            decode.0.as_secs_f64() * 1e3,
            baseline.as_secs_f64() * 1e3,
            baseline.as_secs_f64() / sync.0.as_secs_f64(),
        );
    }
    sim.shutdown();
}

async fn watch_throughput(cached: usize, events: usize) {
    let sim = seeded(cached).await;
    let config = ClusterConfig::new(&sim.url()).expect("config");
    let factory = SharedInformerFactory::new(config);
    let informer = factory.informer::<CompactObject>(pods()).expect("informer");
    let updates = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&updates);
    informer
        .add_event_handler(
            EventHandlerFns::new().on_update(move |_: &Arc<CompactObject>, _| {
                counter.fetch_add(1, Ordering::Relaxed);
            }),
        )
        .expect("handler");
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    factory.wait_for_cache_sync(Duration::from_secs(120)).await;

    let names: Vec<(String, String)> = (0..cached)
        .map(|i| {
            let v: serde_json::Value =
                serde_json::from_str(&realistic_pod_json(i)).expect("fixture");
            (
                v["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    sim.faults().stall();
    let produce = Instant::now();
    let producer = {
        let sim = sim.clone();
        tokio::task::spawn_blocking(move || {
            for e in 0..events {
                let (ns, name) = &names[e % names.len()];
                let patch =
                    serde_json::json!({"metadata": {"labels": {"generation": e.to_string()}}});
                sim.patch("pods", Some(ns), name, &patch).expect("patch");
            }
        })
    };
    producer.await.expect("producer");
    let produced = produce.elapsed();
    let start = Instant::now();
    sim.faults().unstall();
    while updates.load(Ordering::Relaxed) < events as u64 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let took = start.elapsed();
    cancel.cancel();
    factory.shutdown().await;

    // Baseline: decode the same number of objects of the same size, one line each.
    let lines: Vec<String> = (0..events)
        .map(|e| realistic_pod_json(e % cached))
        .collect();
    let bytes: usize = lines.iter().map(String::len).sum();
    let t = Instant::now();
    for line in &lines {
        let obj: CompactObject = serde_json::from_slice(line.as_bytes()).expect("decode");
        std::hint::black_box(obj);
    }
    let decode = t.elapsed();
    let rate = events as f64 / took.as_secs_f64();
    let base = events as f64 / decode.as_secs_f64();
    println!(
        "watch {events} updates over {cached} cached pods (CompactObject), released at once: {rate:>8.0} events/s ({:.1} MB/s; producing them took the server {:.2} s) | baseline decode {base:>8.0} events/s | ratio {:.2}",
        bytes as f64 / 1e6 / took.as_secs_f64(),
        produced.as_secs_f64(),
        rate / base,
    );
    sim.shutdown();
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    // `-- watch` runs only the watch figure (for profiling).
    let only_watch = std::env::args().any(|a| a == "watch");
    rt.block_on(async {
        if !only_watch {
            initial_sync(10_000).await;
            initial_sync(100_000).await;
        }
        watch_throughput(10_000, 50_000).await;
    });
}
