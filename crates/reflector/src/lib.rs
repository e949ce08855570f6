//! # reflector
//!
//! The layer that talks to the Kubernetes API server: its own HTTP client on hyper 1.x (TLS by
//! rustls, HTTP/1.1 or HTTP/2 by ALPN, bearer tokens, token files, client certificates, exec
//! plugins; configured from a kubeconfig or from inside a pod), a streaming watch decoder, a
//! paginated lister, and client-go's ListAndWatch loop ([`Reflector`]) feeding a
//! [`delta_fifo::Store`] (normally the informer's queue).
//!
//! ```text
//!  ClusterConfig ─► Client ─► HttpListerWatcher<K> ──list pages──► ObjectList<K>
//!                                    │           └──watch chunks──► WatchDecoder<K> ─► WatchEvent<K>
//!                                    ▼
//!                    Reflector<K, L, S>: list → store.replace(items, rv) → watch → store.add/update/delete
//! ```
//!
//! Three rooms, each importing only from those below it (`cargo xtask modules` checks it):
//! - `wire` (private; its items are re-exported here): what the API server's
//!   bytes mean, with no I/O: object decoding ([`Decode`]), exact-capacity and k8s-openapi
//!   decoding, list pages ([`ObjectList`]), watch frames ([`WatchDecoder`]), the server's
//!   [`Status`], request parameters ([`ListOptions`], [`WatchOptions`]), [`Resource`] and
//!   [`Representation`];
//! - [`client`]: the HTTP client (TLS, authentication, configuration, rate limits) and [`Api`];
//! - the list-and-watch loop: [`HttpListerWatcher`], the watch stream, pagination, the decode
//!   lanes, [`Reclaim`], [`Reflector`] and its errors ([`ReflectorError`]).
//!
//! Which thread reads, decodes and frees each object, and the wake-ups between them, is told
//! once for the whole informer, in `shared_informer::threading`.
//!
//! Invariants:
//! - the store sees a complete list (`replace`) before any watch event, and watch events in the
//!   server's order; objects are moved into their `Arc` once and never copied;
//! - the watch always resumes from the last resource version applied to the store; a relist
//!   happens only where the contract says (410, other watch errors, very short watches);
//! - bad input (a malformed event, an oversized event, a broken kubeconfig) is a typed error,
//!   never a panic; a broken watch ends with a relist, and nothing cached is lost.
//!
//! ```
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use reflector::{WatchDecoder, WatchEvent};
//! use reflector::store_index::{CompactObject, Object};
//!
//! // Chunks may split events anywhere.
//! let mut decoder = WatchDecoder::<CompactObject>::default();
//! let mut events = Vec::new();
//! decoder.decode(Bytes::from_static(br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVe"#), &mut events).unwrap();
//! decoder.decode(Bytes::from_static(b"rsion\":\"7\"}}}\n"), &mut events).unwrap();
//! match &events[0] {
//!     WatchEvent::Added(pod) => assert_eq!((pod.name(), pod.resource_version()), ("a", Some("7"))),
//!     other => panic!("{other:?}"),
//! }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;

mod backoff;
mod decode_lane;
mod error;
mod http_lister_watcher;
mod list;
mod lister_watcher;
mod metrics;
mod reclaim;
mod reflector;
mod shard_filter;
mod watch_idle;
mod watch_stream;
mod wire;

