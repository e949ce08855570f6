//! Kubernetes Events from a controller, with client-go's `tools/record` semantics.
//!
//! A reconcile calls [`EventRecorder::event`], which never blocks and never fails: it offers the
//! event to every watcher the [`EventBroadcaster`] started, each through a bounded queue of its
//! own, and an event a full queue cannot take is dropped for that watcher (counted). A sink's
//! writer task ([`EventBroadcaster::start`], [`EventBroadcaster::start_recording_to_sink`])
//! takes events off its queue and, through its own correlator, keeps their number down before
//! writing them to an [`EventSink`]; a watcher function
//! ([`EventBroadcaster::start_event_watcher`]) or the log ([`EventBroadcaster::start_logging`])
//! sees every event as recorded. Each watcher's [`EventWatcher`] handle stops that one alone.
//!
//! ```text
//!  recorder.event ─try_send─┬─► queue (1000) ─► correlator ──────────────► EventSink
//!      │ full: dropped      │    spam filter: 25 per object+type, +1 / 5 min  create / patch
//!      ▼ for that watcher   │    aggregator: 10 similar in 10 min → combined  retry ×12, 10 s
//!   EventStats              │    logger: a repeat → patch count               NotFound → create
//!                           ├─► queue (1000) ─► another sink, its own correlator
//!                           ├─► queue (1000) ─► a watcher function
//!                           └─► queue (1000) ─► tracing (start_logging)
//! ```
//!
//! Invariants:
//! - recording never awaits, and every buffer is bounded: each watcher's queue by
//!   [`BroadcasterConfig::queue_capacity`] (see `fanout.rs`), each correlator cache by
//!   [`CorrelatorConfig::cache_size`] (checked by a property test), the retries of one event by
//!   [`BroadcasterConfig::max_attempts`];
//! - a slow or stalled watcher delays neither the recorders nor the other watchers: it misses
//!   the events its full queue cannot take;
//! - a sink's events are written one at a time in the order they were recorded, so a repeat is
//!   always correlated with the server's answer to the write before it.
//!
//! Used from a reconcile of the [`Controller`](crate::Controller) runner:
//!
//! ```
//! use controller::events::{BroadcasterConfig, EventBroadcaster, EventSource, EventType, MemorySink, ObjectReference};
//! use controller::{Action, CancellationToken, Controller};
//! use controller::workqueue::{default_controller_rate_limiter, RateLimitingQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
//! let recorder = broadcaster.new_recorder(EventSource::new("web-controller").with_host("node-1"));
//! let sink = MemorySink::new(); // in a cluster: ApiEventSink::new(client)
//! let writer = broadcaster.start(sink.clone(), CancellationToken::new());
//!
//! let queue = RateLimitingQueue::new(default_controller_rate_limiter());
//! queue.add("default/web".to_string());
//! let stop = CancellationToken::new();
//! Controller::new(queue)
//!     .run(stop.clone(), move |key: String| {
//!         let (recorder, stop) = (recorder.clone(), stop.clone());
//!         async move {
//!             let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
//!             let deployment = ObjectReference::new("apps/v1", "Deployment", namespace, name);
//!             recorder.eventf(&deployment, EventType::Normal, "Reconciled", format_args!("reconciled {key}"));
//!             stop.cancel();
//!             Ok::<_, std::convert::Infallible>(Action::Done)
//!         }
//!     })
//!     .await;
//!
//! // The controller dropped its recorders; the writer drains the queue and returns.
//! writer.await.unwrap();
//! let events = sink.events();
//! assert_eq!(events[0].reason, "Reconciled");
//! assert_eq!(events[0].source.host, "node-1");
//! assert!(events[0].metadata.name.starts_with("web."));
//! # }
//! ```

mod api_sink;
mod correlator;
mod fanout;
mod keys;
mod lru;
mod model;
mod recorder;
mod shared;
mod sink;
mod timestamp;
mod watcher;
mod writer;

#[cfg(test)]
mod tests;

pub use api_sink::ApiEventSink;
pub use correlator::CorrelatorConfig;
pub use keys::CorrelatorKeys;
pub use model::{Event, EventMeta, EventSource, EventType, ObjectReference};
pub use recorder::{EventBroadcaster, EventRecorder};
pub use shared::{BroadcasterConfig, EventStats, EventStatsHandle};
pub use sink::{EventSink, MemorySink, SinkCall, SinkError};
pub use timestamp::{Timestamp, TimestampParseError};
pub use watcher::EventWatcher;
