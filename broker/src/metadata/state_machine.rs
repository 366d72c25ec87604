//! The raft state machine: the [`MetadataImage`] in memory, published to the rest of the
//! broker on a `watch` channel after every applied batch, and its snapshots on disk under
//! `<data>/metadata/snapshots/<term>-<index>.snap`.
//!
//! `apply` changes memory only (it runs on openraft's state-machine task and must not block:
//! opening partitions is the publisher's job). A snapshot holds the *whole* image, so a broker
//! that installs one is exactly where the others are. On start the newest snapshot is loaded
//! and openraft re-applies the committed entries after it.

// openraft's StorageError is large, and the storage traits this file implements return it.
#![allow(clippy::result_large_err)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, RaftSnapshotBuilder, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::atomic_file;
use super::command::CommandResult;
use super::image::MetadataImage;
use super::types::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig};

/// A snapshot file: its meta and the image's JSON.
#[derive(Debug, Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta,
    image: MetadataImage,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    image: MetadataImage,
    last_applied: Option<LogId>,
    membership: StoredMembership,
    /// The newest snapshot: meta and the bytes shipped to followers (the image's JSON).
    current: Option<(SnapshotMeta, Vec<u8>)>,
    builds: u64,
}

/// The state machine; clones share it (the snapshot builder is one).
#[derive(Debug, Clone)]
pub struct StateMachine {
    inner: Arc<Mutex<Inner>>,
    publish: Arc<watch::Sender<Arc<MetadataImage>>>,
    installs: Arc<AtomicU64>,
    /// One past the last index of the older of the two snapshots kept (0 while only one is):
    /// the raft log is purged no further, so a damaged newest snapshot can be replaced by the
    /// older one plus the log after it ([`super::log_store::LogStore::limit_purges`]).
    purge_limit: Arc<AtomicU64>,
    /// The last index of the newest snapshot on disk, once its file is written.
    persisted: Arc<watch::Sender<Option<u64>>>,
}

fn snapshot_path(dir: &Path, meta: &SnapshotMeta) -> PathBuf {
    let (term, index) = meta.last_log_id.map_or((0, 0), |l| (l.leader_id.term, l.index));
    dir.join(format!("{term:020}-{index:020}.snap"))
}

fn write_err(e: impl std::fmt::Display) -> StorageError {
    StorageIOError::write_snapshot(None, &std::io::Error::other(e.to_string())).into()
}

