//! The work queue: a FIFO that hands each item to at most one worker at a time (E1–E6).
//!
//! A controller's queue holds *keys*, not events: adding a key that is already waiting changes
//! nothing, and adding a key that a worker is processing marks it dirty so that it comes back
//! once, after the worker calls [`WorkQueue::done`]. That is what lets a controller run many
//! workers without two of them reconciling the same object at once, while never missing a change.
//!
//! ```
//! use workqueue::WorkQueue;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let queue = WorkQueue::new();
//! queue.add("default/web");
//! let key = queue.get().await.unwrap();
//! queue.add("default/web"); // changed again while being processed: deferred to `done`
//! assert_eq!(queue.len(), 0);
//! queue.done(&key);
//! assert_eq!(queue.len(), 1);
//! queue.shutdown();
//! assert_eq!(queue.get().await, Some("default/web")); // queued items still drain
//! assert_eq!(queue.get().await, None);
//! # }
//! ```

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::metrics::{MetricsProvider, NoopMetricsProvider, QueueMetrics};
use crate::priority::{AgingRate, PriorityBacklog, DEFAULT_PRIORITY};

/// How often a named queue with metrics updates its unfinished-work gauges (E10.3).
pub(crate) const UNFINISHED_WORK_UPDATE_PERIOD: Duration = Duration::from_millis(500);

/// A callback run when an item is added while it is already waiting in the queue.
pub type TouchHook<T> = Arc<dyn Fn(&T) + Send + Sync>;

/// The options of a queue: its name (for metrics), a metrics provider and a touch hook.
///
/// ```
/// use std::sync::Arc;
/// use workqueue::{InMemoryMetricsProvider, QueueConfig, WorkQueue};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let config = QueueConfig::new()
///     .name("deployments")
///     .metrics_provider(Arc::new(InMemoryMetricsProvider::default()))
///     .on_touch(|key: &String| println!("{key} added again while waiting"));
/// let queue = WorkQueue::with_config(config);
/// # queue.shutdown(); }
/// ```
pub struct QueueConfig<T> {
    /// The queue's name, which metrics are kept under (a queue without one keeps none); default
    /// none.
    pub name: Option<String>,
    /// Where the metrics go; default none kept ([`NoopMetricsProvider`]).
    pub provider: Arc<dyn MetricsProvider>,
    /// Called when an item is added while it is already waiting; default none.
    pub touch: Option<TouchHook<T>>,
}

impl<T> Default for QueueConfig<T> {
    fn default() -> Self {
        Self {
            name: None,
            provider: Arc::new(NoopMetricsProvider),
            touch: None,
        }
    }
}

impl<T> Clone for QueueConfig<T> {
    fn clone(&self) -> Self {
        Self {
            name: self.name.clone(),
            provider: self.provider.clone(),
            touch: self.touch.clone(),
        }
    }
}

impl<T> fmt::Debug for QueueConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueConfig")
            .field("name", &self.name)
            .field("metrics", &!self.provider.is_noop())
            .field("touch", &self.touch.is_some())
            .finish()
    }
}

impl<T> QueueConfig<T> {
    /// An unnamed queue without metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the queue; metrics are recorded only for a named queue (E10.1).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets where the queue's metrics go (default: [`NoopMetricsProvider`]).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.provider = provider;
        self
    }

    /// Calls `hook` when an item is added while already waiting in the queue (not while it is
    /// being processed): client-go's `Touch`, a hook for priority queues (E2.2).
    ///
    /// The hook runs under the queue's lock: keep it cheap and do not call the queue from it.
    pub fn on_touch(mut self, hook: impl Fn(&T) + Send + Sync + 'static) -> Self {
        self.touch = Some(Arc::new(hook));
        self
    }
}

/// The waiting items in the order they are handed out: first in first out for a [`WorkQueue`],
/// by priority with aging for a [`PriorityQueue`](crate::PriorityQueue) (`priority.rs`). The
/// per-key rules (dirty, processing) are the queue's, the same for both.
enum Backlog<T> {
    Fifo(VecDeque<T>),
    Priority(PriorityBacklog<T>),
}

