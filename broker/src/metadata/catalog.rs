//! Topics known to the cluster: name, id, partition count and config overrides.
//!
//! Every change is written to `<data>/metadata/topics.json` (atomically) before it becomes
//! visible, so what a client was told exists survives a crash.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::atomic_file;
use super::topic_config::{self, TopicConfigError};

/// Kafka's limit on topic name length.
const MAX_TOPIC_NAME_LEN: usize = 249;
/// A generous bound on partitions per topic, so one request cannot make the broker create
/// millions of directories.
pub const MAX_PARTITIONS: i32 = 10_000;

/// One topic as the cluster knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMetadata {
    pub name: String,
    pub id: Uuid,
    pub partitions: i32,
    /// Config overrides; keys left out take the broker's defaults.
    pub configs: BTreeMap<String, String>,
}

/// Why a catalog change was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("topic {0} already exists")]
    TopicAlreadyExists(String),
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },
    #[error("invalid partition count for topic {topic}: {reason}")]
    InvalidPartitions { topic: String, reason: String },
    #[error(transparent)]
    InvalidConfig(#[from] TopicConfigError),
    #[error("persisting topic metadata to {path}")]
    Persist {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading topic metadata from {path}: {reason}")]
    Load { path: PathBuf, reason: String },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Persisted {
    version: u32,
    topics: Vec<TopicMetadata>,
}

/// The topics of the cluster, readable concurrently, changed one at a time.
#[derive(Debug)]
pub struct Catalog {
    path: PathBuf,
    topics: RwLock<BTreeMap<String, Arc<TopicMetadata>>>,
    /// Serialises changes so that the file and the map never disagree.
    write: Mutex<()>,
}

/// Checks a topic name as Kafka does: 1..=249 characters of `[a-zA-Z0-9._-]`, not `.`/`..`.
pub fn validate_topic_name(name: &str) -> Result<(), CatalogError> {
    let fail = |reason| Err(CatalogError::InvalidTopicName { name: name.to_string(), reason });
    if name.is_empty() {
        return fail("the name is empty");
    }
    if name == "." || name == ".." {
        return fail("\".\" and \"..\" are not allowed");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return fail("longer than 249 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-') {
        return fail("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

impl Catalog {
    /// Loads the catalog from `metadata_dir`, or starts empty.
    pub fn open(metadata_dir: &Path) -> Result<Catalog, CatalogError> {
        let path = metadata_dir.join("topics.json");
        let persisted: Persisted = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| CatalogError::Load { path: path.clone(), reason: e.to_string() })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Persisted::default(),
            Err(e) => return Err(CatalogError::Load { path, reason: e.to_string() }),
        };
        let topics = persisted.topics.into_iter().map(|t| (t.name.clone(), Arc::new(t))).collect();
        Ok(Catalog { path, topics: RwLock::new(topics), write: Mutex::new(()) })
    }

    pub fn get(&self, name: &str) -> Option<Arc<TopicMetadata>> {
        self.topics.read().get(name).cloned()
    }

    pub fn get_by_id(&self, id: Uuid) -> Option<Arc<TopicMetadata>> {
        self.topics.read().values().find(|t| t.id == id).cloned()
    }

    /// All topics, ordered by name.
    pub fn list(&self) -> Vec<Arc<TopicMetadata>> {
        self.topics.read().values().cloned().collect()
    }

    /// Creates a topic with a fresh id.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, CatalogError> {
        validate_topic_name(name)?;
        check_partition_count(name, partitions)?;
        topic_config::validate(&configs)?;
        self.change(|topics| {
            if topics.contains_key(name) {
                return Err(CatalogError::TopicAlreadyExists(name.to_string()));
            }
            let topic = TopicMetadata { name: name.to_string(), id: Uuid::new_v4(), partitions, configs };
            Ok(Some(topic))
        })
        .map(|t| t.expect("create_topic always yields a topic"))
    }

    /// Removes a topic; returns what it was.
    pub fn delete_topic(&self, name: &str) -> Result<Arc<TopicMetadata>, CatalogError> {
        let _guard = self.write.lock();
        let mut next = self.topics.read().clone();
        let removed = next.remove(name).ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))?;
        self.persist(&next)?;
        *self.topics.write() = next;
        Ok(removed)
    }

    /// Raises a topic's partition count (never lowers it).
    pub fn increase_partitions(&self, name: &str, count: i32) -> Result<Arc<TopicMetadata>, CatalogError> {
        check_partition_count(name, count)?;
        self.change(|topics| {
            let current = topics.get(name).ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))?;
            if count < current.partitions {
                return Err(CatalogError::InvalidPartitions {
                    topic: name.into(),
                    reason: format!("cannot decrease from {} to {count}", current.partitions),
                });
            }
            if count == current.partitions {
                return Err(CatalogError::InvalidPartitions {
                    topic: name.into(),
                    reason: format!("topic already has {count} partitions"),
                });
            }
            Ok(Some(TopicMetadata { partitions: count, ..(**current).clone() }))
        })
        .map(|t| t.expect("increase_partitions always yields a topic"))
    }

    /// Replaces a topic's config overrides.
    pub fn set_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicMetadata>, CatalogError> {
        topic_config::validate(&configs)?;
        self.change(|topics| {
            let current = topics.get(name).ok_or_else(|| CatalogError::UnknownTopic(name.to_string()))?;
            Ok(Some(TopicMetadata { configs: configs.clone(), ..(**current).clone() }))
        })
        .map(|t| t.expect("set_configs always yields a topic"))
    }

    /// Applies one change to a topic: persists the new map first, then publishes it.
    fn change(
        &self,
        f: impl FnOnce(&BTreeMap<String, Arc<TopicMetadata>>) -> Result<Option<TopicMetadata>, CatalogError>,
    ) -> Result<Option<Arc<TopicMetadata>>, CatalogError> {
        let _guard = self.write.lock();
        let mut next = self.topics.read().clone();
        let Some(topic) = f(&next)? else { return Ok(None) };
        let topic = Arc::new(topic);
        next.insert(topic.name.clone(), topic.clone());
        self.persist(&next)?;
        *self.topics.write() = next;
        Ok(Some(topic))
    }

    fn persist(&self, topics: &BTreeMap<String, Arc<TopicMetadata>>) -> Result<(), CatalogError> {
        let persisted = Persisted { version: 1, topics: topics.values().map(|t| (**t).clone()).collect() };
        let bytes = serde_json::to_vec_pretty(&persisted)
            .map_err(|e| CatalogError::Persist { path: self.path.clone(), source: std::io::Error::other(e) })?;
        atomic_file::write(&self.path, &bytes)
            .map_err(|source| CatalogError::Persist { path: self.path.clone(), source })
    }
}

