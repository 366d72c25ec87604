//! [`Node`]: the state of one running broker that the Kafka handlers and the HTTP endpoint
//! share, and the topic operations they ask of the cluster. Topic changes go to the active
//! controller; they reach this broker's partitions when its image applies them (see
//! [`crate::publisher`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::config::BrokerConfig;
use crate::group::{GroupConfig, GroupCoordinator, OFFSETS_TOPIC};
use crate::kafka::fetch_session::FetchSessionCache;
use crate::metadata::client::ClientError;
use crate::metadata::controller::{CreatedTopic, ErrorKind, TopicSpec};
use crate::metadata::runtime::Metadata;
use crate::metadata::types::broker_id;
use crate::metadata::{Catalog, ProducerIdAllocator};
use crate::metrics::Metrics;
use crate::partition::{Partition, ReplicaManager};
use crate::replication::{IsrChanges, ReplicaFetchers};
use crate::txn::coordinator::TransactionCoordinator;
use crate::txn::TRANSACTION_STATE_TOPIC;

/// How long a Kafka request waits for the controller to commit a metadata change (through
/// an election if one is under way).
pub const CONTROLLER_TIMEOUT: Duration = Duration::from_secs(30);

/// A topic operation failed at the controller.
#[derive(Debug, thiserror::Error)]
pub enum TopicOpError {
    #[error(transparent)]
    Controller(#[from] ClientError),
}

impl TopicOpError {
    /// Whether the topic already existed (a race that auto-creation tolerates).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, TopicOpError::Controller(ClientError::Refused { code: ErrorKind::TopicAlreadyExists, .. }))
    }
}

/// Why a partition cannot be served by this broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaLookup {
    /// The metadata has no such topic or partition.
    UnknownTopicOrPartition,
    /// The partition exists but another broker leads it (or none does right now).
    NotLeader,
}

/// One broker's shared state.
#[derive(Debug)]
pub struct Node {
    pub config: Arc<BrokerConfig>,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    pub catalog: Catalog,
    pub replicas: Arc<ReplicaManager>,
    pub producer_ids: ProducerIdAllocator,
    pub metrics: Arc<Metrics>,
    pub groups: Arc<GroupCoordinator>,
    /// The transaction coordinator of the `__transaction_state` partitions this broker leads.
    pub txn: Arc<TransactionCoordinator>,
    pub metadata: Metadata,
    /// The fetch loops of the partitions this broker follows.
    pub fetchers: Arc<ReplicaFetchers>,
    /// ISR changes this broker made as a leader.
    pub isr_changes: Arc<IsrChanges>,
    /// Consumers' fetch sessions (KIP-227).
    pub fetch_sessions: FetchSessionCache,
    /// `/readyz`: registered, unfenced, and this broker's image applied.
    pub ready: Arc<AtomicBool>,
    /// The data directory's free space against `log_dir_min_free_bytes`.
    pub disk_space: Arc<crate::disk_space::DiskSpace>,
}

/// Fetch sessions kept at once (Kafka's `max.incremental.fetch.session.cache.slots`).
pub const FETCH_SESSIONS_MAX: usize = 1000;
/// Partitions cached over all fetch sessions; a session that would exceed it is not made.
pub const FETCH_SESSION_PARTITIONS_MAX: usize = 100_000;

/// The coordinator's settings from the broker's.
pub fn group_config(c: &BrokerConfig) -> GroupConfig {
    GroupConfig {
        offsets_topic_partitions: c.offsets_topic_num_partitions,
        initial_rebalance_delay_ms: c.group_initial_rebalance_delay_ms,
        min_session_timeout_ms: c.group_min_session_timeout_ms,
        max_session_timeout_ms: c.group_max_session_timeout_ms,
        offsets_retention_ms: c.offsets_retention_minutes.saturating_mul(60_000),
        offset_metadata_max_bytes: c.offset_metadata_max_bytes,
    }
}

