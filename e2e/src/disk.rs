//! A small disk: a size-capped tmpfs mounted over a directory (a broker's data dir), and a
//! filler file that takes all but a chosen amount of its free space, for disk-full tests.
//! Needs root (CAP_SYS_ADMIN), as the Kubernetes suite's mount namespaces do.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A tmpfs mounted at `path` until dropped.
#[derive(Debug)]
pub struct SmallDisk {
    path: PathBuf,
}

impl SmallDisk {
    /// Mounts a tmpfs of `bytes` at `path` (an existing, empty directory).
    pub fn mount(path: &Path, bytes: u64) -> Result<SmallDisk> {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(path)
            .status()
            .context("run mount")?;
        if !status.success() {
            bail!("mount -t tmpfs at {} failed ({status}): disk-full tests need root", path.display());
        }
        Ok(SmallDisk { path: path.to_path_buf() })
    }

    /// Bytes free for an unprivileged writer.
    pub fn free(&self) -> Result<u64> {
        let stat = nix::sys::statvfs::statvfs(&self.path).context("statvfs")?;
        Ok(stat.blocks_available() * stat.fragment_size())
    }

    /// Takes all but `leave` bytes of the free space with `<path>/filler` (allocated, not
    /// sparse); removing the file gives the space back.
    pub fn fill_leaving(&self, leave: u64) -> Result<PathBuf> {
        let filler = self.path.join("filler");
        let take = self.free()?.saturating_sub(leave);
        let file = File::create(&filler).with_context(|| format!("create {}", filler.display()))?;
        nix::fcntl::posix_fallocate(&file, 0, i64::try_from(take).context("filler size")?)
            .with_context(|| format!("allocate {take} bytes in {}", filler.display()))?;
        Ok(filler)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        // Lazy: a broker still holding files there must not keep the mount alive forever.
        let _ = Command::new("umount").arg("-l").arg(&self.path).status();
    }
}
