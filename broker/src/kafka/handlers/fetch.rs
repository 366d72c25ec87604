//! Fetch with long polling: answer as soon as `min_bytes` are available, or when
//! `max_wait_ms` has passed. A waiting fetch sleeps on the high-watermark channels of its
//! partitions, so the append that brings data wakes it (no poll loop).
//!
//! Limits as in Kafka (KIP-74): `partition_max_bytes` per partition and `max_bytes` for the
//! response, except that the first partition with data returns at least one whole batch so a
//! consumer can never be stuck behind a batch larger than its limits. From v7 on, fetch
//! sessions (KIP-227, [`crate::kafka::fetch_session`]): an incremental fetch reads every
//! partition of its session and answers only those with news. Records are not read here:
//! the reply names their file ranges and the connection sends them with `sendfile`
//! ([`crate::kafka::fetch_reply`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::select_all;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::fetch_response::{AbortedTransaction, FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, TopicName};
use tokio::sync::watch;

use crate::kafka::error_code;
use crate::kafka::fetch_reply::FetchReply;
use crate::kafka::fetch_session::{FetchPlan, PartitionKey, PartitionOutcome, PartitionRequest};
use crate::log::FileSlice;
use crate::metrics::Waiting;
use crate::node::Node;
use crate::partition::transactional::Isolation;
use crate::partition::Partition;

use super::topic_name;

/// Longest a fetch may wait, whatever the client asks.
const MAX_WAIT_CAP: Duration = Duration::from_secs(30);

struct Wanted {
    request: PartitionRequest,
    /// Resolved name (None if the topic does not exist).
    resolved: Option<String>,
}

/// The partitions a request names, in its order.
fn requested(req: &FetchRequest) -> Vec<PartitionRequest> {
    req.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| PartitionRequest {
                key: PartitionKey { topic: t.topic.clone(), topic_id: t.topic_id, partition: p.partition },
                fetch_offset: p.fetch_offset,
                partition_max_bytes: p.partition_max_bytes,
            })
        })
        .collect()
}

fn forgotten(req: &FetchRequest) -> Vec<PartitionKey> {
    req.forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| PartitionKey {
                topic: t.topic.clone(),
                topic_id: t.topic_id,
                partition: *p,
            })
        })
        .collect()
}

pub async fn handle(node: &Node, req: FetchRequest, version: i16) -> FetchReply {
    let plan = if version >= 7 {
        let begun = node.fetch_sessions.begin(
            req.session_id,
            req.session_epoch,
            version >= 13,
            requested(&req),
            forgotten(&req),
            std::time::Instant::now(),
        );
        match begun {
            Ok(plan) => plan,
            Err(code) => {
                let mut resp = FetchResponse::default();
                resp.error_code = code;
                return FetchReply { response: resp, slices: Vec::new() };
            }
        }
    } else {
        FetchPlan { session_id: 0, incremental: false, partitions: requested(&req) }
    };
    let wanted: Vec<Wanted> = plan
        .partitions
        .iter()
        .map(|r| Wanted {
            request: r.clone(),
            resolved: if version >= 13 {
                node.catalog.get_by_id(r.key.topic_id).map(|m| m.name.clone())
            } else {
                Some(r.key.topic.to_string())
            },
        })
        .collect();

    let wait = Duration::from_millis(u64::try_from(req.max_wait_ms).unwrap_or(0)).min(MAX_WAIT_CAP);
    let deadline = tokio::time::Instant::now() + wait;
    let min_bytes = usize::try_from(req.min_bytes).unwrap_or(0);
    let max_bytes = usize::try_from(req.max_bytes).unwrap_or(0);
    // read_committed (v4+): up to the last stable offset, with the aborted transactions.
    let isolation = Isolation::from_level(if version >= 4 { req.isolation_level } else { 0 });
    let read = loop {
        // Subscribe before reading so that an append between the read and the wait still wakes us.
        let mut watchers: Vec<watch::Receiver<i64>> = wanted
            .iter()
            .filter_map(|w| w.resolved.as_deref().and_then(|t| node.replicas.leader(t, w.request.key.partition)))
            .map(|p| p.subscribe())
            .collect();
        let read = read_all(node, &wanted, max_bytes, version, isolation);
        let (bytes, now) = (read.bytes, tokio::time::Instant::now());
        if bytes >= min_bytes
            || bytes > 0 && bytes >= max_bytes
            || read.any_error
            || now >= deadline
            || watchers.is_empty()
        {
            break read;
        }
        let _waiting = Waiting::new(&node.metrics.fetch_waiting);
        let changed = select_all(watchers.iter_mut().map(|w| Box::pin(w.changed())));
        if tokio::time::timeout_at(deadline, changed).await.is_err() {
            // Deadline passed: answer with whatever is there now.
            break read_all(node, &wanted, max_bytes, version, isolation);
        }
    };
    node.metrics.fetched_records_bytes.inc_by(read.bytes as u64);
    for (source, slice) in read.sources.iter().zip(&read.slices) {
        if let (Some(partition), Some(slice)) = (source, slice) {
            partition.traffic.fetched(slice.len as u64);
        }
    }
    let include = node.fetch_sessions.finish(&plan, &read.outcomes);
    let mut resp = FetchResponse::default();
    resp.session_id = plan.session_id;
    let mut slices: Vec<Vec<Option<FileSlice>>> = Vec::new();
    for (((w, p), slice), included) in wanted.iter().zip(read.partitions).zip(read.slices).zip(include) {
        if !included {
            continue;
        }
        // Group partitions of the same topic together, in request order.
        let key = &w.request.key;
        match resp.responses.last_mut() {
            Some(t) if t.topic == key.topic && t.topic_id == key.topic_id => {
                t.partitions.push(p);
                if let Some(s) = slices.last_mut() {
                    s.push(slice);
                }
            }
            _ => {
                let mut t = FetchableTopicResponse::default();
                t.topic = if version >= 13 { TopicName::default() } else { key.topic.clone() };
                t.topic_id = key.topic_id;
                if version < 13 && t.topic.is_empty() {
                    t.topic = topic_name(w.resolved.as_deref().unwrap_or(""));
                }
                t.partitions.push(p);
                resp.responses.push(t);
                slices.push(vec![slice]);
            }
        }
    }
    FetchReply { response: resp, slices }
}

