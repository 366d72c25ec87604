//! The operator's only way into a cluster: the admin gRPC API (`strom.admin.v1`) every broker
//! serves on its internal port, through the `strom-proto` client. Nothing here knows the
//! broker's internals. A call goes to the first broker that answers (any broker serves reads
//! and forwards writes to the active controller).

use std::collections::BTreeMap;
use std::time::Duration;

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    AlterTopicRequest, CancelRebalanceRequest, CreateTopicRequest, DeleteGroupRequest, DeleteTopicRequest,
    DescribeClusterRequest, DescribeGroupRequest, DescribeTopicRequest, ListTopicsRequest, RebalanceMode as ProtoMode,
    RebalanceRequest, RemoveBrokerRequest, ResetGroupOffsetsRequest, ResetKind,
};
use tonic::transport::{Channel, Endpoint};

use crate::cluster::observed::{BrokerInfo, BrokerView, Planned};
use crate::cluster::plan::RebalanceMode;
use crate::group::plan::{GroupView, LagView, MemberView, ResetCall, ResetKindOf};
use crate::topic::plan::{Alter, TopicView};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Describe and plan calls fan out to every broker (sizes), 5 s per silent one.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// An admin call that failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("no broker answered at {addresses:?}")]
    Unreachable {
        addresses: Vec<String>,
        #[source]
        last: Option<tonic::transport::Error>,
    },
    #[error("admin call {call} to {address} failed")]
    Call {
        call: &'static str,
        address: String,
        #[source]
        status: tonic::Status,
    },
}

impl AdminError {
    /// The brokers answered that the topic, group or broker does not exist.
    pub fn not_found(&self) -> bool {
        matches!(self, AdminError::Call { status, .. } if status.code() == tonic::Code::NotFound)
    }

    /// The brokers refused the request (as opposed to not answering).
    pub fn refusal(&self) -> Option<&tonic::Status> {
        match self {
            AdminError::Call { status, .. }
                if matches!(
                    status.code(),
                    tonic::Code::FailedPrecondition | tonic::Code::InvalidArgument | tonic::Code::NotFound
                ) =>
            {
                Some(status)
            }
            _ => None,
        }
    }
}

/// A connection to one broker of a cluster.
#[derive(Debug, Clone)]
pub struct Admin {
    address: String,
    client: AdminClient<Channel>,
}

