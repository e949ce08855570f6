//! Request authentication: static tokens, token files re-read when they change, basic auth,
//! exec credential plugins (tokens and client certificates) cached until their expiry, and
//! OpenID Connect tokens refreshed when they expire.
//!
//! A credential that can be renewed (exec, OIDC) is renewed once when the server answers
//! 401 Unauthorized to it: [`Authenticator::invalidate`] drops it if it is still the current one,
//! so that many requests failing together cause one renewal, not one each.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::HeaderValue;
use parking_lot::Mutex;
use secrecy::{ExposeSecret as _, SecretString};
use serde::Deserialize;

use super::config::KubeconfigUser;
use super::config::{ClusterConfig, Credentials, ExecConfig};
use super::error::{ClientError, ConfigError};
use super::kubeconfig_write_back::write_back;
use super::oidc::{jwt_expiry, OidcIssuer, Refreshed};
use super::proxy::ProxySettings;
use super::tls::ClientCertSlot;

#[derive(Deserialize)]
struct ExecCredential {
    #[serde(default)]
    status: Option<ExecStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStatus {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    client_certificate_data: Option<String>,
    #[serde(default)]
    client_key_data: Option<String>,
}

/// What an exec plugin returned.
struct ExecOutput {
    token: Option<SecretString>,
    expires: Option<SystemTime>,
    /// PEM certificate chain and key.
    client_cert: Option<(String, SecretString)>,
}

#[derive(Default)]
struct Cache {
    /// The credential's `Authorization` header (`None` with a certificate-only exec credential).
    header: Option<HeaderValue>,
    /// Whether `header` holds a credential at all (an exec plugin may return only a certificate).
    valid: bool,
    /// Token file: modification time and length of the file the header was read from.
    file_stamp: Option<(SystemTime, u64)>,
    /// Exec plugin or OIDC: when the credential expires (`None`: never).
    expires: Option<SystemTime>,
    /// Counts credential renewals: a request remembers the generation it was sent with, and a
    /// 401 invalidates only that generation.
    generation: u64,
    /// OIDC: the refresh token, replaced when the issuer rotates it.
    refresh_token: Option<SecretString>,
}

/// A request's credential: its `Authorization` header, and the generation it belongs to.
pub(crate) struct Credential {
    pub(crate) header: Option<HeaderValue>,
    pub(crate) generation: u64,
}

/// Produces the `Authorization` header of each request.
pub(crate) struct Authenticator {
    credentials: Credentials,
    cache: Mutex<Cache>,
    /// Held while an exec plugin or an OIDC refresh runs, so that concurrent requests (several
    /// informers sharing a client, at start-up) wait for one run instead of each starting their
    /// own.
    refreshing: tokio::sync::Mutex<()>,
    /// Where an exec plugin's client certificate goes (the TLS configuration reads it).
    client_cert: Arc<ClientCertSlot>,
    /// `KUBERNETES_EXEC_INFO`'s `spec.cluster`, for plugins that asked for it.
    cluster_info: Option<serde_json::Value>,
    oidc: Option<OidcIssuer>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authenticator")
    }
}

fn bearer(token: &str) -> Result<HeaderValue, ClientError> {
    let mut v = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| ClientError::Auth("token is not a valid header value".into()))?;
    v.set_sensitive(true);
    Ok(v)
}

/// A credential is renewed this long before it expires, so no request carries an expired one.
const EXPIRY_MARGIN: Duration = Duration::from_secs(10);

impl Authenticator {
    /// An authenticator for `credentials` alone (no cluster information for exec plugins).
    #[cfg(test)]
    pub(crate) fn new(credentials: Credentials) -> Self {
        let config = ClusterConfig {
            credentials,
            ..ClusterConfig::new("https://unused.invalid").expect("a valid URL")
        };
        let user_agent = HeaderValue::from_static("test");
        Self::for_config(&config, Arc::default(), &user_agent).expect("valid credentials")
    }

