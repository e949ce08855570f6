//! What a pop's process function may answer.

use store_index::BoxError;

/// The error a process function passed to `pop` may return.
#[derive(Debug)]
pub enum ProcessError {
    /// Put the popped item back at the end of the queue unless its key was queued again meanwhile
    /// (legacy `ErrRequeue`, contract B10.4). `pop` then returns the inner error, or `Ok(None)`.
    Requeue(Option<BoxError>),
    /// Processing failed; the item is dropped and `pop` returns the error.
    Failed(BoxError),
}

impl ProcessError {
    /// A failure from any error value.
    pub fn failed(e: impl Into<BoxError>) -> Self {
        ProcessError::Failed(e.into())
    }
}
