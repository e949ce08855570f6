//! OpenAPI: the object schemas of the served kinds and the documents built from them,
//! `/openapi/v2` (Swagger 2.0, JSON or the protobuf kubectl asks for) and `/openapi/v3/...`.
//!
//! The schemas of the built-in kinds come from `k8s-openapi`'s `schemars` implementations,
//! generated from the same Kubernetes swagger as the typed client, so they are complete and
//! carry the upstream descriptions that `kubectl explain` prints. They do not carry the
//! strategic-merge metadata (`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`,
//! list types): [`PATCH_FIELDS`] adds it, and the same definitions then drive both the
//! documents and [`crate::smp`]. Built once per process (a few hundred definitions).
//! A custom resource's schema is its [`ResourceDef::schema`].

mod proto;
pub(crate) mod serve;

use std::collections::BTreeSet;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

use crate::resources::{Registry, ResourceDef};

pub use proto::swagger_protobuf;

/// The media type of the protobuf form of `/openapi/v2` that client-go asks for.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";

/// The older spelling of [`V2_PROTOBUF`] that kube-apiserver also answers.
const V2_PROTOBUF_LEGACY: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

/// Built-in kinds: (definition, group, version, kind).
const KINDS: &[(&str, &str, &str, &str)] = &[
    ("io.k8s.api.core.v1.Pod", "", "v1", "Pod"),
    ("io.k8s.api.core.v1.ConfigMap", "", "v1", "ConfigMap"),
    ("io.k8s.api.core.v1.Namespace", "", "v1", "Namespace"),
    ("io.k8s.api.core.v1.Event", "", "v1", "Event"),
    ("io.k8s.api.events.v1.Event", "events.k8s.io", "v1", "Event"),
    (
        "io.k8s.api.coordination.v1.Lease",
        "coordination.k8s.io",
        "v1",
        "Lease",
    ),
    ("io.k8s.api.apps.v1.Deployment", "apps", "v1", "Deployment"),
    (
        "io.k8s.api.autoscaling.v1.Scale",
        "autoscaling",
        "v1",
        "Scale",
    ),
];