    /// The authenticator of `config`'s credentials. An OIDC refresh reaches its issuer through
    /// `proxies`, as the API server's requests go, and sends `user_agent`.
    pub(crate) fn for_config(
        config: &ClusterConfig,
        proxies: Arc<ProxySettings>,
        user_agent: &HeaderValue,
    ) -> Result<Self, ConfigError> {
        let cluster_info = match &config.credentials {
            Credentials::Exec(e) if e.provide_cluster_info => Some(cluster_info(config)),
            _ => None,
        };
        let (oidc, refresh_token) = match &config.credentials {
            Credentials::Oidc(o) => (
                Some(OidcIssuer::new(o.clone(), proxies, user_agent.clone())?),
                o.refresh_token.clone(),
            ),
            _ => (None, None),
        };
        let mut cache = Cache {
            refresh_token,
            ..Cache::default()
        };
        if let Credentials::Oidc(o) = &config.credentials {
            if let Some(token) = &o.id_token {
                // An id token that is not a JWT has no known expiry: it is used until the server
                // rejects it, then refreshed.
                cache.expires = jwt_expiry(token.expose_secret());
                cache.header =
                    Some(
                        bearer(token.expose_secret()).map_err(|_| ConfigError::Field {
                            field: "auth-provider.config.id-token".into(),
                            reason: "not a valid header value".into(),
                        })?,
                    );
                cache.valid = true;
            }
        }
        Ok(Authenticator {
            credentials: config.credentials.clone(),
            cache: Mutex::new(cache),
            refreshing: tokio::sync::Mutex::new(()),
            client_cert: Arc::new(ClientCertSlot::default()),
            cluster_info,
            oidc,
        })
    }

    /// Where exec plugins put their client certificate (`None` for other credentials).
    pub(crate) fn client_cert_slot(&self) -> Option<Arc<ClientCertSlot>> {
        matches!(self.credentials, Credentials::Exec(_)).then(|| self.client_cert.clone())
    }

    /// The `Authorization` header value, if any.
    #[cfg(test)]
    pub(crate) async fn header(&self) -> Result<Option<HeaderValue>, ClientError> {
        self.credential().await.map(|c| c.header)
    }

    /// The current credential, renewed first if it is missing or about to expire.
    pub(crate) async fn credential(&self) -> Result<Credential, ClientError> {
        let header = match &self.credentials {
            Credentials::None => None,
            Credentials::Token(t) => Some(bearer(t.expose_secret())?),
            Credentials::Basic { username, password } => {
                let enc = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{}", password.expose_secret()));
                let mut v = HeaderValue::from_str(&format!("Basic {enc}"))
                    .map_err(|_| ClientError::Auth("invalid basic credentials".into()))?;
                v.set_sensitive(true);
                Some(v)
            }
            Credentials::TokenFile(path) => Some(self.token_file(path)?),
            Credentials::Exec(exec) => return self.renewable(Some(exec)).await,
            Credentials::Oidc(_) => return self.renewable(None).await,
        };
        Ok(Credential {
            header,
            generation: 0,
        })
    }

    /// After a 401 to a request sent with `generation`: drops that credential if it is still the
    /// current one and can be renewed. `true` when the request is worth sending again (a newer
    /// credential exists or will be made).
    pub(crate) fn invalidate(&self, generation: u64) -> bool {
        let mut cache = self.cache.lock();
        match &self.credentials {
            Credentials::Exec(_) => {}
            Credentials::Oidc(_) if cache.refresh_token.is_some() => {}
            _ => return false,
        }
        if cache.generation == generation {
            cache.valid = false;
            cache.header = None;
        }
        true
    }

    fn token_file(&self, path: &PathBuf) -> Result<HeaderValue, ClientError> {
        let meta = std::fs::metadata(path)
            .map_err(|e| ClientError::Auth(format!("token file {}: {e}", path.display())))?;
        let stamp = (meta.modified().unwrap_or(UNIX_EPOCH), meta.len());
        let mut cache = self.cache.lock();
        if let (Some(h), Some(s)) = (&cache.header, cache.file_stamp) {
            if s == stamp {
                return Ok(h.clone());
            }
        }
        let token = std::fs::read_to_string(path)
            .map_err(|e| ClientError::Auth(format!("token file {}: {e}", path.display())))?;
        let header = bearer(&token)?;
        cache.header = Some(header.clone());
        cache.file_stamp = Some(stamp);
        Ok(header)
    }

    /// The cached exec or OIDC credential, while it is valid and not about to expire.
    fn fresh(&self) -> Option<Credential> {
        let cache = self.cache.lock();
        let fresh = cache.valid
            && cache
                .expires
                .is_none_or(|e| SystemTime::now() + EXPIRY_MARGIN < e);
        fresh.then(|| Credential {
            header: cache.header.clone(),
            generation: cache.generation,
        })
    }

