//! Loading a [`ClusterConfig`] from kubeconfig files, merged as kubectl merges them.
//!
//! With several files (`KUBECONFIG=a:b`), the first file to define a cluster, user or context
//! name wins, and the first file to set `current-context` sets it. Relative paths in a file are
//! resolved against that file's directory.
//!
//! Every field kubectl knows is used, refused with an error naming it (a conflict such as
//! `certificate-authority` with `certificate-authority-data`, which client-go's validation
//! refuses too), or, when kubectl would not use it either (superseded by another credential,
//! a `password` without a `username`, OIDC's `extra-scopes`), a [`KubeconfigWarning`] naming it.
//! A field this loader does not know (a typo, a newer field), at any level down to a list entry
//! or an exec plugin's `env` entry, is a warning too. Warnings are logged and returned by
//! [`ClusterConfig::load_kubeconfig_files`]; they name fields, never their values. Only the
//! entries the chosen context uses are checked, as kubectl only reads those.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use secrecy::{SecretSlice, SecretString};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::config::{
    ClusterConfig, Credentials, ExecConfig, Impersonate, KubeconfigUser, OidcConfig,
};
use super::error::ConfigError;
use super::proxy::Proxy;

/// Fields a kubeconfig may hold that this loader ignores on purpose (no warning).
const IGNORED: &[&str] = &["extensions"];

/// Fields of a kubeconfig the loader did not use, by name.
type Other = BTreeMap<String, IgnoredAny>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct KubeconfigFile {
    #[serde(default)]
    current_context: Option<String>,
    #[serde(default)]
    clusters: Option<Vec<Named<Cluster>>>,
    #[serde(default)]
    contexts: Option<Vec<Named<Context>>>,
    #[serde(default)]
    users: Option<Vec<NamedUser>>,
    #[serde(flatten)]
    other: Other,
}

/// A list entry. Its fields are all optional to serde so that a missing one is reported by this
/// loader, naming the entry (`users[2].name`, `users[alice].user.exec.env[KEY].value`), rather
/// than by the parser as a bare ``missing field `name` `` and a line number.
#[derive(Deserialize)]
struct Named<T> {
    name: Option<String>,
    #[serde(alias = "cluster", alias = "context")]
    value: Option<T>,
    /// Keys beside `name` and the value (a typo such as `clustr`).
    #[serde(flatten)]
    other: Other,
}

/// One list entry: its name, its value and the names of the keys beside them.
type Entry<T> = (String, T, Vec<String>);

/// The name of the entry at `index` of the section `kind`; a missing one is an error naming the
/// entry by its position, as it has no name to be found by.
fn entry_name(name: Option<String>, kind: &str, index: usize) -> Result<String, ConfigError> {
    name.filter(|n| !n.is_empty()).ok_or_else(|| {
        field(
            format!("{kind}[{index}].name"),
            "missing (an entry is found by its name)",
        )
    })
}

impl<T> Named<T> {
    /// The entry at `index`; a missing name or value is an error naming `kind[name].inner`.
    fn required(self, kind: &str, index: usize, inner: &str) -> Result<Entry<T>, ConfigError> {
        let name = entry_name(self.name, kind, index)?;
        match self.value {
            Some(v) => Ok((name, v, self.other.into_keys().collect())),
            None => Err(field(format!("{kind}[{name}].{inner}"), "missing")),
        }
    }
}

#[derive(Deserialize)]
struct NamedUser {
    name: Option<String>,
    user: Option<User>,
    /// Keys beside `name` and `user` (a typo such as `usr`, which leaves the user empty).
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
    #[serde(default)]
    disable_compression: bool,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    #[serde(rename = "tokenFile")]
    token_file: Option<String>,
    client_certificate: Option<String>,
    client_certificate_data: Option<String>,
    client_key: Option<String>,
    client_key_data: Option<String>,
    username: Option<String>,
    password: Option<String>,
    // Boxed: most users have neither, and every user entry of every file is decoded (MAX_NODES).
    exec: Option<Box<Exec>>,
    auth_provider: Option<Box<AuthProvider>>,
    #[serde(rename = "as")]
    as_user: Option<String>,
    as_uid: Option<String>,
    as_groups: Option<Vec<String>>,
    as_user_extra: Option<BTreeMap<String, Vec<String>>>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Exec {
    api_version: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<EnvVar>>,
    install_hint: Option<String>,
    #[serde(default)]
    provide_cluster_info: bool,
    interactive_mode: Option<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
struct EnvVar {
    name: Option<String>,
    value: Option<String>,
    #[serde(flatten)]
    other: Other,
}

#[derive(Deserialize, Default)]
struct AuthProvider {
    name: Option<String>,
    #[serde(default)]
    config: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    other: Other,
}

/// A kubeconfig field that was present but not used: unknown to this loader (a typo, or a field
/// newer than it), or superseded by another (a token wins over an exec plugin, as in kubectl).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigWarning {
    /// Path of the field (`users[admin].user.foo`).
    pub field: String,
    /// Why it was not used.
    pub reason: String,
}

impl std::fmt::Display for KubeconfigWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "kubeconfig field {}: {}", self.field, self.reason)
    }
}

