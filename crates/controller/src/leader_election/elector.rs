//! The elector: acquire, renew, stop leading in time, release.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use tokio::time::{sleep, sleep_until, timeout_at, Instant};
use tokio_util::sync::CancellationToken;

use super::config::{LeaderElectionConfig, LeaderElectionConfigError, JITTER_FACTOR};
use super::guard::LeaseGuard;
use super::lease_candidate::LeaseCandidate;
use super::lock::{LeaseLock, LockError, RawVersion};
use super::record::LeaderElectionRecord;
use crate::events::EventType;

/// The lease duration written on release (client-go writes 1 s): with no holder, the lease is
/// free at once anyway; the short duration tells older implementations the same.
const RELEASED_LEASE_DURATION: Duration = Duration::from_secs(1);

/// The first pause between two release attempts; it doubles up to the retry period.
const RELEASE_FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// What an elector calls as leadership changes. Every method has a no-op default, and `()`
/// implements the trait with all of them.
///
/// Called on the elector's task, in this order for one term: [`on_new_leader`] with our identity,
/// [`on_started_leading`], then [`on_stopped_leading`]. They must return quickly: spawn
/// long-running work (see [`LeaderElector::run_leading`] for running it on the elector's task
/// instead).
///
/// [`on_new_leader`]: LeaderCallbacks::on_new_leader
/// [`on_started_leading`]: LeaderCallbacks::on_started_leading
/// [`on_stopped_leading`]: LeaderCallbacks::on_stopped_leading
pub trait LeaderCallbacks: Send + Sync {
    /// We became the leader. `leader` is cancelled when leadership ends; `guard` says, on the
    /// clock, whether the lease is still ours (check it before each write).
    fn on_started_leading(&self, leader: CancellationToken, guard: LeaseGuard) {
        let _ = (leader, guard);
    }

    /// We stopped leading: `leader` is already cancelled and the guard revoked. Not called if we
    /// never led (client-go calls it anyway).
    fn on_stopped_leading(&self) {}

    /// The observed holder changed to `identity` (ours included). Not called for an empty holder.
    fn on_new_leader(&self, identity: &str) {
        let _ = identity;
    }
}

impl LeaderCallbacks for () {}

/// Why [`LeaderElector::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionEnd {
    /// The cancellation token fired (while acquiring, or while leading: then the lease was
    /// released if configured).
    Cancelled,
    /// We were leading and could not renew within the renew deadline, or saw another holder.
    LeadershipLost,
}

/// What this elector last saw in the lock (client-go's `observedRecord` and `observedTime`).
///
/// Invariant: `observed_at` is the monotonic instant at which we first saw the current
/// (`record`, `version`); a lease is judged expired only once `observed_at + lease_duration` has
/// passed on *our* clock. The holder's timestamps are never consulted.
pub(super) struct Observed {
    pub(super) record: Option<LeaderElectionRecord>,
    version: Option<RawVersion>,
    pub(super) observed_at: Instant,
    /// The holder last reported to `on_new_leader`.
    reported_leader: Option<String>,
}

