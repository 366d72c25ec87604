//! The group coordinator: the classic consumer-group protocol over the [`Group`] state.
//!
//! One lock holds every group on this broker. A JoinGroup that must wait for the rebalance
//! gets a oneshot receiver; the rebalance completes when every member has rejoined (after the
//! initial delay for a group that was empty) or when its deadline passes, checked on each
//! join/leave and by [`GroupCoordinator::tick`], which the server calls every 100 ms. The
//! tick also evicts members whose session expired. Group metadata is written to
//! `__consumer_offsets` when a generation becomes Stable or Empty; offsets in `offsets.rs`.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::partition::ReplicaManager;
use crate::time::now_ms;

use super::batch;
use super::error::GroupError;
use super::records::{partition_for, RecordKey};
use super::state::{Group, GroupState, JoinOutcome, Member, SyncOutcome};

/// The internal topic holding group metadata and committed offsets.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Settings of the coordinator (Kafka's broker config names in the docs).
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// offsets.topic.num.partitions
    pub offsets_topic_partitions: i32,
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay_ms: u64,
    /// group.min.session.timeout.ms / group.max.session.timeout.ms
    pub min_session_timeout_ms: i32,
    pub max_session_timeout_ms: i32,
    /// offsets.retention.minutes, in ms
    pub offsets_retention_ms: i64,
    /// offset.metadata.max.bytes
    pub offset_metadata_max_bytes: usize,
}

/// A JoinGroup request as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// KIP-394 (JoinGroup v4+): a new member first gets an id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

/// Answer now, or wait for the rebalance.
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    Wait(oneshot::Receiver<T>),
}

/// The coordinator of every group on this broker.
#[derive(Debug)]
pub struct GroupCoordinator {
    pub(super) config: GroupConfig,
    pub(super) groups: Mutex<HashMap<String, Group>>,
    pub(super) replicas: Arc<ReplicaManager>,
    /// `__consumer_offsets` partitions this broker leads and has loaded the groups of: it
    /// coordinates exactly the groups that hash to them.
    pub(super) loaded: Mutex<BTreeSet<i32>>,
    /// Completed rebalances, for metrics.
    rebalances: AtomicU64,
    /// Offset commits appended and not yet complete (OffsetFetch waits for them).
    pub(super) in_flight: Arc<super::in_flight::InFlight>,
}

pub(super) fn join_error(e: GroupError, member_id: &str) -> JoinOutcome {
    JoinOutcome { error: Some(e), generation: -1, member_id: member_id.to_string(), ..JoinOutcome::default() }
}

impl GroupCoordinator {
    pub fn new(config: GroupConfig, replicas: Arc<ReplicaManager>) -> GroupCoordinator {
        GroupCoordinator {
            config,
            groups: Mutex::new(HashMap::new()),
            replicas,
            loaded: Mutex::new(BTreeSet::new()),
            rebalances: AtomicU64::new(0),
            in_flight: Arc::default(),
        }
    }

    /// Completed rebalances since start.
    pub fn rebalances(&self) -> u64 {
        self.rebalances.load(Ordering::Relaxed)
    }

    /// The state of every group, for metrics.
    pub fn states(&self) -> Vec<&'static str> {
        self.groups.lock().values().map(|g| g.state.name()).collect()
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    /// The `__consumer_offsets` partition that holds `group`.
    pub fn partition_of(&self, group: &str) -> i32 {
        partition_for(group, self.config.offsets_topic_partitions)
    }

    /// Whether this broker coordinates `group`: it leads the group's `__consumer_offsets`
    /// partition and has loaded it.
    pub fn hosts_partition_of(&self, group: &str) -> bool {
        self.loaded.lock().contains(&self.partition_of(group))
    }

    /// Refuses a request for a group this broker does not coordinate (the client then asks
    /// FindCoordinator again).
    pub fn check_coordinator(&self, group: &str) -> Result<(), GroupError> {
        if self.hosts_partition_of(group) {
            Ok(())
        } else {
            Err(GroupError::NotCoordinator)
        }
    }

