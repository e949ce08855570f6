//! [`ClusterConfig`]: where the API server is and how to talk to it.

use std::path::PathBuf;
use std::time::Duration;

use secrecy::{SecretSlice, SecretString};

use super::error::ConfigError;
use super::proxy::Proxy;
use super::rate_limit::RateLimit;

/// How to reach and authenticate to one API server. Build it by hand, from a kubeconfig
/// ([`ClusterConfig::from_kubeconfig`](crate::ClusterConfig::from_kubeconfig)) or from inside a
/// pod ([`ClusterConfig::incluster`](crate::ClusterConfig::incluster)).
///
/// ```
/// use reflector::{ClusterConfig, Credentials};
/// let mut config = ClusterConfig::new("https://10.0.0.1:6443").unwrap();
/// config.credentials = Credentials::Token("secret".into());
/// config.default_namespace = "kube-system".into();
/// // Secrets never show: not in Debug, not in errors, not in logs.
/// assert!(!format!("{config:?}").contains("secret"));
/// ```
#[derive(Clone)]
pub struct ClusterConfig {
    /// Base URL of the API server (`https://host:port`, optionally with a path prefix).
    pub server: url::Url,
    /// PEM bundle of the certificate authorities that sign the server's certificate. `None`: the
    /// server is trusted only with [`insecure_skip_tls_verify`](Self::insecure_skip_tls_verify).
    pub certificate_authority: Option<Vec<u8>>,
    /// PEM client certificate (chain) for mutual TLS.
    pub client_certificate: Option<Vec<u8>>,
    /// PEM private key of the client certificate (redacted in `Debug`).
    pub client_key: Option<SecretSlice<u8>>,
    /// Name to verify the server's certificate against instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// Accept any server certificate. Opt-in, logged loudly at connection set-up.
    pub insecure_skip_tls_verify: bool,
    /// How requests are authenticated.
    pub credentials: Credentials,
    /// Namespace of the current context (`default` if unset).
    pub default_namespace: String,
    /// Connect timeout (default 30 s).
    pub connect_timeout: Option<Duration>,
    /// Timeout of non-watch requests, body included (default 60 s). Watches have none.
    pub request_timeout: Option<Duration>,
    /// HTTP/2 keep-alive ping interval (default 30 s); a connection whose ping goes unanswered for
    /// as long is closed, which ends the watches on it.
    pub keep_alive_interval: Option<Duration>,
    /// Speak HTTP/2 without TLS (prior knowledge). Over TLS, HTTP/2 is negotiated by ALPN.
    pub http2_prior_knowledge: bool,
    /// TCP keepalive on every connection (default 30 s, as Go's dialer): the kernel then notices a
    /// peer that vanished without closing (a half-open connection) instead of waiting forever.
    pub tcp_keepalive: Option<Duration>,
    /// Client-side rate limit of requests other than watches (default
    /// [`RateLimit::DEFAULT_REQUESTS`], 50/s with bursts of 100; `None`: unlimited).
    pub rate_limit: Option<RateLimit>,
    /// Client-side rate limit of watch requests (default [`RateLimit::DEFAULT_WATCHES`], 10/s
    /// with bursts of 100; `None`: unlimited). Kept apart so that list traffic never delays a
    /// watch, and a server that keeps closing watches is not re-asked faster than this.
    pub watch_rate_limit: Option<RateLimit>,
    /// The `User-Agent` of every request, in client-go's shape (`program/version (os/arch)
    /// informer-rs/version`, see [`default_user_agent`]); audit logs and API priority and
    /// fairness rules match on it, so set it to name your controller.
    pub user_agent: String,
    /// Whether connections go through an HTTP proxy (default [`Proxy::FromEnvironment`], as
    /// client-go: `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`); a kubeconfig's `proxy-url` is
    /// [`Proxy::Url`]. A password in the proxy URL is redacted in `Debug`.
    pub proxy: Proxy,
}

