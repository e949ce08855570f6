//! What a DELETE answers, as kube-apiserver's registry store decides it: the object when it
//! is still there (finalizers pending: it was only marked with a `deletionTimestamp`) or when
//! the resource's store returns deleted objects (pods; namespaces, whose deletion kube-apiserver
//! answers with the terminating namespace), otherwise a success `Status` naming what went:
//! `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":..,
//! "group":..,"kind":<resource>,"uid":..}}` (`kind` is the plural resource, as kube-apiserver
//! fills it; `group` is left out for the core group).

use serde_json::{json, Map, Value};

use crate::resources::ResourceDef;

/// What kube-apiserver answers the delete of a CustomResourceDefinition: the definition marked
/// for deletion, held by apiextensions' cleanup finalizer, `Terminating`. The simulator has
/// removed it and its objects already, as that cleanup does a moment later.
fn terminating_definition(obj: &Value, rev: u64) -> Value {
    let mut crd = obj.clone();
    let now = crate::time::rfc3339_now();
    if let Some(meta) = crd.get_mut("metadata").and_then(Value::as_object_mut) {
        // Marking it is a write of its own.
        meta.insert("resourceVersion".into(), json!(rev.to_string()));
        meta.insert("deletionTimestamp".into(), json!(now));
        meta.insert(
            "finalizers".into(),
            json!(["customresourcecleanup.apiextensions.k8s.io"]),
        );
    }
    if let Some(conditions) = crd
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        conditions.push(json!({"type": "Terminating", "status": "True", "lastTransitionTime": now,
            "reason": "InstanceDeletionPending",
            "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon"}));
    }
    crd
}
use crate::storage::{has_finalizers, is_terminating};

/// Whether the resource's store answers a delete with the deleted object.
fn returns_deleted_object(def: &ResourceDef) -> bool {
    def.group.is_empty() && matches!(def.plural.as_str(), "pods" | "namespaces")
}

/// The answer to a DELETE of one object whose state after the delete is `obj`, the store at
/// revision `rev` after it.
pub(crate) fn answer(def: &ResourceDef, obj: &Value, rev: u64) -> Option<Value> {
    if crate::crd::is_definition(def) {
        return Some(terminating_definition(obj, rev));
    }
    if returns_deleted_object(def) || (is_terminating(obj) && has_finalizers(obj)) {
        return None;
    }
    let meta = &obj["metadata"];
    let mut details = Map::new();
    details.insert("name".into(), meta["name"].clone());
    if !def.group.is_empty() {
        details.insert("group".into(), json!(def.group));
    }
    details.insert("kind".into(), json!(def.plural));
    if let Some(uid) = meta.get("uid") {
        details.insert("uid".into(), uid.clone());
    }
    Some(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
        "details": details,
    }))
}
