//! What clients wrote to and read from one partition replica on this broker, for the
//! per-topic metrics (Kafka's `BrokerTopicMetrics`: BytesInPerSec, MessagesInPerSec,
//! BytesOutPerSec). Plain atomics, counted by the Produce and Fetch handlers after the
//! fact, summed per topic at scrape time: the request path takes no lock for them.
//! Replication's reads are not counted (Kafka counts them apart).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Traffic {
    bytes_in: AtomicU64,
    records_in: AtomicU64,
    bytes_out: AtomicU64,
}

/// A [`Traffic`] read at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TrafficCounts {
    pub bytes_in: u64,
    pub records_in: u64,
    pub bytes_out: u64,
}

impl Traffic {
    /// A Produce appended `bytes` of record batches holding `records` records.
    pub fn produced(&self, bytes: u64, records: u64) {
        self.bytes_in.fetch_add(bytes, Ordering::Relaxed);
        self.records_in.fetch_add(records, Ordering::Relaxed);
    }

    /// A Fetch answered with `bytes` of record batches.
    pub fn fetched(&self, bytes: u64) {
        self.bytes_out.fetch_add(bytes, Ordering::Relaxed);
    }

    pub fn counts(&self) -> TrafficCounts {
        TrafficCounts {
            bytes_in: self.bytes_in.load(Ordering::Relaxed),
            records_in: self.records_in.load(Ordering::Relaxed),
            bytes_out: self.bytes_out.load(Ordering::Relaxed),
        }
    }
}
