//! The elector's behaviour on a [`MemoryLock`], all under tokio's paused clock.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::FutureExt;
use parking_lot::Mutex;
use proptest::prelude::*;
use tokio::task::JoinHandle;
use tokio::time::{sleep, sleep_until, Instant};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::{Action, Controller};
use workqueue::{default_controller_rate_limiter, RateLimitingQueue};

const LEASE: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

/// The longest wait between two acquire attempts: `RETRY × (1 + JITTER_FACTOR)`.
fn max_acquire_wait() -> Duration {
    RETRY.mul_f64(1.0 + JITTER_FACTOR)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    NewLeader(String),
    Started,
    Stopped,
}

/// Records the callbacks with the instant of each.
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<(Instant, Event)>>>,
}

impl LeaderCallbacks for Recorder {
    fn on_started_leading(&self, _leader: CancellationToken, guard: LeaseGuard) {
        assert!(guard.is_valid(), "a new leader's guard is valid");
        self.events.lock().push((Instant::now(), Event::Started));
    }
    fn on_stopped_leading(&self) {
        self.events.lock().push((Instant::now(), Event::Stopped));
    }
    fn on_new_leader(&self, identity: &str) {
        self.events
            .lock()
            .push((Instant::now(), Event::NewLeader(identity.to_string())));
    }
}

impl Recorder {
    fn events(&self) -> Vec<Event> {
        self.events.lock().iter().map(|(_, e)| e.clone()).collect()
    }
    fn at(&self, event: &Event) -> Option<Instant> {
        self.events
            .lock()
            .iter()
            .find(|(_, e)| e == event)
            .map(|(at, _)| *at)
    }
    fn started_at(&self) -> Option<Instant> {
        self.at(&Event::Started)
    }
    fn stopped_at(&self) -> Option<Instant> {
        self.at(&Event::Stopped)
    }
}

struct Replica {
    cancel: CancellationToken,
    recorder: Recorder,
    guard: LeaseGuard,
    run: JoinHandle<ElectionEnd>,
}

fn config(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig::new("test-election", identity)
}

fn start_with(
    lock: &MemoryLock,
    identity: &str,
    tweak: impl FnOnce(&mut LeaderElectionConfig),
) -> Replica {
    let mut config = config(identity);
    tweak(&mut config);
    let elector = LeaderElector::new(config, lock.for_identity(identity)).unwrap();
    let (cancel, recorder, guard) = (
        CancellationToken::new(),
        Recorder::default(),
        elector.guard(),
    );
    // `tokio::spawn` also checks that the elector's future is `Send`.
    let run = tokio::spawn(elector.run(cancel.clone(), recorder.clone()));
    Replica {
        cancel,
        recorder,
        guard,
        run,
    }
}

fn start(lock: &MemoryLock, identity: &str) -> Replica {
    start_with(lock, identity, |_| {})
}

fn last_write_by(lock: &MemoryLock, identity: &str) -> LockWrite {
    lock.writes()
        .into_iter()
        .rfind(|write| write.identity == identity)
        .unwrap()
}

fn lock() -> MemoryLock {
    MemoryLock::new("test-election", "observer")
}

#[tokio::test(start_paused = true)]
async fn acquires_at_once_when_no_lease_exists() {
    let lock = lock();
    let t0 = Instant::now();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    assert_eq!(a.recorder.started_at(), Some(t0));
    let record = lock.record().unwrap();
    assert_eq!(record.holder(), Some("a"));
    assert_eq!(record.lease_duration, LEASE);
    assert_eq!(record.leader_transitions, 0);
    assert!(a.guard.is_valid());
}

#[tokio::test(start_paused = true)]
async fn an_elector_cancelled_before_it_runs_never_leads_nor_writes() {
    let lock = lock();
    let elector = LeaderElector::new(config("a"), lock.for_identity("a")).unwrap();
    let (cancel, recorder) = (CancellationToken::new(), Recorder::default());
    cancel.cancel();
    let end = elector.run(cancel, recorder.clone()).await;
    assert_eq!(end, ElectionEnd::Cancelled);
    assert_eq!(recorder.events(), []);
    assert!(lock.writes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn does_not_acquire_while_another_holder_renews() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(120)).await;
    assert_eq!(b.recorder.started_at(), None);
    assert_eq!(b.recorder.events(), [Event::NewLeader("a".into())]);
    assert!(!b.guard.is_valid());
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
    assert!(a.guard.is_valid());
}

#[tokio::test(start_paused = true)]
async fn renews_every_retry_period_keeping_acquire_time_and_transitions() {
    let lock = lock();
    let _a = start(&lock, "a");
    sleep(Duration::from_secs(21)).await;
    let writes = lock.writes();
    assert_eq!(writes.len(), 11, "the acquisition and 10 renewals");
    for pair in writes.windows(2) {
        assert_eq!(pair[1].at - pair[0].at, RETRY);
        assert_eq!(pair[1].record.acquire_time, pair[0].record.acquire_time);
        assert_eq!(pair[1].record.leader_transitions, 0);
    }
}

