//! The raft log on disk: `<data>/metadata/raft/`.
//!
//! The metadata log is small (snapshots compact it), so every unpurged entry is also kept in
//! memory. On disk, entries are frames `[len u32][crc32c u32][JSON entry]` in segment files
//! `<first index, 20 digits>.log`, rolled at [`SEGMENT_BYTES`]; `vote.json`, `committed.json`
//! and `purged.json` hold raft's vote, the last known committed log id and the last purged
//! one. Writes happen in call order on the caller's task (openraft's core): an append returns
//! after the segment is fsynced, and only then reports the IO complete.
//!
//! Opening scans every segment, checks each frame's CRC, and cuts a torn or corrupt tail (the
//! entries after it were never acknowledged as durable), as the partition log's recovery does.

// openraft's StorageError is large, and the storage traits this file implements return it.
#![allow(clippy::result_large_err)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use super::atomic_file;
use super::types::{Entry, LogId, StorageError, TypeConfig, Vote};

/// A segment rolls once it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 1024 * 1024;
/// How long a purge past the whole log waits for the snapshot covering it to be on disk.
const PURGE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
/// The largest frame accepted when reading a segment back.
const MAX_FRAME: u32 = 64 * 1024 * 1024;

/// The raft log storage; clones share the same log (the reader openraft asks for is one).
#[derive(Debug, Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    entries: BTreeMap<u64, Entry>,
    /// Where each entry's frame starts: (segment base index, byte offset).
    positions: BTreeMap<u64, (u64, u64)>,
    /// Segment base index → its length in bytes.
    segments: BTreeMap<u64, u64>,
    /// The segment appends go to.
    active: Option<(u64, File)>,
    vote: Option<Vote>,
    committed: Option<LogId>,
    last_purged: Option<LogId>,
    /// Purges stop below this index (None: purge as asked); see [`LogStore::limit_purges`].
    purge_limit: Option<Arc<AtomicU64>>,
    /// The newest snapshot on disk; a purge past the whole log waits for it.
    persisted: Option<watch::Receiver<Option<u64>>>,
}

fn io_write(e: &io::Error) -> StorageError {
    StorageIOError::write_logs(e).into()
}

fn segment_path(dir: &Path, base: u64) -> PathBuf {
    dir.join(format!("{base:020}.log"))
}

fn read_json<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Reads one of the log's small files; an empty, torn or otherwise unreadable copy is treated
/// as absent, with a warning (the caller applies the fallback docs/durability.md gives).
fn read_json_tolerant<T: DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match read_json(path) {
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable metadata log file (torn by a crash or damaged); treating it as absent");
            Ok(None)
        }
        other => other,
    }
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    atomic_file::write(path, &bytes)
}

