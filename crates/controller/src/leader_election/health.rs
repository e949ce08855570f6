//! A liveness check for a leader stuck past its lease (client-go's `LeaderElector.Check` and
//! `HealthzAdaptor`).
//!
//! A leader that can neither renew nor stop (a deadlocked task, a blocked runtime) should be
//! restarted by its supervisor: the check turns unhealthy once the elector believes it leads
//! but has not seen its own lease renewed for longer than the lease plus a tolerance.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use super::elector::{LeaderElector, Observed};

// Here rather than in `elector.rs`: the health check reads the elector, not the other way round.
impl<L> LeaderElector<L> {
    /// A handle on this elector's view of the lease, for a liveness check that outlives
    /// [`run`](Self::run) (client-go's `LeaderElector.Check`); see [`ElectionHealth`] and
    /// [`HealthzAdaptor`].
    pub fn health(&self) -> ElectionHealth {
        ElectionHealth::new(
            self.observed.clone(),
            self.config.identity.clone(),
            self.config.name.clone(),
            self.config.lease_duration,
        )
    }
}

/// The error of a failed health check: this elector believes it leads, but its lease ran out
/// more than the tolerance ago.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("failed election to renew leadership on lease {name} (expired {expired_for:?} ago)")]
pub struct LeaseNotRenewed {
    /// The election's name.
    pub name: String,
    /// How long ago the lease ran out, by this elector's clock.
    pub expired_for: Duration,
}

/// One elector's view of its lease, for a liveness endpoint: cheap to clone, valid after the
/// elector was consumed by [`run`](LeaderElector::run). Made by [`LeaderElector::health`].
///
/// As client-go's `Check`: the elector believes it leads while the last record it read or
/// wrote names it as holder, which stays true after its term ended unless it released the
/// lease (or read another holder). Use a [`HealthzAdaptor`] to follow one elector after another.
#[derive(Clone)]
pub struct ElectionHealth {
    observed: Arc<Mutex<Observed>>,
    identity: String,
    name: String,
    lease_duration: Duration,
}

impl ElectionHealth {
    pub(super) fn new(
        observed: Arc<Mutex<Observed>>,
        identity: String,
        name: String,
        lease_duration: Duration,
    ) -> Self {
        Self {
            observed,
            identity,
            name,
            lease_duration,
        }
    }

    /// Whether the last record this elector read or wrote names it as holder (client-go's
    /// `IsLeader`).
    pub fn is_leader(&self) -> bool {
        let observed = self.observed.lock();
        observed.record.as_ref().and_then(|record| record.holder()) == Some(self.identity.as_str())
    }

    /// `Err` when this elector believes it leads and more than
    /// `lease_duration + max_tolerable_expired_lease` has passed, on the monotonic clock, since
    /// it last saw its record change (its last renew); `Ok` otherwise, a standby included.
    pub fn check(&self, max_tolerable_expired_lease: Duration) -> Result<(), LeaseNotRenewed> {
        let observed = self.observed.lock();
        let leads = observed.record.as_ref().and_then(|record| record.holder())
            == Some(self.identity.as_str());
        if !leads {
            return Ok(());
        }
        let since = Instant::now().saturating_duration_since(observed.observed_at);
        match since.checked_sub(self.lease_duration) {
            Some(expired_for) if expired_for > max_tolerable_expired_lease => {
                Err(LeaseNotRenewed {
                    name: self.name.clone(),
                    expired_for,
                })
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Debug for ElectionHealth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElectionHealth")
            .field("name", &self.name)
            .field("identity", &self.identity)
            .field("is_leader", &self.is_leader())
            .finish_non_exhaustive()
    }
}

/// A health check that can be registered before any elector exists and pointed at each new
/// elector in turn (client-go's `HealthzAdaptor`): healthy until an elector is set, then
/// [`ElectionHealth::check`] with the tolerance given at creation. Cheap to clone; hand a clone
/// to the liveness endpoint.
///
/// ```
/// use std::time::Duration;
/// use controller::leader_election::{HealthzAdaptor, LeaderElectionConfig, LeaderElector, MemoryLock};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let healthz = HealthzAdaptor::new(Duration::from_secs(20));
/// let probe = healthz.clone(); // for the /healthz handler: `probe.check().is_ok()`
/// assert!(probe.check().is_ok(), "no elector yet");
///
/// let lock = MemoryLock::new("my-controller", "pod-a");
/// let elector = LeaderElector::new(LeaderElectionConfig::new("my-controller", "pod-a"), lock).unwrap();
/// healthz.set_leader_election(&elector);
/// assert_eq!(healthz.name(), "leaderElection");
/// assert!(probe.check().is_ok(), "not leading");
/// # }
/// ```
#[derive(Clone)]
pub struct HealthzAdaptor {
    timeout: Duration,
    current: Arc<Mutex<Option<ElectionHealth>>>,
}

impl HealthzAdaptor {
    /// An adaptor tolerating a lease expired for up to `timeout` (client-go's
    /// `NewLeaderHealthzAdaptor`).
    pub fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            current: Arc::new(Mutex::new(None)),
        }
    }

    /// The check's name, as client-go names it: `leaderElection`.
    pub fn name(&self) -> &'static str {
        "leaderElection"
    }

    /// Follows `elector` from now on (replacing any previous one).
    pub fn set_leader_election<L>(&self, elector: &LeaderElector<L>)
    where
        L: super::lock::LeaseLock,
    {
        *self.current.lock() = Some(elector.health());
    }

    /// `Ok` when no elector is set; otherwise the elector's
    /// [`check`](ElectionHealth::check) with this adaptor's tolerance.
    pub fn check(&self) -> Result<(), LeaseNotRenewed> {
        let current = self.current.lock().clone();
        current.map_or(Ok(()), |health| health.check(self.timeout))
    }
}

impl fmt::Debug for HealthzAdaptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HealthzAdaptor")
            .field("timeout", &self.timeout)
            .field("current", &*self.current.lock())
            .finish()
    }
}
