//! The controller's data-moving operations: reassignments (start, cancel, and completing the
//! ones whose new replicas are in sync — on every tick, so a new controller finishes what the
//! old one started), leader elections on request (preferred or unclean), removing a broker,
//! and the replication throttle for replicas being added.

use std::collections::BTreeSet;

use openraft::ChangeMembers;
use uuid::Uuid;

use super::reassignment;
use super::{elections, fail, Controller, ControllerError, ErrorKind};
use crate::metadata::command::{CommandResult, MetadataCommand, PartitionChange};
use crate::metadata::types::node_id;

/// A partition to move (`target` Some) or whose move to cancel (`target` None).
#[derive(Debug, Clone)]
pub struct Reassignment {
    pub topic: String,
    pub partition: i32,
    pub target: Option<Vec<i32>>,
}

/// One partition's outcome of a batch request.
pub type PartitionOutcome = (String, i32, Result<(), ControllerError>);

impl Controller {
    /// Starts (or cancels) reassignments. Each partition is checked on its own; the accepted
    /// ones are committed in one command. Returns each partition's outcome and the log index.
    pub async fn reassign(&self, moves: Vec<Reassignment>) -> Result<(Vec<PartitionOutcome>, u64), ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        let mut outcomes = Vec::with_capacity(moves.len());
        let mut changes = Vec::new();
        for m in moves {
            let result = (|| -> Result<Option<PartitionChange>, ControllerError> {
                let topic = image.topic(&m.topic).ok_or_else(|| ControllerError {
                    code: ErrorKind::UnknownTopic,
                    message: format!("topic {} does not exist", m.topic),
                })?;
                let p = topic.partition(m.partition).ok_or_else(|| ControllerError {
                    code: ErrorKind::UnknownTopic,
                    message: format!("topic {} has no partition {}", m.topic, m.partition),
                })?;
                match &m.target {
                    None => {
                        if !p.is_reassigning() {
                            return fail(
                                ErrorKind::NoReassignmentInProgress,
                                format!("{}-{} is not being reassigned", m.topic, m.partition),
                            );
                        }
                        match reassignment::cancel(&image, topic.id, m.partition, p) {
                            Some(c) => Ok(Some(c)),
                            None => fail(
                                ErrorKind::InvalidReplicaAssignment,
                                format!(
                                    "{}-{}: none of its original replicas is in sync; it cannot go back",
                                    m.topic, m.partition
                                ),
                            ),
                        }
                    }
                    Some(target) => {
                        Self::check_assignment(&image, std::slice::from_ref(target))?;
                        Ok(reassignment::start(&image, topic.id, m.partition, p, target))
                    }
                }
            })();
            match result {
                Ok(Some(change)) => {
                    changes.push(change);
                    outcomes.push((m.topic, m.partition, Ok(())));
                }
                Ok(None) => outcomes.push((m.topic, m.partition, Ok(()))),
                Err(e) => outcomes.push((m.topic, m.partition, Err(e))),
            }
        }
        if changes.is_empty() {
            return Ok((outcomes, image.applied_index));
        }
        let count = changes.len();
        let (_, index) =
            self.write(MetadataCommand::ChangePartitions { reason: "reassignment".into(), changes }).await?;
        tracing::info!(partitions = count, "reassignment started or cancelled");
        Ok((outcomes, index))
    }

    /// Cancels every reassignment in progress; returns how many were cancelled.
    pub async fn cancel_all_reassignments(&self) -> Result<(usize, u64), ControllerError> {
        let image = self.image();
        let moves: Vec<Reassignment> = image
            .partitions()
            .filter(|(_, _, p)| p.is_reassigning())
            .map(|(t, i, _)| Reassignment { topic: t.name.clone(), partition: i, target: None })
            .collect();
        let count = moves.len();
        let (_, index) = self.reassign(moves).await?;
        Ok((count, index))
    }

    /// Completes the reassignments whose added replicas have all joined the ISR.
    pub(super) async fn complete_reassignments(&self) {
        let image = self.image();
        let changes: Vec<PartitionChange> =
            image.partitions().filter_map(|(t, i, p)| reassignment::complete(&image, t.id, i, p)).collect();
        if changes.is_empty() {
            return;
        }
        let _guard = self.write_lock.lock().await;
        let count = changes.len();
        match self.write(MetadataCommand::ChangePartitions { reason: "reassignment complete".into(), changes }).await {
            Ok(_) => tracing::info!(partitions = count, "reassignment completed"),
            Err(e) => tracing::warn!(error = %e, "completing reassignments failed"),
        }
    }

    /// ElectLeaders: preferred (the first replica, if live and in sync) or unclean (any live
    /// replica, for partitions without a leader). `partitions` None means all.
    pub async fn elect_leaders(
        &self,
        partitions: Option<Vec<(String, i32)>>,
        unclean: bool,
    ) -> Result<(Vec<PartitionOutcome>, u64), ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        let wanted: Vec<(String, i32)> = match partitions {
            Some(list) => list,
            None => image.partitions().map(|(t, i, _)| (t.name.clone(), i)).collect(),
        };
        let mut outcomes = Vec::new();
        let mut changes = Vec::new();
        for (topic, index) in wanted {
            let Some((t, p)) = image.topic(&topic).and_then(|t| t.partition(index).map(|p| (t.clone(), p.clone())))
            else {
                let e = ControllerError {
                    code: ErrorKind::UnknownTopic,
                    message: format!("{topic}-{index} does not exist"),
                };
                outcomes.push((topic, index, Err(e)));
                continue;
            };
            let change = if unclean {
                if p.leader >= 0 && image.is_live(p.leader) {
                    None
                } else {
                    p.replicas.iter().copied().find(|r| image.is_live(*r)).map(|r| PartitionChange {
                        topic_id: t.id,
                        partition: index,
                        leader: r,
                        isr: vec![r],
                        expected_partition_epoch: p.partition_epoch,
                        replicas: None,
                        elr: None,
                    })
                }
            } else {
                elections::preferred_leaders(&image).into_iter().find(|c| c.topic_id == t.id && c.partition == index)
            };
            let result = match (&change, unclean) {
                (Some(_), _) => Ok(()),
                (None, false) if p.replicas.first() == Some(&p.leader) => fail(
                    ErrorKind::ElectionNotNeeded,
                    format!("{topic}-{index}: its preferred replica {} leads already", p.leader),
                ),
                (None, false) => fail(
                    ErrorKind::IneligibleReplica,
                    format!("{topic}-{index}: its preferred replica is not live and in sync"),
                ),
                (None, true) if p.leader >= 0 && image.is_live(p.leader) => {
                    fail(ErrorKind::ElectionNotNeeded, format!("{topic}-{index}: broker {} leads it already", p.leader))
                }
                (None, true) => fail(ErrorKind::IneligibleReplica, format!("{topic}-{index}: no replica is live")),
            };
            changes.extend(change);
            outcomes.push((topic, index, result));
        }
        if changes.is_empty() {
            return Ok((outcomes, image.applied_index));
        }
        let reason = if unclean { "unclean leader election" } else { "preferred leader election" };
        let (_, index) = self.write(MetadataCommand::ChangePartitions { reason: reason.into(), changes }).await?;
        Ok((outcomes, index))
    }

    /// Removes a broker that holds no replica and no longer runs (a voter cannot be removed).
    pub async fn unregister_broker(&self, id: i32) -> Result<u64, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        let image = self.image();
        let Some(broker) = image.broker(id) else {
            return fail(ErrorKind::BrokerNotRegistered, format!("broker {id} is not registered"));
        };
        if self.config.voters.contains(id) {
            return fail(
                ErrorKind::InvalidRequest,
                format!(
                    "broker {id} is a voter of the metadata quorum (voters: {}) and cannot be removed",
                    self.config.voters.describe()
                ),
            );
        }
        let held: BTreeSet<String> = image
            .partitions()
            .filter(|(_, _, p)| p.replicas.contains(&id))
            .map(|(t, i, _)| format!("{}-{i}", t.name))
            .collect();
        if !held.is_empty() {
            let some: Vec<&String> = held.iter().take(5).collect();
            return fail(
                ErrorKind::InvalidRequest,
                format!(
                    "broker {id} still holds {} replica(s) (e.g. {}); drain it first (strom broker drain {id})",
                    held.len(),
                    some.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ),
            );
        }
        if !broker.fenced {
            // A running broker would only register again.
            return fail(
                ErrorKind::InvalidRequest,
                format!("broker {id} is still running (its session is live); stop it, then remove it"),
            );
        }
        let (result, index) = self.write(MetadataCommand::UnregisterBroker { id }).await?;
        if let CommandResult::Refused(e) = result {
            return fail(ErrorKind::InvalidRequest, e.to_string());
        }
        self.sessions.lock().end(id);
        // It no longer needs the metadata log either (best effort: a leftover learner is harmless).
        let removal =
            self.raft.change_membership(ChangeMembers::RemoveNodes(BTreeSet::from([node_id(id)])), false).await;
        if let Err(e) = removal {
            tracing::warn!(broker = id, error = %e, "removing the broker from the quorum's learners failed");
        }
        tracing::info!(broker = id, "broker removed");
        Ok(index)
    }

    /// Sets (or clears) the replication throttle for replicas being added.
    pub async fn set_replication_throttle(&self, bytes_per_sec: Option<u64>) -> Result<u64, ControllerError> {
        let _guard = self.write_lock.lock().await;
        self.ensure_active().await?;
        if bytes_per_sec == Some(0) {
            return fail(ErrorKind::InvalidRequest, "a throttle of 0 bytes/s would never finish; omit it for no limit");
        }
        let (_, index) = self.write(MetadataCommand::SetReplicationThrottle { bytes_per_sec }).await?;
        Ok(index)
    }

    /// The topic id of `name`, for callers outside this module.
    pub fn topic_id_of(&self, name: &str) -> Option<Uuid> {
        self.image().topic(name).map(|t| t.id)
    }
}
