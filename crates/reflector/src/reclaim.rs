//! [`Reclaim`]: objects an informer is done with, handed back to the reflector, to be dropped
//! where they were decoded: on the reflector's decode lane when its lister-watcher's objects
//! were decoded there (`decode_lane.rs`, M5), else by the task that reads the watch. Why the
//! thread that frees an object matters, and the whole path of an object from socket to handler:
//! `shared_informer::threading`.
//!
//! How: the informer gives each object it is done with (the old object of an update or the
//! object of a deletion, once every handler has handled it) to its [`Reclaim`], which keeps it
//! when a watch is being read and there is room, and lets the giver drop it otherwise. The
//! reflector's watch loop drops everything kept (hands it to the lane, when there is one) before
//! it applies the next events, when it is woken by the first object kept while it waits for
//! events, and once more when the watch ends.
//!
//! Invariants (checked by this module's tests):
//! - **G1 (bounded)**: at most [`Reclaim::CAPACITY`] objects are kept; past that the giver drops
//!   what it gives, as it would without a `Reclaim`.
//! - **G2 (nothing kept when no watch is read)**: while no watch is being read (listing, waiting
//!   to retry, stopped), nothing is kept, and when a watch ends everything kept is dropped. While
//!   a watch is read, what is kept is dropped before its next events are applied, or as soon as
//!   the reading task runs when it is waiting for events; with a lane, "dropped" means handed to
//!   the lane, which frees it before its next decoding job (`decode_lane.rs`, M7), at once when
//!   the watch ends.
//! - **G3 (last references only)**: an object is kept only when the giver holds its last
//!   reference: one still in the cache, or held by a handler, is never kept, so a `Reclaim` never
//!   delays more than the free of memory nobody can reach.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::decode_lane::DecodeLane;

/// Objects an informer is done with, dropped where they were decoded (the reflector's
/// decode lane, else the reflector's watch loop) rather than by the thread that last held them,
/// so that under glibc's per-thread arenas each object is allocated and freed by one thread
/// (why, and the whole path of an object: `shared_informer::threading`).
///
/// At most [`CAPACITY`](Self::CAPACITY) objects are kept (G1), none while no watch is read
/// (G2), and only those whose last reference the giver holds (G3).
///
/// A [`Reflector`](crate::Reflector) given one with
/// [`with_reclaim`](crate::Reflector::with_reclaim) drops what it keeps while it reads a watch;
/// `shared-informer` wires one between each informer's reflector and its handlers. Code that
/// holds no `Reclaim` drops objects as usual: it is an optimisation, never needed for
/// correctness.
///
/// ```
/// use std::sync::Arc;
/// use reflector::Reclaim;
///
/// let reclaim = Reclaim::<String>::new();
/// // No watch is being read: the giver drops the object itself.
/// reclaim.give(Arc::new("old".to_string()));
/// assert_eq!(reclaim.len(), 0);
/// ```
pub struct Reclaim<K> {
    state: Mutex<State<K>>,
    /// Signalled when something is kept and nothing was: wakes a reading task waiting for events.
    kept_some: Notify,
}

struct State<K> {
    /// Last references to objects, to be dropped by the reading task. At most `CAPACITY` (G1);
    /// empty while `reading` is false (G2).
    kept: Vec<Arc<K>>,
    /// A watch is being read, by the task holding the [`Reading`] guard.
    reading: bool,
}

impl<K> std::fmt::Debug for Reclaim<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock();
        f.debug_struct("Reclaim")
            .field("kept", &state.kept.len())
            .field("reading", &state.reading)
            .finish()
    }
}

impl<K> Default for Reclaim<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> Reclaim<K> {
    /// Most objects kept at once (G1). A watch loop drops what is kept at least every 64 events,
    /// so in a burst the bound is rarely reached; it limits what a burst's end leaves kept until
    /// the watch's next event (a few MB of pods at most).
    pub const CAPACITY: usize = 512;

    /// An empty `Reclaim`, with no watch being read.
    pub fn new() -> Self {
        Reclaim {
            state: Mutex::new(State {
                kept: Vec::new(),
                reading: false,
            }),
            kept_some: Notify::new(),
        }
    }