    /// Waits until every in-sync replica of `group`'s offsets partition has the records
    /// through `last_offset` (and at least min.insync.replicas are in sync).
    pub(super) async fn wait_replicated(
        &self,
        group: &str,
        last_offset: i64,
        timeout: Duration,
    ) -> Result<(), GroupError> {
        let Some(partition) = self.replicas.leader(OFFSETS_TOPIC, self.partition_of(group)) else {
            return Err(GroupError::NotCoordinator);
        };
        let min_insync = partition.config().min_insync_replicas;
        partition.wait_for_replication(last_offset, min_insync, timeout).await.map_err(|e| match e {
            crate::partition::PartitionError::NotLeader { .. } => GroupError::NotCoordinator,
            crate::partition::PartitionError::ReplicationTimeout { .. } => GroupError::ReplicationTimeout,
            other => GroupError::Storage(other.to_string()),
        })
    }

    /// Appends records for `group` to its `__consumer_offsets` partition; returns the offset
    /// of the last.
    pub(super) fn persist(&self, group: &str, records: &[(Bytes, Option<Bytes>)]) -> Result<i64, GroupError> {
        let partition = self
            .replicas
            .get(OFFSETS_TOPIC, partition_for(group, self.config.offsets_topic_partitions))
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = now_ms();
        partition.append(&batch::encode(records, now), -1, now).map(|a| a.last_offset).map_err(|e| {
            tracing::error!(group, error = %e, "writing to __consumer_offsets failed");
            GroupError::Storage(e.to_string())
        })
    }

    /// Appends `records` of `group` as part of a producer's transaction (its marker decides);
    /// returns the offset of the last.
    pub(super) fn persist_transactional(
        &self,
        group: &str,
        records: &[(Bytes, Option<Bytes>)],
        producer_id: i64,
        producer_epoch: i16,
    ) -> Result<i64, GroupError> {
        let partition = self
            .replicas
            .get(OFFSETS_TOPIC, partition_for(group, self.config.offsets_topic_partitions))
            .ok_or(GroupError::CoordinatorNotAvailable)?;
        let now = now_ms();
        let batch = batch::encode_transactional(records, now, producer_id, producer_epoch);
        partition.append_for_coordinator(&batch, now).map(|a| a.last_offset).map_err(|e| {
            tracing::error!(group, error = %e, "writing transactional offsets to __consumer_offsets failed");
            GroupError::Storage(e.to_string())
        })
    }

    /// Whether an open transaction committed an offset of `topic`-`partition` for `group`.
    pub fn has_pending_txn_offsets(&self, group: &str, topic: &str, partition: i32) -> bool {
        let key = (topic.to_string(), partition);
        self.groups.lock().get(group).is_some_and(|g| g.pending_txn.values().any(|o| o.contains_key(&key)))
    }

    /// A transaction marker of `producer_id` was written to `__consumer_offsets` partition
    /// `partition` (and replicated): its offsets there are applied on commit, dropped on abort.
    pub fn complete_txn(&self, partition: i32, producer_id: i64, commit: bool) {
        let partitions = self.config.offsets_topic_partitions;
        let mut groups = self.groups.lock();
        for group in groups.values_mut().filter(|g| partition_for(&g.id, partitions) == partition) {
            if let Some(offsets) = group.pending_txn.remove(&producer_id) {
                if commit {
                    for (partition, committed) in offsets {
                        group.apply_offset(partition, committed);
                    }
                }
            }
        }
    }

    fn persist_group(&self, group: &Group) {
        let key = RecordKey::Group { group: group.id.clone() }.encode();
        let value = group.to_value(now_ms()).encode();
        if let Err(e) = self.persist(&group.id, &[(key, Some(value))]) {
            tracing::warn!(group = %group.id, error = %e, "group metadata not persisted");
        }
    }

