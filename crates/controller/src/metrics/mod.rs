//! Metrics and probes for a controller (feature `metrics`, rules MX in docs/semantics.md).
//!
//! Three parts, each usable alone:
//!
//! - [`ControllerMetrics`]: the reconcile metrics under controller-runtime's names, registered in
//!   a `prometheus_client` [`Registry`]. [`ControllerMetrics::controller`] gives the handle a
//!   [`Controller`](crate::Controller) records into ([`Controller::metrics`](crate::Controller::metrics));
//!   [`ControllerMetrics::leader_election`] the `leader_election_master_status` gauge of one
//!   election. The queue's own `workqueue_*` metrics come from
//!   [`PrometheusMetricsProvider`](workqueue::PrometheusMetricsProvider) in the same registry.
//! - [`Health`]: named readiness checks (caches synced, the lease healthy).
//! - [`serve`]: one small HTTP/1.1 endpoint for `GET /metrics`, `/healthz` and `/readyz`.
//!
//! ```
//! use std::sync::Arc;
//! use controller::metrics::{ControllerMetrics, Health};
//! use controller::prelude::*;
//! use controller::workqueue::{PrometheusMetricsProvider, QueueConfig};
//! use prometheus_client::registry::Registry;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let mut registry = Registry::default();
//! let queue_metrics = Arc::new(PrometheusMetricsProvider::register(&mut registry));
//! let metrics = ControllerMetrics::register(&mut registry);
//!
//! let queue = RateLimitingQueue::with_config(
//!     default_controller_rate_limiter(),
//!     QueueConfig::new().name("widgets").metrics_provider(queue_metrics),
//! );
//! queue.add("default/web".to_string());
//! let token = CancellationToken::new();
//! let stop = token.clone();
//! Controller::new(queue)
//!     .metrics(metrics.controller("widgets"))
//!     .run(token, move |_key: String| {
//!         stop.cancel();
//!         async { Ok::<_, std::convert::Infallible>(Action::Done) }
//!     })
//!     .await;
//!
//! let mut text = String::new();
//! prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
//! assert!(text.contains(r#"controller_runtime_reconcile_total{controller="widgets",result="success"} 1"#));
//! assert!(text.contains(r#"workqueue_adds_total{name="widgets"} 1"#));
//! # let _ = Health::new();
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

mod health;
mod server;

pub use health::Health;
pub use server::{serve, serve_with_options, ServeOptions};

type Labels = Vec<(String, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// controller-runtime's buckets for `controller_runtime_reconcile_time_seconds`, in seconds.
const RECONCILE_TIME_BUCKETS: [f64; 41] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// The result label values of `controller_runtime_reconcile_total`, as controller-runtime's.
const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// The reconcile and leader-election metric families of a process, registered in one
/// [`Registry`] (MX5). Cheap to clone; every clone shares the same series.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    reconcile_total: Family<Labels, Counter>,
    reconcile_errors: Family<Labels, Counter>,
    reconcile_panics: Family<Labels, Counter>,
    reconcile_time: HistogramFamily,
    active_workers: Family<Labels, Gauge>,
    max_concurrent: Family<Labels, Gauge>,
    leader: Family<Labels, Gauge>,
}

impl ControllerMetrics {
    /// Registers controller-runtime's reconcile families and client-go's
    /// `leader_election_master_status` in `registry`. Register once per registry: a second
    /// registration would export each name twice.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_panics: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram),
            active_workers: Family::default(),
            max_concurrent: Family::default(),
            leader: Family::default(),
        };
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            metrics.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            metrics.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            metrics.reconcile_panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            metrics.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            metrics.active_workers.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            metrics.max_concurrent.clone(),
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
            metrics.leader.clone(),
        );
        metrics
    }

    /// The handle one controller records into, its series labelled `controller="<name>"`; the
    /// counters of every result start at 0, so a scrape shows them before the first reconcile.
    pub fn controller(&self, name: &str) -> ReconcileMetrics {
        let controller = label("controller", name);
        let results = RESULTS.map(|result| {
            let mut labels = controller.clone();
            labels.push(("result".to_string(), result.to_string()));
            self.reconcile_total.get_or_create(&labels).clone()
        });
        ReconcileMetrics {
            inner: Arc::new(ReconcileSeries {
                results,
                errors: self.reconcile_errors.get_or_create(&controller).clone(),
                panics: self.reconcile_panics.get_or_create(&controller).clone(),
                time: self.reconcile_time.get_or_create(&controller).clone(),
                active_workers: self.active_workers.get_or_create(&controller).clone(),
                max_concurrent: self.max_concurrent.get_or_create(&controller).clone(),
            }),
        }
    }

    /// The `leader_election_master_status{name="<name>"}` gauge of one election, at 0 until
    /// [`LeaderStatus::set_leading`] says otherwise.
    pub fn leader_election(&self, name: &str) -> LeaderStatus {
        LeaderStatus {
            gauge: self.leader.get_or_create(&label("name", name)).clone(),
        }
    }
}

/// How one reconcile ended, as the metrics count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Success,
    Error,
    Panic,
    Requeue,
    RequeueAfter,
}