fn ops_by(lock: &MemoryLock, identity: &str) -> Vec<LockOp> {
    lock.calls()
        .into_iter()
        .filter(|call| call.identity == identity)
        .map(|call| call.op)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_leader_renews_with_one_write_and_reads_only_after_a_conflict() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(20_500)).await;
    let mut expected = vec![LockOp::Get, LockOp::Create];
    expected.extend([LockOp::Update; 10]);
    assert_eq!(ops_by(&lock, "a"), expected, "no read while renewing");

    // Another writer bumps the version (here leaving a as holder): a's next optimistic write
    // meets a conflict, so it reads and writes again in the same attempt, and still leads.
    let x = lock.for_identity("x");
    let (record, version) = x.get().await.unwrap().unwrap();
    x.update(&record, &version).await.unwrap();
    sleep(RETRY).await;
    expected.extend([LockOp::Update, LockOp::Get, LockOp::Update]);
    assert_eq!(ops_by(&lock, "a"), expected);
    assert_eq!(last_write_by(&lock, "a").at, Instant::now() - ms(500));
    assert!(a.guard.is_valid());
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_stored_but_unanswered_is_renewed_over_at_the_next_attempt() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(2_500)).await;
    lock.set_fault("a", Fault::LoseAnswer);
    sleep(RETRY).await; // the renewal at 4 s is stored, its answer lost
    lock.heal("a");
    sleep(RETRY).await; // at 6 s: a conflict on the stale version, a read, a write
    assert_eq!(
        ops_by(&lock, "a")[3..],
        [LockOp::Update, LockOp::Update, LockOp::Get, LockOp::Update]
    );
    assert_eq!(last_write_by(&lock, "a").at, Instant::now() - ms(500));
    assert!(a.guard.is_valid());
}

#[tokio::test(start_paused = true)]
async fn acquires_once_the_holder_stopped_renewing_for_a_lease_duration_of_observed_time() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(30)).await;
    lock.set_fault("a", Fault::Fail);
    sleep(Duration::from_secs(60)).await;

    let last_renew = last_write_by(&lock, "a").at;
    let acquired = b.recorder.started_at().expect("b took over");
    // b saw a's last renew within one acquire wait of it, and takes over at its first attempt
    // after a lease duration from then.
    assert!(acquired >= last_renew + LEASE, "not before the lease ends");
    assert!(acquired <= last_renew + LEASE + max_acquire_wait() * 2);
    assert!(a.recorder.stopped_at().unwrap() < acquired);
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    assert_eq!(lock.record().unwrap().holder(), Some("b"));
}

#[tokio::test(start_paused = true)]
async fn the_holders_timestamps_are_not_trusted_only_our_observed_time() {
    let lock = lock();
    let ancient = SystemTime::UNIX_EPOCH;
    let stale_looking = LeaderElectionRecord {
        holder_identity: Some("x".into()),
        lease_duration: LEASE,
        acquire_time: ancient,
        renew_time: ancient,
        leader_transitions: 3,
        preferred_holder: None,
        strategy: None,
    };
    lock.for_identity("x").create(&stale_looking).await.unwrap();
    let t0 = Instant::now();
    let b = start(&lock, "b");
    sleep(Duration::from_secs(60)).await;
    let acquired = b.recorder.started_at().unwrap();
    assert!(
        acquired >= t0 + LEASE,
        "a renew_time in 1970 does not make the lease expired"
    );
    assert!(acquired <= t0 + LEASE + max_acquire_wait());
    assert_eq!(lock.record().unwrap().leader_transitions, 4);
}

#[tokio::test(start_paused = true)]
async fn stops_leading_by_the_renew_deadline_when_renewals_fail_before_another_acquires() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(31)).await;
    lock.set_fault("a", Fault::Fail);
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);

    let last_renew = last_write_by(&lock, "a").at;
    let stopped = a.recorder.stopped_at().unwrap();
    assert_eq!(stopped, last_renew + RENEW_DEADLINE);
    assert!(!a.guard.is_valid());
    assert_eq!(a.recorder.events().last(), Some(&Event::Stopped));
    sleep(Duration::from_secs(30)).await;
    let acquired = b.recorder.started_at().unwrap();
    assert!(stopped < acquired && acquired >= last_renew + LEASE);
}

#[tokio::test(start_paused = true)]
async fn a_hanging_renewal_is_abandoned_at_the_renew_deadline() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(Duration::from_secs(5)).await;
    lock.set_fault("a", Fault::Hang);
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    let last_renew = last_write_by(&lock, "a").at;
    assert_eq!(a.recorder.stopped_at(), Some(last_renew + RENEW_DEADLINE));
    lock.heal("a");
    sleep(ms(1)).await;
    assert_eq!(
        last_write_by(&lock, "a").at,
        last_renew,
        "the abandoned call wrote nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_renewal_answered_after_the_deadline_does_not_count() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(4_500)).await;
    // Applied at once, answered 11 s later: past last renew + 10 s.
    lock.set_fault("a", Fault::Slow(Duration::from_secs(11)));
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    let renewals: Vec<_> = lock.writes().into_iter().map(|write| write.at).collect();
    let stopped = a.recorder.stopped_at().unwrap();
    // The slow renewal at 6 s was stored at once but answered too late: it does not count, and
    // we stopped leading 10 s after the renewal before it, which was answered in time.
    assert_eq!(
        renewals.len(),
        4,
        "acquired at 0 s, renewed at 2, 4 and 6 s"
    );
    assert_eq!(stopped, renewals[2] + RENEW_DEADLINE);
}

#[tokio::test(start_paused = true)]
async fn release_on_cancel_lets_another_acquire_at_its_next_attempt() {
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.release_on_cancel = true);
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(7)).await;
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);

    let release = last_write_by(&lock, "a");
    assert_eq!(release.at, cancelled);
    assert_eq!(release.record.holder(), None);
    assert_eq!(release.record.lease_duration, Duration::from_secs(1));
    assert!(a.recorder.stopped_at().unwrap() <= release.at);
    sleep(max_acquire_wait()).await;
    let acquired = b
        .recorder
        .started_at()
        .expect("b acquired without waiting for the lease");
    assert!(acquired <= cancelled + max_acquire_wait());
}

#[tokio::test(start_paused = true)]
async fn cancelling_releases_the_lease_by_default() {
    assert!(config("a").release_on_cancel);
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(5)).await;
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
    assert_eq!(lock.record().unwrap().holder(), None, "released");
    sleep(max_acquire_wait()).await;
    assert!(b.recorder.started_at().unwrap() <= cancelled + max_acquire_wait());
}

