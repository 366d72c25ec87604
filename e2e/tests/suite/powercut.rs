//! Requirement (STYLE.md habit 13, the harness in `e2e/src/powercut.rs`): a simulated power cut
//! leaves every file exactly as long as its writer last fsynced it, so crash tests can find
//! files that are relied on before they are durable.
//!
//! No broker here: a Python process (its `os.fsync`, `os.rename`, `os.unlink` are glibc's)
//! preloads the shim, does the file operations, says `ready` and is SIGKILLed; then the cut.
//! - `unsynced_tails_are_cut_and_never_synced_files_emptied`: fsync, fdatasync, a later
//!   truncation, nested directories; the report's files and totals.
//! - `renames_carry_the_synced_length_and_an_unsynced_temp_renamed_over_a_synced_file_empties_it`:
//!   temp+fsync+rename, the committed.json bug (an unsynced temp renamed over the synced file),
//!   renameat with directory fds, a directory rename, paths through a symlink, an exchange.
//! - `an_unlinked_and_recreated_file_starts_unsynced`.
//! - `a_second_cut_after_a_restart_on_the_same_log_is_exact`.
//! - `concurrent_threads_and_processes_never_interleave_log_lines`.
//! - `rust_std_file_operations_go_through_the_shim`: this test binary re-run as a child with
//!   the shim (`File::sync_all`, `sync_data`, `fs::rename`, `remove_file`, `remove_dir_all`).
//! - `without_a_log_the_shim_only_forwards`.

#![allow(clippy::unwrap_used)]

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use e2e::powercut::{CutReport, FileCut, PowerCut};

/// Helpers every script starts with; `done()` says `ready` and waits for the SIGKILL.
const PRELUDE: &str = r#"
import ctypes, os, sys, threading, time
def write(path, n, sync=False):
    with open(path, "ab") as f:
        f.write(b"x" * n)
        f.flush()
        if sync:
            os.fsync(f.fileno())
def done():
    print("ready", flush=True)
    time.sleep(600)
"#;

/// A temp dir holding the record log and a `data` dir the scripts work in.
struct Fixture {
    _tmp: tempfile::TempDir,
    power: PowerCut,
    data: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::Builder::new().prefix("strom-powercut-").tempdir().unwrap();
        let power = PowerCut::new(tmp.path()).unwrap();
        let data = tmp.path().canonicalize().unwrap().join("data");
        fs::create_dir(&data).unwrap();
        Fixture { _tmp: tmp, power, data }
    }

    fn python(&self, script: &str) -> Command {
        let mut cmd = Command::new("python3");
        // -B: no bytecode caches, whose writes (temp file, rename) would land in the log
        cmd.arg("-B").arg("-c").arg(format!("{PRELUDE}\n{script}")).current_dir(&self.data).envs(self.power.env());
        cmd
    }

    /// Runs `script` until it prints `ready`, then SIGKILLs it.
    fn run_and_kill(&self, script: &str) {
        let mut child = self.python(script).stdout(Stdio::piped()).spawn().expect("spawn python3");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(line.trim(), "ready", "the script failed before its end (its stderr is above)");
    }

    fn cut(&self) -> CutReport {
        self.power.cut(&[&self.data]).unwrap()
    }

    fn len(&self, name: &str) -> u64 {
        fs::metadata(self.data.join(name)).unwrap_or_else(|e| panic!("stat {name}: {e}")).len()
    }

    fn assert_lens(&self, expected: &[(&str, u64)]) {
        let actual: Vec<(&str, u64)> = expected.iter().map(|&(name, _)| (name, self.len(name))).collect();
        assert_eq!(actual, expected);
    }

    fn shortened(&self, name: &str, before: u64, after: u64) -> FileCut {
        FileCut { path: self.data.join(name), len_before: before, len_after: after }
    }

    fn log(&self) -> String {
        fs::read_to_string(self.power.log_path()).unwrap()
    }
}

