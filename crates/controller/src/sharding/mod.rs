//! Sharded controllers: replicas that split a resource's objects between them, on Leases and
//! labels. Its parts:
//!
//! ```text
//!   ring:   each replica holds Lease <ring>-<identity> (RING_LABEL=<ring>); members = live holders,
//!           judged on the observer's clock                                   Ring, Membership
//!   assign: owner_of(key, members): rendezvous hashing, stable across builds  owner_of, weight
//!   fence:  writes refused locally unless the shard lease is held and the object's
//!           shard label names us; sent with the seen resourceVersion as precondition
//!                                                                            FencedWriter
//!   sharder: the elected member labels each object with its owner, drains a live owner
//!           before moving its object, relabels a dead one's at once, children follow
//!                                                                            Sharder, plan
//!   handover: a replica acknowledges a drain after its reconcile in flight   ShardGate,
//!                                                                            ShardedController
//!
//!   range mode, no labels and no sharder:
//!   ranges: 64 virtual ranges of the server's shard hash, 64/N per member     RangeTable
//!   claims: each member publishes the ranges it holds; acts on one only when
//!           no other live member claims it; touches what a dead one held      decide
//!   range_watch: the held ranges' informers in 8 watch groups (shardSelector),
//!           children by their owner's range label                           range_label
//!   range_shard: the claims published every tick, ranges touched after a
//!           death, writes fenced by range and version                        RangeShard,
//!                                                                            RangeWriter
//! ```
//!
//! Each replica caches only its share through an informer with [`shard_selector`];
//! docs/sharding.md gives the design, the hand-over protocol and the safety argument (rules SH
//! in docs/semantics.md).
//!
//! # A sharded replica
//!
//! Every replica runs the same code with its own identity (its pod name): it holds its place in
//! the ring, competes to be the sharder, and reconciles the widgets labelled for it, writing
//! through the [`FencedWriter`] it is handed.
//!
//! ```no_run
//! use controller::leader_election::{ApiLeaseLock, LeaderElectionConfig};
//! use controller::sharding::{
//!     shard_selector, ApiRingLeases, FenceError, Ring, ShardGate, ShardedController, Sharder,
//!     SharderConfig,
//! };
//! use controller::{Action, CancellationToken};
//! use serde_json::json;
//! use workqueue::shared_informer::reflector::store_index::{DynamicObject, PartialObjectMetadata};
//! use workqueue::shared_informer::reflector::{Api, Client, Resource};
//! use workqueue::shared_informer::SharedInformerFactory;
//! use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};
//!
//! # async fn replica(client: Client, identity: &str) -> Result<(), Box<dyn std::error::Error>> {
//! let stop = CancellationToken::new();
//! let widgets = Resource::namespaced("example.com", "v1", "widgets");
//!
//! // Membership: this replica's shard Lease "widgets-<identity>", renewed like leader election.
//! let leases = ApiRingLeases::new(client.clone(), "default");
//! let ring = Ring::new("widgets", LeaderElectionConfig::new("widgets", identity), leases.clone())?;
//! tokio::spawn({
//!     let (ring, stop) = (ring.clone(), stop.clone());
//!     async move { ring.run(ring.lock(), stop).await }
//! });
//!
//! // The sharder candidate: one replica at a time, elected, labels every widget with its owner.
//! let all = SharedInformerFactory::with_client(client.clone()).namespace("default");
//! let objects = all.metadata_informer(widgets.clone())?;
//! let sharder: Sharder<PartialObjectMetadata, _> = Sharder::new(
//!     ring.clone(), client.clone(), widgets.clone(), "Widget", &objects, SharderConfig::default(),
//! )?;
//! all.start(&stop);
//! tokio::spawn({
//!     let lock = ApiLeaseLock::new(client.clone(), "default", "widgets-sharder", identity);
//!     let (config, stop) = (LeaderElectionConfig::new("widgets-sharder", identity), stop.clone());
//!     async move { sharder.run_elected(config, lock, stop).await }
//! });
//!
//! // The controller: an informer of this replica's share only, and a gated runner.
//! let mine = SharedInformerFactory::with_client(client.clone())
//!     .namespace("default")
//!     .label_selector(ring.shard_selector().parse()?);
//! let informer = mine.informer::<DynamicObject>(widgets.clone())?;
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! informer.add_event_handler(KeyEnqueuer::<DynamicObject, _>::new(queue.clone()))?;
//! mine.start(&stop);
//! let api = Api::namespaced_with(client, widgets, "default");
//! let gate = ShardGate::for_ring(api, &ring, informer.indexer().clone());
//! ShardedController::new(gate, queue)
//!     .workers(4)
//!     .run(stop, |widget, writer| async move {
//!         // Every write goes through the fenced writer, with the widget as seen.
//!         writer.merge_patch(&widget, &json!({"status": {"ready": true}})).await?;
//!         Ok::<_, FenceError>(Action::Done)
//!     })
//!     .await;
//! # Ok(()) }
//! ```

mod assign;
mod claims;
mod fence;
mod handover;
mod range_shard;
mod range_watch;
mod ranges;
mod ring;
mod sharder;

pub use assign::{owner_of, weight};
pub use claims::{
    claims_name, decide, encode_claims, parse_claims, ClaimsError, PeerClaims, RangeDecision,
    CLAIMS_KEY,
};
pub(crate) use fence::{seen_version, with_precondition};
pub use fence::{shard_label, FenceError, FencedWriter, SHARD_LABEL_PREFIX};
pub use handover::{
    Admission, ShardGate, ShardedController, ShardedError, LAPSED_RETRY, LAPSE_WARNING,
};
pub use range_shard::{touch_annotation, RangeShard, RangeWriter, LEAVE_BOUND};
pub use range_watch::range_label;
pub use ranges::{RangeMove, RangeTable, VIRTUAL_RANGES};
pub use ring::{
    max_departure_delay, shard_lease_name, ApiRingLeases, Membership, MemoryRingLeases, Ring,
    RingLeases, ShardLease, RING_LABEL, RING_RATE_LIMIT,
};
pub use sharder::{
    drain_label, plan, plan_child, shard_selector, Sharder, SharderConfig, Step,
    DRAIN_LABEL_PREFIX, SHARDER_RATE_LIMIT,
};
