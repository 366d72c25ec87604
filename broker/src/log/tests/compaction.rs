//! Compaction: what a pass keeps and drops, and what stays unchanged (offsets, headers,
//! codecs, the log start and end offsets).

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

use super::super::codec::Codec;
use super::super::records::for_each_header;
use super::super::{CompactionConfig, CompactionStats, Log, LogConfig, TimestampType};
use super::keyed::{
    key_values, kv_batch, naive_compaction, raw_batch, stored_batches, stored_records, Appended, Producer, TestRecord,
    NO_PRODUCER,
};
use super::{append, encode_records, open};

const HOUR_MS: i64 = 60 * 60 * 1000;
/// Far enough ahead that `enforce_retention` rolls the active segment (`segment.ms` is 7 days).
const FAR_FUTURE_MS: i64 = 1 << 42;

/// Small segments, no retention, so that only compaction removes data.
pub(super) fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        segment_index_bytes: 1024,
        index_interval_bytes: 128,
        retention_ms: -1,
        ..LogConfig::default()
    }
}

/// Closes the active segment so that a pass may clean everything appended so far.
pub(super) fn roll(log: &mut Log) {
    log.enforce_retention(FAR_FUTURE_MS).expect("roll by segment.ms");
}

pub(super) fn forced(log: &mut Log, now_ms: i64, config: &CompactionConfig) -> CompactionStats {
    log.compact(now_ms, config, true).expect("compact")
}

/// Appends `records` as one batch, noting each record's offset in `appended`.
pub(super) fn append_records(
    log: &mut Log,
    appended: &mut Vec<Appended>,
    records: &[TestRecord],
    codec: Codec,
    producer: Producer,
) {
    let info = append(log, &raw_batch(records, codec, producer), 1);
    for (i, record) in records.iter().enumerate() {
        appended.push(Appended {
            offset: info.first_offset + i as i64,
            batch_max_timestamp: info.max_timestamp,
            record: record.clone(),
        });
    }
}

fn kv(key: &str, value: Option<&str>) -> (String, Option<String>) {
    (key.to_string(), value.map(str::to_string))
}

#[test]
fn compaction_keeps_exactly_the_last_value_of_each_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    let mut appended = Vec::new();
    for i in 0..300u32 {
        let records: Vec<TestRecord> = (0..1 + i % 4)
            .map(|j| {
                let key = format!("key-{}", (i * 7 + j * 3) % 23);
                TestRecord::new(Some(key.as_bytes()), Some(format!("value-{i}-{j}").as_bytes()), 1_000 + i64::from(i))
            })
            .collect();
        append_records(&mut log, &mut appended, &records, Codec::None, NO_PRODUCER);
    }
    roll(&mut log);
    let segments = log.segment_count();
    let log_end_offset = log.log_end_offset();
    let size_before = log.size_bytes();
    let config = CompactionConfig::default();

    let stats = forced(&mut log, 2_000, &config);

    let expected = naive_compaction(&appended, log_end_offset, 2_000, &config);
    assert_eq!(expected.len(), 23, "one record per key");
    let got: Vec<(i64, TestRecord)> = stored_records(&log)
        .into_iter()
        .map(|r| (r.offset, TestRecord::new(r.key.as_deref(), r.value.as_deref(), r.timestamp)))
        .collect();
    assert_eq!(got, expected);
    assert_eq!(stats.records_removed, (appended.len() - 23) as u64);
    assert_eq!((stats.bytes_before, stats.bytes_after), (size_before, log.size_bytes()));
    assert!(stats.segments_cleaned > 0 && log.size_bytes() < size_before / 4);
    assert_eq!((log.log_start_offset(), log.log_end_offset(), log.segment_count()), (0, log_end_offset, segments));
    // Every offset still reads: a fetch at a removed offset starts at the next record kept.
    for offset in 0..log_end_offset {
        if let Some(slice) = log.read(offset, 1, i64::MAX, true).expect("read") {
            let header = super::super::BatchHeader::parse(&slice.read().expect("pread")).expect("header");
            assert!(header.last_offset() >= offset);
        }
    }
    let next = append(&mut log, &kv_batch(&[("key-1", Some("after"))], 3_000), 1);
    assert_eq!(next.first_offset, log_end_offset, "appends continue at the same next offset");
}

