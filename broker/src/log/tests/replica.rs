//! A follower's log: the leader's batches appended byte for byte, refused when they do not
//! continue it, and truncation to any offset (straddled batches go, segments after go,
//! indexes rebuilt) that holds across reopening.

use super::{append, batch, headers, open, read_all, small_config};
use crate::log::{LogError, TimestampType};

/// A leader log with `n` batches of 3 records, epochs 0 then 1 from batch `n / 2`.
fn leader_log(dir: &std::path::Path, n: usize) -> crate::log::Log {
    let mut log = open(dir, &small_config());
    for i in 0..n {
        let mut bytes = batch(3, 100, 1_000 + i as i64);
        let epoch = if i < n / 2 { 0 } else { 1 };
        log.append(&mut bytes, epoch, TimestampType::CreateTime, 1_000).expect("append");
    }
    log
}

#[test]
fn a_follower_appends_the_leaders_bytes_and_ends_up_identical() {
    let (ldir, fdir) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let leader = leader_log(ldir.path(), 40);
    let mut follower = open(fdir.path(), &small_config());
    let bytes = read_all(&leader);
    // In two pieces, as two fetches would bring it.
    let split = {
        let hs = headers(&leader);
        let mid = &hs[20];
        let mut pos = 0;
        for h in &hs[..20] {
            pos += h.total_size();
        }
        assert_eq!(mid.base_offset, 60);
        pos
    };
    follower.append_replicated(&bytes[..split], 2_000).expect("first half");
    follower.append_replicated(&bytes[split..], 2_000).expect("second half");
    assert_eq!(read_all(&follower), bytes, "byte for byte");
    assert_eq!((follower.log_end_offset(), follower.latest_leader_epoch()), (120, 1));
    assert!(follower.segment_count() > 1, "it rolled segments as the leader did");
    assert_eq!(follower.epoch_starts().expect("epochs"), vec![(0, 0), (1, 60)]);
}

#[test]
fn replicated_batches_that_do_not_continue_the_log_are_refused() {
    let (ldir, fdir) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let leader = leader_log(ldir.path(), 4);
    let mut follower = open(fdir.path(), &small_config());
    let bytes = read_all(&leader);
    let first = headers(&leader)[0].total_size();
    let err = follower.append_replicated(&bytes[first..], 1).expect_err("a gap");
    assert!(matches!(err, LogError::NonContiguousAppend { expected: 0, found: 3 }), "{err:?}");
    assert_eq!(follower.log_end_offset(), 0, "nothing written");
    let mut tampered = bytes.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    assert!(follower.append_replicated(&tampered, 1).is_err(), "a bad CRC");
    assert_eq!(follower.log_end_offset(), 0, "nothing written");
}

#[test]
fn truncation_cuts_at_batch_boundaries_drops_later_segments_and_survives_reopening() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = leader_log(dir.path(), 40);
    let segments = log.segment_count();
    assert!(segments > 3);
    // Offset 61 is inside the batch [60, 62]: that whole batch goes.
    assert_eq!(log.truncate_to(61).expect("truncate"), 60);
    assert!(log.segment_count() < segments);
    assert_eq!(log.latest_leader_epoch(), 0, "epoch 1 started at 60");
    append(&mut log, &batch(2, 10, 5_000), 5_000);
    assert_eq!(log.log_end_offset(), 62);
    drop(log);
    let log = open(dir.path(), &small_config());
    assert_eq!(log.log_end_offset(), 62, "the truncation and the append after it survive a crash");
    let hs = headers(&log);
    assert_eq!(hs.iter().map(|h| h.base_offset).filter(|o| *o >= 57).collect::<Vec<_>>(), vec![57, 60]);
    // Index lookups still land on the right batch after the rebuild.
    let slice = log.read(30, 1, i64::MAX, true).expect("read").expect("data");
    let bytes = slice.read().expect("pread");
    assert_eq!(crate::log::BatchHeader::parse(&bytes).expect("header").base_offset, 30);
}

#[test]
fn truncating_below_the_log_start_or_fully_starts_an_empty_log_at_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = leader_log(dir.path(), 10);
    log.truncate_fully_and_start_at(500).expect("start over");
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.latest_leader_epoch()), (500, 500, -1));
    drop(log);
    let log = open(dir.path(), &small_config());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (500, 500));
}
