//! The operator's Prometheus metrics (served on `/metrics`): reconciles per kind and result,
//! their durations, errors by kind and error, the steps it took, whether this process holds
//! the leader Lease, and the topics of each cluster no Topic names (when asked to look).

use std::sync::atomic::AtomicI64;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReconcileLabels {
    pub kind: String,
    pub result: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: String,
    pub error: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub namespace: String,
    pub cluster: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    pub kind: String,
    pub step: String,
}

/// Every metric, registered once.
#[derive(Debug)]
pub struct Metrics {
    pub registry: Registry,
    pub reconciles: Family<ReconcileLabels, Counter>,
    pub duration: Family<KindLabels, Histogram>,
    pub errors: Family<ErrorLabels, Counter>,
    pub steps: Family<StepLabels, Counter>,
    pub leader: Gauge<i64, AtomicI64>,
    pub unmanaged: Family<ClusterLabels, Gauge<i64, AtomicI64>>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("strom_operator");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let duration = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 14))
        });
        let errors = Family::<ErrorLabels, Counter>::default();
        let steps = Family::<StepLabels, Counter>::default();
        let leader = Gauge::<i64, AtomicI64>::default();
        registry.register("reconciles", "Reconciles by kind and result (ok, error)", reconciles.clone());
        registry.register("reconcile_duration_seconds", "Time one reconcile took", duration.clone());
        registry.register("reconcile_errors", "Failed reconciles by kind and error", errors.clone());
        registry.register("steps", "Steps of multi-step operations carried out", steps.clone());
        registry.register("leader", "1 while this process holds the leader Lease", leader.clone());
        let unmanaged = Family::<ClusterLabels, Gauge<i64, AtomicI64>>::default();
        registry.register(
            "unmanaged_topics",
            "Topics of a cluster no Topic resource names (with --unmanaged-topics report or adopt)",
            unmanaged.clone(),
        );
        Metrics { registry, reconciles, duration, errors, steps, leader, unmanaged }
    }
}

impl Metrics {
    /// Starts timing one reconcile of `kind`; [`ReconcileTimer::done`] records it.
    pub fn reconcile(&self, kind: &str) -> ReconcileTimer<'_> {
        ReconcileTimer { metrics: self, kind: kind.to_string(), start: Instant::now() }
    }

    pub fn step(&self, kind: &str, step: &str) {
        self.steps.get_or_create(&StepLabels { kind: kind.into(), step: step.into() }).inc();
    }

    pub fn unmanaged_topics(&self, namespace: &str, cluster: &str, count: usize) {
        let labels = ClusterLabels { namespace: namespace.into(), cluster: cluster.into() };
        self.unmanaged.get_or_create(&labels).set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// One reconcile being timed.
#[derive(Debug)]
pub struct ReconcileTimer<'a> {
    metrics: &'a Metrics,
    kind: String,
    start: Instant,
}

impl ReconcileTimer<'_> {
    /// Records the reconcile's duration and result (`error`: the error's variant name).
    pub fn done(self, error: Option<&str>) {
        let m = self.metrics;
        m.duration.get_or_create(&KindLabels { kind: self.kind.clone() }).observe(self.start.elapsed().as_secs_f64());
        let result = if error.is_some() { "error" } else { "ok" };
        m.reconciles.get_or_create(&ReconcileLabels { kind: self.kind.clone(), result: result.into() }).inc();
        if let Some(error) = error {
            m.errors.get_or_create(&ErrorLabels { kind: self.kind, error: error.into() }).inc();
        }
    }
}
