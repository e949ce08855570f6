//! # delta-fifo
//!
//! The queue between a reflector and an informer's store (client-go's `DeltaFIFO`).
#![deny(missing_docs)]

mod delta;
mod delta_fifo;
mod error;
mod options;
mod process;
mod queue;
mod store;

pub use delta::{Delta, DeltaType, Deltas};
pub use delta_fifo::DeltaFifo;
pub use error::FifoError;
pub use options::{DeltaFifoOptions, KnownObjects, Transformer};
pub use process::ProcessError;
pub use queue::Queue;
pub use store::Store;

/// The layer below, re-exported so that depending on this crate is enough.
pub use store_index;
