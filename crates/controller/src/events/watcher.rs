//! The handle of one watcher of a broadcaster (client-go's `watch.Interface` returned by
//! `StartEventWatcher` and its kin), and the watchers that are functions or the log.

use std::sync::{Arc, Weak};

use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;

use super::fanout::{Fanout, Subscription};
use super::model::Event;
use super::shared::{Counters, EventStats};

/// One running watcher of an [`EventBroadcaster`](super::EventBroadcaster): a sink, a function
/// or the log. [`stop`](Self::stop) stops this one only.
///
/// Dropping the handle leaves the watcher running (as client-go lets the returned watch be
/// ignored): it then ends once the broadcaster and every recorder are dropped and it has handled
/// what its queue holds.
#[derive(Debug)]
pub struct EventWatcher {
    id: u64,
    fanout: Weak<Fanout>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    counters: Arc<Counters>,
}

impl EventWatcher {
    pub(crate) fn new(
        id: u64,
        fanout: Weak<Fanout>,
        stop: CancellationToken,
        task: JoinHandle<()>,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            id,
            fanout,
            stop,
            task,
            counters,
        }
    }

    /// Subscribes `handler` to `fanout` and runs it on a task of its own.
    pub(crate) fn spawn_handler<F>(fanout: &Arc<Fanout>, mut handler: F) -> Self
    where
        F: FnMut(&Event) + Send + 'static,
    {
        let Subscription {
            id,
            mut receiver,
            counters,
        } = fanout.subscribe();
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (stop, fanout) = (stop.clone(), Arc::downgrade(fanout));
            async move {
                loop {
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => break,
                        event = receiver.recv() => match event {
                            Some(event) => handler(&event),
                            None => break,
                        },
                    }
                }
                if let Some(fanout) = fanout.upgrade() {
                    fanout.unsubscribe(id);
                }
            }
        });
        Self::new(id, Arc::downgrade(fanout), stop, task, counters)
    }

    /// Stops this watcher at once, leaving the others running: it is offered no further event,
    /// and what its queue holds (and, for a sink, the write in flight) is abandoned. Calling it
    /// again does nothing.
    pub fn stop(&self) {
        if let Some(fanout) = self.fanout.upgrade() {
            fanout.unsubscribe(self.id);
        }
        self.stop.cancel();
    }

    /// This watcher's own counts: for a sink, what it wrote, patched, filtered, combined and gave
    /// up on; for any watcher, the events it missed because its queue was full (`dropped`).
    pub fn stats(&self) -> EventStats {
        self.counters.snapshot()
    }

    /// Whether the watcher's task has ended (stopped, or its queue closed and drained).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Waits for the watcher's task to end: after [`stop`](Self::stop), or once the broadcaster
    /// and every recorder are dropped and it has handled what its queue holds. An error means
    /// the task panicked (a watcher function that panicked, say).
    ///
    /// # Cancel safety
    ///
    /// Dropping the returned future before it completes leaves the watcher running, as dropping
    /// the handle does.
    pub async fn join(self) -> Result<(), JoinError> {
        self.task.await
    }
}

/// One event as a `tracing` event at `level`. The event's message is the field
/// `event_message`: `tracing` names a log line's own text `message`, and a second field of that
/// name is lost to every subscriber that keeps the first.
pub(crate) fn log_event(level: tracing::Level, event: &Event) {
    let o = &event.involved_object;
    let object = if o.namespace.is_empty() {
        o.name.clone()
    } else {
        format!("{}/{}", o.namespace, o.name)
    };
    macro_rules! log {
        ($level:expr) => {
            tracing::event!(
                $level,
                object,
                kind = %o.kind,
                api_version = %o.api_version,
                field_path = %o.field_path,
                type_ = %event.type_,
                reason = %event.reason,
                event_message = %event.message,
                "event recorded"
            )
        };
    }
    match level {
        tracing::Level::ERROR => log!(tracing::Level::ERROR),
        tracing::Level::WARN => log!(tracing::Level::WARN),
        tracing::Level::INFO => log!(tracing::Level::INFO),
        tracing::Level::DEBUG => log!(tracing::Level::DEBUG),
        tracing::Level::TRACE => log!(tracing::Level::TRACE),
    }
}