/// A configuration loaded from kubeconfig files, with the warnings about fields it did not use.
#[derive(Debug, Clone)]
pub struct KubeconfigLoad {
    /// The configuration of the chosen context.
    pub config: ClusterConfig,
    /// Fields present but not used (each also logged at WARN).
    pub warnings: Vec<KubeconfigWarning>,
}

/// Collects warnings for the entries in use.
#[derive(Default)]
struct Warnings(Vec<KubeconfigWarning>);

impl Warnings {
    fn unknown(&mut self, path: &str, other: &Other) {
        for name in other.keys().filter(|n| !IGNORED.contains(&n.as_str())) {
            self.0.push(KubeconfigWarning {
                field: format!("{path}.{name}"),
                reason: "not a field this library knows; ignored".into(),
            });
        }
    }

    fn ignored(&mut self, field: String, reason: impl Into<String>) {
        self.0.push(KubeconfigWarning {
            field,
            reason: reason.into(),
        });
    }
}

/// One entry with the file that defined it.
struct Defined<T> {
    value: T,
    dir: PathBuf,
    /// The file itself: where refreshed OIDC tokens of a user are written back.
    file: PathBuf,
    /// Keys of the list entry beside `name` and the value, warned about if the entry is used.
    entry_keys: Vec<String>,
}

impl<T> Defined<T> {
    /// Warns about the entry's unknown keys; `entry` is its path (`users[admin]`).
    fn warn_entry_keys(&self, entry: &str, warnings: &mut Warnings) {
        for key in &self.entry_keys {
            warnings.ignored(
                format!("{entry}.{key}"),
                "not a field of a list entry (only name and its value are); ignored",
            );
        }
    }
}

fn field(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

fn resolve(dir: &Path, p: &str) -> PathBuf {
    let path = PathBuf::from(p);
    if path.is_absolute() {
        path
    } else {
        dir.join(path)
    }
}

fn read(path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// PEM from `<name>-data` (base64) or the file `<name>`. Both at once is an error, as in
/// client-go's kubeconfig validation (`certificate-authority-data and certificate-authority are
/// both specified`): which of the two was meant is anyone's guess.
fn pem(
    dir: &Path,
    file: &Option<String>,
    data: &Option<String>,
    field_path: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, ConfigError> {
    let set = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
    if set(file) && set(data) {
        return Err(field(
            format!("{field_path}.{name}-data"),
            format!("cannot be set together with {name} (kubectl refuses both too)"),
        ));
    }
    if let Some(d) = data.as_deref().filter(|d| !d.is_empty()) {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| {
                field(
                    format!("{field_path}.{name}-data"),
                    format!("invalid base64: {e}"),
                )
            })?;
        return Ok(Some(bytes));
    }
    match file.as_deref().filter(|f| !f.is_empty()) {
        Some(f) => read(&resolve(dir, f)).map(Some),
        None => Ok(None),
    }
}

/// Bound on one kubeconfig file's size (64 MiB): a larger file is refused with a
/// [`ConfigError::Io`] of kind [`FileTooLarge`](std::io::ErrorKind::FileTooLarge), read no
/// further. kubectl has no such bound; this one, with a bound on YAML nodes, is what keeps the
/// memory a file can cost bounded. A file of 20,000 clusters, contexts and token users is about
/// 3 MiB, and 64 MiB holds 10,000 users that each carry a client certificate and key; a file
/// larger than that is `/dev/zero`, a log named by mistake, or an attack.
pub const MAX_KUBECONFIG_BYTES: u64 = 64 << 20;

/// Bound on the YAML nodes (mappings, sequences, scalars) of one file, aliases' expansions
/// included. serde-saphyr's default (250,000) refused a file of 12,000 entries in each section
/// (kubectl writes about 27 nodes for a cluster, a context and a user); this one takes 37,000
/// in each. A node can cost a few hundred bytes once decoded (a 10-byte `{user: {}}` allocates
/// a whole user), so this bound, not the file size, caps the decoded structures: a file of
/// 333,000 such entries, the worst case, peaked at 157 MB (release build, measured through
/// `VmHWM`). The scalar text is capped apart, by serde-saphyr's 64 MiB of scalar bytes, which
/// counts what aliases replay too.
const MAX_NODES: usize = 1_000_000;

/// Reads a kubeconfig file, refusing one larger than [`MAX_KUBECONFIG_BYTES`] without reading
/// more than that (a FIFO or a device has no trustworthy size).
pub(crate) fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let mut text = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_KUBECONFIG_BYTES + 1)
        .read_to_end(&mut text)?;
    if text.len() as u64 > MAX_KUBECONFIG_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "larger than the {} MiB a kubeconfig may be",
                MAX_KUBECONFIG_BYTES >> 20
            ),
        ));
    }
    Ok(text)
}

