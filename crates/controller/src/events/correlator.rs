//! The event correlator: what keeps a busy controller from flooding the API server with Events
//! (client-go's `EventCorrelator`, `tools/record/events_cache.go`).
//!
//! Each event goes through three stages, each with its own bounded LRU cache
//! ([`CorrelatorConfig::cache_size`] entries, 4096 by default):
//!
//! 1. **Spam filter** — a token bucket per (source, involved object, event type): a burst of 25,
//!    then one event per 5 minutes. Events over it are dropped. Unlike client-go, which runs the
//!    filter last, the filter runs first here, so a dropped event leaves the other caches
//!    untouched (client-go counts it in the next patch's `count` and may remember the name of an
//!    Event it never wrote, whose next patch then fails with NotFound and falls back to a create).
//! 2. **Aggregator** — events alike but for their message (same source, object, type, reason,
//!    reporting controller and instance): once 10 distinct messages were seen with no gap longer
//!    than 10 minutes, each further one is replaced by a single combined event, message
//!    `(combined from similar events): <latest message>`, so they all update one Event.
//! 3. **Logger (deduplication)** — an event identical to one already written (the full key,
//!    message included) becomes a patch of that Event: `count` + 1, a new `lastTimestamp`, the
//!    first occurrence's `firstTimestamp`, instead of a new Event.
//!
//! Which events share a bucket, which are similar and what a combined event says are client-go's
//! choices by default and can be replaced ([`CorrelatorConfig::with_spam_key`],
//! [`with_aggregate_key`](CorrelatorConfig::with_aggregate_key),
//! [`with_aggregate_message`](CorrelatorConfig::with_aggregate_message)); the logger's key is
//! fixed.
//!
//! Windows and buckets use `tokio::time::Instant`, so they follow a paused test clock.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::keys::{event_key, CorrelatorKeys};
use super::lru::Lru;
use super::model::{event_name, Event};
use super::timestamp::{Timestamp, WallClock};

/// The correlator's knobs; the defaults are client-go's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelatorConfig {
    /// Entries in each of the three LRU caches (4096).
    pub cache_size: usize,
    /// Events an object's bucket holds when full (25).
    pub spam_burst: u32,
    /// Time for the bucket to regain one event (5 minutes).
    pub spam_refill_interval: Duration,
    /// Distinct messages of similar events before they are combined (10).
    pub aggregate_max_events: usize,
    /// How long a run of similar events may pause before it counts afresh (10 minutes).
    pub aggregate_window: Duration,
    /// The spam key, aggregation key and combined message (client-go's by default); set them
    /// with [`with_spam_key`](Self::with_spam_key),
    /// [`with_aggregate_key`](Self::with_aggregate_key) and
    /// [`with_aggregate_message`](Self::with_aggregate_message).
    pub keys: CorrelatorKeys,
}

impl CorrelatorConfig {
    /// Groups events for the spam filter by `key` (client-go's `SpamKeyFunc`): events with the
    /// same key share one token bucket of [`spam_burst`](Self::spam_burst) events.
    ///
    /// The default, [`CorrelatorKeys::default_spam_key`], is source, involved object and type.
    /// Here, one bucket per object whoever reports it and whatever the type:
    ///
    /// ```
    /// use controller::events::{BroadcasterConfig, CorrelatorConfig};
    ///
    /// let config = BroadcasterConfig {
    ///     correlator: CorrelatorConfig::default().with_spam_key(|event| {
    ///         let object = &event.involved_object;
    ///         format!("{}/{}/{}", object.kind, object.namespace, object.name)
    ///     }),
    ///     ..BroadcasterConfig::default()
    /// };
    /// # let _ = config;
    /// ```
    #[must_use]
    pub fn with_spam_key(mut self, key: impl Fn(&Event) -> String + Send + Sync + 'static) -> Self {
        self.keys.set_spam(Arc::new(key));
        self
    }

