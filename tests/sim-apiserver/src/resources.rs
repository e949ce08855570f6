//! The registry of served resources (group, version, kind, plural, scope).

/// One served resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group (`""` for core).
    pub group: String,
    /// API version (`v1`).
    pub version: String,
    /// Kind (`Pod`).
    pub kind: String,
    /// Plural resource name (`pods`).
    pub plural: String,
    /// Whether the resource lives in namespaces.
    pub namespaced: bool,
    /// Whether it has a `status` subresource ([`ResourceDef::with_status`]): then writes to the
    /// main resource keep the stored `.status`, and `.../{name}/status` writes change only it.
    pub status_subresource: bool,
    /// Its `scale` subresource, if any ([`ResourceDef::with_scale`]).
    pub scale: Option<ScaleDef>,
    /// Short names discovery advertises (`po` for pods), so that `kubectl get po` resolves.
    pub short_names: Vec<String>,
    /// Categories discovery advertises (`all`), so that `kubectl get all` includes it.
    pub categories: Vec<String>,
    /// The OpenAPI v3 schema of the object (a CustomResourceDefinition's
    /// `openAPIV3Schema`), when the resource has one of its own; built-in kinds take theirs
    /// from the OpenAPI module instead.
    pub schema: Option<std::sync::Arc<serde_json::Value>>,
    /// Whether its objects carry `metadata.generation` (default true). kube-apiserver's
    /// strategies set it only for kinds with a spec a controller acts on: not ConfigMaps,
    /// Namespaces, Services, Events or Leases ([`ResourceDef::without_generation`]).
    pub generation: bool,
}

/// Where a resource's `scale` subresource finds its numbers (JSON pointers into the object),
/// as a CustomResourceDefinition's `subresources.scale` declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleDef {
    /// The desired replicas (`/spec/replicas`).
    pub spec_replicas: String,
    /// The observed replicas (`/status/replicas`).
    pub status_replicas: String,
    /// The label selector: a string (`/status/selector`), or else a `LabelSelector` object
    /// (`/spec/selector`) whose `matchLabels` are written as `k=v,..`.
    pub selector: Vec<String>,
}

impl Default for ScaleDef {
    fn default() -> Self {
        Self {
            spec_replicas: "/spec/replicas".into(),
            status_replicas: "/status/replicas".into(),
            selector: vec!["/status/selector".into(), "/spec/selector".into()],
        }
    }
}

impl ResourceDef {
    /// A new resource definition.
    pub fn new(group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced,
            status_subresource: false,
            scale: None,
            short_names: Vec::new(),
            categories: Vec::new(),
            schema: None,
            generation: true,
        }
    }

    /// Its objects carry no `metadata.generation` (see [`ResourceDef::generation`]).
    pub fn without_generation(mut self) -> Self {
        self.generation = false;
        self
    }

    /// Sets the short names discovery advertises (`["po"]`).
    pub fn with_short_names(mut self, names: &[&str]) -> Self {
        self.short_names = names.iter().map(|n| n.to_string()).collect();
        self
    }

    /// Sets the categories discovery advertises (`["all"]`).
    pub fn with_categories(mut self, categories: &[&str]) -> Self {
        self.categories = categories.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Sets the object's OpenAPI v3 schema (see [`ResourceDef::schema`]). Writes are then
    /// pruned, defaulted and validated against it (a structural schema), as those of a
    /// CustomResourceDefinition's resource are.
    pub fn with_schema(mut self, schema: serde_json::Value) -> Self {
        self.schema = Some(std::sync::Arc::new(schema));
        self
    }

    /// Gives the resource a `status` subresource (`{plural}/status` in discovery).
    pub fn with_status(mut self) -> Self {
        self.status_subresource = true;
        self
    }

    /// Gives the resource a `scale` subresource (`{plural}/scale`, an `autoscaling/v1`
    /// `Scale`) with replicas at `spec.replicas` / `status.replicas` and the selector from
    /// `status.selector` or `spec.selector`.
    pub fn with_scale(self) -> Self {
        self.with_scale_def(ScaleDef::default())
    }

    /// Gives the resource a `scale` subresource reading its numbers where `scale` says.
    pub fn with_scale_def(mut self, scale: ScaleDef) -> Self {
        self.scale = Some(scale);
        self
    }

    /// `apiVersion` as written in objects (`v1`, `example.com/v1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The kind of this resource's list (`PodList`).
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Singular lower-case name (`pod`).
    pub fn singular(&self) -> String {
        self.kind.to_lowercase()
    }

    /// Whether this is a built-in resource (the core group or one of kube-apiserver's own
    /// groups, such as `apps` or `coordination.k8s.io`) rather than a custom one: the items
    /// of its lists carry no `kind`/`apiVersion`.
    pub fn is_core(&self) -> bool {
        const BUILTIN_GROUPS: &[&str] = &[
            "",
            "apps",
            "authentication.k8s.io",
            "authorization.k8s.io",
            "batch",
            "autoscaling",
            "policy",
            "coordination.k8s.io",
            "events.k8s.io",
            "discovery.k8s.io",
            "networking.k8s.io",
            "rbac.authorization.k8s.io",
            "storage.k8s.io",
            "apiextensions.k8s.io",
        ];
        BUILTIN_GROUPS.contains(&self.group.as_str())
    }
}

