//! AddPartitionsToTxn, the client form (v0–3): the partitions a transactional producer is
//! about to write to join its transaction at the coordinator, before any record is sent to
//! them, so that the coordinator knows where its markers must go. Partitions of topics that
//! do not exist fail with UNKNOWN_TOPIC_OR_PARTITION and the others with
//! OPERATION_NOT_ATTEMPTED, as in Kafka; otherwise every partition gets the coordinator's
//! answer.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{AddPartitionsToTxnRequest, AddPartitionsToTxnResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub async fn handle(node: &Node, req: AddPartitionsToTxnRequest, version: i16) -> AddPartitionsToTxnResponse {
    let id = req.v3_and_below_transactional_id.to_string();
    let wanted: Vec<(String, i32)> = req
        .v3_and_below_topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.to_string(), *p)))
        .collect();
    let image = node.catalog.image();
    let exists = |(t, p): &(String, i32)| image.topic(t).is_some_and(|m| m.partition(*p).is_some());
    let codes: Vec<i16> = if wanted.iter().all(exists) {
        let added = node
            .txn
            .add_partitions(&id, req.v3_and_below_producer_id.0, req.v3_and_below_producer_epoch, &wanted)
            .await;
        let code = match added {
            Ok(()) => 0,
            Err(e) => {
                tracing::debug!(transactional_id = %id, error = %e, "AddPartitionsToTxn refused");
                error_code::txn(&e, version >= 2)
            }
        };
        vec![code; wanted.len()]
    } else {
        wanted
            .iter()
            .map(|tp| {
                if exists(tp) {
                    ResponseError::OperationNotAttempted.code()
                } else {
                    ResponseError::UnknownTopicOrPartition.code()
                }
            })
            .collect()
    };
    let mut resp = AddPartitionsToTxnResponse::default();
    let mut codes = codes.into_iter();
    for topic in &req.v3_and_below_topics {
        let mut t = AddPartitionsToTxnTopicResult::default();
        t.name = topic.name.clone();
        for p in &topic.partitions {
            let mut r = AddPartitionsToTxnPartitionResult::default();
            r.partition_index = *p;
            r.partition_error_code = codes.next().unwrap_or(0);
            t.results_by_partition.push(r);
        }
        resp.results_by_topic_v3_and_below.push(t);
    }
    resp
}