/// How a kubeconfig file is parsed: serde-saphyr's default budget but for the node and event
/// counts, raised as far as [`MAX_NODES`] keeps the decoded file's memory bounded; the alias
/// limits (count, ratio to anchors, replayed events) stay serde-saphyr's, so an alias bomb is
/// still a breach. No snippet of the input in errors: a kubeconfig holds secrets.
pub(crate) fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_nodes: MAX_NODES,
            // Every node is at most two events (a collection's start and end).
            max_events: 2 * MAX_NODES,
        },
    }
}

/// Parses one kubeconfig file. The parser's message keeps its words and position but neither a
/// snippet of the input nor the values it quotes: a kubeconfig holds tokens and keys.
fn parse(path: &Path, text: &[u8]) -> Result<KubeconfigFile, ConfigError> {
    if text.iter().all(u8::is_ascii_whitespace) {
        return Ok(KubeconfigFile::default());
    }
    serde_saphyr::from_slice_with_options(text, yaml_options()).map_err(|e| ConfigError::Yaml {
        path: path.to_path_buf(),
        reason: crate::wire::snippet::redact_quoted(&e.to_string()),
    })
}

/// Adds the entries not yet defined, remembering the file that defined them.
fn merge<T>(
    into: &mut Vec<(String, Defined<T>)>,
    entries: impl IntoIterator<Item = Result<Entry<T>, ConfigError>>,
    file: &Path,
    dir: &Path,
) -> Result<(), ConfigError> {
    for entry in entries {
        let (name, value, entry_keys) = entry?;
        if !into.iter().any(|(n, _)| *n == name) {
            let dir = dir.to_path_buf();
            into.push((
                name,
                Defined {
                    value,
                    dir,
                    file: file.to_path_buf(),
                    entry_keys,
                },
            ));
        }
    }
    Ok(())
}

impl ClusterConfig {
    /// Loads the kubeconfig named by `KUBECONFIG` (several files separated by `:`), else
    /// `~/.kube/config`, using `context` or the current context. Warnings about unused fields
    /// are logged; [`load_kubeconfig_files`](Self::load_kubeconfig_files) returns them.
    pub fn from_kubeconfig(context: Option<&str>) -> Result<Self, ConfigError> {
        Self::from_kubeconfig_files(&Self::kubeconfig_paths()?, context)
    }

    /// The kubeconfig files kubectl would read: those of `KUBECONFIG` (split as the platform
    /// splits `PATH`, empty entries skipped), else `~/.kube/config`.
    pub fn kubeconfig_paths() -> Result<Vec<PathBuf>, ConfigError> {
        match std::env::var_os("KUBECONFIG") {
            Some(v) if !v.is_empty() => Ok(std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()),
            _ => {
                let home = std::env::var_os("HOME")
                    .ok_or_else(|| field("KUBECONFIG", "neither KUBECONFIG nor HOME is set"))?;
                Ok(vec![PathBuf::from(home).join(".kube").join("config")])
            }
        }
    }

