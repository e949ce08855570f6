//! Loading a [`ClusterConfig`] from inside a pod: the service account's token, CA and namespace,
//! and the `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` variables.

use std::path::Path;

use super::config::{ClusterConfig, Credentials};
use super::error::ConfigError;

/// Where Kubernetes mounts the service account's credentials.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

impl ClusterConfig {
    /// The in-cluster configuration of this pod.
    pub fn incluster() -> Result<Self, ConfigError> {
        Self::incluster_from(
            Path::new(SERVICE_ACCOUNT_DIR),
            std::env::var("KUBERNETES_SERVICE_HOST").ok(),
            std::env::var("KUBERNETES_SERVICE_PORT").ok(),
        )
    }

    /// The in-cluster configuration from a service-account directory (holding `token`, `ca.crt`
    /// and optionally `namespace`) and the service host and port. The token is re-read when the
    /// file changes (projected tokens rotate).
    pub fn incluster_from(
        dir: &Path,
        host: Option<String>,
        port: Option<String>,
    ) -> Result<Self, ConfigError> {
        let host = host
            .filter(|h| !h.is_empty())
            .ok_or_else(|| ConfigError::InCluster("KUBERNETES_SERVICE_HOST is not set".into()))?;
        let port = port
            .filter(|p| !p.is_empty())
            .ok_or_else(|| ConfigError::InCluster("KUBERNETES_SERVICE_PORT is not set".into()))?;
        if port.parse::<u16>().is_err() {
            return Err(ConfigError::InCluster(format!(
                "KUBERNETES_SERVICE_PORT {port:?} is not a port"
            )));
        }
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host
        };
        let mut config = ClusterConfig::new(&format!("https://{host}:{port}"))?;
        let token = dir.join("token");
        if !token.is_file() {
            return Err(ConfigError::InCluster(format!(
                "no service account token at {}",
                token.display()
            )));
        }
        config.credentials = Credentials::TokenFile(token);
        let ca = dir.join("ca.crt");
        config.certificate_authority =
            Some(std::fs::read(&ca).map_err(|source| ConfigError::Io { path: ca, source })?);
        if let Ok(ns) = std::fs::read_to_string(dir.join("namespace")) {
            if !ns.trim().is_empty() {
                config.default_namespace = ns.trim().to_string();
            }
        }
        Ok(config)
    }
}