#[test]
fn unsynced_tails_are_cut_and_never_synced_files_emptied() {
    let fx = Fixture::new();
    fx.run_and_kill(
        r#"
write("a", 100, sync=True); write("a", 50)
write("b", 30)
with open("f", "wb") as f:
    f.write(b"x" * 80); f.flush(); os.fdatasync(f.fileno()); f.write(b"y" * 20)
write("t", 50, sync=True); os.truncate("t", 20)
open("empty", "wb").close()
os.makedirs("deep/er"); write("deep/er/g", 12, sync=True); write("deep/er/g", 3)
done()
"#,
    );
    let report = fx.cut();
    fx.assert_lens(&[("a", 100), ("b", 0), ("f", 80), ("t", 20), ("empty", 0), ("deep/er/g", 12)]);
    let expected = CutReport {
        files: vec![
            fx.shortened("a", 150, 100),
            fx.shortened("b", 30, 0),
            fx.shortened("deep/er/g", 15, 12),
            fx.shortened("f", 100, 80),
        ],
        bytes_cut: 50 + 30 + 3 + 20,
        zeroed: 1,
    };
    assert_eq!(report, expected);
    assert!(fx.power.log_path().metadata().unwrap().len() > 0, "the log, in the cut's parent dir, is spared");
}

#[test]
fn renames_carry_the_synced_length_and_an_unsynced_temp_renamed_over_a_synced_file_empties_it() {
    let fx = Fixture::new();
    fx.run_and_kill(
        r#"
write("c.tmp", 40, sync=True); os.rename("c.tmp", "c"); write("c", 10)
write("committed.json", 20, sync=True)
write("committed.json.tmp", 25); os.replace("committed.json.tmp", "committed.json")
here = os.open(".", os.O_RDONLY)
write("g.tmp", 33, sync=True); os.rename("g.tmp", "g", src_dir_fd=here, dst_dir_fd=here)
os.fsync(here)
os.mkdir("sub"); write("sub/h", 12, sync=True); write("sub/h", 8); os.rename("sub", "moved")
os.mkdir("real"); os.symlink("real", "link")
write("link/j.tmp", 7, sync=True); os.rename("link/j.tmp", os.path.abspath("link/j"))
write("k", 9, sync=True); write("k.new", 4, sync=True); os.rename("k.new", "k"); write("k", 2)
write("x", 11, sync=True); write("y", 22, sync=True); write("y", 1)
assert ctypes.CDLL(None, use_errno=True).renameat2(-100, b"x", -100, b"y", 2) == 0  # RENAME_EXCHANGE
done()
"#,
    );
    let report = fx.cut();
    fx.assert_lens(&[
        ("c", 40),
        ("committed.json", 0),
        ("g", 33),
        ("moved/h", 12),
        ("real/j", 7),
        ("k", 4),
        ("x", 22),
        ("y", 11),
    ]);
    assert_eq!(report.file(&fx.data.join("committed.json")), Some(&fx.shortened("committed.json", 25, 0)));
    assert_eq!(report.zeroed, 1);
    assert!(fx.log().contains(&format!("D\t{}\n", fx.data.display())), "a directory fsync is recorded");
}

#[test]
fn an_unlinked_and_recreated_file_starts_unsynced() {
    let fx = Fixture::new();
    fx.run_and_kill(
        r#"
write("d", 60, sync=True); os.unlink("d"); write("d", 70)
write("e", 10, sync=True); os.unlink("e"); write("e", 15, sync=True); write("e", 5)
write("gone", 5, sync=True); os.unlink("gone")
done()
"#,
    );
    let report = fx.cut();
    fx.assert_lens(&[("d", 0), ("e", 15)]);
    assert!(!fx.data.join("gone").exists());
    assert_eq!(report.files, [fx.shortened("d", 70, 0), fx.shortened("e", 20, 15)]);
}

