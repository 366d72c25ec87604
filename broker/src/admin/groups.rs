//! Consumer groups through the admin API: list (every broker's coordinated groups), describe
//! with lag per partition, delete, and reset committed offsets (earliest, latest, timestamp,
//! offset, shift-by) while the group has no members. A call for one group is carried out by
//! its coordinator (the leader of its `__consumer_offsets` partition); another broker passes
//! it on, once.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Buf;
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use strom_proto::admin::{
    DeleteGroupRequest, DescribeGroupRequest, Group, GroupListing, GroupMember, GroupOffset, ListGroupsRequest,
    ResetGroupOffsetsRequest, ResetGroupOffsetsResponse, ResetKind, TopicPartition,
};
use tonic::Status;

use super::peers::{self, PEER_TIMEOUT};
use crate::group::offsets::OffsetCommit;
use crate::group::{GroupError, GroupState, OFFSETS_TOPIC};
use crate::node::Node;

/// The coordinator of `group` as this broker's metadata names it.
fn coordinator_of(node: &Node, group: &str) -> Result<i32, Status> {
    if group.is_empty() {
        return Err(Status::invalid_argument("the group id is empty"));
    }
    let image = node.catalog.image();
    let partition = node.groups.partition_of(group);
    let leader =
        image.topic(OFFSETS_TOPIC).and_then(|t| t.partition(partition)).map(|p| p.leader).ok_or_else(|| {
            Status::not_found(format!("group {group} does not exist (no group has committed anything yet)"))
        })?;
    if leader < 0 || !image.is_live(leader) {
        return Err(Status::unavailable(format!("the coordinator of group {group} is not available right now")));
    }
    Ok(leader)
}

fn group_status(group: &str, e: GroupError) -> Status {
    match e {
        GroupError::GroupIdNotFound => Status::not_found(format!("group {group} does not exist")),
        GroupError::NonEmptyGroup => Status::failed_precondition(format!("group {group} still has members")),
        GroupError::NotCoordinator | GroupError::CoordinatorNotAvailable => {
            Status::unavailable(format!("the coordinator of group {group} moved; try again"))
        }
        other => Status::internal(format!("group {group}: {other}")),
    }
}

/// Where a one-group call runs: here (None), or the coordinator's client to forward to.
fn route(
    node: &Node,
    group: &str,
    forwarded: bool,
) -> Result<Option<strom_proto::admin::admin_client::AdminClient<tonic::transport::Channel>>, Status> {
    let coordinator = coordinator_of(node, group)?;
    if coordinator == node.id() {
        return Ok(None);
    }
    if forwarded {
        return Err(Status::unavailable(format!("the coordinator of group {group} moved; try again")));
    }
    peers::client_for(node, coordinator)
        .map(Some)
        .ok_or_else(|| Status::unavailable(format!("broker {coordinator}, the coordinator of {group}, is unknown")))
}

pub async fn list_groups(node: &Node, r: ListGroupsRequest) -> Vec<GroupListing> {
    let local = || {
        node.groups
            .list()
            .into_iter()
            .map(|(group, protocol_type, state)| GroupListing {
                group,
                state: state.name().to_string(),
                protocol_type,
                coordinator: node.id(),
            })
            .collect::<Vec<_>>()
    };
    if r.local_only {
        return local();
    }
    let ids: Vec<i32> = node.catalog.image().live_brokers().map(|b| b.id).filter(|b| *b != node.id()).collect();
    let calls = ids.into_iter().map(|id| async move {
        let mut client = peers::client_for(node, id)?;
        let call = client.list_groups(ListGroupsRequest { local_only: true });
        match tokio::time::timeout(PEER_TIMEOUT, call).await {
            Ok(Ok(resp)) => Some(resp.into_inner().groups),
            _ => None,
        }
    });
    let mut all = local();
    for groups in futures::future::join_all(calls).await.into_iter().flatten() {
        all.extend(groups);
    }
    all.sort_by(|a, b| a.group.cmp(&b.group));
    all
}

