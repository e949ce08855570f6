//! Errors of the client: configuration that cannot be used ([`ConfigError`]) and requests that
//! failed ([`ClientError`]).

use std::error::Error as StdError;
use std::path::PathBuf;

use thiserror::Error;

use crate::wire::status::Status;

/// A boxed error from a transport or a plugin (the workspace's one boxed error type).
pub use delta_fifo::store_index::BoxError;

/// Configuration that cannot be loaded or used.
#[derive(Debug, Error)]
#[non_exhaustive]
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
///
/// The server's refusals that callers branch on have variants of their own, each carrying the
/// server's `Status`: [`Conflict`](Self::Conflict), [`NotFound`](Self::NotFound),
/// [`AlreadyExists`](Self::AlreadyExists), [`Invalid`](Self::Invalid),
/// [`Forbidden`](Self::Forbidden), [`TooManyRequests`](Self::TooManyRequests); every other
/// error `Status` is [`Api`](Self::Api). [`ClientError::api`] picks the variant from the
/// Status's reason (its code when the reason is missing), as client-go's `errors.IsConflict`
/// and its siblings do, and [`status`](Self::status) returns the Status of any of them.
///
/// ```
/// use reflector::{ClientError, Status};
///
/// let err = ClientError::api(Status::failure(409, "Conflict", "the object has been modified"));
/// assert!(matches!(err, ClientError::Conflict(_)));
/// assert!(err.is_conflict());
/// let err = ClientError::api(Status::failure(409, "AlreadyExists", "configmaps \"a\" already exists"));
/// assert!(matches!(err, ClientError::AlreadyExists(_)));
/// assert_eq!(err.status().map(|s| s.code), Some(409));
/// ```
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// 409 `Conflict`: the object changed since the resourceVersion the write was based on (or a
    /// server-side apply conflicts with another field manager's fields). Read it again and retry
    /// ([`retry_on_conflict`](crate::retry_on_conflict)).
    #[error("conflict: {0}")]
    Conflict(Box<Status>),
    /// 404 `NotFound`: the object (or the resource type, or the namespace) does not exist.
    #[error("not found: {0}")]
    NotFound(Box<Status>),
    /// 409 `AlreadyExists`: a create named an object that exists.
    #[error("already exists: {0}")]
    AlreadyExists(Box<Status>),
    /// 422 `Invalid`: the object failed validation; [`ClientError::causes`] lists the fields.
    #[error("invalid: {0}")]
    Invalid(Box<Status>),
    /// 403 `Forbidden`: the user may not do this (RBAC), or the namespace is terminating.
    #[error("forbidden: {0}")]
    Forbidden(Box<Status>),
    /// 429 `TooManyRequests`: the server (API priority and fairness) or a webhook asks the
    /// client to slow down; `retry_after` is its `Retry-After` (or `retryAfterSeconds`).
    #[error("too many requests (retry after {retry_after:?}): {status}")]
    TooManyRequests {
        /// The server's Status.
        status: Box<Status>,
        /// How long the server asked the client to wait, if it said.
        retry_after: Option<std::time::Duration>,
    },
    /// Any other error `Status` from the API server (an HTTP error, a `Status` body where an
    /// object was expected, or a watch `ERROR` event).
    #[error("the server reported {0}")]
    Api(Box<Status>),
    /// A successful answer whose body is not what the request asks for (not JSON, not an object
    /// of the expected type). The body is not quoted: it may hold a Secret's data.
    #[error("{what}: the server's answer cannot be read: {reason}")]
    Decode {
        /// The request.
        what: String,
        /// Why (the decoder's message, positions only).
        reason: String,
    },
    /// The [`Api`](crate::Api)'s write check refused the write (a leader's lease guard that
    /// lapsed, say); nothing was sent.
    #[error("{what}: the write was not sent: {reason}")]
    WriteRefused {
        /// The request.
        what: String,
        /// The check's reason.
        reason: String,
    },
    /// The request cannot be made as asked (a server-side apply without a field manager, `force`
    /// on another patch type, an object to replace without a name); nothing was sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
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
    /// The error the server's `status` means: [`Conflict`](Self::Conflict),
    /// [`NotFound`](Self::NotFound), [`AlreadyExists`](Self::AlreadyExists),
    /// [`Invalid`](Self::Invalid), [`Forbidden`](Self::Forbidden) or
    /// [`TooManyRequests`](Self::TooManyRequests) by its reason (by its code when the reason is
    /// empty or unknown), else [`Api`](Self::Api).
    pub fn api(status: Status) -> Self {
        // As client-go's `errors.Is*`: the reason decides; the code only when the reason is
        // none of the API's own (empty, or a proxy's invention).
        let reason = if KNOWN_REASONS.contains(&status.reason.as_str()) {
            status.reason.as_str()
        } else {
            match status.code {
                409 => "Conflict",
                404 => "NotFound",
                422 => "Invalid",
                403 => "Forbidden",
                429 => "TooManyRequests",
                _ => "",
            }
        };
        match reason {
            "Conflict" => ClientError::Conflict(Box::new(status)),
            "NotFound" => ClientError::NotFound(Box::new(status)),
            "AlreadyExists" => ClientError::AlreadyExists(Box::new(status)),
            "Invalid" => ClientError::Invalid(Box::new(status)),
            "Forbidden" => ClientError::Forbidden(Box::new(status)),
            "TooManyRequests" => {
                let retry_after = status
                    .details
                    .as_ref()
                    .and_then(|d| d.retry_after_seconds)
                    .map(|s| std::time::Duration::from_secs(u64::from(s)));
                ClientError::TooManyRequests {
                    status: Box::new(status),
                    retry_after,
                }
            }
            _ => ClientError::Api(Box::new(status)),
        }
    }

    /// The server's `Status`, if the server answered.
    pub fn status(&self) -> Option<&Status> {
        match self {
            ClientError::Api(s)
            | ClientError::Conflict(s)
            | ClientError::NotFound(s)
            | ClientError::AlreadyExists(s)
            | ClientError::Invalid(s)
            | ClientError::Forbidden(s)
            | ClientError::TooManyRequests { status: s, .. }
            | ClientError::NotAcceptable { status: s, .. } => Some(s.as_ref()),
            _ => None,
        }
    }

    /// 409 Conflict (not AlreadyExists): client-go's `errors.IsConflict`.
    pub fn is_conflict(&self) -> bool {
        matches!(self, ClientError::Conflict(_))
    }

    /// 404 Not Found: client-go's `errors.IsNotFound`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, ClientError::NotFound(_))
    }

    /// 409 AlreadyExists: client-go's `errors.IsAlreadyExists`.
    pub fn is_already_exists(&self) -> bool {
        matches!(self, ClientError::AlreadyExists(_))
    }

    /// The fields a 422 Invalid names (`details.causes`); empty for other errors.
    pub fn causes(&self) -> &[crate::wire::status::StatusCause] {
        match self {
            ClientError::Invalid(s) => s.details.as_ref().map_or(&[], |d| d.causes.as_slice()),
            _ => &[],
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

/// The `StatusReason`s of `meta/v1`: a Status with one of these is classified by it alone.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::status::{StatusCause, StatusDetails};

    #[test]
    fn a_status_is_classified_by_its_reason_then_by_its_code() {
        let e = |code, reason: &str| ClientError::api(Status::failure(code, reason, "m"));
        assert!(e(409, "Conflict").is_conflict());
        assert!(e(409, "AlreadyExists").is_already_exists());
        assert!(e(409, "").is_conflict());
        assert!(e(404, "NotFound").is_not_found());
        assert!(e(404, "Unknown").is_not_found());
        assert!(matches!(e(422, "Invalid"), ClientError::Invalid(_)));
        assert!(matches!(e(403, "Forbidden"), ClientError::Forbidden(_)));
        // A known reason decides even with another code, and keeps Api for the others.
        assert!(matches!(e(410, "Expired"), ClientError::Api(_)));
        assert!(matches!(e(404, "Gone"), ClientError::Api(_)));
        assert!(matches!(e(500, "InternalError"), ClientError::Api(_)));
        let mut s = Status::failure(429, "TooManyRequests", "slow down");
        s.details = Some(StatusDetails {
            retry_after_seconds: Some(3),
            ..Default::default()
        });
        match ClientError::api(s) {
            ClientError::TooManyRequests {
                retry_after,
                status,
            } => {
                assert_eq!(retry_after, Some(std::time::Duration::from_secs(3)));
                assert_eq!(status.code, 429);
            }
            other => panic!("{other:?}"),
        }
        let mut s = Status::failure(422, "Invalid", "bad");
        s.details = Some(StatusDetails {
            causes: vec![StatusCause {
                cause_type: "FieldValueRequired".into(),
                message: "name is required".into(),
                field: "metadata.name".into(),
            }],
            ..Default::default()
        });
        assert_eq!(ClientError::api(s).causes()[0].field, "metadata.name");
        assert!(ClientError::Timeout(std::time::Duration::from_secs(1))
            .causes()
            .is_empty());
    }
}
