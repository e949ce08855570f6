//! The lock interface (client-go's `resourcelock.Interface`): a record read and written with
//! optimistic concurrency.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use super::config::Candidacy;
use super::lease_candidate::LeaseCandidate;
use super::record::LeaderElectionRecord;
use crate::events::ObjectReference;

/// The opaque version of a stored record (a Kubernetes `resourceVersion`), handed back to
/// [`LeaseLock::update`] so that a write based on a stale read fails with
/// [`LockError::Conflict`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawVersion(String);

impl RawVersion {
    /// Wraps a version string as the store returned it.
    pub fn new(version: impl Into<String>) -> Self {
        Self(version.into())
    }

    /// The version string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RawVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a lock call failed. The elector treats every error as a failed attempt and retries; the
/// variants let other callers (and logs) tell a lost race from an outage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The record changed since the version given to `update` was read.
    #[error("the lock record changed since it was read (conflict)")]
    Conflict,
    /// `create` found a record already there.
    #[error("the lock record already exists")]
    AlreadyExists,
    /// `update` found no record.
    #[error("the lock record does not exist")]
    NotFound,
    /// Anything else: transport, server or decoding errors.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// A leader-election lock: one record, read and written with optimistic concurrency.
///
/// Implementations: [`MemoryLock`](crate::leader_election::MemoryLock) for tests. The futures are
/// `Send` so that an elector can run on a multi-threaded runtime; the elector bounds every call
/// with its own deadline, so a call may hang without harm.
pub trait LeaseLock: Send + Sync {
    /// Reads the record and its version; `Ok(None)` when there is no record yet.
    fn get(
        &self,
    ) -> impl Future<Output = Result<Option<(LeaderElectionRecord, RawVersion)>, LockError>> + Send;

    /// Creates the record; fails with [`LockError::AlreadyExists`] if there is one. Returns the
    /// new version.
    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<RawVersion, LockError>> + Send;

    /// Replaces the record if it is still at `version`, else fails with
    /// [`LockError::Conflict`]. Returns the new version.
    fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &RawVersion,
    ) -> impl Future<Output = Result<RawVersion, LockError>> + Send;

    /// The identity this lock writes as holder (must match the elector's configured identity).
    fn identity(&self) -> &str;

    /// What the lock is, for logs (e.g. `leases/kube-system/my-controller`). No secrets.
    fn describe(&self) -> String;

    /// The object that leader-election events are recorded against (client-go's
    /// `RecordEvent` subject: the Lease, as last read or written). Required, with no default,
    /// so that a lock wrapping another cannot forget to forward it: `None` only for a lock with
    /// no Kubernetes object behind it, and then an elector with an event recorder records
    /// nothing and warns once that it does not (rule L9).
    fn object_reference(&self) -> Option<ObjectReference>;

    /// Coordinated election: the [`LeaseCandidate`] announcing this lock's identity, with
    /// `candidacy`, as a candidate for this lock's Lease (same namespace, the Lease's name as
    /// `spec.leaseName`). Called once by an elector whose configuration is
    /// [`coordinated`](crate::leader_election::LeaderElectionConfig::coordinated), after the
    /// candidacy was validated; the elector runs it for as long as it runs. Required, with no
    /// default, for the reason [`object_reference`](Self::object_reference) is: `None` only for a
    /// lock with no Kubernetes object behind it, and then the elector warns that no candidate is
    /// announced, so the coordinator will not elect it unless one is announced otherwise.
    fn candidate(&self, candidacy: &Candidacy) -> Option<LeaseCandidate>;
}

/// A shared lock is a lock: one [`ApiLeaseLock`](crate::leader_election::ApiLeaseLock) can serve
/// the successive electors of a replica that re-joins after losing its lease (the shard ring's
/// member does), keeping the metadata it last read.
impl<L: LeaseLock + ?Sized> LeaseLock for Arc<L> {
    fn get(
        &self,
    ) -> impl Future<Output = Result<Option<(LeaderElectionRecord, RawVersion)>, LockError>> + Send
    {
        (**self).get()
    }

    fn create(
        &self,
        record: &LeaderElectionRecord,
    ) -> impl Future<Output = Result<RawVersion, LockError>> + Send {
        (**self).create(record)
    }

    fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &RawVersion,
    ) -> impl Future<Output = Result<RawVersion, LockError>> + Send {
        (**self).update(record, version)
    }

    fn identity(&self) -> &str {
        (**self).identity()
    }

    fn describe(&self) -> String {
        (**self).describe()
    }

    fn object_reference(&self) -> Option<ObjectReference> {
        (**self).object_reference()
    }

    fn candidate(&self, candidacy: &Candidacy) -> Option<LeaseCandidate> {
        (**self).candidate(candidacy)
    }
}
