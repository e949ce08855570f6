//! # controller
//!
//! What a Kubernetes controller needs beside its work queue, one layer above `workqueue`: the
//! [`Controller`] runner that reconciles keys from a rate-limited queue, leader election on
//! Leases ([`leader_election`]) so that one replica of several acts, and an event recorder
//! ([`events`]) that never blocks a reconcile. None of it is a queue: a user who wants only
//! client-go's `util/workqueue` depends on `workqueue` and never reads this crate.
//!
//! ```text
//!   informer ──KeyEnqueuer──► RateLimitingQueue ──► Controller: N workers ──► reconcile(key)
//!                              (workqueue)              │  Action: Done, Retry, RequeueAfter
//!   LeaderElector ── leader token, LeaseGuard ──────────┘  (run while leading; writes fenced)
//!   EventRecorder ── bounded queue ──► EventBroadcaster ──► sinks, watchers, the log
//!   child informer ──OwnerEnqueuer──► the owner's key (owners: client-go's GetControllerOf)
//!   Ring (own shard Lease, live members) ── owner_of(key, members) ── FencedWriter (sharding)
//!   Sharder (elected): labels, drains, children follow ── ShardedController: gate, drain ack
//! ```
//!
//! Invariants the runner keeps (see [`runner`]): a key is with at most one worker at a time (the
//! queue's rule), every key taken is marked done whatever the reconcile did (an error or a panic
//! is retried with backoff and never takes a worker down), and cancellation lets the reconciles
//! in flight finish. Leader election's and the recorder's rules are written in their modules and
//! in docs/semantics.md (rules L and EV). The [`owners`] bridge turns a child's events into its
//! controlling owner's key (rules OW); [`sharding`] holds replicas that split the work: membership, the
//! elected sharder and the hand-over, with writes fenced at the server (rules SH, design in
//! docs/sharding.md). With the `metrics` feature, `metrics` serves `/metrics`, `/healthz` and
//! `/readyz` and the runner records controller-runtime's reconcile metrics (rules MX).
//!
//! ```
//! use controller::prelude::*;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! let token = CancellationToken::new();
//! let stop = token.clone();
//! Controller::new(queue)
//!     .run(token, move |key: String| {
//!         let stop = stop.clone();
//!         async move {
//!             assert_eq!(key, "default/web");
//!             stop.cancel(); // one key is enough here
//!             Ok::<_, std::convert::Infallible>(Action::Done)
//!         }
//!     })
//!     .await;
//! # }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

/// The layers below, re-exported so that depending on this crate is enough.
pub use workqueue;

pub mod builder;
pub mod conditions;
pub mod consistency;
pub mod events;
pub mod finalizer;
pub mod leader_election;
#[cfg(test)]
mod log_capture;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod owners;
pub mod runner;
pub mod sharding;

pub use builder::{BuilderError, Context, ControllerBuilder, Predicate};
pub use conditions::{set_condition, Condition, ConditionStatus};
pub use consistency::{ConsistencyStore, Readiness};
pub use events::{
    EventBroadcaster, EventRecorder, EventSink, EventType, EventWatcher, ObjectReference,
};
pub use finalizer::{finalizer, FinalizerError, FinalizerEvent};
pub use leader_election::{
    LeaderCallbacks, LeaderElectionConfig, LeaderElector, LeaseGuard, LeaseLock, MemoryLock,
};
pub use runner::{Action, Controller};

/// What a controller author needs, in one import (every layer below included, and
/// `CancellationToken`): `use controller::prelude::*;`.
pub mod prelude {
    pub use crate::builder::predicate::{annotations_changed, generation_changed, labels_changed};
    pub use crate::builder::{BuilderError, Context, ControllerBuilder, Predicate};
    pub use crate::events::{ApiEventSink, BroadcasterConfig, EventBroadcaster, EventSource};
    pub use crate::leader_election::ApiLeaseLock;
    pub use crate::sharding::{
        ApiRingLeases, FenceError, FencedWriter, RangeShard, RangeWriter, Ring, ShardGate,
        ShardedController, Sharder, SharderConfig,
    };
    pub use crate::workqueue::prelude::*;
    pub use crate::{
        finalizer, set_condition, Action, Condition, ConditionStatus, ConsistencyStore, Controller,
        EventRecorder, EventType, FinalizerError, FinalizerEvent, LeaderElectionConfig,
        LeaderElector, LeaseGuard, ObjectReference, Readiness,
    };
}

/// Re-exported so that users need no direct dependency to cancel a [`Controller`].
pub use tokio_util::sync::CancellationToken;

/// The README's Rust snippets, compiled (and, but for the one that needs a cluster, run) as
/// doctests of this crate, the top layer, so the README cannot drift from the API:
/// `cargo test --doc -p controller`.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The guide `docs/guide.md`, whose Rust snippets (one example per layer, sharded replicas,
/// protobuf, a controller tested on the simulator) are compiled and run as doctests of this crate
/// for the same reason as the README's.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/guide.md")]
pub struct GuideDoctests;
