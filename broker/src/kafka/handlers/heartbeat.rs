//! Heartbeat: keeps a member's session alive; REBALANCE_IN_PROGRESS tells it to rejoin.

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: HeartbeatRequest) -> HeartbeatResponse {
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let result = node.groups.heartbeat(&req.group_id, req.generation_id, &req.member_id, instance.as_deref());
    let mut resp = HeartbeatResponse::default();
    resp.error_code = result.err().as_ref().map_or(error_code::NONE, error_code::group);
    resp
}
