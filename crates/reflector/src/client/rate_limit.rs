//! [`RateLimit`]: the client's own request rate limiter, a token bucket with client-go's QPS/burst
//! semantics, on tokio's clock.
//!
//! A bucket holds up to `burst` tokens and gains `qps` tokens a second. Each request takes one;
//! when none is left, the request waits until one has accrued. Waiters are served in the order they
//! asked: each takes the next token to come (the bucket may go into debt), so a steady stream of
//! requests runs at `qps` and none starves. A misbehaving server that ends every request at once
//! thus meets at most `qps` requests a second from this client after the first `burst`.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// A request rate: `qps` requests per second on average, up to `burst` at once.
///
/// ```
/// use reflector::RateLimit;
/// // The client's default for requests other than watches (`ClusterConfig::rate_limit`).
/// assert_eq!(RateLimit::DEFAULT_REQUESTS, RateLimit::new(50.0, 100));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (must be positive).
    pub qps: f64,
    /// Requests allowed at once after a quiet period (at least 1).
    pub burst: u32,
}

impl RateLimit {
    /// `qps` requests a second, bursts of `burst`.
    pub fn new(qps: f64, burst: u32) -> Self {
        RateLimit { qps, burst }
    }

    /// The default for requests other than watches: 50 per second, bursts of 100 (client-go's
    /// own default of 5/10 throttles a controller with a few informers at start-up).
    pub const DEFAULT_REQUESTS: RateLimit = RateLimit {
        qps: 50.0,
        burst: 100,
    };

    /// The default for opening watches: 10 per second, bursts of 100. A healthy informer opens one
    /// watch every five to ten minutes, so this only ever slows a server that keeps closing them.
    pub const DEFAULT_WATCHES: RateLimit = RateLimit {
        qps: 10.0,
        burst: 100,
    };
}

/// A token bucket shared by every clone of one client.
#[derive(Debug)]
pub(crate) struct TokenBucket {
    limit: RateLimit,
    state: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Tokens available at `at`; negative while waiters have taken tokens still to come.
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket. A non-positive or non-finite `qps` is treated as one request per second, a
    /// zero burst as one.
    pub(crate) fn new(limit: RateLimit) -> Self {
        let limit = RateLimit {
            qps: if limit.qps.is_finite() && limit.qps > 0.0 {
                limit.qps
            } else {
                1.0
            },
            burst: limit.burst.max(1),
        };
        TokenBucket {
            state: Mutex::new(Bucket {
                tokens: f64::from(limit.burst),
                at: Instant::now(),
            }),
            limit,
        }
    }

    /// Takes a token now and says how long to wait before using it.
    fn reserve(&self) -> Duration {
        let mut b = self.state.lock();
        let now = Instant::now();
        let accrued = now.saturating_duration_since(b.at).as_secs_f64() * self.limit.qps;
        b.tokens = (b.tokens + accrued).min(f64::from(self.limit.burst));
        b.at = now;
        b.tokens -= 1.0;
        if b.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-b.tokens / self.limit.qps)
        }
    }

    /// Waits for a token (returns at once while the bucket has one). Cancel-safe: a caller that
    /// stops waiting has still used its token, which only makes later callers wait slightly less
    /// long than they could.
    pub(crate) async fn acquire(&self, what: &str) {
        let wait = self.reserve();
        if wait.is_zero() {
            return;
        }
        if wait >= Duration::from_secs(1) {
            tracing::info!(request = what, waited = ?wait, "waiting for the client-side rate limiter");
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_at_once_then_requests_run_at_the_sustained_rate() {
        let bucket = TokenBucket::new(RateLimit::new(10.0, 5));
        let start = Instant::now();
        for _ in 0..5 {
            bucket.acquire("test").await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "the burst is free");
        for _ in 0..10 {
            bucket.acquire("test").await;
        }
        let elapsed = start.elapsed().as_secs_f64();
        assert!(
            (elapsed - 1.0).abs() < 1e-3,
            "10 more at 10/s take 1 s, took {elapsed}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_bucket_refills_up_to_the_burst_only() {
        let bucket = TokenBucket::new(RateLimit::new(100.0, 3));
        for _ in 0..3 {
            bucket.acquire("test").await;
        }
        tokio::time::advance(Duration::from_secs(60)).await;
        let start = Instant::now();
        for _ in 0..3 {
            bucket.acquire("test").await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        bucket.acquire("test").await;
        assert_eq!(start.elapsed(), Duration::from_millis(10), "the 4th waits");
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_waiters_are_spread_one_interval_apart() {
        let bucket = std::sync::Arc::new(TokenBucket::new(RateLimit::new(2.0, 1)));
        let start = Instant::now();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let b = bucket.clone();
                tokio::spawn(async move {
                    b.acquire("test").await;
                    Instant::now()
                })
            })
            .collect();
        let mut done = Vec::new();
        for t in tasks {
            done.push(t.await.unwrap().duration_since(start).as_millis());
        }
        done.sort_unstable();
        assert_eq!(done, [0, 500, 1000, 1500]);
    }

    #[tokio::test(start_paused = true)]
    async fn nonsense_limits_are_made_safe() {
        let bucket = TokenBucket::new(RateLimit::new(f64::NAN, 0));
        let start = Instant::now();
        bucket.acquire("test").await;
        bucket.acquire("test").await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
