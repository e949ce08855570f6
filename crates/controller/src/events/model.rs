//! The core/v1 `Event` as it goes over the wire, and the reference to the object it is about.
//!
//! Only the fields the recorder writes are modelled; field names are the API's (camelCase), and
//! empty optional strings are left out of the JSON as the API server leaves them out.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::timestamp::Timestamp;

/// The object an event is about (core/v1 `ObjectReference`).
///
/// ```
/// use controller::events::ObjectReference;
///
/// let pod = ObjectReference::new("v1", "Pod", "default", "web-0").with_uid("5f1c");
/// assert_eq!(pod.name, "web-0");
/// assert_eq!(serde_json::to_value(&pod).unwrap()["apiVersion"], "v1");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// The object's kind, e.g. `Pod`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The object's namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's UID, which tells apart two objects that had the same name at different times.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The object's API version, e.g. `apps/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The resource version of the object the event was recorded against.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A part of the object, e.g. `spec.containers{web}`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field_path: String,
}

impl ObjectReference {
    /// A reference to the object `namespace/name` of `api_version` and `kind` (an empty namespace
    /// for a cluster-scoped object).
    pub fn new(
        api_version: impl Into<String>,
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Self::default()
        }
    }

    /// Sets the object's UID.
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }

    /// Sets the object's resource version.
    pub fn with_resource_version(mut self, resource_version: impl Into<String>) -> Self {
        self.resource_version = resource_version.into();
        self
    }

    /// Points at a part of the object, e.g. `spec.containers{web}`.
    pub fn with_field_path(mut self, field_path: impl Into<String>) -> Self {
        self.field_path = field_path.into();
        self
    }
}

/// Whether an event is routine or worth a look (the API accepts these two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// Routine: something happened as intended.
    #[default]
    Normal,
    /// Something may be wrong.
    Warning,
}

impl EventType {
    /// The wire name: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which component (and on which host) reported an event (core/v1 `EventSource`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EventSource {
    /// The reporting component, e.g. `deployment-controller`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub component: String,
    /// The node the component runs on, if it matters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

impl EventSource {
    /// The component `component`, on no particular host.
    pub fn new(component: impl Into<String>) -> Self {
        Self {
            component: component.into(),
            host: String::new(),
        }
    }

    /// Sets the host (node) the component runs on.
    pub fn with_host(mut self, host: impl Into<String>) -> Self {
        self.host = host.into();
        self
    }
}

/// The part of an Event's `metadata` the recorder reads and writes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventMeta {
    /// The Event's name: `<involved object's name>.<unique hex suffix>`.
    #[serde(default)]
    pub name: String,
    /// The Event's namespace: the involved object's, or `default` for a cluster-scoped one.
    #[serde(default)]
    pub namespace: String,
    /// The server's version of the Event; empty on create.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
}

/// A core/v1 `Event`: something that happened to an object, with how often and when.
///
/// `count`, `firstTimestamp` and `lastTimestamp` summarise repeats: the recorder patches an
/// existing Event rather than creating a new one when the same thing happens again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// Name, namespace and resource version.
    pub metadata: EventMeta,
    /// The object the event is about.
    pub involved_object: ObjectReference,
    /// A short machine-readable reason in UpperCamelCase, e.g. `FailedScheduling`.
    #[serde(default)]
    pub reason: String,
    /// A human-readable description.
    #[serde(default)]
    pub message: String,
    /// The component that reported the event.
    #[serde(default)]
    pub source: EventSource,
    /// When the event was first seen.
    pub first_timestamp: Option<Timestamp>,
    /// When the event was last seen.
    pub last_timestamp: Option<Timestamp>,
    /// How many times the event has been seen.
    #[serde(default)]
    pub count: i32,
    /// `Normal` or `Warning`.
    #[serde(rename = "type", default)]
    pub type_: EventType,
    /// The events/v1 microsecond time; always null from this (core/v1) recorder.
    #[serde(default)]
    pub event_time: Option<String>,
    /// The controller that reported the event (`reportingComponent` on the wire).
    #[serde(default)]
    pub reporting_component: String,
    /// The instance of that controller, e.g. its pod or host name.
    #[serde(default)]
    pub reporting_instance: String,
    /// What the reporting controller did about it, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

