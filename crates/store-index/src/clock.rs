//! [`Clock`]: where the time-based stores read the time, so tests can move it by hand.
//!
//! The expiration cache and the mutation cache compare entries' ages with a time-to-live. Reading
//! `Instant::now()` directly would make their tests sleep; instead they take a clock, which is
//! [`SystemClock`] in production and a [`FakeClock`] (or any `Fn() -> Instant`) in tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of the current time.
///
/// Any `Fn() -> Instant + Send + Sync` closure is a clock too.
pub trait Clock: Send + Sync + 'static {
    /// The current time.
    fn now(&self) -> Instant;
}

impl<F> Clock for F
where
    F: Fn() -> Instant + Send + Sync + 'static,
{
    fn now(&self) -> Instant {
        self()
    }
}

/// The real monotonic clock (`Instant::now()`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to. Clones share one time, so a test keeps a clone and
/// advances the clock a store reads.
///
/// ```
/// use std::time::Duration;
/// use store_index::{Clock, FakeClock};
///
/// let clock = FakeClock::new();
/// let start = clock.now();
/// let store_side = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(store_side.now() - start, Duration::from_secs(5));
/// ```
#[derive(Debug, Clone)]
pub struct FakeClock {
    now: Arc<Mutex<Instant>>,
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClock {
    /// A clock stopped at the current real time.
    pub fn new() -> Self {
        Self::at(Instant::now())
    }

    /// A clock stopped at `now`.
    pub fn at(now: Instant) -> Self {
        FakeClock {
            now: Arc::new(Mutex::new(now)),
        }
    }

    /// Moves the time forward by `by`.
    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }

    /// Sets the time (backwards too, which lets a test show that an entry was deleted rather than
    /// merely hidden).
    pub fn set(&self, now: Instant) {
        *self.now.lock() = now;
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        *self.now.lock()
    }
}
