//! Normalisation: what differs between two runs of one server is replaced by placeholders, so
//! that what is left differs only where the servers do. It works on a whole group's answers at
//! once, because some placeholders are relations between answers:
//!
//! - **resourceVersions** become ranks. Those of objects (a get, a write, a list's items, a watch
//!   event's object) are `rv:N`, N being the value's rank among all the objects' values of the
//!   group, so that "the same version", "newer" and "older" survive. Those that are not an
//!   object's (a list's, a bookmark's, a number in a `Status` message) are `rv:N+`, N being how
//!   many of the objects' values are not greater: kube-apiserver's global revision moves on its
//!   own (it renews leases every few seconds), so a list's resourceVersion is "at or after the
//!   last write" and no more exact than that. A rank by value rather than by first appearance
//!   keeps order relations even when an older version is shown after a newer one.
//! - **uids** are `uid:N` by first appearance (anywhere, also inside messages).
//! - **timestamps** (any whole string in RFC 3339 form: `creationTimestamp`, a managed field's
//!   `time`, a condition's `lastTransitionTime`) are `<time>`; a Table's age cells (columns named
//!   `Age` or of type or format `date`) are `<age>`.
//! - **generated names** (`metadata.name` = `generateName` + 5 characters) are
//!   `<generateName><gen:N>`, wherever they appear.
//! - **continue tokens** are opaque: a non-empty `continue` is `<continue>`.
//! - the server's own `host:port` (in discovery's `serverAddressByClientCIDRs`) is `<server>`.
//! - the rules of a `SelfSubjectRulesReview` are sorted: kube-apiserver lists them in no fixed
//!   order.
//!
//! Timestamps and `"resourceVersion":"N"` inside longer strings (an object quoted in an error
//! message) are replaced too.
//!
//! Per-request headers (`Audit-Id`, `Date`) are never recorded (see
//! [`crate::replay::COMPARED_HEADERS`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Value};

/// What a group's answers share, collected before anything is replaced.
#[derive(Debug, Default)]
struct Facts {
    /// The resourceVersions of objects, in value order.
    object_rvs: BTreeSet<u64>,
    /// The `generateName` prefixes asked for or seen.
    prefixes: BTreeSet<String>,
    /// Any of them followed by a generated suffix (built once the prefixes are known).
    generated_pattern: Option<Regex>,
    /// Generated names, numbered in order of first appearance.
    generated: HashMap<String, usize>,
    /// Uids in order of first appearance.
    uids: HashMap<String, usize>,
    /// The server's `host:port`.
    authority: String,
}

/// Normalises the answers of one group (each the JSON `replay` recorded), in place.
/// `generate_name_prefixes` are the prefixes the group's requests ask names to be generated
/// from (a refused create shows its generated name only in its error message).
pub fn normalise_group(answers: &mut [Value], authority: &str, generate_name_prefixes: &[String]) {
    let mut facts = Facts {
        authority: authority.to_string(),
        prefixes: generate_name_prefixes.iter().cloned().collect(),
        ..Facts::default()
    };
    for answer in answers.iter() {
        collect(answer, false, &mut facts);
    }
    if !facts.prefixes.is_empty() {
        let alternatives: Vec<String> = facts.prefixes.iter().map(|p| regex::escape(p)).collect();
        // kube-apiserver's (and the simulator's) alphabet for generated suffixes.
        let pattern = format!(
            "({})[bcdfghjklmnpqrstvwxz2456789]{{5}}",
            alternatives.join("|")
        );
        facts.generated_pattern = Some(Regex::new(&pattern).expect("escaped prefixes"));
    }
    for answer in answers.iter_mut() {
        ages(answer);
        if let Some(body) = answer.get_mut("body") {
            sort_rules(body);
        }
        rewrite(answer, Position::Other, &mut facts);
    }
}

fn patterns() -> &'static Patterns {
    static PATTERNS: OnceLock<Patterns> = OnceLock::new();
    PATTERNS.get_or_init(|| Patterns {
        time: Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
            .expect("valid"),
        time_inside: Regex::new(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")
            .expect("valid"),
        embedded_rv: Regex::new(r#"(resourceVersion\\*"\s*:\s*\\*")(\d+)"#).expect("valid"),
        uid: Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
            .expect("valid"),
        rv_in_text: [
            // kube-apiserver's watch cache: `too old resource version: 5 (21)`.
            Regex::new(r"(?i)(too old resource version: \d+ \()(\d+)").expect("valid"),
            Regex::new(r"(?i)(resource ?version[a-z ]*:? \(?|current: )(\d+)").expect("valid"),
        ],
    })
}

struct Patterns {
    /// A whole string that is a timestamp.
    time: Regex,
    /// A timestamp inside a longer string (an object quoted in a message).
    time_inside: Regex,
    /// `"resourceVersion":"N"` inside a string (an object quoted in a message, escaped or not).
    embedded_rv: Regex,
    uid: Regex,
    /// Numbers that are resourceVersions in messages, each pattern's second group.
    rv_in_text: [Regex; 2],
}

/// Whether `object` is a collection (its resourceVersion is a revision, not an object's).
fn is_collection(object: &Map<String, Value>) -> bool {
    object.contains_key("items")
        || object.contains_key("rows")
        || object
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| k.ends_with("List"))
}

