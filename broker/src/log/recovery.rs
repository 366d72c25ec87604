//! Recovery of a segment after an unclean shutdown, and the cheaper checks that decide
//! whether a segment needs it.
//!
//! A batch is valid when its header parses, it lies wholly inside the file, its CRC matches,
//! its base offset is the expected next offset and its leader epoch is not older than the one
//! before it. `Log::append` refuses anything that would break these rules, so recovery never
//! cuts what an append accepted — only torn or damaged bytes. In a segment rewritten by
//! compaction, whole batches may be gone: there the base offset must only not be below the
//! expected one ([`Continuity::Gaps`]).

use std::sync::Arc;

use super::batch::{BatchError, BatchHeader, CRC_COVERED_FROM};
use super::config::LogConfig;
use super::error::LogError;
use super::segment::Segment;
use super::window::{FileWindow, HEADER_WINDOW, SCAN_WINDOW};

/// How the offsets of consecutive batches must relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Continuity {
    /// Each batch starts right after the one before (a segment as appended).
    Exact,
    /// Each batch starts after the one before (a segment rewritten by compaction).
    Gaps,
}

/// What a recovery scan found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Recovered {
    /// The leader epoch of the last valid batch (the given one when there is none).
    pub last_epoch: i32,
    /// Bytes cut off the end of the log file.
    pub truncated_bytes: u64,
}

impl Segment {
    /// Rescans the whole log file, rebuilding both indexes, and truncates it at the first
    /// invalid batch. `last_epoch` is the leader epoch of the batch before this segment.
    pub(crate) fn recover(
        &mut self,
        last_epoch: i32,
        continuity: Continuity,
        config: &LogConfig,
    ) -> Result<Recovered, LogError> {
        self.reset_indexes(config.index_bytes())?;
        let file = Arc::clone(self.log_file());
        let path = self.log_path().to_path_buf();
        let size = self.size();
        let mut window = FileWindow::new(&file, &path, size, SCAN_WINDOW);
        let mut position = 0;
        let mut next_offset = self.base_offset();
        let mut epoch = last_epoch;
        let problem = loop {
            if position == size {
                break None;
            }
            match check_batch(&mut window, position, Some(next_offset), continuity, epoch)? {
                Ok(header) => {
                    self.index_batch(&header, position, config.index_interval_bytes);
                    next_offset = header.last_offset() + 1;
                    epoch = header.partition_leader_epoch;
                    position += header.total_size() as u64;
                }
                Err(reason) => break Some(reason),
            }
        };
        let truncated_bytes = size - position;
        if let Some(reason) = problem {
            tracing::warn!(
                path = %path.display(),
                position,
                truncated_bytes,
                next_offset,
                %reason,
                "truncating segment log at its first invalid batch"
            );
            self.truncate_log(position)?;
        }
        Ok(Recovered { last_epoch: epoch, truncated_bytes })
    }

    /// Whether the indexes of a segment that will not be rescanned agree with its log.
    /// Returns what is wrong; I/O errors are errors.
    pub(crate) fn check_indexes(&self) -> Result<Option<String>, LogError> {
        if self.indexes_missing {
            return Ok(Some("an index file is missing".into()));
        }
        if let Some(reason) = self.index.check(self.size()) {
            return Ok(Some(reason));
        }
        if let Some((offset, position)) = self.index.last() {
            match self.window(HEADER_WINDOW).header_at(position) {
                Ok(header) if header.base_offset == offset => {}
                Ok(header) => {
                    return Ok(Some(format!(
                    "offset index's last entry names offset {offset} at {position}, where a batch at offset {} starts",
                    header.base_offset
                )))
                }
                Err(LogError::CorruptBatch { source, .. }) => {
                    return Ok(Some(format!("offset index's last entry points at no batch: {source}")))
                }
                Err(e) => return Err(e),
            }
        }
        let last_offset = match self.last_batch() {
            Ok(header) => header.map(|h| h.last_offset()),
            Err(LogError::CorruptBatch { position, source, .. }) => {
                return Ok(Some(format!("the batches after the last index entry do not parse: {source} at {position}")))
            }
            Err(e) => return Err(e),
        };
        Ok(self.time_index.check(last_offset))
    }

    /// Checks the part of the log file after the last index entry as recovery would (a clean
    /// shutdown skips recovery, but this is where damage done while stopped, such as a
    /// truncated file, shows). Returns what is wrong.
    pub(crate) fn check_tail(&self, continuity: Continuity) -> Result<Option<String>, LogError> {
        let mut window = self.window(SCAN_WINDOW);
        let (mut expected, mut position) = match self.index.last() {
            // `check_indexes` has verified that this entry starts a batch with that offset.
            Some((offset, position)) => (Some(offset), position),
            None => (Some(self.base_offset()), 0),
        };
        let mut epoch = i32::MIN;
        while position < self.size() {
            match check_batch(&mut window, position, expected, continuity, epoch)? {
                Ok(header) => {
                    expected = Some(header.last_offset() + 1);
                    epoch = header.partition_leader_epoch;
                    position += header.total_size() as u64;
                }
                Err(reason) => return Ok(Some(format!("batch at position {position}: {reason}"))),
            }
        }
        Ok(None)
    }

    /// The header of the last batch: a walk from the last index entry to the end.
    pub(crate) fn last_batch(&self) -> Result<Option<BatchHeader>, LogError> {
        let mut window = self.window(HEADER_WINDOW);
        let mut position = self.index.last().map_or(0, |(_, p)| p);
        if position >= self.size() {
            position = 0;
        }
        let mut last = None;
        while position < self.size() {
            let header = window.header_at(position)?;
            position += header.total_size() as u64;
            last = Some(header);
        }
        Ok(last)
    }

    pub(crate) fn first_batch(&self) -> Result<Option<BatchHeader>, LogError> {
        if self.is_empty() {
            return Ok(None);
        }
        self.window(HEADER_WINDOW).header_at(0).map(Some)
    }
}

/// Validates the batch at `position`: `Err(reason)` inside `Ok` for an invalid batch, `Err`
/// for an I/O failure.
fn check_batch(
    window: &mut FileWindow<'_>,
    position: u64,
    expected_offset: Option<i64>,
    continuity: Continuity,
    min_epoch: i32,
) -> Result<Result<BatchHeader, String>, LogError> {
    let header = match window.header_at(position) {
        Ok(header) => header,
        Err(LogError::CorruptBatch { source, .. }) => return Ok(Err(source.to_string())),
        Err(e) => return Err(e),
    };
    let covered = header.total_size() as u64 - CRC_COVERED_FROM as u64;
    let computed = window.crc32c(position + CRC_COVERED_FROM as u64, covered)?;
    if computed != header.crc {
        return Ok(Err(BatchError::CrcMismatch { stored: header.crc, computed }.to_string()));
    }
    if let Some(expected) = expected_offset {
        let follows = match continuity {
            Continuity::Exact => header.base_offset == expected,
            Continuity::Gaps => header.base_offset >= expected,
        };
        if !follows {
            return Ok(Err(format!("base offset {} where {expected} was expected", header.base_offset)));
        }
    }
    if header.partition_leader_epoch < min_epoch {
        return Ok(Err(format!("leader epoch {} after epoch {min_epoch}", header.partition_leader_epoch)));
    }
    Ok(Ok(header))
}