/// Competes for a [`LeaseLock`] with client-go's semantics and runs the leader's work while it
/// holds it. One elector runs one term: [`run`](Self::run) and
/// [`run_leading`](Self::run_leading) consume it.
///
/// - **Acquire**: try at once, then every `retry_period` jittered by [`JITTER_FACTOR`]. A lease
///   held by another identity is taken over only once `lease_duration` (as written in the
///   record) has passed on our monotonic clock since we last saw the record change.
/// - **Renew**: every `retry_period` after the last success; attempts are bounded by, and the
///   elector stops leading at, *last successful renew's start + renew_deadline* (stricter than
///   client-go, which counts the deadline from the start of each renew round). As
///   `renew_deadline < lease_duration`, we stop before anyone else may take over.
/// - **Stop**: revoke the [`LeaseGuard`], cancel the leader token, wait for the leader's work
///   (in `run_leading`), call `on_stopped_leading`, then, when cancelled, release the lease
///   (empty holder, 1 s lease) unless `release_on_cancel` was turned off.
/// - **Cancelled while acquiring**: if the last attempt may have written us as holder (it was
///   in flight, failed with an unknown outcome, or succeeded too late to lead), one release
///   attempt is made, bounded by the retry period, unless `release_on_cancel` was turned off: an
///   acquiring write that landed after we stopped caring would otherwise keep the lease from
///   everyone for a lease duration (client-go releases nothing there). A release writes only
///   over a lease that a fresh read shows naming us.
///
/// ```
/// use std::time::Duration;
/// use controller::leader_election::{
///     ElectionEnd, LeaderElectionConfig, LeaderElector, LeaseLock, MemoryLock,
/// };
/// use controller::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let lock = MemoryLock::new("my-controller", "pod-a");
/// let config = LeaderElectionConfig::new("my-controller", "pod-a"); // releases on cancel
/// let elector = LeaderElector::new(config, lock.clone()).unwrap();
///
/// let cancel = CancellationToken::new();
/// let stop = cancel.clone();
/// let end = elector
///     .run_leading(cancel, |leader, guard| async move {
///         guard.check().expect("just acquired"); // before each write
///         // ... run the controller until `leader` is cancelled ...
///         tokio::time::sleep(Duration::from_secs(30)).await; // renewed meanwhile
///         stop.cancel();
///         leader.cancelled().await;
///     })
///     .await;
/// assert_eq!(end, ElectionEnd::Cancelled);
/// assert_eq!(lock.record().unwrap().holder(), None, "released");
/// # }
/// ```
pub struct LeaderElector<L> {
    pub(super) config: LeaderElectionConfig,
    lock: L,
    description: String,
    pub(super) observed: Arc<Mutex<Observed>>,
    guard: LeaseGuard,
    /// Whether the lock's lack of an object to record events against has been logged: once,
    /// not at every event.
    warned_no_reference: AtomicBool,
    /// Coordinated election: our candidate, run for as long as the elector runs.
    candidate: Option<LeaseCandidate>,
}

impl<L> std::fmt::Debug for LeaderElector<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("lock", &self.description)
            .field("guard", &self.guard)
            .field(
                "candidate",
                &self.candidate.as_ref().map(LeaseCandidate::name),
            )
            .finish_non_exhaustive()
    }
}

/// How one acquire-or-renew attempt ended.
enum Attempt {
    /// We hold the lease, as of the attempt's start.
    Held,
    /// Another identity holds a lease that has not expired by our clock.
    HeldByOther,
    /// Coordinated election: the lease is missing, expired or names another holder; only the
    /// coordinator (the API server) assigns it.
    NotAssigned,
    /// Coordinated election: the lease names us but also a preferred holder, so our term is
    /// over: we do not renew it and let it run out.
    EndOfTerm,
}

impl<L: LeaseLock> LeaderElector<L> {
    /// An elector for `config` over `lock`, after [`LeaderElectionConfig::validate`] and a check
    /// that the lock writes the configured identity. In coordinated election, the lock's
    /// [`candidate`](LeaseLock::candidate) is taken now, to run with the elector.
    pub fn new(config: LeaderElectionConfig, lock: L) -> Result<Self, LeaderElectionConfigError> {
        config.validate()?;
        if lock.identity() != config.identity {
            return Err(LeaderElectionConfigError::IdentityMismatch {
                config: config.identity.clone(),
                lock: lock.identity().to_string(),
            });
        }
        let candidate = config.coordinated.as_ref().and_then(|candidacy| {
            let candidate = lock.candidate(candidacy);
            if candidate.is_none() {
                tracing::warn!(
                    identity = %config.identity,
                    lock = %lock.describe(),
                    "coordinated election with a lock that announces no LeaseCandidate: the coordinator elects only announced candidates"
                );
            }
            candidate
        });
        Ok(Self {
            candidate,
            description: lock.describe(),
            config,
            lock,
            observed: Arc::new(Mutex::new(Observed {
                record: None,
                version: None,
                observed_at: Instant::now(),
                reported_leader: None,
            })),
            guard: LeaseGuard::new(),
            warned_no_reference: AtomicBool::new(false),
        })
    }

    /// This elector extends and revokes `guard` instead of a guard of its own: the successive
    /// terms of one replica (a shard ring's member re-joining after a lapse) then share one guard
    /// that its writers hold for good. Terms never overlap, so neither do their validities.
    pub(crate) fn sharing_guard(mut self, guard: LeaseGuard) -> Self {
        guard.revoke();
        self.guard = guard;
        self
    }

