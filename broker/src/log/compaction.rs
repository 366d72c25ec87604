//! Log compaction (`cleanup.policy=compact`): keep only the newest record of every key.
//!
//! A pass first reads the whole log, active segment included, to learn the offset of every
//! key's newest record and the last batch of every producer id. It then rewrites the closed
//! segments it may clean (`cleaner.rs`), oldest first, keeping in each batch the records that
//! [`Retain`] keeps. Offsets never move: a compacted log has gaps, which recovery accepts below
//! the cleaner checkpoint.
//!
//! The cleaner checkpoint (`cleaner.checkpoint`, beside `log.checkpoint`) holds the first dirty
//! offset: the closed segments below it have been compacted (and may have offset gaps); the
//! bytes from it on are dirty. It is written before a pass swaps in its first segment, so that
//! after a crash recovery already knows those segments may have gaps. A pass that fails after
//! writing it leaves its range counted as clean until a later pass (forced, or once enough new
//! dirty bytes arrive) cleans it again.
//!
//! Which segments a pass may clean: the closed ones from the first segment up to (excluding)
//! the first whose newest record is younger than `min.compaction.lag.ms`, as in Kafka.

use std::collections::HashMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::batch::{verify_crc, BatchHeader};
use super::checkpoint;
use super::error::LogError;
use super::records::{parse_records, records_section, RecordView};
use super::recovery::Continuity;
use super::segment::Segment;
use super::window::SCAN_WINDOW;
use super::Log;

