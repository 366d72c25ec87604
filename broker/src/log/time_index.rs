//! The sparse time index of a segment: (timestamp i64, relative offset u32) entries, big
//! endian. An entry (T, O) says that no record at an offset <= O has a timestamp above T:
//! T is the segment's largest timestamp so far and O the last offset of the batch that first
//! reached it. Entries are added at the offset index's interval, only when T grows, and once
//! more when the segment closes, so the last entry of a closed segment is its largest
//! timestamp (read back on open for retention and ListOffsets).

use std::path::PathBuf;

use super::error::LogError;
use super::index::partition_point;
use super::mmap::MappedFile;

pub(crate) const TIME_ENTRY_SIZE: usize = 12;

pub(crate) struct TimeIndex {
    file: MappedFile,
    base_offset: i64,
}

impl TimeIndex {
    pub(crate) fn open(path: PathBuf, base_offset: i64) -> Result<(TimeIndex, bool), LogError> {
        let (file, existed) = MappedFile::open(path, TIME_ENTRY_SIZE)?;
        Ok((TimeIndex { file, base_offset }, existed))
    }

    pub(crate) fn create(path: PathBuf, base_offset: i64, capacity_bytes: u64) -> Result<TimeIndex, LogError> {
        Ok(TimeIndex { file: MappedFile::create(path, TIME_ENTRY_SIZE, capacity_bytes)?, base_offset })
    }

    pub(crate) fn file(&self) -> &MappedFile {
        &self.file
    }

    pub(crate) fn file_mut(&mut self) -> &mut MappedFile {
        &mut self.file
    }

    /// Full for appends: the last slot is kept for the entry written when the segment closes.
    pub(crate) fn is_full(&self) -> bool {
        self.file.entries() + 1 >= self.file.capacity()
    }

    /// Entry `i` as (timestamp, absolute offset).
    pub(crate) fn entry(&self, i: usize) -> (i64, i64) {
        let bytes = self.file.entry(i);
        let mut timestamp = [0; 8];
        timestamp.copy_from_slice(&bytes[..8]);
        let relative = u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
        (i64::from_be_bytes(timestamp), self.base_offset + i64::from(relative))
    }

    pub(crate) fn last(&self) -> Option<(i64, i64)> {
        self.file.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Adds (timestamp, offset) if the timestamp is larger than the last entry's and there is
    /// room outside the reserved slot.
    pub(crate) fn maybe_append(&mut self, timestamp: i64, offset: i64) {
        if !self.is_full() {
            self.append_if_larger(timestamp, offset);
        }
    }

    /// The closing entry of a segment: may use the reserved slot.
    pub(crate) fn append_final(&mut self, timestamp: i64, offset: i64) {
        self.append_if_larger(timestamp, offset);
    }

    fn append_if_larger(&mut self, timestamp: i64, offset: i64) {
        if timestamp < 0 || self.last().is_some_and(|(t, _)| timestamp <= t) {
            return;
        }
        let Ok(relative) = u32::try_from(offset - self.base_offset) else {
            return;
        };
        let mut entry = [0; TIME_ENTRY_SIZE];
        entry[..8].copy_from_slice(&timestamp.to_be_bytes());
        entry[8..].copy_from_slice(&relative.to_be_bytes());
        self.file.push(&entry);
    }

    /// The entry with the largest timestamp at most `timestamp`, or (-1, base offset): the
    /// first record with a timestamp >= `timestamp` is in the batch holding the returned
    /// offset or after it.
    pub(crate) fn lookup(&self, timestamp: i64) -> (i64, i64) {
        let count = partition_point(self.file.entries(), |i| self.entry(i).0 <= timestamp);
        if count == 0 {
            (-1, self.base_offset)
        } else {
            self.entry(count - 1)
        }
    }

    pub(crate) fn reset(&mut self) {
        self.file.truncate(0);
    }

    /// Whether the entries are plausible: whole entries, timestamps strictly increasing,
    /// offsets non-decreasing and at most `last_offset` (the segment's last offset).
    pub(crate) fn check(&self, last_offset: Option<i64>) -> Option<String> {
        if !self.file.opened_whole() {
            return Some("time index size is not a multiple of 12".into());
        }
        let mut previous: Option<(i64, i64)> = None;
        for i in 0..self.file.entries() {
            let (timestamp, offset) = self.entry(i);
            if last_offset.is_none_or(|last| offset > last) {
                return Some(format!(
                    "time index entry {i} names offset {offset}, beyond the segment's last offset {last_offset:?}"
                ));
            }
            if let Some((t, o)) = previous {
                if timestamp <= t || offset < o {
                    return Some(format!("time index entry {i} ({timestamp}, {offset}) does not follow ({t}, {o})"));
                }
            }
            previous = Some((timestamp, offset));
        }
        None
    }
}
