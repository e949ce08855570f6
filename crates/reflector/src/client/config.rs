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
    /// Timeout of non-watch requests, body included (default 60 s). Watches have none. A
    /// reflector's first list page at resource version `"0"` that times out is asked for again
    /// in pages, which arrive faster than the watch cache's whole answer (rule H3).
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
    /// Act as another user (kubeconfig `as` and friends); `None`: as the authenticated user.
    pub impersonate: Option<Impersonate>,
    /// Whether connections go through an HTTP proxy (default [`Proxy::FromEnvironment`], as
    /// client-go: `HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`); a kubeconfig's `proxy-url` is
    /// [`Proxy::Url`]. A password in the proxy URL is redacted in `Debug`.
    pub proxy: Proxy,
    /// Ask for gzip-compressed responses on requests whose body is read whole (lists and gets;
    /// never watches), as client-go does (default `true`; kubeconfig's `disable-compression:
    /// true` turns it off). kube-apiserver compresses such a response when it is 128 KiB or
    /// more, so a large list travels at about an eighth of its size, for the CPU time of
    /// inflating it; the body is decompressed as it arrives and bounded decompressed (see
    /// [`Client::get_bytes_within`](crate::Client::get_bytes_within)). Turn it off when the
    /// network is fast and CPU is what counts.
    pub compression: bool,
}

/// `url` with whatever sits between `scheme://` and `@` (user and password) replaced by
/// `[REDACTED]`; it works on text that is not a valid URL, which is when it is needed most.
pub(crate) fn redact_userinfo(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..authority_end].rfind('@') {
        Some(at) => format!("{}[REDACTED]{}", &url[..start], &url[start + at..]),
        None => url.to_string(),
    }
}

/// client-go's `User-Agent` shape: the running program's name and this library's version, the
/// platform as Go names it (`runtime.GOOS/GOARCH`, so that rules written for client-go's agents
/// match), then the library: `my-controller/0.1.0 (linux/amd64) informer-rs/0.1.0`.
pub fn default_user_agent() -> String {
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .filter(|p| !p.is_empty() && p.is_ascii())
        .unwrap_or_else(|| "unknown".into());
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "{program}/{version} ({}/{}) informer-rs/{version}",
        go_os(std::env::consts::OS),
        go_arch(std::env::consts::ARCH, cfg!(target_endian = "little"))
    )
}

