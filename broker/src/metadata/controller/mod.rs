//! The controller: the raft leader's role. It is the only proposer of metadata commands, and
//! it decides what they say — broker epochs, topic ids, replica placement, new leaders.
//!
//! - this file: [`Controller`], the decisions behind each request, serialised by one lock and
//!   validated against an image that includes everything committed (`ensure_linearizable`
//!   before each write), and [`Controller::run`], the loop that notices activation, names a
//!   new cluster, fences brokers whose sessions ran out, and notes which quorum members are
//!   caught up (`super::contacts`).
//! - [`service`]: `strom.controller.v1` over gRPC, which every broker calls.
//! - [`sessions`]: heartbeat deadlines (leader-local state).
//! - `topics`: the topic writes (create with placement, delete, grow, configs).
//! - [`moves`]: reassignments (start, complete, cancel), leader elections on request, broker
//!   removal, the replication throttle.
//! - [`placement`]: replicas for new partitions (pure).
//! - [`balancer`]: target assignments that even out brokers and drain some (pure).
//! - [`reassignment`]: the steps of a reassignment (pure).
//! - [`elections`]: leader changes when brokers are fenced and unfenced (pure).

pub mod balancer;
pub mod elections;
pub mod moves;
pub mod placement;
pub mod reassignment;
pub mod service;
pub mod sessions;
mod topics;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState};
use parking_lot::Mutex;
use tokio::sync::watch;
use uuid::Uuid;

use super::command::{CommandResult, Endpoint, MetadataCommand, PartitionChange};
use super::contacts::Contacts;
use super::image::MetadataImage;
use super::quorum::VoterSet;
use super::types::{broker_id, node_id, Raft};
use crate::shutdown::Shutdown;
use sessions::Sessions;

/// Producer ids handed to a broker at a time.
pub const PRODUCER_ID_BLOCK: i32 = 1000;

/// Why a controller request failed; the code travels to the caller over gRPC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ControllerError {
    pub code: ErrorKind,
    pub message: String,
}

/// The kinds of [`ControllerError`]: the wire enum `strom.controller.v1.ErrorCode` itself.
pub use strom_proto::controller::ErrorCode as ErrorKind;

fn fail<T>(code: ErrorKind, message: impl Into<String>) -> Result<T, ControllerError> {
    Err(ControllerError { code, message: message.into() })
}

/// Settings of the controller role.
#[derive(Debug, Clone)]
pub struct ControllerConfig {
    pub me: i32,
    pub voters: VoterSet,
    /// `broker.session.timeout.ms`.
    pub session_timeout: Duration,
    /// `leader.imbalance.check.interval.seconds`, if `auto.leader.rebalance.enable`: how often
    /// leadership goes back to preferred replicas.
    pub preferred_leader_interval: Option<Duration>,
    /// The cluster's `min.insync.replicas`, for topics without their own (eligible leader
    /// replicas, [`elections`]).
    pub default_min_insync: i32,
}

/// An ISR change a partition leader asks for.
#[derive(Debug, Clone)]
pub struct AlterPartition {
    pub broker: i32,
    pub broker_epoch: u64,
    pub topic_id: Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// A broker's registration request.
#[derive(Debug, Clone)]
pub struct Registration {
    pub id: i32,
    pub incarnation: Uuid,
    pub kafka: Endpoint,
    pub internal_addr: String,
    pub rack: Option<String>,
}

/// A topic to create.
#[derive(Debug, Clone)]
pub struct TopicSpec {
    pub name: String,
    pub partitions: i32,
    pub replication_factor: i16,
    pub configs: BTreeMap<String, String>,
    /// Manual replicas per partition; empty lets the controller place them.
    pub assignment: Vec<Vec<i32>>,
    pub validate_only: bool,
}

/// A created (or validated) topic.
#[derive(Debug, Clone)]
pub struct CreatedTopic {
    pub id: Option<Uuid>,
    pub partitions: i32,
    pub replication_factor: i16,
    pub index: u64,
}

/// What a heartbeat learned.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatReply {
    pub fenced: bool,
    pub index: u64,
}

