//! FindCoordinator: a group's coordinator is the leader of its `__consumer_offsets`
//! partition (`hash(group) % partitions`), as the metadata image names it. The offsets topic
//! is created on first use, as in Kafka. Transaction coordinators (key type 1) do not exist yet.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::group::OFFSETS_TOPIC;
use crate::kafka::error_code;
use crate::node::Node;

use super::str_bytes;

const KEY_TYPE_GROUP: i8 = 0;

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
    if key_type != KEY_TYPE_GROUP {
        return fail(
            c,
            ResponseError::InvalidRequest.code(),
            format!("coordinator key type {key_type} is not supported (transactions are not implemented yet)"),
        );
    }
    if let Err(e) = node.ensure_offsets_topic().await {
        tracing::warn!(error = %e, "creating __consumer_offsets failed");
        return fail(c, ResponseError::CoordinatorNotAvailable.code(), error_code::message(&e));
    }
    let image = node.catalog.image();
    let partition = node.groups.partition_of(&group);
    let leader = image
        .topic(OFFSETS_TOPIC)
        .and_then(|t| t.partition(partition))
        .map(|p| p.leader)
        .and_then(|l| image.broker(l).filter(|b| !b.fenced));
    let Some(leader) = leader else {
        return fail(
            c,
            ResponseError::CoordinatorNotAvailable.code(),
            format!("__consumer_offsets partition {partition} has no leader right now"),
        );
    };
    c.node_id = BrokerId(leader.id);
    c.host = str_bytes(&leader.kafka.host);
    c.port = leader.kafka.port;
    c
}
