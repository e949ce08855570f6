//! An informer-driven controller against the simulated API server: every changed key is
//! reconciled against its final state, injected failures are retried with backoff, and the runner
//! stops cleanly; on every informer queue.

// The queues every informer test of the workspace runs on, shared with shared-informer's tests.
#[path = "../../shared-informer/tests/common/queues.rs"]
#[macro_use]
mod queues;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use controller::{Action, Controller};
use parking_lot::Mutex;
use serde_json::json;
use sim_apiserver::{ChurnConfig, SimServer};
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::{DynamicObject, Object};
use workqueue::shared_informer::reflector::{ClusterConfig, Resource};
use workqueue::shared_informer::{InformerQueue, SharedInformerFactory};
use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};

on_every_queue!(
    controller_reconciles_every_changed_key_and_retries_failures,
    flavor = "multi_thread",
    worker_threads = 2
);
async fn controller_reconciles_every_changed_key_and_retries_failures(
    informer_queue: InformerQueue,
) {
    let sim = SimServer::start().await.unwrap();
    for i in 0..30 {
        sim.create(
            "pods",
            Some("ns"),
            json!({"metadata": {"name": format!("seed-{i}")}}),
        )
        .unwrap();
    }
    let factory =
        SharedInformerFactory::new(ClusterConfig::new(&sim.url()).unwrap()).queue(informer_queue);
    let informer = factory
        .informer::<DynamicObject>(Resource::namespaced("", "v1", "pods"))
        .unwrap();
    assert_eq!(informer.queue(), informer_queue);
    let queue: RateLimitingQueue<String> =
        RateLimitingQueue::new(default_controller_rate_limiter());
    informer
        .add_event_handler(KeyEnqueuer::new(queue.clone()))
        .unwrap();

    // What each key's last successful reconcile saw: its resource version, or None when absent.
    let last_seen: Arc<Mutex<HashMap<String, Option<String>>>> = Arc::default();
    let failed_once: Arc<Mutex<HashSet<String>>> = Arc::default();
    let failures = Arc::new(Mutex::new(0usize));
    let cancel = CancellationToken::new();
    factory.start(&cancel);
    let runner = {
        let indexer = informer.indexer().clone();
        let (last_seen, failed_once, failures) = (
            Arc::clone(&last_seen),
            Arc::clone(&failed_once),
            Arc::clone(&failures),
        );
        let cancel = cancel.clone();
        let queue = queue.clone();
        tokio::spawn(async move {
            Controller::new(queue)
                .workers(3)
                .run(cancel, move |key: String| {
                    let seen = indexer
                        .get_by_key(&key)
                        .map(|o| o.resource_version().unwrap_or("").to_string());
                    // Inject one failure per key: the first attempt errs and must be retried.
                    let fail = failed_once.lock().insert(key.clone());
                    let (last_seen, failures) = (Arc::clone(&last_seen), Arc::clone(&failures));
                    async move {
                        if fail {
                            *failures.lock() += 1;
                            return Err(format!("injected failure for {key}"));
                        }
                        last_seen.lock().insert(key, seen);
                        Ok(Action::Done)
                    }
                })
                .await
        })
    };
    assert!(informer.wait_for_sync().await);
    let churn = sim.churn(ChurnConfig {
        resource: "pods".into(),
        namespace: "ns".into(),
        keys: 40,
        rate_per_sec: 1_000.0,
        max_ops: Some(400),
        duration: None,
        pad_bytes: 100,
    });
    churn.finished().await;

    let server = || -> BTreeMap<String, String> {
        sim.list("pods", None)
            .unwrap()
            .iter()
            .map(|o| {
                let m = &o["metadata"];
                (
                    format!("ns/{}", m["name"].as_str().unwrap()),
                    m["resourceVersion"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    // Quiescence: every key the server has was last reconciled at its current version, and every
    // key that ever existed but is gone was last reconciled as absent.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let server = server();
        let seen = last_seen.lock().clone();
        let present_ok = server
            .iter()
            .all(|(k, rv)| seen.get(k) == Some(&Some(rv.clone())));
        let absent_ok = seen
            .iter()
            .filter(|(k, _)| !server.contains_key(*k))
            .all(|(_, v)| v.is_none());
        if present_ok && absent_ok && queue.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "controller did not converge"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let distinct = failed_once.lock().len();
    assert_eq!(
        *failures.lock(),
        distinct,
        "exactly one injected failure per key, each retried"
    );
    assert!(distinct >= 30);
    cancel.cancel();
    tokio::time::timeout(Duration::from_secs(5), runner)
        .await
        .expect("runner stops")
        .unwrap();
    factory.shutdown().await;
}
