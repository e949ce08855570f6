//! Retrying a read-modify-write when it loses a race: [`retry_on_conflict`] and [`on_error`],
//! with client-go's `retry.DefaultRetry` and `retry.DefaultBackoff` ([`RetryBackoff`]).
//!
//! A controller that updates an object it read earlier gets a 409 Conflict whenever someone else
//! wrote it in between. The remedy is to read it again, apply the change again and write again:
//! the whole closure is run once more, a bounded number of times, with a short jittered pause.

use std::future::Future;
use std::time::Duration;

use rand::Rng as _;

use super::error::ClientError;

/// How many times, and how far apart, a failed attempt is retried (client-go's `wait.Backoff`
/// as `retry.OnError` uses it): at most `steps` attempts; before attempt *n + 1* the wait is
/// `duration × factorⁿ⁻¹` (capped at `cap`), plus up to `jitter ×` that at random.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryBackoff {
    /// Attempts in all (at least one is always made).
    pub steps: u32,
    /// The first wait.
    pub duration: Duration,
    /// Each wait is the previous one times this (1.0: constant).
    pub factor: f64,
    /// Each wait is lengthened by up to this fraction, at random (0.0: none).
    pub jitter: f64,
    /// No wait (before jitter) is longer than this.
    pub cap: Option<Duration>,
}

impl RetryBackoff {
    /// client-go's `retry.DefaultRetry`: 5 attempts, 10 ms apart, 10 % jitter. For conflicts,
    /// which clear as soon as the object is read again.
    pub const DEFAULT_RETRY: RetryBackoff = RetryBackoff {
        steps: 5,
        duration: Duration::from_millis(10),
        factor: 1.0,
        jitter: 0.1,
        cap: None,
    };

    /// client-go's `retry.DefaultBackoff`: 4 attempts, waits of 10 ms, 50 ms, 250 ms, 10 %
    /// jitter. For errors that take longer to clear.
    pub const DEFAULT_BACKOFF: RetryBackoff = RetryBackoff {
        steps: 4,
        duration: Duration::from_millis(10),
        factor: 5.0,
        jitter: 0.1,
        cap: None,
    };

    /// The wait before attempt `attempt + 1` (`attempt` ≥ 1), jitter included.
    fn wait_after(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(64) as i32;
        let mut base = self.duration.as_secs_f64() * self.factor.max(0.0).powi(exponent);
        if let Some(cap) = self.cap {
            base = base.min(cap.as_secs_f64());
        }
        // Bound the wait whatever the factor: an hour is far beyond any sensible retry.
        base = base.min(3600.0);
        if self.jitter > 0.0 {
            base += base * self.jitter * rand::rng().random::<f64>();
        }
        Duration::from_secs_f64(base)
    }
}

/// Runs `attempt` until it succeeds, fails with an error `retriable` refuses, or `backoff.steps`
/// attempts were made; returns the last result. Waits (on tokio's clock) between attempts, never
/// before the first. client-go's `retry.OnError`.
///
/// # Cancel safety
///
/// As cancel safe as the futures `f` makes: dropping it drops the attempt in flight (and
/// the wait between attempts); attempts already made stay made.
pub async fn on_error<T, E, F, Fut>(
    backoff: RetryBackoff,
    mut retriable: impl FnMut(&E) -> bool,
    mut attempt: F,
) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let steps = backoff.steps.max(1);
    let mut n = 1;
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if n < steps && retriable(&e) => {
                tokio::time::sleep(backoff.wait_after(n)).await;
                n += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Runs `attempt` (which should read the object, change it and write it) again while it fails
/// with [`ClientError::Conflict`], as client-go's `retry.RetryOnConflict`; any other error, or
/// the last conflict once `backoff.steps` attempts were made, is returned.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use reflector::{retry_on_conflict, ClientError, RetryBackoff, Status};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let tries = AtomicU32::new(0);
/// let result = retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || async {
///     if tries.fetch_add(1, Ordering::Relaxed) < 2 {
///         return Err(ClientError::api(Status::failure(409, "Conflict", "modified")));
///     }
///     Ok("written")
/// })
/// .await;
/// assert_eq!(result.unwrap(), "written");
/// assert_eq!(tries.load(Ordering::Relaxed), 3);
/// # }
/// ```
///
/// # Cancel safety
///
/// As cancel safe as the futures `f` makes: dropping it drops the attempt in flight (and
/// the wait between attempts); attempts already made stay made.
pub async fn retry_on_conflict<T, F, Fut>(
    backoff: RetryBackoff,
    attempt: F,
) -> Result<T, ClientError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ClientError>>,
{
    on_error(backoff, ClientError::is_conflict, attempt).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Status;

    fn conflict() -> ClientError {
        ClientError::api(Status::failure(409, "Conflict", "modified"))
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_are_retried_steps_times_with_the_waits_of_the_backoff() {
        let start = tokio::time::Instant::now();
        let mut calls = Vec::new();
        let err = retry_on_conflict(RetryBackoff::DEFAULT_BACKOFF, || {
            calls.push(start.elapsed());
            async { Err::<(), _>(conflict()) }
        })
        .await
        .unwrap_err();
        assert!(err.is_conflict());
        assert_eq!(calls.len(), 4);
        // 10 ms, 50 ms, 250 ms, each plus up to 10 %.
        let waits: Vec<_> = calls.windows(2).map(|w| w[1] - w[0]).collect();
        for (wait, base) in waits.iter().zip([10u64, 50, 250]) {
            let base = Duration::from_millis(base);
            assert!(
                *wait >= base && *wait <= base.mul_f64(1.1) + Duration::from_millis(1),
                "{waits:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_returned_at_once() {
        let mut calls = 0;
        let err = retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || {
            calls += 1;
            async { Err::<(), _>(ClientError::api(Status::failure(404, "NotFound", "gone"))) }
        })
        .await
        .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(calls, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_steps_still_makes_one_attempt_and_huge_factors_stay_bounded() {
        let mut calls = 0;
        let b = RetryBackoff {
            steps: 0,
            ..RetryBackoff::DEFAULT_RETRY
        };
        let _ = retry_on_conflict(b, || {
            calls += 1;
            async { Err::<(), _>(conflict()) }
        })
        .await;
        assert_eq!(calls, 1);
        let huge = RetryBackoff {
            factor: 1e9,
            steps: 100,
            ..RetryBackoff::DEFAULT_RETRY
        };
        assert!(huge.wait_after(90) <= Duration::from_secs(3960));
    }
}
