//! [`ReplicaManager`]: every partition replica on this broker, by topic.
//!
//! Partition directories are `<data>/<topic>-<partition>`. A directory whose
//! `partition.metadata` names another topic id (a topic deleted and re-created while this
//! node was down) is set aside as `<dir>.<old id>-stray` rather than served or deleted.
//! Deleted topics are renamed to `…-delete` first and removed in the background, so a crash
//! mid-deletion never leaves a half-deleted partition that looks live.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;

use crate::config::BrokerConfig;
use crate::metadata::topic_config::TopicConfig;
use crate::metadata::TopicMetadata;

use super::{Partition, PartitionError};

/// The partitions hosted by this broker.
#[derive(Debug)]
pub struct ReplicaManager {
    data_dir: PathBuf,
    broker: Arc<BrokerConfig>,
    topics: RwLock<HashMap<String, Vec<Arc<Partition>>>>,
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

    pub fn get(&self, topic: &str, partition: i32) -> Option<Arc<Partition>> {
        let topics = self.topics.read();
        let partitions = topics.get(topic)?;
        usize::try_from(partition).ok().and_then(|i| partitions.get(i)).cloned()
    }

    /// Every partition, for retention, metrics and shutdown.
    pub fn all(&self) -> Vec<Arc<Partition>> {
        self.topics.read().values().flatten().cloned().collect()
    }

    /// Opens (or creates) the partitions of `topic` that are not open yet.
    pub fn ensure_topic(&self, topic: &TopicMetadata) -> Result<(), PartitionError> {
        let config = TopicConfig::resolve(&self.broker, &topic.configs).map_err(|e| PartitionError::InvalidRecord {
            topic: topic.name.clone(),
            partition: -1,
            reason: e.to_string(),
        })?;
        let open_count = self.topics.read().get(&topic.name).map_or(0, Vec::len);
        let mut opened = Vec::new();
        for index in i32::try_from(open_count).unwrap_or(i32::MAX)..topic.partitions {
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
            opened.push(Arc::new(Partition::open(&dir, &topic.name, index, topic.id, config.clone())?));
        }
        if !opened.is_empty() {
            self.topics.write().entry(topic.name.clone()).or_default().extend(opened);
        }
        Ok(())
    }

    /// Applies changed configs of `topic` to its open partitions.
    pub fn update_topic_config(&self, topic: &TopicMetadata) {
        match TopicConfig::resolve(&self.broker, &topic.configs) {
            Ok(config) => {
                for p in self.topics.read().get(&topic.name).into_iter().flatten() {
                    p.update_config(config.clone());
                }
            }
            Err(e) => tracing::error!(topic = %topic.name, error = %e, "cannot apply topic config"),
        }
    }

    /// Stops serving `topic` and deletes its partition directories.
    pub fn remove_topic(&self, topic: &str) {
        let Some(partitions) = self.topics.write().remove(topic) else { return };
        for p in partitions {
            let doomed =
                p.dir.with_file_name(format!("{}-{}.{}-delete", p.topic, p.index, uuid::Uuid::new_v4().simple()));
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

    /// Flushes every partition (clean shutdown), so the next start skips recovery.
    pub fn flush_all(&self) {
        for p in self.all() {
            if let Err(e) = p.flush() {
                tracing::error!(error = %e, "flush at shutdown failed");
            }
        }
    }
}
