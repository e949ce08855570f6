//! What a pop's process function may answer.

use store_index::BoxError;

/// The error a process function passed to `pop` may return.
#[derive(Debug)]
#[non_exhaustive]
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

/// Maps a process function's result to what `pop` returns, calling `requeue` for
/// [`ProcessError::Requeue`] (contract B10.4).
pub(crate) fn finish<R>(
    result: Result<R, ProcessError>,
    requeue: impl FnOnce(),
) -> Result<Option<R>, crate::FifoError> {
    match result {
        Ok(r) => Ok(Some(r)),
        Err(ProcessError::Requeue(inner)) => {
            requeue();
            inner.map_or(Ok(None), |e| Err(crate::FifoError::Process(e)))
        }
        Err(ProcessError::Failed(e)) => Err(crate::FifoError::Process(e)),
    }
}
