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
        }
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

    /// Whether this is a built-in (core) resource rather than a custom one.
    pub fn is_core(&self) -> bool {
        self.group.is_empty()
    }
}

/// The set of served resources; index positions are stable.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    defs: Vec<ResourceDef>,
}

impl Registry {
    /// core/v1 pods, configmaps and namespaces.
    pub fn builtin() -> Self {
        let mut r = Self::default();
        r.register(ResourceDef::new("", "v1", "Pod", "pods", true));
        r.register(ResourceDef::new("", "v1", "ConfigMap", "configmaps", true));
        r.register(ResourceDef::new("", "v1", "Namespace", "namespaces", false));
        r
    }

    /// Registers a resource (replacing one with the same group/version/plural); returns its index.
    pub fn register(&mut self, def: ResourceDef) -> usize {
        if let Some(i) = self.find(&def.group, &def.version, &def.plural) {
            self.defs[i] = def;
            return i;
        }
        self.defs.push(def);
        self.defs.len() - 1
    }

    /// Index of the resource.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.defs
            .iter()
            .position(|d| d.group == group && d.version == version && d.plural == plural)
    }

    /// The resource at an index.
    pub fn get(&self, idx: usize) -> &ResourceDef {
        &self.defs[idx]
    }

    /// All resources.
    pub fn all(&self) -> &[ResourceDef] {
        &self.defs
    }

    /// The (group, versions) pairs that are not core, in registration order.
    pub fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for d in self.defs.iter().filter(|d| !d.group.is_empty()) {
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
