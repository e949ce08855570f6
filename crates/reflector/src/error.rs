//! Errors of the reflector layer.

use std::error::Error as StdError;

use delta_fifo::FifoError;
use thiserror::Error;

use crate::config::ConfigError;
use crate::decoder::DecodeError;
use crate::status::Status;

/// A boxed error from a transport or a plugin.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Errors of listing, watching and the ListAndWatch loop.
#[derive(Debug, Error)]
pub enum ReflectorError {
    /// The API server answered with an error `Status` (HTTP error, or a watch `ERROR` event).
    #[error("the server reported {0}")]
    Api(Box<Status>),
    /// The request never got an answer: connection, TLS or protocol failure.
    #[error("transport: {message}")]
    Transport {
        /// What failed.
        message: String,
        /// Whether the connection was refused (the reflector then re-watches after a backoff).
        connection_refused: bool,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
    /// A request exceeded its timeout.
    #[error("request timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A watch or list body could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The list failed (contract C3.2); the inner error stays matchable through
    /// [`ReflectorError::inner`] and the helpers.
    #[error("failed to list {type_description}: {source}")]
    ListFailed {
        /// The reflector's type description.
        type_description: String,
        /// The list error.
        #[source]
        source: Box<ReflectorError>,
    },
    /// The store rejected the list result (contract C7.1).
    #[error("unable to sync list result: {0}")]
    SyncList(#[source] FifoError),
    /// The list answered with a server-side Table (contract C6.4).
    #[error("unsupported list gvk: {0}")]
    UnsupportedListGvk(String),
    /// The watch closed in under a second without any event (contract C11.2).
    #[error("very short watch: {name}: Unexpected watch close - watch lasted less than a second and no items received")]
    VeryShortWatch {
        /// The reflector's name.
        name: String,
    },
    /// A list response was valid JSON but not a list (`{}`, a missing `items` or
    /// `metadata.resourceVersion`, a kind that is not a list); nothing of it was used.
    #[error(transparent)]
    InvalidList(#[from] crate::list::ListError),
    /// A paginated list did not end within its bounds (a repeated `continue` token, too many
    /// pages); nothing of it was used.
    #[error("list pagination: {0}")]
    Pagination(#[from] crate::list::PaginationError),
    /// A response body exceeded its configured maximum size (a list page larger than
    /// `max_list_page_bytes`, or a body that never ends); reading stopped there.
    #[error("{what}: the response body exceeds the maximum of {limit} bytes")]
    BodyTooLarge {
        /// The request.
        what: String,
        /// The configured maximum.
        limit: usize,
    },
    /// A watch stream received nothing at all (no event, no bookmark) for longer than its idle
    /// timeout: the connection is presumed dead and the watch is ended, to be resumed.
    #[error("the watch received nothing for {0:?}; presuming the connection dead")]
    WatchIdle(std::time::Duration),
    /// The configuration could not be loaded or used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Credentials could not be obtained.
    #[error("authentication: {0}")]
    Auth(String),
}

impl ReflectorError {
    /// An [`ReflectorError::Api`] error carrying `status`.
    pub fn api(status: Status) -> Self {
        ReflectorError::Api(Box::new(status))
    }

    /// The innermost error (looking through [`ReflectorError::ListFailed`]).
    pub fn inner(&self) -> &ReflectorError {
        match self {
            ReflectorError::ListFailed { source, .. } => source.inner(),
            other => other,
        }
    }

    /// The server's `Status`, if the server answered.
    pub fn status(&self) -> Option<&Status> {
        match self.inner() {
            ReflectorError::Api(s) => Some(s.as_ref()),
            _ => None,
        }
    }

    /// 410 Expired / Gone.
    pub fn is_expired(&self) -> bool {
        self.status().is_some_and(Status::is_expired)
    }

    /// "Too large resource version" (contract C6.2).
    pub fn is_too_large_resource_version(&self) -> bool {
        self.status()
            .is_some_and(Status::is_too_large_resource_version)
    }

    /// 429 Too Many Requests.
    pub fn is_too_many_requests(&self) -> bool {
        self.status().is_some_and(Status::is_too_many_requests)
    }

    /// 500 Internal Error.
    pub fn is_internal_error(&self) -> bool {
        self.status().is_some_and(Status::is_internal_error)
    }

    /// The connection was refused.
    pub fn is_connection_refused(&self) -> bool {
        matches!(
            self.inner(),
            ReflectorError::Transport {
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
        ReflectorError::Transport {
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
