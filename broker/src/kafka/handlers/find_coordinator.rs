//! FindCoordinator: this broker coordinates every group (it leads every `__consumer_offsets`
//! partition on a single node). The offsets topic is created on first use, as in Kafka.
//! Transaction coordinators (key type 1) do not exist yet.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::error_code;
use crate::node::Node;

use super::str_bytes;

const KEY_TYPE_GROUP: i8 = 0;

pub fn handle(node: &Node, req: FindCoordinatorRequest, version: i16) -> FindCoordinatorResponse {
    let keys: Vec<StrBytes> = if version >= 4 { req.coordinator_keys.clone() } else { vec![req.key.clone()] };
    let results: Vec<Coordinator> = keys.into_iter().map(|key| coordinator(node, key, req.key_type)).collect();
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

fn coordinator(node: &Node, key: StrBytes, key_type: i8) -> Coordinator {
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
    if let Err(e) = node.ensure_offsets_topic() {
        tracing::error!(error = %e, "creating __consumer_offsets failed");
        return fail(c, ResponseError::CoordinatorNotAvailable.code(), error_code::message(&e));
    }
    if !node.groups.hosts_partition_of(&group) {
        // Another request is still creating the offsets topic: the client asks again.
        return fail(c, ResponseError::CoordinatorNotAvailable.code(), "__consumer_offsets is being created".into());
    }
    c.node_id = BrokerId(node.config.node_id);
    c.host = str_bytes(&node.advertised_host);
    c.port = node.advertised_port;
    c
}
