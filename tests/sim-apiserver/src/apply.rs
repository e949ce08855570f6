//! Server-side apply (`PATCH` with `Content-Type: application/apply-patch+yaml`), simplified.
//!
//! What the simulator does, as kube-apiserver does:
//!
//! * the `fieldManager` query parameter is required (422 `PatchOptions.meta.k8s.io "" is
//!   invalid: fieldManager: Required value: is required for apply patch`); `force` on any other
//!   patch type is 422 too;
//! * an apply to a missing object creates it (201); otherwise the applied configuration is
//!   merged into the live object (200);
//! * each apply manager owns the set of fields it applied, recorded in `metadata.managedFields`
//!   as an entry `{"manager": m, "operation": "Apply", "apiVersion": .., "time": ..,
//!   "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}` (plus
//!   `"subresource": "status"` for applies to `/status`);
//! * applying a field that another apply manager owns, with a different value than the live
//!   one, is 409 `Conflict` with one `FieldManagerConflict` cause per field (`field:
//!   ".spec.replicas"`, `message: conflict with "m"`); with `force=true` the applier takes the
//!   field over instead; applying the same value makes the field shared;
//! * a field the manager applied before and omits now is removed from the object unless
//!   another apply manager still owns it.
//!
//! Simplified compared to kube-apiserver (structured-merge-diff):
//!
//! * the body must be JSON (which is YAML); YAML in block style is refused with 400;
//! * there is no schema: every list is atomic (owned and replaced as a whole, no
//!   `listType=map` merge keys, no `f:k:{..}` / `v:` entries), every object is granular
//!   (fields owned one by one), and scalars are leaves; `fieldsV1` lists leaves only (no `.`
//!   entries for the maps that contain them);
//! * only apply managers own fields: `Update` operations (PUT, merge/JSON/strategic patches)
//!   are not recorded in `managedFields` and never conflict with an apply; the entries they
//!   find are kept as they are;
//! * of `metadata`, `labels` and `annotations` are applied and owned by key, and
//!   `ownerReferences` and `finalizers` as whole lists (kube-apiserver merges them by uid and
//!   by value); `name` must match the URL when set, other metadata in the applied
//!   configuration is ignored;
//! * on a resource with a status subresource an apply to the main resource ignores `.status`
//!   and an apply to `/status` applies only `.status`.

use serde_json::{json, Map, Value};

use crate::status::ApiError;
use crate::time::rfc3339_now;

/// Which part of the object an apply addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ApplyScope {
    /// Everything but `status` when `skip_status`, else everything.
    Main { skip_status: bool },
    /// Only `status` (the status subresource).
    Status,
}

type Path = Vec<String>;

/// The leaves of an applied configuration that the apply owns.
fn leaves(applied: &Value, scope: ApplyScope) -> Vec<(Path, Value)> {
    let mut out = Vec::new();
    let Some(top) = applied.as_object() else {
        return out;
    };
    for (k, v) in top {
        let wanted = match (k.as_str(), scope) {
            ("apiVersion" | "kind", _) => false,
            ("metadata", ApplyScope::Main { .. }) => {
                for sub in ["labels", "annotations"] {
                    if let Some(m) = v.get(sub).and_then(Value::as_object) {
                        for (lk, lv) in m {
                            out.push((vec!["metadata".into(), sub.into(), lk.clone()], lv.clone()));
                        }
                    }
                }
                for list in ["ownerReferences", "finalizers"] {
                    if let Some(l) = v.get(list).filter(|l| l.is_array()) {
                        out.push((vec!["metadata".into(), list.into()], l.clone()));
                    }
                }
                false
            }
            ("metadata", ApplyScope::Status) => false,
            ("status", ApplyScope::Main { skip_status }) => !skip_status,
            (_, ApplyScope::Main { .. }) => true,
            ("status", ApplyScope::Status) => true,
            (_, ApplyScope::Status) => false,
        };
        if wanted {
            collect(vec![k.clone()], v, &mut out);
        }
    }
    out
}

fn collect(path: Path, v: &Value, out: &mut Vec<(Path, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, c) in m {
                let mut p = path.clone();
                p.push(k.clone());
                collect(p, c, out);
            }
        }
        _ => out.push((path, v.clone())),
    }
}

/// `fieldsV1` (`{"f:spec": {"f:replicas": {}}}`) of a set of leaves.
fn fields_v1(paths: &[Path]) -> Value {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for tok in p {
            let e = cur
                .entry(format!("f:{tok}"))
                .or_insert_with(|| Value::Object(Map::new()));
            if !e.is_object() {
                *e = Value::Object(Map::new());
            }
            cur = e.as_object_mut().expect("object");
        }
    }
    Value::Object(root)
}