/// The strategic-merge metadata of the fields of built-in types that have any, as Kubernetes'
/// own swagger declares it: (definition, field, `x-kubernetes-patch-strategy`,
/// `x-kubernetes-patch-merge-key`, `x-kubernetes-list-map-keys`). A field not listed here is
/// replaced when it is a list and merged when it is a map.
pub const PATCH_FIELDS: &[(&str, &str, &str, &str, &[&str])] = &[
    (
        "io.k8s.api.core.v1.PodSpec",
        "containers",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "initContainers",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "ephemeralContainers",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "volumes",
        "merge,retainKeys",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "imagePullSecrets",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "hostAliases",
        "merge",
        "ip",
        &["ip"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "topologySpreadConstraints",
        "merge",
        "topologyKey",
        &["topologyKey", "whenUnsatisfiable"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "resourceClaims",
        "merge,retainKeys",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.PodSpec",
        "schedulingGates",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "ports",
        "merge",
        "containerPort",
        &["containerPort", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "env",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeMounts",
        "merge",
        "mountPath",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.Container",
        "volumeDevices",
        "merge",
        "devicePath",
        &["devicePath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "ports",
        "merge",
        "containerPort",
        &["containerPort", "protocol"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "env",
        "merge",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeMounts",
        "merge",
        "mountPath",
        &["mountPath"],
    ),
    (
        "io.k8s.api.core.v1.EphemeralContainer",
        "volumeDevices",
        "merge",
        "devicePath",
        &["devicePath"],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "conditions",
        "merge",
        "type",
        &["type"],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "podIPs",
        "merge",
        "ip",
        &["ip"],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "hostIPs",
        "merge",
        "ip",
        &["ip"],
    ),
    (
        "io.k8s.api.core.v1.PodStatus",
        "resourceClaimStatuses",
        "merge,retainKeys",
        "name",
        &["name"],
    ),
    (
        "io.k8s.api.core.v1.NamespaceStatus",
        "conditions",
        "merge",
        "type",
        &["type"],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentSpec",
        "strategy",
        "retainKeys",
        "",
        &[],
    ),
    (
        "io.k8s.api.apps.v1.DeploymentStatus",
        "conditions",
        "merge",
        "type",
        &["type"],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "finalizers",
        "merge",
        "",
        &[],
    ),
    (
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "ownerReferences",
        "merge",
        "uid",
        &["uid"],
    ),
];

/// Keywords a Swagger 2.0 schema may have (gnostic, which kubectl parses it with, refuses
/// others); `x-` extensions are always allowed.
const V2_KEYWORDS: &[&str] = &[
    "$ref",
    "format",
    "title",
    "description",
    "default",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxProperties",
    "minProperties",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "discriminator",
    "readOnly",
    "example",
];

/// The definitions of the built-in kinds and everything they refer to, keyed by their
/// Kubernetes names (`io.k8s.api.core.v1.Pod`); `$ref`s point to `#/definitions/{name}`.
pub fn definitions() -> &'static Map<String, Value> {
    static DEFS: OnceLock<Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(generate)
}

fn generate() -> Map<String, Value> {
    let mut defs = schemars_definitions();
    add_patch_metadata(&mut defs);
    add_kinds_and_lists(&mut defs);
    add_meta_kinds(&mut defs);
    defs
}

/// The built-in kinds' definitions as k8s-openapi's `schemars` implementations give them,
/// `$ref`s under `#/definitions`, each kept to what Swagger 2.0 allows.
fn schemars_definitions() -> Map<String, Value> {
    use k8s_openapi::api::{apps, autoscaling, coordination, core, events};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    let mut settings = schemars::generate::SchemaSettings::draft07();
    settings.definitions_path = "/definitions".into();
    let mut g = settings.into_generator();
    g.subschema_for::<core::v1::Pod>();
    g.subschema_for::<core::v1::ConfigMap>();
    g.subschema_for::<core::v1::Namespace>();
    g.subschema_for::<core::v1::Event>();
    g.subschema_for::<events::v1::Event>();
    g.subschema_for::<coordination::v1::Lease>();
    g.subschema_for::<apps::v1::Deployment>();
    g.subschema_for::<autoscaling::v1::Scale>();
    g.subschema_for::<meta::Status>();
    g.subschema_for::<meta::DeleteOptions>();
    g.subschema_for::<meta::ListMeta>();
    let mut defs = g.take_definitions(false);
    for v in defs.values_mut() {
        sanitize(v);
    }
    defs
}

/// The strategic-merge metadata of [`PATCH_FIELDS`] on the fields it names: patch strategy,
/// merge key and list type.
fn add_patch_metadata(defs: &mut Map<String, Value>) {
    for (name, field, strategy, key, map_keys) in PATCH_FIELDS {
        let Some(p) = defs
            .get_mut(*name)
            .and_then(|d| d.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        if !key.is_empty() {
            p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            p.insert("x-kubernetes-list-type".into(), json!("map"));
            p.insert("x-kubernetes-list-map-keys".into(), json!(map_keys));
        } else if *strategy == "merge" {
            p.insert("x-kubernetes-list-type".into(), json!("set"));
        }
    }
}

/// Each of [`KINDS`] marked with its group, version and kind (its `required` dropped), and its
/// `<Kind>List` beside it.
fn add_kinds_and_lists(defs: &mut Map<String, Value>) {
    for (name, group, version, kind) in KINDS {
        if let Some(d) = defs.get_mut(*name).and_then(Value::as_object_mut) {
            d.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
            // kube-apiserver does not require metadata on input (generateName, or the URL,
            // may give the name); kubectl validates against this list.
            d.remove("required");
        }
        let list = json!({
            "description": format!("{kind}List is a list of {kind} objects."),
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
                "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
                "items": {"type": "array", "items": {"$ref": format!("#/definitions/{name}")}, "description": format!("List of {kind} objects.")},
                "metadata": {"$ref": format!("#/definitions/{META}.ListMeta"), "description": "Standard list metadata."},
            },
            "x-kubernetes-group-version-kind": [{"group": group, "version": version, "kind": format!("{kind}List")}],
        });
        defs.insert(format!("{name}List"), list);
    }
}

/// meta/v1's kinds served beside every group: `Status`, `DeleteOptions` in each group version
/// of [`KINDS`], and `Patch`.
fn add_meta_kinds(defs: &mut Map<String, Value>) {
    if let Some(d) = defs
        .get_mut(&format!("{META}.Status"))
        .and_then(Value::as_object_mut)
    {
        d.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": "", "version": "v1", "kind": "Status"}]),
        );
    }
    if let Some(d) = defs
        .get_mut(&format!("{META}.DeleteOptions"))
        .and_then(Value::as_object_mut)
    {
        let gvks: Vec<Value> = KINDS
            .iter()
            .map(|(_, g, v, _)| (*g, *v))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|(g, v)| json!({"group": g, "version": v, "kind": "DeleteOptions"}))
            .collect();
        d.insert("x-kubernetes-group-version-kind".into(), Value::Array(gvks));
    }
    defs.insert(
        format!("{META}.Patch"),
        json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
}

/// Keeps only what a Swagger 2.0 schema may say, so that one set of definitions serves both
/// documents; `oneOf`/`anyOf` (none in the built-in kinds' closure today) would be dropped.
fn sanitize(v: &mut Value) {
    let Value::Object(m) = v else { return };
    m.retain(|k, _| k.starts_with("x-") || V2_KEYWORDS.contains(&k.as_str()));
    if let Some(Value::Object(props)) = m.get_mut("properties") {
        props.values_mut().for_each(sanitize);
    }
    for k in ["items", "additionalProperties"] {
        if let Some(s) = m.get_mut(k) {
            sanitize(s);
        }
    }
    if let Some(Value::Array(a)) = m.get_mut("allOf") {
        a.iter_mut().for_each(sanitize);
    }
}

/// The definition name of a built-in kind served by `def` (its `Scale` for the `scale`
/// subresource), or `None` for a custom resource (one with its own schema, or unknown here).
pub fn builtin_definition(def: &ResourceDef, sub: Option<&str>) -> Option<&'static str> {
    if def.schema.is_some() {
        return None;
    }
    let (name, ..) = KINDS
        .iter()
        .find(|(_, g, v, k)| *g == def.group && *v == def.version && *k == def.kind)?;
    Some(if sub == Some("scale") {
        "io.k8s.api.autoscaling.v1.Scale"
    } else {
        name
    })
}

/// The definition name kube-apiserver gives a custom resource (`com.example.v1.Widget`).
fn custom_name(def: &ResourceDef) -> String {
    let mut parts: Vec<&str> = def.group.split('.').collect();
    parts.reverse();
    format!("{}.{}.{}", parts.join("."), def.version, def.kind)
}

/// A custom resource's schema as a definition: its own schema with the GVK and, for
/// `metadata`, the standard `ObjectMeta` (a CRD's schema may not describe it).
fn custom_definition(def: &ResourceDef) -> Option<Value> {
    let mut s = def.schema.as_deref()?.clone();
    let m = s.as_object_mut()?;
    m.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": def.group, "version": def.version, "kind": def.kind}]),
    );
    let props = m
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()?;
    props.insert(
        "metadata".into(),
        json!({"$ref": format!("#/definitions/{META}.ObjectMeta"), "description": "Standard object's metadata."}),
    );
    for k in ["apiVersion", "kind"] {
        props.entry(k).or_insert_with(|| json!({"type": "string"}));
    }
    Some(s)
}

/// The names of `roots` and every definition they refer to.
fn closure<'a>(get: impl Fn(&str) -> Option<&'a Value>, roots: &[String]) -> BTreeSet<String> {
    fn refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    if let Some(n) = r.strip_prefix("#/definitions/") {
                        out.push(n.to_string());
                    }
                }
                m.values().for_each(|x| refs(x, out));
            }
            Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
            _ => {}
        }
    }
    let mut seen = BTreeSet::new();
    let mut todo: Vec<String> = roots.to_vec();
    while let Some(n) = todo.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(d) = get(&n) {
            refs(d, &mut todo);
        }
    }
    seen
}

