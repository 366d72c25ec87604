//! [`ControllerClient`]: how a broker reaches the active controller.
//!
//! It asks the controller raft last named, else the voters in turn; follows `NOT_CONTROLLER`
//! hints; retries through elections with a short backoff until the caller's deadline; and,
//! after a write, waits until this broker's own image has applied it, so that the client who
//! asked (say, CreateTopics) sees the result in its next Metadata request to this broker.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use strom_proto::controller::controller_client::ControllerClient as Grpc;
use strom_proto::controller::{
    AllocateProducerIdsRequest, AlterPartitionRequest, AlterTopicConfigsRequest, BrokerHeartbeatRequest,
    CancelAllReassignmentsRequest, CreatePartitionsRequest, CreateTopicRequest, DeleteTopicRequest,
    DescribeQuorumRequest, DescribeQuorumResponse, ElectLeadersRequest, ErrorCode, Outcome, PartitionTarget,
    ReassignRequest, RegisterBrokerRequest, Replicas, SetReplicationThrottleRequest, UnregisterBrokerRequest,
};
use tokio::sync::watch;
use tonic::transport::Channel;
use uuid::Uuid;

use super::controller::{CreatedTopic, ErrorKind, Registration, TopicSpec};
use super::image::MetadataImage;
use super::network::Channels;
use super::quorum::VoterSet;
use super::types::{broker_id, RaftMetrics};

/// A single RPC may take this long before another controller is tried.
const RPC_TIMEOUT: Duration = Duration::from_secs(5);

/// A controller call that did not succeed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// The controller refused it; the code says why.
    #[error("{message}")]
    Refused { code: ErrorKind, message: String },
    /// No controller answered in time (an election, a lost quorum).
    #[error("no active controller answered within {waited:?} (last: {last})")]
    Timeout { waited: Duration, last: String },
}

/// One partition's result of a batch call: (topic, partition, error or None).
pub type PartitionReply = (String, i32, Option<(ErrorKind, String)>);

fn partition_replies(results: Vec<strom_proto::controller::PartitionResult>) -> Vec<PartitionReply> {
    results
        .into_iter()
        .map(|r| {
            let code = ErrorCode::try_from(r.error).unwrap_or(ErrorCode::InvalidRequest);
            let error = (code != ErrorCode::None).then_some((code, r.message));
            (r.topic, r.partition, error)
        })
        .collect()
}

/// Calls the active controller from this broker.
#[derive(Debug, Clone)]
pub struct ControllerClient {
    voters: VoterSet,
    channels: Channels,
    metrics: watch::Receiver<RaftMetrics>,
    image: watch::Receiver<Arc<MetadataImage>>,
    hint: Arc<Mutex<Option<i32>>>,
}

impl ControllerClient {
    pub fn new(
        voters: VoterSet,
        channels: Channels,
        metrics: watch::Receiver<RaftMetrics>,
        image: watch::Receiver<Arc<MetadataImage>>,
    ) -> ControllerClient {
        ControllerClient { voters, channels, metrics, image, hint: Arc::new(Mutex::new(None)) }
    }

    /// The voter to try on `attempt`: the last hint, raft's leader, then round robin.
    fn target(&self, attempt: usize) -> Option<(i32, String)> {
        let hinted = *self.hint.lock();
        let leader = self.metrics.borrow().current_leader.map(broker_id);
        let id = match (attempt, hinted.or(leader)) {
            (0, Some(id)) if self.voters.contains(id) => id,
            _ => {
                let ids: Vec<i32> = self.voters.ids().collect();
                *ids.get(attempt % ids.len().max(1))?
            }
        };
        Some((id, self.voters.addr(id)?.to_string()))
    }

