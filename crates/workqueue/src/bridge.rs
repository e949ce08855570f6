//! The bridge from informers to queues: an event handler that enqueues object keys.

use std::marker::PhantomData;
use std::sync::Arc;

use shared_informer::reflector::store_index::{Object, ObjectOrTombstone};
use shared_informer::ResourceEventHandler;

use crate::delaying::DelayingQueue;
use crate::queue::WorkQueue;
use crate::rate_limiting::RateLimitingQueue;

/// A queue that string keys can be added to.
pub trait Enqueue: Send + Sync + 'static {
    /// Adds `key` (the queue's own dedup rules apply).
    fn enqueue(&self, key: String);
}

impl Enqueue for WorkQueue<String> {
    fn enqueue(&self, key: String) {
        self.add(key)
    }
}

impl Enqueue for DelayingQueue<String> {
    fn enqueue(&self, key: String) {
        self.add(key)
    }
}

impl Enqueue for RateLimitingQueue<String> {
    fn enqueue(&self, key: String) {
        self.add(key)
    }
}

/// An informer event handler that adds the `namespace/name` key of every added, updated or
/// deleted object to a queue; deletions inferred by a relist (tombstones) are enqueued by the
/// tombstone's key. Workers then read the current state from the informer's cache: a key whose
/// object is gone was deleted.
///
/// ```
/// use shared_informer::reflector::store_index::DynamicObject;
/// use workqueue::{default_controller_rate_limiter, KeyEnqueuer, RateLimitingQueue};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
/// let handler = KeyEnqueuer::<DynamicObject, _>::new(queue.clone());
/// // informer.add_event_handler(handler)?;
/// # let _ = handler;
/// # }
/// ```
pub struct KeyEnqueuer<K, Q> {
    queue: Q,
    _k: PhantomData<fn(&K)>,
}

impl<K, Q: Enqueue> KeyEnqueuer<K, Q> {
    /// A handler feeding `queue`.
    pub fn new(queue: Q) -> Self {
        KeyEnqueuer {
            queue,
            _k: PhantomData,
        }
    }
}

impl<K: Object, Q: Enqueue> KeyEnqueuer<K, Q> {
    fn enqueue(&self, obj: &ObjectOrTombstone<K>) {
        match obj.key() {
            Ok(key) => self.queue.enqueue(key.to_string()),
            Err(error) => tracing::warn!(%error, "object has no key; not enqueued"),
        }
    }
}

impl<K: Object, Q: Enqueue> ResourceEventHandler<K> for KeyEnqueuer<K, Q> {
    fn on_add(&self, obj: &Arc<K>, _is_in_initial_list: bool) {
        self.enqueue(&ObjectOrTombstone::Object(Arc::clone(obj)));
    }
    fn on_update(&self, _old: &Arc<K>, new: &Arc<K>) {
        self.enqueue(&ObjectOrTombstone::Object(Arc::clone(new)));
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.enqueue(obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared_informer::reflector::store_index::{DeletedFinalStateUnknown, DynamicObject};

    #[tokio::test]
    async fn enqueues_keys_of_objects_and_tombstones() {
        let queue: WorkQueue<String> = WorkQueue::new();
        let handler = KeyEnqueuer::<DynamicObject, _>::new(queue.clone());
        let pod = Arc::new(DynamicObject::new("v1", "Pod").within("ns").named("a"));
        handler.on_add(&pod, true);
        handler.on_update(&pod, &pod);
        handler.on_delete(&ObjectOrTombstone::Tombstone(DeletedFinalStateUnknown {
            key: "ns/gone".into(),
            obj: None,
        }));
        assert_eq!(queue.len(), 2, "an already queued key is not queued twice");
        assert_eq!(queue.get().await.as_deref(), Some("ns/a"));
        assert_eq!(queue.get().await.as_deref(), Some("ns/gone"));
    }
}
