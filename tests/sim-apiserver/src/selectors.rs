//! Label selectors (equality- and set-based) and field selectors (`metadata.name`,
//! `metadata.namespace`) as kube-apiserver parses them.

use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

fn split_top_level(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_set(rest: &str) -> Option<Vec<String>> {
    let rest = rest.trim();
    let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
    let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if vals.iter().all(|v| valid_value(v)) {
        Some(vals)
    } else {
        None
    }
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for part in split_top_level(s) {
            let p = part.trim();
            let err = || format!("unable to parse requirement: {p:?}");
            let req = if let Some(k) = p.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(err());
                }
                LabelReq::NotExists(k.into())
            } else if let Some((k, v)) = p.split_once("!=") {
                LabelReq::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = p.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), parse_set(rest).ok_or_else(err)?)
            } else if let Some((k, rest)) = p.split_once(" in ") {
                LabelReq::In(k.trim().into(), parse_set(rest).ok_or_else(err)?)
            } else {
                LabelReq::Exists(p.into())
            };
            let ok = match &req {
                LabelReq::Eq(k, v) | LabelReq::NotEq(k, v) => valid_key(k) && valid_value(v),
                LabelReq::In(k, _) | LabelReq::NotIn(k, _) => valid_key(k),
                LabelReq::Exists(k) | LabelReq::NotExists(k) => valid_key(k),
            };
            if !ok {
                return Err(err());
            }
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether the object's `metadata.labels` match.
    pub fn matches(&self, obj: &Value) -> bool {
        // Every watch event of every watcher comes through here: no lookup at all when there is
        // nothing to match, and plain `get`s (`Value::pointer` allocates per path segment).
        if self.reqs.is_empty() {
            return true;
        }
        let labels = obj.get("metadata").and_then(|m| m.get("labels"));
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => !get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
struct FieldReq {
    path: String,
    value: String,
    negate: bool,
}

/// A parsed field selector over `metadata.name` and `metadata.namespace`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<FieldReq>,
}

impl FieldSelector {
    /// Parses the `fieldSelector` query parameter for any kind (`metadata.name`,
    /// `metadata.namespace`).
    pub fn parse(s: &str) -> Result<Self, String> {
        Self::parse_for("", s)
    }

    /// Parses the `fieldSelector` query parameter, also accepting the fields kube-apiserver
    /// supports for `kind` (for pods: `spec.nodeName`, `status.phase`, ...).
    pub fn parse_for(kind: &str, s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for part in s.split(',') {
            let p = part.trim();
            let (k, v, negate) = if let Some((k, v)) = p.split_once("!=") {
                (k, v, true)
            } else if let Some((k, v)) = p.split_once("==") {
                (k, v, false)
            } else if let Some((k, v)) = p.split_once('=') {
                (k, v, false)
            } else {
                return Err(format!("invalid selector: '{s}'; can't understand '{p}'"));
            };
            let field = k.trim();
            let extra: &[&str] = match kind {
                "Pod" => &[
                    "spec.nodeName",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "status.phase",
                    "status.podIP",
                    "status.nominatedNodeName",
                ],
                "Namespace" => &["status.phase"],
                // What `kubectl describe` and `kubectl events --for` select events by.
                "Event" => &[
                    "involvedObject.apiVersion",
                    "involvedObject.fieldPath",
                    "involvedObject.kind",
                    "involvedObject.name",
                    "involvedObject.namespace",
                    "involvedObject.resourceVersion",
                    "involvedObject.uid",
                    "reason",
                    "reportingComponent",
                    "source",
                    "type",
                ],
                _ => &[],
            };
            if !matches!(field, "metadata.name" | "metadata.namespace") && !extra.contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            // An event's `source` field is the component that reported it.
            let path = if kind == "Event" && field == "source" {
                "/source/component".to_string()
            } else {
                format!("/{}", field.replace('.', "/"))
            };
            reqs.push(FieldReq {
                path,
                value: v.trim().into(),
                negate,
            });
        }
        Ok(Self { reqs })
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether the object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|r| {
            let v = obj.pointer(&r.path).and_then(Value::as_str).unwrap_or("");
            (v == r.value) != r.negate
        })
    }
}

/// A label and a field selector together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selectors {
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Whether both match.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// Whether both are empty.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_based_label_selectors_match_like_kubernetes() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "fe"}}});
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&o);
        assert!(m("app=web"));
        assert!(m("app==web,tier"));
        assert!(m("app in (web, db),!missing"));
        assert!(!m("app notin (web)"));
        assert!(!m("app!=web"));
        assert!(LabelSelector::parse("a in (b").is_err());
        assert!(FieldSelector::parse("spec.nodeName=x").is_err());
        let pod = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}});
        assert!(FieldSelector::parse_for("Pod", "spec.nodeName=n1")
            .unwrap()
            .matches(&pod));
        assert!(!FieldSelector::parse_for("Pod", "status.phase=Running")
            .unwrap()
            .matches(&pod));
        assert!(FieldSelector::parse_for("Pod", "status.phase=")
            .unwrap()
            .matches(&pod));
    }

    #[test]
    fn event_fields_select_what_describe_asks_for() {
        let ev = serde_json::json!({
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-1", "namespace": "default", "uid": "u1"},
            "reason": "Probed", "type": "Normal", "source": {"component": "kubelet"}
        });
        let sel = |s: &str| FieldSelector::parse_for("Event", s).unwrap();
        assert!(
            sel("involvedObject.kind=Pod,involvedObject.name=web-1,involvedObject.uid=u1")
                .matches(&ev)
        );
        assert!(sel("source=kubelet,type=Normal,reason=Probed").matches(&ev));
        assert!(!sel("involvedObject.name=other").matches(&ev));
        // A field the event lacks compares as empty, as in kube-apiserver.
        assert!(sel("involvedObject.fieldPath=").matches(&ev));
        assert!(FieldSelector::parse_for("Pod", "involvedObject.name=x").is_err());
    }
}