fn frame(entry: &Entry) -> io::Result<Vec<u8>> {
    let body = serde_json::to_vec(entry).map_err(io::Error::other)?;
    let len = u32::try_from(body.len()).map_err(|_| io::Error::other("log entry over 4 GiB"))?;
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The whole frames of a segment, with their offsets, and the length of the valid prefix.
fn scan(bytes: &[u8]) -> (Vec<(u64, Entry)>, u64) {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(header) = bytes.get(pos..pos + 8) {
        let len = u32::from_be_bytes([header[0], header[1], header[2], header[3]]);
        let crc = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
        if len > MAX_FRAME {
            break;
        }
        let Some(body) = bytes.get(pos + 8..pos + 8 + len as usize) else { break };
        if crc32c::crc32c(body) != crc {
            break;
        }
        let Ok(entry) = serde_json::from_slice::<Entry>(body) else { break };
        out.push((pos as u64, entry));
        pos += 8 + len as usize;
    }
    (out, pos as u64)
}

impl LogStore {
    /// Opens the log in `dir` (created if missing), recovering from a torn tail.
    pub fn open(dir: &Path) -> io::Result<LogStore> {
        LogStore::open_beside(dir, None)
    }

    /// Opens the log in `dir` beside a state machine whose snapshot ends at `snapshot_last`:
    /// if `purged.json` is lost while the log no longer starts at its beginning, the snapshot
    /// (which covers every purged entry) says where it starts.
    pub fn open_beside(dir: &Path, snapshot_last: Option<LogId>) -> io::Result<LogStore> {
        fs::create_dir_all(dir)?;
        let vote: Option<Vote> = read_json_tolerant(&dir.join("vote.json"))?;
        let committed: Option<LogId> = read_json_tolerant(&dir.join("committed.json"))?;
        let last_purged: Option<LogId> = read_json_tolerant(&dir.join("purged.json"))?;
        let mut bases: Vec<u64> = fs::read_dir(dir)?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".log")?.parse::<u64>().ok())
            .collect();
        bases.sort_unstable();
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            entries: BTreeMap::new(),
            positions: BTreeMap::new(),
            segments: BTreeMap::new(),
            active: None,
            vote,
            committed,
            last_purged,
            purge_limit: None,
            persisted: None,
        };
        let purged_index = last_purged.map(|l| l.index);
        let mut torn = false;
        for base in bases {
            let path = segment_path(dir, base);
            if torn {
                tracing::warn!(path = %path.display(), "removing metadata log segment after a torn tail");
                fs::remove_file(&path)?;
                continue;
            }
            let mut bytes = Vec::new();
            File::open(&path)?.read_to_end(&mut bytes)?;
            let (frames, valid) = scan(&bytes);
            if valid < bytes.len() as u64 {
                tracing::warn!(path = %path.display(), valid, len = bytes.len(), "metadata log has a torn or corrupt tail; truncating");
                let f = OpenOptions::new().write(true).open(&path)?;
                f.set_len(valid)?;
                f.sync_all()?;
                torn = true;
            }
            for (offset, entry) in frames {
                let index = entry.log_id.index;
                if purged_index.is_some_and(|p| index <= p) {
                    continue;
                }
                inner.positions.insert(index, (base, offset));
                inner.entries.insert(index, entry);
            }
            inner.segments.insert(base, valid);
        }
        if let Some((&base, _)) = inner.segments.iter().next_back() {
            let file = OpenOptions::new().append(true).open(segment_path(dir, base))?;
            inner.active = Some((base, file));
        }
        inner.recover_lost_files(snapshot_last);
        Ok(LogStore { inner: Arc::new(Mutex::new(inner)) })
    }

    /// Purges no entry at or above `limit` (read at each purge), unless a purge reaches past
    /// the whole log (a snapshot installed from the leader is newer than everything here). The
    /// state machine keeps two snapshots and sets it to one past the older one's last index,
    /// so a damaged newest snapshot can be replaced by the older one and the log after it.
    ///
    /// A purge past the whole log (after a snapshot from the leader was installed) waits until
    /// `persisted` says that snapshot is on disk: openraft runs the install and the purge
    /// concurrently, and a crash between a purge recorded and a snapshot not yet written would
    /// leave entries that are nowhere.
    pub fn limit_purges(&self, limit: Arc<AtomicU64>, persisted: watch::Receiver<Option<u64>>) {
        let mut inner = self.inner.lock();
        inner.purge_limit = Some(limit);
        inner.persisted = Some(persisted);
    }

    /// The index of the last entry (or of the last purged one), 0 if none.
    pub fn last_index(&self) -> u64 {
        let inner = self.inner.lock();
        inner.entries.keys().next_back().copied().or(inner.last_purged.map(|l| l.index)).unwrap_or(0)
    }

    /// The first index still in the log (purged + 1).
    pub fn first_index(&self) -> u64 {
        self.inner.lock().last_purged.map_or(0, |l| l.index + 1)
    }

    /// Whether the log has never held anything (no vote, no entry): a fresh node.
    pub fn is_pristine(&self) -> bool {
        let inner = self.inner.lock();
        inner.vote.is_none() && inner.entries.is_empty() && inner.last_purged.is_none()
    }
}

