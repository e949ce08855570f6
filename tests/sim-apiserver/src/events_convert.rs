//! core/v1 `Event` and `events.k8s.io/v1` `Event` are one kind in two shapes, stored once as
//! kube-apiserver stores them: a write through either API is read, listed and watched through
//! both, at the same resourceVersion. The shapes differ in field names only:
//!
//! | core/v1 | events.k8s.io/v1 |
//! |---|---|
//! | `involvedObject` | `regarding` |
//! | `message` | `note` |
//! | `reportingComponent` | `reportingController` |
//! | `source` | `deprecatedSource` |
//! | `firstTimestamp` | `deprecatedFirstTimestamp` |
//! | `lastTimestamp` | `deprecatedLastTimestamp` |
//! | `count` | `deprecatedCount` |
//!
//! `metadata`, `reason`, `type`, `action`, `eventTime`, `series`, `related` and
//! `reportingInstance` are the same in both.

use serde_json::Value;

/// (core/v1 name, events.k8s.io/v1 name) of the fields that are renamed.
const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn convert(v: &Value, api_version: &str, to_events: bool) -> Value {
    let mut out = v.clone();
    if let Some(m) = out.as_object_mut() {
        // Take every source field first, so a name that is a source in one pair and a target
        // in none is never clobbered.
        let moved: Vec<(&str, Option<Value>)> = RENAMED
            .iter()
            .map(|&(core, events)| {
                let (from, to) = if to_events {
                    (core, events)
                } else {
                    (events, core)
                };
                (to, m.remove(from))
            })
            .collect();
        for (to, value) in moved {
            if let Some(value) = value {
                m.insert(to.to_string(), value);
            }
        }
        m.insert("apiVersion".into(), Value::String(api_version.into()));
        m.insert("kind".into(), Value::String("Event".into()));
    }
    out
}

/// A core/v1 Event in the events.k8s.io/v1 shape.
pub fn core_to_events(v: &Value) -> Value {
    convert(v, "events.k8s.io/v1", true)
}

/// An events.k8s.io/v1 Event in the core/v1 shape.
pub fn events_to_core(v: &Value) -> Value {
    convert(v, "v1", false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_shapes_map_field_for_field_and_back() {
        let core = json!({
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default", "resourceVersion": "7"},
            "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "Started",
            "message": "started", "source": {"component": "kubelet"},
            "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T00:01:00Z",
            "count": 2, "type": "Normal", "reportingComponent": "kubelet",
            "reportingInstance": "node-1", "series": {"count": 2, "lastObservedTime": "x"},
        });
        let events = core_to_events(&core);
        assert_eq!(
            events,
            json!({
                "apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": "e", "namespace": "default", "resourceVersion": "7"},
                "regarding": {"kind": "Pod", "name": "p"}, "reason": "Started",
                "note": "started", "deprecatedSource": {"component": "kubelet"},
                "deprecatedFirstTimestamp": "2024-01-01T00:00:00Z",
                "deprecatedLastTimestamp": "2024-01-01T00:01:00Z", "deprecatedCount": 2,
                "type": "Normal", "reportingController": "kubelet",
                "reportingInstance": "node-1", "series": {"count": 2, "lastObservedTime": "x"},
            })
        );
        assert_eq!(events_to_core(&events), core);
    }
}
