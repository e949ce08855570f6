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
//! use controller::CancellationToken;
//! use controller::{Action, Controller};
//! use controller::workqueue::{default_controller_rate_limiter, RateLimitingQueue};
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

use workqueue::RateLimitingQueue;

#[cfg(feature = "metrics")]
use crate::metrics::Outcome;

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

/// Runs workers over a [`RateLimitingQueue`] of keys. See the [module docs](crate::runner).
pub struct Controller<T> {
    queue: RateLimitingQueue<T>,
    workers: usize,
    #[cfg(feature = "metrics")]
    metrics: Option<crate::metrics::ReconcileMetrics>,
}

impl<T> fmt::Debug for Controller<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("queue", &self.queue)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

impl<T: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static> Controller<T> {
    /// A runner with one worker over `queue`. Keep a clone of the queue to add keys to it.
    ///
    /// ```
    /// use controller::Controller;
    /// use controller::workqueue::{default_controller_rate_limiter, RateLimitingQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    /// let controller = Controller::new(queue.clone()).workers(4);
    /// queue.add("default/web".to_string());
    /// assert_eq!(controller.queue().len(), 1);
    /// # }
    /// ```
    pub fn new(queue: RateLimitingQueue<T>) -> Self {
        Self {
            queue,
            workers: 1,
            #[cfg(feature = "metrics")]
            metrics: None,
        }
    }