/// client-go's `User-Agent` shape: the running program's name and this library's version, the
/// platform, then the library: `my-controller/0.1.0 (linux/x86_64) informer-rs/0.1.0`.
pub fn default_user_agent() -> String {
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|p| !p.is_empty() && p.is_ascii())
        .unwrap_or_else(|| "unknown".into());
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "{program}/{version} ({}/{}) informer-rs/{version}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// Request authentication. Tokens and passwords are held as [`SecretString`]s: `Debug` prints
/// them redacted, and only the request that needs one reads it.
#[derive(Debug, Clone, Default)]
pub enum Credentials {
    /// None (or client certificates only).
    #[default]
    None,
    /// A static bearer token.
    Token(SecretString),
    /// A bearer token read from a file, re-read when the file changes (projected service-account
    /// tokens rotate).
    TokenFile(PathBuf),
    /// HTTP basic authentication.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: SecretString,
    },
    /// An exec credential plugin (`client.authentication.k8s.io/v1`).
    Exec(ExecConfig),
}

impl ClusterConfig {
    /// A configuration for `server` with defaults: no credentials, namespace `default`.
    pub fn new(server: &str) -> Result<Self, ConfigError> {
        let url = url::Url::parse(server).map_err(|e| ConfigError::Url {
            url: server.to_string(),
            reason: e.to_string(),
        })?;
        if url.scheme() != "https" && url.scheme() != "http" {
            return Err(ConfigError::Url {
                url: server.to_string(),
                reason: "scheme must be http or https".into(),
            });
        }
        if url.host_str().is_none() {
            return Err(ConfigError::Url {
                url: server.to_string(),
                reason: "no host".into(),
            });
        }
        Ok(ClusterConfig {
            server: url,
            certificate_authority: None,
            client_certificate: None,
            client_key: None,
            tls_server_name: None,
            insecure_skip_tls_verify: false,
            credentials: Credentials::None,
            default_namespace: "default".into(),
            connect_timeout: Some(Duration::from_secs(30)),
            request_timeout: Some(Duration::from_secs(60)),
            keep_alive_interval: Some(Duration::from_secs(30)),
            http2_prior_knowledge: false,
            tcp_keepalive: Some(Duration::from_secs(30)),
            rate_limit: Some(RateLimit::DEFAULT_REQUESTS),
            watch_rate_limit: Some(RateLimit::DEFAULT_WATCHES),
            user_agent: default_user_agent(),
            proxy: Proxy::FromEnvironment,
        })
    }
}

/// An exec credential plugin (kubeconfig `users[].user.exec`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExecConfig {
    /// The program (resolved against the kubeconfig's directory when it contains a `/`).
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// The `ExecCredential` API version (`client.authentication.k8s.io/v1`).
    pub api_version: String,
}

impl std::fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Plugins take credentials through their environment: names only, never values.
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(name, _)| (name.as_str(), "[REDACTED]"))
            .collect();
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &env)
            .field("api_version", &self.api_version)
            .finish()
    }
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pem = |p: &Option<Vec<u8>>| p.as_ref().map(|p| format!("{} bytes of PEM", p.len()));
        f.debug_struct("ClusterConfig")
            .field("server", &self.server.as_str())
            .field("certificate_authority", &pem(&self.certificate_authority))
            .field("client_certificate", &pem(&self.client_certificate))
            .field(
                "client_key",
                &self.client_key.as_ref().map(|_| "[REDACTED]"),
            )
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("credentials", &self.credentials)
            .field("default_namespace", &self.default_namespace)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive_interval", &self.keep_alive_interval)
            .field("http2_prior_knowledge", &self.http2_prior_knowledge)
            .field("tcp_keepalive", &self.tcp_keepalive)
            .field("rate_limit", &self.rate_limit)
            .field("watch_rate_limit", &self.watch_rate_limit)
            .field("user_agent", &self.user_agent)
            .field("proxy", &self.proxy)
            .finish()
    }
}
