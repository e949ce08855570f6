//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}/{version}`, and
//! aggregated discovery (`apidiscovery.k8s.io/v2`): `/api` and `/apis` answered as one
//! `APIGroupDiscoveryList` each, every group, version and resource in one document, when the
//! `Accept` header asks for it first, as kube-apiserver does since 1.30 (client-go and kubectl
//! ask for it, then fall back to the per-version documents above).

use serde_json::{json, Value};

use crate::resources::{Registry, ResourceDef};

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1", "minor": "32", "gitVersion": "v1.32.0-sim",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z", "goVersion": "go1.23.4", "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api` (APIVersions).
pub fn api(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

/// The verbs discovery lists for a resource: the reviews only `create`; Namespaces no
/// `deletecollection`; a custom resource in the order apiextensions writes them.
fn verbs_of(d: &ResourceDef) -> &'static [&'static str] {
    if let Some(verbs) = crate::authz::discovery_verbs(d) {
        return verbs;
    }
    if d.group.is_empty() && d.kind == "Namespace" {
        return &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ];
    }
    if !d.is_core() {
        return &[
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ];
    }
    &[
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
}

/// kube-apiserver's `storageVersionHash` of a stored resource: the first 8 bytes of the SHA-256
/// of `group/version/kind`, in base64 (none for the reviews, which store nothing).
fn storage_version_hash(d: &ResourceDef) -> Option<String> {
    use base64::Engine;
    if crate::authz::discovery_verbs(d).is_some() {
        return None;
    }
    // The version and group it is stored in, where that is not the one it is served at.
    let stored = match (d.group.as_str(), d.kind.as_str()) {
        ("events.k8s.io", "Event") => "/v1/Event".to_string(),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            "apiextensions.k8s.io/v1beta1/CustomResourceDefinition".to_string()
        }
        _ => format!("{}/{}/{}", d.group, d.version, d.kind),
    };
    let digest = ring::digest::digest(&ring::digest::SHA256, stored.as_bytes());
    Some(base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8]))
}

/// The order kube-apiserver lists its groups in (its group priorities); other groups, the
/// custom resources' ones, follow by name.
const GROUP_ORDER: &[&str] = &[
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
];

/// The registry's groups in kube-apiserver's order.
fn ordered_groups(reg: &Registry) -> Vec<(String, Vec<String>)> {
    let mut groups = reg.groups();
    groups.sort_by_key(|(g, _)| {
        let rank = GROUP_ORDER
            .iter()
            .position(|known| known == g)
            .unwrap_or(GROUP_ORDER.len());
        (rank, g.clone())
    });
    groups
}

/// A resource's subresources as discovery lists them, by name (`scale`, then `status`), each
/// with its response kind (group, version, kind); their verbs are always get, patch and update.
fn subresources(d: &ResourceDef) -> Vec<(&'static str, [&str; 3])> {
    let mut subs = Vec::new();
    if d.scale.is_some() {
        subs.push(("scale", ["autoscaling", "v1", "Scale"]));
    }
    if d.status_subresource {
        subs.push((
            "status",
            [d.group.as_str(), d.version.as_str(), d.kind.as_str()],
        ));
    }
    subs
}

/// The verbs of every subresource.
const SUBRESOURCE_VERBS: [&str; 3] = ["get", "patch", "update"];

/// A resource's discovery entries: the resource, then its subresources (`pods/status`,
/// `deployments/scale`) as kube-apiserver lists them.
fn resource_entries(d: &ResourceDef) -> Vec<Value> {
    let verbs = verbs_of(d);
    let mut main = json!({
        "name": d.plural, "singularName": d.singular(), "namespaced": d.namespaced,
        "kind": d.kind, "verbs": verbs,
    });
    if let Some(hash) = storage_version_hash(d) {
        main["storageVersionHash"] = json!(hash);
    }
    // kubectl resolves `po` and expands `all` from these (kube-apiserver omits them when empty).
    if !d.short_names.is_empty() {
        main["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        main["categories"] = json!(d.categories);
    }
    let mut out = vec![main];
    let mut subresources = subresources(d);
    if !d.is_core() {
        // apiextensions lists `status` before `scale`.
        subresources.reverse();
    }
    for (sub, [group, version, kind]) in subresources {
        let mut entry = json!({
            "name": format!("{}/{sub}", d.plural), "singularName": "", "namespaced": d.namespaced,
            "kind": kind, "verbs": SUBRESOURCE_VERBS,
        });
        if group != d.group || version != d.version {
            entry["group"] = json!(group);
            entry["version"] = json!(version);
        }
        out.push(entry);
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}` (APIResourceList); `None` if nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut resources: Vec<Value> = reg
        .all()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .flat_map(resource_entries)
        .collect();
    if resources.is_empty() {
        return None;
    }
    // kube-apiserver sorts its own by name (subresources after their resource); a custom
    // resource keeps the order apiextensions writes.
    if reg.all().iter().any(|d| d.group == group && d.is_core()) {
        resources.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    let mut list = json!({"kind": "APIResourceList", "groupVersion": gv, "resources": resources});
    // kube-apiserver's core list carries no apiVersion; the groups' lists do.
    if !group.is_empty() {
        list["apiVersion"] = json!("v1");
    }
    Some(list)
}

fn group_entry(group: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
        .collect();
    json!({"name": group, "versions": vs, "preferredVersion": vs[0].clone()})
}

/// `/apis` (APIGroupList).
pub fn apis(reg: &Registry) -> Value {
    let groups: Vec<Value> = ordered_groups(reg)
        .iter()
        .map(|(g, vs)| group_entry(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}` (APIGroup).
pub fn api_group(reg: &Registry, group: &str) -> Option<Value> {
    reg.groups()
        .iter()
        .find(|(g, _)| g == group)
        .map(|(g, vs)| {
            let mut v = group_entry(g, vs);
            v["kind"] = json!("APIGroup");
            v["apiVersion"] = json!("v1");
            v
        })
}

/// The media type of aggregated discovery, as kube-apiserver names it in `Content-Type`.
pub const AGGREGATED_MEDIA_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Whether an `Accept` header names a representation of discovery this server (or
/// kube-apiserver) has: a plain JSON or protobuf range, a wildcard, or aggregated discovery v2.
/// Otherwise the answer is 406.
pub fn acceptable(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return true };
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let params: Vec<&str> = parts.collect();
        let has = |p: &str| params.iter().any(|x| x.replace(' ', "") == p);
        let plain = !params.iter().any(|p| p.starts_with("as="));
        match media {
            "*/*" | "application/*" => true,
            "application/json" | "application/vnd.kubernetes.protobuf" => {
                plain
                    || (has("as=APIGroupDiscoveryList")
                        && has("g=apidiscovery.k8s.io")
                        && has("v=v2"))
            }
            _ => false,
        }
    })
}

