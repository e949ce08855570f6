//! How the correlator groups events: the spam filter's key, the aggregator's key and the
//! combined event's message (client-go's `CorrelatorOptions.SpamKeyFunc`, `KeyFunc` and
//! `MessageFunc`), with client-go's choices as the defaults.
//!
//! The deduplication key (identical events, message included) is not configurable, as in
//! client-go: it is what decides that a write is a patch of an Event the server already has.

use std::fmt;
use std::sync::Arc;

use super::model::Event;

/// The prefix of a combined event's message under the default [`CorrelatorKeys`].
const COMBINED_PREFIX: &str = "(combined from similar events): ";

type SpamKeyFn = Arc<dyn Fn(&Event) -> String + Send + Sync>;
type AggregateKeyFn = Arc<dyn Fn(&Event) -> (String, String) + Send + Sync>;
type MessageFn = Arc<dyn Fn(&Event) -> String + Send + Sync>;

/// The functions the correlator groups events by; set them with
/// [`CorrelatorConfig::with_spam_key`](super::CorrelatorConfig::with_spam_key),
/// [`with_aggregate_key`](super::CorrelatorConfig::with_aggregate_key) and
/// [`with_aggregate_message`](super::CorrelatorConfig::with_aggregate_message).
///
/// Each function left unset is client-go's: [`default_spam_key`](Self::default_spam_key),
/// [`default_aggregate_key`](Self::default_aggregate_key),
/// [`default_aggregate_message`](Self::default_aggregate_message). A custom function may call
/// these to refine rather than replace them.
///
/// Two `CorrelatorKeys` are equal when each of their functions is the default in both or the
/// very same function (one `Arc`) in both: closures cannot be compared otherwise.
#[derive(Clone, Default)]
pub struct CorrelatorKeys {
    spam: Option<SpamKeyFn>,
    aggregate: Option<AggregateKeyFn>,
    message: Option<MessageFn>,
}

/// Joins key parts with a separator that cannot occur in them, so that no two different
/// events share a key (client-go joins with "", where `ab`+`c` meets `a`+`bc`).
pub(crate) fn join<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut key = String::new();
    for part in parts {
        key.push_str(part);
        key.push('\0');
    }
    key
}

impl CorrelatorKeys {
    /// client-go's spam key: source, involved object and event type, so that each gets its own
    /// token bucket. The type is included (as in client-go since 2024) so that a run of Normal
    /// events cannot use up the bucket a Warning about the same object needs.
    pub fn default_spam_key(event: &Event) -> String {
        let (e, o) = (event, &event.involved_object);
        join([
            &*e.source.component,
            &e.source.host,
            &o.kind,
            &o.namespace,
            &o.name,
            &o.uid,
            &o.api_version,
            e.type_.as_str(),
        ])
    }

    /// client-go's `EventAggregatorByReasonFunc`: events are similar when they have the same
    /// source, object, type, reason, reporting controller and instance (the aggregate key), and
    /// count as distinct by their message (the local key).
    pub fn default_aggregate_key(event: &Event) -> (String, String) {
        let (e, o) = (event, &event.involved_object);
        let aggregate = join([
            &*e.source.component,
            &e.source.host,
            &o.kind,
            &o.namespace,
            &o.name,
            &o.uid,
            &o.api_version,
            e.type_.as_str(),
            &e.reason,
            &e.reporting_component,
            &e.reporting_instance,
        ]);
        (aggregate, e.message.clone())
    }

    /// client-go's `EventAggregatorByReasonMessageFunc`:
    /// `(combined from similar events): <latest message>`.
    pub fn default_aggregate_message(event: &Event) -> String {
        format!("{COMBINED_PREFIX}{}", event.message)
    }

    /// The spam filter's key of `event`: events with one key share one token bucket.
    pub(crate) fn spam_key(&self, event: &Event) -> String {
        match &self.spam {
            Some(f) => f(event),
            None => Self::default_spam_key(event),
        }
    }

    /// The aggregator's (group, distinct-within-group) keys of `event`.
    pub(crate) fn aggregate_key(&self, event: &Event) -> (String, String) {
        match &self.aggregate {
            Some(f) => f(event),
            None => Self::default_aggregate_key(event),
        }
    }

    /// The message of the combined event `event` is folded into.
    pub(crate) fn aggregate_message(&self, event: &Event) -> String {
        match &self.message {
            Some(f) => f(event),
            None => Self::default_aggregate_message(event),
        }
    }

    pub(crate) fn set_spam(&mut self, f: SpamKeyFn) {
        self.spam = Some(f);
    }

    pub(crate) fn set_aggregate(&mut self, f: AggregateKeyFn) {
        self.aggregate = Some(f);
    }

    pub(crate) fn set_message(&mut self, f: MessageFn) {
        self.message = Some(f);
    }
}

/// The full key, message included: identical events, deduplicated into one Event.
pub(crate) fn event_key(e: &Event) -> String {
    let o = &e.involved_object;
    join([
        &*e.source.component,
        &e.source.host,
        &o.kind,
        &o.namespace,
        &o.name,
        &o.field_path,
        &o.uid,
        &o.api_version,
        e.type_.as_str(),
        &e.reason,
        &e.message,
    ])
}

fn same<T: ?Sized>(a: &Option<Arc<T>>, b: &Option<Arc<T>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

impl PartialEq for CorrelatorKeys {
    fn eq(&self, other: &Self) -> bool {
        same(&self.spam, &other.spam)
            && same(&self.aggregate, &other.aggregate)
            && same(&self.message, &other.message)
    }
}

impl Eq for CorrelatorKeys {}

impl fmt::Debug for CorrelatorKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let which = |custom: bool| if custom { "custom" } else { "default" };
        f.debug_struct("CorrelatorKeys")
            .field("spam", &which(self.spam.is_some()))
            .field("aggregate", &which(self.aggregate.is_some()))
            .field("message", &which(self.message.is_some()))
            .finish()
    }
}
