//! Who wrote each version of the `sharding` scenario's widgets and children, told from the
//! versions alone, and the fence check over them: on a real kube-apiserver, which keeps no
//! write log, the equivalent of [`crate::shard_fleet::check_write_log`].
//!
//! The versions come from a watch started before the first widget was created
//! ([`crate::backend::History`]), so each object's first version is its creation and every
//! later one follows the version it was written on. The writer of a version is read from its
//! `managedFields`, which kube-apiserver keeps for every write: the field manager of a write
//! without `fieldManager` is the first word of the client's User-Agent, and each replica's
//! clients name themselves there (`replica-a`, and `sharder-replica-a` for its sharder; see
//! [`crate::shard_replica::user_agent`]). An update (a patch or a replace) moves every field it
//! adds or changes to its manager, taking it from any other, so the writer of a version is the
//! one manager that, in that version, owns every field that differs from the version before.
//! A creation has one manager, its creator.
//!
//! A write that only removes fields sets nothing and names no manager. Two such writes happen
//! here: the sharder cancelling a drain (the drain label removed), and a replica acknowledging
//! one (the assignment and drain labels removed, its last write to the object). Only a replica
//! removes the assignment label, so such a version is counted as an acknowledgement and checked
//! to follow a version marked draining; which replica made it, managedFields cannot say, so the
//! fence check over writers covers the replicas' other writes (a status, a child's data, a
//! child created), all of which set fields. The simulator's write log names the user of every
//! write, acknowledgements included.
//!
//! Entry timestamps are not used: they have a resolution of one second, and a manager that
//! writes the same fields twice within one leaves its entry as it was.

use std::collections::{BTreeMap, HashMap};

use controller::sharding::{drain_label, shard_label};
use serde_json::{Map, Value};

use crate::shard_fleet::{label, revision_of};
use crate::shard_replica::{child_name, RING};

/// The top-level metadata fields a write can set; the rest are the server's (resourceVersion,
/// generation, uid, timestamps, managedFields).
const WRITTEN_METADATA: [&str; 4] = ["labels", "annotations", "ownerReferences", "finalizers"];

/// What a writer can set of `object`: everything but `apiVersion`, `kind` and the metadata the
/// server keeps.
fn content(object: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in object.as_object().into_iter().flatten() {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" => {
                let mut metadata = Map::new();
                for field in WRITTEN_METADATA {
                    if let Some(v) = value.get(field) {
                        metadata.insert(field.to_string(), v.clone());
                    }
                }
                out.insert(key.clone(), Value::Object(metadata));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// Every leaf of `value` below `path` (a list counts as one leaf, as a map's empty value does).
fn leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match value.as_object() {
        Some(map) if !map.is_empty() => {
            for (key, v) in map {
                path.push(key.clone());
                leaves(v, path, out);
                path.pop();
            }
        }
        _ => out.push(path.clone()),
    }
}

/// The leaves `now` adds to or changes from `before`.
fn set_fields(before: &Map<String, Value>, now: &Map<String, Value>) -> Vec<Vec<String>> {
    fn walk(before: &Value, now: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match (before.as_object(), now.as_object()) {
            // Keys gone from a map were removed, not set.
            (Some(b), Some(n)) => {
                for (key, v) in n {
                    path.push(key.clone());
                    match b.get(key) {
                        Some(old) => walk(old, v, path, out),
                        None => leaves(v, path, out),
                    }
                    path.pop();
                }
            }
            _ if before != now => out.push(path.clone()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(
        &Value::Object(before.clone()),
        &Value::Object(now.clone()),
        &mut Vec::new(),
        &mut out,
    );
    out
}

/// Whether a managedFields entry's `fieldsV1` holds the field at `path` (map keys only: the
/// lists the scenario's objects carry, owner references, are taken whole).
fn owns(fields: &Value, path: &[String]) -> bool {
    let mut node = fields;
    for key in path {
        match node.get(format!("f:{key}")) {
            Some(next) => node = next,
            None => return false,
        }
    }
    true
}

fn managers(object: &Value) -> Vec<(String, Value)> {
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or_default().to_string(),
                entry["fieldsV1"].clone(),
            )
        })
        .collect()
}

/// The field manager that wrote `now` on `before` (`None`: `now` is a creation); `Ok(None)` for
/// a write that set no field (removals only); an error when the versions name no single one.
pub fn writer(before: Option<&Value>, now: &Value) -> Result<Option<String>, String> {
    let entries = managers(now);
    let Some(before) = before else {
        let mut names: Vec<&String> = entries.iter().map(|(name, _)| name).collect();
        names.sort_unstable();
        names.dedup();
        return match names.as_slice() {
            [creator] => Ok(Some(creator.to_string())),
            other => Err(format!(
                "a creation at {} with managers {other:?}",
                revision_of(now)
            )),
        };
    };
    let set = set_fields(&content(before), &content(now));
    if set.is_empty() {
        return Ok(None);
    }
    let mut owners: Vec<&String> = entries
        .iter()
        .filter(|(_, fields)| set.iter().all(|path| owns(fields, path)))
        .map(|(name, _)| name)
        .collect();
    owners.sort_unstable();
    owners.dedup();
    match owners.as_slice() {
        [owner] => Ok(Some(owner.to_string())),
        other => Err(format!(
            "the write at {} set {set:?}, owned whole by {other:?} of {:?}",
            revision_of(now),
            entries.iter().map(|(n, _)| n).collect::<Vec<_>>()
        )),
    }
}

/// The value of the assignment label of the last of `versions` older than `revision`; `None`
/// when there is none (the object did not exist yet).
fn label_before(versions: &[Value], revision: u64, shard: &str) -> Option<Option<String>> {
    versions
        .iter()
        .take_while(|v| revision_of(v) < revision)
        .last()
        .map(|v| label(v, shard))
}

/// What [`check_versions`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Replica writes whose writer managedFields names, each on a version labelled for it.
    pub writes: usize,
    /// Children created by a replica while their owner was labelled for another.
    pub late_creates: usize,
    /// Drain acknowledgements (the assignment and drain labels removed), each on a version
    /// marked draining; their writer is not named (see the module doc).
    pub acknowledgements: usize,
}

