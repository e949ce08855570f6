//! # store-index
//!
//! The bottom layer of the informer stack: the object model, object keys, tombstones, and a
//! thread-safe store with named indexes, listers and label selectors (client-go's `tools/cache`
//! store, indexer and listers).
//!
//! ```text
//!   Object (trait) ── DynamicObject | CompactObject | PartialObjectMetadata | your serde type
//!        │            | k8s-openapi types
//!        │ key function: "namespace/name" or "name"
//!        ▼
//!   Indexer<K> ── items: key → Arc<K>
//!        │       indexes: name → value → {keys}
//!        ▼
//!   Lister<K> / NamespaceLister<K> ── filtered by Selector
//! ```
//!
//! Beside the indexer, the rest of client-go's `tools/cache` stores, each in a module of its own:
//! [`Indexer::transaction`] (a batch of writes under one lock), [`UndeltaStore`] (the whole
//! contents to a callback after every write), [`ExpirationCache`] (entries with a time to live),
//! [`Heap`] (a priority queue keyed by object key, with an async `pop`) and [`MutationCache`] (the
//! controller's own writes overlaid on an informer's cache), plus [`DeletedObject`] for typed
//! delete handlers and [`index_fn_to_key_fn`]. The time-based ones read an injectable [`Clock`].
//!
//! Invariants the store keeps (written out next to the data in `thread_safe_store.rs`, checked by a
//! property test):
//! - every index equals one rebuilt from scratch from the items;
//! - no index bucket is ever empty (buckets that lose their last key are removed);
//! - a write either changes items and all indexes or nothing at all;
//! - every read answers from one consistent snapshot; objects are shared `Arc`s, never copied;
//! - a transaction is seen whole or not at all (T1–T3, in `transaction.rs`).
//!
//! ```
//! use std::sync::Arc;
//! use store_index::{DynamicObject, Indexer, Indexers, Object};
//!
//! let by_app = |obj: &DynamicObject| Ok(obj.label("app").map(str::to_string).into_iter().collect());
//! let indexer = Indexer::new(Indexers::new().with_namespace_index().with("app", by_app));
//! indexer.add(Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a").with_label("app", "web"))).unwrap();
//! assert_eq!(indexer.index_keys("app", "web").unwrap(), ["ns/a"]);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod api_resource;
mod clock;
mod compact;
mod compact_meta;
mod deleted_object;
mod dynamic;
mod error;
mod expiration_cache;
mod heap;
mod index;
mod index_key_adapter;
mod indexer;
mod key;
mod lister;
mod managed_fields;
mod mutation_cache;
mod object;
mod partial_object_metadata;
#[cfg(feature = "k8s-pb")]
mod pb_object;
pub mod protobuf;
mod read_only;
mod resource_version;
mod selector;
mod shard_selector;
mod thread_safe_store;
pub mod time;
mod tombstone;
mod transaction;
mod undelta_store;

pub use api_resource::{ApiResource, ResourceScope};
pub use clock::{Clock, FakeClock, SystemClock};
pub use compact::{CompactObject, RawEncoding};
pub use deleted_object::DeletedObject;
pub use dynamic::DynamicObject;
pub use error::{describe, BoxError, KeyError, StoreError};
pub use expiration_cache::ExpirationCache;
pub use heap::{Heap, HeapError};
pub use index::{namespace_index_fn, IndexFn, Indexers, NoMetaError, NAMESPACE_INDEX};
pub use index_key_adapter::index_fn_to_key_fn;
pub use indexer::{Indexer, KeyListerGetter};
pub use key::{meta_namespace_key, split_meta_namespace_key, KeyFn, ObjectKey, ObjectName};
pub use lister::{Lister, NamespaceLister};
pub use mutation_cache::MutationCache;
pub use object::{Object, ObjectMeta, OwnerReference};
pub use partial_object_metadata::PartialObjectMetadata;
pub use read_only::ReadOnlyIndexer;
pub use resource_version::ResourceVersion;

/// The prost types of Kubernetes' built-in kinds (feature `k8s-pb`), re-exported so that the
/// version the machinery implements its traits for is the one a user names.
#[cfg(feature = "k8s-pb")]
pub use ::k8s_pb;
#[cfg(feature = "k8s-pb")]
pub use pb_object::Pb;
pub use selector::{Operator, Requirement, Selector, SelectorError};
pub use shard_selector::{
    shard_hash, RangeBound, ShardField, ShardRange, ShardSelector, ShardSelectorError,
};
pub use tombstone::{deletion_handling_key, DeletedFinalStateUnknown, ObjectOrTombstone};
pub use transaction::{Transaction, TransactionError, TransactionKind};
pub use undelta_store::UndeltaStore;

/// What a user of this layer needs, in one import: `use store_index::prelude::*;`.
pub mod prelude {
    pub use crate::{
        CompactObject, DeletedFinalStateUnknown, DeletedObject, DynamicObject, ExpirationCache,
        Heap, IndexFn, Indexer, Indexers, Lister, MutationCache, Object, ObjectKey, ObjectMeta,
        ObjectOrTombstone, PartialObjectMetadata, ReadOnlyIndexer, ResourceVersion, Selector,
        ShardSelector, StoreError, Transaction, UndeltaStore,
    };
}

/// Re-exported so that users of the layers above need no direct dependency.
pub use bytes;
/// Re-exported so that users of the layers above need no direct dependency.
pub use serde_json;
