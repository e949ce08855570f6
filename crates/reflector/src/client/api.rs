//! [`Api`]: the verbs on one resource type, through the same [`Client`] (configuration,
//! connections, credentials, rate limits) the informers list and watch with; its docs list them.

use std::marker::PhantomData;
use std::sync::Arc;

use bytes::Bytes;
use http::Method;
use serde::{Deserialize, Serialize};

use super::error::ClientError;
use super::http::{Client, WriteCheck, DEFAULT_MAX_BODY_BYTES};
use crate::store_index::ObjectMeta;
use crate::wire::encoding::Encoding;
use crate::wire::list_page::{ListPageError, ObjectList};
use crate::wire::object::{Decode, DecodeSource, ProtobufSource};
use crate::wire::params::ListOptions;
use crate::wire::protobuf::{is_protobuf, ProtobufError, Unknown};
use crate::wire::resource::{ApiResource, Resource};
use crate::wire::status::Status;

/// Bound on one object's response body: kube-apiserver stores objects of at most about 1.5 MB
/// (etcd's request limit), so 16 MiB leaves room for any real object and stops an endless body.
pub const MAX_OBJECT_BYTES: usize = 16 << 20;

/// The verbs on one resource type, in one namespace or across all of them. Cheap to clone.
///
/// `K` is the object type requests decode into (any [`Decode`] type) and writes send (any
/// `Serialize` type).
///
/// Reads: [`get`](Api::get), [`get_opt`](Api::get_opt), [`list`](Api::list). Writes:
/// [`create`](Api::create), [`replace`](Api::replace) (an update carrying the object's
/// `resourceVersion`: optimistic concurrency, 409 [`Conflict`](ClientError::Conflict) when the
/// object changed), [`patch`](Api::patch) (JSON merge, JSON patch, strategic merge, server-side
/// apply), [`delete`](Api::delete) (preconditions, propagation policy),
/// [`delete_collection`](Api::delete_collection); the `status` subresource
/// ([`get_status`](Api::get_status), [`replace_status`](Api::replace_status),
/// [`patch_status`](Api::patch_status)) and the `scale` subresource
/// ([`get_scale`](Api::get_scale), [`replace_scale`](Api::replace_scale),
/// [`patch_scale`](Api::patch_scale)). Every write can be a dry run.
///
/// Objects are decoded with [`Decode`], so an `Api` works for every type an informer does:
/// typed `k8s_openapi` objects, [`DynamicObject`](crate::store_index::DynamicObject),
/// [`CompactObject`](crate::store_index::CompactObject). Writes send the object as JSON
/// (`serde::Serialize`). A body that is a failure `Status`, whatever the HTTP code, is the error
/// it means, never an object.
///
/// ```no_run
/// use reflector::store_index::DynamicObject;
/// use reflector::{retry_on_conflict, Api, Client, ClientError, ClusterConfig, Patch, PatchOptions,
///                 CreateOptions, Resource, RetryBackoff};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = Client::new(&ClusterConfig::from_kubeconfig(None)?)?;
/// let cms: Api<DynamicObject> =
///     Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "default");
/// let mut cm = DynamicObject::new("v1", "ConfigMap");
/// cm.metadata.name = Some("settings".into());
/// cm.data.insert("data".into(), serde_json::json!({"mode": "fast"}));
/// match cms.create(&CreateOptions::default(), &cm).await {
///     Ok(_) | Err(ClientError::AlreadyExists(_)) => {}
///     Err(e) => return Err(e.into()),
/// }
/// // Read, modify, write: retried on a conflict with client-go's `retry.DefaultRetry`.
/// retry_on_conflict(RetryBackoff::DEFAULT_RETRY, || async {
///     let mut cm = cms.get("settings").await?;
///     cm.data.insert("data".into(), serde_json::json!({"mode": "safe"}));
///     cms.replace("settings", &CreateOptions::default(), &cm).await
/// })
/// .await?;
/// cms.patch("settings", &PatchOptions::default(),
///           &Patch::Merge(serde_json::json!({"data": {"extra": "1"}}))).await?;
/// # Ok(()) }
/// ```
pub struct Api<K> {
    client: Client,
    resource: Resource,
    /// The namespace of every request; `None`: cluster-scoped, or all namespaces (list only).
    namespace: Option<String>,
    /// Run right before each write is sent ([`Api::with_write_check`]).
    write_check: Option<WriteCheck>,
    /// What reads ask for ([`Api::encoding`]).
    encoding: Encoding,
    _object: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api {
            client: self.client.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            write_check: self.write_check.clone(),
            encoding: self.encoding,
            _object: PhantomData,
        }
    }
}

impl<K> std::fmt::Debug for Api<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("resource", &self.resource)
            .field("namespace", &self.namespace)
            .field("client", &self.client)
            .field("write_check", &self.write_check.is_some())
            .finish()
    }
}

