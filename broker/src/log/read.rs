//! Reads: the file range for a fetch, ListOffsets by timestamp and by max timestamp, and
//! header scans.
//!
//! Every lookup finds the segment by base offset, binary-searches its offset index and walks
//! batch headers from there for about one index interval. A fetch's end is found the same
//! way (the index also answers "last batch starting before this position"), so the cost of
//! a read does not grow with `max_bytes`.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::batch::{verify_crc, BatchHeader};
use super::error::{io_error, LogError};
use super::records::{parse_records, records_section};
use super::segment::Segment;
use super::window::{FileWindow, HEADER_WINDOW, SCAN_WINDOW};
use super::{FileSlice, Log};

/// The outcome of reading one segment for a fetch.
enum SegmentRead {
    Slice(FileSlice),
    /// The offset is here but nothing may be sent (max_offset or max_bytes).
    Nothing,
    /// No batch of this segment holds the offset (it is in a later segment).
    NotHere,
}

impl Log {
    /// Bytes to send for a fetch at `offset`: whole batches from the one holding `offset`,
    /// only batches wholly below `max_offset` (the high watermark, exclusive), within
    /// `max_bytes` — except that with `min_one_batch` (KIP-74) the first batch is returned
    /// whole even if larger. Reads within one segment, as Kafka does.
    /// `Ok(None)` when there is nothing to send (`offset` is the log end offset or at or past
    /// `max_offset`, or the first batch does not fit). `OffsetOutOfRange` when `offset` is
    /// below the log start offset or above the log end offset.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<Option<FileSlice>, LogError> {
        if offset < self.log_start_offset || offset > self.log_end_offset {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: self.log_end_offset,
            });
        }
        if offset == self.log_end_offset || offset >= max_offset {
            return Ok(None);
        }
        let floor = self.segments.range(..=offset).next_back().map_or(i64::MIN, |(base, _)| *base);
        for (&base, segment) in self.segments.range(floor..) {
            let whole_segment_below_max = max_offset >= self.segment_end_offset(base);
            match segment.read(offset, max_bytes, max_offset, min_one_batch, whole_segment_below_max)? {
                SegmentRead::Slice(slice) => return Ok(Some(slice)),
                SegmentRead::Nothing => return Ok(None),
                SegmentRead::NotHere => {}
            }
        }
        Ok(None)
    }

    /// ListOffsets by timestamp: the first record (in offset order, at or above the log start
    /// offset) whose timestamp is >= `timestamp`, as (offset, timestamp).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<Option<(i64, i64)>, LogError> {
        for (&base, segment) in &self.segments {
            if self.segment_end_offset(base) <= self.log_start_offset {
                continue;
            }
            if segment.max_timestamp().is_none_or(|(max, _)| max < timestamp) {
                continue;
            }
            if let Some(found) = segment.find_timestamp(timestamp, self.log_start_offset)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (-3): the largest timestamp in the log and the offset of the
    /// first record carrying it, as (timestamp, offset); None when no batch has a timestamp.
    /// If that batch cannot be decoded, the batch's last offset is returned (and logged).
    pub fn max_timestamp_and_offset(&self) -> Option<(i64, i64)> {
        let mut best: Option<(&Segment, i64, i64)> = None;
        for segment in self.segments.values() {
            if let Some((timestamp, offset)) = segment.max_timestamp() {
                if best.is_none_or(|(_, t, _)| timestamp > t) {
                    best = Some((segment, timestamp, offset));
                }
            }
        }
        let (segment, timestamp, batch_last_offset) = best?;
        match segment.offset_of_timestamp_in_batch(timestamp, batch_last_offset) {
            Ok(Some(offset)) => Some((timestamp, offset)),
            Ok(None) => Some((timestamp, batch_last_offset)),
            Err(error) => {
                tracing::warn!(dir = %self.dir.display(), error = %error, "could not find the record with the max timestamp");
                Some((timestamp, batch_last_offset))
            }
        }
    }

    /// Calls `f` with every batch header from the batch holding `from_offset` to the end
    /// (headers only, no CRC check), e.g. to rebuild producer state.
    pub fn scan_headers(&self, from_offset: i64, mut f: impl FnMut(&BatchHeader)) -> Result<(), LogError> {
        let floor = self.segments.range(..=from_offset).next_back().map_or(i64::MIN, |(base, _)| *base);
        for (&base, segment) in self.segments.range(floor..) {
            let mut window = segment.window(SCAN_WINDOW);
            let mut position = if base == floor { segment.index.lookup(from_offset).1 } else { 0 };
            while position < segment.size() {
                let header = window.header_at(position)?;
                if header.last_offset() >= from_offset {
                    f(&header);
                }
                position += header.total_size() as u64;
            }
        }
        Ok(())
    }
}

