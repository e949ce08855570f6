//! Validation of objects written over HTTP, with kube-apiserver's causes, in its order and
//! words (`ConfigMap "b" is invalid: [metadata.labels: Invalid value: "bad label": name part
//! must consist of ...]`), so that a client's error handling meets the same 422s.
//!
//! What is checked, as kube-apiserver checks it:
//!
//! - names: a DNS-1123 subdomain of at most 253 characters (a Namespace's: a DNS-1123 label of
//!   at most 63), a `generateName` prefix by the same rule;
//! - labels: keys are qualified names (an optional DNS subdomain prefix and `/`, a name part
//!   of at most 63 characters), values at most 63 characters of the label alphabet;
//!   annotations: keys are qualified names;
//! - ConfigMap `data` and `binaryData` keys (the config-key alphabet);
//! - a Pod has containers; a Deployment has at least 0 replicas, a selector its template's
//!   labels match, and containers in its template;
//! - an update adds no finalizer to an object being deleted.
//!
//! Anything else a kind's validation would refuse is stored (see docs/simulator.md).

use serde_json::Value;

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// One cause of a 422: `(reason, field, message)`.
pub(crate) type Cause = (&'static str, String, String);

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const QUALIFIED_NAME: &str = "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_KEY: &str = "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const CONFIG_KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// The causes of a name (and the `generateName` it came from) of an object of `def`.
pub(crate) fn name_causes(
    def: &ResourceDef,
    name: &str,
    generate_name: Option<&str>,
) -> Vec<Cause> {
    let mut out = Vec::new();
    let (rule, max): (&str, usize) = if def.group.is_empty() && def.kind == "Namespace" {
        (DNS1123_LABEL, 63)
    } else {
        (DNS1123_SUBDOMAIN, 253)
    };
    let valid = |s: &str| {
        if rule == DNS1123_LABEL {
            dns1123_label(s)
        } else {
            dns1123_subdomain(s)
        }
    };
    if let Some(prefix) = generate_name.filter(|g| !g.is_empty()) {
        // kube-apiserver checks a prefix as a name that may end in '-'.
        if !valid(prefix.trim_end_matches('-')) {
            out.push(invalid("metadata.generateName", prefix, rule));
        }
    }
    if name.len() > max {
        out.push(invalid(
            "metadata.name",
            name,
            &format!("must be no more than {max} characters"),
        ));
    } else if !valid(name) {
        out.push(invalid("metadata.name", name, rule));
    }
    out
}

/// The causes of `obj`'s labels, annotations and kind-specific fields.
pub(crate) fn object_causes(def: &ResourceDef, obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            out.extend(qualified_name("metadata.labels", k));
            if let Some(v) = v.as_str() {
                out.extend(label_value("metadata.labels", v));
            }
        }
    }
    if let Some(annotations) = obj
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
    {
        for k in annotations.keys() {
            out.extend(qualified_name("metadata.annotations", k));
        }
    }
    if def.is_core() {
        match (def.group.as_str(), def.kind.as_str()) {
            ("", "ConfigMap") => out.extend(config_map(obj)),
            ("", "Pod") => out.extend(pod_spec("spec", obj.get("spec"))),
            ("apps", "Deployment") => out.extend(deployment(obj)),
            _ => {}
        }
    }
    out
}

/// The cause of an update that adds finalizers to an object being deleted.
pub(crate) fn finalizer_causes(old: &Value, new: &Value) -> Vec<Cause> {
    if old.pointer("/metadata/deletionTimestamp").is_none() {
        return Vec::new();
    }
    let list = |v: &Value| -> Vec<String> {
        v.pointer("/metadata/finalizers")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = list(old);
    let added: Vec<String> = list(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .map(|f| format!("{f:?}"))
        .collect();
    if added.is_empty() {
        return Vec::new();
    }
    vec![(
        "FieldValueForbidden",
        "metadata.finalizers".into(),
        format!(
            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            added.join(", ")
        ),
    )]
}

/// [`name_causes`] and [`object_causes`] as one 422, if any.
pub(crate) fn check(def: &ResourceDef, name: &str, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid_causes(
        &def.kind, &def.group, name, &causes,
    ))
}

fn invalid(field: &str, value: &str, why: &str) -> Cause {
    (
        "FieldValueInvalid",
        field.to_string(),
        format!("Invalid value: {value:?}: {why}"),
    )
}

fn dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        })
}

/// The label-name alphabet: alphanumerics inside, `-`, `_` and `.` between.
fn label_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn qualified_name(field: &str, key: &str) -> Vec<Cause> {
    qualified_name_errors(key, QUALIFIED_NAME)
        .iter()
        .map(|why| invalid(field, key, why))
        .collect()
}

