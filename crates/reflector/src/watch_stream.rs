//! [`decode_watch_body`]: a watch body's chunks in, a [`WatchStream`] of events out, decoded on
//! the reflector's decode lane (`decode_lane.rs`) while this task goes on reading.
//!
//! Decoding is most of a watch's client-side cost. With a lane (a multi-threaded runtime on more
//! than one core), every complete event read is decoded on the lane's thread, in batches of at
//! most [`BATCH`] frames, up to [`MAX_IN_FLIGHT`] batches at once, while this task goes on reading
//! the body and the informer applies what came before (the lane is also where the reflector drops
//! replaced objects: `decode_lane.rs`, M1; the whole path, `shared_informer::threading`).
//! Results are taken strictly in batch order, so events come out in exactly the order the server
//! wrote them. Without a lane (a current-thread runtime, one core) each event is decoded right
//! here, in the reading task.
//!
//! Invariants (checked by this module's tests):
//! - **W1 (order)**: events come out in body order, each once.
//! - **W2 (errors end the stream)**: a decode error comes out after every event decoded before
//!   it, and nothing after it; batches already in flight behind it are dropped undecoded.
//! - **W3 (bounded)**: at most [`MAX_IN_FLIGHT`] batches of at most [`BATCH`] frames are decoded
//!   ahead of the consumer (plus the batch being read), so memory stays bounded however fast the
//!   server writes.
//! - **W4 (close semantics)**: a transport error, or a body ending inside an event, ends the stream
//!   like a close (`None`) once everything before it has come out.
//! - **W5 (progress)**: decoding never waits for a runtime worker: it runs on the lane's own
//!   thread, or inline, so the stream makes progress even when every worker is held up (by
//!   blocking handlers, say).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use futures::{FutureExt as _, Stream, StreamExt as _};
use parking_lot::Mutex;

use crate::client::BoxError;
use crate::decode_lane::{DecodeLane, LaneResult, ReadySignal};
use crate::error::ReflectorError;
use crate::lister_watcher::WatchStream;
use crate::wire::decoder::{decode_frames, DecodeError, RawFrame, WatchDecoder, WatchEvent};
use crate::wire::object::Decode;

/// Frames per batch handed to the lane at once.
pub(crate) const BATCH: usize = 32;

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

/// Frames handed to the lane, taken back if the batch is dropped before the lane gets to them
/// (W2: not decoded for nothing).
struct Job {
    frames: Mutex<Option<Vec<RawFrame>>>,
}

impl Job {
    /// The frames, to the first caller only.
    fn claim(&self) -> Option<Vec<RawFrame>> {
        self.frames.lock().take()
    }
}

/// A batch on its way: handed to the lane, or already decoded here.
enum Batch<K> {
    OnLane {
        job: Arc<Job>,
        /// The decode error or end of body the batch carries, after its frames.
        error: Option<DecodeError>,
        last: bool,
        /// `Some` decoded frames; `None` if the frames were claimed back first.
        result: LaneResult<Option<Decoded<K>>>,
    },
    Done(Decoded<K>),
}

impl<K> Drop for Batch<K> {
    fn drop(&mut self) {
        // A batch dropped before its result is taken (the consumer dropped the stream, or an
        // earlier batch failed) is not decoded for nothing.
        if let Batch::OnLane { job, .. } = self {
            job.claim();
        }
    }
}

