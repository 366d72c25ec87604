//! The segmented partition log: one directory per partition replica, holding Kafka record
//! batches exactly as produced (the broker rewrites only baseOffset, partitionLeaderEpoch and,
//! for LogAppendTime, maxTimestamp), so that fetches send file ranges unchanged.
//!
//! Files in the directory: `<base offset, 20 digits>.log|.index|.timeindex` per segment,
//! `log.checkpoint` (log start offset, recovery point, clean-shutdown flag) and, once compacted,
//! `cleaner.checkpoint` (the first dirty offset).
//!
//! Module map:
//! - `mod.rs`: [`Log`] — appends, rolls, flushes, close; the public types.
//! - `open.rs`: `Log::open` — loading segments, deciding what to recover, leftover files.
//! - `read.rs`: fetch reads, timestamp lookups, header scans.
//! - `flush.rs`: fsyncing closed segments after a roll, off the append path.
//! - `retention.rs`: DeleteRecords and time/size retention.
//! - `replica.rs`: a follower's appends of the leader's batches, and truncation.
//! - `compaction.rs`: [`Log::compact`] — which segments a pass cleans, which records survive,
//!   the cleaner checkpoint; `cleaner.rs`: rewriting one segment and swapping it in.
//! - `records.rs`: the records inside a batch, parsed from the raw bytes
//!   ([`for_each_record`]); `codec.rs`: (de)compression of records under a size cap.
//! - `segment.rs`: one segment — its log file and indexes, append, close, delete.
//! - `recovery.rs`: the recovery scan of a segment and the checks that decide if one is needed.
//! - `batch.rs`: raw record-batch header parsing, CRC and the in-place rewrites (also used by
//!   the Produce handler).
//! - `index.rs` / `time_index.rs`: the sparse offset and time indexes.
//! - `mmap.rs`: the preallocated memory-mapped entry file under both indexes (the only unsafe).
//! - `window.rs`: buffered positional reads for walking batch headers.
//! - `checkpoint.rs`: the atomically replaced `log.checkpoint` file.
//! - `config.rs`: [`LogConfig`]; `error.rs`: [`LogError`].
//!
//! `Log` is not synchronised: its owner wraps it in a mutex. Reads return a [`FileSlice`] (a
//! shared file handle and a range) so the bytes can be read after the lock is released.

mod batch;
mod checkpoint;
mod cleaner;
mod codec;
mod compaction;
mod config;
mod error;
mod flush;
mod index;
mod mmap;
mod open;
mod read;
pub mod records;
mod recovery;
mod replica;
mod retention;
mod segment;
mod time_index;
mod window;

#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::IoSlice;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub use batch::{
    batches, set_base_offset, set_log_append_time, set_partition_leader_epoch, verify_crc, BatchError, BatchHeader,
    BATCH_HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
};
pub use codec::{decompress, Codec};
pub use compaction::{CompactionConfig, CompactionStats};
pub use config::LogConfig;
pub use error::LogError;
pub use flush::RolledSegments;
pub use records::{for_each_header, for_each_record, RecordView, RecordsError};

use checkpoint::Checkpoint;
use segment::Segment;

/// How often flushes write `log.checkpoint` at most ([`Log::flush`]).
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);

/// What an append wrote.
#[derive(Debug, Clone)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// Largest max timestamp of the appended batches (the append time for LogAppendTime).
    pub max_timestamp: i64,
    /// The time stamped on the batches, -1 unless LogAppendTime.
    pub log_append_time: i64,
}

/// A range of a segment file to send to a fetcher. The file handle keeps the data readable
/// even if retention deletes the segment meanwhile.
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: usize,
}

impl FileSlice {
    /// Reads exactly the slice's bytes (pread; the file's cursor is not used) into memory
    /// that is not zeroed first: a zeroed allocation of a MiB or more made jemalloc hand
    /// back and fault in fresh pages for every replica fetch (docs/benchmarks.md,
    /// "Replication's page faults").
    pub fn read(&self) -> std::io::Result<Bytes> {
        let mut buf = Vec::with_capacity(self.len);
        while buf.len() < self.len {
            let at = self.position + buf.len() as u64;
            if rustix::io::pread(&*self.file, rustix::buffer::spare_capacity(&mut buf), at)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
        }
        buf.truncate(self.len);
        Ok(Bytes::from(buf))
    }
}

