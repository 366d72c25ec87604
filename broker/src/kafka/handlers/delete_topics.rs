//! DeleteTopics: by name (v0–5) or by name or id (v6+). The controller removes the topic from
//! the metadata; each broker then stops serving its replicas and removes their directories.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use uuid::Uuid;

use crate::kafka::error_code;
use crate::node::Node;

use super::{str_bytes, topic_name};

pub async fn handle(node: &Node, req: DeleteTopicsRequest, version: i16) -> DeleteTopicsResponse {
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics.iter().map(|t| (t.name.as_ref().map(|n| n.to_string()), t.topic_id)).collect()
    } else {
        req.topic_names.iter().map(|n| (Some(n.to_string()), Uuid::nil())).collect()
    };
    let mut resp = DeleteTopicsResponse::default();
    for (name, id) in targets {
        let mut r = DeletableTopicResult::default();
        r.name = name.as_deref().map(topic_name);
        r.topic_id = id;
        let resolved = match &name {
            Some(n) => Some(n.clone()),
            None => node.catalog.get_by_id(id).map(|t| t.name.clone()),
        };
        match resolved {
            None => {
                r.error_code = ResponseError::UnknownTopicId.code();
                if version >= 5 {
                    r.error_message = Some(str_bytes(&format!("no topic with id {id}")));
                }
            }
            Some(n) if Node::is_internal(&n) => {
                r.error_code = ResponseError::InvalidTopicException.code();
                if version >= 5 {
                    r.error_message = Some(str_bytes(&format!("{n} is an internal topic and cannot be deleted")));
                }
            }
            Some(n) => match node.catalog.get(&n).map(|t| t.id) {
                None => {
                    r.error_code = ResponseError::UnknownTopicOrPartition.code();
                    if version >= 5 {
                        r.error_message = Some(str_bytes(&format!("topic {n} does not exist")));
                    }
                }
                Some(deleted_id) => match node.delete_topic(&n).await {
                    Ok(()) => {
                        r.name = Some(topic_name(&n));
                        if version >= 6 {
                            r.topic_id = deleted_id;
                        }
                    }
                    Err(e) => {
                        r.error_code = error_code::topic_op(&e);
                        if version >= 5 {
                            r.error_message = Some(str_bytes(&error_code::message(&e)));
                        }
                    }
                },
            },
        }
        resp.responses.push(r);
    }
    resp
}
