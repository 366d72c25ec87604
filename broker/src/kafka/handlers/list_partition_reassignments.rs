//! ListPartitionReassignments: the partitions being moved, with their replicas and which are
//! being added or removed, from this broker's metadata.

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse};

use crate::node::Node;

use super::topic_name;

fn brokers(ids: &[i32]) -> Vec<BrokerId> {
    ids.iter().map(|b| BrokerId(*b)).collect()
}

pub fn handle(node: &Node, req: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse {
    let image = node.catalog.image();
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(topics) => topics.iter().any(|t| t.name.as_str() == topic && t.partition_indexes.contains(&partition)),
    };
    let mut resp = ListPartitionReassignmentsResponse::default();
    for topic in image.topics.values() {
        let mut ongoing = OngoingTopicReassignment::default();
        ongoing.name = topic_name(&topic.name);
        for (i, p) in topic.partitions.iter().enumerate() {
            let index = i32::try_from(i).unwrap_or(i32::MAX);
            if !p.is_reassigning() || !wanted(&topic.name, index) {
                continue;
            }
            let mut out = OngoingPartitionReassignment::default();
            out.partition_index = index;
            out.replicas = brokers(&p.replicas);
            out.adding_replicas = brokers(&p.adding);
            out.removing_replicas = brokers(&p.removing);
            ongoing.partitions.push(out);
        }
        if !ongoing.partitions.is_empty() {
            resp.topics.push(ongoing);
        }
    }
    resp
}
