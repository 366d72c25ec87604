//! InitProducerId for idempotent producers: always a new producer id with epoch 0, even when
//! the client names its current one (v3+, KIP-360) — Kafka does the same for producers
//! without a transactional id, since only a transaction coordinator could vouch for an epoch
//! bump. Transactional ids are refused until transactions are implemented.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use crate::node::Node;

pub async fn handle(node: &Node, req: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut resp = InitProducerIdResponse::default();
    resp.producer_id = ProducerId(-1);
    resp.producer_epoch = -1;
    if req.transactional_id.is_some() {
        tracing::debug!("InitProducerId with a transactional id refused: transactions are not supported yet");
        resp.error_code = ResponseError::TransactionalIdAuthorizationFailed.code();
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