#[test]
fn a_second_pass_finds_nothing_to_do_and_reopening_keeps_the_compacted_log() {
    for clean in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config());
        for i in 0..100 {
            append(&mut log, &kv_batch(&[("a", Some(&format!("a{i}"))), ("b", Some(&format!("b{i}")))], 5), 1);
        }
        roll(&mut log);
        forced(&mut log, 10, &CompactionConfig::default());
        let compacted = stored_records(&log);
        assert_eq!(key_values(&log), vec![kv("a", Some("a99")), kv("b", Some("b99"))]);
        let again = forced(&mut log, 10, &CompactionConfig::default());
        assert_eq!((again.segments_cleaned, again.records_removed), (0, 0));
        assert_eq!(again.bytes_before, again.bytes_after);
        let log_end_offset = log.log_end_offset();
        if clean {
            log.close().expect("close");
        } else {
            drop(log);
        }
        let mut log = open(dir.path(), &config());
        assert_eq!(stored_records(&log), compacted, "clean: {clean}");
        assert_eq!(log.log_end_offset(), log_end_offset);
        assert_eq!(append(&mut log, &kv_batch(&[("c", Some("c"))], 5), 1).first_offset, log_end_offset);
    }
}

#[test]
fn tombstones_stay_for_delete_retention_ms_then_go_with_their_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    append(&mut log, &kv_batch(&[("gone", Some("v1")), ("kept", Some("k1"))], 0), 1);
    append(&mut log, &kv_batch(&[("gone", Some("v2"))], HOUR_MS), 1);
    append(&mut log, &kv_batch(&[("gone", None), ("null-valued-forever", Some("x"))], 2 * HOUR_MS), 1);
    roll(&mut log);
    let config = CompactionConfig { delete_retention_ms: 10 * HOUR_MS, ..CompactionConfig::default() };

    forced(&mut log, 3 * HOUR_MS, &config);
    assert_eq!(
        key_values(&log),
        vec![kv("kept", Some("k1")), kv("gone", None), kv("null-valued-forever", Some("x"))],
        "the older values go at once, the tombstone stays while young"
    );
    forced(&mut log, 12 * HOUR_MS, &config);
    assert_eq!(key_values(&log).len(), 3, "still within delete.retention.ms of the tombstone's batch");
    let stats = forced(&mut log, 12 * HOUR_MS + 1, &config);
    assert_eq!(stats.records_removed, 1);
    assert_eq!(key_values(&log), vec![kv("kept", Some("k1")), kv("null-valued-forever", Some("x"))]);
    assert_eq!(log.log_end_offset(), 5);
}

#[test]
fn a_tombstone_is_kept_while_a_newer_record_of_its_key_is_not_yet_cleanable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    append(&mut log, &kv_batch(&[("k", None)], 0), 1);
    roll(&mut log);
    append(&mut log, &kv_batch(&[("k", Some("new"))], 0), 1);
    // The active segment counts when deciding which record is newest.
    forced(&mut log, 0, &CompactionConfig::default());
    assert_eq!(key_values(&log), vec![kv("k", Some("new"))]);
}

#[test]
fn min_compaction_lag_ms_protects_recent_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    let now = 100 * HOUR_MS;
    append(&mut log, &kv_batch(&[("k", Some("old"))], 0), 1);
    roll(&mut log);
    append(&mut log, &kv_batch(&[("k", Some("recent-1")), ("k", Some("recent-2"))], now - HOUR_MS), 1);
    roll(&mut log);
    append(&mut log, &kv_batch(&[("k", Some("newest"))], now), 1);
    let lagged = CompactionConfig { min_compaction_lag_ms: 2 * HOUR_MS, ..CompactionConfig::default() };

    forced(&mut log, now, &lagged);
    let values: Vec<_> = key_values(&log).into_iter().map(|(_, v)| v.unwrap_or_default()).collect();
    assert_eq!(values, ["recent-1", "recent-2", "newest"], "the old segment was cleaned, the recent one was not");

    forced(&mut log, now, &CompactionConfig::default());
    assert_eq!(key_values(&log), vec![kv("k", Some("newest"))], "without the lag everything closed is cleanable");
}