/// Decodes `frames` into one batch's result (its `error` and `last` are the reader's to set).
fn decode_batch<K: Decode>(frames: Vec<RawFrame>, drop_managed_fields: bool) -> Decoded<K> {
    let mut events = Vec::with_capacity(frames.len());
    let decoded = decode_frames(frames, &mut events, drop_managed_fields).err();
    Decoded {
        events,
        error: decoded,
        last: false,
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
    /// Where batches are decoded; inline when `None`.
    lane: Option<DecodeLane>,
    /// Notified by the lane when a batch is decoded, so that this task is woken through the
    /// runtime's I/O driver (M6 in `decode_lane.rs`); `None` without a lane or outside a runtime.
    signal: Option<ReadySignal>,
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
                Some(Batch::OnLane { .. }) => {
                    // Reading comes first while a chunk is there to read and there is room.
                    if room {
                        if let Some(item) = self.chunks.next().now_or_never() {
                            self.read(item);
                            continue;
                        }
                    }
                    self.wait_for_front(room).await;
                }
            }
        }
    }

    /// Waits for the oldest batch from the lane, and, when there is `room` to read ahead (W3),
    /// for the next chunk too: whichever comes first.
    async fn wait_for_front(&mut self, room: bool) {
        let Some(Batch::OnLane { result, .. }) = self.in_flight.front_mut() else {
            return;
        };
        let signal = self.signal.as_ref();
        let decoded = if room {
            tokio::select! {
                biased;
                decoded = result.wait_notified(signal) => decoded,
                item = self.chunks.next() => return self.read(item),
            }
        } else {
            result.wait_notified(signal).await
        };
        let (error, last) = match self.in_flight.front_mut() {
            Some(Batch::OnLane { error, last, .. }) => (error.take(), *last),
            _ => (None, false),
        };
        self.in_flight.pop_front();
        // `None` twice over: the lane never ran the job (it always does), or found no frames
        // (only a dropped batch's, never waited for). Either way, end like a close.
        let mut decoded = decoded.flatten().unwrap_or(Decoded {
            events: Vec::new(),
            error: None,
            last: true,
        });
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
        if let Some(DecodeError::Truncated(pending)) = decoded.error {
            // W4: a body cut inside an event ends like a close, the reflector watching again
            // from the last resource version.
            tracing::debug!(pending, "watch stream ended inside an event");
            self.finish();
        } else if let Some(e) = decoded.error {
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
                    // What was pending without a final newline is one more frame, decoded on the
                    // lane like the others (M1); cut short, it ends the stream like a close (W4).
                    self.body_done = true;
                    let error = match self.decoder.final_frame() {
                        Ok(last) => {
                            frames.extend(last);
                            None
                        }
                        Err(e) => Some(e),
                    };
                    return self.queue(frames, error, true);
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
        let Some(lane) = self.lane else {
            let mut events = Vec::with_capacity(frames.len());
            let decoded =
                decode_frames(frames, &mut events, self.decoder.drops_managed_fields()).err();
            self.in_flight.push_back(Batch::Done(Decoded {
                events,
                error: decoded.or(error),
                last,
            }));
            return;
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
            let drop_managed_fields = self.decoder.drops_managed_fields();
            let result = lane.run_notifying(
                {
                    let job = Arc::clone(&job);
                    move || {
                        job.claim()
                            .map(|frames| decode_batch(frames, drop_managed_fields))
                    }
                },
                self.signal.as_ref().map(ReadySignal::notifier),
            );
            self.in_flight.push_back(Batch::OnLane {
                job,
                error,
                last,
                result,
            });
        }
    }
}

/// Turns a watch body (its data chunks) into a [`WatchStream`]: events in order, a decode error
/// ending the stream, a transport error or a body cut inside an event ending it like a close.
/// On a multi-threaded runtime of more than one core, events are decoded on a decode lane (the
/// calling reflector's, inside its watch call, so that it drops them there too; else one taken in
/// turn), and still come out in order; elsewhere, in the reading task. A lister-watcher of your
/// own that decodes its watches with this function gets the reflector's lane with nothing to do.
pub fn decode_watch_body<K, S>(chunks: S, max_event_size: usize) -> WatchStream<K>
where
    K: Decode,
    S: Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    // No ready signal (M6): `chunks` may come from anywhere, and a runtime without its I/O driver
    // cannot register one (tokio panics rather than say so).
    decode_watch_body_on(
        chunks,
        WatchDecoder::new(max_event_size),
        DecodeLane::for_decoding(DecodeLane::next()),
        false,
    )
}

/// [`decode_watch_body`] of a body whose response said `content_type`: protobuf frames for
/// `application/vnd.kubernetes.protobuf;stream=watch`, JSON lines otherwise (see
/// [`WatchDecoder::for_content_type`]). For a lister-watcher of your own that asks for protobuf.
pub fn decode_watch_body_as<K, S>(
    chunks: S,
    content_type: Option<&str>,
    max_event_size: usize,
) -> WatchStream<K>
where
    K: Decode,
    S: Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    decode_watch_body_on(
        chunks,
        WatchDecoder::for_content_type(content_type, max_event_size),
        DecodeLane::for_decoding(DecodeLane::next()),
        false,
    )
}

