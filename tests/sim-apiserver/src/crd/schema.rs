//! Structural schemas (a CustomResourceDefinition's `openAPIV3Schema`): what a write to a custom
//! resource goes through, in kube-apiserver's order — nulls of non-nullable fields pruned,
//! `default`s applied, unknown fields pruned, then validation with kube-apiserver's field errors.
//!
//! The root's `apiVersion`, `kind` and `metadata` are the server's business, not the schema's:
//! they are never pruned nor validated here.

use serde_json::{Map, Value};

/// One validation failure, as a `StatusCause`: reason, field path and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `FieldValueRequired`, `FieldValueInvalid`, `FieldValueTypeInvalid`, ...
    pub reason: &'static str,
    /// The field path (`spec.size`).
    pub field: String,
    /// The message after the field (`Invalid value: "string": spec.size in body must be of
    /// type integer: "string"`).
    pub message: String,
}

/// Deeper nesting than this in an object or a schema is not walked (a hostile document cannot
/// exhaust the stack).
const MAX_DEPTH: usize = 64;

/// Regular expressions larger than this (compiled) are refused.
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// Prunes, defaults and validates `obj` (a whole custom object) against `schema`; the causes
/// of its invalidity, empty when it is valid.
#[cfg(test)]
pub fn admit(schema: &Value, obj: &mut Value) -> Vec<Cause> {
    admit_reporting_unknown(schema, obj).0
}

/// [`admit`], also giving the paths of the unknown fields it pruned (`spec.bogus`), for
/// `fieldValidation`.
pub fn admit_reporting_unknown(schema: &Value, obj: &mut Value) -> (Vec<Cause>, Vec<String>) {
    let Some(root) = obj.as_object_mut() else {
        return (Vec::new(), Vec::new());
    };
    // The server's fields stand aside while the schema walks the rest.
    let mut kept = Map::new();
    for k in ["apiVersion", "kind", "metadata"] {
        if let Some(v) = root.remove(k) {
            kept.insert(k.to_string(), v);
        }
    }
    let mut unknown = Vec::new();
    default_and_prune(schema, obj, "", 0, Some(&mut unknown));
    let mut causes = Vec::new();
    validate(schema, obj, "", 0, &mut causes, true);
    if let Some(root) = obj.as_object_mut() {
        for (k, v) in kept {
            root.insert(k, v);
        }
    }
    (causes, unknown)
}

/// Applies the `default`s of `schema` to `obj` (absent fields, and nulls where null is not
/// allowed), leaving everything else as it is: what kube-apiserver does to an object it reads
/// from storage, so that a default added to a CRD shows on objects written before.
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    let Some(root) = obj.as_object_mut() else {
        return;
    };
    let mut kept = Map::new();
    for k in ["apiVersion", "kind", "metadata"] {
        if let Some(v) = root.remove(k) {
            kept.insert(k.to_string(), v);
        }
    }
    default_and_prune(schema, obj, "", 0, None);
    if let Some(root) = obj.as_object_mut() {
        root.extend(kept);
    }
}

fn flag(schema: &Value, name: &str) -> bool {
    schema.get(name).and_then(Value::as_bool).unwrap_or(false)
}

/// With `pruned`, unknown fields are removed and their paths recorded there.
fn default_and_prune(
    schema: &Value,
    v: &mut Value,
    path: &str,
    depth: usize,
    mut pruned: Option<&mut Vec<String>>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(map) => default_and_prune_object(schema, map, path, depth, pruned),
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    default_and_prune(
                        is,
                        item,
                        &format!("{path}[{i}]"),
                        depth + 1,
                        pruned.as_deref_mut(),
                    );
                }
            }
        }
        _ => {}
    }
}

/// Defaults and prunes one object's fields: its own properties' defaults first, then each field
/// by its property's schema (or `additionalProperties`), unknown ones pruned when asked.
fn default_and_prune_object(
    schema: &Value,
    map: &mut Map<String, Value>,
    path: &str,
    depth: usize,
    mut pruned: Option<&mut Vec<String>>,
) {
    let props = schema.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        default_absent_properties(props, map, pruned.is_some());
    }
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields")
        || schema.get("additionalProperties") == Some(&Value::Bool(true));
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        let sub = props.and_then(|p| p.get(&k)).or(additional);
        match sub {
            Some(s) => {
                if let Some(child_v) = map.get_mut(&k) {
                    let at = match props.and_then(|p| p.get(&k)) {
                        Some(_) => child(path, &k),
                        None => format!("{path}[{k}]"),
                    };
                    default_and_prune(s, child_v, &at, depth + 1, pruned.as_deref_mut());
                }
            }
            None => {
                let server_field =
                    embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                if let Some(p) = pruned.as_deref_mut().filter(|_| !preserve && !server_field) {
                    map.remove(&k);
                    p.push(child(path, &k));
                }
            }
        }
    }
}

