//! Sharded controllers: replicas that split a resource's objects between them, on Leases and
//! labels (issue 31). This module holds the foundations:
//!
//! ```text
//!   ring:   each replica holds Lease <ring>-<identity> (RING_LABEL=<ring>); members = live holders,
//!           judged on the observer's clock                                   Ring, Membership
//!   assign: owner_of(key, members): rendezvous hashing, stable across builds  owner_of, weight
//!   fence:  writes refused locally unless the shard lease is held and the object's
//!           shard label names us; sent with the seen resourceVersion as precondition
//!                                                                            FencedWriter
//! ```
//!
//! The elected sharder that writes the assignment labels, the hand-over of moving objects and
//! the label-selector caches build on these (docs/sharding.md gives the design and its safety
//! argument; rules SH in docs/semantics.md).

mod assign;
mod fence;
mod ring;

pub use assign::{owner_of, weight};
pub use fence::{shard_label, FenceError, FencedWriter, SHARD_LABEL_PREFIX};
pub use ring::{
    max_departure_delay, shard_lease_name, ApiRingLeases, Membership, MemoryRingLeases, Ring,
    RingLeases, ShardLease, RING_LABEL,
};
