//! Errors of the client: configuration that cannot be used ([`ConfigError`]) and requests that
//! failed ([`ClientError`]).

use std::error::Error as StdError;
use std::path::PathBuf;

use thiserror::Error;

use super::status::Status;

/// A boxed error from a transport or a plugin (the workspace's one boxed error type).
pub use delta_fifo::store_index::BoxError;

/// Configuration that cannot be loaded or used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A kubeconfig file is not valid YAML of a kubeconfig. The reason keeps the parser's words
    /// and position but not the values it quotes: a kubeconfig holds tokens and keys.
    #[error("parsing kubeconfig {path}: {reason}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// Why, with quoted values redacted.
        reason: String,
    },
    /// A kubeconfig field is missing or wrong; `field` names it (`users[admin].user.token`).
    #[error("kubeconfig field {field}: {reason}")]
    Field {
        /// Path of the field.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// Not running in a pod, or the pod's environment is incomplete.
    #[error("in-cluster configuration: {0}")]
    InCluster(String),
    /// Certificates or keys are unusable.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// A proxy setting cannot be used; `setting` names it (`HTTPS_PROXY`, the configuration's
    /// `proxy` field). Its value is never quoted: a proxy URL may hold a password.
    #[error("proxy setting {setting}: {reason}")]
    Proxy {
        /// The environment variable or configuration field.
        setting: String,
        /// What is wrong.
        reason: String,
    },
    /// The server URL is invalid.
    #[error("invalid server URL {url:?}: {reason}")]
    Url {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
}

/// A request that failed: the server answered with an error, or never answered usefully.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The API server answered with an error `Status` (an HTTP error, a `Status` body where an
    /// object was expected, or a watch `ERROR` event).
    #[error("the server reported {0}")]
    Api(Box<Status>),
    /// The server answered `406 Not Acceptable`: it can write the answer in none of the media
    /// types (and representations, `as=…`) the `Accept` header listed. Retrying cannot help;
    /// ask for a representation the server knows, or add plain `application/json` to fall back
    /// on.
    #[error("the server cannot answer in a representation the request accepts (Accept: {accept}): {status}")]
    NotAcceptable {
        /// The `Accept` header sent.
        accept: String,
        /// The server's `Status` (`NotAcceptable`, 406).
        status: Box<Status>,
    },
    /// The request never got an answer: connection, TLS or protocol failure.
    #[error("transport: {message}")]
    Transport {
        /// What failed.
        message: String,
        /// Whether the connection was refused (a reflector then re-watches after a backoff).
        connection_refused: bool,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// A request exceeded its timeout.
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A response body exceeded its configured maximum size (a list page larger than its limit,
    /// or a body that never ends); reading stopped there.
    #[error("{what}: the response body exceeds the maximum of {limit} bytes")]
    BodyTooLarge {
        /// The request.
        what: String,
        /// The configured maximum.
        limit: usize,
    },
    /// The configuration could not be loaded or used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Credentials could not be obtained.
    #[error("authentication: {0}")]
    Auth(String),
}

impl ClientError {
    /// An [`ClientError::Api`] error carrying `status`.
    pub fn api(status: Status) -> Self {
        ClientError::Api(Box::new(status))
    }

    /// The server's `Status`, if the server answered.
    pub fn status(&self) -> Option<&Status> {
        match self {
            ClientError::Api(s) | ClientError::NotAcceptable { status: s, .. } => Some(s.as_ref()),
            _ => None,
        }
    }

    /// 406 Not Acceptable: the server knows none of the representations asked for.
    pub fn is_not_acceptable(&self) -> bool {
        matches!(self, ClientError::NotAcceptable { .. })
            || self.status().is_some_and(Status::is_not_acceptable)
    }

    /// The connection was refused.
    pub fn is_connection_refused(&self) -> bool {
        matches!(
            self,
            ClientError::Transport {
                connection_refused: true,
                ..
            }
        )
    }

    /// A transport error from any error, detecting a refused connection in its source chain.
    pub fn transport(message: impl Into<String>, source: BoxError) -> Self {
        let mut refused = false;
        let mut cur: Option<&(dyn StdError + 'static)> = Some(source.as_ref());
        while let Some(e) = cur {
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                refused |= io.kind() == std::io::ErrorKind::ConnectionRefused;
            }
            cur = e.source();
        }
        let message = format!("{}: {}", message.into(), chain(source.as_ref()));
        ClientError::Transport {
            message,
            connection_refused: refused,
            source: Some(source),
        }
    }
}

/// An error and its sources, joined by `: `.
fn chain(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// `message` with every quoted or backquoted stretch replaced by `…`: parser messages quote the
/// values they found, and a configuration's values may be secrets.
pub(crate) fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut open: Option<char> = None;
    for c in message.chars() {
        match open {
            Some(q) if c == q => {
                out.push('…');
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None => {
                out.push(c);
                if c == '"' || c == '`' {
                    open = Some(c);
                }
            }
        }
    }
    if open.is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_values_are_redacted_and_the_rest_kept() {
        assert_eq!(
            redact_quoted(r#"invalid type: string "s3cr3t", expected a map at line 4 column 7"#),
            r#"invalid type: string "…", expected a map at line 4 column 7"#
        );
        assert_eq!(
            redact_quoted("found `tok` and \"unterminated"),
            "found `…` and \"…"
        );
    }
}
