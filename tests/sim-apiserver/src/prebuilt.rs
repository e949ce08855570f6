//! A fake API server of pre-built bytes, for benchmarks that measure the client side alone.
//!
//! A list request gets the [`PrebuiltList`]: whole, or, when it was built of items with
//! [`PrebuiltList::paged`] and the request has a `limit`, one page of it with a `continue` token
//! for the next (as kube-apiserver pages, so a client's memory is measured on the pages it really
//! gets); the first watch gets `events`, one HTTP/1.1 chunk each, once `release` turns true (so a benchmark can time exactly their delivery: drop the
//! sender, or send `true`, to release at once); later watches stay open and silent. Serving costs
//! a reference-count increment per event, so a figure taken against it is the client's. It
//! speaks plain HTTP/1.1 and checks nothing: not a Kubernetes API server, only its wire shape.
//!
//! [`serve_prebuilt_paced`] sends the events at a steady rate instead of all at once, as
//! kube-apiserver sends a quiet cluster's changes (each flushed alone), and can stamp each with
//! the time it left, so that a client can measure its latency from the server's send to its handler.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// Digits of the send time [`Pace::stamp_after`] writes: microseconds since the UNIX epoch,
/// zero-padded.
pub const STAMP_DIGITS: usize = 16;

/// How [`serve_prebuilt_paced`] sends the events of the first watch.
#[derive(Debug, Clone)]
pub struct Pace {
    /// Time from one event's send to the next's. Each event is sent at the release time plus its
    /// index times this (absolute deadlines: a late send does not push the later ones back).
    pub interval: Duration,
    /// When set, the bytes after which each event holds [`STAMP_DIGITS`] placeholder digits:
    /// they are overwritten, as the event leaves, with the microseconds since the UNIX epoch.
    /// An event without those bytes is sent as it is.
    pub stamp_after: Option<Bytes>,
}

impl Pace {
    /// `per_second` events a second (at least one every hour), unstamped.
    pub fn per_second(per_second: f64) -> Self {
        let per_second = if per_second.is_finite() {
            per_second.max(1.0 / 3600.0)
        } else {
            1.0
        };
        Pace {
            interval: Duration::from_secs_f64(1.0 / per_second),
            stamp_after: None,
        }
    }

    /// This pace, stamping the send time after `marker` in each event.
    pub fn stamped_after(mut self, marker: impl Into<Bytes>) -> Self {
        self.stamp_after = Some(marker.into());
        self
    }
}