/// The quorum as this node sees it.
#[derive(Debug, Clone)]
pub struct QuorumDescription {
    pub cluster_id: Option<String>,
    pub leader: Option<i32>,
    pub term: u64,
    pub voters: Vec<i32>,
    pub learners: Vec<i32>,
    pub registered: Vec<i32>,
    pub applied_index: u64,
    /// What only the raft leader knows (None on other nodes).
    pub replication: Option<QuorumReplication>,
}

/// The leader's view of its log and every member's (KRaft's DescribeQuorum figures, in raft
/// log positions: an "offset" is the index after the last entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumReplication {
    pub log_end_offset: i64,
    /// Entries applied by the leader, all of them committed.
    pub high_watermark: i64,
    pub members: Vec<QuorumMember>,
}

/// One member of the quorum as its leader sees it (the leader itself included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuorumMember {
    pub id: i32,
    /// -1 while the leader has not matched this member's log yet.
    pub log_end_offset: i64,
    /// When the member last answered the leader (ms since the epoch; -1: not in this term).
    pub last_fetch_ms: i64,
    /// When the member last had the leader's log (ms since the epoch; -1: not in this term).
    pub last_caught_up_ms: i64,
}

/// The controller role of one broker (active only while its raft is leader).
pub struct Controller {
    raft: Raft,
    image: watch::Receiver<Arc<MetadataImage>>,
    config: ControllerConfig,
    sessions: Mutex<Sessions>,
    /// One decision at a time: each validates against the image the previous one produced.
    write_lock: tokio::sync::Mutex<()>,
    active: AtomicBool,
    /// When preferred leaders were last elected.
    last_preferred_election: Mutex<Option<Instant>>,
    /// When each quorum member last answered, and was last caught up (leader only).
    contacts: Contacts,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("config", &self.config)
            .field("active", &self.is_active())
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// `contacts` is the one the raft network notes replies in.
    pub fn new(
        raft: Raft,
        image: watch::Receiver<Arc<MetadataImage>>,
        config: ControllerConfig,
        contacts: Contacts,
    ) -> Controller {
        let sessions = Mutex::new(Sessions::new(config.session_timeout));
        Controller {
            raft,
            image,
            config,
            sessions,
            write_lock: tokio::sync::Mutex::new(()),
            active: AtomicBool::new(false),
            last_preferred_election: Mutex::new(None),
            contacts,
        }
    }

    fn image(&self) -> Arc<MetadataImage> {
        self.image.borrow().clone()
    }

    /// The active controller as raft knows it.
    pub fn leader(&self) -> Option<i32> {
        self.raft.metrics().borrow().current_leader.map(broker_id)
    }

    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    pub(crate) fn not_controller(&self) -> ControllerError {
        let hint = self.leader().filter(|l| *l != self.config.me);
        ControllerError {
            code: ErrorKind::NotController,
            message: match hint {
                Some(l) => format!("broker {} is not the active controller; broker {l} is", self.config.me),
                None => format!("broker {} is not the active controller, and no controller is known", self.config.me),
            },
        }
    }

