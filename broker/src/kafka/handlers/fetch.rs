//! Fetch with long polling: answer as soon as `min_bytes` are available, or when
//! `max_wait_ms` has passed. A waiting fetch sleeps on the high-watermark channels of its
//! partitions, so the append that brings data wakes it (no poll loop).
//!
//! Limits as in Kafka (KIP-74): `partition_max_bytes` per partition and `max_bytes` for the
//! response, except that the first partition with data returns at least one whole batch so a
//! consumer can never be stuck behind a batch larger than its limits. Fetch sessions
//! (KIP-227) are not kept yet: the response's session id 0 tells clients to send full requests.

use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, TopicName};
use tokio::sync::watch;

use crate::kafka::error_code;
use crate::node::Node;

use super::topic_name;

/// Longest a fetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

struct Wanted {
    topic: TopicName,
    topic_id: uuid::Uuid,
    /// Resolved name (None if the topic does not exist).
    resolved: Option<String>,
    partition: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
}

pub async fn handle(node: &Node, req: FetchRequest, version: i16) -> FetchResponse {
    let wanted: Vec<Wanted> = req
        .topics
        .iter()
        .flat_map(|t| {
            let resolved = if version >= 13 {
                node.catalog.get_by_id(t.topic_id).map(|m| m.name.clone())
            } else {
                Some(t.topic.to_string())
            };
            t.partitions.iter().map(move |p| Wanted {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                resolved: resolved.clone(),
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
            })
        })
        .collect();

    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(MAX_WAIT_CAP);
    let deadline = tokio::time::Instant::now() + wait;
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    loop {
        // Subscribe before reading so that an append between the read and the wait still wakes us.
        let mut watchers: Vec<watch::Receiver<i64>> = wanted
            .iter()
            .filter_map(|w| w.resolved.as_deref().and_then(|t| node.replicas.leader(t, w.partition)))
            .map(|p| p.subscribe())
            .collect();
        let (resp, bytes, any_error) = read_all(node, &wanted, max_bytes, version);
        let now = tokio::time::Instant::now();
        if bytes >= min_bytes || bytes > 0 && bytes >= max_bytes || any_error || now >= deadline || watchers.is_empty()
        {
            node.metrics.fetched_records_bytes.inc_by(bytes as u64);
            return resp;
        }
        let changed = select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            // Deadline passed: answer with whatever is there now.
            let (resp, bytes, _) = read_all(node, &wanted, max_bytes, version);
            node.metrics.fetched_records_bytes.inc_by(bytes as u64);
            return resp;
        }
    }
}

/// Builds the response from what the partitions hold now: (response, record bytes, any error).
fn read_all(node: &Node, wanted: &[Wanted], max_bytes: usize, version: i16) -> (FetchResponse, usize, bool) {
    let mut resp = FetchResponse::default();
    let mut total = 0usize;
    let mut any_error = false;
    let mut first_with_data = true;
    for w in wanted {
        let mut p = PartitionData::default();
        p.partition_index = w.partition;
        p.high_watermark = -1;
        p.last_stable_offset = -1;
        p.log_start_offset = -1;
        p.records = Some(Bytes::new());
        let partition = match w.resolved.as_deref() {
            Some(t) => node.leader_replica(t, w.partition).map_err(error_code::lookup),
            None if version >= 13 => Err(ResponseError::UnknownTopicId.code()),
            None => Err(ResponseError::UnknownTopicOrPartition.code()),
        };
        match partition {
            Err(code) => {
                p.error_code = code;
                any_error = true;
            }
            Ok(partition) => {
                let limit = usize::try_from(w.partition_max_bytes).unwrap_or(0).min(max_bytes.saturating_sub(total));
                match partition.read(w.fetch_offset, limit, first_with_data) {
                    Ok(read) => {
                        p.high_watermark = read.high_watermark;
                        p.last_stable_offset = read.high_watermark;
                        p.log_start_offset = read.log_start_offset;
                        if let Some(records) = read.records {
                            if !records.is_empty() {
                                first_with_data = false;
                                total += records.len();
                                p.records = Some(records);
                            }
                        }
                    }
                    Err(e) => {
                        p.error_code = error_code::partition(&e);
                        p.high_watermark = partition.high_watermark();
                        p.last_stable_offset = p.high_watermark;
                        p.log_start_offset = partition.log_start_offset();
                        any_error = true;
                        tracing::debug!(error = %error_code::message(&e), "fetch refused");
                    }
                }
            }
        }
        // Group partitions of the same topic together, in request order.
        match resp.responses.last_mut() {
            Some(t) if t.topic == w.topic && t.topic_id == w.topic_id => t.partitions.push(p),
            _ => {
                let mut t = FetchableTopicResponse::default();
                t.topic = if version >= 13 { TopicName::default() } else { w.topic.clone() };
                t.topic_id = w.topic_id;
                if version < 13 && t.topic.is_empty() {
                    t.topic = topic_name(w.resolved.as_deref().unwrap_or(""));
                }
                t.partitions.push(p);
                resp.responses.push(t);
            }
        }
    }
    (resp, total, any_error)
}
