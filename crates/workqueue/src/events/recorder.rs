//! The recorder a controller calls, and the broadcaster that writes its events in the background
//! (client-go's `EventRecorder` and `EventBroadcaster`, `tools/record/event.go`).
//!
//! Recording never blocks and never fails: [`EventRecorder::event`] stamps the event and offers it
//! to every watcher the broadcaster started, each through its own bounded queue
//! ([`BroadcasterConfig::queue_capacity`], 1000 as in client-go); a watcher whose queue is full
//! misses the event, which is counted (see [`fanout`](super::fanout)). A sink's writer task takes
//! events off its queue in order, runs them through its own [correlator](super::correlator) and
//! writes them through the [`EventSink`], retrying transient failures a bounded number of times;
//! a watcher task calls its function, or logs, for each event.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::correlator::CorrelatorConfig;
use super::fanout::Fanout;
use super::model::{Event, EventMeta, EventSource, EventType, ObjectReference};
use super::sink::EventSink;
use super::timestamp::{Timestamp, WallClock};
use super::watcher::EventWatcher;
use super::writer::write_to_sink;

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
/// one watcher ([`EventWatcher::stats`]), its own.
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

/// Reads an [`EventBroadcaster`]'s [`EventStats`] (e.g. for metrics) after it has started.
#[derive(Debug, Clone)]
pub struct EventStatsHandle(Arc<Shared>);

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

/// `<involved name>.<hex>`: client-go's Event name, the hex being the time in nanoseconds since
/// the epoch, made strictly increasing within the process so that two events recorded in the
/// same nanosecond (or under a paused clock) still get different names.
pub(crate) fn event_name(involved_name: &str, now: SystemTime) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let nanos = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let previous = LAST
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| {
            Some(nanos.max(last.wrapping_add(1)))
        })
        .unwrap_or(nanos);
    format!("{involved_name}.{:x}", nanos.max(previous.wrapping_add(1)))
}

/// Hands out [`EventRecorder`]s and delivers their events to every watcher it started: sinks
/// ([`start`](Self::start), [`start_recording_to_sink`](Self::start_recording_to_sink)),
/// functions ([`start_event_watcher`](Self::start_event_watcher)) and the log
/// ([`start_logging`](Self::start_logging)), each through a bounded queue of its own.
///
/// ```
/// use workqueue::events::{BroadcasterConfig, EventBroadcaster, EventSource, EventType, MemorySink, ObjectReference};
/// use workqueue::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
/// let recorder = broadcaster.new_recorder(EventSource::new("web-controller"));
/// let sink = MemorySink::new();
/// let writer = broadcaster.start(sink.clone(), CancellationToken::new());
///
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-0");
/// recorder.event(&pod, EventType::Normal, "Scaled", "scaled to 3");
/// recorder.event(&pod, EventType::Normal, "Scaled", "scaled to 3");
///
/// drop(recorder); // the queue closes once every recorder is gone: the writer drains it, ends
/// writer.await.unwrap();
/// assert_eq!(sink.events()[0].count, 2);
/// # }
/// ```
#[derive(Debug)]
pub struct EventBroadcaster {
    config: BroadcasterConfig,
    fanout: Arc<Fanout>,
    shared: Arc<Shared>,
}

impl EventBroadcaster {
    /// A broadcaster with one empty queue, which the first watcher started takes over (so events
    /// recorded before it are not lost); nothing is written until a watcher starts.
    pub fn new(config: BroadcasterConfig) -> Self {
        Self {
            fanout: Arc::new(Fanout::new(config.queue_capacity)),
            config,
            shared: Arc::new(Shared {
                counters: Counters::default(),
                clock: WallClock::new(),
            }),
        }
    }

    /// A recorder whose events come from `source`: `source.component` is also the reporting
    /// component and `source.host` the reporting instance, as in client-go.
    pub fn new_recorder(&self, source: EventSource) -> EventRecorder {
        EventRecorder {
            fanout: self.fanout.clone(),
            shared: self.shared.clone(),
            source: Arc::new(source),
        }
    }

    /// The counts so far (also readable from any recorder).
    pub fn stats(&self) -> EventStats {
        self.shared.counters.snapshot()
    }

    /// A reader of the counts that, unlike a recorder, does not keep the queue open.
    pub fn stats_handle(&self) -> EventStatsHandle {
        EventStatsHandle(self.shared.clone())
    }

    /// Spawns [`run`](Self::run) on the current tokio runtime (so, like `tokio::spawn`, it must
    /// be called from within one).
    pub fn start<S: EventSink>(self, sink: S, cancel: CancellationToken) -> JoinHandle<()> {
        tokio::spawn(self.run(sink, cancel))
    }

    /// Writes recorded events to `sink`, in the order they were recorded, until every recorder
    /// is dropped and the queue is drained, or until `cancel` fires: then it returns at once,
    /// abandoning the event being written and those still queued.
    ///
    /// The sink is a watcher like those of [`start_recording_to_sink`](Self::start_recording_to_sink),
    /// subscribed when `run` is called; watchers started earlier keep running, and end too once
    /// every recorder is dropped (the broadcaster is consumed here).
    pub fn run<S: EventSink>(
        self,
        sink: S,
        cancel: CancellationToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let subscription = self.fanout.subscribe();
        let fanout = Arc::downgrade(&self.fanout);
        let Self { config, shared, .. } = self;
        // The broadcaster's hold on the queues ends here: only recorders keep them open, so that
        // dropping them all ends the writer.
        write_to_sink(subscription, fanout, sink, config, shared, cancel)
    }

