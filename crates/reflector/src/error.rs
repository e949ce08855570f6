//! Errors of listing, watching and the ListAndWatch loop. A failed request is the client's
//! [`ClientError`], wrapped; the rest are what the loop itself finds wrong.

use std::fmt;

use delta_fifo::store_index::KeyError;
use delta_fifo::FifoError;
use thiserror::Error;

use crate::client::{ClientError, ConfigError, Status};
use crate::wire::decoder::DecodeError;

/// Errors of listing, watching and the ListAndWatch loop.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ReflectorError {
    /// A request failed: the server's error `Status` (an HTTP error, a `Status` where a list was
    /// expected, a watch `ERROR` event), a transport failure, a timeout, a body too large, the
    /// configuration or the credentials.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A watch body could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A list response was valid JSON but not a list (`{}`, a missing `items` or
    /// `metadata.resourceVersion`, a kind that is not a list); nothing of it was used.
    #[error(transparent)]
    InvalidList(#[from] crate::wire::list_page::ListError),
    /// A paginated list did not end within its bounds (a repeated `continue` token, too many
    /// pages); nothing of it was used.
    #[error("list pagination: {0}")]
    Pagination(#[from] PaginationError),
    /// The list failed (contract C3.2); the inner error stays matchable through
    /// [`ReflectorError::inner`] and the helpers.
    #[error("failed to list {type_description}: {source}")]
    ListFailed {
        /// The reflector's type description: the resource (`pods`, `widgets.example.com`)
        /// unless the options name something else.
        type_description: String,
        /// The list error.
        #[source]
        source: Box<ReflectorError>,
    },
    /// The store rejected the list result (contract C7.1), or a watch-list snapshot (C13.2).
    #[error("unable to sync list result: {0}")]
    SyncList(#[source] FifoError),
    /// The store refused a watch event's object (contract C10.1): a key it cannot compute, a
    /// failing transform. The change is missing from the store; the watch goes on. Never
    /// returned: logged and handed to the watch error handler.
    #[error("unable to apply a watch {event} event to the store: {source}")]
    StoreRefused {
        /// The event whose object was refused.
        event: WatchEventType,
        /// The store's error.
        #[source]
        source: FifoError,
    },
    /// The list answered with a server-side Table (contract C6.4).
    #[error("unsupported list gvk: {0}")]
    UnsupportedListGvk(String),
    /// The watch closed in under a second without any event (contract C11.2).
    #[error("very short watch: {name}: Unexpected watch close - watch lasted less than a second and no items received")]
    VeryShortWatch {
        /// The reflector's name.
        name: String,
    },
    /// A watch stream received nothing at all (no event, no bookmark) for longer than its idle
    /// timeout: the connection is presumed dead and the watch is ended, to be resumed.
    #[error("the watch received nothing for {0:?}; presuming the connection dead")]
    WatchIdle(std::time::Duration),
}

impl From<ConfigError> for ReflectorError {
    fn from(e: ConfigError) -> Self {
        ReflectorError::Client(e.into())
    }
}

impl ReflectorError {
    /// The error a server's `Status` means ([`ClientError::Api`]).
    pub fn api(status: Status) -> Self {
        ReflectorError::Client(ClientError::api(status))
    }

    /// The innermost error (looking through [`ReflectorError::ListFailed`]).
    pub fn inner(&self) -> &ReflectorError {
        match self {
            ReflectorError::ListFailed { source, .. } => source.inner(),
            other => other,
        }
    }

    /// The failed request's error, if a request failed.
    pub fn client_error(&self) -> Option<&ClientError> {
        match self.inner() {
            ReflectorError::Client(e) => Some(e),
            _ => None,
        }
    }

    /// The server's `Status`, if the server answered.
    pub fn status(&self) -> Option<&Status> {
        self.client_error().and_then(ClientError::status)
    }

    /// The store's key error, when the store could not key an object of a list, a watch-list
    /// snapshot or a watch event: an object without metadata under the default key function is
    /// [`KeyError::NoMeta`] (give the store, or the informer, a key function of its own).
    pub fn key_error(&self) -> Option<&KeyError> {
        match self.inner() {
            ReflectorError::SyncList(e) | ReflectorError::StoreRefused { source: e, .. } => {
                e.key_error()
            }
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

    /// A response body overran its bound ([`ClientError::BodyTooLarge`]).
    pub fn is_body_too_large(&self) -> bool {
        matches!(self.client_error(), Some(ClientError::BodyTooLarge { .. }))
    }

    /// The connection was refused.
    pub fn is_connection_refused(&self) -> bool {
        self.client_error()
            .is_some_and(ClientError::is_connection_refused)
    }

    /// 406 Not Acceptable: the server knows none of the representations the request asked for
    /// ([`ClientError::NotAcceptable`] names the `Accept` header).
    pub fn is_not_acceptable(&self) -> bool {
        self.client_error()
            .is_some_and(ClientError::is_not_acceptable)
    }
}

/// The type of a watch event whose object the store refused ([`ReflectorError::StoreRefused`]),
/// shown as the API server names it (`ADDED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchEventType {
    /// `ADDED`: the store's `add`.
    Added,
    /// `MODIFIED`: the store's `update`.
    Modified,
    /// `DELETED`: the store's `delete`.
    Deleted,
}

impl fmt::Display for WatchEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WatchEventType::Added => "ADDED",
            WatchEventType::Modified => "MODIFIED",
            WatchEventType::Deleted => "DELETED",
        })
    }
}

/// Why a paginated list was abandoned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PaginationError {
    /// The server sent a `continue` token it had already sent during this list: following it
    /// would loop forever.
    #[error("the server repeated the continue token {token:?} after {pages} pages")]
    RepeatedContinue {
        /// The repeated token.
        token: String,
        /// Pages received before it came back.
        pages: u32,
    },
    /// A list asked for without a limit came back with a `continue` token.
    #[error("the server paginated a list requested without a limit (continue token {token:?})")]
    UnexpectedContinue {
        /// The token.
        token: String,
    },
    /// The list needed more pages than the configured maximum.
    #[error("the list needs more than {max} pages (ReflectorOptions::max_list_pages)")]
    TooManyPages {
        /// The configured maximum.
        max: u32,
    },
}

impl From<crate::wire::list_page::ListPageError> for ReflectorError {
    /// A `Status` body is the error the server meant ([`ClientError::Api`]); a body that is not a
    /// list is [`ReflectorError::InvalidList`].
    fn from(e: crate::wire::list_page::ListPageError) -> Self {
        match e {
            crate::wire::list_page::ListPageError::Status(status) => ReflectorError::api(*status),
            crate::wire::list_page::ListPageError::NotAList(l) => ReflectorError::InvalidList(l),
        }
    }
}
