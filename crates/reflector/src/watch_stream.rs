//! [`decode_watch_body`]: a watch body's chunks in, a [`WatchStream`] of events out, decoded in
//! parallel batches when events arrive faster than one thread decodes them.
//!
//! Decoding is most of a watch's client-side cost. When the body delivers one event at a time
//! (the usual case: a cluster's events trickle in), each is decoded right here, in the reading
//! task, with no extra hand-off. When many complete frames are already there to read (a burst, a
//! watch-list's initial state, a catch-up after a reconnect), they are split into batches of
//! [`BATCH`] frames decoded by tasks of their own on the multi-threaded runtime, up to
//! [`MAX_IN_FLIGHT`] batches at once, while this task goes on reading. Results are taken strictly
//! in batch order, so events come out in exactly the order the server wrote them, whichever
//! batch finishes first.
//!
//! A batch belongs to whoever starts it first: its task, or this reading task. When the reader
//! has nothing to read and would wait for the oldest batch, and no worker has started that batch
//! yet (they are all busy with other tasks, such as the informer's handlers or, on a small machine,
//! a co-located server, or have not woken up yet), the reader decodes it itself instead of going
//! idle. That guarantees progress when every worker is held up, by blocking handlers say (W5);
//! it is kept for that, not for speed: on two cores shared with a server its effect on
//! throughput was within the machine's run-to-run noise (docs/benchmarks.md, section *The watch
//! reader*).
//!
//! Invariants (checked by this module's tests):
//! - **W1 (order)**: events come out in body order, each once.
//! - **W2 (errors end the stream)**: a decode error comes out after every event decoded before
//!   it, and nothing after it; batches already in flight behind it are dropped.
//! - **W3 (bounded)**: at most [`MAX_IN_FLIGHT`] batches of at most [`BATCH`] frames are decoded
//!   ahead of the consumer (plus the batch being read), so memory stays bounded however fast the
//!   server writes.
//! - **W4 (close semantics)**: a transport error, or a body ending inside an event, ends the stream
//!   like a normal close (`None`) once everything before it has come out.
//! - **W5 (progress)**: the stream makes progress even when no worker ever runs a decoding task:
//!   the reader decodes every batch nobody has started.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use futures::{FutureExt as _, Stream, StreamExt as _};
use parking_lot::Mutex;
use tokio::task::JoinHandle;

use crate::client::BoxError;
use crate::decoder::{decode_frames, DecodeError, RawFrame, WatchDecoder, WatchEvent};
use crate::error::ReflectorError;
use crate::lister_watcher::WatchStream;
use crate::object::Decode;

/// Frames per batch decoded by a task of its own.
pub(crate) const BATCH: usize = 32;

/// Fewest frames ready at once for a batch to be decoded on another task; fewer are decoded inline
/// (a task hand-off costs more than it saves on one or two events).
const MIN_PARALLEL: usize = 8;

/// Batches decoded ahead of the consumer at most.
pub(crate) const MAX_IN_FLIGHT: usize = 2;

/// The events of one batch, and the error that stopped it, if any.
struct Decoded<K> {
    events: Vec<WatchEvent<K>>,
    error: Option<DecodeError>,
    /// The body ends after this batch (transport error or end of stream).
    last: bool,
}

impl<K> Decoded<K> {
    fn empty() -> Self {
        Decoded {
            events: Vec::new(),
            error: None,
            last: false,
        }
    }
}

/// Frames handed to a decoding task, which either that task or the reader decodes: whichever
/// claims them first (see [`Batch::Spawned`]).
struct Job {
    frames: Mutex<Option<Vec<RawFrame>>>,
}

impl Job {
    /// The frames, to the first caller only.
    fn claim(&self) -> Option<Vec<RawFrame>> {
        self.frames.lock().take()
    }
}

/// A batch on its way: handed to a task of its own, or already decoded here.
enum Batch<K> {
    /// Decoded by its task, or, when the reader would otherwise wait for a batch no worker has
    /// started yet (every worker busy with other tasks, or not yet woken), by the reader itself:
    /// the reader then works instead of idling. The task's output is `None` when the reader took
    /// the frames first.
    Spawned {
        job: Arc<Job>,
        /// The decode error or end of body the batch carries, whoever decodes it.
        error: Option<DecodeError>,
        last: bool,
        handle: JoinHandle<Option<Decoded<K>>>,
    },
    Done(Decoded<K>),
}

