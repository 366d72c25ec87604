//! DescribeQuorum (KIP-595/KIP-853): the metadata quorum as its raft leader sees it, asked of
//! the leader over the internal port. Strom's quorum is openraft, not KRaft, so the figures are
//! raft log positions: the leader epoch is the raft term, an "offset" is the index after the
//! last entry, the high watermark is what the leader has applied (all of it committed), voters
//! are `--voters`, observers are the learners. A member's last fetch is when it last answered
//! the leader's AppendEntries (openraft's leader pushes where KRaft's followers fetch), and
//! its last caught-up time follows Kafka's rule for fetches (`metadata::contacts`); the leader
//! reports itself as fetched and caught up now, as KRaft's does. The only partition is
//! `__cluster_metadata-0`, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node as QuorumNode, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;

use crate::kafka::error_code;
use crate::node::{Node, CONTROLLER_TIMEOUT};

use super::{str_bytes, topic_name};

pub const METADATA_TOPIC: &str = "__cluster_metadata";

pub async fn handle(node: &Node, req: DescribeQuorumRequest, version: i16) -> DescribeQuorumResponse {
    // Error messages and the nodes list exist from v2 on.
    let message = |m: String| (version >= 2).then(|| str_bytes(&m));
    let mut resp = DescribeQuorumResponse::default();
    let asks_metadata_partition = req.topics.len() == 1
        && req.topics[0].topic_name.0.as_str() == METADATA_TOPIC
        && req.topics[0].partitions.len() == 1
        && req.topics[0].partitions[0].partition_index == 0;
    if !asks_metadata_partition {
        // Kafka answers every partition asked for with UNKNOWN_TOPIC_OR_PARTITION.
        for t in req.topics {
            let mut topic = TopicData::default();
            topic.topic_name = t.topic_name;
            for p in t.partitions {
                let mut partition = PartitionData::default();
                partition.partition_index = p.partition_index;
                partition.error_code = ResponseError::UnknownTopicOrPartition.code();
                partition.error_message = message(format!("only {METADATA_TOPIC}-0 has a quorum"));
                topic.partitions.push(partition);
            }
            resp.topics.push(topic);
        }
        return resp;
    }
    let quorum = match node.metadata.client.describe_quorum(CONTROLLER_TIMEOUT).await {
        Ok(q) => q,
        Err(e) => {
            resp.error_code = error_code::controller(&e);
            resp.error_message = message(error_code::message(&e));
            return resp;
        }
    };
    let state = |id: i32| {
        let mut r = ReplicaState::default();
        r.replica_id = BrokerId(id);
        let member = quorum.replicas.iter().find(|m| m.id == id);
        // 0: a leader of an older version, which did not track them.
        let known = |ms: i64| if ms > 0 { ms } else { -1 };
        r.log_end_offset = member.map_or(-1, |m| m.log_end_offset);
        r.last_fetch_timestamp = member.map_or(-1, |m| known(m.last_fetch_timestamp));
        r.last_caught_up_timestamp = member.map_or(-1, |m| known(m.last_caught_up_timestamp));
        r
    };
    let mut partition = PartitionData::default();
    partition.partition_index = 0;
    partition.leader_id = BrokerId(quorum.leader_id);
    partition.leader_epoch = i32::try_from(quorum.current_term).unwrap_or(i32::MAX);
    partition.high_watermark = quorum.high_watermark;
    partition.current_voters = quorum.voters.iter().map(|id| state(*id)).collect();
    partition.observers = quorum.learners.iter().map(|id| state(*id)).collect();
    let mut topic = TopicData::default();
    topic.topic_name = topic_name(METADATA_TOPIC);
    topic.partitions.push(partition);
    resp.topics.push(topic);

    if version < 2 {
        return resp;
    }
    // v2: where the voters listen (the internal port carries the quorum's traffic).
    let image = node.catalog.image();
    for id in &quorum.voters {
        let Some(addr) = image.broker(*id).map(|b| b.internal_addr.clone()) else { continue };
        let Some((host, port)) = addr.rsplit_once(':') else { continue };
        let Ok(port) = port.parse::<u16>() else { continue };
        let mut listener = Listener::default();
        listener.name = StrBytes::from_static_str("INTERNAL");
        listener.host = str_bytes(host);
        listener.port = port;
        let mut n = QuorumNode::default();
        n.node_id = BrokerId(*id);
        n.listeners.push(listener);
        resp.nodes.push(n);
    }
    resp
}