/// Which time a topic stamps on its batches (`message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// One partition replica's log. See the module documentation.
pub struct Log {
    dir: PathBuf,
    config: LogConfig,
    /// Segments by base offset; never empty, the last one is the active segment.
    segments: BTreeMap<i64, Segment>,
    log_start_offset: i64,
    log_end_offset: i64,
    /// Everything below this offset is on disk (fsynced).
    recovery_point: i64,
    /// Truncations so far: a flush of rolled segments started before one may not move the
    /// recovery point ([`Log::mark_flushed`]).
    truncations: u64,
    /// Leader epoch of the last batch, -1 when the log holds none.
    latest_leader_epoch: i32,
    /// When the oldest unflushed append happened, for `flush.ms`.
    first_unflushed_ms: Option<i64>,
    /// A segment was created since the directory was last fsynced: the next flush makes its
    /// directory entry durable too.
    dir_unsynced: bool,
    /// When a flush last wrote `log.checkpoint`; see [`Log::flush`].
    checkpointed_at: Cell<Option<Instant>>,
    /// The cleaner checkpoint: compaction has rewritten the closed segments below this offset
    /// (they may have offset gaps); the bytes from here on are dirty. 0 if never compacted.
    first_dirty_offset: i64,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("dir", &self.dir)
            .field("log_start_offset", &self.log_start_offset)
            .field("log_end_offset", &self.log_end_offset)
            .field("recovery_point", &self.recovery_point)
            .field("first_dirty_offset", &self.first_dirty_offset)
            .field("segments", &self.segments.len())
            .finish()
    }
}

/// Whole batches whose headers parsed and whose CRCs matched: what [`Log::append_checked`]
/// takes, so that nothing reaches a segment unchecked and nothing is checked twice.
#[derive(Debug)]
pub struct CheckedBatches<'a> {
    batches: &'a [u8],
    ranges: Vec<std::ops::Range<usize>>,
    /// Records in all the batches (the offsets they take).
    offsets: i64,
}

impl<'a> CheckedBatches<'a> {
    /// Parses every batch of `batches` and checks its CRC; at least one batch.
    pub fn check(batches: &'a [u8]) -> Result<Self, LogError> {
        let mut ranges = Vec::new();
        let mut offsets: i64 = 0;
        for item in batch::batches(batches) {
            let (header, range) = item?;
            batch::verify_crc(&batches[range.clone()])?;
            offsets += i64::from(header.last_offset_delta) + 1;
            ranges.push(range);
        }
        if ranges.is_empty() {
            return Err(LogError::EmptyAppend);
        }
        Ok(Self { batches, ranges, offsets })
    }
}

/// Stamps a batch's header (`head`) as the leader appends it: its base offset, the leader
/// epoch and, for LogAppendTime, the time (and so the CRC, over `head` and `body`).
fn stamp(
    head: &mut [u8],
    body: &[u8],
    base_offset: i64,
    leader_epoch: i32,
    timestamp_type: TimestampType,
    now_ms: i64,
) -> Result<BatchHeader, LogError> {
    batch::set_base_offset(head, base_offset);
    batch::set_partition_leader_epoch(head, leader_epoch);
    if timestamp_type == TimestampType::LogAppendTime {
        batch::set_log_append_time_in_header(head, body, now_ms);
    }
    Ok(BatchHeader::parse(head)?)
}

