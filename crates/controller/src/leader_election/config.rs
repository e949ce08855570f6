//! The elector's timing and identity, validated as client-go validates them.

use std::time::Duration;

use crate::events::EventRecorder;

/// client-go's `JitterFactor`: the acquire loop waits `retry_period × (1 + U[0,1) × 1.2)` between
/// attempts, and `renew_deadline` must exceed `retry_period × 1.2`.
pub const JITTER_FACTOR: f64 = 1.2;

/// The longest accepted duration: longer ones would be misconfigurations, and bounding them keeps
/// deadline arithmetic on the monotonic clock from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);

/// How an elector competes for its lock (client-go's `LeaderElectionConfig`, minus the lock and
/// callbacks). Start from [`LeaderElectionConfig::new`], which sets client-go's recommended
/// timings (15 s / 10 s / 2 s).
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    /// The election's name, for logs.
    pub name: String,
    /// This replica's identity, written as holder; must be unique among replicas and equal the
    /// lock's [`identity`](crate::leader_election::LeaseLock::identity).
    pub identity: String,
    /// How long others wait, after they last saw the record change, before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew, counted from its last successful renew's
    /// start, before it stops leading.
    pub renew_deadline: Duration,
    /// The wait between attempts (jittered by [`JITTER_FACTOR`] while acquiring).
    pub retry_period: Duration,
    /// Whether cancelling a leading elector releases the lease (an empty holder and a 1 s lease),
    /// so another replica can take over at its next attempt instead of after `lease_duration`.
    /// On by default (**unlike** client-go's `ReleaseOnCancel`, which is opt-in): a replica shut
    /// down by its cancellation token should not leave its name on the lease.
    /// The guard is revoked first; `run_leading` also waits for the leader's work to return
    /// before releasing, while with `run` work spawned from `on_started_leading` must stop on
    /// the leader token (or check the guard before each write) to stay safe.
    pub release_on_cancel: bool,
    /// How much earlier than the lease's end, as others would count it, the
    /// [`LeaseGuard`](crate::leader_election::LeaseGuard) stops being valid. `None`: a fifth of
    /// `lease_duration`.
    pub guard_margin: Option<Duration>,
    /// Where to record the Normal events `LeaderElection` "`<identity>` became leader" and
    /// "`<identity>` stopped leading" against the lock's object (client-go's
    /// `ResourceLockConfig.EventRecorder`); `None`: no events.
    pub event_recorder: Option<EventRecorder>,
    /// Coordinated leader election (client-go's `Coordinated`, alpha in Kubernetes): the API
    /// server picks the holder and writes it into the Lease; this elector never creates nor
    /// takes a lease, only renews one that names it, and stops renewing once the Lease names a
    /// `preferredHolder`. Off by default. The candidates must announce themselves to the
    /// coordinator with `LeaseCandidate` objects, which this crate does not write.
    pub coordinated: bool,
}

/// Why a [`LeaderElectionConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LeaderElectionConfigError {
    /// A duration is zero.
    #[error("{0} must be greater than zero")]
    NotPositive(&'static str),
    /// A duration is longer than [`MAX_DURATION`].
    #[error("{0} must be at most {MAX_DURATION:?}")]
    TooLong(&'static str),
    /// `lease_duration <= renew_deadline`.
    #[error("lease_duration must be greater than renew_deadline")]
    LeaseNotLongerThanRenewDeadline,
    /// `renew_deadline <= retry_period × JITTER_FACTOR`.
    #[error("renew_deadline must be greater than retry_period * {JITTER_FACTOR}")]
    RenewDeadlineNotLongerThanJitteredRetry,
    /// `guard_margin >= lease_duration`: the guard would never be valid.
    #[error("guard_margin must be less than lease_duration")]
    GuardMarginNotShorterThanLease,
    /// The identity is empty.
    #[error("identity must not be empty")]
    EmptyIdentity,
    /// The lock writes another identity than the configured one.
    #[error("the lock's identity {lock:?} differs from the configured identity {config:?}")]
    IdentityMismatch {
        /// The configured identity.
        config: String,
        /// The lock's identity.
        lock: String,
    },
}

impl LeaderElectionConfig {
    /// client-go's recommended timings: a 15 s lease, a 10 s renew deadline, a 2 s retry period;
    /// release on cancel (see [`release_on_cancel`](Self::release_on_cancel)); the default guard
    /// margin.
    pub fn new(name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            release_on_cancel: true,
            guard_margin: None,
            event_recorder: None,
            coordinated: false,
        }
    }

    /// The guard margin in effect.
    pub fn effective_guard_margin(&self) -> Duration {
        self.guard_margin.unwrap_or(self.lease_duration / 5)
    }

    /// Checks client-go's rules: all durations positive, and
    /// `lease_duration > renew_deadline > retry_period × JITTER_FACTOR`; plus a non-empty
    /// identity, durations at most [`MAX_DURATION`] and a guard margin shorter than the lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use controller::leader_election::{LeaderElectionConfigError, LeaderElectionConfig};
    ///
    /// let mut config = LeaderElectionConfig::new("my-controller", "pod-a");
    /// assert_eq!(config.validate(), Ok(()));
    /// config.renew_deadline = Duration::from_secs(2); // not > 2 s × 1.2
    /// assert_eq!(config.validate(), Err(LeaderElectionConfigError::RenewDeadlineNotLongerThanJitteredRetry));
    /// ```
    pub fn validate(&self) -> Result<(), LeaderElectionConfigError> {
        for (name, duration) in [
            ("lease_duration", self.lease_duration),
            ("renew_deadline", self.renew_deadline),
            ("retry_period", self.retry_period),
        ] {
            if duration.is_zero() {
                return Err(LeaderElectionConfigError::NotPositive(name));
            }
            if duration > MAX_DURATION {
                return Err(LeaderElectionConfigError::TooLong(name));
            }
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(LeaderElectionConfigError::LeaseNotLongerThanRenewDeadline);
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * JITTER_FACTOR {
            return Err(LeaderElectionConfigError::RenewDeadlineNotLongerThanJitteredRetry);
        }
        if self.effective_guard_margin() >= self.lease_duration {
            return Err(LeaderElectionConfigError::GuardMarginNotShorterThanLease);
        }
        if self.identity.is_empty() {
            return Err(LeaderElectionConfigError::EmptyIdentity);
        }
        Ok(())
    }
}
