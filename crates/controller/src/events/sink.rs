//! Where events are written: the [`EventSink`] trait (client-go's `record.EventSink`), and
//! [`MemorySink`], an in-memory API server for tests with knobs to make it fail or hang.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;

use super::model::Event;

/// Why a sink did not write an event. The broadcaster retries [`SinkError::Retryable`] only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The Event to patch does not exist (it expired or was deleted): the broadcaster creates it
    /// anew.
    #[error("event not found")]
    NotFound,
    /// An Event of that name exists already: the broadcaster gives up on this one.
    #[error("event already exists")]
    AlreadyExists,
    /// A transient failure (transport error, timeout, server busy): worth retrying.
    #[error("transient failure writing event: {0}")]
    Retryable(String),
    /// The server refused the event for good (invalid, forbidden, namespace terminating).
    #[error("event rejected: {0}")]
    Rejected(String),
}

/// Writes Events to an API server (or anywhere else).
///
/// Implementations return the server's copy of the Event, whose name, resource version and
/// count the recorder remembers for the next repeat.
pub trait EventSink: Send + Sync + 'static {
    /// Creates `event` (its resource version is empty).
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, SinkError>> + Send;

    /// Applies `patch`, a strategic-merge patch of `count`, `lastTimestamp` and `message`, to
    /// the existing Event `event.metadata.{namespace, name}`; `event` is its expected full state.
    fn patch(
        &self,
        event: &Event,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<Event, SinkError>> + Send;
}

impl<S: EventSink + ?Sized> EventSink for Arc<S> {
    fn create(&self, event: &Event) -> impl Future<Output = Result<Event, SinkError>> + Send {
        (**self).create(event)
    }

    fn patch(
        &self,
        event: &Event,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<Event, SinkError>> + Send {
        (**self).patch(event, patch)
    }
}

/// One call a [`MemorySink`] received.
#[derive(Debug, Clone, PartialEq)]
pub enum SinkCall {
    /// `create(event)`.
    Create(Event),
    /// `patch(event, patch)`.
    Patch(Event, serde_json::Value),
}

impl SinkCall {
    /// The event the call was made with.
    pub fn event(&self) -> &Event {
        match self {
            Self::Create(event) | Self::Patch(event, _) => event,
        }
    }
}

/// An in-memory sink for tests: stores Events by namespace and name, records every call, and
/// can be told to fail the next calls or to hang until released. Clones share state.
///
/// It keeps every call it receives, so it is for tests, not for long-running processes.
///
/// ```
/// use controller::events::{MemorySink, SinkError};
///
/// let sink = MemorySink::new();
/// sink.fail_next([SinkError::Retryable("connection refused".into())]);
/// sink.hang(true); // calls wait until `hang(false)`
/// assert!(sink.events().is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct MemorySink {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    hang: watch::Sender<bool>,
    /// Calls waiting for `hang(false)`.
    hanging: AtomicUsize,
}

#[derive(Debug, Default)]
struct State {
    events: BTreeMap<(String, String), Event>,
    calls: Vec<SinkCall>,
    failures: VecDeque<SinkError>,
    resource_version: u64,
}

impl Default for MemorySink {
    fn default() -> Self {
        Self::new()
    }
}

impl MemorySink {
    /// An empty sink that succeeds at once.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                hang: watch::channel(false).0,
                hanging: AtomicUsize::new(0),
            }),
        }
    }

    /// The next calls fail with these errors, one each, in order (after any queued before).
    pub fn fail_next(&self, errors: impl IntoIterator<Item = SinkError>) {
        self.inner.state.lock().failures.extend(errors);
    }

    /// While `true`, calls wait (and are recorded only once released).
    pub fn hang(&self, hang: bool) {
        self.inner.hang.send_replace(hang);
    }

    /// Calls waiting for `hang(false)` right now.
    pub fn hanging_calls(&self) -> usize {
        self.inner.hanging.load(Ordering::SeqCst)
    }

    /// Every call received so far, in order.
    pub fn calls(&self) -> Vec<SinkCall> {
        self.inner.state.lock().calls.clone()
    }

    /// The stored Events, ordered by namespace and name.
    pub fn events(&self) -> Vec<Event> {
        self.inner.state.lock().events.values().cloned().collect()
    }

    /// Deletes a stored Event, as its expiry on a real server would.
    pub fn delete(&self, namespace: &str, name: &str) -> Option<Event> {
        self.inner
            .state
            .lock()
            .events
            .remove(&(namespace.to_owned(), name.to_owned()))
    }

    async fn released(&self) {
        let mut hang = self.inner.hang.subscribe();
        if !*hang.borrow_and_update() {
            return;
        }
        /// Counts the call as hanging until it is released or abandoned (dropped).
        struct Hanging<'a>(&'a AtomicUsize);
        impl Drop for Hanging<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.inner.hanging.fetch_add(1, Ordering::SeqCst);
        let _hanging = Hanging(&self.inner.hanging);
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = hang.wait_for(|hang| !*hang).await;
    }
}

fn id(event: &Event) -> (String, String) {
    (
        event.metadata.namespace.clone(),
        event.metadata.name.clone(),
    )
}

impl EventSink for MemorySink {
    async fn create(&self, event: &Event) -> Result<Event, SinkError> {
        self.released().await;
        let mut state = self.inner.state.lock();
        state.calls.push(SinkCall::Create(event.clone()));
        if let Some(error) = state.failures.pop_front() {
            return Err(error);
        }
        if state.events.contains_key(&id(event)) {
            return Err(SinkError::AlreadyExists);
        }
        state.resource_version += 1;
        let mut stored = event.clone();
        stored.metadata.resource_version = state.resource_version.to_string();
        state.events.insert(id(event), stored.clone());
        Ok(stored)
    }

    async fn patch(&self, event: &Event, patch: serde_json::Value) -> Result<Event, SinkError> {
        self.released().await;
        let mut state = self.inner.state.lock();
        state
            .calls
            .push(SinkCall::Patch(event.clone(), patch.clone()));
        if let Some(error) = state.failures.pop_front() {
            return Err(error);
        }
        state.resource_version += 1;
        let resource_version = state.resource_version.to_string();
        let stored = state
            .events
            .get_mut(&id(event))
            .ok_or(SinkError::NotFound)?;
        // A merge of top-level fields is all a strategic-merge patch of scalars does.
        let mut merged = serde_json::to_value(&*stored)
            .map_err(|error| SinkError::Rejected(error.to_string()))?;
        if let (Some(target), Some(fields)) = (merged.as_object_mut(), patch.as_object()) {
            for (field, value) in fields {
                target.insert(field.clone(), value.clone());
            }
        }
        let mut updated: Event = serde_json::from_value(merged)
            .map_err(|error| SinkError::Rejected(error.to_string()))?;
        updated.metadata.resource_version = resource_version;
        *stored = updated.clone();
        Ok(updated)
    }
}
