//! [`DecodeLane`]: the thread a lister-watcher's objects are decoded on, and the objects its
//! reflector is done with are dropped on.
//!
//! Why each object should be allocated and freed by one thread (glibc's per-thread arenas), and
//! where the lane sits among an informer's threads and wake-ups: `shared_informer::threading`;
//! the measurements behind lanes: docs/benchmarks-archive.md, section *Decode lanes*.
//!
//! A lane is one long-lived thread. Each reflector takes one (lanes are shared by the process, one
//! per core at most, started on first use, taken in turn), and while it calls its
//! lister-watcher's `list` and `watch` it makes that lane the task's *reading scope*: the decoders
//! of this crate ([`HttpListerWatcher`](crate::HttpListerWatcher)'s, and
//! [`decode_watch_body`](crate::decode_watch_body) for lister-watchers of a user's making) decode
//! every list page and watch event on the scope's lane and record that they did. The reflector
//! then drops on that lane the objects handed back through [`Reclaim`](crate::Reclaim): an object
//! is allocated and freed by the same thread, in the same arena, whatever the runtime's workers do
//! in between. Nothing passes the lane through the lister-watcher, so a lister-watcher that wraps
//! another (to count, filter, log or transform) keeps the fast path without forwarding anything.
//!
//! Invariants (checked by this module's tests and by `shared-informer`'s `tests/reclaim.rs`):
//! - **M1 (one thread per object)**: with a lane, the objects of every list page and watch event
//!   a lister-watcher decodes are decoded on the lane's thread, and those its reflector is handed
//!   back are dropped on that thread.
//! - **M2 (bounded)**: at most one lane thread per core, for the whole process; each reader has at
//!   most its watch stream's `MAX_IN_FLIGHT` batches or one list page waiting on its lane, which
//!   it awaits; at most [`MAX_PENDING_DROPS`] objects wait on a lane to be dropped, and beyond
//!   that the caller drops them itself.
//! - **M3 (as if inline)**: a job's result comes back to the task awaiting it exactly as the job
//!   returned it; a panic in a job (a `Decode` implementation's) is raised again in that task, a
//!   panic in an object's `Drop` is logged, and the lane goes on with the next job.
//! - **M4 (fallback)**: where no lane is used (not on a multi-threaded tokio runtime, a single
//!   core, or a thread that could not be started), everything is done inline, as before lanes.
//! - **M5 (nothing to forward)**: inside a reflector's list or watch call, this crate's decoders
//!   use the reflector's lane whatever lister-watcher wraps them; the reflector drops on that lane
//!   only if a decoder used it (else, as before, on the task reading the watch).
//! - **M6 (one wake-up back)**: a watch reader on a runtime worker is told a batch is decoded
//!   through the runtime's I/O driver (a [`ReadySignal`]: a datagram socket pair the lane writes
//!   to after the job), not by waking its task from the lane's thread. tokio schedules a task woken from a
//!   foreign thread on its global queue and unparks a worker as a *searching* one, which, finding
//!   the task, unparks a second worker that finds nothing: two worker wake-ups per decoded batch,
//!   the first of which a paced watch pays per event. A wake-up through the I/O driver unparks the
//!   worker parked on it alone, with the task in its own slot. The result itself still travels in
//!   the job's channel (M3); the signal only says when to look, and a reader off any runtime, or
//!   where no signal could be made, waits on the channel as before (M4, W5).
//! - **M7 (drops ride along)**: objects handed back while a watch is read
//!   ([`DecodeLane::drop_later`]) wait on the lane for its next job and are dropped, on the lane,
//!   before it; the lane is woken for them alone only once [`DROPS_WAKE`] wait, so at everyday
//!   rates a replaced object adds no wake-up of its own. What ends a watch is dropped at once
//!   ([`DecodeLane::drop_all`]), and everything waiting with it.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, SendError, Sender};
use std::sync::Arc;
use std::sync::OnceLock;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

tokio::task_local! {
    /// The reflector the current task lists and watches for (M5).
    static READING: Arc<ReadingScope>;
}

/// A reflector's lane, made the task's while it calls its lister-watcher, and whether a decoder
/// used it (M5). One per reflector.
#[derive(Debug)]
pub(crate) struct ReadingScope {
    lane: DecodeLane,
    used: AtomicBool,
}