/// Go's `GOOS` for Rust's `target_os` (the same word but for macOS).
fn go_os(os: &str) -> &str {
    match os {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's `GOARCH` for Rust's `target_arch`; little-endian MIPS and POWER carry `le` in Go.
fn go_arch(arch: &str, little_endian: bool) -> &str {
    match (arch, little_endian) {
        ("x86_64", _) => "amd64",
        ("x86", _) => "386",
        ("aarch64", _) => "arm64",
        ("loongarch64", _) => "loong64",
        ("powerpc64", true) => "ppc64le",
        ("powerpc64", false) => "ppc64",
        ("powerpc", _) => "ppc",
        ("mips", true) => "mipsle",
        ("mips64", true) => "mips64le",
        ("wasm32", _) => "wasm",
        (other, _) => other,
    }
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
    /// OpenID Connect tokens (kubeconfig `auth-provider: oidc`): the id token is used until it
    /// expires, then refreshed at the issuer with the refresh token.
    Oidc(OidcConfig),
}

/// The OpenID Connect provider of kubeconfig's `auth-provider: {name: oidc}`. Tokens and the
/// client secret are [`SecretString`]s. Refreshed tokens are used from memory and, as kubectl
/// does, written back to the kubeconfig file the user came from ([`write_back`](Self::write_back)).
///
/// Build it with [`new`](Self::new) (the issuer and the client id, which have no default) and
/// set the rest with the setters, by field, or as `OidcConfig { .., ..OidcConfig::new(..) }`: a
/// field added later comes with its default there, so none of these break.
///
/// ```
/// use reflector::{ClusterConfig, Credentials, OidcConfig};
///
/// let issuer = url::Url::parse("https://issuer.example/realms/k8s")?;
/// let oidc = OidcConfig::new(issuer, "kubectl")
///     .refresh_token("refresh-token".into())
///     .client_secret("client-secret".into());
/// assert!(oidc.id_token.is_none(), "refreshed at the first request");
/// let mut config = ClusterConfig::new("https://10.0.0.1:6443")?;
/// config.credentials = Credentials::Oidc(oidc);
/// assert!(!format!("{config:?}").contains("refresh-token"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct OidcConfig {
    /// The issuer (`idp-issuer-url`); its `/.well-known/openid-configuration` names the token
    /// endpoint used to refresh.
    pub issuer_url: url::Url,
    /// The OAuth2 client id (`client-id`).
    pub client_id: String,
    /// The OAuth2 client secret (`client-secret`), if the client has one.
    pub client_secret: Option<SecretString>,
    /// The current id token (`id-token`), sent as the bearer token while it has not expired.
    pub id_token: Option<SecretString>,
    /// The refresh token (`refresh-token`); without one, an expired id token is an error.
    pub refresh_token: Option<SecretString>,
    /// PEM bundle trusted for the issuer (`idp-certificate-authority[-data]`); `None`: the
    /// system's trust roots.
    pub issuer_certificate_authority: Option<Vec<u8>>,
    /// Where refreshed tokens are written back: the kubeconfig file and user this configuration
    /// was loaded from (set by the kubeconfig loader). After each refresh, that user's
    /// `auth-provider.config` gets the new `id-token` (and `refresh-token`, if the issuer
    /// rotated it), the rest of the file kept, the file replaced atomically; a failure is
    /// logged, never the request's. `None`: tokens are kept in memory only.
    pub write_back: Option<KubeconfigUser>,
}

impl OidcConfig {
    /// The provider `issuer_url` for the OAuth2 client `client_id`, with no client secret and no
    /// tokens (give it an id token, a refresh token or both, as a kubeconfig's `auth-provider`
    /// does), the system's trust roots for the issuer, and tokens kept in memory only.
    pub fn new(issuer_url: url::Url, client_id: impl Into<String>) -> Self {
        OidcConfig {
            issuer_url,
            client_id: client_id.into(),
            client_secret: None,
            id_token: None,
            refresh_token: None,
            issuer_certificate_authority: None,
            write_back: None,
        }
    }

    /// The OAuth2 client secret.
    pub fn client_secret(mut self, secret: SecretString) -> Self {
        self.client_secret = Some(secret);
        self
    }

    /// The current id token.
    pub fn id_token(mut self, token: SecretString) -> Self {
        self.id_token = Some(token);
        self
    }

    /// The refresh token.
    pub fn refresh_token(mut self, token: SecretString) -> Self {
        self.refresh_token = Some(token);
        self
    }

    /// A PEM bundle trusted for the issuer instead of the system's roots.
    pub fn issuer_certificate_authority(mut self, pem: Vec<u8>) -> Self {
        self.issuer_certificate_authority = Some(pem);
        self
    }

    /// Where refreshed tokens are written back.
    pub fn write_back(mut self, user: KubeconfigUser) -> Self {
        self.write_back = Some(user);
        self
    }
}

/// A user entry of a kubeconfig file: the file and the user's name (`users[].name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeconfigUser {
    /// The kubeconfig file that defines the user.
    pub path: PathBuf,
    /// The user's name.
    pub name: String,
}

/// Acting as another user (kubeconfig `as`, `as-uid`, `as-groups`, `as-user-extra`): sent as the
/// `Impersonate-*` headers of every request. The server checks that the authenticated user may
/// impersonate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonate {
    /// The user to act as (`Impersonate-User`).
    pub user: String,
    /// Their UID (`Impersonate-Uid`).
    pub uid: Option<String>,
    /// Their groups (one `Impersonate-Group` header each).
    pub groups: Vec<String>,
    /// Extra attributes (`Impersonate-Extra-<key>`, the key percent-encoded).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl ClusterConfig {
    /// A configuration for `server` with defaults: no credentials, namespace `default`.
    pub fn new(server: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: &str| ConfigError::Url {
            url: redact_userinfo(server),
            reason: reason.into(),
        };
        let url = url::Url::parse(server).map_err(|e| invalid(&e.to_string()))?;
        if url.scheme() != "https" && url.scheme() != "http" {
            return Err(invalid("scheme must be http or https"));
        }
        if url.host_str().is_none() {
            return Err(invalid("no host"));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                "user information in the server URL is not supported: credentials belong to the \
                 kubeconfig user",
            ));
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
            impersonate: None,
            proxy: Proxy::FromEnvironment,
            compression: true,
        })
    }
}