    pub fn join(&self, req: JoinRequest) -> Reply<JoinOutcome> {
        if req.group_id.is_empty() {
            return Reply::Now(join_error(GroupError::InvalidGroupId, &req.member_id));
        }
        if req.session_timeout_ms < self.config.min_session_timeout_ms
            || req.session_timeout_ms > self.config.max_session_timeout_ms
        {
            return Reply::Now(join_error(GroupError::InvalidSessionTimeout, &req.member_id));
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Reply::Now(join_error(GroupError::InconsistentGroupProtocol, &req.member_id));
        }
        if let Err(e) = self.check_coordinator(&req.group_id) {
            // Not (or not yet) the leader of the group's offsets partition: a group formed here
            // could not persist its metadata, so the member looks for its coordinator again.
            return Reply::Now(join_error(e, &req.member_id));
        }
        let now = Instant::now();
        let now_ms = now_ms();
        let mut groups = self.groups.lock();
        let group = groups.entry(req.group_id.clone()).or_insert_with(|| Group::new(&req.group_id, now_ms));
        if group.state == GroupState::Dead {
            return Reply::Now(join_error(GroupError::CoordinatorNotAvailable, &req.member_id));
        }
        if !group.supports(&req.protocol_type, &req.protocols) {
            return Reply::Now(join_error(GroupError::InconsistentGroupProtocol, &req.member_id));
        }
        let mut member_id = req.member_id.clone();
        if member_id.is_empty() {
            // A static member that returns takes over its instance's membership.
            if let Some(instance) = &req.group_instance_id {
                if let Some(old) = group.static_members.get(instance).cloned() {
                    let new_id = format!("{}-{}", instance, uuid::Uuid::new_v4());
                    if let Some(mut m) = group.members.remove(&old) {
                        if let Some(tx) = m.pending_join.take() {
                            let _ = tx.send(join_error(GroupError::FencedInstanceId, &old));
                        }
                        if let Some(tx) = m.pending_sync.take() {
                            let _ = tx
                                .send(SyncOutcome { error: Some(GroupError::FencedInstanceId), ..Default::default() });
                        }
                        m.member_id = new_id.clone();
                        group.members.insert(new_id.clone(), m);
                        if group.leader.as_deref() == Some(old.as_str()) {
                            group.leader = Some(new_id.clone());
                        }
                    }
                    group.static_members.insert(instance.clone(), new_id.clone());
                    member_id = new_id;
                    let unchanged = group.members.get(&member_id).is_some_and(|m| m.protocols == req.protocols);
                    if group.state == GroupState::Stable && unchanged {
                        // KIP-345: a static member that returns with the same subscription keeps its
                        // assignment; no rebalance. Its new member id is persisted.
                        if let Some(m) = group.members.get_mut(&member_id) {
                            m.last_seen = now;
                        }
                        self.persist_group(group);
                        let leader = group.leader.clone().unwrap_or_default();
                        let protocol = group.protocol_name.clone().unwrap_or_default();
                        let members = if leader == member_id {
                            group
                                .members
                                .values()
                                .map(|m| (m.member_id.clone(), m.group_instance_id.clone(), m.metadata_for(&protocol)))
                                .collect()
                        } else {
                            Vec::new()
                        };
                        return Reply::Now(JoinOutcome {
                            error: None,
                            generation: group.generation,
                            protocol_type: group.protocol_type.clone(),
                            protocol_name: group.protocol_name.clone(),
                            leader,
                            member_id,
                            members,
                        });
                    }
                    return self.join_known(group, &req, member_id, now, now_ms);
                }
            }
            let new_id = format!(
                "{}-{}",
                if req.client_id.is_empty() { "member" } else { &req.client_id },
                uuid::Uuid::new_v4()
            );
            if req.require_known_member_id && req.group_instance_id.is_none() {
                let deadline = now + Duration::from_millis(u64::try_from(req.session_timeout_ms).unwrap_or(0));
                group.pending_members.insert(new_id.clone(), deadline);
                return Reply::Now(join_error(GroupError::MemberIdRequired, &new_id));
            }
            member_id = new_id;
            return self.add_member(group, &req, member_id, now, now_ms);
        }
        if group.pending_members.remove(&member_id).is_some() {
            return self.add_member(group, &req, member_id, now, now_ms);
        }
        if !group.members.contains_key(&member_id) {
            return Reply::Now(join_error(GroupError::UnknownMemberId, &member_id));
        }
        if let Some(instance) = &req.group_instance_id {
            if group.static_members.get(instance).is_some_and(|current| *current != member_id) {
                return Reply::Now(join_error(GroupError::FencedInstanceId, &member_id));
            }
        }
        self.join_known(group, &req, member_id, now, now_ms)
    }

