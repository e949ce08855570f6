//! Defaulting of built-in kinds on writes through the API, as kube-apiserver fills fields a
//! client left out (so that `kubectl describe deployment` shows a `StrategyType`, and a
//! controller reading back what it wrote sees what a real cluster would give it).
//!
//! Only absent fields are filled; a value the client sent is kept. Applied to the object a
//! create, update, patch or server-side apply is about to store (dry runs included), not to
//! what the test API ([`SimServer::create`](crate::SimServer::create)) stores.
//!
//! What is filled:
//!
//! | kind | fields |
//! |---|---|
//! | `Pod` (and every pod template) | `spec.restartPolicy` `Always`, `spec.dnsPolicy` `ClusterFirst`, `spec.schedulerName` `default-scheduler`, `spec.terminationGracePeriodSeconds` 30, `spec.securityContext` `{}`; each container's (and init container's) `imagePullPolicy` (`Always` for a `:latest` or untagged image, else `IfNotPresent`), `terminationMessagePath` `/dev/termination-log`, `terminationMessagePolicy` `File`, `resources` `{}` and each port's `protocol` `TCP` |
//! | `Pod` alone | `spec.enableServiceLinks` true; what kube-apiserver's default admission plugins add: `spec.priority` 0, `spec.preemptionPolicy` `PreemptLowerPriority`, the `NoExecute` tolerations of `node.kubernetes.io/not-ready` and `unreachable` for 300 s; `status.podIPs` from `status.podIP` |
//! | `apps/v1` `Deployment` | `spec.replicas` 1, `spec.strategy` `RollingUpdate` with `maxUnavailable`/`maxSurge` `25%`, `spec.revisionHistoryLimit` 10, `spec.progressDeadlineSeconds` 600 |
//! | `Namespace` | label `kubernetes.io/metadata.name` = its name (always, as kube-apiserver), `spec.finalizers` `["kubernetes"]` |
//! | `Service` | `spec.type` `ClusterIP`, `spec.sessionAffinity` `None`, each port's `protocol` `TCP` and `targetPort` = `port` |
//!
//! A created pod's `status.qosClass` is set by [`pod_qos_class`] with its initial status.
//!
//! Not filled (simplified): a Service's `clusterIP` and IP families, a pod's service account.

use serde_json::{json, Map, Value};

use crate::resources::ResourceDef;

/// Fills the defaults of `def`'s kind into `obj` (a no-op for kinds without any).
pub fn apply(def: &ResourceDef, obj: &mut Value) {
    if !def.is_core() || !obj.is_object() {
        return;
    }
    omit_empty(obj, true);
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Pod") => pod(obj),
        ("apps", "Deployment") => deployment(obj),
        ("", "Namespace") => namespace(obj),
        ("", "Service") => service(obj),
        _ => {}
    }
}

/// Drops the empty maps and lists Go leaves out of a built-in kind's JSON (`omitempty`): labels,
/// annotations, finalizers and owner references at any depth (templates have them too), and a
/// ConfigMap's `data` and `binaryData`, so that a patch that removes the last label answers
/// the object kube-apiserver answers.
fn omit_empty(v: &mut Value, top: bool) {
    let Some(m) = v.as_object_mut() else {
        return;
    };
    m.retain(|k, child| {
        let empty = match child {
            Value::Object(o) => o.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        };
        let omitted = matches!(
            k.as_str(),
            "labels" | "annotations" | "finalizers" | "ownerReferences"
        ) || (top && matches!(k.as_str(), "data" | "binaryData"));
        !(empty && omitted)
    });
    for child in m.values_mut() {
        omit_empty(child, false);
    }
}

/// The object at `key` of the object `v`, created empty when absent; `None` when `v` is not
/// an object or the field holds something else (left for validation to refuse, not replaced).
fn child<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    let slot = v
        .as_object_mut()?
        .entry(key)
        .or_insert_with(|| Value::Object(Map::new()));
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.is_object().then_some(slot)
}

/// Sets `key` of the object `v` to `value` unless it is present (null counts as absent).
fn fill(v: &mut Value, key: &str, value: Value) {
    if let Some(m) = v.as_object_mut() {
        match m.get(key) {
            Some(x) if !x.is_null() => {}
            _ => {
                m.insert(key.to_string(), value);
            }
        }
    }
}