impl<T> Backlog<T> {
    fn len(&self) -> usize {
        match self {
            Backlog::Fifo(queue) => queue.len(),
            Backlog::Priority(backlog) => backlog.len(),
        }
    }
}

impl<T: Hash + Eq + Clone> Backlog<T> {
    /// Queues an item that is neither waiting nor processing.
    fn push(&mut self, item: T, priority: Option<i32>) {
        match self {
            Backlog::Fifo(queue) => queue.push_back(item),
            Backlog::Priority(backlog) => backlog.push(item, priority),
        }
    }

    /// An add of an item already waiting (or, `processing`, being processed).
    fn added_again(&mut self, item: &T, priority: Option<i32>, processing: bool) {
        if let Backlog::Priority(backlog) = self {
            if processing {
                backlog.note_requeue(item, priority);
            } else {
                backlog.raise(item, priority);
            }
        }
    }

    fn pop(&mut self) -> Option<(T, i32)> {
        match self {
            Backlog::Fifo(queue) => queue.pop_front().map(|item| (item, DEFAULT_PRIORITY)),
            Backlog::Priority(backlog) => backlog.pop(),
        }
    }

    /// The item's processing is done; it is queued again if `requeue`.
    fn finish(&mut self, item: &T, requeue: bool) {
        match self {
            Backlog::Fifo(queue) if requeue => queue.push_back(item.clone()),
            Backlog::Fifo(_) => {}
            Backlog::Priority(backlog) => backlog.finish(item, requeue),
        }
    }

    #[cfg(test)]
    fn items(&self) -> Vec<&T> {
        match self {
            Backlog::Fifo(queue) => queue.iter().collect(),
            Backlog::Priority(backlog) => backlog.items().collect(),
        }
    }
}

/// Everything guarded by the queue's lock.
///
/// Invariants (E1.1), checked by `State::check_invariants` in the property and stress tests:
/// - **queued ⊆ dirty**: every item in `queue` is in `dirty`;
/// - **queued ∩ processing = ∅**: no item in `queue` is in `processing`;
/// - **queued once**: no item is in `queue` twice (`queue.len()` equals the number of dirty
///   items that are not processing);
/// - **one worker per item**: an item is in `processing` from the `get` that handed it out to
///   its `done`, and `get` never hands out an item that is in `processing`.
pub(crate) struct State<T> {
    /// Items waiting to be handed out, in order.
    queue: Backlog<T>,
    /// Items that need processing: everything queued, plus items re-added while processing.
    dirty: HashSet<T>,
    /// Items handed out to a worker and not yet done.
    processing: HashSet<T>,
    shutting_down: bool,
    drain: bool,
    /// Getters registered on `item_ready`; adds only notify when there is one.
    waiting_getters: usize,
    metrics: Option<QueueMetrics<T>>,
}

impl<T: Hash + Eq + Clone> State<T> {
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let mut seen = HashSet::new();
        for item in self.queue.items() {
            assert!(self.dirty.contains(item), "queued ⊆ dirty violated");
            assert!(
                !self.processing.contains(item),
                "queued ∩ processing = ∅ violated"
            );
            assert!(seen.insert(item), "queued once violated");
        }
        let dirty_not_processing = self
            .dirty
            .iter()
            .filter(|i| !self.processing.contains(*i))
            .count();
        assert_eq!(
            dirty_not_processing,
            self.queue.len(),
            "queued once violated"
        );
        if let Backlog::Priority(backlog) = &self.queue {
            backlog.check_invariants(&self.processing);
        }
    }
}

struct Shared<T> {
    state: Mutex<State<T>>,
    /// Wakes getters: one per new queued item, all on shutdown.
    item_ready: Notify,
    /// Wakes `shutdown_with_drain` when processing empties or drain is cancelled.
    drained: Notify,
    touch: Option<TouchHook<T>>,
    /// Whether the backlog is a priority one, readable without the lock.
    prioritized: bool,
}

