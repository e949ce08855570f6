//! JSON patch (RFC 6902, `application/json-patch+json`) with JSON pointers (RFC 6901).
//!
//! Operations `add`, `remove`, `replace`, `move`, `copy` and `test`; pointers unescape `~1` to
//! `/` and `~0` to `~`; `-` as the last token of `add` (or of a `move`/`copy` target) appends to
//! an array; a `replace` of a key an object lacks adds it, as the library kube-apiserver uses
//! does. Errors come in two kinds, as kube-apiserver answers them: a document that is not a
//! patch ([`JsonPatchError::Malformed`], 400 BadRequest) and a patch that cannot be applied to
//! the object — a failed `test`, a missing path, an index out of range, an unknown `op`
//! ([`JsonPatchError::Unapplicable`], 422 Invalid, whose Status says only kube-apiserver's
//! `the server rejected our request due to an error in our request`, with empty `details`).

use serde_json::Value;

/// Why a JSON patch was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonPatchError {
    /// The document is not a JSON patch (not an array of operations, an unknown `op`, a
    /// missing `path`/`value`/`from`, a pointer not starting with `/`).
    Malformed(String),
    /// The patch is well formed but cannot be applied to this object.
    Unapplicable(String),
}

impl std::fmt::Display for JsonPatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsonPatchError::Malformed(m) | JsonPatchError::Unapplicable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for JsonPatchError {}

/// Splits a JSON pointer into unescaped tokens (`""` is the whole document).
pub fn parse_pointer(p: &str) -> Result<Vec<String>, JsonPatchError> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = p.strip_prefix('/') else {
        return Err(JsonPatchError::Malformed(format!(
            "invalid JSON pointer {p:?}: it must be empty or start with '/'"
        )));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn index(tok: &str, len: usize, allow_end: bool) -> Result<usize, JsonPatchError> {
    if allow_end && tok == "-" {
        return Ok(len);
    }
    let bad = || JsonPatchError::Unapplicable(format!("invalid array index {tok:?}"));
    if tok.is_empty() || (tok.len() > 1 && tok.starts_with('0')) {
        return Err(bad());
    }
    let i: usize = tok.parse().map_err(|_| bad())?;
    let max = if allow_end {
        len
    } else {
        len.saturating_sub(1)
    };
    if i > max || (!allow_end && len == 0) {
        return Err(JsonPatchError::Unapplicable(format!(
            "index {i} is out of bounds (array length {len})"
        )));
    }
    Ok(i)
}

fn missing(path: &[String]) -> JsonPatchError {
    JsonPatchError::Unapplicable(format!(
        "doc is missing path: \"/{}\"",
        path.iter()
            .map(|t| t.replace('~', "~0").replace('/', "~1"))
            .collect::<Vec<_>>()
            .join("/")
    ))
}

/// The value at `path`.
fn get<'a>(doc: &'a Value, path: &[String]) -> Result<&'a Value, JsonPatchError> {
    let mut cur = doc;
    for tok in path {
        cur = match cur {
            Value::Object(m) => m.get(tok).ok_or_else(|| missing(path))?,
            Value::Array(a) => &a[index(tok, a.len(), false).map_err(|_| missing(path))?],
            _ => return Err(missing(path)),
        };
    }
    Ok(cur)
}

fn parent_mut<'a>(doc: &'a mut Value, path: &[String]) -> Result<&'a mut Value, JsonPatchError> {
    let mut cur = doc;
    for tok in &path[..path.len() - 1] {
        cur = match cur {
            Value::Object(m) => m.get_mut(tok).ok_or_else(|| missing(path))?,
            Value::Array(a) => {
                let i = index(tok, a.len(), false).map_err(|_| missing(path))?;
                &mut a[i]
            }
            _ => return Err(missing(path)),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &[String], v: Value) -> Result<(), JsonPatchError> {
    let Some(last) = path.last() else {
        *doc = v;
        return Ok(());
    };
    match parent_mut(doc, path)? {
        Value::Object(m) => {
            m.insert(last.clone(), v);
        }
        Value::Array(a) => {
            let i = index(last, a.len(), true)?;
            a.insert(i, v);
        }
        _ => return Err(missing(path)),
    }
    Ok(())
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, JsonPatchError> {
    let Some(last) = path.last() else {
        return Err(JsonPatchError::Unapplicable(
            "cannot remove the whole document".into(),
        ));
    };
    match parent_mut(doc, path)? {
        Value::Object(m) => m.remove(last).ok_or_else(|| missing(path)),
        Value::Array(a) => {
            let i = index(last, a.len(), false).map_err(|_| missing(path))?;
            Ok(a.remove(i))
        }
        _ => Err(missing(path)),
    }
}

fn field<'a>(op: &'a Value, name: &str, n: usize) -> Result<&'a Value, JsonPatchError> {
    op.get(name).ok_or_else(|| {
        JsonPatchError::Malformed(format!("operation {n} is missing the {name:?} field"))
    })
}

fn pointer_field(op: &Value, name: &str, n: usize) -> Result<Vec<String>, JsonPatchError> {
    match field(op, name, n)? {
        Value::String(s) => parse_pointer(s),
        _ => Err(JsonPatchError::Malformed(format!(
            "operation {n}: {name:?} is not a string"
        ))),
    }
}

