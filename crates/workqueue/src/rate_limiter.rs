//! Rate limiters: how long an item waits before it is retried (E9).
//!
//! A [`RateLimiter`] answers `when` an item may be processed again, counts its failures
//! (`num_requeues`) and forgets them on success (`forget`). They compose: client-go's default
//! controller limiter is the [`MaxOf`] a per-item [`ItemExponentialFailureRateLimiter`]
//! (5 ms doubling up to 1000 s) and an overall [`BucketRateLimiter`] (10 qps, burst 100), so one
//! failing object backs off on its own while a storm of failures is also capped overall.
//!
//! ```
//! use std::time::Duration;
//! use workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
//!
//! let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000));
//! assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
//! assert_eq!(limiter.when(&"a"), Duration::from_millis(10));
//! assert_eq!(limiter.num_requeues(&"a"), 2);
//! limiter.forget(&"a");
//! assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
//! ```

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Decides how long an item waits before it is retried.
pub trait RateLimiter<T>: Send + Sync {
    /// How long to wait before processing `item` again; records a failure or takes a token.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (call it when the item succeeded).
    fn forget(&self, item: &T);
    /// How many failures are recorded for `item`.
    fn num_requeues(&self, item: &T) -> usize;
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Box<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

impl<T, L: RateLimiter<T> + ?Sized> RateLimiter<T> for Arc<L> {
    fn when(&self, item: &T) -> Duration {
        (**self).when(item)
    }
    fn forget(&self, item: &T) {
        (**self).forget(item)
    }
    fn num_requeues(&self, item: &T) -> usize {
        (**self).num_requeues(item)
    }
}

/// Failure counts per item, shared by the per-item limiters.
#[derive(Debug)]
struct Failures<T>(Mutex<HashMap<T, usize>>);

impl<T: Hash + Eq + Clone> Failures<T> {
    fn new() -> Self {
        Self(Mutex::new(HashMap::new()))
    }
    /// Returns the count before incrementing it.
    fn bump(&self, item: &T) -> usize {
        let mut map = self.0.lock();
        if let Some(n) = map.get_mut(item) {
            let before = *n;
            *n += 1;
            return before;
        }
        map.insert(item.clone(), 1);
        0
    }
    fn get(&self, item: &T) -> usize {
        self.0.lock().get(item).copied().unwrap_or(0)
    }
    fn forget(&self, item: &T) {
        self.0.lock().remove(item);
    }
}

/// Per-item exponential backoff: `base × 2^failures`, capped at `max` (E9.1).
///
/// ```
/// use std::time::Duration;
/// use workqueue::{ItemExponentialFailureRateLimiter, RateLimiter};
///
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
/// let delays: Vec<_> = (0..4).map(|_| limiter.when(&"key").as_millis()).collect();
/// assert_eq!(delays, [1, 2, 4, 8]);
/// ```
#[derive(Debug)]
pub struct ItemExponentialFailureRateLimiter<T> {
    failures: Failures<T>,
    base: Duration,
    max: Duration,
}

impl<T: Hash + Eq + Clone> ItemExponentialFailureRateLimiter<T> {
    /// A limiter starting at `base` and doubling up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Self {
            failures: Failures::new(),
            base,
            max,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exp = self.failures.bump(item);
        // Past 2^63 ns (client-go's int64 overflow check) or past max: max.
        let Ok(exp) = u32::try_from(exp) else {
            return self.max;
        };
        let Some(factor) = 1u128.checked_shl(exp).filter(|_| exp < 127) else {
            return self.max;
        };
        let nanos = self.base.as_nanos().saturating_mul(factor);
        if nanos > i64::MAX as u128 {
            return self.max;
        }
        let backoff = Duration::from_nanos(nanos as u64);
        backoff.min(self.max)
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.failures.get(item)
    }
}