impl Event {
    /// An event about `object`, as a recorder makes one (client-go's `makeEvent`): named
    /// `<object name>.<unique hex>` in the object's namespace (`default` for a cluster-scoped
    /// object), seen once, now; no source until [`with_source`](Self::with_source). For the
    /// correlator's key functions, a sink or a test, without a broadcaster to record it.
    ///
    /// ```
    /// use controller::events::{CorrelatorKeys, Event, EventSource, EventType, ObjectReference};
    ///
    /// let pod = ObjectReference::new("v1", "Pod", "default", "web-0");
    /// let event = Event::new(&pod, EventType::Warning, "BackOff", "restarting failed container")
    ///     .with_source(EventSource::new("kubelet").with_host("node-1"));
    /// assert_eq!((event.metadata.namespace.as_str(), event.count), ("default", 1));
    /// let normal = Event::new(&pod, EventType::Normal, "Pulled", "pulled")
    ///     .with_source(EventSource::new("kubelet").with_host("node-1"));
    /// // Normal events cannot use up a Warning's spam budget: the type is in the key.
    /// assert_ne!(CorrelatorKeys::default_spam_key(&event), CorrelatorKeys::default_spam_key(&normal));
    /// ```
    pub fn new(
        object: &ObjectReference,
        type_: EventType,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self::recorded_at(
            object,
            type_,
            reason.into(),
            message.into(),
            SystemTime::now(),
        )
    }

    /// [`new`](Self::new) at `now`, the recorder's clock's time.
    pub(crate) fn recorded_at(
        object: &ObjectReference,
        type_: EventType,
        reason: String,
        message: String,
        now: SystemTime,
    ) -> Self {
        let timestamp = Some(Timestamp::from_system_time(now));
        let namespace = if object.namespace.is_empty() {
            "default".to_owned()
        } else {
            object.namespace.clone()
        };
        Event {
            metadata: EventMeta {
                name: event_name(&object.name, now),
                namespace,
                resource_version: String::new(),
            },
            involved_object: object.clone(),
            reason,
            message,
            source: EventSource::default(),
            first_timestamp: timestamp,
            last_timestamp: timestamp,
            count: 1,
            type_,
            event_time: None,
            reporting_component: String::new(),
            reporting_instance: String::new(),
            action: None,
        }
    }

    /// Sets who reported it: `source`, and as a recorder does, the reporting controller and
    /// instance from its component and host.
    pub fn with_source(mut self, source: EventSource) -> Self {
        self.reporting_component.clone_from(&source.component);
        self.reporting_instance.clone_from(&source.host);
        self.source = source;
        self
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_serialises_with_the_apis_field_names_and_a_null_event_time() {
        let event = Event {
            metadata: EventMeta {
                name: "web-0.17f".into(),
                namespace: "default".into(),
                resource_version: String::new(),
            },
            involved_object: ObjectReference::new("v1", "Pod", "default", "web-0"),
            reason: "Started".into(),
            message: "started".into(),
            source: EventSource {
                component: "kubelet".into(),
                host: String::new(),
            },
            first_timestamp: Some(Timestamp::from_unix_seconds(0)),
            last_timestamp: Some(Timestamp::from_unix_seconds(1)),
            count: 1,
            type_: EventType::Warning,
            event_time: None,
            reporting_component: "kubelet".into(),
            reporting_instance: "node-1".into(),
            action: None,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "metadata": {"name": "web-0.17f", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-0", "apiVersion": "v1"},
                "reason": "Started",
                "message": "started",
                "source": {"component": "kubelet"},
                "firstTimestamp": "1970-01-01T00:00:00Z",
                "lastTimestamp": "1970-01-01T00:00:01Z",
                "count": 1,
                "type": "Warning",
                "eventTime": null,
                "reportingComponent": "kubelet",
                "reportingInstance": "node-1",
            })
        );
        let back: Event = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
