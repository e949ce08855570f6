//! Membership of a shard ring: each replica holds its own Lease, and the members are the
//! replicas whose Lease has not run out.
//!
//! ```text
//!   replica a ── LeaderElector on Lease <ring>-a (labelled RING_LABEL=<ring>) ── LeaseGuard of a
//!   replica b ── LeaderElector on Lease <ring>-b ──────────────────────────── LeaseGuard of b
//!   any observer ── list Leases labelled RING_LABEL=<ring> every retry period ──► Membership
//!        members = holders of <ring>-<holder> whose lease_duration has not passed, on the
//!                  OBSERVER's clock, since the observer saw that Lease change
//! ```
//!
//! A member's Lease is held with the leader-election machinery, unchanged: nobody else competes
//! for `<ring>-<identity>`, so the elector acquires it at its first attempt (or takes back its
//! own Lease left by an earlier run of the same identity), renews it with one conditional update
//! per retry period, and releases it (an empty holder) when the ring is stopped by its token.
//! After a lapse (the API server out of reach past the renew deadline) the member starts a new
//! term on the same guard, so writers holding [`Ring::guard`] need nothing new.
//!
//! Rules (SH5–SH7 in docs/semantics.md):
//! - SH5: a Lease counts as a member only while `lease_duration` (as written in it) has not
//!   passed on the observer's monotonic clock since the observer last saw it change (its
//!   resourceVersion or content). The holder's `renewTime` is never read: it is another
//!   machine's clock (client-go's leader-election rule).
//! - SH6: a Lease whose holder is empty (released) or is not the identity its name carries
//!   (`<ring>-<holder>`) is no member; a Lease that disappears from the list is forgotten.
//! - SH7: an observer that first sees a Lease counts its lease from then, so a crashed member
//!   is seen as live for up to one lease duration by a replica started after it died: the ring
//!   errs towards keeping a member, and the fence (docs/sharding.md) keeps that safe.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use workqueue::shared_informer::reflector::store_index::Object;
use workqueue::shared_informer::reflector::{Client, ListOptions, RateLimit};

use crate::leader_election::{
    leases_api, lock_error, ApiLeaseLock, ElectionEnd, LeaderElectionConfig,
    LeaderElectionConfigError, LeaderElectionRecord, LeaderElector, LeaseGuard, LeaseLock,
    LockError, MemoryLock, RawVersion,
};

/// The label every shard Lease carries, valued with its ring's name, so that one list with a
/// label selector finds a ring's members.
pub const RING_LABEL: &str = "sharding.informer-rs.io/ring";

/// The name of `identity`'s shard Lease in `ring`: `<ring>-<identity>`.
pub fn shard_lease_name(ring: &str, identity: &str) -> String {
    format!("{ring}-{identity}")
}

/// One shard Lease as a listing returned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardLease {
    /// The Lease's name.
    pub name: String,
    /// Its content.
    pub record: LeaderElectionRecord,
    /// Its resourceVersion.
    pub version: RawVersion,
}

/// Where an observer reads a ring's shard Leases.
pub trait RingLeases: Send + Sync {
    /// Every shard Lease of `ring`, as stored now.
    fn list(&self, ring: &str) -> impl Future<Output = Result<Vec<ShardLease>, LockError>> + Send;
}

/// A ring's Leases on the API server: the `coordination.k8s.io/v1` Leases of one namespace
/// labelled [`RING_LABEL`]`=<ring>`, listed with that label selector.
#[derive(Clone)]
pub struct ApiRingLeases {
    client: Client,
    namespace: String,
}

impl std::fmt::Debug for ApiRingLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiRingLeases")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// The request budget of a replica's ring traffic, its own by default ([`ApiRingLeases::new`]):
/// a renewal and a listing every retry period need a few requests a second, and must never wait
/// behind the replica's reconciles in a shared budget, or the lease lapses under load.
pub const RING_RATE_LIMIT: RateLimit = RateLimit {
    qps: 10.0,
    burst: 20,
};

impl ApiRingLeases {
    /// The shard Leases in `namespace`, read and written through `client`'s connections with a
    /// request budget of their own, [`RING_RATE_LIMIT`] (see [`Client::with_rate_limit`]).
    pub fn new(client: Client, namespace: impl Into<String>) -> Self {
        Self::with_budget(client.with_rate_limit(Some(RING_RATE_LIMIT)), namespace)
    }

