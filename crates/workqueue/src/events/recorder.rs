//! The recorder a controller calls, and the broadcaster that writes its events in the background
//! (client-go's `EventRecorder` and `EventBroadcaster`, `tools/record/event.go`).
//!
//! Recording never blocks and never fails: [`EventRecorder::event`] stamps the event and puts it
//! on a bounded queue ([`BroadcasterConfig::queue_capacity`], 1000 as in client-go); when the
//! queue is full the event is dropped and counted. One writer task takes events off the queue in
//! order, runs them through the [correlator](super::correlator) and writes them through the
//! [`EventSink`], retrying transient failures a bounded number of times.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::correlator::{Correlated, Correlation, CorrelatorConfig, EventCorrelator};
use super::model::{Event, EventMeta, EventSource, EventType, ObjectReference};
use super::sink::{EventSink, SinkError};
use super::timestamp::{Timestamp, WallClock};

/// The broadcaster's knobs; the defaults are client-go's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BroadcasterConfig {
    /// Events waiting to be written before further ones are dropped (1000).
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

/// What happened to the recorded events so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventStats {
    /// New Events created on the sink (including re-creations after a patch found none).
    pub created: u64,
    /// Existing Events patched with a higher count.
    pub patched: u64,
    /// Events dropped because the queue was full (or the writer had stopped).
    pub dropped: u64,
    /// Events dropped by the spam filter.
    pub filtered: u64,
    /// Events replaced by a combined event of similar ones.
    pub aggregated: u64,
    /// Events given up on: rejected, already existing, or still failing after every attempt.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    created: AtomicU64,
    patched: AtomicU64,
    dropped: AtomicU64,
    filtered: AtomicU64,
    aggregated: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> EventStats {
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

fn bump(counter: &AtomicU64) -> u64 {
    counter.fetch_add(1, Ordering::Relaxed) + 1
}

#[derive(Debug)]
struct Shared {
    counters: Counters,
    clock: WallClock,
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

/// Owns the event queue; hands out [`EventRecorder`]s, then writes their events to a sink.
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
    sender: mpsc::Sender<Event>,
    receiver: mpsc::Receiver<Event>,
    shared: Arc<Shared>,
}

impl EventBroadcaster {
    /// A broadcaster with an empty queue; nothing is written until [`start`](Self::start).
    pub fn new(config: BroadcasterConfig) -> Self {
        let (sender, receiver) = mpsc::channel(config.queue_capacity.max(1));
        Self {
            config,
            sender,
            receiver,
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
            sender: self.sender.clone(),
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
    pub async fn run<S: EventSink>(self, sink: S, cancel: CancellationToken) {
        let Self {
            config,
            sender,
            mut receiver,
            shared,
        } = self;
        // Only recorders keep the queue open, so that dropping them all ends the writer.
        drop(sender);
        let mut writer = Writer {
            correlator: EventCorrelator::new(config.correlator.clone(), shared.clock),
            config,
            sink,
            shared,
            rng: Jitter::seeded(),
        };
        loop {
            let event = tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                event = receiver.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => return,
                () = writer.record(event) => {}
            }
        }
    }
}

/// Records events about objects. Cheap to clone; never blocks, never fails (see the
/// [module docs](crate::events)).
#[derive(Debug, Clone)]
pub struct EventRecorder {
    sender: mpsc::Sender<Event>,
    shared: Arc<Shared>,
    source: Arc<EventSource>,
}

impl EventRecorder {
    /// Records that `reason` happened to `object`, described by `message`.
    ///
    /// `reason` should be short and UpperCamelCase (`FailedScheduling`); it is what tools group
    /// by. The event is queued, or dropped and counted in [`EventStats::dropped`] if the queue is
    /// full.
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
        if self.sender.try_send(event).is_err() {
            let dropped = bump(&self.shared.counters.dropped);
            // Rate-limited: a full queue under load would otherwise log once per event.
            if dropped.is_power_of_two() {
                tracing::warn!(
                    dropped,
                    reason,
                    kind = %object.kind,
                    namespace = %object.namespace,
                    name = %object.name,
                    "event queue full or writer stopped; dropping event"
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

/// The random fraction of the first retry pause (xorshift64*: no need for a crypto RNG here).
#[derive(Debug)]
struct Jitter(u64);

impl Jitter {
    fn seeded() -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        Self(u64::from(nanos) ^ 0x9E37_79B9_7F4A_7C15 | 1)
    }

    /// A number in [0, 1).
    fn next_fraction(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Writer<S> {
    config: BroadcasterConfig,
    correlator: EventCorrelator,
    sink: S,
    shared: Arc<Shared>,
    rng: Jitter,
}

/// How one attempt ended.
enum Written {
    Created(Event),
    Patched(Event),
}

impl<S: EventSink> Writer<S> {
    /// Correlates `event` and writes the result, retrying transient failures
    /// (client-go's `recordToSink`).
    async fn record(&mut self, event: Event) {
        let counters = &self.shared.counters;
        let mut correlated = match self.correlator.correlate(event) {
            Correlation::Filtered => {
                bump(&counters.filtered);
                return;
            }
            Correlation::Write(correlated) => correlated,
        };
        if correlated.aggregated {
            bump(&counters.aggregated);
        }
        let max_attempts = self.config.max_attempts.max(1);
        let mut attempt = 1;
        loop {
            let error = match self.attempt(&mut correlated).await {
                Ok(written) => {
                    let server = match written {
                        Written::Created(event) => {
                            bump(&self.shared.counters.created);
                            event
                        }
                        Written::Patched(event) => {
                            bump(&self.shared.counters.patched);
                            event
                        }
                    };
                    self.correlator.update_state(&correlated, &server);
                    return;
                }
                Err(error) => error,
            };
            let event = &correlated.event;
            let retry = matches!(error, SinkError::Retryable(_)) && attempt < max_attempts;
            match (&error, retry) {
                (_, true) => tracing::debug!(
                    %error, attempt, reason = %event.reason, name = %event.metadata.name,
                    "writing event failed; retrying"
                ),
                (SinkError::AlreadyExists, _) => tracing::debug!(
                    reason = %event.reason, name = %event.metadata.name,
                    "event already exists; not retrying"
                ),
                _ => tracing::warn!(
                    %error, attempt, reason = %event.reason, name = %event.metadata.name,
                    "giving up writing event"
                ),
            }
            if !retry {
                bump(&self.shared.counters.failed);
                return;
            }
            let pause = if attempt == 1 {
                self.config.retry_interval.mul_f64(self.rng.next_fraction())
            } else {
                self.config.retry_interval
            };
            tokio::time::sleep(pause).await;
            attempt += 1;
        }
    }

    /// One attempt: the patch if the Event exists, else (or if it has vanished) a create
    /// (client-go's `recordEvent`).
    async fn attempt(&self, correlated: &mut Correlated) -> Result<Written, SinkError> {
        if let Some(patch) = &correlated.patch {
            match self.sink.patch(&correlated.event, patch.clone()).await {
                Ok(event) => return Ok(Written::Patched(event)),
                Err(SinkError::NotFound) => {
                    // The Event expired or was deleted: create it afresh, counting from this
                    // occurrence (client-go would create it with the accumulated count), and
                    // keep creating on later attempts.
                    let event = &mut correlated.event;
                    event.count = 1;
                    event.first_timestamp = event.last_timestamp;
                    correlated.patch = None;
                }
                Err(error) => return Err(error),
            }
        }
        correlated.event.metadata.resource_version.clear();
        self.sink
            .create(&correlated.event)
            .await
            .map(Written::Created)
    }
}