const CLEANER_CHECKPOINT_FILE: &str = "cleaner.checkpoint";
const CLEANER_CHECKPOINT_TMP: &str = "cleaner.checkpoint.tmp";
const CLEANER_CHECKPOINT_VERSION: u32 = 1;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// Settings of one compaction pass (Kafka's topic configs of the same names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CompactionConfig {
    /// `delete.retention.ms`: how long a tombstone (a record with a null value) stays readable,
    /// counted from its batch's max timestamp. Default 1 day.
    pub delete_retention_ms: i64,
    /// `min.compaction.lag.ms`: segments holding a record younger than this are not cleaned.
    /// Default 0.
    pub min_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio`: an unforced pass does nothing while the dirty bytes are a
    /// smaller share of the cleanable bytes. Default 0.5.
    pub min_cleanable_dirty_ratio: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig { delete_retention_ms: DAY_MS, min_compaction_lag_ms: 0, min_cleanable_dirty_ratio: 0.5 }
    }
}

/// What a pass did. Byte counts cover the segments the pass examined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionStats {
    /// Segments rewritten (a segment with nothing to remove is left as it is).
    pub segments_cleaned: usize,
    pub records_removed: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

impl Log {
    /// One cleaning pass over the closed segments (never the active one). Keeps, for each key,
    /// only the record with the highest offset in the whole log (active segment included);
    /// drops a key's newest record too when it is a tombstone whose batch is older than
    /// `delete_retention_ms`. Records without a key are kept. Offsets, leader epochs,
    /// timestamps and batch headers are preserved (a rewritten batch keeps its base offset,
    /// last offset delta and base sequence, and is re-compressed with its codec); a batch left
    /// without records is dropped unless it is the last batch of its producer id, which stays
    /// with zero records (and no codec) so producer state can be rebuilt, as in Kafka.
    /// Control and transactional batches, and batches whose records cannot be read, are kept
    /// whole. The log start and end offsets never change.
    ///
    /// With `force == false` nothing happens while dirty bytes / cleanable bytes is below
    /// `min_cleanable_dirty_ratio`. Holds `&mut self` for the whole pass.
    pub fn compact(
        &mut self,
        now_ms: i64,
        config: &CompactionConfig,
        force: bool,
    ) -> Result<CompactionStats, LogError> {
        let active_base = self.active().base_offset();
        let closed: Vec<ClosedSegment> = self
            .segments
            .values()
            .filter(|s| s.base_offset() != active_base)
            .map(|s| ClosedSegment {
                base: s.base_offset(),
                size: s.size(),
                // An empty segment holds no young record (its file time would say otherwise
                // after every rewrite that emptied it).
                largest_timestamp: if s.is_empty() { i64::MIN } else { s.largest_timestamp() },
            })
            .collect();
        let plan = plan(&closed, active_base, self.first_dirty_offset, now_ms, config.min_compaction_lag_ms);
        if plan.bases.is_empty() {
            return Ok(CompactionStats::default());
        }
        if !force && plan.dirty_ratio() < config.min_cleanable_dirty_ratio {
            tracing::debug!(dir = %self.dir.display(), dirty_ratio = plan.dirty_ratio(), "not compacting: too little is dirty");
            return Ok(CompactionStats::default());
        }
        let latest = self.latest_records()?;
        let first_dirty = self.first_dirty_offset.max(plan.end);
        if first_dirty != self.first_dirty_offset {
            write_cleaner_checkpoint(&self.dir, first_dirty)?;
            self.first_dirty_offset = first_dirty;
        }
        let retain = Retain { latest: &latest, now_ms, delete_retention_ms: config.delete_retention_ms };
        let mut stats = CompactionStats::default();
        for base in plan.bases {
            self.clean_segment(base, &retain, &mut stats)?;
        }
        tracing::debug!(
            dir = %self.dir.display(),
            segments_cleaned = stats.segments_cleaned,
            records_removed = stats.records_removed,
            bytes_before = stats.bytes_before,
            bytes_after = stats.bytes_after,
            "compacted"
        );
        Ok(stats)
    }

    /// How recovery must check the segment at `base`: segments below the cleaner checkpoint may
    /// have been rewritten by compaction.
    pub(super) fn continuity(&self, base: i64) -> Continuity {
        if base < self.first_dirty_offset {
            Continuity::Gaps
        } else {
            Continuity::Exact
        }
    }

    /// Pass one: every key's newest offset and every producer's last batch, over the whole log.
    /// Checks every batch's CRC: a pass must not rewrite (and so re-checksum) damaged data.
    fn latest_records(&self) -> Result<LatestRecords, LogError> {
        let mut latest = LatestRecords::default();
        for segment in self.segments.values() {
            for_each_batch(segment, |position, header, bytes| {
                verify_crc(bytes).map_err(|source| LogError::CorruptBatch {
                    path: segment.log_path().to_path_buf(),
                    position,
                    source,
                })?;
                if header.producer_id >= 0 && !header.is_control() {
                    latest.producers.insert(header.producer_id, header.last_offset());
                }
                if !is_compactable(header) {
                    return Ok(());
                }
                // Only a batch whose records all parse counts: pass two keeps the others whole.
                let Ok(section) = records_section(bytes, header) else {
                    return Ok(());
                };
                let mut keys = Vec::new();
                if parse_records(header, &section, |r| keys.extend(r.view.key.map(|k| (k, r.view.offset)))).is_ok() {
                    for &(key, offset) in &keys {
                        match latest.keys.get_mut(key) {
                            Some(newest) => *newest = offset,
                            None => {
                                latest.keys.insert(key.into(), offset);
                            }
                        }
                    }
                }
                Ok(())
            })?;
        }
        Ok(latest)
    }
}

/// Whether compaction may look inside a batch. Transaction markers and transactional data are
/// left alone: without transaction state, an aborted record must not supersede anything.
pub(super) fn is_compactable(header: &BatchHeader) -> bool {
    !header.is_control() && !header.is_transactional()
}

/// Calls `f` with the position, header and bytes of every batch of a segment, in order.
pub(super) fn for_each_batch(
    segment: &Segment,
    mut f: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<(), LogError>,
) -> Result<(), LogError> {
    let mut window = segment.window(SCAN_WINDOW);
    let mut position = 0;
    while position < segment.size() {
        let header = window.header_at(position)?;
        f(position, &header, window.get(position, header.total_size())?)?;
        position += header.total_size() as u64;
    }
    Ok(())
}

/// The newest offset of every key and the last offset of every producer's last batch.
#[derive(Debug, Default)]
pub(super) struct LatestRecords {
    pub keys: HashMap<Box<[u8]>, i64>,
    pub producers: HashMap<i64, i64>,
}

/// The retention rule of a pass (pure).
#[derive(Debug)]
pub(super) struct Retain<'a> {
    pub latest: &'a LatestRecords,
    pub now_ms: i64,
    pub delete_retention_ms: i64,
}

impl Retain<'_> {
    /// Whether a record of `batch` survives: it has no key, or it is its key's newest record
    /// and not a tombstone past `delete.retention.ms`.
    pub(super) fn record(&self, record: &RecordView<'_>, batch: &BatchHeader) -> bool {
        let Some(key) = record.key else {
            return true;
        };
        let Some(&newest) = self.latest.keys.get(key) else {
            return true;
        };
        if record.offset < newest {
            return false;
        }
        record.value.is_some() || self.now_ms.saturating_sub(batch.max_timestamp) <= self.delete_retention_ms
    }

    /// Whether a batch left without records stays (empty): it is its producer's last batch.
    pub(super) fn empty_batch(&self, batch: &BatchHeader) -> bool {
        batch.producer_id >= 0 && self.latest.producers.get(&batch.producer_id) == Some(&batch.last_offset())
    }
}

/// What the planner needs to know of a closed segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct ClosedSegment {
    pub base: i64,
    pub size: u64,
    pub largest_timestamp: i64,
}

/// The segments one pass may clean.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plan {
    /// Base offsets, oldest first.
    pub bases: Vec<i64>,
    /// The first offset the pass does not clean: the cleaner checkpoint after it.
    pub end: i64,
    pub dirty_bytes: u64,
    pub total_bytes: u64,
}

impl Plan {
    fn dirty_ratio(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        self.dirty_bytes as f64 / self.total_bytes as f64
    }
}

/// The cleanable prefix of the closed segments (oldest first): it stops at the first segment
/// holding a record younger than `min_lag_ms`. Segments at or above `first_dirty` are dirty.
pub(super) fn plan(closed: &[ClosedSegment], active_base: i64, first_dirty: i64, now_ms: i64, min_lag_ms: i64) -> Plan {
    let mut plan = Plan { bases: Vec::new(), end: active_base, dirty_bytes: 0, total_bytes: 0 };
    for segment in closed {
        if min_lag_ms > 0 && now_ms.saturating_sub(segment.largest_timestamp) < min_lag_ms {
            plan.end = segment.base;
            break;
        }
        plan.bases.push(segment.base);
        plan.total_bytes += segment.size;
        if segment.base >= first_dirty {
            plan.dirty_bytes += segment.size;
        }
    }
    plan
}

#[derive(Debug, Serialize, Deserialize)]
struct CleanerCheckpoint {
    version: u32,
    first_dirty_offset: i64,
}

/// The first dirty offset, `None` when there is no file (a new log, or a lost file: the
/// caller tells them apart). An unreadable file is logged and read as `i64::MAX`: compaction
/// may have happened but where it stopped is unknown, so recovery must accept gaps anywhere
/// (`Log::open` then lowers it to the log end offset).
pub(super) fn read_cleaner_checkpoint(dir: &Path) -> Result<Option<i64>, LogError> {
    let path = dir.join(CLEANER_CHECKPOINT_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(super::error::io_error("read cleaner checkpoint", &path)(e)),
    };
    match serde_json::from_slice::<CleanerCheckpoint>(&bytes) {
        Ok(c) if c.version == CLEANER_CHECKPOINT_VERSION => Ok(Some(c.first_dirty_offset.max(0))),
        Ok(c) => {
            tracing::warn!(path = %path.display(), version = c.version, "unknown cleaner checkpoint version; accepting offset gaps anywhere");
            Ok(Some(i64::MAX))
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "unreadable cleaner checkpoint; accepting offset gaps anywhere");
            Ok(Some(i64::MAX))
        }
    }
}

pub(super) fn write_cleaner_checkpoint(dir: &Path, first_dirty_offset: i64) -> Result<(), LogError> {
    let checkpoint = CleanerCheckpoint { version: CLEANER_CHECKPOINT_VERSION, first_dirty_offset };
    let json = serde_json::to_vec(&checkpoint).map_err(|e| {
        super::error::io_error("encode cleaner checkpoint", &dir.join(CLEANER_CHECKPOINT_FILE))(e.into())
    })?;
    checkpoint::replace_file(dir, CLEANER_CHECKPOINT_FILE, CLEANER_CHECKPOINT_TMP, &json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(specs: &[(i64, u64, i64)]) -> Vec<ClosedSegment> {
        specs.iter().map(|&(base, size, largest_timestamp)| ClosedSegment { base, size, largest_timestamp }).collect()
    }

    #[test]
    fn the_plan_stops_at_the_first_segment_younger_than_the_lag() {
        let segments = closed(&[(0, 100, 10), (10, 100, 50), (20, 100, 20), (30, 100, 10)]);
        let all = plan(&segments, 40, 0, 100, 0);
        assert_eq!((all.bases, all.end, all.dirty_bytes, all.total_bytes), (vec![0, 10, 20, 30], 40, 400, 400));
        // Segment 10 holds a record 50 ms old: with a 60 ms lag it and everything after wait.
        let lagged = plan(&segments, 40, 0, 100, 60);
        assert_eq!((lagged.bases, lagged.end), (vec![0], 10));
        let none = plan(&segments, 40, 0, 100, 1_000);
        assert_eq!((none.bases.len(), none.end), (0, 0));
    }

    #[test]
    fn dirty_bytes_are_those_of_segments_at_or_above_the_checkpoint() {
        let segments = closed(&[(0, 300, 0), (10, 100, 0), (20, 100, 0)]);
        let p = plan(&segments, 30, 10, 0, 0);
        assert_eq!((p.dirty_bytes, p.total_bytes), (200, 500));
        assert!((p.dirty_ratio() - 0.4).abs() < 1e-9);
        assert_eq!(plan(&closed(&[(0, 0, 0)]), 5, 0, 0, 0).dirty_ratio(), 0.0);
    }

    #[test]
    fn retain_keeps_the_newest_record_per_key_and_young_tombstones() {
        let mut latest = LatestRecords::default();
        latest.keys.insert(b"k".to_vec().into(), 5);
        latest.producers.insert(7, 9);
        let retain = Retain { latest: &latest, now_ms: 1_000, delete_retention_ms: 100 };
        let mut batch = BatchHeader::parse(&empty_header()).expect("header");
        batch.max_timestamp = 950;
        let view = |offset, key: Option<&'static [u8]>, value: Option<&'static [u8]>| RecordView {
            offset,
            timestamp: 0,
            key,
            value,
            headers: &[0],
        };
        assert!(!retain.record(&view(4, Some(b"k"), Some(b"v")), &batch), "superseded");
        assert!(retain.record(&view(5, Some(b"k"), Some(b"v")), &batch), "newest");
        assert!(retain.record(&view(5, Some(b"k"), None), &batch), "a young tombstone");
        batch.max_timestamp = 899;
        assert!(!retain.record(&view(5, Some(b"k"), None), &batch), "an expired tombstone");
        assert!(retain.record(&view(1, None, None), &batch), "no key: never dropped");
        batch.producer_id = 7;
        batch.last_offset_delta = 9 - batch.base_offset as i32;
        assert!(retain.empty_batch(&batch));
        batch.last_offset_delta -= 1;
        assert!(!retain.empty_batch(&batch));
    }

    fn empty_header() -> Vec<u8> {
        let mut b = vec![0u8; super::super::batch::BATCH_HEADER_LEN];
        b[8..12].copy_from_slice(&49i32.to_be_bytes());
        b[16] = 2;
        b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
        b
    }
}
