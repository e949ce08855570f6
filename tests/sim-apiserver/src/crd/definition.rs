//! One CustomResourceDefinition object: its validation and defaults on write (the mistakes
//! kube-apiserver rejects with 422), and what serving it means — the resources of its served
//! versions, their printer columns, the names it accepts.

use serde_json::{json, Value};

use super::schema::{self, Cause};
use crate::resources::{ResourceDef, ScaleDef};

/// One column of a Table, with where its cells come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Header (`Size`).
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub type_: String,
    /// Format hint (`name`, ...), often empty.
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 for the default output, more for `-o wide`.
    pub priority: i64,
    /// The JSONPath of the cell (`.spec.size`).
    pub json_path: String,
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn cause(reason: &'static str, field: impl Into<String>, message: impl Into<String>) -> Cause {
    Cause {
        reason,
        field: field.into(),
        message: message.into(),
    }
}

fn dns_label(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// Fills in what kube-apiserver defaults on a CRD (singular and list kind names, the `None`
/// conversion strategy), then checks it (and, on an update, that its scope stays what it was,
/// `old`); the causes of its invalidity, if any.
pub fn admit(crd: &mut Value, old: Option<&Value>) -> Vec<Cause> {
    if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
        if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
            let kind = names
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            if !kind.is_empty() {
                names
                    .entry("singular")
                    .or_insert_with(|| json!(kind.to_lowercase()));
                names
                    .entry("listKind")
                    .or_insert_with(|| json!(format!("{kind}List")));
            }
        }
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    let mut causes = validate(crd);
    if let Some(old) = old {
        let (was, is) = (s(old, "/spec/scope"), s(crd, "/spec/scope"));
        if was != is {
            causes.push(cause(
                "FieldValueInvalid",
                "spec.scope",
                format!("Invalid value: {is:?}: field is immutable"),
            ));
        }
    }
    causes
}