/// `event` with its send time written after `marker`, if the marker is there with room after it.
pub fn stamp(event: &Bytes, marker: &[u8], sent: SystemTime) -> Bytes {
    let at = event
        .windows(marker.len().max(1))
        .position(|w| w == marker)
        .map(|i| i + marker.len());
    match at {
        Some(at) if !marker.is_empty() && at + STAMP_DIGITS <= event.len() => {
            let micros = sent.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
                % 10u128.pow(STAMP_DIGITS as u32);
            let mut out = event.to_vec();
            out[at..at + STAMP_DIGITS]
                .copy_from_slice(format!("{micros:0width$}", width = STAMP_DIGITS).as_bytes());
            Bytes::from(out)
        }
        _ => event.clone(),
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
    serve(listener, list.into(), events, release, None).await
}

/// [`serve_prebuilt`], with the first watch's events sent at `pace` once released, each in an
/// HTTP chunk of its own, written by a thread of their own (so that a busy server runtime does
/// not bunch them).
pub async fn serve_prebuilt_paced(
    listener: tokio::net::TcpListener,
    list: impl Into<PrebuiltList>,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
    pace: Pace,
) {
    serve(listener, list.into(), events, release, Some(pace)).await
}

async fn serve(
    listener: tokio::net::TcpListener,
    list: PrebuiltList,
    events: Arc<Vec<Bytes>>,
    release: tokio::sync::watch::Receiver<bool>,
    pace: Option<Pace>,
) {
    let list = Arc::new(list);
    let streamed = Arc::new(AtomicBool::new(false));
    while let Ok((socket, _)) = listener.accept().await {
        let _ = socket.set_nodelay(true);
        let (list, events, streamed, release, pace) = (
            Arc::clone(&list),
            Arc::clone(&events),
            Arc::clone(&streamed),
            release.clone(),
            pace.clone(),
        );
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let body = answer(&req, &list, &events, &streamed, release.clone(), &pace);
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
    pace: &Option<Pace>,
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
    if let Some(pace) = pace {
        return paced(events, released, pace.clone());
    }
    let count = events.len();
    let frames = futures::stream::once(released)
        .map(move |()| futures::stream::iter(0..count))
        .flatten()
        .map(move |i| Ok::<_, Infallible>(Frame::data(events[i].clone())));
    http_body_util::BodyExt::boxed(StreamBody::new(frames))
}

/// The events sent at `pace` once `released` completes: a thread keeps the deadlines and hands each
/// event to the connection through a small bounded channel.
fn paced(
    events: Arc<Vec<Bytes>>,
    released: impl std::future::Future<Output = ()> + Send + Sync + 'static,
    pace: Pace,
) -> Body {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    let frames = futures::stream::once(async move {
        released.await;
        std::thread::spawn(move || {
            let start = Instant::now();
            for (i, event) in events.iter().enumerate() {
                let deadline = start + pace.interval.mul_f64(i as f64);
                if let Some(wait) = deadline.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let event = match &pace.stamp_after {
                    Some(marker) => stamp(event, marker, SystemTime::now()),
                    None => event.clone(),
                };
                if tx.blocking_send(event).is_err() {
                    return; // the client went away
                }
            }
        });
        futures::stream::unfold(rx, |mut rx| async move {
            let event = rx.recv().await?;
            Some((Ok::<_, Infallible>(Frame::data(event)), rx))
        })
    })
    .flatten();
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

    #[test]
    fn a_stamp_overwrites_the_placeholder_after_its_marker_and_nothing_else() {
        let event = Bytes::from_static(b"{\"sent\":\"0000000000000000\",\"x\":1}\n");
        let sent = UNIX_EPOCH + Duration::from_micros(1_234_567);
        let stamped = stamp(&event, b"\"sent\":\"", sent);
        assert_eq!(&stamped[..], b"{\"sent\":\"0000000001234567\",\"x\":1}\n");
        // No marker, or no room after it: the event goes as it is.
        assert_eq!(stamp(&event, b"\"absent\":\"", sent), event);
        assert_eq!(stamp(&event, b"\"x\":", sent), event);
    }

    #[tokio::test]
    async fn paced_events_arrive_stamped_and_spaced() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let events: Vec<Bytes> = (0..3)
            .map(|i| Bytes::from(format!("{{\"t\":\"0000000000000000\",\"i\":{i}}}\n")))
            .collect();
        let pace = Pace {
            interval: Duration::from_millis(20),
            stamp_after: None,
        }
        .stamped_after(&b"\"t\":\""[..]);
        let server = tokio::spawn(serve_prebuilt_paced(
            listener,
            Bytes::from_static(b"LIST"),
            Arc::new(events),
            tokio::sync::watch::channel(true).1,
            pace,
        ));
        let before = SystemTime::now();
        let watch = get(addr, "/api/v1/pods?watch=true").await;
        let stamps: Vec<u128> = watch
            .lines()
            .filter_map(|l| l.strip_prefix("{\"t\":\""))
            .map(|l| l[..STAMP_DIGITS].parse().unwrap())
            .collect();
        assert_eq!(stamps.len(), 3, "{watch}");
        let floor = before.duration_since(UNIX_EPOCH).unwrap().as_micros();
        assert!(stamps[0] >= floor, "stamped with the send time");
        // Deadlines are 20 ms apart: the third leaves at least 40 ms after the first.
        assert!(stamps[2] - stamps[0] >= 40_000, "{stamps:?}");
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