    /// An exec plugin's credential (`exec`) or an OIDC one (`None`), renewed when needed.
    async fn renewable(&self, exec: Option<&ExecConfig>) -> Result<Credential, ClientError> {
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        // Single flight: whoever waited here while another renewed takes its result.
        let _running = self.refreshing.lock().await;
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        let (header, expires) = match exec {
            Some(exec) => {
                let out = run_exec(exec, self.cluster_info.as_ref()).await?;
                if let Some((cert, key)) = &out.client_cert {
                    self.client_cert
                        .set(cert.as_bytes(), key.expose_secret().as_bytes())
                        .map_err(|e| {
                            ClientError::Auth(format!("{}: {e}", exec.command.display()))
                        })?;
                }
                let header = out
                    .token
                    .as_ref()
                    .map(|t| bearer(t.expose_secret()))
                    .transpose()?;
                (header, out.expires)
            }
            None => {
                let issuer = self.oidc.as_ref().expect("OIDC credentials have an issuer");
                let refresh_token = self.cache.lock().refresh_token.clone().ok_or_else(|| {
                    ClientError::Auth(format!(
                        "the OIDC id-token for {} has expired (or was refused) and there is no \
                         refresh-token to renew it",
                        issuer.config().client_id
                    ))
                })?;
                let new = issuer.refresh(&refresh_token).await?;
                if let Some(user) = &issuer.config().write_back {
                    persist_refreshed(user, &new).await;
                }
                if let Some(rotated) = new.refresh_token {
                    self.cache.lock().refresh_token = Some(rotated);
                }
                let expires = jwt_expiry(new.id_token.expose_secret());
                (Some(bearer(new.id_token.expose_secret())?), expires)
            }
        };
        let mut cache = self.cache.lock();
        cache.header = header.clone();
        cache.valid = true;
        cache.expires = expires;
        cache.generation += 1;
        Ok(Credential {
            header,
            generation: cache.generation,
        })
    }
}

/// Writes refreshed OIDC tokens back to the kubeconfig user they came from, as kubectl does
/// (`kubeconfig_write_back.rs`). A failure is logged, naming the file and the user, never a token,
/// and the request goes on with the new token: the file is a convenience for the next process.
async fn persist_refreshed(user: &KubeconfigUser, new: &Refreshed) {
    let (target, id_token, refresh_token) = (
        user.clone(),
        new.id_token.clone(),
        new.refresh_token.clone(),
    );
    let written =
        tokio::task::spawn_blocking(move || write_back(&target, &id_token, refresh_token.as_ref()))
            .await;
    match written {
        Ok(Ok(())) => tracing::debug!(
            path = %user.path.display(),
            user = %user.name,
            "wrote the refreshed OIDC tokens back to the kubeconfig"
        ),
        Ok(Err(e)) => tracing::warn!(
            path = %user.path.display(),
            user = %user.name,
            "could not write the refreshed OIDC tokens back to the kubeconfig \
             (they are used from memory): {e}"
        ),
        Err(e) => tracing::warn!(
            path = %user.path.display(),
            user = %user.name,
            "could not write the refreshed OIDC tokens back to the kubeconfig: {e}"
        ),
    }
}

/// `KUBERNETES_EXEC_INFO`'s `spec.cluster` for `config` (`provideClusterInfo`).
fn cluster_info(config: &ClusterConfig) -> serde_json::Value {
    let mut cluster = serde_json::json!({ "server": config.server.as_str() });
    if let Some(ca) = &config.certificate_authority {
        cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    if let Some(name) = &config.tls_server_name {
        cluster["tls-server-name"] = name.clone().into();
    }
    if config.insecure_skip_tls_verify {
        cluster["insecure-skip-tls-verify"] = true.into();
    }
    cluster
}

/// Most bytes read of an exec plugin's standard output (an `ExecCredential` is a few KiB, a client
/// certificate chain included); a plugin writing more is stopped and its run is an error.
pub(crate) const MAX_EXEC_OUTPUT: usize = 1024 * 1024;

/// What a finished exec plugin left: its exit status, its standard output (`None`: more than
/// [`MAX_EXEC_OUTPUT`] bytes, the plugin was stopped) and the size of its standard error, which is
/// counted and dropped, never held (it is never shown either: see `run_exec`).
struct ExecRun {
    status: std::process::ExitStatus,
    stdout: Option<Vec<u8>>,
    stderr_len: u64,
}

/// Reads `child`'s output within bounds: at most [`MAX_EXEC_OUTPUT`] bytes of its standard output
/// are kept, its standard error only counted. A plugin that writes more standard output is killed.
async fn bounded_output(mut child: tokio::process::Child) -> std::io::Result<ExecRun> {
    use tokio::io::AsyncReadExt as _;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // Standard error is counted on a task of its own, so that a plugin filling it never blocks. The
    // task ends with this future, whichever way it ends (an error, the bound, or the timeout that
    // drops it while a grandchild of the plugin still holds the pipe).
    let count_stderr = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
        let mut stderr = stderr;
        tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await
    }));
    let mut held = Vec::new();
    stdout
        .take(MAX_EXEC_OUTPUT as u64 + 1)
        .read_to_end(&mut held)
        .await?;
    if held.len() > MAX_EXEC_OUTPUT {
        // Stopped at once: it would otherwise block writing, and hold the caller until the timeout.
        child.kill().await?;
        return Ok(ExecRun {
            status: child.wait().await?,
            stdout: None,
            stderr_len: 0,
        });
    }
    let stderr_len = count_stderr.await.map_err(std::io::Error::other)??;
    Ok(ExecRun {
        status: child.wait().await?,
        stdout: Some(held),
        stderr_len,
    })
}