    /// Groups events for aggregation by `key` (client-go's `KeyFunc`, an
    /// `EventAggregatorKeyFunc`), which returns the group key and the key that tells the
    /// events of a group apart. Once [`aggregate_max_events`](Self::aggregate_max_events)
    /// distinct keys of one group were seen within [`aggregate_window`](Self::aggregate_window)
    /// of each other, further events of that group are written as one combined Event.
    ///
    /// The default, [`CorrelatorKeys::default_aggregate_key`], groups by everything but the
    /// message and tells events apart by their message. The combined Event is about the object
    /// of the event that started it: a group spanning several objects patches that one Event.
    ///
    /// ```
    /// use controller::events::CorrelatorConfig;
    ///
    /// // Combine the same failure across every object of a kind; count objects, not messages.
    /// let config = CorrelatorConfig::default().with_aggregate_key(|event| {
    ///     let object = &event.involved_object;
    ///     (format!("{}/{}", object.kind, event.reason), object.name.clone())
    /// });
    /// # let _ = config;
    /// ```
    #[must_use]
    pub fn with_aggregate_key(
        mut self,
        key: impl Fn(&Event) -> (String, String) + Send + Sync + 'static,
    ) -> Self {
        self.keys.set_aggregate(Arc::new(key));
        self
    }

    /// The message of a combined Event, from the latest event folded into it (client-go's
    /// `MessageFunc`); the default, [`CorrelatorKeys::default_aggregate_message`], is
    /// `(combined from similar events): <latest message>`.
    ///
    /// ```
    /// use controller::events::CorrelatorConfig;
    ///
    /// let config = CorrelatorConfig::default()
    ///     .with_aggregate_message(|event| format!("{} (and similar)", event.message));
    /// # let _ = config;
    /// ```
    #[must_use]
    pub fn with_aggregate_message(
        mut self,
        message: impl Fn(&Event) -> String + Send + Sync + 'static,
    ) -> Self {
        self.keys.set_message(Arc::new(message));
        self
    }
}

impl Default for CorrelatorConfig {
    fn default() -> Self {
        Self {
            cache_size: 4096,
            spam_burst: 25,
            spam_refill_interval: Duration::from_secs(300),
            aggregate_max_events: 10,
            aggregate_window: Duration::from_secs(600),
            keys: CorrelatorKeys::default(),
        }
    }
}

/// What to do with an event.
#[derive(Debug)]
pub(crate) enum Correlation {
    /// Dropped by the spam filter.
    Filtered,
    /// Write this, then report the server's answer with [`EventCorrelator::update_state`].
    Write(Box<Correlated>),
}

#[derive(Debug)]
pub(crate) struct Correlated {
    /// The event to create, or the full state of the Event the patch updates.
    pub(crate) event: Event,
    /// A strategic-merge patch of `count`, `lastTimestamp` and `message` when the Event exists.
    pub(crate) patch: Option<serde_json::Value>,
    /// Whether the event was replaced by a combined one.
    pub(crate) aggregated: bool,
    /// The logger cache's key for the written Event.
    key: LogKey,
}

/// The logger cache's key: an event's full key, or for a combined Event its aggregation group.
/// Kept apart so that a custom aggregation key can never meet an event's own key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum LogKey {
    Event(String),
    Combined(String),
}

