//! [`InformerThread`]: an OS thread of its own, running a single-threaded tokio runtime, for
//! informers to run on
//! ([`SharedInformerFactory::start_on`](crate::SharedInformerFactory::start_on)), with or
//! without a batching window ([`InformerThread::spawn_batching`]). What running there changes
//! (no decode lane, one wake-up per event, the handlers on that thread), what a window trades,
//! and when to choose either: [`crate::threading`].
//!
//! Invariants (checked by this module's tests and by `tests/e2e_sim.rs`):
//! - **IT1 (one thread)**: everything spawned on [`InformerThread::handle`] runs on the thread's
//!   own OS thread, named as asked.
//! - **IT2 (stops when dropped)**: dropping the `InformerThread` stops its runtime; tasks still
//!   on it are dropped there, and the thread ends. Nothing waits for them: cancel the informers
//!   and await [`SharedInformerFactory::shutdown`](crate::SharedInformerFactory::shutdown) first
//!   for a clean stop.
//! - **IT3 (one wake-up per window while events keep coming)**: on a thread started with a
//!   batching window ([`InformerThread::spawn_batching`]), once woken, the thread runs whatever
//!   is ready; when nothing is left, and the wake-up before this one came less than
//!   [`BUSY_WINDOWS`] windows earlier, it waits out the rest of the window before it waits for
//!   I/O or timers again, so that everything arriving meanwhile (the next watch events, a timer
//!   that fired) is handled on one wake-up; after a quieter spell it waits for them at once. So
//!   while wake-ups keep coming, two are never closer than the window, a wake-up after a quiet
//!   spell costs no wait, and nothing waits longer than the window.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// An OS thread running a single-threaded tokio runtime (I/O and timers enabled) until dropped.
/// When to run informers on one, and what a batching window trades: [`crate::threading`].
///
/// ```
/// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
/// # async fn main() -> std::io::Result<()> {
/// use shared_informer::InformerThread;
///
/// let thread = InformerThread::spawn("informers")?;
/// let name = thread
///     .handle()
///     .spawn(async { std::thread::current().name().map(str::to_string) })
///     .await
///     .expect("the task ran");
/// assert_eq!(name.as_deref(), Some("informers"));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct InformerThread {
    handle: Handle,
    /// Dropped (or sent) to stop the runtime (IT2).
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl InformerThread {
    /// Starts the thread, named `name`, and its runtime. Fails if the runtime or the thread
    /// cannot be made (the process is out of threads or file descriptors).
    pub fn spawn(name: &str) -> io::Result<InformerThread> {
        Self::start(name, None)
    }

    /// Starts the thread as [`spawn`](Self::spawn) does, with a batching window (IT3): while
    /// wake-ups keep coming (the one before came less than two windows earlier), once woken the
    /// thread does not wait for I/O or timers again until `window` has passed, so that what
    /// arrives meanwhile is handled on the same wake-up, at most `window` later than on a thread
    /// started by [`spawn`](Self::spawn); after a quieter spell it waits at once, and what comes
    /// alone is not delayed. A zero window is none. What a window trades and how to choose one:
    /// [`crate::threading`] (*The batching window*).
    ///
    /// Fails with [`io::ErrorKind::InvalidInput`] for a window above [`MAX_BATCH_WINDOW`]
    /// (longer would hold up an informer's own timers and cancellation), and as
    /// [`spawn`](Self::spawn) does otherwise.
    ///
    /// ```
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    /// # async fn main() -> std::io::Result<()> {
    /// use std::time::Duration;
    /// use shared_informer::InformerThread;
    ///
    /// // At most 5 ms more latency per event, in exchange for far fewer wake-ups when events
    /// // trickle in (pass `thread.handle()` to `SharedInformerFactory::start_on`).
    /// let thread = InformerThread::spawn_batching("informers", Duration::from_millis(5))?;
    /// let ran = thread.handle().spawn(async { 1 + 1 }).await.expect("the task ran");
    /// assert_eq!(ran, 2);
    ///
    /// let too_long = InformerThread::spawn_batching("informers", Duration::from_secs(60));
    /// assert_eq!(too_long.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
    /// # Ok(()) }
    /// ```
    pub fn spawn_batching(name: &str, window: Duration) -> io::Result<InformerThread> {
        if window > MAX_BATCH_WINDOW {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a batching window of {window:?} is longer than the longest allowed, {MAX_BATCH_WINDOW:?}"
                ),
            ));
        }
        Self::start(
            name,
            (!window.is_zero()).then(|| Arc::new(BatchWindow::new(window))),
        )
    }

    /// Starts the thread and its runtime, with the batching window's hooks when there is one.
    fn start(name: &str, batch: Option<Arc<BatchWindow>>) -> io::Result<InformerThread> {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.enable_all();
        if let Some(batch) = batch {
            let woken = Arc::clone(&batch);
            builder
                .on_thread_unpark(move || woken.woke())
                .on_thread_park(move || batch.wait_out());
        }
        let runtime = builder.build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                // Runs every task spawned on the handle until the sender is sent or dropped;
                // dropping the runtime then drops the tasks still on it, on this thread (IT2).
                let _ = runtime.block_on(stopped);
                drop(runtime);
            })?;
        Ok(InformerThread {
            handle,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The runtime's handle: what [`SharedInformerFactory::start_on`] takes, what an informer
    /// built by hand runs on (`thread.handle().spawn(async move { informer.run(cancel).await })`),
    /// and what tasks of your own may be spawned on.
    ///
    /// [`SharedInformerFactory::start_on`]: crate::SharedInformerFactory::start_on
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Stops the runtime (IT2) and waits for the thread to end. Blocks the calling thread: call
    /// it outside async code, or let the `InformerThread` drop instead, which does not wait.
    pub fn join(mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// The longest batching window [`InformerThread::spawn_batching`] accepts: one second.
pub const MAX_BATCH_WINDOW: Duration = Duration::from_secs(1);

/// How many windows apart two wake-ups may come for the thread to count events as still coming
/// and wait out the window after the second (IT3). Two: at a steady rate the thread that waits out
/// its window is woken again about one window later, and events further apart than two windows
/// would not be gathered by a window anyway.
pub(crate) const BUSY_WINDOWS: u32 = 2;

/// The thread's last wake-up and the one before it (IT3).
type Wakes = (Option<Instant>, Option<Instant>);

/// A batching window's state, shared by the runtime's park and unpark hooks, both called on the
/// thread itself (IT3).
#[derive(Debug)]
struct BatchWindow {
    window: Duration,
    /// When the thread last came back from waiting, and the time before; `None` before its
    /// first and second waits.
    woken_at: Mutex<Wakes>,
    /// Every wake-up, for IT3's test.
    #[cfg(test)]
    wakes: Mutex<Vec<Instant>>,
}

impl BatchWindow {
    fn new(window: Duration) -> BatchWindow {
        BatchWindow {
            window,
            woken_at: Mutex::new((None, None)),
            #[cfg(test)]
            wakes: Mutex::new(Vec::new()),
        }
    }

    /// The unpark hook: the thread came back from waiting.
    fn woke(&self) {
        let now = Instant::now();
        let mut wakes = self.woken_at.lock().unwrap_or_else(|e| e.into_inner());
        *wakes = (Some(now), wakes.0);
        drop(wakes);
        #[cfg(test)]
        self.wakes.lock().unwrap().push(now);
    }

    /// The park hook: nothing is ready; while wake-ups keep coming, before the thread waits for
    /// more it lets the rest of the window pass, so that what arrives meanwhile is there at once
    /// when it waits (IT3).
    fn wait_out(&self) {
        let wakes = *self.woken_at.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(end) = self.waits_until(wakes) {
            let now = Instant::now();
            if end > now {
                std::thread::sleep(end - now);
            }
        }
    }

    /// When the thread, last woken at `wakes.0` after the wake-up at `wakes.1`, may wait for I/O
    /// again: at the end of the window when the two came less than [`BUSY_WINDOWS`] windows
    /// apart; at once (`None`) after a quieter spell, or before a second wake-up (IT3).
    fn waits_until(&self, wakes: Wakes) -> Option<Instant> {
        let (last, before) = (wakes.0?, wakes.1?);
        (last.saturating_duration_since(before) < self.window * BUSY_WINDOWS)
            .then(|| last + self.window)
    }
}

impl Drop for InformerThread {
    fn drop(&mut self) {
        // Dropping the sender ends the runtime's `block_on` (IT2); the thread is not waited for,
        // so that dropping inside async code never blocks a runtime worker.
        self.stop.take();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// IT1: tasks spawned on the handle run on the thread, under its name, one OS thread for all.
    #[test]
    fn it1_tasks_run_on_the_named_thread() {
        let thread = InformerThread::spawn("it1-informers").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        for _ in 0..3 {
            let tx = tx.clone();
            thread.handle().spawn(async move {
                tokio::task::yield_now().await;
                let me = std::thread::current();
                let _ = tx.send((me.id(), me.name().map(str::to_string)));
            });
        }
        let ran: Vec<_> = (0..3)
            .map(|_| {
                rx.recv_timeout(Duration::from_secs(60))
                    .expect("a task ran")
            })
            .collect();
        assert!(ran.iter().all(|r| r == &ran[0]), "{ran:?}");
        assert_eq!(ran[0].1.as_deref(), Some("it1-informers"));
        assert_ne!(ran[0].0, std::thread::current().id());
        thread.join();
    }

    /// IT2: dropping the thread drops the tasks still on it, on its thread, and the thread ends.
    #[test]
    fn it2_dropping_the_thread_drops_its_tasks_there() {
        struct Guard(std::sync::mpsc::Sender<Option<String>>);
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = self
                    .0
                    .send(std::thread::current().name().map(str::to_string));
            }
        }
        let thread = InformerThread::spawn("it2-informers").unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        thread.handle().spawn(async move {
            let _guard = Guard(tx);
            let _ = started_tx.send(());
            std::future::pending::<()>().await;
        });
        started_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the task started");
        let handle = thread.handle().clone();
        drop(thread);
        let dropped_on = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the task was dropped when the thread was");
        assert_eq!(dropped_on.as_deref(), Some("it2-informers"));
        // The runtime is gone: nothing more runs on it.
        let late = handle.spawn(async {});
        let joined = futures::executor::block_on(late);
        assert!(joined.is_err_and(|e| e.is_cancelled()));
    }

    /// IT3: with a batching window, while wake-ups keep coming no two are closer than the window:
    /// a task sleeping 1 ms four times over (from the third sleep on, each ends only after the
    /// thread waited out a window, as the wake-up before came less than two windows earlier)
    /// takes at least two windows, and every wake-up that follows one that came within two
    /// windows of the one before it is at least a window after it.
    #[test]
    fn it3_wake_ups_are_at_least_a_window_apart_while_they_keep_coming() {
        let window = Duration::from_millis(50);
        let batch = Arc::new(BatchWindow::new(window));
        let thread = InformerThread::start("it3-informers", Some(Arc::clone(&batch))).unwrap();
        let slept = thread.handle().spawn(async {
            let started = Instant::now();
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            started.elapsed()
        });
        let slept = futures::executor::block_on(slept).expect("the task ran");
        thread.join();
        // The first wake-up (the spawn's, or the first sleep's when the task ran before the
        // thread first waited) follows no other and waits out nothing; the next, 1 ms later,
        // waits out a window, and so does each one after it.
        assert!(slept >= window * 2, "four 1 ms sleeps took {slept:?}");
        let wakes = batch.wakes.lock().unwrap().clone();
        assert!(wakes.len() >= 3, "woken once per sleep at least: {wakes:?}");
        for three in wakes.windows(3) {
            let (before, gap) = (three[1] - three[0], three[2] - three[1]);
            if before < window * BUSY_WINDOWS {
                assert!(
                    gap >= window,
                    "two wake-ups {gap:?} apart while they kept coming, closer than {window:?}"
                );
            }
        }
    }

    /// IT3's adaptation, decided from the two last wake-ups alone: the window is waited out
    /// only after a wake-up that came less than two windows after the one before it.
    #[test]
    fn it3_the_window_is_waited_out_only_while_wake_ups_keep_coming() {
        let window = Duration::from_millis(10);
        let batch = BatchWindow::new(window);
        let t = Instant::now();
        assert_eq!(batch.waits_until((None, None)), None, "never woken");
        assert_eq!(batch.waits_until((Some(t), None)), None, "first wake-up");
        let busy = t + window * BUSY_WINDOWS - Duration::from_micros(1);
        assert_eq!(
            batch.waits_until((Some(busy), Some(t))),
            Some(busy + window),
            "woken again within two windows"
        );
        let quiet = t + window * BUSY_WINDOWS;
        assert_eq!(
            batch.waits_until((Some(quiet), Some(t))),
            None,
            "woken after a quiet spell of two windows"
        );
        assert_eq!(
            batch.waits_until((Some(t + window), Some(t + window))),
            Some(t + window * 2),
            "two wake-ups at once"
        );
    }

    /// IT3's bound: a window above the longest allowed is refused, a zero window is none.
    #[test]
    fn it3_a_window_too_long_is_refused_and_a_zero_one_is_none() {
        let err = InformerThread::spawn_batching("it3-long", MAX_BATCH_WINDOW * 2).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("batching window"), "{err}");
        let thread = InformerThread::spawn_batching("it3-zero", Duration::ZERO).unwrap();
        let ran = futures::executor::block_on(thread.handle().spawn(async { 7 })).unwrap();
        assert_eq!(ran, 7);
        thread.join();
    }

    /// IT2 through `join`: it returns once the thread has ended.
    #[test]
    fn it2_join_waits_for_the_thread_to_end() {
        let thread = InformerThread::spawn("it2-join").unwrap();
        let handle = thread.handle().clone();
        thread.join();
        let late = handle.spawn(async {});
        assert!(futures::executor::block_on(late).is_err_and(|e| e.is_cancelled()));
    }
}