impl Node {
    pub fn id(&self) -> i32 {
        self.config.node_id
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// The active controller as this broker knows it, -1 if none.
    pub fn controller_id(&self) -> i32 {
        self.metadata.metrics().borrow().current_leader.map_or(-1, broker_id)
    }

    /// The replica of `topic`-`partition` if this broker leads it.
    pub fn leader_replica(&self, topic: &str, partition: i32) -> Result<Arc<Partition>, ReplicaLookup> {
        if let Some(p) = self.replicas.leader(topic, partition) {
            return Ok(p);
        }
        match self.catalog.get(topic) {
            Some(t) if t.partition(partition).is_some() => Err(ReplicaLookup::NotLeader),
            _ => Err(ReplicaLookup::UnknownTopicOrPartition),
        }
    }

    /// Creates `__consumer_offsets` on first use, as Kafka does (FindCoordinator): compacted,
    /// so each group's latest metadata and offsets are kept and superseded ones cleaned away.
    pub async fn ensure_offsets_topic(&self) -> Result<(), TopicOpError> {
        self.ensure_internal_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions).await
    }

    /// Creates `__transaction_state` on first use, as Kafka does (as many partitions as the
    /// coordinator hashes ids over; replication and segments as `__consumer_offsets`).
    pub async fn ensure_transaction_state_topic(&self) -> Result<(), TopicOpError> {
        self.ensure_internal_topic(TRANSACTION_STATE_TOPIC, self.txn.config().state_partitions).await
    }

    async fn ensure_internal_topic(&self, name: &str, partitions: i32) -> Result<(), TopicOpError> {
        if self.catalog.get(name).is_some() {
            return Ok(());
        }
        // offsets.topic.replication.factor, capped by the brokers there are (a development
        // cluster of one must still get its internal topics).
        let live = self.catalog.image().live_brokers().count();
        let wanted = self.config.offsets_topic_replication_factor;
        let replication_factor = wanted.min(i16::try_from(live.max(1)).unwrap_or(i16::MAX));
        if replication_factor < wanted {
            tracing::warn!(
                topic = name,
                wanted,
                live,
                "creating an internal topic with fewer replicas than offsets.topic.replication.factor"
            );
        }
        let spec = TopicSpec {
            name: name.to_string(),
            partitions,
            replication_factor,
            configs: BTreeMap::from([
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.bytes".to_string(), self.config.offsets_topic_segment_bytes.to_string()),
            ]),
            assignment: Vec::new(),
            validate_only: false,
        };
        match self.create_topic(spec).await {
            Ok(_) => Ok(()),
            Err(e) if e.is_already_exists() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether clients may not write to or delete this topic directly.
    pub fn is_internal(topic: &str) -> bool {
        topic == OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC
    }

    /// Creates a topic through the controller; returns once this broker's image has it.
    pub async fn create_topic(&self, spec: TopicSpec) -> Result<CreatedTopic, TopicOpError> {
        Ok(self.metadata.client.create_topic(&spec, CONTROLLER_TIMEOUT).await?)
    }

    /// Deletes a topic (its replicas are removed as brokers apply the deletion).
    pub async fn delete_topic(&self, name: &str) -> Result<(), TopicOpError> {
        Ok(self.metadata.client.delete_topic(name, CONTROLLER_TIMEOUT).await?)
    }

    /// Grows a topic to `count` partitions.
    pub async fn increase_partitions(
        &self,
        name: &str,
        count: i32,
        assignment: &[Vec<i32>],
        validate_only: bool,
    ) -> Result<(), TopicOpError> {
        Ok(self.metadata.client.create_partitions(name, count, assignment, validate_only, CONTROLLER_TIMEOUT).await?)
    }

    /// Replaces a topic's config overrides.
    pub async fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), TopicOpError> {
        Ok(self.metadata.client.alter_configs(name, &configs, validate_only, CONTROLLER_TIMEOUT).await?)
    }
}
