//! Appends, reads, rolls, reopening and the timestamp lookups of a healthy log.

use kafka_protocol::records::Compression;

use super::super::batch::{batches, verify_crc, BatchHeader};
use super::super::{LogConfig, LogError, TimestampType};
use super::{append, batch, encode, headers, open, read_all, small_config};

#[test]
fn append_assigns_offsets_and_read_returns_the_stamped_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    let mut expected = Vec::new();
    for (i, records) in [1usize, 5, 3].into_iter().enumerate() {
        let mut bytes = batch(records, 20, 1000 + i as i64);
        let info = log.append(&mut bytes, 7, TimestampType::CreateTime, 50).expect("append");
        assert_eq!(info.last_offset - info.first_offset + 1, records as i64);
        assert_eq!((info.max_timestamp, info.log_append_time), (1000 + i as i64, -1));
        expected.extend_from_slice(&bytes);
    }
    assert_eq!(log.log_end_offset(), 9);
    assert_eq!(read_all(&log), expected);
    let all = headers(&log);
    assert_eq!(all.iter().map(|h| h.base_offset).collect::<Vec<_>>(), vec![0, 1, 6]);
    assert!(all.iter().all(|h| h.partition_leader_epoch == 7));
    for item in batches(&expected) {
        let (_, range) = item.expect("whole batch");
        verify_crc(&expected[range]).expect("the broker's rewrites keep the CRC valid");
    }
    assert_eq!(log.size_bytes(), expected.len() as u64);
}

#[test]
fn read_starts_at_the_batch_holding_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    for _ in 0..50 {
        append(&mut log, &batch(4, 30, 1), 1);
    }
    for offset in 0..200 {
        let slice = log.read(offset, 1, i64::MAX, true).expect("read").expect("data");
        let first = BatchHeader::parse(&slice.read().expect("pread")).expect("header");
        assert_eq!(first.base_offset, offset / 4 * 4, "offset {offset}");
    }
}

#[test]
fn read_honours_max_bytes_with_whole_batches_and_min_one_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    let one = batch(1, 100, 1);
    for _ in 0..10 {
        append(&mut log, &one, 1);
    }
    let size = one.len();
    let slice = log.read(0, size * 3 + size / 2, i64::MAX, false).expect("read").expect("data");
    assert_eq!(slice.len, size * 3, "three whole batches, never a partial fourth");
    let slice = log.read(2, size * 3, i64::MAX, false).expect("read").expect("data");
    assert_eq!((slice.position, slice.len), (2 * size as u64, 3 * size));
    assert!(log.read(0, size - 1, i64::MAX, false).expect("read").is_none(), "the first batch does not fit");
    let slice = log.read(0, size - 1, i64::MAX, true).expect("read").expect("data");
    assert_eq!(slice.len, size, "KIP-74: the first batch whole");
    let slice = log.read(0, 0, i64::MAX, true).expect("read").expect("data");
    assert_eq!(slice.len, size);
    let slice = log.read(0, usize::MAX, i64::MAX, false).expect("read").expect("data");
    assert_eq!(slice.len, size * 10);
}

#[test]
fn read_stops_before_max_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    for _ in 0..40 {
        append(&mut log, &batch(2, 10, 1), 1);
    }
    for high_watermark in [2i64, 3, 10, 11, 30] {
        let slice = log.read(0, usize::MAX, high_watermark, true).expect("read").expect("data");
        let bytes = slice.read().expect("pread");
        let last = batches(&bytes).last().expect("a batch").expect("whole").0;
        assert!(last.last_offset() < high_watermark);
        assert!(last.last_offset() + 2 >= high_watermark, "stopped early at hw {high_watermark}");
    }
    assert!(log.read(4, usize::MAX, 4, true).expect("read").is_none());
    assert!(log.read(4, usize::MAX, 5, true).expect("read").is_none(), "batch 4..5 reaches the high watermark");
}

#[test]
fn read_at_the_log_end_is_empty_and_outside_the_log_is_out_of_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    assert!(log.read(0, 100, i64::MAX, true).expect("read").is_none());
    append(&mut log, &batch(3, 10, 1), 1);
    assert!(log.read(3, 100, i64::MAX, true).expect("read").is_none());
    let err = log.read(4, 100, i64::MAX, true).expect_err("past the end");
    assert!(matches!(err, LogError::OffsetOutOfRange { offset: 4, log_start_offset: 0, log_end_offset: 3 }));
    log.delete_records_before(2).expect("delete records");
    assert!(matches!(log.read(1, 100, i64::MAX, true), Err(LogError::OffsetOutOfRange { .. })));
}