impl ReadingScope {
    /// A scope on the next lane in turn.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(ReadingScope {
            lane: DecodeLane::next(),
            used: AtomicBool::new(false),
        })
    }

    /// Runs `call` (a list or watch call of the lister-watcher) with this scope as the task's.
    pub(crate) async fn enter<F: Future>(self: &Arc<Self>, call: F) -> F::Output {
        READING.scope(Arc::clone(self), call).await
    }

    /// The lane this reflector's objects were decoded on, if a decoder used it and it is usable
    /// from here (M5, M4).
    pub(crate) fn lane_used(&self) -> Option<DecodeLane> {
        if self.used.load(Ordering::Acquire) {
            self.lane.usable()
        } else {
            None
        }
    }
}

/// Most objects waiting on one lane to be dropped (M2). A reflector hands over at most
/// [`Reclaim::CAPACITY`](crate::Reclaim::CAPACITY) at a time and waits for its own decoding on
/// the same lane, so this is reached only when many reflectors share a lane that fell behind.
pub(crate) const MAX_PENDING_DROPS: usize = 8192;

/// Objects waiting on an idle lane for its next job before it is woken for them alone (M7): a
/// few hundred KB of pods, bounded whatever the rate.
pub(crate) const DROPS_WAKE: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// Objects to drop on the lane, of any type, with their count.
type Drops = (Box<dyn Send>, usize);

struct Lane {
    index: usize,
    /// The lane's thread's queue; `None` if the thread could not be started (M4).
    sender: OnceLock<Option<Sender<Job>>>,
    /// Objects handed to [`DecodeLane::drop_all`] or [`DecodeLane::drop_later`] and not
    /// dropped yet (M2).
    pending_drops: AtomicUsize,
    /// Drops waiting for the lane's next job (M7), and how many objects they hold.
    later: parking_lot::Mutex<(Vec<Drops>, usize)>,
}

impl Lane {
    fn new(index: usize) -> Lane {
        Lane {
            index,
            sender: OnceLock::new(),
            pending_drops: AtomicUsize::new(0),
            later: parking_lot::Mutex::new((Vec::new(), 0)),
        }
    }

    /// Drops what waits for the next job (M7); on the lane's thread.
    fn drop_waiting(&self) {
        let waiting = std::mem::take(&mut *self.later.lock());
        for (objects, n) in waiting.0 {
            self.drop_counted(objects, n);
        }
    }

    /// Drops `objects`, `n` of them, counted in `pending_drops` (M2, M3).
    fn drop_counted(&self, objects: Box<dyn Send>, n: usize) {
        // A `Drop` that panics loses nothing more than it would have inline, and neither the
        // count nor the lane (M3).
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(objects)));
        self.pending_drops.fetch_sub(n, Ordering::Relaxed);
        if dropped.is_err() {
            tracing::warn!("an object's drop panicked on a decode lane");
        }
    }

    fn sender(&'static self) -> Option<&'static Sender<Job>> {
        self.sender
            .get_or_init(|| {
                let (tx, rx) = mpsc::channel::<Job>();
                std::thread::Builder::new()
                    .name(format!("reflector-decode-{}", self.index))
                    .spawn(move || {
                        // Jobs catch their own panics (M3), so this loop ends only with the
                        // process: the lanes and their senders are statics.
                        while let Ok(job) = rx.recv() {
                            // M7: what waited for this job is freed before it allocates.
                            self.drop_waiting();
                            job();
                        }
                    })
                    .map_err(|e| {
                        tracing::warn!(error = %e, "could not start a decode lane; decoding inline")
                    })
                    .ok()
                    .map(|_| tx)
            })
            .as_ref()
    }
}

/// The process's lanes: one per core (M2).
fn lanes() -> &'static [Lane] {
    static LANES: OnceLock<Box<[Lane]>> = OnceLock::new();
    LANES.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        (0..cores).map(Lane::new).collect()
    })
}

/// The thread a reflector's objects are decoded on, and dropped on once it is done with them, so
/// that each object is allocated and freed by one thread (see the module's docs). Used on
/// multi-threaded tokio runtimes of a machine with more than one core.
#[derive(Clone, Copy)]
pub(crate) struct DecodeLane {
    lane: &'static Lane,
}

impl std::fmt::Debug for DecodeLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DecodeLane").field(&self.lane.index).finish()
    }
}

