//! [`Node`]: the state of one running broker that the Kafka handlers and the HTTP endpoint
//! share, and the topic operations that must keep the catalog and the hosted partitions in
//! step (create, delete, grow, reconfigure).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::BrokerConfig;
use crate::group::{GroupConfig, GroupCoordinator, OFFSETS_TOPIC};
use crate::metadata::{Catalog, CatalogError, ClusterIdentity, ProducerIdAllocator, TopicMetadata};
use crate::metrics::Metrics;
use crate::partition::{PartitionError, ReplicaManager};

/// A topic operation failed in the catalog or while opening its partitions.
#[derive(Debug, thiserror::Error)]
pub enum TopicOpError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Partition(#[from] PartitionError),
}

/// One broker's shared state.
#[derive(Debug)]
pub struct Node {
    pub config: Arc<BrokerConfig>,
    pub identity: ClusterIdentity,
    /// Host and port clients are told to connect to.
    pub advertised_host: String,
    pub advertised_port: i32,
    pub catalog: Catalog,
    pub replicas: Arc<ReplicaManager>,
    pub producer_ids: ProducerIdAllocator,
    pub metrics: Arc<Metrics>,
    pub groups: Arc<GroupCoordinator>,
}

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
    /// Opens the partitions of every topic in the catalog (recovering their logs).
    pub fn open_all_topics(&self) -> Result<(), TopicOpError> {
        for topic in self.catalog.list() {
            self.replicas.ensure_topic(&topic)?;
        }
        Ok(())
    }

    /// Creates `__consumer_offsets` on first use, as Kafka does (FindCoordinator): compacted,
    /// so each group's latest metadata and offsets are kept and superseded ones cleaned away.
    pub fn ensure_offsets_topic(&self) -> Result<(), TopicOpError> {
        if self.catalog.get(OFFSETS_TOPIC).is_some() {
            return Ok(());
        }
        let configs = BTreeMap::from([
            ("cleanup.policy".to_string(), "compact".to_string()),
            ("segment.bytes".to_string(), self.config.offsets_topic_segment_bytes.to_string()),
        ]);
        match self.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, configs) {
            Ok(_) | Err(TopicOpError::Catalog(CatalogError::TopicAlreadyExists(_))) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Whether clients may not write to or delete this topic directly.
    pub fn is_internal(topic: &str) -> bool {
        topic == OFFSETS_TOPIC
    }

    /// Creates a topic and its partitions.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, TopicOpError> {
        let topic = self.catalog.create_topic(name, partitions, configs)?;
        self.replicas.ensure_topic(&topic)?;
        tracing::info!(topic = %topic.name, id = %topic.id, partitions = topic.partitions, "created topic");
        Ok(topic)
    }

    /// Deletes a topic and its data.
    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicMetadata>, TopicOpError> {
        let topic = self.catalog.delete_topic(name)?;
        self.replicas.remove_topic(name);
        tracing::info!(topic = %name, id = %topic.id, "deleted topic");
        Ok(topic)
    }

    /// Grows a topic to `count` partitions.
    pub fn increase_partitions(&self, name: &str, count: i32) -> Result<Arc<TopicMetadata>, TopicOpError> {
        let topic = self.catalog.increase_partitions(name, count)?;
        self.replicas.ensure_topic(&topic)?;
        tracing::info!(topic = %name, partitions = count, "increased partitions");
        Ok(topic)
    }

    /// Replaces a topic's config overrides and applies them to its partitions.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, TopicOpError> {
        let topic = self.catalog.set_configs(name, configs)?;
        self.replicas.update_topic_config(&topic);
        tracing::info!(topic = %name, configs = ?topic.configs, "altered topic configs");
        Ok(topic)
    }
}