fn check_partition_count(topic: &str, partitions: i32) -> Result<(), CatalogError> {
    if !(1..=MAX_PARTITIONS).contains(&partitions) {
        return Err(CatalogError::InvalidPartitions {
            topic: topic.to_string(),
            reason: format!("must be between 1 and {MAX_PARTITIONS}, got {partitions}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_survive_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("open");
        let created = catalog
            .create_topic("orders", 3, BTreeMap::from([("retention.ms".into(), "1000".into())]))
            .expect("create");
        let reopened = Catalog::open(dir.path()).expect("reopen");
        assert_eq!(reopened.get("orders").as_deref(), Some(&*created));
        assert_eq!(reopened.get_by_id(created.id).map(|t| t.name.clone()), Some("orders".to_string()));
    }

    #[test]
    fn duplicates_bad_names_and_partition_decreases_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let catalog = Catalog::open(dir.path()).expect("open");
        catalog.create_topic("a", 2, BTreeMap::new()).expect("create");
        assert!(matches!(catalog.create_topic("a", 1, BTreeMap::new()), Err(CatalogError::TopicAlreadyExists(_))));
        assert!(matches!(catalog.create_topic("a/b", 1, BTreeMap::new()), Err(CatalogError::InvalidTopicName { .. })));
        assert!(matches!(catalog.create_topic("b", 0, BTreeMap::new()), Err(CatalogError::InvalidPartitions { .. })));
        assert!(matches!(catalog.increase_partitions("a", 1), Err(CatalogError::InvalidPartitions { .. })));
        assert_eq!(catalog.increase_partitions("a", 5).expect("grow").partitions, 5);
        catalog.delete_topic("a").expect("delete");
        assert!(catalog.get("a").is_none());
    }
}
