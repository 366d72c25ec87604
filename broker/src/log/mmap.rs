//! A file of fixed-width entries, preallocated and mapped read-write with memmap2 — the
//! storage of both sparse indexes. The only `unsafe` of the log lives here.
//!
//! The file's length is its capacity; `entries` says how many entries are real. An index
//! that is closed (its segment rolled, or the log closed) is trimmed to exactly its entries,
//! so on reopen the length gives the count. An untrimmed file (after a crash) has unknown
//! trailing content; its segment is recovered and the index rebuilt.
//!
//! The preallocated length is sparse (as Kafka's `setLength`): 10 MiB of index per segment
//! would otherwise be taken from the disk up front. Writing through the map into a hole
//! needs a block, and on a full disk that write raises SIGBUS and kills the process. So the
//! blocks are allocated ([`ALLOCATE_CHUNK`] at a time, `posix_fallocate`) before an entry is
//! written into them; when that fails the entry is skipped (the index is sparse anyway, a
//! lookup just scans a little further) and the full disk is reported by the log write that
//! fails next.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use memmap2::{MmapMut, MmapOptions};

use super::error::{io_error, sync_error, LogError};

pub(crate) struct MappedFile {
    path: PathBuf,
    file: File,
    /// `None` while the file is empty (a zero-length mapping is not allowed) and while resizing.
    map: Option<MmapMut>,
    entry_size: usize,
    entries: usize,
    /// Length of the file when it was opened: a trimmed index is a whole number of entries.
    opened_len: u64,
    /// Bytes from the start known to have disk blocks (allocated by this handle).
    allocated: u64,
}

/// How much of an index file is allocated at once ahead of its entries.
pub(crate) const ALLOCATE_CHUNK: u64 = 64 * 1024;

impl MappedFile {
    /// Opens an existing index file, or creates an empty one. Returns whether it existed.
    pub(crate) fn open(path: PathBuf, entry_size: usize) -> Result<(MappedFile, bool), LogError> {
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io_error("open index", &path))?;
        let len = file.metadata().map_err(io_error("stat index", &path))?.len();
        let mut mapped = MappedFile { path, file, map: None, entry_size, entries: 0, opened_len: len, allocated: 0 };
        mapped.entries = usize::try_from(len).unwrap_or(usize::MAX) / entry_size;
        mapped.remap(len)?;
        Ok((mapped, existed))
    }

    /// Creates (or empties) the index file and preallocates `capacity_bytes`.
    pub(crate) fn create(path: PathBuf, entry_size: usize, capacity_bytes: u64) -> Result<MappedFile, LogError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(io_error("create index", &path))?;
        let mut mapped = MappedFile { path, file, map: None, entry_size, entries: 0, opened_len: 0, allocated: 0 };
        mapped.resize(capacity_bytes)?;
        Ok(mapped)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn entries(&self) -> usize {
        self.entries
    }

    pub(crate) fn capacity(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len() / self.entry_size)
    }

    /// Whether the file held a whole number of entries when opened.
    pub(crate) fn opened_whole(&self) -> bool {
        self.opened_len.is_multiple_of(self.entry_size as u64)
    }

    /// The bytes of entry `i`; `i` must be below `entries()`.
    pub(crate) fn entry(&self, i: usize) -> &[u8] {
        assert!(i < self.entries, "index entry {i} read beyond the {} entries", self.entries);
        let map = self.map.as_ref().expect("a file with entries is mapped");
        &map[i * self.entry_size..(i + 1) * self.entry_size]
    }

    /// Appends one entry; false (and nothing written) when the file is full or the disk has
    /// no block for it.
    pub(crate) fn push(&mut self, entry: &[u8]) -> bool {
        debug_assert_eq!(entry.len(), self.entry_size);
        let at = self.entries * self.entry_size;
        let mapped_len = self.map.as_ref().map_or(0, |m| m.len());
        if at + self.entry_size > mapped_len || !self.allocate_through((at + self.entry_size) as u64, mapped_len as u64)
        {
            return false;
        }
        match self.map.as_mut() {
            Some(map) => {
                map[at..at + self.entry_size].copy_from_slice(entry);
                self.entries += 1;
                true
            }
            _ => false,
        }
    }

    /// Makes sure the first `end` bytes have disk blocks, allocating up to a chunk ahead
    /// (never past `limit`, the mapped length). False when the disk has no room.
    fn allocate_through(&mut self, end: u64, limit: u64) -> bool {
        if end <= self.allocated {
            return true;
        }
        let target = end.max(self.allocated + ALLOCATE_CHUNK).min(limit);
        let (Ok(offset), Ok(len)) = (i64::try_from(self.allocated), i64::try_from(target - self.allocated)) else {
            return false;
        };
        match nix::fcntl::posix_fallocate(&self.file, offset, len) {
            Ok(()) => {
                self.allocated = target;
                true
            }
            Err(errno) => {
                tracing::debug!(path = %self.path.display(), error = %errno, "index entry skipped: no disk block for it");
                false
            }
        }
    }

    /// Forgets entries from `entries` on (the bytes stay until overwritten or trimmed).
    pub(crate) fn truncate(&mut self, entries: usize) {
        self.entries = self.entries.min(entries);
    }

    /// Sets the file to `capacity_bytes` rounded down to whole entries, never below the
    /// current entries, and remaps it.
    pub(crate) fn resize(&mut self, capacity_bytes: u64) -> Result<(), LogError> {
        let entry = self.entry_size as u64;
        let len = (capacity_bytes / entry * entry).max(self.entries as u64 * entry);
        // Unmap before changing the length: touching a mapped page beyond the end of the
        // file raises SIGBUS.
        self.map = None;
        self.file.set_len(len).map_err(io_error("resize index", &self.path))?;
        self.allocated = self.allocated.min(len);
        self.remap(len)
    }

    /// Shrinks the file to exactly its entries (a closed segment's index).
    pub(crate) fn trim(&mut self) -> Result<(), LogError> {
        self.resize(0)
    }

    /// A second handle on the file, for an fsync made without the owner's lock.
    pub(crate) fn sync_handle(&self) -> Result<(File, PathBuf), LogError> {
        let file = self.file.try_clone().map_err(io_error("duplicate index handle", &self.path))?;
        Ok((file, self.path.clone()))
    }

    /// Writes the mapped pages and the file length to disk.
    pub(crate) fn flush(&self) -> Result<(), LogError> {
        if let Some(map) = &self.map {
            map.flush().map_err(io_error("msync index", &self.path))?;
        }
        self.file.sync_all().map_err(sync_error("fsync index", &self.path))
    }

    fn remap(&mut self, len: u64) -> Result<(), LogError> {
        self.map = None;
        if len == 0 {
            return Ok(());
        }
        let len = usize::try_from(len).map_err(|_| LogError::Io {
            op: "map index",
            path: self.path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, "index larger than the address space"),
        })?;
        // SAFETY: memmap2 requires that no one else truncates or rewrites the file while the
        // mapping lives. The file is an index inside a partition directory that only this
        // process's `Log` (one per directory, behind the caller's mutex) touches, and this type
        // drops the mapping before every change of the file's length (`resize`) and never
        // hands out references that outlive `&self`.
        let map =
            unsafe { MmapOptions::new().len(len).map_mut(&self.file) }.map_err(io_error("map index", &self.path))?;
        self.map = Some(map);
        Ok(())
    }
}