/// Whether `object` is a watch event (`{"type", "object"}`).
fn event_type(object: &Map<String, Value>) -> Option<&str> {
    if object.len() == 2 && object.contains_key("object") {
        object.get("type").and_then(Value::as_str)
    } else {
        None
    }
}

fn collect(value: &Value, bookmark: bool, facts: &mut Facts) {
    match value {
        Value::Object(object) => {
            if let Some(kind) = event_type(object) {
                collect(&object["object"], kind == "BOOKMARK", facts);
                return;
            }
            if let Some(Value::Object(meta)) = object.get("metadata") {
                collect_meta(meta, !bookmark && !is_collection(object), facts);
            }
            for child in object.values() {
                collect(child, false, facts);
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect(v, false, facts)),
        _ => {}
    }
}

fn collect_meta(meta: &Map<String, Value>, an_object: bool, facts: &mut Facts) {
    if an_object {
        if let Some(rv) = meta
            .get("resourceVersion")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
        {
            facts.object_rvs.insert(rv);
        }
    }
    if let Some(prefix) = meta.get("generateName").and_then(Value::as_str) {
        if !prefix.is_empty() {
            facts.prefixes.insert(prefix.to_string());
        }
    }
}

/// Where a value sits, for the resourceVersions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// The metadata of an object.
    ObjectMeta,
    /// The metadata of a collection or a bookmark.
    RevisionMeta,
    /// Anywhere else.
    Other,
}

fn rewrite(value: &mut Value, position: Position, facts: &mut Facts) {
    match value {
        Value::Object(object) => {
            if let Some(kind) = event_type(object).map(str::to_string) {
                for (key, child) in object.iter_mut() {
                    match (key.as_str(), child) {
                        ("object", Value::Object(inner)) => {
                            rewrite_map(inner, Position::Other, kind == "BOOKMARK", facts)
                        }
                        (_, child) => rewrite(child, Position::Other, facts),
                    }
                }
            } else {
                rewrite_map(object, position, false, facts);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| rewrite(v, Position::Other, facts)),
        Value::String(text) => *text = rewrite_text(text, facts),
        _ => {}
    }
}

/// Rewrites the members of `object`, which sits at `position`; its own `metadata` is an
/// object's, or a revision's for a collection or a bookmark.
fn rewrite_map(
    object: &mut Map<String, Value>,
    position: Position,
    bookmark: bool,
    facts: &mut Facts,
) {
    let meta_position = if bookmark || is_collection(object) {
        Position::RevisionMeta
    } else {
        Position::ObjectMeta
    };
    for (key, child) in object.iter_mut() {
        let rv = match (key.as_str(), &*child) {
            ("resourceVersion", Value::String(rv)) => rv.parse::<u64>().ok(),
            _ => None,
        };
        if let Some(rv) = rv {
            *child = Value::String(rv_placeholder(rv, position, facts));
        } else if key == "continue" && child.as_str().is_some_and(|t| !t.is_empty()) {
            *child = Value::String("<continue>".into());
        } else if key == "metadata" {
            rewrite(child, meta_position, facts);
        } else {
            rewrite(child, Position::Other, facts);
        }
    }
}

fn rv_placeholder(rv: u64, position: Position, facts: &Facts) -> String {
    rv_placeholder_in(rv, position, &facts.object_rvs)
}

fn rv_placeholder_in(rv: u64, position: Position, object_rvs: &BTreeSet<u64>) -> String {
    let rank = object_rvs.range(..=rv).count();
    if position != Position::RevisionMeta && object_rvs.contains(&rv) {
        format!("rv:{rank}")
    } else {
        format!("rv:{rank}+")
    }
}

fn rewrite_text(text: &str, facts: &mut Facts) -> String {
    let patterns = patterns();
    if patterns.time.is_match(text) {
        return "<time>".into();
    }
    let mut out = text.to_string();
    if patterns.time_inside.is_match(&out) {
        out = patterns
            .time_inside
            .replace_all(&out, "<time>")
            .into_owned();
    }
    if patterns.embedded_rv.is_match(&out) {
        let object_rvs = &facts.object_rvs;
        out = patterns
            .embedded_rv
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let rv: u64 = c[2].parse().unwrap_or(u64::MAX);
                let position = if object_rvs.contains(&rv) {
                    Position::ObjectMeta
                } else {
                    Position::RevisionMeta
                };
                format!("{}{}", &c[1], rv_placeholder_in(rv, position, object_rvs))
            })
            .into_owned();
    }
    if out.contains(&facts.authority) && !facts.authority.is_empty() {
        out = out.replace(&facts.authority, "<server>");
    }
    if let Some(pattern) = &facts.generated_pattern {
        if pattern.is_match(&out) {
            let generated = &mut facts.generated;
            out = pattern
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    let next = generated.len() + 1;
                    let n = *generated.entry(c[0].to_string()).or_insert(next);
                    format!("{}<gen:{n}>", &c[1])
                })
                .into_owned();
        }
    }
    if patterns.uid.is_match(&out) {
        let uids = &mut facts.uids;
        out = patterns
            .uid
            .replace_all(&out, |c: &regex::Captures<'_>| {
                let next = uids.len() + 1;
                format!("uid:{}", *uids.entry(c[0].to_string()).or_insert(next))
            })
            .into_owned();
    }
    for pattern in &patterns.rv_in_text {
        if pattern.is_match(&out) {
            let object_rvs = &facts.object_rvs;
            out = pattern
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    let rv: u64 = c[2].parse().unwrap_or(u64::MAX);
                    format!("{}rv:{}+", &c[1], object_rvs.range(..=rv).count())
                })
                .into_owned();
        }
    }
    out
}