/// Whether an `Accept` header asks for aggregated discovery: its first range this server can
/// answer is `application/json` with `g=apidiscovery.k8s.io`, `v=v2` and
/// `as=APIGroupDiscoveryList` (in any order). A plain JSON range (or `*/*`) met first asks for
/// the legacy document; ranges this server cannot answer (protobuf, `v2beta1`, which
/// kube-apiserver dropped in 1.33) are passed over.
pub fn wants_aggregated(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    for range in crate::representation::json_ranges(accept).flatten() {
        if !range.json {
            continue;
        }
        match (range.group, range.version, range.as_kind) {
            (Some("apidiscovery.k8s.io"), Some("v2"), Some("APIGroupDiscoveryList")) => {
                return true
            }
            (None, _, None) => return false,
            _ => {}
        }
    }
    false
}

/// One resource of aggregated discovery (`APIResourceDiscovery`), its subresources inside it.
fn aggregated_resource(d: &ResourceDef) -> Value {
    // kube-apiserver names a built-in response kind's group and version only where they differ
    // from the resource's (a Scale); a custom resource's always.
    let custom = !d.is_core();
    let kind = |group: &str, version: &str, kind: &str| {
        let same = group == d.group && version == d.version && !custom;
        let (g, v) = if same { ("", "") } else { (group, version) };
        json!({"group": g, "version": v, "kind": kind})
    };
    let mut r = json!({
        "resource": d.plural,
        "responseKind": kind(&d.group, &d.version, &d.kind),
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular(),
        "verbs": verbs_of(d),
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let mut subresources = subresources(d);
    if custom {
        // apiextensions lists `status` before `scale`.
        subresources.reverse();
    }
    let subs: Vec<Value> = subresources
        .into_iter()
        .map(|(sub, [group, version, k])| {
            json!({"subresource": sub, "responseKind": kind(group, version, k), "verbs": SUBRESOURCE_VERBS})
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

/// One group of aggregated discovery (`APIGroupDiscovery`): its versions, preferred first.
fn aggregated_group(reg: &Registry, group: &str, versions: &[String]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|v| {
            let mut resources: Vec<&ResourceDef> = reg
                .all()
                .iter()
                .filter(|d| d.group == group && &d.version == v)
                .collect();
            resources.sort_by(|a, b| a.plural.cmp(&b.plural));
            let resources: Vec<Value> = resources.into_iter().map(aggregated_resource).collect();
            json!({"version": v, "resources": resources, "freshness": "Current"})
        })
        .collect();
    let mut metadata = json!({});
    if !group.is_empty() {
        metadata["name"] = json!(group);
    }
    json!({"metadata": metadata, "versions": versions})
}

/// `/api` (`core`) or `/apis` as aggregated discovery (`APIGroupDiscoveryList`).
pub fn aggregated(reg: &Registry, core: bool) -> Value {
    let items: Vec<Value> = if core {
        vec![aggregated_group(reg, "", &["v1".to_string()])]
    } else {
        ordered_groups(reg)
            .iter()
            .map(|(g, vs)| aggregated_group(reg, g, vs))
            .collect()
    };
    json!({
        "kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items,
    })
}

#[cfg(test)]
mod tests {
    use super::wants_aggregated;

    #[test]
    fn the_first_range_the_server_can_answer_decides() {
        let client_go =
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        assert!(wants_aggregated(Some(client_go)));
        assert!(wants_aggregated(Some(
            "application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io"
        )));
        assert!(wants_aggregated(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )));
        assert!(!wants_aggregated(None));
        assert!(!wants_aggregated(Some("application/json")));
        assert!(!wants_aggregated(Some("*/*")));
        assert!(!wants_aggregated(Some(
            "application/json, application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        )));
        assert!(!wants_aggregated(Some(
            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
        )));
    }
}
