//! Committed offsets and whole-group operations of the coordinator: OffsetCommit,
//! OffsetFetch, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete, and loading the
//! groups of a `__consumer_offsets` partition when this broker becomes its leader.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::time::now_ms;

use super::batch;
use super::coordinator::{GroupCoordinator, OFFSETS_TOPIC};
use super::error::GroupError;
use super::records::{GroupValue, OffsetValue, RecordKey};
use super::state::{Committed, Group, GroupState};

/// One partition's offset to commit.
#[derive(Debug, Clone)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// Offsets an OffsetCommit (or TxnOffsetCommit) appended to `__consumer_offsets`, not yet
/// known to be replicated: [`GroupCoordinator::complete_commit`] waits for that and only
/// then shows them, as Kafka caches a commit once its append completed. A commit is never
/// visible before it would survive the coordinator's failure.
#[must_use = "a commit becomes visible only through GroupCoordinator::complete_commit"]
#[derive(Debug)]
pub struct PendingCommit {
    group: String,
    /// One result per offset of the request, in order.
    results: Vec<Result<(), GroupError>>,
    /// What was appended, with the position of the record that holds it.
    appended: Vec<((String, i32), Committed)>,
    /// The transaction the offsets belong to: they were added to its pending offsets.
    producer_id: Option<i64>,
    /// Holds OffsetFetch of the group back until this commit completes (or is dropped).
    _in_flight: Option<super::in_flight::Ticket>,
}

/// A record's value and its offset in `__consumer_offsets`.
type Positioned = (i64, Option<Bytes>);

impl PendingCommit {
    fn last_record(&self) -> Option<i64> {
        self.appended.iter().map(|(_, c)| c.record_offset).max()
    }
}

impl GroupCoordinator {
    /// OffsetCommit. A commit with generation -1 and no member id is a "simple" commit,
    /// allowed while the group has no members. Appends the accepted offsets; they become
    /// visible through [`GroupCoordinator::complete_commit`].
    pub fn commit_offsets(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        offsets: Vec<OffsetCommit>,
    ) -> Result<PendingCommit, GroupError> {
        self.commit(group_id, generation, member_id, offsets, None)
    }

    /// TxnOffsetCommit: offsets committed in a producer's transaction, written to
    /// `__consumer_offsets` as part of it and applied only when its commit marker is (dropped
    /// with an abort: [`GroupCoordinator::complete_txn`]). Clients before v3 send no
    /// generation: then the membership is not checked, as in Kafka.
    pub fn commit_txn_offsets(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        producer: (i64, i16),
        offsets: Vec<OffsetCommit>,
    ) -> Result<PendingCommit, GroupError> {
        self.commit(group_id, generation, member_id, offsets, Some(producer))
    }

    /// Waits until the records of `pending` are on every in-sync replica, then makes its
    /// offsets visible (a transaction's stay pending until its marker). When they are not
    /// replicated in time, nothing is shown and the error is the whole answer: the commit may
    /// or may not survive, as with any write that timed out. Returns one result per offset.
    pub async fn complete_commit(
        &self,
        pending: PendingCommit,
        timeout: Duration,
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        let Some(last) = pending.last_record() else { return Ok(pending.results) };
        let replicated = self.wait_replicated(&pending.group, last, timeout).await;
        let mut groups = self.groups.lock();
        let group = groups.get_mut(&pending.group);
        match (replicated, pending.producer_id, group) {
            (Ok(()), None, Some(group)) => {
                for (partition, committed) in pending.appended {
                    group.apply_offset(partition, committed);
                }
            }
            (Ok(()), _, _) => {}
            (Err(e), Some(producer_id), Some(group)) => {
                // As Kafka fails a pending transactional commit: its marker must not apply it.
                if let Some(open) = group.pending_txn.get_mut(&producer_id) {
                    for (partition, committed) in &pending.appended {
                        if open.get(partition) == Some(committed) {
                            open.remove(partition);
                        }
                    }
                }
                return Err(e);
            }
            (Err(e), _, _) => return Err(e),
        }
        Ok(pending.results)
    }