/// Options of a create or replace (and of a status or scale replace): client-go's
/// `CreateOptions`, whose fields its `UpdateOptions` shares. Per-request parameters are all
/// `*Options` here, as in client-go: [`ListOptions`], [`WatchOptions`](crate::WatchOptions), [`CreateOptions`],
/// [`PatchOptions`], [`DeleteOptions`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateOptions {
    /// `dryRun=All`: the server validates and answers as it would, and stores nothing.
    pub dry_run: bool,
    /// `fieldManager`: the name the server records in `managedFields` for this write.
    pub field_manager: Option<String>,
}

/// The old name of [`CreateOptions`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `CreateOptions`, as client-go names it"
)]
pub type PostParams = CreateOptions;
/// The old name of [`PatchOptions`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `PatchOptions`, as client-go names it"
)]
pub type PatchParams = PatchOptions;
/// The old name of [`DeleteOptions`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `DeleteOptions`, as client-go names it"
)]
pub type DeleteParams = DeleteOptions;

/// Options of a patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager`; required by server-side apply ([`Patch::Apply`]).
    pub field_manager: Option<String>,
    /// `force=true`: a server-side apply takes the fields other managers own instead of failing
    /// with a conflict. Only for [`Patch::Apply`].
    pub force: bool,
}

impl PatchOptions {
    /// Options of a server-side apply by `field_manager` (not forced).
    pub fn apply(field_manager: impl Into<String>) -> Self {
        PatchOptions {
            field_manager: Some(field_manager.into()),
            ..PatchOptions::default()
        }
    }

    /// These options with `force` set: take over conflicting fields.
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }

    /// These options as a dry run.
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
}

/// A patch and its type (the request's `Content-Type`).
#[derive(Debug, Clone, PartialEq)]
pub enum Patch<P> {
    /// JSON merge patch (RFC 7386, `application/merge-patch+json`): maps merge, `null` deletes,
    /// lists are replaced whole.
    Merge(P),
    /// JSON patch (RFC 6902, `application/json-patch+json`): a list of operations (`add`,
    /// `remove`, `replace`, `move`, `copy`, `test`); a failed `test` makes the server refuse the
    /// whole patch, which makes it a compare-and-swap.
    Json(P),
    /// Strategic merge patch (`application/strategic-merge-patch+json`): a merge patch that
    /// merges lists by their keys; built-in types only.
    Strategic(P),
    /// Server-side apply (`application/apply-patch+yaml`, JSON being YAML): the fields this
    /// manager wants, owned by it; needs [`PatchOptions::field_manager`].
    Apply(P),
}

impl<P> Patch<P> {
    /// The `Content-Type` of this patch type.
    pub fn content_type(&self) -> &'static str {
        match self {
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Json(_) => "application/json-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
            Patch::Apply(_) => "application/apply-patch+yaml",
        }
    }

    fn body(&self) -> &P {
        match self {
            Patch::Merge(p) | Patch::Json(p) | Patch::Strategic(p) | Patch::Apply(p) => p,
        }
    }
}

/// What happens to an object's dependents when it is deleted (`propagationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum PropagationPolicy {
    /// Dependents are left, their owner reference removed.
    Orphan,
    /// The object goes at once; the garbage collector deletes dependents afterwards.
    Background,
    /// The object stays (with a `foregroundDeletion` finalizer) until its blocking dependents
    /// are gone.
    Foreground,
}

/// Conditions the object must still meet for a delete to happen (else 409 Conflict).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Preconditions {
    /// The object's `resourceVersion` must be this one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
    /// The object's `uid` must be this one (not a new object of the same name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

/// Options of a delete (sent as a `DeleteOptions` body).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// Seconds before the object is deleted (`0`: at once); `None`: the type's default.
    pub grace_period_seconds: Option<u32>,
    /// What happens to dependents; `None`: the type's default.
    pub propagation_policy: Option<PropagationPolicy>,
    /// Conditions the object must meet.
    pub preconditions: Option<Preconditions>,
}

impl DeleteOptions {
    /// The `DeleteOptions` body.
    fn body(&self) -> serde_json::Value {
        let mut body = serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if self.dry_run {
            body["dryRun"] = serde_json::json!(["All"]);
        }
        if let Some(s) = self.grace_period_seconds {
            body["gracePeriodSeconds"] = s.into();
        }
        if let Some(p) = self.propagation_policy {
            body["propagationPolicy"] = serde_json::to_value(p).unwrap_or_default();
        }
        if let Some(p) = &self.preconditions {
            body["preconditions"] = serde_json::to_value(p).unwrap_or_default();
        }
        body
    }
}

/// What a delete answers: the object (still there with a `deletionTimestamp` while finalizers
/// run, or its last state), or a `Status` (some resources answer a success Status).
#[derive(Debug, Clone)]
pub enum Deleted<T> {
    /// The object as the server had it when the delete was accepted.
    Object(T),
    /// A success `Status`.
    Status(Status),
}

