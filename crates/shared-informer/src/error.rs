//! Errors of the informer layer.

use thiserror::Error;

/// Errors of informer operations.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum InformerError {
    /// The informer has stopped; handlers and indexers can no longer be added.
    #[error("handler {0} was not added to shared informer because it has stopped already")]
    HandlerAfterStop(String),
    /// `add_indexers` after the informer stopped.
    #[error("indexer was not added because it has stopped already")]
    IndexerAfterStop,
    /// A setting that may only change before `run` (transform, watch error handler).
    #[error("informer has already started")]
    AlreadyStarted,
    /// The store rejected the operation.
    #[error(transparent)]
    Store(#[from] reflector::store_index::StoreError),
}

/// A misuse of a [`SyncTracker`](crate::SyncTracker).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SyncTrackerError {
    /// `finished` with no started item left: refused, and the tracker will not report synced
    /// (client-go panics with "negative counter").
    #[error(
        "SyncTracker::finished called more often than start: the tracker will not report synced"
    )]
    FinishedWithoutStart,
}