impl DecodeLane {
    /// The next lane in turn (no thread is started until one is used).
    pub(crate) fn next() -> DecodeLane {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let lanes = lanes();
        DecodeLane {
            lane: &lanes[NEXT.fetch_add(1, Ordering::Relaxed) % lanes.len()],
        }
    }

    /// The lane to decode on here: the task's reading scope's, recorded as used (M5), else `own`
    /// (a lister-watcher called outside any reflector); `None` where no lane is usable (M4).
    pub(crate) fn for_decoding(own: DecodeLane) -> Option<DecodeLane> {
        let lane = READING
            .try_with(|scope| scope.lane)
            .unwrap_or(own)
            .usable()?;
        let _ = READING.try_with(|scope| {
            if scope.lane.lane.index == lane.lane.index {
                scope.used.store(true, Ordering::Release);
            }
        });
        Some(lane)
    }

    /// This lane, if it should be used from the current context: on a multi-threaded tokio
    /// runtime, with more than one core, and with its thread running (M4). Elsewhere decoding on
    /// another thread would only add a hand-off.
    pub(crate) fn usable(self) -> Option<DecodeLane> {
        let handle = tokio::runtime::Handle::try_current().ok()?;
        let multi = handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread;
        // One lane per core, counted once.
        let cores = lanes().len() > 1;
        (multi && cores && self.lane.sender().is_some()).then_some(self)
    }

    /// Runs `f` on the lane; its result (or its panic, M3) comes out of the returned future.
    /// Dropping the future does not stop `f`: callers that may give up make `f` check first.
    pub(crate) fn run<T, F>(self, f: F) -> LaneResult<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        self.run_notifying(f, None)
    }

    /// [`run`](Self::run), sending through `notifier` once the result is in (M6): a reader
    /// waiting with [`LaneResult::wait_notified`] is then woken through the runtime's I/O
    /// driver.
    pub(crate) fn run_notifying<T, F>(self, f: F, notifier: Option<ReadyNotifier>) -> LaneResult<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = tx.send(outcome);
            // After the send: a reader that sees the notice finds the result (M6).
            if let Some(notifier) = notifier {
                notifier.notify();
            }
        });
        self.submit(job);
        LaneResult { rx }
    }

    /// Drops `objects` on the lane (M1) now, with everything waiting there (M7), or here if the
    /// lane already holds [`MAX_PENDING_DROPS`] waiting to be dropped (M2).
    pub(crate) fn drop_all<T: Send + 'static>(self, objects: Vec<T>) {
        let n = objects.len();
        if n == 0 {
            return;
        }
        let pending = &self.lane.pending_drops;
        if pending.fetch_add(n, Ordering::Relaxed) + n > MAX_PENDING_DROPS {
            pending.fetch_sub(n, Ordering::Relaxed);
            drop(objects);
            return;
        }
        let lane = self.lane;
        // An empty job: the lane drops what waits before each job, these objects among it.
        lane.later.lock().0.push((Box::new(objects), n));
        self.submit(Box::new(|| {}));
    }

    /// Drops `objects` on the lane before its next job (M7), waking it for them only once
    /// [`DROPS_WAKE`] objects wait; beyond [`MAX_PENDING_DROPS`] here (M2).
    pub(crate) fn drop_later<T: Send + 'static>(self, objects: Vec<T>) {
        let n = objects.len();
        if n == 0 {
            return;
        }
        let pending = &self.lane.pending_drops;
        if pending.fetch_add(n, Ordering::Relaxed) + n > MAX_PENDING_DROPS {
            pending.fetch_sub(n, Ordering::Relaxed);
            drop(objects);
            return;
        }
        let wake = {
            let mut later = self.lane.later.lock();
            later.0.push((Box::new(objects), n));
            later.1 += n;
            if later.1 >= DROPS_WAKE {
                later.1 = 0;
                true
            } else {
                false
            }
        };
        if wake {
            self.submit(Box::new(|| {}));
        }
    }

    fn submit(self, job: Job) {
        let lane = self.lane;
        match lane.sender() {
            Some(sender) => {
                if let Err(SendError(job)) = sender.send(job) {
                    lane.drop_waiting();
                    job();
                }
            }
            // Not reached through `usable`; done inline all the same (M4).
            None => {
                lane.drop_waiting();
                job();
            }
        }
    }
}