/// The fence check over every version of every widget and child (by name): every change a
/// replica made was made to a version labelled for it; a child a replica created while its
/// owner was labelled for another is a late create, counted; every removal of the assignment
/// label (a drain acknowledgement) follows a version marked draining.
pub fn check_versions(
    widgets: &HashMap<String, Vec<Value>>,
    children: &HashMap<String, Vec<Value>>,
) -> Result<Checked, String> {
    let (shard, drain) = (shard_label(RING), drain_label(RING));
    let (mut checked, mut late_creates, mut acknowledgements) = (0, 0, 0);
    for (resource, objects) in [("widgets", widgets), ("configmaps", children)] {
        for (name, versions) in objects {
            let mut before: Option<&Value> = None;
            for now in versions {
                let who = writer(before, now).map_err(|e| format!("{resource}/{name}: {e}"))?;
                let previous = before.replace(now);
                if let (None, Some(previous)) = (&who, previous) {
                    if label(previous, &shard).is_some() && label(now, &shard).is_none() {
                        if label(previous, &drain).is_none() {
                            return Err(format!(
                                "{resource}/{name}: its assignment label removed at revision \
                                 {} from a version not marked draining",
                                revision_of(now)
                            ));
                        }
                        acknowledgements += 1;
                    }
                }
                let Some(who) = who.filter(|w| w.starts_with("replica-")) else {
                    continue;
                };
                checked += 1;
                let revision = revision_of(now);
                match (previous, resource) {
                    (Some(previous), _) => {
                        let labelled = label(previous, &shard);
                        if labelled.as_deref() != Some(who.as_str()) {
                            return Err(format!(
                                "{resource}/{name} changed by {who} at revision {revision} \
                                 while labelled {labelled:?}"
                            ));
                        }
                    }
                    (None, "configmaps") => {
                        let owner = name.trim_end_matches("-cfg");
                        let owner_versions = widgets.get(owner).map_or(&[][..], Vec::as_slice);
                        let labelled = label_before(owner_versions, revision, &shard).flatten();
                        if labelled.as_deref() != Some(who.as_str()) {
                            late_creates += 1;
                        }
                    }
                    (None, _) => {
                        return Err(format!("{resource}/{name} created by {who} at {revision}"))
                    }
                }
            }
        }
    }
    if checked == 0 {
        return Err("no replica write among the versions".into());
    }
    Ok(Checked {
        writes: checked,
        late_creates,
        acknowledgements,
    })
}

/// The history of widget `name` and its child, one line per version (revision, writer,
/// assignment and drain labels, status or data), for a failure message.
pub fn explain_versions(
    widgets: &HashMap<String, Vec<Value>>,
    children: &HashMap<String, Vec<Value>>,
    name: &str,
) -> String {
    let (shard, drain) = (shard_label(RING), drain_label(RING));
    let mut out = String::new();
    for (resource, object, versions) in [
        ("widgets", name.to_string(), widgets.get(name)),
        (
            "configmaps",
            child_name(name),
            children.get(&child_name(name)),
        ),
    ] {
        out.push_str(&format!("\n  {resource}/{object}:"));
        let mut before = None;
        for version in versions.into_iter().flatten() {
            let who = match writer(before, version) {
                Ok(who) => who.unwrap_or_else(|| "(removals only)".into()),
                Err(e) => format!("? ({e})"),
            };
            before = Some(version);
            out.push_str(&format!(
                "\n    {} by {who} label {:?} drain {:?} status {} data {}",
                revision_of(version),
                label(version, &shard),
                label(version, &drain),
                version.get("status").unwrap_or(&Value::Null),
                version.get("data").unwrap_or(&Value::Null),
            ));
        }
    }
    out
}