pub(crate) fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The patch types a resource accepts: kube-apiserver takes no strategic merge patch for a
/// custom resource.
fn patch_types(builtin: bool) -> Vec<&'static str> {
    let mut t = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if builtin {
        t.push("application/strategic-merge-patch+json");
    }
    t
}

/// One resource's entries in `paths`: item and collection, with the operations kubectl looks
/// for (the GVK extension, `fieldValidation`, the patch media types). `v3` picks the shape.
fn resource_paths(
    d: &ResourceDef,
    prefix: &str,
    def_name: &str,
    v3: bool,
    out: &mut Map<String, Value>,
) {
    let builtin = builtin_definition(d, None).is_some();
    let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
    let base = if d.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", d.plural)
    } else {
        format!("{prefix}/{}", d.plural)
    };
    let reference = |name: &str| {
        if name.is_empty() {
            // A resource defined in Rust without a schema.
            json!({"type": "object"})
        } else if v3 {
            json!({"$ref": format!("#/components/schemas/{name}")})
        } else {
            json!({"$ref": format!("#/definitions/{name}")})
        }
    };
    let fv = if v3 {
        json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}})
    } else {
        json!({"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true})
    };
    let op = |action: &str, params: Vec<Value>, body: Option<(Vec<&str>, Value)>, resp: &str| {
        let mut o = json!({
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "parameters": params,
        });
        let schema = reference(resp);
        if v3 {
            o["responses"] = json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}});
            if let Some((types, s)) = body {
                let content: Map<String, Value> = types
                    .into_iter()
                    .map(|t| (t.to_string(), json!({"schema": s.clone()})))
                    .collect();
                o["requestBody"] = json!({"content": content, "required": true});
            }
        } else {
            o["responses"] = json!({"200": {"description": "OK", "schema": schema}});
            if let Some((types, s)) = body {
                o["consumes"] = json!(types);
                o["parameters"]
                    .as_array_mut()
                    .expect("built as an array")
                    .push(json!({"name": "body", "in": "body", "required": true, "schema": s}));
            }
        }
        o
    };
    let obj = reference(def_name);
    let list = format!("{def_name}List");
    let list = if builtin { list } else { def_name.to_string() };
    out.insert(
        base.clone(),
        json!({
            "get": op("list", vec![], None, &list),
            "post": op("post", vec![fv.clone()], Some((vec!["application/json"], obj.clone())), def_name),
        }),
    );
    out.insert(
        format!("{base}/{{name}}"),
        json!({
            "get": op("get", vec![], None, def_name),
            "put": op("put", vec![fv.clone()], Some((vec!["application/json"], obj)), def_name),
            "patch": op("patch", vec![fv], Some((patch_types(builtin), reference(&format!("{META}.Patch")))), def_name),
            "delete": op("delete", vec![], None, &format!("{META}.Status")),
        }),
    );
}

