//! The response body: a full buffer or a stream of chunks fed by a task, counting bytes.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

use crate::metrics::{Counters, UserCounters};

/// What a streaming task sends: a chunk, or an error that aborts the connection.
pub(crate) type Chunk = Result<Bytes, std::io::Error>;

/// Feeds a streamed body `data` and then an error that aborts the connection, after the
/// body has taken `data` and the connection has had a moment to write it: an error polled
/// before the head and `data` are flushed would drop them (HTTP/1.1 and HTTP/2 alike), and
/// hyper offers no flush notification to wait for. Whatever `tx` held before `data` is
/// taken first, in order.
pub(crate) async fn send_then_abort(tx: mpsc::Sender<Chunk>, data: Bytes, why: &'static str) {
    if tx.send(Ok(data)).await.is_err() {
        return;
    }
    // Every slot free means the body has taken everything sent, `data` last.
    let Ok(mut permits) = tx.reserve_many(tx.max_capacity()).await else {
        return;
    };
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    if let Some(permit) = permits.next() {
        permit.send(Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            why,
        )));
    }
}

/// A response body.
#[derive(Debug)]
pub struct SimBody {
    kind: Kind,
    counters: Option<Arc<Counters>>,
    /// The authenticated user's counters, once known, and whether the body answers a read.
    user: Option<(Arc<UserCounters>, bool)>,
}

#[derive(Debug)]
enum Kind {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Chunk>),
}

impl SimBody {
    pub(crate) fn full(b: impl Into<Bytes>, counters: Arc<Counters>) -> Self {
        Self {
            kind: Kind::Full(Some(b.into())),
            counters: Some(counters),
            user: None,
        }
    }

    pub(crate) fn stream(rx: mpsc::Receiver<Chunk>, counters: Arc<Counters>) -> Self {
        Self {
            kind: Kind::Stream(rx),
            counters: Some(counters),
            user: None,
        }
    }

    /// The body, if it is whole (not streamed) and not yet sent.
    pub(crate) fn whole(&self) -> Option<&Bytes> {
        match &self.kind {
            Kind::Full(b) => b.as_ref(),
            Kind::Stream(_) => None,
        }
    }

    /// The same body's counters with `b` as its whole content (a re-encoded body).
    pub(crate) fn with_whole(self, b: impl Into<Bytes>) -> Self {
        Self {
            kind: Kind::Full(Some(b.into())),
            counters: self.counters,
            user: self.user,
        }
    }

    /// The same body with its stream passed through `f` (a re-encoded stream); a whole body is
    /// left as it is.
    pub(crate) fn map_stream(
        self,
        f: impl FnOnce(mpsc::Receiver<Chunk>) -> mpsc::Receiver<Chunk>,
    ) -> Self {
        match self.kind {
            Kind::Stream(rx) => Self {
                kind: Kind::Stream(f(rx)),
                counters: self.counters,
                user: self.user,
            },
            Kind::Full(_) => self,
        }
    }

    /// The same body, its bytes counted to `user` too (as read bytes if it answers a `read`).
    pub(crate) fn for_user(self, user: Arc<UserCounters>, read: bool) -> Self {
        Self {
            user: Some((user, read)),
            ..self
        }
    }

    fn count(&self, n: usize) {
        if let Some(c) = &self.counters {
            c.bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
        if let Some((u, read)) = &self.user {
            u.bytes.fetch_add(n as u64, Ordering::Relaxed);
            if *read {
                u.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let out = match &mut this.kind {
            Kind::Full(b) => Poll::Ready(b.take().map(Ok)),
            Kind::Stream(rx) => rx.poll_recv(cx),
        };
        match out {
            Poll::Ready(Some(Ok(b))) => {
                this.count(b.len());
                Poll::Ready(Some(Ok(Frame::data(b))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(&self.kind, Kind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            Kind::Full(None) => SizeHint::with_exact(0),
            Kind::Stream(_) => SizeHint::default(),
        }
    }
}

/// A watch line longer than this is not converted: the stream is ended instead.
const MAX_LINE: usize = 16 << 20;

/// A watch body whose event lines are rewritten by `f` (each line whole, however the chunks
/// cut it; a line longer than [`MAX_LINE`] ends the stream).
pub(crate) fn map_watch_lines(
    mut rx: mpsc::Receiver<Chunk>,
    mut f: impl FnMut(&[u8]) -> Bytes + Send + 'static,
) -> mpsc::Receiver<Chunk> {
    let (tx, out) = mpsc::channel::<Chunk>(16);
    tokio::spawn(async move {
        let mut pending = BytesMut::new();
        while let Some(chunk) = rx.recv().await {
            let bytes = match chunk {
                Ok(b) => b,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            pending.extend_from_slice(&bytes);
            while let Some(nl) = pending.iter().position(|b| *b == b'\n') {
                let line = pending.split_to(nl + 1);
                if tx.send(Ok(f(&line))).await.is_err() {
                    return;
                }
            }
            if pending.len() > MAX_LINE {
                return;
            }
        }
        if !pending.is_empty() {
            let _ = tx.send(Ok(pending.freeze())).await;
        }
    });
    out
}
