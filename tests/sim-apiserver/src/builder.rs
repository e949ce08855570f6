//! The server's configuration: [`SimServerBuilder`], whose fields every handler reads through
//! [`Shared::cfg`](crate::shared::Shared); [`SimServerBuilder::start`] is the server's own.

use std::time::Duration;

use crate::authz::{Rule, Subject};
use crate::compression::DEFAULT_GZIP_MIN_BYTES;
use crate::resources::ResourceDef;
use crate::users::User;

/// Builder for [`SimServer`](crate::SimServer). Its `Debug` shows no token.
#[derive(Clone)]
pub struct SimServerBuilder {
    pub(crate) tls: bool,
    pub(crate) http2: bool,
    pub(crate) token: Option<String>,
    pub(crate) client_cert_auth: bool,
    pub(crate) max_log_events: usize,
    pub(crate) watch_buffer: usize,
    pub(crate) bookmark_interval: Duration,
    pub(crate) default_watch_timeout: Duration,
    pub(crate) watch_cache: bool,
    pub(crate) partial_object_metadata: bool,
    pub(crate) protobuf: bool,
    pub(crate) sharded_list_and_watch: bool,
    pub(crate) managed_fields_opt_out: bool,
    pub(crate) resources: Vec<ResourceDef>,
    pub(crate) readonly_tokens: Vec<String>,
    pub(crate) user_tokens: Vec<(String, String)>,
    pub(crate) users: Vec<User>,
    pub(crate) grants: Vec<(Subject, Rule)>,
    pub(crate) history_limit: usize,
    pub(crate) history_max_versions: usize,
    pub(crate) write_log_limit: usize,
    pub(crate) gzip: bool,
    pub(crate) gzip_min_bytes: usize,
}

impl std::fmt::Debug for SimServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let user_names: Vec<&str> = self.user_tokens.iter().map(|(_, u)| u.as_str()).collect();
        f.debug_struct("SimServerBuilder")
            .field("tls", &self.tls)
            .field("http2", &self.http2)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("client_cert_auth", &self.client_cert_auth)
            .field("users", &self.users)
            .field("user_tokens", &user_names)
            .field("readonly_tokens", &self.readonly_tokens.len())
            .field("grants", &self.grants)
            .field("resources", &self.resources.len())
            .finish_non_exhaustive()
    }
}

impl Default for SimServerBuilder {
    fn default() -> Self {
        Self {
            tls: false,
            http2: true,
            token: None,
            client_cert_auth: false,
            max_log_events: 10_000,
            watch_buffer: 1024,
            bookmark_interval: Duration::from_secs(60),
            default_watch_timeout: Duration::from_secs(1800),
            watch_cache: true,
            partial_object_metadata: true,
            protobuf: true,
            sharded_list_and_watch: true,
            managed_fields_opt_out: true,
            resources: Vec::new(),
            readonly_tokens: Vec::new(),
            user_tokens: Vec::new(),
            users: Vec::new(),
            grants: Vec::new(),
            history_limit: crate::storage::DEFAULT_HISTORY_LIMIT,
            history_max_versions: crate::storage::DEFAULT_HISTORY_MAX_VERSIONS,
            write_log_limit: crate::write_log::DEFAULT_WRITE_LOG_LIMIT,
            gzip: false,
            gzip_min_bytes: DEFAULT_GZIP_MIN_BYTES,
        }
    }
}

impl SimServerBuilder {
    /// Serve HTTPS with a generated CA (default: plain HTTP).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Accept HTTP/2 (prior knowledge on plain HTTP, ALPN `h2` on TLS). Default on.
    pub fn http2(mut self, on: bool) -> Self {
        self.http2 = on;
        self
    }

    /// Require `Authorization: Bearer <token>` (401 otherwise).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Also accept a client certificate signed by the generated CA instead of the token.
    pub fn client_cert_auth(mut self, on: bool) -> Self {
        self.client_cert_auth = on;
        self
    }

    /// Keep at most this many events in the log (older ones are compacted). Default 10 000.
    pub fn max_log_events(mut self, n: usize) -> Self {
        self.max_log_events = n;
        self
    }

    /// Events buffered per watcher before it is ended as too slow. Default 1024.
    pub fn watch_buffer(mut self, n: usize) -> Self {
        self.watch_buffer = n;
        self
    }