fn pod(obj: &mut Value) {
    if let Some(spec) = child(obj, "spec") {
        pod_spec(spec);
        fill(spec, "enableServiceLinks", json!(true));
        // The Priority and DefaultTolerationSeconds admission plugins.
        fill(spec, "priority", json!(0));
        fill(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
        default_tolerations(spec);
    }
    let pod_ip = obj.pointer("/status/podIP").and_then(Value::as_str);
    if let Some(ip) = pod_ip.filter(|ip| !ip.is_empty()).map(str::to_string) {
        if let Some(status) = child(obj, "status") {
            fill(status, "podIPs", json!([{"ip": ip}]));
        }
    }
}

fn pod_spec(spec: &mut Value) {
    fill(spec, "restartPolicy", json!("Always"));
    fill(spec, "dnsPolicy", json!("ClusterFirst"));
    fill(spec, "schedulerName", json!("default-scheduler"));
    fill(spec, "terminationGracePeriodSeconds", json!(30));
    fill(spec, "securityContext", json!({}));
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            containers
                .iter_mut()
                .filter(|c| c.is_object())
                .for_each(container);
        }
    }
}

fn container(c: &mut Value) {
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    fill(c, "imagePullPolicy", json!(pull_policy(image)));
    fill(c, "terminationMessagePath", json!("/dev/termination-log"));
    fill(c, "terminationMessagePolicy", json!("File"));
    fill(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter(|p| p.is_object()) {
            fill(p, "protocol", json!("TCP"));
        }
    }
}

