//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): a CRD written through the API is
//! validated and defaulted like kube-apiserver does it, and once stored it is served: each served
//! version becomes a resource of the registry (discovery, routes, its schema validating writes,
//! its printer columns in Tables), its status says `NamesAccepted` and `Established`. Deleting the
//! CRD deletes its objects (one DELETED event each) and ends the watches on them.
//!
//! Unlike kube-apiserver, which establishes a CRD from a controller a moment after the write, this
//! happens before the write's answer is sent ([`serving::reconcile`] runs right after every CRD write), so
//! a test can use the resource at once. All versions of a CRD share one store (the storage
//! version's slot), objects kept in the version they were written in; reads through a version
//! convert them as strategy `None` does, changing only `apiVersion` ([`serving::Conversion`]).
//!
//! This module is what a CRD is (its resource, admission and initial status), below the store;
//! [`serving`] is what the server serves of the stored ones, above it.

pub mod definition;
pub mod schema;
pub(crate) mod serving;

use serde_json::Value;

use crate::field_validation::report_unknown_fields;
use crate::resources::ResourceDef;
use crate::status::ApiError;

/// The API group of CustomResourceDefinitions.
pub const GROUP: &str = "apiextensions.k8s.io";
/// Their resource name.
pub const PLURAL: &str = "customresourcedefinitions";

/// The `customresourcedefinitions` resource itself (cluster-scoped, with a status).
pub fn definition_resource() -> ResourceDef {
    ResourceDef::new(GROUP, "v1", "CustomResourceDefinition", PLURAL, false)
        .with_status()
        .with_short_names(&["crd", "crds"])
        .with_categories(&["api-extensions"])
}

/// The status a CustomResourceDefinition is created with: no names accepted, no conditions,
/// its storage version stored.
pub(crate) fn initial_status(crd: &Value) -> Value {
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    serde_json::json!({"acceptedNames": {"kind": "", "plural": ""}, "conditions": null,
        "storedVersions": storage})
}

/// Whether `def` is the CustomResourceDefinition resource.
pub fn is_definition(def: &ResourceDef) -> bool {
    def.group == GROUP && def.plural == PLURAL
}

/// The admission step of every write (create, update, patch, status, scale, apply): a CRD is
/// defaulted and validated; an object of a resource with a schema is pruned, defaulted and
/// validated against it. 422 `Invalid` with one cause per problem. `old` is the stored object
/// an update replaces.
pub(crate) fn admit(
    def: &ResourceDef,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let causes = if is_definition(def) {
        definition::admit(obj, old)
    } else if let Some(schema) = &def.schema {
        let (causes, unknown) = schema::admit_reporting_unknown(schema, obj);
        report_unknown_fields(def, &unknown)?;
        causes
    } else {
        return Ok(());
    };
    if causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let list: Vec<(&str, String, String)> = causes
        .into_iter()
        .map(|c| (c.reason, c.field, c.message))
        .collect();
    Err(ApiError::invalid_causes(&def.kind, &def.group, name, &list))
}