/// The served resources with the definition that describes each; custom ones with their
/// schema's definition in `extra`.
fn served(
    reg: &Registry,
    only_gv: Option<&str>,
    extra: &mut Map<String, Value>,
) -> Vec<(ResourceDef, String)> {
    let mut out = Vec::new();
    for d in reg.all() {
        if only_gv.is_some_and(|gv| gv_path(&d.group, &d.version) != gv) {
            continue;
        }
        if let Some(n) = builtin_definition(d, None) {
            out.push((d.clone(), n.to_string()));
        } else if let Some(s) = custom_definition(d) {
            let n = custom_name(d);
            extra.insert(n.clone(), s);
            out.push((d.clone(), n));
        } else {
            // A custom resource defined in Rust without a schema: its paths, no definition.
            out.push((d.clone(), String::new()));
        }
    }
    out
}

/// `/openapi/v2` as JSON: Swagger 2.0 with the definitions of every served kind.
pub fn swagger(reg: &Registry) -> Value {
    let mut extra = Map::new();
    let served = served(reg, None, &mut extra);
    let mut defs = definitions().clone();
    // A CRD's schema is OpenAPI v3 and may say what Swagger 2.0 cannot.
    extra.values_mut().for_each(sanitize);
    defs.append(&mut extra);
    let mut paths = Map::new();
    for (d, n) in &served {
        resource_paths(
            d,
            &format!("/{}", gv_path(&d.group, &d.version)),
            n,
            false,
            &mut paths,
        );
    }
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-sim"},
        "paths": paths,
        "definitions": defs,
    })
}