impl Log {
    /// Appends one or more whole batches. Rolls first if the active segment would exceed
    /// `segment.bytes`, is older than `segment.ms`, or an index is full. Assigns offsets from
    /// the log end offset, stamps `leader_epoch` (and the time for LogAppendTime) into
    /// `batches`, writes them to the page cache and indexes them; fsyncs only when
    /// `flush.messages` is reached.
    ///
    /// Every batch's header and CRC are checked here ([`CheckedBatches::check`]), and an
    /// epoch older than the last batch's is refused: recovery truncates the log at the first
    /// batch breaking either rule, so letting one in could later cost every batch appended
    /// after it.
    pub fn append(
        &mut self,
        batches: &mut [u8],
        leader_epoch: i32,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let checked = CheckedBatches::check(batches)?;
        let ranges = checked.ranges.clone();
        let info = self.append_checked(checked, leader_epoch, timestamp_type, now_ms)?;
        // The caller's copy gets the same stamps as the log's.
        let mut next_offset = info.first_offset;
        for range in ranges {
            let (head, body) = batches[range].split_at_mut(BATCH_HEADER_LEN);
            next_offset = stamp(head, body, next_offset, leader_epoch, timestamp_type, now_ms)?.last_offset() + 1;
        }
        Ok(info)
    }

