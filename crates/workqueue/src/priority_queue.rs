//! The priority queue: a rate-limiting queue that hands out higher priorities first, with aging
//! so that no priority starves (controller-runtime's `priorityqueue`, rules E12).
//!
//! A controller starting up, or resyncing, enqueues every object it knows; with a first in first
//! out queue, a change a user just made waits behind all of them. controller-runtime's priority
//! queue gives those objects [`LOW_PRIORITY`](crate::LOW_PRIORITY) and live events
//! [`DEFAULT_PRIORITY`](crate::DEFAULT_PRIORITY), and serves the higher first. Served strictly,
//! a low item waits for as long as high ones keep coming; here a waiting item's effective
//! priority rises with its wait ([`AgingRate`]), so it is overtaken only by items queued within
//! `(q − p)·A` after it (PQ3, the bound and its proof in [`priority`](crate::priority)).
//!
//! Everything else is the queues below, unchanged: a [`PriorityQueue`] *is* a
//! [`RateLimitingQueue`] (it dereferences to one) whose work queue orders its waiting items by
//! priority. So the per-key rules hold as in [`WorkQueue`](crate::WorkQueue) (one worker per
//! key, a key added while processed comes back once after `done`, a waiting key is queued once),
//! `add_after` and `add_rate_limited` go through the delaying queue's timer and the limiter, and
//! the metrics are the same, with the depth by priority beside them. A key added again while it
//! waits keeps its place in time and takes the higher priority; a key put back later
//! (`add_after`, `add_rate_limited`, or added while processed) keeps its priority unless the add
//! names another.
//!
//! ```
//! use std::time::Duration;
//! use workqueue::{default_controller_rate_limiter, AddOpts, PriorityQueue, LOW_PRIORITY};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = PriorityQueue::new(default_controller_rate_limiter());
//! queue.add_with_opts(AddOpts::new().priority(LOW_PRIORITY), "default/listed".to_string());
//! queue.add("default/changed".to_string()); // a live event: the default priority, 0
//! assert_eq!(queue.get_with_priority().await, Some(("default/changed".to_string(), 0)));
//!
//! let (key, priority) = queue.get_with_priority().await.unwrap();
//! assert_eq!(priority, LOW_PRIORITY);
//! queue.add_rate_limited(key.clone()); // reconcile failed: back in 5 ms, still low
//! queue.done(&key);
//! assert_eq!(queue.get_with_priority().await, Some((key, LOW_PRIORITY)));
//! # }
//! ```

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::MetricsProvider;
use crate::priority::AgingRate;
use crate::queue::QueueConfig;
use crate::rate_limiter::RateLimiter;
use crate::rate_limiting::RateLimitingQueue;

/// How one add is made (controller-runtime's `AddOpts`): at once or later, rate limited or
/// not, and with which priority.
///
/// ```
/// use std::time::Duration;
/// use workqueue::{AddOpts, LOW_PRIORITY};
///
/// let opts = AddOpts::new().priority(LOW_PRIORITY).after(Duration::from_secs(1));
/// assert_eq!(opts.priority, Some(LOW_PRIORITY));
/// assert!(!opts.rate_limited);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddOpts {
    /// Add the item once this has passed (through the delaying queue); default zero, at once.
    pub after: Duration,
    /// Add the item after the delay the rate limiter gives it, or after `after` if that is
    /// shorter (and not zero); default false.
    pub rate_limited: bool,
    /// The item's priority, higher served first. `None` (the default) keeps the priority of an
    /// item the queue holds, waiting or being processed, and gives
    /// [`DEFAULT_PRIORITY`](crate::DEFAULT_PRIORITY) to another (E12.2).
    pub priority: Option<i32>,
}

impl AddOpts {
    /// An add at once, not rate limited, keeping the item's priority.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the item once `after` has passed.
    pub fn after(mut self, after: Duration) -> Self {
        self.after = after;
        self
    }

    /// Adds the item after the rate limiter's delay for it.
    pub fn rate_limited(mut self, rate_limited: bool) -> Self {
        self.rate_limited = rate_limited;
        self
    }

    /// Gives the item `priority` (higher served first).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = Some(priority);
        self
    }
}

