//! A fake API server of pre-built bytes, for benchmarks that measure the client side alone.
//!
//! A list request gets the [`PrebuiltList`]: whole, or, when it was built of items with
//! [`PrebuiltList::paged`] and the request has a `limit`, one page of it with a `continue` token
//! for the next (as kube-apiserver pages, so a client's memory is measured on the pages it really
//! gets); the first watch gets `events`, one HTTP/1.1 chunk each, once `release` turns true (so a benchmark can time exactly their delivery: drop the
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

/// The list a [`serve_prebuilt`] server answers with.
#[derive(Debug, Clone)]
pub struct PrebuiltList {
    /// The whole list, for a request without `limit`.
    whole: Bytes,
    /// Its parts, when pages can be cut from it.
    paged: Option<Paged>,
}

#[derive(Debug, Clone)]
struct Paged {
    kind: String,
    resource_version: String,
    items: Arc<Vec<Bytes>>,
}

impl PrebuiltList {
    /// A list of `items` (each one object's JSON) of list kind `kind` (`PodList`, `apiVersion`
    /// `v1`) at `resource_version`, served whole without `limit` and in pages with it.
    pub fn paged(kind: &str, resource_version: &str, items: Vec<Bytes>) -> Self {
        let paged = Paged {
            kind: kind.to_string(),
            resource_version: resource_version.to_string(),
            items: Arc::new(items),
        };
        PrebuiltList {
            whole: paged.page(0, usize::MAX),
            paged: Some(paged),
        }
    }

    /// The whole list's body.
    pub fn whole(&self) -> &Bytes {
        &self.whole
    }

    /// The body answering a list request with this query string.
    fn answer(&self, query: Option<&str>) -> Bytes {
        let param = |name: &str| {
            query?
                .split('&')
                .find_map(|pair| pair.strip_prefix(name)?.strip_prefix('='))
        };
        let limit = param("limit").and_then(|l| l.parse::<usize>().ok());
        match (&self.paged, limit) {
            (Some(paged), Some(limit)) if limit > 0 => {
                let start = param("continue")
                    .and_then(|c| c.strip_prefix('p')?.parse().ok())
                    .unwrap_or(0);
                paged.page(start, limit)
            }
            _ => self.whole.clone(),
        }
    }
}

impl From<Bytes> for PrebuiltList {
    /// A list served whole, `limit` or not.
    fn from(whole: Bytes) -> Self {
        PrebuiltList { whole, paged: None }
    }
}

impl Paged {
    /// Items `start..start + limit`, with a continue token (`p<next start>`) when more follow.
    fn page(&self, start: usize, limit: usize) -> Bytes {
        let start = start.min(self.items.len());
        let end = start.saturating_add(limit).min(self.items.len());
        let items = &self.items[start..end];
        let continue_field = if end < self.items.len() {
            format!(r#","continue":"p{end}""#)
        } else {
            String::new()
        };
        let head = format!(
            r#"{{"kind":"{}","apiVersion":"v1","metadata":{{"resourceVersion":"{}"{continue_field}}},"items":["#,
            self.kind, self.resource_version
        );
        let len = head.len() + items.iter().map(|i| i.len() + 1).sum::<usize>() + 2;
        let mut body = Vec::with_capacity(len);
        body.extend_from_slice(head.as_bytes());
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(item);
        }
        body.extend_from_slice(b"]}");
        Bytes::from(body)
    }
}

/// Serves `list` and `events` (see the [module docs](self)) on `listener` until the task is
/// dropped or the listener fails.
pub async fn serve_prebuilt(
    listener: tokio::net::TcpListener,
    list: impl Into<PrebuiltList>,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
) {
    let list = Arc::new(list.into());
    let streamed = Arc::new(AtomicBool::new(false));
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let (list, events, streamed, release) = (
            Arc::clone(&list),
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
    list: &PrebuiltList,
    events: &Arc<Vec<Bytes>>,
    streamed: &AtomicBool,
    mut release: tokio::sync::watch::Receiver<bool>,
) -> Body {
    let watch = req
        .uri()
        .query()
        .is_some_and(|q| q.contains("watch=true") || q.contains("watch=1"));
    if !watch {
        return Full::new(list.answer(req.uri().query())).boxed();
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

    #[tokio::test]
    async fn a_paged_list_is_cut_at_limit_and_continued_to_its_end() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let items: Vec<Bytes> = (0..5)
            .map(|i| Bytes::from(format!(r#"{{"i":{i}}}"#)))
            .collect();
        let list = PrebuiltList::paged("PodList", "42", items);
        let server = tokio::spawn(serve_prebuilt(
            listener,
            list,
            Arc::new(Vec::new()),
            tokio::sync::watch::channel(true).1,
        ));
        let body = |response: String| -> serde_json::Value {
            let json = &response[response.find("\r\n\r\n").unwrap() + 4..];
            serde_json::from_str(json).unwrap()
        };
        let whole = body(get(addr, "/api/v1/pods").await);
        assert_eq!(whole["items"].as_array().unwrap().len(), 5);
        assert!(whole["metadata"].get("continue").is_none());
        let mut seen = Vec::new();
        let mut path = "/api/v1/pods?limit=2".to_string();
        loop {
            let page = body(get(addr, &path).await);
            assert_eq!(page["kind"], "PodList");
            assert_eq!(page["metadata"]["resourceVersion"], "42");
            let items = page["items"].as_array().unwrap();
            assert!(items.len() <= 2);
            seen.extend(items.iter().map(|i| i["i"].as_u64().unwrap()));
            match page["metadata"]["continue"].as_str() {
                Some(token) => path = format!("/api/v1/pods?limit=2&continue={token}"),
                None => break,
            }
        }
        assert_eq!(seen, vec![0, 1, 2, 3, 4]);
        server.abort();
    }
}