    /// The guard of this elector's term (invalid until it leads, and again after).
    pub fn guard(&self) -> LeaseGuard {
        self.guard.clone()
    }

    /// The configuration.
    pub fn config(&self) -> &LeaderElectionConfig {
        &self.config
    }

    /// Competes for the lease until `cancel` fires or leadership is lost, calling `callbacks` as
    /// leadership changes (see [`LeaderCallbacks`]).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future while leading neither cancels the leader token nor
    /// releases the Lease (another replica takes it once it runs out), and the guard lapses only by
    /// the clock (L6). Stop it with `cancel`, which does both.
    pub async fn run<C: LeaderCallbacks>(
        self,
        cancel: CancellationToken,
        callbacks: C,
    ) -> ElectionEnd {
        self.elect(cancel, &callbacks, |leader, guard| {
            callbacks.on_started_leading(leader, guard);
            std::future::ready(())
        })
        .await
    }

    /// Competes for the lease and, while leading, runs `lead(leader_token, guard)` on this task,
    /// concurrently with the renewals. When leadership ends (lost, or `cancel`), the guard is
    /// revoked and `leader_token` cancelled; `run_leading` then waits for `lead` to return before
    /// releasing the lease (with `release_on_cancel`) and returning.
    ///
    /// With a [`Controller`](crate::Controller):
    /// `elector.run_leading(cancel, |leader, guard| controller.run(leader, reconcile))`. Its
    /// workers stop taking keys when the token fires; reconciles in flight, and keys already
    /// queued, still run to completion, so writes in reconcile should be preceded by
    /// [`guard.check()`](LeaseGuard::check) (hand a clone of the guard to the reconcile function).
    /// `lead` should not block the thread: the renewals share this task.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future drops `lead`'s future with it, cancels no leader token
    /// and releases no Lease (another replica takes it once it runs out); the guard lapses only by the
    /// clock (L6). Stop it with `cancel`, which revokes the guard, waits for `lead` and releases.
    pub async fn run_leading<F, Fut>(self, cancel: CancellationToken, lead: F) -> ElectionEnd
    where
        F: FnOnce(CancellationToken, LeaseGuard) -> Fut,
        Fut: Future<Output = ()>,
    {
        self.elect(cancel, &(), lead).await
    }

    /// One term, with our candidate announced (coordinated election) from its start until the
    /// term is over, the lease released included (rule LC1).
    async fn elect<C, F, Fut>(
        mut self,
        cancel: CancellationToken,
        callbacks: &C,
        lead: F,
    ) -> ElectionEnd
    where
        C: LeaderCallbacks,
        F: FnOnce(CancellationToken, LeaseGuard) -> Fut,
        Fut: Future<Output = ()>,
    {
        let Some(candidate) = self.candidate.take() else {
            return self.term(cancel, callbacks, lead).await;
        };
        let announcing = CancellationToken::new();
        let announce = candidate.run(announcing.clone());
        let term = async {
            let end = self.term(cancel, callbacks, lead).await;
            announcing.cancel();
            end
        };
        let (end, ()) = futures::join!(term, announce);
        end
    }

    /// Acquire, lead while renewing, stop, release.
    async fn term<C, F, Fut>(
        &self,
        cancel: CancellationToken,
        callbacks: &C,
        lead: F,
    ) -> ElectionEnd
    where
        C: LeaderCallbacks,
        F: FnOnce(CancellationToken, LeaseGuard) -> Fut,
        Fut: Future<Output = ()>,
    {
        let acquired = match self.acquire(&cancel, callbacks).await {
            Ok(acquired) => acquired,
            Err(MaybeWritten(maybe_ours)) => {
                if maybe_ours && self.config.release_on_cancel {
                    self.release_once().await;
                }
                return ElectionEnd::Cancelled;
            }
        };
        self.guard.extend_to(self.guard_end(acquired));
        let leader = CancellationToken::new();
        let work = lead(leader.clone(), self.guard.clone());
        let renew = async {
            let end = self.renew(&cancel, acquired, callbacks).await;
            // Revoked before the token fires: whoever wakes on the token finds the guard invalid.
            self.guard.revoke();
            leader.cancel();
            end
        };
        let (end, ()) = futures::join!(renew, work);
        tracing::info!(
            identity = %self.config.identity,
            lock = %self.description,
            reason = ?end,
            "stopped leading"
        );
        callbacks.on_stopped_leading();
        if end == ElectionEnd::Cancelled && self.config.release_on_cancel {
            self.release().await;
        }
        self.record_event("stopped leading");
        end
    }

