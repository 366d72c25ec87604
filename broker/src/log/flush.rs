//! Flushing closed segments after a roll without holding up appends.
//!
//! A roll closes the active segment (indexes trimmed) and starts a new one at once; the closed
//! segment is fsynced afterwards, as Kafka schedules its "flush-log" task at a roll, and only
//! then does the recovery point move past it. [`Log::rolled_unflushed`] hands out duplicated
//! file handles of the closed segments at or after the recovery point, [`RolledSegments::sync`]
//! fsyncs them with no lock held, and [`Log::mark_flushed`] moves the recovery point to the
//! new active segment's base unless the log was truncated in between (then what lies below
//! that base may be new, unflushed data, and the next pass flushes it).
//!
//! Until then a crash recovers from the old recovery point: the closed segments are rescanned
//! as well as the active one, which costs start-up time, never data.

use std::fs::File;
use std::path::PathBuf;

use super::error::{sync_error, LogError};
use super::Log;

/// Closed segments to fsync: their log and index files, and the offset the recovery point
/// moves to once they are on disk.
#[derive(Debug)]
pub struct RolledSegments {
    files: Vec<(File, PathBuf)>,
    through: i64,
    truncations: u64,
}

impl RolledSegments {
    /// fsyncs every file (data and size; the indexes' pages written through their mappings
    /// are in the page cache like any other write, so an fsync of the file covers them).
    pub fn sync(&self) -> Result<(), LogError> {
        for (file, path) in &self.files {
            file.sync_all().map_err(sync_error("fsync rolled segment", path))?;
        }
        Ok(())
    }

    /// The recovery point once these files are on disk.
    pub fn through(&self) -> i64 {
        self.through
    }
}

impl Log {
    /// The closed segments not yet known to be on disk (those at or after the recovery
    /// point, below the active segment), or `None` when every closed segment is.
    pub fn rolled_unflushed(&self) -> Result<Option<RolledSegments>, LogError> {
        let active_base = *self.segments.keys().next_back().expect("a log always has an active segment");
        if self.recovery_point >= active_base {
            return Ok(None);
        }
        let mut files = Vec::new();
        for (_, segment) in self.segments.range(self.first_unflushed_base()..active_base) {
            files.extend(segment.sync_handles()?);
        }
        Ok(Some(RolledSegments { files, through: active_base, truncations: self.truncations }))
    }

    /// Moves the recovery point after [`RolledSegments::sync`]; false (nothing changed) when
    /// the log was truncated since [`Log::rolled_unflushed`] or a full flush got further.
    pub fn mark_flushed(&mut self, synced: &RolledSegments) -> Result<bool, LogError> {
        if synced.truncations != self.truncations
            || synced.through <= self.recovery_point
            || synced.through > self.log_end_offset
        {
            return Ok(false);
        }
        self.recovery_point = synced.through;
        self.write_checkpoint(false)?;
        Ok(true)
    }
}