    /// Calls `f` on the active controller until it answers with anything but NOT_CONTROLLER
    /// or NOT_COMMITTED, or `timeout` passes.
    async fn call<R, F, Fut>(&self, what: &str, timeout: Duration, f: F) -> Result<(R, Outcome), ClientError>
    where
        F: Fn(Grpc<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<(R, Option<Outcome>)>, tonic::Status>>,
    {
        let started = Instant::now();
        let mut last = String::from("no attempt yet");
        let mut attempt = 0usize;
        // Redirects followed at once since the last pause: two brokers naming each other
        // (stale hints during an election) must not make a tight loop.
        let mut redirects = 0u32;
        loop {
            if let Some((id, addr)) = self.target(attempt) {
                match self.channels.get(&addr) {
                    Err(e) => last = format!("controller address {addr}: {e}"),
                    Ok(channel) => {
                        let grpc = Grpc::new(channel);
                        let left = timeout.saturating_sub(started.elapsed()).min(RPC_TIMEOUT);
                        match tokio::time::timeout(left, f(grpc)).await {
                            Err(_) => last = format!("{what} to broker {id} at {addr} timed out"),
                            Ok(Err(status)) => last = format!("{what} to broker {id} at {addr}: {}", status.message()),
                            Ok(Ok(resp)) => {
                                let (value, outcome) = resp.into_inner();
                                let outcome = outcome.unwrap_or_default();
                                let code = ErrorCode::try_from(outcome.error).unwrap_or(ErrorCode::InvalidRequest);
                                match code {
                                    ErrorCode::None => {
                                        *self.hint.lock() = Some(id);
                                        return Ok((value, outcome));
                                    }
                                    ErrorCode::NotController => {
                                        let next = (outcome.controller_id >= 0 && outcome.controller_id != id)
                                            .then_some(outcome.controller_id);
                                        *self.hint.lock() = next;
                                        last = outcome.message;
                                        if next.is_some() {
                                            attempt = 0;
                                            redirects += 1;
                                            if redirects <= 3 {
                                                continue;
                                            }
                                        }
                                    }
                                    ErrorCode::NotCommitted => last = outcome.message,
                                    code => return Err(ClientError::Refused { code, message: outcome.message }),
                                }
                            }
                        }
                    }
                }
            }
            *self.hint.lock() = None;
            attempt += 1;
            if started.elapsed() >= timeout {
                return Err(ClientError::Timeout { waited: timeout, last });
            }
            redirects = 0;
            tokio::time::sleep(Duration::from_millis(100).min(timeout.saturating_sub(started.elapsed()))).await;
        }
    }

    /// Waits until this broker's image has applied `index`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), ClientError> {
        let mut image = self.image.clone();
        let reached =
            tokio::time::timeout(timeout, async move { image.wait_for(|i| i.applied_index >= index).await.is_ok() })
                .await;
        match reached {
            Ok(true) => Ok(()),
            _ => Err(ClientError::Timeout {
                waited: timeout,
                last: format!("this broker's metadata did not reach log index {index}"),
            }),
        }
    }

    async fn write<R, F, Fut>(&self, what: &str, timeout: Duration, f: F) -> Result<R, ClientError>
    where
        F: Fn(Grpc<Channel>) -> Fut,
        Fut: Future<Output = Result<tonic::Response<(R, Option<Outcome>)>, tonic::Status>>,
    {
        let started = Instant::now();
        let (value, outcome) = self.call(what, timeout, f).await?;
        self.wait_applied(outcome.committed_index, timeout.saturating_sub(started.elapsed())).await?;
        Ok(value)
    }

    /// Registers this broker; returns its broker epoch.
    pub async fn register(&self, r: &Registration, applied_index: u64, timeout: Duration) -> Result<u64, ClientError> {
        let req = RegisterBrokerRequest {
            broker_id: r.id,
            incarnation_id: r.incarnation.to_string(),
            kafka_host: r.kafka.host.clone(),
            kafka_port: r.kafka.port,
            internal_addr: r.internal_addr.clone(),
            rack: r.rack.clone(),
            applied_index,
        };
        let (epoch, _) = self
            .call("RegisterBroker", timeout, |mut c| {
                let req = req.clone();
                async move { c.register_broker(req).await.map(|r| r.map(|r| (r.broker_epoch, r.outcome))) }
            })
            .await?;
        Ok(epoch)
    }

