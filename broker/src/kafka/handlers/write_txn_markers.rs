//! WriteTxnMarkers on the Kafka port: what Kafka's admin client sends to a partition's leader
//! to abort a hanging transaction (`kafka-transactions.sh abort`, after `find-hanging`). The
//! markers are written as the coordinators' are over the internal port
//! ([`crate::replication::markers`]): appended, replicated to the in-sync replicas, and on
//! `__consumer_offsets` settling the transaction's offsets.

use std::collections::BTreeMap;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ProducerId, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;
use strom_proto::replication::{MarkerError, MarkerPartition, TxnMarker, WriteMarkersRequest};

use crate::node::Node;
use crate::replication::markers::{write_markers, MARKER_REPLICATION_TIMEOUT};

use super::topic_name;

/// Kafka's code for a marker the leader refused.
fn code(error: MarkerError) -> i16 {
    match error {
        MarkerError::MarkerNone => 0,
        MarkerError::MarkerUnknownPartition => ResponseError::UnknownTopicOrPartition.code(),
        MarkerError::MarkerNotLeader => ResponseError::NotLeaderOrFollower.code(),
        MarkerError::MarkerInvalidProducerEpoch => ResponseError::InvalidProducerEpoch.code(),
        MarkerError::MarkerCoordinatorFenced => ResponseError::TransactionCoordinatorFenced.code(),
        MarkerError::MarkerNotReplicated => ResponseError::NotEnoughReplicas.code(),
        MarkerError::MarkerStorageError => ResponseError::KafkaStorageError.code(),
    }
}

pub async fn handle(node: &Node, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    let markers = req
        .markers
        .iter()
        .map(|m| TxnMarker {
            producer_id: m.producer_id.0,
            producer_epoch: i32::from(m.producer_epoch),
            commit: m.transaction_result,
            coordinator_epoch: m.coordinator_epoch,
            partitions: m
                .topics
                .iter()
                .flat_map(|t| {
                    t.partition_indexes
                        .iter()
                        .map(|&partition| MarkerPartition { topic: t.name.to_string(), partition })
                })
                .collect(),
        })
        .collect();
    let written =
        write_markers(&node.replicas, Some(&node.groups), &WriteMarkersRequest { markers }, MARKER_REPLICATION_TIMEOUT)
            .await;
    let mut resp = WriteTxnMarkersResponse::default();
    for result in written.results {
        let mut topics: BTreeMap<String, Vec<WritableTxnMarkerPartitionResult>> = BTreeMap::new();
        for p in result.partitions {
            let mut r = WritableTxnMarkerPartitionResult::default();
            r.partition_index = p.partition;
            r.error_code = code(MarkerError::try_from(p.error).unwrap_or(MarkerError::MarkerStorageError));
            topics.entry(p.topic).or_default().push(r);
        }
        let mut marker = WritableTxnMarkerResult::default();
        marker.producer_id = ProducerId(result.producer_id);
        marker.topics = topics
            .into_iter()
            .map(|(topic, partitions)| {
                let mut t = WritableTxnMarkerTopicResult::default();
                t.name = topic_name(&topic);
                t.partitions = partitions;
                t
            })
            .collect();
        resp.markers.push(marker);
    }
    resp
}