    /// The shard Leases in `namespace` through `client` as it is, sharing its request budget.
    pub fn with_budget(client: Client, namespace: impl Into<String>) -> Self {
        Self {
            client,
            namespace: namespace.into(),
        }
    }

    /// The [`ApiLeaseLock`] of `identity`'s shard Lease in `ring`: named
    /// [`shard_lease_name`]`(ring, identity)`, labelled [`RING_LABEL`]`=<ring>`.
    pub fn lock(&self, ring: &str, identity: &str) -> ApiLeaseLock {
        ApiLeaseLock::new(
            self.client.clone(),
            &self.namespace,
            shard_lease_name(ring, identity),
            identity,
        )
        .with_labels([(RING_LABEL, ring)])
    }
}

impl RingLeases for ApiRingLeases {
    async fn list(&self, ring: &str) -> Result<Vec<ShardLease>, LockError> {
        let api = leases_api(self.client.clone(), &self.namespace);
        let mut options = ListOptions {
            label_selector: Some(format!("{RING_LABEL}={ring}")),
            ..ListOptions::default()
        };
        let mut leases = Vec::new();
        loop {
            let page = api.list(&options).await.map_err(lock_error)?;
            for lease in page.items {
                let Some(version) = lease.resource_version() else {
                    continue;
                };
                leases.push(ShardLease {
                    name: lease.name().to_string(),
                    version: RawVersion::new(version),
                    record: lease.record(),
                });
            }
            match page.continue_token.filter(|token| !token.is_empty()) {
                Some(token) => options.continue_token = Some(token),
                None => return Ok(leases),
            }
        }
    }
}

/// A ring's Leases in memory, **for tests**: each member's [`MemoryLock`] is made here, and
/// [`list`](RingLeases::list) reads them all.
#[derive(Clone, Default)]
pub struct MemoryRingLeases {
    locks: Arc<Mutex<BTreeMap<String, MemoryLock>>>,
}

impl std::fmt::Debug for MemoryRingLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRingLeases")
            .field("leases", &self.locks.lock().keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The identity a [`MemoryRingLeases`] reads as, so that faults injected for a member's
/// identity leave the observers' reads alone.
const MEMORY_OBSERVER: &str = "ring-observer";

impl MemoryRingLeases {
    /// No Leases yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The lock of `identity`'s shard Lease in `ring` (created empty on first use; the same
    /// record afterwards).
    pub fn lock(&self, ring: &str, identity: &str) -> MemoryLock {
        let name = shard_lease_name(ring, identity);
        self.locks
            .lock()
            .entry(name.clone())
            .or_insert_with(|| MemoryLock::new(name, MEMORY_OBSERVER))
            .for_identity(identity)
    }
}

impl RingLeases for MemoryRingLeases {
    async fn list(&self, ring: &str) -> Result<Vec<ShardLease>, LockError> {
        let prefix = format!("{ring}-");
        let locks: Vec<(String, MemoryLock)> = self
            .locks
            .lock()
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix))
            .map(|(name, lock)| (name.clone(), lock.clone()))
            .collect();
        let mut leases = Vec::new();
        for (name, lock) in locks {
            if let Some((record, version)) = lock.get().await? {
                leases.push(ShardLease {
                    name,
                    record,
                    version,
                });
            }
        }
        Ok(leases)
    }
}

/// What an observer saw of one Lease, and since when (SH5).
#[derive(Debug, Clone)]
struct Seen {
    record: LeaderElectionRecord,
    version: RawVersion,
    changed_at: Instant,
}

/// One observer's view of a ring's members, judged on its own monotonic clock (SH5–SH7).
/// Feed it every listing with [`observe`](Self::observe); [`members`](Self::members) is then
/// pure.
#[derive(Debug, Clone)]
pub struct Membership {
    ring: String,
    seen: HashMap<String, Seen>,
}

impl Membership {
    /// Nothing seen yet of `ring`.
    pub fn new(ring: impl Into<String>) -> Self {
        Self {
            ring: ring.into(),
            seen: HashMap::new(),
        }
    }

