//! Unknown fields of built-in kinds: kube-apiserver decodes a built-in object into its Go type,
//! which keeps only the fields it has, and tells the client what it dropped (a `Warning` each,
//! or with `fieldValidation=Strict` a 400 `strict decoding error`). So does the simulator for
//! writes over HTTP, by the kinds' OpenAPI definitions ([`crate::openapi`], generated from a
//! Kubernetes release at least as new as the one the simulator plays): a field the definition
//! names is kept, any other is dropped and reported by its path (`spec.x`). Where a definition
//! does not describe an object's fields (`fieldsV1`, raw extensions), nothing is dropped.

use serde_json::{Map, Value};

use crate::resources::ResourceDef;

/// How deep `$ref`s and nesting are followed (Kubernetes' kinds are far shallower).
const MAX_DEPTH: usize = 64;

/// Drops the fields of `obj` (an object of the built-in `def`) its definition does not name;
/// returns their paths, in the order met. Kinds without a definition are left alone.
pub(crate) fn prune(def: &ResourceDef, obj: &mut Value) -> Vec<String> {
    let Some(name) = crate::openapi::builtin_definition(def, None) else {
        return Vec::new();
    };
    let defs = crate::openapi::definitions();
    let Some(schema) = defs.get(name) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    walk(schema, defs, obj, "", 0, &mut out);
    out
}

/// The node `schema` points to, through `$ref`s.
fn resolve<'a>(mut schema: &'a Value, defs: &'a Map<String, Value>) -> &'a Value {
    for _ in 0..MAX_DEPTH {
        let Some(r) = schema.get("$ref").and_then(Value::as_str) else {
            return schema;
        };
        let name = r.rsplit('/').next().unwrap_or(r);
        match defs.get(name) {
            Some(next) => schema = next,
            None => return schema,
        }
    }
    schema
}

fn walk(
    schema: &Value,
    defs: &Map<String, Value>,
    v: &mut Value,
    path: &str,
    depth: usize,
    out: &mut Vec<String>,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let schema = resolve(schema, defs);
    match v {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if props.is_none() && additional.is_none() {
                // Not described field by field (fieldsV1, a raw extension): kept whole.
                return;
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let sub = props.and_then(|p| p.get(&k)).or(additional);
                match sub {
                    Some(s) => {
                        let at = if props.is_some_and(|p| p.contains_key(&k)) {
                            child(path, &k)
                        } else {
                            format!("{path}[{k}]")
                        };
                        if let Some(cv) = map.get_mut(&k) {
                            walk(s, defs, cv, &at, depth + 1, out);
                        }
                    }
                    None => {
                        map.remove(&k);
                        out.push(child(path, &k));
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(is, defs, item, &format!("{path}[{i}]"), depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_dropped_and_named_known_ones_kept() {
        let cm = ResourceDef::new("", "v1", "ConfigMap", "configmaps", true);
        let mut o = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"x": "y"}, "bogus": 1,
                "managedFields": [{"manager": "m", "fieldsV1": {"f:data": {"f:k": {}}}}]},
            "data": {"k": "v"}, "spec": {"x": 1}});
        assert_eq!(prune(&cm, &mut o), ["metadata.bogus", "spec"]);
        assert_eq!(o["data"]["k"], "v");
        assert_eq!(o["metadata"]["labels"]["x"], "y");
        assert_eq!(
            o["metadata"]["managedFields"][0]["fieldsV1"]["f:data"]["f:k"],
            json!({})
        );
        let pod = ResourceDef::new("", "v1", "Pod", "pods", true);
        let mut p = json!({"spec": {"containers": [{"name": "c", "image": "x", "colour": "red",
            "resources": {"limits": {"cpu": "1"}}}]}});
        assert_eq!(prune(&pod, &mut p), ["spec.containers[0].colour"]);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["limits"]["cpu"],
            "1"
        );
    }
}