/// Sorts the rules of a SelfSubjectRulesReview: kube-apiserver gathers them from its RBAC
/// bindings in no fixed order (two runs of one server differ).
fn sort_rules(body: &mut Value) {
    if body.get("kind").and_then(Value::as_str) != Some("SelfSubjectRulesReview") {
        return;
    }
    for key in ["resourceRules", "nonResourceRules"] {
        if let Some(Value::Array(rules)) = body.pointer_mut(&format!("/status/{key}")) {
            rules.sort_by_key(|rule| rule.to_string());
        }
    }
}

/// Replaces the age cells of every Table in `answer` (its body, or its watch events in order:
/// only a watch's first Table carries the column definitions).
fn ages(answer: &mut Value) {
    let mut date_columns: Vec<usize> = Vec::new();
    if let Some(body) = answer.get_mut("body") {
        table_ages(body, &mut date_columns);
    }
    if let Some(Value::Array(events)) = answer.get_mut("events") {
        for event in events {
            if let Some(object) = event.get_mut("object") {
                table_ages(object, &mut date_columns);
            }
        }
    }
}

fn table_ages(table: &mut Value, date_columns: &mut Vec<usize>) {
    if table.get("kind").and_then(Value::as_str) != Some("Table") {
        return;
    }
    if let Some(Value::Array(columns)) = table.get("columnDefinitions") {
        if !columns.is_empty() {
            *date_columns = columns
                .iter()
                .enumerate()
                .filter(|(_, c)| {
                    c.get("name").and_then(Value::as_str) == Some("Age")
                        || c.get("type").and_then(Value::as_str) == Some("date")
                        || c.get("format").and_then(Value::as_str) == Some("date")
                })
                .map(|(i, _)| i)
                .collect();
        }
    }
    if let Some(Value::Array(rows)) = table.get_mut("rows") {
        for row in rows {
            if let Some(Value::Array(cells)) = row.get_mut("cells") {
                for i in date_columns.iter() {
                    if let Some(cell @ Value::String(_)) = cells.get_mut(*i) {
                        *cell = Value::String("<age>".into());
                    }
                }
            }
        }
    }
}