    /// Takes in a complete listing of the ring's Leases, made now: a Lease that changed (or is
    /// new) restarts its count; one that is no longer listed is forgotten (SH6).
    pub fn observe(&mut self, leases: Vec<ShardLease>) {
        let now = Instant::now();
        let mut listed = HashMap::with_capacity(leases.len());
        for lease in leases {
            let seen = match self.seen.remove(&lease.name) {
                Some(seen) if seen.version == lease.version && seen.record == lease.record => seen,
                _ => Seen {
                    record: lease.record,
                    version: lease.version,
                    changed_at: now,
                },
            };
            listed.insert(lease.name, seen);
        }
        self.seen = listed;
    }

    /// The live members' identities, sorted: holders of a Lease named after them whose
    /// `lease_duration` has not passed since this observer saw it change.
    pub fn members(&self) -> Vec<String> {
        let now = Instant::now();
        let members: BTreeSet<String> = self
            .seen
            .iter()
            .filter_map(|(name, seen)| {
                let holder = seen.record.holder()?;
                if *name != shard_lease_name(&self.ring, holder) {
                    return None;
                }
                // A duration too large to add comes from a broken writer: counted as live,
                // as the elector counts it.
                let live = seen
                    .changed_at
                    .checked_add(seen.record.lease_duration)
                    .is_none_or(|end| now < end);
                live.then(|| holder.to_string())
            })
            .collect();
        members.into_iter().collect()
    }
}

/// A replica's place in a shard ring: it holds its own shard Lease and watches the others'.
///
/// ```
/// use std::time::Duration;
/// use controller::leader_election::LeaderElectionConfig;
/// use controller::sharding::{MemoryRingLeases, Ring};
/// use controller::CancellationToken;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let leases = MemoryRingLeases::new();
/// let ring = Ring::new("widgets", LeaderElectionConfig::new("widgets", "pod-a"), leases.clone()).unwrap();
/// let stop = CancellationToken::new();
/// let run = tokio::spawn({
///     let (ring, stop) = (ring.clone(), stop.clone());
///     async move { ring.run(ring.lock(), stop).await }
/// });
/// tokio::time::sleep(Duration::from_secs(1)).await;
/// assert_eq!(ring.members(), ["pod-a"]);
/// assert!(ring.guard().is_valid(), "its own shard lease is held");
/// stop.cancel();
/// run.await.unwrap().unwrap();
/// assert!(!ring.guard().is_valid());
/// # }
/// ```
pub struct Ring<S> {
    inner: Arc<RingInner<S>>,
}

impl<S> Clone for Ring<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

struct RingInner<S> {
    name: String,
    config: LeaderElectionConfig,
    source: S,
    membership: Mutex<Membership>,
    guard: LeaseGuard,
}

impl<S> std::fmt::Debug for Ring<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("name", &self.inner.name)
            .field("identity", &self.inner.config.identity)
            .field("guard", &self.inner.guard)
            .finish_non_exhaustive()
    }
}

impl<S: RingLeases> Ring<S> {
    /// The ring `name` as seen by the replica `config.identity`, which holds its Lease with
    /// `config`'s timings (client-go's 15 s / 10 s / 2 s from
    /// [`LeaderElectionConfig::new`]) and lists the others from `source` every retry period.
    pub fn new(
        name: impl Into<String>,
        config: LeaderElectionConfig,
        source: S,
    ) -> Result<Self, LeaderElectionConfigError> {
        config.validate()?;
        let name = name.into();
        Ok(Self {
            inner: Arc::new(RingInner {
                membership: Mutex::new(Membership::new(name.clone())),
                name,
                config,
                source,
                guard: LeaseGuard::new(),
            }),
        })
    }

    /// The ring's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// This replica's identity.
    pub fn identity(&self) -> &str {
        &self.inner.config.identity
    }

    /// The label selector of this replica's share (its objects carry the assignment label naming
    /// it): give it to the informers of its controller, so that the server filters and the
    /// replica caches only its objects. The same as [`shard_selector`](crate::sharding::shard_selector)`(name, identity)`.
    pub fn shard_selector(&self) -> String {
        crate::sharding::shard_selector(&self.inner.name, &self.inner.config.identity)
    }

