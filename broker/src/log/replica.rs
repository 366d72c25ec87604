//! What a follower replica does to its log: append the leader's batches as they are (offsets
//! and leader epochs already assigned), and truncate — to where its history diverged from
//! the leader's, or entirely when the leader's log starts after everything it has.

use super::batch::{self, BatchHeader};
use super::error::LogError;
use super::recovery::Continuity;
use super::segment::Segment;
use super::window::HEADER_WINDOW;
use super::{AppendInfo, Log};

impl Log {
    /// Appends batches copied from the leader. They must continue this log exactly (the first
    /// base offset is the log end offset, each batch follows the one before) with leader epochs
    /// that never decrease, and every CRC must match: a follower's log is a byte copy of the
    /// leader's.
    pub fn append_replicated(&mut self, data: &[u8], now_ms: i64) -> Result<AppendInfo, LogError> {
        let mut headers: Vec<(BatchHeader, u64)> = Vec::new();
        let mut next = self.log_end_offset;
        let mut epoch = self.latest_leader_epoch;
        let mut max_timestamp = -1;
        for item in batch::batches(data) {
            let (header, range) = item?;
            batch::verify_crc(&data[range.clone()])?;
            if header.base_offset != next {
                return Err(LogError::NonContiguousAppend { expected: next, found: header.base_offset });
            }
            if header.partition_leader_epoch < epoch {
                return Err(LogError::LeaderEpochRegression { epoch: header.partition_leader_epoch, latest: epoch });
            }
            epoch = header.partition_leader_epoch;
            next = header.last_offset() + 1;
            max_timestamp = max_timestamp.max(header.max_timestamp);
            headers.push((header, range.start as u64));
        }
        let Some(first) = headers.first().map(|(h, _)| h.base_offset) else {
            return Err(LogError::EmptyAppend);
        };
        if let Some(reason) = self.active().roll_reason(data.len() as u64, next - 1, now_ms, &self.config) {
            self.roll(reason)?;
        }
        let config = &self.config;
        let active = self.segments.values_mut().next_back().expect("a log always has an active segment");
        active.append(data, &headers, now_ms, config)?;
        self.log_end_offset = next;
        self.latest_leader_epoch = epoch;
        self.first_unflushed_ms.get_or_insert(now_ms);
        if self.unflushed_messages() >= self.config.flush_messages {
            self.flush()?;
        }
        Ok(AppendInfo { first_offset: first, last_offset: next - 1, max_timestamp, log_append_time: -1 })
    }

    /// Removes every batch at or after `offset` (a batch that straddles it goes too, as in
    /// Kafka, so the log still ends on a batch boundary). Returns the new log end offset.
    /// Below the log start offset the log starts over empty at `offset`.
    pub fn truncate_to(&mut self, offset: i64) -> Result<i64, LogError> {
        if offset >= self.log_end_offset {
            return Ok(self.log_end_offset);
        }
        if offset <= self.log_start_offset {
            self.truncate_fully_and_start_at(offset.max(0))?;
            return Ok(self.log_end_offset);
        }
        self.truncations += 1;
        let base = *self.segments.range(..=offset).next_back().map(|(b, _)| b).expect("offset > log start offset");
        for (_, segment) in self.segments.split_off(&(base + 1)) {
            segment.delete()?;
        }
        let config = self.config.clone();
        let epoch_before = {
            let previous = self.segments.range(..base).next_back().map(|(_, s)| s);
            match previous.map(Segment::last_batch).transpose()? {
                Some(Some(h)) => h.partition_leader_epoch,
                _ => i32::MIN,
            }
        };
        let segment = self.segments.get_mut(&base).expect("the segment holding offset");
        let position = {
            let mut window = segment.window(HEADER_WINDOW);
            segment.first_batch_reaching(offset, 0, &mut window)?
        };
        segment.truncate_log(position)?;
        // Rebuild the segment's indexes from what is left (a rescan of one segment).
        segment.recover(epoch_before, Continuity::Gaps, &config)?;
        segment.prepare_for_appends(&config)?;
        // As at open: the segment's age for segment.ms counts from its first batch.
        let first = segment.first_batch()?;
        segment.set_rolling_base_ms(first.map(|h| h.max_timestamp).filter(|t| *t >= 0));
        self.log_end_offset = match segment.last_batch()? {
            Some(last) => last.last_offset() + 1,
            None => base,
        };
        self.latest_leader_epoch = -1;
        for s in self.segments.values().rev() {
            if let Some(last) = s.last_batch()? {
                self.latest_leader_epoch = last.partition_leader_epoch;
                break;
            }
        }
        self.recovery_point = self.recovery_point.min(self.log_end_offset);
        self.first_dirty_offset = self.first_dirty_offset.min(self.log_end_offset);
        self.write_checkpoint(false)?;
        tracing::info!(dir = %self.dir.display(), offset, log_end_offset = self.log_end_offset, "truncated the log");
        Ok(self.log_end_offset)
    }

    /// Deletes everything and starts an empty log at `offset` (a follower whose log ends
    /// before the leader's starts).
    pub fn truncate_fully_and_start_at(&mut self, offset: i64) -> Result<(), LogError> {
        self.truncations += 1;
        for (_, segment) in std::mem::take(&mut self.segments) {
            segment.delete()?;
        }
        let segment = Segment::create(&self.dir, offset, &self.config)?;
        self.segments.insert(offset, segment);
        self.log_start_offset = offset;
        self.log_end_offset = offset;
        self.recovery_point = offset;
        self.latest_leader_epoch = -1;
        self.first_dirty_offset = offset;
        self.write_checkpoint(false)?;
        tracing::info!(dir = %self.dir.display(), offset, "log emptied, starting again at the leader's log start offset");
        Ok(())
    }

    /// The leader epoch of the last batch (-1 when the log has none).
    pub fn latest_leader_epoch(&self) -> i32 {
        self.latest_leader_epoch
    }

    /// (epoch, base offset) of each batch whose leader epoch is greater than the batch
    /// before's: where each epoch starts in this log. For rebuilding the leader-epoch cache.
    pub fn epoch_starts(&self) -> Result<Vec<(i32, i64)>, LogError> {
        let mut out: Vec<(i32, i64)> = Vec::new();
        self.scan_headers(self.log_start_offset, |h| {
            if out.last().is_none_or(|(e, _)| h.partition_leader_epoch > *e) {
                out.push((h.partition_leader_epoch, h.base_offset));
            }
        })?;
        Ok(out)
    }
}