/// What one pass over the partitions found.
struct Read {
    /// One per wanted partition, in order (records empty where `slices` has the range).
    partitions: Vec<PartitionData>,
    slices: Vec<Option<FileSlice>>,
    /// The replica each slice was read from (for its traffic counters).
    sources: Vec<Option<Arc<Partition>>>,
    outcomes: Vec<PartitionOutcome>,
    /// Record bytes in all.
    bytes: usize,
    any_error: bool,
}

/// Reads what the partitions hold now.
fn read_all(node: &Node, wanted: &[Wanted], max_bytes: usize, version: i16, isolation: Isolation) -> Read {
    let mut out = Read {
        partitions: Vec::with_capacity(wanted.len()),
        slices: Vec::with_capacity(wanted.len()),
        sources: Vec::with_capacity(wanted.len()),
        outcomes: Vec::with_capacity(wanted.len()),
        bytes: 0,
        any_error: false,
    };
    let mut first_with_data = true;
    for w in wanted {
        let mut p = PartitionData::default();
        p.partition_index = w.request.key.partition;
        p.high_watermark = -1;
        p.last_stable_offset = -1;
        p.log_start_offset = -1;
        p.records = Some(Bytes::new());
        let partition = match w.resolved.as_deref() {
            Some(t) => node.leader_replica(t, w.request.key.partition).map_err(error_code::lookup),
            None if version >= 13 => Err(ResponseError::UnknownTopicId.code()),
            None => Err(ResponseError::UnknownTopicOrPartition.code()),
        };
        let mut has_records = false;
        let mut found = None;
        let mut source = None;
        match partition {
            Err(code) => p.error_code = code,
            Ok(partition) => {
                let limit = usize::try_from(w.request.partition_max_bytes)
                    .unwrap_or(0)
                    .min(max_bytes.saturating_sub(out.bytes));
                match partition.read_slice(w.request.fetch_offset, limit, first_with_data, isolation) {
                    Ok(read) => {
                        p.high_watermark = read.high_watermark;
                        p.last_stable_offset = read.stability.last_stable_offset;
                        p.log_start_offset = read.log_start_offset;
                        if isolation == Isolation::ReadCommitted {
                            p.aborted_transactions = Some(
                                read.stability
                                    .aborted
                                    .iter()
                                    .map(|a| {
                                        AbortedTransaction::default()
                                            .with_producer_id(ProducerId(a.producer_id))
                                            .with_first_offset(a.first_offset)
                                    })
                                    .collect(),
                            );
                        }
                        if let Some(slice) = read.slice.filter(|s| s.len > 0) {
                            first_with_data = false;
                            has_records = true;
                            out.bytes += slice.len;
                            found = Some(slice);
                            source = Some(partition.clone());
                        }
                    }
                    Err(e) => {
                        p.error_code = error_code::partition(&e);
                        p.high_watermark = partition.high_watermark();
                        p.last_stable_offset = partition.last_stable_offset();
                        p.log_start_offset = partition.log_start_offset();
                        tracing::debug!(error = %error_code::message(&e), "fetch refused");
                    }
                }
            }
        }
        let error = p.error_code != 0;
        out.any_error |= error;
        out.outcomes.push(PartitionOutcome {
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start_offset,
            has_records,
            error,
        });
        out.partitions.push(p);
        out.slices.push(found);
        out.sources.push(source);
    }
    out
}