/// Checks that `patch` is a JSON patch document (an array of well-formed operations).
pub fn validate(patch: &Value) -> Result<(), JsonPatchError> {
    let Value::Array(ops) = patch else {
        return Err(JsonPatchError::Malformed(format!(
            "error decoding patch: json: cannot unmarshal {} into Go value of type []handlers.jsonPatchOp",
            crate::go_json::type_name(patch)
        )));
    };
    for (n, op) in ops.iter().enumerate() {
        if !op.is_object() {
            return Err(JsonPatchError::Malformed(format!(
                "operation {n} is not an object"
            )));
        }
        let name = field(op, "op", n)?.as_str().unwrap_or("");
        pointer_field(op, "path", n)?;
        match name {
            "add" | "replace" | "test" => {
                field(op, "value", n)?;
            }
            "remove" => {}
            "move" | "copy" => {
                pointer_field(op, "from", n)?;
            }
            // kube-apiserver decodes the document before it looks at the operations: an
            // operation it does not know fails as the patch is applied, a 422.
            other => {
                return Err(JsonPatchError::Unapplicable(format!(
                    "unexpected kind of operation {other:?} in operation {n}"
                )))
            }
        }
    }
    Ok(())
}

/// Applies an RFC 6902 patch to `doc` (all or nothing: on error `doc` is unchanged).
pub fn apply_json_patch(doc: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    validate(patch)?;
    let mut out = doc.clone();
    for (n, op) in patch.as_array().into_iter().flatten().enumerate() {
        let path = pointer_field(op, "path", n)?;
        match op["op"].as_str().unwrap_or("") {
            "add" => add(&mut out, &path, op["value"].clone())?,
            "remove" => {
                remove(&mut out, &path)?;
            }
            "replace" => {
                if path.is_empty() {
                    out = op["value"].clone();
                } else if get(&out, &path).is_ok() {
                    remove(&mut out, &path)?;
                    add(&mut out, &path, op["value"].clone())?;
                } else if parent_mut(&mut out, &path).is_ok_and(|p| p.is_object()) {
                    // The JSON-patch library kube-apiserver uses replaces a key an object
                    // lacks by adding it (RFC 6902 would refuse).
                    add(&mut out, &path, op["value"].clone())?;
                } else {
                    return Err(missing(&path));
                }
            }
            "move" => {
                let from = pointer_field(op, "from", n)?;
                if path.len() > from.len() && path[..from.len()] == from[..] {
                    return Err(JsonPatchError::Unapplicable(format!(
                        "operation {n}: cannot move a value into one of its children"
                    )));
                }
                let v = remove(&mut out, &from)?;
                add(&mut out, &path, v)?;
            }
            "copy" => {
                let from = pointer_field(op, "from", n)?;
                let v = get(&out, &from)?.clone();
                add(&mut out, &path, v)?;
            }
            "test" => {
                let have = get(&out, &path)?;
                if *have != op["value"] {
                    // The wording of the JSON-patch library kube-apiserver uses.
                    return Err(JsonPatchError::Unapplicable(format!(
                        "testing value {} failed: test failed",
                        op["path"].as_str().unwrap_or("")
                    )));
                }
            }
            _ => unreachable!("validated"),
        }
    }
    *doc = out;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rfc6902_operations_with_escapes_and_append() {
        let mut d = json!({"a/b": 1, "m~n": [1, 2], "o": {"x": 1}});
        let p = json!([
            {"op": "test", "path": "/a~1b", "value": 1},
            {"op": "add", "path": "/m~0n/-", "value": 3},
            {"op": "add", "path": "/m~0n/0", "value": 0},
            {"op": "replace", "path": "/o/x", "value": 2},
            {"op": "copy", "from": "/o", "path": "/c"},
            {"op": "move", "from": "/a~1b", "path": "/o/y"},
            {"op": "remove", "path": "/c/x"},
        ]);
        apply_json_patch(&mut d, &p).unwrap();
        assert_eq!(
            d,
            json!({"m~n": [0, 1, 2, 3], "o": {"x": 2, "y": 1}, "c": {}})
        );
    }

    #[test]
    fn errors_are_malformed_or_unapplicable_and_leave_the_document_alone() {
        let mut d = json!({"a": 1});
        let unapplicable = [
            json!([{"op": "test", "path": "/a", "value": 2}]),
            json!([{"op": "replace", "path": "/b/c", "value": 2}]),
            json!([{"op": "frobnicate", "path": "/a"}]),
            json!([{"op": "remove", "path": "/b"}]),
            json!([{"op": "add", "path": "/x/y", "value": 2}]),
            json!([{"op": "add", "path": "/a", "value": 5}, {"op": "test", "path": "/a", "value": 1}]),
        ];
        for p in unapplicable {
            assert!(matches!(
                apply_json_patch(&mut d, &p),
                Err(JsonPatchError::Unapplicable(_))
            ));
        }
        let malformed = [
            json!({"op": "add"}),
            json!([{"op": "add", "path": "/a"}]),
            json!([{"op": "add", "path": "a", "value": 1}]),
            json!([{"op": "move", "path": "/a"}]),
        ];
        for p in malformed {
            assert!(matches!(
                apply_json_patch(&mut d, &p),
                Err(JsonPatchError::Malformed(_))
            ));
        }
        assert_eq!(d, json!({"a": 1}));
        // A replace of a key the object lacks adds it, as kube-apiserver's library does.
        apply_json_patch(
            &mut d,
            &json!([{"op": "replace", "path": "/b", "value": 2}]),
        )
        .unwrap();
        assert_eq!(d, json!({"a": 1, "b": 2}));
    }
}