/// Why `key` is no qualified name, in apimachinery's words (`whole` is the message for a key
/// of more than two parts).
fn qualified_name_errors(key: &str, whole: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let (prefix, name) = match parts.as_slice() {
        [name] => (None, *name),
        [prefix, name] => (Some(*prefix), *name),
        _ => return vec![whole.to_string()],
    };
    let mut out = Vec::new();
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            out.push("prefix part must be non-empty".to_string());
        } else if !dns1123_subdomain(prefix) {
            out.push(format!("prefix part {DNS1123_SUBDOMAIN}"));
        }
    }
    if name.is_empty() {
        out.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".to_string());
    } else if !label_name(name) {
        out.push(NAME_PART.to_string());
    }
    out
}

/// Why `key` is no label key (a selector's), in apimachinery's words.
pub(crate) fn label_key_errors(key: &str) -> Vec<String> {
    qualified_name_errors(key, LABEL_KEY)
}

/// Why `value` is no label value, in apimachinery's words.
pub(crate) fn label_value_errors(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !label_name(value) {
        out.push(LABEL_VALUE.to_string());
    }
    out
}

fn label_value(field: &str, value: &str) -> Vec<Cause> {
    label_value_errors(value)
        .iter()
        .map(|why| invalid(field, value, why))
        .collect()
}

fn config_map(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for field in ["data", "binaryData"] {
        if let Some(map) = obj.get(field).and_then(Value::as_object) {
            for key in map.keys() {
                let ok = key.len() <= 253
                    && !key.is_empty()
                    && key
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
                if !ok {
                    out.push(invalid(&format!("{field}[{key}]"), key, CONFIG_KEY));
                }
            }
        }
    }
    out
}

fn pod_spec(field: &str, spec: Option<&Value>) -> Vec<Cause> {
    let empty = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty {
        vec![(
            "FieldValueRequired",
            format!("{field}.containers"),
            "Required value".into(),
        )]
    } else {
        Vec::new()
    }
}

fn deployment(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(n) = obj.pointer("/spec/replicas").and_then(Value::as_i64) {
        if n < 0 {
            out.push((
                "FieldValueInvalid",
                "spec.replicas".into(),
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            ));
        }
    }
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object);
    let labels = obj.pointer("/spec/template/metadata/labels");
    match selector {
        None if obj.pointer("/spec/selector").is_none() => out.push((
            "FieldValueRequired",
            "spec.selector".into(),
            "Required value".into(),
        )),
        Some(selector) => {
            let matches = selector
                .iter()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
            if !matches {
                out.push((
                    "FieldValueInvalid",
                    "spec.template.metadata.labels".into(),
                    format!(
                        "Invalid value: {}: `selector` does not match template `labels`",
                        labels.cloned().unwrap_or(Value::Null)
                    ),
                ));
            }
        }
        None => {}
    }
    out.extend(pod_spec(
        "spec.template.spec",
        obj.pointer("/spec/template/spec"),
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm() -> ResourceDef {
        ResourceDef::new("", "v1", "ConfigMap", "configmaps", true)
    }

    #[test]
    fn labels_then_data_keys_each_a_cause() {
        let obj = json!({"metadata": {"labels": {"bad label": "x", "ok": "-bad-"},
            "annotations": {"a/b/c": "1"}}, "data": {"bad key": "v", "good.key": "v"}});
        let causes = object_causes(&cm(), &obj);
        let fields: Vec<&str> = causes.iter().map(|(_, f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.labels",
                "metadata.labels",
                "metadata.annotations",
                "data[bad key]"
            ]
        );
        assert!(causes[0]
            .2
            .starts_with("Invalid value: \"bad label\": name part must"));
        assert!(causes[1]
            .2
            .contains("a valid label must be an empty string"));
    }

    #[test]
    fn names_and_generate_name_prefixes() {
        assert!(name_causes(&cm(), "ok-name.x", None).is_empty());
        let causes = name_causes(&cm(), "Bad_abcde", Some("Bad_"));
        assert_eq!(causes.len(), 2);
        assert_eq!(causes[0].1, "metadata.generateName");
        assert_eq!(causes[1].1, "metadata.name");
        let long = "a".repeat(254);
        assert!(name_causes(&cm(), &long, None)[0]
            .2
            .ends_with("must be no more than 253 characters"));
        let ns = ResourceDef::new("", "v1", "Namespace", "namespaces", false);
        assert!(name_causes(&ns, "a.b", None)[0]
            .2
            .contains("RFC 1123 label"));
    }

    #[test]
    fn deployments_and_pods() {
        let d = ResourceDef::new("apps", "v1", "Deployment", "deployments", true);
        let obj = json!({"spec": {"replicas": -2, "selector": {"matchLabels": {"app": "d"}},
            "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{}]}}}});
        let causes = object_causes(&d, &obj);
        assert_eq!(causes.len(), 2);
        assert_eq!(
            causes[1].2,
            "Invalid value: {\"app\":\"other\"}: `selector` does not match template `labels`"
        );
        let p = ResourceDef::new("", "v1", "Pod", "pods", true);
        assert_eq!(
            object_causes(&p, &json!({"spec": {}}))[0].1,
            "spec.containers"
        );
    }
}
