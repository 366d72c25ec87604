//! CreatePartitions: grow a topic to a new total (never shrink), optionally `validate_only`;
//! the controller places the new partitions, or checks a manual assignment against the
//! registered brokers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use crate::kafka::error_code;
use crate::metadata::catalog::MAX_PARTITIONS;
use crate::node::Node;

use super::str_bytes;

pub async fn handle(node: &Node, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut r = CreatePartitionsTopicResult::default();
        r.name = topic.name.clone();
        let outcome = grow(node, &name, topic.count, topic.assignments.as_deref(), req.validate_only).await;
        if let Err((code, message)) = outcome {
            r.error_code = code;
            r.error_message = Some(str_bytes(&message));
        }
        resp.results.push(r);
    }
    resp
}

async fn grow(
    node: &Node,
    name: &str,
    count: i32,
    assignments: Option<&[CreatePartitionsAssignment]>,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    let current = node
        .catalog
        .get(name)
        .ok_or_else(|| (ResponseError::UnknownTopicOrPartition.code(), format!("topic {name} does not exist")))?;
    if count <= current.partition_count() {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("topic {name} has {} partitions; the new count {count} must be larger", current.partition_count()),
        ));
    }
    if count > MAX_PARTITIONS {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("at most {MAX_PARTITIONS} partitions per topic"),
        ));
    }
    let assignment: Vec<Vec<i32>> =
        assignments.unwrap_or_default().iter().map(|a| a.broker_ids.iter().map(|b| b.0).collect()).collect();
    node.increase_partitions(name, count, &assignment, validate_only)
        .await
        .map_err(|e| (error_code::topic_op(&e), error_code::message(&e)))
}
