//! IncrementalAlterConfigs: SET (0), DELETE (1), APPEND (2) and SUBTRACT (3) on a topic's
//! overrides; APPEND/SUBTRACT only for list-valued keys (cleanup.policy). On a broker, only
//! the replication throttle rates ([`broker_configs`]).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse};

use crate::metadata::topic_config;
use crate::node::Node;

use super::alter_configs::apply_topic_configs;
use super::broker_configs;
use super::{str_bytes, RESOURCE_BROKER, RESOURCE_TOPIC};

const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;
const LIST_KEYS: &[&str] = &["cleanup.policy"];

pub async fn handle(node: &Node, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse {
    let mut resp = IncrementalAlterConfigsResponse::default();
    for resource in req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = resource.resource_type;
        r.resource_name = resource.resource_name.clone();
        let name = resource.resource_name.to_string();
        let outcome: Result<(), (i16, String)> = match resource.resource_type {
            RESOURCE_TOPIC => match node.catalog.get(&name) {
                None => Err((ResponseError::UnknownTopicOrPartition.code(), format!("topic {name} does not exist"))),
                Some(topic) => {
                    let mut configs = topic.configs.clone();
                    let mut result = Ok(());
                    for c in &resource.configs {
                        let key = c.name.to_string();
                        let value = c.value.as_ref().map(|v| v.to_string());
                        if let Err(e) = apply_op(node, &mut configs, &key, c.config_operation, value) {
                            result = Err(e);
                            break;
                        }
                    }
                    match result {
                        Ok(()) => apply_topic_configs(node, &name, configs, req.validate_only).await,
                        Err(e) => Err(e),
                    }
                }
            },
            RESOURCE_BROKER => {
                let values: Vec<Option<String>> =
                    resource.configs.iter().map(|c| c.value.as_ref().map(|v| v.to_string())).collect();
                let keys: Vec<String> = resource.configs.iter().map(|c| c.name.to_string()).collect();
                let ops: Vec<_> = resource
                    .configs
                    .iter()
                    .zip(keys.iter().zip(&values))
                    .map(|(c, (k, v))| (k.as_str(), c.config_operation, v.as_deref()))
                    .collect();
                broker_configs::alter(node, &name, &ops, req.validate_only).await
            }
            other => Err((ResponseError::InvalidRequest.code(), format!("resource type {other} is not supported"))),
        };
        if let Err((code, message)) = outcome {
            r.error_code = code;
            r.error_message = Some(str_bytes(&message));
        }
        resp.responses.push(r);
    }
    resp
}

fn apply_op(
    node: &Node,
    configs: &mut std::collections::BTreeMap<String, String>,
    key: &str,
    op: i8,
    value: Option<String>,
) -> Result<(), (i16, String)> {
    let invalid = |m: String| (ResponseError::InvalidConfig.code(), m);
    let Some(def) = topic_config::definition(key) else {
        return Err(invalid(format!("unknown or unsupported topic configuration {key}")));
    };
    match op {
        SET => {
            let v = value.ok_or_else(|| invalid(format!("SET of {key} needs a value")))?;
            configs.insert(key.to_string(), v);
        }
        DELETE => {
            configs.remove(key);
        }
        APPEND | SUBTRACT => {
            if !LIST_KEYS.contains(&key) {
                return Err((
                    ResponseError::InvalidRequest.code(),
                    format!("{key} is not a list; APPEND and SUBTRACT do not apply"),
                ));
            }
            let v = value.ok_or_else(|| invalid(format!("APPEND/SUBTRACT of {key} needs a value")))?;
            let current = configs.get(key).cloned().unwrap_or_else(|| (def.default)(&node.config));
            let mut items: Vec<String> =
                current.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
            for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if op == APPEND {
                    if !items.iter().any(|i| i == item) {
                        items.push(item.to_string());
                    }
                } else {
                    items.retain(|i| i != item);
                }
            }
            configs.insert(key.to_string(), items.join(","));
        }
        other => return Err((ResponseError::InvalidRequest.code(), format!("unknown config operation {other}"))),
    }
    Ok(())
}
