//! [`WatchBody`]: a watch response's body, read on a connection the reader drives itself.
//!
//! A pooled hyper client runs each connection in a task of its own and hands every body chunk to
//! the reader through a one-slot channel: for a watch, where kube-apiserver writes one chunk per
//! event, that costs two cross-task wake-ups per event, and on a multi-threaded runtime two
//! cross-*thread* ones. Measured alone, that hand-off is several times slower than a reader
//! polling the connection itself, and costs a large share of what an informer may spend per event
//! (figures and command in docs/benchmarks.md, section *The watch reader*).
//!
//! So an HTTP/1.1 watch gets a connection of its own (a watch holds its connection for its whole
//! life anyway, pooled or not), and its body polls that connection before reading: the socket read,
//! the chunk decoding and the event decoding happen in one task, with no hand-off. Dropping the
//! body drops the connection, which closes it, exactly as dropping a pooled watch body does.
//!
//! HTTP/2 is different: many watches share one connection there, and hyper's HTTP/2 streams buffer
//! up to the flow-control window instead of handing over one chunk at a time, so HTTP/2 watches
//! keep using the pooled, multiplexed connection (see [`Client::watch`](crate::Client::watch)).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

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
/// in watch profiles (docs/benchmarks.md, section *The watch reader*). A fixed 64 KiB buffer
/// (about 17 typical Pods) is reused from the heap instead. Events bigger than the buffer still
/// arrive whole, over several reads.
const WATCH_READ_BUFFER: usize = 64 * 1024;

/// The connection a dedicated watch drives: it resolves when the response is complete (the
/// request handle is dropped, so no second request can follow) or the connection fails.
pub(crate) type ConnectionDriver = Pin<Box<dyn Future<Output = Result<(), hyper::Error>> + Send>>;

/// The body of a watch response: either on a pooled connection (driven by the pool's own task)
/// or on a dedicated connection that this body drives as it is read.
pub struct WatchBody {
    body: Incoming,
    /// `Some` until the dedicated connection finishes; `None` for a pooled connection.
    connection: Option<ConnectionDriver>,
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
        }
    }

    /// A body that drives `connection` whenever it is polled.
    pub(crate) fn dedicated(body: Incoming, connection: ConnectionDriver) -> Self {
        WatchBody {
            body,
            connection: Some(connection),
        }
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
        // Drive the socket first: it reads what has arrived and passes the next chunk to `body`.
        // Both register this task's waker, so whichever makes progress wakes this reader.
        if let Some(connection) = this.connection.as_mut() {
            if let Poll::Ready(result) = connection.as_mut().poll(cx) {
                // A failed connection also fails or ends `body`, which reports it below.
                if let Err(e) = result {
                    tracing::debug!(error = %e, "watch connection ended");
                }
                this.connection = None;
            }
        }
        Pin::new(&mut this.body).poll_frame(cx)
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
