//! Removing old data: DeleteRecords (moving the log start offset) and retention by time and
//! size. Only whole closed segments are deleted; the active segment never is.

use super::segment::Segment;
use super::{Log, LogError};

impl Log {
    /// DeleteRecords: raises the log start offset to `offset` (which must not pass the log end
    /// offset), persists it, then deletes the closed segments wholly below it. Returns the new
    /// log start offset; it never moves down.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if offset <= self.log_start_offset {
            return Ok(self.log_start_offset);
        }
        self.log_start_offset = offset;
        // Persist first: once acknowledged, the records must not come back after a crash.
        self.write_checkpoint(false)?;
        self.delete_oldest_segments(|log, base, _| log.segment_end_offset(base) <= offset)?;
        Ok(self.log_start_offset)
    }

    /// Retention: rolls the active segment if `segment.ms` has elapsed (so an idle partition's
    /// data can expire), then deletes closed segments wholly below the log start offset, those
    /// whose largest timestamp is more than `retention.ms` old, and the oldest while the log
    /// without them is still at least `retention.bytes`. Deletion stops at the first segment
    /// that must stay, so the log remains contiguous. The log start offset moves to the new
    /// first segment. Returns the number of segments deleted.
    pub fn enforce_retention(&mut self, now_ms: i64) -> Result<usize, LogError> {
        if let Some(reason) = self.active().roll_reason(0, self.log_end_offset - 1, now_ms, &self.config) {
            self.roll(reason)?;
        }
        let log_start_offset = self.log_start_offset;
        let mut deleted =
            self.delete_oldest_segments(|log, base, _| log.segment_end_offset(base) <= log_start_offset)?;

        let retention_ms = self.config.retention_ms;
        if retention_ms >= 0 {
            deleted += self.delete_oldest_segments(|_, _, segment| {
                now_ms.saturating_sub(segment.largest_timestamp()) > retention_ms
            })?;
        }
        if let Ok(retention_bytes) = u64::try_from(self.config.retention_bytes) {
            let mut size = self.size_bytes();
            deleted += self.delete_oldest_segments(|_, _, segment| {
                let without = size - segment.size();
                let delete = without >= retention_bytes;
                if delete {
                    size = without;
                }
                delete
            })?;
        }
        if deleted > 0 {
            let first_base = *self.segments.keys().next().expect("a log always has an active segment");
            self.log_start_offset = self.log_start_offset.max(first_base);
            self.write_checkpoint(false)?;
            tracing::info!(dir = %self.dir.display(), deleted, log_start_offset = self.log_start_offset, "deleted old segments");
        }
        Ok(deleted)
    }

    /// Deletes closed segments from the oldest while `should_delete` says so (it is asked
    /// once per segment, in order, and deletion stops at its first `false`).
    fn delete_oldest_segments(
        &mut self,
        mut should_delete: impl FnMut(&Log, i64, &Segment) -> bool,
    ) -> Result<usize, LogError> {
        let mut deleted = 0;
        while self.segments.len() > 1 {
            let (&base, segment) = self.segments.iter().next().expect("more than one segment");
            if !should_delete(self, base, segment) {
                break;
            }
            let segment = self.segments.remove(&base).expect("the first segment exists");
            tracing::debug!(path = %segment.log_path().display(), "deleting segment");
            segment.delete()?;
            deleted += 1;
        }
        Ok(deleted)
    }
}