#[tokio::test(start_paused = true)]
async fn a_renewal_whose_answer_was_lost_does_not_stop_the_release() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(ms(3_500)).await;
    lock.set_fault("a", Fault::LoseAnswer);
    sleep(RETRY).await; // the renewal at 4 s is stored, its answer lost: a's version is stale
    lock.heal("a");
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);

    let release = last_write_by(&lock, "a");
    assert_eq!(release.record.holder(), None, "released after a fresh read");
    assert_eq!(release.at, cancelled);
    assert_eq!(lock.record().unwrap(), release.record);
    sleep(max_acquire_wait()).await;
    assert!(b.recorder.started_at().unwrap() <= cancelled + max_acquire_wait());
}

#[tokio::test(start_paused = true)]
async fn a_conflict_on_the_release_is_retried_after_a_fresh_read() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(3_000)).await;
    lock.conflict_next_updates("a", 1);
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);

    let after_cancel: Vec<_> = lock
        .calls()
        .into_iter()
        .filter(|call| call.identity == "a" && call.at >= cancelled)
        .map(|call| (call.op, call.at - cancelled))
        .collect();
    assert_eq!(
        after_cancel,
        [
            (LockOp::Get, Duration::ZERO),
            (LockOp::Update, Duration::ZERO),
            (LockOp::Get, ms(100)),
            (LockOp::Update, ms(100)),
        ],
        "a 409, a pause, a fresh read and the release"
    );
    assert_eq!(lock.record().unwrap().holder(), None);
}

#[tokio::test(start_paused = true)]
async fn a_release_never_writes_over_a_lease_another_holder_took() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(2_500)).await;
    // Someone else writes itself as holder (say an operator, or a replica with a skewed
    // configuration); a has not read it yet when it is cancelled.
    let x = lock.for_identity("x");
    let (mut record, version) = x.get().await.unwrap().unwrap();
    record.holder_identity = Some("x".into());
    x.update(&record, &version).await.unwrap();
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);

    assert!(
        lock.writes()
            .iter()
            .all(|w| w.identity != "a" || w.at < cancelled),
        "no release written"
    );
    assert_eq!(lock.record().unwrap().holder(), Some("x"));
    assert_eq!(
        ops_by(&lock, "a").last(),
        Some(&LockOp::Get),
        "the fresh read showed x"
    );
}

#[tokio::test(start_paused = true)]
async fn a_release_failing_until_the_renew_deadline_gives_up_with_backoff() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(2_500)).await;
    lock.set_fault("a", Fault::Fail);
    let cancelled = Instant::now();
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
    let attempts: Vec<_> = lock
        .calls()
        .into_iter()
        .filter(|call| call.identity == "a" && call.at >= cancelled)
        .map(|call| call.at - cancelled)
        .collect();
    // 0, 0.1, 0.3, 0.7, 1.5, 3.5, 5.5, 7.5, 9.5 s: doubling pauses capped at the retry period,
    // none after the renew deadline.
    assert_eq!(attempts.len(), 9, "{attempts:?}");
    assert_eq!(attempts[1], ms(100));
    assert!(*attempts.last().unwrap() < RENEW_DEADLINE);
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
}

#[tokio::test(start_paused = true)]
async fn without_release_on_cancel_the_lease_runs_out_first() {
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.release_on_cancel = false);
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(7)).await;
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
    let last_renew = last_write_by(&lock, "a").at;
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
    sleep(Duration::from_secs(30)).await;
    assert!(b.recorder.started_at().unwrap() >= last_renew + LEASE);
}

/// The acquiring write landed but its answer had not come back when the elector was cancelled:
/// the lease names it though it never led. By default it releases the lease (a fresh read finds
/// it named, so it writes the empty holder); without `release_on_cancel` the write stays, as a
/// renewal's would.
#[tokio::test(start_paused = true)]
async fn an_acquire_cut_short_by_a_cancel_releases_the_write_that_landed() {
    for release_on_cancel in [true, false] {
        let lock = lock();
        // Every call applied at once, answered 4 s later: the read at 0 s, the create at 4 s.
        lock.set_fault("a", Fault::Slow(Duration::from_secs(4)));
        let a = start_with(&lock, "a", |config| {
            config.release_on_cancel = release_on_cancel
        });
        sleep(Duration::from_secs(5)).await;
        assert_eq!(ops_by(&lock, "a"), [LockOp::Get, LockOp::Create]);
        assert_eq!(
            lock.record().unwrap().holder(),
            Some("a"),
            "stored, unanswered"
        );
        lock.heal("a");
        a.cancel.cancel();
        assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
        assert_eq!(a.recorder.started_at(), None, "it never led");
        if release_on_cancel {
            assert_eq!(lock.record().unwrap().holder(), None, "released");
            assert_eq!(
                ops_by(&lock, "a"),
                [LockOp::Get, LockOp::Create, LockOp::Get, LockOp::Update]
            );
        } else {
            assert_eq!(lock.record().unwrap().holder(), Some("a"));
            assert_eq!(ops_by(&lock, "a"), [LockOp::Get, LockOp::Create]);
        }
    }
}

/// A standby cancelled between attempts, having seen another holder each time, wrote nothing
/// that could name it: it neither reads nor writes on its way out.
#[tokio::test(start_paused = true)]
async fn a_standby_cancelled_between_attempts_neither_reads_nor_writes() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(5)).await;
    let before = ops_by(&lock, "b");
    assert!(before.iter().all(|op| *op == LockOp::Get), "{before:?}");
    b.cancel.cancel();
    assert_eq!(b.run.await.unwrap(), ElectionEnd::Cancelled);
    assert_eq!(ops_by(&lock, "b"), before);
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
    assert!(a.guard.is_valid());
}

