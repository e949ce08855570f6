//! The controller runner: N workers reconciling keys from a rate-limited queue.
//!
//! This is the loop every client-go controller writes by hand (`processNextWorkItem`), written
//! once: take a key, reconcile it, and according to the outcome forget it, retry it with
//! backoff, or requeue it after a delay; then mark it done. An error or a panic in the reconcile
//! function is retried with backoff and never takes a worker down. When the cancellation token
//! fires, the queue stops accepting keys, workers finish what is queued and in flight, and
//! [`Controller::run`] returns.
//!
//! ```
//! use std::time::Duration;
//! use tokio_util::sync::CancellationToken;
//! use workqueue::{default_controller_rate_limiter, Action, Controller, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! let token = CancellationToken::new();
//! let stop = token.clone();
//! Controller::new(queue)
//!     .workers(2)
//!     .run(token, move |key: String| {
//!         let stop = stop.clone();
//!         async move {
//!             println!("reconciling {key}");
//!             stop.cancel();
//!             Ok::<_, std::convert::Infallible>(Action::Done)
//!         }
//!     })
//!     .await;
//! # }
//! ```

use std::fmt::{self, Display};
use std::future::Future;
use std::hash::Hash;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::rate_limiting::RateLimitingQueue;

/// What a reconcile asks the runner to do with its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Finished: forget the key's failures.
    Done,
    /// Try again after the rate limiter's delay (counts as a failure).
    Retry,
    /// Forget the key's failures and process it again after this delay (periodic resync).
    RequeueAfter(Duration),
}

/// Runs workers over a [`RateLimitingQueue`] of keys. See the [module docs](crate::controller).
pub struct Controller<T> {
    queue: RateLimitingQueue<T>,
    workers: usize,
}

impl<T> fmt::Debug for Controller<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("queue", &self.queue)
            .field("workers", &self.workers)
            .finish()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static> Controller<T> {
    /// A runner with one worker over `queue`. Keep a clone of the queue to add keys to it.
    ///
    /// ```
    /// use workqueue::{default_controller_rate_limiter, Controller, RateLimitingQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    /// let controller = Controller::new(queue.clone()).workers(4);
    /// queue.add("default/web".to_string());
    /// assert_eq!(controller.queue().len(), 1);
    /// # }
    /// ```
    pub fn new(queue: RateLimitingQueue<T>) -> Self {
        Self { queue, workers: 1 }
    }

    /// Sets the number of concurrent workers (at least 1).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    /// The queue the workers take keys from.
    pub fn queue(&self) -> &RateLimitingQueue<T> {
        &self.queue
    }

    /// Runs the workers until `cancel` fires (or the queue is shut down by someone else), then
    /// lets them finish the queued and in-flight keys, and returns.
    ///
    /// `reconcile` is called with one key at a time per key (never for the same key in two
    /// workers at once). `Ok(action)` is applied as described on [`Action`]; `Err` or a panic
    /// is logged and the key retried with the rate limiter's delay. Delayed retries that are not
    /// yet due when shutdown begins are dropped.
    pub async fn run<F, Fut, E>(self, cancel: CancellationToken, reconcile: F)
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            workers.spawn(worker(self.queue.clone(), reconcile.clone()));
        }
        let queue = self.queue.clone();
        let watcher = tokio::spawn(async move {
            cancel.cancelled().await;
            queue.shutdown();
        });
        while let Some(joined) = workers.join_next().await {
            if let Err(error) = joined {
                tracing::error!(%error, "workqueue worker task ended abnormally");
            }
        }
        watcher.abort();
        self.queue.shutdown();
    }
}

async fn worker<T, F, Fut, E>(queue: RateLimitingQueue<T>, reconcile: Arc<F>)
where
    T: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    while let Some(key) = queue.get().await {
        let call = key.clone();
        // Calling `reconcile` inside the future catches a panic while building it, too.
        let outcome = AssertUnwindSafe(async { reconcile(call).await })
            .catch_unwind()
            .await;
        match outcome {
            Ok(Ok(Action::Done)) => queue.forget(&key),
            Ok(Ok(Action::Retry)) => queue.add_rate_limited(key.clone()),
            Ok(Ok(Action::RequeueAfter(delay))) => {
                queue.forget(&key);
                queue.add_after(key.clone(), delay);
            }
            Ok(Err(error)) => {
                tracing::warn!(?key, %error, "reconcile failed; retrying with backoff");
                queue.add_rate_limited(key.clone());
            }
            Err(panic) => {
                let message = panic_message(panic.as_ref());
                tracing::error!(
                    ?key,
                    panic = message,
                    "reconcile panicked; retrying with backoff"
                );
                queue.add_rate_limited(key.clone());
            }
        }
        queue.done(&key);
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}