/// The options of a priority queue: the work queue's ([`QueueConfig`]) and the aging rate.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use workqueue::{
///     default_controller_rate_limiter, AgingRate, InMemoryMetricsProvider, PriorityQueue,
///     PriorityQueueConfig,
/// };
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let config = PriorityQueueConfig::new()
///     .name("deployments")
///     .metrics_provider(Arc::new(InMemoryMetricsProvider::default()))
///     .aging(AgingRate::one_level_per(Duration::from_secs(1)));
/// let queue: PriorityQueue<String> =
///     PriorityQueue::with_config(default_controller_rate_limiter(), config);
/// # queue.shutdown(); }
/// ```
pub struct PriorityQueueConfig<T> {
    /// The work queue's name, metrics provider and touch hook; default [`QueueConfig::new`].
    pub queue: QueueConfig<T>,
    /// How fast a waiting item's effective priority rises; default one level per 100 ms.
    pub aging: AgingRate,
}

impl<T> Default for PriorityQueueConfig<T> {
    fn default() -> Self {
        Self {
            queue: QueueConfig::default(),
            aging: AgingRate::default(),
        }
    }
}

impl<T> Clone for PriorityQueueConfig<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            aging: self.aging,
        }
    }
}

impl<T> fmt::Debug for PriorityQueueConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityQueueConfig")
            .field("queue", &self.queue)
            .field("aging", &self.aging)
            .finish()
    }
}

impl<T> PriorityQueueConfig<T> {
    /// An unnamed queue without metrics, aging at the default rate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the work queue's options.
    pub fn queue(mut self, queue: QueueConfig<T>) -> Self {
        self.queue = queue;
        self
    }

    /// Names the queue ([`QueueConfig::name`]).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.queue = self.queue.name(name);
        self
    }

    /// Sets where the metrics go ([`QueueConfig::metrics_provider`]).
    pub fn metrics_provider(mut self, provider: Arc<dyn MetricsProvider>) -> Self {
        self.queue = self.queue.metrics_provider(provider);
        self
    }

    /// Sets the aging rate; [`AgingRate::ZERO`] for strict priority order.
    pub fn aging(mut self, aging: AgingRate) -> Self {
        self.aging = aging;
        self
    }
}

/// A [`RateLimitingQueue`] that hands out higher priorities first, first in first out within a
/// priority, with aging. Dereferences to the rate-limiting queue. See the
/// [module docs](crate::priority_queue).
///
/// Cloning gives another handle to the same queue. Must be created inside a tokio runtime.
///
/// ```
/// use workqueue::{default_controller_rate_limiter, AddOpts, PriorityQueue, LOW_PRIORITY};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let queue = PriorityQueue::new(default_controller_rate_limiter());
/// queue.add_with_opts(AddOpts::new().priority(LOW_PRIORITY), "a");
/// queue.add_with_opts(AddOpts::new().priority(LOW_PRIORITY), "b");
/// queue.add_with_opts(AddOpts::new().priority(10), "b"); // keeps its place, takes 10
/// queue.add("c");
/// assert_eq!(queue.get_with_priority().await, Some(("b", 10)));
/// assert_eq!(queue.get().await, Some("c"));
/// assert_eq!(queue.get().await, Some("a"));
/// # }
/// ```
pub struct PriorityQueue<T> {
    queue: RateLimitingQueue<T>,
}

impl<T> Clone for PriorityQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
        }
    }
}

impl<T> fmt::Debug for PriorityQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PriorityQueue")
            .field("queue", &self.queue)
            .finish()
    }
}

