//! JoinGroup: register or rejoin a member; the response waits until the rebalance completes.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};

use crate::group::state::JoinOutcome;
use crate::group::{GroupError, JoinRequest, Reply};
use crate::kafka::error_code;
use crate::kafka::router::ClientInfo;
use crate::node::Node;

use super::str_bytes;

pub async fn handle(node: &Node, client: &ClientInfo, req: JoinGroupRequest, version: i16) -> JoinGroupResponse {
    let join = JoinRequest {
        group_id: req.group_id.to_string(),
        member_id: req.member_id.to_string(),
        group_instance_id: if version >= 5 { req.group_instance_id.as_ref().map(|s| s.to_string()) } else { None },
        client_id: client.client_id.clone(),
        client_host: client.host.clone(),
        session_timeout_ms: req.session_timeout_ms,
        rebalance_timeout_ms: if version >= 1 { req.rebalance_timeout_ms } else { req.session_timeout_ms },
        protocol_type: req.protocol_type.to_string(),
        protocols: req.protocols.iter().map(|p| (p.name.to_string(), p.metadata.clone())).collect(),
        require_known_member_id: version >= 4,
    };
    let member_id = join.member_id.clone();
    let outcome = match node.groups.join(join) {
        Reply::Now(o) => o,
        Reply::Wait(rx) => rx.await.unwrap_or_else(|_| JoinOutcome {
            error: Some(GroupError::CoordinatorNotAvailable),
            generation: -1,
            member_id,
            ..JoinOutcome::default()
        }),
    };
    let mut resp = JoinGroupResponse::default();
    resp.error_code = error_code::group_opt(&outcome.error);
    resp.generation_id = outcome.generation;
    if version >= 7 {
        resp.protocol_type = outcome.protocol_type.as_deref().map(str_bytes);
    }
    resp.protocol_name = outcome.protocol_name.as_deref().map(str_bytes);
    if version < 7 && resp.protocol_name.is_none() {
        resp.protocol_name = Some(str_bytes(""));
    }
    resp.leader = str_bytes(&outcome.leader);
    resp.member_id = str_bytes(&outcome.member_id);
    resp.members = outcome
        .members
        .into_iter()
        .map(|(id, instance, metadata)| {
            let mut m = JoinGroupResponseMember::default();
            m.member_id = str_bytes(&id);
            if version >= 5 {
                m.group_instance_id = instance.as_deref().map(str_bytes);
            }
            m.metadata = metadata;
            m
        })
        .collect();
    resp
}