    /// Records each reconcile into `metrics` (feature `metrics`; rule MX5): its result, its
    /// duration, errors and panics, and the workers busy. Recording changes nothing of what
    /// the runner does with a key.
    #[cfg(feature = "metrics")]
    pub fn metrics(mut self, metrics: crate::metrics::ReconcileMetrics) -> Self {
        self.metrics = Some(metrics);
        self
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
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future aborts the workers, reconciles in flight included, and the
    /// keys they held stay marked processing in the queue, so that queue never hands them out again.
    /// Stop it with `cancel`, which lets every taken key finish.
    pub async fn run<F, Fut, E>(self, cancel: CancellationToken, reconcile: F)
    where
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        let reconcile = Arc::new(reconcile);
        #[cfg(feature = "metrics")]
        let metrics = self.metrics.clone();
        #[cfg(not(feature = "metrics"))]
        let metrics: Option<Recorder> = None;
        if let Some(metrics) = &metrics {
            metrics.set_workers(self.workers);
        }
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            workers.spawn(worker(
                self.queue.clone(),
                reconcile.clone(),
                metrics.clone(),
            ));
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

async fn worker<T, F, Fut, E>(
    queue: RateLimitingQueue<T>,
    reconcile: Arc<F>,
    metrics: Option<Recorder>,
) where
    T: Hash + Eq + Clone + Send + Sync + fmt::Debug + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
    E: Display + Send + 'static,
{
    while let Some(key) = queue.get().await {
        let call = key.clone();
        let recording = metrics.as_ref().map(Recorder::start);
        // Calling `reconcile` inside the future catches a panic while building it, too.
        let outcome = AssertUnwindSafe(async { reconcile(call).await })
            .catch_unwind()
            .await;
        if let Some(recording) = recording {
            recording.finish(counted(&outcome));
        }
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

/// What records reconciles: the `metrics` feature's handle, or nothing without it.
#[cfg(feature = "metrics")]
type Recorder = crate::metrics::ReconcileMetrics;

/// Without the `metrics` feature there is nothing to record into; this type has no value.
#[cfg(not(feature = "metrics"))]
#[derive(Clone)]
enum Recorder {}

#[cfg(not(feature = "metrics"))]
impl Recorder {
    fn set_workers(&self, _: usize) {
        match *self {}
    }
    fn start(&self) -> Recorder {
        match *self {}
    }
    fn finish(self, _: Outcome) {
        match self {}
    }
}

#[cfg(not(feature = "metrics"))]
#[allow(dead_code)] // built by `counted`, read by nothing without the feature
enum Outcome {
    Success,
    Error,
    Panic,
    Requeue,
    RequeueAfter,
}

/// How the metrics count a reconcile's outcome (controller-runtime's `result` label).
fn counted<E>(outcome: &Result<Result<Action, E>, Box<dyn std::any::Any + Send>>) -> Outcome {
    match outcome {
        Ok(Ok(Action::Done)) => Outcome::Success,
        Ok(Ok(Action::Retry)) => Outcome::Requeue,
        Ok(Ok(Action::RequeueAfter(_))) => Outcome::RequeueAfter,
        Ok(Err(_)) => Outcome::Error,
        Err(_) => Outcome::Panic,
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("non-string panic payload")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use parking_lot::Mutex;
    use tokio::time::Instant;

    use super::*;
    use workqueue::ItemExponentialFailureRateLimiter;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn queue() -> RateLimitingQueue<&'static str> {
        RateLimitingQueue::new(ItemExponentialFailureRateLimiter::new(
            ms(1),
            Duration::from_secs(1),
        ))
    }

    /// Records the instants at which each key was reconciled.
    #[derive(Default, Clone)]
    struct Calls(Arc<Mutex<HashMap<&'static str, Vec<Duration>>>>);

    impl Calls {
        fn record(&self, key: &'static str, start: Instant) -> usize {
            let mut calls = self.0.lock();
            let list = calls.entry(key).or_default();
            list.push(start.elapsed());
            list.len()
        }
        fn of(&self, key: &str) -> Vec<Duration> {
            self.0.lock().get(key).cloned().unwrap_or_default()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn reconcile_sees_every_added_key_once_and_done_forgets_failures() {
        let queue = queue();
        for key in ["a", "b", "c"] {
            queue.add(key);
        }
        queue.add_rate_limited("d");
        let (calls, start, token) = (Calls::default(), Instant::now(), CancellationToken::new());
        let run = tokio::spawn(
            Controller::new(queue.clone())
                .workers(2)
                .run(token.clone(), {
                    let calls = calls.clone();
                    move |key| {
                        calls.record(key, start);
                        async { Ok::<_, String>(Action::Done) }
                    }
                }),
        );
        tokio::time::sleep(ms(10)).await;
        for key in ["a", "b", "c", "d"] {
            assert_eq!(calls.of(key).len(), 1, "{key}");
        }
        assert_eq!(
            queue.num_requeues(&"d"),
            0,
            "done forgets the key's failures"
        );
        token.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_is_retried_with_exponential_backoff_until_it_succeeds() {
        let queue = queue();
        queue.add("a");
        let (calls, start, token) = (Calls::default(), Instant::now(), CancellationToken::new());
        let run = tokio::spawn(Controller::new(queue.clone()).run(token.clone(), {
            let calls = calls.clone();
            move |key| {
                let attempt = calls.record(key, start);
                async move {
                    if attempt <= 3 {
                        Err(format!("attempt {attempt} failed"))
                    } else {
                        Ok(Action::Done)
                    }
                }
            }
        }));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(
            calls.of("a"),
            [ms(0), ms(1), ms(3), ms(7)],
            "1, 2, 4 ms backoff"
        );
        assert_eq!(queue.num_requeues(&"a"), 0);
        token.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn retry_action_requeues_with_rate_limit() {
        let queue = queue();
        queue.add("a");
        let (calls, start, token) = (Calls::default(), Instant::now(), CancellationToken::new());
        let run = tokio::spawn(Controller::new(queue.clone()).run(token.clone(), {
            let calls = calls.clone();
            move |key| {
                let attempt = calls.record(key, start);
                async move {
                    Ok::<_, String>(if attempt < 3 {
                        Action::Retry
                    } else {
                        Action::Done
                    })
                }
            }
        }));
        tokio::time::sleep(ms(100)).await;
        assert_eq!(calls.of("a"), [ms(0), ms(1), ms(3)]);
        token.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_panic_is_retried_with_rate_limit_and_the_worker_keeps_running() {
        let queue = queue();
        queue.add("boom");
        queue.add("fine");
        let (calls, start, token) = (Calls::default(), Instant::now(), CancellationToken::new());
        let run = tokio::spawn(
            Controller::new(queue.clone())
                .workers(1)
                .run(token.clone(), {
                    let calls = calls.clone();
                    move |key| {
                        let attempt = calls.record(key, start);
                        if key == "boom" && attempt == 1 {
                            panic!("reconcile bug while building the future");
                        }
                        async move {
                            if key == "boom" && attempt == 2 {
                                panic!("reconcile bug while running");
                            }
                            Ok::<_, String>(Action::Done)
                        }
                    }
                }),
        );
        tokio::time::sleep(ms(100)).await;
        assert_eq!(calls.of("boom"), [ms(0), ms(1), ms(3)]);
        assert_eq!(
            calls.of("fine"),
            [ms(0)],
            "the single worker survived the panic"
        );
        token.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn requeue_after_processes_the_key_again_after_the_delay() {
        let queue = queue();
        queue.add_rate_limited("a");
        let (calls, start, token) = (Calls::default(), Instant::now(), CancellationToken::new());
        let run = tokio::spawn(Controller::new(queue.clone()).run(token.clone(), {
            let calls = calls.clone();
            move |key| {
                let attempt = calls.record(key, start);
                async move {
                    Ok::<_, String>(if attempt < 3 {
                        Action::RequeueAfter(Duration::from_secs(30))
                    } else {
                        Action::Done
                    })
                }
            }
        }));
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(
            calls.of("a"),
            [ms(1), ms(30_001), ms(60_001)],
            "first after its 1 ms rate limit, then every 30 s"
        );
        assert_eq!(
            queue.num_requeues(&"a"),
            0,
            "requeue-after forgets the failures"
        );
        token.cancel();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_lets_in_flight_and_queued_work_finish_then_returns() {
        let queue = queue();
        queue.add("slow");
        queue.add("queued");
        let finished = Arc::new(AtomicUsize::new(0));
        let token = CancellationToken::new();
        let run = tokio::spawn(
            Controller::new(queue.clone())
                .workers(1)
                .run(token.clone(), {
                    let finished = finished.clone();
                    move |_key| {
                        let finished = finished.clone();
                        async move {
                            tokio::time::sleep(Duration::from_secs(1)).await;
                            finished.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, String>(Action::Retry)
                        }
                    }
                }),
        );
        tokio::time::sleep(ms(500)).await;
        token.cancel();
        run.await.unwrap();
        assert_eq!(
            finished.load(Ordering::SeqCst),
            2,
            "in-flight and queued keys finished"
        );
        assert!(queue.is_shutting_down());
        assert_eq!(queue.waiting_len(), 0, "retries after shutdown are dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn run_returns_when_the_queue_is_shut_down_elsewhere() {
        let queue = queue();
        let run = tokio::spawn(
            Controller::new(queue.clone())
                .workers(3)
                .run(CancellationToken::new(), |_| async {
                    Ok::<_, String>(Action::Done)
                }),
        );
        tokio::task::yield_now().await;
        queue.shutdown();
        run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_key_changed_during_reconcile_is_reconciled_again_never_concurrently() {
        let queue = queue();
        queue.add("a");
        let (running, overlaps, calls) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicUsize::new(0)),
            Arc::new(AtomicUsize::new(0)),
        );
        let token = CancellationToken::new();
        let run = tokio::spawn(
            Controller::new(queue.clone())
                .workers(4)
                .run(token.clone(), {
                    let (running, overlaps, calls, queue) = (
                        running.clone(),
                        overlaps.clone(),
                        calls.clone(),
                        queue.clone(),
                    );
                    move |key| {
                        let (running, overlaps, calls, queue) = (
                            running.clone(),
                            overlaps.clone(),
                            calls.clone(),
                            queue.clone(),
                        );
                        async move {
                            if running.swap(true, Ordering::SeqCst) {
                                overlaps.fetch_add(1, Ordering::SeqCst);
                            }
                            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                                queue.add(key); // changed while being reconciled
                                queue.add(key);
                            }
                            tokio::time::sleep(ms(10)).await;
                            running.store(false, Ordering::SeqCst);
                            Ok::<_, String>(Action::Done)
                        }
                    }
                }),
        );
        tokio::time::sleep(ms(100)).await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(overlaps.load(Ordering::SeqCst), 0);
        token.cancel();
        run.await.unwrap();
    }
}
