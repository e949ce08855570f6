//! The resources a server serves from its start, before any resource of a test or CRD is
//! registered; their registry indexes never change.

use crate::resources::{Registry, ResourceDef};

/// core/v1 pods (with status), configmaps, namespaces (with status), events and services
/// (with status);
/// `coordination.k8s.io/v1` leases and `coordination.k8s.io/v1beta1` leasecandidates
/// (coordinated leader election's candidates); `events.k8s.io/v1` events; `apps/v1` deployments (with
/// status and scale); the self reviews of `authorization.k8s.io/v1` and
/// `authentication.k8s.io/v1` (see [`authz`](crate::authz)). Short names and categories are
/// kube-apiserver's (`po`, `cm`, `ns`, `ev`, `deploy`; pods and deployments are in `all`).
pub(crate) fn registry() -> Registry {
    let mut r = Registry::default();
    r.register(
        ResourceDef::new("", "v1", "Pod", "pods", true)
            .with_status()
            .with_short_names(&["po"])
            .with_categories(&["all"]),
    );
    r.register(
        ResourceDef::new("", "v1", "ConfigMap", "configmaps", true)
            .with_short_names(&["cm"])
            .without_generation(),
    );
    r.register(
        ResourceDef::new("", "v1", "Namespace", "namespaces", false)
            .with_status()
            .with_short_names(&["ns"])
            .without_generation(),
    );
    r.register(
        ResourceDef::new("", "v1", "Event", "events", true)
            .with_short_names(&["ev"])
            .without_generation(),
    );
    r.register(
        ResourceDef::new("coordination.k8s.io", "v1", "Lease", "leases", true).without_generation(),
    );
    r.register(
        ResourceDef::new("events.k8s.io", "v1", "Event", "events", true)
            .with_short_names(&["ev"])
            .without_generation(),
    );
    r.register(
        ResourceDef::new("apps", "v1", "Deployment", "deployments", true)
            .with_status()
            .with_scale()
            .with_short_names(&["deploy"])
            .with_categories(&["all"]),
    );
    for d in crate::authz::reviews::defs() {
        r.register(d);
    }
    // Served so that `kubectl cluster-info` (which lists kube-system's Services) works.
    r.register(
        ResourceDef::new("", "v1", "Service", "services", true)
            .with_status()
            .with_short_names(&["svc"])
            .with_categories(&["all"])
            .without_generation(),
    );
    r.register(crate::crd::definition_resource());
    // Registered last, so that every resource above keeps its index.
    r.register(ResourceDef::new(
        "coordination.k8s.io",
        "v1beta1",
        "LeaseCandidate",
        "leasecandidates",
        true,
    ));
    r
}

/// The `MicroTime` fields of the built-in kinds (JSON pointers), which kube-apiserver decodes
/// strictly: six fractional digits and a zone, or a 400 (see [`crate::time::check_micro_time`]).
pub(crate) fn micro_time_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("coordination.k8s.io", "Lease") => &["/spec/acquireTime", "/spec/renewTime"],
        ("coordination.k8s.io", "LeaseCandidate") => &["/spec/pingTime", "/spec/renewTime"],
        ("" | "events.k8s.io", "Event") => &["/eventTime", "/series/lastObservedTime"],
        _ => &[],
    }
}