/// One token bucket shared by all items: `qps` tokens per second, holding at most `burst` (E9.2).
///
/// The bucket starts full. Each `when` reserves a token and returns the wait until it is
/// available; the reservation is kept even though the caller waits.
///
/// ```
/// use std::time::Duration;
/// use workqueue::{BucketRateLimiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = BucketRateLimiter::new(10.0, 2);
/// assert_eq!(limiter.when(&"a"), Duration::ZERO);
/// assert_eq!(limiter.when(&"b"), Duration::ZERO);
/// assert_eq!(limiter.when(&"c"), Duration::from_millis(100));
/// # }
/// ```
#[derive(Debug)]
pub struct BucketRateLimiter {
    /// Time to earn one token.
    interval: Duration,
    burst: u32,
    /// When the bucket will be full again given the reservations made so far (a GCRA
    /// "theoretical arrival time"); `None` until the first call, when the bucket is full.
    full_at: Mutex<Option<Instant>>,
}

impl BucketRateLimiter {
    /// A bucket earning `qps` tokens per second (an infinite or non-positive rate disables
    /// waiting, as does a burst of 0) and holding `burst`.
    pub fn new(qps: f64, burst: u32) -> Self {
        let interval = if qps.is_finite() && qps > 0.0 {
            Duration::from_secs_f64(1.0 / qps)
        } else {
            Duration::ZERO
        };
        Self {
            interval,
            burst,
            full_at: Mutex::new(None),
        }
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _: &T) -> Duration {
        if self.interval.is_zero() || self.burst == 0 {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut full_at = self.full_at.lock();
        let start = full_at.map_or(now, |t| t.max(now));
        let new_full_at = start + self.interval;
        *full_at = Some(new_full_at);
        let capacity = self.interval * self.burst;
        (new_full_at - now).saturating_sub(capacity)
    }
    fn forget(&self, _: &T) {}
    fn num_requeues(&self, _: &T) -> usize {
        0
    }
}

/// `fast` for the first `max_fast` failures of an item, `slow` after that (E9.3).
///
/// ```
/// use std::time::Duration;
/// use workqueue::{ItemFastSlowRateLimiter, RateLimiter};
///
/// let limiter = ItemFastSlowRateLimiter::new(Duration::from_millis(5), Duration::from_secs(10), 1);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(10));
/// ```
#[derive(Debug)]
pub struct ItemFastSlowRateLimiter<T> {
    failures: Failures<T>,
    fast: Duration,
    slow: Duration,
    max_fast: usize,
}

impl<T: Hash + Eq + Clone> ItemFastSlowRateLimiter<T> {
    /// A limiter answering `fast` for `max_fast` attempts, then `slow`.
    pub fn new(fast: Duration, slow: Duration, max_fast: usize) -> Self {
        Self {
            failures: Failures::new(),
            fast,
            slow,
            max_fast,
        }
    }
}

impl<T: Hash + Eq + Clone + Send + Sync> RateLimiter<T> for ItemFastSlowRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        if self.failures.bump(item) < self.max_fast {
            self.fast
        } else {
            self.slow
        }
    }
    fn forget(&self, item: &T) {
        self.failures.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.failures.get(item)
    }
}

/// The largest answer of several limiters; every limiter is asked every time (E9.4).
///
/// ```
/// use std::time::Duration;
/// use workqueue::{BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOf, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = MaxOf::new(vec![
///     Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000))),
///     Box::new(BucketRateLimiter::new(10.0, 100)),
/// ]);
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(5));
/// # }
/// ```
pub struct MaxOf<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> std::fmt::Debug for MaxOf<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaxOf")
            .field("limiters", &self.limiters.len())
            .finish()
    }
}

impl<T> MaxOf<T> {
    /// Combines `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        Self { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOf<T> {
    fn when(&self, item: &T) -> Duration {
        self.limiters
            .iter()
            .map(|l| l.when(item))
            .fold(Duration::ZERO, Duration::max)
    }
    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.limiters
            .iter()
            .map(|l| l.num_requeues(item))
            .max()
            .unwrap_or(0)
    }
}

/// Caps another limiter's answer at `max_wait` (E9.5).
///
/// ```
/// use std::time::Duration;
/// use workqueue::{ItemExponentialFailureRateLimiter, RateLimiter, WithMaxWait};
///
/// let inner = ItemExponentialFailureRateLimiter::new(Duration::from_secs(1), Duration::from_secs(1000));
/// let limiter = WithMaxWait::new(inner, Duration::from_millis(1500));
/// assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
/// assert_eq!(limiter.when(&"a"), Duration::from_millis(1500));
/// ```
#[derive(Debug)]
pub struct WithMaxWait<L> {
    inner: L,
    max_wait: Duration,
}

