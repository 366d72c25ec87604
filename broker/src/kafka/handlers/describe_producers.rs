//! DescribeProducers: the producers a partition's leader keeps state for (epoch, last
//! sequence and timestamp, the coordinator epoch of their last marker, the start offset of
//! their open transaction), as `kafka-transactions.sh describe-producers` and
//! `find-hanging` read them.

use kafka_protocol::messages::describe_producers_response::{PartitionResponse, ProducerState, TopicResponse};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};

use crate::kafka::error_code;
use crate::node::Node;

pub fn handle(node: &Node, req: DescribeProducersRequest) -> DescribeProducersResponse {
    let mut resp = DescribeProducersResponse::default();
    for topic in req.topics {
        let mut topic_resp = TopicResponse::default();
        for index in topic.partition_indexes {
            let mut p = PartitionResponse::default();
            p.partition_index = index;
            match node.leader_replica(&topic.name, index) {
                Ok(partition) => {
                    p.active_producers = partition
                        .active_producers()
                        .into_iter()
                        .map(|a| {
                            let mut s = ProducerState::default();
                            s.producer_id = ProducerId(a.producer.producer_id);
                            s.producer_epoch = i32::from(a.producer.epoch);
                            s.last_sequence = a.producer.last_sequence;
                            s.last_timestamp = a.producer.last_timestamp;
                            s.coordinator_epoch = a.coordinator_epoch;
                            s.current_txn_start_offset = a.open_since.unwrap_or(-1);
                            s
                        })
                        .collect();
                }
                Err(e) => p.error_code = error_code::lookup(e),
            }
            topic_resp.partitions.push(p);
        }
        topic_resp.name = topic.name;
        resp.topics.push(topic_resp);
    }
    resp
}
