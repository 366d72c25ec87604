//! The server side of `strom.controller.v1`: decodes requests, calls the [`Controller`], and
//! answers every call with an `Outcome` (error code, message, the controller this node knows
//! of, and the log index the caller must wait for). Failures are answers, not gRPC errors, so
//! a caller can follow a `NOT_CONTROLLER` hint; only an undecodable request is a gRPC error.

use std::collections::BTreeMap;
use std::sync::Arc;

use strom_proto::controller::controller_server::Controller as ControllerRpc;
use strom_proto::controller::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, AlterPartitionRequest, AlterPartitionResponse,
    AlterTopicConfigsRequest, BrokerHeartbeatRequest, BrokerHeartbeatResponse, CancelAllReassignmentsRequest,
    CreatePartitionsRequest, CreateTopicRequest, CreateTopicResponse, DeleteTopicRequest, DescribeQuorumRequest,
    DescribeQuorumResponse, ElectLeadersRequest, ErrorCode, Outcome, PartitionResult, PartitionResults,
    QuorumReplicaState, ReassignRequest, RegisterBrokerRequest, RegisterBrokerResponse, Replicas,
    SetReplicationThrottleRequest, UnregisterBrokerRequest, WriteResponse,
};
use tonic::{Request, Response, Status};
use uuid::Uuid;

use super::moves::{PartitionOutcome, Reassignment};
use super::{AlterPartition, Controller, ControllerError, QuorumReplication, Registration, TopicSpec};
use crate::metadata::command::Endpoint;

/// Serves the controller calls of this broker.
#[derive(Debug, Clone)]
pub struct ControllerService {
    pub controller: Arc<Controller>,
}

impl ControllerService {
    fn ok(&self, index: u64) -> Option<Outcome> {
        Some(Outcome {
            error: ErrorCode::None.into(),
            message: String::new(),
            controller_id: self.controller.leader().unwrap_or(-1),
            committed_index: index,
        })
    }

    fn failed(&self, e: &ControllerError) -> Option<Outcome> {
        Some(Outcome {
            error: e.code.into(),
            message: e.message.clone(),
            controller_id: self.controller.leader().unwrap_or(-1),
            committed_index: 0,
        })
    }

    fn outcome(&self, r: &Result<u64, ControllerError>) -> Option<Outcome> {
        match r {
            Ok(index) => self.ok(*index),
            Err(e) => self.failed(e),
        }
    }
}

fn partition_results(outcomes: Vec<PartitionOutcome>) -> Vec<PartitionResult> {
    outcomes
        .into_iter()
        .map(|(topic, partition, r)| match r {
            Ok(()) => PartitionResult { topic, partition, error: ErrorCode::None.into(), message: String::new() },
            Err(e) => PartitionResult { topic, partition, error: e.code.into(), message: e.message },
        })
        .collect()
}

fn assignment(replicas: Vec<Replicas>) -> Vec<Vec<i32>> {
    replicas.into_iter().map(|r| r.brokers).collect()
}

fn sorted(configs: std::collections::HashMap<String, String>) -> BTreeMap<String, String> {
    configs.into_iter().collect()
}

#[tonic::async_trait]
impl ControllerRpc for ControllerService {
    async fn register_broker(
        &self,
        request: Request<RegisterBrokerRequest>,
    ) -> Result<Response<RegisterBrokerResponse>, Status> {
        let r = request.into_inner();
        let incarnation = Uuid::parse_str(&r.incarnation_id)
            .map_err(|e| Status::invalid_argument(format!("incarnation id {:?}: {e}", r.incarnation_id)))?;
        let registration = Registration {
            id: r.broker_id,
            incarnation,
            kafka: Endpoint { host: r.kafka_host, port: r.kafka_port },
            internal_addr: r.internal_addr,
            rack: r.rack,
        };
        let resp = match self.controller.register(registration).await {
            Ok((epoch, index)) => RegisterBrokerResponse { outcome: self.ok(index), broker_epoch: epoch },
            Err(e) => RegisterBrokerResponse { outcome: self.failed(&e), broker_epoch: 0 },
        };
        Ok(Response::new(resp))
    }

    async fn broker_heartbeat(
        &self,
        request: Request<BrokerHeartbeatRequest>,
    ) -> Result<Response<BrokerHeartbeatResponse>, Status> {
        let r = request.into_inner();
        let resp = match self.controller.heartbeat(r.broker_id, r.broker_epoch, r.applied_index, r.want_shutdown).await
        {
            Ok(h) => BrokerHeartbeatResponse { outcome: self.ok(h.index), fenced: h.fenced },
            Err(e) => BrokerHeartbeatResponse { outcome: self.failed(&e), fenced: true },
        };
        Ok(Response::new(resp))
    }

    async fn create_topic(
        &self,
        request: Request<CreateTopicRequest>,
    ) -> Result<Response<CreateTopicResponse>, Status> {
        let r = request.into_inner();
        let spec = TopicSpec {
            name: r.name,
            partitions: r.partitions,
            replication_factor: i16::try_from(r.replication_factor).unwrap_or(i16::MAX),
            configs: sorted(r.configs),
            assignment: assignment(r.assignment),
            validate_only: r.validate_only,
        };
        let resp = match self.controller.create_topic(spec).await {
            Ok(c) => CreateTopicResponse {
                outcome: self.ok(c.index),
                topic_id: c.id.map(|id| id.to_string()).unwrap_or_default(),
                partitions: c.partitions,
                replication_factor: i32::from(c.replication_factor),
            },
            Err(e) => CreateTopicResponse { outcome: self.failed(&e), ..Default::default() },
        };
        Ok(Response::new(resp))
    }

