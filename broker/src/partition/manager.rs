//! [`ReplicaManager`]: every partition replica on this broker, by topic.
//!
//! Partition directories are `<data>/<topic>-<partition>`. A directory whose
//! `partition.metadata` names another topic id (a topic deleted and re-created while this
//! node was down) is set aside as `<dir>.<old id>-stray` rather than served or deleted.
//! Deleted topics are renamed to `…-delete` first and removed in the background, so a crash
//! mid-deletion never leaves a half-deleted partition that looks live.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::config::BrokerConfig;
use crate::metadata::topic_config::TopicConfig;
use crate::metadata::TopicMetadata;

use super::{Leadership, Partition, PartitionError};

/// The partitions hosted by this broker.
#[derive(Debug)]
pub struct ReplicaManager {
    data_dir: PathBuf,
    broker: Arc<BrokerConfig>,
    /// Hosted replicas: topic → partition index → replica (a broker hosts only the
    /// partitions assigned to it).
    topics: RwLock<HashMap<String, BTreeMap<i32, Arc<Partition>>>>,
}

impl ReplicaManager {
    /// An empty manager; removes leftovers of deletions interrupted by a crash.
    pub fn new(data_dir: &Path, broker: Arc<BrokerConfig>) -> ReplicaManager {
        if let Ok(entries) = std::fs::read_dir(data_dir) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with("-delete") {
                    if let Err(e) = std::fs::remove_dir_all(entry.path()) {
                        tracing::warn!(path = %entry.path().display(), error = %e, "could not remove deleted partition");
                    }
                }
            }
        }
        ReplicaManager { data_dir: data_dir.to_path_buf(), broker, topics: RwLock::new(HashMap::new()) }
    }

    pub fn partition_dir(&self, topic: &str, partition: i32) -> PathBuf {
        self.data_dir.join(format!("{topic}-{partition}"))
    }

    /// The replica of `topic`-`partition` if this broker hosts it (leader or not).
    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.topics.read().get(topic)?.get(&partition).cloned()
    }

    /// The replica of `topic`-`partition` if this broker hosts it and leads it.
    pub fn leader(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        self.get(topic, partition).filter(|p| p.is_leader())
    }

    /// Every partition, for retention, metrics and shutdown.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.topics.read().values().flat_map(|m| m.values()).cloned().collect()
    }

    /// Opens (or creates) the replica of partition `index` of `topic` unless it is open.
    pub fn ensure_partition(&self, topic: &TopicMetadata, index: i32) -> Result<Arc<Partition>, PartitionError> {
        if let Some(p) = self.get(&topic.name, index).filter(|p| p.topic_id == topic.id) {
            return Ok(p);
        }
        let config = TopicConfig::resolve(&self.broker, &topic.configs).map_err(|e| PartitionError::InvalidRecord {
            topic: topic.name.clone(),
            partition: -1,
            reason: e.to_string(),
        })?;
        let dir = self.partition_dir(&topic.name, index);
        if let Some(recorded) = Partition::recorded_topic_id(&dir) {
            if recorded != topic.id {
                let stray = dir.with_file_name(format!("{}-{index}.{}-stray", topic.name, recorded.simple()));
                tracing::warn!(dir = %dir.display(), %recorded, current = %topic.id, "setting aside the log of an older topic with the same name");
                std::fs::rename(&dir, &stray).map_err(|source| PartitionError::Io {
                    topic: topic.name.clone(),
                    partition: index,
                    op: "set aside stray partition directory",
                    path: dir.clone(),
                    source,
                })?;
            }
        }
        let opened = Arc::new(Partition::open(&dir, &topic.name, index, topic.id, self.broker.node_id, config)?);
        // Every broker runs a transaction coordinator: clients' transactional batches are
        // appended (their transactions end with the coordinator's markers).
        opened.accept_transactions(true);
        self.topics.write().entry(topic.name.clone()).or_default().insert(index, opened.clone());
        Ok(opened)
    }

    /// Every hosted replica as (topic, index, topic id).
    pub fn hosted(&self) -> Vec<(String, i32, uuid::Uuid)> {
        self.topics.read().iter().flat_map(|(t, m)| m.iter().map(move |(i, p)| (t.clone(), *i, p.topic_id))).collect()
    }

    /// Applies changed configs of `topic` to its open partitions.
    pub fn update_topic_config(&self, topic: &TopicMetadata) {
        match TopicConfig::resolve(&self.broker, &topic.configs) {
            Ok(config) => {
                for p in self.topics.read().get(&topic.name).into_iter().flat_map(|m| m.values()) {
                    p.update_config(config.clone());
                }
            }
            Err(e) => tracing::error!(topic = %topic.name, error = %e, "cannot apply topic config"),
        }
    }

    /// Stops serving `topic` and deletes its partition directories.
    pub fn remove_topic(&self, topic: &str) {
        let Some(partitions) = self.topics.write().remove(topic) else { return };
        for p in partitions.into_values() {
            retire(&p);
        }
    }

    /// Stops serving one replica (its topic was deleted, or it moved away) and deletes its data.
    pub fn remove_partition(&self, topic: &str, index: i32) {
        let removed = {
            let mut topics = self.topics.write();
            let removed = topics.get_mut(topic).and_then(|m| m.remove(&index));
            if topics.get(topic).is_some_and(BTreeMap::is_empty) {
                topics.remove(topic);
            }
            removed
        };
        if let Some(p) = removed {
            retire(&p);
        }
    }

    /// Runs retention on every partition; errors are logged, not fatal.
    pub fn enforce_retention(&self, now_ms: i64) {
        for p in self.all() {
            match p.enforce_retention(now_ms) {
                Ok(0) => {}
                Ok(n) => {
                    tracing::info!(topic = %p.topic, partition = p.index, segments = n, log_start_offset = p.log_start_offset(), "retention deleted segments")
                }
                Err(e) => tracing::error!(error = %e, "retention failed"),
            }
        }
    }

    /// Runs the log cleaner on every compacted partition; errors are logged, not fatal.
    pub fn compact_all(&self, now_ms: i64) {
        for p in self.all() {
            match p.compact(now_ms) {
                Ok(Some(stats)) if stats.segments_cleaned > 0 => tracing::info!(
                    topic = %p.topic,
                    partition = p.index,
                    segments = stats.segments_cleaned,
                    records_removed = stats.records_removed,
                    bytes_before = stats.bytes_before,
                    bytes_after = stats.bytes_after,
                    "compacted"
                ),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "compaction failed"),
            }
        }
    }

    /// Writes every replica's high watermark to its checkpoint (those that moved).
    pub fn checkpoint_high_watermarks(&self) {
        for p in self.all() {
            p.checkpoint_high_watermark();
        }
    }

    /// fsyncs the segments closed by rolls on every partition (Kafka's flush after a roll).
    pub fn flush_rolled_segments(&self) {
        for p in self.all() {
            if let Err(e) = p.flush_rolled_segments() {
                tracing::error!(error = %e, "flush of rolled segments failed");
            }
        }
    }

    /// Flushes every partition (clean shutdown), so the next start skips recovery.
    pub fn flush_all(&self) {
        for p in self.all() {
            if let Err(e) = p.flush() {
                tracing::error!(error = %e, "flush at shutdown failed");
            }
        }
    }
}

/// A replica leaves this broker: it stops leading or following first, so an acks=all produce
/// waiting on it is answered NOT_LEADER_OR_FOLLOWER now, as Kafka answers it, instead of
/// REQUEST_TIMED_OUT at the request's timeout. (librdkafka takes a timeout as "possibly
/// persisted" and may re-send such records under a bumped producer epoch, where no broker can
/// recognise them as retries: CI saw one record stored twice that way.) Then its data goes.
fn retire(p: &Partition) {
    p.set_leadership(Leadership::none());
    delete_dir(p);
}

/// Renames a replica's directory to `…-delete` and removes it in the background.
fn delete_dir(p: &Partition) {
    let doomed = p.dir.with_file_name(format!("{}-{}.{}-delete", p.topic, p.index, uuid::Uuid::new_v4().simple()));
    match std::fs::rename(&p.dir, &doomed) {
        Ok(()) => {
            std::thread::spawn(move || {
                if let Err(e) = std::fs::remove_dir_all(&doomed) {
                    tracing::warn!(path = %doomed.display(), error = %e, "could not remove deleted partition");
                }
            });
        }
        Err(e) => tracing::error!(path = %p.dir.display(), error = %e, "could not delete partition directory"),
    }
}
