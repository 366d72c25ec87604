//! InitProducerId. Without a transactional id: always a new producer id with epoch 0, even
//! when the client names its current one (v3+, KIP-360) — Kafka does the same for producers
//! without a transactional id, since only a transaction coordinator could vouch for an epoch
//! bump. With one: the id's coordinator (this broker, if it leads the id's
//! `__transaction_state` partition) bumps its epoch, fencing earlier producers, and aborts a
//! transaction they left open (the client retries on CONCURRENT_TRANSACTIONS meanwhile).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::kafka::error_code;
use crate::node::Node;
use crate::txn::coordinator::CoordinatorError;

pub async fn handle(node: &Node, req: InitProducerIdRequest, version: i16) -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if let Some(id) = req.transactional_id.as_ref().map(|t| t.to_string()).filter(|t| !t.is_empty()) {
        match transactional(node, &id, &req, version).await {
            Ok((producer_id, epoch)) => {
                resp.producer_id = ProducerId(producer_id);
                resp.producer_epoch = epoch;
            }
            Err(code) => resp.error_code = code,
        }
        return resp;
    }
    match node.producer_ids.next_id().await {
        Ok(id) => {
            resp.producer_id = ProducerId(id);
            resp.producer_epoch = 0;
        }
        Err(e) => {
            tracing::warn!(error = %crate::error_chain::display(&e), "allocating a producer id failed");
            // Retriable for clients: the controller may be between elections.
            resp.error_code = ResponseError::CoordinatorNotAvailable.code();
        }
    }
    resp
}

async fn transactional(node: &Node, id: &str, req: &InitProducerIdRequest, version: i16) -> Result<(i64, i16), i16> {
    let expected = (version >= 3 && req.producer_id.0 >= 0).then_some((req.producer_id.0, req.producer_epoch));
    let fenced_code = version >= 4;
    let mut fresh = None;
    for _ in 0..2 {
        let result = node.txn.init_producer_id(id, req.transaction_timeout_ms, expected, fresh).await;
        match result {
            Err(CoordinatorError::NeedsProducerId) => match node.producer_ids.next_id().await {
                Ok(allocated) => fresh = Some(allocated),
                Err(e) => {
                    tracing::warn!(error = %crate::error_chain::display(&e), "allocating a producer id failed");
                    return Err(ResponseError::CoordinatorNotAvailable.code());
                }
            },
            Err(e) => {
                tracing::debug!(transactional_id = id, error = %e, "InitProducerId refused");
                return Err(error_code::txn(&e, fenced_code));
            }
            Ok(answer) => return Ok(answer),
        }
    }
    Err(ResponseError::ConcurrentTransactions.code())
}
