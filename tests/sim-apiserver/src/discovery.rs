//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}/{version}`.

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

/// A resource's discovery entries: the resource, then its subresources (`pods/status`,
/// `deployments/scale`) as kube-apiserver lists them.
fn resource_entries(d: &ResourceDef) -> Vec<Value> {
    let mut out = vec![json!({
        "name": d.plural, "singularName": d.singular(), "namespaced": d.namespaced,
        "kind": d.kind,
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "storageVersionHash": "",
    })];
    if !d.short_names.is_empty() {
        out[0]["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        out[0]["categories"] = json!(d.categories);
    }
    if d.status_subresource {
        out.push(json!({
            "name": format!("{}/status", d.plural), "singularName": "", "namespaced": d.namespaced,
            "kind": d.kind, "verbs": ["get", "patch", "update"],
        }));
    }
    if d.scale.is_some() {
        out.push(json!({
            "name": format!("{}/scale", d.plural), "singularName": "", "namespaced": d.namespaced,
            "group": "autoscaling", "version": "v1", "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}` (APIResourceList); `None` if nothing is served there.
pub fn resource_list(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let resources: Vec<Value> = reg
        .all()
        .iter()
        .filter(|d| d.group == group && d.version == version)
        .flat_map(resource_entries)
        .collect();
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    )
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
    let groups: Vec<Value> = reg
        .groups()
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

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: the root listing one document per group/version.
pub fn openapi_v3_root(reg: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for d in reg.all() {
        let p = gv_path(&d.group, &d.version);
        let url = format!("/openapi/v3/{p}?hash=sim");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: a minimal document declaring, per resource, the PATCH
/// operation with its GVK extension and the `fieldValidation` query parameter, which is what
/// kubectl checks to use server-side field validation instead of downloading full schemas.
pub fn openapi_v3_doc(reg: &Registry, gv: &str) -> Option<Value> {
    let mut paths = serde_json::Map::new();
    for d in reg
        .all()
        .iter()
        .filter(|d| gv_path(&d.group, &d.version) == gv)
    {
        let prefix = format!("/{gv}");
        let item = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let param = json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        let op =
            json!({"x-kubernetes-group-version-kind": gvk, "parameters": [param], "responses": {}});
        paths.insert(item, json!({"patch": op.clone(), "put": op}));
        let coll = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
        } else {
            format!("{prefix}/{}", d.plural)
        };
        paths.insert(coll, json!({"post": op}));
    }
    if paths.is_empty() {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-sim"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}
