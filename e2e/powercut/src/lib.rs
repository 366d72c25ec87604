//! `libstrom_powercut.so`: an `LD_PRELOAD` shim recording what a process made durable, so the
//! e2e harness (`e2e/src/powercut.rs`) can simulate a power cut after SIGKILLing it: every file
//! cut back to what was last fsynced.
//!
//! With `STROM_POWERCUT_LOG=<path>` set, each successful call below appends one line to that
//! file (without it the shim only forwards the calls):
//!
//! | call                                 | line                          |
//! |--------------------------------------|-------------------------------|
//! | `fsync` / `fdatasync` of a file      | `S\t<length>\t<path>\n`       |
//! | `fsync` / `fdatasync` of a directory | `D\t<path>\n`                 |
//! | `rename`, `renameat`, `renameat2`    | `R\t<from>\t<to>\n`           |
//! | `renameat2(.., RENAME_EXCHANGE)`     | `X\t<a>\t<b>\n`               |
//! | `unlink`, `unlinkat`                 | `U\t<path>\n`                 |
//!
//! Paths are absolute with symlinks resolved; an operation on a path containing a tab or a
//! newline is not recorded. The length of an `S` line is the file's size just *before* the
//! sync: bytes a concurrent thread appends during the sync may or may not be durable, so the
//! record is a lower bound of what the sync covered.
//!
//! Rust's `File::sync_all` / `sync_data`, `fs::rename` and `fs::remove_file` call glibc's
//! `fsync`, `fdatasync`, `rename` and `unlink` (`remove_dir_all` calls `unlinkat`), which a
//! dynamically linked binary imports, so the shim sees them. Raw syscalls (rustix's default
//! backend, `syscall(2)`) bypass it.
//!
//! With `STROM_SHIM_SOURCE_IP=127.0.0.<n>` set, `connect` binds unbound IPv4 sockets bound for
//! a loopback address to that source address first ([`source`]): how the e2e harness cuts one
//! broker off from the others in both directions.
//!
//! With `STROM_SHIM_FAIL_SYNC=<path>` set, `fsync` and `fdatasync` of regular files fail with
//! `EIO` while a file exists at `<path>` ([`fail`]): a disk that fails its flushes.
//!
//! Modules: [`real`], the glibc definitions the hooks forward to; [`line`], a record line
//! built on the stack, paths resolved; [`record`], the log's descriptor and the one-write append;
//! [`source`], the per-process loopback source address; [`fail`], failing syncs on demand.

// This crate is nothing but a C ABI boundary: the exported hooks are `extern "C"` functions
// taking raw pointers, and they call libc. Every unsafe block says why it is sound.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

mod fail;
mod line;
mod real;
mod record;
mod source;

use libc::{c_char, c_int, c_uint};

use line::Line;

/// Runs `f` leaving `errno` as it found it: the bookkeeping around a hooked call must not
/// change what the caller reads from `errno` afterwards.
fn keeping_errno<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: __errno_location returns this thread's errno, valid for the thread's life.
    let errno = unsafe { libc::__errno_location() };
    // SAFETY: as above.
    let saved = unsafe { *errno };
    let result = f();
    // SAFETY: as above.
    unsafe { *errno = saved };
    result
}

/// The `-1`/`ENOSYS` a hook returns when no later object defines the function.
fn missing() -> c_int {
    // SAFETY: __errno_location returns this thread's errno.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    -1
}

/// The `S` or `D` line for descriptor `fd`, `None` for anything else (a pipe, an unlinked file).
fn sync_line(fd: c_int) -> Option<Line> {
    // SAFETY: `stat` is plain data; fstat fills it or fails.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `stat` is a valid, writable struct stat.
    if unsafe { libc::fstat(fd, &mut stat) } != 0 {
        return None;
    }
    let mut line = match stat.st_mode & libc::S_IFMT {
        libc::S_IFREG if stat.st_nlink > 0 => {
            let mut line = Line::new(b'S');
            line.push_tab()?;
            line.push_u64(u64::try_from(stat.st_size).ok()?)?;
            line
        }
        libc::S_IFDIR => Line::new(b'D'),
        _ => return None,
    };
    line.push_tab()?;
    line.push_fd_path(fd)?;
    line.end()?;
    Some(line)
}

/// A sync: the line is built before `call` (its length a lower bound) and written after it
/// succeeded.
fn synced(fd: c_int, call: impl FnOnce() -> c_int) -> c_int {
    if keeping_errno(|| fail::sync_fails(fd)) {
        return fail::failed();
    }
    let Some(log) = keeping_errno(record::log_fd) else { return call() };
    let line = keeping_errno(|| sync_line(fd));
    let rc = call();
    if rc == 0 {
        if let Some(line) = line {
            keeping_errno(|| record::append(log, &line));
        }
    }
    rc
}