#[test]
fn log_append_time_stamps_the_batch_and_reports_the_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    let mut bytes = batch(2, 10, 5);
    let info = log.append(&mut bytes, 0, TimestampType::LogAppendTime, 77_000).expect("append");
    assert_eq!((info.max_timestamp, info.log_append_time), (77_000, 77_000));
    let stored = read_all(&log);
    let header = BatchHeader::parse(&stored).expect("header");
    assert!(header.timestamp_type_log_append());
    assert_eq!(header.max_timestamp, 77_000);
    verify_crc(&stored).expect("crc recomputed");
    assert_eq!(log.offset_for_timestamp(77_000).expect("lookup"), Some((0, 77_000)));
    assert_eq!(log.max_timestamp_and_offset(), Some((77_000, 0)));
}

#[test]
fn append_refuses_bad_input_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &LogConfig::default());
    assert!(matches!(log.append(&mut [], 0, TimestampType::CreateTime, 1), Err(LogError::EmptyAppend)));
    let mut corrupt = batch(1, 10, 1);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert!(matches!(log.append(&mut corrupt, 0, TimestampType::CreateTime, 1), Err(LogError::InvalidBatch(_))));
    let mut two = batch(1, 10, 1);
    two.extend(batch(1, 10, 1));
    two.pop();
    assert!(matches!(log.append(&mut two, 0, TimestampType::CreateTime, 1), Err(LogError::InvalidBatch(_))));
    log.append(&mut batch(1, 10, 1), 5, TimestampType::CreateTime, 1).expect("append");
    let err = log.append(&mut batch(1, 10, 1), 4, TimestampType::CreateTime, 1).expect_err("older epoch");
    assert!(matches!(err, LogError::LeaderEpochRegression { epoch: 4, latest: 5 }));
    assert_eq!((log.log_end_offset(), log.size_bytes()), (1, batch(1, 10, 1).len() as u64));
}

#[test]
fn rolls_when_the_segment_would_exceed_segment_bytes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_bytes: 1000, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    let one = batch(1, 200, 1);
    for _ in 0..10 {
        append(&mut log, &one, 1);
    }
    let per_segment = 1000 / one.len();
    assert_eq!(log.segment_count(), 10_usize.div_ceil(per_segment));
    assert!(log.segments.values().all(|s| s.size() <= 1000));
    assert_eq!(read_all(&log).len(), one.len() * 10);
    // A batch bigger than a segment still goes in, alone.
    append(&mut log, &batch(1, 2000, 1), 1);
    assert!(log.active().size() > 1000);
}

#[test]
fn rolls_when_the_segment_is_older_than_segment_ms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_ms: 1000, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    append(&mut log, &batch(1, 10, 1), 10_000);
    append(&mut log, &batch(1, 10, 1), 11_000);
    assert_eq!(log.segment_count(), 1);
    append(&mut log, &batch(1, 10, 1), 11_001);
    assert_eq!(log.segment_count(), 2);
    assert_eq!(*log.segments.keys().next_back().expect("active"), 2);
    assert_eq!(log.recovery_point, 0, "a roll does not wait for the closed segment's fsync");
}

#[test]
fn rolls_when_an_index_is_full() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { segment_index_bytes: 24, index_interval_bytes: 0, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    for _ in 0..20 {
        append(&mut log, &batch(1, 10, 1), 1);
    }
    assert!(log.segment_count() > 3);
    for offset in 0..20 {
        let slice = log.read(offset, 1, i64::MAX, true).expect("read").expect("data");
        assert_eq!(BatchHeader::parse(&slice.read().expect("pread")).expect("header").base_offset, offset);
    }
}

#[test]
fn index_lookups_work_across_many_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    let mut starts = Vec::new();
    for i in 0..300 {
        let records = 1 + i % 4;
        starts.push(append(&mut log, &batch(records, 10 + i % 50, i as i64), 1).first_offset);
    }
    assert!(log.segment_count() > 5);
    for window in starts.windows(2) {
        for offset in window[0]..window[1] {
            let slice = log.read(offset, 1, i64::MAX, true).expect("read").expect("data");
            assert_eq!(BatchHeader::parse(&slice.read().expect("pread")).expect("header").base_offset, window[0]);
        }
    }
    assert_eq!(headers(&log).len(), 300);
}