#[test]
fn the_dirty_ratio_gate_skips_a_pass_unless_forced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    for i in 0..60 {
        append(&mut log, &kv_batch(&[(&format!("unique-{i}"), Some("value-of-some-length"))], 1), 1);
    }
    roll(&mut log);
    let gate = CompactionConfig::default();
    let first = log.compact(1, &gate, false).expect("compact");
    assert!(first.bytes_before > 0, "a never-compacted log is all dirty");
    append(&mut log, &kv_batch(&[("unique-0", Some("again"))], 1), 1);
    roll(&mut log);
    let before = stored_records(&log);

    assert_eq!(log.compact(1, &gate, false).expect("compact"), CompactionStats::default());
    assert_eq!(stored_records(&log), before, "a small dirty part is left alone");

    let forced_stats = forced(&mut log, 1, &gate);
    assert_eq!(forced_stats.records_removed, 1, "unique-0's first value");
    for i in 0..60 {
        append(&mut log, &kv_batch(&[(&format!("unique-{i}"), Some("a third value, longer than the first"))], 1), 1);
    }
    roll(&mut log);
    let stats = log.compact(1, &gate, false).expect("compact");
    assert_eq!(stats.records_removed, 60, "once half is dirty the pass runs");
}

fn encode_with(compression: Compression, records: &[(&str, &str)], first_timestamp: i64) -> Vec<u8> {
    let records = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| {
            let key = Bytes::copy_from_slice(key.as_bytes());
            let value = Bytes::copy_from_slice(value.repeat(20).as_bytes());
            (Some(key), Some(value), first_timestamp + i as i64)
        })
        .collect();
    encode_records(records, compression)
}

#[test]
fn compressed_batches_are_compacted_and_stay_compressed_with_their_codec() {
    let codecs = [(Compression::Gzip, 1), (Compression::Snappy, 2), (Compression::Lz4, 3), (Compression::Zstd, 4)];
    for (compression, codec_id) in codecs {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config());
        for round in 0..5 {
            let batch = encode_with(compression, &[("a", "a-old"), ("b", "b-old"), ("c", "c-old")], round * 10);
            append(&mut log, &batch, 1);
        }
        append(&mut log, &encode_with(compression, &[("a", "a-new"), ("x", "x-new")], 100), 1);
        roll(&mut log);
        forced(&mut log, 200, &CompactionConfig::default());

        let batches = stored_batches(&log);
        let kept: Vec<(i64, i16, i32)> =
            batches.iter().map(|(h, _)| (h.base_offset, h.compression_codec(), h.record_count)).collect();
        assert_eq!(kept, vec![(12, codec_id, 2), (15, codec_id, 2)], "{compression:?}");
        let values: Vec<_> = key_values(&log).into_iter().map(|(k, v)| (k, v.map(|v| v[..5].to_string()))).collect();
        let want = [kv("b", Some("b-old")), kv("c", Some("c-old")), kv("a", Some("a-new")), kv("x", Some("x-new"))];
        assert_eq!(values, want, "{compression:?}");
        // A third-party decoder reads the rewritten batches too, timestamps included.
        let mut bytes = Bytes::from(super::read_all(&log));
        let decoded = RecordBatchDecoder::decode_all(&mut bytes).expect("kafka-protocol decodes the compacted log");
        let records: Vec<(i64, i64)> =
            decoded.iter().flat_map(|s| s.records.iter().map(|r| (r.offset, r.timestamp))).collect();
        assert_eq!(records, vec![(13, 41), (14, 42), (15, 100), (16, 101)], "{compression:?}");
    }
}

