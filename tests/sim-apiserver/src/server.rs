//! The server: the listener (HTTP or HTTPS, HTTP/1.1 and HTTP/2), authentication, and the
//! routing of each request to its handler, with what wraps every answer (per-user faults, the
//! writer recorded in the write log, protobuf, gzip).

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::authz::Attributes;
use crate::body::SimBody;
use crate::compression::{accepts_gzip, gzip_response};
use crate::discovery;
use crate::metrics::Counters;
use crate::openapi;
use crate::reads;
use crate::resource_path::ResourcePath;
use crate::response::{error_response, json_response, value_response};
use crate::shared::Shared;
use crate::status::ApiError;
use crate::users::UserInfo;
use crate::writes;

/// Accepts connections until the server shuts down, each served on a task of its own.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<Shared>,
) {
    let mut shutdown = shared.shutdown.clone();
    loop {
        let (tcp, _) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(%e, "accept failed");
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let _ = tcp.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        tokio::spawn(async move {
            let mut shutdown = shared.shutdown.clone();
            if *shutdown.borrow_and_update() {
                return;
            }
            let http2 = shared.cfg.http2;
            match acceptor {
                Some(acc) => {
                    let tls = tokio::select! {
                        r = acc.accept(tcp) => match r {
                            Ok(s) => s,
                            Err(e) => {
                                tracing::debug!(%e, "TLS handshake failed");
                                return;
                            }
                        },
                        _ = shutdown.changed() => return,
                    };
                    // The verifier only lets through certificates signed by the CA.
                    let client_cert = tls
                        .get_ref()
                        .1
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|c| crate::users::identity_of_certificate(c))
                        .map(Arc::new);
                    serve(tls, shared, client_cert, http2, shutdown).await
                }
                None => serve(tcp, shared, None, http2, shutdown).await,
            }
        });
    }
}