    /// Hands back one object the caller is done with (see [`give_all`](Self::give_all)).
    pub fn give(&self, obj: Arc<K>) {
        if Arc::strong_count(&obj) != 1 || Arc::weak_count(&obj) != 0 {
            return;
        }
        let mut state = self.state.lock();
        if state.reading && state.kept.len() < Self::CAPACITY {
            let was_empty = state.kept.is_empty();
            state.kept.push(obj);
            drop(state);
            if was_empty {
                self.kept_some.notify_one();
            }
        }
        // Otherwise `obj` is dropped here, after the guard (locals drop in reverse order).
    }

    /// Hands back objects the caller is done with, and empties `objects`. Those whose last
    /// reference the caller holds are kept for the reading task while a watch is being read and
    /// there is room (G1–G3); the rest are dropped here, as without a `Reclaim`.
    pub fn give_all(&self, objects: &mut Vec<Arc<K>>) {
        objects.retain(|obj| Arc::strong_count(obj) == 1 && Arc::weak_count(obj) == 0);
        if !objects.is_empty() {
            let mut state = self.state.lock();
            if state.reading {
                let was_empty = state.kept.is_empty();
                let room = Self::CAPACITY.saturating_sub(state.kept.len());
                let take = room.min(objects.len());
                state.kept.extend(objects.drain(..take));
                if was_empty && take > 0 {
                    drop(state);
                    self.kept_some.notify_one();
                }
            }
        }
        // Whatever was not kept is dropped here, outside the lock.
        objects.clear();
    }

    /// Objects kept now, waiting for the reading task.
    pub fn len(&self) -> usize {
        self.state.lock().kept.len()
    }

    /// Whether nothing is kept now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Marks a watch as being read until the guard is dropped, which drops everything kept (G2).
    /// Only one watch is read at a time per `Reclaim`; the reflector holds the guard.
    /// With a `lane`, what is kept is dropped on the lane's thread, the one its objects were
    /// decoded on (`decode_lane.rs`, M1); without, on the caller's.
    pub(crate) fn reading(&self, lane: Option<DecodeLane>) -> Reading<'_, K>
    where
        K: Send + Sync + 'static,
    {
        self.state.lock().reading = true;
        Reading {
            reclaim: self,
            spare: Vec::new(),
            lane,
        }
    }

    /// Swaps what is kept with `spare` (empty), so that the caller drops it outside the lock.
    fn swap_out(&self, spare: &mut Vec<Arc<K>>) {
        std::mem::swap(&mut self.state.lock().kept, spare);
    }
}

/// Resolves when `reading` is some and something was kept while nothing was; never otherwise.
/// For a `select!` arm of the watch loop.
pub(crate) async fn kept_some<K: Send + Sync + 'static>(reading: Option<&Reading<'_, K>>) {
    match reading {
        Some(reading) => reading.kept_some().await,
        None => std::future::pending().await,
    }
}

/// A watch is being read: while it lives, given objects are kept for [`drop_kept`](Self::drop_kept).
pub(crate) struct Reading<'a, K: Send + Sync + 'static> {
    reclaim: &'a Reclaim<K>,
    /// The other of the two vectors kept objects move between, so that dropping them here
    /// allocates nothing.
    spare: Vec<Arc<K>>,
    /// Where kept objects are dropped; here when `None`.
    lane: Option<DecodeLane>,
}

impl<K: Send + Sync + 'static> Reading<'_, K> {
    /// Resolves when something was kept while nothing was (also if that happened before the
    /// call): the reading task should [`drop_kept`](Self::drop_kept).
    pub(crate) async fn kept_some(&self) {
        self.reclaim.kept_some.notified().await;
    }

    /// Drops everything kept: on the lane if there is one, before its next job (M7 in
    /// `decode_lane.rs`: a watch that reads on decodes again soon), else on the calling task.
    pub(crate) fn drop_kept(&mut self) {
        self.reclaim.swap_out(&mut self.spare);
        match self.lane {
            Some(lane) if !self.spare.is_empty() => {
                lane.drop_later(std::mem::take(&mut self.spare))
            }
            _ => self.spare.clear(),
        }
    }
}