/// An `autoscaling/v1` `Scale`: the `scale` subresource of deployments, replica sets, stateful
/// sets and custom resources that declare one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    /// `autoscaling/v1`.
    #[serde(default = "scale_api_version")]
    pub api_version: String,
    /// `Scale`.
    #[serde(default = "scale_kind")]
    pub kind: String,
    /// The parent object's name, namespace, uid and resourceVersion (the precondition of a
    /// replace).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired replicas.
    #[serde(default)]
    pub spec: ScaleSpec,
    /// The observed replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ScaleStatus>,
}

fn scale_api_version() -> String {
    "autoscaling/v1".into()
}

fn scale_kind() -> String {
    "Scale".into()
}

/// `Scale.spec`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleSpec {
    /// Desired replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// `Scale.status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleStatus {
    /// Observed replicas.
    #[serde(default)]
    pub replicas: i32,
    /// The label selector of the pods, as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

const JSON: &str = "application/json";

impl<K> Api<K> {
    /// The verbs on `resource` in `namespace` (a cluster-scoped resource ignores it).
    pub fn namespaced_with(client: Client, resource: Resource, namespace: &str) -> Self {
        Api {
            client,
            namespace: resource.namespaced.then(|| namespace.to_string()),
            resource,
            write_check: None,
            encoding: Encoding::Auto,
            _object: PhantomData,
        }
    }

    /// The verbs on a cluster-scoped `resource`, or on a namespaced one across all namespaces
    /// (where only [`list`](Api::list) and [`delete_collection`](Api::delete_collection) make
    /// sense: the others answer 404 from kube-apiserver).
    pub fn all_with(client: Client, resource: Resource) -> Self {
        Api {
            client,
            resource,
            namespace: None,
            write_check: None,
            encoding: Encoding::Auto,
            _object: PhantomData,
        }
    }

    /// The same verbs (client, resource, write check, encoding) in `namespace`: a writer over
    /// all namespaces uses it to write each object where it lives. A cluster-scoped resource
    /// ignores it.
    ///
    /// ```
    /// use reflector::{Api, Client, ClusterConfig, Resource};
    /// use reflector::store_index::DynamicObject;
    /// # fn f(client: Client) {
    /// let all: Api<DynamicObject> = Api::all_with(client, Resource::namespaced("", "v1", "configmaps"));
    /// assert_eq!(all.within("web").namespace(), Some("web"));
    /// # }
    /// ```
    #[must_use]
    pub fn within(&self, namespace: &str) -> Self {
        Api {
            client: self.client.clone(),
            namespace: self.resource.namespaced.then(|| namespace.to_string()),
            resource: self.resource.clone(),
            write_check: self.write_check.clone(),
            encoding: self.encoding,
            _object: PhantomData,
        }
    }

    /// This `Api` with `check` run right before each write it sends (create, replace, patch,
    /// delete, delete collection, status and scale writes), after the client's rate limiter: a
    /// refusal is [`ClientError::WriteRefused`] carrying the check's reason, and nothing is sent.
    /// Reads are not checked. For a leader: a check of its lease guard, so that no write leaves a
    /// process whose lease may have passed to another replica (workqueue's
    /// `LeaseGuard::protect` builds it).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use reflector::store_index::DynamicObject;
    /// use reflector::{Api, Client, ClientError, ClusterConfig, CreateOptions, Resource};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let client = Client::new(&ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
    /// let leading = Arc::new(AtomicBool::new(false));
    /// let flag = Arc::clone(&leading);
    /// let api: Api<DynamicObject> =
    ///     Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "default")
    ///         .with_write_check(move || {
    ///             flag.load(Ordering::Relaxed).then_some(()).ok_or_else(|| "not leading".to_string())
    ///         });
    /// let err = api.create(&CreateOptions::default(), &DynamicObject::new("v1", "ConfigMap")).await;
    /// assert!(matches!(err, Err(ClientError::WriteRefused { .. })));
    /// # }
    /// ```
    pub fn with_write_check(
        mut self,
        check: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.write_check = Some(Arc::new(check));
        self
    }

    /// This `Api` with gets, lists and the answers of writes asked for in `encoding` (default
    /// [`Encoding::Auto`]: protobuf where `K` and the resource call for it). Each answer is decoded
    /// by its `Content-Type`, whatever was asked for. With [`Encoding::Json`], the bodies of
    /// `create_pb` and `replace_pb` are JSON too.
    pub fn encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// The resource type.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The namespace of the requests, if any.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The collection's path.
    fn collection(&self) -> String {
        self.resource.path(self.namespace.as_deref())
    }

    /// One object's path (and subresource's), with `query` if not empty; an empty name or one
    /// that is not a single path segment is refused before anything is sent.
    fn object_path(
        &self,
        name: &str,
        subresource: Option<&str>,
        query: &str,
    ) -> Result<String, ClientError> {
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%', '?', '#']) {
            return Err(ClientError::InvalidRequest(format!(
                "{:?} is not a name of a {} object",
                name, self.resource.plural
            )));
        }
        let mut path = self.collection();
        path.push('/');
        path.push_str(name);
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(sub);
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(query);
        }
        Ok(path)
    }
}

