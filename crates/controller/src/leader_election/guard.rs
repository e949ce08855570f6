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
    /// The end of validity: `None` before the first acquisition and after the term ends.
    valid_until: Arc<Mutex<Option<Instant>>>,
}

/// The error of [`LeaseGuard::check`]: this process may no longer be the leader.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("leadership lost or lapsed: the lease may be held by another replica")]
pub struct LeadershipLost;

impl LeaseGuard {
    pub(crate) fn new() -> Self {
        Self {
            valid_until: Arc::new(Mutex::new(None)),
        }
    }

    /// Whether the lease is still ours by the monotonic clock, now.
    pub fn is_valid(&self) -> bool {
        matches!(*self.valid_until.lock(), Some(until) if Instant::now() < until)
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
        *self.valid_until.lock()
    }

    pub(crate) fn extend_to(&self, until: Instant) {
        *self.valid_until.lock() = Some(until);
    }

    pub(crate) fn revoke(&self) {
        *self.valid_until.lock() = None;
    }
}

impl fmt::Debug for LeaseGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseGuard")
            .field("valid_until", &self.valid_until())
            .field("is_valid", &self.is_valid())
            .finish()
    }
}
