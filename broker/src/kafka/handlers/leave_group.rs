//! LeaveGroup: one member (v0–2) or a batch of members by id or instance id (v3+).

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
    let members: Vec<(String, Option<String>)> = if version >= 3 {
        req.members
            .iter()
            .map(|m| (m.member_id.to_string(), m.group_instance_id.as_ref().map(|s| s.to_string())))
            .collect()
    } else {
        vec![(req.member_id.to_string(), None)]
    };
    let mut resp = LeaveGroupResponse::default();
    match node.groups.leave(&req.group_id, &members) {
        Err(e) => resp.error_code = error_code::group(&e),
        Ok(results) => {
            if version >= 3 {
                resp.members = req
                    .members
                    .iter()
                    .zip(&results)
                    .map(|(m, r)| {
                        let mut out = MemberResponse::default();
                        out.member_id = m.member_id.clone();
                        out.group_instance_id = m.group_instance_id.clone();
                        out.error_code = r.as_ref().err().map_or(error_code::NONE, error_code::group);
                        out
                    })
                    .collect();
            } else if let Some(Err(e)) = results.first() {
                resp.error_code = error_code::group(e);
            }
        }
    }
    resp
}