impl<K: ApiResource> Api<K> {
    /// The verbs on a type that knows its address ([`ApiResource`]: `k8s_openapi` types, `Pb<T>`
    /// and `PbView<T>` of `k8s_pb` types, your own custom resource types) in `namespace` (a
    /// cluster-scoped type ignores it). A type known only at run time ([`DynamicObject`],
    /// [`CompactObject`]) uses [`namespaced_with`](Api::namespaced_with).
    ///
    /// [`DynamicObject`]: crate::store_index::DynamicObject
    /// [`CompactObject`]: crate::store_index::CompactObject
    ///
    /// ```
    /// # #[cfg(feature = "k8s-openapi")] {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// use reflector::{Api, Client, ClusterConfig};
    /// # fn f(client: Client) {
    /// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    /// assert_eq!(cms.namespace(), Some("default"));
    /// # }
    /// # }
    /// ```
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Api::namespaced_with(client, Resource::of::<K>(), namespace)
    }

    /// The verbs on a cluster-scoped type that knows its address, or on a namespaced one across
    /// all namespaces (where only [`list`](Api::list) and
    /// [`delete_collection`](Api::delete_collection) make sense).
    pub fn all(client: Client) -> Self {
        Api::all_with(client, Resource::of::<K>())
    }
}

#[cfg(feature = "k8s-pb")]
impl<K: crate::store_index::k8s_pb::Resource> Api<K>
where
    K::Scope: 'static,
{
    /// The old name of [`Api::namespaced`] for `k8s_pb` types, which [`Api::namespaced`] now
    /// takes (`Pb<T>` and `PbView<T>` are [`ApiResource`]).
    #[deprecated(
        since = "0.1.0",
        note = "use `Api::namespaced`, which takes `Pb<T>` and `PbView<T>`"
    )]
    pub fn namespaced_pb(client: Client, namespace: &str) -> Self {
        Api::namespaced_with(client, Resource::of_pb::<K>(), namespace)
    }

    /// The old name of [`Api::all`] for `k8s_pb` types.
    #[deprecated(
        since = "0.1.0",
        note = "use `Api::all`, which takes `Pb<T>` and `PbView<T>`"
    )]
    pub fn all_pb(client: Client) -> Self {
        Api::all_with(client, Resource::of_pb::<K>())
    }
}

#[cfg(feature = "k8s-pb")]
impl<K: Decode> Api<K> {
    /// [`create`](Api::create) of a `k8s_pb` object, sent as a protobuf body (as kubectl 1.33
    /// and client-go's protobuf clients do); the answer is decoded by its `Content-Type`.
    /// Patches stay JSON: kube-apiserver takes no protobuf patch.
    ///
    /// A server that refuses protobuf bodies (`415 Unsupported Media Type`: a proxy, an
    /// aggregated server) gets the object again as JSON, transcoded with Kubernetes'
    /// descriptors ([`transcode`](crate::protobuf::transcode); kinds of `k8s.io/api` only). Each
    /// write tries protobuf first: set [`Encoding::Json`] on this `Api` to send JSON at once.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn create_pb<T>(&self, params: &CreateOptions, object: &T) -> Result<K, ClientError>
    where
        T: crate::store_index::k8s_pb::Resource + prost::Message,
    {
        let mut path = self.collection();
        let query = write_query(params.dry_run, params.field_manager.as_deref(), false);
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        self.write_pb(Method::POST, &path, object).await
    }

    /// [`replace`](Api::replace) of a `k8s_pb` object, sent as a protobuf body: optimistic
    /// concurrency on its `metadata.resourceVersion` as for JSON. A server that refuses protobuf
    /// bodies gets JSON, as for [`create_pb`](Api::create_pb).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn replace_pb<T>(
        &self,
        name: &str,
        params: &CreateOptions,
        object: &T,
    ) -> Result<K, ClientError>
    where
        T: crate::store_index::k8s_pb::Resource + prost::Message,
    {
        let query = write_query(params.dry_run, params.field_manager.as_deref(), false);
        let path = self.object_path(name, None, &query)?;
        self.write_pb(Method::PUT, &path, object).await
    }

    /// Sends `object` as a protobuf body (`k8s\0` and an envelope naming its kind), then as JSON
    /// if the server answers 415, which it does before applying anything; or as JSON alone under
    /// [`Encoding::Json`]. The write check runs before each send.
    async fn write_pb<T>(&self, method: Method, path: &str, object: &T) -> Result<K, ClientError>
    where
        T: crate::store_index::k8s_pb::Resource + prost::Message,
    {
        let message = Bytes::from(object.encode_to_vec());
        let refused = if self.encoding == Encoding::Json {
            None
        } else {
            let body = Bytes::from(Unknown::new(T::API_VERSION, T::KIND, message.clone()).encode());
            match self
                .object(method.clone(), path, Some((PROTOBUF, body)))
                .await
            {
                Err(ClientError::Api(status)) if status.code == 415 => {
                    tracing::debug!(
                        kind = T::KIND,
                        "the server refused a protobuf body (415); sending JSON"
                    );
                    Some(ClientError::Api(status))
                }
                answer => return answer,
            }
        };
        let json =
            crate::wire::protobuf::transcode::decode_message_as(T::API_VERSION, T::KIND, &message);
        let json = match (json, refused) {
            (Ok(json), _) => json,
            // The server's refusal says more than our inability to fall back.
            (Err(_), Some(refused)) => return Err(refused),
            (Err(e), None) => {
                return Err(ClientError::InvalidRequest(format!(
                    "a {} cannot be written as JSON: {e}",
                    T::KIND
                )))
            }
        };
        let body = serde_json::to_vec(&json).expect("a JSON value serializes");
        self.object(method, path, Some((JSON, Bytes::from(body))))
            .await
    }
}