pub use backoff::{Backoff, BackoffConfig};
pub use client::{
    default_user_agent, on_error, retry_on_conflict, Api, ApiResource, BoxError, Client,
    ClientError, ClusterConfig, ConfigError, CreateOptions, Credentials, DeleteOptions, Deleted,
    ExecConfig, ExposeSecret, Impersonate, KubeconfigLoad, KubeconfigUser, KubeconfigWarning,
    ListOptions, OidcConfig, Patch, PatchOptions, Preconditions, PropagationPolicy, Proxy,
    RateLimit, Representation, Resource, ResourceVersionMatch, RetryBackoff, Scale, ScaleSpec,
    ScaleStatus, SecretSlice, SecretString, Status, StatusCause, StatusDetails, WatchBody,
    WatchOptions, WatchResponse, DEFAULT_MAX_BODY_BYTES, MAX_KUBECONFIG_BYTES, MAX_OBJECT_BYTES,
    SERVICE_ACCOUNT_DIR,
};
#[allow(deprecated)]
pub use client::{DeleteParams, PatchParams, PostParams};
pub use error::{PaginationError, ReflectorError, WatchEventType};
pub use http_lister_watcher::HttpListerWatcher;
pub use list::{
    page_byte_bound, DEFAULT_MAX_LIST_PAGES, DEFAULT_PAGE_SIZE, LIST_FROM_CACHE_BYTES,
    LIST_ITEM_ALLOWANCE_BYTES, LIST_PAGE_ENVELOPE_BYTES,
};
pub use lister_watcher::{ListerWatcher, WatchStream};
pub use metrics::{ReflectorMetrics, ReflectorStats};
pub use reclaim::Reclaim;
pub use reflector::{Reflector, ReflectorOptions, ShouldResync, WatchErrorHandler};
pub use watch_idle::{DEFAULT_WATCH_IDLE_TIMEOUT, WATCH_IDLE_MARGIN};
pub use watch_stream::{decode_watch_body, decode_watch_body_as};
pub use wire::decoder::{
    Bookmark, DecodeError, WatchDecoder, WatchEvent, DEFAULT_MAX_EVENT_SIZE,
    INITIAL_EVENTS_END_ANNOTATION,
};
pub use wire::encoding::{accept_dropping_managed_fields, Encoding, DROP_MANAGED_FIELDS};
pub use wire::list_page::{ListError, ListPageError, ObjectList};
pub use wire::object::{Decode, DecodeSource, ProtobufSource};
/// Kubernetes' protobuf encoding of built-in kinds: the wire layers (`wire::protobuf`), and
/// [`PbView`](protobuf::PbView), the informer object read through typed views, which sits beside
/// them because it is also a [`Decode`] type.
pub mod protobuf {
    #[cfg(feature = "k8s-pb")]
    pub use crate::wire::pb_view::PbView;
    #[doc(inline)]
    pub use crate::wire::protobuf::*;
}

/// What a user of this layer needs, in one import (the layers below included, and
/// `CancellationToken` to stop a reflector): `use reflector::prelude::*;`.
///
/// The old names `PostParams` and `PatchParams` stay here, deprecated, until the next breaking
/// release, so that code written against earlier releases compiles with a warning:
///
/// ```compile_fail
/// #![deny(deprecated)]
/// use reflector::prelude::*;
/// let _ = PatchParams::default();
/// ```
pub mod prelude {
    pub use crate::delta_fifo::prelude::*;
    pub use crate::{
        Api, Client, ClientError, ClusterConfig, CreateOptions, Decode, HttpListerWatcher,
        ListerWatcher, Patch, PatchOptions, Reflector, ReflectorError, ReflectorOptions, Resource,
        WatchEvent,
    };
    // Deprecated aliases: naming them warns; dropped with the next breaking release.
    #[allow(deprecated)]
    pub use crate::{PatchParams, PostParams};
    pub use tokio_util::sync::CancellationToken;
}

/// The cancellation token that stops reflectors, informers and controllers.
pub use tokio_util::sync::CancellationToken;

/// The secret wrappers credentials are held in ([`SecretString`] for
/// tokens and passwords), re-exported so that no direct dependency is needed.
pub use secrecy;

/// The layers below, re-exported so that depending on this crate is enough.
pub use delta_fifo;
pub use delta_fifo::store_index;

#[doc(hidden)]
pub use serde as __serde;

/// What `decode_with_serde_compacted!` expands to, from other crates.
#[doc(hidden)]
pub mod __exact {
    pub use crate::wire::exact::from_str_exact;
    pub use serde_json::Error;
}