impl<K> Drop for Batch<K> {
    fn drop(&mut self) {
        // A batch dropped before its result is taken (the consumer dropped the stream, or an
        // earlier batch failed) is not decoded for nothing.
        if let Batch::Spawned { handle, .. } = self {
            handle.abort();
        }
    }
}

/// Decodes `frames` into one batch's result, `error` and `last` applying after them.
fn decode_batch<K: Decode>(
    frames: Vec<RawFrame>,
    error: Option<DecodeError>,
    last: bool,
) -> Decoded<K> {
    let mut events = Vec::with_capacity(frames.len());
    let decoded = decode_frames(frames, &mut events).err();
    Decoded {
        events,
        error: decoded.or(error),
        last,
    }
}

struct BodyState<K, S> {
    chunks: S,
    decoder: WatchDecoder<K>,
    /// Batches in body order (W1).
    in_flight: VecDeque<Batch<K>>,
    /// Events ready for the consumer, in order.
    ready: VecDeque<Result<WatchEvent<K>, ReflectorError>>,
    /// No more chunks will be read (the body ended, failed, or an error was found).
    body_done: bool,
    /// Nothing comes out after what is in `ready` (W2, W4).
    finished: bool,
    /// The runtime batches are decoded on, when that may be done in parallel (a multi-threaded
    /// runtime on more than one core).
    parallel: Option<tokio::runtime::Handle>,
}

impl<K: Decode, S: Stream<Item = Result<Bytes, BoxError>> + Unpin> BodyState<K, S> {
    /// Fills `ready` with at least one item, unless the stream is over.
    async fn fill(&mut self) {
        while self.ready.is_empty() && !self.finished {
            let room = !self.body_done && self.in_flight.len() < MAX_IN_FLIGHT;
            match self.in_flight.front_mut() {
                None if self.body_done => self.finished = true,
                None => {
                    let item = self.chunks.next().await;
                    self.read(item);
                }
                Some(Batch::Done(decoded)) => {
                    let decoded = std::mem::replace(decoded, Decoded::empty());
                    self.in_flight.pop_front();
                    self.take(decoded);
                }
                Some(Batch::Spawned { .. }) => {
                    // Reading comes first while a chunk is there to read and there is room.
                    if room {
                        if let Some(item) = self.chunks.next().now_or_never() {
                            self.read(item);
                            continue;
                        }
                    }
                    if !self.help_with_front() {
                        self.wait_for_front(room).await;
                    }
                }
            }
        }
    }

    /// Decodes the oldest batch here, if no task has started it: the reader would otherwise wait
    /// for it. Returns whether it did.
    fn help_with_front(&mut self) -> bool {
        let Some(Batch::Spawned {
            job, error, last, ..
        }) = self.in_flight.front_mut()
        else {
            return false;
        };
        let Some(frames) = job.claim() else {
            return false;
        };
        let decoded = decode_batch(frames, error.take(), *last);
        self.in_flight.pop_front();
        self.take(decoded);
        true
    }

    /// Waits for the oldest batch's task, and, when there is `room` to read ahead (W3), for the
    /// next chunk too: whichever comes first.
    async fn wait_for_front(&mut self, room: bool) {
        let Some(Batch::Spawned { handle, .. }) = self.in_flight.front_mut() else {
            return;
        };
        let result = if room {
            tokio::select! {
                biased;
                result = handle => result,
                item = self.chunks.next() => return self.read(item),
            }
        } else {
            handle.await
        };
        let (error, last) = match self.in_flight.front_mut() {
            Some(Batch::Spawned { error, last, .. }) => (error.take(), *last),
            _ => (None, false),
        };
        self.in_flight.pop_front();
        let mut decoded = join_result(result);
        decoded.error = decoded.error.or(error);
        decoded.last |= last;
        self.take(decoded);
    }

