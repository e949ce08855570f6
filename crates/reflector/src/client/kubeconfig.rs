//! Loading a [`ClusterConfig`] from kubeconfig files, merged as kubectl merges them.
//!
//! With several files (`KUBECONFIG=a:b`), the first file to define a cluster, user or context
//! name wins, and the first file to set `current-context` sets it. Relative paths in a file are
//! resolved against that file's directory.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use secrecy::SecretSlice;
use serde::Deserialize;

use super::config::{ClusterConfig, Credentials, ExecConfig};
use super::error::ConfigError;

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
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "context")]
    value: Option<T>,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    user: Option<User>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: Option<String>,
    certificate_authority: Option<String>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
}

#[derive(Deserialize, Default, Clone)]
struct Context {
    cluster: Option<String>,
    user: Option<String>,
    namespace: Option<String>,
}

#[derive(Deserialize, Default, Clone)]
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
    exec: Option<Exec>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "camelCase")]
struct Exec {
    api_version: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Option<Vec<String>>,
    #[serde(default)]
    env: Option<Vec<EnvVar>>,
}

#[derive(Deserialize, Default, Clone)]
struct EnvVar {
    name: String,
    value: String,
}

/// One entry with the directory of the file that defined it.
struct Defined<T> {
    value: T,
    dir: PathBuf,
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

/// PEM from `<name>-data` (base64) or the file `<name>`.
fn pem(
    dir: &Path,
    file: &Option<String>,
    data: &Option<String>,
    field_path: &str,
    name: &str,
) -> Result<Option<Vec<u8>>, ConfigError> {
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

impl ClusterConfig {
    /// Loads the kubeconfig named by `KUBECONFIG` (several files separated by `:`), else
    /// `~/.kube/config`, using `context` or the current context.
    pub fn from_kubeconfig(context: Option<&str>) -> Result<Self, ConfigError> {
        let paths: Vec<PathBuf> = match std::env::var_os("KUBECONFIG") {
            Some(v) if !v.is_empty() => std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect(),
            _ => {
                let home = std::env::var_os("HOME")
                    .ok_or_else(|| field("KUBECONFIG", "neither KUBECONFIG nor HOME is set"))?;
                vec![PathBuf::from(home).join(".kube").join("config")]
            }
        };
        Self::from_kubeconfig_files(&paths, context)
    }

    /// Loads and merges these kubeconfig files (missing files are skipped, as kubectl does, unless
    /// none exists), using `context` or the current context.
    pub fn from_kubeconfig_files(
        paths: &[PathBuf],
        context: Option<&str>,
    ) -> Result<Self, ConfigError> {
        let mut current: Option<String> = None;
        let mut clusters: Vec<(String, Defined<Cluster>)> = Vec::new();
        let mut contexts: Vec<(String, Defined<Context>)> = Vec::new();
        let mut users: Vec<(String, Defined<User>)> = Vec::new();
        let mut found = false;
        for path in paths {
            let text = match std::fs::read(path) {
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
            let file: KubeconfigFile = if text.iter().all(u8::is_ascii_whitespace) {
                KubeconfigFile::default()
            } else {
                serde_yaml::from_slice(&text).map_err(|source| ConfigError::Yaml {
                    path: path.clone(),
                    reason: super::error::redact_quoted(&source.to_string()),
                })?
            };
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            if current.is_none() {
                current = file.current_context.filter(|c| !c.is_empty());
            }
            for c in file.clusters.unwrap_or_default() {
                if !clusters.iter().any(|(n, _)| *n == c.name) {
                    let value = c
                        .value
                        .ok_or_else(|| field(format!("clusters[{}].cluster", c.name), "missing"))?;
                    clusters.push((
                        c.name,
                        Defined {
                            value,
                            dir: dir.clone(),
                        },
                    ));
                }
            }
            for c in file.contexts.unwrap_or_default() {
                if !contexts.iter().any(|(n, _)| *n == c.name) {
                    let value = c
                        .value
                        .ok_or_else(|| field(format!("contexts[{}].context", c.name), "missing"))?;
                    contexts.push((
                        c.name,
                        Defined {
                            value,
                            dir: dir.clone(),
                        },
                    ));
                }
            }
            for u in file.users.unwrap_or_default() {
                if !users.iter().any(|(n, _)| *n == u.name) {
                    users.push((
                        u.name,
                        Defined {
                            value: u.user.unwrap_or_default(),
                            dir: dir.clone(),
                        },
                    ));
                }
            }
        }
        if !found {
            return Err(field("KUBECONFIG", "no kubeconfig file exists"));
        }
        let ctx_name = match context {
            Some(c) => c.to_string(),
            None => current
                .ok_or_else(|| field("current-context", "not set and no context was named"))?,
        };
        let ctx = &contexts
            .iter()
            .find(|(n, _)| *n == ctx_name)
            .ok_or_else(|| field(format!("contexts[{ctx_name}]"), "no such context"))?
            .1
            .value;
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
        let cpath = format!("clusters[{cluster_name}].cluster");
        let server = cluster
            .value
            .server
            .as_deref()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| field(format!("{cpath}.server"), "missing"))?;
        let mut config = ClusterConfig::new(server)
            .map_err(|e| field(format!("{cpath}.server"), e.to_string()))?;
        config.certificate_authority = pem(
            &cluster.dir,
            &cluster.value.certificate_authority,
            &cluster.value.certificate_authority_data,
            &cpath,
            "certificate-authority",
        )?;
        config.insecure_skip_tls_verify = cluster.value.insecure_skip_tls_verify;
        if config.insecure_skip_tls_verify && config.certificate_authority.is_some() {
            // kubectl refuses the combination: which of the two was meant is anyone's guess.
            return Err(field(
                format!("{cpath}.insecure-skip-tls-verify"),
                "cannot be set together with certificate-authority",
            ));
        }
        config.tls_server_name = cluster.value.tls_server_name.clone();
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
            apply_user(&mut config, user, &format!("users[{user_name}].user"))?;
        }
        Ok(config)
    }
}

fn apply_user(
    config: &mut ClusterConfig,
    user: &Defined<User>,
    upath: &str,
) -> Result<(), ConfigError> {
    let u = &user.value;
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
    config.credentials = if let Some(t) = u.token.as_deref().filter(|t| !t.is_empty()) {
        Credentials::Token(t.into())
    } else if let Some(f) = u.token_file.as_deref().filter(|f| !f.is_empty()) {
        Credentials::TokenFile(resolve(&user.dir, f))
    } else if let Some(exec) = &u.exec {
        let command = exec
            .command
            .as_deref()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| field(format!("{upath}.exec.command"), "missing"))?;
        let api_version = exec
            .api_version
            .clone()
            .ok_or_else(|| field(format!("{upath}.exec.apiVersion"), "missing"))?;
        if !api_version.starts_with("client.authentication.k8s.io/") {
            return Err(field(
                format!("{upath}.exec.apiVersion"),
                format!("unsupported {api_version:?}"),
            ));
        }
        let command = if command.contains('/') {
            resolve(&user.dir, command)
        } else {
            PathBuf::from(command)
        };
        Credentials::Exec(ExecConfig {
            command,
            args: exec.args.clone().unwrap_or_default(),
            env: exec
                .env
                .iter()
                .flatten()
                .map(|e| (e.name.clone(), e.value.clone()))
                .collect(),
            api_version,
        })
    } else if let Some(username) = &u.username {
        let password = u
            .password
            .clone()
            .ok_or_else(|| field(format!("{upath}.password"), "missing while username is set"))?;
        Credentials::Basic {
            username: username.clone(),
            password: password.into(),
        }
    } else {
        Credentials::None
    };
    Ok(())
}