/// The content type of a protobuf request body.
#[cfg(feature = "k8s-pb")]
const PROTOBUF: &str = crate::wire::protobuf::MEDIA_TYPE;

/// The query string of a write's options.
fn write_query(dry_run: bool, field_manager: Option<&str>, force: bool) -> String {
    let mut q = url::form_urlencoded::Serializer::new(String::new());
    if dry_run {
        q.append_pair("dryRun", "All");
    }
    if let Some(m) = field_manager {
        q.append_pair("fieldManager", m);
    }
    if force {
        q.append_pair("force", "true");
    }
    q.finish()
}

/// The JSON of a body to send; a type that cannot be written as JSON is refused before sending.
fn to_json<T: Serialize + ?Sized>(what: &str, value: &T) -> Result<Bytes, ClientError> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| ClientError::InvalidRequest(format!("{what}: cannot be written as JSON: {e}")))
}

/// The `kind` of a body, read without building anything else.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow, default)]
    kind: Option<std::borrow::Cow<'a, str>>,
}

/// The `Status` a body is, if its kind says so.
fn status_of(text: &str) -> Option<Status> {
    let head: Head<'_> = serde_json::from_str(text).ok()?;
    (head.kind.as_deref() == Some("Status")).then(|| {
        serde_json::from_str::<Status>(text).unwrap_or_else(|_| {
            Status::failure(
                500,
                "InternalError",
                "the server answered a Status that cannot be read",
            )
        })
    })
}

/// Whether a `Status` says the request succeeded.
fn is_success(status: &Status) -> bool {
    status.status.as_deref() == Some("Success")
}

/// Decodes one object of type `T` from `body` (sliced, not copied, by types that keep raw
/// bytes). A failure `Status` is the error it means; a success `Status` is a decode error (an
/// object was asked for); the decoder's message keeps positions, never the body.
fn decode_object<T: Decode>(
    what: &str,
    body: &Bytes,
    content_type: Option<&str>,
) -> Result<T, ClientError> {
    if is_protobuf(content_type) {
        return decode_protobuf_object(what, body);
    }
    let text = std::str::from_utf8(body).map_err(|_| ClientError::Decode {
        what: what.to_string(),
        reason: "not UTF-8".into(),
    })?;
    if let Some(status) = status_of(text) {
        if is_success(&status) {
            return Err(ClientError::Decode {
                what: what.to_string(),
                reason: format!(
                    "a success Status ({}) where an object was expected",
                    status.message
                ),
            });
        }
        return Err(ClientError::api(status));
    }
    let frame = DecodeSource::new(text, body, true);
    T::decode_exact(text, &frame).map_err(|e| ClientError::Decode {
        what: what.to_string(),
        reason: format!("not an object of the type asked for: {}", redact_serde(&e)),
    })
}

/// [`decode_object`] of a protobuf body: `k8s\0` and an envelope naming the kind, around the
/// object's message (sliced, not copied, by types that keep raw bytes: the body is the object's
/// own buffer).
fn decode_protobuf_object<T: Decode>(what: &str, body: &Bytes) -> Result<T, ClientError> {
    let decode_error = |e: ProtobufError| ClientError::Decode {
        what: what.to_string(),
        reason: format!("not a protobuf object of the type asked for: {e}"),
    };
    let envelope = Unknown::decode(body).map_err(decode_error)?;
    if envelope.kind == "Status" {
        let status = Status::from_protobuf(&envelope.raw).map_err(decode_error)?;
        if is_success(&status) {
            return Err(ClientError::Decode {
                what: what.to_string(),
                reason: format!(
                    "a success Status ({}) where an object was expected",
                    status.message
                ),
            });
        }
        return Err(ClientError::api(status));
    }
    let source = ProtobufSource::new(&envelope.api_version, &envelope.kind, true);
    T::decode_protobuf(&envelope.raw, &source).map_err(decode_error)
}

