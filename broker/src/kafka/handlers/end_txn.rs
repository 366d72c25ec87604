//! EndTxn: commit or abort the producer's open transaction. The coordinator answers once the
//! decision is durable in `__transaction_state`; the markers that make it visible (or hide
//! it) on every partition follow, and the next transaction of the id waits for them.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub async fn handle(node: &Node, req: EndTxnRequest, version: i16) -> EndTxnResponse {
    let id = req.transactional_id.to_string();
    let mut resp = EndTxnResponse::default();
    resp.producer_id = req.producer_id;
    resp.producer_epoch = req.producer_epoch;
    if let Err(e) = node.txn.end_txn(&id, req.producer_id.0, req.producer_epoch, req.committed).await {
        tracing::debug!(transactional_id = %id, error = %e, "EndTxn refused");
        resp.error_code = error_code::txn(&e, version >= 2);
    }
    resp
}
