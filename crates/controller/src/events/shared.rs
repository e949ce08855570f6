//! What a broadcaster's parts share: its configuration, its counters and its clock. Below the
//! recorder, the writers and the watchers, which all read them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::correlator::CorrelatorConfig;
use super::timestamp::WallClock;

/// The broadcaster's knobs; the defaults are client-go's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BroadcasterConfig {
    /// Events waiting for one watcher (a sink, a function, the log) before further ones are
    /// dropped for it (1000). Each watcher has a queue of its own.
    pub queue_capacity: usize,
    /// Attempts to write one event before giving up on it (12).
    pub max_attempts: u32,
    /// The pause between attempts (10 s); the first pause is a random fraction of it, so that
    /// many clients do not all retry at once after an API server outage.
    pub retry_interval: Duration,
    /// The spam filter, aggregator and deduplication.
    pub correlator: CorrelatorConfig,
}

impl Default for BroadcasterConfig {
    fn default() -> Self {
        Self {
            queue_capacity: 1000,
            max_attempts: 12,
            retry_interval: Duration::from_secs(10),
            correlator: CorrelatorConfig::default(),
        }
    }
}

/// What happened to the recorded events so far: for a broadcaster, summed over its sinks; for
/// one watcher ([`EventWatcher::stats`](super::EventWatcher::stats)), its own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventStats {
    /// New Events created on the sink (including re-creations after a patch found none).
    pub created: u64,
    /// Existing Events patched with a higher count.
    pub patched: u64,
    /// For a broadcaster: events that a watcher's full queue could not take, or that found a
    /// watcher ended without being stopped, or no watcher at all; each counted once however many
    /// watchers missed it. For one watcher: the events it missed.
    pub dropped: u64,
    /// Events dropped by the spam filter.
    pub filtered: u64,
    /// Events replaced by a combined event of similar ones.
    pub aggregated: u64,
    /// Events given up on: rejected, already existing, or still failing after every attempt.
    pub failed: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) created: AtomicU64,
    pub(crate) patched: AtomicU64,
    pub(crate) dropped: AtomicU64,
    pub(crate) filtered: AtomicU64,
    pub(crate) aggregated: AtomicU64,
    pub(crate) failed: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> EventStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        EventStats {
            created: get(&self.created),
            patched: get(&self.patched),
            dropped: get(&self.dropped),
            filtered: get(&self.filtered),
            aggregated: get(&self.aggregated),
            failed: get(&self.failed),
        }
    }
}

/// Reads an [`EventBroadcaster`](super::EventBroadcaster)'s [`EventStats`] (e.g. for metrics) after it has started.
#[derive(Debug, Clone)]
pub struct EventStatsHandle(pub(crate) Arc<Shared>);

impl EventStatsHandle {
    /// The counts so far.
    pub fn get(&self) -> EventStats {
        self.0.counters.snapshot()
    }
}

pub(crate) fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::Relaxed) + 1
}

/// What the broadcaster, its recorders, writers and stats handles share; not the queues, so that
/// a stats handle does not keep them open.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) counters: Counters,
    pub(crate) clock: WallClock,
}
