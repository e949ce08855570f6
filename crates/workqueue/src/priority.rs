//! The order a [`PriorityQueue`](crate::PriorityQueue) hands items out in: highest priority
//! first, first in first out within a priority, and **aging**, so that no priority starves.
//!
//! controller-runtime's priority queue puts the objects of an informer's initial list and of its
//! resyncs below live events (priority [`LOW_PRIORITY`] against [`DEFAULT_PRIORITY`]). Served in
//! strict priority order, a low item waits for as long as high ones keep coming, which under a
//! steady flood is for good. Here a waiting item's *effective* priority rises with its wait, by
//! one level for every [`AgingRate`] step `A`:
//!
//! ```text
//!   effective(now) = priority + (now − added) / A
//! ```
//!
//! Every waiting item ages at the same rate, so comparing two effective priorities never depends
//! on `now`: `a` goes first exactly when `added_a − priority_a·A < added_b − priority_b·A`. That
//! difference is the item's *rank*, fixed when it is queued, so the order is a sorted map and
//! costs O(log n) per add and get, with no re-sorting as time passes.
//!
//! **The bound** (PQ3): an item queued at `t` with priority `p` is handed out before any item of
//! priority at most `q` that is queued after `t + (q − p)·A`. So a flood of priority `q`, however
//! long, overtakes it only with the items queued in the window `(q − p)·A` after it. Served at
//! `μ` items per second, with `B` items ahead of it when it was queued (those being processed
//! included) and at most `λ` items per second added meanwhile, it is handed out within
//!
//! ```text
//!   W ≤ (B + λ·(q − p)·A) / μ
//! ```
//!
//! With the default rate (one level per 100 ms) an item of the initial list (−100) is overtaken
//! only by live events (0) queued in the 10 s after it. With [`AgingRate::ZERO`] the order is
//! controller-runtime's, strict priority, and a low item can starve.
//! `priority_queue.rs`'s tests prove both under paused time with a flood that never stops.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::metrics::PriorityGaugeMetric;

/// The priority of a live event, and of an add that names none for an item not already queued
/// (controller-runtime's default, 0).
pub const DEFAULT_PRIORITY: i32 = 0;

/// The priority of objects from an informer's initial list and from its resyncs
/// (controller-runtime's `handler.LowPriority`, −100).
pub const LOW_PRIORITY: i32 = -100;

/// How fast a waiting item's effective priority rises: one level per step of waiting.
///
/// The default is one level per 100 ms, so an item of [`LOW_PRIORITY`] is overtaken by
/// [`DEFAULT_PRIORITY`] items only when they were queued less than 10 s after it (PQ3).
///
/// ```
/// use std::time::Duration;
/// use workqueue::AgingRate;
///
/// let rate = AgingRate::one_level_per(Duration::from_millis(100));
/// assert_eq!(rate, AgingRate::default());
/// assert_eq!(rate.levels_per_second(), 10.0);
/// // The longest an item of priority -100 is overtaken by items of priority 0:
/// assert_eq!(rate.overtaken_for(-100, 0), Some(Duration::from_secs(10)));
/// assert_eq!(AgingRate::ZERO.overtaken_for(-100, 0), None); // for ever
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct AgingRate {
    /// The wait that raises the effective priority by one; `None`: no aging.
    step: Option<Duration>,
}

impl AgingRate {
    /// No aging: strict priority order, as controller-runtime's queue; a low item can starve.
    pub const ZERO: AgingRate = AgingRate { step: None };

    /// One level of priority per `step` of waiting. A zero step ages infinitely fast: every
    /// item is served in the order it was queued, whatever its priority.
    pub const fn one_level_per(step: Duration) -> AgingRate {
        AgingRate { step: Some(step) }
    }

    /// Levels of priority gained per second of waiting (0 for [`ZERO`](Self::ZERO), infinite for
    /// a zero step).
    pub fn levels_per_second(&self) -> f64 {
        match self.step {
            None => 0.0,
            Some(step) => 1.0 / step.as_secs_f64(),
        }
    }