    /// Loads and merges these kubeconfig files (missing files are skipped, as kubectl does, unless
    /// none exists), using `context` or the current context. Warnings are logged.
    pub fn from_kubeconfig_files(
        paths: &[PathBuf],
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        Self::load_kubeconfig_files(paths, context).map(|load| load.config)
    }

    /// [`from_kubeconfig_files`](Self::from_kubeconfig_files), returning the warnings too.
    ///
    /// ```no_run
    /// # fn main() -> Result<(), reflector::ConfigError> {
    /// let paths = reflector::ClusterConfig::kubeconfig_paths()?;
    /// let load = reflector::ClusterConfig::load_kubeconfig_files(&paths, None)?;
    /// for warning in &load.warnings {
    ///     eprintln!("{warning}");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn load_kubeconfig_files(
        paths: &[PathBuf],
        context: Option<&str>,
    ) -> Result<KubeconfigLoad, ConfigError> {
        let mut current: Option<String> = None;
        let mut clusters: Vec<(String, Defined<Cluster>)> = Vec::new();
        let mut contexts: Vec<(String, Defined<Context>)> = Vec::new();
        let mut users: Vec<(String, Defined<User>)> = Vec::new();
        let mut warnings = Warnings::default();
        let mut found = false;
        for path in paths {
            let text = match read_bounded(path) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && paths.len() > 1 => continue,
                Err(source) => {
                    return Err(ConfigError::Io {
                        path: path.clone(),
                        source,
                    })
                }
            };
            found = true;
            let file = parse(path, &text)?;
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            for name in file.other.keys() {
                if !matches!(
                    name.as_str(),
                    "apiVersion" | "kind" | "preferences" | "extensions"
                ) {
                    warnings.ignored(
                        format!("{}: {name}", path.display()),
                        "not a field this library knows; ignored",
                    );
                }
            }
            if current.is_none() {
                current = file.current_context.filter(|c| !c.is_empty());
            }
            let cs = file.clusters.unwrap_or_default().into_iter().enumerate();
            merge(
                &mut clusters,
                cs.map(|(i, c)| c.required("clusters", i, "cluster")),
                path,
                &dir,
            )?;
            let cs = file.contexts.unwrap_or_default().into_iter().enumerate();
            merge(
                &mut contexts,
                cs.map(|(i, c)| c.required("contexts", i, "context")),
                path,
                &dir,
            )?;
            let us = file.users.unwrap_or_default().into_iter().enumerate();
            merge(
                &mut users,
                us.map(|(i, u)| {
                    let name = entry_name(u.name, "users", i)?;
                    let keys = u.other.into_keys().collect();
                    Ok((name, u.user.unwrap_or_default(), keys))
                }),
                path,
                &dir,
            )?;
        }
        if !found {
            return Err(field("KUBECONFIG", "no kubeconfig file exists"));
        }
        let ctx_name = match context {
            Some(c) => c.to_string(),
            None => current
                .ok_or_else(|| field("current-context", "not set and no context was named"))?,
        };
        let ctx_entry = &contexts
            .iter()
            .find(|(n, _)| *n == ctx_name)
            .ok_or_else(|| field(format!("contexts[{ctx_name}]"), "no such context"))?
            .1;
        ctx_entry.warn_entry_keys(&format!("contexts[{ctx_name}]"), &mut warnings);
        let ctx = &ctx_entry.value;
        warnings.unknown(&format!("contexts[{ctx_name}].context"), &ctx.other);
        let cluster_name = ctx
            .cluster
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| field(format!("contexts[{ctx_name}].context.cluster"), "missing"))?;
        let cluster = clusters
            .iter()
            .find(|(n, _)| n == cluster_name)
            .map(|(_, d)| d)
            .ok_or_else(|| {
                field(
                    format!("contexts[{ctx_name}].context.cluster"),
                    format!("no cluster named {cluster_name:?}"),
                )
            })?;
        cluster.warn_entry_keys(&format!("clusters[{cluster_name}]"), &mut warnings);
        let cpath = format!("clusters[{cluster_name}].cluster");
        let mut config = apply_cluster(cluster, &cpath, &mut warnings)?;
        if let Some(ns) = ctx.namespace.as_deref().filter(|n| !n.is_empty()) {
            config.default_namespace = ns.to_string();
        }
        if let Some(user_name) = ctx.user.as_deref().filter(|u| !u.is_empty()) {
            let user = users
                .iter()
                .find(|(n, _)| n == user_name)
                .map(|(_, d)| d)
                .ok_or_else(|| {
                    field(
                        format!("contexts[{ctx_name}].context.user"),
                        format!("no user named {user_name:?}"),
                    )
                })?;
            user.warn_entry_keys(&format!("users[{user_name}]"), &mut warnings);
            let upath = format!("users[{user_name}].user");
            apply_user(&mut config, user, &upath, &mut warnings)?;
            if let Credentials::Oidc(oidc) = &mut config.credentials {
                // As kubectl: refreshed tokens go back to the file that defined the user.
                oidc.write_back = Some(KubeconfigUser {
                    path: user.file.clone(),
                    name: user_name.to_string(),
                });
            }
        }
        for w in &warnings.0 {
            tracing::warn!(field = %w.field, "kubeconfig: {}", w.reason);
        }
        Ok(KubeconfigLoad {
            config,
            warnings: warnings.0,
        })
    }
}