    /// Heartbeats; returns whether the controller sees this broker fenced, and the log index
    /// of what it decided (a shutdown's fencing: wait for it with [`Self::wait_applied`]).
    pub async fn heartbeat(
        &self,
        id: i32,
        epoch: u64,
        applied_index: u64,
        want_shutdown: bool,
        timeout: Duration,
    ) -> Result<(bool, u64), ClientError> {
        let req = BrokerHeartbeatRequest { broker_id: id, broker_epoch: epoch, applied_index, want_shutdown };
        let (fenced, outcome) = self
            .call("BrokerHeartbeat", timeout, |mut c| async move {
                c.broker_heartbeat(req).await.map(|r| r.map(|r| (r.fenced, r.outcome)))
            })
            .await?;
        Ok((fenced, outcome.committed_index))
    }

    pub async fn create_topic(&self, spec: &TopicSpec, timeout: Duration) -> Result<CreatedTopic, ClientError> {
        let req = CreateTopicRequest {
            name: spec.name.clone(),
            partitions: spec.partitions,
            replication_factor: i32::from(spec.replication_factor),
            configs: spec.configs.clone().into_iter().collect(),
            assignment: spec.assignment.iter().map(|b| Replicas { brokers: b.clone() }).collect(),
            validate_only: spec.validate_only,
        };
        self.write("CreateTopic", timeout, |mut c| {
            let req = req.clone();
            async move {
                c.create_topic(req).await.map(|r| {
                    r.map(|r| {
                        let created = CreatedTopic {
                            id: Uuid::parse_str(&r.topic_id).ok(),
                            partitions: r.partitions,
                            replication_factor: i16::try_from(r.replication_factor).unwrap_or(-1),
                            index: r.outcome.as_ref().map_or(0, |o| o.committed_index),
                        };
                        (created, r.outcome)
                    })
                })
            }
        })
        .await
    }

    pub async fn delete_topic(&self, name: &str, timeout: Duration) -> Result<(), ClientError> {
        let req = DeleteTopicRequest { name: name.to_string() };
        self.write("DeleteTopic", timeout, |mut c| {
            let req = req.clone();
            async move { c.delete_topic(req).await.map(|r| r.map(|r| ((), r.outcome))) }
        })
        .await
    }

    pub async fn create_partitions(
        &self,
        name: &str,
        count: i32,
        assignment: &[Vec<i32>],
        validate_only: bool,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let req = CreatePartitionsRequest {
            name: name.to_string(),
            count,
            assignment: assignment.iter().map(|b| Replicas { brokers: b.clone() }).collect(),
            validate_only,
        };
        self.write("CreatePartitions", timeout, |mut c| {
            let req = req.clone();
            async move { c.create_partitions(req).await.map(|r| r.map(|r| ((), r.outcome))) }
        })
        .await
    }

    pub async fn alter_configs(
        &self,
        name: &str,
        configs: &std::collections::BTreeMap<String, String>,
        validate_only: bool,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let req = AlterTopicConfigsRequest {
            name: name.to_string(),
            configs: configs.clone().into_iter().collect(),
            validate_only,
        };
        self.write("AlterTopicConfigs", timeout, |mut c| {
            let req = req.clone();
            async move { c.alter_topic_configs(req).await.map(|r| r.map(|r| ((), r.outcome))) }
        })
        .await
    }

    /// AlterPartition: asks for an ISR change; returns the ISR and partition epoch committed.
    /// Waits until this broker's image has it, so the change is in effect when it returns.
    pub async fn alter_partition(
        &self,
        a: &super::controller::AlterPartition,
        timeout: Duration,
    ) -> Result<(Vec<i32>, i32), ClientError> {
        let req = AlterPartitionRequest {
            broker_id: a.broker,
            broker_epoch: a.broker_epoch,
            topic_id: a.topic_id.to_string(),
            partition: a.partition,
            leader_epoch: a.leader_epoch,
            partition_epoch: a.partition_epoch,
            new_isr: a.new_isr.clone(),
        };
        self.write("AlterPartition", timeout, |mut c| {
            let req = req.clone();
            async move { c.alter_partition(req).await.map(|r| r.map(|r| ((r.isr, r.partition_epoch), r.outcome))) }
        })
        .await
    }