    /// [`Log::append`] of batches checked before (the produce path checks a request's batch
    /// before it takes the partition's lock, and its CRC is then computed once, not twice),
    /// left as they are: the stamps go into a copy of each batch's header, and the headers
    /// and the batches' bodies are written with one `pwritev`, so a request's records are
    /// never copied in memory.
    pub fn append_checked(
        &mut self,
        checked: CheckedBatches<'_>,
        leader_epoch: i32,
        timestamp_type: TimestampType,
        now_ms: i64,
    ) -> Result<AppendInfo, LogError> {
        let CheckedBatches { batches, ranges, offsets } = checked;
        if leader_epoch < self.latest_leader_epoch {
            return Err(LogError::LeaderEpochRegression { epoch: leader_epoch, latest: self.latest_leader_epoch });
        }
        let last_offset = self.log_end_offset + offsets - 1;
        if let Some(reason) = self.active().roll_reason(batches.len() as u64, last_offset, now_ms, &self.config) {
            self.roll(reason)?;
        }

        let first_offset = self.log_end_offset;
        let mut next_offset = first_offset;
        let mut max_timestamp = -1;
        let mut heads = Vec::with_capacity(ranges.len());
        let mut headers = Vec::with_capacity(ranges.len());
        for range in &ranges {
            let (head, body) = batches[range.clone()].split_at(BATCH_HEADER_LEN);
            let mut head: [u8; BATCH_HEADER_LEN] = head.try_into().expect("a checked batch holds a whole header");
            let header = stamp(&mut head, body, next_offset, leader_epoch, timestamp_type, now_ms)?;
            max_timestamp = max_timestamp.max(header.max_timestamp);
            next_offset = header.last_offset() + 1;
            headers.push((header, range.start as u64));
            heads.push(head);
        }
        let mut pieces = Vec::with_capacity(2 * ranges.len());
        for (head, range) in heads.iter().zip(&ranges) {
            pieces.push(IoSlice::new(head));
            pieces.push(IoSlice::new(&batches[range.start + BATCH_HEADER_LEN..range.end]));
        }
        let config = &self.config;
        let active = self.segments.values_mut().next_back().expect("a log always has an active segment");
        active.append_vectored(&mut pieces, &headers, now_ms, config)?;
        self.log_end_offset = next_offset;
        self.latest_leader_epoch = leader_epoch;
        self.first_unflushed_ms.get_or_insert(now_ms);
        if self.unflushed_messages() >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(AppendInfo {
            first_offset,
            last_offset: next_offset - 1,
            max_timestamp,
            log_append_time: if timestamp_type == TimestampType::LogAppendTime { now_ms } else { -1 },
        })
    }

    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }

    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset
    }

    /// Bytes of all segment log files (indexes not counted).
    pub fn size_bytes(&self) -> u64 {
        self.segments.values().map(Segment::size).sum()
    }

    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// fsync the active segment and its indexes if `flush.messages` or `flush.ms` is due
    /// (called after appends and by a timer). `flush.ms` counts from the oldest unflushed
    /// append.
    pub fn flush_if_due(&mut self, now_ms: i64) -> Result<(), LogError> {
        let unflushed = self.unflushed_messages();
        if unflushed == 0 {
            return Ok(());
        }
        let waited = self.first_unflushed_ms.map_or(0, |first| now_ms.saturating_sub(first));
        if unflushed >= self.config.flush_messages || waited >= self.config.flush_ms {
            self.flush()?;
        }
        Ok(())
    }

    /// fsync everything, advance the recovery point to the log end offset, write the
    /// checkpoint: the active segment and any closed one not yet flushed after its roll.
    ///
    /// The checkpoint is written at most every [`CHECKPOINT_INTERVAL`] by flushes (durable
    /// mode flushes for every acks=all group commit, and a checkpoint costs two more fsyncs):
    /// a recovery point on disk that lags only makes a restart after a crash rescan more.
    pub fn flush(&mut self) -> Result<(), LogError> {
        for segment in self.segments.range(self.first_unflushed_base()..).map(|(_, s)| s) {
            segment.flush()?;
        }
        if self.dir_unsynced {
            checkpoint::sync_dir(&self.dir)?;
            self.dir_unsynced = false;
        }
        self.recovery_point = self.log_end_offset;
        self.first_unflushed_ms = None;
        if self.checkpointed_at.get().is_none_or(|at| at.elapsed() >= CHECKPOINT_INTERVAL) {
            self.write_checkpoint(false)?;
        }
        Ok(())
    }

    /// Clean close: flush, close the active segment's indexes (trimmed, with the closing
    /// time-index entry) and mark the checkpoint clean so the next open skips recovery.
    /// Dropping a `Log` without closing it has crash semantics: the next open recovers.
    pub fn close(mut self) -> Result<(), LogError> {
        self.flush()?;
        let active = self.active_mut();
        active.close_indexes()?;
        active.flush()?;
        self.write_checkpoint(true)
    }

    /// Takes effect for later appends, rolls and retention; the active segment's preallocated
    /// indexes keep their size until it rolls.
    pub fn update_config(&mut self, config: LogConfig) {
        self.config = config;
    }

    /// Closes the active segment (indexes trimmed) and starts a new one at the log end
    /// offset. The closed segment is fsynced later, off the append path ([`flush`]); the
    /// recovery point moves when it is.
    fn roll(&mut self, reason: &'static str) -> Result<(), LogError> {
        let base_offset = self.log_end_offset;
        self.active_mut().close_indexes()?;
        let segment = Segment::create(&self.dir, base_offset, &self.config)?;
        self.segments.insert(base_offset, segment);
        self.dir_unsynced = true;
        tracing::debug!(dir = %self.dir.display(), base_offset, reason, "rolled a new segment");
        Ok(())
    }

    /// Base of the segment holding the recovery point: from it on, segments may hold bytes
    /// not yet fsynced.
    fn first_unflushed_base(&self) -> i64 {
        self.segments.range(..=self.recovery_point).next_back().map_or(i64::MIN, |(base, _)| *base)
    }

    /// Whether everything appended is on disk (the recovery point is the log end).
    pub fn is_flushed(&self) -> bool {
        self.recovery_point >= self.log_end_offset
    }

    fn unflushed_messages(&self) -> i64 {
        self.log_end_offset - self.recovery_point
    }

    fn active(&self) -> &Segment {
        self.segments.values().next_back().expect("a log always has an active segment")
    }

    fn active_mut(&mut self) -> &mut Segment {
        self.segments.values_mut().next_back().expect("a log always has an active segment")
    }

    fn write_checkpoint(&self, clean_shutdown: bool) -> Result<(), LogError> {
        checkpoint::write(&self.dir, &Checkpoint::new(self.log_start_offset, self.recovery_point, clean_shutdown))?;
        self.checkpointed_at.set(Some(Instant::now()));
        Ok(())
    }

    /// The offset after the last batch of the segment at `base_offset`: the next segment's
    /// base, or the log end offset for the active segment.
    fn segment_end_offset(&self, base_offset: i64) -> i64 {
        self.segments.range(base_offset + 1..).next().map_or(self.log_end_offset, |(next, _)| *next)
    }
}
