//! [`InformerThread`]: an OS thread of its own, running a single-threaded tokio runtime, for
//! informers to run on when events arrive one at a time.
//!
//! On a multi-threaded runtime an informer's watch event passes through three threads: the worker
//! the socket wakes reads it, the reflector's decode lane decodes it, and a worker woken by the
//! lane's doorbell applies it and calls the handlers (`reflector`'s `decode_lane.rs`). At a few
//! thousand events a second every one of those hand-offs wakes an idle thread, and on a virtual
//! machine a wake-up costs more than decoding a pod. An informer started on an `InformerThread`
//! ([`SharedInformerFactory::start_on`](crate::SharedInformerFactory::start_on)) reads, decodes,
//! stores and dispatches each event on that one thread: one wake-up per event, and every object
//! is allocated and freed by one thread, so memory stays flat under glibc's per-thread arenas as
//! it does with lanes (docs/benchmarks.md, *On an `InformerThread`*, for the figures). The price is
//! throughput at saturation: nothing overlaps the reading, decoding and handling of one informer.
//!
//! Handlers of an informer started there are called on that thread; a handler that blocks holds
//! up every informer started on it. They stay there on purpose: with their delivery tasks on a
//! multi-threaded runtime instead, each notification wakes that runtime from outside, and the
//! informer cost as much CPU per event as one started there outright (measured:
//! docs/benchmarks.md, *Two more ideas, measured and dropped*).
//!
//! Invariants (checked by this module's tests and by `tests/e2e_sim.rs`):
//! - **IT1 (one thread)**: everything spawned on [`InformerThread::handle`] runs on the thread's
//!   own OS thread, named as asked.
//! - **IT2 (stops when dropped)**: dropping the `InformerThread` stops its runtime; tasks still
//!   on it are dropped there, and the thread ends. Nothing waits for them: cancel the informers
//!   and await [`SharedInformerFactory::shutdown`](crate::SharedInformerFactory::shutdown) first
//!   for a clean stop.

use std::io;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// An OS thread running a single-threaded tokio runtime (I/O and timers enabled) until dropped.
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
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
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