/// A serde_json error's category and position, without the values it may quote.
fn redact_serde(e: &serde_json::Error) -> String {
    crate::wire::snippet::redact_quoted(&e.to_string())
}

impl<K: Decode> Api<K> {
    /// `GET` the object `name`: 404 is [`ClientError::NotFound`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get(&self, name: &str) -> Result<K, ClientError> {
        let path = self.object_path(name, None, "")?;
        self.object(Method::GET, &path, None).await
    }

    /// `GET` the object `name`, `None` if it does not exist.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_opt(&self, name: &str) -> Result<Option<K>, ClientError> {
        match self.get(name).await {
            Ok(o) => Ok(Some(o)),
            Err(ClientError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET` the object `name` through its `status` subresource.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_status(&self, name: &str) -> Result<K, ClientError> {
        let path = self.object_path(name, Some("status"), "")?;
        self.object(Method::GET, &path, None).await
    }

    /// One page of the collection (set [`ListOptions::limit`] and follow
    /// [`ObjectList::continue_token`] for more; an informer is the better tool to keep a
    /// collection in memory). A body that is not a list is [`ClientError::Decode`], so an
    /// error page can never read as an empty list.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn list(&self, options: &ListOptions) -> Result<ObjectList<K>, ClientError> {
        let mut path = self.collection();
        let query = options.to_query();
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        let accept = self
            .encoding
            .list_accept::<K>(&self.resource, K::REPRESENTATION);
        let (body, content_type) = self
            .client
            .request_body_checked(
                Method::GET,
                &path,
                accept,
                None,
                DEFAULT_MAX_BODY_BYTES,
                None,
            )
            .await?;
        decode_list(&path, &body, content_type.as_deref())
    }

    /// `POST` `object` into the collection; answers the object as stored (name generated from
    /// `metadata.generateName`, uid, resourceVersion). An existing name is
    /// [`ClientError::AlreadyExists`], a refused object [`ClientError::Invalid`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn create<T: Serialize>(
        &self,
        params: &CreateOptions,
        object: &T,
    ) -> Result<K, ClientError> {
        let mut path = self.collection();
        let query = write_query(params.dry_run, params.field_manager.as_deref(), false);
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        let body = to_json(&path, object)?;
        self.object(Method::POST, &path, Some((JSON, body))).await
    }

    /// `PUT` `object` as the object `name`: an update with optimistic concurrency when the
    /// object carries `metadata.resourceVersion` (the version it was read at): if the object
    /// changed since, [`ClientError::Conflict`], and nothing is written. Without a
    /// resourceVersion the write is unconditional.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn replace<T: Serialize>(
        &self,
        name: &str,
        params: &CreateOptions,
        object: &T,
    ) -> Result<K, ClientError> {
        self.put(name, None, params, object).await
    }

    /// [`replace`](Api::replace) through the `status` subresource: only `.status` changes.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn replace_status<T: Serialize>(
        &self,
        name: &str,
        params: &CreateOptions,
        object: &T,
    ) -> Result<K, ClientError> {
        self.put(name, Some("status"), params, object).await
    }

    /// `PATCH` the object `name` (see [`Patch`] for the types); answers the patched object.
    /// A server-side apply creates the object if it does not exist.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn patch<P: Serialize>(
        &self,
        name: &str,
        params: &PatchOptions,
        patch: &Patch<P>,
    ) -> Result<K, ClientError> {
        let (path, body) = self.patch_request(name, None, params, patch)?;
        self.object(Method::PATCH, &path, Some((patch.content_type(), body)))
            .await
    }

    /// [`patch`](Api::patch) through the `status` subresource: only `.status` changes.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn patch_status<P: Serialize>(
        &self,
        name: &str,
        params: &PatchOptions,
        patch: &Patch<P>,
    ) -> Result<K, ClientError> {
        let (path, body) = self.patch_request(name, Some("status"), params, patch)?;
        self.object(Method::PATCH, &path, Some((patch.content_type(), body)))
            .await
    }

    /// `DELETE` the object `name`: see [`Deleted`] for the answer. A precondition that no longer
    /// holds is [`ClientError::Conflict`]; a missing object [`ClientError::NotFound`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn delete(
        &self,
        name: &str,
        params: &DeleteOptions,
    ) -> Result<Deleted<K>, ClientError> {
        let query = if params.dry_run { "dryRun=All" } else { "" };
        let path = self.object_path(name, None, query)?;
        let body = to_json(&path, &params.body())?;
        let accept = self
            .encoding
            .object_accept::<K>(&self.resource, K::REPRESENTATION);
        let check = self.write_check.as_ref();
        let (bytes, ct) = self
            .client
            .request_body_checked(
                Method::DELETE,
                &path,
                accept,
                Some((JSON, body)),
                MAX_OBJECT_BYTES,
                check,
            )
            .await?;
        deleted(&path, &bytes, ct.as_deref(), decode_object)
    }

    /// `DELETE` every object of the collection that `options` selects (label and field
    /// selectors); answers the list of deleted objects, or a `Status`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn delete_collection(
        &self,
        params: &DeleteOptions,
        options: &ListOptions,
    ) -> Result<Deleted<ObjectList<K>>, ClientError> {
        let mut path = self.collection();
        let mut query = options.to_query();
        if params.dry_run {
            if !query.is_empty() {
                query.push('&');
            }
            query.push_str("dryRun=All");
        }
        if !query.is_empty() {
            path.push('?');
            path.push_str(&query);
        }
        let body = to_json(&path, &params.body())?;
        let accept = self
            .encoding
            .list_accept::<K>(&self.resource, K::REPRESENTATION);
        let check = self.write_check.as_ref();
        let (bytes, ct) = self
            .client
            .request_body_checked(
                Method::DELETE,
                &path,
                accept,
                Some((JSON, body)),
                DEFAULT_MAX_BODY_BYTES,
                check,
            )
            .await?;
        deleted(&path, &bytes, ct.as_deref(), decode_list)
    }

    /// `GET` the `scale` subresource of `name`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future abandons the request (its connection is closed or returned
    /// to the pool); nothing was changed on the server.
    pub async fn get_scale(&self, name: &str) -> Result<Scale, ClientError> {
        let path = self.object_path(name, Some("scale"), "")?;
        self.scale(Method::GET, &path, None).await
    }

    /// `PUT` the `scale` subresource of `name` (with `scale.metadata.resourceVersion`, a
    /// conditional update, as [`replace`](Api::replace)).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn replace_scale(
        &self,
        name: &str,
        params: &CreateOptions,
        scale: &Scale,
    ) -> Result<Scale, ClientError> {
        let query = write_query(params.dry_run, params.field_manager.as_deref(), false);
        let path = self.object_path(name, Some("scale"), &query)?;
        let body = to_json(&path, scale)?;
        self.scale(Method::PUT, &path, Some((JSON, body))).await
    }

    /// `PATCH` the `scale` subresource of `name`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write dropped after it was sent may still be applied by the server, and
    /// its answer is lost (the client never sends it again); read the object to know.
    pub async fn patch_scale<P: Serialize>(
        &self,
        name: &str,
        params: &PatchOptions,
        patch: &Patch<P>,
    ) -> Result<Scale, ClientError> {
        let (path, body) = self.patch_request(name, Some("scale"), params, patch)?;
        self.scale(Method::PATCH, &path, Some((patch.content_type(), body)))
            .await
    }

    /// Sends a request, through the write check when it is a write.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Bytes)>,
        max_bytes: usize,
    ) -> Result<Bytes, ClientError> {
        let check = self.write_check.as_ref().filter(|_| method != Method::GET);
        self.client
            .request_bytes_checked(method, path, body, max_bytes, check)
            .await
    }

    async fn put<T: Serialize>(
        &self,
        name: &str,
        subresource: Option<&str>,
        params: &CreateOptions,
        object: &T,
    ) -> Result<K, ClientError> {
        let query = write_query(params.dry_run, params.field_manager.as_deref(), false);
        let path = self.object_path(name, subresource, &query)?;
        let body = to_json(&path, object)?;
        self.object(Method::PUT, &path, Some((JSON, body))).await
    }

    /// The path and body of a patch, after checking what the server would refuse anyway.
    fn patch_request<P: Serialize>(
        &self,
        name: &str,
        subresource: Option<&str>,
        params: &PatchOptions,
        patch: &Patch<P>,
    ) -> Result<(String, Bytes), ClientError> {
        let apply = matches!(patch, Patch::Apply(_));
        if apply && params.field_manager.as_deref().unwrap_or("").is_empty() {
            return Err(ClientError::InvalidRequest(
                "a server-side apply needs a field manager (PatchOptions::apply)".into(),
            ));
        }
        if params.force && !apply {
            return Err(ClientError::InvalidRequest(
                "force is only for a server-side apply (Patch::Apply)".into(),
            ));
        }
        let query = write_query(
            params.dry_run,
            params.field_manager.as_deref(),
            params.force,
        );
        let path = self.object_path(name, subresource, &query)?;
        let body = to_json(&path, patch.body())?;
        Ok((path, body))
    }

    async fn object(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Bytes)>,
    ) -> Result<K, ClientError> {
        let what = format!("{method} {path}");
        let accept = self
            .encoding
            .object_accept::<K>(&self.resource, K::REPRESENTATION);
        let check = self.write_check.as_ref().filter(|_| method != Method::GET);
        let (bytes, content_type) = self
            .client
            .request_body_checked(method, path, accept, body, MAX_OBJECT_BYTES, check)
            .await?;
        decode_object(&what, &bytes, content_type.as_deref())
    }

    async fn scale(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Bytes)>,
    ) -> Result<Scale, ClientError> {
        let what = format!("{method} {path}");
        let bytes = self.send(method, path, body, MAX_OBJECT_BYTES).await?;
        let text = std::str::from_utf8(&bytes).map_err(|_| ClientError::Decode {
            what: what.clone(),
            reason: "not UTF-8".into(),
        })?;
        if let Some(status) = status_of(text) {
            return Err(ClientError::api(status));
        }
        let scale: Scale = serde_json::from_str(text).map_err(|e| ClientError::Decode {
            what: what.clone(),
            reason: format!("not a Scale: {}", redact_serde(&e)),
        })?;
        if scale.kind != "Scale" {
            return Err(ClientError::Decode {
                what,
                reason: format!("kind {:?} where a Scale was expected", scale.kind),
            });
        }
        Ok(scale)
    }
}

/// A list body decoded; not a list is [`ClientError::Decode`] (its reason names what is
/// missing, without quoting the body), a failure `Status` the error it means.
fn decode_list<T: Decode>(
    what: &str,
    body: &Bytes,
    content_type: Option<&str>,
) -> Result<ObjectList<T>, ClientError> {
    ObjectList::from_body(body, content_type).map_err(|e| match e {
        ListPageError::Status(status) => ClientError::api(*status),
        ListPageError::NotAList(l) => ClientError::Decode {
            what: what.to_string(),
            reason: l.problem,
        },
    })
}

/// A delete's answer: a success `Status`, or what `decode` makes of the body.
fn deleted<T>(
    what: &str,
    body: &Bytes,
    content_type: Option<&str>,
    decode: impl FnOnce(&str, &Bytes, Option<&str>) -> Result<T, ClientError>,
) -> Result<Deleted<T>, ClientError> {
    let status = if is_protobuf(content_type) {
        Unknown::decode(body)
            .ok()
            .filter(|u| u.kind == "Status")
            .and_then(|u| Status::from_protobuf(&u.raw).ok())
    } else {
        std::str::from_utf8(body).ok().and_then(status_of)
    };
    if let Some(status) = status {
        if is_success(&status) {
            return Ok(Deleted::Status(status));
        }
        return Err(ClientError::api(status));
    }
    decode(what, body, content_type).map(Deleted::Object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store_index::DynamicObject;

    #[test]
    fn a_failure_status_with_200_is_the_error_it_means_and_never_an_object() {
        let body = Bytes::from_static(
            br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Conflict","code":409,"message":"modified"}"#,
        );
        let err = decode_object::<DynamicObject>("PUT x", &body, None).unwrap_err();
        assert!(err.is_conflict(), "{err:?}");
        let ok = Bytes::from_static(
            br#"{"kind":"Status","status":"Success","code":200,"message":"done"}"#,
        );
        assert!(matches!(
            decode_object::<DynamicObject>("GET x", &ok, None),
            Err(ClientError::Decode { .. })
        ));
        assert!(matches!(
            deleted("DELETE x", &ok, None, decode_object::<DynamicObject>),
            Ok(Deleted::Status(_))
        ));
    }

    #[test]
    fn an_undecodable_body_is_a_decode_error_that_does_not_quote_it() {
        let body = Bytes::from_static(br#"{"kind":"Secret","metadata":"s3cr3t-value"}"#);
        let err = decode_object::<DynamicObject>("GET secret", &body, None).unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(matches!(err, ClientError::Decode { .. }), "{text}");
        assert!(!text.contains("s3cr3t"), "{text}");
        let err = decode_object::<DynamicObject>("GET x", &Bytes::from_static(b"<html>"), None)
            .unwrap_err();
        assert!(matches!(err, ClientError::Decode { .. }));
    }

    #[test]
    fn names_that_are_not_one_path_segment_are_refused_before_sending() {
        let client =
            Client::new(&crate::ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "ns");
        for bad in ["", ".", "..", "a/b", "a?b", "a%2Fb"] {
            assert!(
                matches!(
                    api.object_path(bad, None, ""),
                    Err(ClientError::InvalidRequest(_))
                ),
                "{bad:?}"
            );
        }
        assert_eq!(
            api.object_path("a", Some("status"), "dryRun=All").unwrap(),
            "/api/v1/namespaces/ns/configmaps/a/status?dryRun=All"
        );
    }

    #[test]
    fn write_options_become_the_query_and_the_delete_options_body() {
        assert_eq!(
            write_query(true, Some("ctl x"), true),
            "dryRun=All&fieldManager=ctl+x&force=true"
        );
        assert_eq!(write_query(false, None, false), "");
        let body = DeleteOptions {
            dry_run: true,
            grace_period_seconds: Some(0),
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                resource_version: Some("7".into()),
                uid: None,
            }),
        }
        .body();
        assert_eq!(
            body,
            serde_json::json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"],
                "gracePeriodSeconds": 0, "propagationPolicy": "Foreground",
                "preconditions": {"resourceVersion": "7"}})
        );
    }
}