    fn add_member(
        &self,
        group: &mut Group,
        req: &JoinRequest,
        member_id: String,
        now: Instant,
        now_ms: i64,
    ) -> Reply<JoinOutcome> {
        let (tx, rx) = oneshot::channel();
        if let Some(instance) = &req.group_instance_id {
            group.static_members.insert(instance.clone(), member_id.clone());
        }
        if group.members.is_empty() {
            group.protocol_type = Some(req.protocol_type.clone());
        }
        group.members.insert(
            member_id.clone(),
            Member {
                member_id: member_id.clone(),
                group_instance_id: req.group_instance_id.clone(),
                client_id: req.client_id.clone(),
                client_host: req.client_host.clone(),
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                protocols: req.protocols.clone(),
                assignment: Bytes::new(),
                last_seen: now,
                pending_join: Some(tx),
                pending_sync: None,
            },
        );
        tracing::info!(group = %group.id, member = %member_id, "member joined");
        self.prepare_rebalance(group, now, now_ms);
        self.maybe_complete_join(group, now, now_ms);
        Reply::Wait(rx)
    }

    fn join_known(
        &self,
        group: &mut Group,
        req: &JoinRequest,
        member_id: String,
        now: Instant,
        now_ms: i64,
    ) -> Reply<JoinOutcome> {
        let Some(member) = group.members.get_mut(&member_id) else {
            return Reply::Now(join_error(GroupError::UnknownMemberId, &member_id));
        };
        member.last_seen = now;
        let unchanged = member.protocols == req.protocols;
        member.protocols = req.protocols.clone();
        member.session_timeout_ms = req.session_timeout_ms;
        member.rebalance_timeout_ms = req.rebalance_timeout_ms;
        let is_leader = group.leader.as_deref() == Some(member_id.as_str());
        if matches!(group.state, GroupState::Stable | GroupState::CompletingRebalance) && unchanged && !is_leader {
            // A follower rejoining with the same metadata gets the current generation again.
            return Reply::Now(JoinOutcome {
                error: None,
                generation: group.generation,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                leader: group.leader.clone().unwrap_or_default(),
                member_id,
                members: Vec::new(),
            });
        }
        let (tx, rx) = oneshot::channel();
        if let Some(m) = group.members.get_mut(&member_id) {
            if let Some(old) = m.pending_join.replace(tx) {
                let _ = old.send(join_error(GroupError::RebalanceInProgress, &member_id));
            }
        }
        self.prepare_rebalance(group, now, now_ms);
        self.maybe_complete_join(group, now, now_ms);
        Reply::Wait(rx)
    }

    /// Starts a rebalance (members learn of it from Heartbeat/SyncGroup errors).
    pub(super) fn prepare_rebalance(&self, group: &mut Group, now: Instant, now_ms: i64) {
        if group.state == GroupState::PreparingRebalance {
            if let Some(not_before) = group.join_not_before {
                // Kafka's InitialDelayedJoin: each new member extends the delay, within the deadline.
                let extended = now + Duration::from_millis(self.config.initial_rebalance_delay_ms);
                group.join_not_before =
                    Some(extended.min(group.rebalance_deadline.unwrap_or(extended)).max(not_before));
            }
            return;
        }
        if group.state == GroupState::CompletingRebalance {
            for m in group.members.values_mut() {
                if let Some(tx) = m.pending_sync.take() {
                    let _ = tx.send(SyncOutcome { error: Some(GroupError::RebalanceInProgress), ..Default::default() });
                }
            }
        }
        let timeout = group.members.values().map(|m| m.rebalance_timeout_ms.max(0)).max().unwrap_or(0);
        group.rebalance_deadline = Some(now + Duration::from_millis(u64::try_from(timeout).unwrap_or(0)));
        group.join_not_before = (group.state == GroupState::Empty)
            .then(|| now + Duration::from_millis(self.config.initial_rebalance_delay_ms));
        tracing::info!(group = %group.id, generation = group.generation, "preparing rebalance");
        group.set_state(GroupState::PreparingRebalance, now_ms);
    }