fn apply_cluster(
    cluster: &Defined<Cluster>,
    cpath: &str,
    warnings: &mut Warnings,
) -> Result<ClusterConfig, ConfigError> {
    let c = &cluster.value;
    warnings.unknown(cpath, &c.other);
    let server = c
        .server
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| field(format!("{cpath}.server"), "missing"))?;
    let mut config =
        ClusterConfig::new(server).map_err(|e| field(format!("{cpath}.server"), e.to_string()))?;
    config.certificate_authority = pem(
        &cluster.dir,
        &c.certificate_authority,
        &c.certificate_authority_data,
        cpath,
        "certificate-authority",
    )?;
    config.insecure_skip_tls_verify = c.insecure_skip_tls_verify;
    if config.insecure_skip_tls_verify && config.certificate_authority.is_some() {
        // kubectl refuses the combination: which of the two was meant is anyone's guess.
        return Err(field(
            format!("{cpath}.insecure-skip-tls-verify"),
            "cannot be set together with certificate-authority",
        ));
    }
    config.tls_server_name = c.tls_server_name.clone().filter(|n| !n.is_empty());
    if let Some(proxy) = c.proxy_url.as_deref().filter(|p| !p.is_empty()) {
        // The value may hold a password: the error names the field, never the value.
        let url = url::Url::parse(proxy)
            .map_err(|e| field(format!("{cpath}.proxy-url"), format!("not a URL: {e}")))?;
        config.proxy = Proxy::Url(url);
    }
    config.compression = !c.disable_compression;
    Ok(config)
}

