//! Range mode's safety check over the server's history (the `shard-ranges` scenario): who
//! wrote each version of the widgets and their children, and whether each change of writer was
//! allowed. The in-process equivalent is `check_owners` in `crates/controller/tests/range_mode.rs`;
//! the argument it checks is docs/sharding.md, *Why no object has two acting owners*.
//!
//! The rule: whenever the replica writing an object (a widget or a child) changes from A to B,
//! B's write is a touch (SH23: the touch annotation changed), or A's claims ConfigMap
//! (`widgets-ranges-<A>`, `data.held`) dropped the object's range at a revision between A's last
//! write of the object and B's first (SH22). Ordered by resourceVersion, which both servers
//! give every version of every object in one sequence (the simulator's revision, etcd's).
//!
//! The versions and their writers come from either server: the simulator's history with its
//! write log naming each revision's user, or a real server's recorded versions with the writer
//! told by `managedFields` ([`crate::shard_history::writer`]); both are handed in as a function.
//!
//! A child created by B while its owner widget's last writer was another replica A that had not
//! released the range is a late create (docs/sharding.md, *Creates*): counted apart, and not
//! taken as B acting on the object, as in the label mode's check.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use controller::sharding::{
    claims_name, parse_claims, range_label, touch_annotation, RangeTable, CLAIMS_KEY,
};
use serde_json::Value;
use workqueue::shared_informer::reflector::store_index::shard_hash;

use crate::shard_fleet::revision_of;
use crate::shard_replica::RING;

/// Each member's claims over time: (revision, ranges held from then on), oldest first.
pub type Claims = BTreeMap<String, Vec<(u64, BTreeSet<u32>)>>;

/// Every version of each object, by name, oldest first.
pub type Versions = HashMap<String, Vec<Value>>;

/// Each member's claims over time, from the versions of the ConfigMaps (the claims ConfigMaps
/// among them, named `widgets-ranges-<identity>`).
pub fn claims_history(configmaps: &Versions) -> Result<Claims, String> {
    let prefix = claims_name(RING, "");
    let mut out = Claims::new();
    for (name, versions) in configmaps {
        let Some(member) = name.strip_prefix(&prefix) else {
            continue;
        };
        let mut history = Vec::new();
        for version in versions {
            let held = version
                .pointer("/data")
                .and_then(|d| d.get(CLAIMS_KEY))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let held = parse_claims(held).map_err(|e| format!("{name}: {e}"))?;
            history.push((revision_of(version), held));
        }
        out.insert(member.to_string(), history);
    }
    Ok(out)
}

/// The virtual range of a widget (its uid's) or of a child (the one its range label names).
pub fn range_of(object: &Value, child: bool) -> Option<u32> {
    if child {
        let labels = object.pointer("/metadata/labels")?;
        return labels.get(range_label(RING))?.as_str()?.parse().ok();
    }
    let uid = object.pointer("/metadata/uid")?.as_str()?;
    Some(RangeTable::range_of_hash(shard_hash(uid)))
}

fn touch_mark(object: &Value) -> Option<&str> {
    object
        .pointer("/metadata/annotations")?
        .get(touch_annotation(RING))?
        .as_str()
}

/// A replica's stored change of a widget or a child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    /// The widget's name, or the child's.
    pub name: String,
    /// Whether it is a child (a ConfigMap other than a claims one).
    pub child: bool,
    /// Its revision.
    pub revision: u64,
    /// The replica that made it.
    pub writer: String,
    /// A touch (SH23): the touch annotation changed.
    pub touch: bool,
    /// The object's creation (a child's, made by its owner's replica).
    pub created: bool,
    /// The object's virtual range.
    pub range: u32,
}

/// Who wrote `now` on `before` (`None` before: a creation): a replica's identity, another
/// writer's name, or `None` when unknown or nobody in particular.
pub type WriterOf<'a> = dyn Fn(Option<&Value>, &Value) -> Result<Option<String>, String> + 'a;

