//! Sharded controllers: replicas that split a resource's objects between them, on Leases and
//! labels (issue 31). Its parts:
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
//! ```
//!
//! Each replica caches only its share through an informer with [`shard_selector`];
//! docs/sharding.md gives the design, the hand-over protocol and the safety argument (rules SH
//! in docs/semantics.md).

mod assign;
mod fence;
mod handover;
mod ring;
mod sharder;

pub use assign::{owner_of, weight};
pub use fence::{shard_label, FenceError, FencedWriter, SHARD_LABEL_PREFIX};
pub use handover::{Admission, ShardGate, ShardedController, ShardedError};
pub use ring::{
    max_departure_delay, shard_lease_name, ApiRingLeases, Membership, MemoryRingLeases, Ring,
    RingLeases, ShardLease, RING_LABEL,
};
pub use sharder::{
    drain_label, plan, plan_child, shard_selector, Sharder, SharderConfig, Step, DRAIN_LABEL_PREFIX,
};