fn auth_err(exec: &ExecConfig, message: impl std::fmt::Display) -> ClientError {
    ClientError::Auth(format!("exec plugin {}: {message}", exec.command.display()))
}

async fn run_exec(
    exec: &ExecConfig,
    cluster: Option<&serde_json::Value>,
) -> Result<ExecOutput, ClientError> {
    let api_version = if exec.api_version.is_empty() {
        "client.authentication.k8s.io/v1"
    } else {
        exec.api_version.as_str()
    };
    let mut spec = serde_json::json!({"interactive": false});
    if let Some(cluster) = cluster {
        spec["cluster"] = cluster.clone();
    }
    let info = serde_json::json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": spec,
    });
    let spawned = tokio::process::Command::new(&exec.command)
        .args(&exec.args)
        .envs(exec.env.iter().map(|(k, v)| (k, v)))
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let child = match spawned {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let hint = exec
                .install_hint
                .as_deref()
                .map(|h| format!("\n{}", h.trim()))
                .unwrap_or_default();
            return Err(auth_err(exec, format!("executable not found{hint}")));
        }
        Err(e) => return Err(auth_err(exec, e)),
        Ok(child) => child,
    };
    // On timeout the future is dropped, and with it the child, which `kill_on_drop` kills.
    let output = match tokio::time::timeout(exec.timeout, bounded_output(child)).await {
        Err(_) => {
            return Err(auth_err(
                exec,
                format!("killed after running for {:?}", exec.timeout),
            ))
        }
        Ok(Err(e)) => return Err(auth_err(exec, e)),
        Ok(Ok(output)) => output,
    };
    let Some(stdout) = output.stdout else {
        return Err(auth_err(
            exec,
            format!("its output is larger than {MAX_EXEC_OUTPUT} bytes; it was stopped"),
        ));
    };
    if !output.status.success() {
        // client-go hands a plugin's stderr to the user's terminal, never to an error. A
        // controller has no terminal, and its errors end up in logs: a plugin that prints its
        // token or its environment there must not leak them, so only the size is told.
        let stderr = match output.stderr_len {
            0 => String::new(),
            n => format!(
                "; its stderr ({n} bytes) is not shown, as it may hold credentials: run the \
                 plugin by hand to read it"
            ),
        };
        return Err(auth_err(
            exec,
            format!("exited with {}{stderr}", output.status),
        ));
    }
    // The error names where the output went wrong, never what it held: it holds the token.
    let cred: ExecCredential = serde_json::from_slice(&stdout).map_err(|e| {
        auth_err(
            exec,
            format!(
                "its output is not an ExecCredential ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ),
        )
    })?;
    let status = cred
        .status
        .ok_or_else(|| auth_err(exec, "its output has no status"))?;
    // Held as a secret from here on, as the key is.
    let token = status
        .token
        .filter(|t| !t.is_empty())
        .map(SecretString::from);
    let cert = status.client_certificate_data.filter(|c| !c.is_empty());
    let key = status
        .client_key_data
        .filter(|k| !k.is_empty())
        .map(SecretString::from);
    let client_cert = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        (Some(_), None) => {
            return Err(auth_err(
                exec,
                "clientCertificateData without clientKeyData",
            ))
        }
        (None, Some(_)) => {
            return Err(auth_err(
                exec,
                "clientKeyData without clientCertificateData",
            ))
        }
    };
    if token.is_none() && client_cert.is_none() {
        return Err(auth_err(
            exec,
            "returned neither a token nor a client certificate and key",
        ));
    }
    let expires = match status.expiration_timestamp {
        Some(ts) => Some(parse_rfc3339(&ts).ok_or_else(|| {
            auth_err(exec, format!("expirationTimestamp {ts:?} is not RFC 3339"))
        })?),
        None => None,
    };
    Ok(ExecOutput {
        token,
        expires,
        client_cert,
    })
}