    /// Completes the rebalance if every member rejoined (and the initial delay passed) or the
    /// deadline passed (dropping members that did not rejoin).
    pub(super) fn maybe_complete_join(&self, group: &mut Group, now: Instant, now_ms: i64) {
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        let delay_over = group.join_not_before.is_none_or(|t| now >= t);
        let deadline_passed = group.rebalance_deadline.is_some_and(|t| now >= t);
        if !(deadline_passed || delay_over && group.all_members_joined()) {
            return;
        }
        let missing: Vec<String> =
            group.members.values().filter(|m| m.pending_join.is_none()).map(|m| m.member_id.clone()).collect();
        for id in missing {
            tracing::info!(group = %group.id, member = %id, "member did not rejoin in time; removed");
            remove_member(group, &id);
        }
        group.generation += 1;
        self.rebalances.fetch_add(1, Ordering::Relaxed);
        group.rebalance_deadline = None;
        group.join_not_before = None;
        if group.members.is_empty() {
            group.protocol_name = None;
            group.leader = None;
            group.set_state(GroupState::Empty, now_ms);
            self.persist_group(group);
            tracing::info!(group = %group.id, generation = group.generation, "group is empty");
            return;
        }
        group.protocol_name = group.select_protocol();
        if group.leader.as_ref().is_none_or(|l| !group.members.contains_key(l)) {
            group.leader = group.members.keys().next().cloned();
        }
        group.set_state(GroupState::CompletingRebalance, now_ms);
        let protocol = group.protocol_name.clone().unwrap_or_default();
        let all: Vec<(String, Option<String>, Bytes)> = group
            .members
            .values()
            .map(|m| (m.member_id.clone(), m.group_instance_id.clone(), m.metadata_for(&protocol)))
            .collect();
        let leader = group.leader.clone().unwrap_or_default();
        tracing::info!(group = %group.id, generation = group.generation, members = all.len(), %protocol, %leader, "rebalance: joined");
        for m in group.members.values_mut() {
            if let Some(tx) = m.pending_join.take() {
                let _ = tx.send(JoinOutcome {
                    error: None,
                    generation: group.generation,
                    protocol_type: group.protocol_type.clone(),
                    protocol_name: group.protocol_name.clone(),
                    leader: leader.clone(),
                    member_id: m.member_id.clone(),
                    members: if m.member_id == leader { all.clone() } else { Vec::new() },
                });
            }
        }
    }