impl<L> WithMaxWait<L> {
    /// Wraps `inner`, never answering more than `max_wait`.
    pub fn new(inner: L, max_wait: Duration) -> Self {
        Self { inner, max_wait }
    }
}

impl<T, L: RateLimiter<T>> RateLimiter<T> for WithMaxWait<L> {
    fn when(&self, item: &T) -> Duration {
        self.inner.when(item).min(self.max_wait)
    }
    fn forget(&self, item: &T) {
        self.inner.forget(item);
    }
    fn num_requeues(&self, item: &T) -> usize {
        self.inner.num_requeues(item)
    }
}

/// client-go's default controller rate limiter (E9.6): the max of per-item exponential backoff
/// (5 ms doubling to 1000 s) and an overall bucket of 10 qps with a burst of 100.
///
/// ```
/// use std::time::Duration;
/// use workqueue::{default_controller_rate_limiter, RateLimiter};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = default_controller_rate_limiter::<String>();
/// assert_eq!(limiter.when(&"a".to_string()), Duration::from_millis(5));
/// # }
/// ```
pub fn default_controller_rate_limiter<T: Hash + Eq + Clone + Send + Sync + 'static>() -> MaxOf<T> {
    MaxOf::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(
            Duration::from_millis(5),
            Duration::from_secs(1000),
        )),
        Box::new(BucketRateLimiter::new(10.0, 100)),
    ])
}

