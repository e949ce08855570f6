//! Errors of the queue layer.

use store_index::{BoxError, KeyError, StoreError};
use thiserror::Error;

/// Errors of queue operations.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum FifoError {
    /// The queue is closed and empty (client-go's `ErrFIFOClosed`).
    #[error("DeltaFIFO: manipulating with closed queue")]
    Closed,
    /// A key could not be computed for an object; nothing was enqueued for it.
    #[error("couldn't create key for object {object}: {source}")]
    Key {
        /// A description of the object.
        object: String,
        /// Why the key could not be computed.
        #[source]
        source: KeyError,
    },
    /// The transformer failed; that delta was not enqueued.
    #[error("transforming: {0}")]
    Transform(#[source] BoxError),
    /// `replace` failed part way: items enqueued before the failing one stay queued.
    #[error("couldn't enqueue object: {0}")]
    Enqueue(#[source] Box<FifoError>),
    /// A store below the queue failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The process function passed to `pop` failed (the item was dropped, or re-queued when the
    /// function asked for it).
    #[error("processing failed: {0}")]
    Process(#[source] BoxError),
}

impl FifoError {
    /// The innermost [`KeyError`], if this is a key failure (looking through `Enqueue` and
    /// `Store` wrappers).
    pub fn key_error(&self) -> Option<&KeyError> {
        match self {
            FifoError::Key { source, .. } => Some(source),
            FifoError::Enqueue(inner) => inner.key_error(),
            FifoError::Store(e) => e.key_error(),
            _ => None,
        }
    }
}