/// An exec credential plugin (kubeconfig `users[].user.exec`). The plugin may return a token,
/// a client certificate and key, or both; it is run again when the credential expires and once
/// when the server answers 401 Unauthorized, never by two requests at a time.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecConfig {
    /// The program (resolved against the kubeconfig's directory when it contains a `/`).
    pub command: PathBuf,
    /// Its arguments (redacted in `Debug`: an argument may carry a credential, `--token=…`).
    pub args: Vec<String>,
    /// Extra environment variables (values redacted in `Debug`).
    pub env: Vec<(String, String)>,
    /// The `ExecCredential` API version (`client.authentication.k8s.io/v1`).
    pub api_version: String,
    /// Shown in the error when the program cannot be found (`installHint`).
    pub install_hint: Option<String>,
    /// Pass the cluster's server, CA and TLS server name to the plugin in
    /// `KUBERNETES_EXEC_INFO` (`provideClusterInfo`).
    pub provide_cluster_info: bool,
    /// How long one run may take before it is killed and the request fails (default 60 s).
    pub timeout: Duration,
}

impl Default for ExecConfig {
    fn default() -> Self {
        ExecConfig {
            command: PathBuf::new(),
            args: Vec::new(),
            env: Vec::new(),
            api_version: String::new(),
            install_hint: None,
            provide_cluster_info: false,
            timeout: ExecConfig::DEFAULT_TIMEOUT,
        }
    }
}

impl ExecConfig {
    /// The default bound on one run of the plugin: 60 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
}

impl std::fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Plugins take credentials through their environment and their arguments
        // (`--token=…`, `--client-secret …`): names of variables and the number of arguments
        // only, never a value.
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(name, _)| (name.as_str(), "[REDACTED]"))
            .collect();
        let args = vec!["[REDACTED]"; self.args.len()];
        f.debug_struct("ExecConfig")
            .field("command", &self.command)
            .field("args", &args)
            .field("env", &env)
            .field("api_version", &self.api_version)
            .field("install_hint", &self.install_hint)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("timeout", &self.timeout)
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
            .field("impersonate", &self.impersonate)
            .field("proxy", &self.proxy)
            .field("compression", &self.compression)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_agent_names_the_platform_as_go_does() {
        assert_eq!(go_arch("x86_64", true), "amd64");
        assert_eq!(go_arch("aarch64", true), "arm64");
        assert_eq!(go_arch("x86", true), "386");
        assert_eq!(go_arch("arm", true), "arm");
        assert_eq!(go_arch("powerpc64", true), "ppc64le");
        assert_eq!(go_arch("powerpc64", false), "ppc64");
        assert_eq!(go_arch("s390x", false), "s390x");
        assert_eq!(go_arch("riscv64", true), "riscv64");
        assert_eq!(go_os("macos"), "darwin");
        assert_eq!(go_os("linux"), "linux");
        let agent = default_user_agent();
        let platform = format!(
            "({}/{})",
            go_os(std::env::consts::OS),
            go_arch(std::env::consts::ARCH, cfg!(target_endian = "little"))
        );
        assert!(agent.contains(&platform), "{agent}");
        assert!(
            !agent.contains("x86_64") && !agent.contains("aarch64"),
            "{agent}"
        );
    }

    #[test]
    fn user_information_is_redacted_from_urls_valid_or_not() {
        assert_eq!(
            redact_userinfo("http://u:pw@proxy:3128/x@y"),
            "http://[REDACTED]@proxy:3128/x@y"
        );
        assert_eq!(redact_userinfo("u:p w@host"), "[REDACTED]@host");
        assert_eq!(redact_userinfo("https://host/a@b"), "https://host/a@b");
        let err = ClusterConfig::new("https://admin:hunter2@api.example").unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("admin"),
            "{text}"
        );
        let err = ClusterConfig::new("https://admin:hunter2@bad host").unwrap_err();
        assert!(!format!("{err} {err:?}").contains("hunter2"));
    }
}
