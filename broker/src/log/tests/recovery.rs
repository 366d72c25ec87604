//! Recovery: torn writes, corrupted tails and indexes, leftovers — after a crash and after
//! damage done to a cleanly closed log.

use std::fs::{self, OpenOptions};
use std::path::Path;

use super::super::checkpoint::{self, Checkpoint};
use super::super::segment::{file_name, INDEX_EXT, TIME_INDEX_EXT};
use super::super::{Log, LogConfig, TimestampType};
use super::{append, batch, headers, open, read_all, segment_log_path, small_config};

/// How the log was left before the damage.
#[derive(Clone, Copy, Debug)]
enum Shutdown {
    Crash,
    Clean,
}

/// Writes `count` batches of 3 records into one segment; returns the stored bytes.
fn write_log(dir: &Path, count: usize, shutdown: Shutdown) -> Vec<u8> {
    let mut log = open(dir, &LogConfig::default());
    for i in 0..count {
        append(&mut log, &batch(3, 20 + i, i as i64), 1);
    }
    let stored = read_all(&log);
    match shutdown {
        Shutdown::Crash => drop(log),
        Shutdown::Clean => log.close().expect("close"),
    }
    stored
}

/// Batch boundaries of `stored`: the byte offsets where batches end.
fn batch_ends(stored: &[u8]) -> Vec<usize> {
    super::super::batch::batches(stored).map(|b| b.expect("whole").1.end).collect()
}

fn truncate(path: &Path, len: u64) {
    OpenOptions::new().write(true).open(path).expect("open").set_len(len).expect("truncate");
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = fs::read(path).expect("read");
    bytes[at] ^= 0x40;
    fs::write(path, bytes).expect("write");
}

/// After damage, the log holds exactly the whole valid batches before `valid_len` bytes and
/// takes new appends at the next offset.
fn assert_recovered_to(dir: &Path, stored: &[u8], valid_len: usize, context: &str) {
    let ends = batch_ends(stored);
    let whole = ends.iter().take_while(|end| **end <= valid_len).count();
    let valid = if whole == 0 { 0 } else { ends[whole - 1] };
    let mut log = open(dir, &LogConfig::default());
    assert_eq!(log.log_end_offset(), 3 * whole as i64, "{context}");
    assert_eq!(read_all(&log), stored[..valid], "{context}");
    assert_eq!(append(&mut log, &batch(1, 5, 1), 1).first_offset, 3 * whole as i64, "{context}");
    assert_eq!(fs::metadata(segment_log_path(dir, 0)).expect("stat").len(), (valid + batch(1, 5, 1).len()) as u64);
}

#[test]
fn a_torn_tail_is_cut_back_to_the_last_whole_batch() {
    for shutdown in [Shutdown::Crash, Shutdown::Clean] {
        let template = tempfile::tempdir().expect("tempdir");
        let stored = write_log(template.path(), 20, shutdown);
        let ends = batch_ends(&stored);
        let last_start = ends[ends.len() - 2];
        // Every byte inside the last batch, and a stride through the middle of the log.
        let cuts = (last_start..stored.len()).chain((0..last_start).step_by(37));
        for cut in cuts {
            let dir = tempfile::tempdir().expect("tempdir");
            copy_dir(template.path(), dir.path());
            truncate(&segment_log_path(dir.path(), 0), cut as u64);
            assert_recovered_to(dir.path(), &stored, cut, &format!("{shutdown:?}, cut at {cut}"));
        }
    }
}

#[test]
fn a_corrupt_tail_batch_is_truncated() {
    for shutdown in [Shutdown::Crash, Shutdown::Clean] {
        let template = tempfile::tempdir().expect("tempdir");
        let stored = write_log(template.path(), 10, shutdown);
        let ends = batch_ends(&stored);
        let last_start = ends[ends.len() - 2];
        // Fields: a record byte and the attributes (CRC-covered), baseOffset, batchLength
        // (low and high byte), magic, and the records count.
        let last_size = stored.len() - last_start;
        for field in [last_size - 3, 21, 7, 11, 8, 16, 60] {
            let dir = tempfile::tempdir().expect("tempdir");
            copy_dir(template.path(), dir.path());
            flip_byte(&segment_log_path(dir.path(), 0), last_start + field);
            assert_recovered_to(
                dir.path(),
                &stored,
                last_start,
                &format!("{shutdown:?}, byte {field} of the last batch"),
            );
        }
    }
}

#[test]
fn a_corrupt_batch_in_the_middle_after_a_crash_truncates_there() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stored = write_log(dir.path(), 10, Shutdown::Crash);
    let ends = batch_ends(&stored);
    flip_byte(&segment_log_path(dir.path(), 0), ends[4] + 40);
    assert_recovered_to(dir.path(), &stored, ends[4], "crc of batch 5");
}

