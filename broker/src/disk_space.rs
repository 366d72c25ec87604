//! The free space of the data directory's filesystem, and the floor below which this broker
//! stops taking produce requests (`--log-dir-min-free-bytes`, as Redpanda's
//! `storage_min_free_bytes`).
//!
//! Why a floor: the data directory also holds the metadata log. Were client writes allowed
//! to fill the disk, the next raft append would fail with ENOSPC, and openraft stops its core
//! on a storage error, leaving a broker without metadata until restarted. Below the floor,
//! produce requests are answered with KAFKA_STORAGE_ERROR (retriable: clients retry, and
//! acknowledge nothing that was not written); fetches, replication and the metadata log go on
//! in the space kept. Once space is freed (retention, deleted topics, a bigger volume) the
//! next check lets writes in again.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::metrics::LogDirStats;
use crate::shutdown::Shutdown;

/// How often the free space is read.
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Whether `free` bytes are below the floor `min_free` (0: no floor).
pub fn is_low(free: u64, min_free: u64) -> bool {
    min_free > 0 && free < min_free
}

/// The data directory's filesystem: size and what the broker may still write.
pub fn stats(dir: &Path) -> std::io::Result<LogDirStats> {
    let s = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    let block = s.fragment_size();
    Ok(LogDirStats { total_bytes: s.blocks() * block, free_bytes: s.blocks_available() * block })
}

/// The last reading, shared by the produce path and the watcher.
#[derive(Debug)]
pub struct DiskSpace {
    dir: PathBuf,
    min_free: u64,
    free: AtomicU64,
    low: AtomicBool,
}

impl DiskSpace {
    pub fn new(dir: &Path, min_free: u64) -> DiskSpace {
        DiskSpace { dir: dir.to_path_buf(), min_free, free: AtomicU64::new(u64::MAX), low: AtomicBool::new(false) }
    }

    /// Reads the free space and decides; logs when the floor is crossed either way.
    pub fn check(&self) {
        let free = match stats(&self.dir) {
            Ok(s) => s.free_bytes,
            Err(e) => {
                // Unknown is not low: a filesystem that cannot answer statvfs is not a reason
                // to refuse every write (writes that fail are refused on their own).
                tracing::warn!(dir = %self.dir.display(), error = %e, "statvfs of the data directory failed");
                return;
            }
        };
        self.record(free);
    }

    /// Takes `free` as the current reading.
    pub fn record(&self, free: u64) {
        self.free.store(free, Ordering::Relaxed);
        let low = is_low(free, self.min_free);
        if self.low.swap(low, Ordering::Relaxed) != low {
            if low {
                tracing::error!(dir = %self.dir.display(), free, min_free = self.min_free, "data directory below its free-space floor: produce requests are refused with KAFKA_STORAGE_ERROR until space is freed");
            } else {
                tracing::warn!(dir = %self.dir.display(), free, min_free = self.min_free, "data directory above its free-space floor again: produce requests are accepted");
            }
        }
    }

    /// Why a produce request must be refused now, if it must.
    pub fn refusal(&self) -> Option<String> {
        self.low.load(Ordering::Relaxed).then(|| {
            format!(
                "the data directory has {} bytes free, below log.dir.min.free.bytes {}",
                self.free.load(Ordering::Relaxed),
                self.min_free
            )
        })
    }
}

/// Checks `disk` every [`CHECK_INTERVAL`] until shutdown.
pub async fn run(disk: Arc<DiskSpace>, mut shutdown: Shutdown) {
    let mut tick = tokio::time::interval(CHECK_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let disk = disk.clone();
                let _ = tokio::task::spawn_blocking(move || disk.check()).await;
            }
            _ = shutdown.wait() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_the_floor_produce_is_refused_and_above_it_again_accepted() {
        assert!(!is_low(0, 0), "no floor");
        assert!(is_low(99, 100));
        assert!(!is_low(100, 100));
        let disk = DiskSpace::new(Path::new("/"), 100);
        assert_eq!(disk.refusal(), None, "nothing read yet");
        disk.record(50);
        assert_eq!(
            disk.refusal().as_deref(),
            Some("the data directory has 50 bytes free, below log.dir.min.free.bytes 100")
        );
        disk.record(150);
        assert_eq!(disk.refusal(), None);
    }

    #[test]
    fn a_real_directory_has_a_size() {
        let dir = tempfile::tempdir().expect("temp dir");
        let s = stats(dir.path()).expect("statvfs");
        assert!(s.total_bytes > 0 && s.free_bytes <= s.total_bytes);
    }
}
