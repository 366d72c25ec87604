//! FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets`
//! partition (`hash(group) % partitions`), as the metadata image names it. The offsets topic
//! is created on first use, as in Kafka. A transactional id's (key type 1) is the leader of
//! its `__transaction_state` partition, created on first use too.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::group::OFFSETS_TOPIC;
use crate::kafka::error_code;
use crate::node::Node;
use crate::txn::TRANSACTION_STATE_TOPIC;

use super::str_bytes;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub async fn handle(node: &Node, req: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 { req.coordinator_keys.clone() } else { vec![req.key.clone()] };
    let mut results: Vec<Coordinator> = Vec::with_capacity(keys.len());
    for key in keys {
        results.push(coordinator(node, key, req.key_type).await);
    }
    let mut resp = FindCoordinatorResponse::default();
    if version >= 4 {
        resp.coordinators = results;
    } else if let Some(c) = results.into_iter().next() {
        resp.error_code = c.error_code;
        if version >= 1 {
            resp.error_message = c.error_message;
        }
        resp.node_id = c.node_id;
        resp.host = c.host;
        resp.port = c.port;
    }
    resp
}

async fn coordinator(node: &Node, key: StrBytes, key_type: i8) -> Coordinator {
    let group = key.to_string();
    let mut c = Coordinator::default();
    c.key = key;
    c.node_id = BrokerId(-1);
    c.port = -1;
    let fail = |mut c: Coordinator, code: i16, message: String| {
        c.error_code = code;
        c.error_message = Some(str_bytes(&message));
        c
    };
    let (topic, partition, created) = match key_type {
        KEY_TYPE_GROUP => (OFFSETS_TOPIC, node.groups.partition_of(&group), node.ensure_offsets_topic().await),
        KEY_TYPE_TRANSACTION => {
            (TRANSACTION_STATE_TOPIC, node.txn.partition_of(&group), node.ensure_transaction_state_topic().await)
        }
        other => {
            return fail(
                c,
                ResponseError::InvalidRequest.code(),
                format!("coordinator key type {other} is not supported"),
            )
        }
    };
    if let Err(e) = created {
        tracing::warn!(topic, error = %e, "creating an internal topic failed");
        return fail(c, ResponseError::CoordinatorNotAvailable.code(), error_code::message(&e));
    }
    let image = node.catalog.image();
    let leader = image
        .topic(topic)
        .and_then(|t| t.partition(partition))
        .map(|p| p.leader)
        .and_then(|l| image.broker(l).filter(|b| !b.fenced));
    let Some(leader) = leader else {
        return fail(
            c,
            ResponseError::CoordinatorNotAvailable.code(),
            format!("{topic} partition {partition} has no leader right now"),
        );
    };
    c.node_id = BrokerId(leader.id);
    c.host = str_bytes(&leader.kafka.host);
    c.port = leader.kafka.port;
    c
}
