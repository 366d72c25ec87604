//! `log.checkpoint`: the log start offset, the recovery point and whether the log was closed
//! cleanly, written atomically (temp file, fsync, rename, fsync of the directory).
//!
//! The recovery point is the offset below which everything is known to be on disk: segments
//! wholly below it are trusted on open; the segment holding it and every later one are
//! rescanned. A clean shutdown flag set by `Log::close` lets the next open skip that scan.

use std::fs::{self, File};
use std::io::{ErrorKind, Write};
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::error::{io_error, LogError};

pub(crate) const CHECKPOINT_FILE: &str = "log.checkpoint";
const TMP_FILE: &str = "log.checkpoint.tmp";
const VERSION: u32 = 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    pub version: u32,
    pub log_start_offset: i64,
    pub recovery_point: i64,
    #[serde(default)]
    pub clean_shutdown: bool,
}

impl Checkpoint {
    pub(crate) fn new(log_start_offset: i64, recovery_point: i64, clean_shutdown: bool) -> Checkpoint {
        Checkpoint { version: VERSION, log_start_offset, recovery_point, clean_shutdown }
    }
}

/// Reads the checkpoint. A missing file is `None`; so is an unreadable one (logged): the log
/// then recovers every segment, which is slow but loses nothing.
pub(crate) fn read(dir: &Path) -> Result<Option<Checkpoint>, LogError> {
    let path = dir.join(CHECKPOINT_FILE);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("read checkpoint", &path)(e)),
    };
    match serde_json::from_slice::<Checkpoint>(&bytes) {
        Ok(checkpoint) if checkpoint.version == VERSION => Ok(Some(checkpoint)),
        Ok(checkpoint) => {
            tracing::warn!(path = %path.display(), version = checkpoint.version, "unknown log checkpoint version; recovering the whole log");
            Ok(None)
        }
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "unreadable log checkpoint; recovering the whole log");
            Ok(None)
        }
    }
}

pub(crate) fn write(dir: &Path, checkpoint: &Checkpoint) -> Result<(), LogError> {
    let path = dir.join(CHECKPOINT_FILE);
    let json = serde_json::to_vec(checkpoint).map_err(|e| io_error("encode checkpoint", &path)(e.into()))?;
    replace_file(dir, CHECKPOINT_FILE, TMP_FILE, &json)
}

/// Replaces `dir/name` with `bytes` atomically: writes `dir/tmp_name` (which should end in
/// `.tmp`, a suffix `Log::open` clears), fsyncs it, renames it over `name`, fsyncs `dir`.
pub(crate) fn replace_file(dir: &Path, name: &str, tmp_name: &str, bytes: &[u8]) -> Result<(), LogError> {
    let tmp = dir.join(tmp_name);
    let path = dir.join(name);
    let mut file = File::create(&tmp).map_err(io_error("create checkpoint", &tmp))?;
    file.write_all(bytes).map_err(io_error("write checkpoint", &tmp))?;
    file.sync_all().map_err(io_error("fsync checkpoint", &tmp))?;
    drop(file);
    fs::rename(&tmp, &path).map_err(io_error("rename checkpoint into", &path))?;
    sync_dir(dir)
}

/// Makes renames, creations and deletions in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io_error("fsync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_replaces_atomically() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(read(dir.path()).expect("read"), None);
        write(dir.path(), &Checkpoint::new(5, 10, false)).expect("write");
        write(dir.path(), &Checkpoint::new(7, 12, true)).expect("write");
        assert_eq!(read(dir.path()).expect("read"), Some(Checkpoint::new(7, 12, true)));
        assert!(!dir.path().join(TMP_FILE).exists());
    }

    #[test]
    fn garbage_reads_as_missing() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(CHECKPOINT_FILE), b"\x00garbage").expect("write");
        assert_eq!(read(dir.path()).expect("read"), None);
    }
}