    /// The bound of PQ3: how long after an item of priority `low` was queued items of priority
    /// at most `high` can still be served before it, `(high − low)·step`; `None` when they can
    /// for ever (no aging). Zero when `high ≤ low`.
    pub fn overtaken_for(&self, low: i32, high: i32) -> Option<Duration> {
        let step = self.step?;
        let levels = u32::try_from(i64::from(high) - i64::from(low)).unwrap_or(0);
        Some(step.saturating_mul(levels))
    }

    /// The rank of an item of `priority` queued at `added` nanoseconds after the queue's epoch:
    /// lower ranks are served first.
    fn rank(&self, priority: i32, added: i128) -> i128 {
        match self.step {
            None => -i128::from(priority),
            Some(step) => added - i128::from(priority) * step.as_nanos() as i128,
        }
    }
}

impl Default for AgingRate {
    fn default() -> Self {
        AgingRate::one_level_per(Duration::from_millis(100))
    }
}

impl fmt::Debug for AgingRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            None => f.write_str("AgingRate::ZERO"),
            Some(step) => write!(f, "AgingRate::one_level_per({step:?})"),
        }
    }
}

/// Where an item stands in the order: its rank, then the sequence number of its queueing, so
/// that equal ranks (same priority, same instant; or any instant without aging) go first in
/// first out.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Place {
    rank: i128,
    seq: u64,
}

/// A waiting item's priority and when it was queued.
#[derive(Clone, Copy, Debug)]
struct Queued {
    priority: i32,
    /// Nanoseconds from the backlog's epoch to the item's queueing.
    added: i128,
    seq: u64,
}

/// An item handed out and not yet done.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    /// The priority it was handed out with.
    served: i32,
    /// The highest priority named by adds while it was processed, if any named one.
    requeue: Option<i32>,
}

/// The waiting items of a priority queue in the order they are handed out, and the priorities
/// of the items in flight.
///
/// Invariants, checked by `PriorityBacklog::check_invariants` in the property tests below and
/// in `priority_queue.rs`:
/// - **PQ1** (one place per item): `order` and `queued` hold the same items, each once, and an
///   item's place in `order` is the one its `Queued` entry gives (`rank(priority, added)`,
///   `seq`); sequence numbers are unique.
/// - **PQ2** (served in priority order, first in first out within a priority): `pop` hands out
///   the item whose effective priority is highest at that moment, and of those the one queued
///   first (equal times: the one queued first by sequence).
/// - **PQ3** (aging bound): an item queued at `t` with priority `p` is handed out before every
///   item of priority at most `q` queued after `t + (q − p)·A`, `A` the aging step
///   ([`AgingRate::overtaken_for`]); with [`AgingRate::ZERO`] there is no such bound.
/// - **PQ4** (one worker per item, priority kept in flight): an item has an `in_flight` entry
///   exactly from the `pop` that hands it out to its `finish`, never while it is queued; it is
///   queued again after `finish` only if it was added meanwhile, then with the highest priority
///   those adds named, or else the one it was served with.
/// - **PQ5** (adding again raises, never moves in time): while an item waits, its priority is
///   the highest named by the adds since it was queued (an add naming none keeps it), and its
///   `added` time and `seq` never change.
///
/// Bounds: one entry per distinct waiting item in `order` and `queued`, one per item in flight
/// in `in_flight`; both are the keys the queue holds anyway.
pub(crate) struct PriorityBacklog<T> {
    aging: AgingRate,
    epoch: Instant,
    order: BTreeMap<Place, T>,
    queued: HashMap<T, Queued>,
    in_flight: HashMap<T, InFlight>,
    next_seq: u64,
    /// `workqueue_depth` by priority, for a named queue with metrics.
    depth: Option<Arc<dyn PriorityGaugeMetric>>,
}

