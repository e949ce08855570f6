//! The answers of the misbehaving-server faults that replace a whole response: a watch that
//! never says anything ([`Faults::silent_watches`](crate::faults::Faults::silent_watches)) and the broken lists of [`ListFault`].

use std::sync::Arc;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::SimBody;
use crate::faults::{ListFault, REPEAT_CONTINUE_TOKEN};
use crate::list;
use crate::metrics::Counters;
use crate::params::ListParams;
use crate::resource_path::ResourcePath;
use crate::response::json_response;
use crate::shared::Shared;
use crate::status::ApiError;

/// A watch under [`Faults::silent_watches`](crate::faults::Faults::silent_watches): 200
/// headers, then nothing until the client goes away or the server shuts down.
pub(crate) fn silent_watch(shared: &Arc<Shared>) -> Response<SimBody> {
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let counters = shared.counters.clone();
    let mut shutdown = shared.shutdown.clone();
    Counters::inc(&counters.active_watches);
    tokio::spawn(async move {
        if !*shutdown.borrow_and_update() {
            tokio::select! {
                _ = tx.closed() => {}
                _ = shutdown.changed() => {}
            }
        }
        counters
            .active_watches
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    });
    let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The body of [`ListFault::StatusWithOk`] (in kube-apiserver's field order).
const STATUS_WITH_OK: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: injected fault: a failure Status with HTTP 200","reason":"InternalError","code":500}"#;

/// The HTML page of [`ListFault::Html`].
const HTML_ERROR_PAGE: &str = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n";

/// A list answered with the misbehaviour `fault` (see [`ListFault`]).
pub(crate) fn faulty_list(
    shared: &Arc<Shared>,
    fault: ListFault,
    rp: &ResourcePath,
    p: &ListParams,
) -> Result<Response<SimBody>, ApiError> {
    let ns = rp.ns.as_deref();
    let storage = &shared.storage;
    let stream_response = |rx| {
        let mut r = Response::new(SimBody::stream(rx, shared.counters.clone()));
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    Ok(match fault {
        ListFault::StatusWithOk => {
            Counters::inc(&shared.counters.errors);
            json_response(
                shared,
                StatusCode::OK,
                Bytes::from_static(STATUS_WITH_OK.as_bytes()),
            )
        }
        ListFault::EmptyObject => json_response(shared, StatusCode::OK, Bytes::from_static(b"{}")),
        ListFault::Html => {
            let mut r = json_response(
                shared,
                StatusCode::OK,
                Bytes::from_static(HTML_ERROR_PAGE.as_bytes()),
            );
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html"));
            r
        }
        ListFault::Endless => {
            let (tx, rx) = tokio::sync::mpsc::channel(2);
            let prefix = list::endless_prefix(&rp.def, storage.revision(), p.representation);
            let item_ns = rp
                .def
                .namespaced
                .then(|| ns.unwrap_or("default").to_string());
            tokio::spawn(list::endless(tx, prefix, item_ns, shared.shutdown.clone()));
            stream_response(rx)
        }
        ListFault::RepeatContinue => {
            let body = list::first_page_with_token(
                storage,
                rp.idx,
                &rp.def,
                ns,
                p,
                REPEAT_CONTINUE_TOKEN,
            )?;
            json_response(shared, StatusCode::OK, body)
        }
        ListFault::CloseMidBody => {
            let body = list::list(storage, rp.idx, &rp.def, ns, p, shared.cfg.watch_cache)?;
            let (tx, rx) = tokio::sync::mpsc::channel(1);
            tokio::spawn(crate::body::send_then_abort(
                tx,
                body.slice(..body.len() / 2),
                "injected close in the middle of a list body",
            ));
            stream_response(rx)
        }
        ListFault::NoResourceVersion => {
            let body = list::list_without_resource_version(
                storage,
                rp.idx,
                &rp.def,
                ns,
                p,
                shared.cfg.watch_cache,
            )?;
            json_response(shared, StatusCode::OK, body)
        }
    })
}