impl Inner {
    /// The fallbacks for a lost `purged.json`, `vote.json` or `committed.json` (see
    /// docs/durability.md): each is rebuilt from what the segments and the snapshot prove.
    fn recover_lost_files(&mut self, snapshot_last: Option<LogId>) {
        let first = self.entries.keys().next().copied();
        if self.last_purged.is_none() && first.is_none_or(|i| i > 0) {
            if let Some(snapshot) = snapshot_last.filter(|s| first.is_none_or(|i| s.index + 1 >= i)) {
                tracing::warn!(
                    purged_upto = snapshot.index,
                    "purged.json is missing but the log starts after its beginning; the snapshot covers it"
                );
                self.last_purged = Some(snapshot);
                let keep = self.entries.split_off(&(snapshot.index + 1));
                self.entries = keep;
                let keep = self.positions.split_off(&(snapshot.index + 1));
                self.positions = keep;
            } else if let Some(first) = first.filter(|_| !self.segments.is_empty()) {
                // No snapshot reaches the first entry: the entry before it is assumed to be of
                // the first entry's term (openraft only needs a log id to start from).
                let leader_id = self.entries[&first].log_id.leader_id;
                tracing::warn!(
                    first_index = first,
                    "purged.json is missing, the log starts after its beginning and no snapshot covers the gap"
                );
                self.last_purged = Some(LogId::new(leader_id, first - 1));
            }
        }
        if self.vote.is_none() {
            if let Some(last) = self.entries.values().next_back().map(|e| e.log_id).or(self.last_purged) {
                // The vote the entries prove: this node accepted the last entry's leader in its
                // term. Uncommitted, so the node neither claims leadership from it nor grants a
                // vote to anyone else in that term.
                let vote = Vote::new(last.leader_id.term, last.leader_id.node_id);
                tracing::warn!(
                    ?vote,
                    "vote.json is missing although the log holds entries; voting as the last entry proves"
                );
                self.vote = Some(vote);
            }
        }
        let last_index = self.entries.keys().next_back().copied().or(self.last_purged.map(|l| l.index));
        if self.committed.is_some_and(|c| last_index.is_none_or(|last| c.index > last)) {
            tracing::warn!(committed = ?self.committed, ?last_index, "committed.json is beyond the log's end; forgetting it");
            self.committed = None;
        }
    }

    fn append_one(&mut self, entry: Entry) -> io::Result<()> {
        let index = entry.log_id.index;
        let bytes = frame(&entry)?;
        let roll = match &self.active {
            None => true,
            Some((base, _)) => self.segments.get(base).copied().unwrap_or(0) >= SEGMENT_BYTES,
        };
        if roll {
            if let Some((_, f)) = self.active.take() {
                f.sync_data()?;
            }
            let path = segment_path(&self.dir, index);
            let file = OpenOptions::new().create(true).append(true).open(&path)?;
            file.set_len(0)?;
            File::open(&self.dir)?.sync_all()?;
            self.segments.insert(index, 0);
            self.active = Some((index, file));
        }
        let Some((base, file)) = self.active.as_mut() else { return Err(io::Error::other("no active segment")) };
        let offset = self.segments.get(base).copied().unwrap_or(0);
        file.write_all(&bytes)?;
        self.segments.insert(*base, offset + bytes.len() as u64);
        self.positions.insert(index, (*base, offset));
        self.entries.insert(index, entry);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        match &self.active {
            Some((_, f)) => f.sync_data(),
            None => Ok(()),
        }
    }

    /// Removes entries from `index` on, from memory and disk.
    fn truncate_from(&mut self, index: u64) -> io::Result<()> {
        let Some(&(base, offset)) = self.positions.get(&index) else {
            // Nothing at or after it on disk (only possible past the end).
            self.entries.split_off(&index);
            self.positions.split_off(&index);
            return Ok(());
        };
        self.entries.split_off(&index);
        self.positions.split_off(&index);
        self.active = None;
        let later: Vec<u64> = self.segments.range(base + 1..).map(|(b, _)| *b).collect();
        for b in later {
            fs::remove_file(segment_path(&self.dir, b))?;
            self.segments.remove(&b);
        }
        let path = segment_path(&self.dir, base);
        let file = OpenOptions::new().append(true).open(&path)?;
        file.set_len(offset)?;
        file.sync_all()?;
        self.segments.insert(base, offset);
        self.active = Some((base, file));
        Ok(())
    }

