//! DeleteRecords and retention by time and size.

use super::super::{LogConfig, LogError};
use super::{append, batch, open, read_all, segment_log_path};

const HOUR_MS: i64 = 60 * 60 * 1000;

/// 1000-byte segments of 5 single-record batches (each ~170 bytes).
fn config() -> LogConfig {
    LogConfig { segment_bytes: 1000, retention_ms: -1, ..LogConfig::default() }
}

#[test]
fn retention_bytes_deletes_the_oldest_segments_while_the_rest_stays_above_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { retention_bytes: 2500, ..config() };
    let mut log = open(dir.path(), &config);
    for _ in 0..40 {
        append(&mut log, &batch(1, 100, 1), 1);
    }
    let segments = log.segment_count();
    let deleted = log.enforce_retention(1).expect("retention");
    assert!(deleted > 0);
    assert_eq!(log.segment_count(), segments - deleted);
    let first = log.segments.values().next().expect("segment");
    assert!(log.size_bytes() >= 2500, "never below retention.bytes");
    assert!(log.size_bytes() - first.size() < 2500, "the next deletion would go below retention.bytes");
    assert_eq!(log.log_start_offset(), first.base_offset());
    assert!(!segment_log_path(dir.path(), 0).exists());
    assert_eq!(log.enforce_retention(1).expect("retention"), 0);
}

#[test]
fn retention_ms_deletes_segments_whose_newest_record_is_too_old() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { retention_ms: 10 * HOUR_MS, ..config() };
    let mut log = open(dir.path(), &config);
    // Segments of 5 batches; timestamps one hour apart.
    for hour in 0..20 {
        append(&mut log, &batch(1, 100, hour * HOUR_MS), 1);
    }
    // Segment [0..5) is newest at hour 4, [5..10) at hour 9, ...
    let deleted = log.enforce_retention(14 * HOUR_MS + 1).expect("retention");
    assert_eq!(deleted, 1, "only the segment whose newest record is over 10 hours old");
    assert_eq!(log.log_start_offset(), 5);
    let deleted = log.enforce_retention(30 * HOUR_MS).expect("retention");
    assert_eq!(deleted, 2, "the active segment stays");
    assert_eq!(log.log_start_offset(), 15);
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), Some((15, 15 * HOUR_MS)));
}

#[test]
fn an_idle_active_segment_rolls_after_segment_ms_so_it_can_expire() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_ms: HOUR_MS, retention_ms: HOUR_MS, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    append(&mut log, &batch(1, 10, 0), 0);
    assert_eq!(log.enforce_retention(HOUR_MS / 2).expect("retention"), 0);
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.enforce_retention(3 * HOUR_MS).expect("retention"), 1);
    assert_eq!(log.segment_count(), 1);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (1, 1));
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn delete_records_raises_the_log_start_offset_and_deletes_segments_wholly_below() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    for _ in 0..30 {
        append(&mut log, &batch(1, 100, 1), 1);
    }
    let segments = log.segment_count();
    assert_eq!(log.delete_records_before(12).expect("delete"), 12);
    assert_eq!(log.segment_count(), segments - 2, "segments [0,5) and [5,10) are gone; [10,15) holds 12");
    assert!(matches!(log.read(11, 100, i64::MAX, true), Err(LogError::OffsetOutOfRange { .. })));
    let slice = log.read(12, 1, i64::MAX, true).expect("read").expect("data");
    assert_eq!(slice.position, 2 * batch(1, 100, 1).len() as u64, "starts at the batch of offset 12");
    assert_eq!(log.delete_records_before(3).expect("delete"), 12, "never moves down");
    assert!(matches!(log.delete_records_before(31), Err(LogError::OffsetOutOfRange { .. })));
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), Some((12, 1)), "nothing below the log start");
    assert_eq!(log.delete_records_before(30).expect("delete"), 30);
    assert!(log.read(30, 100, i64::MAX, true).expect("read").is_none());
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), None);
}

#[test]
fn the_log_start_offset_survives_reopening() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config());
        for _ in 0..12 {
            append(&mut log, &batch(1, 100, 1), 1);
        }
        log.delete_records_before(7).expect("delete");
        let expected = read_all(&log);
        if clean {
            log.close().expect("close");
        } else {
            drop(log);
        }
        let log = open(dir.path(), &config());
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (7, 12), "clean: {clean}");
        assert_eq!(read_all(&log), expected);
    }
}

#[test]
fn a_log_emptied_by_delete_records_reopens_at_its_start_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    for _ in 0..3 {
        append(&mut log, &batch(1, 100, 1), 1);
    }
    log.delete_records_before(3).expect("delete");
    drop(log);
    let mut log = open(dir.path(), &config());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (3, 3));
    assert_eq!(append(&mut log, &batch(1, 100, 1), 1).first_offset, 3);
}
