//! ElectLeaders: preferred (type 0: the first replica, if live and in sync) or unclean
//! (type 1: any live replica of a partition without a leader), for the given partitions or
//! (null) all of them. The active controller decides.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use crate::kafka::error_code;
use crate::node::{Node, CONTROLLER_TIMEOUT};

use super::{str_bytes, topic_name};

pub async fn handle(node: &Node, req: ElectLeadersRequest, version: i16) -> ElectLeadersResponse {
    let mut resp = ElectLeadersResponse::default();
    // v0 has no election type: preferred.
    let unclean = match (version, req.election_type) {
        (0, _) | (_, 0) => false,
        (_, 1) => true,
        (_, other) => {
            resp.error_code = ResponseError::InvalidRequest.code();
            tracing::debug!(election_type = other, "ElectLeaders with an unknown election type");
            return resp;
        }
    };
    let partitions: Vec<(String, i32)> = req
        .topic_partitions
        .iter()
        .flatten()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.to_string(), *p)))
        .collect();
    let results = match node.metadata.client.elect_leaders(&partitions, unclean, CONTROLLER_TIMEOUT).await {
        Ok(r) => r,
        Err(e) => {
            resp.error_code = error_code::controller(&e);
            return resp;
        }
    };
    for (topic, partition, error) in results {
        let mut p = PartitionResult::default();
        p.partition_id = partition;
        if let Some((code, message)) = error {
            p.error_code = error_code::election(code, unclean);
            p.error_message = Some(str_bytes(&message));
        }
        match resp.replica_election_results.iter_mut().find(|r| r.topic.as_str() == topic) {
            Some(r) => r.partition_result.push(p),
            None => {
                let mut r = ReplicaElectionResult::default();
                r.topic = topic_name(&topic);
                r.partition_result.push(p);
                resp.replica_election_results.push(r);
            }
        }
    }
    resp
}
