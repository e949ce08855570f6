//! The informer queues every informer test runs on (since the in-order queue became the
//! default beside the DeltaFifo, every informer test runs on both), and `on_every_queue!`, which
//! turns one test function into one test per queue.
//!
//! Shared by the informer tests of this crate (through `common`) and by workqueue's controller
//! test, which includes this file by path: one list of queues for the whole workspace.
#![allow(dead_code)]

use shared_informer::{InOrder, InformerQueue};

/// The default queue: in order, atomic, batches of 1000, unlocked while processing.
pub const IN_ORDER: InformerQueue = InformerQueue::InOrder(InOrder {
    batch_size: 1000,
    atomic: true,
    unlock_while_processing: true,
});

/// The in-order queue in its other mode: a relist as tombstones and `Replaced` deltas, one delta
/// per pop.
pub const IN_ORDER_TOMBSTONES: InformerQueue = InformerQueue::InOrder(InOrder {
    batch_size: 1,
    atomic: false,
    unlock_while_processing: false,
});

/// The classic DeltaFifo.
pub const DELTA_FIFO: InformerQueue = InformerQueue::DeltaFifo;

/// Every queue, named as the tests `on_every_queue!` makes are.
pub const QUEUES: [(&str, InformerQueue); 3] = [
    ("in_order", IN_ORDER),
    ("in_order_tombstones_unbatched", IN_ORDER_TOMBSTONES),
    ("delta_fifo", DELTA_FIFO),
];

/// `on_every_queue!(test, attributes)` runs the async function `test(queue: InformerQueue)` once
/// per queue, as the tests `test::in_order`, `test::in_order_tombstones_unbatched` and
/// `test::delta_fifo`, each with `#[tokio::test(attributes)]`. The test crate's root must have
/// this module in scope as `queues`.
#[allow(unused_macros)]
macro_rules! on_every_queue {
    ($test:ident, $($attr:tt)*) => {
        mod $test {
            #[tokio::test($($attr)*)]
            async fn in_order() {
                super::$test(super::queues::IN_ORDER).await
            }
            #[tokio::test($($attr)*)]
            async fn in_order_tombstones_unbatched() {
                super::$test(super::queues::IN_ORDER_TOMBSTONES).await
            }
            #[tokio::test($($attr)*)]
            async fn delta_fifo() {
                super::$test(super::queues::DELTA_FIFO).await
            }
        }
    };
}

/// The name of `queue` in [`QUEUES`] (for paths and messages that must differ per queue).
pub fn name_of(queue: InformerQueue) -> &'static str {
    QUEUES
        .iter()
        .find(|(_, q)| *q == queue)
        .map_or("other", |(name, _)| name)
}
