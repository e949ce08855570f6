//! JSON patch (RFC 6902, `application/json-patch+json`), applied by the `json-patch` crate, with
//! what kube-apiserver answers around it.
//!
//! The crate applies the operations (`add`, `remove`, `replace`, `move`, `copy`, `test`, JSON
//! pointers with `~0`/`~1` escapes, `-` to append); this module keeps the two things it does
//! not do as kube-apiserver does:
//!
//! - which refusals are which. A document that is not a patch ([`JsonPatchError::Malformed`],
//!   400 BadRequest: not an array of operations, a missing `path`/`value`/`from`, a pointer not
//!   starting with `/`), with Go's words where the differential corpus holds them, against a
//!   patch that cannot be applied to the object ([`JsonPatchError::Unapplicable`], 422 Invalid,
//!   whose Status says only `the server rejected our request due to an error in our request`,
//!   with empty `details`: a failed `test`, a missing path, an index out of range, and an
//!   unknown `op`, since kube-apiserver decodes the document before it looks at the operations).
//!   The crate's own errors are serde's and its own words, so the check runs first, on the
//!   document as sent;
//! - a `replace` of a key an object lacks adds it, as the library kube-apiserver uses does (RFC
//!   6902, and the crate, would refuse).

use json_patch::{AddOperation, PatchOperation};
use serde_json::Value;

/// Why a JSON patch was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonPatchError {
    /// The document is not a JSON patch (not an array of operations, a missing
    /// `path`/`value`/`from`, a pointer not starting with `/`).
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

fn field<'a>(op: &'a Value, name: &str, n: usize) -> Result<&'a Value, JsonPatchError> {
    op.get(name).ok_or_else(|| {
        JsonPatchError::Malformed(format!("operation {n} is missing the {name:?} field"))
    })
}

fn pointer_field(op: &Value, name: &str, n: usize) -> Result<(), JsonPatchError> {
    match field(op, name, n)? {
        Value::String(p) if p.is_empty() || p.starts_with('/') => Ok(()),
        Value::String(p) => Err(JsonPatchError::Malformed(format!(
            "invalid JSON pointer {p:?}: it must be empty or start with '/'"
        ))),
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
            other => {
                return Err(JsonPatchError::Unapplicable(format!(
                    "unexpected kind of operation {other:?} in operation {n}"
                )))
            }
        }
    }
    Ok(())
}

/// `op`, or an `add` where it replaces a key that `doc`'s object at its parent lacks.
fn replace_of_a_missing_key_adds_it(doc: &Value, op: PatchOperation) -> PatchOperation {
    let PatchOperation::Replace(replace) = op else {
        return op;
    };
    let path = replace.path.as_str();
    let parent_is_object = path
        .rfind('/')
        .and_then(|slash| doc.pointer(&path[..slash]))
        .is_some_and(Value::is_object);
    if doc.pointer(path).is_none() && parent_is_object {
        PatchOperation::Add(AddOperation {
            path: replace.path,
            value: replace.value,
        })
    } else {
        PatchOperation::Replace(replace)
    }
}

/// Applies an RFC 6902 patch to `doc` (all or nothing: on error `doc` is unchanged).
pub fn apply_json_patch(doc: &mut Value, patch: &Value) -> Result<(), JsonPatchError> {
    validate(patch)?;
    let json_patch::Patch(ops) = serde_json::from_value(patch.clone())
        .map_err(|e| JsonPatchError::Malformed(format!("error decoding patch: {e}")))?;
    let mut out = doc.clone();
    for op in ops {
        // One at a time: whether a key is missing depends on the operations before.
        let op = replace_of_a_missing_key_adds_it(&out, op);
        json_patch::patch(&mut out, std::slice::from_ref(&op))
            .map_err(|e| JsonPatchError::Unapplicable(e.to_string()))?;
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

    #[test]
    fn a_replace_adds_a_key_that_an_earlier_operation_removed_but_not_under_a_missing_parent() {
        let mut d = json!({"a": 1, "list": [{"x": 1}]});
        apply_json_patch(
            &mut d,
            &json!([
                {"op": "remove", "path": "/a"},
                {"op": "replace", "path": "/a", "value": 2},
                {"op": "replace", "path": "/list/0/y", "value": 3},
            ]),
        )
        .unwrap();
        assert_eq!(d, json!({"a": 2, "list": [{"x": 1, "y": 3}]}));
        for p in [
            json!([{"op": "replace", "path": "/list/1", "value": 0}]),
            json!([{"op": "replace", "path": "/nope/y", "value": 0}]),
        ] {
            assert!(matches!(
                apply_json_patch(&mut d, &p),
                Err(JsonPatchError::Unapplicable(_))
            ));
        }
    }
}