#[test]
fn reopening_after_close_keeps_everything_and_appends_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    for i in 0..100 {
        append(&mut log, &batch(2, 40, i), 1);
    }
    let before = read_all(&log);
    let segments = log.segment_count();
    log.close().expect("close");
    let mut log = open(dir.path(), &small_config());
    assert_eq!((log.log_end_offset(), log.segment_count()), (200, segments));
    assert_eq!(read_all(&log), before);
    assert_eq!(log.max_timestamp_and_offset(), Some((99, 198)));
    assert_eq!(append(&mut log, &batch(1, 10, 1), 1).first_offset, 200);
    assert_eq!(log.offset_for_timestamp(50).expect("lookup"), Some((100, 50)));
}

#[test]
fn reopening_after_a_crash_keeps_every_written_batch() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    for i in 0..100 {
        append(&mut log, &batch(2, 40, i), 1);
    }
    let before = read_all(&log);
    drop(log);
    let mut log = open(dir.path(), &small_config());
    assert_eq!(log.log_end_offset(), 200);
    assert_eq!(read_all(&log), before);
    assert_eq!(append(&mut log, &batch(1, 10, 1), 1).first_offset, 200);
    assert_eq!(log.offset_for_timestamp(98).expect("lookup"), Some((196, 98)));
}

#[test]
fn timestamp_lookups_decode_compressed_batches_and_pick_the_first_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    let codecs = [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];
    for (i, codec) in codecs.into_iter().enumerate() {
        let base = 100 * i as i64;
        append(&mut log, &encode(&[base + 50, base + 10, base + 60, base + 60], 30, codec), 1);
    }
    for (i, _) in codecs.iter().enumerate() {
        let (base, first) = (100 * i as i64, 4 * i as i64);
        assert_eq!(log.offset_for_timestamp(base + 5).expect("lookup"), Some((first, base + 50)));
        assert_eq!(log.offset_for_timestamp(base + 51).expect("lookup"), Some((first + 2, base + 60)));
    }
    assert_eq!(log.offset_for_timestamp(461).expect("lookup"), None);
    assert_eq!(log.max_timestamp_and_offset(), Some((460, 18)));
}

#[test]
fn scan_headers_starts_at_the_batch_holding_the_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &small_config());
    for _ in 0..100 {
        append(&mut log, &batch(3, 30, 1), 1);
    }
    let mut bases = Vec::new();
    log.scan_headers(151, |h| bases.push(h.base_offset)).expect("scan");
    assert_eq!(bases, (150..300).step_by(3).collect::<Vec<_>>());
}

#[test]
fn flush_is_due_after_flush_messages_or_flush_ms() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = LogConfig { flush_messages: 5, flush_ms: 1000, ..LogConfig::default() };
    let mut log = open(dir.path(), &config);
    append(&mut log, &batch(3, 10, 1), 0);
    assert_eq!(log.recovery_point, 0);
    append(&mut log, &batch(3, 10, 1), 0);
    assert_eq!(log.recovery_point, 6, "flush.messages reached during the append");
    append(&mut log, &batch(1, 10, 1), 100);
    log.flush_if_due(1099).expect("flush");
    assert_eq!(log.recovery_point, 6);
    log.flush_if_due(1100).expect("flush");
    assert_eq!(log.recovery_point, 7, "flush.ms after the oldest unflushed append");
}

#[test]
fn a_file_slice_reads_exactly_its_range_and_a_range_past_the_end_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("data");
    // Several MiB (what a replica fetch reads), at an offset and of a length off page bounds.
    let content: Vec<u8> = (0..3 * 1024 * 1024 + 17).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(&path, &content).expect("write");
    let file = std::sync::Arc::new(std::fs::File::open(&path).expect("open"));
    let slice = super::super::FileSlice { file: file.clone(), position: 4097, len: 2 * 1024 * 1024 + 3 };
    let bytes = slice.read().expect("pread");
    assert_eq!(&bytes[..], &content[4097..4097 + 2 * 1024 * 1024 + 3]);
    let past = super::super::FileSlice { file, position: content.len() as u64 - 10, len: 20 };
    assert_eq!(past.read().expect_err("past the end").kind(), std::io::ErrorKind::UnexpectedEof);
}
