//! CreatePartitions: grow a topic to a new total (never shrink), optionally `validate_only`;
//! manual assignments may only name existing brokers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse};

use crate::kafka::error_code;
use crate::metadata::catalog::MAX_PARTITIONS;
use crate::node::Node;

use super::str_bytes;

pub fn handle(node: &Node, req: CreatePartitionsRequest) -> CreatePartitionsResponse {
    let mut resp = CreatePartitionsResponse::default();
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut r = CreatePartitionsTopicResult::default();
        r.name = topic.name.clone();
        let outcome: Result<(), (i16, String)> = (|| {
            let current = node.catalog.get(&name).ok_or_else(|| {
                (ResponseError::UnknownTopicOrPartition.code(), format!("topic {name} does not exist"))
            })?;
            if topic.count <= current.partitions {
                return Err((
                    ResponseError::InvalidPartitions.code(),
                    format!(
                        "topic {name} has {} partitions; the new count {} must be larger",
                        current.partitions, topic.count
                    ),
                ));
            }
            if topic.count > MAX_PARTITIONS {
                return Err((
                    ResponseError::InvalidPartitions.code(),
                    format!("at most {MAX_PARTITIONS} partitions per topic"),
                ));
            }
            if let Some(assignments) = &topic.assignments {
                let added = usize::try_from(topic.count - current.partitions).unwrap_or(0);
                if assignments.len() != added {
                    return Err((
                        ResponseError::InvalidReplicaAssignment.code(),
                        format!("{} assignments given for {added} new partitions", assignments.len()),
                    ));
                }
                let me = node.config.node_id;
                if assignments.iter().any(|a| a.broker_ids.len() != 1 || a.broker_ids[0].0 != me) {
                    return Err((
                        ResponseError::InvalidReplicaAssignment.code(),
                        format!(
                            "new partitions may only be assigned to existing brokers (this cluster has broker {me})"
                        ),
                    ));
                }
            }
            if req.validate_only {
                return Ok(());
            }
            node.increase_partitions(&name, topic.count)
                .map(|_| ())
                .map_err(|e| (error_code::topic_op(&e), error_code::message(&e)))
        })();
        if let Err((code, message)) = outcome {
            r.error_code = code;
            r.error_message = Some(str_bytes(&message));
        }
        resp.results.push(r);
    }
    resp
}