impl<K: Send + Sync + 'static> Drop for Reading<'_, K> {
    fn drop(&mut self) {
        let kept = {
            let mut state = self.reclaim.state.lock();
            state.reading = false;
            std::mem::take(&mut state.kept)
        };
        match self.lane {
            Some(lane) => lane.drop_all(kept),
            None => drop(kept),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use proptest::prelude::*;

    use super::*;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn g2_nothing_is_kept_while_no_watch_is_read() {
        let drops = Arc::new(AtomicUsize::new(0));
        let reclaim = Reclaim::new();
        reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 1));
    }

    #[test]
    fn g2_kept_objects_are_dropped_by_the_reader_and_when_the_watch_ends() {
        let drops = Arc::new(AtomicUsize::new(0));
        let reclaim = Reclaim::new();
        let mut reading = reclaim.reading(None);
        reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
        reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (2, 0));
        reading.drop_kept();
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 2));
        reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
        assert_eq!(reclaim.len(), 1);
        drop(reading);
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 3));
        // After the watch, the giver drops again.
        reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 4));
    }

    #[tokio::test]
    async fn g2_a_reader_waiting_for_events_is_woken_by_the_first_object_kept() {
        let drops = Arc::new(AtomicUsize::new(0));
        let reclaim = Arc::new(Reclaim::new());
        let mut reading = reclaim.reading(None);
        let giver = tokio::spawn({
            let reclaim = Arc::clone(&reclaim);
            let drops = Arc::clone(&drops);
            async move { reclaim.give(Arc::new(Counted(drops))) }
        });
        reading.kept_some().await;
        reading.drop_kept();
        giver.await.unwrap();
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 1));
    }

    #[test]
    fn g3_objects_still_referenced_are_never_kept() {
        let drops = Arc::new(AtomicUsize::new(0));
        let reclaim = Reclaim::new();
        let _reading = reclaim.reading(None);
        let cached = Arc::new(Counted(Arc::clone(&drops)));
        reclaim.give(Arc::clone(&cached));
        let weak = Arc::new(Counted(Arc::clone(&drops)));
        let _observer = Arc::downgrade(&weak);
        reclaim.give(weak);
        // The weakly observed one is dropped at once (its observer sees it go), the cached one
        // is still alive, and neither is kept.
        assert_eq!((reclaim.len(), drops.load(Ordering::SeqCst)), (0, 1));
        drop(cached);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    proptest! {
        /// G1 and G2 over any sequence of gives, drains and watch boundaries: what is kept never
        /// exceeds the capacity, is empty outside a watch, and every object is dropped exactly
        /// once, by the end.
        #[test]
        fn g1_g2_bounded_and_nothing_lost_or_kept_outside_a_watch(
            ops in proptest::collection::vec((0u8..4, 0usize..700), 1..40)
        ) {
            let drops = Arc::new(AtomicUsize::new(0));
            let reclaim = Reclaim::new();
            let mut reading: Option<Reading<'_, Counted>> = None;
            let mut given = 0;
            for (op, n) in ops {
                match op {
                    0 => {
                        for _ in 0..n {
                            reclaim.give(Arc::new(Counted(Arc::clone(&drops))));
                        }
                        given += n;
                    }
                    1 => {
                        let mut objects: Vec<_> =
                            (0..n).map(|_| Arc::new(Counted(Arc::clone(&drops)))).collect();
                        given += n;
                        reclaim.give_all(&mut objects);
                        prop_assert!(objects.is_empty());
                    }
                    2 => {
                        if let Some(r) = reading.as_mut() {
                            r.drop_kept();
                            prop_assert_eq!(reclaim.len(), 0);
                        }
                    }
                    _ => {
                        reading = match reading.take() {
                            Some(r) => { drop(r); None }
                            None => Some(reclaim.reading(None)),
                        };
                    }
                }
                prop_assert!(reclaim.len() <= Reclaim::<Counted>::CAPACITY);
                if reading.is_none() {
                    prop_assert_eq!(reclaim.len(), 0);
                }
                prop_assert_eq!(drops.load(Ordering::SeqCst) + reclaim.len(), given);
            }
            drop(reading);
            prop_assert_eq!(drops.load(Ordering::SeqCst), given);
        }
    }
}
