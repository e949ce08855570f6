//! The `tracing` events a test's code emits, each as its level and its fields by name in the
//! order written: tests read what a subscriber reads, field by field, so that two fields of one
//! name (which a subscriber keeping the first would lose) show.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span;
use tracing::subscriber::DefaultGuard;

/// One event: its level and its fields (the text of a log line is its field `message`).
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub(crate) level: tracing::Level,
    pub(crate) fields: Vec<(String, String)>,
}

impl Captured {
    /// Every value of the field `name`, in the order written.
    pub(crate) fn values(&self, name: &str) -> Vec<&str> {
        self.fields
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// The events of the current thread while the guard lives (paused tests run on one thread,
/// their spawned tasks included).
pub(crate) struct LogCapture {
    events: Arc<Mutex<Vec<Captured>>>,
    _guard: DefaultGuard,
}

impl LogCapture {
    pub(crate) fn start() -> Self {
        let events = Arc::<Mutex<Vec<Captured>>>::default();
        let subscriber = CaptureSubscriber(Arc::clone(&events));
        LogCapture {
            events,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    /// The events captured so far.
    pub(crate) fn events(&self) -> Vec<Captured> {
        self.events.lock().clone()
    }

    /// The events whose text (field `message`) is `text`.
    pub(crate) fn with_message(&self, text: &str) -> Vec<Captured> {
        self.events()
            .into_iter()
            .filter(|e| e.values("message").first() == Some(&text))
            .collect()
    }
}

struct CaptureSubscriber(Arc<Mutex<Vec<Captured>>>);

impl tracing::Subscriber for CaptureSubscriber {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &span::Attributes<'_>) -> span::Id {
        span::Id::from_u64(1)
    }
    fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.0.lock().push(Captured {
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

struct Fields(Vec<(String, String)>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_string(), value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .push((field.name().to_string(), format!("{value:?}")));
    }
}