    /// Starts writing recorded events to `sink` as well (client-go's `StartRecordingToSink`),
    /// through a correlator of its own, on a task of the current tokio runtime, and returns the
    /// handle that stops it.
    ///
    /// The sink gets every event recorded from now on (and, if it is the first watcher, those
    /// recorded before) through its own queue of [`BroadcasterConfig::queue_capacity`] events:
    /// while it is slow or stalled, events beyond that are dropped for it alone (counted in its
    /// [`EventWatcher::stats`]), and the recorders and the other watchers never wait for it.
    /// It ends when stopped, or once the broadcaster and every recorder are dropped and it has
    /// written what its queue holds.
    ///
    /// ```
    /// use workqueue::events::{BroadcasterConfig, EventBroadcaster, EventSource, EventType, MemorySink, ObjectReference};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    /// let recorder = broadcaster.new_recorder(EventSource::new("web-controller"));
    /// let (cluster, audit) = (MemorySink::new(), MemorySink::new());
    /// let to_cluster = broadcaster.start_recording_to_sink(cluster.clone());
    /// let to_audit = broadcaster.start_recording_to_sink(audit.clone());
    /// let logging = broadcaster.start_logging(tracing::Level::INFO);
    ///
    /// recorder.event(&ObjectReference::new("v1", "Pod", "default", "web-0"), EventType::Normal, "Scaled", "scaled to 3");
    ///
    /// drop((broadcaster, recorder)); // every queue closes: each watcher finishes and ends
    /// for watcher in [to_cluster, to_audit, logging] {
    ///     watcher.join().await.unwrap();
    /// }
    /// assert_eq!(cluster.events().len(), 1);
    /// assert_eq!(audit.events().len(), 1);
    /// # }
    /// ```
    pub fn start_recording_to_sink<S: EventSink>(&self, sink: S) -> EventWatcher {
        let subscription = self.fanout.subscribe();
        let (id, counters) = (subscription.id, subscription.counters.clone());
        let stop = CancellationToken::new();
        let task = tokio::spawn(write_to_sink(
            subscription,
            Arc::downgrade(&self.fanout),
            sink,
            self.config.clone(),
            self.shared.clone(),
            stop.clone(),
        ));
        EventWatcher::new(id, Arc::downgrade(&self.fanout), stop, task, counters)
    }

    /// Starts calling `handler` with every recorded event (client-go's `StartEventWatcher`), in
    /// the order recorded, on a task of the current tokio runtime, and returns the handle that
    /// stops it. The events are as recorded, before any correlation.
    ///
    /// `handler` runs on the runtime, so it must not block; what it cannot keep up with waits
    /// in its queue and, beyond [`BroadcasterConfig::queue_capacity`] events, is dropped for it
    /// alone, as for a sink (see [`start_recording_to_sink`](Self::start_recording_to_sink)).
    pub fn start_event_watcher<F>(&self, handler: F) -> EventWatcher
    where
        F: FnMut(&Event) + Send + 'static,
    {
        EventWatcher::spawn_handler(&self.fanout, handler)
    }

    /// Starts logging every recorded event through `tracing` at `level` (client-go's
    /// `StartStructuredLogging`): message `event recorded`, with the object (`namespace/name`),
    /// its kind, API version and field path, and the event's type, reason and message as fields.
    /// A watcher like those of [`start_event_watcher`](Self::start_event_watcher). The message
    /// is logged as it is written to the API server, where anyone who can read Events sees it:
    /// neither should carry a secret.
    pub fn start_logging(&self, level: tracing::Level) -> EventWatcher {
        self.start_event_watcher(move |event| super::watcher::log_event(level, event))
    }
}

/// Records events about objects. Cheap to clone; never blocks, never fails (see the
/// [module docs](crate::events)).
#[derive(Debug, Clone)]
pub struct EventRecorder {
    fanout: Arc<Fanout>,
    shared: Arc<Shared>,
    source: Arc<EventSource>,
}

impl EventRecorder {
    /// Records that `reason` happened to `object`, described by `message`.
    ///
    /// `reason` should be short and UpperCamelCase (`FailedScheduling`); it is what tools group
    /// by. The event is queued for every watcher of the broadcaster; a watcher whose queue is
    /// full misses it, which is counted in [`EventStats::dropped`].
    pub fn event(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        let now = self.shared.clock.now();
        let timestamp = Some(Timestamp::from_system_time(now));
        let namespace = if object.namespace.is_empty() {
            "default".to_owned()
        } else {
            object.namespace.clone()
        };
        let event = Event {
            metadata: EventMeta {
                name: event_name(&object.name, now),
                namespace,
                resource_version: String::new(),
            },
            involved_object: object.clone(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            source: (*self.source).clone(),
            first_timestamp: timestamp,
            last_timestamp: timestamp,
            count: 1,
            type_,
            event_time: None,
            reporting_component: self.source.component.clone(),
            reporting_instance: self.source.host.clone(),
            action: None,
        };
        if !self.fanout.send(event) {
            let dropped = bump(&self.shared.counters.dropped);
            // Rate-limited: a full queue under load would otherwise log once per event.
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    reason,
                    kind = %object.kind,
                    namespace = %object.namespace,
                    name = %object.name,
                    "an event watcher's queue is full or no watcher is running; event dropped for it"
                );
            }
        }
    }

    /// [`event`](Self::event) with a formatted message:
    /// `recorder.eventf(&pod, EventType::Warning, "BackOff", format_args!("restarted {n} times"))`.
    pub fn eventf(
        &self,
        object: &ObjectReference,
        type_: EventType,
        reason: &str,
        message: fmt::Arguments<'_>,
    ) {
        match message.as_str() {
            Some(message) => self.event(object, type_, reason, message),
            None => self.event(object, type_, reason, &message.to_string()),
        }
    }

    /// The counts so far, shared by every recorder of the same broadcaster.
    pub fn stats(&self) -> EventStats {
        self.shared.counters.snapshot()
    }
}
