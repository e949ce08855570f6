//! [`Queue`]: the consumer-facing side shared by [`DeltaFifo`](crate::DeltaFifo) and
//! [`RealFifo`](crate::RealFifo), so an informer can be built on either.

use std::future::Future;

use crate::delta::Deltas;
use crate::error::FifoError;
use crate::process::ProcessError;
use crate::store::Store;

/// A queue of deltas that a reflector fills (through [`Store`]) and an informer drains.
pub trait Queue<K>: Store<K> + Clone + Send + Sync + 'static {
    /// Waits for the next item and runs `process` on it under the queue's lock; see
    /// [`DeltaFifo::pop`](crate::DeltaFifo::pop) for the outcomes.
    fn pop<R, F>(&self, process: F) -> impl Future<Output = Result<Option<R>, FifoError>> + Send
    where
        F: FnOnce(&Deltas<K>, bool) -> Result<R, ProcessError> + Send,
        R: Send;
    /// Whether the initial population has been fully popped.
    fn has_synced(&self) -> bool;
    /// Waits until synced (after the last initial item's process call returned).
    fn wait_synced(&self) -> impl Future<Output = ()> + Send;
    /// Closes the queue; poppers get [`FifoError::Closed`] once it is empty.
    fn close(&self);
    /// Whether the queue is closed.
    fn is_closed(&self) -> bool;
    /// Number of queued items.
    fn len(&self) -> usize;
    /// True when nothing is queued.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