/// A standby whose last attempt failed with a transport error cannot know that its write did not
/// land: cancelled, it tries one release, and only one, so a cancel during an outage costs it at
/// most a retry period.
#[tokio::test(start_paused = true)]
async fn a_standby_whose_attempt_failed_tries_one_release_on_cancel() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(1)).await;
    lock.set_fault("b", Fault::Fail);
    let b = start(&lock, "b");
    sleep(Duration::from_secs(5)).await;
    let before = ops_by(&lock, "b").len();
    let cancelled = Instant::now();
    b.cancel.cancel();
    assert_eq!(b.run.await.unwrap(), ElectionEnd::Cancelled);
    assert!(Instant::now() <= cancelled + RETRY);
    assert_eq!(ops_by(&lock, "b")[before..], [LockOp::Get]);
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
    assert!(a.guard.is_valid());
}

#[tokio::test(start_paused = true)]
async fn callbacks_run_in_order_new_leader_started_stopped() {
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.release_on_cancel = true);
    sleep(ms(1)).await;
    let b = start(&lock, "b");
    sleep(Duration::from_secs(5)).await;
    a.cancel.cancel();
    a.run.await.unwrap();
    sleep(Duration::from_secs(10)).await;
    b.cancel.cancel();
    b.run.await.unwrap();
    assert_eq!(
        a.recorder.events(),
        [Event::NewLeader("a".into()), Event::Started, Event::Stopped]
    );
    assert_eq!(
        b.recorder.events(),
        [
            Event::NewLeader("a".into()),
            Event::NewLeader("b".into()),
            Event::Started,
            Event::Stopped
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn leader_transitions_count_holder_changes_not_renewals() {
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.release_on_cancel = true);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(lock.record().unwrap().leader_transitions, 0);
    a.cancel.cancel();
    a.run.await.unwrap();
    assert_eq!(
        lock.record().unwrap().leader_transitions,
        0,
        "a release is no new holder"
    );

    let b = start(&lock, "b");
    sleep(Duration::from_secs(10)).await;
    assert_eq!(lock.record().unwrap().holder(), Some("b"));
    assert_eq!(lock.record().unwrap().leader_transitions, 1);

    lock.set_fault("b", Fault::Fail);
    let a_again = start(&lock, "a");
    assert_eq!(b.run.await.unwrap(), ElectionEnd::LeadershipLost);
    sleep(Duration::from_secs(30)).await;
    assert!(a_again.recorder.started_at().is_some());
    assert_eq!(lock.record().unwrap().holder(), Some("a"));
    assert_eq!(lock.record().unwrap().leader_transitions, 2);
}

#[tokio::test(start_paused = true)]
async fn became_leader_and_stopped_leading_are_recorded_as_events_on_the_lease() {
    use crate::events::{BroadcasterConfig, EventBroadcaster, EventSource, MemorySink};

    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let recorder = broadcaster.new_recorder(EventSource::new("my-controller"));
    let sink = MemorySink::new();
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.event_recorder = Some(recorder));
    sleep(Duration::from_secs(5)).await;
    a.cancel.cancel();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::Cancelled);
    // The elector held the last recorder: the writer drains the queue and returns.
    writer.await.unwrap();

    let events = sink.events();
    let messages: Vec<_> = events.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(messages, ["a became leader", "a stopped leading"]);
    for event in &events {
        assert_eq!(event.reason, "LeaderElection");
        assert_eq!(event.type_, crate::events::EventType::Normal);
        assert_eq!(event.involved_object.kind, "Lease");
        assert_eq!(event.involved_object.api_version, "coordination.k8s.io/v1");
        assert_eq!(event.involved_object.name, "test-election");
    }
}

#[tokio::test(start_paused = true)]
async fn a_lost_leadership_is_recorded_as_stopped_leading_and_no_recorder_means_no_event() {
    use crate::events::{BroadcasterConfig, EventBroadcaster, EventSource, MemorySink};

    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let recorder = broadcaster.new_recorder(EventSource::new("my-controller"));
    let sink = MemorySink::new();
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.event_recorder = Some(recorder));
    let b = start(&lock, "b"); // no recorder
    sleep(Duration::from_secs(5)).await;
    lock.set_fault("a", Fault::Fail);
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    writer.await.unwrap();
    sleep(Duration::from_secs(30)).await;
    assert!(b.recorder.started_at().is_some());
    let messages: Vec<_> = sink.events().into_iter().map(|e| e.message).collect();
    assert_eq!(messages, ["a became leader", "a stopped leading"]);
}

/// A user-written lock over another, with no Kubernetes object of its own to name.
struct Objectless(MemoryLock);

impl LeaseLock for Objectless {
    fn get(
        &self,
    ) -> impl std::future::Future<
        Output = Result<Option<(LeaderElectionRecord, RawVersion)>, LockError>,
    > + Send {
        self.0.get()
    }
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl std::future::Future<Output = Result<RawVersion, LockError>> + Send {
        self.0.create(record)
    }
    fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &RawVersion,
    ) -> impl std::future::Future<Output = Result<RawVersion, LockError>> + Send {
        self.0.update(record, version)
    }
    fn identity(&self) -> &str {
        self.0.identity()
    }
    fn describe(&self) -> String {
        format!("objectless/{}", self.0.describe())
    }
    fn object_reference(&self) -> Option<crate::events::ObjectReference> {
        None
    }
    fn candidate(&self, candidacy: &Candidacy) -> Option<LeaseCandidate> {
        self.0.candidate(candidacy)
    }
}

#[tokio::test(start_paused = true)]
async fn a_lock_without_an_object_records_no_event_and_warns_once_that_it_does_not() {
    use crate::events::{BroadcasterConfig, EventBroadcaster, EventSource, MemorySink};

    let logs = crate::log_capture::LogCapture::start();
    let broadcaster = EventBroadcaster::new(BroadcasterConfig::default());
    let recorder = broadcaster.new_recorder(EventSource::new("my-controller"));
    let sink = MemorySink::new();
    let writer = broadcaster.start(sink.clone(), CancellationToken::new());
    let mut config = config("a");
    config.event_recorder = Some(recorder);
    let elector = LeaderElector::new(config, Objectless(lock().for_identity("a"))).unwrap();
    let cancel = CancellationToken::new();
    let run = tokio::spawn(elector.run(cancel.clone(), Recorder::default()));
    sleep(Duration::from_secs(5)).await;
    cancel.cancel();
    assert_eq!(run.await.unwrap(), ElectionEnd::Cancelled);
    writer.await.unwrap();

    assert!(sink.events().is_empty(), "no object, no event");
    let warnings: Vec<_> = logs
        .events()
        .into_iter()
        .filter(|e| e.level == tracing::Level::WARN)
        .filter(|e| e.values("message")[0].contains("leader-election events are not recorded"))
        .collect();
    assert_eq!(
        warnings.len(),
        1,
        "one warning for two events: {warnings:?}"
    );
}

