//! Compaction and crashes: every state a crash can leave (simulated by assembling files from
//! before and after a pass) opens as a consistent log, and recovery accepts the offset gaps of
//! compacted segments while still finding damage in them.

use std::fs;
use std::path::Path;

use super::super::checkpoint::{self, Checkpoint};
use super::super::segment::{file_name, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use super::super::CompactionConfig;
use super::compaction::{config, forced, roll};
use super::keyed::{kv_batch, stored_batches, stored_records, Stored};
use super::{append, open, segment_log_path};

/// Writes a cleanly closed log of several closed segments and an empty active one: 120
/// batches, a third of them updates of four hot keys, the rest of keys written once — so that
/// compaction leaves every segment with batches and gaps between them.
fn write_log(dir: &Path) {
    let mut log = open(dir, &config());
    for i in 0..120 {
        let key = if i % 3 == 0 { format!("hot {}", i % 4) } else { format!("unique {i}") };
        append(&mut log, &kv_batch(&[(&key, Some(&format!("value {i}")))], 1), 1);
    }
    roll(&mut log);
    log.close().expect("close");
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).expect("list") {
        let entry = entry.expect("entry");
        fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
}

fn bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = fs::read_dir(dir)
        .expect("list")
        .filter_map(|e| e.expect("entry").file_name().to_str()?.strip_suffix(".log")?.parse().ok())
        .collect();
    bases.sort_unstable();
    bases
}

/// The records of a copy of `dir` (opening writes to the directory).
fn records_of(dir: &Path) -> Vec<Stored> {
    let copy = tempfile::tempdir().expect("tempdir");
    copy_dir(dir, copy.path());
    stored_records(&open(copy.path(), &config()))
}

/// As a crash leaves it: the checkpoint says unclean, with the recovery point at `recovery_point`.
fn mark_crashed(dir: &Path, recovery_point: i64) {
    checkpoint::write(dir, &Checkpoint::new(0, recovery_point, false)).expect("checkpoint");
}

/// A log before and after a forced pass, both cleanly closed.
struct BeforeAfter {
    before: tempfile::TempDir,
    after: tempfile::TempDir,
    bases: Vec<i64>,
}

fn before_and_after() -> BeforeAfter {
    let before = tempfile::tempdir().expect("tempdir");
    write_log(before.path());
    let after = tempfile::tempdir().expect("tempdir");
    copy_dir(before.path(), after.path());
    let mut log = open(after.path(), &config());
    let stats = forced(&mut log, 10, &CompactionConfig::default());
    assert!(stats.segments_cleaned >= 3, "the scenario needs several rewritten segments");
    log.close().expect("close");
    let bases = bases(before.path());
    assert_eq!(bases, self::bases(after.path()), "compaction keeps every segment");
    BeforeAfter { before, after, bases }
}

#[test]
fn leftover_cleaned_files_are_discarded_and_the_old_segments_kept() {
    let logs = before_and_after();
    let expected = records_of(logs.before.path());
    let dir = tempfile::tempdir().expect("tempdir");
    copy_dir(logs.before.path(), dir.path());
    for &base in &logs.bases[..logs.bases.len() - 1] {
        let cleaned = dir.path().join(format!("{}.cleaned", file_name(base, LOG_EXT)));
        fs::copy(segment_log_path(logs.after.path(), base), cleaned).expect("copy");
    }
    fs::copy(logs.after.path().join("cleaner.checkpoint"), dir.path().join("cleaner.checkpoint")).expect("copy");
    mark_crashed(dir.path(), *logs.bases.last().expect("active"));

    let log = open(dir.path(), &config());
    assert_eq!(stored_records(&log), expected);
    assert_eq!(log.log_end_offset(), 120);
    let leftovers = fs::read_dir(dir.path())
        .expect("list")
        .filter(|e| e.as_ref().expect("entry").file_name().to_string_lossy().ends_with(".cleaned"));
    assert_eq!(leftovers.count(), 0);
}