/// Every replica write among the versions of the widgets and the children (ConfigMaps named
/// `<widget>-cfg`), with its writer from `writer_of`.
pub fn replica_writes(
    widgets: &Versions,
    configmaps: &Versions,
    writer_of: &WriterOf<'_>,
) -> Result<Vec<Write>, String> {
    let mut out = Vec::new();
    let children = configmaps.iter().filter(|(name, _)| name.ends_with("-cfg"));
    for (child, (name, versions)) in widgets
        .iter()
        .map(|w| (false, w))
        .chain(children.map(|c| (true, c)))
    {
        let mut before: Option<&Value> = None;
        for now in versions {
            let previous = before.replace(now);
            let who = writer_of(previous, now).map_err(|e| format!("{name}: {e}"))?;
            let Some(writer) = who.filter(|w| w.starts_with("replica-")) else {
                continue;
            };
            let revision = revision_of(now);
            let range = range_of(now, child)
                .ok_or_else(|| format!("{name} at {revision}: no virtual range"))?;
            let touch = previous.is_some_and(|p| touch_mark(p) != touch_mark(now));
            if touch {
                let toucher = touch_mark(now).and_then(|m| m.split(' ').next());
                if toucher != Some(writer.as_str()) {
                    return Err(format!(
                        "{name} at {revision}: touched by {writer}, marked {:?}",
                        touch_mark(now)
                    ));
                }
            }
            out.push(Write {
                name: name.clone(),
                child,
                revision,
                writer,
                touch,
                created: previous.is_none(),
                range,
            });
        }
    }
    out.sort_by_key(|w| w.revision);
    Ok(out)
}

/// What [`check_owners`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checked {
    /// Replica writes checked.
    pub writes: usize,
    /// Changes of writer allowed by a release of the range between them.
    pub hand_overs: usize,
    /// Touches.
    pub touches: usize,
    /// Children created by a replica while their owner's last writer held the range.
    pub late_creates: usize,
}

/// Whether `member`'s claims dropped `range` at a revision in `(after, before)`.
fn released(claims: &Claims, member: &str, range: u32, after: u64, before: u64) -> bool {
    claims.get(member).is_some_and(|history| {
        history
            .iter()
            .any(|(r, held)| *r > after && *r < before && !held.contains(&range))
    })
}

/// The check of the module doc over `writes` (sorted by revision) and the members' claims.
pub fn check_owners(writes: &[Write], claims: &Claims) -> Result<Checked, String> {
    let mut checked = Checked::default();
    // Per object, (child?, name) → (writer, revision) of its last acting write.
    let mut last: HashMap<(bool, &str), (&str, u64)> = HashMap::new();
    for write in writes {
        checked.writes += 1;
        checked.touches += usize::from(write.touch);
        if write.created && write.child {
            let owner = write.name.trim_end_matches("-cfg");
            if let Some((previous, at)) = last.get(&(false, owner)) {
                let allowed = *previous == write.writer
                    || released(claims, previous, write.range, *at, write.revision);
                if !allowed {
                    checked.late_creates += 1;
                    continue;
                }
            }
        }
        let key = (write.child, write.name.as_str());
        if let Some((previous, at)) = last.get(&key) {
            if *previous != write.writer && !write.touch {
                if !released(claims, previous, write.range, *at, write.revision) {
                    return Err(format!(
                        "{} {} written by {} at {} after {previous}'s write at {at}, with \
                         neither a touch nor a release of range {} by {previous} between",
                        if write.child { "child" } else { "widget" },
                        write.name,
                        write.writer,
                        write.revision,
                        write.range
                    ));
                }
                checked.hand_overs += 1;
            }
        }
        last.insert(key, (write.writer.as_str(), write.revision));
    }
    if checked.writes == 0 {
        return Err("no replica write among the versions".into());
    }
    Ok(checked)
}

/// The touches among `writes` at revisions in `(from, to]`.
pub fn touches_in(writes: &[Write], from: u64, to: u64) -> Vec<&Write> {
    writes
        .iter()
        .filter(|w| w.touch && w.revision > from && w.revision <= to)
        .collect()
}