#[test]
fn a_second_cut_after_a_restart_on_the_same_log_is_exact() {
    let fx = Fixture::new();
    fx.run_and_kill(r#"write("a", 100, sync=True); write("a", 50); write("b", 30); done()"#);
    let first = fx.cut();
    fx.assert_lens(&[("a", 100), ("b", 0)]);
    assert_eq!(first.bytes_cut, 80);

    // The restart: a's 100 bytes survived the cut, so they are durable without a new fsync.
    fx.run_and_kill(r#"write("a", 10); write("b", 5, sync=True); write("b", 3); write("n", 20); done()"#);
    let second = fx.cut();
    fx.assert_lens(&[("a", 100), ("b", 5), ("n", 0)]);
    assert_eq!(second.files, [fx.shortened("a", 110, 100), fx.shortened("b", 8, 5), fx.shortened("n", 20, 0)]);

    assert_eq!(fx.cut(), CutReport::default(), "a cut with nothing written since changes nothing");
}

#[test]
fn concurrent_threads_and_processes_never_interleave_log_lines() {
    const PROCESSES: usize = 2;
    const THREADS: usize = 4;
    const SYNCS: u64 = 25;
    let fx = Fixture::new();
    // Long names make long lines, so an interleaved write would show.
    let script = format!(
        r#"
def work(t):
    with open(f"{{sys.argv[1]}}-{{t}}-" + "n" * 200, "ab") as f:
        for _ in range({SYNCS}):
            f.write(b"x"); f.flush(); os.fsync(f.fileno())
threads = [threading.Thread(target=work, args=(t,)) for t in range({THREADS})]
for t in threads: t.start()
for t in threads: t.join()
"#
    );
    let children: Vec<_> =
        (0..PROCESSES).map(|p| fx.python(&script).arg(format!("p{p}")).spawn().expect("spawn python3")).collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }

    let log = fx.log();
    let mut lengths: Vec<(String, u64)> = log
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            assert!(matches!(fields.as_slice(), ["S", _, path] if path.ends_with(&"n".repeat(200))), "{line:?}");
            (fields[2].to_owned(), fields[1].parse().unwrap())
        })
        .collect();
    assert_eq!(lengths.len(), PROCESSES * THREADS * SYNCS as usize);
    lengths.sort();
    for per_file in lengths.chunks(SYNCS as usize) {
        let synced: Vec<u64> = per_file.iter().map(|(_, len)| *len).collect();
        assert_eq!(synced, (1..=SYNCS).collect::<Vec<_>>(), "every sync of {} once", per_file[0].0);
    }
    assert_eq!(fx.cut(), CutReport::default(), "every byte was synced");
}

/// Where the child half of `rust_std_file_operations_go_through_the_shim` works.
const CHILD_DIR: &str = "STROM_POWERCUT_TEST_CHILD_DIR";

#[test]
fn rust_std_file_operations_go_through_the_shim() {
    let fx = Fixture::new();
    let child = e2e::process::test_path(module_path!(), "rust_std_child");
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", &child, "--nocapture", "--test-threads=1"])
        .env(CHILD_DIR, &fx.data)
        .envs(fx.power.env())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let d = fx.data.display();
    let expected = [
        format!("S\t10\t{d}/a\n"),
        format!("S\t7\t{d}/b\n"),
        format!("R\t{d}/b\t{d}/c\n"),
        format!("U\t{d}/a\n"),
        format!("U\t{d}/sub/f\n"),
        format!("U\t{d}/sub\n"),
    ];
    let log = fx.log();
    assert_eq!(log, expected.concat());
}

/// The child half of `rust_std_file_operations_go_through_the_shim`, run by it with the shim.
#[test]
#[ignore = "run as a child process, with the shim preloaded, by rust_std_file_operations_go_through_the_shim"]
fn rust_std_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR).map(PathBuf::from) else { return };
    let mut a = File::create(dir.join("a")).unwrap();
    a.write_all(&[0; 10]).unwrap();
    a.sync_all().unwrap();
    a.write_all(&[0; 5]).unwrap();
    let mut b = File::create(dir.join("b")).unwrap();
    b.write_all(&[0; 7]).unwrap();
    b.sync_data().unwrap();
    fs::rename(dir.join("b"), dir.join("c")).unwrap();
    fs::remove_file(dir.join("a")).unwrap();
    fs::create_dir(dir.join("sub")).unwrap();
    fs::write(dir.join("sub/f"), b"f").unwrap();
    fs::remove_dir_all(dir.join("sub")).unwrap();
}

#[test]
fn without_a_log_the_shim_only_forwards() {
    let fx = Fixture::new();
    let mut cmd =
        fx.python(r#"write("a", 3, sync=True); os.rename("a", "b"); os.unlink("b"); write("c", 4, sync=True)"#);
    cmd.env_remove("STROM_POWERCUT_LOG");
    assert!(cmd.status().unwrap().success());
    assert_eq!(fx.len("c"), 4);
    assert_eq!(fx.log(), "", "nothing recorded");
    assert!(!fx.data.join("b").exists());
}
