//! CreateTopics: names, partition counts (-1 = `num.partitions`), replication factor
//! (-1 = `default.replication.factor`; at most the number of live brokers), manual
//! assignments (only onto registered brokers), configs (validated; unknown keys refused),
//! `validate_only`. The active controller places and commits the topic.

use std::collections::{BTreeMap, HashMap};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{CreatableTopicConfigs, CreatableTopicResult};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse};

use crate::kafka::error_code;
use crate::metadata::catalog::MAX_PARTITIONS;
use crate::metadata::controller::TopicSpec;
use crate::metadata::topic_config;
use crate::node::Node;

use super::str_bytes;

/// DescribeConfigs/CreateTopics config source codes.
pub(crate) const SOURCE_DYNAMIC_TOPIC: i8 = 1;
pub(crate) const SOURCE_DEFAULT: i8 = 5;

pub async fn handle(node: &Node, req: CreateTopicsRequest, version: i16) -> CreateTopicsResponse {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for t in &req.topics {
        *counts.entry(t.name.to_string()).or_default() += 1;
    }
    let mut resp = CreateTopicsResponse::default();
    for topic in req.topics {
        let name = topic.name.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = topic.name.clone();
        result.num_partitions = -1;
        result.replication_factor = -1;
        if counts.get(&name).copied().unwrap_or(0) > 1 {
            fail(
                &mut result,
                ResponseError::InvalidRequest.code(),
                format!("topic {name} appears more than once in the request"),
                version,
            );
        } else {
            match plan(node, &topic, req.validate_only) {
                Err((code, message)) => fail(&mut result, code, message, version),
                Ok(spec) => match node.create_topic(spec.clone()).await {
                    Err(e) => fail(&mut result, error_code::topic_op(&e), error_code::message(&e), version),
                    Ok(created) => {
                        result.num_partitions = created.partitions;
                        result.replication_factor = created.replication_factor;
                        if let Some(id) = created.id {
                            result.topic_id = id;
                        }
                        if version >= 5 {
                            result.configs = Some(describe_configs(node, &spec.configs));
                        }
                    }
                },
            }
        }
        resp.topics.push(result);
    }
    resp
}

fn fail(result: &mut CreatableTopicResult, code: i16, message: String, version: i16) {
    tracing::debug!(topic = %&*result.name, %message, "CreateTopics refused");
    result.error_code = code;
    if version >= 1 {
        result.error_message = Some(str_bytes(&message));
    }
}

/// Resolves defaults and checks what the request alone decides; the controller checks the
/// rest (name, existence, brokers, placement).
fn plan(node: &Node, topic: &CreatableTopic, validate_only: bool) -> Result<TopicSpec, (i16, String)> {
    let name = topic.name.to_string();
    if Node::is_internal(&name) {
        return Err((
            ResponseError::InvalidRequest.code(),
            format!("{name} is an internal topic; the broker creates it"),
        ));
    }
    let (partitions, replication_factor, assignment) = if topic.assignments.is_empty() {
        let partitions = if topic.num_partitions == -1 { node.config.num_partitions } else { topic.num_partitions };
        let rf = if topic.replication_factor == -1 {
            node.config.default_replication_factor
        } else {
            topic.replication_factor
        };
        (partitions, rf, Vec::new())
    } else {
        if topic.num_partitions != -1 || topic.replication_factor != -1 {
            return Err((
                ResponseError::InvalidRequest.code(),
                "both manual assignments and num_partitions/replication_factor were given".into(),
            ));
        }
        let mut by_index = std::collections::BTreeMap::new();
        for a in &topic.assignments {
            if by_index.insert(a.partition_index, a.broker_ids.iter().map(|b| b.0).collect::<Vec<i32>>()).is_some() {
                return Err((
                    ResponseError::InvalidReplicaAssignment.code(),
                    format!("partition {} assigned twice", a.partition_index),
                ));
            }
        }
        let count = i32::try_from(by_index.len()).unwrap_or(i32::MAX);
        if by_index.keys().copied().ne(0..count) {
            return Err((
                ResponseError::InvalidReplicaAssignment.code(),
                "assigned partitions must be numbered 0..n".into(),
            ));
        }
        (count, -1, by_index.into_values().collect())
    };
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return Err((
            ResponseError::InvalidPartitions.code(),
            format!("number of partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}"),
        ));
    }
    let mut configs = BTreeMap::new();
    for c in &topic.configs {
        let key = c.name.to_string();
        let Some(value) = c.value.as_ref().map(|v| v.to_string()) else {
            return Err((
                ResponseError::InvalidConfig.code(),
                format!("configuration {key} of topic {name} has a null value"),
            ));
        };
        topic_config::validate_entry(&key, &value).map_err(|e| (ResponseError::InvalidConfig.code(), e.to_string()))?;
        configs.insert(key, value);
    }
    Ok(TopicSpec { name, partitions, replication_factor, configs, assignment, validate_only })
}

fn describe_configs(node: &Node, overrides: &BTreeMap<String, String>) -> Vec<CreatableTopicConfigs> {
    topic_config::describe(&node.config, overrides)
        .into_iter()
        .map(|d| {
            let mut c = CreatableTopicConfigs::default();
            c.name = str_bytes(d.name);
            c.value = Some(str_bytes(&d.value));
            c.read_only = false;
            c.config_source = if d.is_default { SOURCE_DEFAULT } else { SOURCE_DYNAMIC_TOPIC };
            c.is_sensitive = false;
            c
        })
        .collect()
}