impl StateMachine {
    /// Opens the state machine from the newest readable snapshot in `dir` (or empty). A
    /// snapshot file that cannot be read (damaged: they are written atomically, so a crash
    /// cannot tear one) is deleted with an error logged, and the older one kept beside it is
    /// used; the raft log still holds every entry after that one.
    pub fn open(dir: &Path) -> Result<StateMachine, StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| write_err(format!("creating {}: {e}", dir.display())))?;
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            image: MetadataImage::default(),
            last_applied: None,
            membership: StoredMembership::default(),
            current: None,
            builds: 0,
        };
        let mut files = snapshot_files(dir)?;
        while let Some(newest) = files.pop() {
            let bytes = match std::fs::read(&newest) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                // Not damage: a failing disk or a limit. The snapshot may be fine; stop.
                Err(e) => return Err(write_err(format!("reading {}: {e}", newest.display()))),
            };
            let file: SnapshotFile = match serde_json::from_slice(&bytes) {
                Ok(file) => file,
                Err(e) => {
                    tracing::error!(snapshot = %newest.display(), error = %e, "unreadable metadata snapshot; deleting it and loading the one before it");
                    if let Err(e) = std::fs::remove_file(&newest) {
                        tracing::warn!(snapshot = %newest.display(), error = %e, "could not delete an unreadable metadata snapshot");
                    }
                    continue;
                }
            };
            let data = serde_json::to_vec(&file.image).map_err(write_err)?;
            inner.image = file.image;
            inner.last_applied = file.meta.last_log_id;
            inner.membership = file.meta.last_membership.clone();
            inner.current = Some((file.meta, data));
            tracing::info!(snapshot = %newest.display(), applied_index = inner.image.applied_index, "loaded metadata snapshot");
            break;
        }
        let purge_limit = Arc::new(AtomicU64::new(files.last().map_or(0, |older| snapshot_index(older) + 1)));
        let image = Arc::new(inner.image.clone());
        let snapshot_end = inner.current.as_ref().and_then(|(meta, _)| meta.last_log_id).map(|l| l.index);
        Ok(StateMachine {
            inner: Arc::new(Mutex::new(inner)),
            publish: Arc::new(watch::Sender::new(image)),
            installs: Arc::new(AtomicU64::new(0)),
            purge_limit,
            persisted: Arc::new(watch::Sender::new(snapshot_end)),
        })
    }

    /// The last log id the loaded snapshot covers.
    pub fn snapshot_last_log_id(&self) -> Option<LogId> {
        self.inner.lock().current.as_ref().and_then(|(meta, _)| meta.last_log_id)
    }

    /// The last index of the newest snapshot written to disk, as it changes.
    pub fn persisted_snapshots(&self) -> watch::Receiver<Option<u64>> {
        self.persisted.subscribe()
    }

    /// How far the raft log may be purged; see the field's documentation.
    pub fn purge_limit(&self) -> Arc<AtomicU64> {
        self.purge_limit.clone()
    }

    /// Every image this state machine publishes, from the current one on.
    pub fn subscribe(&self) -> watch::Receiver<Arc<MetadataImage>> {
        self.publish.subscribe()
    }

    /// The current image.
    pub fn image(&self) -> Arc<MetadataImage> {
        self.publish.borrow().clone()
    }

    /// Snapshots installed from a leader since start.
    pub fn snapshot_installs(&self) -> u64 {
        self.installs.load(Ordering::Relaxed)
    }

    fn publish(&self, image: MetadataImage) {
        self.publish.send_replace(Arc::new(image));
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (meta, data) = {
            let mut inner = self.inner.lock();
            inner.builds += 1;
            let (term, index) = inner.last_applied.map_or((0, 0), |l| (l.leader_id.term, l.index));
            let meta = SnapshotMeta {
                last_log_id: inner.last_applied,
                last_membership: inner.membership.clone(),
                snapshot_id: format!("{term}-{index}-{}", inner.builds),
            };
            let file = SnapshotFile { meta: meta.clone(), image: inner.image.clone() };
            let bytes = serde_json::to_vec(&file).map_err(write_err)?;
            let path = snapshot_path(&inner.dir, &meta);
            atomic_file::write(&path, &bytes).map_err(|e| write_err(format!("writing {}: {e}", path.display())))?;
            self.keep_two(&inner.dir, &path);
            self.persisted.send_replace(meta.last_log_id.map(|l| l.index));
            let data = serde_json::to_vec(&file.image).map_err(write_err)?;
            inner.current = Some((meta.clone(), data.clone()));
            (meta, data)
        };
        tracing::info!(snapshot = %meta.snapshot_id, "built metadata snapshot");
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl StateMachine {
    /// Deletes every snapshot file but `newest` and the newest one older than it, and moves
    /// the purge limit to the older one kept.
    fn keep_two(&self, dir: &Path, newest: &Path) {
        let Ok(files) = snapshot_files(dir) else { return };
        let older = files.iter().rfind(|p| p.as_path() < newest).cloned();
        for path in files {
            if path != newest && Some(&path) != older.as_ref() {
                if let Err(e) = std::fs::remove_file(&path) {
                    tracing::warn!(path = %path.display(), error = %e, "could not remove an old metadata snapshot");
                }
            }
        }
        self.purge_limit.store(older.map_or(0, |p| snapshot_index(&p) + 1), Ordering::Relaxed);
    }
}

/// The snapshot files in `dir`, oldest first (their names sort by term, then index).
fn snapshot_files(dir: &Path) -> Result<Vec<PathBuf>, StorageError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| write_err(format!("listing {}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "snap"))
        .collect();
    files.sort();
    Ok(files)
}

/// The last log index a snapshot file covers, from its name (`<term>-<index>.snap`).
fn snapshot_index(path: &Path) -> u64 {
    path.file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.split_once('-'))
        .and_then(|(_, i)| i.parse().ok())
        .unwrap_or(0)
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let inner = self.inner.lock();
        Ok((inner.last_applied, inner.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResult>, StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let (results, image) = {
            let mut inner = self.inner.lock();
            let mut results = Vec::new();
            for entry in entries {
                let index = entry.log_id.index;
                inner.last_applied = Some(entry.log_id);
                let result = match entry.payload {
                    EntryPayload::Blank => {
                        inner.image.advance(index);
                        CommandResult::Done
                    }
                    EntryPayload::Normal(command) => inner.image.apply(&command, index),
                    EntryPayload::Membership(membership) => {
                        inner.membership = StoredMembership::new(Some(entry.log_id), membership);
                        inner.image.advance(index);
                        CommandResult::Done
                    }
                };
                if let CommandResult::Refused(e) = &result {
                    tracing::debug!(index, error = %e, "metadata command refused");
                }
                results.push(result);
            }
            (results, inner.image.clone())
        };
        self.publish(image);
        Ok(results)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let mut image: MetadataImage = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(None, &std::io::Error::other(e.to_string())))?;
        if let Some(l) = meta.last_log_id {
            image.applied_index = l.index;
        }
        {
            let mut inner = self.inner.lock();
            let file = SnapshotFile { meta: meta.clone(), image: image.clone() };
            let bytes = serde_json::to_vec(&file).map_err(write_err)?;
            let path = snapshot_path(&inner.dir, meta);
            atomic_file::write(&path, &bytes).map_err(|e| write_err(format!("writing {}: {e}", path.display())))?;
            self.keep_two(&inner.dir, &path);
            self.persisted.send_replace(meta.last_log_id.map(|l| l.index));
            inner.image = image.clone();
            inner.last_applied = meta.last_log_id;
            inner.membership = meta.last_membership.clone();
            inner.current = Some((meta.clone(), data));
        }
        self.installs.fetch_add(1, Ordering::Relaxed);
        tracing::info!(snapshot = %meta.snapshot_id, applied_index = image.applied_index, "installed metadata snapshot from the leader");
        self.publish(image);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let inner = self.inner.lock();
        Ok(inner
            .current
            .as_ref()
            .map(|(meta, data)| Snapshot { meta: meta.clone(), snapshot: Box::new(Cursor::new(data.clone())) }))
    }
}