/// Why `crd` is invalid, as kube-apiserver's apiextensions validation words it; empty when it
/// is valid.
fn validate(crd: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    validate_names(crd, &mut out);
    let scope = s(crd, "/spec/scope");
    if !matches!(scope, "Namespaced" | "Cluster") {
        out.push(cause(
            "FieldValueNotSupported",
            "spec.scope",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    validate_versions(versions, &mut out);
    out
}

/// The CRD's own name (`<plural>.<group>`), its group (a domain) and its resource names.
fn validate_names(crd: &Value, out: &mut Vec<Cause>) {
    let name = s(crd, "/metadata/name");
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    if !name.is_empty() && name != format!("{plural}.{group}") {
        out.push(cause(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    if group.is_empty() {
        out.push(cause("FieldValueRequired", "spec.group", "Required value"));
    } else if !group.contains('.') {
        out.push(cause(
            "FieldValueInvalid",
            "spec.group",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    for (field, value) in [
        ("plural", plural),
        ("singular", s(crd, "/spec/names/singular")),
    ] {
        if value.is_empty() && field == "plural" {
            out.push(cause(
                "FieldValueRequired",
                "spec.names.plural",
                "Required value",
            ));
        } else if !value.is_empty() && !dns_label(value) {
            out.push(cause(
                "FieldValueInvalid",
                format!("spec.names.{field}"),
                format!("Invalid value: {value:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character"),
            ));
        }
    }
    if s(crd, "/spec/names/kind").is_empty() {
        out.push(cause(
            "FieldValueRequired",
            "spec.names.kind",
            "Required value",
        ));
    }
}

/// The CRD's versions: each one's name (unique among them), schema, printer columns and scale
/// paths, and exactly one of them the storage version.
fn validate_versions(versions: &[Value], out: &mut Vec<Cause>) {
    let mut storage = 0;
    let mut names: Vec<&str> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        let vname = s(v, "/name");
        validate_version_name(vname, &at, out);
        if names.contains(&vname) {
            out.push(cause(
                "FieldValueInvalid",
                "spec.versions",
                "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must contain unique version names",
            ));
        }
        names.push(vname);
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        validate_version_schema(v, &at, versions.len() == 1, out);
        validate_printer_columns(v, &at, out);
        validate_scale_paths(v, &at, out);
    }
    if versions.is_empty() {
        out.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion(nil): must have exactly one version marked as storage version",
        ));
    } else if storage != 1 {
        out.push(cause(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version",
        ));
    }
}

/// A version's name: required, and a DNS-1035 label.
fn validate_version_name(vname: &str, at: &str, out: &mut Vec<Cause>) {
    if vname.is_empty() {
        out.push(cause(
            "FieldValueRequired",
            format!("{at}.name"),
            "Required value",
        ));
    } else if !dns_label(vname) {
        out.push(cause(
            "FieldValueInvalid",
            format!("{at}.name"),
            format!("Invalid value: {vname:?}: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character"),
        ));
    }
}

/// A version's schema: required, and structural (named as the CRD's top-level
/// `spec.validation` when it is the `single` version).
fn validate_version_schema(v: &Value, at: &str, single: bool, out: &mut Vec<Cause>) {
    // apiextensions validates a schema every version shares (a single version's) as the
    // CRD's top-level `spec.validation`, and names it so in its causes.
    let schema_path = if single {
        "spec.validation.openAPIV3Schema".to_string()
    } else {
        format!("{at}.schema.openAPIV3Schema")
    };
    match v.pointer("/schema/openAPIV3Schema") {
        None | Some(Value::Null) => out.push(cause(
            "FieldValueRequired",
            format!("{at}.schema.openAPIV3Schema"),
            "Required value",
        )),
        Some(sch) => out.extend(schema::structural_errors(sch, &schema_path)),
    }
}

/// A version's printer columns: each with a name, a type Table knows and a simple JSON path.
fn validate_printer_columns(v: &Value, at: &str, out: &mut Vec<Cause>) {
    for (j, c) in v
        .get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .enumerate()
    {
        let cat = format!("{at}.additionalPrinterColumns[{j}]");
        for f in ["name", "type", "jsonPath"] {
            if s(c, &format!("/{f}")).is_empty() {
                out.push(cause(
                    "FieldValueRequired",
                    format!("{cat}.{f}"),
                    "Required value",
                ));
            }
        }
        let ty = s(c, "/type");
        if !ty.is_empty() && !matches!(ty, "integer" | "number" | "string" | "boolean" | "date") {
            out.push(cause(
                "FieldValueNotSupported",
                format!("{cat}.type"),
                format!("Unsupported value: {ty:?}: supported values: \"boolean\", \"date\", \"integer\", \"number\", \"string\""),
            ));
        }
        let path = s(c, "/jsonPath");
        if !path.is_empty() && !path.starts_with('.') {
            out.push(cause(
                "FieldValueInvalid",
                format!("{cat}.jsonPath"),
                format!("Invalid value: {path:?}: must be a simple json path starting with ."),
            ));
        }
    }
}

/// A version's scale subresource, when it has one: both replica paths required.
fn validate_scale_paths(v: &Value, at: &str, out: &mut Vec<Cause>) {
    for (f, p) in [
        ("specReplicasPath", "/subresources/scale/specReplicasPath"),
        (
            "statusReplicasPath",
            "/subresources/scale/statusReplicasPath",
        ),
    ] {
        if v.pointer("/subresources/scale")
            .is_some_and(Value::is_object)
            && s(v, p).is_empty()
        {
            out.push(cause(
                "FieldValueRequired",
                format!("{at}.subresources.scale.{f}"),
                "Required value",
            ));
        }
    }
}

/// What serving a (valid) CRD means.
#[derive(Debug, Clone)]
pub struct Served {
    /// One resource per served version, the storage version first.
    pub defs: Vec<ResourceDef>,
    /// The printer columns of each of `defs`, in the same order.
    pub columns: Vec<Vec<Column>>,
}

/// `.spec.replicas` → `/spec/replicas` (the subset of JSONPath CRDs use for scale paths).
fn pointer_of(json_path: &str) -> String {
    json_path
        .split('.')
        .filter(|p| !p.is_empty())
        .map(|p| format!("/{p}"))
        .collect()
}

/// The resources a CRD serves.
pub fn served(crd: &Value) -> Served {
    let group = s(crd, "/spec/group");
    let kind = s(crd, "/spec/names/kind");
    let plural = s(crd, "/spec/names/plural");
    let namespaced = s(crd, "/spec/scope") != "Cluster";
    let strs = |p: &str| -> Vec<String> {
        crd.pointer(p)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default()
    };
    let short_names = strs("/spec/names/shortNames");
    let categories = strs("/spec/names/categories");
    let mut versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
                .collect()
        })
        .unwrap_or_default();
    // The storage version first: it owns the storage slot.
    versions.sort_by_key(|v| v.get("storage").and_then(Value::as_bool) != Some(true));
    let mut out = Served {
        defs: Vec::new(),
        columns: Vec::new(),
    };
    for v in versions {
        let mut def = ResourceDef::new(group, s(v, "/name"), kind, plural, namespaced);
        def.short_names = short_names.clone();
        def.categories = categories.clone();
        if let Some(sch) = v.pointer("/schema/openAPIV3Schema") {
            def.schema = Some(std::sync::Arc::new(sch.clone()));
        }
        out.defs.push(with_subresources(def, v));
        out.columns.push(printer_columns(v));
    }
    out
}

/// `def` with the status and scale subresources that version `v` of a CRD declares.
fn with_subresources(mut def: ResourceDef, v: &Value) -> ResourceDef {
    if v.pointer("/subresources/status")
        .is_some_and(Value::is_object)
    {
        def = def.with_status();
    }
    if let Some(sc) = v.pointer("/subresources/scale").filter(|s| s.is_object()) {
        let selector = match s(sc, "/labelSelectorPath") {
            "" => Vec::new(),
            p => vec![pointer_of(p)],
        };
        def = def.with_scale_def(ScaleDef {
            spec_replicas: pointer_of(s(sc, "/specReplicasPath")),
            status_replicas: pointer_of(s(sc, "/statusReplicasPath")),
            selector,
        });
    }
    def
}

/// The printer columns that version `v` of a CRD declares, each described as kube-apiserver
/// describes it when the CRD does not.
fn printer_columns(v: &Value) -> Vec<Column> {
    v.get("additionalPrinterColumns")
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| Column {
                    name: s(c, "/name").to_string(),
                    type_: s(c, "/type").to_string(),
                    format: s(c, "/format").to_string(),
                    description: match s(c, "/description") {
                        "" => format!(
                            "Custom resource definition column (in JSONPath format): {}",
                            s(c, "/jsonPath")
                        ),
                        d => d.to_string(),
                    },
                    priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                    json_path: s(c, "/jsonPath").to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The status kube-apiserver's controllers give a CRD once it is served (or refused for a
/// name conflict), keeping the transition times of conditions that did not change.
pub fn status(crd: &Value, conflict: Option<&str>, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let old = crd.pointer("/status/conditions").and_then(Value::as_array);
    let since = |ty: &str, st: &str| {
        old.and_then(|cs| {
            cs.iter()
                .find(|c| s(c, "/type") == ty && s(c, "/status") == st)
        })
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(now))
    };
    let conditions = match conflict {
        None => json!([
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": since("NamesAccepted", "True"),
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": since("Established", "True"),
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
        ]),
        Some(why) => json!([
            {"type": "NamesAccepted", "status": "False", "lastTransitionTime": since("NamesAccepted", "False"),
             "reason": "PluralConflict", "message": why},
            {"type": "Established", "status": "False", "lastTransitionTime": since("Established", "False"),
             "reason": "NotAccepted", "message": "not all names are accepted"},
        ]),
    };
    let storage = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        })
        .map(|v| s(v, "/name").to_string())
        .unwrap_or_default();
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !storage.is_empty() && !stored.contains(&json!(storage)) {
        stored.push(json!(storage));
    }
    let accepted = if conflict.is_some() {
        json!({"plural": "", "kind": ""})
    } else {
        names
    };
    json!({"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored})
}

/// Whether `status` is what [`status`] computes (ignoring nothing: it keeps the times).
pub fn status_is_current(crd: &Value, want: &Value) -> bool {
    crd.get("status") == Some(want)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn widget_crd() -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                    "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}})
    }

    #[test]
    fn a_valid_crd_is_defaulted_and_serves_its_versions() {
        let mut crd = widget_crd();
        assert_eq!(admit(&mut crd, None), vec![]);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        let served = served(&crd);
        let d = &served.defs[0];
        assert_eq!(
            (d.group.as_str(), d.version.as_str(), d.plural.as_str()),
            ("example.com", "v1", "widgets")
        );
        assert!(d.namespaced && d.status_subresource);
        assert_eq!(d.short_names, vec!["wd"]);
        let sc = d.scale.clone().unwrap();
        assert_eq!(
            (sc.spec_replicas.as_str(), sc.status_replicas.as_str()),
            ("/spec/replicas", "/status/replicas")
        );
        assert_eq!(sc.selector, vec!["/status/selector"]);
        assert_eq!(served.columns[0][0].json_path, ".spec.size");
    }

    #[test]
    fn the_common_mistakes_are_refused_with_kube_apiserver_wording() {
        let mut crd = widget_crd();
        crd["metadata"]["name"] = json!("widget.example.com");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][0]["schema"] =
            json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {}}}});
        let got: Vec<String> = admit(&mut crd, None)
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(got, vec![
            r#"metadata.name: Invalid value: "widget.example.com": must be spec.names.plural+"."+spec.group"#.to_string(),
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields".into(),
            "spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{...}: must have exactly one version marked as storage version".into(),
        ]);
        let mut crd = widget_crd();
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        let got = admit(&mut crd, None);
        assert_eq!(got[0].field, "spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(got[0].message, "Required value");
    }
}