    /// Moves one batch's results to `ready`; an error or the body's end finishes the stream.
    fn take(&mut self, decoded: Decoded<K>) {
        if self.finished {
            return;
        }
        self.ready.extend(decoded.events.into_iter().map(Ok));
        if let Some(e) = decoded.error {
            self.ready.push_back(Err(e.into()));
            self.finish();
        } else if decoded.last {
            self.finish();
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        self.body_done = true;
        // Dropping aborts batches still decoding behind the end (W2).
        self.in_flight.clear();
    }

    /// Frames `first` (the body's next item) and whatever further chunks are available right now,
    /// up to what the free batch slots hold, and queues the frames as batches.
    fn read(&mut self, first: Option<Result<Bytes, BoxError>>) {
        let mut frames = Vec::new();
        let mut item = first;
        loop {
            match item {
                Some(Ok(data)) => {
                    if let Err(e) = self.decoder.frames(data, &mut frames) {
                        self.body_done = true;
                        return self.queue(frames, Some(e), false);
                    }
                }
                Some(Err(e)) => {
                    // Like client-go, a broken connection ends the watch as a close would: the
                    // reflector re-watches from the last resource version (W4).
                    tracing::debug!(error = %e, "watch connection ended");
                    self.body_done = true;
                    return self.queue(frames, None, true);
                }
                None => {
                    self.body_done = true;
                    self.queue(frames, None, false);
                    let mut events = Vec::new();
                    let mut error = None;
                    match self.decoder.finish(&mut events) {
                        Ok(()) => {}
                        Err(DecodeError::Truncated(n)) => {
                            tracing::debug!(pending = n, "watch stream ended inside an event");
                        }
                        Err(e) => error = Some(e),
                    }
                    self.in_flight.push_back(Batch::Done(Decoded {
                        events,
                        error,
                        last: true,
                    }));
                    return;
                }
            }
            // W3: never more than MAX_IN_FLIGHT batches, counting those already queued.
            if frames.len() >= BATCH * MAX_IN_FLIGHT.saturating_sub(self.in_flight.len()).max(1) {
                break;
            }
            match self.chunks.next().now_or_never() {
                Some(next) => item = next,
                None => break,
            }
        }
        self.queue(frames, None, false);
    }

    /// Queues `frames` as batches, the last of them carrying `error` or `last`.
    fn queue(&mut self, mut frames: Vec<RawFrame>, mut error: Option<DecodeError>, last: bool) {
        if frames.is_empty() {
            if error.is_some() || last {
                self.in_flight.push_back(Batch::Done(Decoded {
                    events: Vec::new(),
                    error,
                    last,
                }));
            }
            return;
        }
        let runtime = match &self.parallel {
            Some(runtime) if frames.len() >= MIN_PARALLEL => runtime.clone(),
            _ => {
                let mut events = Vec::with_capacity(frames.len());
                let decoded = decode_frames(frames, &mut events).err();
                self.in_flight.push_back(Batch::Done(Decoded {
                    events,
                    error: decoded.or(error),
                    last,
                }));
                return;
            }
        };
        while !frames.is_empty() {
            let rest = frames.split_off(frames.len().min(BATCH));
            let batch = std::mem::replace(&mut frames, rest);
            let tail = frames.is_empty();
            let (error, last) = if tail {
                (error.take(), last)
            } else {
                (None, false)
            };
            let job = Arc::new(Job {
                frames: Mutex::new(Some(batch)),
            });
            let handle = runtime.spawn({
                let job = Arc::clone(&job);
                async move { job.claim().map(|frames| decode_batch(frames, None, false)) }
            });
            self.in_flight.push_back(Batch::Spawned {
                job,
                error,
                last,
                handle,
            });
        }
    }
}

/// A finished decoding task's batch. A panic in a `Decode` implementation is re-raised here, as it
/// would have been had the batch been decoded inline; a task cancelled by the runtime shutting
/// down ends the stream like a close. (A task finds no frames only when the reader took them, and
/// the reader then never waits for that task.)
fn join_result<K>(result: Result<Option<Decoded<K>>, tokio::task::JoinError>) -> Decoded<K> {
    match result {
        Ok(Some(decoded)) => decoded,
        Ok(None) => Decoded::empty(),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Decoded {
            events: Vec::new(),
            error: None,
            last: true,
        },
    }
}

/// The runtime batches can be decoded on in parallel: the current one, when it is multi-threaded
/// and the machine has more than one core.
fn parallel_runtime() -> Option<tokio::runtime::Handle> {
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let multi = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
    let cores = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
    (multi && cores).then_some(handle)
}

/// Turns a watch body (its data chunks) into a [`WatchStream`]: events in order, a decode error
/// ending the stream, a transport error or a body cut inside an event ending it like a close.
/// Events that arrive one at a time are decoded in the reading task; a burst of complete events
/// is decoded in parallel batches on the multi-threaded runtime, and still comes out in order.
pub fn decode_watch_body<K, S>(chunks: S, max_event_size: usize) -> WatchStream<K>
where
    K: Decode,
    S: Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    decode_watch_body_on(chunks, max_event_size, parallel_runtime())
}

