//! Opening a log: find the segments, clear leftovers, recover what may be torn.
//!
//! After a clean close (`log.checkpoint` says so) every index was trimmed and fsynced, so
//! segments are only sanity-checked, plus the active segment's tail after its last index
//! entry. Otherwise the segment holding the recovery point and every later one are rescanned
//! batch by batch; the first invalid batch truncates its segment and drops every later
//! segment. Earlier segments were fsynced when they rolled: their indexes are checked and
//! rebuilt by a scan if they disagree with the log. Segments below the cleaner checkpoint were
//! rewritten by compaction and may have offset gaps; a crash while compaction swapped one in
//! leaves a `.cleaned` file, deleted here, and possibly missing indexes, rebuilt here.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use super::checkpoint;
use super::compaction::{read_cleaner_checkpoint, write_cleaner_checkpoint};
use super::config::LogConfig;
use super::error::{io_error, LogError};
use super::segment::{Segment, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use super::Log;

/// Suffixes of files left behind by an interrupted operation.
const LEFTOVER_SUFFIXES: [&str; 3] = [".deleted", ".cleaned", ".tmp"];

impl Log {
    /// Opens the log in `dir`, creating the directory and a first segment if needed, and
    /// recovers it (see the module documentation). Logs what it truncated and why.
    pub fn open(dir: &Path, config: LogConfig) -> Result<Log, LogError> {
        fs::create_dir_all(dir).map_err(io_error("create log directory", dir))?;
        let bases = scan_directory(dir)?;
        let checkpoint = checkpoint::read(dir)?;
        // Every log has a cleaner checkpoint from its creation on, so a missing one in a log
        // that has segments was lost: compaction may have left offset gaps anywhere, which
        // recovery must not take for damage (it would cut the log there).
        let cleaner_checkpoint = read_cleaner_checkpoint(dir)?;
        let first_dirty_offset = match cleaner_checkpoint {
            Some(offset) => offset,
            None if bases.is_empty() => 0,
            None => {
                tracing::warn!(dir = %dir.display(), "cleaner.checkpoint is missing; accepting offset gaps anywhere in the log");
                i64::MAX
            }
        };
        let (log_start_offset, recovery_point, clean) =
            checkpoint.map_or((0, 0, false), |c| (c.log_start_offset.max(0), c.recovery_point, c.clean_shutdown));
        let mut segments = BTreeMap::new();
        for base in bases {
            segments.insert(base, Segment::open(dir, base)?);
        }
        if segments.is_empty() {
            segments.insert(log_start_offset, Segment::create(dir, log_start_offset, &config)?);
        }
        let mut log = Log {
            dir: dir.to_path_buf(),
            config,
            segments,
            log_start_offset,
            log_end_offset: 0,
            recovery_point,
            truncations: 0,
            latest_leader_epoch: -1,
            first_unflushed_ms: None,
            dir_unsynced: false,
            checkpointed_at: std::cell::Cell::new(None),
            first_dirty_offset,
        };
        log.load(clean)?;
        if cleaner_checkpoint.is_none() {
            write_cleaner_checkpoint(dir, log.first_dirty_offset)?;
        }
        // Not clean any more: a crash from here on must recover.
        log.write_checkpoint(false)?;
        Ok(log)
    }

    fn load(&mut self, clean: bool) -> Result<(), LogError> {
        let config = self.config.clone();
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let active_base = bases[bases.len() - 1];
        let recover_from = if clean {
            i64::MAX
        } else {
            self.segments.range(..=self.recovery_point).next_back().map_or(bases[0], |(base, _)| *base)
        };
        let mut rescanned = Vec::new();
        let mut previous_epoch = None;
        for &base in &bases {
            if base >= recover_from {
                let last_epoch = match previous_epoch {
                    Some(epoch) => epoch,
                    None => self.epoch_before(base)?,
                };
                let continuity = self.continuity(base);
                let recovered = self.segment_mut(base).recover(last_epoch, continuity, &config)?;
                rescanned.push(base);
                previous_epoch = Some(recovered.last_epoch);
                if recovered.truncated_bytes > 0 {
                    self.drop_segments_after(base)?;
                    break;
                }
                continue;
            }
            let segment = &self.segments[&base];
            if let Some(reason) = segment.check_indexes()? {
                tracing::warn!(path = %segment.log_path().display(), %reason, "rebuilding the indexes of a segment");
                let continuity = self.continuity(base);
                let recovered = self.segment_mut(base).recover(i32::MIN, continuity, &config)?;
                rescanned.push(base);
                if recovered.truncated_bytes > 0 {
                    tracing::error!(
                        path = %self.segments[&base].log_path().display(),
                        truncated_bytes = recovered.truncated_bytes,
                        "a segment below the recovery point was damaged; its tail is lost and offsets have a gap"
                    );
                }
            } else if base == active_base {
                let continuity = self.continuity(base);
                if let Some(reason) = segment.check_tail(continuity)? {
                    tracing::warn!(path = %segment.log_path().display(), %reason, "active segment damaged since its clean close; recovering it");
                    let last_epoch = self.epoch_before(base)?;
                    self.segment_mut(base).recover(last_epoch, continuity, &config)?;
                }
            }
        }

        let active_base = *self.segments.keys().next_back().expect("a log always has an active segment");
        for base in rescanned.into_iter().filter(|b| *b != active_base) {
            self.segment_mut(base).close_indexes()?;
        }
        let active = self.active_mut();
        active.prepare_for_appends(&config)?;
        let first = active.first_batch()?;
        active.set_rolling_base_ms(first.map(|h| h.max_timestamp).filter(|t| *t >= 0));

        self.log_end_offset = match self.active().last_batch()? {
            Some(last) => last.last_offset() + 1,
            None => active_base,
        };
        self.latest_leader_epoch = -1;
        for segment in self.segments.values().rev() {
            if let Some(last) = segment.last_batch()? {
                self.latest_leader_epoch = last.partition_leader_epoch;
                break;
            }
        }
        let first_base = *self.segments.keys().next().expect("a log always has an active segment");
        self.log_start_offset = self.log_start_offset.max(first_base);
        if self.log_start_offset > self.log_end_offset {
            self.restart_at_log_start()?;
        }
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        // Past the log end offset (an unknown cleaner checkpoint, or a log cut back by
        // recovery) it would only keep new data from counting as dirty.
        self.first_dirty_offset = self.first_dirty_offset.min(self.log_end_offset);
        Ok(())
    }

    /// Recovery cut the log below its start offset (everything left was already deleted by
    /// DeleteRecords): start over with one empty segment at the log start offset.
    fn restart_at_log_start(&mut self) -> Result<(), LogError> {
        tracing::warn!(
            dir = %self.dir.display(),
            log_start_offset = self.log_start_offset,
            log_end_offset = self.log_end_offset,
            "log end offset below log start offset after recovery; starting an empty log at the log start offset"
        );
        for (_, segment) in std::mem::take(&mut self.segments) {
            segment.delete()?;
        }
        let segment = Segment::create(&self.dir, self.log_start_offset, &self.config)?;
        self.segments.insert(self.log_start_offset, segment);
        self.log_end_offset = self.log_start_offset;
        self.recovery_point = self.log_start_offset;
        Ok(())
    }

    /// Recovery truncated the segment at `base`: the segments after it no longer follow it.
    fn drop_segments_after(&mut self, base: i64) -> Result<(), LogError> {
        let later = self.segments.split_off(&(base + 1));
        for (_, segment) in later {
            tracing::warn!(path = %segment.log_path().display(), "deleting a segment that followed a truncated one");
            segment.delete()?;
        }
        Ok(())
    }

    /// Leader epoch of the last batch before the segment at `base` (i32::MIN if unknown).
    fn epoch_before(&self, base: i64) -> Result<i32, LogError> {
        let Some((_, previous)) = self.segments.range(..base).next_back() else {
            return Ok(i32::MIN);
        };
        match previous.last_batch() {
            Ok(last) => Ok(last.map_or(i32::MIN, |h| h.partition_leader_epoch)),
            Err(LogError::CorruptBatch { .. }) => Ok(i32::MIN),
            Err(e) => Err(e),
        }
    }

    fn segment_mut(&mut self, base: i64) -> &mut Segment {
        self.segments.get_mut(&base).expect("segment base offsets come from the map")
    }
}

/// Lists the segments' base offsets (sorted), deleting leftovers of interrupted operations
/// and index files whose log file is gone. Files the log does not own are left alone.
fn scan_directory(dir: &Path) -> Result<Vec<i64>, LogError> {
    let mut bases = Vec::new();
    let mut index_files = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_error("list log directory", dir))? {
        let entry = entry.map_err(io_error("list log directory", dir))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if LEFTOVER_SUFFIXES.iter().any(|suffix| name.ends_with(suffix)) {
            tracing::info!(path = %entry.path().display(), "deleting a leftover file");
            fs::remove_file(entry.path()).map_err(io_error("delete leftover file", &entry.path()))?;
            continue;
        }
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        let Some(base) = parse_base_offset(stem) else {
            continue;
        };
        match ext {
            LOG_EXT => bases.push(base),
            INDEX_EXT | TIME_INDEX_EXT => index_files.push((base, entry.path())),
            _ => {}
        }
    }
    bases.sort_unstable();
    for (base, path) in index_files {
        if bases.binary_search(&base).is_err() {
            tracing::warn!(path = %path.display(), "deleting an index file without a segment log");
            fs::remove_file(&path).map_err(io_error("delete orphan index", &path))?;
        }
    }
    Ok(bases)
}

fn parse_base_offset(stem: &str) -> Option<i64> {
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}