impl<T> PriorityBacklog<T> {
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }
}

impl<T: Hash + Eq + Clone> PriorityBacklog<T> {
    pub(crate) fn new(aging: AgingRate, depth: Option<Arc<dyn PriorityGaugeMetric>>) -> Self {
        Self {
            aging,
            epoch: Instant::now(),
            order: BTreeMap::new(),
            queued: HashMap::new(),
            in_flight: HashMap::new(),
            next_seq: 0,
            depth,
        }
    }

    #[cfg(test)]
    pub(crate) fn items(&self) -> impl Iterator<Item = &T> {
        self.order.values()
    }

    fn now(&self) -> i128 {
        Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos() as i128
    }

    /// Queues an item that is neither waiting nor in flight, at the back of its priority.
    pub(crate) fn push(&mut self, item: T, priority: Option<i32>) {
        let priority = priority.unwrap_or(DEFAULT_PRIORITY);
        let queued = Queued {
            priority,
            added: self.now(),
            seq: self.next_seq,
        };
        self.next_seq += 1;
        if let Some(depth) = &self.depth {
            depth.inc(priority);
        }
        self.order.insert(self.place(&queued), item.clone());
        self.queued.insert(item, queued);
    }

    fn place(&self, queued: &Queued) -> Place {
        Place {
            rank: self.aging.rank(queued.priority, queued.added),
            seq: queued.seq,
        }
    }

    /// A waiting item added again: takes `priority` if higher, keeping its time (PQ5).
    pub(crate) fn raise(&mut self, item: &T, priority: Option<i32>) {
        let Some(priority) = priority else { return };
        let Some(queued) = self.queued.get(item).copied() else {
            return;
        };
        if priority <= queued.priority {
            return;
        }
        let raised = Queued { priority, ..queued };
        if let Some(item) = self.order.remove(&self.place(&queued)) {
            self.order.insert(self.place(&raised), item);
        }
        self.queued.insert(item.clone(), raised);
        if let Some(depth) = &self.depth {
            depth.dec(queued.priority);
            depth.inc(priority);
        }
    }

    /// An item in flight added again: remembers the highest priority named (PQ4).
    pub(crate) fn note_requeue(&mut self, item: &T, priority: Option<i32>) {
        if let (Some(priority), Some(flight)) = (priority, self.in_flight.get_mut(item)) {
            flight.requeue = Some(flight.requeue.map_or(priority, |p| p.max(priority)));
        }
    }

    /// Hands out the first item in the order and records it in flight (PQ2, PQ4).
    pub(crate) fn pop(&mut self) -> Option<(T, i32)> {
        let (_, item) = self.order.pop_first()?;
        let queued = self.queued.remove(&item)?;
        if let Some(depth) = &self.depth {
            depth.dec(queued.priority);
        }
        self.in_flight.insert(
            item.clone(),
            InFlight {
                served: queued.priority,
                requeue: None,
            },
        );
        Some((item, queued.priority))
    }

    /// An item's processing is done; queues it again, now, if `requeue` (it was added while in
    /// flight) with the priority PQ4 gives.
    pub(crate) fn finish(&mut self, item: &T, requeue: bool) {
        let flight = self.in_flight.remove(item);
        if requeue {
            let priority = flight.map(|f| f.requeue.unwrap_or(f.served));
            self.push(item.clone(), priority);
        }
    }

    /// The priority an add naming none gives `item`: its own while it waits, the one it would
    /// be queued again with while in flight; `None` for an item the queue does not hold.
    pub(crate) fn priority_of(&self, item: &T) -> Option<i32> {
        if let Some(queued) = self.queued.get(item) {
            return Some(queued.priority);
        }
        self.in_flight
            .get(item)
            .map(|f| f.requeue.unwrap_or(f.served))
    }