    /// client-go's `RecordEvent`: a Normal `LeaderElection` event "`<identity>` `<what>`" on
    /// the lock's object, when a recorder is configured (never blocks).
    /// A lock without an object records nothing, and says so once: an event missing without a
    /// word is the gap a lock that does not forward its object would leave.
    fn record_event(&self, what: &str) {
        let Some(recorder) = &self.config.event_recorder else {
            return;
        };
        let Some(object) = self.lock.object_reference() else {
            if !self.warned_no_reference.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    identity = %self.config.identity,
                    lock = %self.description,
                    "leader-election events are not recorded: the lock has no object to record them against (LeaseLock::object_reference is None)"
                );
            }
            return;
        };
        recorder.eventf(
            &object,
            EventType::Normal,
            "LeaderElection",
            format_args!("{} {what}", self.config.identity),
        );
    }

    /// Tries until we hold the lease; returns the successful attempt's start, or, when
    /// cancelled, whether the lease may now name us.
    async fn acquire<C: LeaderCallbacks>(
        &self,
        cancel: &CancellationToken,
        callbacks: &C,
    ) -> Result<Instant, MaybeWritten> {
        tracing::info!(
            identity = %self.config.identity,
            lock = %self.description,
            "attempting to acquire leader lease"
        );
        // Whether the last attempt may have written us as holder without our leading.
        let mut maybe_ours = false;
        loop {
            let start = Instant::now();
            let deadline = start + self.config.renew_deadline;
            if cancel.is_cancelled() {
                return Err(MaybeWritten(maybe_ours));
            }
            let attempt = tokio::select! {
                biased; // cancellation first: a cancelled elector starts no new term
                // The attempt was started and cut short: its write may have landed.
                () = cancel.cancelled() => return Err(MaybeWritten(true)),
                attempt = timeout_at(deadline, self.try_acquire_or_renew(callbacks)) => attempt,
            };
            // Refused, or told another holds the lease: nothing of ours was written. Anything
            // else (success too late, a transport error, a timeout) may have written us.
            maybe_ours = !matches!(
                attempt,
                Ok(Ok(Attempt::HeldByOther
                    | Attempt::NotAssigned
                    | Attempt::EndOfTerm))
                    | Ok(Err(LockError::Conflict
                        | LockError::AlreadyExists
                        | LockError::NotFound))
            );
            match attempt {
                // An attempt that came back after the deadline could not keep our promise to
                // stop leading by then; the next attempt renews the lease if it is still ours.
                Ok(Ok(Attempt::Held)) if Instant::now() < deadline => {
                    tracing::info!(
                        identity = %self.config.identity,
                        lock = %self.description,
                        "successfully acquired lease"
                    );
                    self.record_event("became leader");
                    return Ok(start);
                }
                Ok(Ok(Attempt::Held)) => tracing::debug!("lease acquired too late; retrying"),
                Ok(Ok(Attempt::HeldByOther)) => tracing::debug!(
                    lock = %self.description,
                    "lease is held by another identity and has not yet expired"
                ),
                Ok(Ok(Attempt::NotAssigned | Attempt::EndOfTerm)) => tracing::debug!(
                    lock = %self.description,
                    "coordinated lease not assigned to us"
                ),
                Ok(Err(error)) => tracing::warn!(
                    lock = %self.description,
                    %error,
                    "failed to acquire lease"
                ),
                Err(_) => tracing::warn!(
                    lock = %self.description,
                    "acquire attempt timed out after the renew deadline"
                ),
            }
            let wait = jittered(self.config.retry_period);
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(MaybeWritten(maybe_ours)),
                () = sleep(wait) => {}
            }
        }
    }

    /// Renews every retry period until cancelled or until a renew cannot succeed by the last
    /// success's start + renew deadline.
    async fn renew<C: LeaderCallbacks>(
        &self,
        cancel: &CancellationToken,
        mut last_renew: Instant,
        callbacks: &C,
    ) -> ElectionEnd {
        loop {
            tokio::select! {
                biased;
                () = cancel.cancelled() => return ElectionEnd::Cancelled,
                () = sleep(self.config.retry_period) => {}
            }
            let deadline = last_renew + self.config.renew_deadline;
            loop {
                let start = Instant::now();
                if start >= deadline {
                    tracing::warn!(
                        identity = %self.config.identity,
                        lock = %self.description,
                        "failed to renew lease within the renew deadline"
                    );
                    return ElectionEnd::LeadershipLost;
                }
                let attempt = tokio::select! {
                    biased;
                    () = cancel.cancelled() => return ElectionEnd::Cancelled,
                    attempt = timeout_at(deadline, self.try_acquire_or_renew(callbacks)) => attempt,
                };
                match attempt {
                    // `timeout_at` polls the attempt before the timer: a renew that completes
                    // late (say after a freeze) must not count.
                    Ok(Ok(Attempt::Held)) if Instant::now() < deadline => {
                        last_renew = start;
                        self.guard.extend_to(self.guard_end(start));
                        tracing::trace!(identity = %self.config.identity, "renewed lease");
                        break;
                    }
                    Ok(Ok(Attempt::Held)) | Err(_) => {
                        tracing::warn!(
                            identity = %self.config.identity,
                            lock = %self.description,
                            "failed to renew lease within the renew deadline"
                        );
                        return ElectionEnd::LeadershipLost;
                    }
                    Ok(Ok(Attempt::HeldByOther | Attempt::NotAssigned)) => {
                        tracing::warn!(
                            identity = %self.config.identity,
                            lock = %self.description,
                            "lease taken over by another identity"
                        );
                        return ElectionEnd::LeadershipLost;
                    }
                    Ok(Ok(Attempt::EndOfTerm)) => {
                        tracing::info!(
                            identity = %self.config.identity,
                            lock = %self.description,
                            "lease marked as end of term (preferred holder set); not renewing"
                        );
                        return ElectionEnd::LeadershipLost;
                    }
                    Ok(Err(error)) => tracing::warn!(
                        lock = %self.description,
                        %error,
                        "failed to renew lease; retrying until the renew deadline"
                    ),
                }
                let next = (Instant::now() + self.config.retry_period).min(deadline);
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return ElectionEnd::Cancelled,
                    () = sleep_until(next) => {}
                }
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: read the record, and write ourselves as holder unless
    /// another identity holds a lease that has not expired by our clock.
    ///
    /// A leader first tries the fast path: one conditional write over the record it last wrote
    /// or read. It reads only when that write meets a conflict (someone else wrote, or an
    /// earlier write of ours was stored but its answer lost) or a missing record.
    async fn try_acquire_or_renew<C: LeaderCallbacks>(
        &self,
        callbacks: &C,
    ) -> Result<Attempt, LockError> {
        let identity = &self.config.identity;
        let now_wall = SystemTime::now();
        let ours = |acquire_time, leader_transitions| LeaderElectionRecord {
            holder_identity: Some(identity.clone()),
            lease_duration: self.config.lease_duration,
            acquire_time,
            renew_time: now_wall,
            leader_transitions,
            // Not carried over: client-go's writes leave them out too.
            preferred_holder: None,
            strategy: None,
        };
        if self.config.coordinated.is_some() {
            return self.try_coordinated_renew(callbacks, ours).await;
        }
        if let Some((last, version)) = self.fast_path_basis() {
            let record = ours(last.acquire_time, last.leader_transitions);
            match self.lock.update(&record, &version).await {
                Ok(version) => {
                    self.observe(record, version, callbacks);
                    return Ok(Attempt::Held);
                }
                // The version we hold is stale or the record is gone: read it again below.
                Err(LockError::Conflict | LockError::NotFound) => tracing::debug!(
                    lock = %self.description,
                    "optimistic renew failed; reading the lease"
                ),
                Err(error) => return Err(error),
            }
        }
        let Some((current, version)) = self.lock.get().await? else {
            let record = ours(now_wall, 0);
            let version = self.lock.create(&record).await?;
            self.observe(record, version, callbacks);
            return Ok(Attempt::Held);
        };
        self.observe(current.clone(), version.clone(), callbacks);
        let record = match current.holder() {
            Some(holder) if holder == identity => {
                ours(current.acquire_time, current.leader_transitions)
            }
            Some(_) if !self.observed_lease_expired() => return Ok(Attempt::HeldByOther),
            // Expired, or released (no holder): a new holder is a transition.
            _ => ours(now_wall, current.leader_transitions.saturating_add(1)),
        };
        let version = self.lock.update(&record, &version).await?;
        self.observe(record, version, callbacks);
        Ok(Attempt::Held)
    }

    /// client-go's `tryCoordinatedRenew`: in coordinated election the API server's coordinator
    /// picks the holder among the candidates and writes it into the Lease; an elector only
    /// renews a lease that names it, that has not expired by our clock, and that names no
    /// preferred holder (which marks the end of its term). It never creates nor takes one.
    async fn try_coordinated_renew<C: LeaderCallbacks>(
        &self,
        callbacks: &C,
        ours: impl FnOnce(SystemTime, u32) -> LeaderElectionRecord,
    ) -> Result<Attempt, LockError> {
        let Some((current, version)) = self.lock.get().await? else {
            return Ok(Attempt::NotAssigned);
        };
        self.observe(current.clone(), version.clone(), callbacks);
        if self.observed_lease_expired() || current.holder() != Some(self.config.identity.as_str())
        {
            return Ok(Attempt::NotAssigned);
        }
        if current
            .preferred_holder
            .as_deref()
            .is_some_and(|preferred| !preferred.is_empty())
        {
            return Ok(Attempt::EndOfTerm);
        }
        let mut record = ours(current.acquire_time, current.leader_transitions);
        record.strategy = current.strategy;
        // The coordinator names a holder without an acquire time: our first renew's, rather
        // than the epoch.
        if record.acquire_time == UNIX_EPOCH {
            record.acquire_time = record.renew_time;
        }
        let version = self.lock.update(&record, &version).await?;
        self.observe(record, version, callbacks);
        Ok(Attempt::Held)
    }

    /// Records what we read or wrote, restarting the observed time if it changed, and reports a
    /// new holder.
    fn observe<C: LeaderCallbacks>(
        &self,
        record: LeaderElectionRecord,
        version: RawVersion,
        callbacks: &C,
    ) {
        let new_leader = {
            let mut observed = self.observed.lock();
            if observed.version.as_ref() != Some(&version)
                || observed.record.as_ref() != Some(&record)
            {
                observed.observed_at = Instant::now();
                observed.version = Some(version);
            }
            let holder = record.holder().map(str::to_string);
            observed.record = Some(record);
            if holder == observed.reported_leader {
                None
            } else {
                observed.reported_leader.clone_from(&holder);
                holder
            }
        };
        if let Some(leader) = new_leader {
            tracing::info!(
                identity = %self.config.identity,
                lock = %self.description,
                %leader,
                "new leader observed"
            );
            callbacks.on_new_leader(&leader);
        }
    }

    /// The record and version to renew from without reading, when we hold a lease that is still
    /// valid by our clock (client-go's `IsLeader() && isLeaseValid(now)`).
    fn fast_path_basis(&self) -> Option<(LeaderElectionRecord, RawVersion)> {
        let basis = {
            let observed = self.observed.lock();
            match (&observed.record, &observed.version) {
                (Some(record), Some(version))
                    if record.holder() == Some(self.config.identity.as_str()) =>
                {
                    Some((record.clone(), version.clone()))
                }
                _ => None,
            }
        };
        basis.filter(|_| !self.observed_lease_expired())
    }

    fn observed_lease_expired(&self) -> bool {
        let observed = self.observed.lock();
        let Some(record) = &observed.record else {
            return true;
        };
        // A duration too large to add comes from a broken writer: treat the lease as valid.
        observed
            .observed_at
            .checked_add(record.lease_duration)
            .is_some_and(|end| end <= Instant::now())
    }

    fn guard_end(&self, renew_start: Instant) -> Instant {
        renew_start + self.config.lease_duration - self.config.effective_guard_margin()
    }

    /// Writes an empty holder over the lease if a fresh read shows we still hold it, retrying
    /// (with backoff) until the renew deadline: a renew stored with its answer lost, or another
    /// write racing ours, leaves our last version stale, and a release from it alone would
    /// fail and leave the lease to run out.
    async fn release(&self) {
        let deadline = Instant::now() + self.config.renew_deadline;
        let mut backoff = RELEASE_FIRST_BACKOFF.min(self.config.retry_period);
        loop {
            match timeout_at(deadline, self.try_release()).await {
                Ok(Ok(Released::Now)) => {
                    tracing::info!(
                        identity = %self.config.identity,
                        lock = %self.description,
                        "released leader lease"
                    );
                    return;
                }
                Ok(Ok(Released::NotOurs)) => {
                    tracing::info!(
                        identity = %self.config.identity,
                        lock = %self.description,
                        "lease no longer held by us; nothing to release"
                    );
                    return;
                }
                Ok(Err(error)) => tracing::warn!(
                    lock = %self.description,
                    %error,
                    "failed to release leader lease; retrying until the renew deadline"
                ),
                Err(_) => {
                    tracing::warn!(
                        lock = %self.description,
                        "releasing the leader lease timed out"
                    );
                    return;
                }
            }
            if Instant::now() + backoff >= deadline {
                tracing::warn!(
                    lock = %self.description,
                    "gave up releasing the leader lease at the renew deadline"
                );
                return;
            }
            sleep(backoff).await;
            backoff = (backoff * 2).min(self.config.retry_period);
        }
    }

    /// After an acquire cut short by a cancel: one release attempt, bounded by the retry period
    /// and not retried. An elector that never led owes no more than that, and a cancel while the
    /// server is unreachable then costs a standby at most one retry period.
    async fn release_once(&self) {
        match tokio::time::timeout(self.config.retry_period, self.try_release()).await {
            Ok(Ok(Released::Now)) => tracing::info!(
                identity = %self.config.identity,
                lock = %self.description,
                "released the leader lease an acquire cut short had written"
            ),
            Ok(Ok(Released::NotOurs)) => {}
            Ok(Err(error)) => tracing::warn!(
                lock = %self.description,
                %error,
                "could not release the leader lease after a cancelled acquire; it runs out"
            ),
            Err(_) => tracing::warn!(
                lock = %self.description,
                "releasing the leader lease after a cancelled acquire timed out; it runs out"
            ),
        }
    }

    /// One release attempt: read the lease, and write the released record over it only if it
    /// names us as holder (stricter than client-go, which releases when it last *observed*
    /// itself as holder; the write is conditional on the version just read either way).
    async fn try_release(&self) -> Result<Released, LockError> {
        let Some((current, version)) = self.lock.get().await? else {
            return Ok(Released::NotOurs);
        };
        // No callbacks: the term is over, and a holder seen now is for the next elector to report.
        self.observe(current.clone(), version.clone(), &());
        if current.holder() != Some(self.config.identity.as_str()) {
            return Ok(Released::NotOurs);
        }
        let now_wall = SystemTime::now();
        let released = LeaderElectionRecord {
            holder_identity: None,
            lease_duration: RELEASED_LEASE_DURATION,
            acquire_time: now_wall,
            renew_time: now_wall,
            leader_transitions: current.leader_transitions,
            preferred_holder: None,
            strategy: None,
        };
        let version = self.lock.update(&released, &version).await?;
        self.observe(released, version, &());
        Ok(Released::Now)
    }
}

/// An acquire ended by cancellation: whether its last attempt may have written us as holder
/// (cut short in flight, failed with an unknown outcome, or succeeded too late to lead).
struct MaybeWritten(bool);

/// How a release attempt ended.
enum Released {
    /// We wrote the empty holder.
    Now,
    /// The lease is gone or held by someone else: nothing of ours to release.
    NotOurs,
}

/// client-go's `wait.Jitter(period, JitterFactor)`: `period × (1 + U[0,1) × 1.2)`.
fn jittered(period: Duration) -> Duration {
    period + period.mul_f64(rand::random::<f64>() * JITTER_FACTOR)
}