    /// Starts (target Some) or cancels (None) reassignments; one result per partition.
    pub async fn reassign(
        &self,
        targets: &[(String, i32, Option<Vec<i32>>)],
        timeout: Duration,
    ) -> Result<Vec<PartitionReply>, ClientError> {
        let req = ReassignRequest {
            targets: targets
                .iter()
                .map(|(t, p, r)| PartitionTarget {
                    topic: t.clone(),
                    partition: *p,
                    replicas: r.clone().unwrap_or_default(),
                })
                .collect(),
        };
        self.write("Reassign", timeout, |mut c| {
            let req = req.clone();
            async move { c.reassign(req).await.map(|r| r.map(|r| (partition_replies(r.results), r.outcome))) }
        })
        .await
    }

    pub async fn cancel_all_reassignments(&self, timeout: Duration) -> Result<(), ClientError> {
        self.write("CancelAllReassignments", timeout, |mut c| async move {
            c.cancel_all_reassignments(CancelAllReassignmentsRequest {}).await.map(|r| r.map(|r| ((), r.outcome)))
        })
        .await
    }

    /// Preferred (or unclean) leader elections; `partitions` empty means all.
    pub async fn elect_leaders(
        &self,
        partitions: &[(String, i32)],
        unclean: bool,
        timeout: Duration,
    ) -> Result<Vec<PartitionReply>, ClientError> {
        let req = ElectLeadersRequest {
            partitions: partitions
                .iter()
                .map(|(t, p)| PartitionTarget { topic: t.clone(), partition: *p, replicas: Vec::new() })
                .collect(),
            unclean,
        };
        self.write("ElectLeaders", timeout, |mut c| {
            let req = req.clone();
            async move { c.elect_leaders(req).await.map(|r| r.map(|r| (partition_replies(r.results), r.outcome))) }
        })
        .await
    }

    pub async fn unregister_broker(&self, id: i32, timeout: Duration) -> Result<(), ClientError> {
        self.write("UnregisterBroker", timeout, |mut c| async move {
            c.unregister_broker(UnregisterBrokerRequest { broker_id: id }).await.map(|r| r.map(|r| ((), r.outcome)))
        })
        .await
    }

    pub async fn set_replication_throttle(
        &self,
        bytes_per_sec: Option<u64>,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        let req = SetReplicationThrottleRequest { bytes_per_sec: bytes_per_sec.unwrap_or(0) };
        self.write("SetReplicationThrottle", timeout, |mut c| async move {
            c.set_replication_throttle(req).await.map(|r| r.map(|r| ((), r.outcome)))
        })
        .await
    }

    /// The quorum as the raft leader sees it (KRaft's DescribeQuorum).
    pub async fn describe_quorum(&self, timeout: Duration) -> Result<DescribeQuorumResponse, ClientError> {
        let (resp, _) = self
            .call("DescribeQuorum", timeout, |mut c| async move {
                c.describe_quorum(DescribeQuorumRequest { from_leader: true }).await.map(|r| {
                    let r = r.into_inner();
                    let outcome = r.outcome.clone();
                    tonic::Response::new((r, outcome))
                })
            })
            .await?;
        Ok(resp)
    }

    /// A block of producer ids: `(first, count)`.
    pub async fn allocate_producer_ids(
        &self,
        id: i32,
        epoch: u64,
        timeout: Duration,
    ) -> Result<(i64, i32), ClientError> {
        let req = AllocateProducerIdsRequest { broker_id: id, broker_epoch: epoch };
        self.write("AllocateProducerIds", timeout, |mut c| async move {
            c.allocate_producer_ids(req).await.map(|r| r.map(|r| ((r.first_producer_id, r.count), r.outcome)))
        })
        .await
    }
}