/// Starts `identity` and returns its replica with a health handle on its elector.
fn start_watched(lock: &MemoryLock, identity: &str) -> (Replica, ElectionHealth) {
    let elector = LeaderElector::new(config(identity), lock.for_identity(identity)).unwrap();
    let health = elector.health();
    let (cancel, recorder, guard) = (
        CancellationToken::new(),
        Recorder::default(),
        elector.guard(),
    );
    let run = tokio::spawn(elector.run(cancel.clone(), recorder.clone()));
    let replica = Replica {
        cancel,
        recorder,
        guard,
        run,
    };
    (replica, health)
}

#[tokio::test(start_paused = true)]
async fn the_health_check_fails_for_a_leader_stuck_past_its_lease_and_the_tolerance() {
    let tolerance = Duration::from_secs(5);
    let lock = lock();
    let (a, a_health) = start_watched(&lock, "a");
    let (_b, b_health) = start_watched(&lock, "b");
    sleep(ms(4_500)).await;
    let renewed = last_write_by(&lock, "a").at;
    assert!(a_health.is_leader() && !b_health.is_leader());
    assert_eq!(a_health.check(tolerance), Ok(()));

    // The elector's task stops running (a deadlock, a blocked runtime): the clock moves on
    // without it. Healthy up to the lease plus the tolerance after the last renew, not after.
    let limit = renewed + LEASE + tolerance;
    tokio::time::advance(limit - Instant::now()).now_or_never();
    assert_eq!(a_health.check(tolerance), Ok(()));
    tokio::time::advance(ms(1)).now_or_never();
    let error = a_health.check(tolerance).unwrap_err();
    assert_eq!(error.name, "test-election");
    assert_eq!(error.expired_for, tolerance + ms(1));
    assert_eq!(
        error.to_string(),
        "failed election to renew leadership on lease test-election (expired 5.001s ago)"
    );
    // A standby is never unhealthy, however old what it saw.
    assert_eq!(b_health.check(Duration::ZERO), Ok(()));
    drop(a);
}

#[tokio::test(start_paused = true)]
async fn the_healthz_adaptor_follows_each_elector_it_is_given() {
    let tolerance = Duration::from_secs(1);
    let healthz = HealthzAdaptor::new(tolerance);
    assert_eq!(healthz.check(), Ok(()), "no elector set");
    assert_eq!(healthz.name(), "leaderElection");
    let lock = lock();

    // A term that lost its lease without releasing it still believes it leads (client-go's
    // IsLeader reads the last record seen): unhealthy after the lease and the tolerance.
    let first = LeaderElector::new(config("a"), lock.for_identity("a")).unwrap();
    healthz.set_leader_election(&first);
    let run = tokio::spawn(first.run(CancellationToken::new(), ()));
    sleep(ms(2_500)).await;
    lock.set_fault("a", Fault::Hang);
    assert_eq!(run.await.unwrap(), ElectionEnd::LeadershipLost);
    let renewed = last_write_by(&lock, "a").at;
    sleep_until(renewed + LEASE + tolerance).await;
    assert_eq!(healthz.check(), Ok(()));
    sleep(ms(1)).await;
    assert!(healthz.check().is_err());

    // Pointed at the next term's elector: healthy while it renews, and after it released the
    // lease on cancel, however long after.
    lock.heal("a");
    let second = LeaderElector::new(config("a"), lock.for_identity("a")).unwrap();
    healthz.set_leader_election(&second);
    assert_eq!(healthz.check(), Ok(()));
    let cancel = CancellationToken::new();
    let run = tokio::spawn(second.run(cancel.clone(), ()));
    sleep(LEASE * 2).await;
    assert_eq!(healthz.check(), Ok(()));
    cancel.cancel();
    assert_eq!(run.await.unwrap(), ElectionEnd::Cancelled);
    assert_eq!(lock.record().unwrap().holder(), None);
    sleep(LEASE * 4).await;
    assert_eq!(healthz.check(), Ok(()));
}

/// What the API server's coordinator writes: `holder` assigned, with a strategy.
fn assigned(holder: &str, preferred: Option<&str>) -> LeaderElectionRecord {
    let now = SystemTime::now();
    LeaderElectionRecord {
        holder_identity: Some(holder.into()),
        lease_duration: LEASE,
        acquire_time: now,
        renew_time: now,
        leader_transitions: 1,
        preferred_holder: preferred.map(Into::into),
        strategy: Some("OldestEmulationVersion".into()),
    }
}

/// Writes `record` over the lock as the coordinator would, whatever is there.
async fn coordinator_writes(lock: &MemoryLock, record: &LeaderElectionRecord) {
    let coordinator = lock.for_identity("coordinator");
    match coordinator.get().await.unwrap() {
        None => drop(coordinator.create(record).await.unwrap()),
        Some((_, version)) => drop(coordinator.update(record, &version).await.unwrap()),
    }
}

fn coordinated(config: &mut LeaderElectionConfig) {
    config.coordinated = Some(Candidacy::new("1.36.3", "1.36.0"));
}

