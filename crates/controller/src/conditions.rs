//! Status conditions, as `metav1.Condition` and controller-runtime's `meta.SetStatusCondition`
//! keep them: one entry per `type`, merged by type (rules CD1–CD3 in docs/semantics.md):
//!
//! - CD1: setting a condition whose type is absent appends it, its `lastTransitionTime` the
//!   time given (unless the update carries one);
//! - CD2: setting a condition whose type is present changes `lastTransitionTime` only when its
//!   `status` changes; `reason`, `message` and `observedGeneration` are taken from the update;
//! - CD3: the other conditions are left as they are, in their order.
//!
//! [`set_condition`] works on a list of [`Condition`]s (for a typed status, serde gives that
//! list); [`set_object_condition`] on a `DynamicObject`'s `status.conditions`; and
//! [`conditions_patch`] turns the list into a merge patch of the status subresource, fenced by
//! the object's seen `resourceVersion`.
//!
//! ```
//! use controller::conditions::{set_condition, Condition, ConditionStatus};
//!
//! let mut conditions = Vec::new();
//! let ready = Condition::new("Ready", ConditionStatus::False, "Creating", "waiting for the pods")
//!     .observed_generation(3);
//! assert!(set_condition(&mut conditions, ready, "2026-11-29T10:00:00Z"));
//! // The same status again: the transition time stays, the message moves on.
//! let still = Condition::new("Ready", ConditionStatus::False, "Creating", "2 of 3 pods");
//! assert!(set_condition(&mut conditions, still, "2026-11-29T10:00:05Z"));
//! assert_eq!(conditions[0].last_transition_time, "2026-11-29T10:00:00Z");
//! // A change of status is a transition.
//! let done = Condition::new("Ready", ConditionStatus::True, "Running", "3 of 3 pods");
//! assert!(set_condition(&mut conditions, done, "2026-11-29T10:00:09Z"));
//! assert_eq!(conditions[0].last_transition_time, "2026-11-29T10:00:09Z");
//! ```

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use workqueue::shared_informer::reflector::store_index::{time, DynamicObject, Object};

/// A condition's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConditionStatus {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

/// One status condition, written as `metav1.Condition` is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The condition's type (`Ready`, `Available`): one entry per type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: ConditionStatus,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed, RFC 3339 (empty in an update: the time given to
    /// [`set_condition`]).
    #[serde(default)]
    pub last_transition_time: String,
    /// A CamelCase word for the reason of the last transition.
    #[serde(default)]
    pub reason: String,
    /// A human-readable message.
    #[serde(default)]
    pub message: String,
}

impl Condition {
    /// A condition to set (its transition time is decided by [`set_condition`]).
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.into(),
            status,
            observed_generation: None,
            last_transition_time: String::new(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// With the generation it was computed from.
    #[must_use]
    pub fn observed_generation(mut self, generation: i64) -> Self {
        self.observed_generation = Some(generation);
        self
    }
}

/// Now, as a condition's `lastTransitionTime` is written (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    time::format_system_time(SystemTime::now(), 0)
}

/// Sets `update` in `conditions` by its type (CD1–CD3), `now` being the transition time of a
/// new or changed status; whether anything changed (so that an unchanged status is not
/// written).
pub fn set_condition(conditions: &mut Vec<Condition>, mut update: Condition, now: &str) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == update.type_) {
        None => {
            if update.last_transition_time.is_empty() {
                update.last_transition_time = now.to_string();
            }
            conditions.push(update);
            true
        }
        Some(existing) => {
            let before = existing.clone();
            if existing.status != update.status {
                existing.status = update.status;
                existing.last_transition_time = if update.last_transition_time.is_empty() {
                    now.to_string()
                } else {
                    update.last_transition_time
                };
            }
            existing.reason = update.reason;
            existing.message = update.message;
            existing.observed_generation = update.observed_generation;
            *existing != before
        }
    }
}

/// The condition of `type_` in `conditions`, if any.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Why the conditions of a `DynamicObject` could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConditionsError {
    /// `status` or `status.conditions` is there but not of the expected shape.
    #[error("status.conditions is not a list of conditions: {0}")]
    Malformed(#[source] serde_json::Error),
    /// `status` is there but is not an object.
    #[error("status is not an object")]
    StatusNotAnObject,
}

/// The conditions of a dynamic object (`status.conditions`; none when absent).
pub fn object_conditions(object: &DynamicObject) -> Result<Vec<Condition>, ConditionsError> {
    match object.data.get("status").and_then(|s| s.get("conditions")) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(list) => serde_json::from_value(list.clone()).map_err(ConditionsError::Malformed),
    }
}

/// Sets `update` in a dynamic object's `status.conditions` (CD1–CD3); whether anything
/// changed. A malformed `status` is an error and the object is left as it was.
pub fn set_object_condition(
    object: &mut DynamicObject,
    update: Condition,
    now: &str,
) -> Result<bool, ConditionsError> {
    let mut conditions = object_conditions(object)?;
    if !set_condition(&mut conditions, update, now) {
        return Ok(false);
    }
    let status = object
        .data
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(status) = status.as_object_mut() else {
        return Err(ConditionsError::StatusNotAnObject);
    };
    status.insert(
        "conditions".into(),
        serde_json::to_value(&conditions).map_err(ConditionsError::Malformed)?,
    );
    Ok(true)
}

