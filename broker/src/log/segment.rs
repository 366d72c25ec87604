//! One segment: a `.log` file of record batches starting at `base_offset`, with its sparse
//! offset and time indexes. Knows how to append, index and close itself; lookups are in
//! `read.rs` and the recovery scan in `recovery.rs`.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, IoSlice};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use super::batch::BatchHeader;
use super::config::LogConfig;
use super::error::{io_error, sync_error, LogError};
use super::index::OffsetIndex;
use super::time_index::TimeIndex;
use super::window::FileWindow;

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";

/// `<base offset, 20 digits>.<ext>`, as Kafka names segment files.
pub(crate) fn file_name(base_offset: i64, ext: &str) -> String {
    format!("{base_offset:020}.{ext}")
}

pub(crate) struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    /// Shared with `FileSlice`s handed to fetches, which may outlive the segment's deletion.
    log: Arc<File>,
    /// Bytes of whole batches in the log file.
    size: u64,
    pub(crate) index: OffsetIndex,
    pub(crate) time_index: TimeIndex,
    bytes_since_last_index_entry: u64,
    /// Largest batch max timestamp so far, -1 when none.
    max_timestamp: i64,
    /// Last offset of the first batch that reached `max_timestamp`, -1 when none.
    offset_of_max_timestamp: i64,
    /// When the segment's age for `segment.ms` starts: the first append, or after a restart
    /// the first batch's timestamp.
    rolling_base_ms: Option<i64>,
    /// An index file was missing when the segment was opened.
    pub(crate) indexes_missing: bool,
}

