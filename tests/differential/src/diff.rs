//! The structural difference of two normalised answers, as a list of places where they differ.
//!
//! A place is a path of object keys and array positions (`/body/items/0/data`). An array whose
//! elements each carry a distinct key (`name`, `metadata.name`, `resource`, `subresource`,
//! `version`, or `type` as conditions do) is compared by key instead (`/body/resources/[name=pods]/verbs`),
//! so that one resource more on one side shows as that resource, not as every later position
//! shifted; a different order of the same keys is one difference of its own at
//! `<array>/(order)`. A watch's events (`/events`) are always compared by position. The paths
//! are what the allowlist of deliberate differences names.

use serde_json::Value;

/// The keys an array's elements may be matched by, tried in order.
const KEYS: [&str; 6] = [
    "name",
    "metadata.name",
    "resource",
    "subresource",
    "version",
    "type",
];

/// One place where two answers differ.
#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    /// Where, from the answer's root.
    pub path: String,
    /// The golden (real) side; `None` when only the other side has it.
    pub golden: Option<Value>,
    /// The compared side; `None` when only the golden side has it.
    pub actual: Option<Value>,
}

/// The differences between `golden` and `actual`.
pub fn diff(golden: &Value, actual: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    walk(String::new(), golden, actual, &mut out);
    out
}

fn walk(path: String, golden: &Value, actual: &Value, out: &mut Vec<Difference>) {
    match (golden, actual) {
        (Value::Object(g), Value::Object(a)) => {
            for (key, gv) in g {
                let child = format!("{path}/{}", escape(key));
                match a.get(key) {
                    Some(av) => walk(child, gv, av, out),
                    None => out.push(Difference {
                        path: child,
                        golden: Some(gv.clone()),
                        actual: None,
                    }),
                }
            }
            for (key, av) in a {
                if !g.contains_key(key) {
                    out.push(Difference {
                        path: format!("{path}/{}", escape(key)),
                        golden: None,
                        actual: Some(av.clone()),
                    });
                }
            }
        }
        // A watch's events are a sequence: their order is what is compared.
        (Value::Array(g), Value::Array(a)) if path == "/events" => positional(&path, g, a, out),
        (Value::Array(g), Value::Array(a)) => match common_key(g, a) {
            Some(key) => keyed(&path, key, g, a, out),
            None => positional(&path, g, a, out),
        },
        _ if golden == actual => {}
        _ => out.push(Difference {
            path,
            golden: Some(golden.clone()),
            actual: Some(actual.clone()),
        }),
    }
}

fn positional(path: &str, g: &[Value], a: &[Value], out: &mut Vec<Difference>) {
    for i in 0..g.len().max(a.len()) {
        let child = format!("{path}/{i}");
        match (g.get(i), a.get(i)) {
            (Some(gv), Some(av)) => walk(child, gv, av, out),
            (gv, av) => out.push(Difference {
                path: child,
                golden: gv.cloned(),
                actual: av.cloned(),
            }),
        }
    }
}

fn keyed(path: &str, key: &str, g: &[Value], a: &[Value], out: &mut Vec<Difference>) {
    let g_keys: Vec<&str> = g.iter().filter_map(|v| key_of(v, key)).collect();
    let a_keys: Vec<&str> = a.iter().filter_map(|v| key_of(v, key)).collect();
    let label = |k: &str| format!("{path}/[{key}={k}]");
    for (k, gv) in g_keys.iter().zip(g) {
        match a_keys.iter().position(|ak| ak == k) {
            Some(i) => walk(label(k), gv, &a[i], out),
            None => out.push(Difference {
                path: label(k),
                golden: Some(gv.clone()),
                actual: None,
            }),
        }
    }
    for (k, av) in a_keys.iter().zip(a) {
        if !g_keys.contains(k) {
            out.push(Difference {
                path: label(k),
                golden: None,
                actual: Some(av.clone()),
            });
        }
    }
    let g_common: Vec<&&str> = g_keys.iter().filter(|k| a_keys.contains(k)).collect();
    let a_common: Vec<&&str> = a_keys.iter().filter(|k| g_keys.contains(k)).collect();
    if g_common != a_common {
        out.push(Difference {
            path: format!("{path}/(order)"),
            golden: Some(g_common.iter().map(|k| Value::from(**k)).collect()),
            actual: Some(a_common.iter().map(|k| Value::from(**k)).collect()),
        });
    }
}

/// The key both arrays' elements carry, each element its own value of it, if any.
fn common_key(g: &[Value], a: &[Value]) -> Option<&'static str> {
    if g.is_empty() || a.is_empty() {
        return None;
    }
    KEYS.into_iter()
        .find(|key| distinct_keys(g, key) && distinct_keys(a, key))
}

fn distinct_keys(items: &[Value], key: &str) -> bool {
    let mut seen = std::collections::BTreeSet::new();
    items
        .iter()
        .all(|v| key_of(v, key).is_some_and(|k| seen.insert(k)))
}

fn key_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    key.split('.')
        .try_fold(value, |v, part| v.get(part))
        .and_then(Value::as_str)
}

/// A key as a path segment: `/` and `~` escaped as in a JSON pointer.
fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn equal_answers_have_no_difference() {
        let v = json!({"a": [1, {"b": null}], "c": "x"});
        assert!(diff(&v, &v).is_empty());
    }

    #[test]
    fn named_elements_are_matched_by_name_and_an_extra_one_is_one_difference() {
        let g = json!({"resources": [{"name": "pods", "verbs": ["get"]}, {"name": "secrets"}]});
        let a = json!({"resources": [{"name": "configmaps"}, {"name": "pods", "verbs": ["list"]}]});
        let paths: Vec<String> = diff(&g, &a).into_iter().map(|d| d.path).collect();
        assert_eq!(
            paths,
            [
                "/resources/[name=pods]/verbs/0",
                "/resources/[name=secrets]",
                "/resources/[name=configmaps]"
            ]
        );
    }

    #[test]
    fn the_same_keys_in_another_order_are_an_order_difference() {
        let g = json!([{"name": "a"}, {"name": "b"}]);
        let a = json!([{"name": "b"}, {"name": "a"}]);
        let d = diff(&g, &a);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "/(order)");
    }

    #[test]
    fn elements_without_distinct_keys_are_compared_by_position() {
        let g = json!([{"type": "ADDED"}, {"type": "ADDED"}]);
        let a = json!([{"type": "ADDED"}]);
        let d = diff(&g, &a);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "/1");
        assert!(d[0].actual.is_none());
    }
}
