//! The Kubernetes API client: HTTP/1.1 and HTTP/2 on hyper, TLS by rustls, authentication
//! (tokens, token files, basic, exec plugins), cluster configuration from a kubeconfig or from
//! inside a pod, resource addressing, request parameters, the server's `Status`, and the client's
//! own rate limiter. It knows nothing of watch events, lists of objects or the ListAndWatch loop,
//! which live beside it in this crate and use it through [`Client`]; its failures are
//! [`ClientError`] (and [`ConfigError`] for configuration), which the loop's
//! [`ReflectorError`](crate::ReflectorError) wraps.
//!
//! ```text
//!  ClusterConfig ──► Client ──┬─ get_bytes_within (lists: bounded body, request timeout,
//!  (kubeconfig,        │      │                    gzip decompressed as it arrives)
//!   in-cluster)        │      └─ watch (a streaming body; HTTP/1.1 on a connection of its own)
//!                      │         (`*_accepting`: with a Representation's `Accept` header)
//!                      ├─ request_bytes (any verb, a body, the answer read whole) ◄── Api<K>
//!                      │  (get, list, create, replace, patch, delete, status and scale)
//!                      └─ Authenticator (Authorization header), TokenBuckets (rate limits), TLS
//! ```

mod api;
mod auth;
mod config;
mod content_encoding;
mod error;
mod http;
mod incluster;
mod kubeconfig;
mod kubeconfig_write_back;
mod oidc;
mod proxy;
mod rate_limit;
mod retry;
mod tls;
mod watch_body;

pub use crate::wire::params::{ListOptions, ResourceVersionMatch, WatchOptions};
pub use crate::wire::representation::Representation;
pub use crate::wire::resource::{ApiResource, Resource};
pub use crate::wire::status::{Status, StatusCause, StatusDetails};
pub use api::{
    Api, CreateOptions, DeleteOptions, Deleted, Patch, PatchOptions, Preconditions,
    PropagationPolicy, Scale, ScaleSpec, ScaleStatus, MAX_OBJECT_BYTES,
};
#[allow(deprecated)]
pub use api::{DeleteParams, PatchParams, PostParams};
pub use config::{
    default_user_agent, ClusterConfig, Credentials, ExecConfig, Impersonate, KubeconfigUser,
    OidcConfig,
};
pub use error::{BoxError, ClientError, ConfigError};
pub use http::{Client, WatchResponse, WriteCheck, DEFAULT_MAX_BODY_BYTES};
pub use incluster::SERVICE_ACCOUNT_DIR;
pub use kubeconfig::{KubeconfigLoad, KubeconfigWarning, MAX_KUBECONFIG_BYTES};
pub use proxy::Proxy;
pub use rate_limit::RateLimit;
pub use retry::{on_error, retry_on_conflict, RetryBackoff};
pub use secrecy::{ExposeSecret, SecretSlice, SecretString};
pub use watch_body::WatchBody;