fn apply_user(
    config: &mut ClusterConfig,
    user: &Defined<User>,
    upath: &str,
    warnings: &mut Warnings,
) -> Result<(), ConfigError> {
    let u = &user.value;
    warnings.unknown(upath, &u.other);
    config.client_certificate = pem(
        &user.dir,
        &u.client_certificate,
        &u.client_certificate_data,
        upath,
        "client-certificate",
    )?;
    config.client_key = pem(
        &user.dir,
        &u.client_key,
        &u.client_key_data,
        upath,
        "client-key",
    )?
    .map(SecretSlice::from);
    match (&config.client_certificate, &config.client_key) {
        (Some(_), None) => {
            return Err(field(
                format!("{upath}.client-key"),
                "missing while client-certificate is set",
            ))
        }
        (None, Some(_)) => {
            return Err(field(
                format!("{upath}.client-certificate"),
                "missing while client-key is set",
            ))
        }
        _ => {}
    }
    config.impersonate = impersonation(u, upath)?;
    let token = u.token.as_deref().filter(|t| !t.is_empty());
    let token_file = u.token_file.as_deref().filter(|f| !f.is_empty());
    let basic = u.username.as_deref().filter(|n| !n.is_empty());
    let password = u.password.as_deref().filter(|p| !p.is_empty());
    if token.is_some() || token_file.is_some() {
        // As client-go ("more than one authentication method"): a user name or a password
        // beside a token, and which of the two was meant is anyone's guess.
        if basic.is_some() {
            return Err(field(
                format!("{upath}.username"),
                "cannot be set together with a bearer token",
            ));
        }
        if password.is_some() {
            return Err(field(
                format!("{upath}.password"),
                "cannot be set together with a bearer token",
            ));
        }
    }
    if basic.is_none() && password.is_some() {
        // client-go's transport sends basic auth only with a user name: the password goes unused.
        warnings.ignored(
            format!("{upath}.password"),
            "not used: username is not set (kubectl ignores it too)",
        );
    }
    if u.exec.is_some() && u.auth_provider.is_some() {
        return Err(field(
            format!("{upath}.exec"),
            "cannot be set together with auth-provider",
        ));
    }
    // client-go's order: a token, a token file, basic auth or a client certificate make the exec
    // plugin and the auth provider unused.
    let static_credential = if token.is_some() {
        Some("token")
    } else if token_file.is_some() {
        Some("tokenFile")
    } else if basic.is_some() {
        Some("username")
    } else if config.client_certificate.is_some() {
        Some("client-certificate")
    } else {
        None
    };
    if let Some(by) = static_credential {
        if u.exec.is_some() {
            warnings.ignored(format!("{upath}.exec"), format!("not used: {by} is set"));
        }
        if u.auth_provider.is_some() {
            warnings.ignored(
                format!("{upath}.auth-provider"),
                format!("not used: {by} is set"),
            );
        }
    }
    if token.is_some() && token_file.is_some() {
        warnings.ignored(format!("{upath}.tokenFile"), "not used: token is set");
    }
    config.credentials = if let Some(t) = token {
        Credentials::Token(t.into())
    } else if let Some(f) = token_file {
        Credentials::TokenFile(resolve(&user.dir, f))
    } else if let Some(username) = basic {
        if password.is_none() {
            // client-go sends the user name with an empty password; so does this, but says so.
            warnings.ignored(
                format!("{upath}.password"),
                "missing: basic authentication is sent with an empty password, as kubectl sends it",
            );
        }
        Credentials::Basic {
            username: username.to_string(),
            password: password.unwrap_or_default().into(),
        }
    } else if static_credential.is_some() {
        Credentials::None
    } else if let Some(exec) = &u.exec {
        Credentials::Exec(exec_config(exec, &user.dir, upath, warnings)?)
    } else if let Some(provider) = &u.auth_provider {
        Credentials::Oidc(oidc_config(provider, &user.dir, upath, warnings)?)
    } else {
        Credentials::None
    };
    Ok(())
}

fn impersonation(u: &User, upath: &str) -> Result<Option<Impersonate>, ConfigError> {
    let groups = u.as_groups.clone().unwrap_or_default();
    let extra = u.as_user_extra.clone().unwrap_or_default();
    let uid = u.as_uid.clone().filter(|s| !s.is_empty());
    match u.as_user.as_deref().filter(|s| !s.is_empty()) {
        Some(user) => Ok(Some(Impersonate {
            user: user.to_string(),
            uid,
            groups,
            extra,
        })),
        None if !groups.is_empty() || !extra.is_empty() || uid.is_some() => Err(field(
            format!("{upath}.as"),
            "missing while as-groups, as-uid or as-user-extra is set (the server needs the user to impersonate)",
        )),
        None => Ok(None),
    }
}

fn exec_config(
    exec: &Exec,
    dir: &Path,
    upath: &str,
    warnings: &mut Warnings,
) -> Result<ExecConfig, ConfigError> {
    let epath = format!("{upath}.exec");
    warnings.unknown(&epath, &exec.other);
    let command = exec
        .command
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| field(format!("{epath}.command"), "missing"))?;
    let api_version = exec
        .api_version
        .clone()
        .ok_or_else(|| field(format!("{epath}.apiVersion"), "missing"))?;
    if !api_version.starts_with("client.authentication.k8s.io/") {
        return Err(field(
            format!("{epath}.apiVersion"),
            format!("unsupported {api_version:?}"),
        ));
    }
    match exec.interactive_mode.as_deref() {
        None | Some("Never") | Some("IfAvailable") => {}
        Some("Always") => {
            return Err(field(
                format!("{epath}.interactiveMode"),
                "Always needs a terminal for the plugin, which a controller does not give it",
            ))
        }
        Some(other) => {
            return Err(field(
                format!("{epath}.interactiveMode"),
                format!("{other:?} is not Never, IfAvailable or Always"),
            ))
        }
    }
    let command = if command.contains('/') {
        resolve(dir, command)
    } else {
        PathBuf::from(command)
    };
    let mut env = Vec::new();
    for (i, var) in exec.env.iter().flatten().enumerate() {
        // As client-go's validation: a variable needs a name.
        let name = var
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| field(format!("{epath}.env[{i}].name"), "missing"))?;
        let vpath = format!("{epath}.env[{name}]");
        // client-go's `ExecEnvVar` requires both; a variable without a value is a typo more often
        // than a wish for an empty one.
        let value = var
            .value
            .clone()
            .ok_or_else(|| field(format!("{vpath}.value"), "missing"))?;
        warnings.unknown(&vpath, &var.other);
        env.push((name, value));
    }
    Ok(ExecConfig {
        command,
        args: exec.args.clone().unwrap_or_default(),
        env,
        api_version,
        install_hint: exec.install_hint.clone().filter(|h| !h.is_empty()),
        provide_cluster_info: exec.provide_cluster_info,
        ..ExecConfig::default()
    })
}

