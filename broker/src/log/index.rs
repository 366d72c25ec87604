//! The sparse offset index of a segment: (relative offset u32, file position u32) entries,
//! big endian, one every `index.interval.bytes` of log. Each entry names the first offset of
//! a batch and where that batch starts, so a lookup lands on a batch boundary at or before
//! the batch holding the wanted offset.

use std::path::PathBuf;

use super::error::LogError;
use super::mmap::MappedFile;

pub(crate) const OFFSET_ENTRY_SIZE: usize = 8;

pub(crate) struct OffsetIndex {
    file: MappedFile,
    base_offset: i64,
}

impl OffsetIndex {
    /// Opens an existing index (or an empty new file); returns whether the file existed.
    pub(crate) fn open(path: PathBuf, base_offset: i64) -> Result<(OffsetIndex, bool), LogError> {
        let (file, existed) = MappedFile::open(path, OFFSET_ENTRY_SIZE)?;
        Ok((OffsetIndex { file, base_offset }, existed))
    }

    pub(crate) fn create(path: PathBuf, base_offset: i64, capacity_bytes: u64) -> Result<OffsetIndex, LogError> {
        Ok(OffsetIndex { file: MappedFile::create(path, OFFSET_ENTRY_SIZE, capacity_bytes)?, base_offset })
    }

    pub(crate) fn file(&self) -> &MappedFile {
        &self.file
    }

    pub(crate) fn file_mut(&mut self) -> &mut MappedFile {
        &mut self.file
    }

    pub(crate) fn is_full(&self) -> bool {
        self.file.entries() >= self.file.capacity()
    }

    /// Entry `i` as (absolute offset, file position).
    pub(crate) fn entry(&self, i: usize) -> (i64, u64) {
        let bytes = self.file.entry(i);
        let relative = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let position = u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        (self.base_offset + i64::from(relative), u64::from(position))
    }

    pub(crate) fn last(&self) -> Option<(i64, u64)> {
        self.file.entries().checked_sub(1).map(|i| self.entry(i))
    }

    /// Records that the batch starting at `offset` is at `position`. Skipped (returns false)
    /// when the index is full or the values do not fit: the index is only a shortcut.
    pub(crate) fn append(&mut self, offset: i64, position: u64) -> bool {
        let (Ok(relative), Ok(position)) = (u32::try_from(offset - self.base_offset), u32::try_from(position)) else {
            return false;
        };
        debug_assert!(
            self.last().is_none_or(|(o, p)| o < offset && p < u64::from(position)),
            "index entries must increase"
        );
        let mut entry = [0; OFFSET_ENTRY_SIZE];
        entry[..4].copy_from_slice(&relative.to_be_bytes());
        entry[4..].copy_from_slice(&position.to_be_bytes());
        self.file.push(&entry)
    }

    /// The last entry whose offset is at most `offset`, or (base offset, 0).
    pub(crate) fn lookup(&self, offset: i64) -> (i64, u64) {
        let n = self.file.entries();
        let count = partition_point(n, |i| self.entry(i).0 <= offset);
        if count == 0 {
            (self.base_offset, 0)
        } else {
            self.entry(count - 1)
        }
    }

    /// The position of the last indexed batch starting at or before `position`, or 0.
    pub(crate) fn floor_position(&self, position: u64) -> u64 {
        let n = self.file.entries();
        let count = partition_point(n, |i| self.entry(i).1 <= position);
        if count == 0 {
            0
        } else {
            self.entry(count - 1).1
        }
    }

    pub(crate) fn reset(&mut self) {
        self.file.truncate(0);
    }

    /// Whether the entries are plausible for a log file of `log_size` bytes: a whole number of
    /// entries, offsets and positions strictly increasing, positions inside the file.
    /// Returns what is wrong.
    pub(crate) fn check(&self, log_size: u64) -> Option<String> {
        if !self.file.opened_whole() {
            return Some("offset index size is not a multiple of 8".into());
        }
        let mut previous: Option<(i64, u64)> = None;
        for i in 0..self.file.entries() {
            let (offset, position) = self.entry(i);
            if position >= log_size {
                return Some(format!("offset index entry {i} points at {position}, beyond the log's {log_size} bytes"));
            }
            if let Some((o, p)) = previous {
                if offset <= o || position <= p {
                    return Some(format!("offset index entry {i} ({offset}, {position}) does not follow ({o}, {p})"));
                }
            }
            previous = Some((offset, position));
        }
        None
    }
}

/// The number of leading indices in `0..n` for which the monotone predicate holds.
pub(crate) fn partition_point(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}
