//! ListGroups: every group, optionally filtered by state (v4+) and type (v5+).

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};

use crate::node::Node;

use super::str_bytes;

pub fn handle(node: &Node, req: ListGroupsRequest, version: i16) -> ListGroupsResponse {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_lowercase()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_lowercase()).collect();
    let mut resp = ListGroupsResponse::default();
    for (id, protocol_type, state) in node.groups.list() {
        if !states.is_empty() && !states.contains(&state.name().to_lowercase()) {
            continue;
        }
        if !types.is_empty() && !types.iter().any(|t| t == "classic") {
            continue;
        }
        let mut g = ListedGroup::default();
        g.group_id = GroupId(str_bytes(&id));
        g.protocol_type = str_bytes(&protocol_type);
        if version >= 4 {
            g.group_state = str_bytes(state.name());
        }
        if version >= 5 {
            g.group_type = str_bytes("classic");
        }
        resp.groups.push(g);
    }
    resp
}