#[tokio::test(start_paused = true)]
async fn a_coordinated_elector_neither_creates_nor_takes_a_lease_it_is_not_assigned() {
    let lock = lock();
    let a = start_with(&lock, "a", coordinated);
    sleep(Duration::from_secs(60)).await;
    assert!(lock.writes().is_empty(), "no lease created");

    // Assigned to b, who never renews it: a waits for the coordinator, even long after expiry.
    coordinator_writes(&lock, &assigned("b", None)).await;
    sleep(Duration::from_secs(120)).await;
    assert!(lock.writes().iter().all(|w| w.identity != "a"));
    assert_eq!(a.recorder.started_at(), None);
    assert_eq!(a.recorder.events(), [Event::NewLeader("b".into())]);
    assert!(ops_by(&lock, "a").iter().all(|op| *op == LockOp::Get));
}

#[tokio::test(start_paused = true)]
async fn a_coordinated_elector_leads_once_assigned_and_stops_at_the_end_of_its_term() {
    let lock = lock();
    let a = start_with(&lock, "a", coordinated);
    sleep(ms(1)).await;
    // kube-apiserver's coordinator writes no acquire time.
    let mut named = assigned("a", None);
    named.acquire_time = SystemTime::UNIX_EPOCH;
    coordinator_writes(&lock, &named).await;
    sleep(max_acquire_wait()).await;
    let started = a
        .recorder
        .started_at()
        .expect("a leads the lease assigned to it");
    // The first write of a's, not its latest: a renewal may have followed within the wait.
    let first = lock
        .writes()
        .into_iter()
        .find(|write| write.identity == "a")
        .expect("a wrote the lease")
        .record;
    assert_eq!(
        first.acquire_time, first.renew_time,
        "the first renew's time"
    );
    sleep(Duration::from_secs(10)).await;
    let renewal = last_write_by(&lock, "a");
    assert!(renewal.at > started);
    assert_eq!(
        renewal.record.strategy.as_deref(),
        Some("OldestEmulationVersion")
    );
    assert_eq!(renewal.record.leader_transitions, 1);
    assert_eq!(renewal.record.acquire_time, first.acquire_time, "kept");

    // The coordinator names a preferred holder: a does not renew again, and stops leading at
    // its next renew attempt; the lease runs out for the coordinator to hand it to b.
    let mut end_of_term = renewal.record.clone();
    end_of_term.preferred_holder = Some("b".into());
    coordinator_writes(&lock, &end_of_term).await;
    let marked = Instant::now();
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    assert!(a.recorder.stopped_at().unwrap() <= marked + RETRY);
    assert_eq!(
        last_write_by(&lock, "a").at,
        renewal.at,
        "no renewal after the mark"
    );
    assert_eq!(
        lock.record().unwrap().preferred_holder.as_deref(),
        Some("b")
    );
}

#[tokio::test(start_paused = true)]
async fn an_uncoordinated_elector_ignores_the_coordination_fields_as_client_go_does() {
    let lock = lock();
    coordinator_writes(&lock, &assigned("a", Some("b"))).await;
    let a = start(&lock, "a");
    sleep(Duration::from_secs(5)).await;
    assert!(
        a.recorder.started_at().is_some(),
        "a renews the lease naming it"
    );
    let record = lock.record().unwrap();
    assert_eq!(record.holder(), Some("a"));
    assert_eq!((record.preferred_holder, record.strategy), (None, None));
}

#[test]
fn config_validation_follows_client_go() {
    let valid = config("a");
    assert_eq!(valid.validate(), Ok(()));
    let with = |tweak: fn(&mut LeaderElectionConfig)| {
        let mut config = valid.clone();
        tweak(&mut config);
        config.validate()
    };
    assert_eq!(
        with(|c| c.lease_duration = Duration::ZERO),
        Err(LeaderElectionConfigError::NotPositive("lease_duration"))
    );
    assert_eq!(
        with(|c| c.retry_period = Duration::ZERO),
        Err(LeaderElectionConfigError::NotPositive("retry_period"))
    );
    assert_eq!(
        with(|c| c.renew_deadline = Duration::ZERO),
        Err(LeaderElectionConfigError::NotPositive("renew_deadline"))
    );
    assert_eq!(
        with(|c| c.lease_duration = Duration::from_secs(10)),
        Err(LeaderElectionConfigError::LeaseNotLongerThanRenewDeadline)
    );
    assert_eq!(
        with(|c| c.renew_deadline = Duration::from_millis(2_400)),
        Err(LeaderElectionConfigError::RenewDeadlineNotLongerThanJitteredRetry),
        "2.4 s is not more than 2 s × 1.2"
    );
    assert_eq!(
        with(|c| c.renew_deadline = Duration::from_millis(2_401)),
        Ok(())
    );
    assert_eq!(
        with(|c| c.lease_duration = Duration::MAX),
        Err(LeaderElectionConfigError::TooLong("lease_duration"))
    );
    assert_eq!(
        with(|c| c.guard_margin = Some(LEASE)),
        Err(LeaderElectionConfigError::GuardMarginNotShorterThanLease)
    );
    assert_eq!(
        with(|c| c.identity.clear()),
        Err(LeaderElectionConfigError::EmptyIdentity)
    );
    assert_eq!(valid.effective_guard_margin(), Duration::from_secs(3));
}

