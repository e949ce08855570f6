//! The idle timeout of a watch stream: a watch that receives nothing at all (no event, no bookmark,
//! not one byte) for longer than it could legitimately stay silent is ended with
//! [`ReflectorError::WatchIdle`], and the reflector resumes it.
//!
//! A watch can be silent for good reasons: a quiet resource, and no bookmarks asked for. But the
//! server ends every watch after its `timeoutSeconds`, so a stream silent for longer than that (plus
//! a margin) is one whose server or network has gone away without closing the connection: a
//! half-open TCP connection, a proxy holding it, a server that sent headers and nothing after.
//! Without this bound such a watch would hang until the kernel gives up on the connection, which
//! may be never.
//!
//! Cost on the hot path: each chunk read sets a flag ([`Activity::mark`], one relaxed store), and
//! each time the stream has nothing ready the timer's state is read (one atomic load); the timer
//! itself is polled only when it has fired or the stream is polled from another task. It is
//! re-armed once per eighth of the timeout, and the stream is declared idle after eight consecutive
//! ticks without activity: silence is detected between the timeout and 9/8 of it.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::Stream;
use tokio::time::{Instant, Sleep};

use crate::error::ReflectorError;
use crate::lister_watcher::WatchStream;

/// Extra silence allowed beyond a watch's own `timeoutSeconds` before it is presumed dead.
pub const WATCH_IDLE_MARGIN: Duration = Duration::from_secs(60);

/// The idle timeout of a watch opened without `timeoutSeconds`: kube-apiserver then ends it after
/// at most an hour (twice its default minimum request timeout of 30 minutes), plus the margin.
pub const DEFAULT_WATCH_IDLE_TIMEOUT: Duration = Duration::from_secs(3600 + 60);

/// Ticks of silence in a row that make a watch idle.
const TICKS: u32 = 8;

/// Whether bytes arrived since the timer last looked: set by the body reader, cleared by the timer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Activity(Arc<AtomicBool>);

impl Activity {
    /// Bytes arrived.
    pub(crate) fn mark(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn take(&self) -> bool {
        self.0.swap(false, Ordering::Relaxed)
    }
}

/// The idle timeout of a watch opened with `timeout_seconds`.
pub(crate) fn idle_timeout_for(timeout_seconds: Option<u32>) -> Duration {
    match timeout_seconds {
        Some(s) => Duration::from_secs(u64::from(s)) + WATCH_IDLE_MARGIN,
        None => DEFAULT_WATCH_IDLE_TIMEOUT,
    }
}

/// `events`, ended with [`ReflectorError::WatchIdle`] once `activity` has seen nothing for
/// `timeout` (up to 9/8 of it).
pub(crate) fn with_idle_timeout<K: Send + 'static>(
    events: WatchStream<K>,
    activity: Activity,
    timeout: Duration,
) -> WatchStream<K> {
    let timeout = timeout.max(Duration::from_millis(TICKS.into()));
    let tick = timeout / TICKS;
    Box::pin(IdleTimeout {
        events,
        activity,
        timeout,
        tick,
        timer: Box::pin(tokio::time::sleep(tick)),
        armed_for: None,
        silent_ticks: 0,
        done: false,
    })
}

struct IdleTimeout<K> {
    events: WatchStream<K>,
    activity: Activity,
    timeout: Duration,
    tick: Duration,
    timer: Pin<Box<Sleep>>,
    /// The waker the armed timer will wake; `None` until the timer has been polled since its
    /// last reset.
    armed_for: Option<Waker>,
    silent_ticks: u32,
    done: bool,
}

