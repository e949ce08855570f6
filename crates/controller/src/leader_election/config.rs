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
    /// Coordinated leader election (client-go's `Coordinated`, alpha in Kubernetes), on when
    /// `Some`: the API server's coordinator picks the holder among the candidates and writes it
    /// into the Lease. The elector announces itself as a candidate with a
    /// [`LeaseCandidate`](crate::leader_election::LeaseCandidate) named after its identity and
    /// written by its lock
    /// ([`LeaseLock::candidate`](crate::leader_election::LeaseLock::candidate)), for as long as it
    /// runs; it never creates nor takes the Lease, only renews it once it names us, and stops
    /// renewing once the Lease names a `preferredHolder`. `None` by default; set it with
    /// [`coordinated`](Self::coordinated).
    pub coordinated: Option<Candidacy>,
}

/// The strategy of coordinated election that kube-apiserver's coordinator implements: the
/// candidate with the oldest emulation version leads, then the one with the oldest binary
/// version, then the one created first, so that during an upgrade the leader is one that every
/// replica can follow.
pub const OLDEST_EMULATION_VERSION: &str = "OldestEmulationVersion";

/// How often a candidate renews its `LeaseCandidate` when the coordinator does not ping it:
/// client-go's five minutes. The coordinator forgets a candidate not renewed for 30 minutes.
pub const CANDIDATE_RENEW_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// What a candidate of coordinated election announces about itself in its `LeaseCandidate`
/// (client-go's `CandidateConfig`, minus where the object lives, which the lock knows).
///
/// ```
/// use controller::leader_election::{Candidacy, LeaderElectionConfig, OLDEST_EMULATION_VERSION};
///
/// let config = LeaderElectionConfig::new("my-controller", "pod-a")
///     .coordinated(Candidacy::new("1.36.3", "1.36.0"));
/// assert_eq!(config.validate(), Ok(()));
/// assert_eq!(config.coordinated.unwrap().strategy, OLDEST_EMULATION_VERSION);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidacy {
    /// This binary's version (`spec.binaryVersion`), a semantic version without a `v`
    /// (`1.36.3`). Required.
    pub binary_version: String,
    /// The version whose behaviour this binary emulates (`spec.emulationVersion`), at most the
    /// binary version; required by [`OLDEST_EMULATION_VERSION`].
    pub emulation_version: String,
    /// How the coordinator picks the holder (`spec.strategy`); default
    /// [`OLDEST_EMULATION_VERSION`], the only one kube-apiserver implements. Others must be a
    /// qualified name with a `/` (`example.com/mine`), for a coordinator of one's own.
    pub strategy: String,
    /// How long the candidate waits between two renewals when nobody pings it; default
    /// [`CANDIDATE_RENEW_INTERVAL`]. Must be well under the coordinator's 30 minutes.
    pub renew_interval: Duration,
}

impl Candidacy {
    /// A candidacy with the [`OLDEST_EMULATION_VERSION`] strategy and client-go's renew
    /// interval.
    pub fn new(binary_version: impl Into<String>, emulation_version: impl Into<String>) -> Self {
        Self {
            binary_version: binary_version.into(),
            emulation_version: emulation_version.into(),
            strategy: OLDEST_EMULATION_VERSION.to_string(),
            renew_interval: CANDIDATE_RENEW_INTERVAL,
        }
    }

    /// Sets [`strategy`](Self::strategy).
    pub fn strategy(mut self, strategy: impl Into<String>) -> Self {
        self.strategy = strategy.into();
        self
    }

    /// Sets [`renew_interval`](Self::renew_interval).
    pub fn renew_interval(mut self, interval: Duration) -> Self {
        self.renew_interval = interval;
        self
    }

    /// Checks what kube-apiserver would refuse, so that a candidate is refused at once rather
    /// than by every write: `name` (the candidate's, the elector's identity) a DNS subdomain,
    /// the binary version a semantic version, the emulation version one too (required by
    /// [`OLDEST_EMULATION_VERSION`]) and not newer than the binary's, a strategy, and a positive
    /// renew interval of at most [`MAX_DURATION`].
    pub fn validate(&self, name: &str) -> Result<(), LeaderElectionConfigError> {
        if !is_dns_subdomain(name) {
            return Err(LeaderElectionConfigError::NotAnObjectName(name.to_string()));
        }
        if self.renew_interval.is_zero() {
            return Err(LeaderElectionConfigError::NotPositive("renew_interval"));
        }
        if self.renew_interval > MAX_DURATION {
            return Err(LeaderElectionConfigError::TooLong("renew_interval"));
        }
        if self.strategy.is_empty() {
            return Err(LeaderElectionConfigError::Empty("strategy"));
        }
        let binary = semantic_version("binary_version", &self.binary_version)?;
        if self.emulation_version.is_empty() {
            if self.strategy == OLDEST_EMULATION_VERSION {
                return Err(LeaderElectionConfigError::Empty("emulation_version"));
            }
            return Ok(());
        }
        let emulation = semantic_version("emulation_version", &self.emulation_version)?;
        if binary < emulation {
            return Err(LeaderElectionConfigError::EmulationNewerThanBinary);
        }
        Ok(())
    }
}