impl Segment {
    /// Creates the files of a new, empty segment with preallocated indexes.
    pub(crate) fn create(dir: &Path, base_offset: i64, config: &LogConfig) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, LOG_EXT));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)
            .map_err(io_error("create segment log", &log_path))?;
        let index =
            OffsetIndex::create(dir.join(file_name(base_offset, INDEX_EXT)), base_offset, config.index_bytes())?;
        let time_index =
            TimeIndex::create(dir.join(file_name(base_offset, TIME_INDEX_EXT)), base_offset, config.index_bytes())?;
        Ok(Segment {
            base_offset,
            log_path,
            log: Arc::new(log),
            size: 0,
            index,
            time_index,
            bytes_since_last_index_entry: 0,
            max_timestamp: -1,
            offset_of_max_timestamp: -1,
            rolling_base_ms: None,
            indexes_missing: false,
        })
    }

    /// Opens an existing segment as found on disk (indexes not resized, nothing checked).
    pub(crate) fn open(dir: &Path, base_offset: i64) -> Result<Segment, LogError> {
        let log_path = dir.join(file_name(base_offset, LOG_EXT));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&log_path)
            .map_err(io_error("open segment log", &log_path))?;
        let size = log.metadata().map_err(io_error("stat segment log", &log_path))?.len();
        let (index, index_existed) = OffsetIndex::open(dir.join(file_name(base_offset, INDEX_EXT)), base_offset)?;
        let (time_index, time_existed) =
            TimeIndex::open(dir.join(file_name(base_offset, TIME_INDEX_EXT)), base_offset)?;
        let (max_timestamp, offset_of_max_timestamp) = time_index.last().unwrap_or((-1, -1));
        let last_indexed = index.last().map_or(0, |(_, position)| position);
        Ok(Segment {
            base_offset,
            log_path,
            log: Arc::new(log),
            size,
            index,
            time_index,
            bytes_since_last_index_entry: size.saturating_sub(last_indexed),
            max_timestamp,
            offset_of_max_timestamp,
            rolling_base_ms: None,
            indexes_missing: !(index_existed && time_existed),
        })
    }

    pub(crate) fn base_offset(&self) -> i64 {
        self.base_offset
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.size == 0
    }

    pub(crate) fn log_file(&self) -> &Arc<File> {
        &self.log
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// (largest timestamp, last offset of the batch holding it), if any batch has one.
    pub(crate) fn max_timestamp(&self) -> Option<(i64, i64)> {
        (self.offset_of_max_timestamp >= 0).then_some((self.max_timestamp, self.offset_of_max_timestamp))
    }

    pub(crate) fn window(&self, chunk: usize) -> FileWindow<'_> {
        FileWindow::new(&self.log, &self.log_path, self.size, chunk)
    }

    pub(crate) fn set_rolling_base_ms(&mut self, ms: Option<i64>) {
        self.rolling_base_ms = ms;
    }

    /// Why this (active) segment must roll before taking `bytes` more ending at `last_offset`,
    /// if it must. An empty segment never rolls: an oversized append goes in whole.
    pub(crate) fn roll_reason(
        &self,
        bytes: u64,
        last_offset: i64,
        now_ms: i64,
        config: &LogConfig,
    ) -> Option<&'static str> {
        if self.is_empty() {
            return None;
        }
        if self.size + bytes > config.roll_bytes() {
            Some("segment.bytes reached")
        } else if self.rolling_base_ms.is_some_and(|base| now_ms.saturating_sub(base) > config.segment_ms) {
            Some("segment.ms elapsed")
        } else if self.index.is_full() {
            Some("offset index full")
        } else if self.time_index.is_full() {
            Some("time index full")
        } else if last_offset - self.base_offset > i64::from(i32::MAX) {
            Some("relative offsets would overflow")
        } else {
            None
        }
    }

    /// Writes `data` (whole batches, offsets already assigned) at the end of the log and
    /// indexes it. `batches` holds each batch's header and its start within `data`. On a
    /// failed write the file is cut back, so a failed append leaves no partial batch behind.
    pub(crate) fn append(
        &mut self,
        data: &[u8],
        batches: &[(BatchHeader, u64)],
        now_ms: i64,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        self.append_vectored(&mut [IoSlice::new(data)], batches, now_ms, config)
    }

    /// [`Segment::append`] of data in pieces (a leader's stamped batch headers and the
    /// request's batch bodies, written as they are with one `pwritev`).
    pub(crate) fn append_vectored(
        &mut self,
        data: &mut [IoSlice<'_>],
        batches: &[(BatchHeader, u64)],
        now_ms: i64,
        config: &LogConfig,
    ) -> Result<(), LogError> {
        let position = self.size;
        let len: u64 = data.iter().map(|piece| piece.len() as u64).sum();
        if let Err(source) = write_all_vectored_at(&self.log, data, position) {
            if let Err(error) = self.log.set_len(position) {
                tracing::error!(path = %self.log_path.display(), %error, "could not cut a failed append back");
            }
            return Err(LogError::Io { op: "append to segment log", path: self.log_path.clone(), source });
        }
        if self.is_empty() {
            self.rolling_base_ms = Some(now_ms);
        }
        for (header, start) in batches {
            self.index_batch(header, position + start, config.index_interval_bytes);
        }
        self.size += len;
        Ok(())
    }

    /// Accounts for the batch at `position`: tracks the largest timestamp and adds index
    /// entries every `interval` bytes. Shared by appends and index rebuilds so both produce
    /// the same indexes.
    pub(crate) fn index_batch(&mut self, header: &BatchHeader, position: u64, interval: u64) {
        if header.max_timestamp > self.max_timestamp {
            self.max_timestamp = header.max_timestamp;
            self.offset_of_max_timestamp = header.last_offset();
        }
        if self.bytes_since_last_index_entry > interval {
            self.index.append(header.base_offset, position);
            if self.offset_of_max_timestamp >= 0 {
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp);
            }
            self.bytes_since_last_index_entry = 0;
        }
        self.bytes_since_last_index_entry += header.total_size() as u64;
    }

    /// Forgets the indexes and timestamp so a scan can rebuild them; maps the index files at
    /// `capacity_bytes` so there is room.
    pub(crate) fn reset_indexes(&mut self, capacity_bytes: u64) -> Result<(), LogError> {
        self.index.reset();
        self.time_index.reset();
        self.index.file_mut().resize(capacity_bytes)?;
        self.time_index.file_mut().resize(capacity_bytes)?;
        self.bytes_since_last_index_entry = 0;
        self.max_timestamp = -1;
        self.offset_of_max_timestamp = -1;
        self.indexes_missing = false;
        Ok(())
    }

    /// Makes room in the indexes for appends (the active segment).
    pub(crate) fn prepare_for_appends(&mut self, config: &LogConfig) -> Result<(), LogError> {
        self.index.file_mut().resize(config.index_bytes())?;
        self.time_index.file_mut().resize(config.index_bytes())
    }

    /// The segment stops being active: writes the closing time-index entry (the segment's
    /// largest timestamp) and trims both indexes to their entries.
    pub(crate) fn close_indexes(&mut self) -> Result<(), LogError> {
        if self.offset_of_max_timestamp >= 0 {
            self.time_index.append_final(self.max_timestamp, self.offset_of_max_timestamp);
        }
        self.index.file_mut().trim()?;
        self.time_index.file_mut().trim()
    }

    /// Second handles on the log and both index files, for an fsync made without the log's
    /// lock ([`super::flush`]).
    pub(crate) fn sync_handles(&self) -> Result<[(File, PathBuf); 3], LogError> {
        let log = self.log.try_clone().map_err(io_error("duplicate segment handle", &self.log_path))?;
        Ok([(log, self.log_path.clone()), self.index.file().sync_handle()?, self.time_index.file().sync_handle()?])
    }

    /// fsync of the log and both indexes.
    pub(crate) fn flush(&self) -> Result<(), LogError> {
        self.log.sync_data().map_err(sync_error("fsync segment log", &self.log_path))?;
        self.index.file().flush()?;
        self.time_index.file().flush()
    }

    /// Cuts the log file to `size` bytes (a torn or corrupt tail found by recovery).
    pub(crate) fn truncate_log(&mut self, size: u64) -> Result<(), LogError> {
        self.log.set_len(size).map_err(io_error("truncate segment log", &self.log_path))?;
        self.size = size;
        Ok(())
    }

    /// For retention: the largest timestamp, or the log file's modification time when no
    /// batch carries a timestamp (as Kafka does).
    pub(crate) fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            return self.max_timestamp;
        }
        self.log
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
    }

    /// Removes the segment's files. Fetches holding the log file keep reading it.
    pub(crate) fn delete(self) -> Result<(), LogError> {
        let paths = [
            self.log_path.clone(),
            self.index.file().path().to_path_buf(),
            self.time_index.file().path().to_path_buf(),
        ];
        drop(self);
        for path in &paths {
            match fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("delete segment file", path)(e)),
            }
        }
        Ok(())
    }
}

/// Most pieces one `pwritev` takes (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// `write_all_at` for pieces: `pwritev` until every byte is written (a regular file may take
/// fewer bytes than offered).
fn write_all_vectored_at(file: &File, mut data: &mut [IoSlice<'_>], mut position: u64) -> std::io::Result<()> {
    while !data.is_empty() {
        let at = libc::off_t::try_from(position)
            .map_err(|_| std::io::Error::new(ErrorKind::InvalidInput, "segment position out of range"))?;
        let written = match nix::sys::uio::pwritev(file, &data[..data.len().min(IOV_MAX)], at) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        position += written as u64;
        IoSlice::advance_slices(&mut data, written);
    }
    Ok(())
}
