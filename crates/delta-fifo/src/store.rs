//! [`Store`]: what a reflector writes into (a queue, or a plain cache).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use store_index::{describe, meta_namespace_key, Object, ObjectKey, ResourceVersion};

use crate::error::FifoError;

/// The write side a reflector feeds: client-go's `cache.Store` as the reflector uses it.
///
/// Implemented by the queues of this crate. Methods take `&self`: implementations are internally
/// synchronised and shared between the reflector and the consumer.
pub trait Store<K>: Send + Sync {
    /// An object was added (watch `ADDED`).
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// An object was modified (watch `MODIFIED`).
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// An object was deleted (watch `DELETED`); `obj` is its final state.
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError>;
    /// A complete list replaces what the store knows; `resource_version` is the list's.
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError>;
    /// Periodic resync (see the contract, B9).
    fn resync(&self) -> Result<(), FifoError>;
    /// Applies the store's transformer, if it has one, to an object that will reach it later
    /// through `replace` (the reflector's watch-list mode builds its snapshot with this, contract
    /// C13.6, so the transformer runs twice on initial objects: it must be idempotent). Default:
    /// the object unchanged.
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        Ok(obj)
    }
    /// The reflector's last-synced resource version advanced (a watch event's, a bookmark's, a
    /// watch-list snapshot's; contract C10.2). Default: nothing; the [`DeltaFifo`](crate::DeltaFifo)
    /// records it, and an informer reports it as its own.
    fn update_resource_version(&self, _resource_version: &ResourceVersion) {}
    /// Whether the store takes more watch events now. A reflector that finds no room stops
    /// reading its watch until [`wait_for_room`](Self::wait_for_room) returns, so that events
    /// wait in the connection (and, past its buffers, on the server) rather than in memory
    /// (docs/semantics.md, rule P2). Lists, relists and resyncs are never held back. Default:
    /// always room; the queues of this crate are unbounded, and an informer bounds them from
    /// outside.
    fn has_room(&self) -> bool {
        true
    }
    /// Waits until [`has_room`](Self::has_room) is true, or until nothing will ever be taken from
    /// the store again (it was closed). Default: at once.
    fn wait_for_room(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(std::future::ready(()))
    }
    /// The key the store files `obj` under: its key function's answer, so that what the reflector
    /// keys itself (the snapshot a watch-list stream builds before its `replace`, contract C13.2)
    /// agrees with the store, whatever key function the store was given. Default: `namespace/name`
    /// ([`meta_namespace_key`]), refusing an object without metadata with
    /// [`FifoError::Key`].
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError>
    where
        K: Object,
    {
        meta_namespace_key(obj).map_err(|source| FifoError::Key {
            object: describe(obj),
            source,
        })
    }
}

impl<K, S: Store<K> + ?Sized> Store<K> for Arc<S> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        (**self).add(obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        (**self).update(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        (**self).delete(obj)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        (**self).replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        (**self).resync()
    }
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        (**self).transform(obj)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        (**self).update_resource_version(resource_version)
    }
    fn has_room(&self) -> bool {
        (**self).has_room()
    }
    fn wait_for_room(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        (**self).wait_for_room()
    }
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError>
    where
        K: Object,
    {
        (**self).key(obj)
    }
}
