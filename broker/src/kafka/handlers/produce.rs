//! Produce: validate and append each partition's record batch; acks=0 gets no response,
//! acks=1 is answered after the leader's append, acks=all once every in-sync replica has it
//! (the high watermark passed it; plus an fsync on the leader when `flush_on_acks_all` is
//! on): NOT_ENOUGH_REPLICAS before the append when the ISR is below `min.insync.replicas`,
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND if it fell below while waiting, REQUEST_TIMED_OUT after
//! the request's timeout.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use crate::kafka::error_code;
use crate::node::Node;
use crate::time::now_ms;

use super::str_bytes;

/// What the connection does with a produce.
#[derive(Debug)]
pub enum Outcome {
    Respond(ProduceResponse),
    /// acks=0: the client expects no response.
    NoResponse,
    /// acks=0 with a failed partition: closing the connection is how Kafka tells the client.
    Close(String),
}

pub async fn handle(node: &Node, req: ProduceRequest, version: i16) -> Outcome {
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    // How long acks=all may wait for the ISR (the request's timeout, within reason).
    let timeout = std::time::Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0).clamp(1, 60_000));
    let mut failures = Vec::new();
    let mut resp = ProduceResponse::default();
    let now = now_ms();
    for topic in req.topic_data {
        let mut topic_resp = TopicProduceResponse::default();
        topic_resp.name = topic.name.clone();
        for data in topic.partition_data {
            let mut p = PartitionProduceResponse::default();
            p.index = data.index;
            p.base_offset = -1;
            p.log_append_time_ms = -1;
            p.log_start_offset = -1;
            if !valid_acks {
                p.error_code = ResponseError::InvalidRequiredAcks.code();
                topic_resp.partition_responses.push(p);
                continue;
            }
            if Node::is_internal(&topic.name) {
                p.error_code = ResponseError::InvalidTopicException.code();
                if version >= 8 {
                    p.error_message = Some(str_bytes("clients may not write to an internal topic"));
                }
                failures.push(format!("{}: internal topic", &*topic.name));
                topic_resp.partition_responses.push(p);
                continue;
            }
            let partition = match node.leader_replica(&topic.name, data.index) {
                Ok(partition) => partition,
                Err(e) => {
                    p.error_code = error_code::lookup(e);
                    failures.push(format!("{}-{}: {e:?}", &*topic.name, data.index));
                    topic_resp.partition_responses.push(p);
                    continue;
                }
            };
            let records = data.records.unwrap_or_default();
            let size = records.len();
            match partition.append(&records, acks, now) {
                Ok(outcome) => {
                    node.metrics.produced_records_bytes.inc_by(size as u64);
                    let mut flushed = Ok(());
                    if acks == -1 && node.config.flush_on_acks_all && !outcome.duplicate {
                        flushed = partition.flush_through(outcome.last_offset).await;
                    }
                    if acks == -1 && flushed.is_ok() {
                        // acks=all: every in-sync replica has the records (a retry's original too).
                        let min_insync = partition.config().min_insync_replicas;
                        flushed = partition.wait_for_replication(outcome.last_offset, min_insync, timeout).await;
                    }
                    match flushed {
                        Ok(()) => {
                            p.base_offset = outcome.base_offset;
                            p.log_append_time_ms = outcome.log_append_time;
                            p.log_start_offset = outcome.log_start_offset;
                        }
                        Err(e) => {
                            tracing::debug!(error = %error_code::message(&e), "acks=all produce not acknowledged");
                            p.error_code = error_code::partition(&e);
                            if version >= 8 {
                                p.error_message = Some(str_bytes(&error_code::message(&e)));
                            }
                        }
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %error_code::message(&e), "produce refused");
                    p.error_code = error_code::partition(&e);
                    if version >= 8 {
                        p.error_message = Some(str_bytes(&error_code::message(&e)));
                    }
                    failures.push(error_code::message(&e));
                }
            }
            topic_resp.partition_responses.push(p);
        }
        resp.responses.push(topic_resp);
    }
    if acks == 0 {
        return match failures.first() {
            Some(reason) => Outcome::Close(format!("acks=0 produce failed: {reason}")),
            None => Outcome::NoResponse,
        };
    }
    Outcome::Respond(resp)
}
