//! [`WatchBody`]: a watch response's body, read on a connection the reader drives itself.
//!
//! A pooled hyper client runs each connection in a task of its own and hands every body chunk to
//! the reader through a one-slot channel: for a watch, where kube-apiserver writes one chunk per
//! event, that costs two cross-task wake-ups per event, and on a multi-threaded runtime two
//! cross-*thread* ones. Measured alone, that hand-off is several times slower than a reader
//! polling the connection itself, and costs a large share of what an informer may spend per event
//! (figures and command in docs/benchmarks-archive.md, section *The watch reader*).
//!
//! So an HTTP/1.1 watch gets a connection of its own (a watch holds its connection for its whole
//! life anyway, pooled or not), and its body polls that connection before reading: the socket read,
//! the chunk decoding and the event decoding happen in one task, with no hand-off. Dropping the
//! body drops the connection, which closes it, exactly as dropping a pooled watch body does.
//!
//! Polling the connection from the reader's task wakes that task while it runs: the connection
//! hands the chunk it read to `body` (waking the body's waker) and learns that `body` wants more
//! (waking the connection's). A task woken during its own poll is put back at the end of its
//! worker's queue once the poll returns, and tokio then unparks another worker to share that
//! queue: at one event per chunk, about half a worker wake-up per event, for nothing, since the
//! body is polled right after the connection anyway (measured with `perf record -e
//! sched:sched_wakeup`, docs/benchmarks-archive.md, section *Paced peer comparison*). So the body polls
//! both with a waker of its own ([`PollWaker`]) that keeps wakes arriving during the poll to
//! itself and polls again, and passes on only those that arrive while the task waits
//! (invariant WB1 below).
//!
//! - **WB1 (no wake lost, none to itself)**: a wake of the connection or the body while
//!   [`WatchBody::poll_frame`] runs does not wake the task: if the poll ends `Pending`, the two
//!   are polled again (at most [`REPOLLS`] times, then the task is woken as before); if it ends
//!   `Ready`, the caller polls again for the next frame. A wake at any other time wakes the task
//!   that polled last.
//!
//! HTTP/2 is different: many watches share one connection there, and hyper's HTTP/2 streams buffer
//! up to the flow-control window instead of handing over one chunk at a time, so HTTP/2 watches
//! keep using the pooled, multiplexed connection (see [`Client::watch`](crate::Client::watch)).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

use bytes::Bytes;
use futures::future::Either;
use http_body_util::Empty;
use hyper::body::{Body, Frame, Incoming, SizeHint};

/// Bytes a dedicated watch connection reads at most at once.
///
/// hyper's adaptive default doubles its read buffer while reads fill it, up to about 400 KiB,
/// and a burst of events does fill it. Every frame of a read keeps its buffer alive until the frame
/// is decoded, so each read then needs a fresh allocation of that size, beyond the allocator's
/// reuse threshold: fresh pages, faulted in and zeroed by the kernel on every read, which showed
/// in watch profiles (docs/benchmarks-archive.md, section *The watch reader*). A fixed 64 KiB buffer
/// (about 17 typical Pods) is reused from the heap instead. Events bigger than the buffer still
/// arrive whole, over several reads.
const WATCH_READ_BUFFER: usize = 64 * 1024;

/// The connection a dedicated watch drives: it resolves when the response is complete (the
/// request handle is dropped, so no second request can follow) or the connection fails.
pub(crate) type ConnectionDriver = Pin<Box<dyn Future<Output = Result<(), hyper::Error>> + Send>>;

/// Times a `Pending` poll is repeated because the connection or the body was woken during it
/// (WB1); beyond, the task is woken instead, so a connection that keeps waking itself cannot hold
/// the worker.
pub(crate) const REPOLLS: usize = 4;

/// The waker a dedicated watch body polls its connection and body with (WB1): a wake while the
/// body is being polled is noted, one at any other time wakes the task that polled last.
#[derive(Default)]
pub(crate) struct PollWaker {
    task: AtomicWaker,
    polling: AtomicBool,
    woken: AtomicBool,
}

impl PollWaker {
    /// Starts a poll on behalf of the task of `cx`.
    fn begin(&self, cx: &Context<'_>) {
        self.task.register(cx.waker());
        self.woken.store(false, Ordering::SeqCst);
        self.polling.store(true, Ordering::SeqCst);
    }

    /// Ends a poll; true if something was woken during it. Either this sees a wake stored before
    /// it, or that wake saw `polling` false and woke the task (both sides store, then load).
    fn end(&self) -> bool {
        self.polling.store(false, Ordering::SeqCst);
        self.woken.load(Ordering::SeqCst)
    }
}

impl Wake for PollWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::SeqCst);
        if !self.polling.load(Ordering::SeqCst) {
            self.task.wake();
        }
    }
}

/// The body of a watch response: either on a pooled connection (driven by the pool's own task)
/// or on a dedicated connection that this body drives as it is read.
pub struct WatchBody {
    body: Incoming,
    /// `Some` until the dedicated connection finishes; `None` for a pooled connection.
    connection: Option<ConnectionDriver>,
    /// What the connection and the body are polled with (WB1), for a dedicated connection.
    poll_waker: Option<(Arc<PollWaker>, Waker)>,
}

impl std::fmt::Debug for WatchBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchBody")
            .field("dedicated_connection", &self.connection.is_some())
            .finish()
    }
}

impl WatchBody {
    /// A body whose connection is driven elsewhere (the pool's task), or has already finished.
    pub(crate) fn without_driver(body: Incoming) -> Self {
        WatchBody {
            body,
            connection: None,
            poll_waker: None,
        }
    }

