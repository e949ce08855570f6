//! A fake API server of pre-built bytes, for benchmarks that measure the client side alone.
//!
//! Every list request gets `list` as it is; the first watch gets `events`, one HTTP/1.1 chunk
//! each, once `release` turns true (so a benchmark can time exactly their delivery: drop the
//! sender, or send `true`, to release at once); later watches stay open and silent. Serving costs
//! a reference-count increment per event, so a figure taken against it is the client's. It
//! speaks plain HTTP/1.1 and checks nothing: not a Kubernetes API server, only its wire shape.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `list` and `events` (see the [module docs](self)) on `listener` until the task is
/// dropped or the listener fails.
pub async fn serve_prebuilt(
    listener: tokio::net::TcpListener,
    list: Bytes,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
) {
    let streamed = Arc::new(AtomicBool::new(false));
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let (list, events, streamed, release) = (
            list.clone(),
            Arc::clone(&events),
            Arc::clone(&streamed),
            release.clone(),
        );
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let body = answer(&req, &list, &events, &streamed, release.clone());
                async move {
                    Ok::<_, Infallible>(
                        Response::builder()
                            .header("content-type", "application/json")
                            .body(body)
                            .expect("a response of static parts"),
                    )
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

/// The body answering `req`: the list, the events (first watch only) or a silent watch.
fn answer(
    req: &Request<hyper::body::Incoming>,
    list: &Bytes,
    events: &Arc<Vec<Bytes>>,
    streamed: &AtomicBool,
    mut release: tokio::sync::watch::Receiver<bool>,
) -> Body {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    if !watch {
        return Full::new(list.clone()).boxed();
    }
    if streamed.swap(true, Ordering::SeqCst) {
        return http_body_util::BodyExt::boxed(StreamBody::new(futures::stream::pending::<
            Result<Frame<Bytes>, Infallible>,
        >()));
    }
    let released = async move {
        // A dropped sender releases at once.
        let _ = release.wait_for(|r| *r).await;
    };
    let events = Arc::clone(events);
    let count = events.len();
    let frames = futures::stream::once(released)
        .map(move |()| futures::stream::iter(0..count))
        .flatten()
        .map(move |i| Ok::<_, Infallible>(Frame::data(events[i].clone())));
    http_body_util::BodyExt::boxed(StreamBody::new(frames))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    async fn get(addr: std::net::SocketAddr, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(
            format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn lists_get_the_list_and_the_first_watch_the_events_once_released() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (release, released) = tokio::sync::watch::channel(false);
        let events = Arc::new(vec![
            Bytes::from_static(b"{\"a\":1}\n"),
            Bytes::from_static(b"{\"b\":2}\n"),
        ]);
        let server = tokio::spawn(serve_prebuilt(
            listener,
            Bytes::from_static(b"LIST"),
            events,
            released,
        ));
        assert!(get(addr, "/api/v1/pods").await.ends_with("LIST"));
        release.send_replace(true);
        let watch = get(addr, "/api/v1/pods?watch=true").await;
        assert!(
            watch.contains("{\"a\":1}") && watch.contains("{\"b\":2}"),
            "{watch}"
        );
        server.abort();
    }
}