/// What a job run on a lane returned: a future resolving to it, raising its panic again (M3).
/// `None` only if the job was dropped without running, which a lane never does.
pub(crate) struct LaneResult<T> {
    rx: oneshot::Receiver<Result<T, Box<dyn Any + Send>>>,
}

impl<T> LaneResult<T> {
    /// The result if the job is done: `Some(Some(value))`, or `Some(None)` if it was dropped
    /// without running; `None` while it runs. Registers no waker (M6). Raises the job's panic
    /// again (M3).
    fn try_take(&mut self) -> Option<Option<T>> {
        match self.rx.try_recv() {
            Ok(Ok(value)) => Some(Some(value)),
            Ok(Err(panic)) => std::panic::resume_unwind(panic),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(None),
        }
    }

    /// The result, as awaiting `self` gives it, woken by `signal` (whose notifier the job was
    /// given, [`DecodeLane::run_notifying`]) rather than by the lane's thread when there is one
    /// and this task runs on a runtime (M6); else as awaiting `self`.
    pub(crate) async fn wait_notified(&mut self, signal: Option<&ReadySignal>) -> Option<T> {
        let signal = match signal {
            Some(signal) if tokio::runtime::Handle::try_current().is_ok() => signal,
            _ => return self.await,
        };
        loop {
            if let Some(result) = self.try_take() {
                return result;
            }
            // A notice for a result already taken only costs one more look.
            if !signal.wait().await {
                return self.await;
            }
        }
    }
}

/// The end of a [`ReadySignal`] a lane job notifies through (M6).
#[derive(Clone)]
pub(crate) struct ReadyNotifier {
    #[cfg(unix)]
    tx: Arc<std::os::unix::net::UnixDatagram>,
}

impl ReadyNotifier {
    fn notify(&self) {
        // Non-blocking, and `send` never raises SIGPIPE: a full queue means a notice is already
        // waiting, a closed one that nobody waits any more; both are fine.
        #[cfg(unix)]
        let _ = self.tx.send(&[1]);
    }
}

/// How a lane tells a watch reader on a runtime worker that a batch is decoded: a datagram socket
/// pair, whose reading end is registered with the runtime's I/O driver (M6). One per watch
/// stream.
pub(crate) struct ReadySignal {
    #[cfg(unix)]
    rx: tokio::net::UnixDatagram,
    notifier: ReadyNotifier,
}

impl std::fmt::Debug for ReadySignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadySignal")
    }
}

impl ReadySignal {
    /// A signal registered with the current runtime's I/O driver; `None` outside a runtime, off
    /// Unix, or when the sockets cannot be made (then readers wait on the job's channel, M6).
    pub(crate) fn new() -> Option<ReadySignal> {
        #[cfg(unix)]
        {
            tokio::runtime::Handle::try_current().ok()?;
            let (rx, tx) = std::os::unix::net::UnixDatagram::pair().ok()?;
            rx.set_nonblocking(true).ok()?;
            tx.set_nonblocking(true).ok()?;
            let rx = tokio::net::UnixDatagram::from_std(rx).ok()?;
            Some(ReadySignal {
                rx,
                notifier: ReadyNotifier { tx: Arc::new(tx) },
            })
        }
        #[cfg(not(unix))]
        {
            None
        }
    }

    /// The end a job notifies through.
    pub(crate) fn notifier(&self) -> ReadyNotifier {
        self.notifier.clone()
    }

    /// Waits for a notice (one already sent counts) and takes every notice waiting; false if the
    /// signal failed (not expected of a socket pair), and the caller should wait another way.
    async fn wait(&self) -> bool {
        #[cfg(unix)]
        {
            if self.rx.readable().await.is_err() {
                return false;
            }
            let mut buf = [0u8; 16];
            // Until `WouldBlock`, which clears the readiness the next wait waits for.
            while let Ok(n) = self.rx.try_recv(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            true
        }
        #[cfg(not(unix))]
        {
            false
        }
    }
}

impl<T> Future for LaneResult<T> {
    type Output = Option<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|outcome| match outcome {
                Ok(Ok(value)) => Some(value),
                Ok(Err(panic)) => std::panic::resume_unwind(panic),
                Err(_) => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::thread::ThreadId;

    use super::*;

    fn multi_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap()
    }

    /// Records the thread it was made on and the thread it was dropped on.
    struct Traced {
        made: ThreadId,
        dropped: Arc<parking_lot::Mutex<Vec<(ThreadId, ThreadId)>>>,
    }

