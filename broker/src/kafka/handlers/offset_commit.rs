//! OffsetCommit: committed offsets are appended to `__consumer_offsets`, and every in-sync
//! replica of its partition has them, before the response (as Kafka writes them with acks=all).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_commit_response::{OffsetCommitResponsePartition, OffsetCommitResponseTopic};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse};

use crate::group::offsets::OffsetCommit;
use crate::kafka::error_code;
use crate::node::Node;

/// How long a commit waits for the offsets partition's ISR.
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn handle(node: &Node, req: OffsetCommitRequest, version: i16) -> OffsetCommitResponse {
    // Partitions of unknown topics are answered without being committed.
    let mut commits = Vec::new();
    let mut shape: Vec<(usize, i32, Option<usize>)> = Vec::new(); // (topic index, partition, commit index)
    for (ti, topic) in req.topics.iter().enumerate() {
        for p in &topic.partitions {
            let exists = node.catalog.get(&topic.name).is_some_and(|t| t.partition(p.partition_index).is_some());
            if !exists {
                shape.push((ti, p.partition_index, None));
                continue;
            }
            shape.push((ti, p.partition_index, Some(commits.len())));
            commits.push(OffsetCommit {
                topic: topic.name.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: if version >= 6 { p.committed_leader_epoch } else { -1 },
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
            });
        }
    }
    let outcome =
        match node.groups.commit_offsets(&req.group_id, req.generation_id_or_member_epoch, &req.member_id, commits) {
            Ok(pending) => node.groups.complete_commit(pending, REPLICATION_TIMEOUT).await,
            Err(e) => Err(e),
        };
    node.metrics.observe_offset_commit();
    if let Err(e) = &outcome {
        tracing::debug!(group = %&*req.group_id, error = %e, "offsets not committed");
    }
    let mut resp = OffsetCommitResponse::default();
    resp.topics = req
        .topics
        .iter()
        .map(|t| {
            let mut out = OffsetCommitResponseTopic::default();
            out.name = t.name.clone();
            out
        })
        .collect();
    for (ti, partition, index) in shape {
        let mut p = OffsetCommitResponsePartition::default();
        p.partition_index = partition;
        p.error_code = match (&outcome, index) {
            (_, None) => ResponseError::UnknownTopicOrPartition.code(),
            (Err(e), _) => error_code::group(e),
            (Ok(results), Some(i)) => {
                results.get(i).and_then(|r| r.as_ref().err()).map_or(error_code::NONE, error_code::group)
            }
        };
        resp.topics[ti].partitions.push(p);
    }
    resp
}