#[test]
fn a_crash_in_the_middle_of_a_pass_leaves_each_segment_old_or_new() {
    let logs = before_and_after();
    let (old, new) = (records_of(logs.before.path()), records_of(logs.after.path()));
    let closed = &logs.bases[..logs.bases.len() - 1];
    for (k, &swapped) in closed.iter().enumerate() {
        // Segments before `swapped` are done; `swapped` was renamed in but its indexes were not
        // rebuilt yet; later ones are untouched.
        let dir = tempfile::tempdir().expect("tempdir");
        copy_dir(logs.before.path(), dir.path());
        for &base in &closed[..k] {
            for ext in [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT] {
                let name = file_name(base, ext);
                fs::copy(logs.after.path().join(&name), dir.path().join(&name)).expect("copy");
            }
        }
        fs::copy(segment_log_path(logs.after.path(), swapped), segment_log_path(dir.path(), swapped)).expect("copy");
        for ext in [INDEX_EXT, TIME_INDEX_EXT] {
            fs::remove_file(dir.path().join(file_name(swapped, ext))).expect("remove");
        }
        fs::copy(logs.after.path().join("cleaner.checkpoint"), dir.path().join("cleaner.checkpoint")).expect("copy");
        mark_crashed(dir.path(), *logs.bases.last().expect("active"));

        let end_of_swapped = closed.get(k + 1).copied().unwrap_or(i64::MAX);
        let mut expected: Vec<Stored> = new.iter().filter(|r| r.offset < end_of_swapped).cloned().collect();
        expected.extend(old.iter().filter(|r| r.offset >= end_of_swapped).cloned());
        let mut log = open(dir.path(), &config());
        assert_eq!(stored_records(&log), expected, "crash while swapping in segment {swapped}");
        assert_eq!(log.log_end_offset(), 120);
        forced(&mut log, 10, &CompactionConfig::default());
        assert_eq!(stored_records(&log), new, "the next pass finishes the job");
    }
}

#[test]
fn recovery_of_a_compacted_log_does_not_truncate_it() {
    for damage in ["no log.checkpoint", "no indexes", "both", "garbage cleaner.checkpoint"] {
        let logs = before_and_after();
        let expected = records_of(logs.after.path());
        let dir = logs.after.path();
        if damage != "no indexes" {
            fs::remove_file(dir.join("log.checkpoint")).expect("remove");
        }
        if damage == "no indexes" || damage == "both" {
            for &base in &logs.bases {
                for ext in [INDEX_EXT, TIME_INDEX_EXT] {
                    fs::remove_file(dir.join(file_name(base, ext))).expect("remove");
                }
            }
        }
        if damage == "garbage cleaner.checkpoint" {
            fs::write(dir.join("cleaner.checkpoint"), b"\x00garbage").expect("write");
        }
        let log = open(dir, &config());
        assert_eq!(stored_records(&log), expected, "{damage}");
        assert_eq!((log.log_end_offset(), log.segment_count()), (120, logs.bases.len()), "{damage}");
    }
}

#[test]
fn recovery_still_finds_damage_in_a_compacted_segment() {
    for damage in ["crc", "offset going back"] {
        let logs = before_and_after();
        let dir = logs.after.path();
        let first = {
            let log = open(dir, &config());
            let batches = stored_batches(&log);
            log.close().expect("close");
            batches
        };
        let first_segment_batches = first.iter().take_while(|(h, _)| h.base_offset < logs.bases[1]).count();
        assert!(first_segment_batches >= 2, "the first segment keeps several batches");
        let second = first[1].0;
        let position = first[0].0.total_size();
        let path = segment_log_path(dir, logs.bases[0]);
        let mut bytes = fs::read(&path).expect("read");
        match damage {
            "crc" => bytes[position + 40] ^= 0x10,
            _ => bytes[position..position + 8].copy_from_slice(&first[0].0.last_offset().to_be_bytes()),
        }
        fs::write(&path, bytes).expect("write");
        fs::remove_file(dir.join("log.checkpoint")).expect("remove");

        let log = open(dir, &config());
        let kept: Vec<i64> = stored_records(&log).iter().map(|r| r.offset).collect();
        let want: Vec<i64> = first[0].1.iter().map(|r| r.offset).collect();
        assert_eq!(kept, want, "{damage}: cut at the damaged batch at offset {}", second.base_offset);
    }
}