/// The leaves a `fieldsV1` names (entries that are not `f:` are skipped).
fn paths_of(fields: &Value) -> Vec<Path> {
    fn walk(prefix: &mut Path, v: &Value, out: &mut Vec<Path>) {
        let Some(m) = v.as_object() else { return };
        let children: Vec<(&String, &Value)> =
            m.iter().filter(|(k, _)| k.starts_with("f:")).collect();
        if children.is_empty() {
            if !prefix.is_empty() {
                out.push(prefix.clone());
            }
            return;
        }
        for (k, c) in children {
            prefix.push(k[2..].to_string());
            walk(prefix, c, out);
            prefix.pop();
        }
    }
    let mut out = Vec::new();
    walk(&mut Vec::new(), fields, &mut out);
    out
}

fn overlaps(a: &[String], b: &[String]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn dotted(p: &[String]) -> String {
    p.iter().map(|t| format!(".{t}")).collect()
}

fn get<'a>(v: &'a Value, p: &[String]) -> Option<&'a Value> {
    p.iter().try_fold(v, |cur, t| cur.get(t))
}

fn set(v: &mut Value, p: &[String], x: Value) {
    let mut cur = v;
    for t in p {
        if !cur.is_object() {
            *cur = Value::Object(Map::new());
        }
        cur = cur
            .as_object_mut()
            .expect("object")
            .entry(t.clone())
            .or_insert(Value::Null);
    }
    *cur = x;
}

/// Removes the leaf at `p` and then the maps it leaves empty (below the top level).
fn remove(v: &mut Value, p: &[String]) {
    if p.is_empty() {
        return;
    }
    let Some(parent) = p[..p.len() - 1]
        .iter()
        .try_fold(&mut *v, |cur, t| cur.get_mut(t))
    else {
        return;
    };
    let Some(m) = parent.as_object_mut() else {
        return;
    };
    m.remove(&p[p.len() - 1]);
    if m.is_empty() && p.len() > 2 {
        remove(v, &p[..p.len() - 1]);
    }
}

/// One entry of `metadata.managedFields`, parsed.
struct Entry {
    raw: Value,
    /// `Some(paths)` for apply entries of this scope; other entries are kept untouched.
    apply: Option<(String, Vec<Path>)>,
}

fn subresource_of(scope: ApplyScope) -> &'static str {
    match scope {
        ApplyScope::Main { .. } => "",
        ApplyScope::Status => "status",
    }
}

/// Applies `applied` for `manager` to `live` (`None`: the object does not exist yet) and
/// returns the new object, with `metadata.managedFields` updated. Errors: the conflicts.
pub(crate) fn apply(
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    force: bool,
    scope: ApplyScope,
    api_version: &str,
) -> Result<Value, ApiError> {
    let sub = subresource_of(scope);
    let mut obj = match live {
        Some(l) => l.clone(),
        None => new_object(applied),
    };
    let mut entries = managed_entries(&obj, sub);
    let new_leaves = leaves(applied, scope);
    take_over_or_refuse(&obj, &mut entries, &new_leaves, manager, force)?;
    let new_paths: Vec<Path> = new_leaves.iter().map(|(p, _)| p.clone()).collect();
    remove_dropped_fields(&mut obj, &entries, &new_paths, manager);
    for (p, v) in new_leaves {
        set(&mut obj, &p, v);
    }
    obj["metadata"]["managedFields"] = Value::Array(managed_fields(
        entries,
        manager,
        &new_paths,
        api_version,
        sub,
    ));
    // An apply that changes nothing but its entry's time is a no-op, as on kube-apiserver: the
    // stored object (and so its resourceVersion) stays, whatever second it is now.
    if let Some(live) = live {
        if without_times(live) == without_times(&obj) {
            return Ok(live.clone());
        }
    }
    Ok(obj)
}

/// `obj` with the `time` of every managedFields entry left out.
fn without_times(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(entries) = obj
        .pointer_mut("/metadata/managedFields")
        .and_then(Value::as_array_mut)
    {
        for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
            entry.remove("time");
        }
    }
    obj
}

/// The object an apply creates starts from: the applied name, generateName and namespace.
fn new_object(applied: &Value) -> Value {
    let mut o = json!({"metadata": {}});
    if let Some(m) = applied.get("metadata").and_then(Value::as_object) {
        for k in ["name", "generateName", "namespace"] {
            if let Some(v) = m.get(k) {
                o["metadata"][k] = v.clone();
            }
        }
    }
    o
}

/// `obj`'s `metadata.managedFields`, the apply entries of subresource `sub` parsed.
fn managed_entries(obj: &Value, sub: &str) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|raw| {
            let is_apply = raw.get("operation").and_then(Value::as_str) == Some("Apply")
                && raw.get("subresource").and_then(Value::as_str).unwrap_or("") == sub;
            let apply = is_apply.then(|| {
                (
                    raw.get("manager")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    paths_of(raw.get("fieldsV1").unwrap_or(&Value::Null)),
                )
            });
            Entry { raw, apply }
        })
        .collect()
}

