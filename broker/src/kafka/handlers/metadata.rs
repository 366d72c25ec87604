//! Metadata: brokers, cluster id, controller, and the requested topics with their partitions.
//! Unknown topics are auto-created when both the request and `auto.create.topics.enable`
//! allow it, as in Kafka.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse};
use uuid::Uuid;

use crate::kafka::error_code;
use crate::metadata::catalog::validate_topic_name;
use crate::metadata::{CatalogError, TopicMetadata};
use crate::node::{Node, TopicOpError};

use super::{str_bytes, topic_name};

pub fn handle(node: &Node, req: MetadataRequest, version: i16) -> MetadataResponse {
    let mut resp = MetadataResponse::default();
    let mut broker = MetadataResponseBroker::default();
    broker.node_id = BrokerId(node.config.node_id);
    broker.host = str_bytes(&node.advertised_host);
    broker.port = node.advertised_port;
    broker.rack = node.config.rack.as_deref().map(str_bytes);
    resp.brokers = vec![broker];
    resp.cluster_id = Some(str_bytes(&node.identity.cluster_id));
    resp.controller_id = BrokerId(node.config.node_id);

    // v0: an empty list means every topic; v1+: null means every topic.
    let requested = match req.topics {
        None => None,
        Some(topics) if topics.is_empty() && version == 0 => None,
        Some(topics) => Some(topics),
    };
    let auto_create = node.config.auto_create_topics_enable && (version < 4 || req.allow_auto_topic_creation);
    resp.topics = match requested {
        None => node.catalog.list().iter().map(|t| describe(node, t)).collect(),
        Some(topics) => topics
            .into_iter()
            .map(|t| match t.name {
                Some(name) => by_name(node, &name, auto_create),
                None => by_id(node, t.topic_id),
            })
            .collect(),
    };
    resp
}

fn by_name(node: &Node, name: &str, auto_create: bool) -> MetadataResponseTopic {
    if let Some(topic) = node.catalog.get(name) {
        return describe(node, &topic);
    }
    let failed = |code: i16| {
        let mut t = MetadataResponseTopic::default();
        t.name = Some(topic_name(name));
        t.error_code = code;
        t
    };
    if let Err(e) = validate_topic_name(name) {
        return failed(error_code::catalog(&e));
    }
    // Internal topics are created by the broker itself, never by a client's Metadata request.
    if !auto_create || Node::is_internal(name) {
        return failed(ResponseError::UnknownTopicOrPartition.code());
    }
    match node.create_topic(name, node.config.num_partitions, Default::default()) {
        Ok(topic) => describe(node, &topic),
        // Another request created it first.
        Err(TopicOpError::Catalog(CatalogError::TopicAlreadyExists(_))) => match node.catalog.get(name) {
            Some(topic) => describe(node, &topic),
            None => failed(ResponseError::LeaderNotAvailable.code()),
        },
        Err(e) => {
            tracing::warn!(topic = %name, error = %e, "auto-creating topic failed");
            failed(error_code::topic_op(&e))
        }
    }
}

fn by_id(node: &Node, id: Uuid) -> MetadataResponseTopic {
    match node.catalog.get_by_id(id) {
        Some(topic) => describe(node, &topic),
        None => {
            let mut t = MetadataResponseTopic::default();
            t.topic_id = id;
            t.error_code = ResponseError::UnknownTopicId.code();
            t
        }
    }
}

fn describe(node: &Node, topic: &TopicMetadata) -> MetadataResponseTopic {
    let me = BrokerId(node.config.node_id);
    let mut t = MetadataResponseTopic::default();
    t.name = Some(topic_name(&topic.name));
    t.topic_id = topic.id;
    t.is_internal = Node::is_internal(&topic.name);
    t.partitions = (0..topic.partitions)
        .map(|index| {
            let mut p = MetadataResponsePartition::default();
            p.partition_index = index;
            match node.replicas.get(&topic.name, index) {
                Some(partition) => {
                    p.leader_id = me;
                    p.leader_epoch = partition.leader_epoch();
                    p.replica_nodes = vec![me];
                    p.isr_nodes = vec![me];
                }
                None => {
                    p.error_code = ResponseError::LeaderNotAvailable.code();
                    p.leader_id = BrokerId(-1);
                    p.replica_nodes = vec![me];
                }
            }
            p
        })
        .collect();
    t
}