    /// Where a purge up to `log_id` may really go, given the purge limit: `None` for nowhere.
    fn limited_purge(&self, log_id: LogId) -> Option<LogId> {
        let Some(limit) = &self.purge_limit else { return Some(log_id) };
        let limit = limit.load(Ordering::Relaxed);
        let last_entry = self.entries.keys().next_back().copied();
        if log_id.index < limit || last_entry.is_none_or(|last| log_id.index > last) {
            return Some(log_id);
        }
        let upto = limit.checked_sub(1)?;
        if self.last_purged.is_some_and(|p| p.index >= upto) {
            return None;
        }
        self.entries.get(&upto).map(|e| e.log_id)
    }

    /// Forgets entries up to `log_id` (inclusive) and deletes the segments wholly below it.
    fn purge_upto(&mut self, log_id: LogId) -> io::Result<()> {
        write_json(&self.dir.join("purged.json"), &log_id)?;
        self.last_purged = Some(log_id);
        let last_entry = self.entries.keys().next_back().copied();
        let keep = self.entries.split_off(&(log_id.index + 1));
        self.entries = keep;
        let keep = self.positions.split_off(&(log_id.index + 1));
        self.positions = keep;
        let bases: Vec<u64> = self.segments.keys().copied().collect();
        for (i, base) in bases.iter().enumerate() {
            // The last index a segment holds: just below the next segment's base, or the
            // log's last entry for the newest one.
            let last_in_segment = match bases.get(i + 1) {
                Some(next) => next.saturating_sub(1),
                None => last_entry.unwrap_or(*base),
            };
            if last_in_segment <= log_id.index {
                if self.active.as_ref().is_some_and(|(b, _)| b == base) {
                    self.active = None;
                }
                fs::remove_file(segment_path(&self.dir, *base))?;
                self.segments.remove(base);
            }
        }
        Ok(())
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        Ok(self.inner.lock().entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.inner.lock();
        let last_purged_log_id = inner.last_purged;
        let last_log_id = inner.entries.values().next_back().map(|e| e.log_id).or(last_purged_log_id);
        Ok(LogState { last_purged_log_id, last_log_id })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        write_json(&inner.dir.join("vote.json"), vote).map_err(|e| StorageIOError::write_vote(&e))?;
        inner.vote = Some(*vote);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.lock().vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        // Not fsynced on purpose: losing it, or finding it empty or torn after a power cut
        // (read as absent), only means replaying less on the next start before a leader tells
        // this node what is committed.
        let path = inner.dir.join("committed.json");
        let bytes = serde_json::to_vec(&committed).map_err(|e| io_write(&io::Error::other(e)))?;
        let tmp = path.with_extension("tmp");
        fs::write(&tmp, bytes).and_then(|()| fs::rename(&tmp, &path)).map_err(|e| io_write(&e))?;
        inner.committed = committed;
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.inner.lock().committed)
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + Send,
        I::IntoIter: Send,
    {
        let result = {
            let mut inner = self.inner.lock();
            let mut result = Ok(());
            for entry in entries {
                if let Err(e) = inner.append_one(entry) {
                    result = Err(e);
                    break;
                }
            }
            result.and_then(|()| inner.sync())
        };
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let storage = io_write(&e);
                callback.log_io_completed(Err(e));
                Err(storage)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.inner.lock().truncate_from(log_id.index).map_err(|e| io_write(&e))
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let waiting = {
            let inner = self.inner.lock();
            let past_the_log = inner.entries.keys().next_back().is_none_or(|last| log_id.index > *last);
            inner.persisted.clone().filter(|_| past_the_log)
        };
        if let Some(mut persisted) = waiting {
            let on_disk = persisted.wait_for(|p| p.is_some_and(|index| index >= log_id.index));
            if tokio::time::timeout(PURGE_WAIT, on_disk).await.is_err() {
                tracing::warn!(
                    index = log_id.index,
                    "purging the metadata log past its end before the snapshot that covers it was written"
                );
            }
        }
        let mut inner = self.inner.lock();
        match inner.limited_purge(log_id) {
            Some(upto) => inner.purge_upto(upto).map_err(|e| io_write(&e)),
            None => Ok(()),
        }
    }
}
