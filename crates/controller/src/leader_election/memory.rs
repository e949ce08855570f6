//! An in-memory lock shared by several electors, with fault injection: for tests.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

use super::config::Candidacy;
use super::lease_candidate::LeaseCandidate;
use super::lock::{LeaseLock, LockError, RawVersion};
use super::record::LeaderElectionRecord;
use crate::events::ObjectReference;

/// A fault injected into one identity's calls to a [`MemoryLock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fault {
    /// Every call fails with [`LockError::Other`] without touching the record.
    Fail,
    /// Every call waits until the fault is changed (e.g. [`MemoryLock::heal`]), then proceeds;
    /// a caller that gives up first (drops the call) leaves the record untouched.
    Hang,
    /// Every call is applied at once but its answer arrives this much later: the worst case for
    /// a client that would measure its lease from the answer rather than from the request.
    Slow(Duration),
    /// Every call is applied, then fails with [`LockError::Other`]: the server stored the write
    /// but its answer was lost (a connection reset after the request went through).
    LoseAnswer,
}

/// What a call to a [`MemoryLock`] asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockOp {
    /// [`LeaseLock::get`].
    Get,
    /// [`LeaseLock::create`].
    Create,
    /// [`LeaseLock::update`].
    Update,
}

/// One call made to a [`MemoryLock`], whatever its outcome (a request, as a server would count
/// it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockCall {
    /// When the call was made (tokio's clock).
    pub at: Instant,
    /// The identity that called.
    pub identity: String,
    /// What it asked for.
    pub op: LockOp,
}

/// The error a [`Fault::Fail`] produces (inside [`LockError::Other`]).
#[derive(Debug, Clone, thiserror::Error)]
#[error("injected failure for {identity}")]
pub struct InjectedFailure {
    /// The identity whose call failed.
    pub identity: String,
}

/// One write to a [`MemoryLock`], as the store saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockWrite {
    /// When the write was applied (tokio's clock).
    pub at: Instant,
    /// The identity that wrote.
    pub identity: String,
    /// What it wrote.
    pub record: LeaderElectionRecord,
}

#[derive(Default)]
struct State {
    record: Option<(LeaderElectionRecord, u64)>,
    last_version: u64,
    faults: HashMap<String, Fault>,
    /// Per identity, how many more updates answer a conflict without being applied.
    conflicts: HashMap<String, usize>,
    writes: Vec<LockWrite>,
    calls: Vec<LockCall>,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    /// Bumped whenever a fault changes, to wake hanging calls.
    faults_changed: watch::Sender<u64>,
}

/// A [`LeaseLock`] kept in memory, **for tests**: several electors share one record through
/// handles made with [`MemoryLock::for_identity`], and a test injects [`Fault`]s per identity.
///
/// ```
/// use controller::leader_election::{Fault, LeaseLock, MemoryLock};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let a = MemoryLock::new("my-controller", "a");
/// let b = a.for_identity("b"); // same record, another writer
/// a.set_fault("b", Fault::Fail);
/// assert!(b.get().await.is_err());
/// a.heal("b");
/// assert!(b.get().await.unwrap().is_none());
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryLock {
    identity: String,
    shared: Arc<Shared>,
}

