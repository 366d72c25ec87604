//! SyncGroup: the leader hands in the assignment; every member waits for its share.

use kafka_protocol::messages::{SyncGroupRequest, SyncGroupResponse};

use crate::group::state::SyncOutcome;
use crate::group::{GroupError, Reply};
use crate::kafka::error_code;
use crate::node::Node;

use super::str_bytes;

pub async fn handle(node: &Node, req: SyncGroupRequest, version: i16) -> SyncGroupResponse {
    let assignments = req.assignments.iter().map(|a| (a.member_id.to_string(), a.assignment.clone())).collect();
    let outcome = match node.groups.sync(&req.group_id, req.generation_id, &req.member_id, assignments) {
        Reply::Now(o) => o,
        Reply::Wait(rx) => rx.await.unwrap_or_else(|_| SyncOutcome {
            error: Some(GroupError::CoordinatorNotAvailable),
            ..SyncOutcome::default()
        }),
    };
    let mut resp = SyncGroupResponse::default();
    resp.error_code = error_code::group_opt(&outcome.error);
    if version >= 5 && outcome.error.is_none() {
        resp.protocol_type = outcome.protocol_type.as_deref().map(str_bytes);
        resp.protocol_name = outcome.protocol_name.as_deref().map(str_bytes);
    }
    resp.assignment = outcome.assignment;
    resp
}
