//! AlterPartitionReassignments (KIP-455): start moving partitions to new replicas, or cancel
//! a move (null replicas). The active controller carries the moves out step by step.

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse};

use crate::kafka::error_code;
use crate::node::{Node, CONTROLLER_TIMEOUT};

use super::str_bytes;

pub async fn handle(node: &Node, req: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse {
    let mut targets = Vec::new();
    for t in &req.topics {
        for p in &t.partitions {
            let replicas = p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect::<Vec<i32>>());
            targets.push((t.name.to_string(), p.partition_index, replicas));
        }
    }
    let mut resp = AlterPartitionReassignmentsResponse::default();
    let results = match node.metadata.client.reassign(&targets, CONTROLLER_TIMEOUT).await {
        Ok(results) => results,
        Err(e) => {
            resp.error_code = error_code::controller(&e);
            resp.error_message = Some(str_bytes(&e.to_string()));
            return resp;
        }
    };
    for t in &req.topics {
        let mut topic = ReassignableTopicResponse::default();
        topic.name = t.name.clone();
        for p in &t.partitions {
            let mut out = ReassignablePartitionResponse::default();
            out.partition_index = p.partition_index;
            let found =
                results.iter().find(|(name, index, _)| name.as_str() == t.name.as_str() && *index == p.partition_index);
            if let Some((_, _, Some((code, message)))) = found {
                out.error_code = error_code::controller_code(*code);
                out.error_message = Some(str_bytes(message));
            }
            topic.partitions.push(out);
        }
        resp.responses.push(topic);
    }
    resp
}
