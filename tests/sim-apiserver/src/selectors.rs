//! Label selectors (equality- and set-based) and field selectors (`metadata.name`,
//! `metadata.namespace`) as kube-apiserver parses them.

use serde_json::Value;

use crate::shard_selector::ShardSelector;

#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
    GreaterThan(String, i64),
    LessThan(String, i64),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector {
    reqs: Vec<LabelReq>,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter as kube-apiserver does (see
    /// `label_syntax.rs` for the grammar and its error messages).
    pub fn parse(s: &str) -> Result<Self, String> {
        use crate::label_syntax::Op;
        let reqs = crate::label_syntax::parse(s)?
            .into_iter()
            .map(|r| {
                let first = r.values.first().cloned().unwrap_or_default();
                let number = first.parse::<i64>().unwrap_or_default();
                match r.op {
                    Op::Equals => LabelReq::Eq(r.key, first),
                    Op::NotEquals => LabelReq::NotEq(r.key, first),
                    Op::In => LabelReq::In(r.key, r.values),
                    Op::NotIn => LabelReq::NotIn(r.key, r.values),
                    Op::Exists => LabelReq::Exists(r.key),
                    Op::DoesNotExist => LabelReq::NotExists(r.key),
                    Op::GreaterThan => LabelReq::GreaterThan(r.key, number),
                    Op::LessThan => LabelReq::LessThan(r.key, number),
                }
            })
            .collect();
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
            LabelReq::GreaterThan(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x > *n),
            LabelReq::LessThan(k, n) => get(k)
                .and_then(|x| x.parse::<i64>().ok())
                .is_some_and(|x| x < *n),
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
        // kube-apiserver reads the terms in sorted order, so the first it cannot understand
        // is the first in that order.
        let mut parts: Vec<&str> = s.split(',').collect();
        parts.sort_unstable();
        for part in parts {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
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
            // A kind with field conversions of its own refuses what it does not convert in
            // its words; the others in the generic ones. Namespaces have no namespace.
            let generic = ["metadata.name", "metadata.namespace"];
            let known = extra.contains(&field)
                || (generic.contains(&field)
                    && !(kind == "Namespace" && field == "metadata.namespace"));
            if !known {
                return Err(if extra.is_empty() {
                    format!("{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"")
                } else {
                    format!("field label not supported: {field}")
                });
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

/// A label and a field selector together, and the shard selector of a sharded list or watch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selectors {
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector.
    pub fields: FieldSelector,
    /// The shard selector, when the request has one and the server serves it.
    pub shard: Option<ShardSelector>,
}

impl Selectors {
    /// Whether all match.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj)
            && self.fields.matches(obj)
            && self.shard.as_ref().is_none_or(|s| s.matches(obj))
    }

    /// Whether the label and field selectors are both empty (a shard selector aside: it does not
    /// keep kube-apiserver from counting the remaining items of a page).
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
