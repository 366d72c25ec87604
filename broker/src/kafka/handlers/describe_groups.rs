//! DescribeGroups: state, protocol, and each member with its metadata and assignment.

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse};

use crate::node::Node;

use super::str_bytes;

pub fn handle(node: &Node, req: DescribeGroupsRequest, version: i16) -> DescribeGroupsResponse {
    let mut resp = DescribeGroupsResponse::default();
    for id in req.groups {
        let mut g = DescribedGroup::default();
        g.group_id = id.clone();
        if let Err(e) = node.groups.check_coordinator(&id) {
            g.error_code = crate::kafka::error_code::group(&e);
            resp.groups.push(g);
            continue;
        }
        match node.groups.describe(&id) {
            // Kafka describes an unknown group as Dead with no error.
            None => g.group_state = str_bytes("Dead"),
            Some(d) => {
                g.group_state = str_bytes(d.state.name());
                g.protocol_type = str_bytes(&d.protocol_type);
                g.protocol_data = str_bytes(&d.protocol);
                g.members = d
                    .members
                    .into_iter()
                    .map(|m| {
                        let mut out = DescribedGroupMember::default();
                        out.member_id = str_bytes(&m.member_id);
                        if version >= 4 {
                            out.group_instance_id = m.group_instance_id.as_deref().map(str_bytes);
                        }
                        out.client_id = str_bytes(&m.client_id);
                        out.client_host = str_bytes(&m.client_host);
                        out.member_metadata = m.metadata;
                        out.member_assignment = m.assignment;
                        out
                    })
                    .collect();
            }
        }
        resp.groups.push(g);
    }
    resp
}