#[test]
fn a_candidacy_is_refused_for_what_kube_apiserver_would_refuse() {
    let valid = config("pod-a").coordinated(Candidacy::new("1.36.3", "1.36.0"));
    assert_eq!(valid.validate(), Ok(()));
    let with = |tweak: fn(&mut LeaderElectionConfig, &mut Candidacy)| {
        let mut config = valid.clone();
        let mut candidacy = config.coordinated.take().unwrap();
        tweak(&mut config, &mut candidacy);
        config.coordinated(candidacy).validate()
    };
    use LeaderElectionConfigError as E;
    assert_eq!(
        with(|c, _| c.identity = "Pod_A".into()),
        Err(E::NotAnObjectName("Pod_A".into())),
        "the identity names the LeaseCandidate"
    );
    assert_eq!(
        with(|c, _| c.identity = "pod-a-".into()),
        Err(E::NotAnObjectName("pod-a-".into()))
    );
    assert_eq!(with(|c, _| c.identity = "pod-a.x1".into()), Ok(()));
    assert_eq!(
        with(|_, k| k.binary_version.clear()),
        Err(E::Empty("binary_version"))
    );
    for (version, ok) in [
        ("1.36", false),
        ("v1.36.3", false),
        ("1.036.3", false),
        ("1.36.3-beta.0+abc", true),
        ("1.36.3-", false),
        ("1.36.3+a_b", false),
    ] {
        let mut candidacy = Candidacy::new(version, "1.0.0");
        candidacy.strategy = OLDEST_EMULATION_VERSION.into();
        let result = candidacy.validate("pod-a");
        assert_eq!(result.is_ok(), ok, "{version}: {result:?}");
    }
    assert_eq!(
        with(|_, k| k.emulation_version.clear()),
        Err(E::Empty("emulation_version")),
        "the oldest-emulation-version strategy needs one"
    );
    assert_eq!(
        with(|_, k| {
            k.emulation_version.clear();
            k.strategy = "example.com/mine".into();
        }),
        Ok(())
    );
    assert_eq!(
        with(|_, k| k.emulation_version = "1.37.0".into()),
        Err(E::EmulationNewerThanBinary)
    );
    assert_eq!(with(|_, k| k.strategy.clear()), Err(E::Empty("strategy")));
    assert_eq!(
        with(|_, k| k.renew_interval = Duration::ZERO),
        Err(E::NotPositive("renew_interval"))
    );
    assert_eq!(
        Candidacy::new("1.36.3", "1.36.0").renew_interval,
        CANDIDATE_RENEW_INTERVAL
    );
}

#[tokio::test]
async fn a_coordinated_elector_on_a_lock_without_candidates_warns_that_none_is_announced() {
    let logs = crate::log_capture::LogCapture::start();
    let config = config("a").coordinated(Candidacy::new("1.36.3", "1.36.0"));
    let elector = LeaderElector::new(config, MemoryLock::new("election", "a")).unwrap();
    assert!(format!("{elector:?}").contains("candidate: None"));
    let warnings = logs.with_message(
        "coordinated election with a lock that announces no LeaseCandidate: the coordinator elects only announced candidates",
    );
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].level, tracing::Level::WARN);
}

#[tokio::test]
async fn the_lock_must_write_the_configured_identity() {
    let error = LeaderElector::new(config("a"), MemoryLock::new("election", "b")).unwrap_err();
    assert_eq!(
        error,
        LeaderElectionConfigError::IdentityMismatch {
            config: "a".into(),
            lock: "b".into()
        }
    );
}

#[tokio::test(start_paused = true)]
async fn the_guard_is_valid_right_after_a_renew_until_lease_duration_minus_margin() {
    let lock = lock();
    let a = start(&lock, "a");
    sleep(ms(6_500)).await;
    let renewed = last_write_by(&lock, "a").at;
    assert_eq!(renewed, Instant::now() - ms(500));
    let margin = config("a").effective_guard_margin();
    assert_eq!(a.guard.valid_until(), Some(renewed + LEASE - margin));
    assert_eq!(a.guard.check(), Ok(()));

    // Freeze (no task runs while the clock jumps) to just before, then just at, the guard's end.
    let to_end = renewed + LEASE - margin - Instant::now();
    tokio::time::advance(to_end - ms(1)).now_or_never();
    assert!(a.guard.is_valid());
    tokio::time::advance(ms(1)).now_or_never();
    assert_eq!(a.guard.check(), Err(LeadershipLost));
}

#[tokio::test(start_paused = true)]
async fn the_guard_lapses_for_a_frozen_leader_before_its_elector_runs_or_writes() {
    let lock = lock();
    let a = start_with(&lock, "a", |config| config.release_on_cancel = true);
    let b = start(&lock, "b");
    sleep(ms(4_100)).await;
    assert!(a.guard.is_valid());
    let writes_before = lock.writes().len();

    // The process is frozen for more than a lease: the clock jumps while no task runs, as on
    // SIGSTOP or a VM pause. The leader's code resumes first and checks before writing.
    tokio::time::advance(LEASE + Duration::from_secs(1)).now_or_never();
    assert_eq!(a.guard.check(), Err(LeadershipLost));
    assert_eq!(lock.writes().len(), writes_before, "nothing written yet");
    assert!(
        a.recorder.stopped_at().is_none(),
        "the elector's timers have not fired yet"
    );

    // Once the elector runs, it finds its renew deadline passed and stops without renewing.
    assert_eq!(a.run.await.unwrap(), ElectionEnd::LeadershipLost);
    assert_eq!(
        lock.writes()[writes_before..]
            .iter()
            .filter(|write| write.identity == "a")
            .count(),
        0,
        "a late leader neither renews nor releases"
    );
    // b may first see a's last renew only now (its clock jumped too): up to a lease from now.
    sleep(LEASE + max_acquire_wait()).await;
    assert!(b.recorder.started_at().is_some());
}

