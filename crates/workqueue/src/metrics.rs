//! Queue metrics through a provider trait (contract E10).
//!
//! A queue reports seven metrics, the ones Kubernetes components export under the `workqueue_`
//! prefix with a `name` label: depth, adds, queue latency, work duration, unfinished work
//! seconds, longest running processor and retries. The queue does not know where they go: a
//! [`MetricsProvider`] creates one handle per metric and per queue name.
//!
//! Metrics exist only for a **named** queue with a real provider (E10.1). The default,
//! [`NoopMetricsProvider`], makes the queue skip all bookkeeping and start no background task,
//! so an unnamed queue pays nothing for metrics. [`InMemoryMetricsProvider`] records values for
//! tests; the `prometheus` feature adds `PrometheusMetricsProvider`.
//!
//! ```
//! use std::sync::Arc;
//! use workqueue::{InMemoryMetricsProvider, QueueConfig, WorkQueue};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let provider = Arc::new(InMemoryMetricsProvider::default());
//! let queue = WorkQueue::with_config(QueueConfig::new().name("pods").metrics_provider(provider.clone()));
//! queue.add("default/web".to_string());
//! assert_eq!(provider.snapshot("pods").unwrap().adds, 1);
//! assert_eq!(provider.snapshot("pods").unwrap().depth, 1);
//! # queue.shutdown(); }
//! ```

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// A gauge that goes up and down by one (the queue depth).
pub trait GaugeMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
    /// Subtracts one.
    fn dec(&self);
}

/// A gauge that goes up and down by one per priority: the depth of a priority queue by
/// priority.
pub trait PriorityGaugeMetric: Send + Sync {
    /// Adds one to the value of `priority`.
    fn inc(&self, priority: i32);
    /// Subtracts one from the value of `priority`.
    fn dec(&self, priority: i32);
}

/// A gauge set to a value (unfinished work seconds, longest running processor).
pub trait SettableGaugeMetric: Send + Sync {
    /// Sets the value.
    fn set(&self, value: f64);
}

/// A counter that only goes up (adds, retries).
pub trait CounterMetric: Send + Sync {
    /// Adds one.
    fn inc(&self);
}

/// A histogram of durations in seconds (queue latency, work duration).
pub trait HistogramMetric: Send + Sync {
    /// Records one observation, in seconds.
    fn observe(&self, seconds: f64);
}

/// Creates the metric handles of a named queue (client-go's `MetricsProvider`).
///
/// Each method is called once per queue, with the queue's name. The queue updates the returned
/// handles under its lock, so they should be cheap (atomics, a short mutex).
///
/// ```
/// use std::sync::Arc;
/// use workqueue::{InMemoryMetricsProvider, MetricsProvider};
///
/// let provider = InMemoryMetricsProvider::default();
/// provider.new_adds_metric("jobs").inc();
/// assert_eq!(provider.snapshot("jobs").unwrap().adds, 1);
/// ```
pub trait MetricsProvider: Send + Sync {
    /// True for a provider that records nothing: the queue then keeps no metric state at all.
    fn is_noop(&self) -> bool {
        false
    }
    /// `workqueue_depth`: items waiting in the queue.
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric>;
    /// `workqueue_adds_total`: counted adds.
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// `workqueue_queue_duration_seconds`: time from add to get.
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_work_duration_seconds`: time from get to done.
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric>;
    /// `workqueue_unfinished_work_seconds`: sum of the ages of the items being processed.
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_longest_running_processor_seconds`: age of the oldest item being processed.
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric>;
    /// `workqueue_retries_total`: delayed adds (counted by the delaying queue).
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric>;
    /// The items a [`PriorityQueue`](crate::PriorityQueue) holds waiting, by their priority
    /// (E10.4). Only priority queues ask for it; the default records nothing.
    fn new_depth_by_priority_metric(&self, name: &str) -> Arc<dyn PriorityGaugeMetric> {
        let _ = name;
        Arc::new(Noop)
    }
}

/// The default provider: records nothing, and makes queues skip metric bookkeeping entirely.
///
/// ```
/// use workqueue::{MetricsProvider, NoopMetricsProvider};
/// assert!(NoopMetricsProvider.is_noop());
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopMetricsProvider;

