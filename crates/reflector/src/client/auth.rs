//! Request authentication: static tokens, token files re-read when they change, basic auth and
//! exec credential plugins cached until their expiry.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::HeaderValue;
use parking_lot::Mutex;
use secrecy::ExposeSecret as _;
use serde::Deserialize;

use super::config::{Credentials, ExecConfig};
use super::error::ClientError;

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
}

#[derive(Default)]
struct Cache {
    header: Option<HeaderValue>,
    /// Token file: modification time and length of the file the header was read from.
    file_stamp: Option<(SystemTime, u64)>,
    /// Exec plugin: when the credential expires (`None`: never).
    expires: Option<SystemTime>,
}

/// Produces the `Authorization` header of each request.
pub(crate) struct Authenticator {
    credentials: Credentials,
    cache: Mutex<Cache>,
    /// Held while an exec plugin runs, so that concurrent requests (several informers sharing a
    /// client, at start-up) wait for one run instead of each starting their own.
    refreshing: tokio::sync::Mutex<()>,
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

impl Authenticator {
    pub(crate) fn new(credentials: Credentials) -> Self {
        Authenticator {
            credentials,
            cache: Mutex::new(Cache::default()),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    /// The `Authorization` header value, if any.
    pub(crate) async fn header(&self) -> Result<Option<HeaderValue>, ClientError> {
        match &self.credentials {
            Credentials::None => Ok(None),
            Credentials::Token(t) => bearer(t.expose_secret()).map(Some),
            Credentials::Basic { username, password } => {
                let enc = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{}", password.expose_secret()));
                let mut v = HeaderValue::from_str(&format!("Basic {enc}"))
                    .map_err(|_| ClientError::Auth("invalid basic credentials".into()))?;
                v.set_sensitive(true);
                Ok(Some(v))
            }
            Credentials::TokenFile(path) => self.token_file(path).map(Some),
            Credentials::Exec(exec) => self.exec(exec).await.map(Some),
        }
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

    /// The cached exec credential, while it is not about to expire: a little before expiry it
    /// is refreshed, so a request never carries an expired token.
    fn fresh_exec_header(&self) -> Option<HeaderValue> {
        let cache = self.cache.lock();
        let fresh = cache
            .expires
            .is_none_or(|e| SystemTime::now() + Duration::from_secs(10) < e);
        cache.header.clone().filter(|_| fresh)
    }

    async fn exec(&self, exec: &ExecConfig) -> Result<HeaderValue, ClientError> {
        if let Some(h) = self.fresh_exec_header() {
            return Ok(h);
        }
        // Single flight: whoever waited here while another ran the plugin takes its result.
        let _running = self.refreshing.lock().await;
        if let Some(h) = self.fresh_exec_header() {
            return Ok(h);
        }
        let (token, expires) = run_exec(exec).await?;
        let header = bearer(&token)?;
        let mut cache = self.cache.lock();
        cache.header = Some(header.clone());
        cache.expires = expires;
        Ok(header)
    }
}

async fn run_exec(exec: &ExecConfig) -> Result<(String, Option<SystemTime>), ClientError> {
    let api_version = if exec.api_version.is_empty() {
        "client.authentication.k8s.io/v1"
    } else {
        exec.api_version.as_str()
    };
    let info = serde_json::json!({
        "apiVersion": api_version,
        "kind": "ExecCredential",
        "spec": {"interactive": false},
    });
    let output = tokio::process::Command::new(&exec.command)
        .args(&exec.args)
        .envs(exec.env.iter().map(|(k, v)| (k, v)))
        .env("KUBERNETES_EXEC_INFO", info.to_string())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| ClientError::Auth(format!("running {}: {e}", exec.command.display())))?;
    if !output.status.success() {
        return Err(ClientError::Auth(format!(
            "{} exited with {}: {}",
            exec.command.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    // The error names where the output went wrong, never what it held: it holds the token.
    let cred: ExecCredential = serde_json::from_slice(&output.stdout).map_err(|e| {
        ClientError::Auth(format!(
            "{}: its output is not an ExecCredential ({:?} error at line {} column {})",
            exec.command.display(),
            e.classify(),
            e.line(),
            e.column()
        ))
    })?;
    let status = cred
        .status
        .ok_or_else(|| ClientError::Auth("exec plugin output has no status".into()))?;
    let token = status
        .token
        .ok_or_else(|| ClientError::Auth("exec plugin returned no token".into()))?;
    let expires = match status.expiration_timestamp {
        Some(ts) => Some(parse_rfc3339(&ts).ok_or_else(|| {
            ClientError::Auth(format!(
                "exec plugin expirationTimestamp {ts:?} is not RFC 3339"
            ))
        })?),
        None => None,
    };
    Ok((token, expires))
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = s.get(19..)?;
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        rest = &frac[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 {
                return None;
            }
            sign * (rest.get(1..3)?.parse::<i64>().ok()? * 3600
                + rest.get(4..6)?.parse::<i64>().ok()? * 60)
        }
    };
    // Days from civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
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
        assert!(err.to_string().contains("denied"), "{err}");
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