    impl Drop for Traced {
        fn drop(&mut self) {
            self.dropped
                .lock()
                .push((self.made, std::thread::current().id()));
        }
    }

    /// A lane of its own (its thread is started on first use), so that no other test's drops
    /// count against its bound.
    fn private_lane() -> DecodeLane {
        DecodeLane {
            lane: Box::leak(Box::new(Lane::new(usize::MAX))),
        }
    }

    /// Lanes are used only with more than one core (one lane per core).
    fn two_cores() -> bool {
        lanes().len() > 1
    }

    /// M5: inside a reflector's reading scope a decoder is given the scope's lane, whatever lane
    /// it brings, and the scope records that it was used; outside any scope a decoder keeps its
    /// own lane.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn m5_a_decoder_inside_a_reading_scope_uses_the_scopes_lane_and_says_so() {
        if !two_cores() {
            return; // M4: no lane at all
        }
        let own = private_lane();
        let scope = ReadingScope::new();
        assert!(scope.lane_used().is_none(), "nothing decoded yet");
        let inside = scope
            .enter(async { DecodeLane::for_decoding(own) })
            .await
            .expect("a lane on two cores");
        assert_eq!(inside.lane.index, scope.lane.lane.index);
        assert_eq!(
            scope.lane_used().map(|l| l.lane.index),
            Some(scope.lane.lane.index)
        );
        let outside = DecodeLane::for_decoding(own).expect("a lane on two cores");
        assert_eq!(
            outside.lane.index,
            usize::MAX,
            "its own lane outside a scope"
        );
    }

    /// M1: objects made by a job on a lane and dropped through `drop_all` are made and dropped
    /// on the same thread, which is neither the caller's nor a runtime worker's.
    #[test]
    fn m1_objects_are_made_and_dropped_on_the_lane() {
        if !two_cores() {
            return;
        }
        let dropped = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let rt = multi_thread();
        let caller = rt.block_on(async {
            let lane = DecodeLane::next().usable().expect("a lane on two cores");
            let made = lane
                .run({
                    let dropped = Arc::clone(&dropped);
                    move || {
                        (0..100)
                            .map(|_| Traced {
                                made: std::thread::current().id(),
                                dropped: Arc::clone(&dropped),
                            })
                            .collect::<Vec<_>>()
                    }
                })
                .await
                .unwrap();
            lane.drop_all(made);
            // A job queued after the drops runs after them: the lane is first in, first out.
            lane.run(|| ()).await.unwrap();
            std::thread::current().id()
        });
        let dropped = dropped.lock();
        assert_eq!(dropped.len(), 100);
        for &(made, freed) in dropped.iter() {
            assert_eq!(made, freed);
            assert_ne!(made, caller);
        }
    }