    /// Interval between bookmarks on watches with `allowWatchBookmarks=true`. Default 60 s.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// Watch timeout when the request has no `timeoutSeconds`. Default 30 min.
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.default_watch_timeout = d;
        self
    }

    /// Behave as if a watch cache is enabled: lists at `resourceVersion=0` ignore `limit`.
    /// Default on; off makes every list paginate.
    pub fn watch_cache(mut self, on: bool) -> Self {
        self.watch_cache = on;
        self
    }

    /// Serve the metadata representation (`PartialObjectMetadata`, `PartialObjectMetadataList`)
    /// when the `Accept` header asks for it. Default on; off, the server behaves as one that
    /// does not know it (older or aggregated API servers): such ranges of the header are passed
    /// over, so a client that lists plain `application/json` after them gets whole objects, and
    /// one that does not gets 406.
    pub fn partial_object_metadata(mut self, on: bool) -> Self {
        self.partial_object_metadata = on;
        self
    }

    /// Speak Kubernetes' protobuf encoding for built-in kinds (see [`crate::protobuf`]). Default
    /// on; off, the server behaves as one that only speaks JSON (aggregated API servers): a
    /// protobuf `Accept` range is passed over (JSON if listed after it, else 406) and a protobuf
    /// body is 415.
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = on;
        self
    }

    /// Serve server-side sharded lists and watches (the `shardSelector` parameter; see
    /// [`crate::shard_selector`]), standing for kube-apiserver's `ShardedListAndWatch` feature
    /// gate. Default on, as on the project's real kube-apiserver; off, the server behaves as one
    /// without the gate (or older): it ignores the parameter, so lists and watches carry every
    /// object and no list echoes `shardInfo`.
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.sharded_list_and_watch = on;
        self
    }

    /// Leave `metadata.managedFields` out of the objects of an answer whose `Accept` asks for
    /// it with `drop=metadata.managedFields` (see [`crate::managed_fields`]), standing for
    /// kube-apiserver's `ManagedFieldsOptOut` feature gate (KEP-5958, alpha). Default on; off,
    /// the server behaves as one without the gate (or older, 1.36 included): it ignores the
    /// parameter and sends the managed fields.
    pub fn managed_fields_opt_out(mut self, on: bool) -> Self {
        self.managed_fields_opt_out = on;
        self
    }

    /// Also accept this bearer token, for a user (named after the token) who may only read:
    /// its writes get 403 Forbidden.
    #[deprecated(
        note = "use `.user(User::new(name).token(token)).allow(Subject::user(name), Rule::read_only())`"
    )]
    pub fn readonly_token(mut self, token: impl Into<String>) -> Self {
        self.readonly_tokens.push(token.into());
        self
    }

    /// Also accept this bearer token, authenticating `user` with full access (several may be
    /// given: one identity per replica of a leader-elected controller). Per-user faults
    /// ([`Faults::partition_user`](crate::faults::Faults::partition_user), [`Faults::slow_user`](crate::faults::Faults::slow_user)) match on `user`.
    pub fn user_token(mut self, token: impl Into<String>, user: impl Into<String>) -> Self {
        self.user_tokens.push((token.into(), user.into()));
        self
    }

    /// Keep the last `n` records of [`SimServer::write_log`](crate::SimServer::write_log) (the oldest go first). Default
    /// [`crate::DEFAULT_WRITE_LOG_LIMIT`] (100 000); 0 keeps none.
    pub fn write_log_limit(mut self, n: usize) -> Self {
        self.write_log_limit = n;
        self
    }

    /// Adds a user (by token and/or client certificate), with the groups it is in. Once a
    /// user is added, requests without credentials are 401 `Unauthorized`; what a user may
    /// do is what [`allow`](Self::allow) grants it or its groups (`system:masters`: anything).
    pub fn user(mut self, user: User) -> Self {
        self.users.push(user);
        self
    }

    /// Grants `rule` to `subject` (see [`crate::authz`]). Requests a user is not granted are
    /// 403 `Forbidden`, worded as kube-apiserver words them.
    pub fn allow(mut self, subject: Subject, rule: Rule) -> Self {
        self.grants.push((subject, rule));
        self
    }

    /// Keep the last `n` versions of each object for [`SimServer::history`](crate::SimServer::history). Default
    /// [`crate::storage::DEFAULT_HISTORY_LIMIT`] (16); 0 keeps none.
    pub fn history_limit(mut self, n: usize) -> Self {
        self.history_limit = n;
        self
    }

    /// Keep at most `n` versions over all objects for [`SimServer::history`](crate::SimServer::history) (the oldest
    /// go first). Default [`crate::storage::DEFAULT_HISTORY_MAX_VERSIONS`] (10 000).
    pub fn history_max_versions(mut self, n: usize) -> Self {
        self.history_max_versions = n;
        self
    }

    /// Compress responses as kube-apiserver does: a whole body (a list, a get, discovery, an
    /// error; never a watch) of at least [`gzip_min_bytes`](Self::gzip_min_bytes) is sent with
    /// `Content-Encoding: gzip` when the request says `Accept-Encoding: gzip`. Default off, so
    /// that benchmarks measure what they always did; counted in
    /// [`CounterSnapshot::gzip_responses`](crate::CounterSnapshot::gzip_responses).
    pub fn gzip_responses(mut self, on: bool) -> Self {
        self.gzip = on;
        self
    }

    /// The smallest body [`gzip_responses`](Self::gzip_responses) compresses. Default
    /// [`DEFAULT_GZIP_MIN_BYTES`] (128 KiB, kube-apiserver's); tests set it low to compress
    /// small lists (0 compresses every whole body).
    pub fn gzip_min_bytes(mut self, bytes: usize) -> Self {
        self.gzip_min_bytes = bytes;
        self
    }

    /// Registers an extra resource (e.g. a custom resource).
    pub fn resource(mut self, def: ResourceDef) -> Self {
        self.resources.push(def);
        self
    }
}