/// The `SystemTime` of an RFC 3339 timestamp (`store_index::time`), `None` for anything else
/// and for a time before 1970.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    crate::store_index::time::parse_system_time(s).filter(|t| *t >= UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_timestamps_parse_with_zone_and_fraction() {
        let t = |s| parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(t("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(t("2024-03-01T12:30:45.123Z"), Some(1_709_296_245));
        assert_eq!(t("2024-03-01T13:30:45+01:00"), Some(1_709_296_245));
        assert_eq!(t("yesterday"), None);
        assert_eq!(t("2024-13-01T00:00:00Z"), None);
    }

    #[tokio::test]
    async fn token_file_is_reread_when_it_changes() {
        let dir = std::env::temp_dir().join(format!("reflector-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "one\n").unwrap();
        let auth = Authenticator::new(Credentials::TokenFile(path.clone()));
        assert_eq!(auth.header().await.unwrap().unwrap(), "Bearer one");
        std::fs::write(&path, "second\n").unwrap();
        assert_eq!(auth.header().await.unwrap().unwrap(), "Bearer second");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A plugin that appends a line to `counter` on each run, runs `then`, and prints a credential
    /// whose token is `token` (shell words: `tok'$n'` numbers it by run).
    fn counting_plugin(counter: &std::path::Path, then: &str, token: &str) -> ExecConfig {
        ExecConfig {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                format!(
                    r#"echo x >> {c}; n=$(wc -l < {c}); {then} echo '{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{token}","expirationTimestamp":"2999-01-01T00:00:00Z"}}}}'"#,
                    c = counter.display()
                ),
            ],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn exec_plugin_token_is_cached_until_expiry() {
        let dir = std::env::temp_dir().join(format!("reflector-exec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let counter = dir.join("count");
        let exec = counting_plugin(&counter, "", "tok'$n'");
        let auth = Authenticator::new(Credentials::Exec(exec));
        assert_eq!(auth.header().await.unwrap().unwrap(), "Bearer tok1");
        assert_eq!(auth.header().await.unwrap().unwrap(), "Bearer tok1");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn failing_exec_plugin_is_an_auth_error() {
        let exec = ExecConfig {
            command: "sh".into(),
            args: vec!["-c".into(), "echo denied >&2; exit 3".into()],
            ..Default::default()
        };
        let err = Authenticator::new(Credentials::Exec(exec))
            .header()
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, ClientError::Auth(_)), "{err:?}");
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("stderr (7 bytes) is not shown"), "{text}");
        assert!(!text.contains("denied"), "{text}");
    }

    #[tokio::test]
    async fn exec_output_that_is_not_a_credential_is_an_error_that_does_not_quote_it() {
        let exec = ExecConfig {
            command: "sh".into(),
            args: vec!["-c".into(), r#"echo '{"status":"TOKEN-SECRET"}'"#.into()],
            env: vec![("API_KEY".into(), "ENV-SECRET".into())],
            ..Default::default()
        };
        let debug = format!("{exec:?}");
        assert!(
            !debug.contains("ENV-SECRET") && debug.contains("API_KEY"),
            "{debug}"
        );
        let err = Authenticator::new(Credentials::Exec(exec))
            .header()
            .await
            .unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("not an ExecCredential"), "{text}");
        assert!(!text.contains("SECRET"), "{text}");
    }

    #[tokio::test]
    async fn concurrent_requests_run_an_exec_plugin_once() {
        let dir = std::env::temp_dir().join(format!("reflector-exec-once-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let counter = dir.join("count");
        // A slow plugin, so that the four requests overlap its run.
        let exec = counting_plugin(&counter, "sleep 0.2;", "t");
        let auth = std::sync::Arc::new(Authenticator::new(Credentials::Exec(exec)));
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let auth = auth.clone();
                tokio::spawn(async move { auth.header().await })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap().unwrap().unwrap(), "Bearer t");
        }
        let runs = std::fs::read_to_string(&counter).unwrap().lines().count();
        assert_eq!(runs, 1, "one run for four concurrent requests");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