impl Admin {
    /// Connects to the first of `addresses` (host:port of brokers' internal ports) that answers.
    pub async fn connect(addresses: &[String]) -> Result<Admin, AdminError> {
        let mut last = None;
        for address in addresses {
            let Ok(endpoint) = Endpoint::from_shared(format!("http://{address}")) else { continue };
            let endpoint = endpoint.connect_timeout(CONNECT_TIMEOUT).timeout(REQUEST_TIMEOUT);
            match endpoint.connect().await {
                Ok(channel) => {
                    let client = AdminClient::new(channel).max_decoding_message_size(64 << 20);
                    return Ok(Admin { address: address.clone(), client });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(AdminError::Unreachable { addresses: addresses.to_vec(), last })
    }

    fn failed(&self, call: &'static str) -> impl FnOnce(tonic::Status) -> AdminError + '_ {
        move |status| AdminError::Call { call, address: self.address.clone(), status }
    }

    /// The cluster as the brokers see it.
    pub async fn describe(&self) -> Result<BrokerView, AdminError> {
        let mut client = self.client.clone();
        let d = client
            .describe_cluster(DescribeClusterRequest {})
            .await
            .map_err(self.failed("DescribeCluster"))?
            .into_inner();
        let topics = client
            .list_topics(ListTopicsRequest { include_internal: true })
            .await
            .map_err(self.failed("ListTopics"))?
            .into_inner()
            .topics;
        let brokers: BTreeMap<i32, BrokerInfo> = d
            .brokers
            .iter()
            .map(|b| {
                let info = BrokerInfo {
                    rack: b.rack.clone().filter(|r| !r.is_empty()),
                    live: b.live,
                    voter: b.voter,
                    replicas: b.replicas,
                    leaders: b.leaders,
                };
                (b.id, info)
            })
            .collect();
        Ok(BrokerView {
            controller: (d.controller_id >= 0).then_some(d.controller_id),
            brokers,
            partitions: d.partitions,
            under_replicated: d.under_replicated_partitions,
            offline: d.offline_partitions,
            reassigning: d.reassigning_partitions,
            max_replication_factor: topics.iter().map(|t| t.replication_factor).max().unwrap_or(0),
        })
    }

    fn request(mode: RebalanceMode, brokers: &[i32], throttle: u64, max_moves: i32) -> RebalanceRequest {
        let mode = match mode {
            RebalanceMode::AddBrokers => ProtoMode::AddBrokers,
            RebalanceMode::DrainBrokers => ProtoMode::DrainBrokers,
        };
        RebalanceRequest {
            mode: mode.into(),
            brokers: brokers.to_vec(),
            throttle_bytes_per_sec: throttle,
            max_moves: max_moves.max(0),
        }
    }

    /// A dry run: how many partitions the balancer would move, or why it cannot.
    pub async fn plan(&self, mode: RebalanceMode, brokers: &[i32]) -> Result<Planned, AdminError> {
        let mut client = self.client.clone();
        match client.plan_rebalance(Self::request(mode, brokers, 0, 0)).await {
            Ok(plan) => Ok(Planned::Moves(i32::try_from(plan.into_inner().moves.len()).unwrap_or(i32::MAX))),
            Err(status) if status.code() == tonic::Code::FailedPrecondition => {
                Ok(Planned::Impossible(status.message().to_string()))
            }
            Err(status) => Err(self.failed("PlanRebalance")(status)),
        }
    }

    /// Starts moves; the number started.
    pub async fn rebalance(
        &self,
        mode: RebalanceMode,
        brokers: &[i32],
        throttle: u64,
        max_moves: i32,
    ) -> Result<usize, AdminError> {
        let mut client = self.client.clone();
        let plan = client
            .execute_rebalance(Self::request(mode, brokers, throttle, max_moves))
            .await
            .map_err(self.failed("ExecuteRebalance"))?;
        Ok(plan.into_inner().moves.len())
    }

    pub async fn cancel_rebalance(&self) -> Result<(), AdminError> {
        let mut client = self.client.clone();
        client.cancel_rebalance(CancelRebalanceRequest {}).await.map_err(self.failed("CancelRebalance"))?;
        Ok(())
    }

    /// Removes a drained, stopped broker from the cluster's metadata.
    pub async fn remove_broker(&self, id: i32) -> Result<(), AdminError> {
        let mut client = self.client.clone();
        client.remove_broker(RemoveBrokerRequest { broker_id: id }).await.map_err(self.failed("RemoveBroker"))?;
        Ok(())
    }

    /// The topic as the brokers have it, or None when there is no such topic.
    pub async fn topic(&self, name: &str) -> Result<Option<TopicView>, AdminError> {
        let mut client = self.client.clone();
        match client.describe_topic(DescribeTopicRequest { name: name.to_string() }).await {
            Ok(t) => Ok(Some(topic_view(t.into_inner()))),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(self.failed("DescribeTopic")(status)),
        }
    }

    /// Names of every topic that is not internal.
    pub async fn topic_names(&self) -> Result<Vec<String>, AdminError> {
        let mut client = self.client.clone();
        let listed = client
            .list_topics(ListTopicsRequest { include_internal: false })
            .await
            .map_err(self.failed("ListTopics"))?
            .into_inner();
        Ok(listed.topics.into_iter().map(|t| t.name).collect())
    }

    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i32,
        configs: &BTreeMap<String, String>,
    ) -> Result<TopicView, AdminError> {
        let mut client = self.client.clone();
        let request = CreateTopicRequest {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs: configs.clone().into_iter().collect(),
        };
        let t = client.create_topic(request).await.map_err(self.failed("CreateTopic"))?;
        Ok(topic_view(t.into_inner()))
    }

    /// One AlterTopic: the broker checks every part before it changes any.
    pub async fn alter_topic(&self, name: &str, alter: &Alter) -> Result<TopicView, AdminError> {
        let mut client = self.client.clone();
        let request = AlterTopicRequest {
            name: name.to_string(),
            partitions: alter.partitions.unwrap_or(0),
            set_configs: alter.set_configs.clone().into_iter().collect(),
            delete_configs: Vec::new(),
            replication_factor: alter.replication_factor.unwrap_or(0),
        };
        let t = client.alter_topic(request).await.map_err(self.failed("AlterTopic"))?;
        Ok(topic_view(t.into_inner()))
    }

    /// Deletes the topic; true if it existed.
    pub async fn delete_topic(&self, name: &str) -> Result<bool, AdminError> {
        let mut client = self.client.clone();
        match client.delete_topic(DeleteTopicRequest { name: name.to_string() }).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
            Err(status) => Err(self.failed("DeleteTopic")(status)),
        }
    }

    /// The group's state, members and lag, or None when the brokers know nothing of it.
    pub async fn group(&self, group: &str) -> Result<Option<GroupView>, AdminError> {
        let mut client = self.client.clone();
        let g = match client.describe_group(DescribeGroupRequest { group: group.to_string(), forwarded: false }).await {
            Ok(g) => g.into_inner(),
            Err(status) if status.code() == tonic::Code::NotFound => return Ok(None),
            Err(status) => return Err(self.failed("DescribeGroup")(status)),
        };
        Ok(Some(GroupView {
            state: g.state,
            members: g
                .members
                .into_iter()
                .map(|m| MemberView { client_id: m.client_id, client_host: m.client_host })
                .collect(),
            offsets: g
                .offsets
                .into_iter()
                .map(|o| LagView {
                    topic: o.topic,
                    partition: o.partition,
                    committed: o.committed_offset,
                    log_end: o.log_end_offset,
                    lag: o.lag,
                })
                .collect(),
        }))
    }

    /// Resets the group's offsets (or, `dry_run`, says where they would go): (topic,
    /// partition, offset) of each partition.
    pub async fn reset_offsets(
        &self,
        group: &str,
        call: &ResetCall,
        dry_run: bool,
    ) -> Result<Vec<(String, i32, i64)>, AdminError> {
        let mut client = self.client.clone();
        let kind = match call.kind {
            ResetKindOf::Earliest => ResetKind::Earliest,
            ResetKindOf::Latest => ResetKind::Latest,
            ResetKindOf::Timestamp => ResetKind::Timestamp,
            ResetKindOf::Offset => ResetKind::Offset,
            ResetKindOf::ShiftBy => ResetKind::ShiftBy,
        };
        let request = ResetGroupOffsetsRequest {
            group: group.to_string(),
            topic: call.topic.clone(),
            partitions: call.partitions.clone(),
            kind: kind.into(),
            value: call.value,
            dry_run,
            forwarded: false,
        };
        let done = client.reset_group_offsets(request).await.map_err(self.failed("ResetGroupOffsets"))?;
        Ok(done.into_inner().offsets.into_iter().map(|o| (o.topic, o.partition, o.committed_offset)).collect())
    }

    /// Deletes the group and its committed offsets; true if it existed.
    pub async fn delete_group(&self, group: &str) -> Result<bool, AdminError> {
        let mut client = self.client.clone();
        match client.delete_group(DeleteGroupRequest { group: group.to_string(), forwarded: false }).await {
            Ok(_) => Ok(true),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
            Err(status) => Err(self.failed("DeleteGroup")(status)),
        }
    }
}

fn topic_view(t: strom_proto::admin::Topic) -> TopicView {
    let reassigning = t.partition_info.iter().filter(|p| !p.adding.is_empty() || !p.removing.is_empty()).count();
    // Each partition's replica count once its moves finish; -1 when partitions differ.
    let targets: std::collections::BTreeSet<usize> =
        t.partition_info.iter().map(|p| p.replicas.len().saturating_sub(p.removing.len())).collect();
    let replication_factor = match (targets.len(), targets.first()) {
        (1, Some(n)) => i32::try_from(*n).unwrap_or(i32::MAX),
        (0, _) => t.replication_factor,
        _ => -1,
    };
    TopicView {
        id: t.id,
        partitions: t.partitions,
        replication_factor,
        configs: t.configs.into_iter().collect(),
        reassigning: i32::try_from(reassigning).unwrap_or(i32::MAX),
    }
}