#[test]
fn a_leader_epoch_that_goes_backwards_on_disk_is_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    for epoch in [1, 2, 3] {
        log.append(&mut batch(1, 10, 1), epoch, TimestampType::CreateTime, 1).expect("append");
    }
    let stored = read_all(&log);
    drop(log);
    let last_start = batch_ends(&stored)[1];
    let path = segment_log_path(dir.path(), 0);
    let mut bytes = fs::read(&path).expect("read");
    bytes[last_start + 12..last_start + 16].copy_from_slice(&1i32.to_be_bytes());
    fs::write(&path, bytes).expect("write");
    let log = open(dir.path(), &LogConfig::default());
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(log.latest_leader_epoch, 2);
}

#[test]
fn recovery_from_an_early_recovery_point_drops_segments_after_a_truncated_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_bytes: 1000, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    for _ in 0..30 {
        append(&mut log, &batch(1, 100, 1), 1);
    }
    let bases: Vec<i64> = log.segments.keys().copied().collect();
    drop(log);
    checkpoint::write(dir.path(), &Checkpoint::new(0, 0, false)).expect("checkpoint");
    let second = segment_log_path(dir.path(), bases[1]);
    let len = fs::metadata(&second).expect("stat").len();
    truncate(&second, len - 10);
    let log = open(dir.path(), &config);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(log.log_end_offset(), bases[2] - 1);
    assert!(!segment_log_path(dir.path(), bases[2]).exists());
    assert_eq!(headers(&log).len() as i64, bases[2] - 1);
}

#[test]
fn garbage_or_missing_indexes_of_closed_segments_are_rebuilt() {
    for damage in ["garbage", "missing", "too long", "truncated log"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &small_config());
        for i in 0..200 {
            append(&mut log, &batch(2, 30, i), 1);
        }
        let stored = read_all(&log);
        let bases: Vec<i64> = log.segments.keys().copied().collect();
        log.close().expect("close");
        let index = dir.path().join(file_name(bases[1], INDEX_EXT));
        let time_index = dir.path().join(file_name(bases[1], TIME_INDEX_EXT));
        match damage {
            "garbage" => {
                fs::write(&index, vec![0xab; 800]).expect("write");
                fs::write(&time_index, vec![0x11; 120]).expect("write");
            }
            "missing" => fs::remove_file(&time_index).expect("remove"),
            "too long" => OpenOptions::new().write(true).open(&index).expect("open").set_len(4096).expect("extend"),
            _ => truncate(&segment_log_path(dir.path(), bases[1]), 100),
        }
        let mut log = open(dir.path(), &small_config());
        if damage == "truncated log" {
            // A closed segment lost its tail: Kafka's behaviour, a gap in the offsets.
            assert_eq!(log.segment_count(), bases.len(), "later segments are kept");
            assert_eq!(log.log_end_offset(), 400);
        } else {
            assert_eq!(read_all(&log), stored, "{damage}");
            assert_eq!(log.offset_for_timestamp(150).expect("lookup"), Some((300, 150)), "{damage}");
            assert_eq!(log.segments[&bases[1]].check_indexes().expect("check"), None, "{damage}");
        }
        assert_eq!(append(&mut log, &batch(1, 5, 1), 1).first_offset, 400);
    }
}

#[test]
fn leftover_files_are_deleted_and_foreign_files_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    append(&mut log, &batch(1, 5, 1), 1);
    log.close().expect("close");
    for name in ["00000000000000000007.log.deleted", "log.checkpoint.tmp", "x.cleaned"] {
        fs::write(dir.path().join(name), b"x").expect("write");
    }
    fs::write(dir.path().join(file_name(99, INDEX_EXT)), [0u8; 8]).expect("write");
    fs::write(dir.path().join("partition.metadata"), b"topic id").expect("write");
    let log = open(dir.path(), &LogConfig::default());
    assert_eq!(log.log_end_offset(), 1);
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let expected = [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "cleaner.checkpoint",
        "log.checkpoint",
        "partition.metadata",
    ];
    assert_eq!(names, expected);
}

#[test]
fn a_crash_right_after_open_or_roll_recovers_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_bytes: 500, ..LogConfig::default() };
    for round in 0..5 {
        let mut log = Log::open(dir.path(), config.clone()).expect("open");
        assert_eq!(log.log_end_offset(), round * 10);
        for _ in 0..10 {
            append(&mut log, &batch(1, 100, 1), 1);
        }
        if round % 2 == 0 {
            log.flush().expect("flush");
        }
    }
    let log = open(dir.path(), &config);
    assert_eq!(headers(&log).len(), 50);
    assert!(log.segment_count() > 5);
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}