struct Noop;
impl GaugeMetric for Noop {
    fn inc(&self) {}
    fn dec(&self) {}
}
impl SettableGaugeMetric for Noop {
    fn set(&self, _: f64) {}
}
impl CounterMetric for Noop {
    fn inc(&self) {}
}
impl PriorityGaugeMetric for Noop {
    fn inc(&self, _: i32) {}
    fn dec(&self, _: i32) {}
}
impl HistogramMetric for Noop {
    fn observe(&self, _: f64) {}
}

impl MetricsProvider for NoopMetricsProvider {
    fn is_noop(&self) -> bool {
        true
    }
    fn new_depth_metric(&self, _: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(Noop)
    }
    fn new_adds_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Noop)
    }
    fn new_latency_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Noop)
    }
    fn new_work_duration_metric(&self, _: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(Noop)
    }
    fn new_unfinished_work_seconds_metric(&self, _: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Noop)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        _: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(Noop)
    }
    fn new_retries_metric(&self, _: &str) -> Arc<dyn CounterMetric> {
        Arc::new(Noop)
    }
}

/// The values an [`InMemoryMetricsProvider`] recorded for one queue.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MetricsSnapshot {
    /// `workqueue_depth`.
    pub depth: i64,
    /// `workqueue_adds_total`.
    pub adds: u64,
    /// Every observation of `workqueue_queue_duration_seconds`, in order.
    pub queue_latency: Vec<f64>,
    /// Every observation of `workqueue_work_duration_seconds`, in order.
    pub work_duration: Vec<f64>,
    /// `workqueue_unfinished_work_seconds`.
    pub unfinished_work_seconds: f64,
    /// `workqueue_longest_running_processor_seconds`.
    pub longest_running_processor_seconds: f64,
    /// `workqueue_retries_total`.
    pub retries: u64,
}

/// One queue's depth by priority, shared by the provider and the queue's gauge.
type DepthByPrioritySlot = Arc<Mutex<BTreeMap<i32, i64>>>;

/// A provider that keeps every value in memory, for tests and debugging.
///
/// ```
/// use workqueue::{InMemoryMetricsProvider, MetricsProvider};
///
/// let provider = InMemoryMetricsProvider::default();
/// provider.new_latency_metric("q").observe(0.5);
/// assert_eq!(provider.snapshot("q").unwrap().queue_latency, vec![0.5]);
/// assert!(provider.snapshot("other").is_none());
/// ```
#[derive(Debug, Default)]
pub struct InMemoryMetricsProvider {
    queues: Mutex<HashMap<String, Arc<Mutex<MetricsSnapshot>>>>,
    by_priority: Mutex<HashMap<String, DepthByPrioritySlot>>,
}

impl InMemoryMetricsProvider {
    /// A copy of the values recorded for the queue `name`, if any metric was created for it.
    pub fn snapshot(&self, name: &str) -> Option<MetricsSnapshot> {
        self.queues.lock().get(name).map(|m| m.lock().clone())
    }

    /// The depth by priority recorded for the priority queue `name` (priorities whose depth
    /// went back to zero included), if it asked for that metric.
    ///
    /// ```
    /// use workqueue::{InMemoryMetricsProvider, MetricsProvider};
    ///
    /// let provider = InMemoryMetricsProvider::default();
    /// provider.new_depth_by_priority_metric("q").inc(-100);
    /// assert_eq!(provider.depth_by_priority("q").unwrap()[&-100], 1);
    /// ```
    pub fn depth_by_priority(&self, name: &str) -> Option<BTreeMap<i32, i64>> {
        self.by_priority.lock().get(name).map(|m| m.lock().clone())
    }

    fn slot(&self, name: &str) -> Arc<Mutex<MetricsSnapshot>> {
        self.queues
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone()
    }
}

#[derive(Clone, Copy)]
enum Field {
    Depth,
    Adds,
    Latency,
    WorkDuration,
    Unfinished,
    Longest,
    Retries,
}

struct InMemoryMetric {
    slot: Arc<Mutex<MetricsSnapshot>>,
    field: Field,
}