/// [`decode_watch_body`], with batches decoded on `parallel` (inline when `None`).
fn decode_watch_body_on<K, S>(
    chunks: S,
    max_event_size: usize,
    parallel: Option<tokio::runtime::Handle>,
) -> WatchStream<K>
where
    K: Decode,
    S: Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    let state = BodyState {
        chunks: Box::pin(chunks),
        decoder: WatchDecoder::<K>::new(max_event_size),
        in_flight: VecDeque::new(),
        ready: VecDeque::new(),
        body_done: false,
        finished: false,
        parallel,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        st.fill().await;
        let next = st.ready.pop_front()?;
        Some((next, st))
    }))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    use delta_fifo::store_index::{CompactObject, Object};
    use proptest::prelude::*;

    use super::*;

    fn line(i: usize) -> String {
        format!(
            r#"{{"type":"MODIFIED","object":{{"kind":"Pod","metadata":{{"name":"p{i}","namespace":"ns","resourceVersion":"{i}"}},"spec":{{"n":{i}}}}}}}"#
        ) + "\n"
    }

    /// The body as chunks cut at `cuts`, followed by `tail` (a transport error, or nothing).
    fn body(
        text: &str,
        cuts: &[usize],
        tail: Option<&'static str>,
        pulled: Arc<AtomicUsize>,
    ) -> impl Stream<Item = Result<Bytes, BoxError>> + Send + 'static {
        let mut chunks: Vec<Result<Bytes, BoxError>> = Vec::new();
        let mut start = 0;
        for &c in cuts.iter().chain(std::iter::once(&text.len())) {
            let c = c.clamp(start, text.len());
            if c > start {
                chunks.push(Ok(Bytes::copy_from_slice(&text.as_bytes()[start..c])));
                start = c;
            }
        }
        if let Some(e) = tail {
            chunks.push(Err(e.into()));
        }
        futures::stream::iter(chunks).inspect(move |_| {
            pulled.fetch_add(1, Ordering::SeqCst);
        })
    }

    fn rvs(events: &[Result<WatchEvent<CompactObject>, ReflectorError>]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                Ok(WatchEvent::Modified(o)) => o.resource_version().unwrap_or("").to_string(),
                Ok(other) => format!("unexpected {}", other.type_name()),
                Err(e) => format!("error: {e}"),
            })
            .collect()
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
    }

    /// W1 with a burst big enough for several parallel batches: every event once, in order.
    #[test]
    fn w1_a_burst_decoded_in_parallel_batches_comes_out_in_order() {
        let n = BATCH * MAX_IN_FLIGHT * 5 + 7;
        let text: String = (0..n).map(line).collect();
        let cuts: Vec<usize> = (1..text.len()).step_by(97).collect();
        let events = runtime().block_on(async {
            let stream = decode_watch_body::<CompactObject, _>(
                body(&text, &cuts, None, Arc::default()),
                DEFAULT_MAX,
            );
            assert!(parallel_runtime().is_some());
            stream.collect::<Vec<_>>().await
        });
        let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert_eq!(rvs(&events), expected);
    }

    /// W2: the error comes after every event before it, and nothing after it.
    #[test]
    fn w2_a_malformed_event_ends_the_stream_after_the_events_before_it() {
        let bad = BATCH + 3;
        let text: String = (0..BATCH * 6)
            .map(|i| {
                if i == bad {
                    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":7}}}\n".to_string()
                } else {
                    line(i)
                }
            })
            .collect();
        let events = runtime().block_on(
            decode_watch_body::<CompactObject, _>(
                body(&text, &[], None, Arc::default()),
                DEFAULT_MAX,
            )
            .collect::<Vec<_>>(),
        );
        assert_eq!(events.len(), bad + 1);
        assert!(events[..bad].iter().all(Result::is_ok));
        assert!(
            matches!(events[bad], Err(ReflectorError::Decode(_))),
            "{:?}",
            events[bad]
        );
    }

    /// W3: a consumer that takes one event has not made the decoder read the whole body.
    #[test]
    fn w3_reading_ahead_is_bounded() {
        let n = BATCH * MAX_IN_FLIGHT * 20;
        let text: String = (0..n).map(line).collect();
        let cuts: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
        let pulled = Arc::new(AtomicUsize::new(0));
        let first = runtime().block_on(async {
            let mut stream = decode_watch_body::<CompactObject, _>(
                body(&text, &cuts, None, Arc::clone(&pulled)),
                DEFAULT_MAX,
            );
            stream.next().await
        });
        assert!(matches!(first, Some(Ok(_))));
        let read = pulled.load(Ordering::SeqCst);
        assert!(
            read <= BATCH * MAX_IN_FLIGHT + 1,
            "read {read} one-event chunks to deliver one event"
        );
    }

    /// W4: a transport error, or a body ending inside an event, ends the stream like a close.
    #[test]
    fn w4_a_broken_or_truncated_body_ends_like_a_close() {
        let n = BATCH * 3;
        let text: String = (0..n).map(line).collect();
        let rt = runtime();
        let broken = rt.block_on(
            decode_watch_body::<CompactObject, _>(
                body(&text, &[], Some("connection reset"), Arc::default()),
                DEFAULT_MAX,
            )
            .collect::<Vec<_>>(),
        );
        assert_eq!(
            rvs(&broken),
            (0..n).map(|i| i.to_string()).collect::<Vec<_>>()
        );
        let cut = text.len() - 10;
        let truncated = rt.block_on(
            decode_watch_body::<CompactObject, _>(
                body(&text[..cut], &[], None, Arc::default()),
                DEFAULT_MAX,
            )
            .collect::<Vec<_>>(),
        );
        assert_eq!(
            rvs(&truncated),
            (0..n - 1).map(|i| i.to_string()).collect::<Vec<_>>()
        );
    }

    /// W5: with the decoding runtime's only worker blocked for the whole test, no decoding task
    /// ever runs, and the reader still delivers every event, in order, by decoding each batch
    /// itself. (Without that, the reader would wait for the first batch forever.)
    #[test]
    fn w5_the_reader_decodes_the_batches_no_worker_starts() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let (blocked_tx, blocked_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        rt.spawn(async move {
            blocked_tx.send(()).unwrap();
            let _ = release_rx.recv();
        });
        blocked_rx.recv().unwrap();
        let n = BATCH * MAX_IN_FLIGHT * 4 + 5;
        let text: String = (0..n).map(line).collect();
        let stream = decode_watch_body_on::<CompactObject, _>(
            body(&text, &[], None, Arc::default()),
            DEFAULT_MAX,
            Some(rt.handle().clone()),
        );
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let events = futures::executor::block_on(stream.collect::<Vec<_>>());
            let _ = done_tx.send(rvs(&events));
        });
        // A deadline only to turn a hang into a failure; it is never waited out when this works.
        let got = done_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the reader waited for a batch no worker could start");
        release_tx.send(()).unwrap();
        assert_eq!(got, (0..n).map(|i| i.to_string()).collect::<Vec<_>>());
    }

    const DEFAULT_MAX: usize = crate::decoder::DEFAULT_MAX_EVENT_SIZE;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// W1, W2 and W4 together: any chunking, with or without a malformed event and a broken
        /// connection, gives exactly what decoding the whole body in one thread gives.
        #[test]
        fn parallel_decoding_matches_sequential_decoding(
            n in 1usize..200,
            cuts in proptest::collection::vec(0usize..40_000, 0..60),
            bad in proptest::option::of(0usize..200),
            broken in any::<bool>(),
        ) {
            let text: String = (0..n)
                .map(|i| if Some(i) == bad { "{\"type\":\"MODIFIED\",\"object\":[]}\n".to_string() } else { line(i) })
                .collect();
            let mut cuts = cuts;
            cuts.sort_unstable();
            // Sequential reference: the plain decoder over the whole body.
            let mut reference = Vec::new();
            let mut d = WatchDecoder::<CompactObject>::new(DEFAULT_MAX);
            let r = d.decode(Bytes::from(text.clone()), &mut reference);
            let mut expected: Vec<String> = reference
                .iter()
                .map(|e| match e {
                    WatchEvent::Modified(o) => o.resource_version().unwrap_or("").to_string(),
                    other => format!("unexpected {}", other.type_name()),
                })
                .collect();
            if r.is_err() {
                expected.push("error".to_string());
            }
            let events = runtime().block_on(
                decode_watch_body::<CompactObject, _>(
                    body(&text, &cuts, broken.then_some("reset"), Arc::default()),
                    DEFAULT_MAX,
                )
                .collect::<Vec<_>>(),
            );
            let got: Vec<String> = rvs(&events)
                .into_iter()
                .map(|s| if s.starts_with("error") { "error".to_string() } else { s })
                .collect();
            prop_assert_eq!(got, expected);
        }
    }
}
