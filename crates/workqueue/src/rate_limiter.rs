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
