//! DeleteGroups: removes groups without members, with their committed offsets.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: DeleteGroupsRequest) -> DeleteGroupsResponse {
    let mut resp = DeleteGroupsResponse::default();
    for id in req.groups_names {
        let mut r = DeletableGroupResult::default();
        r.error_code = node.groups.delete_group(&id).err().as_ref().map_or(error_code::NONE, error_code::group);
        r.group_id = id;
        resp.results.push(r);
    }
    resp
}