/// The major, minor and patch numbers of a semantic version (`1.36.3`, `1.36.0-beta.0+abc`), as
/// kube-apiserver parses them (no `v`, no leading zeros); the pre-release and build parts are
/// checked for their characters only.
fn semantic_version(
    field: &'static str,
    text: &str,
) -> Result<(u64, u64, u64), LeaderElectionConfigError> {
    let invalid = || LeaderElectionConfigError::NotASemanticVersion {
        field,
        value: text.to_string(),
    };
    if text.is_empty() {
        return Err(LeaderElectionConfigError::Empty(field));
    }
    let (rest, build) = match text.split_once('+') {
        Some((rest, build)) => (rest, Some(build)),
        None => (text, None),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((core, pre)) => (core, Some(pre)),
        None => (rest, None),
    };
    let suffix_ok = |part: Option<&str>| {
        part.is_none_or(|p| {
            !p.is_empty()
                && p.split('.').all(|id| {
                    !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        })
    };
    if !suffix_ok(pre) || !suffix_ok(build) {
        return Err(invalid());
    }
    let numbers: Vec<u64> = core
        .split('.')
        .map(|n| {
            let digits = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
            let leading_zero = n.len() > 1 && n.starts_with('0');
            (digits && !leading_zero).then(|| n.parse().ok()).flatten()
        })
        .collect::<Option<_>>()
        .ok_or_else(invalid)?;
    match numbers[..] {
        [major, minor, patch] => Ok((major, minor, patch)),
        _ => Err(invalid()),
    }
}

/// A Kubernetes object name (RFC 1123 subdomain): at most 253 lower-case letters, digits, `-`
/// and `.`, starting and ending with a letter or digit.
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 253
        && bytes.iter().all(|&b| alnum(b) || b == b'-' || b == b'.')
        && alnum(bytes[0])
        && alnum(bytes[bytes.len() - 1])
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
    /// Coordinated election: the identity, which names the `LeaseCandidate`, is not a
    /// Kubernetes object name (lower-case letters, digits, `-` and `.`).
    #[error("identity {0:?} must be a Kubernetes object name (lower-case letters, digits, '-' and '.') to name a LeaseCandidate")]
    NotAnObjectName(String),
    /// Coordinated election: a required field of the [`Candidacy`] is empty.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// Coordinated election: a version is not a semantic version (`1.36.3`).
    #[error("{field} {value:?} must be a semantic version such as 1.36.3")]
    NotASemanticVersion {
        /// `binary_version` or `emulation_version`.
        field: &'static str,
        /// The text given.
        value: String,
    },
    /// Coordinated election: the emulation version is newer than the binary version.
    #[error("emulation_version must not be newer than binary_version")]
    EmulationNewerThanBinary,
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
            coordinated: None,
        }
    }

    /// Turns coordinated election on with `candidacy` (see
    /// [`coordinated`](LeaderElectionConfig::coordinated)).
    ///
    /// ```no_run
    /// use controller::leader_election::{
    ///     ApiLeaseLock, Candidacy, LeaderElectionConfig, LeaderElector,
    /// };
    /// use controller::CancellationToken;
    /// use workqueue::shared_informer::reflector::{Client, ClusterConfig};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = Client::new(&ClusterConfig::from_kubeconfig(None)?)?;
    /// // An object name: it names this replica's LeaseCandidate.
    /// let identity = std::env::var("POD_NAME")?;
    /// let lock = ApiLeaseLock::new(client, "kube-system", "my-controller", identity.clone());
    /// let config = LeaderElectionConfig::new("my-controller", identity)
    ///     .coordinated(Candidacy::new("1.36.3", "1.36.0"));
    /// let elector = LeaderElector::new(config, lock)?;
    /// // Announces the candidate, waits to be named holder by kube-apiserver, then leads.
    /// elector
    ///     .run_leading(CancellationToken::new(), |leader, _guard| async move {
    ///         leader.cancelled().await; // ... run the controller until then ...
    ///     })
    ///     .await;
    /// # Ok(()) }
    /// ```
    pub fn coordinated(mut self, candidacy: Candidacy) -> Self {
        self.coordinated = Some(candidacy);
        self
    }

    /// The guard margin in effect.
    pub fn effective_guard_margin(&self) -> Duration {
        self.guard_margin.unwrap_or(self.lease_duration / 5)
    }

    /// Checks client-go's rules: all durations positive, and
    /// `lease_duration > renew_deadline > retry_period × JITTER_FACTOR`; plus a non-empty
    /// identity, durations at most [`MAX_DURATION`], a guard margin shorter than the lease and,
    /// in coordinated election, the candidacy ([`Candidacy::validate`]).
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
        if let Some(candidacy) = &self.coordinated {
            candidacy.validate(&self.identity)?;
        }
        Ok(())
    }
}
