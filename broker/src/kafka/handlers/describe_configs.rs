//! DescribeConfigs for topics (every supported key, its value, and whether the topic overrides
//! it) and for this broker (its static configuration, read-only).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};

use crate::config::BrokerConfig;
use crate::metadata::topic_config::{self, ConfigType};
use crate::node::Node;

use super::create_topics::{SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC};
use super::{broker_configs, str_bytes, RESOURCE_BROKER, RESOURCE_TOPIC};

const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DYNAMIC_BROKER: i8 = 2;

struct Entry {
    name: String,
    value: String,
    read_only: bool,
    source: i8,
    kind: ConfigType,
    doc: &'static str,
}

pub fn handle(node: &Node, req: DescribeConfigsRequest, version: i16) -> DescribeConfigsResponse {
    let mut resp = DescribeConfigsResponse::default();
    for resource in req.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let name = resource.resource_name.to_string();
        let entries: Result<Vec<Entry>, (i16, String)> = match resource.resource_type {
            RESOURCE_TOPIC => match node.catalog.get(&name) {
                Some(topic) => Ok(topic_config::describe(&node.config, &topic.configs)
                    .into_iter()
                    .map(|d| Entry {
                        name: d.name.to_string(),
                        value: d.value,
                        read_only: false,
                        source: if d.is_default { SOURCE_DEFAULT } else { SOURCE_DYNAMIC_TOPIC },
                        kind: d.kind,
                        doc: d.doc,
                    })
                    .collect()),
                None => Err((ResponseError::UnknownTopicOrPartition.code(), format!("topic {name} does not exist"))),
            },
            RESOURCE_BROKER => {
                if name.is_empty() || name == node.config.node_id.to_string() {
                    let mut entries = broker_entries(&node.config);
                    if let Some(rate) = node.catalog.image().replication_throttle {
                        for key in [broker_configs::LEADER_RATE, broker_configs::FOLLOWER_RATE] {
                            entries.push(Entry {
                                name: key.to_string(),
                                value: rate.to_string(),
                                read_only: false,
                                source: SOURCE_DYNAMIC_BROKER,
                                kind: ConfigType::Long,
                                doc: "The cluster-wide replication throttle for replicas being added (bytes/s).",
                            });
                        }
                    }
                    Ok(entries)
                } else {
                    Err((
                        ResponseError::InvalidRequest.code(),
                        format!("broker {name} is not this broker ({})", node.config.node_id),
                    ))
                }
            }
            other => Err((ResponseError::InvalidRequest.code(), format!("resource type {other} is not supported"))),
        };
        match entries {
            Ok(entries) => {
                let wanted = resource
                    .configuration_keys
                    .as_ref()
                    .map(|keys| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>());
                result.configs = entries
                    .into_iter()
                    .filter(|e| wanted.as_ref().is_none_or(|w| w.contains(&e.name)))
                    .map(|e| {
                        let mut c = DescribeConfigsResourceResult::default();
                        c.name = str_bytes(&e.name);
                        c.value = Some(str_bytes(&e.value));
                        c.read_only = e.read_only;
                        c.is_sensitive = false;
                        if version >= 1 {
                            c.config_source = e.source;
                        }
                        if version >= 3 {
                            c.config_type = e.kind.code();
                            if req.include_documentation {
                                c.documentation = Some(str_bytes(e.doc));
                            }
                        }
                        c
                    })
                    .collect();
            }
            Err((code, message)) => {
                result.error_code = code;
                result.error_message = Some(str_bytes(&message));
            }
        }
        resp.results.push(result);
    }
    resp
}

/// The broker's own settings under Kafka's names.
fn broker_entries(c: &BrokerConfig) -> Vec<Entry> {
    let entry = |name: &str, value: String, kind: ConfigType| Entry {
        name: name.to_string(),
        value,
        read_only: true,
        source: SOURCE_STATIC_BROKER,
        kind,
        doc: "",
    };
    vec![
        entry("node.id", c.node_id.to_string(), ConfigType::Int),
        entry("log.dirs", c.data_dir.display().to_string(), ConfigType::String),
        entry("num.partitions", c.num_partitions.to_string(), ConfigType::Int),
        entry("default.replication.factor", c.default_replication_factor.to_string(), ConfigType::Int),
        entry("auto.create.topics.enable", c.auto_create_topics_enable.to_string(), ConfigType::Boolean),
        entry("log.segment.bytes", c.log_segment_bytes.to_string(), ConfigType::Int),
        entry("log.roll.ms", c.log_roll_ms.to_string(), ConfigType::Long),
        entry("log.retention.ms", c.log_retention_ms.to_string(), ConfigType::Long),
        entry("log.retention.bytes", c.log_retention_bytes.to_string(), ConfigType::Long),
        entry("log.retention.check.interval.ms", c.log_retention_check_interval_ms.to_string(), ConfigType::Long),
        entry("log.flush.interval.messages", c.log_flush_interval_messages.to_string(), ConfigType::Long),
        entry("log.flush.interval.ms", c.log_flush_interval_ms.to_string(), ConfigType::Long),
        entry("min.insync.replicas", c.min_insync_replicas.to_string(), ConfigType::Int),
        entry("message.max.bytes", c.message_max_bytes.to_string(), ConfigType::Int),
        entry("log.message.timestamp.type", c.log_message_timestamp_type.clone(), ConfigType::String),
        entry("socket.request.max.bytes", c.socket_request_max_bytes.to_string(), ConfigType::Int),
        entry("queued.max.request.bytes", c.queued_max_request_bytes.to_string(), ConfigType::Long),
        entry("max.connections", c.max_connections.to_string(), ConfigType::Int),
        entry("socket.send.buffer.bytes", c.socket_send_buffer_bytes.to_string(), ConfigType::Int),
    ]
}
