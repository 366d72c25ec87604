//! The record log: the file `STROM_POWERCUT_LOG` names, shared by every process that preloads
//! the shim (brokers, their restarts, their children).
//!
//! It is opened once per process with `O_APPEND` and kept open, and each line goes out in one
//! `write(2)`: the kernel appends each such write whole, at the end, under the file's lock, so
//! lines from concurrent threads and processes never interleave, and a line is in the page
//! cache — and survives a SIGKILL — as soon as the hooked call returns. The log is never
//! fsynced: the simulated power cut spares it.

use std::sync::atomic::{AtomicU64, Ordering};

use libc::c_int;

use crate::line::Line;

/// `pid << 32 | fd` of the process that opened the log, `fd` being [`DISABLED`] when the
/// variable is unset or the log could not be opened; 0 before the first hooked call. The pid
/// is there because a forked child must not trust a descriptor number its parent chose: it
/// may have closed it and reused the number (daemons do), so it opens the log afresh.
static STATE: AtomicU64 = AtomicU64::new(0);
const DISABLED: u32 = u32::MAX;

/// The log's descriptor in this process, `None` when recording is off.
pub fn log_fd() -> Option<c_int> {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let state = STATE.load(Ordering::Acquire);
    if state != 0 && (state >> 32) as u32 == pid {
        return unpack(state);
    }
    let fd = open_log();
    let mine = (u64::from(pid) << 32) | u64::from(fd);
    match STATE.compare_exchange(state, mine, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => unpack(mine),
        // Another thread of this process opened it first: use theirs, close ours.
        Err(theirs) if (theirs >> 32) as u32 == pid => {
            if fd != DISABLED {
                // SAFETY: `fd` was opened by `open_log` just now and is shared with no one.
                unsafe { libc::close(fd as c_int) };
            }
            unpack(theirs)
        }
        // A stale value from before a fork that another thread has not replaced yet.
        Err(_) => {
            STATE.store(mine, Ordering::Release);
            unpack(mine)
        }
    }
}

fn unpack(state: u64) -> Option<c_int> {
    let fd = state as u32;
    (fd != DISABLED).then_some(fd as c_int)
}

/// Opens the log `STROM_POWERCUT_LOG` names, or returns [`DISABLED`].
fn open_log() -> u32 {
    // SAFETY: the name is NUL-terminated; the result is read before any other call could
    // change the environment on this thread.
    let path = unsafe { libc::getenv(c"STROM_POWERCUT_LOG".as_ptr()) };
    // SAFETY: a non-null getenv result is a NUL-terminated string.
    if path.is_null() || unsafe { *path } == 0 {
        return DISABLED;
    }
    let flags = libc::O_APPEND | libc::O_WRONLY | libc::O_CREAT | libc::O_CLOEXEC;
    // SAFETY: `path` is NUL-terminated; open is not one of the hooked functions.
    let fd = unsafe { libc::open(path, flags, 0o644 as libc::c_uint) };
    if fd < 0 {
        const MSG: &[u8] = b"strom-powercut: cannot open STROM_POWERCUT_LOG; this process goes unrecorded\n";
        // SAFETY: writes a static buffer to stderr; a failure is ignored on purpose.
        unsafe { libc::write(2, MSG.as_ptr().cast(), MSG.len()) };
        return DISABLED;
    }
    fd as u32
}

/// Appends `line` to the log with one `write(2)`.
pub fn append(fd: c_int, line: &Line) {
    let bytes = line.as_bytes();
    loop {
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        // SAFETY: __errno_location returns this thread's errno.
        if n >= 0 || unsafe { *libc::__errno_location() } != libc::EINTR {
            // A short write (a full disk) leaves a torn line, which the harness rejects.
            return;
        }
    }
}