#[derive(Debug)]
struct ReconcileSeries {
    /// In the order of [`RESULTS`].
    results: [Counter; 4],
    errors: Counter,
    panics: Counter,
    time: Histogram,
    active_workers: Gauge,
    max_concurrent: Gauge,
}

/// One controller's reconcile series, made by [`ControllerMetrics::controller`] and given to
/// [`Controller::metrics`](crate::Controller::metrics). Cheap to clone.
#[derive(Debug, Clone)]
pub struct ReconcileMetrics {
    inner: Arc<ReconcileSeries>,
}

impl ReconcileMetrics {
    pub(crate) fn set_workers(&self, workers: usize) {
        self.inner
            .max_concurrent
            .set(i64::try_from(workers).unwrap_or(i64::MAX));
    }

    /// A worker took a key: counted active until the returned guard is finished or dropped,
    /// so a worker aborted mid-reconcile does not stay counted.
    pub(crate) fn start(&self) -> ActiveWorker<'_> {
        self.inner.active_workers.inc();
        ActiveWorker {
            metrics: self,
            started: Instant::now(),
        }
    }

    fn record(&self, outcome: Outcome, took: Duration) {
        let series = &self.inner;
        series.time.observe(took.as_secs_f64());
        let result = match outcome {
            Outcome::Success => 0,
            Outcome::Error | Outcome::Panic => 1,
            Outcome::Requeue => 2,
            Outcome::RequeueAfter => 3,
        };
        series.results[result].inc();
        if matches!(outcome, Outcome::Error | Outcome::Panic) {
            series.errors.inc();
        }
        if outcome == Outcome::Panic {
            series.panics.inc();
        }
    }
}

/// A worker counted in `controller_runtime_active_workers` while this lives.
pub(crate) struct ActiveWorker<'a> {
    metrics: &'a ReconcileMetrics,
    started: Instant,
}

impl ActiveWorker<'_> {
    /// The reconcile ended with `outcome`: records it and its duration, then the worker is idle.
    pub(crate) fn finish(self, outcome: Outcome) {
        self.metrics.record(outcome, self.started.elapsed());
    }
}

impl Drop for ActiveWorker<'_> {
    fn drop(&mut self) {
        self.metrics.inner.active_workers.dec();
    }
}

/// One election's `leader_election_master_status` gauge (client-go's): 1 while this replica
/// leads, 0 otherwise. Set it from the elector's callbacks. Cheap to clone.
#[derive(Debug, Clone)]
pub struct LeaderStatus {
    gauge: Gauge,
}

impl LeaderStatus {
    /// Sets the gauge to 1 (`true`) or 0.
    pub fn set_leading(&self, leading: bool) {
        self.gauge.set(i64::from(leading));
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;

    use super::*;

    fn text(registry: &Registry) -> String {
        let mut text = String::new();
        encode(&mut text, registry).unwrap();
        text
    }

    #[test]
    fn outcomes_count_under_controller_runtimes_names_and_labels() {
        let mut registry = Registry::default();
        let metrics = ControllerMetrics::register(&mut registry);
        let widgets = metrics.controller("widgets");
        widgets.set_workers(3);
        for outcome in [
            Outcome::Success,
            Outcome::Error,
            Outcome::Panic,
            Outcome::Requeue,
            Outcome::RequeueAfter,
        ] {
            widgets.record(outcome, Duration::from_millis(20));
        }
        let active = widgets.start();
        metrics.leader_election("widgets-lease").set_leading(true);
        let text = text(&registry);
        for line in [
            r#"controller_runtime_reconcile_total{controller="widgets",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="widgets",result="error"} 2"#,
            r#"controller_runtime_reconcile_total{controller="widgets",result="requeue"} 1"#,
            r#"controller_runtime_reconcile_total{controller="widgets",result="requeue_after"} 1"#,
            r#"controller_runtime_reconcile_errors_total{controller="widgets"} 2"#,
            r#"controller_runtime_reconcile_panics_total{controller="widgets"} 1"#,
            r#"controller_runtime_reconcile_time_seconds_count{controller="widgets"} 5"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.025",controller="widgets"} 5"#,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.01",controller="widgets"} 0"#,
            r#"controller_runtime_active_workers{controller="widgets"} 1"#,
            r#"controller_runtime_max_concurrent_reconciles{controller="widgets"} 3"#,
            r#"leader_election_master_status{name="widgets-lease"} 1"#,
        ] {
            assert!(text.contains(line), "missing `{line}` in:\n{text}");
        }
        drop(active);
        assert!(text_has(
            &registry,
            r#"controller_runtime_active_workers{controller="widgets"} 0"#
        ));
    }

    fn text_has(registry: &Registry, line: &str) -> bool {
        text(registry).contains(line)
    }

    #[test]
    fn a_new_controllers_counters_start_at_zero() {
        let mut registry = Registry::default();
        let metrics = ControllerMetrics::register(&mut registry);
        let _handle = metrics.controller("pods");
        for result in RESULTS {
            let line = format!(
                r#"controller_runtime_reconcile_total{{controller="pods",result="{result}"}} 0"#
            );
            assert!(text_has(&registry, &line), "{line}");
        }
    }
}
