//! A simulated power cut: every file cut back to what its writer last fsynced.
//!
//! The processes under test run with [`PowerCut::env`] in their environment, which preloads
//! `libstrom_powercut.so` (the `e2e/powercut` crate). The shim appends a line to a record log
//! for each successful `fsync`/`fdatasync` (the file's length then), `rename` and `unlink`
//! (format in `e2e/powercut/src/lib.rs`). After the test SIGKILLs the processes,
//! [`PowerCut::cut`] replays the log into "path → durable length" and truncates every regular
//! file under the given roots to that length, and a file with no record to 0 bytes. Restarted
//! with the same environment, the processes go on appending to the same log, so a second cut
//! later is as exact as the first.
//!
//! The model, and what it leaves out:
//! - Only lengths are modelled. Bytes inside the fsynced length are assumed intact, including
//!   ones overwritten in place after the sync, and a truncation (`ftruncate`, `O_TRUNC`) is
//!   assumed durable at once: a synced file truncated and rewritten without a sync keeps
//!   `min(new length, synced length)` bytes of the *new* content, where a real cut could also
//!   leave the old content or nothing. Torn sectors inside a synced length are not simulated.
//! - `msync` is not tracked: a memory-mapped file that is only msynced counts as never synced
//!   unless it is also fsynced (the broker's index flush does both, so it is recorded).
//! - Directory entries are assumed durable as soon as the call returns: a file created (or
//!   renamed, or unlinked) in a directory that was never fsynced afterwards is treated as
//!   created (renamed, unlinked); it is only cut to its synced length. The shim records
//!   directory fsyncs (`D` lines) for a stricter mode later; this one ignores them.
//! - Not seen by the shim: hard links, `O_TMPFILE`, `O_SYNC`/`O_DSYNC` writes,
//!   `sync_file_range`, `syncfs`, `sync`, and raw syscalls that bypass glibc. A file written
//!   only through those counts as never synced.
//! - A path containing a tab or a newline is never recorded, so its file is always emptied.
//! - A rename racing an fsync of the same file in another thread may be logged in the other
//!   order; the replay then errs toward the older, shorter length.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The shim's file name, as cargo builds it.
pub const SHIM_FILE: &str = "libstrom_powercut.so";
/// The record log's file name inside the directory given to [`PowerCut::new`].
pub const LOG_FILE: &str = "powercut.log";

/// One record log and the shim that writes it.
#[derive(Debug, Clone)]
pub struct PowerCut {
    shim: PathBuf,
    log: PathBuf,
}

/// What a [`PowerCut::cut`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Every file whose length changed, in path order.
    pub files: Vec<FileCut>,
    /// Bytes removed, all files together.
    pub bytes_cut: u64,
    /// How many of [`files`](Self::files) were emptied (never synced as far as the log knows).
    pub zeroed: usize,
}

/// One file a cut shortened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCut {
    pub path: PathBuf,
    pub len_before: u64,
    pub len_after: u64,
}

impl CutReport {
    /// The cut of the file at `path` (absolute, symlinks resolved), if it was shortened.
    pub fn file(&self, path: &Path) -> Option<&FileCut> {
        self.files.iter().find(|f| f.path == path)
    }
}