    async fn delete_topic(&self, request: Request<DeleteTopicRequest>) -> Result<Response<WriteResponse>, Status> {
        let r = request.into_inner();
        let result = self.controller.delete_topic(&r.name).await;
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn create_partitions(
        &self,
        request: Request<CreatePartitionsRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let r = request.into_inner();
        let result =
            self.controller.create_partitions(&r.name, r.count, assignment(r.assignment), r.validate_only).await;
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn alter_topic_configs(
        &self,
        request: Request<AlterTopicConfigsRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let r = request.into_inner();
        let result = self.controller.alter_configs(&r.name, sorted(r.configs), r.validate_only).await;
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn allocate_producer_ids(
        &self,
        request: Request<AllocateProducerIdsRequest>,
    ) -> Result<Response<AllocateProducerIdsResponse>, Status> {
        let r = request.into_inner();
        let resp = match self.controller.allocate_producer_ids(r.broker_id, r.broker_epoch).await {
            Ok((first, count, index)) => {
                AllocateProducerIdsResponse { outcome: self.ok(index), first_producer_id: first, count }
            }
            Err(e) => AllocateProducerIdsResponse { outcome: self.failed(&e), ..Default::default() },
        };
        Ok(Response::new(resp))
    }

    async fn alter_partition(
        &self,
        request: Request<AlterPartitionRequest>,
    ) -> Result<Response<AlterPartitionResponse>, Status> {
        let r = request.into_inner();
        let topic_id = Uuid::parse_str(&r.topic_id)
            .map_err(|e| Status::invalid_argument(format!("topic id {:?}: {e}", r.topic_id)))?;
        let alter = AlterPartition {
            broker: r.broker_id,
            broker_epoch: r.broker_epoch,
            topic_id,
            partition: r.partition,
            leader_epoch: r.leader_epoch,
            partition_epoch: r.partition_epoch,
            new_isr: r.new_isr,
        };
        let resp = match self.controller.alter_partition(alter).await {
            Ok((isr, partition_epoch, index)) => {
                AlterPartitionResponse { outcome: self.ok(index), isr, partition_epoch }
            }
            Err(e) => AlterPartitionResponse { outcome: self.failed(&e), ..Default::default() },
        };
        Ok(Response::new(resp))
    }

    async fn reassign(&self, request: Request<ReassignRequest>) -> Result<Response<PartitionResults>, Status> {
        let moves = request
            .into_inner()
            .targets
            .into_iter()
            .map(|t| Reassignment {
                topic: t.topic,
                partition: t.partition,
                target: (!t.replicas.is_empty()).then_some(t.replicas),
            })
            .collect();
        let resp = match self.controller.reassign(moves).await {
            Ok((outcomes, index)) => PartitionResults { outcome: self.ok(index), results: partition_results(outcomes) },
            Err(e) => PartitionResults { outcome: self.failed(&e), results: Vec::new() },
        };
        Ok(Response::new(resp))
    }

    async fn cancel_all_reassignments(
        &self,
        _request: Request<CancelAllReassignmentsRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let result = self.controller.cancel_all_reassignments().await.map(|(_, index)| index);
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn elect_leaders(&self, request: Request<ElectLeadersRequest>) -> Result<Response<PartitionResults>, Status> {
        let r = request.into_inner();
        let partitions =
            (!r.partitions.is_empty()).then(|| r.partitions.into_iter().map(|p| (p.topic, p.partition)).collect());
        let resp = match self.controller.elect_leaders(partitions, r.unclean).await {
            Ok((outcomes, index)) => PartitionResults { outcome: self.ok(index), results: partition_results(outcomes) },
            Err(e) => PartitionResults { outcome: self.failed(&e), results: Vec::new() },
        };
        Ok(Response::new(resp))
    }

    async fn unregister_broker(
        &self,
        request: Request<UnregisterBrokerRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let result = self.controller.unregister_broker(request.into_inner().broker_id).await;
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn set_replication_throttle(
        &self,
        request: Request<SetReplicationThrottleRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let rate = request.into_inner().bytes_per_sec;
        let result = self.controller.set_replication_throttle((rate > 0).then_some(rate)).await;
        Ok(Response::new(WriteResponse { outcome: self.outcome(&result) }))
    }

    async fn describe_quorum(
        &self,
        request: Request<DescribeQuorumRequest>,
    ) -> Result<Response<DescribeQuorumResponse>, Status> {
        let q = self.controller.describe_quorum();
        let outcome = match (&q.replication, request.into_inner().from_leader) {
            (None, true) => self.failed(&self.controller.not_controller()),
            _ => self.ok(q.applied_index),
        };
        let replication =
            q.replication.unwrap_or(QuorumReplication { log_end_offset: -1, high_watermark: -1, members: Vec::new() });
        let voters = q.voters.clone();
        Ok(Response::new(DescribeQuorumResponse {
            outcome,
            leader_log_end_offset: replication.log_end_offset,
            high_watermark: replication.high_watermark,
            replicas: replication
                .members
                .into_iter()
                .map(|m| QuorumReplicaState {
                    id: m.id,
                    voter: voters.contains(&m.id),
                    log_end_offset: m.log_end_offset,
                    last_fetch_timestamp: m.last_fetch_ms,
                    last_caught_up_timestamp: m.last_caught_up_ms,
                })
                .collect(),
            cluster_id: q.cluster_id.unwrap_or_default(),
            leader_id: q.leader.unwrap_or(-1),
            current_term: q.term,
            voters: q.voters,
            learners: q.learners,
            registered_brokers: q.registered,
            applied_index: q.applied_index,
        }))
    }
}