/// A JSON merge patch for the status subresource that writes `conditions` whole, fenced by
/// `seen`'s resourceVersion (a status written meanwhile by someone else is a 409, not
/// overwritten): send it with `Api::patch_status`.
pub fn conditions_patch<K: Object>(seen: &K, conditions: &[Condition]) -> Value {
    json!({
        "metadata": {"resourceVersion": seen.resource_version()},
        "status": {"conditions": conditions},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(type_: &str, status: ConditionStatus, reason: &str) -> Condition {
        Condition::new(type_, status, reason, "")
    }

    #[test]
    fn a_new_type_is_appended_with_the_time_given() {
        // CD1
        let mut list = vec![c("A", ConditionStatus::True, "r")];
        list[0].last_transition_time = "t0".into();
        assert!(set_condition(
            &mut list,
            c("B", ConditionStatus::False, "s"),
            "t1"
        ));
        assert_eq!(list.len(), 2);
        assert_eq!(list[1].last_transition_time, "t1");
        let mut given = c("C", ConditionStatus::True, "r");
        given.last_transition_time = "t-given".into();
        set_condition(&mut list, given, "t2");
        assert_eq!(list[2].last_transition_time, "t-given");
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        // CD2
        let mut list = Vec::new();
        set_condition(&mut list, c("Ready", ConditionStatus::False, "A"), "t0");
        assert!(!set_condition(
            &mut list,
            c("Ready", ConditionStatus::False, "A"),
            "t1"
        ));
        assert_eq!(list[0].last_transition_time, "t0");
        assert!(set_condition(
            &mut list,
            c("Ready", ConditionStatus::False, "B").observed_generation(2),
            "t2"
        ));
        assert_eq!(
            (list[0].reason.as_str(), list[0].observed_generation),
            ("B", Some(2))
        );
        assert_eq!(list[0].last_transition_time, "t0");
        assert!(set_condition(
            &mut list,
            c("Ready", ConditionStatus::True, "B"),
            "t3"
        ));
        assert_eq!(list[0].last_transition_time, "t3");
    }

    #[test]
    fn other_conditions_keep_their_place() {
        // CD3
        let mut list = Vec::new();
        for t in ["A", "B", "C"] {
            set_condition(&mut list, c(t, ConditionStatus::Unknown, "r"), "t0");
        }
        set_condition(&mut list, c("B", ConditionStatus::True, "r"), "t1");
        let order: Vec<&str> = list.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(order, ["A", "B", "C"]);
        assert_eq!(
            list[0],
            c("A", ConditionStatus::Unknown, "r").with_time("t0")
        );
        assert_eq!(
            list[2],
            c("C", ConditionStatus::Unknown, "r").with_time("t0")
        );
    }

    impl Condition {
        fn with_time(mut self, t: &str) -> Self {
            self.last_transition_time = t.into();
            self
        }
    }

    #[test]
    fn a_dynamic_objects_conditions_are_set_in_its_status_and_a_malformed_status_refused() {
        let mut obj = DynamicObject::new("example.com/v1", "Widget")
            .named("w")
            .with_field("status", json!({"phase": "x"}));
        assert!(
            set_object_condition(&mut obj, c("Ready", ConditionStatus::True, "R"), "t0").unwrap()
        );
        assert_eq!(
            obj.data["status"]["phase"], "x",
            "the rest of the status stays"
        );
        assert_eq!(
            obj.data["status"]["conditions"],
            json!([{"type": "Ready", "status": "True", "lastTransitionTime": "t0", "reason": "R", "message": ""}])
        );
        assert!(
            !set_object_condition(&mut obj, c("Ready", ConditionStatus::True, "R"), "t1").unwrap()
        );
        let mut bad =
            DynamicObject::new("v1", "X").with_field("status", json!({"conditions": "no"}));
        assert!(matches!(
            set_object_condition(&mut bad, c("Ready", ConditionStatus::True, "R"), "t0"),
            Err(ConditionsError::Malformed(_))
        ));
        assert_eq!(bad.data["status"]["conditions"], "no", "left as it was");
        let mut not_object = DynamicObject::new("v1", "X").with_field("status", json!(3));
        assert!(set_object_condition(
            &mut not_object,
            c("Ready", ConditionStatus::True, "R"),
            "t0"
        )
        .is_err());
    }

    #[test]
    fn now_is_rfc3339_in_whole_seconds() {
        let t = now();
        assert!(t.ends_with('Z') && t.len() == 20, "{t}");
        assert!(time::parse_rfc3339(&t).is_some());
    }

    #[test]
    fn the_patch_is_fenced_by_the_seen_version() {
        let seen = DynamicObject::new("v1", "X")
            .named("w")
            .with_resource_version("7");
        let patch = conditions_patch(&seen, &[c("Ready", ConditionStatus::True, "R")]);
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
        assert_eq!(patch["status"]["conditions"][0]["type"], "Ready");
    }
}
