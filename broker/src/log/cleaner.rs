//! Rewriting one closed segment for compaction, and swapping the rewrite in.
//!
//! The cleaned copy goes to `<base>.log.cleaned`, created only when the first batch changes
//! (the unchanged batches before it are copied then), and is fsynced. The old segment's index
//! files are deleted, then a rename over `<base>.log` swaps the copy in: that rename is the
//! commit point. The indexes are rebuilt by a scan of the new file. A crash at any point
//! leaves either the old log file (and a `.cleaned` leftover, which `Log::open` deletes) or
//! the new one, possibly without indexes, which `Log::open` rebuilds — accepting its offset
//! gaps, because the cleaner checkpoint was written before the first swap.
//!
//! Until the swap, the in-memory segment keeps serving reads from the old file; fetches that
//! hold the old file keep reading it after the swap.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::batch::{
    BatchHeader, ATTRIBUTES, BATCH_HEADER_LEN, BATCH_LENGTH, COMPRESSION_CODEC_MASK, CRC, CRC_COVERED_FROM,
    LOG_OVERHEAD, RECORD_COUNT,
};
use super::checkpoint::sync_dir;
use super::codec::{self, Codec};
use super::compaction::{for_each_batch, is_compactable, CompactionStats, Retain};
use super::config::LogConfig;
use super::error::{io_error, sync_error, LogError};
use super::records::{parse_records, records_section, RecordsError};
use super::segment::{file_name, Segment, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use super::window::{FileWindow, SCAN_WINDOW};
use super::Log;

/// Suffix of a segment log file being written by compaction.
pub(super) const CLEANED_SUFFIX: &str = ".cleaned";
const COPY_CHUNK: u64 = 1 << 20;

/// What compaction does with one batch.
enum Outcome {
    /// Unchanged (nothing removed, or not a batch compaction looks into).
    Keep,
    /// Kept unchanged because its records cannot be read: what cannot be keyed is never dropped.
    Unreadable(RecordsError),
    /// Every record removed, and not a producer's last batch.
    Drop {
        removed: u64,
    },
    Rewrite {
        batch: Vec<u8>,
        removed: u64,
    },
}

impl Log {
    /// Rewrites the closed segment at `base` without the records `retain` drops, and swaps the
    /// rewrite in; a segment with nothing to drop is left alone.
    pub(super) fn clean_segment(
        &mut self,
        base: i64,
        retain: &Retain<'_>,
        stats: &mut CompactionStats,
    ) -> Result<(), LogError> {
        let segment = &self.segments[&base];
        let path = cleaned_path(segment.log_path());
        let mut cleaned: Option<CleanedFile> = None;
        let mut records_removed = 0;
        let result = for_each_batch(segment, |position, header, bytes| {
            let outcome = clean_batch(bytes, header, retain).map_err(|source| LogError::CompactBatch {
                path: segment.log_path().to_path_buf(),
                offset: header.base_offset,
                source,
            })?;
            let rewritten;
            let (out, dropped, changed) = match outcome {
                Outcome::Keep => (Some(bytes), 0, false),
                Outcome::Unreadable(error) => {
                    tracing::warn!(path = %segment.log_path().display(), offset = header.base_offset, error = %error, "compaction keeps a batch whose records cannot be read");
                    (Some(bytes), 0, false)
                }
                Outcome::Drop { removed } => (None, removed, true),
                Outcome::Rewrite { batch, removed } => {
                    rewritten = batch;
                    (Some(&rewritten[..]), removed, true)
                }
            };
            records_removed += dropped;
            if changed && cleaned.is_none() {
                cleaned = Some(CleanedFile::start(&path, segment, position)?);
            }
            if let (Some(file), Some(out)) = (&mut cleaned, out) {
                file.write(out)?;
            }
            Ok(())
        });
        let size_before = segment.size();
        stats.bytes_before += size_before;
        let Some(file) = cleaned else {
            stats.bytes_after += size_before;
            return result;
        };
        let swapped = result.and_then(|()| file.finish()).and_then(|size_after| {
            self.swap_in_cleaned(base, &path)?;
            Ok(size_after)
        });
        match swapped {
            Ok(size_after) => {
                stats.segments_cleaned += 1;
                stats.records_removed += records_removed;
                stats.bytes_after += size_after;
                Ok(())
            }
            Err(error) => {
                if let Err(e) = fs::remove_file(&path) {
                    if e.kind() != ErrorKind::NotFound {
                        tracing::warn!(path = %path.display(), error = %e, "could not delete a cleaned segment file; the next open will");
                    }
                }
                Err(error)
            }
        }
    }

    /// Replaces the segment at `base` with its cleaned copy at `cleaned` (see the module doc).
    fn swap_in_cleaned(&mut self, base: i64, cleaned: &Path) -> Result<(), LogError> {
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            let path = self.dir.join(file_name(base, ext));
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(io_error("delete index of a compacted segment", &path)(e)),
            }
        }
        let log_path = self.dir.join(file_name(base, LOG_EXT));
        fs::rename(cleaned, &log_path).map_err(io_error("swap in cleaned segment", &log_path))?;
        sync_dir(&self.dir)?;
        let mut segment = Segment::open(&self.dir, base)?;
        rebuild_indexes(&mut segment, &self.config)?;
        self.segments.insert(base, segment);
        Ok(())
    }
}

