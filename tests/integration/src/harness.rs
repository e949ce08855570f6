//! Shared scenario plumbing: client configuration for a simulator, seeding, churn, fast reflector
//! backoff, waiting for sync and periodic progress lines.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sim_apiserver::{ChurnConfig, SimServer};
use tokio::task::JoinHandle;
use workqueue::shared_informer::reflector::store_index::Object;
use workqueue::shared_informer::reflector::{
    BackoffConfig, ClusterConfig, Credentials, ListerWatcher, ReflectorOptions, Resource,
};
use workqueue::shared_informer::{InformerQueue, SharedIndexInformer, SharedInformerFactory};

use crate::check::{eventually, Failure};

/// The core/v1 pods resource.
pub fn pods() -> Resource {
    Resource::namespaced("", "v1", "pods")
}

/// The core/v1 configmaps resource.
pub fn configmaps() -> Resource {
    Resource::namespaced("", "v1", "configmaps")
}

/// The queue of the scenario running now (scenarios run one at a time; `main` sets it before
/// each): 0 the in-order queue, 1 the DeltaFifo.
static QUEUE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);

/// Makes the scenarios that start from now on build their informers on `queue`.
pub fn use_queue(queue: InformerQueue) {
    let n = match queue {
        InformerQueue::InOrder(_) => 0,
        InformerQueue::DeltaFifo => 1,
    };
    QUEUE.store(n, std::sync::atomic::Ordering::SeqCst);
}

/// The queue the running scenario's informers use.
pub fn queue() -> InformerQueue {
    match QUEUE.load(std::sync::atomic::Ordering::SeqCst) {
        0 => InformerQueue::default(),
        _ => InformerQueue::DeltaFifo,
    }
}

/// A factory for `config` whose informers run on the scenario's queue.
pub fn factory(config: ClusterConfig) -> SharedInformerFactory {
    SharedInformerFactory::new(config).queue(queue())
}

/// A client configuration for `sim`: its URL, its CA when serving TLS, its token when it has one.
pub fn config_for(sim: &SimServer) -> Result<ClusterConfig, Failure> {
    let mut config = ClusterConfig::new(&sim.url())?;
    if let Some(ca) = sim.ca_pem() {
        config.certificate_authority = Some(ca.as_bytes().to_vec());
    }
    if let Some(token) = sim.token() {
        config.credentials = Credentials::Token(token.into());
    }
    Ok(config)
}

/// Reflector options with a short backoff, so scenarios that inject many faults reconnect within
/// a second instead of backing off towards client-go's 30 s cap.
pub fn fast_backoff(watch_list: bool) -> ReflectorOptions {
    ReflectorOptions {
        backoff: BackoffConfig {
            initial: Duration::from_millis(50),
            cap: Duration::from_millis(800),
            jitter: 0.5,
            ..BackoffConfig::default()
        },
        watch_list,
        ..ReflectorOptions::default()
    }
}

/// Creates `n` objects `seed-{i}` of `resource` spread over `namespaces` namespaces
/// (`{prefix}-{i % namespaces}`), each with a `pad`-byte annotation.
pub fn seed(
    sim: &SimServer,
    resource: &str,
    prefix: &str,
    namespaces: usize,
    n: usize,
    pad: usize,
) -> Result<(), Failure> {
    let padding = "p".repeat(pad);
    for i in 0..n {
        let ns = format!("{prefix}-{}", i % namespaces.max(1));
        let obj = json!({
            "metadata": {"name": format!("seed-{i}"), "labels": {"app": "seed"}, "annotations": {"pad": padding}},
            "spec": {"nodeName": format!("node-{}", i % 7)},
            "data": {"i": i.to_string()},
        });
        sim.create(resource, Some(&ns), obj)
            .map_err(|e| Failure(format!("seeding {resource} {ns}/seed-{i}: {e}")))?;
    }
    Ok(())
}

/// A churn of `rate` operations/s for `seconds` over `keys` names in `namespace`.
pub fn churn(
    sim: &SimServer,
    resource: &str,
    namespace: &str,
    keys: usize,
    rate: f64,
    seconds: f64,
    pad: usize,
) -> sim_apiserver::ChurnHandle {
    sim.churn(ChurnConfig {
        resource: resource.into(),
        namespace: namespace.into(),
        keys,
        rate_per_sec: rate,
        max_ops: None,
        duration: Some(Duration::from_secs_f64(seconds)),
        pad_bytes: pad,
    })
}

/// Waits for every churn to end by itself; returns the total operations.
pub async fn finish_all(churns: Vec<sim_apiserver::ChurnHandle>) -> u64 {
    let mut ops = 0;
    for c in churns {
        ops += c.finished().await;
    }
    ops
}

/// Waits until `informer` has synced.
pub async fn synced<K: Object, L: ListerWatcher<K>>(
    informer: &SharedIndexInformer<K, L>,
    timeout: Duration,
) -> Result<(), Failure> {
    eventually("the informer to sync", timeout, || {
        if informer.has_synced() {
            Ok(())
        } else {
            Err(format!(
                "{} objects cached so far",
                informer.indexer().len()
            ))
        }
    })
    .await
}

/// Prints a progress line every `every` for a long scenario until dropped: elapsed time, events
/// per second (from a monotonically growing count) and whatever `status` adds.
pub struct Progress {
    task: JoinHandle<()>,
}

impl Progress {
    /// Starts printing `  [name] t=…s  events/s=…  {status}` lines; `events` returns a
    /// cumulative count.
    pub fn start(
        name: &'static str,
        every: Duration,
        events: impl Fn() -> u64 + Send + Sync + 'static,
        status: impl Fn() -> String + Send + Sync + 'static,
    ) -> Self {
        let events = Arc::new(events);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut last = events();
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let now = events();
                println!(
                    "      [{name}] t={:>4.0}s  events/s={:>6.0}  {}",
                    started.elapsed().as_secs_f64(),
                    (now.saturating_sub(last)) as f64 / every.as_secs_f64(),
                    status()
                );
                last = now;
            }
        });
        Progress { task }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}