#[test]
fn duplicate_header_keys_survive_compaction_byte_for_byte() {
    for codec in [Codec::None, Codec::Zstd] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config());
        let mut kept = TestRecord::new(Some(b"k"), Some(b"kept"), 7);
        kept.headers =
            vec![(b"h".to_vec(), Some(b"1".to_vec())), (b"h".to_vec(), Some(b"2".to_vec())), (b"h".to_vec(), None)];
        let mut superseded = TestRecord::new(Some(b"k"), Some(b"old"), 5);
        superseded.headers = vec![(b"h".to_vec(), Some(b"0".to_vec()))];
        append(&mut log, &raw_batch(&[superseded, kept.clone()], codec, NO_PRODUCER), 1);
        roll(&mut log);
        assert_eq!(forced(&mut log, 10, &CompactionConfig::default()).records_removed, 1);

        let stored = stored_records(&log);
        assert_eq!(stored.len(), 1);
        assert_eq!((stored[0].offset, stored[0].timestamp), (1, 7));
        assert_eq!(stored[0].headers, kept.encoded_headers(), "{codec:?}");
        let mut headers = Vec::new();
        for_each_header(&stored[0].headers, |k, v| headers.push((k.to_vec(), v.map(<[u8]>::to_vec)))).expect("headers");
        assert_eq!(headers, kept.headers);
    }
}

#[test]
fn a_producers_last_batch_stays_empty_and_its_other_emptied_batches_go() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    let record = |v: &[u8]| [TestRecord::new(Some(b"k"), Some(v), 1)];
    let mut appended = Vec::new();
    append_records(&mut log, &mut appended, &record(b"p0"), Codec::Gzip, (5, 0, 0));
    append_records(&mut log, &mut appended, &record(b"p1"), Codec::Gzip, (5, 0, 1));
    append_records(&mut log, &mut appended, &record(b"other"), Codec::None, (6, 0, 0));
    append_records(&mut log, &mut appended, &[TestRecord::new(None, Some(b"no key"), 1)], Codec::None, NO_PRODUCER);
    append_records(&mut log, &mut appended, &record(b"plain"), Codec::None, NO_PRODUCER);
    roll(&mut log);
    forced(&mut log, 1, &CompactionConfig::default());

    let batches = stored_batches(&log);
    let summary: Vec<(i64, i64, i32, i32, i16)> = batches
        .iter()
        .map(|(h, _)| (h.base_offset, h.producer_id, h.base_sequence, h.record_count, h.compression_codec()))
        .collect();
    assert_eq!(summary, vec![(1, 5, 1, 0, 0), (2, 6, 0, 0, 0), (3, -1, -1, 1, 0), (4, -1, -1, 1, 0)]);
    let mut producers = Vec::new();
    log.scan_headers(0, |h| producers.push((h.producer_id, h.last_sequence(), h.last_offset()))).expect("scan");
    assert_eq!(&producers[..2], &[(5, 1, 1), (6, 0, 2)], "producer state can still be rebuilt");
}

#[test]
fn records_without_a_key_are_never_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    let nulls = [TestRecord::new(None, Some(b"a"), 1), TestRecord::new(None, None, 1)];
    append(&mut log, &raw_batch(&nulls, Codec::None, NO_PRODUCER), 1);
    append(&mut log, &raw_batch(&nulls, Codec::None, NO_PRODUCER), 1);
    roll(&mut log);
    assert_eq!(forced(&mut log, i64::MAX / 2, &CompactionConfig::default()).records_removed, 0);
    assert_eq!(stored_records(&log).len(), 4);
}

#[test]
fn timestamp_lookups_skip_the_records_compaction_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path(), &config());
    let mut batch = kv_batch(&[("a", Some("1")), ("b", Some("1"))], 10);
    log.append(&mut batch, 0, TimestampType::LogAppendTime, 500).expect("append");
    let mut batch = kv_batch(&[("a", Some("2"))], 20);
    log.append(&mut batch, 0, TimestampType::CreateTime, 1).expect("append");
    roll(&mut log);
    forced(&mut log, 600, &CompactionConfig::default());
    assert_eq!(log.offset_for_timestamp(0).expect("lookup"), Some((1, 500)), "offset 0 is gone; b at 1 remains");
    assert_eq!(log.offset_for_timestamp(501).expect("lookup"), None);
    assert_eq!(log.max_timestamp_and_offset(), Some((500, 1)));
}