    /// Checks PQ1 and the structural half of PQ4 against the queue's processing set.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self, processing: &std::collections::HashSet<T>) {
        use std::collections::HashSet;
        assert_eq!(
            self.order.len(),
            self.queued.len(),
            "PQ1: order and queued differ"
        );
        let mut seqs = HashSet::new();
        for (place, item) in &self.order {
            let queued = self.queued.get(item).expect("PQ1: ordered item not queued");
            assert_eq!(*place, self.place(queued), "PQ1: item out of its place");
            assert!(seqs.insert(place.seq), "PQ1: sequence number given twice");
            assert!(
                !self.in_flight.contains_key(item),
                "PQ4: queued while in flight"
            );
        }
        let flying: HashSet<&T> = self.in_flight.keys().collect();
        let processing: HashSet<&T> = processing.iter().collect();
        assert!(flying == processing, "PQ4: in flight is not processing");
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[tokio::test(start_paused = true)]
    async fn without_aging_higher_priority_first_and_fifo_within_a_priority() {
        let mut b = PriorityBacklog::new(AgingRate::ZERO, None);
        b.push("low-1", Some(LOW_PRIORITY));
        b.push("high-1", None);
        tokio::time::advance(Duration::from_secs(3600)).await;
        b.push("low-2", Some(LOW_PRIORITY));
        b.push("high-2", Some(DEFAULT_PRIORITY));
        b.push("top", Some(7));
        let order: Vec<_> = std::iter::from_fn(|| b.pop()).collect();
        assert_eq!(
            order,
            [
                ("top", 7),
                ("high-1", 0),
                ("high-2", 0),
                ("low-1", -100),
                ("low-2", -100)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_waiting_longer_than_its_priority_gap_times_the_step_goes_first() {
        let mut b = PriorityBacklog::new(AgingRate::one_level_per(ms(10)), None);
        b.push("low", Some(-10));
        tokio::time::advance(ms(99)).await;
        b.push("high-before", Some(0));
        tokio::time::advance(ms(1)).await;
        b.push("high-at", Some(0)); // same rank as `low`: queued later, served later
        tokio::time::advance(ms(1)).await;
        b.push("high-after", Some(0));
        let order: Vec<_> = std::iter::from_fn(|| b.pop().map(|(i, _)| i)).collect();
        assert_eq!(order, ["high-before", "low", "high-at", "high-after"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_raise_keeps_the_time_and_a_lower_or_unnamed_priority_changes_nothing() {
        let mut b = PriorityBacklog::new(AgingRate::ZERO, None);
        b.push("a", Some(LOW_PRIORITY));
        b.push("b", Some(LOW_PRIORITY));
        b.push("c", Some(5));
        b.raise(&"b", Some(-200));
        b.raise(&"b", None);
        assert_eq!(b.priority_of(&"b"), Some(LOW_PRIORITY));
        b.raise(&"b", Some(5));
        b.raise(&"a", Some(5));
        assert_eq!(b.priority_of(&"b"), Some(5));
        let order: Vec<_> = std::iter::from_fn(|| b.pop().map(|(i, _)| i)).collect();
        assert_eq!(
            order,
            ["a", "b", "c"],
            "raised items keep their place in time"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_item_added_in_flight_comes_back_with_the_highest_priority_named_or_its_own() {
        let mut b = PriorityBacklog::new(AgingRate::ZERO, None);
        b.push("a", Some(LOW_PRIORITY));
        let (a, _) = b.pop().unwrap();
        assert_eq!(b.priority_of(&a), Some(LOW_PRIORITY));
        b.finish(&a, true);
        assert_eq!(
            b.pop(),
            Some(("a", LOW_PRIORITY)),
            "no priority named: its own"
        );
        b.note_requeue(&a, Some(3));
        b.note_requeue(&a, Some(1));
        b.note_requeue(&a, None);
        assert_eq!(b.priority_of(&a), Some(3));
        b.finish(&a, true);
        assert_eq!(b.pop(), Some(("a", 3)));
        b.finish(&a, false);
        assert_eq!((b.len(), b.priority_of(&a)), (0, None));
    }

    #[test]
    fn the_bound_is_the_priority_gap_times_the_step() {
        let rate = AgingRate::one_level_per(ms(100));
        assert_eq!(
            rate.overtaken_for(LOW_PRIORITY, 0),
            Some(Duration::from_secs(10))
        );
        assert_eq!(rate.overtaken_for(0, LOW_PRIORITY), Some(Duration::ZERO));
        assert_eq!(
            rate.overtaken_for(i32::MIN, i32::MAX),
            Some(ms(100) * u32::MAX)
        );
        assert_eq!(AgingRate::ZERO.overtaken_for(LOW_PRIORITY, 0), None);
        assert_eq!(AgingRate::ZERO.levels_per_second(), 0.0);
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push(u8, Option<i8>),
        Raise(u8, Option<i8>),
        Pop,
        Finish(usize, bool),
        Wait(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        let priority = proptest::option::of(-4i8..4);
        prop_oneof![
            4 => (0u8..12, priority.clone()).prop_map(|(k, p)| Op::Push(k, p)),
            3 => (0u8..12, priority).prop_map(|(k, p)| Op::Raise(k, p)),
            3 => Just(Op::Pop),
            2 => (0usize..8, any::<bool>()).prop_map(|(i, r)| Op::Finish(i, r)),
            2 => (0u8..30).prop_map(Op::Wait),
        ]
    }

    /// The model's waiting item: the priority and time the invariants say it has.
    #[derive(Debug, Clone, Copy)]
    struct Model {
        priority: i32,
        added: i128,
        seq: u64,
    }

    /// The item PQ2 says goes next, by a linear scan of effective priorities at `now`:
    /// `priority + (now − added) / step`, compared as `priority·step + (now − added)`.
    fn model_next(models: &HashMap<u8, Model>, aging: AgingRate, now: i128) -> Option<u8> {
        let effective = |m: &Model| match aging.step {
            None => i128::from(m.priority),
            Some(step) => i128::from(m.priority) * step.as_nanos() as i128 + (now - m.added),
        };
        models
            .iter()
            .max_by(|(_, a), (_, b)| {
                effective(a)
                    .cmp(&effective(b))
                    .then(b.added.cmp(&a.added))
                    .then(b.seq.cmp(&a.seq))
            })
            .map(|(k, _)| *k)
    }

    fn run(ops: Vec<Op>, aging: AgingRate) {
        crate::paused_clock::block_on_paused(async {
            let mut b = PriorityBacklog::new(aging, None);
            let mut models: HashMap<u8, Model> = HashMap::new();
            // Items in flight: the priority each was served with, and the highest one named by
            // adds since (PQ4).
            let mut flying: HashMap<u8, (i32, Option<i32>)> = HashMap::new();
            let mut seq = 0;
            for op in ops {
                let now = b.now();
                match op {
                    Op::Push(k, p) if !models.contains_key(&k) && !flying.contains_key(&k) => {
                        let p = p.map(i32::from);
                        b.push(k, p);
                        let priority = p.unwrap_or(DEFAULT_PRIORITY);
                        models.insert(
                            k,
                            Model {
                                priority,
                                added: now,
                                seq,
                            },
                        );
                        seq += 1;
                    }
                    Op::Push(..) => {}
                    Op::Raise(k, p) => {
                        let p = p.map(i32::from);
                        if let Some((_, requeue)) = flying.get_mut(&k) {
                            b.note_requeue(&k, p);
                            *requeue = (*requeue).max(p);
                        } else {
                            b.raise(&k, p);
                            if let (Some(m), Some(p)) = (models.get_mut(&k), p) {
                                m.priority = m.priority.max(p);
                            }
                        }
                    }
                    Op::Pop => {
                        let expected = model_next(&models, aging, now);
                        let got = b.pop();
                        assert_eq!(got.map(|(k, _)| k), expected, "PQ2: served out of order");
                        if let Some((k, p)) = got {
                            let m = models.remove(&k).unwrap();
                            assert_eq!(p, m.priority, "PQ5: priority is the highest named");
                            let fresh = flying.insert(k, (p, None)).is_none();
                            assert!(fresh, "PQ4: handed out twice");
                        }
                    }
                    Op::Finish(i, requeue) => {
                        let mut held: Vec<u8> = flying.keys().copied().collect();
                        held.sort_unstable();
                        if held.is_empty() {
                            continue;
                        }
                        let k = held[i % held.len()];
                        let (served, named) = flying.remove(&k).unwrap();
                        let expected = named.unwrap_or(served);
                        assert_eq!(b.priority_of(&k), Some(expected), "PQ4: requeue priority");
                        b.finish(&k, requeue);
                        if requeue {
                            models.insert(
                                k,
                                Model {
                                    priority: expected,
                                    added: now,
                                    seq,
                                },
                            );
                            seq += 1;
                        }
                    }
                    Op::Wait(n) => tokio::time::advance(ms(u64::from(n))).await,
                }
                let processing: HashSet<u8> = flying.keys().copied().collect();
                b.check_invariants(&processing);
            }
        });
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// PQ1, PQ2, PQ4 and PQ5 against a model that scans effective priorities, with aging.
        #[test]
        fn invariants_pq1_pq2_pq4_pq5_with_aging(
            ops in proptest::collection::vec(op(), 1..150)
        ) {
            run(ops, AgingRate::one_level_per(ms(7)));
        }

        /// PQ3 on random floods: whatever was queued around a low item, every item handed out
        /// before it, of priority `q`, was queued no later than `t + (q − p)·A` (strictly
        /// before, if queued after it).
        #[test]
        fn aging_bound_pq3_nothing_queued_after_its_window_goes_first(
            step_ms in 1u64..20,
            low in -50i32..0,
            before in proptest::collection::vec((0u8..5, -60i32..10), 0..30),
            after in proptest::collection::vec((0u8..5, -60i32..10, 0u8..3), 1..80),
        ) {
            crate::paused_clock::block_on_paused(async {
                let aging = AgingRate::one_level_per(ms(step_ms));
                let mut b = PriorityBacklog::new(aging, None);
                let mut added: HashMap<u32, (i128, i32)> = HashMap::new();
                let mut n = 0;
                for (wait, priority) in before {
                    tokio::time::advance(ms(u64::from(wait))).await;
                    added.insert(n, (b.now(), priority));
                    b.push(n, Some(priority));
                    n += 1;
                }
                const LOW: u32 = u32::MAX;
                let t = b.now();
                b.push(LOW, Some(low));
                let window = |q: i32| i128::from(q - low) * ms(step_ms).as_nanos() as i128;
                let mut served_low = false;
                for (wait, priority, pops) in after {
                    tokio::time::advance(ms(u64::from(wait))).await;
                    added.insert(n, (b.now(), priority));
                    b.push(n, Some(priority));
                    n += 1;
                    for _ in 0..pops {
                        match b.pop() {
                            Some((LOW, _)) => served_low = true,
                            Some((item, _)) if !served_low => {
                                let (at, q) = added[&item];
                                // Queued after the low item, it ties at the window's end
                                // and then goes after it (a later sequence number).
                                let late = if at > t {
                                    at >= t + window(q)
                                } else {
                                    at > t + window(q)
                                };
                                assert!(
                                    !late,
                                    "PQ3: {item} (priority {q}, queued at {at} ns) went \
                                     before the low item (queued at {t} ns)"
                                );
                            }
                            _ => {}
                        }
                    }
                }
            });
        }

        /// The same without aging: strict priority order, first in first out within one.
        #[test]
        fn invariants_pq1_pq2_pq4_pq5_without_aging(
            ops in proptest::collection::vec(op(), 1..150)
        ) {
            run(ops, AgingRate::ZERO);
        }
    }
}