    /// M2: past `MAX_PENDING_DROPS` waiting on a lane, the caller drops the objects itself.
    #[test]
    fn m2_a_lane_that_fell_behind_leaves_the_drops_to_the_caller() {
        if !two_cores() {
            return;
        }
        let rt = multi_thread();
        rt.block_on(async {
            let lane = private_lane();
            let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
            // Keep the lane busy until released, so nothing it is given is dropped meanwhile;
            // wait until it is inside that job, or what waits for its next job (M7) would be
            // dropped before it starts.
            let busy = lane.run(move || {
                let _ = started_tx.send(());
                let _ = hold_rx.recv();
            });
            started_rx.recv().unwrap();
            let dropped = Arc::new(parking_lot::Mutex::new(Vec::new()));
            let batch = |n: usize| {
                (0..n)
                    .map(|_| Traced {
                        made: std::thread::current().id(),
                        dropped: Arc::clone(&dropped),
                    })
                    .collect::<Vec<_>>()
            };
            lane.drop_all(batch(MAX_PENDING_DROPS));
            assert!(
                dropped.lock().is_empty(),
                "within the bound, the lane drops them"
            );
            lane.drop_all(batch(1));
            assert_eq!(
                dropped.lock().len(),
                1,
                "past the bound, dropped here at once"
            );
            hold_tx.send(()).unwrap();
            busy.await.unwrap();
            lane.run(|| ()).await.unwrap();
            assert_eq!(dropped.lock().len(), MAX_PENDING_DROPS + 1);
            assert_eq!(lane.lane.pending_drops.load(Ordering::Relaxed), 0);
        });
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

        /// M1 and M2 together: whatever the batches handed to a lane that is busy meanwhile,
        /// what fits under the bound waits for the lane and is dropped there, the rest is
        /// dropped by the caller at once; nothing is dropped twice or lost, and the count of
        /// pending drops never passes the bound and comes back to zero.
        #[test]
        fn m1_m2_drops_are_bounded_and_each_happens_once(
            sizes in proptest::collection::vec(0usize..5000, 0..8),
        ) {
            let lane = private_lane();
            let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
            let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
            let busy = lane.run(move || {
                let _ = started_tx.send(());
                let _ = hold_rx.recv();
            });
            // The lane is inside the holding job before anything is handed to it: what waits for
            // its next job (M7) is dropped only once it is released, never while we count.
            started_rx.recv().unwrap();
            let dropped = Arc::new(parking_lot::Mutex::new(Vec::new()));
            let caller = std::thread::current().id();
            let on_caller = |d: &[(std::thread::ThreadId, std::thread::ThreadId)]| {
                d.iter().filter(|(_, freed)| *freed == caller).count()
            };
            let mut kept = 0;
            for &n in &sizes {
                let made: Vec<Traced> = (0..n)
                    .map(|_| Traced { made: caller, dropped: Arc::clone(&dropped) })
                    .collect();
                let inline_before = on_caller(&dropped.lock());
                lane.drop_all(made);
                let inline = on_caller(&dropped.lock()) - inline_before;
                if kept + n <= MAX_PENDING_DROPS {
                    proptest::prop_assert_eq!(inline, 0);
                    kept += n;
                } else {
                    proptest::prop_assert_eq!(inline, n);
                }
                proptest::prop_assert!(lane.lane.pending_drops.load(Ordering::Relaxed) <= MAX_PENDING_DROPS);
            }
            hold_tx.send(()).unwrap();
            futures::executor::block_on(busy).unwrap();
            futures::executor::block_on(lane.run(|| ())).unwrap();
            let dropped = dropped.lock();
            proptest::prop_assert_eq!(dropped.len(), sizes.iter().sum::<usize>());
            let on_lane = dropped.iter().filter(|(_, freed)| *freed != caller).count();
            proptest::prop_assert_eq!(on_lane, kept);
            proptest::prop_assert_eq!(lane.lane.pending_drops.load(Ordering::Relaxed), 0);
        }
    }

    /// M3: a panic in a job is raised again in the awaiting task, and the lane keeps working.
    #[test]
    fn m3_a_panicking_job_panics_its_caller_and_the_lane_goes_on() {
        if !two_cores() {
            return;
        }
        let rt = multi_thread();
        let lane = rt.block_on(async { DecodeLane::next().usable().unwrap() });
        let joined = rt.block_on(async {
            tokio::spawn(async move {
                lane.run(|| -> u32 { panic!("bad object") }).await;
            })
            .await
        });
        let panic = joined.unwrap_err().into_panic();
        assert_eq!(panic.downcast_ref::<&str>(), Some(&"bad object"));
        assert_eq!(rt.block_on(lane.run(|| 7)), Some(7));
    }

