//! One consumer group's state (Kafka's classic protocol): members, generation, the chosen
//! protocol and leader, the state machine Empty → PreparingRebalance → CompletingRebalance →
//! Stable (→ Dead when deleted), and the group's committed offsets. The coordinator
//! (`coordinator.rs`) holds these under a lock and drives them; the decisions here are plain
//! functions of the group and the clock.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use bytes::Bytes;
use tokio::sync::oneshot;

use super::error::GroupError;
use super::records::{GroupValue, OffsetValue, StoredMember};

/// Kafka's group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The name DescribeGroups and ListGroups report.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// What a waiting JoinGroup is answered with.
#[derive(Debug, Clone, Default)]
pub struct JoinOutcome {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// Every member's id, instance id and metadata — sent to the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

/// What a waiting SyncGroup is answered with.
#[derive(Debug, Clone, Default)]
pub struct SyncOutcome {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

/// One member of a group.
#[derive(Debug)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// (protocol name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    pub last_seen: Instant,
    pub pending_join: Option<oneshot::Sender<JoinOutcome>>,
    pub pending_sync: Option<oneshot::Sender<SyncOutcome>>,
}

impl Member {
    /// The metadata this member sent for `protocol`.
    pub fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols.iter().find(|(n, _)| n == protocol).map(|(_, m)| m.clone()).unwrap_or_default()
    }

    pub fn expired(&self, now: Instant) -> bool {
        now.duration_since(self.last_seen).as_millis() > u128::try_from(self.session_timeout_ms.max(0)).unwrap_or(0)
    }
}

/// A committed offset and the position of its record in `__consumer_offsets`. Commits
/// become visible when their records are replicated, which may finish out of order: the
/// position decides which is newer, so a late one never replaces a later commit (as Kafka
/// compares the commit records' offsets).
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    pub value: OffsetValue,
    pub record_offset: i64,
}

/// A consumer group and its committed offsets.
#[derive(Debug)]
pub struct Group {
    pub id: String,
    pub state: GroupState,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub generation: i32,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED (KIP-394), valid until the deadline.
    pub pending_members: HashMap<String, Instant>,
    /// group.instance.id → current member id (static membership).
    pub static_members: HashMap<String, String>,
    /// When the current rebalance gives up on members that have not rejoined.
    pub rebalance_deadline: Option<Instant>,
    /// The initial rebalance delay of a group that was empty (group.initial.rebalance.delay.ms).
    pub join_not_before: Option<Instant>,
    /// When the group entered its current state (ms since the epoch).
    pub state_since_ms: i64,
    /// Committed offsets whose records every in-sync replica has (what OffsetFetch shows).
    pub offsets: BTreeMap<(String, i32), Committed>,
    /// Offsets committed in producers' open transactions (TxnOffsetCommit), by producer id:
    /// applied when its commit marker is written, dropped with an abort.
    pub pending_txn: HashMap<i64, BTreeMap<(String, i32), Committed>>,
}

impl Group {
    pub fn new(id: &str, now_ms: i64) -> Group {
        Group {
            id: id.to_string(),
            state: GroupState::Empty,
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            rebalance_deadline: None,
            join_not_before: None,
            state_since_ms: now_ms,
            offsets: BTreeMap::new(),
            pending_txn: HashMap::new(),
        }
    }

    /// Makes `committed` the partition's offset unless a later record already set it.
    pub fn apply_offset(&mut self, partition: (String, i32), committed: Committed) {
        match self.offsets.get(&partition) {
            Some(current) if current.record_offset > committed.record_offset => {}
            _ => {
                self.offsets.insert(partition, committed);
            }
        }
    }

    pub fn set_state(&mut self, state: GroupState, now_ms: i64) {
        if self.state != state {
            self.state = state;
            self.state_since_ms = now_ms;
        }
    }

