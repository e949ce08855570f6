//! A churn generator: create/update/delete at a given rate over a given key space.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::sim_server::SimServer;

/// What to churn.
#[derive(Debug, Clone)]
pub struct ChurnConfig {
    /// Resource (`pods`, `configmaps`, or `plural.group`).
    pub resource: String,
    /// Namespace of the objects (ignored for cluster-scoped resources).
    pub namespace: String,
    /// Number of distinct names (`churn-0` … `churn-{keys-1}`).
    pub keys: usize,
    /// Operations per second.
    pub rate_per_sec: f64,
    /// Stop after this many operations.
    pub max_ops: Option<u64>,
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Size of a padding annotation, to make objects realistic (~3.8 KB for a typical pod).
    pub pad_bytes: usize,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        Self {
            resource: "pods".into(),
            namespace: "default".into(),
            keys: 100,
            rate_per_sec: 100.0,
            max_ops: Some(1000),
            duration: None,
            pad_bytes: 0,
        }
    }
}

/// A running churn; stops when dropped.
#[derive(Debug)]
pub struct ChurnHandle {
    stop: watch::Sender<bool>,
    ops: Arc<AtomicU64>,
    task: Option<JoinHandle<()>>,
}

impl ChurnHandle {
    /// Operations performed so far.
    pub fn ops(&self) -> u64 {
        self.ops.load(Ordering::Relaxed)
    }

    /// Stops and waits for the task; returns the operations performed.
    pub async fn stop(mut self) -> u64 {
        self.stop.send_replace(true);
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.ops()
    }

    /// Waits until the churn ends by itself (max_ops or duration).
    pub async fn finished(mut self) -> u64 {
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        self.ops()
    }
}

impl Drop for ChurnHandle {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// A churn object.
pub fn churn_object(i: usize, generation: u64, pad: usize) -> Value {
    json!({
        "metadata": {
            "name": format!("churn-{i}"),
            "labels": {"churn": "true", "bucket": (i % 10).to_string()},
            "annotations": {"sim/pad": "x".repeat(pad), "sim/gen": generation.to_string()},
        },
        "spec": {"containers": [{"name": "c", "image": format!("busybox:{generation}")}]},
        "data": {"gen": generation.to_string()},
    })
}

impl SimServer {
    /// Starts a churn generator.
    pub fn churn(&self, cfg: ChurnConfig) -> ChurnHandle {
        start(self.clone(), cfg)
    }
}

fn start(sim: SimServer, cfg: ChurnConfig) -> ChurnHandle {
    let (stop, mut stop_rx) = watch::channel(false);
    let ops = Arc::new(AtomicU64::new(0));
    let ops2 = ops.clone();
    let task = tokio::spawn(async move {
        let period = Duration::from_secs_f64(1.0 / cfg.rate_per_sec.max(0.001));
        let mut tick = tokio::time::interval(period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
        let deadline = cfg.duration.map(|d| tokio::time::Instant::now() + d);
        let keys = cfg.keys.max(1);
        let mut generation = 0u64;
        loop {
            if cfg
                .max_ops
                .is_some_and(|m| ops2.load(Ordering::Relaxed) >= m)
                || deadline.is_some_and(|d| tokio::time::Instant::now() >= d)
            {
                break;
            }
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop_rx.changed() => break,
            }
            generation += 1;
            let i = rand::random_range(0..keys);
            let name = format!("churn-{i}");
            let ns = Some(cfg.namespace.as_str());
            let exists = sim.get(&cfg.resource, ns, &name).is_ok();
            let r = if !exists {
                sim.create(
                    &cfg.resource,
                    ns,
                    churn_object(i, generation, cfg.pad_bytes),
                )
                .map(|_| ())
            } else if rand::random_range(0..10) < 7 {
                sim.update(
                    &cfg.resource,
                    ns,
                    churn_object(i, generation, cfg.pad_bytes),
                )
                .map(|_| ())
            } else {
                sim.delete(&cfg.resource, ns, &name).map(|_| ())
            };
            if let Err(e) = r {
                tracing::debug!(%e, "churn operation failed");
            }
            ops2.fetch_add(1, Ordering::Relaxed);
        }
    });
    ChurnHandle {
        stop,
        ops,
        task: Some(task),
    }
}
