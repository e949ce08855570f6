//! [`QueueCore`]: the skeleton every queue of this crate shares — the key function and the
//! transformer, one lock around the queue's own items and the sync bookkeeping, the wake-ups of
//! waiting poppers, close, HasSynced, and the resource version the feeding reflector reached.
//! [`DeltaFifo`](crate::DeltaFifo), [`RealFifo`](crate::RealFifo) and [`Fifo`](crate::Fifo) differ
//! only in what they keep in `items` and how they fill and drain it.

use std::future::Future;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use store_index::{describe, KeyFn, Object, ObjectKey, ObjectOrTombstone, ResourceVersion};

use crate::error::FifoError;
use crate::options::Transformer;
use crate::signals::Signals;

/// The accessors each queue of this crate has over its [`QueueCore`] (its `core` field), written
/// once for the three: HasSynced, waiting for it, and closing. `$extra` adds to `has_synced`'s
/// documentation what one queue says of it besides.
macro_rules! core_accessors {
    ($(#[$extra:meta])*) => {
        /// True once the first `replace` and all of its items have been popped (each one's
        /// process call returned), or once anything was added, updated or deleted before the
        /// first `replace` (contract B11; invariant HS1). Stays true.
        $(#[$extra])*
        pub fn has_synced(&self) -> bool {
            self.core.has_synced()
        }

        /// Waits until [`has_synced`](Self::has_synced) is true and the process call of the last
        /// initial item has returned (`true`, at once if that already happened), or until the
        /// queue is closed before that (`false`): the same answer as
        /// `HasSynced::wait_for_sync`'s.
        ///
        /// # Cancel safety
        ///
        /// Cancel safe: it only waits.
        pub async fn wait_for_sync(&self) -> bool {
            self.core.wait_for_sync().await
        }

        /// Closes the queue: every waiting popper wakes and, once the queue is empty, gets
        /// [`FifoError::Closed`](crate::FifoError::Closed). Producers can still add.
        pub fn close(&self) {
            self.core.close();
        }

        /// Whether [`close`](Self::close) was called.
        pub fn is_closed(&self) -> bool {
            self.core.is_closed()
        }
    };
}
pub(crate) use core_accessors;

/// What the lock of a queue guards: its items, and the bookkeeping of HasSynced.
///
/// Invariant **HS1** (every queue): `has_synced()` = `populated && initial_population_count == 0`,
/// and once true it stays true: nothing raises the count after the first population.
pub(crate) struct Locked<S> {
    /// The queue's own data.
    pub(crate) items: S,
    /// Something was added, or a first `replace` happened.
    pub(crate) populated: bool,
    /// Entries of the first `replace` not yet popped and processed.
    pub(crate) initial_population_count: usize,
    pub(crate) closed: bool,
}

impl<S> Locked<S> {
    pub(crate) fn has_synced(&self) -> bool {
        self.populated && self.initial_population_count == 0
    }

    /// Counts one entry of the initial population as processed.
    pub(crate) fn count_processed(&mut self, n: usize) {
        self.initial_population_count = self.initial_population_count.saturating_sub(n);
    }
}

/// See the module documentation.
pub(crate) struct QueueCore<K, S> {
    key_fn: KeyFn<K>,
    transformer: Option<Transformer<K>>,
    name: String,
    locked: Mutex<Locked<S>>,
    signals: Signals,
    /// The resource version the reflector feeding this queue last synced to: the last replaced
    /// list's, then every later one it reports (`Store::update_resource_version`).
    last_sync_rv: Mutex<ResourceVersion>,
}

impl<K: Object, S> QueueCore<K, S> {
    pub(crate) fn new(
        key_fn: KeyFn<K>,
        transformer: Option<Transformer<K>>,
        name: String,
        items: S,
    ) -> Self {
        QueueCore {
            key_fn,
            transformer,
            name,
            locked: Mutex::new(Locked {
                items,
                populated: false,
                initial_population_count: 0,
                closed: false,
            }),
            signals: Signals::new(),
            last_sync_rv: Mutex::new(ResourceVersion::default()),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Locked<S>> {
        self.locked.lock()
    }

    /// Whether someone holds the lock now (tests of unlocking while processing).
    #[cfg(test)]
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.is_locked()
    }

    /// The key of an object (the key function's answer) or of a tombstone (its own key).
    pub(crate) fn key_of(&self, obj: &ObjectOrTombstone<K>) -> Result<ObjectKey, FifoError> {
        match obj {
            ObjectOrTombstone::Tombstone(t) => Ok(t.key.clone()),
            ObjectOrTombstone::Object(o) => self.object_key(o),
        }
    }

    pub(crate) fn object_key(&self, obj: &K) -> Result<ObjectKey, FifoError> {
        (self.key_fn)(obj).map_err(|source| FifoError::Key {
            object: describe(obj),
            source,
        })
    }

    /// The transformer applied to an object (never to a tombstone).
    pub(crate) fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        match &self.transformer {
            Some(t) => t(obj).map_err(FifoError::Transform),
            None => Ok(obj),
        }
    }

    /// `object` as it is to be queued: transformed when `transform` says so and it is an object.
    pub(crate) fn prepare(
        &self,
        object: ObjectOrTombstone<K>,
        transform: bool,
    ) -> Result<ObjectOrTombstone<K>, FifoError> {
        match object {
            ObjectOrTombstone::Object(o) if transform && self.transformer.is_some() => {
                Ok(ObjectOrTombstone::Object(self.transform(o)?))
            }
            object => Ok(object),
        }
    }

    /// Wakes every waiting popper. Call after adding to the queue.
    pub(crate) fn wake(&self) {
        self.signals.wake_all();
    }

    /// Announces HasSynced the first time it holds.
    pub(crate) fn signal_if_synced(&self, locked: &Locked<S>) {
        self.signals.synced_if(locked.has_synced());
    }

    /// Runs `take` under the lock until it returns a value, waiting for a wake-up between
    /// attempts: the pop loop of every queue. `take` sees `closed` and decides what an empty
    /// closed queue means.
    pub(crate) fn pop_with<'a, T: 'a>(
        &'a self,
        mut take: impl FnMut(&mut Locked<S>) -> Option<T> + 'a,
    ) -> impl Future<Output = T> + 'a {
        self.signals
            .wait_until(move || take(&mut self.locked.lock()))
    }

    pub(crate) fn has_synced(&self) -> bool {
        self.locked.lock().has_synced()
    }

    /// Waits until synced (`true`) or closed before syncing (`false`, unless it synced
    /// meanwhile): a closed queue will never sync, and a waiter must not wait for ever.
    pub(crate) async fn wait_for_sync(&self) -> bool {
        let closed = self
            .signals
            .wait_until(|| self.locked.lock().closed.then_some(()));
        tokio::select! {
            biased;
            () = self.signals.wait_for_sync() => true,
            () = closed => self.has_synced(),
        }
    }

    pub(crate) fn close(&self) {
        self.locked.lock().closed = true;
        self.signals.wake_all();
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.locked.lock().closed
    }

    pub(crate) fn last_sync_resource_version(&self) -> ResourceVersion {
        self.last_sync_rv.lock().clone()
    }

    pub(crate) fn set_last_sync_resource_version(&self, rv: &ResourceVersion) {
        rv.clone_into(&mut self.last_sync_rv.lock());
    }
}