impl InMemoryMetric {
    fn update(&self, f: impl FnOnce(&mut MetricsSnapshot, Field)) {
        f(&mut self.slot.lock(), self.field);
    }
}

impl GaugeMetric for InMemoryMetric {
    fn inc(&self) {
        self.update(|s, _| s.depth += 1);
    }
    fn dec(&self) {
        self.update(|s, _| s.depth -= 1);
    }
}

impl SettableGaugeMetric for InMemoryMetric {
    fn set(&self, value: f64) {
        self.update(|s, field| match field {
            Field::Longest => s.longest_running_processor_seconds = value,
            _ => s.unfinished_work_seconds = value,
        });
    }
}

impl CounterMetric for InMemoryMetric {
    fn inc(&self) {
        self.update(|s, field| match field {
            Field::Retries => s.retries += 1,
            _ => s.adds += 1,
        });
    }
}

impl HistogramMetric for InMemoryMetric {
    fn observe(&self, seconds: f64) {
        self.update(|s, field| match field {
            Field::WorkDuration => s.work_duration.push(seconds),
            _ => s.queue_latency.push(seconds),
        });
    }
}

struct InMemoryPriorityGauge(DepthByPrioritySlot);

impl PriorityGaugeMetric for InMemoryPriorityGauge {
    fn inc(&self, priority: i32) {
        *self.0.lock().entry(priority).or_default() += 1;
    }
    fn dec(&self, priority: i32) {
        *self.0.lock().entry(priority).or_default() -= 1;
    }
}

impl InMemoryMetricsProvider {
    fn metric(&self, name: &str, field: Field) -> Arc<InMemoryMetric> {
        Arc::new(InMemoryMetric {
            slot: self.slot(name),
            field,
        })
    }
}

impl MetricsProvider for InMemoryMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        self.metric(name, Field::Depth)
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.metric(name, Field::Adds)
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.metric(name, Field::Latency)
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        self.metric(name, Field::WorkDuration)
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        self.metric(name, Field::Unfinished)
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        self.metric(name, Field::Longest)
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        self.metric(name, Field::Retries)
    }
    fn new_depth_by_priority_metric(&self, name: &str) -> Arc<dyn PriorityGaugeMetric> {
        let slot = self
            .by_priority
            .lock()
            .entry(name.to_string())
            .or_default()
            .clone();
        Arc::new(InMemoryPriorityGauge(slot))
    }
}

/// The metric state of one named queue, kept under the queue's lock (E10.3).
///
/// Invariant: `add_times` holds the items counted as added and not yet handed out;
/// `start_times` holds the items handed out and not yet done.
pub(crate) struct QueueMetrics<T> {
    depth: Arc<dyn GaugeMetric>,
    adds: Arc<dyn CounterMetric>,
    latency: Arc<dyn HistogramMetric>,
    work_duration: Arc<dyn HistogramMetric>,
    unfinished: Arc<dyn SettableGaugeMetric>,
    longest: Arc<dyn SettableGaugeMetric>,
    add_times: HashMap<T, Instant>,
    start_times: HashMap<T, Instant>,
}

impl<T: Hash + Eq + Clone> QueueMetrics<T> {
    pub(crate) fn new(name: &str, provider: &dyn MetricsProvider) -> Self {
        Self {
            depth: provider.new_depth_metric(name),
            adds: provider.new_adds_metric(name),
            latency: provider.new_latency_metric(name),
            work_duration: provider.new_work_duration_metric(name),
            unfinished: provider.new_unfinished_work_seconds_metric(name),
            longest: provider.new_longest_running_processor_seconds_metric(name),
            add_times: HashMap::new(),
            start_times: HashMap::new(),
        }
    }

    pub(crate) fn add(&mut self, item: &T) {
        self.adds.inc();
        self.depth.inc();
        if !self.add_times.contains_key(item) {
            self.add_times.insert(item.clone(), Instant::now());
        }
    }

    pub(crate) fn get(&mut self, item: &T) {
        self.depth.dec();
        let now = Instant::now();
        self.start_times.insert(item.clone(), now);
        if let Some(added) = self.add_times.remove(item) {
            self.latency.observe(seconds(now - added));
        }
    }

    pub(crate) fn done(&mut self, item: &T) {
        if let Some(started) = self.start_times.remove(item) {
            self.work_duration
                .observe(seconds(Instant::now() - started));
        }
    }

