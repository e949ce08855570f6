//! The delaying queue: a work queue whose items can be added after a delay (E7).
//!
//! Waiting items sit in a min-heap ordered by ready time; one timer task per queue sleeps until
//! the earliest one is due (or at most 10 s, a heartbeat that costs nothing and guards against a
//! missed wake-up), then moves every due item into the work queue, earliest first. An item that
//! is already waiting keeps its **earlier** ready time: a retry scheduled sooner wins, one
//! scheduled later is dropped. In a [`PriorityQueue`](crate::PriorityQueue) a waiting item also
//! carries its priority, the highest of its delayed adds', and enters the queue with it.
//!
//! ```
//! use std::time::Duration;
//! use workqueue::DelayingQueue;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = DelayingQueue::new();
//! queue.add_after("default/web", Duration::from_millis(50));
//! assert_eq!(queue.len(), 0);
//! tokio::time::sleep(Duration::from_millis(60)).await;
//! assert_eq!(queue.len(), 1);
//! # queue.shutdown(); }
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::pin::pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::metrics::CounterMetric;
use crate::priority::AgingRate;
use crate::queue::{QueueConfig, WorkQueue};

/// How long the timer task sleeps at most, even with nothing waiting (E7.2).
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// The longest delay honoured; longer ones are treated as this.
const NEVER: Duration = Duration::from_secs(30 * 365 * 24 * 3600);

/// The items waiting for their ready time.
///
/// Invariants:
/// - **one live entry per item**: `ready` maps each waiting item to the sequence number of its
///   live heap entry; any other heap entry for the item is stale and skipped when popped;
/// - **earliest wins**: an item's live entry has the earliest ready time ever asked for it since
///   it last left the heap, and the highest priority any of those adds named (E7.4).
struct Waiting<T> {
    heap: BinaryHeap<Reverse<(Instant, u64, Entry<T>)>>,
    ready: HashMap<T, Ready>,
    next_seq: u64,
    stopped: bool,
}

/// A waiting item's live entry: its ready time and sequence number, and the priority it enters
/// the queue with (`None`: the queue's own rule for an add naming none).
#[derive(Clone, Copy)]
struct Ready {
    at: Instant,
    seq: u64,
    priority: Option<i32>,
}

/// A heap entry; ordering is decided by (ready time, sequence) alone.
struct Entry<T>(T);

impl<T> PartialEq for Entry<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<T> Eq for Entry<T> {}
impl<T> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Entry<T> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<T: Hash + Eq + Clone> Waiting<T> {
    /// Records `item` as ready at `at` with `priority`; true if it became the earliest entry.
    fn insert(&mut self, item: T, at: Instant, priority: Option<i32>) -> bool {
        let mut priority = priority;
        if let Some(existing) = self.ready.get_mut(&item) {
            priority = priority.max(existing.priority);
            existing.priority = priority;
            if existing.at <= at {
                return false;
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let earliest = self.heap.peek().is_none_or(|Reverse((t, _, _))| at < *t);
        self.ready.insert(item.clone(), Ready { at, seq, priority });
        self.heap.push(Reverse((at, seq, Entry(item))));
        earliest
    }

    /// Removes and returns the items due at `now`, earliest first, with their priorities, and
    /// the next ready time.
    fn pop_due(&mut self, now: Instant) -> (Vec<(T, Option<i32>)>, Option<Instant>) {
        let mut due = Vec::new();
        loop {
            let Some(Reverse((at, seq, Entry(item)))) = self.heap.peek() else {
                return (due, None);
            };
            let (at, live) = (*at, self.ready.get(item).is_some_and(|r| r.seq == *seq));
            if live && at > now {
                return (due, Some(at));
            }
            let Some(Reverse((_, _, Entry(item)))) = self.heap.pop() else {
                return (due, None);
            };
            if let Some(ready) = live.then(|| self.ready.remove(&item)).flatten() {
                due.push((item, ready.priority));
            }
        }
    }
}

struct Shared<T> {
    waiting: Mutex<Waiting<T>>,
    /// Wakes the timer task when a new earliest entry arrives or the queue shuts down.
    wake_timer: Arc<Notify>,
    retries: Option<Arc<dyn CounterMetric>>,
}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        // The timer task holds only a weak reference: let it see that the queue is gone.
        self.wake_timer.notify_one();
    }
}

