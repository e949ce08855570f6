//! The rate-limiting queue: a delaying queue that asks a [`RateLimiter`] how long to wait (E8).
//!
//! This is the queue a controller uses: on failure it calls
//! [`add_rate_limited`](RateLimitingQueue::add_rate_limited) so the key backs off, on success
//! [`forget`](RateLimitingQueue::forget) so the next failure starts from the base delay again,
//! and in both cases [`done`](crate::WorkQueue::done).
//!
//! ```
//! use std::time::Duration;
//! use workqueue::{default_controller_rate_limiter, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! let key = queue.get().await.unwrap();
//! queue.add_rate_limited(key.clone()); // reconcile failed: retry in 5 ms
//! queue.done(&key);
//! assert_eq!(queue.num_requeues(&key), 1);
//! let again = queue.get().await.unwrap();
//! queue.forget(&again); // reconcile succeeded
//! queue.done(&again);
//! assert_eq!(queue.num_requeues(&again), 0);
//! # }
//! ```

use std::fmt;
use std::hash::Hash;
use std::ops::Deref;
use std::sync::Arc;

use crate::delaying::DelayingQueue;
use crate::priority::AgingRate;
use crate::queue::QueueConfig;
use crate::rate_limiter::RateLimiter;

/// A [`DelayingQueue`] with a [`RateLimiter`]. Dereferences to the delaying queue.
///
/// Cloning gives another handle to the same queue and limiter. Must be created inside a tokio
/// runtime.
///
/// ```
/// use std::time::Duration;
/// use workqueue::{ItemExponentialFailureRateLimiter, RateLimitingQueue};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let limiter = ItemExponentialFailureRateLimiter::new(Duration::from_millis(1), Duration::from_secs(1));
/// let queue = RateLimitingQueue::new(limiter);
/// queue.add_rate_limited("one");
/// queue.add_rate_limited("one");
/// assert_eq!(queue.num_requeues(&"one"), 2);
/// # }
/// ```
pub struct RateLimitingQueue<T> {
    queue: DelayingQueue<T>,
    limiter: Arc<dyn RateLimiter<T>>,
}

impl<T> Clone for RateLimitingQueue<T> {
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            limiter: self.limiter.clone(),
        }
    }
}

impl<T> fmt::Debug for RateLimitingQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingQueue")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl<T> Deref for RateLimitingQueue<T> {
    type Target = DelayingQueue<T>;
    fn deref(&self) -> &DelayingQueue<T> {
        &self.queue
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + 'static> RateLimitingQueue<T> {
    /// An unnamed queue without metrics, using `limiter`.
    pub fn new(limiter: impl RateLimiter<T> + 'static) -> Self {
        Self::with_config(limiter, QueueConfig::new())
    }

    /// A queue with the given options, using `limiter`.
    pub fn with_config(limiter: impl RateLimiter<T> + 'static, config: QueueConfig<T>) -> Self {
        Self::with_backlog(limiter, config, None)
    }

    /// A rate-limiting queue over a work queue handing items out by priority with `aging`
    /// (`Some`), or first in first out.
    pub(crate) fn with_backlog(
        limiter: impl RateLimiter<T> + 'static,
        config: QueueConfig<T>,
        aging: Option<AgingRate>,
    ) -> Self {
        Self {
            queue: DelayingQueue::with_backlog(config, aging),
            limiter: Arc::new(limiter),
        }
    }

    /// The limiter's delay for `item`'s next retry (counts the retry, as `add_rate_limited`).
    pub(crate) fn when(&self, item: &T) -> std::time::Duration {
        self.limiter.when(item)
    }

    /// Adds `item` after the delay the limiter gives it (E8.1).
    pub fn add_rate_limited(&self, item: T) {
        let delay = self.limiter.when(&item);
        self.queue.add_after(item, delay);
    }

    /// Makes the limiter forget `item`'s failures; the queue itself is unchanged.
    pub fn forget(&self, item: &T) {
        self.limiter.forget(item);
    }

    /// How many times `item` was rate limited since it was last forgotten.
    pub fn num_requeues(&self, item: &T) -> usize {
        self.limiter.num_requeues(item)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;
    use crate::ItemExponentialFailureRateLimiter;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_delays_by_the_limiter_and_forget_resets_it() {
        let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        ));
        queue.add_rate_limited("one");
        assert_eq!((queue.len(), queue.waiting_len()), (0, 1), "one waits 1 ms");
        queue.add_rate_limited("one");
        assert_eq!(queue.num_requeues(&"one"), 2);
        queue.add_rate_limited("two");
        queue.add_rate_limited("two");
        assert_eq!(queue.num_requeues(&"two"), 2);
        queue.forget(&"one");
        assert_eq!(queue.num_requeues(&"one"), 0);
        assert_eq!(
            queue.waiting_len(),
            2,
            "forget does not remove anything from the queue"
        );
        tokio::time::sleep(ms(1)).await;
        tokio::task::yield_now().await;
        assert_eq!(queue.get().now_or_never(), Some(Some("one")));
        assert_eq!(queue.len(), 1, "two's earlier 1 ms entry is due too");
        queue.add_rate_limited("one");
        assert_eq!(
            queue.num_requeues(&"one"),
            1,
            "next one after forget: 1 ms again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn add_rate_limited_after_shutdown_is_ignored() {
        let queue = RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        ));
        queue.shutdown();
        queue.add_rate_limited("one");
        tokio::time::sleep(ms(10)).await;
        assert_eq!(queue.get().await, None);
    }
}
