//! AddOffsetsToTxn: a transactional producer is about to commit a consumer group's offsets in
//! its transaction (`send_offsets_to_transaction`), so the group's `__consumer_offsets`
//! partition joins the transaction at the coordinator: the markers will go there too, and
//! settle the offsets (TxnOffsetCommit) with the transaction.

use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use crate::group::OFFSETS_TOPIC;
use crate::kafka::error_code;
use crate::node::Node;

pub async fn handle(node: &Node, req: AddOffsetsToTxnRequest, version: i16) -> AddOffsetsToTxnResponse {
    let id = req.transactional_id.to_string();
    let mut resp = AddOffsetsToTxnResponse::default();
    if let Err(e) = node.ensure_offsets_topic().await {
        tracing::warn!(error = %e, "creating __consumer_offsets failed");
        resp.error_code = kafka_protocol::error::ResponseError::CoordinatorNotAvailable.code();
        return resp;
    }
    let partition = (OFFSETS_TOPIC.to_string(), node.groups.partition_of(&req.group_id));
    let added = node.txn.add_partitions(&id, req.producer_id.0, req.producer_epoch, &[partition]).await;
    if let Err(e) = added {
        tracing::debug!(transactional_id = %id, error = %e, "AddOffsetsToTxn refused");
        resp.error_code = error_code::txn(&e, version >= 2);
    }
    resp
}
