//! [`Queue`]: the consumer-facing side shared by [`DeltaFifo`](crate::DeltaFifo) and
//! [`RealFifo`](crate::RealFifo), which the informer is generic over; [`Popped`]: what one pop
//! hands to the process function.

use std::future::Future;
use std::sync::Arc;

use store_index::ResourceVersion;

use crate::delta::{Delta, Deltas};
use crate::error::FifoError;
use crate::process::ProcessError;
use crate::store::Store;

/// What one pop hands to its process function.
#[derive(Debug)]
pub enum Popped<'a, K> {
    /// The deltas of one key: all of those queued (a [`DeltaFifo`](crate::DeltaFifo)), or one
    /// (a [`RealFifo`](crate::RealFifo)).
    Deltas(&'a Deltas<K>),
    /// Several deltas of **distinct** keys, in queue order (a `RealFifo`'s batched pop, contract
    /// B15.5); the consumer may apply them in one store transaction.
    Batch(&'a [Delta<K>]),
    /// A whole relist, queued as one entry by an atomic `RealFifo` (client-go's `ReplacedAll`,
    /// B15.3): the consumer replaces its store with `objects` at once and works out the deletions
    /// and updates itself (D2.5).
    ReplacedAll {
        /// The listed objects, transformed, in list order.
        objects: &'a [Arc<K>],
        /// The list's resource version.
        resource_version: &'a ResourceVersion,
    },
    /// A periodic resync queued as one entry by an atomic `RealFifo` (`SyncAll`): the consumer
    /// resyncs every object it holds.
    SyncAll,
    /// The reflector reached this resource version (`Bookmark`, atomic `RealFifo` with bookmarks):
    /// everything before it has been popped.
    Bookmark(&'a ResourceVersion),
}

impl<K> Popped<'_, K> {
    /// How many entries of the queue this pop took (a batch's length, else 1).
    pub fn len(&self) -> usize {
        match self {
            Popped::Batch(b) => b.len(),
            _ => 1,
        }
    }

    /// Never true: a pop takes at least one entry.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The deltas this entry holds, oldest first: one key's ([`Popped::Deltas`]) or a batch's
    /// ([`Popped::Batch`]); none for the atomic entries, which a consumer handles whole. A
    /// consumer written as `for delta in popped.deltas()` runs unchanged on the
    /// [`DeltaFifo`](crate::DeltaFifo) and on a non-atomic [`RealFifo`](crate::RealFifo) through
    /// [`Queue::pop_entry`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use delta_fifo::{DeltaFifo, DeltaFifoOptions, Queue, RealFifo, RealFifoOptions};
    /// use delta_fifo::store_index::{DynamicObject, Indexer, Object};
    ///
    /// /// One consumer for either queue: the keys it was handed.
    /// async fn drain(queue: &impl Queue<DynamicObject>) -> Vec<String> {
    ///     let mut keys = Vec::new();
    ///     while !queue.is_empty() {
    ///         let popped = queue
    ///             .pop_entry(1, |popped, _| {
    ///                 Ok(popped.deltas().iter().map(|d| d.object.key().unwrap().to_string()).collect::<Vec<_>>())
    ///             })
    ///             .await
    ///             .unwrap();
    ///         keys.extend(popped.unwrap_or_default());
    ///     }
    ///     keys
    /// }
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let pod = Arc::new(DynamicObject::new("v1", "Pod").within("default").named("web-1"));
    /// let fifo = DeltaFifo::new(DeltaFifoOptions::new());
    /// fifo.add(Arc::clone(&pod)).unwrap();
    /// let real = RealFifo::new(RealFifoOptions::new(Indexer::<DynamicObject>::default()));
    /// real.add(pod).unwrap();
    /// assert_eq!(drain(&fifo).await, drain(&real).await);
    /// # }
    /// ```
    pub fn deltas(&self) -> &[Delta<K>] {
        match self {
            Popped::Deltas(deltas) => deltas.as_slice(),
            Popped::Batch(batch) => batch,
            Popped::ReplacedAll { .. } | Popped::SyncAll | Popped::Bookmark(_) => &[],
        }
    }
}

/// A queue of deltas that a reflector fills (through [`Store`]) and an informer drains.
///
/// What it is for: the one interface the informer's pop loop is written against, so that it runs
/// unchanged on either queue; [`DeltaFifo`](crate::DeltaFifo) and [`RealFifo`](crate::RealFifo)
/// implement it. It is public so that a consumer of this crate can write such a loop over either
/// queue too. The plain [`Fifo`](crate::Fifo) does not implement it: it keeps one object per key,
/// not deltas, so it has no [`Popped`] to hand out. Nothing in the workspace accepts a queue of the
/// caller's own making: an informer builds its queue from `InformerOptions::queue`.
pub trait Queue<K>: Store<K> + Clone + Send + Sync + 'static {
    /// Waits for the next entry (or, in a queue that batches, up to `max_batch` deltas of
    /// distinct keys) and runs `process` on it with `is_in_initial_list`; outcomes as in
    /// [`DeltaFifo::pop`](crate::DeltaFifo::pop). Queues that do not batch ignore `max_batch`.
    /// One consumer pops at a time: order is only guaranteed to it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe in both implementations: entries are taken, and `process` run, only in the
    /// poll that returns; a future dropped while waiting takes nothing.
    fn pop_entry<R, F>(
        &self,
        max_batch: usize,
        process: F,
    ) -> impl Future<Output = Result<Option<R>, FifoError>> + Send
    where
        F: FnOnce(Popped<'_, K>, bool) -> Result<R, ProcessError> + Send,
        R: Send;
    /// Whether the initial population has been fully popped.
    fn has_synced(&self) -> bool;
    /// Waits until synced (after the last initial item's process call returned): `true`; or
    /// until the queue is closed before that: `false`. Cancel safe: it only waits.
    fn wait_for_sync(&self) -> impl Future<Output = bool> + Send;
    /// Closes the queue; poppers get [`FifoError::Closed`] once it is empty.
    fn close(&self);
    /// Whether the queue is closed.
    fn is_closed(&self) -> bool;
    /// Number of queued entries.
    fn len(&self) -> usize;
    /// True when nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The resource version the reflector feeding this queue last synced to (`""` before its
    /// first list).
    fn last_sync_resource_version(&self) -> ResourceVersion;
}
