//! # shared-informer
//!
//! client-go's informers on top of the reflector: a [`SharedIndexInformer`] lists and watches one
//! resource, keeps an indexed cache of it, and tells any number of handlers about every change; a
//! [`SharedInformerFactory`] makes sure each resource is listed and watched once, however many
//! consumers ask.
//!
//! ```text
//!  Reflector ──▶ queue ──pop──▶ handle_popped ──▶ Indexer (written first)
//!               RealFifo (default:     │
//!               in order, atomic,      └──▶ Processor ──▶ Listener 1: buffer ─▶ task ─▶ handler
//!               batched) or DeltaFifo                  └─▶ Listener 2: buffer ─▶ task ─▶ handler
//! ```
//!
//! The queue ([`InformerQueue`]) is client-go's default since 1.33, the in-order `RealFifo`:
//! every change reaches the cache and the handlers in the order the server sent it, a relist
//! replaces the cache at once, and deltas of distinct keys are applied in batches. The classic
//! `DeltaFifo` hands over all of a key's queued changes together instead.
//!
//! Which thread or task reads, decodes, allocates, applies, handles and frees each object, the
//! wake-ups between them, and what [`Pacing`], [`InformerThread`] and its batching window change:
//! [`threading`].
//!
//! Rules kept (contract section d): the cache is updated before any handler hears of a change;
//! presence in the cache, not the delta type, makes a notification an add or an update; an update
//! whose resource version did not change is a resync and goes only to handlers due for one; each
//! handler runs on its own task, in order, and a slow or panicking handler delays nothing else; a
//! handler added late first receives the whole cache, atomically with respect to new changes.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod adaptors;
mod error;
mod factory;
mod handler;
mod informer;
mod informer_id;
mod informer_name;
mod informer_thread;
mod listener;
mod pacing;
mod processor;
mod recomputed;
mod registration;
mod synced;
mod synctrack;
pub mod threading;
mod transforming;

pub use adaptors::FilteringHandler;
pub use error::{InformerError, SyncTrackerError};
pub use factory::SharedInformerFactory;
pub use handler::{EventHandlerFns, ResourceEventHandler};
pub use informer::{
    HandlerOptions, HandlerStats, InOrder, InformerOptions, InformerQueue, InformerStats,
    SharedIndexInformer, MINIMUM_RESYNC_PERIOD,
};
pub use informer_id::InformerId;
pub use informer_name::{
    InformerName, InformerNameAndResource, InformerNameError, InformerNameRegistry,
};
pub use informer_thread::{InformerThread, MAX_BATCH_WINDOW};
pub use recomputed::Recomputed;
/// The old name of [`Recomputed`] (client-go's `synctrack.Lazy`), which read as a compute-once
/// cell.
#[deprecated(
    since = "0.1.0",
    note = "renamed `Recomputed`: a value recomputed after each notify"
)]
pub type Lazy<T, E> = Recomputed<T, E>;
pub use pacing::{
    Pacing, DEFAULT_HANDLER_HIGH_WATER, DEFAULT_MAX_HANDLER_WAIT, DEFAULT_QUEUE_HIGH_WATER,
};
pub use registration::HandlerRegistration;
pub use synced::{
    wait_for, wait_for_cache_sync, wait_for_context, CacheSyncError, HasSynced, StopCause,
    SyncOutcome, SyncReport, WaitContext,
};
pub use synctrack::{AsyncTracker, SyncTracker};
pub use transforming::TransformingListerWatcher;

/// The cancellation token that stops informers and factories.
pub use reflector::CancellationToken;

/// What a user of this layer needs, in one import (the layers below included, and
/// `CancellationToken` to stop informers): `use shared_informer::prelude::*;`.
pub mod prelude {
    pub use crate::reflector::prelude::*;
    pub use crate::{
        EventHandlerFns, HandlerRegistration, InformerError, InformerOptions, InformerQueue,
        ResourceEventHandler, SharedIndexInformer, SharedInformerFactory,
    };
}

/// The layers below, re-exported so that depending on this crate is enough.
pub use reflector;

/// The guide `docs/protobuf.md`, whose Rust snippets are compiled as this crate's doctests with
/// the `k8s-pb` feature (`cargo test --doc -p shared-informer --features k8s-pb`).
#[cfg(all(doctest, feature = "k8s-pb"))]
#[doc = include_str!("../../../docs/protobuf.md")]
pub struct ProtobufGuideDoctests;
