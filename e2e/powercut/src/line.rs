//! One record line, built in a buffer on the stack: no allocation and no lock inside a hook.
//!
//! Every path written is absolute and free of symlinks, the way the kernel names it under
//! `/proc/self/fd`, so the harness can match it against the files it walks. A path containing
//! a tab or a newline cannot be written in this format: the line is abandoned (`None`) and the
//! operation goes unrecorded.

use std::ffi::CStr;

use libc::{c_char, c_int};

/// The longest path the kernel returns, its NUL included.
const PATH_MAX: usize = libc::PATH_MAX as usize;
/// A tag, two paths, a length and the separators.
const CAPACITY: usize = 2 * PATH_MAX + 64;

pub struct Line {
    bytes: [u8; CAPACITY],
    len: usize,
}

impl Line {
    /// A line starting with `tag` (`S`, `D`, `R`, `X` or `U`).
    pub fn new(tag: u8) -> Line {
        let mut bytes = [0; CAPACITY];
        bytes[0] = tag;
        Line { bytes, len: 1 }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    fn push(&mut self, part: &[u8]) -> Option<()> {
        let end = self.len.checked_add(part.len())?;
        self.bytes.get_mut(self.len..end)?.copy_from_slice(part);
        self.len = end;
        Some(())
    }

    pub fn push_tab(&mut self) -> Option<()> {
        self.push(b"\t")
    }

    /// Ends the line; nothing may follow.
    pub fn end(&mut self) -> Option<()> {
        self.push(b"\n")
    }

    pub fn push_u64(&mut self, n: u64) -> Option<()> {
        let mut digits = [0u8; 20];
        self.push(decimal(n, &mut digits))
    }

    /// Appends the path open file descriptor `fd` names: `/proc/self/fd/<fd>` read back.
    /// `None` for anything that is not a path (a pipe, a socket) or does not fit.
    pub fn push_fd_path(&mut self, fd: c_int) -> Option<()> {
        const PREFIX: &[u8] = b"/proc/self/fd/";
        let mut digits = [0u8; 20];
        let digits = decimal(u64::try_from(fd).ok()?, &mut digits);
        let mut link = [0u8; PREFIX.len() + 21];
        link[..PREFIX.len()].copy_from_slice(PREFIX);
        link[PREFIX.len()..PREFIX.len() + digits.len()].copy_from_slice(digits);
        let spare = self.bytes.get_mut(self.len..)?;
        // SAFETY: `link` is NUL-terminated (zeroed past the digits); readlink writes at most `spare.len()` bytes there.
        let n = unsafe { libc::readlink(link.as_ptr().cast(), spare.as_mut_ptr().cast(), spare.len()) };
        let n = usize::try_from(n).ok().filter(|&n| n > 0 && n < spare.len())?;
        let path = &spare[..n];
        // An unlinked file or directory reads back as "<old path> (deleted)": nothing to record.
        if path[0] != b'/' || path.ends_with(b" (deleted)") || !printable(path) {
            return None;
        }
        self.len += n;
        Some(())
    }

    /// Appends the absolute path `path` names, relative to directory `dirfd` (or to the working
    /// directory for `AT_FDCWD`): its parent directory opened with `O_PATH` and read back from
    /// `/proc`, so `..` and symlinks in it are resolved, then its last component. The parent
    /// must exist, so call this before a rename or unlink that could move the parent away.
    ///
    /// # Safety
    /// `path` is null or a NUL-terminated string.
    pub unsafe fn push_resolved(&mut self, dirfd: c_int, path: *const c_char) -> Option<()> {
        if path.is_null() {
            return None;
        }
        // SAFETY: the caller's promise.
        let path = unsafe { CStr::from_ptr(path) }.to_bytes();
        let end = path.iter().rposition(|&b| b != b'/')? + 1;
        let path = &path[..end];
        let (dir, name): (&[u8], &[u8]) = match path.iter().rposition(|&b| b == b'/') {
            Some(0) => (b"/", &path[1..]),
            Some(slash) => (&path[..slash], &path[slash + 1..]),
            None => (b".", path),
        };
        if name == b"." || name == b".." || !printable(name) {
            return None;
        }
        let mut dir_c = [0u8; PATH_MAX];
        dir_c.get_mut(..dir.len())?.copy_from_slice(dir);
        *dir_c.get_mut(dir.len())? = 0;
        // SAFETY: `dir_c` is NUL-terminated; the descriptor is closed below.
        let dir_fd =
            unsafe { libc::openat(dirfd, dir_c.as_ptr().cast(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if dir_fd < 0 {
            return None;
        }
        let resolved = self.push_fd_path(dir_fd);
        // SAFETY: `dir_fd` is the descriptor opened above, closed once.
        unsafe { libc::close(dir_fd) };
        resolved?;
        if !self.as_bytes().ends_with(b"/") {
            self.push(b"/")?;
        }
        self.push(name)
    }
}

/// Whether `path` can stand in a tab-separated, newline-terminated line.
fn printable(path: &[u8]) -> bool {
    !path.iter().any(|&b| b == b'\t' || b == b'\n')
}

/// `n` in decimal, written at the end of `digits`.
fn decimal(mut n: u64, digits: &mut [u8; 20]) -> &[u8] {
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[start..];
        }
    }
}