fn oidc_config(
    provider: &AuthProvider,
    dir: &Path,
    upath: &str,
    warnings: &mut Warnings,
) -> Result<OidcConfig, ConfigError> {
    let apath = format!("{upath}.auth-provider");
    let name = provider.name.as_deref().unwrap_or_default();
    if name != "oidc" {
        let advice = match name {
            "gcp" => {
                "it was removed from client-go in 1.26; use the exec plugin gke-gcloud-auth-plugin"
            }
            "azure" => "it was removed from client-go in 1.26; use the exec plugin kubelogin",
            "" => "the provider has no name",
            _ => "only oidc is supported; use an exec credential plugin",
        };
        return Err(field(
            format!("{apath}.name"),
            format!("auth-provider {name:?} is not supported: {advice}"),
        ));
    }
    warnings.unknown(&apath, &provider.other);
    let cfg = provider.config.clone().unwrap_or_default();
    let get = |key: &str| cfg.get(key).filter(|v| !v.is_empty()).cloned();
    for key in cfg.keys() {
        if !matches!(
            key.as_str(),
            "client-id"
                | "client-secret"
                | "id-token"
                | "refresh-token"
                | "idp-issuer-url"
                | "idp-certificate-authority"
                | "idp-certificate-authority-data"
                | "extra-scopes"
        ) {
            warnings.ignored(
                format!("{apath}.config.{key}"),
                "not a field this library knows; ignored",
            );
        }
    }
    let cpath = format!("{apath}.config");
    if get("extra-scopes").is_some() {
        // client-go's oidc plugin logs it as deprecated: refresh requests send no scopes.
        warnings.ignored(
            format!("{cpath}.extra-scopes"),
            "not used: refresh requests send no scopes (deprecated in client-go, which ignores it too)",
        );
    }
    let mut ca_file = get("idp-certificate-authority");
    if ca_file.is_some() && get("idp-certificate-authority-data").is_some() {
        // client-go's transport reads the data and never opens the file.
        warnings.ignored(
            format!("{cpath}.idp-certificate-authority"),
            "not used: idp-certificate-authority-data is set",
        );
        ca_file = None;
    }
    let issuer =
        get("idp-issuer-url").ok_or_else(|| field(format!("{cpath}.idp-issuer-url"), "missing"))?;
    let issuer_url = url::Url::parse(&issuer)
        .map_err(|e| field(format!("{cpath}.idp-issuer-url"), e.to_string()))?;
    if !matches!(issuer_url.scheme(), "https" | "http") {
        return Err(field(
            format!("{cpath}.idp-issuer-url"),
            "scheme must be https or http",
        ));
    }
    let client_id =
        get("client-id").ok_or_else(|| field(format!("{cpath}.client-id"), "missing"))?;
    let id_token = get("id-token").map(SecretString::from);
    let refresh_token = get("refresh-token").map(SecretString::from);
    if id_token.is_none() && refresh_token.is_none() {
        return Err(field(
            format!("{cpath}.id-token"),
            "missing, and there is no refresh-token to get one",
        ));
    }
    Ok(OidcConfig {
        issuer_url,
        client_id,
        client_secret: get("client-secret").map(SecretString::from),
        id_token,
        refresh_token,
        issuer_certificate_authority: pem(
            dir,
            &ca_file,
            &get("idp-certificate-authority-data"),
            &cpath,
            "idp-certificate-authority",
        )?,
        write_back: None,
    })
}
