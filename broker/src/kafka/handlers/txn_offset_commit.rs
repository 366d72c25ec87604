//! TxnOffsetCommit: a transactional producer commits a group's offsets as part of its
//! transaction, at the group's coordinator. They are written to `__consumer_offsets` in the
//! producer's transaction and replicated before the answer, and count only once the
//! transaction's commit marker reaches that partition (an abort drops them): OffsetFetch
//! shows the offsets committed before until then.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};

use crate::group::offsets::OffsetCommit;
use crate::kafka::error_code;
use crate::node::Node;

/// How long a commit waits for the offsets partition's ISR.
const REPLICATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn handle(node: &Node, req: TxnOffsetCommitRequest, version: i16) -> TxnOffsetCommitResponse {
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
                leader_epoch: if version >= 2 { p.committed_leader_epoch } else { -1 },
                metadata: p.committed_metadata.as_ref().map(|m| m.to_string()).unwrap_or_default(),
            });
        }
    }
    let (generation, member) =
        if version >= 3 { (req.generation_id, req.member_id.to_string()) } else { (-1, String::new()) };
    let producer = (req.producer_id.0, req.producer_epoch);
    let outcome = match node.groups.commit_txn_offsets(&req.group_id, generation, &member, producer, commits) {
        Ok(pending) => node.groups.complete_commit(pending, REPLICATION_TIMEOUT).await,
        Err(e) => Err(e),
    };
    if let Err(e) = &outcome {
        tracing::debug!(group = %&*req.group_id, error = %e, "transactional offsets not committed");
    }
    let mut resp = TxnOffsetCommitResponse::default();
    resp.topics = req
        .topics
        .iter()
        .map(|t| {
            let mut out = TxnOffsetCommitResponseTopic::default();
            out.name = t.name.clone();
            out
        })
        .collect();
    for (ti, partition, index) in shape {
        let mut p = TxnOffsetCommitResponsePartition::default();
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
