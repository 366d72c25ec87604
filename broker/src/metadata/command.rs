//! The commands of the metadata log and their results.
//!
//! A command records a *decision* — ids, replica assignments, new leaders — never a policy,
//! so applying the same log gives the same image on every version that replays it
//! (docs/decisions/metadata-quorum.md §4). The controller decides; [`super::image`] applies.
//! Variants are only ever added: a log written by one version is read by the next.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Where a broker serves Kafka clients.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub host: String,
    pub port: i32,
}

/// A new leader and ISR for one partition, applied only if the partition has not changed
/// since the controller decided it (`expected_partition_epoch`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChange {
    pub topic_id: Uuid,
    pub partition: i32,
    /// The new leader, -1 for none (offline).
    pub leader: i32,
    pub isr: Vec<i32>,
    pub expected_partition_epoch: i32,
    /// A new replica set (a reassignment starting, finishing or cancelled); None keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<ReplicaSet>,
    /// New eligible leader replicas; None keeps them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elr: Option<Vec<i32>>,
}

/// A partition's replicas, and — during a reassignment — which of them are being added and
/// which will be removed once the added ones are in sync (Kafka's KIP-455).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSet {
    pub replicas: Vec<i32>,
    pub adding: Vec<i32>,
    pub removing: Vec<i32>,
}

/// One entry of the metadata log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum MetadataCommand {
    /// The first leader of a new cluster names it.
    InitCluster {
        cluster_id: String,
    },
    /// A broker process (re)registers; it starts fenced and its leaderships move away
    /// (`changes`) until it has caught up. The log index becomes its broker epoch.
    RegisterBroker {
        id: i32,
        incarnation: Uuid,
        kafka: Endpoint,
        internal_addr: String,
        rack: Option<String>,
        changes: Vec<PartitionChange>,
    },
    /// A broker missed its session (or shuts down): it stops leading (`changes`).
    FenceBroker {
        id: i32,
        epoch: u64,
        changes: Vec<PartitionChange>,
    },
    /// A fenced broker caught up again: it leads what it can (`changes`).
    UnfenceBroker {
        id: i32,
        epoch: u64,
        changes: Vec<PartitionChange>,
    },
    /// A topic with its id and the replicas of each partition (leader = first live replica).
    CreateTopic {
        name: String,
        id: Uuid,
        configs: BTreeMap<String, String>,
        assignment: Vec<Vec<i32>>,
    },
    DeleteTopic {
        id: Uuid,
    },
    /// Partitions added at the end of a topic.
    CreatePartitions {
        id: Uuid,
        assignment: Vec<Vec<i32>>,
    },
    /// The complete set of a topic's config overrides.
    AlterTopicConfigs {
        id: Uuid,
        configs: BTreeMap<String, String>,
    },
    /// A block of producer ids for one broker.
    AllocateProducerIds {
        broker_id: i32,
        broker_epoch: u64,
        count: i32,
    },
    /// Leader, ISR or replica changes: an ISR shrink or expand a leader asked for
    /// (AlterPartition), leader elections, reassignment steps. Each change applies only at its
    /// expected partition epoch.
    ChangePartitions {
        reason: String,
        changes: Vec<PartitionChange>,
    },
    /// A broker leaves the cluster (it holds no replica).
    UnregisterBroker {
        id: i32,
    },
    /// The bytes/s a leader may send to replicas being added by a reassignment (None: no limit).
    SetReplicationThrottle {
        bytes_per_sec: Option<u64>,
    },
}

/// Why a command changed nothing. The controller validates before proposing, so these are
/// races it lost or bugs; they travel back as values, never as panics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum CommandError {
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    #[error("topic id {0} does not exist")]
    UnknownTopicId(Uuid),
    #[error("broker {0} is not registered")]
    UnknownBroker(i32),
    #[error("broker {id} epoch {given} is not its current epoch {current}")]
    StaleBrokerEpoch { id: i32, given: u64, current: u64 },
    #[error("the cluster already has id {0}")]
    ClusterIdSet(String),
    #[error("{0}")]
    Invalid(String),
}

/// What applying a command produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResult {
    /// Applied (also the result of raft's own blank and membership entries).
    Done,
    /// RegisterBroker: the broker epoch.
    Registered { broker_epoch: u64 },
    /// AllocateProducerIds: `[first, first + count)`.
    ProducerIds { first: i64, count: i32 },
    /// Nothing changed.
    Refused(CommandError),
}
