//! The bridge from informers to queues: an event handler that enqueues object keys.

use std::marker::PhantomData;
use std::sync::Arc;

use shared_informer::reflector::store_index::{Object, ObjectOrTombstone};
use shared_informer::ResourceEventHandler;

use crate::delaying::DelayingQueue;
use crate::priority::{DEFAULT_PRIORITY, LOW_PRIORITY};
use crate::priority_queue::{AddOpts, PriorityQueue};
use crate::queue::WorkQueue;
use crate::rate_limiting::RateLimitingQueue;

/// A queue that string keys can be added to.
pub trait Enqueue: Send + Sync + 'static {
    /// Adds `key` (the queue's own dedup rules apply).
    fn enqueue(&self, key: String);

    /// Adds `key` with a priority, which only a [`PriorityQueue`] heeds; the default adds it as
    /// [`enqueue`](Self::enqueue) does.
    fn enqueue_with_priority(&self, key: String, priority: i32) {
        let _ = priority;
        self.enqueue(key);
    }
}

impl Enqueue for PriorityQueue<String> {
    fn enqueue(&self, key: String) {
        self.add(key)
    }

    fn enqueue_with_priority(&self, key: String, priority: i32) {
        self.add_with_opts(AddOpts::new().priority(priority), key)
    }
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
/// Into a [`PriorityQueue`], objects of the initial list and resyncs (an update that leaves the
/// resource version as it was) go with [`LOW_PRIORITY`], every other event with
/// [`DEFAULT_PRIORITY`], as controller-runtime's handlers do (E12.4); other queues ignore it.
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
    fn enqueue(&self, obj: &ObjectOrTombstone<K>, low: bool) {
        let priority = if low { LOW_PRIORITY } else { DEFAULT_PRIORITY };
        match obj.key() {
            Ok(key) => self.queue.enqueue_with_priority(key.to_string(), priority),
            Err(error) => tracing::warn!(%error, "object has no key; not enqueued"),
        }
    }
}

impl<K: Object, Q: Enqueue> ResourceEventHandler<K> for KeyEnqueuer<K, Q> {
    fn on_add(&self, obj: &Arc<K>, is_in_initial_list: bool) {
        self.enqueue(
            &ObjectOrTombstone::Object(Arc::clone(obj)),
            is_in_initial_list,
        );
    }
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>) {
        let resync =
            old.resource_version().is_some() && old.resource_version() == new.resource_version();
        self.enqueue(&ObjectOrTombstone::Object(Arc::clone(new)), resync);
    }
    fn on_delete(&self, obj: &ObjectOrTombstone<K>) {
        self.enqueue(obj, false);
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

    #[tokio::test(start_paused = true)]
    async fn into_a_priority_queue_the_initial_list_and_resyncs_go_low_live_events_default() {
        let queue: PriorityQueue<String> =
            PriorityQueue::new(crate::default_controller_rate_limiter());
        let handler = KeyEnqueuer::<DynamicObject, _>::new(queue.clone());
        let pod = |name: &str, rv: &str| {
            Arc::new(
                DynamicObject::new("v1", "Pod")
                    .within("ns")
                    .named(name)
                    .with_resource_version(rv),
            )
        };
        handler.on_add(&pod("listed", "1"), true);
        handler.on_update(&pod("resynced", "2"), &pod("resynced", "2"));
        handler.on_add(&pod("created", "3"), false);
        handler.on_update(&pod("changed", "4"), &pod("changed", "5"));
        handler.on_delete(&ObjectOrTombstone::Object(pod("deleted", "6")));
        let priority = |key: &str| queue.priority_of(&key.to_string());
        assert_eq!(priority("ns/listed"), Some(LOW_PRIORITY));
        assert_eq!(priority("ns/resynced"), Some(LOW_PRIORITY));
        for live in ["ns/created", "ns/changed", "ns/deleted"] {
            assert_eq!(priority(live), Some(DEFAULT_PRIORITY), "{live}");
        }
        handler.on_update(&pod("listed", "1"), &pod("listed", "7"));
        assert_eq!(
            priority("ns/listed"),
            Some(DEFAULT_PRIORITY),
            "a live event raises it"
        );
        queue.shutdown();
    }
}