/// A [`WorkQueue`] with [`add_after`](Self::add_after). Dereferences to the work queue.
///
/// Cloning gives another handle to the same queue. Must be created inside a tokio runtime (it
/// spawns its timer task), which it stops on [`shutdown`](Self::shutdown) or when the last handle
/// is dropped.
///
/// ```
/// use std::time::Duration;
/// use workqueue::DelayingQueue;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let queue = DelayingQueue::new();
/// queue.add_after("late", Duration::from_secs(1));
/// queue.add_after("soon", Duration::from_millis(500));
/// queue.add("now");
/// assert_eq!(queue.get().await, Some("now"));
/// assert_eq!(queue.get().await, Some("soon"));
/// assert_eq!(queue.get().await, Some("late"));
/// # }
/// ```
pub struct DelayingQueue<T> {
    queue: WorkQueue<T>,
    shared: Arc<Shared<T>>,
}

impl<T> Clone for DelayingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<T> fmt::Debug for DelayingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DelayingQueue")
            .field("queue", &self.queue)
            .field("waiting", &self.shared.waiting.lock().ready.len())
            .finish()
    }
}

impl<T> Deref for DelayingQueue<T> {
    type Target = WorkQueue<T>;
    fn deref(&self) -> &WorkQueue<T> {
        &self.queue
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> Default for DelayingQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> DelayingQueue<T> {
    /// An unnamed delaying queue without metrics.
    pub fn new() -> Self {
        Self::with_config(QueueConfig::new())
    }

    /// A delaying queue with the given options; a named queue with metrics also counts retries.
    pub fn with_config(config: QueueConfig<T>) -> Self {
        Self::with_backlog(config, None)
    }

    /// A delaying queue over a work queue handing items out by priority with `aging` (`Some`),
    /// or first in first out.
    pub(crate) fn with_backlog(config: QueueConfig<T>, aging: Option<AgingRate>) -> Self {
        let retries = match &config.name {
            Some(name) if !config.provider.is_noop() => {
                Some(config.provider.new_retries_metric(name))
            }
            _ => None,
        };
        let queue = WorkQueue::with_backlog(config, aging);
        let wake_timer = Arc::new(Notify::new());
        let shared = Arc::new(Shared {
            waiting: Mutex::new(Waiting {
                heap: BinaryHeap::new(),
                ready: HashMap::new(),
                next_seq: 0,
                stopped: false,
            }),
            wake_timer: wake_timer.clone(),
            retries,
        });
        tokio::spawn(timer_loop(
            queue.clone(),
            Arc::downgrade(&shared),
            wake_timer,
        ));
        Self { queue, shared }
    }

    /// Adds `item` once `delay` has passed; at once for a zero delay (E7.1).
    ///
    /// Ignored after shutdown. If the item is already waiting, the earlier ready time is kept.
    /// In a [`PriorityQueue`](crate::PriorityQueue) the item comes back with the priority it has
    /// now, waiting or being processed (E7.4).
    pub fn add_after(&self, item: T, delay: Duration) {
        self.add_after_with_priority(item, delay, None);
    }

    /// [`add_after`](Self::add_after) naming a priority; `None` takes the item's own (E7.4).
    pub(crate) fn add_after_with_priority(&self, item: T, delay: Duration, priority: Option<i32>) {
        if self.queue.is_shutting_down() {
            return;
        }
        if let Some(retries) = &self.shared.retries {
            retries.inc();
        }
        // Read now: by the time the delay has passed the item may be done and its priority gone.
        let priority = priority.or_else(|| self.queue.priority_of(&item));
        if delay.is_zero() {
            self.queue.add_with_priority(item, priority);
            return;
        }
        // Capped so that `now + delay` cannot overflow; thirty years is "never" for a retry.
        let at = Instant::now() + delay.min(NEVER);
        let earliest = {
            let mut waiting = self.shared.waiting.lock();
            !waiting.stopped && waiting.insert(item, at, priority)
        };
        if earliest {
            self.shared.wake_timer.notify_one();
        }
    }

    /// Shuts the work queue down (see [`WorkQueue::shutdown`]), stops the timer task and discards
    /// the waiting items (E7.3).
    pub fn shutdown(&self) {
        self.stop_timer();
        self.queue.shutdown();
    }

    /// Like [`shutdown`](Self::shutdown), then waits for in-flight items (see
    /// [`WorkQueue::shutdown_with_drain`]).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe once polled: the shutdown begins in the first poll; a dropped future only stops
    /// waiting for the drain.
    pub async fn shutdown_with_drain(&self) {
        self.stop_timer();
        self.queue.shutdown_with_drain().await;
    }

    /// Number of items waiting for their ready time.
    pub fn waiting_len(&self) -> usize {
        self.shared.waiting.lock().ready.len()
    }

    fn stop_timer(&self) {
        {
            let mut waiting = self.shared.waiting.lock();
            waiting.stopped = true;
            waiting.heap.clear();
            waiting.ready.clear();
        }
        self.shared.wake_timer.notify_one();
    }
}

/// Moves due items into the queue; sleeps until the next one is due, at most [`HEARTBEAT`].
async fn timer_loop<T: Hash + Eq + Clone + Send + Sync + 'static>(
    queue: WorkQueue<T>,
    shared: Weak<Shared<T>>,
    wake: Arc<Notify>,
) {
    loop {
        let next = {
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let now = Instant::now();
            let (due, next) = {
                let mut waiting = shared.waiting.lock();
                // Also stop when the work queue was shut down directly through `Deref`.
                if waiting.stopped || queue.is_shutting_down() {
                    waiting.stopped = true;
                    waiting.heap.clear();
                    waiting.ready.clear();
                    return;
                }
                waiting.pop_due(now)
            };
            queue.add_all(due);
            next
        };
        let heartbeat = Instant::now() + HEARTBEAT;
        let deadline = next.map_or(heartbeat, |next| next.min(heartbeat));
        let sleep = pin!(tokio::time::sleep_until(deadline));
        tokio::select! {
            () = sleep => {}
            () = wake.notified() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::FutureExt;
    use proptest::prelude::*;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    async fn sleep(d: Duration) {
        tokio::time::sleep(d).await;
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_adds_once_the_delay_has_passed_and_only_once() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        assert_eq!(q.len(), 0);
        sleep(ms(60)).await;
        assert_eq!(q.len(), 1);
        let foo = q.get().await.unwrap();
        q.done(&foo);
        sleep(Duration::from_secs(10)).await;
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_twice_keeps_the_earlier_ready_time_when_the_second_is_later() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        q.add_after("foo", ms(70));
        sleep(ms(60)).await;
        assert_eq!(q.len(), 1);
        let foo = q.get().await.unwrap();
        q.done(&foo);
        sleep(ms(20)).await;
        assert_eq!(q.len(), 0, "the 70 ms entry was merged away");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_twice_moves_the_ready_time_earlier_when_the_second_is_sooner() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        q.add_after("foo", ms(30));
        sleep(ms(40)).await;
        assert_eq!(q.len(), 1);
        let foo = q.get().await.unwrap();
        q.done(&foo);
        sleep(ms(20)).await;
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn items_become_ready_as_their_own_delays_pass() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::from_secs(1));
        q.add_after("bar", ms(50));
        sleep(ms(60)).await;
        assert_eq!(q.get().now_or_never(), Some(Some("bar")));
        assert_eq!(q.len(), 0);
        q.add_after("baz", Duration::from_secs(2));
        sleep(Duration::from_secs(1)).await;
        assert_eq!(q.get().now_or_never(), Some(Some("foo")));
        assert_eq!(q.len(), 0);
        sleep(Duration::from_secs(2)).await;
        assert_eq!(q.get().now_or_never(), Some(Some("baz")));
    }

    #[tokio::test(start_paused = true)]
    async fn due_items_are_added_earliest_first() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::from_secs(1));
        q.add_after("bar", ms(500));
        q.add_after("baz", ms(250));
        sleep(Duration::from_secs(2)).await;
        let order: Vec<_> = (0..3)
            .map(|_| q.get().now_or_never().unwrap().unwrap())
            .collect();
        assert_eq!(order, ["baz", "bar", "foo"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_huge_delay_neither_panics_nor_fires() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::MAX);
        sleep(Duration::from_secs(3600)).await;
        assert_eq!((q.len(), q.waiting_len()), (0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn zero_delay_adds_at_once() {
        let q = DelayingQueue::new();
        q.add_after("foo", Duration::ZERO);
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn ready_time_equal_to_now_is_due() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        sleep(ms(50)).await;
        tokio::task::yield_now().await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_added_directly_while_waiting_stays_waiting() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        q.add("foo");
        assert_eq!((q.len(), q.waiting_len()), (1, 1));
        let foo = q.get().await.unwrap();
        q.done(&foo);
        sleep(ms(60)).await;
        assert_eq!(q.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_discards_waiting_items_and_ignores_later_add_after() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        q.shutdown();
        assert_eq!(q.waiting_len(), 0);
        q.add_after("bar", ms(10));
        q.add_after("baz", Duration::ZERO);
        sleep(ms(100)).await;
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn shutting_down_the_inner_work_queue_also_stops_the_timer() {
        let q = DelayingQueue::new();
        q.add_after("foo", ms(50));
        WorkQueue::shutdown(&q);
        sleep(ms(60)).await;
        assert_eq!(q.waiting_len(), 0);
        assert_eq!(q.get().await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_timer_task_ends_when_the_last_handle_is_dropped() {
        let q = DelayingQueue::<u32>::new();
        q.add_after(1, Duration::from_secs(5));
        let weak = Arc::downgrade(&q.shared);
        drop(q);
        tokio::task::yield_now().await;
        assert!(weak.upgrade().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn add_after_fires_on_time_after_idle_heartbeats() {
        let q = DelayingQueue::<u32>::new();
        sleep(Duration::from_secs(35)).await;
        q.add_after(1, ms(5));
        sleep(ms(5)).await;
        tokio::task::yield_now().await;
        assert_eq!(q.len(), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Checks the `Waiting` invariants (one live entry per item, earliest wins) from the
        /// outside: every item is released exactly once, at the earliest ready time asked for it.
        #[test]
        fn invariants_one_live_entry_per_item_and_earliest_wins(
            entries in proptest::collection::vec((0u8..10, 1u64..60), 1..40)
        ) {
            crate::paused_clock::block_on_paused(async {
                let mut expected = HashMap::new();
                let q = DelayingQueue::new();
                for (item, delay) in entries {
                    q.add_after(item, ms(delay));
                    let at = expected.entry(item).or_insert(delay);
                    *at = (*at).min(delay);
                }
                for now in 1..=60u64 {
                    sleep(ms(1)).await;
                    tokio::task::yield_now().await;
                    while let Some(Some(item)) = q.get().now_or_never() {
                        assert_eq!(expected.remove(&item), Some(now), "item {item} released at {now} ms");
                        q.done(&item);
                    }
                }
                assert!(expected.is_empty(), "never released: {expected:?}");
                assert_eq!(q.waiting_len(), 0);
            });
        }
    }
}
