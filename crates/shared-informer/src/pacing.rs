//! Pacing: how far an informer reads ahead of its cache and its handlers (rules P1–P5 in
//! docs/semantics.md; why, and where it sits among an informer's threads: [`crate::threading`]).
//!
//! The reflector's side is [`PacedQueue`], the informer's queue as the reflector sees it: its
//! [`Store::has_room`] says whether the queue is under [`Pacing::queue_high_water`] (P2), and
//! [`PacedQueue::taken`], called after each pop and on close, wakes a reflector waiting for room.
//! The handlers' side (P3, P4) is the informer's `wait_for_handlers` and each listener's
//! `wait_for_low_water` and lagging flag, at half of [`Pacing::handler_high_water`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use reflector::delta_fifo::{FifoError, Queue, Store};
use reflector::store_index::{Object, ObjectKey, ResourceVersion};
use tokio::sync::Notify;

/// How far an informer reads ahead of its cache and its handlers (see
/// [`InformerOptions::pacing`](crate::InformerOptions::pacing); what it changes and when to turn
/// it off: [`crate::threading`]).
///
/// ```
/// use std::time::Duration;
/// use shared_informer::{InformerOptions, Pacing};
/// use shared_informer::reflector::store_index::DynamicObject;
///
/// // Let handlers fall further behind before the informer waits for them.
/// let roomy = InformerOptions::<DynamicObject> {
///     pacing: Some(Pacing { handler_high_water: 10_000, ..Pacing::default() }),
///     ..Default::default()
/// };
/// // client-go's behaviour: nothing is ever waited for, buffers are unbounded.
/// let unpaced = InformerOptions::<DynamicObject> { pacing: None, ..Default::default() };
/// # let _ = (roomy, unpaced);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Queue entries (deltas for the in-order queue, keys for the DeltaFifo) at which the
    /// reflector stops reading the watch until the informer has taken some (default
    /// [`DEFAULT_QUEUE_HIGH_WATER`]). The reflector applies at most one more batch of already
    /// decoded events, so the queue may pass it by that much.
    pub queue_high_water: usize,
    /// Notifications buffered for one handler above which the informer waits for that handler
    /// before it takes more from the queue, until it is down to half of this (default
    /// [`DEFAULT_HANDLER_HIGH_WATER`]). Initial-list adds are not counted: they hold objects the
    /// cache holds too.
    pub handler_high_water: usize,
    /// The longest the informer waits for its handlers after one pop (default
    /// [`DEFAULT_MAX_HANDLER_WAIT`]); a handler still above half its high water by then is left
    /// to lag until it gets there.
    pub max_handler_wait: Duration,
}

/// Default [`Pacing::queue_high_water`]. Each queued delta holds a decoded object the cache does
/// not hold yet, and a pop of the in-order queue takes at most about this many (plus one decoded
/// batch of the reflector's). With this bound, a sustained watch of 10k typed `Pod`s on one worker
/// peaks at 1.02× the RSS at sync, kube-rs's reflector's peak on the same run, at the same rate as
/// with the earlier 500 (1.05×); docs/benchmarks-archive.md, section *Pacing defaults and glibc's arenas*.
pub const DEFAULT_QUEUE_HIGH_WATER: usize = 128;
/// Default [`Pacing::handler_high_water`]: each buffered update keeps a replaced object alive.
/// Lower would save little memory (none measurable at 64) and would let a merely slow handler
/// throttle the informer: a handler is waited for until it drains half of this, and one that
/// takes longer than [`DEFAULT_MAX_HANDLER_WAIT`] to do so is left to lag instead (P4). At 256,
/// a handler slower than about 4 ms per event lags rather than holding the cache back.
pub const DEFAULT_HANDLER_HIGH_WATER: usize = 256;
/// Default [`Pacing::max_handler_wait`].
pub const DEFAULT_MAX_HANDLER_WAIT: Duration = Duration::from_millis(500);

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            queue_high_water: DEFAULT_QUEUE_HIGH_WATER,
            handler_high_water: DEFAULT_HANDLER_HIGH_WATER,
            max_handler_wait: DEFAULT_MAX_HANDLER_WAIT,
        }
    }
}

impl Pacing {
    /// The buffer length a waited-for handler has to get down to, and below which a lagging one
    /// is waited for again: half the high water.
    pub(crate) fn handler_low_water(&self) -> usize {
        self.handler_high_water / 2
    }
}

/// The informer's queue as its reflector sees it: every write goes to the queue, and
/// [`Store::has_room`] says whether it is under the high water (P2). The informer calls
/// [`PacedQueue::taken`] after each pop, which wakes a reflector waiting for room.
pub(crate) struct PacedQueue<Q> {
    queue: Q,
    /// `usize::MAX` when the informer is not paced.
    high_water: usize,
    room: Arc<Notify>,
}

impl<Q: Clone> Clone for PacedQueue<Q> {
    fn clone(&self) -> Self {
        PacedQueue {
            queue: self.queue.clone(),
            high_water: self.high_water,
            room: Arc::clone(&self.room),
        }
    }
}

impl<Q> PacedQueue<Q> {
    pub(crate) fn new(queue: Q, pacing: Option<&Pacing>) -> Self {
        PacedQueue {
            queue,
            high_water: pacing.map_or(usize::MAX, |p| p.queue_high_water.max(1)),
            room: Arc::new(Notify::new()),
        }
    }

    /// Something was taken from the queue (or it was closed): wake the reflector if it waits.
    pub(crate) fn taken(&self) {
        self.room.notify_waiters();
    }
}

impl<Q> PacedQueue<Q> {
    fn room_now<K>(&self) -> bool
    where
        Q: Queue<K>,
    {
        self.queue.len() < self.high_water || self.queue.is_closed()
    }
}

impl<K: Send + Sync, Q: Queue<K>> Store<K> for PacedQueue<Q> {
    fn add(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.queue.add(obj)
    }
    fn update(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.queue.update(obj)
    }
    fn delete(&self, obj: Arc<K>) -> Result<(), FifoError> {
        self.queue.delete(obj)
    }
    fn replace(
        &self,
        list: Vec<Arc<K>>,
        resource_version: &ResourceVersion,
    ) -> Result<(), FifoError> {
        self.queue.replace(list, resource_version)
    }
    fn resync(&self) -> Result<(), FifoError> {
        self.queue.resync()
    }
    fn transform(&self, obj: Arc<K>) -> Result<Arc<K>, FifoError> {
        self.queue.transform(obj)
    }
    fn update_resource_version(&self, resource_version: &ResourceVersion) {
        self.queue.update_resource_version(resource_version)
    }
    fn key(&self, obj: &K) -> Result<ObjectKey, FifoError>
    where
        K: Object,
    {
        self.queue.key(obj)
    }
    fn has_room(&self) -> bool {
        self.room_now::<K>()
    }
    fn wait_for_room(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            loop {
                // Registered before the check: a pop between the check and the wait still wakes
                // this waiter (`notify_waiters` reaches every enabled `Notified`).
                let notified = self.room.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if self.room_now::<K>() {
                    return;
                }
                notified.await;
            }
        })
    }
}
