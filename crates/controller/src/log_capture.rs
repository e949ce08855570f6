//! The `tracing` events a test's code emits, each as its level and its fields by name, in the
//! order written: tests read what a subscriber reads, field by field, not a formatted line.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

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

/// Captures the events of this thread (a current-thread runtime's tasks included) until the
/// guard is dropped.
pub(crate) fn capture() -> (Arc<Mutex<Vec<Captured>>>, DefaultGuard) {
    let events = Arc::<Mutex<Vec<Captured>>>::default();
    let subscriber = tracing_subscriber::registry().with(Capture(events.clone()));
    (events, tracing::subscriber::set_default(subscriber))
}

struct Capture(Arc<Mutex<Vec<Captured>>>);

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields(Vec::new());
        event.record(&mut fields);
        self.0.lock().push(Captured {
            level: *event.metadata().level(),
            fields: fields.0,
        });
    }
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