/// A line naming one or two paths. Built before `call`, while the parent directories named are
/// sure to exist, and written after it succeeded.
///
/// # Safety
/// Each path is null or NUL-terminated.
unsafe fn paths_changed(tag: u8, paths: &[(c_int, *const c_char)], call: impl FnOnce() -> c_int) -> c_int {
    let Some(log) = keeping_errno(record::log_fd) else { return call() };
    let line = keeping_errno(|| {
        let mut line = Line::new(tag);
        for &(dirfd, path) in paths {
            line.push_tab()?;
            // SAFETY: the caller's promise.
            unsafe { line.push_resolved(dirfd, path) }?;
        }
        line.end()?;
        Some(line)
    });
    let rc = call();
    if rc == 0 {
        if let Some(line) = line {
            keeping_errno(|| record::append(log, &line));
        }
    }
    rc
}

/// # Safety
/// As `fsync(2)`.
#[no_mangle]
pub unsafe extern "C" fn fsync(fd: c_int) -> c_int {
    let Some(real) = real::fsync() else { return missing() };
    // SAFETY: forwarding the caller's arguments unchanged.
    synced(fd, || unsafe { real(fd) })
}

/// # Safety
/// As `fdatasync(2)`, which also makes a changed file size durable.
#[no_mangle]
pub unsafe extern "C" fn fdatasync(fd: c_int) -> c_int {
    let Some(real) = real::fdatasync() else { return missing() };
    // SAFETY: forwarding the caller's arguments unchanged.
    synced(fd, || unsafe { real(fd) })
}

/// # Safety
/// As `rename(2)`.
#[no_mangle]
pub unsafe extern "C" fn rename(from: *const c_char, to: *const c_char) -> c_int {
    let Some(real) = real::rename() else { return missing() };
    // SAFETY: the caller passes C strings, as rename(2) requires; forwarded unchanged.
    unsafe { paths_changed(b'R', &[(libc::AT_FDCWD, from), (libc::AT_FDCWD, to)], || real(from, to)) }
}

/// # Safety
/// As `renameat(2)`.
#[no_mangle]
pub unsafe extern "C" fn renameat(from_dir: c_int, from: *const c_char, to_dir: c_int, to: *const c_char) -> c_int {
    let Some(real) = real::renameat() else { return missing() };
    // SAFETY: the caller passes C strings, as renameat(2) requires; forwarded unchanged.
    unsafe { paths_changed(b'R', &[(from_dir, from), (to_dir, to)], || real(from_dir, from, to_dir, to)) }
}

/// # Safety
/// As `renameat2(2)`. `RENAME_EXCHANGE` swaps the two paths (an `X` line); `RENAME_NOREPLACE`
/// is an ordinary rename when it succeeds.
#[no_mangle]
pub unsafe extern "C" fn renameat2(
    from_dir: c_int,
    from: *const c_char,
    to_dir: c_int,
    to: *const c_char,
    flags: c_uint,
) -> c_int {
    let Some(real) = real::renameat2() else { return missing() };
    let tag = if flags & libc::RENAME_EXCHANGE != 0 { b'X' } else { b'R' };
    // SAFETY: the caller passes C strings, as renameat2(2) requires; forwarded unchanged.
    unsafe { paths_changed(tag, &[(from_dir, from), (to_dir, to)], || real(from_dir, from, to_dir, to, flags)) }
}

/// # Safety
/// As `unlink(2)`.
#[no_mangle]
pub unsafe extern "C" fn unlink(path: *const c_char) -> c_int {
    let Some(real) = real::unlink() else { return missing() };
    // SAFETY: the caller passes a C string, as unlink(2) requires; forwarded unchanged.
    unsafe { paths_changed(b'U', &[(libc::AT_FDCWD, path)], || real(path)) }
}

/// # Safety
/// As `unlinkat(2)`; with `AT_REMOVEDIR` it removes an (empty) directory, recorded the same.
#[no_mangle]
pub unsafe extern "C" fn unlinkat(dir: c_int, path: *const c_char, flags: c_int) -> c_int {
    let Some(real) = real::unlinkat() else { return missing() };
    // SAFETY: the caller passes a C string, as unlinkat(2) requires; forwarded unchanged.
    unsafe { paths_changed(b'U', &[(dir, path)], || real(dir, path, flags)) }
}

/// `connect(2)`, after binding the socket to `STROM_SHIM_SOURCE_IP` when set ([`source`]).
///
/// # Safety
/// As connect(2): `addr` points to `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int {
    // SAFETY: the caller's guarantee is connect(2)'s, which bind_before_connect needs.
    keeping_errno(|| unsafe { source::bind_before_connect(fd, addr, len) });
    match real::connect() {
        // SAFETY: glibc's connect with the caller's arguments.
        Some(connect) => unsafe { connect(fd, addr, len) },
        None => missing(),
    }
}