fn decode_assignment(bytes: &[u8]) -> Vec<TopicPartition> {
    let mut buf = bytes::Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    let Ok(assignment) = ConsumerProtocolAssignment::decode(&mut buf, version.clamp(0, 3)) else { return Vec::new() };
    assignment
        .assigned_partitions
        .into_iter()
        .flat_map(|tp| {
            let topic = tp.topic.0.to_string();
            tp.partitions.into_iter().map(move |partition| TopicPartition { topic: topic.clone(), partition })
        })
        .collect()
}

pub async fn describe_group(node: &Node, r: DescribeGroupRequest) -> Result<Group, Status> {
    if let Some(mut client) = route(node, &r.group, r.forwarded)? {
        let call = client.describe_group(DescribeGroupRequest { group: r.group.clone(), forwarded: true });
        return Ok(call.await?.into_inner());
    }
    let description = node.groups.describe(&r.group);
    let committed = node.groups.fetch_offsets(&r.group, None);
    if description.is_none() && committed.is_empty() {
        return Err(Status::not_found(format!("group {} does not exist", r.group)));
    }
    let partitions: Vec<(String, i32)> = committed.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
    let ends: BTreeMap<(String, i32), i64> = peers::offsets(node, &partitions, ResetKind::Latest, 0)
        .await
        .into_iter()
        .map(|(t, p, o)| ((t, p), o))
        .collect();
    let offsets = committed
        .into_iter()
        .filter_map(|(topic, partition, value)| {
            let committed_offset = value?.offset;
            let log_end_offset = ends.get(&(topic.clone(), partition)).copied().unwrap_or(-1);
            let lag = if log_end_offset >= 0 { (log_end_offset - committed_offset).max(0) } else { -1 };
            Some(GroupOffset { topic, partition, committed_offset, log_end_offset, lag })
        })
        .collect();
    let (state, protocol_type, protocol, members) = match description {
        Some(d) => (
            d.state.name().to_string(),
            d.protocol_type,
            d.protocol,
            d.members
                .into_iter()
                .map(|m| GroupMember {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    assignment: decode_assignment(&m.assignment),
                })
                .collect(),
        ),
        None => (GroupState::Empty.name().to_string(), String::new(), String::new(), Vec::new()),
    };
    Ok(Group { group: r.group, state, protocol_type, protocol, coordinator: node.id(), members, offsets })
}

pub async fn delete_group(node: &Node, r: DeleteGroupRequest) -> Result<(), Status> {
    if let Some(mut client) = route(node, &r.group, r.forwarded)? {
        client.delete_group(DeleteGroupRequest { group: r.group.clone(), forwarded: true }).await?;
        return Ok(());
    }
    node.groups.delete_group(&r.group).map_err(|e| group_status(&r.group, e))
}