impl PowerCut {
    /// A record log at `dir`/[`LOG_FILE`] (created, `dir` too, if missing; an existing log is
    /// kept and appended to), and the shim found next to the `strom` binary: in the directory
    /// of `$STROM_BIN` when set, else in `target/release` (`$CARGO_TARGET_DIR` first) — the
    /// directory [`crate::broker::strom_bin`] takes the release broker from.
    pub fn new(dir: &Path) -> Result<PowerCut> {
        let shim = shim_path()?;
        fs::create_dir_all(dir).with_context(|| format!("create power-cut dir {}", dir.display()))?;
        let dir = dir.canonicalize().with_context(|| format!("resolve power-cut dir {}", dir.display()))?;
        let log = dir.join(LOG_FILE);
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("create power-cut log {}", log.display()))?;
        for path in [&shim, &log] {
            // LD_PRELOAD splits on spaces and colons; the log path is read by the shim verbatim.
            if path.to_str().is_none_or(|p| p.contains([' ', ':', '\t', '\n'])) {
                bail!("power-cut path {} must be UTF-8 without spaces or colons", path.display());
            }
        }
        Ok(PowerCut { shim, log })
    }

    /// The record log.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The environment a process under test needs: `LD_PRELOAD` and `STROM_POWERCUT_LOG`.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".to_owned(), self.shim.to_string_lossy().into_owned()),
            ("STROM_POWERCUT_LOG".to_owned(), self.log.to_string_lossy().into_owned()),
        ]
    }

    /// Cuts the power: every regular file under `roots` (recursively, symlinks not followed,
    /// the log itself spared) is truncated to its last synced length, or to 0 bytes without
    /// one. Every process that writes there must already be dead (SIGKILLed): a live one
    /// would go on writing past the cut.
    ///
    /// Afterwards the log records every file's new length as synced — what survived a power
    /// cut is on disk — so the processes can be restarted on the same log and cut again.
    pub fn cut(&self, roots: &[&Path]) -> Result<CutReport> {
        let log = fs::read(&self.log).with_context(|| format!("read power-cut log {}", self.log.display()))?;
        let synced = replay(&log).with_context(|| format!("replay power-cut log {}", self.log.display()))?;
        let mut files = Vec::new();
        for root in roots {
            let root = root.canonicalize().with_context(|| format!("resolve cut root {}", root.display()))?;
            walk(&root, &mut files)?;
        }
        files.retain(|(path, _)| *path != self.log);
        files.sort();
        files.dedup();

        let mut report = CutReport::default();
        let mut survivors = Vec::new();
        for (path, len) in files {
            let keep = synced.get(&path).map_or(0, |&synced| synced.min(len));
            if keep < len {
                let file = OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .with_context(|| format!("open {} to cut it", path.display()))?;
                file.set_len(keep).with_context(|| format!("cut {} to {keep} bytes", path.display()))?;
                report.bytes_cut += len - keep;
                report.zeroed += usize::from(keep == 0);
                report.files.push(FileCut { path: path.clone(), len_before: len, len_after: keep });
            }
            survivors.push((path, keep));
        }
        self.record_survivors(&survivors)?;
        Ok(report)
    }

    /// Appends an `S` line for each file that survived a cut, at its new length.
    fn record_survivors(&self, files: &[(PathBuf, u64)]) -> Result<()> {
        let mut lines = Vec::new();
        for (path, len) in files {
            let path = path.as_os_str().as_bytes();
            if !path.contains(&b'\t') && !path.contains(&b'\n') {
                lines.extend_from_slice(format!("S\t{len}\t").as_bytes());
                lines.extend_from_slice(path);
                lines.push(b'\n');
            }
        }
        OpenOptions::new()
            .append(true)
            .open(&self.log)
            .and_then(|mut log| log.write_all(&lines))
            .with_context(|| format!("record the cut lengths in {}", self.log.display()))
    }
}

/// Where the shim is: next to `$STROM_BIN`, else in the release target directory.
pub fn shim_path() -> Result<PathBuf> {
    let dir = if let Some(bin) = std::env::var_os("STROM_BIN") {
        let bin = PathBuf::from(bin);
        bin.parent().map(Path::to_path_buf).unwrap_or_default()
    } else if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        PathBuf::from(target).join("release")
    } else {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("."));
        workspace.join("target").join("release")
    };
    let shim = dir.join(SHIM_FILE);
    if !shim.is_file() {
        bail!("no power-cut shim at {}: build it first: cargo build --release -p strom-powercut", shim.display());
    }
    shim.canonicalize().with_context(|| format!("resolve {}", shim.display()))
}

/// Every regular file under `dir`, with its length; symlinks are not followed.
fn walk(dir: &Path, files: &mut Vec<(PathBuf, u64)>) -> Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("list {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("list {}", dir.display()))?;
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).with_context(|| format!("stat {}", path.display()))?;
        if meta.is_dir() {
            walk(&path, files)?;
        } else if meta.is_file() {
            files.push((path, meta.len()));
        }
    }
    Ok(())
}

