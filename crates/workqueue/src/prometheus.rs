//! Prometheus export of queue metrics through the `prometheus-client` crate (feature
//! `prometheus`).
//!
//! The metric names and buckets are the ones Kubernetes components export (E10.2), one series
//! per queue under the label `name`.
//!
//! ```
//! use std::sync::Arc;
//! use prometheus_client::registry::Registry;
//! use workqueue::{PrometheusMetricsProvider, QueueConfig, WorkQueue};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let mut registry = Registry::default();
//! let provider = Arc::new(PrometheusMetricsProvider::register(&mut registry));
//! let queue = WorkQueue::with_config(QueueConfig::new().name("pods").metrics_provider(provider));
//! queue.add("default/web".to_string());
//!
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains(r#"workqueue_adds_total{name="pods"} 1"#));
//! # queue.shutdown(); }
//! ```

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::metrics::{
    CounterMetric, GaugeMetric, HistogramMetric, MetricsProvider, PriorityGaugeMetric,
    SettableGaugeMetric,
};

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// 10 exponential buckets from 10 ns by ×10, as Kubernetes uses for queue durations.
fn duration_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-8, 10.0, 10))
}

/// A [`MetricsProvider`] whose metrics live in a `prometheus-client` [`Registry`].
#[derive(Debug, Clone)]
pub struct PrometheusMetricsProvider {
    depth: Family<Labels, Gauge>,
    adds: Family<Labels, Counter>,
    latency: HistogramFamily,
    work_duration: HistogramFamily,
    unfinished: Family<Labels, FloatGauge>,
    longest: Family<Labels, FloatGauge>,
    retries: Family<Labels, Counter>,
    depth_by_priority: Family<Labels, Gauge>,
}

impl PrometheusMetricsProvider {
    /// Registers the seven `workqueue_*` metric families in `registry`, and
    /// `workqueue_depth_by_priority` (labels `name` and `priority`) for priority queues (E10.4).
    pub fn register(registry: &mut Registry) -> Self {
        let provider = Self {
            depth: Family::default(),
            adds: Family::default(),
            latency: Family::new_with_constructor(duration_histogram),
            work_duration: Family::new_with_constructor(duration_histogram),
            unfinished: Family::default(),
            longest: Family::default(),
            retries: Family::default(),
            depth_by_priority: Family::default(),
        };
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            provider.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            provider.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            provider.latency.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            provider.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration",
            provider.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            provider.longest.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            provider.retries.clone(),
        );
        registry.register(
            "workqueue_depth_by_priority",
            "Current depth of a priority workqueue, by priority",
            provider.depth_by_priority.clone(),
        );
        provider
    }
}

/// One queue's `workqueue_depth_by_priority` series, created per priority when first used.
struct DepthByPriority {
    family: Family<Labels, Gauge>,
    name: String,
}

impl DepthByPriority {
    fn gauge(&self, priority: i32) -> Gauge {
        let mut labels = labels(&self.name);
        labels.push(("priority".to_string(), priority.to_string()));
        self.family.get_or_create(&labels).clone()
    }
}

impl PriorityGaugeMetric for DepthByPriority {
    fn inc(&self, priority: i32) {
        self.gauge(priority).inc();
    }
    fn dec(&self, priority: i32) {
        self.gauge(priority).dec();
    }
}

fn labels(name: &str) -> Labels {
    vec![("name".to_string(), name.to_string())]
}

impl GaugeMetric for Gauge {
    fn inc(&self) {
        Gauge::inc(self);
    }
    fn dec(&self) {
        Gauge::dec(self);
    }
}

impl SettableGaugeMetric for FloatGauge {
    fn set(&self, value: f64) {
        Gauge::set(self, value);
    }
}

impl CounterMetric for Counter {
    fn inc(&self) {
        Counter::inc(self);
    }
}

impl HistogramMetric for Histogram {
    fn observe(&self, seconds: f64) {
        Histogram::observe(self, seconds);
    }
}

impl MetricsProvider for PrometheusMetricsProvider {
    fn new_depth_metric(&self, name: &str) -> Arc<dyn GaugeMetric> {
        Arc::new(self.depth.get_or_create(&labels(name)).clone())
    }
    fn new_adds_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(self.adds.get_or_create(&labels(name)).clone())
    }
    fn new_latency_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(self.latency.get_or_create(&labels(name)).clone())
    }
    fn new_work_duration_metric(&self, name: &str) -> Arc<dyn HistogramMetric> {
        Arc::new(self.work_duration.get_or_create(&labels(name)).clone())
    }
    fn new_unfinished_work_seconds_metric(&self, name: &str) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(self.unfinished.get_or_create(&labels(name)).clone())
    }
    fn new_longest_running_processor_seconds_metric(
        &self,
        name: &str,
    ) -> Arc<dyn SettableGaugeMetric> {
        Arc::new(self.longest.get_or_create(&labels(name)).clone())
    }
    fn new_retries_metric(&self, name: &str) -> Arc<dyn CounterMetric> {
        Arc::new(self.retries.get_or_create(&labels(name)).clone())
    }
    fn new_depth_by_priority_metric(&self, name: &str) -> Arc<dyn PriorityGaugeMetric> {
        Arc::new(DepthByPriority {
            family: self.depth_by_priority.clone(),
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;
    use crate::{AddOpts, DelayingQueue, PriorityQueue, PriorityQueueConfig, QueueConfig};

    #[tokio::test(start_paused = true)]
    async fn exports_the_seven_kubernetes_workqueue_metrics_with_the_name_label() {
        let mut registry = Registry::default();
        let provider = Arc::new(PrometheusMetricsProvider::register(&mut registry));
        let queue =
            DelayingQueue::with_config(QueueConfig::new().name("pods").metrics_provider(provider));
        queue.add("a");
        queue.add_after("b", std::time::Duration::from_secs(1));
        let a = queue.get().await.unwrap();
        queue.done(&a);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            r#"workqueue_depth{name="pods"} 0"#,
            r#"workqueue_adds_total{name="pods"} 1"#,
            r#"workqueue_queue_duration_seconds_count{name="pods"} 1"#,
            r#"workqueue_work_duration_seconds_count{name="pods"} 1"#,
            r#"workqueue_unfinished_work_seconds{name="pods"} 0"#,
            r#"workqueue_longest_running_processor_seconds{name="pods"} 0"#,
            r#"workqueue_retries_total{name="pods"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="1e-8",name="pods"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="10.0",name="pods"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        queue.shutdown();
    }

    #[tokio::test(start_paused = true)]
    async fn a_priority_queue_exports_its_depth_by_priority() {
        let mut registry = Registry::default();
        let provider = Arc::new(PrometheusMetricsProvider::register(&mut registry));
        let config = PriorityQueueConfig::new()
            .name("pods")
            .metrics_provider(provider);
        let queue = PriorityQueue::with_config(crate::default_controller_rate_limiter(), config);
        queue.add_with_opts(AddOpts::new().priority(crate::LOW_PRIORITY), "a");
        queue.add_with_opts(AddOpts::new().priority(crate::LOW_PRIORITY), "b");
        queue.add("c");
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        for line in [
            r#"workqueue_depth_by_priority{name="pods",priority="-100"} 2"#,
            r#"workqueue_depth_by_priority{name="pods",priority="0"} 1"#,
            r#"workqueue_depth{name="pods"} 3"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        queue.shutdown();
    }
}