    /// Whether `protocols` can join: same protocol type, and (when the group has members)
    /// at least one protocol every member supports.
    pub fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| self.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == name)))
    }

    /// The protocol every member supports that most members prefer (Kafka's vote).
    pub fn select_protocol(&self) -> Option<String> {
        let first = self.members.values().next()?;
        let candidates: Vec<&String> = first
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|name| self.members.values().all(|m| m.protocols.iter().any(|(n, _)| n == *name)))
            .collect();
        let mut votes: Vec<(usize, &String)> = candidates
            .iter()
            .map(|c| {
                let count = self
                    .members
                    .values()
                    .filter(|m| m.protocols.iter().map(|(n, _)| n).find(|n| candidates.contains(n)) == Some(*c))
                    .count();
                (count, *c)
            })
            .collect();
        // Most votes; ties go to the earliest in the first member's preference order.
        votes.sort_by_key(|v| std::cmp::Reverse(v.0));
        votes.first().map(|(_, name)| (*name).clone())
    }

    /// Every member has a JoinGroup waiting, so the rebalance can complete.
    pub fn all_members_joined(&self) -> bool {
        self.members.values().all(|m| m.pending_join.is_some())
    }

    /// The protocol and topic-partition subscriptions are opaque here; DescribeGroups shows
    /// them as the clients sent them.
    pub fn to_value(&self, now_ms: i64) -> GroupValue {
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol_name.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: now_ms,
            members: self
                .members
                .values()
                .map(|m| StoredMember {
                    member_id: m.member_id.clone(),
                    group_instance_id: m.group_instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: self.protocol_name.as_deref().map(|p| m.metadata_for(p)).unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Restores a group from its stored metadata (members' sessions restart now).
    pub fn restore(&mut self, value: GroupValue, now: Instant, now_ms: i64) {
        self.protocol_type = (!value.protocol_type.is_empty()).then_some(value.protocol_type);
        self.generation = value.generation;
        self.protocol_name = value.protocol;
        self.leader = value.leader;
        self.members.clear();
        self.static_members.clear();
        for m in value.members {
            if let Some(instance) = &m.group_instance_id {
                self.static_members.insert(instance.clone(), m.member_id.clone());
            }
            let protocols = match &self.protocol_name {
                Some(p) => vec![(p.clone(), m.subscription.clone())],
                None => Vec::new(),
            };
            self.members.insert(
                m.member_id.clone(),
                Member {
                    member_id: m.member_id,
                    group_instance_id: m.group_instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols,
                    assignment: m.assignment,
                    last_seen: now,
                    pending_join: None,
                    pending_sync: None,
                },
            );
        }
        let state = if self.members.is_empty() { GroupState::Empty } else { GroupState::Stable };
        self.set_state(state, now_ms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, protocols: &[&str]) -> Member {
        Member {
            member_id: id.into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocols: protocols.iter().map(|p| (p.to_string(), Bytes::new())).collect(),
            assignment: Bytes::new(),
            last_seen: Instant::now(),
            pending_join: None,
            pending_sync: None,
        }
    }

    #[test]
    fn the_protocol_all_members_support_and_most_prefer_is_chosen() {
        let mut g = Group::new("g", 0);
        g.protocol_type = Some("consumer".into());
        g.members.insert("a".into(), member("a", &["cooperative-sticky", "range"]));
        g.members.insert("b".into(), member("b", &["range", "cooperative-sticky"]));
        g.members.insert("c".into(), member("c", &["range"]));
        assert_eq!(g.select_protocol().as_deref(), Some("range"));
    }

    #[test]
    fn a_member_without_a_common_protocol_or_with_another_type_cannot_join() {
        let mut g = Group::new("g", 0);
        g.protocol_type = Some("consumer".into());
        g.members.insert("a".into(), member("a", &["range"]));
        let p = vec![("roundrobin".to_string(), Bytes::new())];
        assert!(!g.supports("consumer", &p));
        let p = vec![("range".to_string(), Bytes::new())];
        assert!(!g.supports("connect", &p));
        assert!(g.supports("consumer", &p));
    }
}
