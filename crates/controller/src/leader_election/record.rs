//! What a lock stores: client-go's `LeaderElectionRecord`.

use std::time::{Duration, SystemTime};

/// The content of a leader-election lock (client-go's `resourcelock.LeaderElectionRecord`).
///
/// The wall-clock times are written for humans and for other implementations; no elector in this
/// crate decides anything from them. Expiry is always judged on the *reader's* monotonic clock,
/// from the instant it last saw the record change (see
/// [`LeaderElector`](crate::leader_election::LeaderElector)): the holder's clock may be wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// Who holds the lease; `None` (or an empty string written by another implementation) when
    /// nobody does, e.g. after a release.
    pub holder_identity: Option<String>,
    /// How long others must wait, after they last saw this record change, before taking over.
    pub lease_duration: Duration,
    /// When the current holder acquired the lease (display only).
    pub acquire_time: SystemTime,
    /// When the current holder last renewed the lease (display only).
    pub renew_time: SystemTime,
    /// How many times the holder changed.
    pub leader_transitions: u32,
    /// Coordinated election: the candidate the coordinator wants to hold the lease next
    /// (`spec.preferredHolder`); the current holder stops renewing once it is set.
    pub preferred_holder: Option<String>,
    /// Coordinated election: how the coordinator picks the holder (`spec.strategy`, e.g.
    /// `OldestEmulationVersion`), kept by the holder's renewals.
    pub strategy: Option<String>,
}

/// No holder, no lease, the epoch for both times, no transitions: Go's zero record, so that a lock
/// decoding its own storage writes `LeaderElectionRecord { .., ..Default::default() }` and a field
/// added later breaks nothing.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use controller::leader_election::LeaderElectionRecord;
///
/// let now = SystemTime::now();
/// let record = LeaderElectionRecord {
///     holder_identity: Some("pod-a".into()),
///     lease_duration: Duration::from_secs(15),
///     acquire_time: now,
///     renew_time: now,
///     ..Default::default()
/// };
/// assert_eq!((record.holder(), record.leader_transitions), (Some("pod-a"), 0));
/// assert_eq!(LeaderElectionRecord::default().holder(), None);
/// ```
impl Default for LeaderElectionRecord {
    fn default() -> Self {
        LeaderElectionRecord {
            holder_identity: None,
            lease_duration: Duration::ZERO,
            acquire_time: SystemTime::UNIX_EPOCH,
            renew_time: SystemTime::UNIX_EPOCH,
            leader_transitions: 0,
            preferred_holder: None,
            strategy: None,
        }
    }
}

impl LeaderElectionRecord {
    /// The holder, if there is one (an empty identity counts as none).
    pub fn holder(&self) -> Option<&str> {
        self.holder_identity
            .as_deref()
            .filter(|holder| !holder.is_empty())
    }
}
