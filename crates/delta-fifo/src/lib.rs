//! # delta-fifo
//!
//! The queue between a reflector and an informer's store (client-go's `DeltaFIFO`).
#![deny(missing_docs)]

mod error;
mod store;

pub use error::FifoError;
pub use store::Store;

/// The layer below, re-exported so that depending on this crate is enough.
pub use store_index;