/// Sets each property's `default` where the field is absent (or null where null is not
/// allowed); with `prune`, such a null without a default is removed instead.
fn default_absent_properties(
    props: &Map<String, Value>,
    map: &mut Map<String, Value>,
    prune: bool,
) {
    for (name, ps) in props {
        let absent = match map.get(name) {
            None => true,
            Some(Value::Null) => !flag(ps, "nullable"),
            Some(_) => false,
        };
        if absent {
            match ps.get("default") {
                Some(d) => {
                    map.insert(name.clone(), d.clone());
                }
                // A null where null is not allowed is pruned, as kube-apiserver does before
                // defaulting.
                None if prune && map.get(name).is_some_and(Value::is_null) => {
                    map.remove(name);
                }
                None => {}
            }
        }
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_integer(v: &Value) -> bool {
    match v {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

fn fits(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => is_integer(v),
        "number" => v.is_number(),
        _ => true,
    }
}

/// A value as a field error prints it: strings quoted, numbers and booleans plain.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn push(causes: &mut Vec<Cause>, reason: &'static str, field: &str, message: String) {
    causes.push(Cause {
        reason,
        field: field.to_string(),
        message,
    });
}

fn invalid(causes: &mut Vec<Cause>, field: &str, v: &Value, detail: String) {
    push(
        causes,
        "FieldValueInvalid",
        field,
        format!("Invalid value: {}: {detail}", show(v)),
    );
}

fn validate(
    schema: &Value,
    v: &Value,
    path: &str,
    depth: usize,
    causes: &mut Vec<Cause>,
    root: bool,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if v.is_null() && flag(schema, "nullable") {
        return;
    }
    let name = if path.is_empty() { "body" } else { path };
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(is_integer(v) || v.is_string()) {
            let t = type_name(v);
            push(
                causes,
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"{t}\": {name} in body must be of type integer,string: \"{t}\""),
            );
            return;
        }
    } else if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        if !fits(ty, v) {
            let t = type_name(v);
            push(
                causes,
                "FieldValueTypeInvalid",
                path,
                format!("Invalid value: \"{t}\": {name} in body must be of type {ty}: \"{t}\""),
            );
            return;
        }
    }
    check_enum(schema, v, path, causes);
    match v {
        Value::Number(n) => check_number(schema, v, n, path, name, causes),
        Value::String(s) => check_string(schema, v, s, path, name, causes),
        Value::Array(items) => check_array(schema, items, path, name, depth, causes),
        Value::Object(map) => check_object(schema, map, path, name, depth, causes, root),
        _ => {}
    }
}

/// An `enum`'s value not among its options.
fn check_enum(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            let listed: Vec<String> = options
                .iter()
                .map(|o| match o {
                    Value::String(s) => format!("{s:?}"),
                    other => format!("{:?}", other.to_string()),
                })
                .collect();
            push(
                causes,
                "FieldValueNotSupported",
                path,
                format!(
                    "Unsupported value: {}: supported values: {}",
                    show(v),
                    listed.join(", ")
                ),
            );
        }
    }
}

/// A number's `minimum` and `maximum` (and their exclusive forms).
fn check_number(
    schema: &Value,
    v: &Value,
    n: &serde_json::Number,
    path: &str,
    name: &str,
    causes: &mut Vec<Cause>,
) {
    let x = n.as_f64().unwrap_or(0.0);
    let show_bound = |b: &Value| b.to_string();
    if let Some(min) = schema.get("minimum").filter(|m| m.is_number()) {
        let m = min.as_f64().unwrap_or(f64::MIN);
        if flag(schema, "exclusiveMinimum") && x <= m {
            invalid(
                causes,
                path,
                v,
                format!("{name} in body should be greater than {}", show_bound(min)),
            );
        } else if x < m {
            invalid(
                causes,
                path,
                v,
                format!(
                    "{name} in body should be greater than or equal to {}",
                    show_bound(min)
                ),
            );
        }
    }
    if let Some(max) = schema.get("maximum").filter(|m| m.is_number()) {
        let m = max.as_f64().unwrap_or(f64::MAX);
        if flag(schema, "exclusiveMaximum") && x >= m {
            invalid(
                causes,
                path,
                v,
                format!("{name} in body should be less than {}", show_bound(max)),
            );
        } else if x > m {
            invalid(
                causes,
                path,
                v,
                format!(
                    "{name} in body should be less than or equal to {}",
                    show_bound(max)
                ),
            );
        }
    }
}