#[tokio::test(start_paused = true)]
async fn run_leading_stops_the_controller_when_leadership_is_lost() {
    let lock = lock();
    let elector = LeaderElector::new(config("a"), lock.for_identity("a")).unwrap();
    let queue = RateLimitingQueue::new(default_controller_rate_limiter());
    let reconciled = Arc::new(AtomicUsize::new(0));
    let guard_failures = Arc::new(AtomicUsize::new(0));
    let run = tokio::spawn({
        let (queue, reconciled, guard_failures) =
            (queue.clone(), reconciled.clone(), guard_failures.clone());
        elector.run_leading(CancellationToken::new(), move |leader, guard| {
            Controller::new(queue).run(leader, move |_key: String| {
                let (guard, reconciled, guard_failures) =
                    (guard.clone(), reconciled.clone(), guard_failures.clone());
                async move {
                    if guard.check().is_err() {
                        guard_failures.fetch_add(1, Ordering::SeqCst);
                        return Ok::<_, LeadershipLost>(Action::Done);
                    }
                    reconciled.fetch_add(1, Ordering::SeqCst);
                    Ok(Action::RequeueAfter(Duration::from_secs(1)))
                }
            })
        })
    });
    queue.add("default/web".to_string());
    sleep(Duration::from_secs(10)).await;
    assert!(reconciled.load(Ordering::SeqCst) >= 9);
    lock.set_fault("a", Fault::Fail);
    assert_eq!(run.await.unwrap(), ElectionEnd::LeadershipLost);
    assert!(
        queue.is_shutting_down(),
        "run_leading returned after the controller"
    );
    // Keys still queued at the loss are handed out while the controller drains; the revoked
    // guard turns them away (at most the one key here).
    assert!(guard_failures.load(Ordering::SeqCst) <= 1);
    let reconciled_at_loss = reconciled.load(Ordering::SeqCst);
    sleep(Duration::from_secs(10)).await;
    assert_eq!(reconciled.load(Ordering::SeqCst), reconciled_at_loss);
}

/// A step of a fault schedule: after `after`, change one replica's fault or cancel its term.
#[derive(Debug, Clone)]
enum Step {
    SetFault(usize, Option<Fault>),
    CancelTerm(usize),
}

fn fault() -> impl Strategy<Value = Option<Fault>> {
    prop_oneof![
        Just(None),
        Just(Some(Fault::Fail)),
        Just(Some(Fault::Hang)),
        Just(Some(Fault::LoseAnswer)),
        (0..12_000u64).prop_map(|n| Some(Fault::Slow(ms(n)))),
    ]
}

fn schedule() -> impl Strategy<Value = Vec<(Duration, Step)>> {
    let step = prop_oneof![
        3 => (0..3usize, fault()).prop_map(|(replica, fault)| Step::SetFault(replica, fault)),
        1 => (0..3usize).prop_map(Step::CancelTerm),
    ];
    prop::collection::vec(((0..20_000u64).prop_map(ms), step), 1..25)
}

/// One leading interval of one term; `end` is `None` while leading.
#[derive(Debug, Clone)]
struct Interval {
    replica: usize,
    start: Instant,
    end: Option<Instant>,
}

/// Records one term's leading interval into the shared list.
struct IntervalRecorder {
    replica: usize,
    intervals: Arc<Mutex<Vec<Interval>>>,
    index: Mutex<Option<usize>>,
}

impl LeaderCallbacks for IntervalRecorder {
    fn on_started_leading(&self, _leader: CancellationToken, _guard: LeaseGuard) {
        let mut intervals = self.intervals.lock();
        *self.index.lock() = Some(intervals.len());
        intervals.push(Interval {
            replica: self.replica,
            start: Instant::now(),
            end: None,
        });
    }
    fn on_stopped_leading(&self) {
        if let Some(index) = *self.index.lock() {
            self.intervals.lock()[index].end = Some(Instant::now());
        }
    }
}

/// Runs three replicas, each starting a new term whenever the previous one ends, through
/// `schedule`; returns every leading interval.
async fn simulate(schedule: Vec<(Duration, Step)>, release_on_cancel: [bool; 3]) -> Vec<Interval> {
    let lock = lock();
    let intervals = Arc::new(Mutex::new(Vec::new()));
    let everything = CancellationToken::new();
    let terms: Arc<Mutex<[CancellationToken; 3]>> = Arc::new(Mutex::new(Default::default()));
    let mut replicas = Vec::new();
    for (replica, release) in release_on_cancel.into_iter().enumerate() {
        let (lock, intervals, everything, terms) = (
            lock.clone(),
            intervals.clone(),
            everything.clone(),
            terms.clone(),
        );
        replicas.push(tokio::spawn(async move {
            let identity = format!("replica-{replica}");
            while !everything.is_cancelled() {
                let mut config = config(&identity);
                config.release_on_cancel = release;
                let elector = LeaderElector::new(config, lock.for_identity(&identity)).unwrap();
                let term = everything.child_token();
                terms.lock()[replica] = term.clone();
                let recorder = IntervalRecorder {
                    replica,
                    intervals: intervals.clone(),
                    index: Mutex::new(None),
                };
                elector.run(term, recorder).await;
            }
        }));
    }
    for (after, step) in schedule {
        sleep(after).await;
        match step {
            Step::SetFault(replica, Some(fault)) => {
                lock.set_fault(&format!("replica-{replica}"), fault)
            }
            Step::SetFault(replica, None) => lock.heal(&format!("replica-{replica}")),
            Step::CancelTerm(replica) => terms.lock()[replica].cancel(),
        }
    }
    sleep(Duration::from_secs(60)).await;
    everything.cancel();
    for replica in replicas {
        replica.await.unwrap();
    }
    let intervals = intervals.lock().clone();
    intervals
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The invariant of the module docs: whatever the lock's failures, hangs and slow answers,
    /// and however terms are cancelled, no two terms ever lead at the same instant.
    #[test]
    fn leading_intervals_never_overlap_under_random_faults(
        schedule in schedule(),
        release_on_cancel in any::<[bool; 3]>(),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        let intervals = runtime.block_on(simulate(schedule, release_on_cancel));
        prop_assert!(!intervals.is_empty(), "someone led at some point");
        for (i, a) in intervals.iter().enumerate() {
            let a_end = a.end.expect("every term ended by the end of the run");
            for b in &intervals[i + 1..] {
                let b_end = b.end.expect("every term ended by the end of the run");
                prop_assert!(
                    a_end <= b.start || b_end <= a.start,
                    "replica {} led {:?}..{:?} while replica {} led {:?}..{:?}",
                    a.replica, a.start, a_end, b.replica, b.start, b_end
                );
            }
        }
    }
}
