//! The admin API, `strom.admin.v1`, served by every broker on its internal port: what the
//! `strom` CLI and the operator drive a cluster through.
//!
//! - this file: [`AdminService`] and the mapping of failures to gRPC statuses.
//! - [`cluster`]: the cluster and its brokers, topics, rebalances (plans from the balancer,
//!   executed as reassignments), broker removal, leader elections, unhealthy partitions.
//! - [`groups`]: consumer groups, carried out by each group's coordinator (a broker that is
//!   not the coordinator forwards the call).
//! - [`transactions`]: transactional ids, listed from every coordinator, described and
//!   aborted by each id's coordinator.
//! - [`peers`]: what a broker answers about itself, and fan-out calls to the other brokers.
//! - [`lag`]: the consumer lag of the groups this broker coordinates, for `/metrics`.
//!
//! Reads come from the receiving broker's metadata image; writes go to the active controller
//! through the same client the Kafka handlers use.

pub mod cluster;
pub mod groups;
pub mod lag;
pub mod peers;
pub mod transactions;

use std::sync::{Arc, OnceLock};

use tonic::Status;

use crate::metadata::client::ClientError;
use crate::metadata::controller::ErrorKind;
use crate::node::{Node, TopicOpError};

/// The admin service of one broker. The node is set once it exists (the internal port, and
/// with it this service, starts before the broker has opened its partitions).
#[derive(Debug, Clone, Default)]
pub struct AdminService {
    node: Arc<OnceLock<Arc<Node>>>,
}

impl AdminService {
    pub fn new() -> AdminService {
        AdminService::default()
    }

    /// Makes the service answer for `node`.
    pub fn attach(&self, node: Arc<Node>) {
        let _ = self.node.set(node);
    }

    fn node(&self) -> Result<&Arc<Node>, Status> {
        self.node.get().ok_or_else(|| Status::unavailable("the broker is still starting"))
    }
}

/// A controller refusal or failure as a gRPC status.
pub fn controller_status(e: &ClientError) -> Status {
    match e {
        ClientError::Timeout { .. } => Status::unavailable(e.to_string()),
        ClientError::Refused { code, message } => {
            let message = message.clone();
            match code {
                ErrorKind::TopicAlreadyExists => Status::already_exists(message),
                ErrorKind::UnknownTopic | ErrorKind::BrokerNotRegistered => Status::not_found(message),
                ErrorKind::InvalidTopicName
                | ErrorKind::InvalidPartitions
                | ErrorKind::InvalidReplicationFactor
                | ErrorKind::InvalidReplicaAssignment
                | ErrorKind::InvalidConfig => Status::invalid_argument(message),
                ErrorKind::NotController | ErrorKind::NotCommitted => Status::unavailable(message),
                _ => Status::failed_precondition(message),
            }
        }
    }
}

/// A topic operation's failure as a gRPC status.
pub fn topic_status(e: &TopicOpError) -> Status {
    match e {
        TopicOpError::Controller(c) => controller_status(c),
    }
}

mod service {
    use strom_proto::admin::admin_server::Admin;
    use strom_proto::admin::{
        AbortTransactionRequest, DescribeTransactionRequest, ListTransactionsRequest, ListTransactionsResponse,
        Transaction,
    };
    use strom_proto::admin::{
        AlterTopicRequest, CancelRebalanceRequest, CreateTopicRequest, DeleteGroupRequest, DeleteGroupResponse,
        DeleteTopicRequest, DeleteTopicResponse, DescribeClusterRequest, DescribeClusterResponse, DescribeGroupRequest,
        DescribeTopicRequest, ElectLeadersRequest, ElectLeadersResponse, Group, ListGroupsRequest, ListGroupsResponse,
        ListTopicsRequest, ListTopicsResponse, LocalReplicasRequest, LocalReplicasResponse, PartitionOffsetsRequest,
        PartitionOffsetsResponse, RebalancePlan, RebalanceProgress, RebalanceRequest, RebalanceStatusRequest,
        RemoveBrokerRequest, RemoveBrokerResponse, ResetGroupOffsetsRequest, ResetGroupOffsetsResponse, Topic,
        UnhealthyPartitionsRequest, UnhealthyPartitionsResponse,
    };
    use tonic::{Request, Response, Status};

    use super::{cluster, groups, peers, transactions, AdminService};

    type Answer<T> = Result<Response<T>, Status>;

    #[tonic::async_trait]
    impl Admin for AdminService {
        async fn describe_cluster(&self, _r: Request<DescribeClusterRequest>) -> Answer<DescribeClusterResponse> {
            Ok(Response::new(cluster::describe_cluster(self.node()?).await))
        }

