//! # delta-fifo
//!
//! The queue between a reflector and an informer's store (client-go's `DeltaFIFO`, `FIFO` and
//! `RealFIFO`). A reflector writes into a queue through the [`Store`] trait; an informer drains it
//! through [`Queue::pop_entry`], applying each popped entry to its indexer **under the queue's
//! lock** (or, for an atomic `RealFifo` that asks for it, with the producer let in meanwhile: its
//! entries never depend on the consumer's store), so the cache and the queue never disagree about
//! what has been processed.
//!
//! ```text
//!  reflector ──add/update/delete/replace/resync──▶ DeltaFifo ──pop(process)──▶ indexer + handlers
//!                                                     ▲                           │
//!                                                     └──── known_objects ────────┘
//! ```
//!
//! - [`DeltaFifo`]: per-key [`Deltas`] in first-enqueue order, consecutive deletions deduplicated,
//!   tombstones for keys a relist no longer contains, resync, HasSynced (the seeds' design).
//! - [`RealFifo`]: every change kept in arrival order, no merging (client-go's current default
//!   for informers, and the informers' default here); relists as tombstones or as one atomic
//!   entry, pops of one delta or of a batch of distinct keys; same [`Queue`] trait, so an
//!   informer can run on either.
//! - [`Fifo`]: the latest object per key, no deltas.
//!
//! Invariants, written next to the state they govern in `delta_fifo.rs` and checked by the
//! property tests in `tests/properties.rs`: a key is queued iff it has deltas, never twice; keys pop
//! in first-enqueue order; popped deltas are non-empty, oldest first, exactly what happened since
//! the last pop after the dedup rule; HasSynced turns true exactly after the initial population.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use delta_fifo::{DeltaFifo, DeltaFifoOptions, DeltaType, ProcessError};
//! use delta_fifo::store_index::{DynamicObject, Indexer, Object};
//!
//! let cache: Indexer<DynamicObject> = Indexer::default();
//! let fifo = DeltaFifo::new(DeltaFifoOptions::new().known_objects(cache.clone()).emit_replaced(true));
//! let pod = |name: &str| Arc::new(DynamicObject::new("v1", "Pod").within("ns").named(name));
//!
//! fifo.replace(vec![pod("a"), pod("b")], "10").unwrap();
//! while !fifo.is_empty() {
//!     fifo.pop(|deltas, _is_in_initial_list| {
//!         for delta in deltas {
//!             match (delta.kind, delta.object()) {
//!                 (DeltaType::Deleted, _) => { cache.delete_by_key(delta.object.key().unwrap().as_str()).unwrap(); }
//!                 (_, Some(obj)) => cache.update(Arc::clone(obj)).unwrap(),
//!                 (_, None) => {}
//!             }
//!         }
//!         Ok::<_, ProcessError>(())
//!     }).await.unwrap();
//! }
//! assert!(fifo.has_synced());
//! assert_eq!(cache.len(), 2);
//! # });
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod core;
mod delta;
mod delta_fifo;
mod error;
mod fifo;
mod options;
mod process;
mod queue;
mod real_fifo;
mod signals;
mod store;
mod transforming_store;

pub use delta::{Delta, DeltaType, Deltas};
pub use delta_fifo::DeltaFifo;
pub use error::FifoError;
pub use fifo::Fifo;
pub use options::{DeltaFifoOptions, KnownObjects, Transformer};
pub use process::ProcessError;
pub use queue::{Popped, Queue};
pub use real_fifo::{
    Atomic, RealFifo, RealFifoOptions, DEFAULT_BATCH_SIZE, UNLOCK_WHILE_PROCESSING_MAX_DEPTH,
};
pub use store::Store;
pub use transforming_store::TransformingStore;

/// What a user of this layer needs, in one import (the layer below's included):
/// `use delta_fifo::prelude::*;`.
pub mod prelude {
    pub use crate::store_index::prelude::*;
    pub use crate::{
        Atomic, Delta, DeltaFifo, DeltaFifoOptions, DeltaType, Deltas, Fifo, FifoError, Popped,
        ProcessError, Queue, RealFifo, RealFifoOptions, Store,
    };
}

/// The layer below, re-exported so that depending on this crate is enough.
pub use store_index;