/// Conflicts with the other apply managers over `new_leaves` (a field they own set to another
/// value): refused, or, `force`d, taken from them.
fn take_over_or_refuse(
    obj: &Value,
    entries: &mut [Entry],
    new_leaves: &[(Path, Value)],
    manager: &str,
    force: bool,
) -> Result<(), ApiError> {
    let mut conflicts = Vec::new();
    for (p, v) in new_leaves {
        let live_value = get(obj, p);
        for e in entries.iter_mut() {
            let Some((m, paths)) = &mut e.apply else {
                continue;
            };
            if m == manager {
                continue;
            }
            let clash: Vec<Path> = paths
                .iter()
                .filter(|q| overlaps(q, p) && (q.len() != p.len() || live_value != Some(v)))
                .cloned()
                .collect();
            if clash.is_empty() {
                continue;
            }
            if force {
                paths.retain(|q| !clash.contains(q));
            } else {
                conflicts.extend(clash.iter().map(|q| (m.clone(), dotted(q))));
            }
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        conflicts.dedup();
        return Err(ApiError::apply_conflict(&conflicts));
    }
    Ok(())
}

/// Fields `manager` applied before and omits now go, unless someone else owns them.
fn remove_dropped_fields(obj: &mut Value, entries: &[Entry], new_paths: &[Path], manager: &str) {
    let before: Vec<Path> = entries
        .iter()
        .filter_map(|e| e.apply.as_ref())
        .filter(|(m, _)| m == manager)
        .flat_map(|(_, ps)| ps.clone())
        .collect();
    for p in before.iter().filter(|p| !new_paths.contains(p)) {
        if new_paths.iter().any(|q| overlaps(q, p)) {
            continue;
        }
        let owned_elsewhere = entries.iter().any(|e| {
            e.apply
                .as_ref()
                .is_some_and(|(m, ps)| m != manager && ps.iter().any(|q| overlaps(q, p)))
        });
        if !owned_elsewhere {
            remove(obj, p);
        }
    }
}

/// The new `metadata.managedFields`: `manager`'s apply entry first, the others' updated, the
/// entries left empty dropped.
fn managed_fields(
    entries: Vec<Entry>,
    manager: &str,
    new_paths: &[Path],
    api_version: &str,
    sub: &str,
) -> Vec<Value> {
    let mut out = Vec::new();
    if !new_paths.is_empty() {
        let mut e = json!({
            "manager": manager, "operation": "Apply", "apiVersion": api_version,
            "time": rfc3339_now(), "fieldsType": "FieldsV1", "fieldsV1": fields_v1(new_paths),
        });
        if !sub.is_empty() {
            e["subresource"] = json!(sub);
        }
        out.push(e);
    }
    for e in entries {
        match e.apply {
            None => out.push(e.raw),
            Some((m, _)) if m == manager => {}
            Some((_, ps)) if ps.is_empty() => {}
            Some((_, ps)) => {
                let mut raw = e.raw;
                raw["fieldsV1"] = fields_v1(&ps);
                out.push(raw);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_apply_that_changes_nothing_keeps_the_live_object_whatever_the_time() {
        let mut live = json!({"metadata": {"name": "a", "managedFields": [{
            "manager": "m", "operation": "Apply", "apiVersion": "v1",
            "time": "2000-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}}}]}, "data": {"k": "v"}});
        let applied = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let out = apply(
            Some(&live),
            &applied,
            "m",
            false,
            ApplyScope::Main { skip_status: false },
            "v1",
        )
        .unwrap();
        assert_eq!(out, live, "a no-op: the old entry's time stays");
        let changed = json!({"metadata": {"name": "a"}, "data": {"k": "w"}});
        let out = apply(
            Some(&live),
            &changed,
            "m",
            false,
            ApplyScope::Main { skip_status: false },
            "v1",
        )
        .unwrap();
        assert_eq!(out["data"]["k"], "w");
        assert_ne!(
            out["metadata"]["managedFields"][0]["time"],
            "2000-01-01T00:00:00Z"
        );
        live["data"]["k"] = json!("w");
    }

    #[test]
    fn fields_v1_round_trips_leaves() {
        let ps = vec![
            vec!["spec".to_string(), "replicas".to_string()],
            vec!["metadata".into(), "labels".into(), "a".into()],
        ];
        let f = fields_v1(&ps);
        assert_eq!(
            f,
            json!({"f:spec": {"f:replicas": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        let mut back = paths_of(&f);
        back.sort();
        let mut want = ps.clone();
        want.sort();
        assert_eq!(back, want);
    }
}
