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
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::fanout::Fanout;
use super::model::{Event, EventSource, EventType, ObjectReference};
use super::shared::{bump, BroadcasterConfig, Counters, EventStats, EventStatsHandle, Shared};
use super::sink::EventSink;
use super::timestamp::WallClock;
use super::watcher::EventWatcher;
use super::writer::write_to_sink;

/// Hands out [`EventRecorder`]s and delivers their events to every watcher it started: sinks
/// ([`start`](Self::start), [`start_recording_to_sink`](Self::start_recording_to_sink)),
/// functions ([`start_event_watcher`](Self::start_event_watcher)) and the log
/// ([`start_logging`](Self::start_logging)), each through a bounded queue of its own.
///
/// ```
/// use controller::events::{BroadcasterConfig, EventBroadcaster, EventSource, EventType, MemorySink, ObjectReference};
/// use controller::CancellationToken;
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
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future is as `cancel`: the event being written and those still
    /// queued for this sink are abandoned; the other watchers go on.
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
    /// use controller::events::{BroadcasterConfig, EventBroadcaster, EventSource, EventType, MemorySink, ObjectReference};
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
    /// its kind, API version and field path, and the event's type, reason and message as the
    /// fields `object`, `kind`, `api_version`, `field_path`, `type_`, `reason` and
    /// `event_message` (not `message`, which is the log line's own text).
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
        let event = Event::recorded_at(object, type_, reason.to_owned(), message.to_owned(), now)
            .with_source((*self.source).clone());
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