    /// The guard of this replica's own shard Lease: valid while the Lease is held, by the
    /// monotonic clock (see [`LeaseGuard`]); the same guard across lapses and re-joins.
    pub fn guard(&self) -> LeaseGuard {
        self.inner.guard.clone()
    }

    /// How often the ring is listed (its config's `retry_period`), the pace of whatever follows
    /// the members, such as a [`RangeShard`](crate::sharding::RangeShard).
    pub fn retry_period(&self) -> Duration {
        self.inner.config.retry_period
    }

    /// The live members as last observed (SH5), sorted.
    pub fn members(&self) -> Vec<String> {
        self.inner.membership.lock().members()
    }

    /// Lists the ring's Leases once and updates the members.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: one listing; dropped, the members stay as they were.
    pub async fn refresh(&self) -> Result<(), LockError> {
        let leases = self.inner.source.list(&self.inner.name).await?;
        self.inner.membership.lock().observe(leases);
        Ok(())
    }

    /// Holds this replica's shard Lease through `lock` (which must be for
    /// [`shard_lease_name`]`(ring, identity)`: see [`ApiRingLeases::lock`] and
    /// [`MemoryRingLeases::lock`]) and refreshes the members every retry period, until
    /// `cancel` fires; then releases the Lease (unless the config's `release_on_cancel` is off)
    /// and returns. A lapse (renewals failing past the renew deadline) revokes the guard, and the
    /// member tries to join again at once. [`lock`](Self::lock) gives the right lock.
    ///
    /// # Errors
    ///
    /// At once, before anything is sent, when `lock` writes another identity than this replica's
    /// ([`LeaderElectionConfigError::IdentityMismatch`]): such a replica could never join.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropping the future releases nothing; the Lease runs out on its own and
    /// the guard lapses by the clock. Stop it with `cancel`.
    pub async fn run<L: LeaseLock>(
        &self,
        lock: L,
        cancel: CancellationToken,
    ) -> Result<(), LeaderElectionConfigError> {
        let lock = Arc::new(lock);
        // Every elector of the loop is built alike: the first one's refusal is the only one.
        LeaderElector::new(self.inner.config.clone(), lock.clone())?;
        let hold = async {
            loop {
                let elector = match LeaderElector::new(self.inner.config.clone(), lock.clone()) {
                    Ok(elector) => elector.sharing_guard(self.inner.guard.clone()),
                    Err(error) => {
                        tracing::error!(ring = %self.inner.name, %error, "cannot hold the shard lease");
                        return;
                    }
                };
                match elector.run(cancel.clone(), ()).await {
                    ElectionEnd::Cancelled => return,
                    ElectionEnd::LeadershipLost => tracing::warn!(
                        ring = %self.inner.name,
                        identity = %self.inner.config.identity,
                        "shard lease lapsed; joining the ring again"
                    ),
                }
            }
        };
        let observe = async {
            loop {
                if let Err(error) = self.refresh().await {
                    tracing::warn!(ring = %self.inner.name, %error, "failed to list the ring's leases");
                }
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(self.inner.config.retry_period) => {}
                }
            }
        };
        futures::join!(hold, observe);
        Ok(())
    }
}

impl Ring<ApiRingLeases> {
    /// The lock of this replica's own shard Lease ([`ApiRingLeases::lock`] for this ring's name
    /// and identity), for [`run`](Self::run).
    #[must_use]
    pub fn lock(&self) -> ApiLeaseLock {
        self.inner
            .source
            .lock(&self.inner.name, &self.inner.config.identity)
    }
}

impl Ring<MemoryRingLeases> {
    /// The lock of this replica's own shard Lease ([`MemoryRingLeases::lock`] for this ring's
    /// name and identity), for [`run`](Self::run).
    #[must_use]
    pub fn lock(&self) -> MemoryLock {
        self.inner
            .source
            .lock(&self.inner.name, &self.inner.config.identity)
    }
}

