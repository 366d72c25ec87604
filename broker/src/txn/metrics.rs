//! The transaction figures of `/metrics` (docs/metrics.md), set at scrape time:
//! - `strom_transactional_ids{state}`: the ids this broker coordinates, by state (Ongoing and
//!   the Prepare states are the open transactions; Kafka has no direct MBean for them).
//! - `strom_topic_open_transactions{topic}`: producers with a transaction open on the
//!   partitions this broker leads.
//! - `strom_topic_last_stable_offset_lag_max{topic}`: the largest high watermark − last stable
//!   offset over those partitions (records read_committed consumers cannot see yet; it grows
//!   while a transaction stays open, Kafka's hanging-transaction symptom).
//!
//! A topic without open transactions and without LSO lag has no series (absent means 0).

use std::collections::BTreeMap;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::state::TxnState;
use crate::partition::Partition;

/// Per topic: open transactions, the largest LSO lag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicTransactions {
    pub open: i64,
    pub lso_lag_max: i64,
}

#[derive(Debug, Default, Clone)]
struct Snapshot {
    ids_by_state: BTreeMap<&'static str, usize>,
    topics: BTreeMap<String, TopicTransactions>,
}

/// The collector; [`TransactionGauges::set`] before each encode.
#[derive(Debug, Default)]
pub struct TransactionGauges {
    snapshot: parking_lot::Mutex<Snapshot>,
}

/// Sums the gauges of the partitions this broker leads by topic, leaving out topics with
/// nothing to report.
pub fn per_topic(partitions: &[Arc<Partition>]) -> BTreeMap<String, TopicTransactions> {
    let mut topics: BTreeMap<String, TopicTransactions> = BTreeMap::new();
    for p in partitions.iter().filter(|p| p.is_leader()) {
        let g = p.log_gauges();
        if g.open_transactions == 0 && g.last_stable_offset_lag == 0 {
            continue;
        }
        let t = topics.entry(p.topic.to_string()).or_default();
        t.open += g.open_transactions;
        t.lso_lag_max = t.lso_lag_max.max(g.last_stable_offset_lag);
    }
    topics
}

impl TransactionGauges {
    pub fn set(&self, ids_by_state: BTreeMap<&'static str, usize>, topics: BTreeMap<String, TopicTransactions>) {
        *self.snapshot.lock() = Snapshot { ids_by_state, topics };
    }
}

impl Collector for TransactionGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let snapshot = self.snapshot.lock().clone();
        let help = "Transactional ids this broker coordinates, by state";
        let mut family = encoder.encode_descriptor("transactional_ids", help, None, MetricType::Gauge)?;
        // Every state but Dead (ids are removed, not kept Dead), each series present, 0 included.
        for state in TxnState::ALL.into_iter().filter(|s| *s != TxnState::Dead) {
            let n = snapshot.ids_by_state.get(state.name()).copied().unwrap_or(0);
            let labels = [("state", state.name())];
            ConstGauge::new(i64::try_from(n).unwrap_or(i64::MAX)).encode(family.encode_family(&labels)?)?;
        }
        type Read = fn(&TopicTransactions) -> i64;
        let families: [(&str, &str, Read); 2] = [
            ("topic_open_transactions", "Transactions open on the partitions this broker leads, per topic", |t| t.open),
            (
                "topic_last_stable_offset_lag_max",
                "Largest high watermark minus last stable offset over the partitions this broker leads, per topic",
                |t| t.lso_lag_max,
            ),
        ];
        for (name, help, value) in families {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (topic, t) in &snapshot.topics {
                let labels = [("topic", topic.as_str())];
                ConstGauge::new(value(t)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn ids_by_state_and_topics_with_transactions_are_exported() {
        let gauges = Arc::new(TransactionGauges::default());
        let mut registry = Registry::with_prefix("strom");
        registry.register_collector(Box::new(gauges.clone()));
        let topics = BTreeMap::from([("out".to_string(), TopicTransactions { open: 2, lso_lag_max: 40 })]);
        gauges.set(BTreeMap::from([("Ongoing", 2), ("CompleteCommit", 1)]), topics);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap_or_else(|e| panic!("encode: {e}"));
        for line in [
            r#"strom_transactional_ids{state="Ongoing"} 2"#,
            r#"strom_transactional_ids{state="CompleteCommit"} 1"#,
            r#"strom_transactional_ids{state="Empty"} 0"#,
            r#"strom_topic_open_transactions{topic="out"} 2"#,
            r#"strom_topic_last_stable_offset_lag_max{topic="out"} 40"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
        assert!(!text.contains(r#"state="Dead""#), "ids are removed, never counted Dead");
    }
}