impl Segment {
    fn read(
        &self,
        offset: i64,
        max_bytes: usize,
        max_offset: i64,
        min_one_batch: bool,
        whole_segment_below_max: bool,
    ) -> Result<SegmentRead, LogError> {
        let mut window = self.window(HEADER_WINDOW);
        let Some((start, first)) = self.find_batch(offset, &mut window)? else {
            return Ok(SegmentRead::NotHere);
        };
        if first.last_offset() >= max_offset {
            return Ok(SegmentRead::Nothing);
        }
        let stop = if whole_segment_below_max {
            self.size()
        } else {
            self.first_batch_reaching(max_offset, start, &mut window)?
        };
        let limit = start.saturating_add(max_bytes as u64);
        let mut end = if stop <= limit { stop } else { self.last_boundary_within(start, limit, &mut window)? };
        if end == start {
            if !min_one_batch {
                return Ok(SegmentRead::Nothing);
            }
            end = start + first.total_size() as u64;
        }
        let len = usize::try_from(end - start).expect("a slice within one segment fits in memory");
        Ok(SegmentRead::Slice(FileSlice { file: Arc::clone(self.log_file()), position: start, len }))
    }

    /// Position and header of the first batch whose last offset is >= `offset`.
    fn find_batch(&self, offset: i64, window: &mut FileWindow<'_>) -> Result<Option<(u64, BatchHeader)>, LogError> {
        let mut position = self.index.lookup(offset).1;
        while position < self.size() {
            let header = window.header_at(position)?;
            if header.last_offset() >= offset {
                return Ok(Some((position, header)));
            }
            position += header.total_size() as u64;
        }
        Ok(None)
    }

    /// Start of the first batch at or after `from` that reaches `max_offset` (its last offset
    /// is >= it), or the end of the segment.
    pub(crate) fn first_batch_reaching(
        &self,
        max_offset: i64,
        from: u64,
        window: &mut FileWindow<'_>,
    ) -> Result<u64, LogError> {
        let mut position = self.index.lookup(max_offset).1.max(from);
        while position < self.size() {
            let header = window.header_at(position)?;
            if header.last_offset() >= max_offset {
                return Ok(position);
            }
            position += header.total_size() as u64;
        }
        Ok(self.size())
    }

    /// The last batch boundary at or before `limit`, at or after `from` (a batch start).
    fn last_boundary_within(&self, from: u64, limit: u64, window: &mut FileWindow<'_>) -> Result<u64, LogError> {
        let mut position = self.index.floor_position(limit).max(from);
        while position < self.size() {
            let next = position + window.header_at(position)?.total_size() as u64;
            if next > limit {
                break;
            }
            position = next;
        }
        Ok(position)
    }

    /// The first record at or after `log_start_offset` with a timestamp >= `timestamp`.
    fn find_timestamp(&self, timestamp: i64, log_start_offset: i64) -> Result<Option<(i64, i64)>, LogError> {
        // Nothing before the time index entry's offset can have a larger timestamp than it.
        let from = self.time_index.lookup(timestamp).1.max(log_start_offset);
        let mut window = self.window(HEADER_WINDOW);
        let mut position = self.index.lookup(from).1;
        while position < self.size() {
            let header = window.header_at(position)?;
            if header.last_offset() >= log_start_offset && header.max_timestamp >= timestamp {
                let found = if header.timestamp_type_log_append() && holds_every_offset(&header) {
                    // Every record carries the batch's append time.
                    (header.record_count > 0).then(|| (header.base_offset.max(log_start_offset), header.max_timestamp))
                } else {
                    self.records(position, &header)?
                        .into_iter()
                        .find(|&(offset, time)| offset >= log_start_offset && time >= timestamp)
                };
                if found.is_some() {
                    return Ok(found);
                }
            }
            position += header.total_size() as u64;
        }
        Ok(None)
    }

    /// The offset of the first record with exactly `timestamp` in the batch holding `offset`.
    fn offset_of_timestamp_in_batch(&self, timestamp: i64, offset: i64) -> Result<Option<i64>, LogError> {
        let mut window = self.window(HEADER_WINDOW);
        let Some((position, header)) = self.find_batch(offset, &mut window)? else {
            return Ok(None);
        };
        if header.timestamp_type_log_append() && holds_every_offset(&header) {
            return Ok(Some(header.base_offset));
        }
        Ok(self.records(position, &header)?.into_iter().find(|&(_, time)| time == timestamp).map(|(offset, _)| offset))
    }

    /// The (offset, timestamp) of every record of the batch at `position`, decompressed if needed.
    fn records(&self, position: u64, header: &BatchHeader) -> Result<Vec<(i64, i64)>, LogError> {
        let mut buf = vec![0; header.total_size()];
        self.log_file().read_exact_at(&mut buf, position).map_err(io_error("read segment log", self.log_path()))?;
        let failed = |source: Box<dyn std::error::Error + Send + Sync>| LogError::DecodeRecords {
            path: self.log_path().to_path_buf(),
            offset: header.base_offset,
            source,
        };
        verify_crc(&buf).map_err(|e| failed(e.into()))?;
        let mut records = Vec::with_capacity(usize::try_from(header.record_count).unwrap_or(0).min(4096));
        records_section(&buf, header)
            .and_then(|section| parse_records(header, &section, |r| records.push((r.view.offset, r.view.timestamp))))
            .map_err(|e| failed(e.into()))?;
        Ok(records)
    }
}

/// Whether a batch still has a record at each of its offsets (compaction may have removed some).
fn holds_every_offset(header: &BatchHeader) -> bool {
    i64::from(header.record_count) == i64::from(header.last_offset_delta) + 1
}