/// kube-apiserver's default pull policy: `Always` for `:latest` or an image without a tag or
/// digest, else `IfNotPresent`.
fn pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// The DefaultTolerationSeconds admission plugin: a pod that does not tolerate a node being
/// not ready or unreachable tolerates it for 300 s.
fn default_tolerations(spec: &mut Value) {
    let Some(m) = spec.as_object_mut() else {
        return;
    };
    let slot = m
        .entry("tolerations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    let Some(tolerations) = slot.as_array_mut() else {
        return;
    };
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let tolerated = tolerations.iter().any(|t| {
            let effect = t.get("effect").and_then(Value::as_str).unwrap_or("");
            let k = t.get("key").and_then(Value::as_str).unwrap_or("");
            (k == key || k.is_empty()) && (effect == "NoExecute" || effect.is_empty())
        });
        if !tolerated {
            tolerations.push(
                json!({"key": key, "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}),
            );
        }
    }
}

/// A pod's quality-of-service class, as kube-apiserver sets it on create: `Guaranteed` when
/// every container limits CPU and memory and requests what it limits, `BestEffort` when no
/// container requests or limits anything, else `Burstable`.
pub fn pod_qos_class(pod: &Value) -> &'static str {
    let containers: Vec<&Value> = ["initContainers", "containers"]
        .iter()
        .filter_map(|l| pod.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
        .collect();
    let resources = |c: &Value, kind: &str| -> Map<String, Value> {
        c.pointer(&format!("/resources/{kind}"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in &containers {
        let (requests, limits) = (resources(c, "requests"), resources(c, "limits"));
        any |= !requests.is_empty() || !limits.is_empty();
        let full = ["cpu", "memory"].iter().all(|r| limits.contains_key(*r));
        // A request left out defaults to the limit.
        let same = requests.iter().all(|(k, v)| limits.get(k) == Some(v));
        guaranteed &= full && same;
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

fn deployment(obj: &mut Value) {
    let Some(spec) = child(obj, "spec") else {
        return;
    };
    fill(spec, "replicas", json!(1));
    fill(spec, "revisionHistoryLimit", json!(10));
    fill(spec, "progressDeadlineSeconds", json!(600));
    if let Some(strategy) = child(spec, "strategy") {
        fill(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            if let Some(ru) = child(strategy, "rollingUpdate") {
                fill(ru, "maxUnavailable", json!("25%"));
                fill(ru, "maxSurge", json!("25%"));
            }
        }
    }
    if let Some(pod) = child(spec, "template").and_then(|t| child(t, "spec")) {
        pod_spec(pod);
    }
}

fn namespace(obj: &mut Value) {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let (Some(name), Some(labels)) = (
        name,
        child(obj, "metadata").and_then(|m| child(m, "labels")),
    ) {
        labels["kubernetes.io/metadata.name"] = json!(name);
    }
    if let Some(spec) = child(obj, "spec") {
        fill(spec, "finalizers", json!(["kubernetes"]));
    }
}

fn service(obj: &mut Value) {
    let Some(spec) = child(obj, "spec") else {
        return;
    };
    fill(spec, "type", json!("ClusterIP"));
    fill(spec, "sessionAffinity", json!("None"));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter(|p| p.is_object()) {
            fill(p, "protocol", json!("TCP"));
            let port = p.get("port").cloned().unwrap_or(Value::Null);
            if !port.is_null() {
                fill(p, "targetPort", port);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(group: &str, kind: &str) -> ResourceDef {
        ResourceDef::new(group, "v1", kind, "x", true)
    }

    #[test]
    fn deployment_gets_strategy_and_limits_but_keeps_what_was_sent() {
        let mut d = json!({"metadata": {"name": "web"},
            "spec": {"replicas": 3, "strategy": {"type": "Recreate"},
                     "template": {"spec": {"restartPolicy": "Never", "containers": []}}}});
        apply(&def("apps", "Deployment"), &mut d);
        assert_eq!(d["spec"]["replicas"], 3);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(d["spec"]["template"]["spec"]["restartPolicy"], "Never");
        assert_eq!(d["spec"]["template"]["spec"]["dnsPolicy"], "ClusterFirst");

        let mut d = json!({"spec": {}});
        apply(&def("apps", "Deployment"), &mut d);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!(d["spec"]["replicas"], 1);
    }

    #[test]
    fn pod_namespace_and_service_defaults() {
        let mut p = json!({"spec": {"containers": [{"name": "c", "image": "nginx",
            "ports": [{"containerPort": 80}]}, {"name": "d", "image": "x:1", "imagePullPolicy": "Never"}]}});
        apply(&def("", "Pod"), &mut p);
        assert_eq!(p["spec"]["terminationGracePeriodSeconds"], 30);
        assert_eq!(p["spec"]["enableServiceLinks"], true);
        assert_eq!(p["spec"]["priority"], 0);
        assert_eq!(p["spec"]["tolerations"].as_array().unwrap().len(), 2);
        assert_eq!(
            p["spec"]["containers"][0],
            json!({"name": "c", "image": "nginx", "imagePullPolicy": "Always",
                "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"})
        );
        assert_eq!(p["spec"]["containers"][1]["imagePullPolicy"], "Never");
        assert_eq!(pod_qos_class(&p), "BestEffort");
        let limited = json!({"spec": {"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        assert_eq!(pod_qos_class(&limited), "Guaranteed");
        let requested =
            json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(pod_qos_class(&requested), "Burstable");
        assert_eq!(pull_policy("registry:5000/app"), "Always");
        assert_eq!(pull_policy("app@sha256:abc"), "IfNotPresent");

        let mut n =
            json!({"metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "x"}}});
        apply(&def("", "Namespace"), &mut n);
        assert_eq!(
            n["metadata"]["labels"]["kubernetes.io/metadata.name"],
            "team"
        );
        assert_eq!(n["spec"]["finalizers"], json!(["kubernetes"]));

        let mut s = json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}});
        apply(&def("", "Service"), &mut s);
        assert_eq!(s["spec"]["type"], "ClusterIP");
        assert_eq!(
            s["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert_eq!(
            s["spec"]["ports"][1],
            json!({"port": 53, "protocol": "UDP", "targetPort": "dns"})
        );
    }

    #[test]
    fn custom_kinds_and_odd_bodies_are_left_alone() {
        let mut w = json!({"spec": {}});
        apply(&def("example.com", "Deployment"), &mut w);
        assert_eq!(w, json!({"spec": {}}));
        // A malformed field is left for validation to refuse, not replaced.
        let mut odd = json!({"spec": "not an object"});
        apply(&def("apps", "Deployment"), &mut odd);
        assert_eq!(odd, json!({"spec": "not an object"}));
        let mut not_obj = json!([1]);
        apply(&def("", "Pod"), &mut not_obj);
        assert_eq!(not_obj, json!([1]));
    }
}