/// Decides what happens to one batch and builds its rewrite.
fn clean_batch(bytes: &[u8], header: &BatchHeader, retain: &Retain<'_>) -> Result<Outcome, RecordsError> {
    if !is_compactable(header) {
        return Ok(Outcome::Keep);
    }
    let section = match records_section(bytes, header) {
        Ok(section) => section,
        Err(error) => return Ok(Outcome::Unreadable(error)),
    };
    let mut kept = Vec::new();
    let mut total = 0u64;
    let parsed = parse_records(header, &section, |record| {
        total += 1;
        if retain.record(&record.view, header) {
            kept.push(record.bytes);
        }
    });
    if let Err(error) = parsed {
        return Ok(Outcome::Unreadable(error));
    }
    let removed = total - kept.len() as u64;
    if removed == 0 {
        Ok(Outcome::Keep)
    } else if kept.is_empty() && !retain.empty_batch(header) {
        Ok(Outcome::Drop { removed })
    } else {
        Ok(Outcome::Rewrite { batch: rebuild_batch(bytes, header, &kept)?, removed })
    }
}

/// The batch `original` holding only the `kept` records (their exact bytes, in order). The
/// header stays as it was — base offset, last offset delta, timestamps, producer fields —
/// except the record count, the batch length and the CRC. Records are re-compressed with the
/// batch's codec; a batch left empty gets no codec, as Kafka writes one.
pub(super) fn rebuild_batch(original: &[u8], header: &BatchHeader, kept: &[&[u8]]) -> Result<Vec<u8>, RecordsError> {
    let raw = kept.concat();
    let codec = Codec::from_id(header.compression_codec())?;
    let mut attributes = header.attributes;
    let section = if kept.is_empty() {
        attributes &= !COMPRESSION_CODEC_MASK;
        Vec::new()
    } else if codec == Codec::None {
        raw
    } else {
        codec::compress(codec, &raw)?
    };
    let mut batch = Vec::with_capacity(BATCH_HEADER_LEN + section.len());
    batch.extend_from_slice(&original[..BATCH_HEADER_LEN]);
    batch.extend_from_slice(&section);
    let too_large = || RecordsError::Malformed { record: 0, field: "records", problem: "rewritten batch too large" };
    let batch_length = i32::try_from(batch.len() - LOG_OVERHEAD).map_err(|_| too_large())?;
    let record_count = i32::try_from(kept.len()).map_err(|_| too_large())?;
    batch[BATCH_LENGTH..BATCH_LENGTH + 4].copy_from_slice(&batch_length.to_be_bytes());
    batch[ATTRIBUTES..ATTRIBUTES + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[RECORD_COUNT..RECORD_COUNT + 4].copy_from_slice(&record_count.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
    batch[CRC..CRC + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(batch)
}

/// Rebuilds both indexes of a freshly swapped-in segment from its batch headers, as appends
/// would have built them, and closes them (trimmed, fsynced).
fn rebuild_indexes(segment: &mut Segment, config: &LogConfig) -> Result<(), LogError> {
    segment.reset_indexes(config.index_bytes())?;
    let file = Arc::clone(segment.log_file());
    let path = segment.log_path().to_path_buf();
    let mut window = FileWindow::new(&file, &path, segment.size(), SCAN_WINDOW);
    let mut position = 0;
    while position < segment.size() {
        let header = window.header_at(position)?;
        segment.index_batch(&header, position, config.index_interval_bytes);
        position += header.total_size() as u64;
    }
    segment.close_indexes()?;
    segment.flush()
}

/// `<base>.log.cleaned` beside `<base>.log`.
fn cleaned_path(log_path: &Path) -> PathBuf {
    let mut name = log_path.as_os_str().to_owned();
    name.push(CLEANED_SUFFIX);
    PathBuf::from(name)
}

/// The cleaned copy of a segment being written.
struct CleanedFile {
    path: PathBuf,
    out: BufWriter<File>,
    len: u64,
}

impl CleanedFile {
    /// Creates the file holding the first `prefix` bytes of `segment`: the batches before the
    /// first one that changes.
    fn start(path: &Path, segment: &Segment, prefix: u64) -> Result<CleanedFile, LogError> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(io_error("create cleaned segment", path))?;
        let mut cleaned =
            CleanedFile { path: path.to_path_buf(), out: BufWriter::with_capacity(1 << 20, file), len: 0 };
        let mut buf = vec![0; COPY_CHUNK.min(prefix) as usize];
        let mut done = 0;
        while done < prefix {
            let chunk = &mut buf[..(prefix - done).min(COPY_CHUNK) as usize];
            segment.log_file().read_exact_at(chunk, done).map_err(io_error("read segment log", segment.log_path()))?;
            cleaned.write(chunk)?;
            done += chunk.len() as u64;
        }
        Ok(cleaned)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        self.out.write_all(bytes).map_err(io_error("write cleaned segment", &self.path))?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Flushes and fsyncs the file; returns its size.
    fn finish(self) -> Result<u64, LogError> {
        let file = self.out.into_inner().map_err(|e| io_error("write cleaned segment", &self.path)(e.into_error()))?;
        file.sync_all().map_err(sync_error("fsync cleaned segment", &self.path))?;
        Ok(self.len)
    }
}