        async fn list_topics(&self, r: Request<ListTopicsRequest>) -> Answer<ListTopicsResponse> {
            let topics = cluster::list_topics(self.node()?, r.into_inner().include_internal);
            Ok(Response::new(ListTopicsResponse { topics }))
        }

        async fn describe_topic(&self, r: Request<DescribeTopicRequest>) -> Answer<Topic> {
            cluster::describe_topic(self.node()?, &r.into_inner().name).map(Response::new)
        }

        async fn create_topic(&self, r: Request<CreateTopicRequest>) -> Answer<Topic> {
            cluster::create_topic(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn alter_topic(&self, r: Request<AlterTopicRequest>) -> Answer<Topic> {
            cluster::alter_topic(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn delete_topic(&self, r: Request<DeleteTopicRequest>) -> Answer<DeleteTopicResponse> {
            cluster::delete_topic(self.node()?, &r.into_inner().name).await?;
            Ok(Response::new(DeleteTopicResponse {}))
        }

        async fn plan_rebalance(&self, r: Request<RebalanceRequest>) -> Answer<RebalancePlan> {
            let (plan, _) = cluster::plan_rebalance(self.node()?, &r.into_inner()).await?;
            Ok(Response::new(plan))
        }

        async fn execute_rebalance(&self, r: Request<RebalanceRequest>) -> Answer<RebalancePlan> {
            cluster::execute_rebalance(self.node()?, &r.into_inner()).await.map(Response::new)
        }

        async fn rebalance_status(&self, _r: Request<RebalanceStatusRequest>) -> Answer<RebalanceProgress> {
            Ok(Response::new(cluster::rebalance_status(self.node()?).await))
        }

        async fn cancel_rebalance(&self, _r: Request<CancelRebalanceRequest>) -> Answer<RebalanceProgress> {
            cluster::cancel_rebalance(self.node()?).await.map(Response::new)
        }

        async fn remove_broker(&self, r: Request<RemoveBrokerRequest>) -> Answer<RemoveBrokerResponse> {
            cluster::remove_broker(self.node()?, r.into_inner().broker_id).await?;
            Ok(Response::new(RemoveBrokerResponse {}))
        }

        async fn elect_leaders(&self, r: Request<ElectLeadersRequest>) -> Answer<ElectLeadersResponse> {
            cluster::elect_leaders(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn unhealthy_partitions(
            &self,
            _r: Request<UnhealthyPartitionsRequest>,
        ) -> Answer<UnhealthyPartitionsResponse> {
            Ok(Response::new(cluster::unhealthy_partitions(self.node()?)))
        }

        async fn list_groups(&self, r: Request<ListGroupsRequest>) -> Answer<ListGroupsResponse> {
            let groups = groups::list_groups(self.node()?, r.into_inner()).await;
            Ok(Response::new(ListGroupsResponse { groups }))
        }

        async fn describe_group(&self, r: Request<DescribeGroupRequest>) -> Answer<Group> {
            groups::describe_group(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn delete_group(&self, r: Request<DeleteGroupRequest>) -> Answer<DeleteGroupResponse> {
            groups::delete_group(self.node()?, r.into_inner()).await?;
            Ok(Response::new(DeleteGroupResponse {}))
        }

        async fn reset_group_offsets(&self, r: Request<ResetGroupOffsetsRequest>) -> Answer<ResetGroupOffsetsResponse> {
            groups::reset_offsets(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn list_transactions(&self, r: Request<ListTransactionsRequest>) -> Answer<ListTransactionsResponse> {
            let transactions = transactions::list_transactions(self.node()?, r.into_inner()).await;
            Ok(Response::new(ListTransactionsResponse { transactions }))
        }

        async fn describe_transaction(&self, r: Request<DescribeTransactionRequest>) -> Answer<Transaction> {
            transactions::describe_transaction(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn abort_transaction(&self, r: Request<AbortTransactionRequest>) -> Answer<Transaction> {
            transactions::abort_transaction(self.node()?, r.into_inner()).await.map(Response::new)
        }

        async fn local_replicas(&self, _r: Request<LocalReplicasRequest>) -> Answer<LocalReplicasResponse> {
            Ok(Response::new(peers::local_replicas(self.node()?)))
        }

        async fn partition_offsets(&self, r: Request<PartitionOffsetsRequest>) -> Answer<PartitionOffsetsResponse> {
            Ok(Response::new(peers::local_offsets(self.node()?, &r.into_inner())))
        }
    }
}
