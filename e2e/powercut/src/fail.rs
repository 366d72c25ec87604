//! A disk whose fsyncs fail, on demand: with `STROM_SHIM_FAIL_SYNC=<path>` set, every `fsync`
//! or `fdatasync` of a regular file returns -1 with `EIO` while a file exists at `<path>`
//! (the test creates it to break the disk and removes it to mend it). When that file holds a
//! path, only files under it fail. Directories still sync.
//! The data stays in the page cache, as after a real failed writeback whose pages the kernel
//! kept: what a broker must not do is take a later successful fsync as proof of it.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;

use libc::c_int;

/// The trigger path, read once.
fn trigger() -> Option<&'static CString> {
    static TRIGGER: OnceLock<Option<CString>> = OnceLock::new();
    TRIGGER.get_or_init(|| CString::new(std::env::var_os("STROM_SHIM_FAIL_SYNC")?.into_encoded_bytes()).ok()).as_ref()
}

/// Whether a sync of `fd` must fail now: the trigger exists, `fd` is a regular file, and
/// its path starts with what the trigger holds.
pub fn sync_fails(fd: c_int) -> bool {
    let Some(trigger) = trigger() else { return false };
    let Ok(prefix) = std::fs::read(std::ffi::OsStr::from_bytes(trigger.as_bytes())) else { return false };
    // SAFETY: `stat` is plain data; fstat fills it or fails.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a valid, writable struct stat.
    if unsafe { libc::fstat(fd, &mut stat) } != 0 || stat.st_mode & libc::S_IFMT != libc::S_IFREG {
        return false;
    }
    let prefix = prefix.trim_ascii();
    prefix.is_empty()
        || std::fs::read_link(format!("/proc/self/fd/{fd}")).is_ok_and(|p| p.as_os_str().as_bytes().starts_with(prefix))
}

/// The `-1`/`EIO` of a failed sync.
pub fn failed() -> c_int {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = libc::EIO };
    -1
}