/// A string's `minLength`, `maxLength` and `pattern`.
fn check_string(
    schema: &Value,
    v: &Value,
    s: &str,
    path: &str,
    name: &str,
    causes: &mut Vec<Cause>,
) {
    let len = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64) {
        if len < min {
            invalid(
                causes,
                path,
                v,
                format!("{name} in body should be at least {min} chars long"),
            );
        }
    }
    let too_long = schema
        .get("maxLength")
        .and_then(Value::as_u64)
        .filter(|max| len > *max);
    if let Some(max) = too_long {
        push(
            causes,
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} bytes"),
        );
    }
    // kube-apiserver does not match a pattern against a string already too long.
    if let Some(p) = schema
        .get("pattern")
        .and_then(Value::as_str)
        .filter(|_| too_long.is_none())
    {
        if let Some(re) = compile(p) {
            if !re.is_match(s) {
                invalid(
                    causes,
                    path,
                    v,
                    format!("{name} in body should match '{p}'"),
                );
            }
        }
    }
}

/// An array's `minItems` and `maxItems`, then each item against `items`.
fn check_array(
    schema: &Value,
    items: &[Value],
    path: &str,
    name: &str,
    depth: usize,
    causes: &mut Vec<Cause>,
) {
    let n = items.len() as u64;
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
        if n < min {
            invalid(
                causes,
                path,
                &Value::from(n),
                format!("{name} in body should have at least {min} items"),
            );
        }
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
        if n > max {
            push(
                causes,
                "FieldValueTooMany",
                path,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
    }
    if let Some(is) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate(is, item, &format!("{path}[{i}]"), depth + 1, causes, false);
        }
    }
}