impl<T> Deref for PriorityQueue<T> {
    type Target = RateLimitingQueue<T>;
    fn deref(&self) -> &RateLimitingQueue<T> {
        &self.queue
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> PriorityQueue<T> {
    /// An unnamed queue without metrics, aging at the default rate, using `limiter` for
    /// rate-limited adds.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, PriorityQueueConfig::new())
    }

    /// A queue with the given options, using `limiter` for rate-limited adds.
    pub fn with_config(
        limiter: impl RateLimiter<T> + 'static,
        config: PriorityQueueConfig<T>,
    ) -> Self {
        Self {
            queue: RateLimitingQueue::with_backlog(limiter, config.queue, Some(config.aging)),
        }
    }

    /// Adds `item` as `opts` say (controller-runtime's `AddWithOpts`, E12.1–E12.3).
    ///
    /// With neither `after` nor `rate_limited` it is [`add`](crate::WorkQueue::add) with a
    /// priority. Otherwise it goes through the delaying queue (and counts a retry): after the
    /// limiter's delay if rate limited (`after` instead when shorter and not zero), else after
    /// `after`; the item then enters with the priority named, or the one it has now.
    pub fn add_with_opts(&self, opts: AddOpts, item: T) {
        if !opts.rate_limited && opts.after.is_zero() {
            self.queue.add_with_priority(item, opts.priority);
            return;
        }
        let mut after = opts.after;
        if opts.rate_limited {
            let limited = self.queue.when(&item);
            if after.is_zero() || limited < after {
                after = limited;
            }
        }
        self.queue
            .add_after_with_priority(item, after, opts.priority);
    }

    /// Waits for the next item, as [`get`](crate::WorkQueue::get), and answers its priority
    /// too: the one it was queued with, not the higher one aging gave it.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe, as `get`: an item is taken only in the poll that returns it.
    pub async fn get_with_priority(&self) -> Option<(T, i32)> {
        self.queue.get_with_priority().await
    }

    /// The priority `item` waits with, or, while it is processed, the one it comes back with if
    /// added again without naming one; `None` if the queue holds neither (an item waiting for
    /// its delay is not yet held).
    pub fn priority_of(&self, item: &T) -> Option<i32> {
        self.queue.priority_of(item)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use futures::FutureExt;
    use proptest::prelude::*;
    use tokio::sync::oneshot;
    use tokio::time::Instant;

    use super::*;
    use crate::priority::{DEFAULT_PRIORITY, LOW_PRIORITY};
    use crate::{InMemoryMetricsProvider, ItemExponentialFailureRateLimiter};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn limiter<T: Hash + Eq + Clone + Send + Sync + 'static>() -> impl RateLimiter<T> {
        ItemExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1))
    }

    fn strict<T: Hash + Eq + Clone + Send + Sync + 'static>() -> PriorityQueue<T> {
        PriorityQueue::with_config(limiter(), PriorityQueueConfig::new().aging(AgingRate::ZERO))
    }

    fn low() -> AddOpts {
        AddOpts::new().priority(LOW_PRIORITY)
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiting_key_added_again_higher_keeps_its_place_and_takes_the_priority() {
        let q = strict();
        q.add_with_opts(low(), "a");
        q.add_with_opts(AddOpts::new().priority(5), "b");
        q.add_with_opts(low(), "c");
        q.add_with_opts(AddOpts::new().priority(5), "a");
        q.add("c"); // names no priority: c stays low
        q.add_with_opts(AddOpts::new().priority(-500), "b"); // lower: b stays 5
        assert_eq!(q.len(), 3, "duplicates collapse");
        assert_eq!(
            q.get_with_priority().await,
            Some(("a", 5)),
            "a was first in time"
        );
        assert_eq!(q.get_with_priority().await, Some(("b", 5)));
        assert_eq!(q.get_with_priority().await, Some(("c", LOW_PRIORITY)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_added_while_processing_comes_back_once_after_done_with_its_priority() {
        let q = strict();
        q.add_with_opts(low(), "a");
        let a = q.get().await.unwrap();
        q.add("a");
        q.add("a");
        q.add_with_opts(AddOpts::new().priority(3), "b");
        assert_eq!(q.len(), 1, "a is not queued while processed");
        let second = tokio::spawn({
            let q = q.clone();
            async move {
                let b = q.get().await.unwrap();
                q.done(&b);
                q.get_with_priority().await
            }
        });
        tokio::task::yield_now().await;
        assert!(!second.is_finished(), "a is not handed to a second worker");
        q.done(&a);
        assert_eq!(
            second.await.unwrap(),
            Some(("a", LOW_PRIORITY)),
            "once, still low"
        );
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_and_add_after_put_the_key_back_with_its_priority() {
        let q = strict();
        q.add_with_opts(low(), "listed");
        let key = q.get().await.unwrap();
        q.add_rate_limited(key); // the limiter's 5 ms
        q.add_after("other", ms(5));
        q.done(&key);
        assert_eq!((q.len(), q.waiting_len()), (0, 2));
        tokio::time::sleep(ms(5)).await;
        assert_eq!(
            q.get_with_priority().await,
            Some(("other", DEFAULT_PRIORITY))
        );
        assert_eq!(q.get_with_priority().await, Some(("listed", LOW_PRIORITY)));
        assert_eq!(q.num_requeues(&"listed"), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn add_with_opts_delays_by_the_shorter_of_after_and_the_limiter_and_names_a_priority() {
        let q = strict();
        q.add_with_opts(AddOpts::new().after(ms(50)).priority(7), "late");
        q.add_with_opts(AddOpts::new().after(ms(50)).priority(-7), "late"); // highest wins
        q.add_with_opts(
            AddOpts::new().after(ms(50)).rate_limited(true).priority(-1),
            "limited",
        );
        q.add_with_opts(AddOpts::new().after(ms(1)).rate_limited(true), "after");
        tokio::time::sleep(ms(1)).await;
        tokio::task::yield_now().await;
        assert_eq!(q.get().now_or_never(), Some(Some("after")), "1 ms < 5 ms");
        tokio::time::sleep(ms(4)).await;
        tokio::task::yield_now().await;
        assert_eq!(
            q.get_with_priority().now_or_never(),
            Some(Some(("limited", -1)))
        );
        tokio::time::sleep(ms(45)).await;
        tokio::task::yield_now().await;
        assert_eq!(
            q.get_with_priority().now_or_never(),
            Some(Some(("late", 7)))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_count_adds_latency_retries_and_depth_by_priority() {
        let provider = Arc::new(InMemoryMetricsProvider::default());
        let q = PriorityQueue::with_config(
            limiter(),
            PriorityQueueConfig::new()
                .name("pq")
                .metrics_provider(provider.clone())
                .aging(AgingRate::ZERO),
        );
        let by_priority = || provider.depth_by_priority("pq").unwrap();
        q.add_with_opts(low(), "a");
        q.add_with_opts(low(), "b");
        q.add("c");
        assert_eq!(by_priority(), [(LOW_PRIORITY, 2), (0, 1)].into());
        q.add_with_opts(AddOpts::new().priority(0), "b");
        assert_eq!(by_priority(), [(LOW_PRIORITY, 1), (0, 2)].into());
        tokio::time::advance(ms(2)).await;
        let b = q.get().await.unwrap();
        assert_eq!(b, "b");
        q.add_rate_limited(b);
        q.done(&b);
        let m = provider.snapshot("pq").unwrap();
        assert_eq!((m.adds, m.depth, m.retries), (3, 2, 1));
        assert_eq!(m.queue_latency, vec![0.002]);
        assert_eq!(m.work_duration, vec![0.0]);
        assert_eq!(by_priority(), [(LOW_PRIORITY, 1), (0, 1)].into());
        q.shutdown();
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, Option<i8>),
        Get,
        Done(usize),
        Wait(u8),
        Shutdown,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..8, proptest::option::of(-3i8..3)).prop_map(|(k, p)| Op::Add(k, p)),
            3 => Just(Op::Get),
            3 => (0usize..8).prop_map(Op::Done),
            1 => (0u8..20).prop_map(Op::Wait),
            1 => Just(Op::Shutdown),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// The work queue's E1.1 invariants and PQ1 and PQ4 (no key twice in flight, in flight
        /// exactly while processing) after every step of random adds with priorities, gets,
        /// dones, waits and shutdowns on a priority queue.
        #[test]
        fn invariants_e1_1_pq1_pq4_no_key_twice_in_flight(
            ops in proptest::collection::vec(op(), 1..200)
        ) {
            crate::paused_clock::block_on_paused(async {
                let q = PriorityQueue::with_config(
                    limiter(),
                    PriorityQueueConfig::new().aging(AgingRate::one_level_per(ms(3))),
                );
                let mut held: Vec<u8> = Vec::new();
                for op in ops {
                    match op {
                        Op::Add(k, p) => {
                            let opts = AddOpts { priority: p.map(i32::from), ..AddOpts::new() };
                            q.add_with_opts(opts, k);
                        }
                        Op::Get => {
                            if let Some(Some((k, p))) = q.get_with_priority().now_or_never() {
                                assert!(!held.contains(&k), "PQ4: {k} handed to two workers");
                                assert_eq!(q.priority_of(&k), Some(p));
                                held.push(k);
                            }
                        }
                        Op::Done(i) => {
                            if !held.is_empty() {
                                let k = held.swap_remove(i % held.len());
                                q.done(&k);
                            }
                        }
                        Op::Wait(n) => tokio::time::advance(ms(u64::from(n))).await,
                        Op::Shutdown => q.shutdown(),
                    }
                    q.check_invariants();
                }
            });
        }
    }

    // The starvation pair: one worker taking WORK per item, and a flood of live events, one
    // every FLOOD_EVERY, faster than the worker, that never stops. A low item is added at
    // LOW_AT, between two flood items, when B items wait ahead of it.
    const WORK: Duration = Duration::from_millis(3);
    const FLOOD_EVERY: Duration = Duration::from_millis(2);
    const LOW_AT: Duration = Duration::from_micros(301_500);
    /// One level per 10 ms: a low item (−100) is overtaken by live events (0) for 1 s.
    const STEP: Duration = Duration::from_millis(10);

    /// Adds a new live key every `FLOOD_EVERY`, for ever.
    async fn flood(q: PriorityQueue<String>) {
        for n in 0u64.. {
            q.add_with_opts(
                AddOpts::new().priority(DEFAULT_PRIORITY),
                format!("live-{n}"),
            );
            tokio::time::sleep(FLOOD_EVERY).await;
        }
    }

    /// Processes keys, `WORK` each, counting them in `served`; says when `low` is handed out and
    /// how many keys were handed out before it.
    async fn worker(
        q: PriorityQueue<String>,
        served: Arc<AtomicUsize>,
        low_served: oneshot::Sender<(Instant, usize)>,
    ) {
        let mut low_served = Some(low_served);
        while let Some(key) = q.get().await {
            let before = served.fetch_add(1, Ordering::SeqCst);
            if key == "low" {
                if let Some(tx) = low_served.take() {
                    let _ = tx.send((Instant::now(), before));
                }
            }
            tokio::time::sleep(WORK).await;
            q.done(&key);
        }
    }

    struct Run {
        queue: PriorityQueue<String>,
        low_added: Instant,
        /// Keys waiting when the low one was added, and the one being processed.
        ahead: usize,
        /// Keys handed out before the low one was added.
        served_then: usize,
        low_served: oneshot::Receiver<(Instant, usize)>,
    }

    async fn flood_then_add_a_low_item(aging: AgingRate) -> Run {
        let start = Instant::now();
        let queue: PriorityQueue<String> =
            PriorityQueue::with_config(limiter(), PriorityQueueConfig::new().aging(aging));
        let (tx, low_served) = oneshot::channel();
        let served = Arc::new(AtomicUsize::new(0));
        tokio::spawn(flood(queue.clone()));
        tokio::spawn(worker(queue.clone(), served.clone(), tx));
        tokio::time::sleep_until(start + LOW_AT).await;
        let ahead = queue.len() + 1;
        queue.add_with_opts(low(), "low".to_string());
        Run {
            queue,
            low_added: Instant::now(),
            ahead,
            served_then: served.load(Ordering::SeqCst),
            low_served,
        }
    }

    /// PQ3 under a flood that never stops: the low item is overtaken only by the keys ahead of
    /// it and those queued in the `(0 − (−100))·STEP` = 1 s after it, so it is handed out within
    /// `W ≤ (B + λ·(q − p)·A) / μ` (λ = 1/FLOOD_EVERY, μ = 1/WORK), and the flood goes on.
    #[tokio::test(start_paused = true)]
    async fn aging_bound_pq3_a_low_item_is_served_within_the_bound_under_an_endless_flood() {
        let aging = AgingRate::one_level_per(STEP);
        let mut run = flood_then_add_a_low_item(aging).await;
        let window = aging.overtaken_for(LOW_PRIORITY, DEFAULT_PRIORITY).unwrap();
        assert_eq!(window, Duration::from_secs(1));
        let flood_in_window = (window.as_nanos() / FLOOD_EVERY.as_nanos()) as usize;
        let overtaking = run.ahead + flood_in_window;
        let bound = WORK * overtaking as u32;
        let (served_at, served_before) = tokio::time::timeout(bound * 30, &mut run.low_served)
            .await
            .expect("the low item was never handed out")
            .unwrap();
        let waited = served_at - run.low_added;
        assert!(
            waited <= bound,
            "waited {waited:?}, bound {bound:?} ({} ahead + {flood_in_window} in the window)",
            run.ahead
        );
        let overtook = served_before - run.served_then;
        assert!(
            overtook < overtaking,
            "{overtook} keys went first; at most {} were ahead or came in the window",
            overtaking - 1
        );
        assert!(run.ahead > 40, "a backlog was there when the low item came");
        let backlog = run.queue.len();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(run.queue.len() > backlog + 100, "the flood goes on");
        run.queue.shutdown();
    }

    /// Without aging the same flood starves the low item: after 30 times the bound above it still
    /// waits, with its priority, while the worker has served thousands of live keys. This is what
    /// the test above would see if aging were broken.
    #[tokio::test(start_paused = true)]
    async fn without_aging_the_same_flood_starves_the_low_item() {
        let mut run = flood_then_add_a_low_item(AgingRate::ZERO).await;
        let bound = WORK * (run.ahead + 500) as u32;
        let waited = tokio::time::timeout(bound * 30, &mut run.low_served).await;
        assert!(waited.is_err(), "the low item was served: {waited:?}");
        assert_eq!(
            run.queue.priority_of(&"low".to_string()),
            Some(LOW_PRIORITY)
        );
        assert!(run.queue.len() > 5_000, "the flood kept coming");
        run.queue.shutdown();
    }
}
