//! OffsetFetch: committed offsets of one group (v0–7) or several (v8+); a partition without
//! a committed offset reports -1. With `require_stable` (v7+, what read_committed consumers
//! send), a partition with offsets of an open transaction answers UNSTABLE_OFFSET_COMMIT
//! until its marker, so a consumer never resumes from an offset about to change (KIP-447).
//! A fetch first waits for its group's commits still being replicated (`group::in_flight`).

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions, OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse};

use crate::group::records::OffsetValue;
use crate::kafka::error_code;
use crate::node::Node;

use super::{str_bytes, topic_name};

type Fetched = Vec<(String, i32, Option<OffsetValue>)>;
/// Offsets of one topic: (partition, committed offset if any).
type TopicOffsets = (String, Vec<(i32, Option<OffsetValue>)>);

/// How long a fetch waits for its group's commits in flight (`group::in_flight`) before it
/// answers with what is committed.
const SETTLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

pub async fn handle(node: &Node, req: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
    let mut resp = OffsetFetchResponse::default();
    let require_stable = version >= 7 && req.require_stable;
    let unstable = |group: &str, topic: &str, partition: i32| {
        if require_stable && node.groups.has_pending_txn_offsets(group, topic, partition) {
            kafka_protocol::error::ResponseError::UnstableOffsetCommit.code()
        } else {
            error_code::NONE
        }
    };
    if version >= 8 {
        for g in &req.groups {
            let topics = g
                .topics
                .as_ref()
                .map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
            let mut group = OffsetFetchResponseGroup::default();
            group.group_id = g.group_id.clone();
            if let Err(e) = node.groups.check_coordinator(&g.group_id) {
                group.error_code = error_code::group(&e);
                resp.groups.push(group);
                continue;
            }
            node.groups.commits_settled(&g.group_id, SETTLE_TIMEOUT).await;
            let fetched = node.groups.fetch_offsets(&g.group_id, topics);
            group.topics = grouped(fetched)
                .into_iter()
                .map(|(name, parts)| {
                    let mut t = OffsetFetchResponseTopics::default();
                    t.name = topic_name(&name);
                    t.partitions = parts
                        .into_iter()
                        .map(|(p, v)| {
                            let mut out = OffsetFetchResponsePartitions::default();
                            out.partition_index = p;
                            out.committed_offset = v.as_ref().map_or(-1, |v| v.offset);
                            out.committed_leader_epoch = v.as_ref().map_or(-1, |v| v.leader_epoch);
                            out.metadata = Some(str_bytes(v.as_ref().map_or("", |v| v.metadata.as_str())));
                            out.error_code = unstable(&g.group_id, &name, p);
                            out
                        })
                        .collect();
                    t
                })
                .collect();
            resp.groups.push(group);
        }
        return resp;
    }
    let topics =
        req.topics.as_ref().map(|ts| ts.iter().map(|t| (t.name.to_string(), t.partition_indexes.clone())).collect());
    if let Err(e) = node.groups.check_coordinator(&req.group_id) {
        // v0-1 have no top-level error code; the partitions carry it.
        resp.error_code = error_code::group(&e);
        if version < 2 {
            resp.topics = requested_with_error(req.topics.as_deref().unwrap_or_default(), resp.error_code);
        }
        return resp;
    }
    node.groups.commits_settled(&req.group_id, SETTLE_TIMEOUT).await;
    let fetched = node.groups.fetch_offsets(&req.group_id, topics);
    resp.topics = grouped(fetched)
        .into_iter()
        .map(|(name, parts)| {
            let mut t = OffsetFetchResponseTopic::default();
            t.name = topic_name(&name);
            t.partitions = parts
                .into_iter()
                .map(|(p, v)| {
                    let mut out = OffsetFetchResponsePartition::default();
                    out.partition_index = p;
                    out.committed_offset = v.as_ref().map_or(-1, |v| v.offset);
                    if version >= 5 {
                        out.committed_leader_epoch = v.as_ref().map_or(-1, |v| v.leader_epoch);
                    }
                    out.metadata = Some(str_bytes(v.as_ref().map_or("", |v| v.metadata.as_str())));
                    out.error_code = unstable(&req.group_id, &name, p);
                    out
                })
                .collect();
            t
        })
        .collect();
    resp
}

/// Every requested partition, failed with `code` (for versions without a top-level error).
fn requested_with_error(
    topics: &[kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic],
    code: i16,
) -> Vec<OffsetFetchResponseTopic> {
    topics
        .iter()
        .map(|t| {
            let mut out = OffsetFetchResponseTopic::default();
            out.name = t.name.clone();
            out.partitions = t
                .partition_indexes
                .iter()
                .map(|p| {
                    let mut part = OffsetFetchResponsePartition::default();
                    part.partition_index = *p;
                    part.committed_offset = -1;
                    part.error_code = code;
                    part
                })
                .collect();
            out
        })
        .collect()
}

/// Groups fetched offsets by topic, keeping the order topics first appear in.
fn grouped(fetched: Fetched) -> Vec<TopicOffsets> {
    let mut out: Vec<TopicOffsets> = Vec::new();
    for (topic, partition, value) in fetched {
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, parts)) => parts.push((partition, value)),
            None => out.push((topic, vec![(partition, value)])),
        }
    }
    out
}