/// The set of served resources; index positions are stable, also across
/// [`Registry::unregister`] (a CustomResourceDefinition deleted), so that the store's objects
/// of other resources keep their slots.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    /// Every resource ever registered, by index (unregistered ones too).
    defs: Vec<ResourceDef>,
    /// Which of `defs` are unregistered.
    gone: Vec<bool>,
    /// The served ones, in index order: what [`Registry::all`] lends.
    served: Vec<ResourceDef>,
}

impl Registry {
    /// Registers a resource (replacing one with the same group/version/plural, served or
    /// unregistered); returns its index.
    pub fn register(&mut self, def: ResourceDef) -> usize {
        let i = match self.defs.iter().position(|d| {
            d.group == def.group && d.version == def.version && d.plural == def.plural
        }) {
            Some(i) => {
                self.defs[i] = def;
                self.gone[i] = false;
                i
            }
            None => {
                self.defs.push(def);
                self.gone.push(false);
                self.defs.len() - 1
            }
        };
        self.refresh();
        i
    }

    /// Stops serving the resource at `idx` (its index stays reserved for it).
    pub fn unregister(&mut self, idx: usize) {
        if let Some(g) = self.gone.get_mut(idx) {
            *g = true;
            self.refresh();
        }
    }

    fn refresh(&mut self) {
        self.served = self
            .defs
            .iter()
            .zip(&self.gone)
            .filter(|(_, gone)| !**gone)
            .map(|(d, _)| d.clone())
            .collect();
    }

    /// Index of the served resource.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.position(|d| d.group == group && d.version == version && d.plural == plural)
    }

    /// Index of the first served resource matching `pred`.
    pub fn position(&self, pred: impl Fn(&ResourceDef) -> bool) -> Option<usize> {
        self.defs
            .iter()
            .zip(&self.gone)
            .position(|(d, gone)| !*gone && pred(d))
    }

    /// The resource at an index (also after it was unregistered).
    pub fn get(&self, idx: usize) -> &ResourceDef {
        &self.defs[idx]
    }

    /// All served resources.
    pub fn all(&self) -> &[ResourceDef] {
        &self.served
    }

    /// The (group, versions) pairs that are not core, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.served.iter().filter(|d| !d.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == d.group) {
                Some((_, vs)) => {
                    if !vs.contains(&d.version) {
                        vs.push(d.version.clone())
                    }
                }
                None => out.push((d.group.clone(), vec![d.version.clone()])),
            }
        }
        out
    }
}