/// A work queue with client-go semantics, generic over the item (usually an object key).
///
/// Cloning gives another handle to the same queue. See the [module docs](crate::queue).
///
/// ```
/// use workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let queue = WorkQueue::new();
/// queue.add("foo");
/// queue.add("bar");
/// queue.add("foo");
/// assert_eq!(queue.len(), 2);
/// # }
/// ```
pub struct WorkQueue<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for WorkQueue<T> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for WorkQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state.lock();
        f.debug_struct("WorkQueue")
            .field("len", &state.queue.len())
            .field("processing", &state.processing.len())
            .field("shutting_down", &state.shutting_down)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Default for WorkQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> WorkQueue<T> {
    /// An unnamed queue without metrics. Needs no runtime.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A queue with the given options.
    ///
    /// # Panics
    /// A named queue with a real metrics provider spawns a task that updates the
    /// unfinished-work gauges every 500 ms, so it must be created inside a tokio runtime.
    pub fn with_config(config: QueueConfig<T>) -> Self {
        Self::with_backlog(config, None)
    }

    /// A queue handing items out by priority with `aging` (`Some`), or first in first out.
    pub(crate) fn with_backlog(config: QueueConfig<T>, aging: Option<AgingRate>) -> Self {
        let name = config
            .name
            .as_deref()
            .filter(|_| !config.provider.is_noop());
        let metrics = name.map(|name| QueueMetrics::new(name, config.provider.as_ref()));
        let queue = match aging {
            None => Backlog::Fifo(VecDeque::new()),
            Some(aging) => {
                let depth = name.map(|name| config.provider.new_depth_by_priority_metric(name));
                Backlog::Priority(PriorityBacklog::new(aging, depth))
            }
        };
        let with_metrics = metrics.is_some();
        let queue = Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue,
                    dirty: HashSet::new(),
                    processing: HashSet::new(),
                    shutting_down: false,
                    drain: false,
                    waiting_getters: 0,
                    metrics,
                }),
                item_ready: Notify::new(),
                drained: Notify::new(),
                touch: config.touch,
                prioritized: aging.is_some(),
            }),
        };
        if with_metrics {
            tokio::spawn(update_unfinished_work_loop(Arc::downgrade(&queue.shared)));
        }
        queue
    }

    /// Marks `item` as needing processing (E2).
    ///
    /// Ignored after shutdown. An item already waiting is not queued twice; an item being
    /// processed is queued again when its worker calls [`done`](Self::done).
    pub fn add(&self, item: T) {
        self.add_with_priority(item, None);
    }

    /// [`add`](Self::add) naming a priority, which only a priority queue heeds.
    pub(crate) fn add_with_priority(&self, item: T, priority: Option<i32>) {
        let mut state = self.shared.state.lock();
        let pushed = Self::add_locked(&mut state, item, priority, self.shared.touch.as_ref());
        let notify = pushed && state.waiting_getters > 0;
        drop(state);
        if notify {
            self.shared.item_ready.notify_one();
        }
    }

    /// Adds several items under one lock, in order, as if by [`add`](Self::add) each (used by
    /// the delaying queue's timer task to release a batch of due items).
    pub(crate) fn add_all(&self, items: impl IntoIterator<Item = (T, Option<i32>)>) {
        let mut wake = 0;
        {
            let mut state = self.shared.state.lock();
            for (item, priority) in items {
                wake += usize::from(Self::add_locked(
                    &mut state,
                    item,
                    priority,
                    self.shared.touch.as_ref(),
                ));
            }
            wake = wake.min(state.waiting_getters);
        }
        for _ in 0..wake {
            self.shared.item_ready.notify_one();
        }
    }

    /// The body of `add`; true if an item was pushed onto the queue.
    fn add_locked(
        state: &mut State<T>,
        item: T,
        priority: Option<i32>,
        touch: Option<&TouchHook<T>>,
    ) -> bool {
        if state.shutting_down {
            return false;
        }
        let processing = state.processing.contains(&item);
        if state.dirty.contains(&item) {
            state.queue.added_again(&item, priority, processing);
            if !processing {
                if let Some(touch) = touch {
                    touch(&item);
                }
            }
            return false;
        }
        if let Some(metrics) = &mut state.metrics {
            metrics.add(&item);
        }
        if processing {
            state.queue.added_again(&item, priority, true);
            state.dirty.insert(item);
            return false;
        }
        state.dirty.insert(item.clone());
        state.queue.push(item, priority);
        true
    }

    /// The priority an add naming none would give `item` now (its own while it waits or is
    /// processed), so that a delayed add can carry it; `None` for a first-in-first-out queue or
    /// an item the queue does not hold.
    pub(crate) fn priority_of(&self, item: &T) -> Option<i32> {
        if !self.shared.prioritized {
            return None;
        }
        match &self.shared.state.lock().queue {
            Backlog::Priority(backlog) => backlog.priority_of(item),
            Backlog::Fifo(_) => None,
        }
    }

    /// Waits for the next item and marks it as processing; `None` once the queue is shut down
    /// and empty (E3).
    ///
    /// The caller must call [`done`](Self::done) with the item when finished with it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: an item is taken, and marked processing, only in the poll that returns it; a future
    /// dropped while waiting takes nothing.
    pub async fn get(&self) -> Option<T> {
        self.get_with_priority().await.map(|(item, _)| item)
    }

    /// [`get`](Self::get), with the priority the item was queued with ([`DEFAULT_PRIORITY`] in a
    /// first-in-first-out queue). Cancel safe, as `get`.
    pub(crate) async fn get_with_priority(&self) -> Option<(T, i32)> {
        if let Some(answer) = self.try_get() {
            return answer;
        }
        loop {
            let mut notified = pin!(self.shared.item_ready.notified());
            // Registered before the check, so neither an add nor a shutdown can slip between.
            notified.as_mut().enable();
            {
                let mut state = self.shared.state.lock();
                if let Some(answer) = Self::take(&mut state) {
                    return answer;
                }
                state.waiting_getters += 1;
            }
            let _unregister = DecrementOnDrop(&self.shared);
            notified.await;
        }
    }

    /// `Some(answer)` if `get` would return at once.
    fn try_get(&self) -> Option<Option<(T, i32)>> {
        Self::take(&mut self.shared.state.lock())
    }

    fn take(state: &mut State<T>) -> Option<Option<(T, i32)>> {
        match state.queue.pop() {
            Some((item, priority)) => {
                state.dirty.remove(&item);
                if let Some(metrics) = &mut state.metrics {
                    metrics.get(&item);
                }
                state.processing.insert(item.clone());
                Some(Some((item, priority)))
            }
            None if state.shutting_down => Some(None),
            None => None,
        }
    }

    /// Marks `item` as done processing (E4). If it was added again meanwhile, it is queued
    /// again, even during shutdown.
    ///
    /// Call it only for an item returned by [`get`](Self::get) (E4.2).
    pub fn done(&self, item: &T) {
        let mut state = self.shared.state.lock();
        if let Some(metrics) = &mut state.metrics {
            metrics.done(item);
        }
        state.processing.remove(item);
        let requeue = state.dirty.contains(item);
        state.queue.finish(item, requeue);
        if requeue {
            let notify = state.waiting_getters > 0;
            drop(state);
            if notify {
                self.shared.item_ready.notify_one();
            }
        } else if state.processing.is_empty() && state.drain {
            drop(state);
            self.shared.drained.notify_waiters();
        }
    }

    /// Number of items waiting to be handed out; excludes items being processed, even those
    /// added again meanwhile (E5).
    pub fn len(&self) -> usize {
        self.shared.state.lock().queue.len()
    }

    /// True when no item waits to be handed out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stops accepting items and wakes every waiting `get`; returns at once (E6.1).
    ///
    /// Items still queued keep being handed out; `get` returns `None` once the queue is empty.
    /// Also releases a pending [`shutdown_with_drain`](Self::shutdown_with_drain). Idempotent.
    pub fn shutdown(&self) {
        {
            let mut state = self.shared.state.lock();
            state.shutting_down = true;
            state.drain = false;
        }
        self.shared.item_ready.notify_waiters();
        self.shared.drained.notify_waiters();
    }

    /// Like [`shutdown`](Self::shutdown), then waits until no item is being processed (E6.2).
    ///
    /// Workers must keep calling `done`, or this waits forever. A concurrent `shutdown`
    /// releases the wait.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe once polled: the shutdown begins in the first poll; a dropped future only stops
    /// waiting for the drain.
    pub async fn shutdown_with_drain(&self) {
        {
            let mut state = self.shared.state.lock();
            state.shutting_down = true;
            state.drain = true;
        }
        self.shared.item_ready.notify_waiters();
        loop {
            let mut drained = pin!(self.shared.drained.notified());
            drained.as_mut().enable();
            {
                let state = self.shared.state.lock();
                if !state.drain || state.processing.is_empty() {
                    return;
                }
            }
            drained.await;
        }
    }

    /// True once [`shutdown`](Self::shutdown) or `shutdown_with_drain` was called (E6.3).
    pub fn is_shutting_down(&self) -> bool {
        self.shared.state.lock().shutting_down
    }

    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.shared.state.lock().check_invariants();
    }

    #[cfg(test)]
    pub(crate) fn has_metrics(&self) -> bool {
        self.shared.state.lock().metrics.is_some()
    }

    #[cfg(test)]
    pub(crate) fn update_unfinished_work(&self) {
        if let Some(metrics) = &self.shared.state.lock().metrics {
            metrics.update_unfinished_work();
        }
    }
}