    pub(crate) fn update_unfinished_work(&self) {
        let now = Instant::now();
        let (mut total, mut oldest) = (0.0, 0.0_f64);
        for started in self.start_times.values() {
            let age = seconds(now - *started);
            total += age;
            oldest = oldest.max(age);
        }
        self.unfinished.set(total);
        self.longest.set(oldest);
    }
}

fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DelayingQueue, QueueConfig, WorkQueue};

    fn named<T: Hash + Eq + Clone + Send + Sync + 'static>(
        provider: &Arc<InMemoryMetricsProvider>,
    ) -> QueueConfig<T> {
        QueueConfig::new()
            .name("test")
            .metrics_provider(provider.clone())
    }

    #[tokio::test(start_paused = true)]
    async fn metrics_follow_adds_gets_and_dones_exactly() {
        let provider = Arc::new(InMemoryMetricsProvider::default());
        let q = WorkQueue::with_config(named(&provider));
        let m = || provider.snapshot("test").unwrap();

        q.add("foo");
        assert_eq!((m().adds, m().depth), (1, 1));

        tokio::time::advance(Duration::from_micros(50)).await;
        let foo = q.get().await.unwrap();
        assert_eq!(m().depth, 0);
        assert_eq!(m().queue_latency, vec![5e-5]);

        for _ in 0..5 {
            q.add("foo");
        }
        assert_eq!(
            (m().adds, m().depth),
            (2, 1),
            "depth counts an add while processing"
        );

        tokio::time::advance(Duration::from_micros(25)).await;
        q.done(&foo);
        assert_eq!(m().work_duration, vec![2.5e-5]);

        let foo = q.get().await.unwrap();
        assert_eq!(m().queue_latency, vec![5e-5, 2.5e-5]);

        tokio::time::advance(Duration::from_millis(1)).await;
        q.update_unfinished_work();
        assert_eq!(m().unfinished_work_seconds, 0.001);
        assert_eq!(m().longest_running_processor_seconds, 0.001);

        q.done(&foo);
        assert_eq!(m().work_duration, vec![2.5e-5, 0.001]);
        q.shutdown();
    }

    #[tokio::test(start_paused = true)]
    async fn unfinished_work_is_updated_every_500ms_until_shutdown() {
        let provider = Arc::new(InMemoryMetricsProvider::default());
        let q = WorkQueue::with_config(named(&provider));
        q.add(1);
        let _one = q.get().await.unwrap();
        tokio::time::sleep(Duration::from_millis(499)).await;
        assert_eq!(
            provider.snapshot("test").unwrap().unfinished_work_seconds,
            0.0
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            provider.snapshot("test").unwrap().unfinished_work_seconds,
            0.5
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            provider
                .snapshot("test")
                .unwrap()
                .longest_running_processor_seconds,
            1.0
        );
        q.shutdown();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            provider.snapshot("test").unwrap().unfinished_work_seconds,
            1.0,
            "the periodic update never runs after shutdown"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn unnamed_queue_or_noop_provider_records_nothing() {
        let provider = Arc::new(InMemoryMetricsProvider::default());
        let unnamed = WorkQueue::with_config(QueueConfig::new().metrics_provider(provider.clone()));
        unnamed.add(1);
        let noop = WorkQueue::with_config(QueueConfig::new().name("noop"));
        noop.add(1);
        assert!(provider.snapshot("noop").is_none());
        assert!(!unnamed.has_metrics());
        assert!(!noop.has_metrics());
    }

    #[tokio::test(start_paused = true)]
    async fn retries_count_every_add_after_that_is_not_ignored() {
        let provider = Arc::new(InMemoryMetricsProvider::default());
        let q = DelayingQueue::with_config(named(&provider));
        q.add_after("a", Duration::ZERO);
        q.add_after("b", Duration::from_secs(1));
        q.add_after("b", Duration::from_secs(2));
        assert_eq!(provider.snapshot("test").unwrap().retries, 3);
        q.shutdown();
        q.add_after("c", Duration::ZERO);
        assert_eq!(provider.snapshot("test").unwrap().retries, 3);
    }
}
