//! Produce: validate and append each partition's record batch; acks=0 gets no response,
//! acks=1 is answered after the leader's append, acks=all once every in-sync replica has it
//! (the high watermark passed it; plus an fsync on the leader when `flush_on_acks_all` is
//! on): NOT_ENOUGH_REPLICAS before the append when the ISR is below `min.insync.replicas`,
//! NOT_ENOUGH_REPLICAS_AFTER_APPEND if it fell below while waiting, REQUEST_TIMED_OUT after
//! the request's timeout.
//!
//! The appends happen at once, in request order; waiting for the replicas is a separate
//! future ([`Outcome::Wait`]) so the connection can go on handling the requests behind it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

use crate::kafka::error_code;
use crate::metrics::Waiting;
use crate::node::Node;
use crate::partition::Partition;
use crate::time::now_ms;

use super::str_bytes;

/// What the connection does with a produce.
pub enum Outcome {
    Respond(ProduceResponse),
    /// acks=all: appended; the response once the in-sync replicas have the records.
    Wait(Pin<Box<dyn Future<Output = ProduceResponse> + Send>>),
    /// acks=0: the client expects no response.
    NoResponse,
    /// acks=0 with a failed partition: closing the connection is how Kafka tells the client.
    Close(String),
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Respond(r) => write!(f, "Respond({r:?})"),
            Outcome::Wait(_) => write!(f, "Wait"),
            Outcome::NoResponse => write!(f, "NoResponse"),
            Outcome::Close(r) => write!(f, "Close({r})"),
        }
    }
}

/// An acks=all partition still to be confirmed: (topic index, partition index) in the response.
struct Confirm {
    at: (usize, usize),
    partition: Arc<Partition>,
    last_offset: i64,
    fsync: bool,
}

pub fn handle(node: &Node, req: ProduceRequest, version: i16) -> Outcome {
    let acks = req.acks;
    let valid_acks = matches!(acks, -1..=1);
    // How long acks=all may wait for the ISR (the request's timeout, within reason).
    let timeout = Duration::from_millis(u64::try_from(req.timeout_ms).unwrap_or(0).clamp(1, 60_000));
    let mut failures = Vec::new();
    let mut confirms = Vec::new();
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
            if let Some(reason) = node.disk_space.refusal() {
                p.error_code = ResponseError::KafkaStorageError.code();
                if version >= 8 {
                    p.error_message = Some(str_bytes(&reason));
                }
                failures.push(reason);
                topic_resp.partition_responses.push(p);
                continue;
            }
            let records = data.records.unwrap_or_default();
            let size = records.len();
            match partition.append(&records, acks, now) {
                Ok(outcome) => {
                    node.metrics.produced_records_bytes.inc_by(size as u64);
                    let records = u64::try_from(outcome.last_offset - outcome.base_offset + 1).unwrap_or(0);
                    partition.traffic.produced(size as u64, records);
                    p.base_offset = outcome.base_offset;
                    p.log_append_time_ms = outcome.log_append_time;
                    p.log_start_offset = outcome.log_start_offset;
                    if acks == -1 {
                        // A retry's original must be confirmed too.
                        confirms.push(Confirm {
                            at: (resp.responses.len(), topic_resp.partition_responses.len()),
                            partition,
                            last_offset: outcome.last_offset,
                            // A retry's original may still be waiting for its own fsync: flush_through
                            // returns at once when it is done.
                            fsync: node.config.flush_on_acks_all,
                        });
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
    if confirms.is_empty() {
        return Outcome::Respond(resp);
    }
    let waiting = Waiting::new(&node.metrics.produce_waiting);
    Outcome::Wait(Box::pin(confirm(resp, confirms, timeout, version, waiting, node.metrics.clone())))
}

/// Waits until each acks=all partition is confirmed; a partition that is not gets its error.
async fn confirm(
    mut resp: ProduceResponse,
    confirms: Vec<Confirm>,
    timeout: Duration,
    version: i16,
    _waiting: Waiting,
    metrics: std::sync::Arc<crate::metrics::Metrics>,
) -> ProduceResponse {
    // One deadline for the whole request, as its timeout is.
    let deadline = tokio::time::Instant::now() + timeout;
    for c in confirms {
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let mut result = Ok(());
        if c.fsync {
            let started = std::time::Instant::now();
            result = c.partition.flush_through(c.last_offset).await;
            metrics.observe_acks_all_fsync(started.elapsed());
        }
        if result.is_ok() {
            let min_insync = c.partition.config().min_insync_replicas;
            result = c.partition.wait_for_replication(c.last_offset, min_insync, timeout).await;
        }
        if let Err(e) = result {
            tracing::debug!(error = %error_code::message(&e), "acks=all produce not confirmed");
            let p = &mut resp.responses[c.at.0].partition_responses[c.at.1];
            p.error_code = error_code::partition(&e);
            p.base_offset = -1;
            if version >= 8 {
                p.error_message = Some(str_bytes(&error_code::message(&e)));
            }
        }
    }
    resp
}