    pub fn sync(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        assignments: Vec<(String, Bytes)>,
    ) -> Reply<SyncOutcome> {
        let err = |e| Reply::Now(SyncOutcome { error: Some(e), ..Default::default() });
        if let Err(e) = self.check_coordinator(group_id) {
            return err(e);
        }
        let now = Instant::now();
        let now_ms = now_ms();
        let mut groups = self.groups.lock();
        let Some(group) = groups.get_mut(group_id) else { return err(GroupError::UnknownMemberId) };
        let Some(member) = group.members.get_mut(member_id) else { return err(GroupError::UnknownMemberId) };
        member.last_seen = now;
        if generation != group.generation {
            return err(GroupError::IllegalGeneration);
        }
        match group.state {
            GroupState::PreparingRebalance => err(GroupError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => err(GroupError::UnknownMemberId),
            GroupState::Stable => Reply::Now(SyncOutcome {
                error: None,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                assignment: member.assignment.clone(),
            }),
            GroupState::CompletingRebalance => {
                let (tx, rx) = oneshot::channel();
                member.pending_sync = Some(tx);
                if group.leader.as_deref() == Some(member_id) {
                    let mut given: HashMap<String, Bytes> = assignments.into_iter().collect();
                    for m in group.members.values_mut() {
                        m.assignment = given.remove(&m.member_id).unwrap_or_default();
                    }
                    group.set_state(GroupState::Stable, now_ms);
                    self.persist_group(group);
                    tracing::info!(group = %group.id, generation = group.generation, "rebalance: stable");
                    for m in group.members.values_mut() {
                        if let Some(tx) = m.pending_sync.take() {
                            let _ = tx.send(SyncOutcome {
                                error: None,
                                protocol_type: group.protocol_type.clone(),
                                protocol_name: group.protocol_name.clone(),
                                assignment: m.assignment.clone(),
                            });
                        }
                    }
                }
                Reply::Wait(rx)
            }
        }
    }

    pub fn heartbeat(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        instance: Option<&str>,
    ) -> Result<(), GroupError> {
        self.check_coordinator(group_id)?;
        let mut groups = self.groups.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        if let Some(instance) = instance {
            if group.static_members.get(instance).is_some_and(|current| current != member_id) {
                return Err(GroupError::FencedInstanceId);
            }
        }
        let member = group.members.get_mut(member_id).ok_or(GroupError::UnknownMemberId)?;
        member.last_seen = Instant::now();
        if generation != group.generation {
            return Err(GroupError::IllegalGeneration);
        }
        match group.state {
            GroupState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            GroupState::Empty | GroupState::Dead => Err(GroupError::UnknownMemberId),
            GroupState::CompletingRebalance | GroupState::Stable => Ok(()),
        }
    }

    /// LeaveGroup for each (member id, instance id); returns one result per member.
    pub fn leave(
        &self,
        group_id: &str,
        members: &[(String, Option<String>)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.check_coordinator(group_id)?;
        let now = Instant::now();
        let now_ms = now_ms();
        let mut groups = self.groups.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::UnknownMemberId)?;
        let mut results = Vec::new();
        let mut left = false;
        for (member_id, instance) in members {
            let id = match (member_id.is_empty(), instance) {
                (true, Some(instance)) => group.static_members.get(instance).cloned().unwrap_or_default(),
                _ => member_id.clone(),
            };
            if let (Some(instance), false) = (instance, member_id.is_empty()) {
                if group.static_members.get(instance).is_some_and(|current| *current != id) {
                    results.push(Err(GroupError::FencedInstanceId));
                    continue;
                }
            }
            if group.members.contains_key(&id) {
                remove_member(group, &id);
                tracing::info!(group = %group_id, member = %id, "member left");
                left = true;
                results.push(Ok(()));
            } else {
                results.push(Err(GroupError::UnknownMemberId));
            }
        }
        if left {
            self.on_membership_change(group, now, now_ms);
        }
        Ok(results)
    }

    fn on_membership_change(&self, group: &mut Group, now: Instant, now_ms: i64) {
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => self.prepare_rebalance(group, now, now_ms),
            _ => {}
        }
        self.maybe_complete_join(group, now, now_ms);
    }

    /// Timers: expired sessions, rebalance deadlines, pending member ids, offset retention.
    pub fn tick(&self) {
        let now = Instant::now();
        let now_ms = now_ms();
        let mut groups = self.groups.lock();
        let mut expired_groups = Vec::new();
        for group in groups.values_mut() {
            group.pending_members.retain(|_, deadline| *deadline > now);
            let expired: Vec<String> = group
                .members
                .values()
                .filter(|m| m.pending_join.is_none() && m.expired(now))
                .map(|m| m.member_id.clone())
                .collect();
            for id in &expired {
                tracing::info!(group = %group.id, member = %id, "session timed out; member removed");
                remove_member(group, id);
            }
            if !expired.is_empty() {
                self.on_membership_change(group, now, now_ms);
            } else {
                self.maybe_complete_join(group, now, now_ms);
            }
            if group.state == GroupState::Empty && now_ms - group.state_since_ms > self.config.offsets_retention_ms {
                expired_groups.push(group.id.clone());
            }
        }
        for id in expired_groups {
            if let Some(group) = groups.get(&id) {
                tracing::info!(group = %id, "offsets expired after offsets.retention.minutes with no members");
                if self.write_tombstones(group).is_ok() {
                    groups.remove(&id);
                }
            }
        }
    }
}

/// Removes a member, answering anything it waits for.
pub(super) fn remove_member(group: &mut Group, member_id: &str) {
    if let Some(mut m) = group.members.remove(member_id) {
        if let Some(tx) = m.pending_join.take() {
            let _ = tx.send(join_error(GroupError::UnknownMemberId, member_id));
        }
        if let Some(tx) = m.pending_sync.take() {
            let _ = tx.send(SyncOutcome { error: Some(GroupError::UnknownMemberId), ..Default::default() });
        }
        if let Some(instance) = &m.group_instance_id {
            if group.static_members.get(instance).is_some_and(|id| id == member_id) {
                group.static_members.remove(instance);
            }
        }
    }
    if group.leader.as_deref() == Some(member_id) {
        group.leader = None;
    }
}