/// The history of widget `name` and its child, one line per version (revision, writer, range,
/// touch mark, status or data), for a failure message.
pub fn explain(
    widgets: &Versions,
    configmaps: &Versions,
    writer_of: &WriterOf<'_>,
    name: &str,
) -> String {
    let mut out = String::new();
    let child = crate::shard_replica::child_name(name);
    for (is_child, object, versions) in [
        (false, name, widgets.get(name)),
        (true, child.as_str(), configmaps.get(&child)),
    ] {
        out.push_str(&format!("\n  {object}:"));
        let mut before = None;
        for version in versions.into_iter().flatten() {
            let who = match writer_of(before, version) {
                Ok(who) => who.unwrap_or_else(|| "?".into()),
                Err(e) => format!("? ({e})"),
            };
            before = Some(version);
            out.push_str(&format!(
                "\n    {} by {who} range {:?} touch {:?} status {} data {}",
                revision_of(version),
                range_of(version, is_child),
                touch_mark(version),
                version.get("status").unwrap_or(&Value::Null),
                version.get("data").unwrap_or(&Value::Null),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget(rv: u64, writer: &str, touch: Option<&str>) -> Value {
        let mut v = json!({"metadata": {"name": "w-0", "uid": "uid-0",
                                        "resourceVersion": rv.to_string(),
                                        "annotations": {"by": writer}},
                           "status": {"by": writer}});
        if let Some(mark) = touch {
            v["metadata"]["annotations"][touch_annotation(RING)] = json!(mark);
        }
        v
    }

    /// The writer of a version is named in it, for the test (`annotations.by`).
    fn named(_: Option<&Value>, now: &Value) -> Result<Option<String>, String> {
        Ok(now
            .pointer("/metadata/annotations/by")
            .and_then(Value::as_str)
            .map(str::to_string))
    }

    fn claims(member: &str, history: &[(u64, bool)]) -> Claims {
        let range = RangeTable::range_of_hash(shard_hash("uid-0"));
        let history = history
            .iter()
            .map(|&(r, held)| (r, held.then_some(range).into_iter().collect()))
            .collect();
        Claims::from([(member.to_string(), history)])
    }

    fn check(versions: Vec<Value>, claims: &Claims) -> Result<Checked, String> {
        let widgets = Versions::from([("w-0".to_string(), versions)]);
        let writes = replica_writes(&widgets, &Versions::new(), &named)?;
        check_owners(&writes, claims)
    }

    #[test]
    fn a_change_of_writer_needs_a_touch_or_a_release_between() {
        let seeded = || widget(1, "admin", None);
        // b writes after a with a's claims unchanged: two acting owners.
        let history = vec![
            seeded(),
            widget(2, "replica-a", None),
            widget(5, "replica-b", None),
        ];
        let held = claims("replica-a", &[(1, true)]);
        let error = check(history.clone(), &held).unwrap_err();
        assert!(
            error.contains("widget w-0 written by replica-b at 5 after replica-a's write at 2"),
            "{error}"
        );
        // a released the range at 3: a hand-over.
        let released = claims("replica-a", &[(1, true), (3, false)]);
        let checked = check(history, &released).unwrap();
        assert_eq!((checked.writes, checked.hand_overs), (2, 1));
        // b touched first: allowed; a's late write after the touch is not.
        let touched = vec![
            seeded(),
            widget(2, "replica-a", None),
            widget(4, "replica-b", Some("replica-b 1 2")),
            widget(5, "replica-b", Some("replica-b 1 2")),
        ];
        assert_eq!(check(touched.clone(), &held).unwrap().touches, 1);
        let mut late = touched;
        late.push(widget(6, "replica-a", Some("replica-b 1 2")));
        assert!(check(late, &held).is_err());
    }

    #[test]
    fn a_touch_marked_by_another_than_its_writer_is_an_error() {
        let history = vec![
            widget(1, "replica-a", None),
            widget(2, "replica-b", Some("replica-c 1 1")),
        ];
        let error = check(history, &Claims::new()).unwrap_err();
        assert!(error.contains("touched by replica-b"), "{error}");
    }
}