/// Unregisters a getter when its wait ends or its `get` future is dropped.
struct DecrementOnDrop<'a, T>(&'a Shared<T>);

impl<T> Drop for DecrementOnDrop<'_, T> {
    fn drop(&mut self) {
        self.0.state.lock().waiting_getters -= 1;
    }
}

/// Updates the unfinished-work gauges every 500 ms until the queue shuts down or is dropped.
async fn update_unfinished_work_loop<T: Hash + Eq + Clone + Send + 'static>(
    shared: std::sync::Weak<Shared<T>>,
) {
    let mut ticker = tokio::time::interval_at(
        tokio::time::Instant::now() + UNFINISHED_WORK_UPDATE_PERIOD,
        UNFINISHED_WORK_UPDATE_PERIOD,
    );
    loop {
        ticker.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let state = shared.state.lock();
        if state.shutting_down {
            return;
        }
        if let Some(metrics) = &state.metrics {
            metrics.update_unfinished_work();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::FutureExt;
    use proptest::prelude::*;

    use super::*;

    /// `get` without waiting: `None` if it would block.
    fn get_now<T: Hash + Eq + Clone + Send + Sync + 'static>(
        q: &WorkQueue<T>,
    ) -> Option<Option<T>> {
        q.get().now_or_never()
    }

    #[test]
    fn adding_a_waiting_item_again_does_not_queue_it_twice() {
        let q = WorkQueue::new();
        q.add("foo");
        q.add("bar");
        q.add("foo");
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn adding_twice_while_queued_gives_one_get_and_records_a_touch() {
        let touches = Arc::new(AtomicUsize::new(0));
        let counter = touches.clone();
        let q = WorkQueue::with_config(QueueConfig::new().on_touch(move |_: &&str| {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        q.add("foo");
        q.add("foo");
        assert_eq!(touches.load(Ordering::SeqCst), 1);
        assert_eq!(get_now(&q), Some(Some("foo")));
        assert_eq!(get_now(&q), None);
    }

    #[tokio::test(start_paused = true)]
    async fn adding_while_processing_defers_to_done_and_never_hands_out_twice() {
        let touches = Arc::new(AtomicUsize::new(0));
        let counter = touches.clone();
        let q = WorkQueue::with_config(QueueConfig::new().on_touch(move |_: &&str| {
            counter.fetch_add(1, Ordering::SeqCst);
        }));
        q.add("foo");
        let foo = q.get().await.unwrap();
        q.add("foo");
        q.add("foo");
        assert_eq!(
            touches.load(Ordering::SeqCst),
            0,
            "no touch while processing"
        );
        assert_eq!(q.len(), 0);
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        assert!(
            !second.is_finished(),
            "second worker blocks until done(foo)"
        );
        q.done(&foo);
        assert_eq!(second.await.unwrap(), Some("foo"));
        assert_eq!(q.len(), 0);
    }

    #[tokio::test]
    async fn done_requeues_an_item_added_while_processing() {
        let q = WorkQueue::new();
        q.add("foo");
        let foo = q.get().await.unwrap();
        q.add("foo");
        q.done(&foo);
        assert_eq!(q.get().await, Some("foo"));
        q.done(&"foo");
        assert_eq!(q.len(), 0);
    }

    #[test]
    fn len_counts_only_waiting_items() {
        let q = WorkQueue::new();
        q.add(1);
        q.add(2);
        let one = get_now(&q).unwrap().unwrap();
        q.add(one);
        assert_eq!(
            q.len(),
            1,
            "processing and dirty-while-processing items are not counted"
        );
        q.done(&one);
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn add_after_shutdown_is_ignored() {
        let q = WorkQueue::new();
        q.shutdown();
        q.add("foo");
        assert_eq!(q.len(), 0);
        assert_eq!(get_now(&q), Some(None));
    }

    #[tokio::test]
    async fn get_keeps_handing_out_queued_items_after_shutdown() {
        let q = WorkQueue::new();
        q.add("foo");
        q.add("bar");
        q.shutdown();
        assert!(q.is_shutting_down());
        assert_eq!(q.get().await, Some("foo"));
        assert_eq!(q.get().await, Some("bar"));
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_wakes_a_blocked_get() {
        let q = WorkQueue::<u32>::new();
        let getter = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        q.shutdown();
        q.shutdown(); // idempotent
        assert_eq!(getter.await.unwrap(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_with_drain_waits_for_done_of_processing_items() {
        let q = WorkQueue::new();
        q.add("foo");
        q.add("bar");
        let foo = q.get().await.unwrap();
        let bar = q.get().await.unwrap();
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(q.get().await, None);
        assert!(!drain.is_finished());
        q.done(&foo);
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.done(&bar);
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_returns_without_waiting_for_processing_items() {
        let q = WorkQueue::new();
        q.add("foo");
        q.add("bar");
        let _foo = q.get().await.unwrap();
        let _bar = q.get().await.unwrap();
        q.shutdown();
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_releases_a_pending_drain() {
        let q = WorkQueue::new();
        q.add("foo");
        let _foo = q.get().await.unwrap();
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.shutdown();
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn drain_hands_out_an_item_requeued_by_done_before_reporting_shutdown() {
        let q = WorkQueue::new();
        q.add("foo");
        let foo = q.get().await.unwrap();
        q.add("foo");
        let drain = tokio::spawn({
            let q = q.clone();
            async move { q.shutdown_with_drain().await }
        });
        tokio::task::yield_now().await;
        assert_eq!(q.get().await, None);
        q.done(&foo);
        assert_eq!(q.get().await, Some("foo"));
        tokio::task::yield_now().await;
        assert!(!drain.is_finished());
        q.done(&"foo");
        assert_eq!(q.get().await, None);
        drain.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_get_does_not_swallow_the_wakeup_for_another_getter() {
        let q = WorkQueue::new();
        let dropped = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        let kept = tokio::spawn({
            let q = q.clone();
            async move { q.get().await }
        });
        tokio::task::yield_now().await;
        dropped.abort();
        let _ = dropped.await;
        q.add(7);
        assert_eq!(kept.await.unwrap(), Some(7));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8),
        Get,
        Done(usize),
        Shutdown,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..8).prop_map(Op::Add),
            3 => Just(Op::Get),
            3 => (0usize..8).prop_map(Op::Done),
            1 => Just(Op::Shutdown),
        ]
    }

    proptest! {
        /// Checks the E1.1 invariants (queued ⊆ dirty, queued ∩ processing = ∅, queued once, one
        /// worker per item) after every step of random add/get/done/shutdown sequences.
        #[test]
        fn invariants_queued_subset_dirty_disjoint_from_processing_queued_once_one_worker_per_item(
            ops in proptest::collection::vec(op(), 1..200)
        ) {
            let q = WorkQueue::new();
            let mut held: Vec<u8> = Vec::new();
            for op in ops {
                match op {
                    Op::Add(k) => q.add(k),
                    Op::Get => {
                        if let Some(Some(k)) = get_now(&q) {
                            prop_assert!(!held.contains(&k), "item {} handed to two workers", k);
                            held.push(k);
                        }
                    }
                    Op::Done(i) => {
                        if !held.is_empty() {
                            let k = held.swap_remove(i % held.len());
                            q.done(&k);
                        }
                    }
                    Op::Shutdown => q.shutdown(),
                }
                q.check_invariants();
            }
        }
    }
}
