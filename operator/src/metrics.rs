//! The operator's Prometheus metrics (served on `/metrics`): reconciles per kind and result,
//! their durations, errors by kind and error, the steps it took, whether this process holds
//! the leader Lease, the topics of each cluster no Topic names (when asked to look), and each
//! Cluster's health as its status says (ready brokers, partitions under-replicated or
//! offline, Ready, Stalled).

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
    /// Each Cluster's health as its last status said it, in [`ClusterHealth`] order.
    cluster_health: [Family<ClusterLabels, Gauge<i64, AtomicI64>>; 6],
}

/// A Cluster's health from its status, for the gauges (so one Prometheus sees the operator's
/// view beside the brokers' own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClusterHealth {
    pub brokers: i64,
    pub ready_brokers: i64,
    pub under_replicated_partitions: i64,
    pub offline_partitions: i64,
    pub ready: bool,
    pub stalled: bool,
}

/// (name, help) of each Cluster gauge, in [`ClusterHealth`] order.
const CLUSTER_GAUGES: [(&str, &str); 6] = [
    ("cluster_brokers", "Brokers of a Cluster (its StatefulSet's replicas)"),
    ("cluster_ready_brokers", "Brokers of a Cluster whose pods are Ready"),
    ("cluster_under_replicated_partitions", "Under-replicated partitions of a Cluster, as its controller reports"),
    ("cluster_offline_partitions", "Partitions of a Cluster without a leader"),
    ("cluster_ready", "1 if the Cluster's Ready condition is True"),
    ("cluster_stalled", "1 if the Cluster's Stalled condition is True (it needs a person)"),
];

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
        let cluster_health: [Family<ClusterLabels, Gauge<i64, AtomicI64>>; 6] = Default::default();
        for ((name, help), family) in CLUSTER_GAUGES.iter().zip(&cluster_health) {
            registry.register(*name, *help, family.clone());
        }
        // Failed reconciles start at 0 for every kind, so a rate over them exists before the
        // first failure (the alert on reconcile errors needs a series to evaluate).
        for kind in ["Cluster", "Topic", "ConsumerGroup"] {
            let _ = reconciles.get_or_create(&ReconcileLabels { kind: kind.into(), result: "error".into() });
        }
        Metrics { registry, reconciles, duration, errors, steps, leader, unmanaged, cluster_health }
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

    /// Sets the gauges of Cluster `namespace/cluster`.
    pub fn cluster_health(&self, namespace: &str, cluster: &str, h: &ClusterHealth) {
        let labels = ClusterLabels { namespace: namespace.into(), cluster: cluster.into() };
        let values = [
            h.brokers,
            h.ready_brokers,
            h.under_replicated_partitions,
            h.offline_partitions,
            i64::from(h.ready),
            i64::from(h.stalled),
        ];
        for (family, v) in self.cluster_health.iter().zip(values) {
            family.get_or_create(&labels).set(v);
        }
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
