//! Leader election with client-go's semantics (`tools/leaderelection`), so that of several
//! replicas of a controller only one reconciles at a time.
//!
//! ```text
//!   LeaderElector ──get / create / update(version)──► LeaseLock (one record, optimistic writes)
//!     acquire: every retry_period × (1 + U·1.2), take the lease once it expired by OUR clock
//!     renew:   every retry_period, one update over the version last seen (get only after a
//!              conflict); stop leading at last renew's start + renew_deadline
//!     lead:    on_started_leading(leader_token, LeaseGuard) / run_leading(..)
//!     stop:    revoke guard → cancel leader_token → on_stopped_leading → release (default on:
//!              fresh get, update only if still ours, retried until renew_deadline)
//!     events:  "<identity> became leader" / "<identity> stopped leading" (optional recorder)
//!     health:  LeaderElector::health / HealthzAdaptor: a leader stuck past its lease
//! ```
//!
//! Safety comes before liveness. The invariants, for an elector whose last successful renew
//! started at `t` (monotonic clock):
//! - nobody else can take the lease before `t + lease_duration`: others count the lease from when
//!   *they* saw the record change, which is after the write, which is after `t`;
//! - the elector stops leading (guard revoked, leader token cancelled) by `t + renew_deadline`,
//!   strictly earlier, as `renew_deadline < lease_duration`;
//! - the [`LeaseGuard`] is valid only until `t + lease_duration − margin`, read from the clock at
//!   each check, so it also holds when the process was frozen and its timers have not fired yet.
//!
//! The property test `leading_intervals_never_overlap_under_random_faults` checks that no two
//! electors ever lead at once under random failures, hangs, slow answers and lost answers of
//! the lock.
//!
//! Coordinated election ([`LeaderElectionConfig::coordinated`], client-go's alpha `Coordinated`):
//! the elector announces itself with a [`LeaseCandidate`] (written by its lock, answering the
//! coordinator's pings), the API server's coordinator assigns the holder, and the elector only
//! renews a Lease naming it and stops at the end of its term (a `preferredHolder` set).
//!
//! ```text
//!   LeaseCandidate <ns>/<identity>  ◄─ ping (pingTime) ── kube-apiserver's coordinator
//!     renew: at once after a ping, else every 5 min  ──►  elects among those that answered
//!   Lease <ns>/<name>               ◄─ holderIdentity ──┘ (never created nor taken by us)
//!     LeaderElector: leads while the Lease names it, renewing it as usual
//! ```
//!
//! Locks: [`ApiLeaseLock`] on a `coordination.k8s.io/v1` Lease (interoperable with client-go's),
//! and [`MemoryLock`] for tests.

mod config;
mod elector;
mod guard;
mod health;
mod lease;
mod lease_candidate;
mod lock;
mod memory;
mod micro_time;
mod record;

pub use config::{
    Candidacy, LeaderElectionConfig, LeaderElectionConfigError, CANDIDATE_RENEW_INTERVAL,
    JITTER_FACTOR, MAX_DURATION, OLDEST_EMULATION_VERSION,
};
pub use elector::{ElectionEnd, LeaderCallbacks, LeaderElector};
pub use guard::{LeadershipLost, LeaseGuard};
pub use health::{ElectionHealth, HealthzAdaptor, LeaseNotRenewed};
pub use lease::ApiLeaseLock;
pub(crate) use lease::{leases_api, lock_error};
pub use lease_candidate::LeaseCandidate;
pub use lock::{LeaseLock, LockError, RawVersion};
pub use memory::{Fault, InjectedFailure, LockCall, LockOp, LockWrite, MemoryLock};
pub use micro_time::{format as format_micro_time, parse as parse_micro_time};
pub use record::LeaderElectionRecord;

#[cfg(test)]
mod tests;
