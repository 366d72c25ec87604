//! ListOffsets: earliest (-2), latest (-1), max timestamp (-3), earliest local (-4), or the
//! first offset whose record timestamp is at or after a given time.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_offsets_response::{ListOffsetsPartitionResponse, ListOffsetsTopicResponse};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse};

use crate::kafka::error_code;
use crate::node::Node;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;

pub fn handle(node: &Node, req: ListOffsetsRequest, version: i16) -> ListOffsetsResponse {
    let mut resp = ListOffsetsResponse::default();
    let read_committed = version >= 2 && req.isolation_level == 1;
    for topic in req.topics {
        let mut t = ListOffsetsTopicResponse::default();
        t.name = topic.name.clone();
        for part in topic.partitions {
            let mut p = ListOffsetsPartitionResponse::default();
            p.partition_index = part.partition_index;
            p.timestamp = -1;
            p.offset = -1;
            p.leader_epoch = -1;
            match node.leader_replica(&topic.name, part.partition_index) {
                Err(e) => p.error_code = error_code::lookup(e),
                Ok(partition) => {
                    // The leader epoch field exists from v4; older versions must leave it unset.
                    if version >= 4 {
                        p.leader_epoch = partition.leader_epoch();
                    }
                    match part.timestamp {
                        // A new leader whose high watermark is still behind its epoch's start
                        // (KIP-207, v5+): retriable, so no client sees the offset go backwards.
                        LATEST if version >= 5 && !partition.high_watermark_established() => {
                            p.error_code = ResponseError::OffsetNotAvailable.code();
                        }
                        // read_committed consumers (v2+) start from the last stable offset.
                        LATEST if read_committed => p.offset = partition.last_stable_offset(),
                        LATEST => p.offset = partition.high_watermark(),
                        EARLIEST | EARLIEST_LOCAL => p.offset = partition.log_start_offset(),
                        MAX_TIMESTAMP => {
                            if let Some((ts, offset)) = partition.max_timestamp() {
                                p.timestamp = ts;
                                p.offset = offset;
                            }
                        }
                        ts if ts >= 0 => match partition.offset_for_timestamp(ts) {
                            Ok(Some((offset, found_ts))) => {
                                p.offset = offset;
                                p.timestamp = found_ts;
                            }
                            Ok(None) => {}
                            Err(e) => p.error_code = error_code::partition(&e),
                        },
                        other => {
                            tracing::debug!(timestamp = other, "ListOffsets with an unknown special timestamp");
                            p.error_code = ResponseError::InvalidRequest.code();
                        }
                    }
                }
            }
            t.partitions.push(p);
        }
        resp.topics.push(t);
    }
    resp
}