impl fmt::Debug for MemoryLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryLock")
            .field("name", &self.shared.name)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl MemoryLock {
    /// An empty lock called `name`, used as `identity`.
    pub fn new(name: impl Into<String>, identity: impl Into<String>) -> Self {
        let (faults_changed, _) = watch::channel(0);
        Self {
            identity: identity.into(),
            shared: Arc::new(Shared {
                name: name.into(),
                state: Mutex::new(State::default()),
                faults_changed,
            }),
        }
    }

    /// A handle on the same record, used as another identity.
    pub fn for_identity(&self, identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            shared: self.shared.clone(),
        }
    }

    /// Injects `fault` into every later call made as `identity` (replacing its previous fault).
    pub fn set_fault(&self, identity: &str, fault: Fault) {
        self.shared
            .state
            .lock()
            .faults
            .insert(identity.to_string(), fault);
        self.shared.faults_changed.send_modify(|n| *n += 1);
    }

    /// Removes `identity`'s fault; its hanging calls proceed.
    pub fn heal(&self, identity: &str) {
        self.shared.state.lock().faults.remove(identity);
        self.shared.faults_changed.send_modify(|n| *n += 1);
    }

    /// The record as stored now.
    pub fn record(&self) -> Option<LeaderElectionRecord> {
        self.shared
            .state
            .lock()
            .record
            .as_ref()
            .map(|(record, _)| record.clone())
    }

    /// Every successful write so far, oldest first.
    pub fn writes(&self) -> Vec<LockWrite> {
        self.shared.state.lock().writes.clone()
    }

    /// Every call made so far by any identity, oldest first, failed ones included.
    pub fn calls(&self) -> Vec<LockCall> {
        self.shared.state.lock().calls.clone()
    }

    /// The next `count` updates made as `identity` fail with [`LockError::Conflict`] without
    /// being applied, as if another writer had slipped in between its read and its write.
    pub fn conflict_next_updates(&self, identity: &str, count: usize) {
        self.shared
            .state
            .lock()
            .conflicts
            .insert(identity.to_string(), count);
    }

    fn fault(&self) -> Option<Fault> {
        self.shared.state.lock().faults.get(&self.identity).copied()
    }

    /// Runs `op` on the state as this identity's fault allows.
    async fn call<T>(
        &self,
        kind: LockOp,
        op: impl FnOnce(&mut State) -> Result<T, LockError>,
    ) -> Result<T, LockError> {
        self.shared.state.lock().calls.push(LockCall {
            at: Instant::now(),
            identity: self.identity.clone(),
            op: kind,
        });
        // Subscribing before reading the fault: a heal between the two still wakes us.
        let mut changed = self.shared.faults_changed.subscribe();
        let fault = loop {
            match self.fault() {
                Some(Fault::Hang) => {
                    // The sender lives in `shared`, which we hold: `changed` cannot fail.
                    let _ = changed.changed().await;
                }
                other => break other,
            }
        };
        let failure = || {
            LockError::Other(Box::new(InjectedFailure {
                identity: self.identity.clone(),
            }))
        };
        match fault {
            Some(Fault::Fail) => Err(failure()),
            Some(Fault::LoseAnswer) => {
                let _applied = op(&mut self.shared.state.lock());
                Err(failure())
            }
            Some(Fault::Slow(delay)) => {
                let result = op(&mut self.shared.state.lock());
                tokio::time::sleep(delay).await;
                result
            }
            Some(Fault::Hang) | None => op(&mut self.shared.state.lock()),
        }
    }

    fn write(&self, state: &mut State, record: &LeaderElectionRecord) -> RawVersion {
        state.last_version += 1;
        state.record = Some((record.clone(), state.last_version));
        state.writes.push(LockWrite {
            at: Instant::now(),
            identity: self.identity.clone(),
            record: record.clone(),
        });
        RawVersion::new(state.last_version.to_string())
    }
}

impl LeaseLock for MemoryLock {
    async fn get(&self) -> Result<Option<(LeaderElectionRecord, RawVersion)>, LockError> {
        self.call(LockOp::Get, |state| {
            Ok(state
                .record
                .as_ref()
                .map(|(record, version)| (record.clone(), RawVersion::new(version.to_string()))))
        })
        .await
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<RawVersion, LockError> {
        self.call(LockOp::Create, |state| match state.record {
            Some(_) => Err(LockError::AlreadyExists),
            None => Ok(self.write(state, record)),
        })
        .await
    }

    async fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &RawVersion,
    ) -> Result<RawVersion, LockError> {
        self.call(LockOp::Update, |state| match &state.record {
            _ if state.conflicts.get(&self.identity).is_some_and(|n| *n > 0) => {
                if let Some(n) = state.conflicts.get_mut(&self.identity) {
                    *n -= 1;
                }
                Err(LockError::Conflict)
            }
            None => Err(LockError::NotFound),
            Some((_, current)) if current.to_string() != version.as_str() => {
                Err(LockError::Conflict)
            }
            Some(_) => Ok(self.write(state, record)),
        })
        .await
    }

    fn identity(&self) -> &str {
        &self.identity
    }

    fn describe(&self) -> String {
        format!("memory/{}", self.shared.name)
    }

    /// A Lease named after the lock, in no namespace (events land in `default`).
    fn object_reference(&self) -> Option<ObjectReference> {
        Some(ObjectReference::new(
            "coordination.k8s.io/v1",
            "Lease",
            "",
            self.shared.name.clone(),
        ))
    }

    /// None: tests of coordinated election play the coordinator on the record themselves.
    fn candidate(&self, _candidacy: &Candidacy) -> Option<LeaseCandidate> {
        None
    }
}