/// `/openapi/v3`: the root listing one document per group/version.
pub fn v3_root(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for d in reg.all() {
        let p = gv_path(&d.group, &d.version);
        let url = format!("/openapi/v3/{p}?hash=sim");
        paths.insert(p, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// Turns a Swagger 2.0 schema into its OpenAPI 3 form: references into `components`, and a
/// reference with siblings (a description) wrapped in `allOf`, as kube-apiserver writes it.
fn to_v3(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut out: Map<String, Value> =
                m.iter().map(|(k, x)| (k.clone(), to_v3(x))).collect();
            if let Some(Value::String(r)) = out.remove("$ref") {
                let r = json!({"$ref": r.replacen("#/definitions/", "#/components/schemas/", 1)});
                if out.is_empty() {
                    return r;
                }
                out.insert("allOf".into(), json!([r]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(to_v3).collect()),
        other => other.clone(),
    }
}

/// `/openapi/v3/{api/v1 | apis/g/v}`: the paths of the group/version's resources and, in
/// `components.schemas`, their definitions and everything those refer to.
pub fn v3_document(reg: &Registry, gv: &str) -> Option<Value> {
    let mut extra = Map::new();
    let served = served(reg, Some(gv), &mut extra);
    if served.is_empty() {
        return None;
    }
    let mut paths = Map::new();
    let mut roots = vec![
        format!("{META}.Status"),
        format!("{META}.DeleteOptions"),
        format!("{META}.Patch"),
    ];
    for (d, n) in &served {
        resource_paths(d, &format!("/{gv}"), n, true, &mut paths);
        if !n.is_empty() {
            roots.push(n.clone());
            roots.push(format!("{n}List"));
        }
    }
    let get = |n: &str| extra.get(n).or_else(|| definitions().get(n));
    let schemas: Map<String, Value> = closure(get, &roots)
        .into_iter()
        .filter_map(|n| get(&n).map(|d| (n.clone(), to_v3(d))))
        .collect();
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-sim"},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_kinds_have_their_gvk_and_the_patch_metadata() {
        let d = definitions();
        assert_eq!(
            d["io.k8s.api.core.v1.Pod"]["x-kubernetes-group-version-kind"],
            json!([{"group": "", "version": "v1", "kind": "Pod"}])
        );
        let c = &d["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(c["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(c["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(
            c["items"]["$ref"],
            "#/definitions/io.k8s.api.core.v1.Container"
        );
        // Every row of the table names a field that exists.
        for (name, field, ..) in PATCH_FIELDS {
            assert!(
                d[*name]["properties"][*field]["x-kubernetes-patch-strategy"].is_string(),
                "{name}.{field}"
            );
        }
    }

    #[test]
    fn every_reference_resolves_and_only_swagger_2_keywords_are_used() {
        let d = definitions();
        fn walk(v: &Value, d: &Map<String, Value>, at: &str) {
            match v {
                Value::Object(m) => {
                    if let Some(Value::String(r)) = m.get("$ref") {
                        let n = r.strip_prefix("#/definitions/").expect(at);
                        assert!(d.contains_key(n), "{at}: {r}");
                    }
                    for (k, x) in m {
                        walk(x, d, &format!("{at}/{k}"));
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, d, at)),
                _ => {}
            }
        }
        for (n, v) in d {
            walk(v, d, n);
            for k in v.as_object().unwrap().keys() {
                assert!(
                    k.starts_with("x-") || V2_KEYWORDS.contains(&k.as_str()),
                    "{n}: {k}"
                );
            }
        }
    }

    #[test]
    fn v3_wraps_references_with_siblings_in_all_of() {
        let s = to_v3(&json!({"$ref": "#/definitions/a.B", "description": "d"}));
        assert_eq!(
            s,
            json!({"allOf": [{"$ref": "#/components/schemas/a.B"}], "description": "d"})
        );
        assert_eq!(
            to_v3(&json!({"$ref": "#/definitions/a.B"})),
            json!({"$ref": "#/components/schemas/a.B"})
        );
    }
}
