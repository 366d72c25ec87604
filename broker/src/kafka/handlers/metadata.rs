//! Metadata: live brokers, cluster id, the active controller, and the requested topics with
//! each partition's leader, leader epoch, replicas and ISR — all from this broker's metadata
//! image, so clients route to leaders by themselves. Unknown topics are auto-created (through
//! the controller) when both the request and `auto.create.topics.enable` allow it, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use crate::kafka::error_code;
use crate::metadata::catalog::validate_topic_name;
use crate::metadata::controller::TopicSpec;
use crate::metadata::{MetadataImage, TopicMetadata};
use crate::node::Node;

use super::{str_bytes, topic_name};

pub async fn handle(node: &Node, req: MetadataRequest, version: i16) -> MetadataResponse {
    // v0: an empty list means every topic; v1+: null means every topic.
    let requested = match req.topics {
        None => None,
        Some(topics) if topics.is_empty() && version == 0 => None,
        Some(topics) => Some(topics),
    };
    let auto_create = node.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
    let topics = match requested {
        None => {
            let image = node.catalog.image();
            image.topics.values().map(|t| describe(&image, t)).collect()
        }
        Some(topics) => {
            let mut out = Vec::with_capacity(topics.len());
            for t in topics {
                out.push(match t.name {
                    Some(name) => by_name(node, &name, auto_create).await,
                    None => by_id(node, t.topic_id),
                });
            }
            out
        }
    };
    // The image after any auto-creation, so brokers and topics agree.
    let image = node.catalog.image();
    let mut resp = MetadataResponse::default();
    resp.brokers = brokers(&image);
    resp.cluster_id = image.cluster_id.as_deref().map(str_bytes);
    resp.controller_id = BrokerId(node.controller_id());
    resp.topics = topics;
    resp
}

/// The brokers clients may connect to: registered and not fenced.
fn brokers(image: &MetadataImage) -> Vec<MetadataResponseBroker> {
    image
        .live_brokers()
        .map(|b| {
            let mut out = MetadataResponseBroker::default();
            out.node_id = BrokerId(b.id);
            out.host = str_bytes(&b.kafka.host);
            out.port = b.kafka.port;
            out.rack = b.rack.as_deref().map(str_bytes);
            out
        })
        .collect()
}

fn failed(name: &str, code: i16) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(topic_name(name));
    t.error_code = code;
    t
}

async fn by_name(node: &Node, name: &str, auto_create: bool) -> MetadataResponseTopic {
    if let Some(topic) = node.catalog.get(name) {
        return describe(&node.catalog.image(), &topic);
    }
    if let Err(e) = validate_topic_name(name) {
        return failed(name, error_code::catalog(&e));
    }
    // Internal topics are created by the broker itself, never by a client's Metadata request.
    if !auto_create || Node::is_internal(name) {
        return failed(name, ResponseError::UnknownTopicOrPartition.code());
    }
    let spec = TopicSpec {
        name: name.to_string(),
        partitions: node.config.num_partitions,
        replication_factor: node.config.default_replication_factor,
        configs: Default::default(),
        assignment: Vec::new(),
        validate_only: false,
    };
    match node.create_topic(spec).await {
        Ok(_) => {}
        // Another request created it first.
        Err(e) if e.is_already_exists() => {}
        Err(e) => {
            tracing::warn!(topic = %name, error = %e, "auto-creating topic failed");
            return failed(name, error_code::topic_op(&e));
        }
    }
    match node.catalog.get(name) {
        Some(topic) => describe(&node.catalog.image(), &topic),
        None => failed(name, ResponseError::LeaderNotAvailable.code()),
    }
}

fn by_id(node: &Node, id: Uuid) -> MetadataResponseTopic {
    match node.catalog.get_by_id(id) {
        Some(topic) => describe(&node.catalog.image(), &topic),
        None => {
            let mut t = MetadataResponseTopic::default();
            t.topic_id = id;
            t.error_code = ResponseError::UnknownTopicId.code();
            t
        }
    }
}

fn describe(image: &MetadataImage, topic: &TopicMetadata) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(topic_name(&topic.name));
    t.topic_id = topic.id;
    t.is_internal = Node::is_internal(&topic.name);
    t.partitions = topic
        .partitions
        .iter()
        .enumerate()
        .map(|(index, reg)| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = i32::try_from(index).unwrap_or(i32::MAX);
            p.leader_epoch = reg.leader_epoch;
            p.replica_nodes = reg.replicas.iter().map(|b| BrokerId(*b)).collect();
            p.isr_nodes = reg.isr.iter().map(|b| BrokerId(*b)).collect();
            p.offline_replicas = reg.replicas.iter().filter(|b| !image.is_live(**b)).map(|b| BrokerId(*b)).collect();
            if reg.leader >= 0 && image.is_live(reg.leader) {
                p.leader_id = BrokerId(reg.leader);
            } else {
                p.leader_id = BrokerId(-1);
                p.error_code = ResponseError::LeaderNotAvailable.code();
            }
            p
        })
        .collect();
    t
}