    fn commit(
        &self,
        group_id: &str,
        generation: i32,
        member_id: &str,
        offsets: Vec<OffsetCommit>,
        transaction: Option<(i64, i16)>,
    ) -> Result<PendingCommit, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        self.check_coordinator(group_id)?;
        let now_ms = now_ms();
        let mut groups = self.groups.lock();
        let group = groups.entry(group_id.to_string()).or_insert_with(|| Group::new(group_id, now_ms));
        if transaction.is_some() && generation < 0 {
            // TxnOffsetCommit v0-2 (or a producer outside the group): no membership check.
        } else if generation < 0 && member_id.is_empty() {
            if !group.members.is_empty() {
                return Err(GroupError::UnknownMemberId);
            }
        } else {
            let member = group.members.get_mut(member_id).ok_or(GroupError::UnknownMemberId)?;
            member.last_seen = Instant::now();
            if generation != group.generation {
                return Err(GroupError::IllegalGeneration);
            }
            if group.state == GroupState::CompletingRebalance {
                return Err(GroupError::RebalanceInProgress);
            }
        }
        let mut results = Vec::with_capacity(offsets.len());
        let mut records = Vec::new();
        let mut accepted = Vec::new();
        for o in offsets {
            if o.metadata.len() > self.config.offset_metadata_max_bytes {
                results.push(Err(GroupError::OffsetMetadataTooLarge));
                continue;
            }
            let value = OffsetValue {
                offset: o.offset,
                leader_epoch: o.leader_epoch,
                metadata: o.metadata,
                commit_timestamp: now_ms,
            };
            let key = RecordKey::Offset { group: group_id.to_string(), topic: o.topic.clone(), partition: o.partition };
            records.push((key.encode(), Some(value.encode())));
            accepted.push(((o.topic, o.partition), value));
            results.push(Ok(()));
        }
        let mut pending = PendingCommit {
            group: group_id.to_string(),
            results,
            appended: Vec::new(),
            producer_id: None,
            _in_flight: None,
        };
        if records.is_empty() {
            return Ok(pending);
        }
        pending._in_flight = Some(self.in_flight.begin(group_id));
        // The records are appended in the order of this lock, so their positions order commits.
        let last = match transaction {
            None => self.persist(group_id, &records)?,
            Some((producer_id, producer_epoch)) => {
                self.persist_transactional(group_id, &records, producer_id, producer_epoch)?
            }
        };
        let first = last + 1 - i64::try_from(records.len()).unwrap_or(0);
        pending.appended = accepted
            .into_iter()
            .zip(first..)
            .map(|((partition, value), record_offset)| (partition, Committed { value, record_offset }))
            .collect();
        if let Some((producer_id, _)) = transaction {
            // Pending until the transaction's marker (KIP-447's UNSTABLE_OFFSET_COMMIT sees it).
            group.pending_txn.entry(producer_id).or_default().extend(pending.appended.iter().cloned());
            pending.producer_id = Some(producer_id);
        }
        Ok(pending)
    }

    /// Waits (at most `timeout`) until no offset commit of `group` is on its way: an
    /// OffsetFetch then answers with every commit appended before it, or without the ones
    /// that failed.
    pub async fn commits_settled(&self, group: &str, timeout: Duration) {
        self.in_flight.settled(group, timeout).await;
    }

    /// OffsetFetch: the committed offsets of `topics` (every committed partition when None).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        topics: Option<Vec<(String, Vec<i32>)>>,
    ) -> Vec<(String, i32, Option<OffsetValue>)> {
        let groups = self.groups.lock();
        let offsets = groups.get(group_id).map(|g| &g.offsets);
        match topics {
            None => offsets
                .map(|o| o.iter().map(|((t, p), c)| (t.clone(), *p, Some(c.value.clone()))).collect())
                .unwrap_or_default(),
            Some(topics) => topics
                .into_iter()
                .flat_map(|(topic, partitions)| {
                    partitions.into_iter().map(move |p| {
                        let v = offsets.and_then(|o| o.get(&(topic.clone(), p))).map(|c| c.value.clone());
                        (topic.clone(), p, v)
                    })
                })
                .collect(),
        }
    }

    pub fn describe(&self, group_id: &str) -> Option<GroupDescription> {
        let groups = self.groups.lock();
        let g = groups.get(group_id)?;
        let protocol = g.protocol_name.clone().unwrap_or_default();
        let stable = matches!(g.state, GroupState::Stable);
        Some(GroupDescription {
            state: g.state,
            protocol_type: g.protocol_type.clone().unwrap_or_default(),
            protocol: protocol.clone(),
            members: g
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: m.metadata_for(&protocol),
                    assignment: if stable { m.assignment.clone() } else { Bytes::new() },
                })
                .collect(),
        })
    }

    /// (group id, protocol type, state) of every group.
    pub fn list(&self) -> Vec<(String, String, GroupState)> {
        let groups = self.groups.lock();
        let mut all: Vec<_> =
            groups.values().map(|g| (g.id.clone(), g.protocol_type.clone().unwrap_or_default(), g.state)).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// DeleteGroups: only groups without members; their offsets go with them.
    pub fn delete_group(&self, group_id: &str) -> Result<(), GroupError> {
        self.check_coordinator(group_id)?;
        let mut groups = self.groups.lock();
        let group = groups.get(group_id).ok_or(GroupError::GroupIdNotFound)?;
        if !group.members.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        self.write_tombstones(group)?;
        groups.remove(group_id);
        tracing::info!(group = %group_id, "deleted group");
        Ok(())
    }

    /// Tombstones for a group's metadata and every offset it committed.
    pub(super) fn write_tombstones(&self, group: &Group) -> Result<(), GroupError> {
        let mut records: Vec<(Bytes, Option<Bytes>)> = group
            .offsets
            .keys()
            .map(|(t, p)| {
                (RecordKey::Offset { group: group.id.clone(), topic: t.clone(), partition: *p }.encode(), None)
            })
            .collect();
        records.push((RecordKey::Group { group: group.id.clone() }.encode(), None));
        self.persist(&group.id, &records).map(|_| ())
    }

    /// OffsetDelete: removes committed offsets of partitions the group does not consume.
    pub fn delete_offsets(
        &self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<Result<(), GroupError>>, GroupError> {
        self.check_coordinator(group_id)?;
        let mut groups = self.groups.lock();
        let group = groups.get_mut(group_id).ok_or(GroupError::GroupIdNotFound)?;
        let subscribed = subscribed_topics(group);
        let mut results = Vec::new();
        let mut records = Vec::new();
        let mut removed = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.iter().any(|t| t == topic) {
                results.push(Err(GroupError::GroupSubscribedToTopic));
                continue;
            }
            if group.offsets.contains_key(&(topic.clone(), *partition)) {
                let key =
                    RecordKey::Offset { group: group_id.to_string(), topic: topic.clone(), partition: *partition };
                records.push((key.encode(), None));
                removed.push((topic.clone(), *partition));
            }
            results.push(Ok(()));
        }
        if !records.is_empty() {
            self.persist(group_id, &records)?;
            for k in removed {
                group.offsets.remove(&k);
            }
        }
        Ok(results)
    }

    /// Becomes the coordinator of the groups in `__consumer_offsets` partition `p` (this
    /// broker now leads it): rebuilds them from the partition, then serves them. Returns how
    /// many groups were loaded.
    pub fn load_partition(&self, p: i32) -> usize {
        let now = Instant::now();
        let now_ms = now_ms();
        let Some(partition) = self.replicas.get(OFFSETS_TOPIC, p) else { return 0 };
        // The newest record of each key.
        let mut latest: BTreeMap<RecordKey, Positioned> = BTreeMap::new();
        // Records of transactions whose marker has not come yet, by producer id.
        let mut open: HashMap<i64, Vec<(RecordKey, Positioned)>> = HashMap::new();
        batch::scan_partition(&partition, |scanned| match scanned {
            batch::Scanned::Record(r) => match (RecordKey::decode(r.key), r.transaction) {
                (Ok(key), None) => {
                    latest.insert(key, (r.offset, r.value));
                }
                (Ok(key), Some(producer_id)) => open.entry(producer_id).or_default().push((key, (r.offset, r.value))),
                (Err(e), _) => tracing::warn!(partition = p, offset = r.offset, error = %e, "skipping record"),
            },
            batch::Scanned::Marker { producer_id, commit } => {
                let records = open.remove(&producer_id).unwrap_or_default();
                if commit {
                    // As at run time: a record written after the transaction's keeps its place.
                    for (key, record) in records {
                        if latest.get(&key).is_none_or(|(newest, _)| *newest < record.0) {
                            latest.insert(key, record);
                        }
                    }
                }
            }
        });
        let mut groups = self.groups.lock();
        let mut loaded = std::collections::BTreeSet::new();
        for (key, (record_offset, value)) in latest {
            let id = key.group().to_string();
            match (key, value) {
                (RecordKey::Group { .. }, Some(v)) => match GroupValue::decode(v) {
                    Ok(gv) => {
                        groups.entry(id.clone()).or_insert_with(|| Group::new(&id, now_ms)).restore(gv, now, now_ms);
                        loaded.insert(id);
                    }
                    Err(e) => tracing::warn!(group = %id, error = %e, "skipping group metadata"),
                },
                (RecordKey::Offset { topic, partition, .. }, Some(v)) => match OffsetValue::decode(v) {
                    Ok(ov) => {
                        groups
                            .entry(id.clone())
                            .or_insert_with(|| Group::new(&id, now_ms))
                            .offsets
                            .insert((topic, partition), Committed { value: ov, record_offset });
                        loaded.insert(id);
                    }
                    Err(e) => tracing::warn!(group = %id, error = %e, "skipping offset"),
                },
                _ => {}
            }
        }
        // Offsets of transactions still open: pending until their markers.
        for (producer_id, records) in open {
            for (key, (record_offset, value)) in records {
                let (RecordKey::Offset { group, topic, partition }, Some(v)) = (key, value) else { continue };
                match OffsetValue::decode(v) {
                    Ok(ov) => {
                        let g = groups.entry(group.clone()).or_insert_with(|| Group::new(&group, now_ms));
                        let committed = Committed { value: ov, record_offset };
                        g.pending_txn.entry(producer_id).or_default().insert((topic, partition), committed);
                        loaded.insert(group);
                    }
                    Err(e) => tracing::warn!(group = %group, error = %e, "skipping a transaction's offset"),
                }
            }
        }
        self.loaded.lock().insert(p);
        loaded.len()
    }

    /// Stops coordinating the groups of partition `p` (leadership moved away): forgets them
    /// and tells members waiting on a rebalance to find the new coordinator.
    pub fn unload_partition(&self, p: i32) {
        self.loaded.lock().remove(&p);
        let mut groups = self.groups.lock();
        let ids: Vec<String> = groups.keys().filter(|g| self.partition_of(g) == p).cloned().collect();
        for id in ids {
            if let Some(mut group) = groups.remove(&id) {
                for m in group.members.values_mut() {
                    if let Some(tx) = m.pending_join.take() {
                        let _ = tx.send(super::coordinator::join_error(GroupError::NotCoordinator, &m.member_id));
                    }
                    if let Some(tx) = m.pending_sync.take() {
                        let _ = tx.send(super::state::SyncOutcome {
                            error: Some(GroupError::NotCoordinator),
                            ..Default::default()
                        });
                    }
                }
            }
        }
    }

    /// Offsets partitions whose groups this broker coordinates.
    pub fn loaded_partitions(&self) -> Vec<i32> {
        self.loaded.lock().iter().copied().collect()
    }
}

/// Topics named in the members' subscriptions (consumer protocol: version i16, then an array
/// of topic strings), for OffsetDelete's check.
fn subscribed_topics(group: &Group) -> Vec<String> {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let mut topics = Vec::new();
    for m in group.members.values() {
        let meta = m.metadata_for(&protocol);
        let mut buf: &[u8] = &meta;
        let take = |buf: &mut &[u8], n: usize| -> Option<Vec<u8>> {
            let out = buf.get(..n)?.to_vec();
            *buf = &buf[n..];
            Some(out)
        };
        let parse = |buf: &mut &[u8]| -> Option<Vec<String>> {
            take(buf, 2)?;
            let count = i32::from_be_bytes(take(buf, 4)?.try_into().ok()?);
            let mut out = Vec::new();
            for _ in 0..count.clamp(0, 100_000) {
                let len = i16::from_be_bytes(take(buf, 2)?.try_into().ok()?);
                out.push(String::from_utf8(take(buf, usize::try_from(len).ok()?)?).ok()?);
            }
            Some(out)
        };
        topics.extend(parse(&mut buf).unwrap_or_default());
    }
    topics
}
