//! Why a log operation failed. The protocol layer maps these to Kafka error codes.

use std::io;
use std::path::{Path, PathBuf};

use super::batch::BatchError;
use super::records::RecordsError;

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// An fsync of log data failed. What the file gained since its last good fsync may or may
    /// not be on disk, and a later fsync that succeeds does not prove it is: the kernel may
    /// have dropped the dirty pages (PostgreSQL's "fsyncgate"). The log cannot trust itself
    /// after this; the broker stops ([`crate::storage_failure`]).
    #[error("failed to {op} {}", path.display())]
    Sync {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("failed to {op} {}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("offset {offset} is out of range: log start offset {log_start_offset}, log end offset {log_end_offset}")]
    OffsetOutOfRange { offset: i64, log_start_offset: i64, log_end_offset: i64 },
    #[error("invalid record batch in append")]
    InvalidBatch(#[from] BatchError),
    #[error("append carried no record batches")]
    EmptyAppend,
    #[error("replicated batch starts at offset {found}, but the log ends at {expected}")]
    NonContiguousAppend { expected: i64, found: i64 },
    /// Appending with an older epoch would leave batches that recovery must treat as corrupt
    /// (leader epochs never decrease along a log).
    #[error("leader epoch {epoch} is older than the log's latest leader epoch {latest}")]
    LeaderEpochRegression { epoch: i32, latest: i32 },
    #[error("corrupt record batch at position {position} of {}", path.display())]
    CorruptBatch {
        path: PathBuf,
        position: u64,
        #[source]
        source: BatchError,
    },
    #[error("failed to decode the records of the batch at offset {offset} in {}", path.display())]
    DecodeRecords {
        path: PathBuf,
        offset: i64,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// From [`super::for_each_record`], which has no file to name.
    #[error("invalid records in the batch at offset {offset}")]
    InvalidRecords {
        offset: i64,
        #[source]
        source: RecordsError,
    },
    #[error("failed to rewrite the batch at offset {offset} of {} for compaction", path.display())]
    CompactBatch {
        path: PathBuf,
        offset: i64,
        #[source]
        source: RecordsError,
    },
}

/// `map_err` helper for an fsync of log data: [`LogError::Sync`].
pub(crate) fn sync_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LogError + 'a {
    move |source| LogError::Sync { op, path: path.to_path_buf(), source }
}

/// `map_err` helper: wraps an io::Error with the operation and the path it failed on.
pub(crate) fn io_error<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> LogError + 'a {
    move |source| LogError::Io { op, path: path.to_path_buf(), source }
}
