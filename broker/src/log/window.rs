//! Buffered positional reads of a segment's log file, for walking batch headers without one
//! syscall per header (reads, index rebuilds, recovery).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::batch::{BatchError, BatchHeader, BATCH_HEADER_LEN};
use super::error::{io_error, LogError};

/// Window size for header walks on the read path: one index interval and some.
pub(crate) const HEADER_WINDOW: usize = 8 << 10;
/// Window size for the sequential scan of recovery.
pub(crate) const SCAN_WINDOW: usize = 1 << 20;

pub(crate) struct FileWindow<'a> {
    file: &'a File,
    path: &'a Path,
    /// Bytes of the file that hold data (the segment's size).
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    start: u64,
}

impl<'a> FileWindow<'a> {
    pub(crate) fn new(file: &'a File, path: &'a Path, end: u64, chunk: usize) -> FileWindow<'a> {
        FileWindow { file, path, end, chunk, buf: Vec::new(), start: 0 }
    }

    /// `len` bytes at `position`, which must lie within the data (`position + len <= end`).
    pub(crate) fn get(&mut self, position: u64, len: usize) -> Result<&[u8], LogError> {
        let wanted_end = position + len as u64;
        if wanted_end > self.end {
            let available = usize::try_from(self.end.saturating_sub(position)).unwrap_or(usize::MAX);
            return Err(self.corrupt(position, BatchError::Truncated { needed: len, available }));
        }
        let cached_end = self.start + self.buf.len() as u64;
        if position < self.start || wanted_end > cached_end {
            let fill = (self.end - position).min(len.max(self.chunk) as u64) as usize;
            self.buf.resize(fill, 0);
            self.file.read_exact_at(&mut self.buf, position).map_err(io_error("read segment log", self.path))?;
            self.start = position;
        }
        let at = (position - self.start) as usize;
        Ok(&self.buf[at..at + len])
    }

    /// The header of the batch at `position`, checked to lie wholly within the data.
    pub(crate) fn header_at(&mut self, position: u64) -> Result<BatchHeader, LogError> {
        let header =
            BatchHeader::parse(self.get(position, BATCH_HEADER_LEN)?).map_err(|e| self.corrupt(position, e))?;
        let available = self.end - position;
        if header.total_size() as u64 > available {
            let available = usize::try_from(available).unwrap_or(usize::MAX);
            return Err(self.corrupt(position, BatchError::Truncated { needed: header.total_size(), available }));
        }
        Ok(header)
    }

    /// CRC-32C of `len` bytes at `position`, read in chunks so that a huge (or corrupt) batch
    /// length never allocates more than one window.
    pub(crate) fn crc32c(&mut self, position: u64, len: u64) -> Result<u32, LogError> {
        let mut crc = 0;
        let mut done = 0;
        while done < len {
            let step = (len - done).min(self.chunk as u64) as usize;
            crc = crc32c::crc32c_append(crc, self.get(position + done, step)?);
            done += step as u64;
        }
        Ok(crc)
    }

    pub(crate) fn corrupt(&self, position: u64, source: BatchError) -> LogError {
        LogError::CorruptBatch { path: self.path.to_path_buf(), position, source }
    }
}