/// An object's `minProperties`, `maxProperties`, `required` (the root's server fields aside)
/// and an embedded resource's `apiVersion` and `kind`, then each property against its schema.
fn check_object(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    name: &str,
    depth: usize,
    causes: &mut Vec<Cause>,
    root: bool,
) {
    let n = map.len() as u64;
    if let Some(min) = schema.get("minProperties").and_then(Value::as_u64) {
        if n < min {
            invalid(
                causes,
                path,
                &Value::from(n),
                format!("{name} in body should have at least {min} properties"),
            );
        }
    }
    if let Some(max) = schema.get("maxProperties").and_then(Value::as_u64) {
        if n > max {
            push(
                causes,
                "FieldValueTooMany",
                path,
                format!("Too many: {n}: must have at most {max} items"),
            );
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for r in required.iter().filter_map(Value::as_str) {
            // The root's server fields are checked elsewhere.
            if root && matches!(r, "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if !map.contains_key(r) {
                push(
                    causes,
                    "FieldValueRequired",
                    &child(path, r),
                    "Required value".into(),
                );
            }
        }
    }
    if flag(schema, "x-kubernetes-embedded-resource") {
        for k in ["apiVersion", "kind"] {
            let empty = map.get(k).and_then(Value::as_str).is_none_or(str::is_empty);
            if empty {
                push(
                    causes,
                    "FieldValueRequired",
                    &child(path, k),
                    "Required value: must not be empty".into(),
                );
            }
        }
    }
    let props = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (k, val) in map {
        if let Some(ps) = props.and_then(|p| p.get(k)) {
            validate(ps, val, &child(path, k), depth + 1, causes, false);
        } else if let Some(a) = additional {
            validate(a, val, &format!("{path}[{k}]"), depth + 1, causes, false);
        }
    }
}

fn compile(pattern: &str) -> Option<regex::Regex> {
    regex::RegexBuilder::new(pattern)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
        .ok()
}

/// Why `schema` (at `path`, e.g. `spec.versions[0].schema.openAPIV3Schema`) is not a
/// structural schema kube-apiserver accepts for a v1 CustomResourceDefinition: every level
/// has a `type` (unless it preserves unknown fields or is int-or-string), the root is an
/// object, no `$ref`, no `properties` beside `additionalProperties`, valid patterns.
pub fn structural_errors(schema: &Value, path: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    structural(schema, path, Level::Root, 0, &mut out);
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn structural(s: &Value, path: &str, level: Level, depth: usize, out: &mut Vec<Cause>) {
    if depth > MAX_DEPTH {
        push(
            out,
            "FieldValueForbidden",
            path,
            format!("Forbidden: nested deeper than {MAX_DEPTH} levels"),
        );
        return;
    }
    let Some(m) = s.as_object() else {
        push(
            out,
            "FieldValueInvalid",
            path,
            format!("Invalid value: {}: must be an object", show(s)),
        );
        return;
    };
    let ty = m.get("type").and_then(Value::as_str).unwrap_or("");
    if m.contains_key("$ref") {
        push(
            out,
            "FieldValueForbidden",
            &format!("{path}.$ref"),
            "Forbidden: $ref is not supported".into(),
        );
    }
    structural_type(s, ty, path, level, out);
    if m.contains_key("properties") && m.contains_key("additionalProperties") {
        push(
            out,
            "FieldValueForbidden",
            &format!("{path}.additionalProperties"),
            "Forbidden: additionalProperties and properties are mutual exclusive".into(),
        );
    }
    default_and_pattern(s, m, path, depth, out);
    structural_children(m, ty, path, depth, out);
}

/// The `type` of one level: required unless it is int-or-string or preserves unknown fields,
/// `object` at the root, one of OpenAPI's.
fn structural_type(s: &Value, ty: &str, path: &str, level: Level, out: &mut Vec<Cause>) {
    if ty.is_empty()
        && !flag(s, "x-kubernetes-int-or-string")
        && !flag(s, "x-kubernetes-preserve-unknown-fields")
    {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        push(
            out,
            "FieldValueRequired",
            &format!("{path}.type"),
            format!("Required value: {detail}"),
        );
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        push(
            out,
            "FieldValueInvalid",
            &format!("{path}.type"),
            format!("Invalid value: {ty:?}: must be object at the root"),
        );
    }
    if !matches!(
        ty,
        "" | "object" | "array" | "string" | "integer" | "number" | "boolean"
    ) {
        push(
            out,
            "FieldValueNotSupported",
            &format!("{path}.type"),
            format!("Unsupported value: {ty:?}: supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""),
        );
    }
}

/// The level's `default`, which its own schema must accept, and its `pattern`, which must
/// compile.
fn default_and_pattern(
    s: &Value,
    m: &Map<String, Value>,
    path: &str,
    depth: usize,
    out: &mut Vec<Cause>,
) {
    if let Some(d) = m.get("default") {
        // A default its own schema refuses would make every write fail: refused up front.
        // Checked as a write would be: with the defaults inside it applied first.
        let mut d = d.clone();
        default_and_prune(s, &mut d, "", depth, None);
        validate(s, &d, &format!("{path}.default"), depth, out, false);
    }
    if let Some(p) = m.get("pattern").and_then(Value::as_str) {
        if compile(p).is_none() {
            push(
                out,
                "FieldValueInvalid",
                &format!("{path}.pattern"),
                format!("Invalid value: {p:?}: must be a valid regular expression"),
            );
        }
    }
}

/// The levels below this one, each checked in turn: `properties`, `items` (required for an
/// array) and an object `additionalProperties`.
fn structural_children(
    m: &Map<String, Value>,
    ty: &str,
    path: &str,
    depth: usize,
    out: &mut Vec<Cause>,
) {
    if let Some(props) = m.get("properties") {
        match props.as_object() {
            Some(props) => {
                for (k, ps) in props {
                    structural(
                        ps,
                        &format!("{path}.properties[{k}]"),
                        Level::Field,
                        depth + 1,
                        out,
                    );
                }
            }
            None => push(
                out,
                "FieldValueInvalid",
                &format!("{path}.properties"),
                "Invalid value: must be an object".into(),
            ),
        }
    }
    if let Some(items) = m.get("items") {
        structural(items, &format!("{path}.items"), Level::Item, depth + 1, out);
    } else if ty == "array" {
        push(
            out,
            "FieldValueRequired",
            &format!("{path}.items"),
            "Required value: must be specified".into(),
        );
    }
    if let Some(a) = m.get("additionalProperties").filter(|a| a.is_object()) {
        structural(
            a,
            &format!("{path}.additionalProperties"),
            Level::Field,
            depth + 1,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn widget_schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                "tags": {"type": "array", "maxItems": 2, "minItems": 1, "items": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "maybe": {"type": "string", "nullable": true},
                "nested": {"type": "object", "default": {}, "properties": {
                    "depth": {"type": "integer", "default": 3}}},
            }},
            "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
        }})
    }

    fn messages(c: &[Cause]) -> Vec<String> {
        c.iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_wrong_type_is_worded_as_kube_apiserver_words_it() {
        let mut o = json!({"kind": "Widget", "spec": {"size": "string"}});
        let c = admit(&widget_schema(), &mut o);
        assert_eq!(
            messages(&c),
            vec![
                r#"spec.size: Invalid value: "string": spec.size in body must be of type integer: "string""#
            ]
        );
        assert_eq!(c[0].reason, "FieldValueTypeInvalid");
    }

    #[test]
    fn each_keyword_has_its_message() {
        let mut o = json!({"spec": {"size": 11, "color": "green", "name": "A", "tags": ["a", "b", "c"], "port": true}});
        let got = messages(&admit(&widget_schema(), &mut o));
        for want in [
            "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
            r#"spec.color: Unsupported value: "green": supported values: "red", "blue""#,
            r#"spec.name: Invalid value: "A": spec.name in body should be at least 2 chars long"#,
            r#"spec.name: Invalid value: "A": spec.name in body should match '^[a-z]+$'"#,
            "spec.tags: Too many: 3: must have at most 2 items",
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#,
        ] {
            assert!(got.contains(&want.to_string()), "{want}\n{got:#?}");
        }
        let mut o = json!({"spec": {}});
        assert_eq!(
            messages(&admit(&widget_schema(), &mut o)),
            vec!["spec.size: Required value"]
        );
    }

    #[test]
    fn unknown_fields_are_pruned_defaults_applied_nulls_kept_only_where_nullable() {
        let mut o = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": {"size": 2, "bogus": 1, "extra": {"anything": {"goes": 1}}, "maybe": null, "name": null},
            "top": 1});
        assert!(admit(&widget_schema(), &mut o).is_empty());
        assert_eq!(
            o,
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
                "spec": {"size": 2, "color": "red", "extra": {"anything": {"goes": 1}}, "maybe": null,
                    "nested": {"depth": 3}}})
        );
    }

    #[test]
    fn pruned_fields_are_reported_by_path() {
        let mut o = json!({"spec": {"size": 2, "bogus": 1, "tags": ["a"], "extra": {"x": 1}}, "top": {"a": 1}});
        let (causes, unknown) = admit_reporting_unknown(&widget_schema(), &mut o);
        assert!(causes.is_empty());
        assert_eq!(unknown, vec!["spec.bogus", "top"]);
    }

    #[test]
    fn int_or_string_takes_both_and_embedded_resources_need_their_type() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "port": {"x-kubernetes-int-or-string": true},
            "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                "x-kubernetes-preserve-unknown-fields": true}}}}});
        for port in [json!(80), json!("http")] {
            let mut o = json!({"spec": {"port": port, "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}}});
            assert!(admit(&schema, &mut o).is_empty());
            assert_eq!(o["spec"]["template"]["metadata"]["name"], "x");
        }
        let mut o = json!({"spec": {"template": {"metadata": {}}}});
        assert_eq!(
            messages(&admit(&schema, &mut o)),
            vec![
                "spec.template.apiVersion: Required value: must not be empty",
                "spec.template.kind: Required value: must not be empty"
            ]
        );
    }

    #[test]
    fn structural_schemas_need_types_and_an_object_root() {
        let p = "spec.versions[0].schema.openAPIV3Schema";
        assert!(structural_errors(&widget_schema(), p).is_empty());
        let bad = json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}, "l": {"type": "array"}}});
        assert_eq!(
            messages(&structural_errors(&bad, p)),
            vec![
                format!("{p}.properties[l].items: Required value: must be specified"),
                format!("{p}.properties[spec].type: Required value: must not be empty for specified object fields"),
            ]
        );
        let root = json!({"type": "string"});
        assert_eq!(
            messages(&structural_errors(&root, p)),
            vec![format!(
                "{p}.type: Invalid value: \"string\": must be object at the root"
            )]
        );
        let hostile = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(unclosed"}}});
        assert_eq!(structural_errors(&hostile, p).len(), 1);
        let bad_default =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": "x"}}});
        assert_eq!(
            messages(&structural_errors(&bad_default, p)),
            vec![format!(
                "{p}.properties[n].default: Invalid value: \"string\": {p}.properties[n].default in body must be of type integer: \"string\""
            )]
        );
    }
}
