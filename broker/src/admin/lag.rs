//! Consumer lag of the groups this broker coordinates, served on `/metrics` so that no
//! kafka-exporter is needed.
//!
//! Every `consumer_lag_interval_ms` each coordinated group's committed offsets are compared
//! with the high watermarks of their partitions, asked of the partitions' leaders (the admin
//! fan-out of [`peers::offsets`], short timeouts): a partition's lag is `high watermark -
//! committed`, never below 0, what `kafka-consumer-groups.sh --describe` prints as LAG (its
//! LOG-END-OFFSET is the offset a consumer can read up to). A partition whose leader did not
//! answer is left out of that round. The scrape reads the last snapshot and never waits on
//! the network.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use strom_proto::admin::ResetKind;

use super::peers;
use crate::node::Node;
use crate::shutdown::Shutdown;

/// The lag of one partition for one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLag {
    pub group: String,
    pub topic: String,
    pub partition: i32,
    pub lag: i64,
}

/// The last computed lags, shared with the metrics.
#[derive(Debug, Default)]
pub struct ConsumerLag {
    latest: Mutex<Arc<Vec<PartitionLag>>>,
}

impl ConsumerLag {
    pub fn snapshot(&self) -> Arc<Vec<PartitionLag>> {
        self.latest.lock().clone()
    }

    pub fn set(&self, lags: Vec<PartitionLag>) {
        *self.latest.lock() = Arc::new(lags);
    }
}

/// The lag of each committed offset whose partition's high watermark is known (pure).
/// `committed`: (group, topic, partition, offset); `ends`: high watermark per partition, -1
/// when unknown.
pub fn lags(committed: &[(String, String, i32, i64)], ends: &BTreeMap<(String, i32), i64>) -> Vec<PartitionLag> {
    committed
        .iter()
        .filter_map(|(group, topic, partition, offset)| {
            let end = *ends.get(&(topic.clone(), *partition))?;
            (end >= 0).then(|| PartitionLag {
                group: group.clone(),
                topic: topic.clone(),
                partition: *partition,
                lag: (end - offset).max(0),
            })
        })
        .collect()
}

/// One round: the committed offsets of every group this broker coordinates, and their lag.
pub async fn compute(node: &Node) -> Vec<PartitionLag> {
    let mut committed = Vec::new();
    for (group, _, _) in node.groups.list() {
        for (topic, partition, value) in node.groups.fetch_offsets(&group, None) {
            if let Some(v) = value {
                committed.push((group.clone(), topic, partition, v.offset));
            }
        }
    }
    let mut partitions: Vec<(String, i32)> = committed.iter().map(|(_, t, p, _)| (t.clone(), *p)).collect();
    partitions.sort();
    partitions.dedup();
    if partitions.is_empty() {
        return Vec::new();
    }
    let ends: BTreeMap<(String, i32), i64> = peers::offsets(node, &partitions, ResetKind::Latest, 0)
        .await
        .into_iter()
        .map(|(topic, partition, offset)| ((topic, partition), offset))
        .collect();
    lags(&committed, &ends)
}

/// Recomputes the lag every `interval` until shutdown.
pub async fn run(node: Arc<Node>, interval: Duration, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(interval.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.wait() => return,
        }
        let lags = compute(&node).await;
        node.metrics.consumer_lag.set(lags);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_the_high_watermark_minus_the_committed_offset_and_never_negative() {
        let committed = vec![
            ("g".to_string(), "t".to_string(), 0, 10),
            ("g".to_string(), "t".to_string(), 1, 7),
            ("g".to_string(), "u".to_string(), 0, 3),
            ("h".to_string(), "t".to_string(), 0, 25),
        ];
        let ends: BTreeMap<(String, i32), i64> =
            [(("t".to_string(), 0), 20), (("t".to_string(), 1), -1)].into_iter().collect();
        let got = lags(&committed, &ends);
        let want = vec![
            PartitionLag { group: "g".into(), topic: "t".into(), partition: 0, lag: 10 },
            // t-1's leader did not answer, u-0 was not asked: both left out.
            PartitionLag { group: "h".into(), topic: "t".into(), partition: 0, lag: 0 },
        ];
        assert_eq!(got, want);
    }
}