impl<K> Stream for IdleTimeout<K> {
    type Item = Result<crate::wire::decoder::WatchEvent<K>, ReflectorError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.done {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = this.events.as_mut().poll_next(cx) {
            this.done = item.is_none();
            return Poll::Ready(item);
        }
        let armed = this
            .armed_for
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()));
        if armed && !this.timer.is_elapsed() {
            return Poll::Pending;
        }
        while this.timer.as_mut().poll(cx).is_ready() {
            if this.activity.take() {
                this.silent_ticks = 0;
            } else {
                this.silent_ticks += 1;
            }
            if this.silent_ticks >= TICKS {
                this.done = true;
                return Poll::Ready(Some(Err(ReflectorError::WatchIdle(this.timeout))));
            }
            let next = Instant::now() + this.tick;
            this.timer.as_mut().reset(next);
        }
        this.armed_for = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;

    use super::*;
    use crate::wire::decoder::{Bookmark, WatchEvent};

    fn bookmark(rv: &str) -> Result<WatchEvent<()>, ReflectorError> {
        Ok(WatchEvent::Bookmark(Bookmark {
            resource_version: rv.into(),
            initial_events_end: false,
        }))
    }

    #[test]
    fn the_timeout_is_the_server_timeout_plus_the_margin() {
        assert_eq!(idle_timeout_for(Some(300)), Duration::from_secs(360));
        assert_eq!(idle_timeout_for(None), DEFAULT_WATCH_IDLE_TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_stream_ends_with_an_idle_error_between_the_timeout_and_nine_eighths_of_it() {
        let start = Instant::now();
        let silent: WatchStream<()> = Box::pin(futures::stream::pending());
        let mut s = with_idle_timeout(silent, Activity::default(), Duration::from_secs(80));
        match s.next().await {
            Some(Err(ReflectorError::WatchIdle(t))) => assert_eq!(t, Duration::from_secs(80)),
            other => panic!("expected an idle error, got {other:?}"),
        }
        let waited = start.elapsed();
        assert!(
            waited >= Duration::from_secs(80) && waited <= Duration::from_secs(90),
            "{waited:?}"
        );
        assert!(s.next().await.is_none(), "nothing after the idle error");
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_arriving_keep_a_stream_alive_even_without_whole_events() {
        let activity = Activity::default();
        let (tx, rx) = futures::channel::mpsc::unbounded();
        let mut s = with_idle_timeout(Box::pin(rx), activity.clone(), Duration::from_secs(8));
        let feeder = tokio::spawn(async move {
            // 30 s of partial chunks every 500 ms (no event completes), then one event.
            for _ in 0..60 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                activity.mark();
            }
            tx.unbounded_send(bookmark("5")).unwrap();
            tx
        });
        match s.next().await {
            Some(Ok(WatchEvent::Bookmark(b))) => assert_eq!(b.resource_version, "5"),
            other => panic!("expected the bookmark, got {other:?}"),
        }
        let _tx = feeder.await.unwrap();
        // Then silence: idle after 8 to 9 s.
        let start = Instant::now();
        assert!(matches!(
            s.next().await,
            Some(Err(ReflectorError::WatchIdle(_)))
        ));
        assert!(start.elapsed() <= Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_moved_to_another_task_after_arming_still_times_out() {
        let silent: WatchStream<()> = Box::pin(futures::stream::pending());
        let mut s = with_idle_timeout(silent, Activity::default(), Duration::from_secs(8));
        assert!(futures::poll!(s.next()).is_pending(), "armed for this task");
        let start = Instant::now();
        let moved = tokio::spawn(async move { s.next().await });
        match moved.await.unwrap() {
            Some(Err(ReflectorError::WatchIdle(_))) => {}
            other => panic!("expected an idle error, got {other:?}"),
        }
        assert!(start.elapsed() <= Duration::from_secs(9));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_that_ends_ends_without_an_error() {
        let events: WatchStream<()> = Box::pin(futures::stream::iter([bookmark("1")]));
        let mut s = with_idle_timeout(events, Activity::default(), Duration::from_secs(8));
        assert!(matches!(s.next().await, Some(Ok(_))));
        assert!(s.next().await.is_none());
        assert!(s.next().await.is_none());
    }
}
