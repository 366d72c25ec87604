//! AlterConfigs (the legacy, non-incremental form): the given set replaces all of a topic's
//! overrides. Broker configs are static (flags, environment, file) and refused here.

use std::collections::BTreeMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{AlterConfigsRequest, AlterConfigsResponse};

use crate::kafka::error_code;
use crate::metadata::topic_config;
use crate::node::Node;

use super::{str_bytes, RESOURCE_BROKER, RESOURCE_TOPIC};

pub async fn handle(node: &Node, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut resp = AlterConfigsResponse::default();
    for resource in req.resources {
        let mut r = AlterConfigsResourceResponse::default();
        r.resource_type = resource.resource_type;
        r.resource_name = resource.resource_name.clone();
        let name = resource.resource_name.to_string();
        let outcome: Result<(), (i16, String)> = match resource.resource_type {
            RESOURCE_TOPIC => {
                let configs: BTreeMap<String, String> = resource
                    .configs
                    .iter()
                    .filter_map(|c| c.value.as_ref().map(|v| (c.name.to_string(), v.to_string())))
                    .collect();
                apply_topic_configs(node, &name, configs, req.validate_only).await
            }
            RESOURCE_BROKER => Err(static_broker_configs()),
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

/// The refusal for attempts to change broker configs at run time.
pub(crate) fn static_broker_configs() -> (i16, String) {
    (
        ResponseError::InvalidRequest.code(),
        "broker configs are static in Strom; change the flag, STROM_* variable or config file and restart".into(),
    )
}

/// Validates and (unless `validate_only`) stores a topic's complete set of overrides.
pub(crate) async fn apply_topic_configs(
    node: &Node,
    topic: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), (i16, String)> {
    if node.catalog.get(topic).is_none() {
        return Err((ResponseError::UnknownTopicOrPartition.code(), format!("topic {topic} does not exist")));
    }
    topic_config::validate(&configs).map_err(|e| (ResponseError::InvalidConfig.code(), e.to_string()))?;
    node.set_topic_configs(topic, configs, validate_only)
        .await
        .map_err(|e| (error_code::topic_op(&e), error_code::message(&e)))
}
