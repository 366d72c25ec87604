//! OffsetDelete: removes a group's committed offsets for topics it no longer consumes.

use kafka_protocol::messages::offset_delete_response::{OffsetDeleteResponsePartition, OffsetDeleteResponseTopic};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: OffsetDeleteRequest) -> OffsetDeleteResponse {
    let partitions: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.name.to_string(), p.partition_index)))
        .collect();
    let mut resp = OffsetDeleteResponse::default();
    match node.groups.delete_offsets(&req.group_id, &partitions) {
        Err(e) => resp.error_code = error_code::group(&e),
        Ok(results) => {
            let mut results = results.into_iter();
            for t in req.topics {
                let mut out = OffsetDeleteResponseTopic::default();
                out.name = t.name.clone();
                for p in t.partitions {
                    let mut r = OffsetDeleteResponsePartition::default();
                    r.partition_index = p.partition_index;
                    r.error_code =
                        results.next().and_then(|r| r.err()).as_ref().map_or(error_code::NONE, error_code::group);
                    out.partitions.push(r);
                }
                resp.topics.push(out);
            }
        }
    }
    resp
}