    /// A body that drives `connection` whenever it is polled.
    pub(crate) fn dedicated(body: Incoming, connection: ConnectionDriver) -> Self {
        let poll_waker = Arc::new(PollWaker::default());
        let waker = Waker::from(Arc::clone(&poll_waker));
        WatchBody {
            body,
            connection: Some(connection),
            poll_waker: Some((poll_waker, waker)),
        }
    }

    /// Polls the connection, then the body, with `cx`.
    fn poll_once(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        // Drive the socket first: it reads what has arrived and passes the next chunk to `body`.
        // Both register the waker of `cx`, so whichever makes progress wakes this reader.
        if let Some(connection) = self.connection.as_mut() {
            if let Poll::Ready(result) = connection.as_mut().poll(cx) {
                // A failed connection also fails or ends `body`, which reports it below.
                if let Err(e) = result {
                    tracing::debug!(error = %e, "watch connection ended");
                }
                self.connection = None;
            }
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }
}

impl Body for WatchBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let Some((poll_waker, waker)) = this.poll_waker.clone() else {
            return this.poll_once(cx);
        };
        let mut own = Context::from_waker(&waker);
        for _ in 0..=REPOLLS {
            poll_waker.begin(cx);
            let polled = this.poll_once(&mut own);
            let woken = poll_waker.end();
            // WB1: `Ready` is polled again by the caller for the next frame.
            if polled.is_ready() || !woken {
                return polled;
            }
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Sends `request` on a fresh HTTP/1.1 connection over `io` and returns the response with a body
/// that drives the connection. The connection is polled while waiting for the response head.
pub(crate) async fn send_on_dedicated_http1<I>(
    io: I,
    request: http::Request<Empty<Bytes>>,
) -> Result<http::Response<WatchBody>, hyper::Error>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(WATCH_READ_BUFFER))
        .handshake(io)
        .await?;
    let mut connection: ConnectionDriver = Box::pin(connection);
    let send = std::pin::pin!(sender.send_request(request));
    let response = match futures::future::select(send, connection.as_mut()).await {
        Either::Left((response, _)) => response?,
        Either::Right((result, send)) => {
            // The connection ended before the response head: `send` reports why. Should a head
            // still come, the connection is done, so the body has nothing left to drive.
            result?;
            return Ok(send.await?.map(WatchBody::without_driver));
        }
    };
    // Dropping the request handle lets the connection finish once this response's body is done.
    drop(sender);
    Ok(response.map(|body| WatchBody::dedicated(body, connection)))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use hyper_util::rt::TokioIo;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// Counts the wakes of the task it stands for.
    #[derive(Default)]
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn chunk(data: &str) -> String {
        format!("{:x}\r\n{data}\r\n", data.len())
    }

    /// WB1: reading chunks that have arrived never wakes the reading task (before, every chunk
    /// woke it during its own poll, which tokio answers by unparking another worker); a chunk
    /// arriving while it waits does wake it.
    #[tokio::test]
    async fn wb1_reading_wakes_the_reader_only_for_what_arrives_while_it_waits() {
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let mut head = String::from("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
        for i in 0..5 {
            head.push_str(&chunk(&format!("event {i}\n")));
        }
        let request = http::Request::get("/api/v1/pods?watch=true")
            .header("host", "test")
            .body(Empty::<Bytes>::new())
            .unwrap();
        // The server answers once it has the request (hyper refuses an answer before it).
        let serve = async {
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = server.read(&mut buf).await.unwrap();
                assert!(n > 0, "no request");
                got.extend_from_slice(&buf[..n]);
            }
            server.write_all(head.as_bytes()).await.unwrap();
        };
        let (response, ()) = tokio::join!(
            send_on_dedicated_http1(TokioIo::new(client), request),
            serve
        );
        let response = response.unwrap();
        let mut body = std::pin::pin!(response.into_body());
        let task = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&task));
        let mut cx = Context::from_waker(&waker);
        let mut frames = Vec::new();
        while let Poll::Ready(Some(frame)) = body.as_mut().poll_frame(&mut cx) {
            frames.push(frame.unwrap().into_data().unwrap());
        }
        assert_eq!(frames.len(), 5, "{frames:?}");
        assert_eq!(
            task.0.load(Ordering::SeqCst),
            0,
            "the reader was woken by its own reading"
        );
        // Waiting now: a chunk written wakes it, and it reads that chunk.
        server
            .write_all(chunk("event 5\n").as_bytes())
            .await
            .unwrap();
        assert!(
            task.0.load(Ordering::SeqCst) >= 1,
            "a new chunk did not wake the reader"
        );
        match body.as_mut().poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                assert_eq!(frame.into_data().unwrap(), Bytes::from("event 5\n"))
            }
            other => panic!("expected the new chunk, got {other:?}"),
        }
    }

    /// WB1 for the waker itself: a wake during a poll is noted and wakes nobody; one after it
    /// wakes the task that polled last.
    #[test]
    fn wb1_a_wake_during_a_poll_is_kept_one_after_it_is_passed_on() {
        let task = Arc::new(CountingWaker::default());
        let waker = Waker::from(Arc::clone(&task));
        let cx = Context::from_waker(&waker);
        let poll_waker = Arc::new(PollWaker::default());
        let own = Waker::from(Arc::clone(&poll_waker));
        poll_waker.begin(&cx);
        own.wake_by_ref();
        assert!(poll_waker.end(), "the wake during the poll was noted");
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        poll_waker.begin(&cx);
        assert!(!poll_waker.end(), "nothing woke this poll");
        own.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
    }
}