/// The durable length of each path the log names, replaying its lines in order: `S` sets a
/// length; `R` moves the lengths of `from` (and of everything under it, for a directory) to
/// `to`, replacing what `to` had, so a rename of a never-synced file leaves `to` never synced;
/// `X` swaps two paths; `U` forgets a path. `D` lines are not used yet.
pub fn replay(log: &[u8]) -> Result<BTreeMap<PathBuf, u64>> {
    let mut synced = BTreeMap::new();
    let Some(body) = log.strip_suffix(b"\n") else {
        if log.is_empty() {
            return Ok(synced);
        }
        bail!("the last line is torn (no newline)");
    };
    for (number, line) in body.split(|&b| b == b'\n').enumerate() {
        let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
        let bad = || format!("line {}: {:?}", number + 1, String::from_utf8_lossy(line));
        match fields.as_slice() {
            [b"S", len, path] => {
                let len = std::str::from_utf8(len).ok().and_then(|l| l.parse().ok()).with_context(bad)?;
                synced.insert(absolute(path).with_context(bad)?, len);
            }
            [b"D", path] => {
                absolute(path).with_context(bad)?;
            }
            [b"R", from, to] => {
                let (from, to) = (absolute(from).with_context(bad)?, absolute(to).with_context(bad)?);
                let moved = take_tree(&mut synced, &from);
                take_tree(&mut synced, &to);
                put_tree(&mut synced, &to, moved);
            }
            [b"X", a, b] => {
                let (a, b) = (absolute(a).with_context(bad)?, absolute(b).with_context(bad)?);
                let (under_a, under_b) = (take_tree(&mut synced, &a), take_tree(&mut synced, &b));
                put_tree(&mut synced, &b, under_a);
                put_tree(&mut synced, &a, under_b);
            }
            [b"U", path] => {
                take_tree(&mut synced, &absolute(path).with_context(bad)?);
            }
            _ => bail!("unknown record {}", bad()),
        }
    }
    Ok(synced)
}

fn absolute(path: &[u8]) -> Option<PathBuf> {
    let path = Path::new(OsStr::from_bytes(path));
    path.is_absolute().then(|| path.to_path_buf())
}

/// Removes `root` and every path under it, returning them relative to `root`.
fn take_tree(synced: &mut BTreeMap<PathBuf, u64>, root: &Path) -> Vec<(PathBuf, u64)> {
    // Paths order by component, so `root`'s descendants directly follow it.
    let keys: Vec<PathBuf> = synced
        .range(root.to_path_buf()..)
        .map(|(path, _)| path)
        .take_while(|path| path.starts_with(root))
        .cloned()
        .collect();
    keys.into_iter()
        .filter_map(|path| {
            let len = synced.remove(&path)?;
            Some((path.strip_prefix(root).ok()?.to_path_buf(), len))
        })
        .collect()
}

/// Puts paths [`take_tree`] took back under `root`.
fn put_tree(synced: &mut BTreeMap<PathBuf, u64>, root: &Path, tree: Vec<(PathBuf, u64)>) {
    for (relative, len) in tree {
        let path = if relative.as_os_str().is_empty() { root.to_path_buf() } else { root.join(relative) };
        synced.insert(path, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lengths(log: &str) -> Vec<(String, u64)> {
        let synced = replay(log.as_bytes()).expect("replay");
        synced.into_iter().map(|(path, len)| (path.display().to_string(), len)).collect()
    }

    fn entry(path: &str, len: u64) -> (String, u64) {
        (path.to_owned(), len)
    }

    #[test]
    fn the_last_sync_of_a_path_wins() {
        assert_eq!(lengths("S\t10\t/d/a\nS\t30\t/d/a\nS\t5\t/d/b\nD\t/d\n"), [entry("/d/a", 30), entry("/d/b", 5)]);
    }

    #[test]
    fn a_rename_carries_the_synced_length_and_replaces_the_target() {
        assert_eq!(lengths("S\t10\t/d/t\nS\t20\t/d/f\nR\t/d/t\t/d/f\n"), [entry("/d/f", 10)]);
    }

    #[test]
    fn a_never_synced_file_renamed_over_a_synced_one_leaves_it_never_synced() {
        assert_eq!(lengths("S\t20\t/d/f\nR\t/d/t\t/d/f\n"), []);
    }

    #[test]
    fn a_directory_rename_moves_everything_under_it_and_nothing_beside_it() {
        let log = "S\t1\t/d/sub/a\nS\t2\t/d/sub/x/b\nS\t3\t/d/sub-other\nS\t4\t/d/subb\nR\t/d/sub\t/d/new\n";
        assert_eq!(
            lengths(log),
            [entry("/d/new/a", 1), entry("/d/new/x/b", 2), entry("/d/sub-other", 3), entry("/d/subb", 4)]
        );
    }

    #[test]
    fn an_exchange_swaps_and_an_unlink_forgets() {
        assert_eq!(lengths("S\t1\t/a\nS\t2\t/b\nX\t/a\t/b\nU\t/a\n"), [entry("/b", 1)]);
    }

    #[test]
    fn a_torn_or_unknown_line_is_an_error() {
        assert!(replay(b"S\t1\t/a\nS\t2").is_err());
        assert!(replay(b"Q\t/a\n").is_err());
        assert!(replay(b"S\tten\t/a\n").is_err());
        assert!(replay(b"S\t1\trelative\n").is_err());
    }
}
