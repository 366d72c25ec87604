//! Closed segments are fsynced after their roll, off the append path, and only then does the
//! recovery point pass them.

use super::{append, batch, open, read_all};
use crate::log::LogConfig;

/// Every append of a 10-byte record rolls (segment.ms=1 and a later timestamp each time).
fn rolling_log(dir: &std::path::Path) -> crate::log::Log {
    let config = LogConfig { segment_ms: 1, ..LogConfig::default() };
    let mut log = open(dir, &config);
    for t in 0..4 {
        append(&mut log, &batch(1, 10, 1), 10 * t);
    }
    log
}

#[test]
fn the_recovery_point_passes_rolled_segments_once_they_are_synced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolling_log(dir.path());
    assert_eq!(log.segment_count(), 4);
    assert_eq!(log.recovery_point, 0);

    let rolled = log.rolled_unflushed().expect("handles").expect("three closed segments to flush");
    assert_eq!(rolled.through(), 3, "up to the active segment's base");
    rolled.sync().expect("fsync");
    assert!(log.mark_flushed(&rolled).expect("checkpoint"));
    assert_eq!(log.recovery_point, 3);
    assert!(log.rolled_unflushed().expect("handles").is_none(), "nothing closed is left unflushed");

    // The checkpoint holds it: a crash (drop without close) and reopen keeps every record.
    let before = read_all(&log);
    drop(log);
    let log = open(dir.path(), &LogConfig { segment_ms: 1, ..LogConfig::default() });
    assert_eq!(log.recovery_point, 3);
    assert_eq!(read_all(&log), before);
}

#[test]
fn a_truncation_during_the_sync_keeps_the_recovery_point() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolling_log(dir.path());
    let rolled = log.rolled_unflushed().expect("handles").expect("closed segments");
    rolled.sync().expect("fsync");
    // A follower cuts its log back into the closed segments and appends anew meanwhile: the
    // bytes below the synced base are not the ones synced.
    log.truncate_to(1).expect("truncate");
    for t in 0..3 {
        append(&mut log, &batch(1, 10, 1), 100 + 10 * t);
    }
    assert!(!log.mark_flushed(&rolled).expect("no write"));
    assert_eq!(log.recovery_point, 0);
    let again = log.rolled_unflushed().expect("handles").expect("the new closed segments");
    again.sync().expect("fsync");
    assert!(log.mark_flushed(&again).expect("checkpoint"));
    assert_eq!(log.recovery_point, again.through());
}

#[test]
fn a_full_flush_covers_rolled_segments_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = rolling_log(dir.path());
    let rolled = log.rolled_unflushed().expect("handles").expect("closed segments");
    log.flush().expect("flush");
    assert_eq!(log.recovery_point, 4, "the log end offset");
    assert!(!log.mark_flushed(&rolled).expect("no write"), "a sync that ends behind a full flush changes nothing");
    assert_eq!(log.recovery_point, 4);
}