    /// Refuses unless this node leads, and makes the image include everything committed.
    async fn ensure_active(&self) -> Result<(), ControllerError> {
        if !self.is_active() {
            return Err(self.not_controller());
        }
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(()),
            Err(_) => Err(self.not_controller()),
        }
    }

    /// Proposes one command and waits until it is applied here; returns its result and index.
    async fn write(&self, command: MetadataCommand) -> Result<(CommandResult, u64), ControllerError> {
        match self.raft.client_write(command).await {
            Ok(resp) => Ok((resp.data, resp.log_id.index)),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => {
                self.active.store(false, Ordering::Release);
                Err(self.not_controller())
            }
            Err(e) => fail(ErrorKind::NotCommitted, format!("the metadata write was not committed: {e}")),
        }
    }

    /// The index the image must reach before a caller's next read sees a refused write's state.
    fn applied_index(&self) -> u64 {
        self.image.borrow().applied_index
    }

    /// Adds a learner for `id` at `addr` unless raft already replicates to it there.
    async fn ensure_learner(&self, id: i32, addr: &str) -> Result<(), ControllerError> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let known = {
                let metrics = self.raft.metrics();
                let m = metrics.borrow();
                m.membership_config.membership().get_node(&node_id(id)).map(|n| n.addr.clone())
            };
            if known.as_deref() == Some(addr) {
                return Ok(());
            }
            let node = BasicNode { addr: addr.to_string() };
            let result = match known {
                None => self.raft.add_learner(node_id(id), node, false).await,
                Some(_) => {
                    self.raft
                        .change_membership(
                            openraft::ChangeMembers::SetNodes(BTreeMap::from([(node_id(id), node)])),
                            true,
                        )
                        .await
                }
            };
            match result {
                Ok(_) => return Ok(()),
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    ChangeMembershipError::InProgress(_),
                ))) if Instant::now() < deadline => {
                    // The previous membership change (or, right after an election, the
                    // leader's first entry) is not committed yet.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_))) => return Err(self.not_controller()),
                Err(e) => {
                    return fail(ErrorKind::NotCommitted, format!("adding broker {id} to the quorum as a learner: {e}"))
                }
            }
        }
    }

    /// RegisterBroker: a broker process announces itself.
    pub async fn register(&self, r: Registration) -> Result<(u64, u64), ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        if r.id < 0 {
            return fail(ErrorKind::InvalidRequest, format!("broker id {} is negative", r.id));
        }
        if let Some(voter_addr) = self.config.voters.addr(r.id) {
            if voter_addr != r.internal_addr {
                tracing::warn!(broker = r.id, from = %r.internal_addr, voter = voter_addr, "registration with a voter's id from another address refused");
                return fail(
                    ErrorKind::DuplicateBrokerRegistration,
                    format!(
                        "broker id {} belongs to the voter at {voter_addr}, but this broker's internal address is {}",
                        r.id, r.internal_addr
                    ),
                );
            }
        }
        let now = Instant::now();
        // The same internal address means the new process bound the port the old one served
        // on: the old one is gone (a restart, or a rescheduled pod keeping its DNS name), so
        // it need not wait for the old session to time out.
        let same_address = self.image().broker(r.id).is_some_and(|b| b.internal_addr == r.internal_addr);
        let held = if same_address { None } else { self.sessions.lock().held_by_other(r.id, r.incarnation, now) };
        if let Some(left) = held {
            tracing::warn!(broker = r.id, incarnation = %r.incarnation, "registration refused: another live process holds this broker id");
            return fail(
                ErrorKind::DuplicateBrokerRegistration,
                format!(
                    "broker id {} is registered by another process that is still heartbeating (its session ends in {} ms unless it heartbeats again)",
                    r.id,
                    left.as_millis()
                ),
            );
        }
        if !self.config.voters.contains(r.id) {
            self.ensure_learner(r.id, &r.internal_addr).await?;
        }
        let changes = elections::on_register(&self.image(), r.id, self.config.default_min_insync);
        let command = MetadataCommand::RegisterBroker {
            id: r.id,
            incarnation: r.incarnation,
            kafka: r.kafka.clone(),
            internal_addr: r.internal_addr.clone(),
            rack: r.rack.clone(),
            changes,
        };
        match self.write(command).await? {
            (CommandResult::Registered { broker_epoch }, index) => {
                self.sessions.lock().touch(r.id, r.incarnation, Instant::now());
                tracing::info!(broker = r.id, epoch = broker_epoch, incarnation = %r.incarnation, kafka = %format!("{}:{}", r.kafka.host, r.kafka.port), "broker registered");
                Ok((broker_epoch, index))
            }
            (other, _) => fail(ErrorKind::InvalidRequest, format!("registration not applied: {other:?}")),
        }
    }

    /// BrokerHeartbeat: keeps a session alive, unfences a broker that caught up, fences one
    /// that is shutting down.
    pub async fn heartbeat(
        &self,
        id: i32,
        epoch: u64,
        applied_index: u64,
        want_shutdown: bool,
    ) -> Result<HeartbeatReply, ControllerError> {
        if !self.is_active() {
            return Err(self.not_controller());
        }
        let image = self.image();
        let Some(b) = image.broker(id) else {
            return fail(ErrorKind::BrokerNotRegistered, format!("broker {id} is not registered"));
        };
        if b.epoch != epoch {
            return fail(
                ErrorKind::StaleBrokerEpoch,
                format!("broker {id} heartbeat with epoch {epoch}, but its registration has epoch {}", b.epoch),
            );
        }
        let incarnation = b.incarnation;
        if want_shutdown {
            self.sessions.lock().end(id);
            if !b.fenced {
                let _guard = self.write_lock.lock().await;
                self.ensure_active().await?;
                let changes = elections::on_fence(&self.image(), id, self.config.default_min_insync);
                let (_, index) = self.write(MetadataCommand::FenceBroker { id, epoch, changes }).await?;
                tracing::info!(broker = id, "broker shutting down: fenced, its partitions led elsewhere");
                return Ok(HeartbeatReply { fenced: true, index });
            }
            return Ok(HeartbeatReply { fenced: true, index: self.applied_index() });
        }
        self.sessions.lock().touch(id, incarnation, Instant::now());
        if b.fenced && applied_index >= epoch {
            let _guard = self.write_lock.lock().await;
            self.ensure_active().await?;
            let image = self.image();
            if image.broker(id).is_some_and(|b| b.fenced && b.epoch == epoch) {
                let changes = elections::on_unfence(&image, id);
                let (result, index) = self.write(MetadataCommand::UnfenceBroker { id, epoch, changes }).await?;
                if result == CommandResult::Done {
                    tracing::info!(broker = id, epoch, "broker unfenced");
                    return Ok(HeartbeatReply { fenced: false, index });
                }
            }
        }
        let image = self.image();
        let fenced = image.broker(id).is_none_or(|b| b.fenced);
        Ok(HeartbeatReply { fenced, index: image.applied_index })
    }

    /// AllocateProducerIds: a block of ids for one broker.
    pub async fn allocate_producer_ids(&self, broker: i32, epoch: u64) -> Result<(i64, i32, u64), ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let command =
            MetadataCommand::AllocateProducerIds { broker_id: broker, broker_epoch: epoch, count: PRODUCER_ID_BLOCK };
        match self.write(command).await? {
            (CommandResult::ProducerIds { first, count }, index) => Ok((first, count, index)),
            (CommandResult::Refused(e), _) => fail(ErrorKind::StaleBrokerEpoch, e.to_string()),
            (other, _) => fail(ErrorKind::InvalidRequest, format!("producer ids not allocated: {other:?}")),
        }
    }

    /// AlterPartition: a leader shrinks or expands its ISR. Accepted only from the current
    /// leader, in its leader epoch, at the partition epoch it last saw; members it adds must
    /// be live replicas.
    pub async fn alter_partition(&self, a: AlterPartition) -> Result<(Vec<i32>, i32, u64), ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        match image.broker(a.broker) {
            Some(b) if b.epoch == a.broker_epoch => {}
            Some(b) => {
                return fail(
                    ErrorKind::StaleBrokerEpoch,
                    format!("broker {} epoch {} is not {}", a.broker, a.broker_epoch, b.epoch),
                )
            }
            None => return fail(ErrorKind::BrokerNotRegistered, format!("broker {} is not registered", a.broker)),
        }
        let topic = image.topic_by_id(a.topic_id).ok_or_else(|| ControllerError {
            code: ErrorKind::UnknownTopic,
            message: format!("topic id {} does not exist", a.topic_id),
        })?;
        let p = topic.partition(a.partition).ok_or_else(|| ControllerError {
            code: ErrorKind::UnknownTopic,
            message: format!("topic {} has no partition {}", topic.name, a.partition),
        })?;
        let name = format!("{}-{}", topic.name, a.partition);
        if p.leader != a.broker || p.leader_epoch != a.leader_epoch {
            return fail(
                ErrorKind::FencedLeaderEpoch,
                format!(
                    "{name}: broker {} in epoch {} is not the leader (leader {}, epoch {})",
                    a.broker, a.leader_epoch, p.leader, p.leader_epoch
                ),
            );
        }
        if p.partition_epoch != a.partition_epoch {
            return fail(
                ErrorKind::InvalidUpdateVersion,
                format!("{name}: partition epoch {} is not the current {}", a.partition_epoch, p.partition_epoch),
            );
        }
        let mut seen = std::collections::BTreeSet::new();
        for r in &a.new_isr {
            if !seen.insert(*r) || !p.replicas.contains(r) {
                return fail(
                    ErrorKind::IneligibleReplica,
                    format!("{name}: ISR {:?} names a non-replica or a replica twice", a.new_isr),
                );
            }
            if !p.isr.contains(r) && !image.is_live(*r) {
                return fail(
                    ErrorKind::IneligibleReplica,
                    format!("{name}: broker {r} is fenced and cannot join the ISR"),
                );
            }
        }
        if !a.new_isr.contains(&a.broker) {
            return fail(ErrorKind::IneligibleReplica, format!("{name}: the leader must stay in the ISR"));
        }
        let min_insync = elections::min_insync(&topic.configs, self.config.default_min_insync);
        let elr = elections::elr_after(p, &a.new_isr, min_insync);
        let change = PartitionChange {
            topic_id: a.topic_id,
            partition: a.partition,
            leader: a.broker,
            isr: a.new_isr.clone(),
            expected_partition_epoch: a.partition_epoch,
            replicas: None,
            elr: (elr != p.elr).then_some(elr),
        };
        let reason = format!("AlterPartition from broker {}", a.broker);
        let (_, index) = self.write(MetadataCommand::ChangePartitions { reason, changes: vec![change] }).await?;
        let after = self.image();
        let now = after.topic_by_id(a.topic_id).and_then(|t| t.partition(a.partition)).cloned();
        match now {
            Some(now) if now.isr == a.new_isr && now.partition_epoch == a.partition_epoch + 1 => {
                tracing::info!(partition = %name, old = ?p.isr, new = ?now.isr, elr = ?now.elr, "ISR changed");
                Ok((now.isr, now.partition_epoch, index))
            }
            _ => fail(ErrorKind::InvalidUpdateVersion, format!("{name}: changed concurrently")),
        }
    }

    /// DescribeQuorum: what this node knows (answered by any node).
    pub fn describe_quorum(&self) -> QuorumDescription {
        let image = self.image();
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        let membership = m.membership_config.membership();
        let end = |index: Option<u64>| index.map_or(0, |i| i64::try_from(i).unwrap_or(i64::MAX).saturating_add(1));
        let now = crate::time::now_ms();
        let replication = (m.state == ServerState::Leader).then(|| QuorumReplication {
            log_end_offset: end(m.last_log_index),
            high_watermark: end(m.last_applied.map(|l| l.index)),
            members: m
                .replication
                .iter()
                .flatten()
                .map(|(id, matched)| {
                    if *id == m.id {
                        // As KRaft's leader reports itself: it has its log, now.
                        QuorumMember {
                            id: broker_id(*id),
                            log_end_offset: end(m.last_log_index),
                            last_fetch_ms: now,
                            last_caught_up_ms: now,
                        }
                    } else {
                        let (last_fetch_ms, last_caught_up_ms) = self.contacts.of(m.current_term, *id);
                        QuorumMember {
                            id: broker_id(*id),
                            log_end_offset: matched.map_or(-1, |l| end(Some(l.index))),
                            last_fetch_ms,
                            last_caught_up_ms,
                        }
                    }
                })
                .collect(),
        });
        QuorumDescription {
            replication,
            cluster_id: image.cluster_id.clone(),
            leader: m.current_leader.map(broker_id),
            term: m.current_term,
            voters: membership.voter_ids().map(broker_id).collect(),
            learners: membership.learner_ids().map(broker_id).collect(),
            registered: image.brokers.keys().copied().collect(),
            applied_index: image.applied_index,
        }
    }

    /// The controller loop: notices when this node becomes (or stops being) the active
    /// controller, names a new cluster, fences brokers whose sessions ran out, and, while raft
    /// leader, looks at how far each quorum member has replicated (on every change of raft's
    /// metrics and at least every 100 ms).
    pub async fn run(self: Arc<Self>, mut shutdown: Shutdown) {
        let mut metrics = self.raft.metrics();
        let mut ticker = tokio::time::interval(Duration::from_millis(100));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.wait() => return,
                changed = metrics.changed() => if changed.is_err() { return },
                _ = ticker.tick() => {}
            }
            let leading = {
                let m = metrics.borrow();
                if m.state == ServerState::Leader {
                    let matched = m.replication.iter().flatten().map(|(id, l)| (*id, l.map(|l| l.index)));
                    self.contacts.observe(m.current_term, crate::time::now_ms(), m.last_log_index, matched);
                }
                m.state == ServerState::Leader && m.current_leader == Some(node_id(self.config.me))
            };
            if leading && !self.is_active() {
                // Include everything the previous controller committed before deciding.
                if self.raft.ensure_linearizable().await.is_err() {
                    // No quorum behind this leader: try again later, not in a loop woken by
                    // every change of raft's metrics.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                self.sessions.lock().activate(&self.image(), Instant::now());
                self.active.store(true, Ordering::Release);
                tracing::info!(
                    broker = self.config.me,
                    term = metrics.borrow().current_term,
                    "this broker is now the active controller"
                );
            } else if !leading && self.is_active() {
                self.active.store(false, Ordering::Release);
                tracing::info!(broker = self.config.me, "this broker is no longer the active controller");
            }
            if self.is_active() {
                self.tend().await;
            }
        }
    }

    /// Moves leadership back to preferred replicas, every `preferred_leader_interval`.
    async fn elect_preferred_leaders(&self) {
        let Some(every) = self.config.preferred_leader_interval else { return };
        {
            let mut last = self.last_preferred_election.lock();
            if last.is_some_and(|t| t.elapsed() < every) {
                return;
            }
            *last = Some(Instant::now());
        }
        let _guard = self.write_lock.lock().await;
        let changes = elections::preferred_leaders(&self.image());
        if changes.is_empty() {
            return;
        }
        let count = changes.len();
        let command = MetadataCommand::ChangePartitions { reason: "preferred leader election".into(), changes };
        match self.write(command).await {
            Ok(_) => tracing::info!(partitions = count, "leadership moved back to preferred replicas"),
            Err(e) => tracing::warn!(error = %e, "preferred leader election failed"),
        }
    }

    /// One round of the active controller's chores.
    async fn tend(&self) {
        if !self.is_active() {
            return;
        }
        if self.image().cluster_id.is_none() {
            let _guard = self.write_lock.lock().await;
            if self.image().cluster_id.is_none() {
                let cluster_id = super::cluster::new_cluster_id();
                match self.write(MetadataCommand::InitCluster { cluster_id: cluster_id.clone() }).await {
                    Ok(_) => tracing::info!(%cluster_id, "new cluster"),
                    Err(e) => tracing::warn!(error = %e, "naming the cluster failed"),
                }
            }
        }
        self.elect_preferred_leaders().await;
        self.complete_reassignments().await;
        let expired = self.sessions.lock().expired(&self.image(), Instant::now());
        for (id, epoch) in expired {
            let _guard = self.write_lock.lock().await;
            let image = self.image();
            if !image.broker(id).is_some_and(|b| !b.fenced && b.epoch == epoch) {
                continue;
            }
            let changes = elections::on_fence(&image, id, self.config.default_min_insync);
            let moved = changes.len();
            match self.write(MetadataCommand::FenceBroker { id, epoch, changes }).await {
                Ok(_) => tracing::warn!(
                    broker = id,
                    timeout_ms = self.config.session_timeout.as_millis() as u64,
                    partitions = moved,
                    "broker missed its session timeout: fenced"
                ),
                Err(e) => tracing::warn!(broker = id, error = %e, "fencing failed"),
            }
        }
    }
}
