//! Exponential backoff with jitter and reset (contract C2.2), on tokio's clock.
//!
//! The reset interval is measured from the last reset (current apimachinery): once more than
//! `reset_after` has passed since the state was last reset, the next delay starts again from
//! `initial`.

use std::time::Duration;

use rand::Rng as _;
use tokio::time::Instant;

/// Backoff parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffConfig {
    /// First delay (default 800 ms).
    pub initial: Duration,
    /// Growth factor per step (default 2.0).
    pub factor: f64,
    /// Largest base delay (default 30 s).
    pub cap: Duration,
    /// Each wait is `base × (1 + U[0,1) × jitter)` (default 1.0; 0 disables jitter).
    pub jitter: f64,
    /// Number of growing steps before the delay stays at `cap` (default ⌈30/0.8⌉ = 38).
    pub steps: u32,
    /// Back to `initial` after this long since the last reset (default 2 min).
    pub reset_after: Duration,
}

impl Default for BackoffConfig {
    fn default() -> Self {
        BackoffConfig {
            initial: Duration::from_millis(800),
            factor: 2.0,
            cap: Duration::from_secs(30),
            jitter: 1.0,
            steps: 38,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Backoff state: call [`Backoff::next_delay`] before each retry.
#[derive(Debug, Clone)]
pub struct Backoff {
    config: BackoffConfig,
    current: Duration,
    steps_left: u32,
    last_reset: Instant,
}

impl Backoff {
    /// Fresh state.
    pub fn new(config: BackoffConfig) -> Self {
        Backoff {
            current: config.initial,
            steps_left: config.steps,
            last_reset: Instant::now(),
            config,
        }
    }

    /// Starts the sequence again: the next delay is `initial` (with its jitter), as after a
    /// reset by time.
    pub fn reset(&mut self) {
        self.current = self.config.initial;
        self.steps_left = self.config.steps;
        self.last_reset = Instant::now();
    }

    /// The next delay to wait.
    pub fn next_delay(&mut self) -> Duration {
        let now = Instant::now();
        if now.duration_since(self.last_reset) > self.config.reset_after {
            self.reset();
        }
        let base = self.current;
        if self.steps_left > 0 {
            self.steps_left -= 1;
            let next = base.mul_f64(self.config.factor.max(0.0));
            if !self.config.cap.is_zero() && next > self.config.cap {
                self.current = self.config.cap;
                self.steps_left = 0;
            } else {
                self.current = next;
            }
        }
        if self.config.jitter > 0.0 {
            let u: f64 = rand::rng().random();
            base.mul_f64(1.0 + u * self.config.jitter)
        } else {
            base
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn default_backoff_follows_the_contract_sequence_with_jitter() {
        let mut b = Backoff::new(BackoffConfig::default());
        for base in [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0, 30.0] {
            let d = b.next_delay().as_secs_f64();
            assert!(
                d >= base && d < 2.0 * base,
                "{d} not in [{base}, {})",
                2.0 * base
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn custom_backoff_without_jitter_sums_to_250ms_over_five_failures() {
        let mut b = Backoff::new(BackoffConfig {
            initial: Duration::from_millis(10),
            factor: 2.0,
            cap: Duration::from_millis(100),
            jitter: 0.0,
            steps: 100,
            reset_after: Duration::from_secs(120),
        });
        let total: Duration = (0..5).map(|_| b.next_delay()).sum();
        assert_eq!(total, Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn reset_starts_the_sequence_again_from_the_first_delay() {
        let mut b = Backoff::new(BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        });
        let first: Vec<_> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(first, [800, 1600, 3200, 6400]);
        b.reset();
        let again: Vec<_> = (0..2).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(again, [800, 1600]);
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_resets_after_two_minutes_since_the_last_reset() {
        let cfg = BackoffConfig {
            jitter: 0.0,
            ..Default::default()
        };
        let mut b = Backoff::new(cfg);
        assert_eq!(b.next_delay(), Duration::from_millis(800));
        assert_eq!(b.next_delay(), Duration::from_millis(1600));
        tokio::time::advance(Duration::from_secs(121)).await;
        assert_eq!(b.next_delay(), Duration::from_millis(800));
    }
}
