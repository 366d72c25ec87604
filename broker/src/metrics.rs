//! The broker's Prometheus metrics: requests and their latency per API, network bytes in and
//! out, connections, and each partition's log end offset and size, replication health and
//! the data directory's filesystem (read at scrape time). Names and the Kafka MBean each
//! corresponds to: docs/metrics.md.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::admin::lag::ConsumerLag;
use crate::partition::traffic::TrafficCounts;
use crate::partition::Partition;

type ApiLabels = [(&'static str, &'static str); 1];
type PartitionLabels = [(&'static str, String); 2];
type HistogramMaker = fn() -> Histogram;

/// Every metric of one broker.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<ApiLabels, Counter>,
    request_errors: Family<ApiLabels, Counter>,
    response_errors: Family<[(&'static str, &'static str); 2], Counter>,
    request_latency: Family<ApiLabels, Histogram, HistogramMaker>,
    request_phases: Family<[(&'static str, &'static str); 2], Histogram, HistogramMaker>,
    /// Runs of the periodic log work (flush of rolled segments, checkpoints, retention, cleaner).
    background_tasks: Family<[(&'static str, &'static str); 1], Histogram, HistogramMaker>,
    /// An acks=all produce's wait for its fsync (with `flush_on_acks_all`).
    acks_all_fsync: Histogram,
    pub network_bytes_in: Counter,
    pub network_bytes_out: Counter,
    pub connections: Gauge,
    /// Client connections accepted since start (its rate: Kafka's connection-creation-rate).
    pub connections_opened: Counter,
    /// acks=all Produce requests waiting for their replicas (Kafka's Produce purgatory).
    pub produce_waiting: Gauge,
    /// Fetch requests waiting for `min.bytes` or `max.wait.ms` (Kafka's Fetch purgatory).
    pub fetch_waiting: Gauge,
    pub produced_records_bytes: Counter,
    pub fetched_records_bytes: Counter,
    offset_commits: Counter,
    groups: Family<[(&'static str, &'static str); 1], Gauge>,
    rebalances: Gauge,
    log_end_offset: Family<PartitionLabels, Gauge>,
    log_start_offset: Family<PartitionLabels, Gauge>,
    log_size_bytes: Family<PartitionLabels, Gauge>,
    metadata: [Gauge; 8],
    replication: [Gauge; 8],
    replication_counters: Arc<ReplicationCounters>,
    fetcher_lag: Family<PartitionLabels, Gauge>,
    log_dir: [Gauge; 2],
    /// The consumer lag of the groups this broker coordinates ([`crate::admin::lag`]).
    pub consumer_lag: ConsumerLag,
    /// Whether per-partition series are exported (`metrics_partition_series`).
    pub partition_series: AtomicBool,
    group_lag: Family<[(&'static str, String); 2], Gauge>,
    partition_lag: Family<[(&'static str, String); 3], Gauge>,
    topic_traffic: Arc<TopicTraffic>,
    /// Transactional ids by state, open transactions and LSO lag ([`crate::txn::metrics`]).
    pub transactions: Arc<crate::txn::metrics::TransactionGauges>,
    /// Held for a whole scrape: the scrape-time gauges are set, then encoded, by one scrape.
    scrape: parking_lot::Mutex<()>,
}

/// Per-topic counters of client traffic (bytes and records in, bytes out), summed over the
/// partitions this broker hosts at scrape time ([`crate::partition::traffic`]).
#[derive(Debug, Default)]
struct TopicTraffic {
    snapshot: parking_lot::Mutex<BTreeMap<String, TrafficCounts>>,
}

impl Collector for TopicTraffic {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshot = self.snapshot.lock().clone();
        type Read = fn(&TrafficCounts) -> u64;
        let families: [(&str, &str, Read); 3] = [
            ("topic_bytes_in", "Record-batch bytes clients produced to each topic on this broker", |c| c.bytes_in),
            ("topic_records_in", "Records clients produced to each topic on this broker", |c| c.records_in),
            ("topic_bytes_out", "Record-batch bytes clients fetched from each topic on this broker", |c| c.bytes_out),
        ];
        for (name, help, value) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (topic, counts) in &snapshot {
                let labels = [("topic", topic.as_str())];
                ConstCounter::new(value(counts)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

/// One request counted in a gauge while it waits (the gauge goes down when this is dropped,
/// whether the wait ended or its connection went away).
#[derive(Debug)]
pub struct Waiting(Gauge);

impl Waiting {
    pub fn new(gauge: &Gauge) -> Waiting {
        gauge.inc();
        Waiting(gauge.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Replication as this broker sees it, read at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReplicationStats {
    /// Partitions this broker leads whose ISR is smaller than their replica set.
    pub under_replicated: usize,
    /// Partitions without a leader, cluster-wide (from the metadata image).
    pub offline: usize,
    pub isr_shrinks: u64,
    pub isr_expands: u64,
    /// The largest number of offsets a follower is behind a partition this broker leads.
    pub max_follower_lag: i64,
    /// Partitions this broker leads whose ISR is smaller than their `min.insync.replicas`.
    pub under_min_isr: usize,
    /// Partitions this broker leads (Kafka's LeaderCount).
    pub leaders: usize,
    /// Partition replicas this broker hosts (Kafka's PartitionCount).
    pub replicas: usize,
    /// Partitions being reassigned, cluster-wide (from the metadata image).
    pub reassigning: usize,
    /// The follower side: the largest lag of a partition this broker follows behind its
    /// leader's high watermark (Kafka's `ReplicaFetcherManager` MaxLag).
    pub fetcher_max_lag: i64,
    /// Record bytes this broker's fetchers brought from leaders.
    pub fetcher_bytes: u64,
    /// Record bytes sent to replicas under the reassignment throttle.
    pub throttled_bytes: u64,
    /// Fetches of throttled replicas answered empty because the throttle was spent.
    pub throttled_fetches: u64,
}

const REPLICATION_GAUGES: [(&str, &str); 8] = [
    ("under_replicated_partitions", "Partitions led by this broker with fewer in-sync replicas than replicas"),
    ("offline_partitions", "Partitions without a leader in the cluster"),
    ("follower_lag_max", "Largest lag, in offsets, of a follower behind a partition this broker leads"),
    (
        "under_min_isr_partitions",
        "Partitions led by this broker with fewer in-sync replicas than min.insync.replicas (acks=all is refused)",
    ),
    ("leader_partitions", "Partitions this broker leads"),
    ("partitions", "Partition replicas this broker hosts"),
    ("reassigning_partitions", "Partitions being reassigned, cluster-wide"),
    (
        "replica_fetcher_lag_max",
        "Largest lag, in offsets, of a partition this broker follows behind its leader's high watermark",
    ),
];

/// (name, help) of each replication counter, in [`ReplicationStats`] order.
const REPLICATION_COUNTERS: [(&str, &str); 5] = [
    ("isr_shrinks", "ISR shrinks committed for partitions this broker leads"),
    ("isr_expands", "ISR expansions committed for partitions this broker leads"),
    ("replica_fetcher_bytes", "Record bytes this broker's replica fetchers brought from partition leaders"),
    ("replication_throttled_bytes", "Record bytes sent to replicas under the reassignment throttle"),
    (
        "replication_throttled_fetches",
        "Partition fetches of throttled replicas answered empty because the throttle's rate was spent",
    ),
];

/// Counters kept elsewhere (the ISR changes, the fetchers, the throttle), copied at scrape
/// time.
#[derive(Debug, Default)]
struct ReplicationCounters {
    values: parking_lot::Mutex<[u64; 5]>,
}

impl Collector for ReplicationCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let values = *self.values.lock();
        for ((name, help), value) in REPLICATION_COUNTERS.iter().zip(values) {
            let family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(family)?;
        }
        Ok(())
    }
}

/// The filesystem holding the data directory, read at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogDirStats {
    pub total_bytes: u64,
    /// What the broker may still write (the filesystem's available blocks).
    pub free_bytes: u64,
}

const LOG_DIR_GAUGES: [(&str, &str); 2] = [
    ("log_dir_total_bytes", "Size of the filesystem holding the data directory"),
    ("log_dir_free_bytes", "Bytes the broker may still write on the filesystem holding the data directory"),
];

/// The metadata quorum as this broker sees it, read at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetadataStats {
    pub applied_index: u64,
    pub snapshot_index: u64,
    /// The first raft log index still stored (purged + 1).
    pub log_start_index: u64,
    pub current_term: u64,
    pub is_controller: bool,
    pub snapshot_installs: u64,
    pub registered_brokers: usize,
    pub fenced_brokers: usize,
}

/// (name, help) of each metadata gauge, in [`MetadataStats`] order.
const METADATA_GAUGES: [(&str, &str); 8] = [
    ("metadata_applied_index", "Index of the last metadata log entry applied by this broker"),
    ("metadata_snapshot_index", "Index of the last entry in this broker's newest metadata snapshot"),
    (
        "metadata_log_start_index",
        "First metadata log index this broker still stores (older entries are compacted into a snapshot)",
    ),
    ("metadata_current_term", "Current raft term of the metadata quorum"),
    ("metadata_is_controller", "1 if this broker is the active controller"),
    ("metadata_snapshot_installs_total", "Metadata snapshots installed from the leader since start"),
    ("controller_registered_brokers", "Brokers registered in the metadata image"),
    ("controller_fenced_brokers", "Registered brokers that are fenced"),
];

/// Coarser buckets for the phases of a request (4 phases per API): 100µs .. ~6.5s.
fn phase_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 4.0, 9))
}

fn latency_histogram() -> Histogram {
    // 50µs .. ~13s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 19))
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("strom");
        let requests = Family::<ApiLabels, Counter>::default();
        let request_errors = Family::<ApiLabels, Counter>::default();
        let response_errors = Family::<[(&'static str, &'static str); 2], Counter>::default();
        let request_latency =
            Family::<ApiLabels, Histogram, HistogramMaker>::new_with_constructor(latency_histogram as HistogramMaker);
        let request_phases =
            Family::<[(&'static str, &'static str); 2], Histogram, HistogramMaker>::new_with_constructor(
                phase_histogram as HistogramMaker,
            );
        let background_tasks =
            Family::<[(&'static str, &'static str); 1], Histogram, HistogramMaker>::new_with_constructor(
                phase_histogram as HistogramMaker,
            );
        let acks_all_fsync = phase_histogram();
        let network_bytes_in = Counter::default();
        let network_bytes_out = Counter::default();
        let connections = Gauge::default();
        let connections_opened = Counter::default();
        let produce_waiting = Gauge::default();
        let fetch_waiting = Gauge::default();
        let produced_records_bytes = Counter::default();
        let fetched_records_bytes = Counter::default();
        let offset_commits = Counter::default();
        let groups = Family::<[(&'static str, &'static str); 1], Gauge>::default();
        let rebalances = Gauge::default();
        let log_end_offset = Family::<PartitionLabels, Gauge>::default();
        let log_start_offset = Family::<PartitionLabels, Gauge>::default();
        let log_size_bytes = Family::<PartitionLabels, Gauge>::default();
        let metadata: [Gauge; 8] = Default::default();
        for ((name, help), gauge) in METADATA_GAUGES.iter().zip(&metadata) {
            registry.register(*name, *help, gauge.clone());
        }
        let replication: [Gauge; 8] = Default::default();
        for ((name, help), gauge) in REPLICATION_GAUGES.iter().zip(&replication) {
            registry.register(*name, *help, gauge.clone());
        }
        let replication_counters = Arc::new(ReplicationCounters::default());
        registry.register_collector(Box::new(replication_counters.clone()));
        let fetcher_lag = Family::<PartitionLabels, Gauge>::default();
        registry.register(
            "replica_fetcher_lag",
            "Lag, in offsets, of each partition this broker follows behind its leader's high watermark (with \
             --metrics-partition-series)",
            fetcher_lag.clone(),
        );
        let log_dir: [Gauge; 2] = Default::default();
        for ((name, help), gauge) in LOG_DIR_GAUGES.iter().zip(&log_dir) {
            registry.register(*name, *help, gauge.clone());
        }
        registry.register("kafka_requests", "Kafka requests handled, by API", requests.clone());
        registry.register(
            "kafka_request_errors",
            "Kafka requests that closed their connection, by API",
            request_errors.clone(),
        );
        registry.register(
            "kafka_response_errors",
            "Error codes in Kafka responses (top-level, per resource and per partition), by API and error",
            response_errors.clone(),
        );
        registry.register(
            "kafka_request_duration_seconds",
            "Time from a request being read to its response being queued, by API",
            request_latency.clone(),
        );
        registry.register(
            "kafka_request_phase_seconds",
            "Where requests' time went, by API and phase: local (in the handler), response_queue (behind earlier \
             responses of the connection), remote (waiting for replicas, min.bytes or a group), response_send",
            request_phases.clone(),
        );
        registry.register(
            "log_background_task_seconds",
            "Runs of the periodic log work, by task: rolled_segment_flush (fsync of rolled segments), \
             hw_checkpoint, retention, log_cleaner",
            background_tasks.clone(),
        );
        registry.register(
            "log_flush_acks_all_seconds",
            "An acks=all produce's wait for the fsync of its records, with flush_on_acks_all (queueing behind \
             other fsyncs of the partition included)",
            acks_all_fsync.clone(),
        );
        registry.register("network_bytes_in", "Bytes read from Kafka client connections", network_bytes_in.clone());
        registry.register("network_bytes_out", "Bytes written to Kafka client connections", network_bytes_out.clone());
        registry.register("kafka_connections", "Open Kafka client connections", connections.clone());
        registry.register(
            "kafka_connections_opened",
            "Kafka client connections accepted since start",
            connections_opened.clone(),
        );
        registry.register(
            "produce_requests_waiting",
            "acks=all Produce requests waiting for their in-sync replicas",
            produce_waiting.clone(),
        );
        registry.register(
            "fetch_requests_waiting",
            "Fetch requests waiting for min.bytes of records or max.wait.ms",
            fetch_waiting.clone(),
        );
        registry.register("produced_bytes", "Record batch bytes appended by Produce", produced_records_bytes.clone());
        registry.register("fetched_bytes", "Record batch bytes returned by Fetch", fetched_records_bytes.clone());
        registry.register("offset_commits", "OffsetCommit requests handled", offset_commits.clone());
        registry.register("consumer_groups", "Consumer groups by state", groups.clone());
        registry.register("group_rebalances", "Completed consumer-group rebalances since start", rebalances.clone());
        let group_lag = Family::<[(&'static str, String); 2], Gauge>::default();
        let partition_lag = Family::<[(&'static str, String); 3], Gauge>::default();
        registry.register(
            "consumer_group_lag",
            "Consumer lag (high watermark minus committed offset, summed over partitions) of each group this \
             broker coordinates, per topic",
            group_lag.clone(),
        );
        registry.register(
            "consumer_group_partition_lag",
            "Consumer lag per partition of each group this broker coordinates (with --metrics-partition-series)",
            partition_lag.clone(),
        );
        let topic_traffic = Arc::new(TopicTraffic::default());
        registry.register_collector(Box::new(topic_traffic.clone()));
        let transactions = Arc::new(crate::txn::metrics::TransactionGauges::default());
        registry.register_collector(Box::new(transactions.clone()));
        registry.register(
            "log_end_offset",
            "Log end offset of each partition (with --metrics-partition-series)",
            log_end_offset.clone(),
        );
        registry.register(
            "log_start_offset",
            "Log start offset of each partition (with --metrics-partition-series)",
            log_start_offset.clone(),
        );
        registry.register(
            "log_size_bytes",
            "Bytes on disk of each partition's log (with --metrics-partition-series)",
            log_size_bytes.clone(),
        );
        Metrics {
            registry,
            requests,
            request_errors,
            response_errors,
            request_latency,
            request_phases,
            background_tasks,
            acks_all_fsync,
            network_bytes_in,
            network_bytes_out,
            connections,
            connections_opened,
            produce_waiting,
            fetch_waiting,
            produced_records_bytes,
            fetched_records_bytes,
            offset_commits,
            groups,
            rebalances,
            log_end_offset,
            log_start_offset,
            log_size_bytes,
            metadata,
            replication,
            replication_counters,
            fetcher_lag,
            log_dir,
            consumer_lag: ConsumerLag::default(),
            partition_series: AtomicBool::new(false),
            group_lag,
            partition_lag,
            topic_traffic,
            transactions,
            scrape: parking_lot::Mutex::new(()),
        }
    }

    /// Held while a scrape sets the scrape-time gauges and encodes them, so that two
    /// concurrent scrapes do not interleave.
    pub fn one_scrape_at_a_time(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.scrape.lock()
    }

    /// The lag gauges from the last snapshot: per group and topic, and per partition if enabled.
    fn set_consumer_lag(&self) {
        let lags = self.consumer_lag.snapshot();
        let mut sums: BTreeMap<(&str, &str), i64> = BTreeMap::new();
        for l in lags.iter() {
            *sums.entry((&l.group, &l.topic)).or_default() += l.lag;
        }
        self.group_lag.clear();
        for ((group, topic), lag) in sums {
            self.group_lag.get_or_create(&[("group", group.to_string()), ("topic", topic.to_string())]).set(lag);
        }
        self.partition_lag.clear();
        if self.partition_series.load(Ordering::Relaxed) {
            for l in lags.iter() {
                let labels =
                    [("group", l.group.clone()), ("topic", l.topic.clone()), ("partition", l.partition.to_string())];
                self.partition_lag.get_or_create(&labels).set(l.lag);
            }
        }
    }

    /// Sets the data directory's filesystem gauges (called at scrape time).
    pub fn set_log_dir(&self, d: &LogDirStats) {
        for (gauge, v) in self.log_dir.iter().zip([d.total_bytes, d.free_bytes]) {
            gauge.set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// Sets the replication gauges and counters (called at scrape time).
    pub fn set_replication(&self, r: &ReplicationStats) {
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let values = [
            count(r.under_replicated),
            count(r.offline),
            r.max_follower_lag,
            count(r.under_min_isr),
            count(r.leaders),
            count(r.replicas),
            count(r.reassigning),
            r.fetcher_max_lag,
        ];
        for (gauge, v) in self.replication.iter().zip(values) {
            gauge.set(v);
        }
        *self.replication_counters.values.lock() =
            [r.isr_shrinks, r.isr_expands, r.fetcher_bytes, r.throttled_bytes, r.throttled_fetches];
    }

    /// Sets each followed partition's fetcher lag, if per-partition series are on.
    pub fn set_fetcher_lags(&self, lags: &[(String, i32, i64)]) {
        self.fetcher_lag.clear();
        if self.partition_series.load(Ordering::Relaxed) {
            for (topic, partition, lag) in lags {
                self.fetcher_lag
                    .get_or_create(&[("topic", topic.clone()), ("partition", partition.to_string())])
                    .set(*lag);
            }
        }
    }

    /// Sets the metadata gauges (called at scrape time).
    pub fn set_metadata(&self, m: &MetadataStats) {
        let values = [
            m.applied_index,
            m.snapshot_index,
            m.log_start_index,
            m.current_term,
            u64::from(m.is_controller),
            m.snapshot_installs,
            m.registered_brokers as u64,
            m.fenced_brokers as u64,
        ];
        for (gauge, v) in self.metadata.iter().zip(values) {
            gauge.set(i64::try_from(v).unwrap_or(i64::MAX));
        }
    }

    /// Counts one handled request of `api` that took `seconds`.
    pub fn observe_request(&self, api: &'static str, seconds: f64) {
        let labels = [("api", api)];
        self.requests.get_or_create(&labels).inc();
        self.request_latency.get_or_create(&labels).observe(seconds);
    }

    /// Records the time a request of `api` spent in `phase`.
    pub fn observe_request_phase(&self, api: &'static str, phase: &'static str, time: std::time::Duration) {
        self.request_phases.get_or_create(&[("api", api), ("phase", phase)]).observe(time.as_secs_f64());
    }

    /// Records one run of periodic log work.
    pub fn observe_background_task(&self, task: &'static str, time: std::time::Duration) {
        self.background_tasks.get_or_create(&[("task", task)]).observe(time.as_secs_f64());
    }

    /// Records an acks=all produce's wait for its fsync.
    pub fn observe_acks_all_fsync(&self, time: std::time::Duration) {
        self.acks_all_fsync.observe(time.as_secs_f64());
    }

    /// Counts one error code (Kafka's name for it) in a response of `api`.
    pub fn observe_response_error(&self, api: &'static str, error: &'static str) {
        self.response_errors.get_or_create(&[("api", api), ("error", error)]).inc();
    }

    /// Counts a request that failed so badly its connection was closed.
    pub fn observe_request_error(&self, api: &'static str) {
        self.request_errors.get_or_create(&[("api", api)]).inc();
    }

    pub fn observe_offset_commit(&self) {
        self.offset_commits.inc();
    }

    /// The Prometheus text exposition, with partition and group gauges read now.
    pub fn render(&self, partitions: &[Arc<Partition>], group_states: &[&'static str], rebalances: u64) -> String {
        self.rebalances.set(i64::try_from(rebalances).unwrap_or(i64::MAX));
        self.set_consumer_lag();
        self.groups.clear();
        for state in ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"] {
            let n = group_states.iter().filter(|s| **s == state).count();
            self.groups.get_or_create(&[("state", state)]).set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        self.log_end_offset.clear();
        self.log_start_offset.clear();
        self.log_size_bytes.clear();
        let mut traffic: BTreeMap<String, TrafficCounts> = BTreeMap::new();
        for p in partitions {
            let c = p.traffic.counts();
            let sum = traffic.entry(p.topic.to_string()).or_default();
            sum.bytes_in += c.bytes_in;
            sum.records_in += c.records_in;
            sum.bytes_out += c.bytes_out;
        }
        *self.topic_traffic.snapshot.lock() = traffic;
        let per_partition = if self.partition_series.load(Ordering::Relaxed) { partitions } else { &[] };
        for p in per_partition {
            let labels = [("topic", p.topic.to_string()), ("partition", p.index.to_string())];
            let g = p.log_gauges();
            self.log_end_offset.get_or_create(&labels).set(g.log_end_offset);
            self.log_start_offset.get_or_create(&labels).set(g.log_start_offset);
            self.log_size_bytes.get_or_create(&labels).set(i64::try_from(g.size_bytes).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::error!(error = %e, "encoding metrics failed");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::lag::PartitionLag;

    fn lag(group: &str, topic: &str, partition: i32, lag: i64) -> PartitionLag {
        PartitionLag { group: group.into(), topic: topic.into(), partition, lag }
    }

    #[test]
    fn lag_is_summed_per_group_and_topic_and_per_partition_only_when_asked() {
        let m = Metrics::new();
        m.consumer_lag.set(vec![lag("g", "t", 0, 10), lag("g", "t", 1, 5), lag("h", "t", 0, 1)]);
        let text = m.render(&[], &[], 0);
        assert!(text.contains(r#"strom_consumer_group_lag{group="g",topic="t"} 15"#), "{text}");
        assert!(text.contains(r#"strom_consumer_group_lag{group="h",topic="t"} 1"#), "{text}");
        assert!(!text.contains("strom_consumer_group_partition_lag{"), "{text}");
        m.partition_series.store(true, Ordering::Relaxed);
        let text = m.render(&[], &[], 0);
        assert!(text.contains(r#"strom_consumer_group_partition_lag{group="g",topic="t",partition="1"} 5"#), "{text}");
        // A group that is gone leaves no series behind.
        m.consumer_lag.set(vec![lag("g", "t", 0, 2)]);
        let text = m.render(&[], &[], 0);
        assert!(!text.contains(r#"group="h""#), "{text}");
    }

    #[test]
    fn replication_and_disk_gauges_are_exported() {
        let m = Metrics::new();
        m.set_replication(&ReplicationStats { under_min_isr: 2, leaders: 7, replicas: 21, ..Default::default() });
        m.set_log_dir(&LogDirStats { total_bytes: 1000, free_bytes: 100 });
        let text = m.render(&[], &[], 0);
        for line in [
            "strom_under_min_isr_partitions 2",
            "strom_leader_partitions 7",
            "strom_partitions 21",
            "strom_log_dir_total_bytes 1000",
            "strom_log_dir_free_bytes 100",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in {text}");
        }
    }
}