/// How long a member stays in the ring after its last renewal at most, as any observer counts
/// it: the lease duration plus one listing period (an observer sees a change only when it
/// lists).
pub fn max_departure_delay(config: &LeaderElectionConfig) -> Duration {
    config.lease_duration + config.retry_period
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader_election::Fault;
    use std::time::{SystemTime, UNIX_EPOCH};
    use tokio::task::JoinHandle;
    use tokio::time::sleep;

    const RING: &str = "widgets";

    fn config(identity: &str) -> LeaderElectionConfig {
        LeaderElectionConfig::new(RING, identity)
    }

    struct Member {
        ring: Ring<MemoryRingLeases>,
        stop: CancellationToken,
        run: JoinHandle<()>,
    }

    fn join(leases: &MemoryRingLeases, identity: &str) -> Member {
        let ring = Ring::new(RING, config(identity), leases.clone()).unwrap();
        let stop = CancellationToken::new();
        let run = tokio::spawn({
            let (ring, stop, lock) = (ring.clone(), stop.clone(), leases.lock(RING, identity));
            async move {
                ring.run(lock, stop)
                    .await
                    .expect("the lock is this member's")
            }
        });
        Member { ring, stop, run }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lock_of_another_identity_is_refused_before_anything_is_sent() {
        let leases = MemoryRingLeases::new();
        let ring = Ring::new(RING, config("a"), leases.clone()).unwrap();
        let outcome = ring
            .run(leases.lock(RING, "b"), CancellationToken::new())
            .await;
        assert!(
            matches!(
                outcome,
                Err(LeaderElectionConfigError::IdentityMismatch { .. })
            ),
            "{outcome:?}"
        );
        assert!(!ring.guard().is_valid());
        assert!(leases.list(RING).await.unwrap().iter().all(|l| l
            .record
            .holder_identity
            .as_deref()
            .unwrap_or("")
            .is_empty()));
        // The ring's own lock is the right one.
        assert_eq!(ring.lock().identity(), "a");
        assert_eq!(
            ring.shard_selector(),
            "shard.sharding.informer-rs.io/widgets=a"
        );
    }

    fn lease(name: &str, holder: Option<&str>, version: &str) -> ShardLease {
        ShardLease {
            name: name.into(),
            record: LeaderElectionRecord {
                holder_identity: holder.map(str::to_string),
                lease_duration: Duration::from_secs(15),
                // The holder's clock, far in the past: never read (SH5).
                acquire_time: UNIX_EPOCH,
                renew_time: UNIX_EPOCH,
                leader_transitions: 0,
                preferred_holder: None,
                strategy: None,
            },
            version: RawVersion::new(version),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_counts_for_its_duration_on_the_observers_clock_from_its_last_change() {
        let mut membership = Membership::new(RING);
        membership.observe(vec![lease("widgets-a", Some("a"), "1")]);
        assert_eq!(
            membership.members(),
            ["a"],
            "renewTime in 1970 does not matter"
        );
        sleep(Duration::from_secs(10)).await;
        // Listed again unchanged: the count goes on from the first sight.
        membership.observe(vec![lease("widgets-a", Some("a"), "1")]);
        sleep(Duration::from_millis(4_999)).await;
        assert_eq!(membership.members(), ["a"]);
        sleep(Duration::from_millis(1)).await;
        assert!(membership.members().is_empty(), "15 s without a change");
        // A renewal (a new version) brings it back.
        membership.observe(vec![lease("widgets-a", Some("a"), "2")]);
        assert_eq!(membership.members(), ["a"]);
    }

    #[tokio::test(start_paused = true)]
    async fn released_foreign_and_vanished_leases_are_no_members() {
        let mut membership = Membership::new(RING);
        membership.observe(vec![
            lease("widgets-a", Some("a"), "1"),
            lease("widgets-b", None, "2"),
            lease("widgets-c", Some("d"), "3"),
            lease("widgets-e", Some(""), "4"),
        ]);
        assert_eq!(membership.members(), ["a"]);
        membership.observe(vec![]);
        assert!(membership.members().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn members_hold_their_own_leases_and_every_member_sees_all() {
        let leases = MemoryRingLeases::new();
        let a = join(&leases, "a");
        let b = join(&leases, "b");
        // The first attempt acquires; the next listing (a retry period later) sees it.
        sleep(Duration::from_secs(3)).await;
        for member in [&a, &b] {
            assert_eq!(member.ring.members(), ["a", "b"]);
            assert!(member.ring.guard().is_valid());
        }
        let own = leases.lock(RING, "a");
        assert_eq!(own.record().unwrap().holder(), Some("a"));
        // Renewed with one conditional update per retry period, no reads.
        let before = own.calls().len();
        sleep(Duration::from_secs(20)).await;
        let calls = own.calls();
        let by_a: Vec<_> = calls[before..]
            .iter()
            .filter(|c| c.identity == "a")
            .collect();
        assert_eq!(by_a.len(), 10, "one call per 2 s: {by_a:?}");
        assert!(by_a
            .iter()
            .all(|c| c.op == crate::leader_election::LockOp::Update));
        for member in [a, b] {
            member.stop.cancel();
            member.run.await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_member_that_stops_renewing_leaves_once_its_lease_ran_out_for_the_observer() {
        let leases = MemoryRingLeases::new();
        let a = join(&leases, "a");
        let b = join(&leases, "b");
        sleep(Duration::from_secs(3)).await;
        let b_lock = leases.lock(RING, "b");
        b_lock.set_fault("b", Fault::Hang); // b's requests never arrive; observers read on
        let last_renew = b_lock.writes().last().unwrap().at;
        // a saw that renewal at a listing made at or after it: b counts for 15 s from then.
        sleep_until_instant(last_renew + Duration::from_millis(14_999)).await;
        assert_eq!(a.ring.members(), ["a", "b"]);
        assert!(
            !b.ring.guard().is_valid(),
            "b's own guard lapsed first (renew deadline)"
        );
        // At most one listing period later it is gone.
        sleep_until_instant(
            last_renew + max_departure_delay(&config("a")) + Duration::from_millis(1),
        )
        .await;
        assert_eq!(a.ring.members(), ["a"]);
        a.stop.cancel();
        b.stop.cancel();
        a.run.await.unwrap();
        b_lock.heal("b");
        b.run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_graceful_stop_releases_the_lease_and_the_member_leaves_at_the_next_listing() {
        let leases = MemoryRingLeases::new();
        let a = join(&leases, "a");
        let b = join(&leases, "b");
        sleep(Duration::from_secs(3)).await;
        assert_eq!(a.ring.members(), ["a", "b"]);
        b.stop.cancel();
        b.run.await.unwrap();
        assert_eq!(
            leases.lock(RING, "b").record().unwrap().holder(),
            None,
            "released"
        );
        assert!(!b.ring.guard().is_valid());
        sleep(config("a").retry_period).await;
        assert_eq!(
            a.ring.members(),
            ["a"],
            "long before the 15 s lease would run out"
        );
        a.stop.cancel();
        a.run.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_lapsed_member_joins_again_on_the_same_guard() {
        let leases = MemoryRingLeases::new();
        let a = join(&leases, "a");
        sleep(Duration::from_secs(1)).await;
        let guard = a.ring.guard();
        assert!(guard.is_valid());
        let lock = leases.lock(RING, "a");
        lock.set_fault("a", Fault::Fail);
        sleep(Duration::from_secs(13)).await;
        assert!(!guard.is_valid(), "renew deadline passed without a renewal");
        lock.heal("a");
        // The attempt due last before the heal may come one jittered retry period later; the
        // next listing after it, one listing period after that.
        let retry = config("a").retry_period;
        let rejoin = retry.mul_f64(1.0 + crate::leader_election::JITTER_FACTOR);
        sleep(rejoin + retry + Duration::from_millis(10)).await;
        assert!(guard.is_valid(), "the guard held by writers is valid again");
        assert_eq!(a.ring.members(), ["a"]);
        a.stop.cancel();
        a.run.await.unwrap();
    }

    async fn sleep_until_instant(at: Instant) {
        tokio::time::sleep_until(at).await;
    }

    #[test]
    fn wall_clock_is_not_consulted() {
        // Guard against a refactor that starts reading renewTime: a record from the future
        // (a holder with a fast clock) is judged like any other.
        let mut record = lease("widgets-a", Some("a"), "1").record;
        record.renew_time = SystemTime::now() + Duration::from_secs(3600);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let mut membership = Membership::new(RING);
            membership.observe(vec![ShardLease {
                name: "widgets-a".into(),
                record,
                version: RawVersion::new("1"),
            }]);
            sleep(Duration::from_secs(15)).await;
            assert!(membership.members().is_empty());
        });
    }
}
