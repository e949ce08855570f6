//! The leader's proof of a live lease, checked on the monotonic clock before each write.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::time::Instant;
use workqueue::shared_informer::reflector::Api;

/// A cheap, cloneable view of the current term's lease, for the leader's code to check before a
/// write: [`check`](Self::check) fails once the lease may have lapsed, *whatever the elector's
/// timers have done yet*.
///
/// The leader token of [`LeaderElector`](crate::leader_election::LeaderElector) is cancelled by
/// the elector's task, which only notices a lapse when it runs. A process frozen past its lease
/// (SIGSTOP, a long GC or a VM pause) resumes with its timers overdue and every task runnable; a
/// worker may run before the elector and write as a leader that another replica has already
/// replaced. The guard reads the clock instead: valid only while
///
/// ```text
/// now < start of the last successful renew + lease_duration − margin
/// ```
///
/// on tokio's monotonic clock. The renew's *start* is used because the server may have recorded
/// the renew at any instant after the request was sent, and others count `lease_duration` from
/// when they saw it, so never earlier than the start. The margin covers what the guard cannot
/// see: the time between a successful `check()` and the write reaching the server, and clock-rate
/// differences between machines. It defaults to a fifth of the lease duration (3 s for 15 s).
///
/// The guard is revoked for good (invalid) as soon as the elector stops leading, before any
/// release is written.
#[derive(Clone)]
pub struct LeaseGuard {
    state: Arc<Mutex<GuardState>>,
}

/// Invariant: `term` grows by one each time the guard becomes valid after having been invalid
/// (never held, revoked, or run out by the clock), so two readings of the same `term` while
/// valid bracket a stretch in which the lease was never lost.
#[derive(Debug, Default)]
struct GuardState {
    /// The end of validity: `None` before the first acquisition and after the term ends.
    valid_until: Option<Instant>,
    term: u64,
}

/// The error of [`LeaseGuard::check`]: this process may no longer be the leader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("leadership lost or lapsed: the lease may be held by another replica")]
pub struct LeadershipLost;

impl LeaseGuard {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(GuardState::default())),
        }
    }

    /// Whether the lease is still ours by the monotonic clock, now.
    pub fn is_valid(&self) -> bool {
        matches!(self.state.lock().valid_until, Some(until) if Instant::now() < until)
    }

    /// The number of the current stretch of validity: it grows each time the guard becomes
    /// valid again after a lapse (a revoke, or the clock passing the end unrenewed). Work that
    /// must stop at a lapse, even one already over (a process frozen, or cut off from the
    /// server, whose renewals went through once it was back), records the term it began in and
    /// goes on only while [`is_valid`](Self::is_valid) and the term is unchanged.
    pub fn term(&self) -> u64 {
        self.state.lock().term
    }

    /// `Ok` while [`is_valid`](Self::is_valid); call it right before each write a leader makes.
    pub fn check(&self) -> Result<(), LeadershipLost> {
        if self.is_valid() {
            Ok(())
        } else {
            Err(LeadershipLost)
        }
    }

    /// `api` with this guard checked right before each write it sends
    /// ([`Api::with_write_check`]): once the lease may have lapsed, every write is
    /// [`ClientError::WriteRefused`](workqueue::shared_informer::reflector::ClientError::WriteRefused) and
    /// nothing is sent; reads go on. Hand a protected `Api` to the leader's reconcile so that no
    /// write can forget the check.
    ///
    /// ```
    /// use controller::leader_election::{LeaderElectionConfig, LeaderElector, MemoryLock};
    /// use workqueue::shared_informer::reflector::store_index::DynamicObject;
    /// use workqueue::shared_informer::reflector::{Api, Client, ClientError, ClusterConfig, CreateOptions, Resource};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let client = Client::new(&ClusterConfig::new("http://127.0.0.1:1").unwrap()).unwrap();
    /// let cms: Api<DynamicObject> =
    ///     Api::namespaced_with(client, Resource::namespaced("", "v1", "configmaps"), "default");
    /// let elector = LeaderElector::new(
    ///     LeaderElectionConfig::new("ctl", "pod-a"),
    ///     MemoryLock::new("ctl", "pod-a"),
    /// )
    /// .unwrap();
    /// // Not leading yet: the guard is not valid, so the write is refused before it is sent.
    /// let cms = elector.guard().protect(cms);
    /// let err = cms.create(&CreateOptions::default(), &DynamicObject::new("v1", "ConfigMap")).await;
    /// assert!(matches!(err, Err(ClientError::WriteRefused { .. })));
    /// # }
    /// ```
    pub fn protect<K>(&self, api: Api<K>) -> Api<K> {
        let guard = self.clone();
        api.with_write_check(move || guard.check().map_err(|e| e.to_string()))
    }

    /// Until when the guard is valid, unless renewed; `None` when not leading.
    pub fn valid_until(&self) -> Option<Instant> {
        self.state.lock().valid_until
    }

    pub(crate) fn extend_to(&self, until: Instant) {
        let mut state = self.state.lock();
        if state.valid_until.is_none_or(|end| Instant::now() >= end) {
            state.term += 1;
        }
        state.valid_until = Some(until);
    }

    pub(crate) fn revoke(&self) {
        self.state.lock().valid_until = None;
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("valid_until", &self.valid_until())
            .field("is_valid", &self.is_valid())
            .field("term", &self.term())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_term_grows_when_the_guard_is_valid_again_after_a_lapse_and_only_then() {
        let guard = LeaseGuard::new();
        assert_eq!(guard.term(), 0);
        guard.extend_to(Instant::now() + Duration::from_secs(10));
        assert_eq!(guard.term(), 1);
        // Renewed in time: the same term.
        tokio::time::advance(Duration::from_secs(5)).await;
        guard.extend_to(Instant::now() + Duration::from_secs(10));
        assert_eq!(guard.term(), 1);
        // Run out by the clock, then renewed (a frozen process whose renewal went through).
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(!guard.is_valid());
        guard.extend_to(Instant::now() + Duration::from_secs(10));
        assert!(guard.is_valid());
        assert_eq!(guard.term(), 2);
        // Revoked, then acquired again.
        guard.revoke();
        guard.extend_to(Instant::now() + Duration::from_secs(10));
        assert_eq!(guard.term(), 3);
    }
}