pub async fn reset_offsets(node: &Node, r: ResetGroupOffsetsRequest) -> Result<ResetGroupOffsetsResponse, Status> {
    // The request is checked wherever it arrives, before it is passed on.
    if r.group.is_empty() {
        return Err(Status::invalid_argument("the group id is empty"));
    }
    let kind =
        ResetKind::try_from(r.kind).map_err(|_| Status::invalid_argument(format!("unknown reset kind {}", r.kind)))?;
    if kind == ResetKind::Offset && r.value < 0 {
        return Err(Status::invalid_argument(format!("offset {} is negative", r.value)));
    }
    if kind == ResetKind::Timestamp && r.value < 0 {
        return Err(Status::invalid_argument(format!("timestamp {} is before 1970", r.value)));
    }
    let topic =
        node.catalog.get(&r.topic).ok_or_else(|| Status::not_found(format!("topic {} does not exist", r.topic)))?;
    let unknown: BTreeSet<i32> = r.partitions.iter().copied().filter(|p| topic.partition(*p).is_none()).collect();
    if !unknown.is_empty() {
        return Err(Status::invalid_argument(format!("topic {} has no partition(s) {unknown:?}", r.topic)));
    }
    // A group that never committed may have no __consumer_offsets to live in yet (a fresh
    // cluster creates it at the first FindCoordinator): create it, as Kafka's tool would.
    if !r.forwarded {
        node.ensure_offsets_topic()
            .await
            .map_err(|e| Status::unavailable(format!("creating __consumer_offsets for group {}: {e}", r.group)))?;
    }
    if let Some(mut client) = route(node, &r.group, r.forwarded)? {
        let forwarded = ResetGroupOffsetsRequest { forwarded: true, ..r };
        return Ok(client.reset_group_offsets(forwarded).await?.into_inner());
    }
    if let Some(d) = node.groups.describe(&r.group) {
        if !d.members.is_empty() {
            return Err(Status::failed_precondition(format!(
                "group {} has {} live member(s) ({}); stop them before resetting its offsets",
                r.group,
                d.members.len(),
                d.state.name()
            )));
        }
    }
    let partitions: Vec<i32> =
        if r.partitions.is_empty() { (0..topic.partition_count()).collect() } else { r.partitions.clone() };
    let wanted: Vec<(String, i32)> = partitions.iter().map(|p| (r.topic.clone(), *p)).collect();
    let earliest = peers::offsets(node, &wanted, ResetKind::Earliest, 0).await;
    let latest = peers::offsets(node, &wanted, ResetKind::Latest, 0).await;
    let at_time = if kind == ResetKind::Timestamp {
        peers::offsets(node, &wanted, ResetKind::Timestamp, r.value).await
    } else {
        vec![]
    };
    let lookup = |list: &[(String, i32, i64)], p: i32| list.iter().find(|(_, q, _)| *q == p).map_or(-1, |(_, _, o)| *o);
    let committed = node.groups.fetch_offsets(&r.group, Some(vec![(r.topic.clone(), partitions.clone())]));
    let mut commits = Vec::new();
    let mut out = Vec::new();
    for p in partitions {
        let (low, high) = (lookup(&earliest, p), lookup(&latest, p));
        if low < 0 || high < 0 {
            return Err(Status::unavailable(format!("the leader of {}-{p} did not answer", r.topic)));
        }
        let current = committed.iter().find(|(_, q, _)| *q == p).and_then(|(_, _, v)| v.as_ref()).map(|v| v.offset);
        let target = match kind {
            ResetKind::Earliest => low,
            ResetKind::Latest => high,
            ResetKind::Timestamp => match lookup(&at_time, p) {
                -1 => return Err(Status::unavailable(format!("the leader of {}-{p} did not answer", r.topic))),
                found => found,
            },
            ResetKind::Offset => r.value,
            ResetKind::ShiftBy => current.unwrap_or(low).saturating_add(r.value),
        }
        .clamp(low, high);
        commits.push(OffsetCommit {
            topic: r.topic.clone(),
            partition: p,
            offset: target,
            leader_epoch: -1,
            metadata: String::new(),
        });
        out.push(GroupOffset {
            topic: r.topic.clone(),
            partition: p,
            committed_offset: target,
            log_end_offset: high,
            lag: high - target,
        });
    }
    if !r.dry_run {
        let pending = node.groups.commit_offsets(&r.group, -1, "", commits).map_err(|e| match e {
            GroupError::UnknownMemberId => {
                Status::failed_precondition(format!("group {} has live members; stop them first", r.group))
            }
            other => group_status(&r.group, other),
        })?;
        let results = node
            .groups
            .complete_commit(pending, std::time::Duration::from_secs(10))
            .await
            .map_err(|e| group_status(&r.group, e))?;
        if let Some(Err(e)) = results.into_iter().find(Result::is_err) {
            return Err(group_status(&r.group, e));
        }
        tracing::info!(group = %r.group, topic = %r.topic, ?kind, "reset group offsets");
    }
    Ok(ResetGroupOffsetsResponse { offsets: out })
}