    /// M3 for drops: an object whose `Drop` panics on the lane leaves the lane working and its
    /// count of pending drops exact.
    #[test]
    fn m3_a_panicking_drop_leaves_the_lane_working() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("bad drop");
            }
        }
        let lane = private_lane();
        lane.drop_all(vec![Bomb]);
        assert_eq!(futures::executor::block_on(lane.run(|| 7)), Some(7));
        assert_eq!(lane.lane.pending_drops.load(Ordering::Relaxed), 0);
    }

    /// A waker that counts its wakes.
    struct CountingWaker(AtomicUsize);

    impl std::task::Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// M6: a reader waiting with a ready signal is not woken by the lane's job completing (that
    /// would be a wake-up from a foreign thread), only by the signal the job sends, through the
    /// runtime's I/O driver; and the result it then takes is the job's.
    #[test]
    fn m6_a_reader_with_a_ready_signal_is_woken_by_the_signal_not_by_the_lane() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_io()
            .build()
            .unwrap();
        let _entered = rt.enter();
        let signal = ReadySignal::new().expect("a ready signal on a runtime with I/O");
        let lane = private_lane();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        // A job that does not notify: if anything wakes the reader, it is not the signal.
        let mut silent = lane.run(move || {
            let _ = release_rx.recv();
            7
        });
        let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        {
            let mut wait = std::pin::pin!(silent.wait_notified(Some(&signal)));
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            release_tx.send(()).unwrap();
            // The job is done once the lane runs the next one.
            futures::executor::block_on(lane.run(|| ())).unwrap();
            assert_eq!(
                counter.0.load(Ordering::SeqCst),
                0,
                "the lane's completion woke the reader"
            );
            // The wake comes from a worker polling the I/O driver.
            signal.notifier().notify();
            let woken = std::time::Instant::now();
            while counter.0.load(Ordering::SeqCst) == 0 {
                assert!(
                    woken.elapsed() < std::time::Duration::from_secs(60),
                    "the signal never woke the reader"
                );
                std::thread::yield_now();
            }
            assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(Some(7)));
        }
        // A notifying job wakes its reader by itself, result first; notices for results already
        // taken cost one more look, never a lost wake-up.
        rt.block_on(async {
            for i in 0..50u32 {
                let mut r = lane.run_notifying(move || i, Some(signal.notifier()));
                assert_eq!(r.wait_notified(Some(&signal)).await, Some(i));
            }
        });
        // Notifying a signal nobody listens to any more is harmless.
        let notifier = signal.notifier();
        drop(signal);
        notifier.notify();
    }

    /// M7: objects handed over with `drop_later` wait on the lane, wake it only once
    /// `DROPS_WAKE` wait, and are dropped on the lane before its next job.
    #[test]
    fn m7_later_drops_wait_for_the_next_job_and_are_dropped_on_the_lane_before_it() {
        let lane = private_lane();
        // Start the lane's thread and learn its id.
        let lane_thread =
            futures::executor::block_on(lane.run(|| std::thread::current().id())).unwrap();
        let dropped = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let caller = std::thread::current().id();
        let one = |dropped: &Arc<parking_lot::Mutex<Vec<(ThreadId, ThreadId)>>>| Traced {
            made: caller,
            dropped: Arc::clone(dropped),
        };
        for _ in 0..DROPS_WAKE - 1 {
            lane.drop_later(vec![one(&dropped)]);
        }
        // Below the wake mark nothing is sent to the lane: the objects wait for its next job.
        assert_eq!(lane.lane.later.lock().1, DROPS_WAKE - 1);
        assert_eq!(
            lane.lane.pending_drops.load(Ordering::Relaxed),
            DROPS_WAKE - 1
        );
        let seen_by_job = futures::executor::block_on(lane.run({
            let dropped = Arc::clone(&dropped);
            move || dropped.lock().len()
        }))
        .unwrap();
        assert_eq!(seen_by_job, DROPS_WAKE - 1, "dropped before the next job");
        assert!(dropped
            .lock()
            .iter()
            .all(|&(_, freed)| freed == lane_thread));
        assert_eq!(lane.lane.pending_drops.load(Ordering::Relaxed), 0);
        // At the wake mark the lane is woken for them: no further job is needed.
        dropped.lock().clear();
        lane.drop_later((0..DROPS_WAKE).map(|_| one(&dropped)).collect());
        let woken = std::time::Instant::now();
        while dropped.lock().len() < DROPS_WAKE {
            assert!(
                woken.elapsed() < std::time::Duration::from_secs(60),
                "the lane was not woken for {DROPS_WAKE} waiting drops"
            );
            std::thread::yield_now();
        }
        assert!(dropped
            .lock()
            .iter()
            .all(|&(_, freed)| freed == lane_thread));
        // `drop_all` drops at once, what waits with it.
        dropped.lock().clear();
        lane.drop_later(vec![one(&dropped)]);
        lane.drop_all(vec![one(&dropped)]);
        let woken = std::time::Instant::now();
        while dropped.lock().len() < 2 {
            assert!(
                woken.elapsed() < std::time::Duration::from_secs(60),
                "drop_all did not wake the lane"
            );
            std::thread::yield_now();
        }
        assert_eq!(lane.lane.pending_drops.load(Ordering::Relaxed), 0);
    }

    /// M4: no lane on a current-thread runtime, nor outside a runtime.
    #[test]
    fn m4_no_lane_outside_a_multi_threaded_runtime() {
        assert!(DecodeLane::next().usable().is_none());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        assert!(rt.block_on(async { DecodeLane::next().usable() }).is_none());
    }
}