/// A token bucket that never waits: an event takes a token or is refused.
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    fn full(burst: u32, now: Instant) -> Self {
        Self {
            tokens: f64::from(burst),
            updated: now,
        }
    }

    fn try_accept(&mut self, burst: u32, refill: Duration, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.updated);
        let earned = if refill.is_zero() {
            f64::INFINITY
        } else {
            elapsed.as_secs_f64() / refill.as_secs_f64()
        };
        self.tokens = (self.tokens + earned).min(f64::from(burst));
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Similar events seen recently: their distinct local keys (by default their messages; fewer
/// than `aggregate_max_events`).
#[derive(Debug)]
struct AggregateRecord {
    local_keys: HashSet<String>,
    last: Instant,
}

/// What the logger remembers of an Event it wrote.
#[derive(Debug, Clone)]
struct EventLog {
    count: i32,
    first_timestamp: Option<Timestamp>,
    name: String,
    resource_version: String,
}

/// The three stages of the module docs, over bounded caches. Owned by the broadcaster's writer
/// task, so it needs no lock.
#[derive(Debug)]
pub(crate) struct EventCorrelator {
    config: CorrelatorConfig,
    clock: WallClock,
    spam: Lru<String, TokenBucket>,
    aggregates: Lru<String, AggregateRecord>,
    logs: Lru<LogKey, EventLog>,
}

impl EventCorrelator {
    pub(crate) fn new(config: CorrelatorConfig, clock: WallClock) -> Self {
        let size = config.cache_size;
        Self {
            config,
            clock,
            spam: Lru::new(size),
            aggregates: Lru::new(size),
            logs: Lru::new(size),
        }
    }

    /// Runs `event` through the spam filter, the aggregator and the logger.
    pub(crate) fn correlate(&mut self, event: Event) -> Correlation {
        let now = Instant::now();
        if !self.spam_accepts(&event, now) {
            return Correlation::Filtered;
        }
        let (event, key, aggregated) = self.aggregate(event, now);
        let (event, patch) = self.observe(event, &key);
        Correlation::Write(Box::new(Correlated {
            event,
            patch,
            aggregated,
            key,
        }))
    }

    /// Records the server's copy of a written Event, so the next repeat patches that name at
    /// that count.
    pub(crate) fn update_state(&mut self, correlated: &Correlated, written: &Event) {
        self.logs.insert(
            correlated.key.clone(),
            EventLog {
                count: written.count,
                first_timestamp: written.first_timestamp,
                name: written.metadata.name.clone(),
                resource_version: written.metadata.resource_version.clone(),
            },
        );
    }

    fn spam_accepts(&mut self, event: &Event, now: Instant) -> bool {
        let (burst, refill) = (self.config.spam_burst, self.config.spam_refill_interval);
        let key = self.config.keys.spam_key(event);
        if let Some(bucket) = self.spam.get_mut(&key) {
            return bucket.try_accept(burst, refill, now);
        }
        let mut bucket = TokenBucket::full(burst, now);
        let accepted = bucket.try_accept(burst, refill, now);
        self.spam.insert(key, bucket);
        accepted
    }

    /// Returns the event to write (the event itself or a combined one), its logger key, and
    /// whether it was combined.
    fn aggregate(&mut self, event: Event, now: Instant) -> (Event, LogKey, bool) {
        let (aggregate_key, local_key) = self.config.keys.aggregate_key(&event);
        let (max, window) = (
            self.config.aggregate_max_events.max(1),
            self.config.aggregate_window,
        );
        let fresh = || AggregateRecord {
            local_keys: HashSet::new(),
            last: now,
        };
        let mut record = match self.aggregates.get_mut(&aggregate_key) {
            Some(record) if now.saturating_duration_since(record.last) <= window => {
                std::mem::replace(record, fresh())
            }
            _ => fresh(),
        };
        record.local_keys.insert(local_key);
        record.last = now;
        let combine = record.local_keys.len() >= max;
        if combine {
            // Keep the set below the threshold, so each further event is combined too and the
            // set stays bounded (client-go pops an arbitrary one).
            if let Some(any) = record.local_keys.iter().next().cloned() {
                record.local_keys.remove(&any);
            }
        }
        self.aggregates.insert(aggregate_key.clone(), record);
        if !combine {
            let key = LogKey::Event(event_key(&event));
            return (event, key, false);
        }
        let combined = Event {
            metadata: super::model::EventMeta {
                name: event_name(&event.involved_object.name, self.clock.now()),
                namespace: event.metadata.namespace.clone(),
                resource_version: String::new(),
            },
            count: 1,
            first_timestamp: event.last_timestamp,
            message: self.config.keys.aggregate_message(&event),
            action: None,
            ..event
        };
        (combined, LogKey::Combined(aggregate_key), true)
    }

    fn observe(&mut self, mut event: Event, key: &LogKey) -> (Event, Option<serde_json::Value>) {
        let key = key.clone();
        let patch = match self.logs.get_mut(&key) {
            Some(last) => {
                event.metadata.name = last.name.clone();
                event.metadata.resource_version = last.resource_version.clone();
                event.first_timestamp = last.first_timestamp;
                event.count = last.count.saturating_add(1);
                Some(json!({
                    "count": event.count,
                    "lastTimestamp": event.last_timestamp,
                    "message": event.message,
                }))
            }
            None => None,
        };
        self.logs.insert(
            key,
            EventLog {
                count: event.count,
                first_timestamp: event.first_timestamp,
                name: event.metadata.name.clone(),
                resource_version: event.metadata.resource_version.clone(),
            },
        );
        (event, patch)
    }

    /// Entries in the spam, aggregate and logger caches.
    #[cfg(test)]
    pub(crate) fn cache_lens(&self) -> [usize; 3] {
        [self.spam.len(), self.aggregates.len(), self.logs.len()]
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::events::model::{EventMeta, EventSource, EventType, ObjectReference};

    fn event(object: &str, reason: &str, message: &str) -> Event {
        Event {
            metadata: EventMeta {
                name: format!("{object}.1"),
                namespace: "default".into(),
                resource_version: String::new(),
            },
            involved_object: ObjectReference::new("v1", "Pod", "default", object),
            reason: reason.into(),
            message: message.into(),
            source: EventSource {
                component: "test".into(),
                host: String::new(),
            },
            first_timestamp: Some(Timestamp::from_unix_seconds(0)),
            last_timestamp: Some(Timestamp::from_unix_seconds(0)),
            count: 1,
            type_: EventType::Normal,
            event_time: None,
            reporting_component: "test".into(),
            reporting_instance: String::new(),
            action: None,
        }
    }

    fn correlator(config: CorrelatorConfig) -> EventCorrelator {
        EventCorrelator::new(config, WallClock::new())
    }

    #[tokio::test(start_paused = true)]
    async fn the_spam_bucket_refills_one_event_per_interval() {
        let mut c = correlator(CorrelatorConfig {
            spam_burst: 2,
            ..CorrelatorConfig::default()
        });
        let mut accepted = || matches!(c.correlate(event("a", "R", "m")), Correlation::Write(_));
        assert!(accepted() && accepted());
        assert!(!accepted());
        tokio::time::advance(Duration::from_secs(299)).await;
        assert!(!accepted());
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(accepted());
        assert!(!accepted());
    }

    #[tokio::test(start_paused = true)]
    async fn similar_events_count_afresh_after_a_pause_longer_than_the_window() {
        let mut c = correlator(CorrelatorConfig::default());
        for i in 0..9 {
            let Correlation::Write(w) = c.correlate(event("a", "R", &format!("m{i}"))) else {
                panic!("filtered")
            };
            assert!(!w.aggregated);
        }
        tokio::time::advance(Duration::from_secs(601)).await;
        let Correlation::Write(w) = c.correlate(event("a", "R", "m9")) else {
            panic!("filtered")
        };
        assert!(!w.aggregated, "the run of nine ended 10 minutes ago");
    }

    fn arbitrary_event() -> impl Strategy<Value = Event> {
        (0u8..12, 0u8..3, 0u8..12, 0u64..700).prop_map(|(object, reason, message, _)| {
            event(
                &format!("o{object}"),
                &format!("R{reason}"),
                &format!("m{message}"),
            )
        })
    }

    proptest! {
        /// Invariant (module docs): each of the three caches holds at most `cache_size` entries,
        /// whatever the events and however far apart.
        #[test]
        fn correlator_caches_never_exceed_their_bound(
            cache_size in 1usize..6,
            steps in prop::collection::vec((arbitrary_event(), 0u64..400), 1..150),
        ) {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .start_paused(true)
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut c = correlator(CorrelatorConfig { cache_size, ..CorrelatorConfig::default() });
                for (event, gap) in steps {
                    tokio::time::advance(Duration::from_secs(gap)).await;
                    if let Correlation::Write(w) = c.correlate(event) {
                        let written = w.event.clone();
                        c.update_state(&w, &written);
                    }
                    for len in c.cache_lens() {
                        prop_assert!(len <= cache_size, "{len} > {cache_size}");
                    }
                }
                Ok(())
            })?;
        }
    }
}
