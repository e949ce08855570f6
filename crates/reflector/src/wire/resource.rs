//! [`Resource`]: where a kind of object lives in the API (group, version, plural, scope).

/// The API groups kube-apiserver serves itself (Kubernetes 1.35), the aggregated
/// `metrics.k8s.io` excluded.
const BUILT_IN_GROUPS: &[&str] = &[
    "",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "apiregistration.k8s.io",
    "apps",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "events.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io",
    "networking.k8s.io",
    "node.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "resource.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "storagemigration.k8s.io",
];

/// The address of a resource type: `/api/v1/...` for the core group, `/apis/<group>/<version>/...`
/// otherwise; namespaced or cluster-scoped.
///
/// ```
/// use reflector::Resource;
/// let pods = Resource::namespaced("", "v1", "pods");
/// assert_eq!(pods.path(Some("default")), "/api/v1/namespaces/default/pods");
/// assert_eq!(pods.path(None), "/api/v1/pods");
/// let deploys = Resource::namespaced("apps", "v1", "deployments");
/// assert_eq!(deploys.path(Some("ns")), "/apis/apps/v1/namespaces/ns/deployments");
/// let nodes = Resource::cluster("", "v1", "nodes");
/// assert_eq!(nodes.path(Some("ignored")), "/api/v1/nodes");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Resource {
    /// API group (`""` for the core group).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource name (`pods`).
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
}

impl Resource {
    /// A namespaced resource.
    pub fn namespaced(group: &str, version: &str, plural: &str) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            plural: plural.into(),
            namespaced: true,
        }
    }

    /// A cluster-scoped resource.
    pub fn cluster(group: &str, version: &str, plural: &str) -> Self {
        Resource {
            namespaced: false,
            ..Resource::namespaced(group, version, plural)
        }
    }

    /// Whether the resource's group is one of kube-apiserver's own, whose kinds it can write in
    /// protobuf. An exact list, not a suffix: `snapshot.storage.k8s.io` and
    /// `gateway.networking.k8s.io` are custom resources (JSON only).
    ///
    /// ```
    /// use reflector::Resource;
    /// assert!(Resource::namespaced("apps", "v1", "deployments").is_built_in());
    /// assert!(!Resource::namespaced("gateway.networking.k8s.io", "v1", "gateways").is_built_in());
    /// ```
    pub fn is_built_in(&self) -> bool {
        BUILT_IN_GROUPS.contains(&self.group.as_str())
    }

    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The collection path, in `namespace` when the resource is namespaced and one is given (else
    /// across all namespaces).
    pub fn path(&self, namespace: Option<&str>) -> String {
        let mut p = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        if let Some(ns) = namespace.filter(|ns| self.namespaced && !ns.is_empty()) {
            p.push_str("/namespaces/");
            p.push_str(ns);
        }
        p.push('/');
        p.push_str(&self.plural);
        p
    }
}

/// The resource as client-go's `GroupResource` prints it, the name kubectl takes: the plural for
/// the core group (`pods`), `plural.group` otherwise (`deployments.apps`,
/// `widgets.example.com`). Errors and logs name a resource this way, never by a Rust type.
///
/// ```
/// use reflector::Resource;
/// assert_eq!(Resource::namespaced("", "v1", "pods").to_string(), "pods");
/// assert_eq!(
///     Resource::namespaced("example.com", "v1", "widgets").to_string(),
///     "widgets.example.com"
/// );
/// ```
impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.plural)
        } else {
            write!(f, "{}.{}", self.plural, self.group)
        }
    }
}

/// A Rust type that knows where its objects live in the API, the typed counterpart of
/// [`Resource`]: implemented for every `k8s_openapi` resource type (feature `k8s-openapi`), every
/// `Pb<T>` and `PbView<T>` (feature `k8s-pb`), and by a type of your own with five constants.
/// [`Api::namespaced`](crate::Api::namespaced) and [`Api::all`](crate::Api::all) take any of them.
///
/// ```
/// use reflector::{ApiResource, Resource};
/// struct Widget;
/// impl ApiResource for Widget {
///     const GROUP: &'static str = "example.com";
///     const VERSION: &'static str = "v1";
///     const KIND: &'static str = "Widget";
///     const PLURAL: &'static str = "widgets";
///     const NAMESPACED: bool = true;
/// }
/// assert_eq!(Resource::of::<Widget>().path(Some("ns")), "/apis/example.com/v1/namespaces/ns/widgets");
/// assert_eq!(Resource::of::<Widget>().api_version(), "example.com/v1");
/// ```
pub use crate::store_index::ApiResource;

impl Resource {
    /// The address of `T`'s objects.
    pub fn of<T: ApiResource>() -> Self {
        Resource {
            group: T::GROUP.into(),
            version: T::VERSION.into(),
            plural: T::PLURAL.into(),
            namespaced: T::NAMESPACED,
        }
    }
}