/// The placeholders of a normalised value, for tests: every string that holds one.
#[cfg(test)]
fn strings(value: &Value, out: &mut std::collections::BTreeMap<String, usize>) {
    match value {
        Value::String(s) => *out.entry(s.clone()).or_default() += 1,
        Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        Value::Object(o) => o.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn object_versions_are_ranked_and_a_list_version_is_at_or_after() {
        let mut answers = vec![
            json!({"body": {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "105"}}}),
            json!({"body": {"kind": "ConfigMap", "metadata": {"name": "a", "resourceVersion": "103"}}}),
            json!({"body": {"kind": "ConfigMapList", "metadata": {"resourceVersion": "110"},
                "items": [{"metadata": {"name": "a", "resourceVersion": "105"}}]}}),
        ];
        normalise_group(&mut answers, "127.0.0.1:1", &[]);
        assert_eq!(answers[0]["body"]["metadata"]["resourceVersion"], "rv:2");
        assert_eq!(answers[1]["body"]["metadata"]["resourceVersion"], "rv:1");
        assert_eq!(answers[2]["body"]["metadata"]["resourceVersion"], "rv:2+");
        assert_eq!(
            answers[2]["body"]["items"][0]["metadata"]["resourceVersion"],
            "rv:2"
        );
    }

    #[test]
    fn a_bookmark_version_is_a_revision_even_when_it_equals_an_object_version() {
        let mut answers = vec![json!({"events": [
            {"type": "ADDED", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}},
            {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "7"}}},
        ]})];
        normalise_group(&mut answers, "x", &[]);
        assert_eq!(
            answers[0]["events"][0]["object"]["metadata"]["resourceVersion"],
            "rv:1"
        );
        assert_eq!(
            answers[0]["events"][1]["object"]["metadata"]["resourceVersion"],
            "rv:1+"
        );
    }

    #[test]
    fn uids_times_generated_names_and_tokens_become_placeholders() {
        let uid = "3ff0c88f-4d57-4eaf-af51-c45448a884f1";
        let mut answers = vec![
            json!({"body": {"metadata": {"name": "gen-x7k2p", "generateName": "gen-", "uid": uid,
                "creationTimestamp": "2026-11-29T02:49:53Z", "continue": "abc"}}}),
            json!({"body": {"message": format!("configmaps \"gen-x7k2p\" uid {uid} at 127.0.0.1:9")}}),
        ];
        normalise_group(&mut answers, "127.0.0.1:9", &[]);
        let meta = &answers[0]["body"]["metadata"];
        assert_eq!(meta["name"], "gen-<gen:1>");
        assert_eq!(meta["uid"], "uid:1");
        assert_eq!(meta["creationTimestamp"], "<time>");
        assert_eq!(meta["continue"], "<continue>");
        assert_eq!(
            answers[1]["body"]["message"],
            "configmaps \"gen-<gen:1>\" uid uid:1 at <server>"
        );
        let mut seen = std::collections::BTreeMap::new();
        strings(&Value::Array(answers), &mut seen);
        assert!(!seen.keys().any(|s| s.contains(uid)));
    }

    #[test]
    fn versions_in_messages_are_revisions() {
        let mut answers = vec![
            json!({"body": {"metadata": {"resourceVersion": "20"}}}),
            json!({"body": {"message": "Timeout: Too large resource version: 99, current: 25"}}),
            json!({"body": {"message": "too old resource version: 5 (21)"}}),
        ];
        normalise_group(&mut answers, "x", &[]);
        assert_eq!(
            answers[1]["body"]["message"],
            "Timeout: Too large resource version: rv:1+, current: rv:1+"
        );
        assert_eq!(
            answers[2]["body"]["message"],
            "too old resource version: rv:0+ (rv:1+)"
        );
        let mut answers = vec![
            json!({"body": {"metadata": {"resourceVersion": "20"}}}),
            json!({"body": {"message": "the ResourceVersion in the precondition (20) does not match the ResourceVersion in record (21)"}}),
        ];
        normalise_group(&mut answers, "x", &[]);
        assert_eq!(
            answers[1]["body"]["message"],
            "the ResourceVersion in the precondition (rv:1+) does not match the ResourceVersion in record (rv:1+)"
        );
    }

    #[test]
    fn table_age_cells_are_replaced_also_in_later_watch_events() {
        let defs = json!([{"name": "Name", "type": "string"}, {"name": "Age", "type": "string"}]);
        let mut answers = vec![json!({"events": [
            {"type": "ADDED", "object": {"kind": "Table", "columnDefinitions": defs,
                "rows": [{"cells": ["a", "3s"]}]}},
            {"type": "MODIFIED", "object": {"kind": "Table", "columnDefinitions": null,
                "rows": [{"cells": ["a", "4s"]}]}},
        ]})];
        normalise_group(&mut answers, "x", &[]);
        assert_eq!(
            answers[0]["events"][0]["object"]["rows"][0]["cells"][1],
            "<age>"
        );
        assert_eq!(
            answers[0]["events"][1]["object"]["rows"][0]["cells"][1],
            "<age>"
        );
    }
}
