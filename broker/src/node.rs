//! [`Node`]: the state of one running broker that the Kafka handlers and the HTTP endpoint
//! share, and the topic operations that must keep the catalog and the hosted partitions in
//! step (create, delete, grow, reconfigure).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::BrokerConfig;
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
}

impl Node {
    /// Opens the partitions of every topic in the catalog (recovering their logs).
    pub fn open_all_topics(&self) -> Result<(), TopicOpError> {
        for topic in self.catalog.list() {
            self.replicas.ensure_topic(&topic)?;
        }
        Ok(())
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