async fn serve<IO>(
    io: IO,
    shared: Arc<Shared>,
    client_cert: Option<Arc<UserInfo>>,
    http2: bool,
    mut shutdown: watch::Receiver<bool>,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let svc = service_fn(move |req| {
        let shared = shared.clone();
        let client_cert = client_cert.clone();
        async move { Ok::<_, Infallible>(handle(shared, req, client_cert).await) }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    if http2 {
        // kube-apiserver's --http2-max-streams-per-connection default.
        builder.http2().max_concurrent_streams(1000);
    } else {
        builder = builder.http1_only();
    }
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::select! {
        r = conn => if let Err(e) = r { tracing::debug!(%e, "connection ended") },
        _ = shutdown.changed() => {}
    }
}

enum Route {
    Text(&'static str),
    Json(Value),
    NotFound,
    /// A path outside every served group: kube-apiserver's mux answers it in plain text.
    NoHandler,
    Resource(Box<ResourcePath>),
}

fn route(shared: &Shared, path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let reg = shared.registry.read();
    let (group, version, rest): (&str, &str, &[&str]) = match segs.as_slice() {
        ["healthz"] | ["livez"] | ["readyz"] => return Route::Text("ok"),
        ["version"] => return Route::Json(discovery::version()),
        ["api"] => return Route::Json(discovery::api(&shared.addr.to_string())),
        ["apis"] => return Route::Json(discovery::apis(&reg)),
        ["api", v] => {
            return discovery::resource_list(&reg, "", v)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["apis", g, ..] if discovery::api_group(&reg, g).is_none() => return Route::NoHandler,
        ["apis", g] => {
            return discovery::api_group(&reg, g)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["apis", g, v] => {
            return discovery::resource_list(&reg, g, v)
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["openapi", "v2"] => return Route::Json(openapi::swagger(&reg)),
        ["openapi", "v3"] => return Route::Json(openapi::v3_root(&reg)),
        ["openapi", "v3", gv @ ..] => {
            return openapi::v3_document(&reg, &gv.join("/"))
                .map(Route::Json)
                .unwrap_or(Route::NotFound)
        }
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::NoHandler,
    };
    let (ns, plural, name, sub) = match rest {
        // `namespaces/{name}/status` is the namespace's status unless `status` is a resource.
        ["namespaces", ns, plural] if reg.find(group, version, plural).is_some() => {
            (Some(*ns), *plural, None, None)
        }
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name), None),
        ["namespaces", ns, plural, name, sub] => (Some(*ns), *plural, Some(*name), Some(*sub)),
        [plural] => (None, *plural, None, None),
        [plural, name] => (None, *plural, Some(*name), None),
        [plural, name, sub] => (None, *plural, Some(*name), Some(*sub)),
        _ => return Route::NotFound,
    };
    let Some(idx) = reg.find(group, version, plural) else {
        return Route::NotFound;
    };
    let def = reg.get(idx).clone();
    // All versions of a CRD share its storage version's store.
    let idx = shared.crds.slot(idx);
    if ns.is_some() && !def.namespaced {
        return Route::NotFound;
    }
    if name.is_some_and(str::is_empty) || ns.is_some_and(str::is_empty) {
        return Route::NotFound;
    }
    match sub {
        None => {}
        Some("status") if def.status_subresource => {}
        Some("scale") if def.scale.is_some() => {}
        Some(_) => return Route::NotFound,
    }
    Route::Resource(Box::new(ResourcePath {
        idx,
        def,
        ns: ns.map(str::to_string),
        name: name.map(str::to_string),
        sub: sub.map(str::to_string),
    }))
}

/// Who is asking: a token's user, a client certificate's, or (when the server asks for no
/// credentials) `admin`, in `system:masters`. `None`: 401.
fn authenticate(
    shared: &Shared,
    req: &Request<Incoming>,
    client_cert: Option<&Arc<UserInfo>>,
) -> Option<Arc<UserInfo>> {
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    if let Some(u) = presented.and_then(|t| shared.directory.by_token(t)) {
        return Some(u);
    }
    if let Some(u) = client_cert.filter(|_| shared.cfg.client_cert_auth) {
        return Some(u.clone());
    }
    // Without a main token or users of its own the server asks for no credentials (user and
    // read-only tokens alone only name who is asking, as they always did).
    if shared.cfg.token.is_none() && shared.cfg.users.is_empty() {
        return Some(Arc::new(UserInfo::new(
            "admin",
            &[crate::users::MASTERS_GROUP.to_string()],
        )));
    }
    None
}

async fn handle(
    shared: Arc<Shared>,
    mut req: Request<Incoming>,
    client_cert: Option<Arc<UserInfo>>,
) -> Response<SimBody> {
    let gzip = shared.cfg.gzip && accepts_gzip(req.headers());
    // Read before the protobuf layer rewrites `Accept` to JSON.
    let drop_managed_fields =
        shared.cfg.managed_fields_opt_out && crate::managed_fields::requested(req.headers());
    let protobuf = match route(&shared, req.uri().path()) {
        Route::Resource(rp) if shared.cfg.protobuf => {
            crate::protobuf::serve::negotiate(&mut req, &rp.def, shared.cfg.partial_object_metadata)
        }
        _ => None,
    };
    let resp = respond(shared.clone(), req, client_cert).await;
    let resp = if drop_managed_fields {
        crate::managed_fields::strip(resp)
    } else {
        resp
    };
    let resp = match protobuf {
        Some(p) => {
            let resp = p.encode(resp);
            let content_type = resp.headers().get(header::CONTENT_TYPE);
            if reflector::protobuf::is_protobuf(content_type.and_then(|c| c.to_str().ok())) {
                Counters::inc(&shared.counters.protobuf_responses);
            }
            resp
        }
        None => resp,
    };
    if gzip {
        gzip_response(resp, shared.cfg.gzip_min_bytes, &shared.counters)
    } else {
        resp
    }
}

async fn respond(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    client_cert: Option<Arc<UserInfo>>,
) -> Response<SimBody> {
    Counters::inc(&shared.counters.requests);
    let Some(auth) = authenticate(&shared, &req, client_cert.as_ref()) else {
        return error_response(&shared, &ApiError::unauthorized());
    };
    // A network partition: nothing is handled (or answered) until it heals.
    let mut shutdown = shared.shutdown.clone();
    if !shared
        .faults
        .partition_wait(&auth.name, &mut shutdown)
        .await
    {
        return error_response(
            &shared,
            &ApiError::service_unavailable("the server is shutting down"),
        );
    }
    let delay = shared.faults.user_delay(&auth.name);
    let user = auth.name.clone();
    let counted = shared.counters.user_request(&user);
    let read = req.method() == Method::GET;
    let resp = crate::write_log::as_writer(&user, respond_as(shared, req, auth)).await;
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    resp.map(|body| body.for_user(counted, read))
}

/// The answer to `req` from `auth`, by the route its path takes.
async fn respond_as(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    auth: Arc<UserInfo>,
) -> Response<SimBody> {
    let path = req.uri().path().to_string();
    match route(&shared, &path) {
        Route::Text(t) => {
            let mut r = json_response(&shared, StatusCode::OK, Bytes::from_static(t.as_bytes()));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            r
        }
        Route::Json(v) => document(&shared, &req, &path, &v),
        Route::NotFound => error_response(&shared, &ApiError::path_not_found()),
        Route::NoHandler => {
            let mut r = json_response(
                &shared,
                StatusCode::NOT_FOUND,
                Bytes::from_static(b"404 page not found\n"),
            );
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        Route::Resource(rp) if crate::authz::reviews::is_review(&rp.def) => {
            review(&shared, req, &rp, &auth).await
        }
        Route::Resource(rp) => {
            let attrs = Attributes::of_request(
                req.method(),
                req.uri().query(),
                &rp.def,
                rp.ns.as_deref(),
                rp.name.as_deref(),
                rp.sub.as_deref(),
            );
            if !shared.policy.allows(&auth, &attrs) {
                return error_response(&shared, &crate::authz::forbidden(&auth, &attrs));
            }
            match resource_request(&shared, req, *rp, &auth.name).await {
                Ok(r) => r,
                Err(e) => error_response(&shared, &e),
            }
        }
    }
}

/// A discovery or OpenAPI document `v` at `path`, in the form the `Accept` header asks for.
fn document(shared: &Shared, req: &Request<Incoming>, path: &str, v: &Value) -> Response<SimBody> {
    if req.method() != Method::GET {
        return error_response(shared, &ApiError::method_not_allowed(req.method().as_str()));
    }
    Counters::inc(&shared.counters.discovery);
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|a| a.to_str().ok());
    let trimmed = path.trim_end_matches('/');
    if (trimmed == "/api" || trimmed == "/apis") && !discovery::acceptable(accept) {
        return error_response(
            shared,
            &ApiError::not_acceptable("only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"),
        );
    }
    if (trimmed == "/api" || trimmed == "/apis") && discovery::wants_aggregated(accept) {
        let doc = discovery::aggregated(&shared.registry.read(), trimmed == "/api");
        let mut r = value_response(shared, StatusCode::OK, &doc);
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(discovery::AGGREGATED_MEDIA_TYPE),
        );
        return r;
    }
    if trimmed == "/openapi/v2" {
        return openapi::serve::v2_response(shared, accept, v);
    }
    value_response(shared, StatusCode::OK, v)
}

/// A self review (served for any user, judged by the policy, not by the store).
async fn review(
    shared: &Shared,
    req: Request<Incoming>,
    rp: &ResourcePath,
    auth: &UserInfo,
) -> Response<SimBody> {
    let (parts, body) = req.into_parts();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let r = crate::authz::reviews::handle(
        &shared.policy,
        auth,
        &parts.method,
        &rp.def,
        rp.name.as_deref(),
        content_type,
        body,
    )
    .await;
    match r {
        Ok((code, v)) => value_response(shared, code, &v),
        Err(e) => error_response(shared, &e),
    }
}

/// A request on a served resource, by its method: a read, or a write (run under its
/// `fieldValidation`, and followed by serving the CRDs anew when it wrote one).
async fn resource_request(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    rp: ResourcePath,
    user: &str,
) -> Result<Response<SimBody>, ApiError> {
    let method = req.method().clone();
    if rp.sub.is_some() && !matches!(method, Method::GET | Method::PUT | Method::PATCH) {
        return Err(ApiError::method_not_allowed(method.as_str()));
    }
    match (&method, rp.name.as_deref()) {
        (&Method::GET, _) => reads::read(shared, &req, &rp, user),
        (&Method::POST, None)
        | (&Method::PUT, Some(_))
        | (&Method::PATCH, Some(_))
        | (&Method::DELETE, _) => {
            let query = req.uri().query().map(str::to_string);
            let crd = crate::crd::is_definition(&rp.def);
            let write = writes::write_request(shared, req, rp, query.clone());
            writes::around_write(shared, crd, query.as_deref(), write).await
        }
        _ => Err(ApiError::method_not_allowed(method.as_str())),
    }
}