/// How many versions each writer made, for the scenario's report.
pub fn writers(objects: &HashMap<String, Vec<Value>>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for versions in objects.values() {
        let mut before = None;
        for version in versions {
            let who = match writer(before, version) {
                Ok(Some(who)) => who,
                Ok(None) => "(removals only)".into(),
                Err(_) => "?".into(),
            };
            *counts.entry(who).or_default() += 1;
            before = Some(version);
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(manager: &str, fields: Value) -> Value {
        json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
               "time": "2026-11-29T12:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields})
    }

    fn version(rv: u64, labelled: &str, data: &str, managed: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "w-0-cfg", "resourceVersion": rv.to_string(),
                            "labels": {shard_label(RING): labelled}, "managedFields": managed},
               "data": {"size": data}})
    }

    fn label_fields() -> Value {
        json!({"f:metadata": {"f:labels": {format!("f:{}", shard_label(RING)): {}}}})
    }

    /// As kube-apiserver keeps them: the creator owns everything it set; a relabel moves the
    /// label to the sharder; a data change moves `data.size` to its writer.
    fn history(data_writer: &str) -> Vec<Value> {
        let all = json!({"f:metadata": {"f:labels": {format!("f:{}", shard_label(RING)): {}}},
                         "f:data": {"f:size": {}}});
        vec![
            version(1, "replica-a", "1", vec![entry("replica-a", all.clone())]),
            version(
                2,
                "replica-b",
                "1",
                vec![
                    entry("replica-a", json!({"f:data": {"f:size": {}}})),
                    entry("sharder-replica-c", label_fields()),
                ],
            ),
            version(
                3,
                "replica-b",
                "2",
                vec![
                    entry("sharder-replica-c", label_fields()),
                    entry(data_writer, json!({"f:data": {"f:size": {}}})),
                ],
            ),
        ]
    }

    #[test]
    fn the_writer_is_the_one_manager_owning_every_field_set() {
        let versions = history("replica-b");
        assert_eq!(
            writer(None, &versions[0]).unwrap().as_deref(),
            Some("replica-a")
        );
        assert_eq!(
            writer(Some(&versions[0]), &versions[1]).unwrap().as_deref(),
            Some("sharder-replica-c")
        );
        assert_eq!(
            writer(Some(&versions[1]), &versions[2]).unwrap().as_deref(),
            Some("replica-b")
        );
        // Removing the label sets nothing: no writer is named.
        let mut unlabelled = versions[2].clone();
        unlabelled["metadata"]["labels"] = json!({});
        assert_eq!(writer(Some(&versions[2]), &unlabelled).unwrap(), None);
    }

    #[test]
    fn a_change_by_a_replica_on_a_version_labelled_for_another_fails_the_check() {
        let widgets = HashMap::new();
        let good = HashMap::from([("w-0-cfg".to_string(), history("replica-b"))]);
        let checked = Checked {
            writes: 2,
            late_creates: 1,
            acknowledgements: 0,
        };
        assert_eq!(check_versions(&widgets, &good), Ok(checked));
        // replica-a changes data.size on version 2, labelled for replica-b.
        let bad = HashMap::from([("w-0-cfg".to_string(), history("replica-a"))]);
        let error = check_versions(&widgets, &bad).unwrap_err();
        assert!(
            error.contains("changed by replica-a at revision 3")
                && error.contains("Some(\"replica-b\")"),
            "{error}"
        );
    }

    #[test]
    fn an_assignment_label_removed_counts_as_an_acknowledgement_only_after_a_drain_mark() {
        let data_only = || vec![entry("replica-b", json!({"f:data": {"f:size": {}}}))];
        let unlabelled = |from: &Value| {
            let mut v = from.clone();
            v["metadata"]["resourceVersion"] = json!("9");
            v["metadata"]["labels"] = json!({});
            v["metadata"]["managedFields"] = json!(data_only());
            v
        };
        let mut versions = history("replica-b");
        versions.push(unlabelled(&versions[2]));
        let children = HashMap::from([("w-0-cfg".to_string(), versions)]);
        let error = check_versions(&HashMap::new(), &children).unwrap_err();
        assert!(error.contains("not marked draining"), "{error}");

        let mut versions = history("replica-b");
        let mut draining = versions[2].clone();
        draining["metadata"]["resourceVersion"] = json!("4");
        draining["metadata"]["labels"][drain_label(RING)] = json!("replica-b");
        let mut sharder = label_fields();
        sharder["f:metadata"]["f:labels"][format!("f:{}", drain_label(RING))] = json!({});
        draining["metadata"]["managedFields"] =
            json!([entry("sharder-replica-c", sharder), data_only()[0].clone()]);
        let acknowledged = unlabelled(&draining);
        versions.extend([draining, acknowledged]);
        let children = HashMap::from([("w-0-cfg".to_string(), versions)]);
        let checked = check_versions(&HashMap::new(), &children).unwrap();
        assert_eq!(checked.acknowledgements, 1);
    }

    #[test]
    fn a_version_no_single_manager_explains_is_an_error() {
        let versions = history("replica-b");
        let mut odd = versions[2].clone();
        odd["metadata"]["managedFields"] = json!([entry("replica-b", json!({}))]);
        assert!(writer(Some(&versions[1]), &odd).is_err());
    }
}
