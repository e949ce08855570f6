//! # workqueue
//!
//! The queues a controller reconciles from, with client-go's `util/workqueue` semantics, and the
//! bridge that fills them from an informer's handlers. The `Controller` runner, leader election
//! and the event recorder live one layer up, in the `controller` crate.
//!
//! Informer handlers only enqueue object *keys*; workers take keys, read the current object from
//! the informer's cache and reconcile. The queue is what makes that safe with many workers.
//!
//! ```text
//!   add(key) ──► WorkQueue ── get ──► worker ── done(key)
//!                  ▲   dirty: needs processing      │ reconcile failed
//!                  │   processing: handed out       ▼
//!   DelayingQueue: heap of (ready time, key) ◄── RateLimitingQueue::add_rate_limited
//!                                                   (RateLimiter::when: backoff, token bucket)
//!   KeyEnqueuer: an informer handler that adds keys; Metrics: depth, adds, latencies, retries.
//!   PriorityQueue: a RateLimitingQueue whose work queue hands out higher priorities first,
//!                  with aging so that none starves (the initial list low, live events high).
//! ```
//!
//! Invariants the queue keeps (written out next to the data in `queue.rs`, checked by a property
//! test and a multi-threaded stress test):
//! - an item is handed to at most one worker at a time;
//! - an item added while it is processed is handed out again once, after `done`;
//! - an item is never queued twice; adding a waiting item changes nothing;
//! - after shutdown nothing new is accepted, but every queued item is still handed out;
//! - in a priority queue, higher priorities go first, first in first out within one, and an item
//!   is overtaken only by items queued within `(q − p)·A` after it (`priority.rs`, PQ1–PQ5).
//!
//! ```
//! use std::time::Duration;
//! use tokio::time::Instant;
//! use workqueue::{default_controller_rate_limiter, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! queue.add("default/web".to_string()); // already waiting: one entry
//! assert_eq!(queue.len(), 1);
//!
//! let key = queue.get().await.unwrap();
//! let failed_at = Instant::now();
//! queue.add_rate_limited(key.clone()); // reconcile failed: back off 5 ms
//! queue.done(&key);
//! assert_eq!(queue.len(), 0); // not queued before its backoff ends
//! assert_eq!(queue.get().await, Some(key));
//! assert!(failed_at.elapsed() >= Duration::from_millis(5));
//! # }
//! ```
//!
//! Everything takes its clock from tokio, so tests run under `tokio::time::pause()` exactly.
//! The `prometheus` feature exports metrics through the `prometheus-client` crate.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// The layers below, re-exported so that depending on this crate is enough.
pub use shared_informer;

pub mod bridge;
pub mod delaying;
pub mod metrics;
pub mod parallelize;
#[cfg(test)]
mod paused_clock;
pub mod priority;
pub mod priority_queue;
#[cfg(feature = "prometheus")]
pub mod prometheus;
pub mod queue;
pub mod rate_limiter;
pub mod rate_limiting;

pub use bridge::{Enqueue, KeyEnqueuer};
pub use delaying::DelayingQueue;
pub use metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, InMemoryMetricsProvider, MetricsProvider,
    MetricsSnapshot, NoopMetricsProvider, PriorityGaugeMetric, SettableGaugeMetric,
};
pub use parallelize::parallelize_until;
pub use priority::{AgingRate, DEFAULT_PRIORITY, LOW_PRIORITY};
pub use priority_queue::{AddOpts, PriorityQueue, PriorityQueueConfig};
#[cfg(feature = "prometheus")]
pub use prometheus::PrometheusMetricsProvider;
pub use queue::{QueueConfig, TouchHook, WorkQueue};
pub use rate_limiter::{
    default_controller_rate_limiter, default_item_based_rate_limiter, BucketRateLimiter,
    ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter, MaxOf, RateLimiter, WithMaxWait,
};
pub use rate_limiting::RateLimitingQueue;

/// The queues and the informer bridge in one import (every layer below included, and
/// `CancellationToken`): `use workqueue::prelude::*;`.
pub mod prelude {
    pub use crate::shared_informer::prelude::*;
    pub use crate::{
        default_controller_rate_limiter, AddOpts, DelayingQueue, KeyEnqueuer, PriorityQueue,
        RateLimiter, RateLimitingQueue, WorkQueue, LOW_PRIORITY,
    };
}

/// Re-exported so that users need no direct dependency to stop what they run.
pub use tokio_util::sync::CancellationToken;