/// [`decode_watch_body`], with events decoded on `lane` (inline when `None`); with `io`, the
/// current runtime's I/O driver is known to run (the body is read from a socket through it), and
/// the lane notifies a [`ReadySignal`] when a batch is decoded (M6 in `decode_lane.rs`).
pub(crate) fn decode_watch_body_on<K, S>(
    chunks: S,
    decoder: WatchDecoder<K>,
    lane: Option<DecodeLane>,
    io: bool,
) -> WatchStream<K>
where
    K: Decode,
    S: Stream<Item = Result<Bytes, BoxError>> + Send + 'static,
{
    let state = BodyState {
        chunks: Box::pin(chunks),
        decoder,
        in_flight: VecDeque::new(),
        ready: VecDeque::new(),
        body_done: false,
        finished: false,
        signal: lane.filter(|_| io).and_then(|_| ReadySignal::new()),
        lane,
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

    /// W1 with a burst big enough for several batches on the lane: every event once, in order.
    #[test]
    fn w1_a_burst_decoded_on_the_lane_comes_out_in_order() {
        let n = BATCH * MAX_IN_FLIGHT * 5 + 7;
        let text: String = (0..n).map(line).collect();
        let cuts: Vec<usize> = (1..text.len()).step_by(97).collect();
        let events = runtime().block_on(async {
            let stream = decode_watch_body::<CompactObject, _>(
                body(&text, &cuts, None, Arc::default()),
                DEFAULT_MAX,
            );
            assert!(DecodeLane::next().usable().is_some());
            stream.collect::<Vec<_>>().await
        });
        let expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        assert_eq!(rvs(&events), expected);
    }

    /// W1 with the ready signal (M6 in `decode_lane.rs`), as `HttpListerWatcher` reads: one
    /// event per chunk, several batches, a malformed event at the end; every event once, in order, then
    /// the error, each wake-up coming from the signal.
    #[test]
    fn w1_w2_with_a_ready_signal_events_come_out_in_order_then_the_error() {
        let n = BATCH * MAX_IN_FLIGHT * 3 + 5;
        let text: String = (0..n)
            .map(line)
            .chain(std::iter::once(
                "{\"type\":\"MODIFIED\",\"object\":[]}\n".to_string(),
            ))
            .collect();
        let cuts: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        let (events, signalled) = rt.block_on(async {
            let lane = DecodeLane::next().usable();
            let stream = decode_watch_body_on::<CompactObject, _>(
                body(&text, &cuts, None, Arc::default()),
                WatchDecoder::new(DEFAULT_MAX),
                lane,
                true,
            );
            let signalled = lane.is_none() || ReadySignal::new().is_some();
            (stream.collect::<Vec<_>>().await, signalled)
        });
        assert!(signalled, "a ready signal on a runtime with I/O");
        let mut expected: Vec<String> = (0..n).map(|i| i.to_string()).collect();
        expected.push("error".to_string());
        let got: Vec<String> = rvs(&events)
            .into_iter()
            .map(|s| {
                if s.starts_with("error") {
                    "error".to_string()
                } else {
                    s
                }
            })
            .collect();
        assert_eq!(got, expected);
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

    /// W5: with the runtime's only worker blocked for the whole test, the stream still delivers
    /// every event, in order: decoding runs on the lane's own thread, never on a worker.
    #[test]
    fn w5_decoding_never_waits_for_a_runtime_worker() {
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
            WatchDecoder::new(DEFAULT_MAX),
            Some(DecodeLane::next()),
            false,
        );
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let events = futures::executor::block_on(stream.collect::<Vec<_>>());
            let _ = done_tx.send(rvs(&events));
        });
        // A deadline only to turn a hang into a failure; it is never waited out when this works.
        let got = done_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("decoding waited for a runtime worker");
        release_tx.send(()).unwrap();
        assert_eq!(got, (0..n).map(|i| i.to_string()).collect::<Vec<_>>());
    }

    /// An object that records the name of the thread that decoded it.
    #[derive(serde::Deserialize)]
    struct DecodedOn {
        metadata: crate::store_index::ObjectMeta,
        #[serde(skip, default = "thread_name")]
        thread: Option<String>,
    }

    fn thread_name() -> Option<String> {
        std::thread::current().name().map(str::to_string)
    }

    impl Object for DecodedOn {
        fn object_meta(&self) -> Option<&crate::store_index::ObjectMeta> {
            Some(&self.metadata)
        }
    }

    crate::decode_with_serde!(DecodedOn);

    /// M1 (`decode_lane.rs`) at a body's end: an event the server wrote without a final newline
    /// is decoded on the lane like every other, not by the task that read the body; cut short
    /// instead, it ends the stream like a close (W4), after the events before it.
    #[test]
    fn m1_w4_the_last_event_without_a_newline_is_decoded_on_the_lane() {
        let n = 5;
        let text: String = (0..n).map(line).collect();
        let unterminated = text.trim_end_matches('\n').to_string();
        let rt = runtime();
        let (events, lane) = rt.block_on(async {
            let lane = DecodeLane::next().usable().is_some();
            let stream = decode_watch_body::<DecodedOn, _>(
                body(&unterminated, &[], None, Arc::default()),
                DEFAULT_MAX,
            );
            (stream.collect::<Vec<_>>().await, lane)
        });
        let decoded: Vec<(String, Option<String>)> = events
            .into_iter()
            .map(|e| match e {
                Ok(WatchEvent::Modified(o)) => (o.metadata.resource_version.unwrap(), o.thread),
                other => panic!("unexpected {:?}", other.map(|e| e.type_name())),
            })
            .collect();
        let rvs: Vec<&str> = decoded.iter().map(|(rv, _)| rv.as_str()).collect();
        assert_eq!(rvs, ["0", "1", "2", "3", "4"]);
        if lane {
            for (rv, thread) in &decoded {
                let thread = thread.as_deref().unwrap_or_default();
                assert!(
                    thread.starts_with("reflector-decode-"),
                    "event {rv} decoded on {thread:?}"
                );
            }
        }
        let cut = rt.block_on(
            decode_watch_body::<DecodedOn, _>(
                body(
                    &unterminated[..unterminated.len() - 3],
                    &[],
                    None,
                    Arc::default(),
                ),
                DEFAULT_MAX,
            )
            .collect::<Vec<_>>(),
        );
        assert_eq!(
            cut.len(),
            n - 1,
            "the cut event ends the stream like a close"
        );
        assert!(cut.iter().all(Result::is_ok));
    }

    const DEFAULT_MAX: usize = crate::wire::decoder::DEFAULT_MAX_EVENT_SIZE;

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