/// client-go's default item-based rate limiter (E9.6): per-item exponential, 1 ms to 1000 s.
///
/// ```
/// use std::time::Duration;
/// use workqueue::{default_item_based_rate_limiter, RateLimiter};
///
/// let limiter = default_item_based_rate_limiter::<u32>();
/// assert_eq!(limiter.when(&7), Duration::from_millis(1));
/// ```
pub fn default_item_based_rate_limiter<T: Hash + Eq + Clone>(
) -> ItemExponentialFailureRateLimiter<T> {
    ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_doubles_per_item_and_forget_restarts_it() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        assert_eq!(delays, [ms(1), ms(2), ms(4), ms(8), ms(16)]);
        assert_eq!(limiter.num_requeues(&"one"), 5);
        assert_eq!(limiter.when(&"two"), ms(1));
        assert_eq!(limiter.when(&"two"), ms(2));
        assert_eq!(limiter.num_requeues(&"two"), 2);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), ms(1));
    }

    #[test]
    fn exponential_sixth_call_is_32ms() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
        let sixth = (0..6).map(|_| limiter.when(&"one")).last();
        assert_eq!(sixth, Some(ms(32)));
    }

    #[test]
    fn exponential_reaches_exactly_max_after_1000_calls_without_overflow() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(1000));
        for _ in 0..1000 {
            limiter.when(&"one");
        }
        assert_eq!(limiter.when(&"one"), Duration::from_secs(1000));
    }

    #[test]
    fn exponential_with_large_base_caps_at_max() {
        let hour = Duration::from_secs(3600);
        let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_secs(60), 1000 * hour);
        let third = (0..3).map(|_| limiter.when(&"one")).last();
        assert_eq!(third, Some(Duration::from_secs(240)));
        for _ in 0..1000 {
            limiter.when(&"one");
        }
        assert_eq!(limiter.when(&"one"), 1000 * hour);
    }

    #[test]
    fn exponential_controller_default_table() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        let expected_ms = [
            5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240, 20480, 40960, 81920, 163840,
            327680, 655360,
        ];
        for (call, want) in expected_ms.iter().enumerate() {
            assert_eq!(limiter.when(&"k"), ms(*want), "call {}", call + 1);
        }
        assert_eq!(limiter.when(&"k"), Duration::from_secs(1000), "19th call");
        assert_eq!(limiter.when(&"k"), Duration::from_secs(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_burst_then_spaces_tokens_at_qps() {
        let limiter = BucketRateLimiter::new(10.0, 100);
        for call in 1..=100 {
            assert_eq!(
                RateLimiter::<u32>::when(&limiter, &call),
                Duration::ZERO,
                "call {call}"
            );
        }
        for k in 1..=5u32 {
            assert_eq!(
                RateLimiter::<u32>::when(&limiter, &0),
                k * ms(100),
                "call {}",
                100 + k
            );
        }
        assert_eq!(RateLimiter::<u32>::num_requeues(&limiter, &0), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_refills_over_time_and_keeps_reservations() {
        let limiter = BucketRateLimiter::new(10.0, 1);
        assert_eq!(RateLimiter::<u32>::when(&limiter, &0), Duration::ZERO);
        assert_eq!(RateLimiter::<u32>::when(&limiter, &0), ms(100));
        assert_eq!(RateLimiter::<u32>::when(&limiter, &0), ms(200));
        tokio::time::advance(ms(250)).await;
        assert_eq!(RateLimiter::<u32>::when(&limiter, &0), ms(50));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(RateLimiter::<u32>::when(&limiter, &0), Duration::ZERO);
    }

    #[test]
    fn fast_slow_switches_after_max_fast_attempts() {
        let limiter = ItemFastSlowRateLimiter::new(ms(5), Duration::from_secs(10), 3);
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        let slow = Duration::from_secs(10);
        assert_eq!(delays, [ms(5), ms(5), ms(5), slow, slow]);
        assert_eq!(limiter.num_requeues(&"one"), 5);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), ms(5));
    }

    #[test]
    fn max_of_asks_every_limiter_and_returns_the_largest() {
        let limiter: MaxOf<&str> = MaxOf::new(vec![
            Box::new(ItemFastSlowRateLimiter::new(
                ms(5),
                Duration::from_secs(3),
                3,
            )),
            Box::new(ItemExponentialFailureRateLimiter::new(
                ms(1),
                Duration::from_secs(1),
            )),
        ]);
        let delays: Vec<_> = (0..5).map(|_| limiter.when(&"one")).collect();
        let slow = Duration::from_secs(3);
        assert_eq!(delays, [ms(5), ms(5), ms(5), slow, slow]);
        assert_eq!(limiter.num_requeues(&"one"), 5);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
        assert_eq!(limiter.when(&"one"), ms(5));
    }

    /// Answers 5 ms for its first 100 calls, then 1000 s.
    struct StepLimiter(Mutex<usize>);

    impl RateLimiter<&'static str> for StepLimiter {
        fn when(&self, _: &&'static str) -> Duration {
            let mut calls = self.0.lock();
            *calls += 1;
            if *calls <= 100 {
                ms(5)
            } else {
                Duration::from_secs(1000)
            }
        }
        fn forget(&self, _: &&'static str) {
            *self.0.lock() = 0;
        }
        fn num_requeues(&self, _: &&'static str) -> usize {
            *self.0.lock()
        }
    }

    #[test]
    fn with_max_wait_caps_the_inner_answer_and_forwards_the_rest() {
        let limiter = WithMaxWait::new(StepLimiter(Mutex::new(0)), Duration::from_secs(500));
        for call in 1..=100 {
            assert_eq!(limiter.when(&"one"), ms(5), "call {call}");
        }
        assert_eq!(limiter.when(&"one"), Duration::from_secs(500));
        assert_eq!(limiter.num_requeues(&"one"), 101);
        limiter.forget(&"one");
        assert_eq!(limiter.num_requeues(&"one"), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn default_controller_limiter_is_max_of_exponential_and_bucket() {
        let limiter = default_controller_rate_limiter::<u32>();
        // Each item's first failure: the 5 ms base while the bucket has tokens...
        for item in 0..100 {
            assert_eq!(limiter.when(&item), ms(5));
        }
        // ...then the bucket (empty after 100 calls at one instant) dominates.
        assert_eq!(limiter.when(&100), ms(100));
        assert_eq!(
            limiter.when(&0),
            ms(200),
            "exponential says 10 ms, bucket 200 ms"
        );
        assert_eq!(limiter.num_requeues(&0), 2);
    }

    #[test]
    fn default_item_based_limiter_is_exponential_from_1ms_to_1000s() {
        let limiter = default_item_based_rate_limiter::<u32>();
        assert_eq!(limiter.when(&1), ms(1));
        assert_eq!(limiter.when(&1), ms(2));
        for _ in 0..100 {
            limiter.when(&1);
        }
        assert_eq!(limiter.when(&1), Duration::from_secs(1000));
    }
}
