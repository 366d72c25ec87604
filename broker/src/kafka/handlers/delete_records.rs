//! DeleteRecords: move partitions' log start offsets forward (offset -1 = the high
//! watermark); whole segments below the new start are deleted.

use kafka_protocol::messages::delete_records_response::{DeleteRecordsPartitionResult, DeleteRecordsTopicResult};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut resp = DeleteRecordsResponse::default();
    for topic in req.topics {
        let mut t = DeleteRecordsTopicResult::default();
        t.name = topic.name.clone();
        for part in topic.partitions {
            let mut p = DeleteRecordsPartitionResult::default();
            p.partition_index = part.partition_index;
            p.low_watermark = -1;
            match node.leader_replica(&topic.name, part.partition_index) {
                Err(e) => p.error_code = error_code::lookup(e),
                Ok(partition) => match partition.delete_records(part.offset) {
                    Ok(low) => {
                        tracing::info!(topic = %&*topic.name, partition = part.partition_index, log_start_offset = low, "deleted records");
                        p.low_watermark = low;
                    }
                    Err(e) => {
                        tracing::debug!(error = %error_code::message(&e), "DeleteRecords refused");
                        p.error_code = error_code::partition(&e);
                    }
                },
            }
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    resp
}
