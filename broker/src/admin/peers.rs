//! What one broker answers about itself (its replicas, offsets of the partitions it leads),
//! and calling other brokers' admin services for the same (a fan-out with a short timeout:
//! a broker that does not answer counts as unknown, never as an error of the whole call).

use std::time::Duration;

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    LocalReplica, LocalReplicasRequest, LocalReplicasResponse, PartitionOffset, PartitionOffsetsRequest,
    PartitionOffsetsResponse, ResetKind, TopicPartition,
};
use tonic::transport::Channel;

use crate::node::Node;

/// How long a peer may take to answer a fan-out call.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The replicas this broker hosts.
pub fn local_replicas(node: &Node) -> LocalReplicasResponse {
    let replicas = node
        .replicas
        .all()
        .into_iter()
        .map(|p| LocalReplica {
            topic: p.topic.to_string(),
            partition: p.index,
            size_bytes: p.size_bytes(),
            log_start_offset: p.log_start_offset(),
            log_end_offset: p.log_end_offset(),
            high_watermark: p.high_watermark(),
            leader: p.is_leader(),
        })
        .collect();
    LocalReplicasResponse { broker_id: node.id(), replicas }
}

/// Offsets of the partitions this broker leads (-1 for the others).
pub fn local_offsets(node: &Node, req: &PartitionOffsetsRequest) -> PartitionOffsetsResponse {
    let kind = ResetKind::try_from(req.kind).unwrap_or(ResetKind::Latest);
    let offsets = req
        .partitions
        .iter()
        .map(|tp| {
            let offset = match node.replicas.leader(&tp.topic, tp.partition) {
                None => -1,
                Some(p) => match kind {
                    ResetKind::Earliest => p.log_start_offset(),
                    ResetKind::Timestamp => match p.offset_for_timestamp(req.timestamp) {
                        Ok(Some((offset, _))) => offset,
                        // No record at or after that time: the end, as Kafka answers.
                        Ok(None) => p.high_watermark(),
                        Err(_) => -1,
                    },
                    _ => p.high_watermark(),
                },
            };
            PartitionOffset { topic: tp.topic.clone(), partition: tp.partition, offset }
        })
        .collect();
    PartitionOffsetsResponse { offsets }
}

/// An admin client for broker `id` (from the metadata image), if it is registered.
pub fn client_for(node: &Node, id: i32) -> Option<AdminClient<Channel>> {
    let addr = node.catalog.image().broker(id)?.internal_addr.clone();
    let channel = node.metadata.channels.get(&addr).ok()?;
    Some(AdminClient::new(channel).max_decoding_message_size(64 << 20))
}

/// Every live broker's replicas (this broker's without a call). Brokers that do not answer
/// are left out.
pub async fn all_replicas(node: &Node) -> Vec<LocalReplicasResponse> {
    let ids: Vec<i32> = node.catalog.image().live_brokers().map(|b| b.id).collect();
    let calls = ids.into_iter().map(|id| async move {
        if id == node.id() {
            return Some(local_replicas(node));
        }
        let mut client = client_for(node, id)?;
        let call = client.local_replicas(LocalReplicasRequest {});
        match tokio::time::timeout(PEER_TIMEOUT, call).await {
            Ok(Ok(resp)) => Some(resp.into_inner()),
            _ => {
                tracing::debug!(broker = id, "no answer to LocalReplicas");
                None
            }
        }
    });
    futures::future::join_all(calls).await.into_iter().flatten().collect()
}

/// Offsets of `partitions`, asked of each one's leader.
pub async fn offsets(
    node: &Node,
    partitions: &[(String, i32)],
    kind: ResetKind,
    timestamp: i64,
) -> Vec<(String, i32, i64)> {
    let image = node.catalog.image();
    let mut by_leader: std::collections::BTreeMap<i32, Vec<TopicPartition>> = Default::default();
    for (topic, partition) in partitions {
        let leader = image.topic(topic).and_then(|t| t.partition(*partition)).map_or(-1, |p| p.leader);
        by_leader.entry(leader).or_default().push(TopicPartition { topic: topic.clone(), partition: *partition });
    }
    let calls = by_leader.into_iter().map(|(leader, partitions)| async move {
        let req = PartitionOffsetsRequest { partitions, kind: kind.into(), timestamp };
        let resp = if leader == node.id() {
            Some(local_offsets(node, &req))
        } else if leader < 0 {
            None
        } else {
            let mut client = client_for(node, leader)?;
            match tokio::time::timeout(PEER_TIMEOUT, client.partition_offsets(req.clone())).await {
                Ok(Ok(resp)) => Some(resp.into_inner()),
                _ => None,
            }
        };
        let offsets: Vec<(String, i32, i64)> = match resp {
            Some(r) => r.offsets.into_iter().map(|o| (o.topic, o.partition, o.offset)).collect(),
            None => req.partitions.into_iter().map(|tp| (tp.topic, tp.partition, -1)).collect(),
        };
        Some(offsets)
    });
    futures::future::join_all(calls).await.into_iter().flatten().flatten().collect()
}
